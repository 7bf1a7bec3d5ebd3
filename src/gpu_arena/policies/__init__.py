"""Policy registry: ``make_policy(name, **params)`` returns an object with ``act(observation)``.

Any policy can sit in any seat. Parameters a policy does not take are ignored, so a world's
opponent parameters (acceptance margin, risk, ...) can be passed to every policy alike.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ..core.policy import NoNegotiationPolicy, Policy, RandomPolicy, WaitPolicy
from .archetypes import ARCHETYPES
from .baselines import AlwaysAcceptPolicy, GreedyHoarderPolicy, OraclePolicy, RuleExpertPolicy

_REGISTRY: dict[str, Callable[..., Policy]] = {
    "wait": WaitPolicy,
    "no_negotiation": NoNegotiationPolicy,
    "random_valid": RandomPolicy,
    "greedy_hoarder": GreedyHoarderPolicy,
    "always_accept": AlwaysAcceptPolicy,
    "rule_expert": RuleExpertPolicy,
    "oracle": OraclePolicy,
    **ARCHETYPES,
}
BASELINES = ("random_valid", "greedy_hoarder", "always_accept", "no_negotiation", "rule_expert", "oracle")


def register_policy(name: str, factory: Callable[..., Policy]) -> None:
    """Add a policy under ``name`` (for plug-ins and tests); refuses to shadow an existing one."""
    if name in _REGISTRY:
        raise ValueError(f"policy {name!r} is already registered")
    _REGISTRY[name] = factory


def policy_names() -> list[str]:
    return sorted(_REGISTRY)


def make_policy(name: str, **params: Any) -> Policy:
    factory = _REGISTRY.get(name)
    if factory is None:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(policy_names())}")
    try:
        accepted = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without signatures
        return factory(**params)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values()):
        return factory(**params)
    return factory(**{k: v for k, v in params.items() if k in accepted})


__all__ = ["ARCHETYPES", "BASELINES", "Policy", "make_policy", "policy_names", "register_policy"]
