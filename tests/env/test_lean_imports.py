"""What importing the environment and the server costs: no Gradio UI, no scipy.stats until needed,
and no OpenEnv server (FastAPI, FastMCP, ...) for a process that only steps the environment.

Each check runs in a fresh interpreter, since this test process has imported everything already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = """
import json, sys
{setup}
print(json.dumps({{m: m in sys.modules for m in ("gradio", "scipy.stats", "openenv.core.env_server", "fastapi",
                                                 "openenv.core.env_server.interfaces")}}))
"""


def loaded(setup: str, **env: str) -> dict[str, bool]:
    out = subprocess.run([sys.executable, "-c", PROBE.format(setup=setup)], capture_output=True, text=True,
                         env={**os.environ, "ENABLE_WEB_INTERFACE": "false", **env}, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_environment_and_server_skip_openenvs_gradio_ui() -> None:
    mods = loaded("from gpu_arena import GpuArenaEnv\nfrom gpu_arena.dashboard.app import create_arena_app\n"
                  "create_arena_app()\nGpuArenaEnv().reset(seed=1)")
    assert mods == {"gradio": False, "scipy.stats": False, "openenv.core.env_server": True, "fastapi": True,
                    "openenv.core.env_server.interfaces": True}


def test_the_environment_takes_openenvs_contract_without_its_server() -> None:
    mods = loaded("from gpu_arena import GpuArenaEnv\nGpuArenaEnv().reset(seed=1)")
    assert mods == {"gradio": False, "scipy.stats": False, "openenv.core.env_server": False, "fastapi": False,
                    "openenv.core.env_server.interfaces": True}


def test_the_server_imported_later_shares_the_contracts_classes() -> None:
    mods = loaded(
        "from gpu_arena import GpuArenaEnv, ArenaObservation\n"
        "from gpu_arena.dashboard.app import create_arena_app\ncreate_arena_app()\n"
        "import openenv.core.env_server as server\n"
        "assert issubclass(GpuArenaEnv, server.Environment) and issubclass(ArenaObservation, server.Observation)\n"
        "assert server.create_app is not None and sys.modules['openenv.core'].env_server is server")
    assert mods["openenv.core.env_server"] is True and mods["fastapi"] is True


def test_the_lean_import_can_be_turned_off() -> None:
    assert loaded("import gpu_arena.env", GPU_ARENA_LEAN_IMPORT="0")["openenv.core.env_server"] is True


def test_openenvs_own_switch_keeps_its_web_interface() -> None:
    assert loaded("from gpu_arena.dashboard.app import create_arena_app", ENABLE_WEB_INTERFACE="true")["gradio"] is True


def test_openenv_imported_first_is_left_alone() -> None:
    mods = loaded("import openenv.core.env_server\nimport gpu_arena.env\n"
                  "assert sys.modules['openenv.core.env_server.web_interface'] is not None")
    assert mods["gradio"] is True


def test_statistics_still_load_scipy_when_used() -> None:
    mods = loaded("from gpu_arena.evaluation.stats import bootstrap_ci\nassert bootstrap_ci([0.0, 1.0, 2.0])[0] < 1.0")
    assert mods["scipy.stats"] is True


def test_openenvs_switch_turned_on_after_import_still_gets_its_ui() -> None:
    mods = loaded("import os\nfrom gpu_arena.dashboard.app import create_arena_app\n"
                  "os.environ['ENABLE_WEB_INTERFACE'] = 'true'\n"
                  "app = create_arena_app()\nassert any(getattr(r, 'path', '') == '/web' for r in app.routes)")
    assert mods["gradio"] is True
