"""The rollout engine: a model against the live environment, many episodes at once.

:class:`RolloutEngine` plays worlds with a generation backend (:mod:`.backends`: transformers,
vLLM, an OpenAI-compatible server) while environment workers (:mod:`.workers`: inline, processes
or Ray actors) hold the episodes: stepping, opponents, lookahead forks, incremental prompts
(:mod:`.chat`), action grammars and the reading of replies all run there (:mod:`.session`).
"""

from .backends import Backend, GenerationStats, OpenAIBackend, TransformersBackend, VLLMBackend
from .chat import ChatTokens, incremental, probe_chat
from .engine import RolloutEngine, RolloutStats
from .session import Answer, Reply, Rollout, Session, SessionConfig, Turn, World
from .workers import BACKENDS, EnvWorker, WorkerPool

__all__ = [
           "BACKENDS",
           "Answer",
           "Backend",
           "ChatTokens",
           "EnvWorker",
           "GenerationStats",
           "OpenAIBackend",
           "Reply",
           "Rollout",
           "RolloutEngine",
           "RolloutStats",
           "Session",
           "SessionConfig",
           "TransformersBackend",
           "Turn",
           "VLLMBackend",
           "WorkerPool",
           "World",
           "incremental",
           "probe_chat",
]
