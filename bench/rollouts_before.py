"""The rollout loop as it was before the rollout engine (commit f512e09), kept runnable as the
baseline of ``bench_rollouts.py`` until decision 0027 records the figure.

Every turn, on one process: the whole conversation rendered with the chat template and tool
schemas and tokenized, each seat's action grammar built and compiled, one ``generate``, each
reply parsed with the tokenizer's response parser, the environment stepped. Only what the bench
needs is kept (no proposals, no lookahead); the code of those steps is the old code.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from gpu_arena.core.types import REWARD_COLUMNS
from gpu_arena.llm.parsing import FormatError, parse_action
from gpu_arena.llm.prompts import Conversation
from gpu_arena.llm.tools import action_tools
from gpu_arena.rollouts import Rollout, World

Answer = tuple[str, list[dict[str, Any]] | None, int]


class LoopBefore:
    """The old ``BatchedSampler`` (greedy, constrained or not) with ``model`` in the seat."""

    def __init__(self, model: Any, tokenizer: Any, *, constrained: bool, seat: str = "lab_0") -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.constrained = constrained
        self.seat = seat
        self.tools = action_tools()
        self.generate_seconds = 0.0
        self.turns = 0

    def play(self, worlds: Sequence[World]) -> list[Rollout]:
        from gpu_arena.env import GpuArenaEnv

        envs, convs, obs, rollouts = [], [], [], []
        for w in worlds:
            env = GpuArenaEnv(task=w.task, split=w.split, seat=self.seat)
            conv = Conversation("tools")
            envs.append(env)
            convs.append(conv)
            obs.append(env.reset(seed=w.seed))
            rollouts.append(Rollout(world=w, messages=conv.transcript))
        while True:
            live = [i for i, o in enumerate(obs) if not o.done]
            if not live:
                break
            for i in live:
                convs[i].observe(obs[i])
            answers = self.generate([convs[i].messages() for i in live], self.grammars([envs[i] for i in live]))
            for i, a in zip(live, answers, strict=True):
                obs[i] = self.step(envs[i], convs[i], rollouts[i], a)
                self.turns += 1
        for conv, o in zip(convs, obs, strict=True):
            conv.observe(o)
        for env, r in zip(envs, rollouts, strict=True):  # which engine played it (not timed then: recorded since)
            report = env.engine_report()
            r.engine, r.engine_reason = report.playing, report.reason
        return rollouts

    @staticmethod
    def step(env: Any, conv: Conversation, rollout: Rollout, answer: Answer) -> Any:
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
        if not self.constrained:
            return None
        from gpu_arena.llm import constrain

        out = []
        for env in envs:  # built whole every turn, as then: the caches the engine added are emptied first
            constrain._action_rule.cache_clear()
            constrain._SEAT_GRAMMARS.clear()
            out.append(constrain.seat_grammar(env.episode.observe(self.seat)))
        return out

    def generate(self, batch: list[list[dict[str, Any]]], grammars: Sequence[Any] | None) -> list[Answer]:
        tok = self.tokenizer
        prompts = [list(tok.apply_chat_template(m, tools=self.tools, add_generation_prompt=True, tokenize=True,
                                                return_dict=False)) for m in batch]
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        answers = dict(zip(order, self._generate_group([prompts[i] for i in order],
                                                       [grammars[i] for i in order] if grammars else None),
                           strict=True))
        return [answers[i] for i in range(len(prompts))]

    def _generate_group(self, prompts: list[list[int]], grammars: list[Any] | None) -> list[Answer]:
        import torch

        from gpu_arena.llm.agents import _parsed_tool_calls

        tok, model = self.tokenizer, self.model
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), int(tok.pad_token_id), dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, p in enumerate(prompts):
            ids[row, width - len(p):] = torch.tensor(p, dtype=torch.long)
            mask[row, width - len(p):] = 1
        kwargs: dict[str, Any] = {"max_new_tokens": 64, "do_sample": False, "pad_token_id": tok.pad_token_id,
                                  "eos_token_id": tok.eos_token_id}
        if grammars is not None:
            from transformers import LogitsProcessorList

            from gpu_arena.llm.matching import GrammarConstraint

            grammar = GrammarConstraint(tok, grammars, width, cache_matchers=False)  # compiled every turn, as then
            kwargs["max_new_tokens"] = grammar.max_new_tokens(64)
            kwargs["logits_processor"] = LogitsProcessorList([grammar])
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, **kwargs)
        self.generate_seconds += time.perf_counter() - t0
        answers: list[Answer] = []
        for row in range(out.shape[0]):
            new = out[row, width:].cpu()
            ends = (new == tok.eos_token_id).nonzero()
            if len(ends):
                new = new[: int(ends[0]) + 1]
            new = new[new != tok.pad_token_id]
            prompt = torch.tensor(prompts[row], dtype=torch.long)
            text = tok.decode(new, skip_special_tokens=True)
            parsed = _parsed_tool_calls(tok, new, prompt, self.tools)
            if parsed is not None:
                answers.append((parsed[0], parsed[1], int(new.shape[0])))
            else:
                answers.append((text, None, int(new.shape[0])))
        return answers


__all__ = ["LoopBefore"]
