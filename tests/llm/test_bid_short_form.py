"""The short bid (gpu_arena.llm.buying, decision 0047): ``send_offer`` with its job alone is filled
by the teacher's bidding planner from the seat's own view; the teacher's bids are written that way
and read back exactly as played, on every task; the turn's grammar, ``fits_ids`` and the prompt's
Bid line offer it exactly on the turns the planner has a bid; without one it stays what it is and
the rules refuse it, nothing applied."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpu_arena.env import GpuArenaEnv
from gpu_arena.llm.agents import Completion
from gpu_arena.llm.answering import take_line
from gpu_arena.llm.buying import BID, bid_line, bid_plan
from gpu_arena.llm.constrain import BIDDABLE, fits_ids, legal_lists, seat_grammar
from gpu_arena.llm.matching import grammar_tokenizer
from gpu_arena.llm.parsing import parse_action
from gpu_arena.llm.shortform import expand, is_short, shorten
from gpu_arena.llm.tools import render_reply
from gpu_arena.models import ArenaAction
from gpu_arena.training.presets import load_pretrained
from llm_helpers import grammar_takes, teacher_turns

TASKS = ["single_trade", "market_round", "coalition_market"]


def _short(job: str) -> ArenaAction:
    return ArenaAction(action_type="send_offer", job_id=job)


def _is_bid(action: Any) -> bool:
    return action.action_type == "send_offer" and bool(action.requested_block_ids)


@pytest.mark.parametrize("task", TASKS)
def test_the_teachers_bids_are_the_planners_and_come_back_from_the_short_form(task: str) -> None:
    bids = shortened = 0
    for seed in range(4):
        for view, action, _messages in teacher_turns(task, seed, "tools"):
            if not _is_bid(action):
                assert not is_short(shorten(action, view)) or action.action_type == "form_coalition"
                continue
            bids += 1
            short = shorten(action, view)
            if not is_short(short):  # the teacher remembered something the fresh planner does not
                assert short is action
                continue
            shortened += 1
            assert short.job_id == action.job_id and BID.jobs(view) == [action.job_id]
            _, calls = render_reply(short, "tools", "call_0")
            assert calls is not None and calls[0]["function"]["arguments"] == {"job_id": action.job_id}
            filled = expand(parse_action(calls), view)
            assert isinstance(filled, ArenaAction) and not is_short(filled)
            assert render_reply(filled, "tools", "call_0") == render_reply(action, "tools", "call_0")
    assert bids >= 2 and shortened >= 0.9 * bids


def test_sft_records_write_the_short_bid_and_play_as_the_teacher() -> None:
    from gpu_arena.core.policy import seat_view
    from gpu_arena.policies import make_policy
    from gpu_arena.training.data import play_episode_record

    short = 0
    for task in TASKS:
        for seed in range(3):
            record = play_episode_record("rule_expert_short", task, "train", seed)
            calls = [c["function"] for m in record.messages for c in m.get("tool_calls") or []]
            short += sum(c["name"] == "send_offer" and list(c["arguments"]) == ["job_id"] for c in calls)
            env = GpuArenaEnv(task=task, split="train")
            env.reset(seed=seed)
            assert env.episode is not None
            teacher, total = make_policy("rule_expert_short", seed=seed), 0.0
            while not env.episode.done:
                total += float(env.step(teacher.act(seat_view(teacher, env.episode, "lab_0"))).reward or 0.0)
            assert record.episode_return == total, (task, seed)
    assert short >= 3


@pytest.mark.parametrize("task", TASKS)
def test_the_bid_line_and_the_biddable_list_follow_the_plan(task: str) -> None:
    seen = 0
    for seed in range(3):
        for view, _action, messages in teacher_turns(task, seed, "tools"):
            plan, text = bid_plan(view), str(messages[-1]["content"])
            assert legal_lists(view)[BIDDABLE] == ([plan.job_id] if plan and plan.job_id else [])
            line = bid_line(view)
            if plan is None or take_line(view):  # the teacher answers an offer before it bids
                assert (line is None or plan is not None) and "Bid now" not in text
                continue
            seen += 1
            assert line is not None and line in text.splitlines()[-3:]
            assert f"job_id {plan.job_id} alone pays {plan.target_lab_id}" in line
            assert all(b in line for b in plan.requested_block_ids)
    assert seen >= 2


@pytest.fixture(scope="module")
def tokenizer(tiny_sft: Path) -> Any:
    return load_pretrained(tiny_sft)[1]


@pytest.mark.parametrize("mode", ["tools", "json"])
def test_the_grammar_offers_the_short_bid_exactly_with_a_plan(tokenizer: Any, mode: str) -> None:
    """The compiled turn grammar, ``fits_ids`` and ``reply_fits`` agree with the plan on every open
    job of every turn, in both reply frames."""
    from gpu_arena.llm.matching import reply_fits

    lltok = grammar_tokenizer(tokenizer)
    offered = refused = 0
    for seed in range(3):
        for view, _action, _messages in teacher_turns("market_round", seed, "tools"):
            lists = legal_lists(view)
            grammar = seat_grammar(view, mode).lark
            for job in [j.job_id for j in view.private_jobs if j.status == "open"]:
                fits, ids = grammar_takes(tokenizer, lltok, grammar, mode, _short(job))
                planned = job in BID.jobs(view)
                assert fits == planned == fits_ids("send_offer", {"job_id": job}, lists), (seed, job)
                assert reply_fits(tokenizer, [*ids, tokenizer.eos_token_id], lists, mode) == planned
                offered += planned
                refused += not planned
    assert offered >= 2 and refused >= 2


def _first_bid(task: str = "market_round") -> tuple[GpuArenaEnv, Any, ArenaAction]:
    for seed in range(8):
        env = GpuArenaEnv(task=task, split="train")
        obs = env.reset(seed=seed)
        plan = bid_plan(obs)
        if plan is not None and plan.job_id:
            return env, obs, _short(str(plan.job_id))
    pytest.fail("no world with a bid on its first turn")


def test_a_field_written_as_zero_is_not_the_short_bid() -> None:
    _env, obs, short = _first_bid()
    for extra in ({"payment": 0}, {"requested_block_ids": []}, {"message": ""}, {"expires_in": 1}):
        written = parse_action({"action_type": "send_offer", "job_id": short.job_id, **extra})
        assert not is_short(written) and expand(written, obs) is written, extra
    assert is_short(parse_action({"action_type": "send_offer", "job_id": short.job_id}))


def test_a_short_bid_without_a_plan_is_left_to_the_rules() -> None:
    env, obs, short = _first_bid()
    other = next((j.job_id for j in obs.private_jobs if j.job_id != short.job_id), None)
    assert other is not None
    assert expand(_short(other), obs) == _short(other)  # no bid for it: unchanged
    assert not [o for o in obs.active_offers if o.sender == "lab_0"]
    after = env.step(_short(other))
    assert not after.last_action_result.ok and after.last_action_result.code  # the rules' code
    assert not [o for o in after.active_offers if o.sender == "lab_0"]  # nothing applied


def test_a_chat_agent_sends_the_planners_bid_from_the_short_form() -> None:
    from gpu_arena.llm import ChatAgent

    env, obs, short = _first_bid()
    plan = bid_plan(obs)
    assert plan is not None

    class OneReply(ChatAgent):
        def _complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Completion:
            return Completion(content=None, tool_calls=[{"id": "a", "type": "function", "function": {
                "name": "send_offer", "arguments": '{"job_id": "' + str(short.job_id) + '"}'}}])

    action = OneReply(mode="tools").act(obs)
    assert isinstance(action, ArenaAction)
    assert list(action.requested_block_ids or []) == list(plan.requested_block_ids)
    assert action.target_lab_id == plan.target_lab_id and action.payment == plan.payment
    after = env.step(action)
    assert after.last_action_result.ok
    assert any(o.sender == "lab_0" and list(o.requested_block_ids) == list(plan.requested_block_ids)
               for o in after.active_offers)


def test_the_planner_runs_once_a_view_and_again_for_the_next() -> None:
    from gpu_arena.llm.shortform import ShortForm

    env, obs, short = _first_bid()
    calls: list[Any] = []
    form = ShortForm("send_offer", lambda view: calls.append(view) or bid_plan(view))
    assert form.jobs(obs) == [short.job_id]  # the grammar's list, the line, the fill: one run
    assert form.planned(obs) == bid_plan(obs) and form.expand(_short(str(short.job_id)), obs) == expand(short, obs)
    assert calls == [obs]
    after = env.step(form.expand(_short(str(short.job_id)), obs))
    form.jobs(after)  # a new view is planned afresh, never served the last one's plan
    assert len(calls) == 2 and calls[1] is after
