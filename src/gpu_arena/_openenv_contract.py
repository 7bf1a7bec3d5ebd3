"""OpenEnv's environment contract (the ``Environment`` base class and the wire types), imported
without OpenEnv's server package where this process has not imported it already
(:func:`gpu_arena._lean_openenv.import_contract`). The environment and the wire models take
them from here."""

from __future__ import annotations

from ._lean_openenv import import_contract

import_contract()

from openenv.core.env_server.interfaces import Environment  # noqa: E402
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State  # noqa: E402

__all__ = ["Action", "Environment", "EnvironmentMetadata", "Observation", "State"]
