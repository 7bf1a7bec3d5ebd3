"""The short allocation keeps the seat's promises (decision 0046): ``allocate_to_job()`` with no job
and no blocks applies the seat's best plan less the blocks it committed to a coalition still
gathering consents, which stay free for the coalition; blocks the seat names are allocated as
named. Before, the short form allocated the whole plan and broke the coalition (decision 0044)."""

from __future__ import annotations

import pytest

import helpers
from gpu_arena.env import GpuArenaEnv
from gpu_arena.models import ArenaAction, ArenaObservation
from gpu_arena.policies.expert import planned_blocks, promised_blocks

SHORT = ArenaAction(action_type="allocate_to_job")


def first_promise(seed: int) -> tuple[GpuArenaEnv, ArenaObservation]:
    found = helpers.first_promise(seed)
    if found is None:
        pytest.fail(f"seed {seed}: no turn with a promised block in the plan")
    return found


def broken(obs: ArenaObservation) -> set[str]:
    return {c.coalition_id for c in obs.active_coalitions if c.status == "failed"}


def pending(obs: ArenaObservation) -> set[str]:
    return {c.coalition_id for c in obs.active_coalitions if c.status == "proposed"}


@pytest.mark.parametrize("seed", [2, 4, 8])
def test_the_short_allocation_is_the_plan_less_the_promised_blocks(seed: int) -> None:
    env, obs = first_promise(seed)
    planned, promised, proposed = planned_blocks(obs), promised_blocks(obs), pending(obs)
    kept = sorted(planned & promised)
    after = env.step(SHORT)
    assert after.last_action_result.ok
    assert after.last_action_result.message.endswith(f"; kept {', '.join(kept)} free for your coalition")
    status = {b.block_id: b for b in after.owned_blocks}
    for bid in kept:
        assert status[bid].job_id is None, bid  # free, or committed where the coalition formed
    # the plan's other blocks that could still run are allocated, as the whole plan had them
    for bid in planned - promised:
        if any(b.block_id == bid and b.start_round > obs.round_index for b in obs.owned_blocks):
            assert status[bid].job_id is not None, bid
    assert not broken(after) & proposed


def test_named_the_promised_blocks_are_allocated_and_the_promise_breaks() -> None:
    # what the rule leaves them for: a seat that names them gets what it named
    breaks = 0
    for seed in (2, 4, 8):
        env, obs = first_promise(seed)
        kept, proposed = sorted(planned_blocks(obs) & promised_blocks(obs)), pending(obs)
        after = env.step(ArenaAction(action_type="allocate_to_job", block_ids=kept))
        assert after.last_action_result.ok
        breaks += bool(broken(after) & proposed)
    assert breaks >= 2


def test_without_a_promise_the_short_allocation_is_the_whole_plan() -> None:
    env = GpuArenaEnv(task="coalition_market", split="train", engine="python")
    obs = env.reset(seed=2)
    assert not promised_blocks(obs)
    planned = planned_blocks(obs)
    after = env.step(SHORT)
    assert after.last_action_result.ok and "kept" not in after.last_action_result.message
    allocated = {b.block_id for b in after.owned_blocks if b.job_id is not None}
    assert allocated == {b.block_id for b in obs.owned_blocks if b.block_id in planned and b.start_round > obs.round_index}
