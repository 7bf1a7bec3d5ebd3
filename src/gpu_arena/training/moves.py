"""What a seat did on the turns that matter, read from recorded episodes (``gpu-arena runs moves``).

A reward says how an episode went; this says which moves made it, for the two failures the RL runs
of decision 0039 showed in ``coalition_market``:

* **Allocations on due turns.** A turn is *due* when blocks of the seat's best plan open next round
  unallocated (:func:`gpu_arena.llm.prompts.due_blocks`): this turn is the last to allocate them.
  Each allocation is read by its form: the short form ``allocate_to_job()`` (the whole best plan),
  a copy of the allocation line (:func:`~gpu_arena.llm.prompts.blocks_to_allocate`, what the
  teacher names), other named blocks, or an allocation to a named job. ``due_missed``: due turns
  after which a due block was still unallocated (it idles).
* **Repeated moves.** A move other than waiting made again unchanged on the seat's next turn (an
  offer, a counter, a coalition sent twice): what the engine's spam check charges.

Each episode is replayed through the core (deterministic for its task, split, seed and actions),
so the seat's view at every turn is the one it acted on.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FORMS = ("short", "line", "other_named", "job")
UNUSED = frozenset({"free", "reserved", "idle"})  # a due block's states after a turn that left it out
# moves that are never spam: they also clear what the next move is compared with (as the engine's spam check)
QUIET = frozenset({"wait", "finish"})


def allocation_form(action: dict[str, Any], line: list[str]) -> str:
    """``short``, ``line`` (named blocks equal to the allocation line), ``other_named`` or ``job``."""
    if action.get("job_id"):
        return "job"
    blocks = list(action.get("block_ids") or [])
    if not blocks:
        return "short"
    return "line" if sorted(blocks) == line else "other_named"


def move_stats(source: str | Path | Iterable[dict[str, Any]], seat: str = "lab_0", task: str | None = None
               ) -> list[dict[str, Any]]:
    """Per (policy, task): ``episodes``, ``turns``, ``due_turns``, ``due_allocations`` (due turns
    whose move was an allocation), the allocations' ``forms`` (counted by :data:`FORMS`),
    ``due_missed``, ``repeated`` (moves made again unchanged, by action type), ``repeated_open``
    (offers sent again while the same offer was still open) and ``reward``
    (the seat's mean return). ``task``: only that task's episodes (the others are not replayed)."""
    from ..core.records import action_from_record
    from ..evaluation.replay import read_jsonl, replay_start
    from ..llm.prompts import blocks_to_allocate, due_blocks

    records = read_jsonl(str(source)) if isinstance(source, str | Path) else source
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for i, rec in enumerate(records):
        try:
            if task is not None and rec["task"] != task:
                continue
            episode = replay_start({"seat": seat, **rec})
            g = groups.setdefault((str(rec["policy"]), str(rec["task"])), {
                "episodes": 0, "turns": 0, "due_turns": 0, "due_allocations": 0, "due_missed": 0,
                "forms": Counter(), "repeated": Counter(), "repeated_open": 0, "reward": 0.0})
            g["episodes"] += 1
            previous: str | None = None
            for rnd in rec["transcript"]:
                action = (rnd.get("actions") or {}).get(seat)
                due: list[str] = []
                if action is not None:
                    view = episode.observe(seat, aids=False)  # what the seat acted on
                    line = blocks_to_allocate(view)
                    # due blocks promised to a coalition gathering consents stay free on purpose
                    due = [b for b in due_blocks(view) if b in line]
                    g["turns"] += 1
                    kind = action.get("action_type")
                    if due:
                        g["due_turns"] += 1
                        if kind == "allocate_to_job":
                            g["due_allocations"] += 1
                            g["forms"][allocation_form(action, line)] += 1
                    key = spam_key(action)
                    if key is not None and key == previous:
                        g["repeated"][kind] += 1
                        g["repeated_open"] += kind == "send_offer" and _still_open(view, action)
                    previous = key
                episode.step({lid: action_from_record(a) for lid, a in rnd["actions"].items()})
                if due:
                    blocks = episode.world.blocks
                    # still the seat's and not allocated once its window opened: it idles (sold: not missed)
                    g["due_missed"] += any(blocks[b].owner == seat and blocks[b].status in UNUSED for b in due)
                g["reward"] += float((rnd.get("rewards") or {}).get(seat, 0.0))
        except (KeyError, TypeError, ValueError, AttributeError) as e:  # a record of another shape
            raise ValueError(f"record {i} is not an episode replay: {e!r}") from None
    rows = []
    for (policy, task), g in groups.items():
        rows.append({"policy": policy, "task": task, **g, "forms": {f: g["forms"][f] for f in FORMS},
                     "repeated": dict(g["repeated"]), "reward": g["reward"] / max(g["episodes"], 1)})
    return rows


def spam_key(record: dict[str, Any] | None) -> str | None:
    """What the spam check compares a move by (its record), or None for a move that is never spam
    and clears the comparison (waiting, finishing; ``None``: a turn with no readable move)."""
    if record is None or record.get("action_type") in QUIET:
        return None
    return json.dumps(record, sort_keys=True)


def repeated_moves(actions: Iterable[Any]) -> int:
    """Moves of one episode made again unchanged on the next turn (what the engine's spam check
    charges), from a rollout's actions: ``ArenaAction`` models, or anything else (a format error)
    that breaks the run as waiting does."""
    count, previous = 0, None
    for action in actions:
        dump = getattr(action, "model_dump", None)
        key = spam_key(dump(exclude_defaults=True) if dump is not None else None)
        count += key is not None and key == previous
        previous = key
    return count


def _still_open(view: Any, action: dict[str, Any]) -> bool:
    """Whether the offer ``action`` sends is one of the seat's open outgoing offers already (the same
    lab, blocks asked and given, payments)."""
    def same(o: Any) -> bool:
        return (o.target == action.get("target_lab_id")
                and sorted(o.requested_block_ids) == sorted(action.get("requested_block_ids") or [])
                and sorted(o.block_ids) == sorted(action.get("block_ids") or [])
                and o.payment == float(action.get("payment") or 0.0))
    return any(o.direction == "outgoing" and same(o) for o in view.active_offers)


__all__ = ["FORMS", "allocation_form", "move_stats", "repeated_moves"]
