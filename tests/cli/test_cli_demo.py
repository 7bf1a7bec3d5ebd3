"""``gpu-arena demo`` plays an episode and shows every round of the controlled seat."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from gpu_arena.cli import app
from gpu_arena.cli.console import console
from gpu_arena.core.policy import PolicyBase
from gpu_arena.core.types import Action, RejectedAction
from gpu_arena.policies import register_policy

ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


class _Garbled(PolicyBase):
    """Answers unreadably on its first turn (as a model's broken tool call is), then waits."""

    name = "garbled_then_wait"
    uses_aids = False

    def __init__(self) -> None:
        self.turns = 0

    def act(self, observation: Any) -> Action | RejectedAction:
        self.turns += 1
        return RejectedAction("format_invalid_json", "not JSON") if self.turns == 1 else Action("wait")


register_policy(_Garbled.name, lambda seed=0, **_: _Garbled())


def test_demo_names_a_refused_answer_by_its_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "width", 200)  # rich sized the console once, at import: wide enough for the row
    result = CliRunner().invoke(app, ["demo", "--task", "single_trade", "--seed", "3", "--policy", _Garbled.name],
                                env=ENV)
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if "│" in line]
    assert any("[format_invalid_json]" in r and "format_invalid_json" in r.split("│")[3] for r in rows), result.output
    assert any("│ wait" in r.replace("  ", " ") or " wait " in r for r in rows), result.output
    assert "return" in result.output and "welfare" in result.output
