"""The world read into Rust and written back is the world: every field, in order, bit for bit."""

from __future__ import annotations

from types import ModuleType

import pytest
from helpers_rs import canon, episode_worlds, world_state

from gpu_arena.core.types import TASKS


@pytest.mark.parametrize("task", TASKS)
def test_every_state_of_an_episode_crosses_unchanged(rs: ModuleType, task: str) -> None:
    seen = 0
    for seed in range(3):
        for episode, _moves in episode_worlds(task, seed, mix=seed):
            assert canon(rs.world_roundtrip(episode.world)) == canon(world_state(episode.world))
            seen += 1
    assert seen > 6


def test_the_rng_hands_over_mid_stream(rs: ModuleType) -> None:
    for episode, _moves in episode_worlds("market_round", 1):
        episode.world.rng.random()  # a stream advanced past its seeding
        assert rs.world_roundtrip(episode.world)["rng"] == episode.world.rng.getstate()
        break
