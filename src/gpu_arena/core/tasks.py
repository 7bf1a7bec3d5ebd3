"""Task and split parameters (docs/design.md). Numbers are tunable starting points.

Holdout differs from train in three ways: its worlds come from a disjoint seed stream (the split
is part of the world seed), its shocks follow another distribution (other kinds' weights, stronger
magnitudes) and its opponents draw their parameters from other ranges.
"""

from __future__ import annotations

from .types import SHOCK_KINDS, TaskParams

VALUE_PER_HOUR_CAP = 6.0  # public: no job is worth more than this per required GPU-hour (before surges)

_TRAIN_OPPONENTS: dict[str, tuple[float, float]] = {
    "acceptance_margin": (0.02, 0.15),
    "deadline_sensitivity": (0.5, 1.5),
    "honesty": (0.6, 1.0),
    "coalition_trust": (0.4, 0.9),
    "retaliation_memory": (2.0, 5.0),
    "risk": (0.2, 0.6),
}
_HOLDOUT_OPPONENTS: dict[str, tuple[float, float]] = {
    "acceptance_margin": (0.15, 0.30),
    "deadline_sensitivity": (1.5, 2.5),
    "honesty": (0.3, 0.6),
    "coalition_trust": (0.15, 0.4),
    "retaliation_memory": (5.0, 8.0),
    "risk": (0.6, 1.0),
}

_TRAIN_SHOCKS = {
    "capacity_failure": 1.0, "new_supply": 1.0, "energy_spike": 1.0, "reliability_downgrade": 1.0,
    "deadline_acceleration": 0.7, "demand_surge": 1.0, "emergency_auction": 1.0,
}
_HOLDOUT_SHOCKS = {
    "capacity_failure": 1.6, "new_supply": 0.5, "energy_spike": 1.3, "reliability_downgrade": 1.3,
    "deadline_acceleration": 1.4, "demand_surge": 0.8, "emergency_auction": 1.2,
}
assert set(_TRAIN_SHOCKS) == set(SHOCK_KINDS) == set(_HOLDOUT_SHOCKS)


def task_params(task: str, split: str) -> TaskParams:
    if split not in ("train", "holdout"):
        raise ValueError(f"unknown split {split!r}; expected 'train' or 'holdout'")
    train = split == "train"
    shocks = _TRAIN_SHOCKS if train else _HOLDOUT_SHOCKS
    common = dict(
        split=split,
        shock_weights=dict(shocks),
        energy_spike=(1.3, 1.7) if train else (1.6, 2.2),
        demand_surge=(1.2, 1.4) if train else (1.3, 1.6),
        reliability_drop=(0.08, 0.18) if train else (0.15, 0.3),
        budget_frac=(0.3, 0.6),
        opponent_ranges=dict(_TRAIN_OPPONENTS if train else _HOLDOUT_OPPONENTS),
        value_per_hour_cap=VALUE_PER_HOUR_CAP,
    )
    if task == "single_trade":
        return TaskParams(task=task, n_labs=(2, 2), rounds=(3, 4), jobs_per_lab=(1, 2),
                          blocks_per_lab=(2, 3), n_shocks=(0, 0), pooled_jobs=0, **common)  # type: ignore[arg-type]
    if task == "market_round":
        return TaskParams(task=task, n_labs=(3, 3), rounds=(5, 6), jobs_per_lab=(2, 2),
                          blocks_per_lab=(3, 4), n_shocks=(1, 1), pooled_jobs=0, **common)  # type: ignore[arg-type]
    if task == "coalition_market":
        return TaskParams(task=task, n_labs=(4, 5), rounds=(9, 10), jobs_per_lab=(2, 3),
                          blocks_per_lab=(3, 5), n_shocks=(2, 4), pooled_jobs=1, **common)  # type: ignore[arg-type]
    raise ValueError(f"unknown task {task!r}; expected one of single_trade, market_round, coalition_market")


def surge_max(params: TaskParams) -> float:
    """Largest factor a job's value can reach in this task (public), for the reward bound."""
    if params.n_shocks[1] == 0 or params.shock_weights.get("demand_surge", 0.0) <= 0:
        return 1.0
    return params.demand_surge[1]
