"""The tools/JSON turn's allocation line (gpu_arena.llm.prompts.blocks_to_allocate): it is the
turn's last line whenever it names blocks (only on turns with blocks due), and the teacher's
named allocations copy it (decision 0039)."""

from __future__ import annotations

import pytest

from gpu_arena.llm.prompts import blocks_to_allocate, due_blocks
from llm_helpers import teacher_turns

TASKS = ("single_trade", "market_round", "coalition_market")
LINE = "Allocate now (opening within two rounds; next round's idle otherwise): "


@pytest.mark.parametrize("task", TASKS)
def test_the_allocation_line_closes_the_turns_with_blocks_to_allocate(task: str) -> None:
    seen = 0
    for seed in range(4):
        for view, _action, messages in teacher_turns(task, seed, "tools"):
            text = str(messages[-1]["content"])
            due, allocate = due_blocks(view), blocks_to_allocate(view)
            assert allocate == sorted(allocate) and (due or not allocate)
            if allocate:
                seen += 1
                assert text.splitlines()[-1] == LINE + ", ".join(allocate), (task, seed)
            else:
                assert LINE not in text, (task, seed)
    assert seen > 0, task


def test_the_teachers_named_allocations_copy_the_line() -> None:
    """Where rule_expert names blocks (no job: its plan is the server's), it names the line's blocks:
    a model learning from its moves, or from lookahead moves it proposes, copies the ids it is shown."""
    named = copied = 0
    for task in TASKS:
        for seed in range(6):
            for view, action, _messages in teacher_turns(task, seed, "tools"):
                if action.action_type == "allocate_to_job" and action.block_ids and not action.job_id:
                    named += 1
                    copied += list(action.block_ids) == blocks_to_allocate(view)
    assert named >= 10 and copied == named, (copied, named)
