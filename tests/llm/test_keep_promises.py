"""The short allocation keeps the seat's promises (gpu_arena.llm.pooling.keep_promises): where the
best plan runs a block the seat committed to a coalition still gathering consents, the adapter reads
``allocate_to_job()`` as the plan's other blocks, named, so the coalition survives the allocation
that, applied as written, breaks it."""

from __future__ import annotations

import pytest

from gpu_arena.env import GpuArenaEnv
from gpu_arena.llm.pooling import expand, keep_promises
from gpu_arena.models import ArenaAction, ArenaObservation
from gpu_arena.policies import make_policy
from gpu_arena.policies.expert import planned_blocks, promised_blocks

SHORT = ArenaAction(action_type="allocate_to_job")


def _first_promise(seed: int) -> tuple[GpuArenaEnv, ArenaObservation]:
    """A train world of coalition_market played by the teacher up to the first turn whose best plan
    runs a promised block (seeds 2, 4 and 8 have one within four rounds)."""
    env = GpuArenaEnv(task="coalition_market", split="train")
    obs = env.reset(seed=seed)
    teacher = make_policy("rule_expert_short", seed=seed)
    while not obs.done:
        planned = planned_blocks(obs)
        if planned & promised_blocks(obs):
            return env, obs
        obs = env.step(teacher.act(obs))
    pytest.fail(f"seed {seed}: no turn with a promised block in the plan")


def _broken(obs: ArenaObservation) -> list[str]:
    return [c.coalition_id for c in obs.active_coalitions if c.status == "failed"]


@pytest.mark.parametrize("seed", [2, 4, 8])
def test_the_short_allocation_names_the_plans_other_blocks_and_the_coalition_holds(seed: int) -> None:
    env, obs = _first_promise(seed)
    promised = promised_blocks(obs)
    planned = planned_blocks(obs)
    kept = expand(SHORT, obs)
    assert kept.action_type == "allocate_to_job" and not kept.job_id
    assert kept.block_ids and set(kept.block_ids) <= planned - promised
    assert list(kept.block_ids) == sorted(kept.block_ids)
    pending = {c.coalition_id for c in obs.active_coalitions if c.status == "proposed"}
    after = env.step(kept)
    assert after.last_action_result.ok
    assert not set(_broken(after)) & pending


def test_applied_as_written_the_short_allocation_breaks_the_promise() -> None:
    # the failure the adapter prevents (why it exists): the same turn, the short form to the rules
    broken = 0
    for seed in (2, 4, 8):
        env, obs = _first_promise(seed)
        pending = {c.coalition_id for c in obs.active_coalitions if c.status == "proposed"}
        broken += bool(set(_broken(env.step(SHORT))) & pending)
    assert broken >= 2


def test_other_allocations_and_turns_without_a_promise_are_left_as_written() -> None:
    env = GpuArenaEnv(task="coalition_market", split="train")
    obs = env.reset(seed=2)
    assert not promised_blocks(obs)
    assert keep_promises(SHORT, obs) is SHORT  # nothing promised: the whole plan
    _env, promised_turn = _first_promise(2)
    named = ArenaAction(action_type="allocate_to_job", block_ids=sorted(promised_blocks(promised_turn)))
    to_job = ArenaAction(action_type="allocate_to_job", job_id="j_0_0")
    wait = ArenaAction(action_type="wait")
    for action in (named, to_job, wait):
        assert keep_promises(action, promised_turn) is action  # what a seat names is its own choice
