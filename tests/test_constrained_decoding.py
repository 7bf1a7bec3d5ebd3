"""Id-constrained decoding: the legal ids come from the seat's own view and satisfy the rules' id
checks, the field tracker finds the value being typed, and a constrained model — in the batched
sampler and in ``llm:hf:DIR?constrained=1`` alike — writes only legal ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_arena.env import GpuArenaEnv
from gpu_arena.llm.constrain import FIELDS, legal_ids, open_field
from gpu_arena.llm.parsing import FormatError
from gpu_arena.models import ArenaAction
from gpu_arena.training.presets import load_pretrained
from gpu_arena.training.rollouts import BatchedSampler, World

ID_CODES = {"unknown_block", "block_not_owned", "block_started", "unknown_offer", "offer_not_addressed",
            "unknown_job", "job_not_owned", "unknown_lab"}


def test_open_field_finds_the_value_being_typed() -> None:
    head = '<tool_call>\n{"name": "send_offer", "arguments": {"target_lab_id": "lab_1", '
    assert open_field(head + '"requested_block_ids": ["b_1') == ("send_offer", "requested_block_ids", "b_1")
    assert open_field(head + '"requested_block_ids": ["b_1_0", "') == ("send_offer", "requested_block_ids", "")
    assert open_field(head + '"job_id": "j_0') == ("send_offer", "job_id", "j_0")
    assert open_field(head + '"requested_block_ids": ["b_1_0"], ') is None  # between fields
    assert open_field(head + '"payment": 2') is None  # a number is the model's own
    assert open_field('{"action_type": "accept_offer", "offer_id": "o_') == ("accept_offer", "offer_id", "o_")
    assert open_field('{"name": "sen') is None  # no action yet


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), task=st.sampled_from(["single_trade", "market_round", "coalition_market"]))
def test_every_legal_id_passes_the_rules_id_checks(seed: int, task: str) -> None:
    """A one-id action built from the legal lists is never refused for its id (it may be refused
    for something else: a price, a job the block cannot serve)."""
    env = GpuArenaEnv(task=task, split="train")
    env.reset(seed=seed)
    assert env.episode is not None
    view = env.episode.observe("lab_0")
    legal = legal_ids(view)
    assert set(legal) == set(FIELDS)
    actions: list[dict[str, Any]] = []
    for b in legal["allocate_to_job"]["block_ids"]:
        actions.append({"action_type": "allocate_to_job", "block_ids": [b]})
    for o in legal["accept_offer"]["offer_id"]:
        actions.append({"action_type": "accept_offer", "offer_id": o})
    labs = legal["send_offer"]["target_lab_id"]
    for b in legal["send_offer"]["requested_block_ids"]:
        owner = next(x.owner for x in view.public_market.blocks if x.block_id == b)
        assert owner in labs
        actions.append({"action_type": "send_offer", "target_lab_id": owner, "requested_block_ids": [b],
                        "payment": 0.01, "expires_in": 1})
    for a in actions:
        fork = env.fork()
        obs = fork.step(ArenaAction(**a))
        assert obs.last_action_result.ok or obs.last_action_result.code not in ID_CODES, (a, obs.last_action_result)


def _ids_are_legal(world: World, actions: list[Any]) -> None:
    env = GpuArenaEnv(task=world.task, split=world.split)
    env.reset(seed=world.seed)
    assert env.episode is not None
    for a in actions:
        legal = legal_ids(env.episode.observe("lab_0"))
        if not isinstance(a, FormatError) and a.action_type in legal:
            for name, values in legal[a.action_type].items():
                written = getattr(a, name)
                written = written if isinstance(written, list) else [] if written is None else [written]
                if values:  # an empty legal list leaves the model free (the rules refuse it)
                    assert set(written) <= set(values), (a.action_type, name, written, values)
        env.step(a)


def test_a_constrained_sampler_writes_only_legal_ids(tiny_sft: Path) -> None:
    model, tok = load_pretrained(tiny_sft)
    worlds = [World("single_trade", "holdout", s) for s in range(6)] + [World("market_round", "holdout", 0)]
    for temperature in (0.0, 1.5):
        rollouts, _ = BatchedSampler(model, tok, temperature=temperature, max_new_tokens=48,
                                     constrained=True).play(worlds, seed=5)
        for r in rollouts:
            _ids_are_legal(r.world, r.actions)


def test_the_constrained_agent_plays_as_the_constrained_sampler(tiny_sft: Path) -> None:
    """``llm:hf:DIR?constrained=1`` (one generate per turn) and the batched sampler give the same
    greedy episodes: the evaluated policy is the one the rollouts trained."""
    from gpu_arena.evaluation import run_evaluation

    model, tok = load_pretrained(tiny_sft)
    worlds = [World("single_trade", "holdout", s) for s in range(3)]
    rollouts, _ = BatchedSampler(model, tok, temperature=0.0, max_new_tokens=40, constrained=True).play(worlds)
    rows = run_evaluation([f"llm:hf:{tiny_sft}?mode=tools&max_tokens=40&constrained=1"], ["single_trade"],
                          "holdout", [0, 1, 2])
    assert [r.episode_return for r in sorted(rows, key=lambda r: r.seed)] == [r.episode_return for r in rollouts]
    with pytest.raises(ValueError, match="constrained"):
        run_evaluation([f"llm:hf:{tiny_sft}?constrained=2"], ["single_trade"], "holdout", [0])


def test_the_pipeline_evaluates_the_decoder_it_trained_with() -> None:
    from gpu_arena.training.pipeline import PipelineRun, llm_policy

    assert llm_policy(Path("run/rl"), True).endswith("&constrained=1")
    assert "constrained" not in llm_policy(Path("run/rl"))
    run = PipelineRun(output="run", constrained=True)
    assert "--constrained" in run.command_line() and run.resolved().constrained is True
    assert "--free" in PipelineRun(output="run", constrained=False).command_line()
