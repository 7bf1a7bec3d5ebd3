"""The short coalition proposal (gpu_arena.llm.pooling): ``form_coalition`` with its job alone is
filled by the pooled-job planner from the seat's own view; the teacher's proposals are written that
way and read back exactly as played; the turn's grammar, ``fits_ids`` and the prompt's Pool line
offer it exactly on the turns the planner has a plan; without a plan it stays what it is and the
rules refuse it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpu_arena.core.policy import seat_view
from gpu_arena.env import GpuArenaEnv
from gpu_arena.llm.agents import Completion
from gpu_arena.llm.constrain import POOLABLE, fits_ids, legal_lists, seat_grammar
from gpu_arena.llm.matching import grammar_tokenizer
from gpu_arena.llm.parsing import parse_action
from gpu_arena.llm.pooling import expand, is_short, pool_jobs, pool_line, pool_plan, shorten
from gpu_arena.llm.prompts import render_turn
from gpu_arena.llm.tools import render_reply
from gpu_arena.models import ArenaAction
from gpu_arena.policies import make_policy
from gpu_arena.training.presets import load_pretrained
from llm_helpers import grammar_takes, teacher_turns

SEEDS = range(8)  # train worlds of coalition_market: about three proposals of the teacher


def _short(job: str) -> ArenaAction:
    return ArenaAction(action_type="form_coalition", job_id=job)


def test_the_teachers_proposals_are_the_planners_and_come_back_from_the_short_form() -> None:
    proposals = 0
    for seed in SEEDS:
        for view, action, _messages in teacher_turns("coalition_market", seed, "tools"):
            if action.action_type != "form_coalition":
                assert shorten(action, view) is action
                continue
            proposals += 1
            short = shorten(action, view)
            assert is_short(short) and short.job_id == action.job_id
            assert pool_jobs(view) == [action.job_id]
            _, calls = render_reply(short, "tools", "call_0")
            assert calls is not None and calls[0]["function"]["arguments"] == {"job_id": action.job_id}
            filled = expand(parse_action(calls), view)
            assert isinstance(filled, ArenaAction) and not is_short(filled)
            assert render_reply(filled, "tools", "call_0") == render_reply(action, "tools", "call_0")
    assert proposals >= 2


def test_sft_records_write_the_short_form_and_play_as_the_teacher() -> None:
    from gpu_arena.training.data import play_episode_record

    short = 0
    for seed in range(4):
        record = play_episode_record("rule_expert", "coalition_market", "train", seed)
        calls = [c["function"] for m in record.messages for c in m.get("tool_calls") or []]
        short += sum(c["name"] == "form_coalition" and c["arguments"] == {"job_id": c["arguments"].get("job_id")}
                     for c in calls)
        env = GpuArenaEnv(task="coalition_market", split="train")
        env.reset(seed=seed)
        assert env.episode is not None
        teacher, total = make_policy("rule_expert", seed=seed), 0.0
        while not env.episode.done:
            total += float(env.step(teacher.act(seat_view(teacher, env.episode, "lab_0"))).reward or 0.0)
        assert record.episode_return == total, seed
    assert short >= 1


def test_the_pool_line_and_the_poolable_list_follow_the_plan() -> None:
    seen = 0
    for seed in SEEDS:
        for view, _action, messages in teacher_turns("coalition_market", seed, "tools"):
            plan, text = pool_plan(view), str(messages[-1]["content"])
            assert legal_lists(view)[POOLABLE] == ([plan.job_id] if plan else [])
            line = pool_line(view)
            if plan is None:
                assert line is None and "Pool now" not in text
                continue
            seen += 1
            assert line is not None and line in text.splitlines()[-3:]
            assert f"job_id {plan.job_id} alone" in line and all(m in line for m in plan.member_lab_ids)
    assert seen >= 2
    env = GpuArenaEnv(task="single_trade", split="train")
    obs = env.reset(seed=0)
    assert pool_line(obs) is None and "Pool now" not in render_turn(obs)


@pytest.fixture(scope="module")
def tokenizer(tiny_sft: Path) -> Any:
    return load_pretrained(tiny_sft)[1]


@pytest.mark.parametrize("mode", ["tools", "json"])
def test_the_grammar_offers_the_short_form_exactly_with_a_plan(tokenizer: Any, mode: str) -> None:
    """The compiled turn grammar, ``fits_ids`` and ``reply_fits`` (the generic grammar plus the
    lists) agree with the plan on every pooled job of every turn, in both reply frames."""
    from gpu_arena.llm.matching import reply_fits

    lltok = grammar_tokenizer(tokenizer)
    offered = refused = 0
    for seed in SEEDS[:5]:
        for view, _action, _messages in teacher_turns("coalition_market", seed, "tools"):
            lists = legal_lists(view)
            grammar = seat_grammar(view, mode).lark
            for job in [j.job_id for j in view.private_jobs if j.pooled]:
                fits, ids = grammar_takes(tokenizer, lltok, grammar, mode, _short(job))
                planned = job in pool_jobs(view)
                assert fits == planned == fits_ids("form_coalition", {"job_id": job}, lists), (seed, job)
                assert reply_fits(tokenizer, [*ids, tokenizer.eos_token_id], lists, mode) == planned
                offered += planned
                refused += not planned
    assert offered >= 2 and refused >= 2


def test_a_field_written_as_zero_is_not_the_short_form() -> None:
    env = GpuArenaEnv(task="coalition_market", split="train")
    obs = env.reset(seed=0)
    plan = pool_plan(obs)
    assert plan is not None
    job = str(plan.job_id)
    for extra in ({"payment": 0}, {"member_lab_ids": []}, {"shares": {}}, {"message": ""}):
        written = parse_action({"action_type": "form_coalition", "job_id": job, **extra})
        assert not is_short(written) and expand(written, obs) is written, extra
    assert is_short(parse_action({"action_type": "form_coalition", "job_id": job}))


def test_a_short_form_without_a_plan_is_left_to_the_rules() -> None:
    env = GpuArenaEnv(task="coalition_market", split="train")
    obs = env.reset(seed=0)
    job = next(j.job_id for j in obs.private_jobs if j.pooled)
    plan = pool_plan(obs)
    assert plan is not None and plan.job_id == job
    other = next(j.job_id for j in obs.private_jobs if not j.pooled)
    assert expand(_short(other), obs) == _short(other)  # no plan for it: unchanged
    full = ArenaAction(action_type="form_coalition", job_id=job, member_lab_ids=["lab_1"], requested_block_ids=["x"])
    assert expand(full, obs) is full
    after = env.step(_short(other))
    assert not after.last_action_result.ok and after.last_action_result.code  # the rules' code
    assert not after.active_coalitions  # nothing applied


def test_a_chat_agent_proposes_the_planners_coalition_from_the_short_form() -> None:
    from gpu_arena.llm import ChatAgent

    class OneReply(ChatAgent):
        def _complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Completion:
            return Completion(content=None, tool_calls=[{"id": "a", "type": "function", "function": {
                "name": "form_coalition", "arguments": '{"job_id": "' + job + '"}'}}])

    env = GpuArenaEnv(task="coalition_market", split="train")
    obs = env.reset(seed=0)
    plan = pool_plan(obs)
    assert plan is not None
    job = str(plan.job_id)
    agent = OneReply(mode="tools")
    action = agent.act(obs)
    assert isinstance(action, ArenaAction) and list(action.member_lab_ids or []) == list(plan.member_lab_ids)
    after = env.step(action)
    assert after.last_action_result.ok
    (coalition,) = after.active_coalitions
    assert coalition.job_id == job and set(coalition.members) == {"lab_0", *plan.member_lab_ids}
