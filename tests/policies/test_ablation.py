"""``without:<step>[:<policy>]`` (gpu_arena.policies.ablation, decision 0048): the teacher with one
step switched off never makes that step's move and otherwise plays as the teacher; bad names are
refused with the steps listed."""

from __future__ import annotations

import pytest

from gpu_arena.evaluation.runner import play_episode
from gpu_arena.policies import make_policy, policy_families, scripted_policies
from gpu_arena.policies.ablation import STEPS


def _moves(policy: str, task: str, seed: int) -> list[str]:
    """The action types lab_0 played, round by round."""
    result = play_episode(policy, task, "holdout", seed, keep_replay=True)
    assert result.replay is not None
    return [entry["actions"]["lab_0"]["action_type"] for entry in result.replay["transcript"]
            if "lab_0" in entry["actions"]]


def test_without_answers_the_teacher_accepts_nothing_and_loses_what_answers_bring() -> None:
    assert "without" in policy_families()
    taught = without = 0.0
    accepted = 0
    for seed in range(6):
        teacher = play_episode("rule_expert_short", "single_trade", "holdout", seed)
        ablated = play_episode("without:answer_offers", "single_trade", "holdout", seed)
        taught, without = taught + teacher.episode_return, without + ablated.episode_return
        moves = _moves("without:answer_offers", "single_trade", seed)
        assert "accept_offer" not in moves
        accepted += _moves("rule_expert_short", "single_trade", seed).count("accept_offer")
    assert accepted >= 1 and taught > without


def test_a_step_with_no_move_leaves_the_teacher_as_it_was() -> None:
    # single_trade has no pooled job: proposing a coalition never has a move there
    for seed in range(3):
        a = play_episode("without:propose_pool", "single_trade", "holdout", seed)
        b = play_episode("rule_expert_short", "single_trade", "holdout", seed)
        assert a.episode_return == b.episode_return


def test_the_policy_and_its_name() -> None:
    p = make_policy("without:buy:rule_expert", seed=3)
    assert p.name == "without:buy:rule_expert" and type(p).__name__ == "RuleExpertPolicy"
    assert make_policy("without:sell").name == "without:sell:rule_expert_short"
    assert make_policy("rule_expert").buy is not p.buy  # the class is untouched


@pytest.mark.parametrize("name", ["without:dance", "without:", "without:buy:no_negotiation", "without:buy:nobody"])
def test_bad_names_are_refused_plainly(name: str) -> None:
    with pytest.raises(ValueError) as e:
        make_policy(name)
    assert "step" in str(e.value) or "unknown policy" in str(e.value)
    if name == "without:dance":
        assert all(s in str(e.value) for s in STEPS)


def test_a_list_of_scripted_policies_is_read_and_checked() -> None:
    assert scripted_policies("rule_expert_short, without:buy,wait") == ("rule_expert_short", "without:buy", "wait")
    assert scripted_policies("random_valid") == ("random_valid",)


@pytest.mark.parametrize(("spec", "says"), [
    ("", "empty policy"), ("wait,,rule_expert", "empty policy"), ("wait,wait", "names a policy twice"),
    ("rule_expert,nobody", "unknown scripted policy 'nobody'"), ("without:dance", "unknown step 'dance'"),
    ("llm:hf:/tmp/x", "unknown scripted policy 'llm:hf:/tmp/x'"),  # a model is not loaded to check a name
])
def test_a_bad_list_of_scripted_policies_is_refused(spec: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        scripted_policies(spec)
