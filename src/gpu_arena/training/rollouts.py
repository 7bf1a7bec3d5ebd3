"""Batched on-policy rollouts: many whole episodes of one model against the live environment at once.

A local checkpoint plays the controlled seat of ``len(worlds)`` in-process environments together.
Every round, the conversations of the episodes still running are rendered with the model's chat
template and the seat's tool schemas, padded on the left into one batch, and answered by one
``model.generate`` call; each answer is read exactly as :class:`gpu_arena.llm.TransformersAgent`
reads it (the tokenizer's response parser for tool calls, else :func:`gpu_arena.llm.parse_action`
on the text) and stepped in its own environment. An answer the parser cannot read is stepped as
the agents' ``FormatError`` (an invalid action with its penalty), so a rollout's return is the
return the same model would get as ``llm:hf:DIR?mode=tools`` in an evaluation with the same
sampling.

Why not TRL's GRPO generation loop: it re-renders and re-generates every rollout per tool call
with the trainer's bookkeeping around it (15-19 episodes/min for the ``small`` model, decision
0020); here one ``generate`` serves every episode of a round, so the model's own work dominates.

Each :class:`Rollout` keeps the chat as the model lived it and the parsed actions, so a rollout
is also an SFT record in the teacher data's format (:meth:`Rollout.record`: the actions written
by :func:`gpu_arena.training.data.render_reply`, the same rendering the teacher's records get).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.policy import seat_view
from ..core.types import REWARD_COLUMNS
from ..llm.parsing import FormatError, parse_action
from ..llm.prompts import Conversation
from ..llm.tools import action_tools

Answer = tuple[str, list[dict[str, Any]] | None, int]  # (text, tool calls or None, generated tokens)


@dataclass(frozen=True)
class World:
    """One episode to play: ``task``, ``split`` and world ``seed`` (opponents and shocks follow)."""

    task: str
    split: str
    seed: int


@dataclass
class Rollout:
    """One finished (or cut) episode of the controlled seat."""

    world: World
    messages: list[dict[str, Any]]  # the chat as the model saw it and answered it
    actions: list[Any] = field(default_factory=list)  # ArenaAction or FormatError, one per round
    episode_return: float = 0.0
    columns: dict[str, float] = field(default_factory=lambda: dict.fromkeys(REWARD_COLUMNS, 0.0))
    valid_turns: int = 0
    format_errors: int = 0
    generated_tokens: int = 0
    # the lookahead's changed turns as prompt-completion records (training.lookahead.correction_record)
    corrections: list[dict[str, Any]] = field(default_factory=list)

    @property
    def turns(self) -> int:
        return len(self.actions)

    def record(self, policy: str) -> dict[str, Any]:
        """The episode as an SFT record (``gpu_arena.sft/1`` row, tools mode), or ``{}`` when a turn
        could not be read (a format error has no action to write)."""
        from .data import render_reply

        if self.format_errors:
            return {}
        conv_msgs = [m for m in self.messages if m["role"] != "assistant"]
        out: list[dict[str, Any]] = [conv_msgs[0]]
        for i, action in enumerate(self.actions):
            out.append(conv_msgs[i + 1])
            content, calls = render_reply(action, "tools", f"call_{i}")
            msg: dict[str, Any] = {"role": "assistant", "content": content}
            if calls:
                msg["tool_calls"] = calls
                # the next turn answers this call (a tool message) as in the teacher's records
                if i + 2 < len(conv_msgs) and conv_msgs[i + 2]["role"] == "tool":
                    conv_msgs[i + 2] = {**conv_msgs[i + 2], "tool_call_id": calls[0]["id"], "name": calls[0]["function"]["name"]}
            out.append(msg)
        if len(conv_msgs) > len(self.actions) + 1:  # the final "The episode is over." turn, answered empty
            out.append(conv_msgs[len(self.actions) + 1])
            out.append({"role": "assistant", "content": ""})
        return {"messages": out, "tools": action_tools(), "task": self.world.task, "split": self.world.split,
                "seed": self.world.seed, "policy": policy, "mode": "tools", "episode_return": self.episode_return,
                "steps": self.turns, "invalid_actions": self.turns - self.valid_turns, "columns": dict(self.columns)}


@dataclass
class RolloutStats:
    episodes: int
    turns: int
    generated_tokens: int
    prompt_tokens: int
    seconds: float
    generate_seconds: float

    @property
    def episodes_per_min(self) -> float:
        return 60.0 * self.episodes / max(self.seconds, 1e-9)


class BatchedSampler:
    """Plays worlds with ``model`` in the controlled seat, every round one batched ``generate``.

    ``temperature=0`` decodes greedily. ``max_new_tokens`` caps one answer (an action takes 5-35
    tokens). ``batch_size`` bounds how many episodes are played together; their prompts of a round
    are generated in length-sorted groups of ``group_size``. ``constrained`` decodes under the seat's
    action grammar as ``llm:hf:DIR?constrained=1`` does (:mod:`gpu_arena.llm.constrain`). The model is used
    in eval mode under ``torch.inference_mode`` and left as it was found.
    """

    def __init__(self, model: Any, tokenizer: Any, *, temperature: float = 1.0, top_p: float = 1.0,
                 max_new_tokens: int = 64, batch_size: int = 32, seat: str = "lab_0",
                 opponents: Any = None, proposal: str | None = None, group_size: int = 256,
                 constrained: bool = False) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.temperature = temperature
        self.top_p = top_p
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.seat = seat
        self.opponents = opponents
        # explore turns marked for the proposal take that scripted policy's action instead of a sample
        # (e.g. random_valid: a valid move with no expertise in it, so the reward alone decides)
        self.proposal = proposal
        self.group_size = group_size
        # replies decoded under the seat's action grammar (gpu_arena.llm.constrain), as llm:hf:DIR?constrained=1
        self.constrained = constrained
        self.tools = action_tools()

    def play(self, worlds: Sequence[World], *, seed: int = 0, explore_turns: Sequence[int | None] | None = None,
             propose: Sequence[bool] | None = None, progress: Callable[[int], None] | None = None,
             finish: Callable[[Rollout, Any], None] | None = None) -> tuple[list[Rollout], RolloutStats]:
        """Play every world once; return the rollouts in the order of ``worlds`` and the timing.

        ``explore_turns[i]``: the one turn of episode ``i`` answered by sampling at the sampler's
        temperature, every other turn greedily (a single deviation from the greedy policy, so a
        difference in return is that turn's doing); ``None`` (or no list) samples every turn.
        ``finish(rollout, env)`` is called for every episode once it is over, with its environment
        (for what only the environment knows: the episode's metrics and transcript)."""
        started = time.perf_counter()
        stats = RolloutStats(0, 0, 0, 0, 0.0, 0.0)
        out: list[Rollout] = []
        explore: list[int | None] = list(explore_turns) if explore_turns is not None else [None] * len(worlds)
        proposed = list(propose) if propose is not None else [False] * len(worlds)
        if len(explore) != len(worlds) or len(proposed) != len(worlds):
            raise ValueError("explore_turns and propose need one entry per world")
        if any(proposed) and (self.proposal is None or any(p and e is None for p, e in zip(proposed, explore,
                                                                                            strict=True))):
            raise ValueError("a proposed turn needs a proposal policy and an explore turn")
        for lo in range(0, len(worlds), self.batch_size):
            hi = lo + self.batch_size
            out.extend(self._play_chunk(list(worlds[lo:hi]), explore[lo:hi], proposed[lo:hi],
                                        seed * 1_000_003 + lo, stats, finish))
            if progress is not None:
                progress(len(worlds[lo:hi]))
        stats.episodes = len(out)
        stats.seconds = time.perf_counter() - started
        return out, stats

    # ------------------------------------------------------------------ internals

    def _play_chunk(self, worlds: list[World], explore: list[int | None], proposed: list[bool], seed: int,
                    stats: RolloutStats, finish: Callable[[Rollout, Any], None] | None = None) -> list[Rollout]:
        envs, convs, obs, rollouts = [], [], [], []
        for w in worlds:
            env, conv, o = self.start(w)
            envs.append(env)
            convs.append(conv)
            obs.append(o)
            rollouts.append(Rollout(world=w, messages=conv.transcript))
        self.run(envs, convs, obs, rollouts, explore, proposed, seed, stats)
        if finish is not None:
            for rollout, env in zip(rollouts, envs, strict=True):
                finish(rollout, env)
        return rollouts

    def start(self, world: World) -> tuple[Any, Conversation, Any]:
        """A fresh environment on ``world``, an empty conversation and the first observation."""
        from ..env import GpuArenaEnv

        env = GpuArenaEnv(task=world.task, split=world.split, seat=self.seat, opponents=self.opponents)
        return env, Conversation("tools"), env.reset(seed=world.seed)

    def run(self, envs: list[Any], convs: list[Conversation], obs: list[Any], rollouts: list[Rollout],
            explore: list[int | None], proposed: list[bool], seed: int, stats: RolloutStats) -> None:
        """Play episodes already started (``obs[i]`` not yet shown to ``convs[i]``) to their end;
        ``explore[i]`` counts turns from ``rollouts[i].turns`` (``-1``: greedy throughout)."""
        call = 0
        while True:
            live = [i for i, o in enumerate(obs) if not o.done]
            if not live:
                break
            for i in live:
                convs[i].observe(obs[i])
            answers: dict[int, Answer] = {}
            for i in live:
                if proposed[i] and explore[i] == rollouts[i].turns:
                    answers[i] = self.propose(envs[i], seed + i)
            sampled = [i for i in live if i not in answers and self.temperature > 0
                       and explore[i] in (None, rollouts[i].turns)]
            greedy = [i for i in live if i not in answers and i not in set(sampled)]
            for rows, temperature in ((sampled, self.temperature), (greedy, 0.0)):
                if rows:
                    answers.update(zip(rows, self.generate([convs[i].messages() for i in rows], seed + call, stats,
                                                           temperature, self.grammars([envs[i] for i in rows])),
                                       strict=True))
            call += 1
            for i in live:
                obs[i] = self.step(envs[i], convs[i], rollouts[i], answers[i])
                stats.turns += 1
        for conv, o in zip(convs, obs, strict=True):
            conv.observe(o)  # the closing turn ("The episode is over."), as the teacher's records end

    @staticmethod
    def step(env: Any, conv: Conversation, rollout: Rollout, answer: Answer) -> Any:
        """Write ``answer`` into the conversation, play it, book it on ``rollout``; the new observation."""
        content, calls, n_new = answer
        action = parse_action(calls if calls else content)
        conv.reply(content, calls)
        rollout.generated_tokens += n_new
        rollout.actions.append(action)
        if isinstance(action, FormatError):
            rollout.format_errors += 1
        o = env.step(action)
        rollout.episode_return += float(o.reward or 0.0)
        for c in REWARD_COLUMNS:
            rollout.columns[c] += float(o.reward_breakdown[c])
        if o.last_action_result.ok:
            rollout.valid_turns += 1
        return o

    def grammars(self, envs: Sequence[Any]) -> list[Any] | None:
        """The action grammar of each environment's seat, when decoding is constrained (else None)."""
        if not self.constrained:
            return None
        from ..llm.constrain import seat_grammar

        return [seat_grammar(env.episode.observe(self.seat)) for env in envs]

    def propose(self, env: Any, seed: int) -> Answer:
        """The proposal policy's action for the seat's current view, as a tool call."""
        from ..policies import make_policy
        from .data import render_reply

        driver = make_policy(str(self.proposal), seed=seed)
        content, calls = render_reply(driver.act(seat_view(driver, env.episode, self.seat)), "tools", "call_0")
        return content, calls, 0

    def generate(self, batch: list[list[dict[str, Any]]], seed: int, stats: RolloutStats, temperature: float,
                 grammars: Sequence[Any] | None = None) -> list[Answer]:
        """Answers to conversations, each read as the agents read it, in length-sorted groups of
        ``group_size`` prompts. Large groups are faster on the CPU: a small model's decoding steps
        cost more than the padded prefill (64 greedy episodes: 26 s in one group of 64, 69 s in
        groups of 16), so the default takes a round's prompts in one ``generate``. ``grammars[i]``:
        conversation ``i``'s action grammar, for constrained decoding."""
        tok = self.tokenizer
        prompts = [list(tok.apply_chat_template(m, tools=self.tools, add_generation_prompt=True, tokenize=True,
                                                return_dict=False)) for m in batch]
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        answers: dict[int, Answer] = {}
        for g, lo in enumerate(range(0, len(order), self.group_size)):
            rows = order[lo:lo + self.group_size]
            answers.update(zip(rows, self._generate_group([prompts[i] for i in rows], seed * 1009 + g, stats,
                                                          temperature, [grammars[i] for i in rows] if grammars else None),
                               strict=True))
        return [answers[i] for i in range(len(prompts))]

    def _generate_group(self, prompts: list[list[int]], seed: int, stats: RolloutStats, temperature: float,
                        grammars: list[Any] | None = None) -> list[Answer]:
        import torch

        from ..llm.agents import _parsed_tool_calls

        tok, model = self.tokenizer, self.model
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), int(tok.pad_token_id), dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, p in enumerate(prompts):  # left padding, as generation needs
            ids[row, width - len(p):] = torch.tensor(p, dtype=torch.long)
            mask[row, width - len(p):] = 1
        ids, mask = ids.to(model.device), mask.to(model.device)
        sample = temperature > 0
        kwargs: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "do_sample": sample,
                                  "pad_token_id": tok.pad_token_id, "eos_token_id": tok.eos_token_id}
        if sample:
            kwargs.update(temperature=temperature, top_p=self.top_p, top_k=0)
        if grammars is not None:
            from transformers import LogitsProcessorList

            from ..llm.constrain import GrammarConstraint

            grammar = GrammarConstraint(tok, grammars, width)
            # room for the longest reply the grammar allows: every constrained answer is complete
            kwargs["max_new_tokens"] = grammar.max_new_tokens(self.max_new_tokens)
            kwargs["logits_processor"] = LogitsProcessorList([grammar])
        was_training = model.training
        model.eval()
        t0 = time.perf_counter()
        try:
            with torch.inference_mode():
                if sample:
                    torch.manual_seed(seed)
                out = model.generate(input_ids=ids, attention_mask=mask, **kwargs)
        finally:
            if was_training:
                model.train()
        stats.generate_seconds += time.perf_counter() - t0
        stats.prompt_tokens += int(mask.sum())
        answers: list[Answer] = []
        for row in range(out.shape[0]):
            new = out[row, width:].cpu()
            ends = (new == tok.eos_token_id).nonzero()
            if len(ends):
                new = new[: int(ends[0]) + 1]  # keep the end token, as one unpadded generate returns it
            new = new[new != tok.pad_token_id]
            stats.generated_tokens += int(new.shape[0])
            prompt = torch.tensor(prompts[row], dtype=torch.long)
            text = tok.decode(new, skip_special_tokens=True)
            parsed = _parsed_tool_calls(tok, new, prompt, self.tools)
            if parsed is not None:
                answers.append((parsed[0], parsed[1], int(new.shape[0])))
            else:
                answers.append((text, None, int(new.shape[0])))
        return answers


__all__ = ["Answer", "BatchedSampler", "Rollout", "RolloutStats", "World"]
