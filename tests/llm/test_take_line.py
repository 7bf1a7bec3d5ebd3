"""The prompt's ``Take now:`` line (gpu_arena.llm.answering, decision 0048): it names the incoming
offer ``rule_expert`` would accept on that view, with the job its blocks go to, near the reply; on
the teacher's own turns every accept it makes is the line's, on every task."""

from __future__ import annotations

import pytest

from gpu_arena.llm.answering import take_line, take_plan
from llm_helpers import teacher_turns

TASKS = ["single_trade", "market_round", "coalition_market"]


@pytest.mark.parametrize("mode", ["tools", "compact"])
@pytest.mark.parametrize("task", TASKS)
def test_the_take_line_names_the_offer_the_teacher_accepts(task: str, mode: str) -> None:
    accepts = lines = 0
    for seed in range(4):
        for view, action, messages in teacher_turns(task, seed, mode):
            plan, line, text = take_plan(view), take_line(view), str(messages[-1]["content"])
            if plan is None:
                assert line is None and "Take now" not in text
            else:
                lines += 1
                assert plan.action_type == "accept_offer"
                assert line is not None and line in text.splitlines()[-4:]  # beside the reply
                assert f"accept_offer {plan.offer_id}" in line and (not plan.job_id or str(plan.job_id) in line)
                assert any(o.offer_id == plan.offer_id and o.direction == "incoming" for o in view.active_offers)
            if action.action_type == "accept_offer":
                accepts += 1  # the teacher takes what the line names, job and all
                assert plan is not None and (plan.offer_id, plan.job_id) == (action.offer_id, action.job_id)
    assert lines >= accepts >= 1


def test_no_incoming_offer_no_line() -> None:
    from gpu_arena.env import GpuArenaEnv

    env = GpuArenaEnv(task="single_trade", split="train")
    obs = env.reset(seed=0)
    assert not [o for o in obs.active_offers if o.direction == "incoming"]
    assert take_plan(obs) is None and take_line(obs) is None
