"""Which task each of an RL iteration's worlds comes from, when a run trains on several tasks.

- ``mixed``: every world's task drawn at random from all the run's tasks, every iteration (the
  behaviour before curricula: the same draws, so earlier runs repeat).
- ``ordered``: the iterations walk the tasks in the order given (``single_trade`` →
  ``market_round`` → ``coalition_market``), each task opening an equal share of the iterations.
  The mix is *cumulative*: once a task is open it keeps appearing, each world's task drawn at random
  from the tasks open so far. Why cumulative rather than one task per block: the checkpoint is
  evaluated on every task at the end, and a block schedule would spend its last iterations on the
  last task alone, fine-tuning away what the first ones taught (expert iteration fine-tunes on the
  latest iteration's episodes unless ``cumulative``); the easy task kept in the mix also keeps
  paying for the model's basic moves while the harder ones are learned.

Stage boundaries: iteration ``i`` of ``n`` opens the first ``((i + 1) * k - 1) // n + 1`` of the
``k`` tasks, so the stages are equal shares when ``k`` divides ``n`` and the last iteration always
has every task open (with fewer iterations than tasks the first stages are skipped, not the last).

Which of the two trains the better negotiator is for a measurement to say; this module is the switch.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

CURRICULA = ("mixed", "ordered")


def open_tasks(tasks: Sequence[str], curriculum: str, iteration: int, iterations: int) -> tuple[str, ...]:
    """The tasks iteration ``iteration`` (0-based, of ``iterations``) draws its worlds from."""
    if curriculum not in CURRICULA:
        raise ValueError(f"unknown curriculum {curriculum!r}; expected one of {', '.join(CURRICULA)}")
    if curriculum == "mixed" or len(tasks) < 2:
        return tuple(tasks)
    k, n = len(tasks), max(int(iterations), 1)
    opened = min(((min(iteration, n - 1) + 1) * k - 1) // n + 1, k)
    return tuple(tasks[:opened])


def world_tasks(tasks: Sequence[str], curriculum: str, iteration: int, iterations: int, n_worlds: int,
                rng: random.Random) -> list[str]:
    """The task of each of iteration ``iteration``'s ``n_worlds`` worlds. One task draws nothing from
    ``rng`` (as before curricula), so a one-task run's later draws are unchanged."""
    pool = open_tasks(tasks, curriculum, iteration, iterations)
    return [rng.choice(pool) if len(pool) > 1 else pool[0] for _ in range(n_worlds)]


__all__ = ["CURRICULA", "open_tasks", "world_tasks"]
