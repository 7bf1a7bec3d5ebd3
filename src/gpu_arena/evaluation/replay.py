"""Replays: a compact JSON record (task, split, seed, every seat's actions, rewards) that replays to
the identical transcript, because the core is deterministic for (task, split, seed, actions)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..core.engine import Episode
from ..core.judge import recorded_judge
from ..core.records import action_from_record


def replay_start(record: dict[str, Any]) -> Episode:
    """A recorded episode's world before its first round, its seat controlled and a model judge's
    verdicts played back from the transcript: step it with the record's actions to replay it."""
    return Episode.new(record["task"], record["split"], int(record["seed"]),
                       controlled=(record.get("seat", "lab_0"),), judge_mode=record.get("judge_mode", "none"),
                       judge=recorded_judge(record["transcript"]))


def replay_episode(record: dict[str, Any]) -> Episode:
    """Re-run a recorded episode; the result's ``transcript`` equals the recorded one. A model
    judge's verdicts are played back from the transcript (the model is not asked again)."""
    episode = replay_start(record)
    for rnd in record["transcript"]:
        episode.step({lid: action_from_record(a) for lid, a in rnd["actions"].items()})
    return episode


def write_jsonl(path: str | Path, records: Iterable[dict[str, Any]]) -> int:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with p.open("w") as fh:
        for rec in records:
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
            n += 1
    return n


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    with Path(path).open() as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)
