"""Import OpenEnv without what GPU Arena never uses: its Gradio web interface (below) and, for a
process that only steps the environment, its server package (:func:`import_contract`).

``openenv.core.env_server`` (openenv 0.10) imports its ``web_interface`` module, and with it
Gradio, pandas and their dependencies, as soon as the package is imported, because Gradio is
installed (it is one of openenv's required dependencies). OpenEnv itself treats that module as
optional: its package ``__init__`` catches ``ModuleNotFoundError`` and leaves the web interface
out. GPU Arena serves its own dashboard, so every process that imports the environment (the
server, each evaluation worker, a trainer) would pay more than two seconds of start-up and about
100 MB of resident memory for a UI it never starts (decision 0019 has the measurements).

Importing this module marks that one module as absent (``sys.modules[name] = None``, which Python
answers with ``ModuleNotFoundError``), so OpenEnv takes its own no-web-interface path. Nothing
else of OpenEnv changes. It does nothing when OpenEnv's server package is already imported, or
when OpenEnv's web interface is asked for with its own switch ``ENABLE_WEB_INTERFACE=true``
(``create_server_app`` checks the switch again, so it may also be set after this import).
"""

from __future__ import annotations

import os
import sys

WEB_INTERFACE = "openenv.core.env_server.web_interface"


def web_interface_wanted() -> bool:
    """OpenEnv's own switch for its Gradio UI (read the same way ``create_app`` reads it)."""
    return os.getenv("ENABLE_WEB_INTERFACE", "false").lower() in ("true", "1", "yes")


def skip_web_interface() -> bool:
    """Keep OpenEnv from importing Gradio in this process; True if it was kept out."""
    if web_interface_wanted() or "openenv.core.env_server" in sys.modules:
        return False
    if WEB_INTERFACE not in sys.modules:
        sys.modules[WEB_INTERFACE] = None  # type: ignore[assignment]  # Python's own "absent" marker
    return sys.modules[WEB_INTERFACE] is None


def allow_web_interface_if_wanted() -> None:
    """Undo :func:`skip_web_interface` when OpenEnv's switch was turned on after this module ran.

    ``create_app`` reads ``ENABLE_WEB_INTERFACE`` each time it is called and then imports the web
    interface itself; call this just before it, so a switch set after ``import gpu_arena`` still
    gets OpenEnv's UI (its import then happens as usual, Gradio included).
    """
    if web_interface_wanted() and WEB_INTERFACE in sys.modules and sys.modules[WEB_INTERFACE] is None:
        del sys.modules[WEB_INTERFACE]


skip_web_interface()


# OpenEnv's environment contract: the two modules an environment needs (its base class and the wire
# types), which import nothing heavier than pydantic
CONTRACT = ("openenv.core.env_server.types", "openenv.core.env_server.interfaces")
_PACKAGES = ("openenv.core", "openenv.core.env_server")


def import_contract() -> bool:
    """Import OpenEnv's environment contract without OpenEnv's server; True if it did.

    ``openenv.core`` imports ``openenv.core.env_server``, whose ``__init__`` imports OpenEnv's HTTP
    server and with it FastAPI, FastMCP, MCP and beartype: about 1,000 modules, 70,000 objects that
    live as long as the process (and that every full garbage collection walks again), and 0.6 s,
    for a process that only steps an environment in-process (a trainer, an evaluation worker).

    Python imports a submodule without running its package's ``__init__`` when the package is
    already in ``sys.modules``. So the two packages stand in as empty modules whose ``__path__`` is
    the real folder while the contract's two modules are imported, and are removed right after. A
    later ``import openenv.core`` (the server, the client) runs the real ``__init__`` files, which
    find the two modules imported and reuse them: one ``Environment``, one ``Observation``. Nothing
    happens when either package is already imported or ``GPU_ARENA_LEAN_IMPORT=0``; if the import
    fails the stand-ins are removed and the caller's ordinary import runs (decision 0019).
    """
    if os.getenv("GPU_ARENA_LEAN_IMPORT", "1").lower() in ("0", "false", "no") or \
            any(name in sys.modules for name in (*_PACKAGES, *CONTRACT)):
        return False
    import importlib
    import types

    import openenv  # its own __init__ imports nothing until asked (lazy attributes)

    root = os.path.join(openenv.__path__[0], "core")
    standins = {}
    for name, path in zip(_PACKAGES, (root, os.path.join(root, "env_server")), strict=True):
        standin = types.ModuleType(name)
        standin.__path__ = [path]
        standin.__package__ = name
        standins[name] = sys.modules[name] = standin
    try:
        for name in CONTRACT:
            importlib.import_module(name)
        return True
    except Exception:
        for name in CONTRACT:
            sys.modules.pop(name, None)  # half-imported under a stand-in: the ordinary import redoes it
        return False
    finally:
        for name, standin in standins.items():
            if sys.modules.get(name) is standin:
                del sys.modules[name]
