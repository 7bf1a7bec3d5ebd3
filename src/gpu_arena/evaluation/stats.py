"""Aggregation with honest statistics: mean, std and a seeded 95% bootstrap CI per policy × task."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..core.types import REWARD_COLUMNS
from ..native.report import engine_counts
from .runner import EpisodeResult

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 12345  # a fixed seed: the same results always give the same interval


def bootstrap_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean (BCa is unstable for the near-constant samples that
    baselines such as no_negotiation produce). Degenerate samples give a zero-width interval."""
    data = np.asarray(values, dtype=float)
    if len(data) == 0:
        return (float("nan"), float("nan"))
    if len(data) == 1 or float(np.ptp(data)) == 0.0:
        m = float(data.mean())
        return (m, m)
    # imported on first use: scipy.stats costs every importer (the server, each worker) ~0.6 s and ~70 MB
    from scipy.stats import bootstrap

    res = bootstrap((data,), np.mean, confidence_level=confidence, n_resamples=BOOTSTRAP_RESAMPLES,
                    method="percentile", random_state=np.random.default_rng(BOOTSTRAP_SEED))
    return (float(res.confidence_interval.low), float(res.confidence_interval.high))


def aggregate(results: Sequence[EpisodeResult]) -> list[dict[str, Any]]:
    """One row per policy × task × split, in the order the results come in."""
    groups: dict[tuple[str, str, str], list[EpisodeResult]] = {}
    for r in results:
        groups.setdefault((r.policy, r.task, r.split), []).append(r)
    rows = []
    for (policy, task, split), rs in groups.items():
        returns = [r.episode_return for r in rs]
        lo, hi = bootstrap_ci(returns)
        actions = sum(r.steps for r in rs)
        rows.append({
            "policy": policy, "task": task, "split": split, "n": len(rs),
            "mean": float(np.mean(returns)), "std": float(np.std(returns, ddof=1)) if len(rs) > 1 else 0.0,
            "ci_low": lo, "ci_high": hi,
            "welfare_ratio": float(np.mean([r.welfare_ratio for r in rs])),
            "surplus_over_batna": float(np.mean([r.surplus_over_batna for r in rs])),
            "deal_rate": float(np.mean([r.deal_rate for r in rs])),
            # the mean share of each deal's joint gain, over every deal of the group (None: no deal)
            "gain_share": _mean_or_none([s for r in rs for s in r.gain_shares]),
            "breach_rate": float(np.mean([r.breach_rate for r in rs])),
            # invalid actions over all the seat's actions, not a mean of per-episode rates
            "invalid_rate": sum(r.invalid_actions for r in rs) / actions if actions else 0.0,
            "columns": {c: float(np.mean([r.columns[c] for r in rs])) for c in REWARD_COLUMNS},
            "seeds": sorted(r.seed for r in rs),
            # which engine played the group's episodes, and why the Python core played the others
            "engines": engine_counts((r.engine, r.engine_reason) for r in rs),
        })
    return rows


JOINT_GAIN_EPS = 1e-9  # a deal whose two sides gained less than this together split nothing


def deal_gain_share(deal: Mapping[str, Any], lab: str) -> float | None:
    """``lab``'s share of a settled deal's joint gain: ``deal`` is a deal event's data (its ``labs``
    and ``gains``, what the settlement did to each side's potential); None where ``lab`` was no party
    or the joint gain was not positive. The evaluation's rows and the league's bargaining metrics
    both read it."""
    labs, gains = list(deal.get("labs", ())), deal.get("gains")
    if gains is None or lab not in labs:
        return None
    joint = sum(float(g) for g in gains)
    return float(gains[labs.index(lab)]) / joint if joint > JOINT_GAIN_EPS else None


def deal_gain_shares(events: Iterable[Any], lab: str) -> list[float]:
    """:func:`deal_gain_share` of every deal event in ``events`` that ``lab`` settled with a positive
    joint gain, in order."""
    shares = (deal_gain_share(e.data, lab) for e in events if e.kind == "deal")
    return [s for s in shares if s is not None]


def _mean_or_none(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None


EpisodeReturn = tuple[str, str, str, int, float]  # (policy, task, split, seed, episode return)


def paired_differences(returns: Iterable[EpisodeReturn], reference: str) -> list[dict[str, Any]]:
    """``reference`` minus every other policy, seed by seed, with a bootstrap CI of the mean.

    Every policy meets the same world, opponents and shocks on a seed, so the per-seed difference
    cancels the variance they share (common random numbers). Two per-policy intervals can overlap
    while the paired difference is clearly positive; this is the comparison to read for "does A beat
    B". Only seeds both policies played count.
    """
    table: dict[tuple[str, str], dict[str, dict[int, float]]] = {}
    for policy, task, split, seed, value in returns:
        table.setdefault((task, split), {}).setdefault(policy, {})[seed] = value
    rows = []
    for (task, split), by_policy in table.items():
        ref = by_policy.get(reference)
        if ref is None:
            continue
        for policy, other in by_policy.items():
            if policy == reference:
                continue
            seeds = sorted(set(ref) & set(other))
            diff = [ref[s] - other[s] for s in seeds]
            if not diff:
                continue
            lo, hi = bootstrap_ci(diff)
            rows.append({
                "task": task, "split": split, "policy": reference, "versus": policy, "n": len(diff),
                "mean_diff": float(np.mean(diff)), "ci_low": lo, "ci_high": hi,
                "wins": sum(d > 1e-9 for d in diff), "losses": sum(d < -1e-9 for d in diff),
            })
    return rows
