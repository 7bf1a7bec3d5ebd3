"""Policy registry: ``make_policy(name, **params)`` returns an object with ``act(observation)``.

Any policy can sit in any seat. Parameters a policy does not take are ignored, so a world's
opponent parameters (acceptance margin, risk, ...) can be passed to every policy alike.

Families of names with a prefix (``llm:openai:<model>@<url>``) resolve through a factory that
takes the rest of the name: registered with :func:`register_policy_family`, or found through the
``gpu_arena.policy_families`` entry point group (how ``gpu_arena.llm`` plugs in without this
package importing it: policies depend on the core only).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import lru_cache
from importlib.metadata import entry_points
from typing import Any

from ..core.opponents import DEFAULT_OPPONENTS, SELF_PLAY, OpponentsError, OpponentsSpec
from ..core.policy import NoNegotiationPolicy, Policy, RandomPolicy, WaitPolicy
from ..core.types import World
from ..core.worldgen import world_seed
from .ablation import without
from .archetypes import ARCHETYPES
from .baselines import AlwaysAcceptPolicy, GreedyHoarderPolicy, OraclePolicy, RuleExpertPolicy
from .expert import ShortFormExpertPolicy

_REGISTRY: dict[str, Callable[..., Policy]] = {
    "wait": WaitPolicy,
    "no_negotiation": NoNegotiationPolicy,
    "random_valid": RandomPolicy,
    "greedy_hoarder": GreedyHoarderPolicy,
    "always_accept": AlwaysAcceptPolicy,
    "rule_expert": RuleExpertPolicy,
    "rule_expert_short": ShortFormExpertPolicy,
    "oracle": OraclePolicy,
    **ARCHETYPES,
}
BASELINES = ("random_valid", "greedy_hoarder", "always_accept", "no_negotiation", "rule_expert", "oracle")


# what register_policy / register_policy_family added in this process: a process pool forked from
# it inherits them, a Ray worker (a fresh process) gets them through plugins()/install_plugins()
_PLUGINS: dict[str, Callable[..., Policy]] = {}
_PLUGIN_FAMILIES: dict[str, Callable[..., Policy]] = {}


def register_policy(name: str, factory: Callable[..., Policy]) -> None:
    """Add a policy under ``name`` (for plug-ins and tests); refuses to shadow an existing one."""
    if name in _REGISTRY:
        raise ValueError(f"policy {name!r} is already registered")
    _REGISTRY[name] = _PLUGINS[name] = factory


FAMILY_ENTRY_POINTS = "gpu_arena.policy_families"
_FAMILIES: dict[str, Callable[..., Policy]] = {"without": without}  # built in: policies.ablation


def register_policy_family(prefix: str, factory: Callable[..., Policy]) -> None:
    """Resolve every name ``<prefix>:<rest>`` with ``factory(rest, **params)``."""
    if prefix in _FAMILIES:
        raise ValueError(f"policy family {prefix!r} is already registered")
    _FAMILIES[prefix] = _PLUGIN_FAMILIES[prefix] = factory


def plugins() -> tuple[dict[str, Callable[..., Policy]], dict[str, Callable[..., Policy]]]:
    """The policies and families registered at run time in this process (not the built-in ones nor
    those found through entry points), for :func:`install_plugins` in another process."""
    return dict(_PLUGINS), dict(_PLUGIN_FAMILIES)


def install_plugins(policies: dict[str, Callable[..., Policy]], families: dict[str, Callable[..., Policy]]) -> None:
    """Register what :func:`plugins` returned in another process; names already present are kept
    (a worker process may run many jobs)."""
    for name, factory in policies.items():
        if name not in _REGISTRY:
            _REGISTRY[name] = _PLUGINS[name] = factory
    for prefix, factory in families.items():
        if prefix not in _FAMILIES:
            _FAMILIES[prefix] = _PLUGIN_FAMILIES[prefix] = factory


def _family(prefix: str) -> Callable[..., Policy] | None:
    if prefix not in _FAMILIES:
        for ep in entry_points(group=FAMILY_ENTRY_POINTS, name=prefix):
            _FAMILIES[prefix] = ep.load()
            break
    return _FAMILIES.get(prefix)


def policy_names() -> list[str]:
    return sorted(_REGISTRY)


def policy_families() -> list[str]:
    """Prefixes of name families (``llm`` for ``llm:...``), registered or installed as entry points."""
    return sorted({ep.name for ep in entry_points(group=FAMILY_ENTRY_POINTS)} | set(_FAMILIES))


def make_policy(name: str, **params: Any) -> Policy:
    factory = _REGISTRY.get(name)
    if factory is None and ":" in name:
        prefix, _, rest = name.partition(":")
        family = _family(prefix)
        if family is not None:
            return _build(family, params, rest)
    if factory is None:
        families = "".join(f", {p}:..." for p in policy_families())
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(policy_names())}{families}")
    return _build(factory, params)


def make_seat_policy(world: World, lab_id: str, name: str = DEFAULT_OPPONENTS) -> Policy:
    """The policy ``name`` for seat ``lab_id`` of ``world``: ``archetypes`` is the seat's own
    archetype; every policy gets the seat's world parameters and a seed drawn from the world's
    (the same seat of the same world always plays the same way)."""
    lab = world.labs[lab_id]
    chosen = lab.archetype if name == DEFAULT_OPPONENTS else name
    return make_policy(chosen, seed=world_seed(f"policy:{lab_id}", world.split, world.seed), **lab.params)


@lru_cache(maxsize=256)
def _accepted(factory: Callable[..., Policy]) -> frozenset[str] | None:
    """The keyword parameters ``factory`` takes (None: any). Cached: ``inspect.signature`` costs more
    than building the policy, and every reset builds one per opponent seat."""
    try:
        accepted = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without signatures
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values()):
        return None
    return frozenset(accepted)


def scripted_policies(spec: str) -> tuple[str, ...]:
    """The scripted policies a comma-separated ``spec`` names (``rule_expert_short,without:buy``),
    each checked by building it: registered names and the built-in ``without:`` family, not a
    family that loads a model. Raises :class:`ValueError` on an empty entry, a name given twice or
    one that does not build."""
    names = tuple(part.strip() for part in spec.split(","))
    if not spec.strip() or any(not n for n in names):
        raise ValueError(f"{spec!r} names an empty policy; expected names separated by commas")
    if len(set(names)) < len(names):
        raise ValueError(f"{spec!r} names a policy twice")
    for name in names:
        if name not in _REGISTRY and name.partition(":")[0] != "without":
            raise ValueError(f"unknown scripted policy {name!r}; expected one of {', '.join(policy_names())} "
                             f"or without:<step>[:<policy>]")
        make_policy(name)  # a bad step or base is refused here, not in a worker mid-run
    return names


def _build(factory: Callable[..., Policy], params: dict[str, Any], *args: Any) -> Policy:
    try:
        accepted = _accepted(factory)
    except TypeError:  # pragma: no cover - an unhashable factory: inspect it every time
        accepted = _accepted.__wrapped__(factory)
    if accepted is None:
        return factory(*args, **params)
    return factory(*args, **{k: v for k, v in params.items() if k in accepted})


__all__ = ["ARCHETYPES", "BASELINES", "DEFAULT_OPPONENTS", "FAMILY_ENTRY_POINTS", "SELF_PLAY",
           "OpponentsError", "OpponentsSpec", "Policy", "install_plugins", "make_policy", "make_seat_policy", "plugins",
           "policy_families", "policy_names", "register_policy", "register_policy_family",
           "scripted_policies"]
