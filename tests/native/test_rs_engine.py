"""The Rust episode plays every round as the Python one: the same order, results, reward rows,
transcript, ledger and world, bit for bit, with every seat's move (odd ones included)."""

from __future__ import annotations

import copy
from types import ModuleType
from typing import Any

import pytest
from helpers_rs import canon, world_state
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_arena.core.engine import Episode
from gpu_arena.core.policy import policy_move
from gpu_arena.core.types import TASKS, Action, RejectedAction
from gpu_arena.policies import make_seat_policy

MIXES = (("random_valid", "archetypes", "archetypes", "archetypes", "archetypes"),
         ("rule_expert", "archetypes", "random_valid", "archetypes", "rule_expert"),
         ("archetypes", "rule_expert", "archetypes", "random_valid", "archetypes"))


def py_report(report: Any) -> Any:
    return (report.round_index, report.order,
            {lid: (r.ok, r.code, r.message) for lid, r in report.results.items()},
            report.rewards, report.done)


def play_both(rs: ModuleType, task: str, seed: int, mix: int, odd: list[Any] | None = None) -> int:
    """Play one episode in Python and in Rust side by side; returns the rounds compared. ``odd``
    replaces the first seat's moves, one per round, while it lasts."""
    episode = Episode.new(task, "train", seed, controlled=())
    native = rs.Episode(copy.deepcopy(episode.world), [])
    names = MIXES[mix % len(MIXES)]
    policies = {lid: make_seat_policy(episode.world, lid, names[i % len(names)])
                for i, lid in enumerate(episode.world.labs)}
    odd = list(odd or [])
    rounds = 0
    while not episode.done:
        moves: dict[str, Any] = {lid: policy_move(p, episode, lid) for lid, p in policies.items()}
        if odd:
            moves["lab_0"] = odd.pop(0)
        expected = py_report(episode.step(moves))
        got = native.step(moves)
        assert canon(got) == canon(expected), f"round {rounds}"
        assert canon(native.world_state()) == canon(world_state(episode.world)), f"round {rounds}"
        assert canon(native.transcript(len(episode.transcript) - 1)) == canon(episode.transcript[-1:])
        phi, returns, penalties = native.ledger()
        assert canon((phi, returns, penalties)) == canon((episode.phi, episode.returns, episode.penalties))
        rounds += 1
    assert native.done
    return rounds


@pytest.mark.parametrize("task", TASKS)
def test_real_episodes_play_the_same(rs: ModuleType, task: str) -> None:
    rounds = sum(play_both(rs, task, seed, mix=seed) for seed in range(6))
    assert rounds >= 6 * 3


odd_values = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.integers(2**40, 2**62),
                       st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6),
                       st.sampled_from(["lab_0", "lab_1", "b_1", "b_2", "o_1", "job_0_0", "c_1"]),
                       st.lists(st.sampled_from(["b_1", "b_2", "b_3", "lab_1", 3]), max_size=4))
odd_actions = st.one_of(
    st.builds(lambda kind, kw: Action(kind, **kw),
              st.sampled_from(["send_offer", "accept_offer", "reject_offer", "counter_offer", "make_pitch",
                               "counter_pitch", "reserve_capacity", "release_capacity", "form_coalition",
                               "commit_to_coalition", "allocate_to_job", "send_message", "wait", "finish",
                               "dance"]),
              st.dictionaries(st.sampled_from(["target_lab_id", "offer_id", "coalition_id", "job_id", "payment",
                                               "requested_payment", "message", "expires_in"]), odd_values,
                              max_size=4)),
    st.builds(RejectedAction, st.sampled_from(["malformed_action", "format_invalid_json"]), st.text(max_size=8)),
    st.none(),
)


@settings(max_examples=25)
@given(task=st.sampled_from(TASKS), seed=st.integers(0, 50), odd=st.lists(odd_actions, min_size=1, max_size=6))
def test_odd_moves_play_the_same(rs: ModuleType, task: str, seed: int, odd: list[Any]) -> None:
    play_both(rs, task, seed, mix=seed, odd=odd)
