"""The lookahead's guarantees: the improved episode never scores below the greedy one, its rollouts
score what the environment scores, a greedy roll-in follows the model's own episode, and the changed
turns become prompt-completion records that parse back and train through TRL."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from gpu_arena.env import GpuArenaEnv
from gpu_arena.llm.parsing import FormatError, parse_action
from gpu_arena.training.lookahead import correction_record, finish_with, improve
from gpu_arena.training.presets import load_pretrained
from gpu_arena.training.rft import fine_tune
from gpu_arena.training.rollouts import BatchedSampler, World
from training_helpers import replay

WORLDS = [World("single_trade", "train", s) for s in (3, 4, 5)]


def test_the_improved_episode_never_scores_below_the_greedy_one(tiny_sft: Path) -> None:
    model, tok = load_pretrained(tiny_sft)
    sampler = BatchedSampler(model, tok, temperature=1.0, max_new_tokens=40, proposal="random_valid")
    improved, stats = improve(sampler, WORLDS, samples=1, proposals=1, seed=3)
    greedy, _ = BatchedSampler(model, tok, temperature=0.0, max_new_tokens=40).play(WORLDS)
    assert stats.episodes > len(WORLDS)  # the forked continuations count as episodes the model played
    for x, g in zip(improved, greedy, strict=True):
        assert x.greedy_return == pytest.approx(g.episode_return, abs=1e-9)
        assert x.rollout.episode_return >= x.greedy_return - 1e-9
        assert x.rollout.episode_return == pytest.approx(replay(x.rollout.world, x.rollout.actions)[0], abs=1e-9)
        assert x.changed_turns == len(x.corrections)


def test_a_greedy_roll_in_labels_the_models_own_states(tiny_sft: Path) -> None:
    model, tok = load_pretrained(tiny_sft)
    sampler = BatchedSampler(model, tok, temperature=1.0, max_new_tokens=40, proposal="rule_expert")
    improved, _ = improve(sampler, WORLDS, samples=1, proposals=1, seed=3, finisher="rule_expert",
                          roll_in="greedy", prefer="proposal")
    greedy, _ = BatchedSampler(model, tok, temperature=0.0, max_new_tokens=40).play(WORLDS)
    assert [x.rollout.actions for x in improved] == [g.actions for g in greedy]  # it went on as the model did
    assert [x.greedy_return for x in improved] == [g.episode_return for g in greedy]
    records = [correction_record(m, a, k) for x in improved for k, (m, a) in enumerate(x.corrections)]
    assert records, "ties go to the rule_expert move, so an untrained model's states get its labels"
    for rec in records:
        assert rec["prompt"][0]["role"] == "system" and rec["prompt"][-1]["role"] in ("user", "tool")
        [reply] = rec["completion"]
        action = parse_action(reply.get("tool_calls") or reply["content"])
        assert not isinstance(action, FormatError)
    result = fine_tune(model, tok, records[:4], output_dir=str(tiny_sft.parent / "ft"), learning_rate=1e-3,
                       epochs=1, batch_size=2, seed=0, max_steps=2)
    assert result.training_loss > 0


def test_finishing_with_a_scripted_policy_plays_to_the_end() -> None:
    env = GpuArenaEnv(task="single_trade", split="train")
    env.reset(seed=4)
    fork = env.fork()
    rest = finish_with("rule_expert", fork, "lab_0", seed=0)
    assert fork.episode is not None and fork.episode.done
    other = env.fork()
    assert finish_with("rule_expert", other, "lab_0", seed=0) == rest  # a fork is deterministic
    assert env.episode is not None and not env.episode.done  # the original is untouched


def test_unknown_roll_in_is_refused(tiny_sft: Path) -> None:
    model, tok = load_pretrained(tiny_sft)
    with pytest.raises(ValueError, match="roll_in"):
        improve(BatchedSampler(model, tok), WORLDS[:1], roll_in="sideways")


def test_ranked_turns_become_preference_records_and_a_dpo_pass_trains(tiny_sft: Path) -> None:
    import torch

    from gpu_arena.training.lookahead import pair_record
    from gpu_arena.training.preference import fitting_pairs, preference_pass

    model, tok = load_pretrained(tiny_sft)
    # constrained: every greedy answer is readable, so each changed turn has its pair (an unreadable
    # answer has no action to write as the rejected move)
    sampler = BatchedSampler(model, tok, temperature=1.0, max_new_tokens=40, proposal="rule_expert", constrained=True)
    improved, _ = improve(sampler, WORLDS, samples=1, proposals=1, seed=3, finisher="rule_expert", pairs=True)
    plain, _ = improve(sampler, WORLDS, samples=1, proposals=1, seed=3, finisher="rule_expert")
    assert [x.rollout.actions for x in improved] == [x.rollout.actions for x in plain]  # pairs change no move
    assert all(not x.pairs for x in plain)
    records = [pair_record(m, c, w, k) for x in improved for k, (m, c, w) in enumerate(x.pairs)]
    assert len(records) == sum(x.changed_turns for x in improved) > 0
    for x in improved:  # every changed turn is paired: its better move over the greedy answer it beat
        assert [(len(m), a) for m, a in x.corrections] == [(len(m), c) for m, c, _w in x.pairs]
    for rec in records:
        chosen, rejected = (parse_action(r[0].get("tool_calls") or r[0]["content"]) for r in (rec["chosen"],
                                                                                              rec["rejected"]))
        assert not isinstance(chosen, FormatError) and not isinstance(rejected, FormatError)
        assert chosen != rejected and rec["prompt"][0]["role"] == "system"
    assert fitting_pairs(tok, records) == records and fitting_pairs(tok, records, max_length=16) == []
    # the reference is the model as it stands: with a step too small to move it, the loss is ln 2
    still = preference_pass(model, tok, records[:2], output_dir=str(tiny_sft.parent / "dpo"), learning_rate=1e-12,
                            beta=0.1, epochs=1, batch_size=2, seed=0)
    assert still.training_loss == pytest.approx(math.log(2), abs=1e-4)
    before = [p.detach().clone() for p in model.parameters()]
    result = preference_pass(model, tok, records[:4], output_dir=str(tiny_sft.parent / "dpo"), learning_rate=1e-2,
                             beta=0.1, epochs=2, batch_size=2, seed=0)
    assert math.isfinite(result.training_loss) and result.training_loss < math.log(2)  # the pairs are learnt
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_an_rft_run_adds_a_dpo_pass_on_its_changed_turns(tiny_sft: Path, tmp_path: Path) -> None:
    import json

    from gpu_arena.training.rft import RFTRun, run_rft

    run = RFTRun(output_dir=str(tmp_path / "rl"), model=str(tiny_sft), preset="tiny", seed_start=3, iterations=1,
                 worlds_per_iteration=3, proposal="rule_expert", finisher="rule_expert", constrained=True,
                 preference="dpo", db=str(tmp_path / "a.db"))
    run_rft(run)
    [metrics] = [json.loads(line) for line in (tmp_path / "rl" / "metrics.jsonl").read_text().splitlines()
                 if '"iteration"' in line]
    # constrained: every greedy answer is readable; ties go to it (prefer=greedy), so a change is a win
    assert metrics["pairs"] == metrics["pairs_trained"] == metrics["corrections"] > 0
    assert math.isfinite(metrics["dpo_loss"])


def test_every_proposal_policy_is_asked_and_the_first_keeps_its_seeds(tiny_sft: Path) -> None:
    model, tok = load_pretrained(tiny_sft)
    asked: list[tuple[str, int]] = []

    def run(proposal: str) -> list[float]:
        sampler = BatchedSampler(model, tok, temperature=1.0, max_new_tokens=40, proposal=proposal)
        pool = sampler.pool
        propose = pool.propose

        def recording(items: Any) -> Any:
            asked.extend((policy, seed) for _key, policy, seed in items)
            return propose(items)

        pool.propose = recording  # type: ignore[method-assign]
        improved, _ = improve(sampler, WORLDS[:2], samples=1, proposals=1, seed=3, finisher="rule_expert")
        return [x.greedy_return for x in improved]

    alone = run("random_valid")
    first = list(asked)
    asked.clear()
    both = run("random_valid,without:answer_offers")
    assert alone == both  # the greedy episode is the model's: more candidates do not change it
    assert {p for p, _ in asked} == {"random_valid", "without:answer_offers"}
    # the first policy's seeds on the first turn are those of a run with it alone
    assert [s for p, s in asked if p == "random_valid"][:2] == [s for _, s in first][:2]


def test_both_trains_the_changed_turns_in_a_pass_of_their_own(tiny_sft: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    import gpu_arena.training.rft as rft

    passes: list[list[str]] = []
    real = rft.fine_tune

    def recording(model: Any, tok: Any, records: list[dict[str, Any]], **kw: Any) -> Any:
        passes.append(["prompt" if "prompt" in r else "episode" for r in records])
        return real(model, tok, records, **kw)

    monkeypatch.setattr(rft, "fine_tune", recording)
    run = rft.RFTRun(output_dir=str(tmp_path / "rl"), model=str(tiny_sft), preset="tiny", seed_start=3, iterations=1,
                     worlds_per_iteration=3, proposal="rule_expert", finisher="rule_expert", constrained=True,
                     train_on="both", replay=2, teacher="rule_expert", db=str(tmp_path / "a.db"))
    rft.run_rft(run)
    [metrics] = [json.loads(line) for line in (tmp_path / "rl" / "metrics.jsonl").read_text().splitlines()
                 if '"iteration"' in line]
    assert metrics["corrections"] > 0 and len(passes) == 2
    first, second = passes
    assert len(first) == metrics["kept"] + 2  # the kept episodes and the teacher's replay
    assert second == ["prompt"] * metrics["corrections"]  # then the changed turns, as prompt-completion records
    assert metrics["trained_on"] == len(first) + len(second)
    with pytest.raises(rft.PresetError, match="train_on=both needs explore=lookahead"):
        rft.RFTRun(output_dir=str(tmp_path / "x"), model=str(tiny_sft), preset="tiny", explore="turn", anchors=False,
                   train_on="both").resolved().validate()


def test_cumulative_corrections_train_every_iterations_changed_turns(tiny_sft: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    import gpu_arena.training.rft as rft

    passes: list[int] = []
    rates: list[float] = []
    real = rft.fine_tune

    def recording(model: Any, tok: Any, records: list[dict[str, Any]], **kw: Any) -> Any:
        passes.append(len(records))
        rates.append(kw["learning_rate"])
        return real(model, tok, records, **kw)

    monkeypatch.setattr(rft, "fine_tune", recording)
    run = rft.RFTRun(output_dir=str(tmp_path / "rl"), model=str(tiny_sft), preset="tiny", seed_start=3, iterations=2,
                     worlds_per_iteration=3, proposal="rule_expert", finisher="rule_expert", constrained=True,
                     train_on="both", cumulative_corrections=True, corrections_lr_scale=0.25, replay=2,
                     teacher="rule_expert", learning_rate=1e-3, db=str(tmp_path / "a.db"))
    rft.run_rft(run)
    first, second = [json.loads(line) for line in (tmp_path / "rl" / "metrics.jsonl").read_text().splitlines()
                     if '"iteration"' in line]
    assert first["corrections"] > 0 and len(passes) == 4
    # the first iteration's changed turns are trained again in the second's corrections pass
    assert passes[1] == first["corrections_trained"] == first["corrections"]
    assert passes[3] == second["corrections_trained"] == first["corrections"] + second["corrections"]
    # the changed turns' pass at its own learning rate, the episodes' at the iteration's
    assert rates == pytest.approx([1e-3, 2.5e-4, 1e-3, 2.5e-4])


def test_cumulative_corrections_need_their_own_pass() -> None:
    from gpu_arena.training.presets import PresetError
    from gpu_arena.training.rft import RFTRun

    with pytest.raises(PresetError, match="needs train_on=both or corrections"):
        RFTRun(output_dir="x", model="m", preset="tiny", corrections_lr_scale=0.5).resolved().validate()
    with pytest.raises(PresetError, match="corrections_lr_scale must be a finite number above 0"):
        RFTRun(output_dir="x", model="m", preset="tiny", train_on="both",
               corrections_lr_scale=float("nan")).resolved().validate()
    with pytest.raises(PresetError, match="needs train_on=both"):
        RFTRun(output_dir="x", model="m", preset="tiny", train_on="corrections",
               cumulative_corrections=True).resolved().validate()


def test_a_kept_optimizer_carries_its_moments_from_pass_to_pass(tiny_sft: Path, tmp_path: Path) -> None:
    from gpu_arena.training.data import play_episode_record
    from gpu_arena.training.rft import kept_optimizer

    model, tok = load_pretrained(tiny_sft)
    records = [play_episode_record("rule_expert", "single_trade", "train", s).to_json() for s in range(4)]
    opt = kept_optimizer(model, 1e-3)
    fine_tune(model, tok, records, output_dir=str(tmp_path / "a"), learning_rate=1e-3, epochs=1.0, batch_size=2,
              seed=0, optimizer=opt)
    state = next(iter(opt.state.values()))
    assert int(state["step"]) == 2 and float(state["exp_avg_sq"].abs().sum()) > 0
    fine_tune(model, tok, records[:2], output_dir=str(tmp_path / "b"), learning_rate=2.5e-4, epochs=1.0,
              batch_size=2, seed=1, optimizer=opt)
    # the second pass stepped the same moments (2 + 1 steps) at its own rate
    assert int(next(iter(opt.state.values()))["step"]) == 3
    assert {g["lr"] for g in opt.param_groups} == {2.5e-4}


def test_keep_optimizer_hands_one_optimizer_to_every_pass(tiny_sft: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import gpu_arena.training.rft as rft

    seen: list[Any] = []
    real = rft.fine_tune

    def recording(model: Any, tok: Any, records: list[dict[str, Any]], **kw: Any) -> Any:
        seen.append(kw.get("optimizer"))
        return real(model, tok, records, **kw)

    monkeypatch.setattr(rft, "fine_tune", recording)
    for keep in (True, False):
        seen.clear()
        run = rft.RFTRun(output_dir=str(tmp_path / f"rl-{keep}"), model=str(tiny_sft), preset="tiny", seed_start=3,
                         iterations=2, worlds_per_iteration=0, replay=2, teacher="rule_expert", keep_optimizer=keep,
                         db=str(tmp_path / "a.db"))
        rft.run_rft(run)
        assert len(seen) == 2
        if keep:
            assert seen[0] is not None and seen[0] is seen[1]
        else:
            assert seen == [None, None]


def test_save_every_keeps_a_checkpoint_each_n_iterations(tiny_sft: Path, tmp_path: Path) -> None:
    import json

    import torch
    from safetensors.torch import load_file

    import gpu_arena.training.rft as rft
    from gpu_arena.training.presets import PresetError

    out = tmp_path / "rl"
    (out / "checkpoint-9").mkdir(parents=True)  # an earlier run's, overwritten: not mixed with this run's
    (out / "checkpoint-9" / "model.safetensors").write_text("stale")
    run = rft.RFTRun(output_dir=str(out), model=str(tiny_sft), preset="tiny", seed_start=3, iterations=3,
                     worlds_per_iteration=0, replay=2, teacher="rule_expert", save_every=1, overwrite=True,
                     db=str(tmp_path / "a.db"))
    rft.run_rft(run)
    # iterations 1 and 2; the third is the run's final checkpoint itself
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    assert json.loads((out / "checkpoint-2" / "arena_training.json").read_text())["iteration"] == 2
    weights = [load_file(str(d / "model.safetensors")) for d in (out / "checkpoint-1", out / "checkpoint-2", out)]
    name = next(iter(weights[0]))
    assert not torch.equal(weights[0][name], weights[1][name])  # each is its iteration's model
    assert not torch.equal(weights[1][name], weights[2][name])
    model, _ = load_pretrained(str(out / "checkpoint-1"))  # what llm:hf:OUT/checkpoint-1 loads
    assert model is not None
    with pytest.raises(PresetError, match="save_every must be a whole number"):
        rft.RFTRun(output_dir="x", model="m", preset="tiny", save_every=-2).resolved().validate()
