"""``gpu-arena runs moves``: a seat's allocations on due turns by their form, the due turns that
left a block idle, and messages sent again unchanged, read by replaying recorded episodes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpu_arena.cli.app import app
from gpu_arena.core.engine import Episode
from gpu_arena.core.policy import seat_view
from gpu_arena.core.types import Action
from gpu_arena.evaluation.replay import write_jsonl
from gpu_arena.policies import make_policy
from gpu_arena.training.moves import allocation_form, move_stats, repeated_moves


class SameOffer:
    """Sends one offer every turn, unchanged."""

    def act(self, obs: Any) -> Action:
        return Action("send_offer", target_lab_id="lab_1", requested_block_ids=("b_1_0",), payment=1.0, expires_in=1)


def _record(name: str, seed: int, policy: Any = None) -> dict[str, Any]:
    ep = Episode.new("coalition_market", "train", seed, controlled=("lab_0",))
    pol = policy or make_policy(name, seed=seed)
    while not ep.done:
        ep.step({"lab_0": pol.act(seat_view(pol, ep, "lab_0"))})
    return {"task": "coalition_market", "split": "train", "seed": seed, "policy": name, "seat": "lab_0",
            "transcript": ep.transcript}


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    return [_record(name, seed) for name in ("rule_expert", "rule_expert_short", "random_valid") for seed in range(6)] \
        + [_record("same_offer", 0, SameOffer())]


def test_the_teachers_allocate_every_due_turn_in_their_own_forms(records: list[dict[str, Any]]) -> None:
    rows = {r["policy"]: r for r in move_stats(records)}
    expert, short, rand = rows["rule_expert"], rows["rule_expert_short"], rows["random_valid"]
    # rule_expert names exactly the allocation line's blocks when it names any (decision 0039)
    assert expert["due_turns"] == expert["due_allocations"] > 0 and expert["due_missed"] == 0
    assert expert["forms"]["line"] > 0 and expert["forms"]["other_named"] == 0
    # the short-form teacher names blocks without a job only as the allocation line, where the whole
    # plan would allocate a block promised to a coalition (decision 0042): seldom
    assert short["due_turns"] == short["due_allocations"] > 0 and short["due_missed"] == 0
    assert short["forms"]["other_named"] == 0 and short["forms"]["short"] > 4 * short["forms"]["line"]
    # a random seat seldom allocates: its due blocks idle
    assert rand["due_missed"] > rand["due_turns"] // 2
    assert rows["same_offer"]["repeated"] == {"send_offer": rows["same_offer"]["turns"] - 1}
    assert 0 < rows["same_offer"]["repeated_open"] <= rows["same_offer"]["turns"] - 1  # its offer was still open
    assert rows["rule_expert"]["repeated_open"] == rows["rule_expert_short"]["repeated_open"] == 0
    # the teachers seldom repeat a move (an allocation made twice in a row, charged as spam)
    assert all(sum(rows[n]["repeated"].values()) <= 2 for n in ("rule_expert", "rule_expert_short"))


def test_allocation_forms() -> None:
    assert allocation_form({"action_type": "allocate_to_job"}, ["b_0_1"]) == "short"
    assert allocation_form({"block_ids": ["b_0_2", "b_0_1"]}, ["b_0_1", "b_0_2"]) == "line"
    assert allocation_form({"block_ids": ["b_0_1"]}, ["b_0_1", "b_0_2"]) == "other_named"
    assert allocation_form({"block_ids": ["b_0_1"], "job_id": "j_0_0"}, ["b_0_1"]) == "job"


def test_the_command_prints_a_table_a_task_and_refuses_what_is_not_a_replay(
        tmp_path: Path, records: list[dict[str, Any]]) -> None:
    path = tmp_path / "r.jsonl"
    write_jsonl(path, records)
    res = CliRunner().invoke(app, ["runs", "moves", str(path)], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    assert "rule_expert_short" in res.output and "coalition_market" in res.output
    assert max(len(line) for line in res.output.splitlines()) <= 80
    res = CliRunner().invoke(app, ["runs", "moves", str(path), "--task", "single_trade"], env={"COLUMNS": "80"})
    assert res.exit_code == 0 and "rule_expert" not in res.output  # no single_trade episode recorded
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"policy": "wait", "transcript": []}\n')
    res = CliRunner().invoke(app, ["runs", "moves", str(bad)])
    assert res.exit_code == 2 and "record 0 is not an episode replay" in res.output


def test_repeated_moves_of_a_rollout_count_as_the_spam_check_does() -> None:
    from gpu_arena.llm.parsing import FormatError
    from gpu_arena.models import ArenaAction

    offer = ArenaAction(action_type="send_offer", target_lab_id="lab_1", requested_block_ids=["b_1_0"], payment=2.0)
    other = ArenaAction(action_type="send_offer", target_lab_id="lab_1", requested_block_ids=["b_1_0"], payment=3.0)
    wait = ArenaAction(action_type="wait")
    assert repeated_moves([offer, offer, offer]) == 2
    assert repeated_moves([offer, other, offer]) == 0
    assert repeated_moves([offer, wait, offer]) == 0  # waiting clears what the next move is compared with
    assert repeated_moves([offer, FormatError("format_json", "x"), offer]) == 0
    assert repeated_moves([]) == 0
