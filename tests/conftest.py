import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, os.path.dirname(__file__))

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
# CI: the same examples on every run, so a red build is reproducible from its log
settings.register_profile(
    "ci", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True, derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")


@pytest.fixture(scope="module")
def tiny_sft(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model after a few SFT steps on 8 teacher episodes, one per test module: it writes tool
    calls, some readable, some not."""
    from training_helpers import tiny_sft_checkpoint

    return tiny_sft_checkpoint(tmp_path_factory.mktemp("tiny_sft"))
