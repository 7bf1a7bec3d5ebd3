"""The conformance checks users run on their own policies (``gpu_arena.testing``): every policy the
project ships passes them, and each check fails on a policy that breaks its contract."""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

import pytest

from gpu_arena.core.policy import PolicyBase
from gpu_arena.core.types import Action
from gpu_arena.policies import ARCHETYPES, BASELINES, make_policy
from gpu_arena.testing import (
    ConformanceError,
    check_determinism,
    check_policy_contract,
    check_reward_telescopes,
    check_view_privacy,
    play,
)


@pytest.mark.parametrize("name", [*BASELINES, *sorted(ARCHETYPES)])
def test_every_shipped_policy_keeps_the_policy_contract(name: str) -> None:
    tasks = ("single_trade", "coalition_market") if name in ("rule_expert", "oracle") else ("market_round",)
    check_policy_contract(partial(make_policy, name), tasks=tasks, seeds=(3,))


@pytest.mark.parametrize("task", ["single_trade", "market_round", "coalition_market"])
def test_archetype_episodes_telescope_stay_private_and_replay(task: str) -> None:
    episode = play(task, "holdout", 5, lambda seed: make_policy("random_valid", seed=seed),
                   every_round=lambda ep, _rewards: check_view_privacy(ep))
    check_reward_telescopes(episode)
    check_determinism(task, "holdout", 5, {"lab_0": partial(make_policy, "rule_expert"),
                                           "lab_1": partial(make_policy, "selfish")})


class _Raises(PolicyBase):
    def act(self, observation: Any) -> Any:
        raise KeyError("boom")


class _Mutates(PolicyBase):
    def act(self, observation: Any) -> Any:
        object.__setattr__(observation, "round_index", -1)  # around the frozen view's guard
        return Action("wait")


class _Unseeded(PolicyBase):
    calls = 0

    def act(self, observation: Any) -> Any:  # a shared counter: the second policy plays differently
        type(self).calls += 1
        return Action("finish") if type(self).calls % 7 == 0 else Action("wait")


class _Garbage(PolicyBase):
    def act(self, observation: Any) -> Any:
        return 42


@pytest.mark.parametrize(("policy", "message"), [
    (_Raises, "act raised KeyError"), (_Mutates, "changed the view"), (_Unseeded, "played differently"),
    (_Garbage, "not an action")])
def test_the_policy_contract_catches_broken_policies(policy: type[PolicyBase], message: str) -> None:
    with pytest.raises(ConformanceError, match=message):
        check_policy_contract(lambda seed: policy(), tasks=("market_round",), seeds=(0,))


def test_the_reward_and_privacy_checks_catch_a_broken_episode(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpu_arena.testing
    from gpu_arena.core.observe import observe

    episode = play("single_trade", "train", 1, lambda seed: make_policy("rule_expert", seed=seed))
    episode.returns["lab_0"] += 0.01  # a reward paid that the potential does not explain
    with pytest.raises(ConformanceError, match="lab_0: the rewards sum"):
        check_reward_telescopes(episode)

    def leaky(world: Any, lab_id: str, **kw: Any) -> Any:  # a view that shows the total of every lab's values
        view = observe(world, lab_id, **kw)
        return dataclasses.replace(view, reward_scale=sum(j.value for j in world.jobs.values()))

    check_view_privacy(episode)
    monkeypatch.setattr(gpu_arena.testing, "observe", leaky)
    with pytest.raises(ConformanceError, match="depends on other labs' private job values"):
        check_view_privacy(episode)
