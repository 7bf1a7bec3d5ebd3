"""Import OpenEnv without its Gradio web interface, which GPU Arena never uses.

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
(``create_arena_app`` checks the switch again, so it may also be set after this import).
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
