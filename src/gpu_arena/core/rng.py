"""One seeded RNG per episode. Nothing in the core draws randomness from anywhere else."""

from __future__ import annotations

import random


def episode_rng(seed: int) -> random.Random:
    """The episode's only source of randomness (world draw, shock targets, resolution order)."""
    return random.Random(seed)
