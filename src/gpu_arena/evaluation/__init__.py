"""Evaluation harness: run policies over tasks and seeds, aggregate with bootstrap CIs, store, report."""

from .runner import EpisodeResult, play_episode, run_evaluation
from .stats import aggregate, bootstrap_ci, paired_differences

__all__ = ["EpisodeResult", "aggregate", "bootstrap_ci", "paired_differences", "play_episode", "run_evaluation"]
