"""SFT data: whole episodes played by a scripted policy, written as the chats an LLM agent has.

One record is one episode of the controlled seat, in OpenAI chat format: the system prompt
(:func:`gpu_arena.llm.system_prompt`), one turn per round (:class:`gpu_arena.llm.Conversation`,
so the same rendering, memory of shown news and ``tool`` messages as the agents), and after each
turn the policy's action written as the agent would answer: a function call of the action's tool
(``tools`` and ``compact`` mode, arguments = the fields that type reads, in the tool schema's
order) or one JSON object with ``action_type`` (``json`` mode).

A ``compact`` record (:mod:`gpu_arena.llm.compact`) is stored whole, but the model is shown the
system prompt and the current turn alone: :func:`records_to_dataset` makes it one chat per turn
(:func:`model_chats`), so a model trains on exactly the prompts it will be given.

Every action is stepped *as parsed back from its rendering* (:func:`gpu_arena.llm.parse_action`),
so a record is exactly what a model answering with those messages would have lived through.
In ``tools`` mode the record ends with the final turn (``The episode is over.``) answered by an
empty assistant message: the GRPO rollout asks the model once more after the last round, and an
empty answer ends it cheaply. ``json`` records end with the last action (the agents are never
asked after the end).

Records can be filtered by return (``min_return`` and/or ``top_fraction`` per task) and carry
their provenance (policy, tasks, split, seeds, opponents, filter, commit, versions).
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from ..core.opponents import DEFAULT_OPPONENTS
from ..core.tasks import task_params
from ..core.types import SPLITS, TASKS
from ..llm import tools
from ..llm.parsing import FormatError, parse_action
from ..llm.prompts import MODES, WINDOW, Conversation, Mode, prompt_tools
from ..llm.shortform import expand, shorten

DATASET_DIR = "dataset"  # save_to_disk output inside the data directory
JSONL_NAME = "sft.jsonl"
PROVENANCE_NAME = "provenance.json"


class DataError(ValueError):
    """Bad arguments for building or loading SFT data (unknown policy, task, split, empty filter)."""


def action_arguments(action: Any) -> tuple[str, dict[str, Any]]:
    """``(action_type, arguments)`` of an action (:func:`gpu_arena.llm.tools.action_arguments`);
    an unreadable one is a :class:`DataError`."""
    try:
        return tools.action_arguments(action)
    except tools.UnreadableAction as e:
        raise DataError(str(e)) from e


def render_reply(action: Any, mode: Mode, call_id: str) -> tuple[str, list[dict[str, Any]] | None]:
    """The assistant message an agent in ``mode`` would send for ``action``
    (:func:`gpu_arena.llm.tools.render_reply`); an unreadable action is a :class:`DataError`."""
    try:
        return tools.render_reply(action, mode, call_id)
    except tools.UnreadableAction as e:
        raise DataError(str(e)) from e


@dataclass
class EpisodeRecord:
    """One episode as an SFT sample, with what it scored."""

    messages: list[dict[str, Any]]
    task: str
    split: str
    seed: int
    policy: str
    mode: str
    episode_return: float
    steps: int
    invalid_actions: int
    columns: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        if self.mode != "json":  # the schemas the prompt carries: none in compact mode
            out["tools"] = prompt_tools(self.mode) or []
        return out


def play_episode_record(policy: str, task: str, split: str, seed: int, *, mode: Mode = "tools",
                        opponents: Any = None, seat: str = "lab_0") -> EpisodeRecord:
    """Play one episode with ``policy`` in ``seat`` and return it as a chat in the agent's format."""
    from ..env import GpuArenaEnv
    from ..native.episode import read_world
    from ..policies import make_policy
    from ..rollout import play_seat

    env = GpuArenaEnv(task=task, split=split, seat=seat, opponents=opponents)
    obs = env.reset(seed=seed)
    episode = env.episode
    assert episode is not None
    driver = make_policy(policy, seed=seed)
    conv = Conversation(mode)
    turns = itertools.count()

    def as_chat(view: Any, current: Any) -> Any:
        """The driver's action as the agent would write it, read back by the agents' parser."""
        conv.observe(current)
        # written in the short form where the planner fills it back (llm.pooling), read back as played
        content, calls = render_reply(shorten(driver.act(view), current), mode, f"call_{next(turns)}")
        conv.reply(content, calls)
        parsed = expand(parse_action(calls if calls else content), current)
        if isinstance(parsed, FormatError):  # a rendering the parser cannot read is a bug here, not data
            raise DataError(f"rendered action does not parse back ({parsed.code}): {parsed.message}")
        return parsed

    played = play_seat(env, driver, obs, choose=as_chat)
    if mode == "tools":  # the GRPO rollout asks once more; compact prompts are never asked after the end
        conv.observe(played.last)
        conv.reply("")
    return EpisodeRecord(messages=conv.transcript, task=task, split=split, seed=seed, policy=policy, mode=mode,
                         episode_return=played.episode_return, steps=played.steps,
                         invalid_actions=read_world(episode).labs[seat].invalid_actions, columns=played.columns)


@dataclass
class SFTDataSpec:
    """What to play and keep. ``seeds`` are world seeds of ``split``; every task plays every seed."""

    policy: str = "rule_expert"
    tasks: tuple[str, ...] = ("single_trade",)
    split: str = "train"
    seeds: tuple[int, ...] = tuple(range(100))
    mode: str = "tools"
    opponents: str | None = None  # None: each opponent seat plays its world's archetype
    min_return: float | None = None  # keep episodes with at least this return
    top_fraction: float | None = None  # keep the best fraction per task (after min_return)
    extra: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        from ..policies import make_policy

        for t in self.tasks:
            if t not in TASKS:
                raise DataError(f"unknown task {t!r}; expected one of {', '.join(TASKS)}")
        if not self.tasks:
            raise DataError("no task given")
        if self.split not in SPLITS:
            raise DataError(f"unknown split {self.split!r}; expected one of {', '.join(SPLITS)}")
        if self.mode not in MODES:
            raise DataError(f"unknown mode {self.mode!r}; expected one of {', '.join(MODES)}")
        if not self.seeds:
            raise DataError("no seeds given")
        if self.top_fraction is not None and not 0 < self.top_fraction <= 1:
            raise DataError("top_fraction must be in (0, 1]")
        if ":" in self.policy:  # a family name (llm:...) builds a model; data comes from scripted play
            raise DataError(f"SFT data comes from scripted policies, not {self.policy!r}")
        try:
            make_policy(self.policy)
        except ValueError as e:
            raise DataError(str(e)) from None


def select_records(records: Sequence[EpisodeRecord], min_return: float | None,
                   top_fraction: float | None) -> list[EpisodeRecord]:
    """The kept episodes, in the order played: ``return >= min_return``, then the best
    ``ceil(top_fraction * n)`` per task (ties broken by seed)."""
    kept = [r for r in records if min_return is None or r.episode_return >= min_return]
    if top_fraction is not None:
        chosen: set[tuple[str, int]] = set()
        for task in dict.fromkeys(r.task for r in kept):
            rs = sorted((r for r in kept if r.task == task), key=lambda r: (-r.episode_return, r.seed))
            chosen |= {(r.task, r.seed) for r in rs[:math.ceil(top_fraction * len(rs))]}
        kept = [r for r in kept if (r.task, r.seed) in chosen]
    return kept


def build_sft_records(spec: SFTDataSpec, progress: Any = None) -> tuple[list[EpisodeRecord], dict[str, Any]]:
    """Play every task × seed with the policy; return the kept records and their provenance."""
    from ..evaluation.store import git_commit, versions

    spec.validate()
    mode = cast(Mode, spec.mode)
    started = time.perf_counter()
    played: list[EpisodeRecord] = []
    for task in spec.tasks:
        for seed in spec.seeds:
            played.append(play_episode_record(spec.policy, task, spec.split, seed, mode=mode,
                                              opponents=spec.opponents))
            if progress is not None:
                progress(1)
    kept = select_records(played, spec.min_return, spec.top_fraction)
    if not kept:
        raise DataError(f"the filter kept none of the {len(played)} episodes (min_return={spec.min_return}, "
                        f"top_fraction={spec.top_fraction})")
    provenance = {
        "format": "gpu_arena.sft/1",
        "policy": spec.policy, "tasks": list(spec.tasks), "split": spec.split, "seeds": list(spec.seeds),
        "mode": spec.mode, "opponents": spec.opponents or DEFAULT_OPPONENTS,
        "filter": {"min_return": spec.min_return, "top_fraction": spec.top_fraction},
        "episodes_played": len(played), "episodes_kept": len(kept),
        "mean_return_played": _mean(r.episode_return for r in played),
        "mean_return_kept": _mean(r.episode_return for r in kept),
        "max_rounds": max(task_params(t, spec.split).rounds[1] for t in spec.tasks),
        "git_commit": git_commit(), "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "versions": versions(), "duration_s": time.perf_counter() - started, **spec.extra,
    }
    return kept, provenance


def _mean(values: Iterable[float]) -> float:
    vs = list(values)
    return sum(vs) / len(vs) if vs else float("nan")


def save_sft_data(records: Sequence[EpisodeRecord], provenance: dict[str, Any], out_dir: str | Path) -> dict[str, Path]:
    """Write ``out_dir/dataset`` (``datasets`` ``save_to_disk``), ``out_dir/sft.jsonl`` (one record a
    line) and ``out_dir/provenance.json``; the provenance is also the dataset's description."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = [r.to_json() for r in records]
    with open(out / JSONL_NAME, "w") as f:
        for row in rows:
            f.write(json.dumps(row, separators=(",", ":")) + "\n")
    (out / PROVENANCE_NAME).write_text(json.dumps(provenance, indent=2))
    ds = records_to_dataset(rows, provenance)
    ds.save_to_disk(str(out / DATASET_DIR))
    return {"dataset": out / DATASET_DIR, "jsonl": out / JSONL_NAME, "provenance": out / PROVENANCE_NAME}


def records_to_dataset(rows: Sequence[dict[str, Any]], provenance: dict[str, Any] | None = None) -> Any:
    """A ``datasets.Dataset`` of chat records. Messages and tools are stored as JSON (the ``Json``
    feature): Arrow structs would merge the argument keys of every tool call into every other one
    and fill them with nulls, which the chat template would then print."""
    from datasets import Dataset, DatasetInfo, Features, Json, List, Value

    feats: dict[str, Any] = {
        "messages": List(Json()), "task": Value("string"), "split": Value("string"), "seed": Value("int64"),
        "policy": Value("string"), "mode": Value("string"), "episode_return": Value("float64"),
        "steps": Value("int64"), "invalid_actions": Value("int64"), "columns": Json(),
    }
    rows = [chat for r in rows for chat in model_chats(r)]
    has_tools = any("tools" in r for r in rows)
    if has_tools:
        feats["tools"] = List(Json())
    columns: dict[str, list[Any]] = {k: [r.get(k) for r in rows] for k in feats}
    features = Features(feats)
    info = DatasetInfo(description=json.dumps(provenance or {}), features=features)
    return Dataset.from_dict(columns, features=features, info=info)


def model_chats(row: dict[str, Any]) -> list[dict[str, Any]]:
    """``row`` as the chats a model is trained on: the record itself, or for a mode that shows the
    model one turn at a time (compact, :data:`gpu_arena.llm.prompts.WINDOW`) one record per
    answered turn, its messages the system prompt, that turn (as a user message, as
    :meth:`gpu_arena.llm.Conversation.messages` shows it) and the answer. Turns answered with
    nothing (after the episode's end) are left out."""
    if WINDOW.get(str(row.get("mode"))) != 1:
        return [row]
    messages = row["messages"]
    out = []
    for i in range(2, len(messages)):
        turn, answer = messages[i - 1], messages[i]
        if answer["role"] != "assistant" or turn["role"] not in ("user", "tool"):
            continue
        if not answer.get("content") and not answer.get("tool_calls"):
            continue
        out.append({**row, "messages": [messages[0], {"role": "user", "content": turn["content"]}, answer]})
    return out


def load_sft_data(path: str | Path) -> tuple[Any, dict[str, Any]]:
    """Load SFT data written by :func:`save_sft_data` (its directory, its ``dataset`` directory or
    its JSONL file); return ``(dataset, provenance)``."""
    from datasets import load_from_disk

    p = Path(path)
    if not p.exists():
        raise DataError(f"{p}: no such file or directory")
    if p.is_dir() and (p / DATASET_DIR).is_dir():
        p = p / DATASET_DIR
    if p.is_dir():
        try:
            ds = load_from_disk(str(p))
        except (FileNotFoundError, ValueError) as e:
            raise DataError(f"{p}: not a saved dataset ({e})") from None
        try:
            provenance = json.loads(ds.info.description or "{}")
        except ValueError:
            provenance = {}
        return ds, provenance
    rows = []
    with open(p) as f:
        for i, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError as e:
                    raise DataError(f"{p}:{i}: not JSON ({e})") from None
    if not rows or "messages" not in rows[0]:
        raise DataError(f"{p}: no chat records (expected JSON lines with 'messages')")
    prov_file = p.parent / PROVENANCE_NAME
    provenance = json.loads(prov_file.read_text()) if prov_file.exists() else {}
    return records_to_dataset(rows, provenance), provenance


def chat_texts(dataset: Any, limit: int | None = None) -> list[str]:
    """Raw message contents (and tool-call JSON) of a dataset's chats, for training a tokenizer."""
    out: list[str] = []
    for i, row in enumerate(dataset):
        if limit is not None and i >= limit:
            break
        for m in row["messages"]:
            out.append(str(m.get("content") or ""))
            for call in m.get("tool_calls") or []:
                out.append(json.dumps(call.get("function", {})))
    return out


__all__ = ["DataError", "EpisodeRecord", "SFTDataSpec", "action_arguments", "build_sft_records", "chat_texts",
           "load_sft_data", "model_chats", "play_episode_record", "records_to_dataset", "render_reply", "save_sft_data",
           "select_records"]
