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


class _ArrayPayment(PolicyBase):
    def act(self, observation: Any) -> Any:
        import numpy as np

        return Action("send_offer", target_lab_id="lab_1", payment=np.array([1.0, 2.0]))


class _ArrayBlockIds(PolicyBase):
    def act(self, observation: Any) -> Any:
        import numpy as np

        return Action("release_capacity", block_ids=(np.array([1, 2]),))


@pytest.mark.parametrize("policy", [_ArrayPayment, _ArrayBlockIds])
def test_the_policy_contract_reports_an_unreadable_value_instead_of_crashing(policy: type[PolicyBase]) -> None:
    with pytest.raises(ConformanceError, match="holding a value the arena cannot read"):
        check_policy_contract(lambda seed: policy(), tasks=("single_trade",), seeds=(0,))
    # the arena plays it as an invalid move, the same in every play
    check_determinism("single_trade", "train", 0, lambda seed: policy())


class _NaNs(PolicyBase):
    """Deterministic, with a NaN in each float field the rules then refuse."""

    def __init__(self) -> None:
        self.turn = 0

    def act(self, observation: Any) -> Any:
        self.turn += 1
        nan = float("nan")
        return [Action("send_offer", target_lab_id="lab_1", payment=nan),
                Action("send_offer", target_lab_id="lab_1", payment=1.0, expires_in=nan),
                Action("form_coalition", job_id="j_0_0", shares={"lab_0": nan, "lab_1": 0.5})][self.turn % 3]


def test_nans_in_the_same_place_are_the_same_move() -> None:
    check_policy_contract(lambda seed: _NaNs(), tasks=("single_trade",), seeds=(0, 1))
    check_determinism("single_trade", "train", 0, lambda seed: _NaNs())


class _Answers(PolicyBase):
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def act(self, observation: Any) -> Any:
        return self.answer


@pytest.mark.parametrize("answer", [{"action_type": "finish"}, "arena_action"])
def test_play_reads_answers_as_the_environment_does(answer: Any) -> None:
    from gpu_arena.models import ArenaAction

    if answer == "arena_action":
        answer = ArenaAction(action_type="finish")
    check_policy_contract(lambda seed: _Answers(answer), tasks=("single_trade",), seeds=(0,))
    episode = play("single_trade", "train", 0, lambda seed: _Answers(answer))
    first = episode.transcript[0]
    assert all(a == {"action_type": "finish"} for a in first["actions"].values()), first["actions"]
    check_determinism("single_trade", "train", 0, lambda seed: _Answers(answer))


def test_play_makes_a_raising_policy_lose_its_move_as_the_arena_does() -> None:
    episode = play("single_trade", "train", 0, lambda seed: _Raises())
    moves = [a for r in episode.transcript for a in r["actions"].values()]
    assert moves and all(a["rejected"] == "policy_error" and "KeyError" in a["message"] for a in moves)
    check_determinism("single_trade", "train", 0, lambda seed: _Raises())
    with pytest.raises(ConformanceError, match=r"_Raises\.act raised KeyError"):  # the contract reports it
        check_policy_contract(lambda seed: _Raises(), tasks=("single_trade",), seeds=(0,))


def test_empty_tasks_or_seeds_check_nothing_and_say_so() -> None:
    factory = partial(make_policy, "wait")
    with pytest.raises(ValueError, match="at least one task"):
        check_policy_contract(factory, tasks=(), seeds=(0,))
    with pytest.raises(ValueError, match="at least one task"):
        check_policy_contract(factory, tasks=("single_trade",), seeds=[])
    check_policy_contract(factory, tasks=iter(["single_trade"]), seeds=iter([0]))  # one-shot iterables


def test_a_factory_that_raises_is_a_conformance_error_with_its_cause() -> None:
    def broken(seed: int) -> Any:
        raise RuntimeError("no weights")

    for check in (lambda: check_policy_contract(broken, tasks=("single_trade",), seeds=(0,)),
                  lambda: check_determinism("single_trade", "train", 0, broken),
                  lambda: play("single_trade", "train", 0, {"lab_1": broken})):
        with pytest.raises(ConformanceError, match=r"factory .*broken raised RuntimeError: no weights") as info:
            check()
        assert isinstance(info.value.__cause__, RuntimeError)
