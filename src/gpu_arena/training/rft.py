"""Expert iteration (rejection-sampling fine-tuning) against the live environment.

Each iteration plays ``worlds_per_iteration`` fresh ``train`` worlds with the current model
(:class:`~gpu_arena.training.rollouts.BatchedSampler`: the same prompts, parser and environment as
an evaluation of ``llm:hf:DIR?mode=tools``), keeps the episodes the environment scored above a
baseline (the world's greedy episode, or its samples' mean), and fine-tunes the model on them with
TRL's ``SFTTrainer`` (loss on the answers, the kept actions written as the teacher's records are),
beside ``replay`` fresh teacher episodes. How a world is explored (``explore``): whole sampled
episodes, one sampled turn per episode, or a lookahead that picks each turn's move among the
model's answers and a proposal policy's by forking the environment
(:mod:`gpu_arena.training.lookahead`). The reward is the environment's return, untouched.

Why this is the ``small`` preset's RL method (decision 0020): GRPO's per-token policy gradient on
8 whole-episode rollouts a step did not move a 2.3M-parameter model; a kept episode turns the same
comparison into a supervised target, at the cost of one batched sampling pass and one short SFT an
iteration. With ``worlds_per_iteration=0`` the run trains on the teacher replay alone: the
control that says what the environment-chosen episodes add (decision 0020 measures it).
"""

from __future__ import annotations

import random
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..core.types import SPLITS, TASKS
from ..policies import scripted_policies
from ..rollouts import BACKENDS as WORKER_BACKENDS
from .accel import Accel
from .common import check_output_dir, describe_model, logged_run, starting_model, use_cpu
from .curriculum import CURRICULA, world_tasks
from .lookahead import PREFER, ROLL_IN, correction_record, improve, pair_record
from .moves import repeated_moves
from .preference import check_preference, fitting_pairs, preference_pass
from .presets import (
    PresetError,
    check_positive,
    check_rft_sources,
    check_save_every,
    fill_defaults,
    get_preset,
    save_checkpoint,
)
from .progress import drop_printer
from .rollouts import BatchedSampler, Rollout, RolloutStats, World
from .runlog import RunLog


@dataclass
class RFTRun:
    """One expert-iteration run. ``None`` fields take the preset's value; ``model`` is the
    checkpoint to start from (the SFT output)."""

    output_dir: str
    model: str | None = None
    preset: str = "tiny"
    tasks: tuple[str, ...] = ("single_trade",)
    # how the iterations' worlds walk the tasks (curriculum.py): "mixed" draws each world's task from all of
    # them, "ordered" opens them in the order given
    curriculum: str = "mixed"
    split: str = "train"
    seed_start: int = 1000
    iterations: int | None = None
    worlds_per_iteration: int | None = None
    samples_per_world: int | None = None
    temperature: float | None = None
    learning_rate: float | None = None
    epochs: float | None = None
    batch_size: int | None = None
    min_return: float | None = None
    baseline: str | None = None  # "greedy" | "mean": what a kept episode must beat in its world
    # "lookahead": every turn's move chosen among candidates by the environment (lookahead.py) | "turn": one
    # sampled turn per episode, the rest greedy | "episode": every turn sampled
    explore: str | None = None
    proposal: str | None = None  # explore=turn: every other deviation is this policy's move (e.g. random_valid)
    # fine-tune each iteration on every kept episode so far (expert iteration's aggregate data set), and
    # on the greedy episodes of the worlds nothing beat (anchors: the rest of the policy stays put)
    cumulative: bool | None = None
    anchors: bool | None = None
    # fresh episodes of the SFT teacher mixed into every iteration's fine-tuning (the supervised term
    # kept beside the RL data, as InstructGPT's PPO-ptx keeps its pretraining term), 0 for none
    replay: int | None = None
    teacher: str | None = None
    # explore=lookahead: who finishes the forked episodes that score a candidate ("" the model, greedily;
    # a policy name: that scripted policy, whose return-to-go then values each move)
    finisher: str | None = None
    # explore=lookahead: the episodes go on with the best move ("best") or the model's own ("greedy": the
    # states the model reaches); ties go to the model's answer ("greedy") or to the proposal ("proposal");
    # fine-tune on whole episodes ("episodes"), on the changed turns alone ("corrections") or on both,
    # the changed turns in a pass of their own after the episodes ("both"): TRAIN_ON
    roll_in: str | None = None
    prefer: str | None = None
    train_on: str | None = None
    # train_on=both: the changed turns' pass trains on every iteration's changed turns so far (DAgger's
    # aggregate data set), not on this iteration's alone: a correction is learnt on every later pass too
    cumulative_corrections: bool | None = None
    # the changed turns' pass's learning rate over the iteration's (train_on=corrections or both): a pass
    # of a few records on a fresh optimizer moves every weight by about the learning rate a step
    corrections_lr_scale: float | None = None
    # one AdamW for the whole run, its moments kept from pass to pass and iteration to iteration (as an
    # online RL trainer keeps them), not a fresh one per pass: a fresh Adam's first steps move every
    # weight by about the learning rate whatever the gradient's size, in the direction of a few records
    keep_optimizer: bool | None = None
    # a checkpoint every this many iterations, in checkpoint-<iteration> under the output directory
    # (llm:hf:OUT/checkpoint-N loads it), as TRL's save_steps: which iteration gained or lost a task can
    # then be evaluated after the run, not only its end; None or 0: the final checkpoint alone
    save_every: int | None = None
    # a preference pass after each iteration's fine-tuning, on the lookahead's ranked turns
    # (training.preference): "" none | "dpo"; dpo_beta its temperature
    preference: str | None = None
    dpo_beta: float | None = None
    dpo_lr_scale: float | None = None  # the pass's learning rate: the iteration's times this
    # the learning rate over the iterations: "constant", or "linear" (from learning_rate down to
    # learning_rate / iterations at the last one, so the checkpoint does not end on a large step)
    lr_schedule: str | None = None
    # decode under the seat's action grammar (gpu_arena.llm.constrain) in every rollout, as the
    # evaluated policy llm:hf:DIR?constrained=1 does
    constrained: bool | None = None
    max_new_tokens: int = 64
    # the rollout engine's environment workers (gpu_arena.rollouts): 0 in this process, N worker processes
    # ("process") or Ray actors ("ray") that step, render, tokenize and parse while the model generates
    workers: int = 0
    backend: str = "process"
    seed: int = 0
    db: str | None = None
    overwrite: bool = False
    accel: Accel = field(default_factory=Accel)  # bf16, gradient checkpointing (the GPU recipe)

    def resolved(self) -> RFTRun:
        run = fill_defaults(self, get_preset(self.preset).rft)
        return replace(run, proposal=run.proposal or None)  # "" on the command line: no proposal policy

    def validate(self) -> None:
        for t in self.tasks:
            if t not in TASKS:
                raise PresetError(f"unknown task {t!r}; expected one of {', '.join(TASKS)}")
        if self.split not in SPLITS:
            raise PresetError(f"unknown split {self.split!r}; expected one of {', '.join(SPLITS)}")
        if self.curriculum not in CURRICULA:
            raise PresetError(f"unknown curriculum {self.curriculum!r}; expected one of {', '.join(CURRICULA)}")
        if self.model is None and get_preset(self.preset).model is not None:
            raise PresetError(f"RL with preset {self.preset} starts from a checkpoint: pass --model (the SFT output)")
        if (self.samples_per_world or 2) < 2:
            raise PresetError("samples_per_world must be at least 2 (episodes are kept against their world's mean)")
        if self.baseline not in (None, *BASELINES):
            raise PresetError(f"unknown baseline {self.baseline!r}; expected one of {', '.join(BASELINES)}")
        if self.explore not in (None, *EXPLORE):
            raise PresetError(f"unknown explore {self.explore!r}; expected one of {', '.join(EXPLORE)}")
        if self.anchors and self.explore != "lookahead":
            raise PresetError("anchors are the lookahead's unimproved greedy episodes: they need explore=lookahead")
        if self.proposal and self.explore == "episode":
            raise PresetError("a proposal policy supplies deviations: it needs explore=turn or lookahead")
        if self.proposal:
            try:
                scripted_policies(self.proposal)
            except ValueError as e:
                raise PresetError(f"proposal: {e}") from None
        if self.explore in ("turn", "lookahead") and self.baseline == "mean":
            raise PresetError("explore=turn deviates from the greedy episode: use baseline=greedy")
        if self.roll_in not in (None, *ROLL_IN) or self.prefer not in (None, *PREFER):
            raise PresetError(f"roll_in must be one of {', '.join(ROLL_IN)} and prefer one of {', '.join(PREFER)}")
        if self.lr_schedule not in (None, *LR_SCHEDULES):
            raise PresetError(f"unknown lr_schedule {self.lr_schedule!r}; expected one of {', '.join(LR_SCHEDULES)}")
        check_rft_sources(self.worlds_per_iteration, self.replay)
        if self.train_on not in (None, *TRAIN_ON):
            raise PresetError(f"unknown train_on {self.train_on!r}; expected one of {', '.join(TRAIN_ON)}")
        if self.train_on in ("corrections", "both") and self.explore != "lookahead":
            raise PresetError(f"corrections are the lookahead's changed turns: train_on={self.train_on} needs "
                              f"explore=lookahead")
        if self.cumulative_corrections and self.train_on != "both":
            raise PresetError("cumulative_corrections keeps the changed turns' own pass: it needs train_on=both "
                              "(train_on=corrections aggregates them with cumulative)")
        check_positive("corrections_lr_scale", self.corrections_lr_scale)
        check_save_every(self.save_every)
        if self.corrections_lr_scale is not None and self.train_on not in ("corrections", "both"):
            raise PresetError("corrections_lr_scale sets the changed turns' own pass: it needs train_on=both "
                              "or corrections")
        check_preference(self.preference, self.explore, self.dpo_beta, self.dpo_lr_scale)
        if (self.temperature or 0.0) <= 0:
            raise PresetError("temperature must be above 0 (greedy sampling gives every sample the same episode)")
        if self.workers < 0 or self.backend not in WORKER_BACKENDS:
            raise PresetError(f"workers must be 0 or more and backend one of {', '.join(WORKER_BACKENDS)}")
        self.accel.validate()


BASELINES = ("greedy", "mean")
EXPLORE = ("lookahead", "turn", "episode")
# what an iteration fine-tunes on: the kept episodes (with the teacher replay, one pass); the changed
# turns alone (a pass of the replay, then one of the changed turns); or both, the kept episodes and the
# replay, then the changed turns in a pass of their own, where they are not a few turns among whole
# episodes (decision 0052)
TRAIN_ON = ("episodes", "corrections", "both")
LOOKAHEAD_PROPOSALS = 2  # proposal-policy candidates per turn beside the greedy answer and the samples


def select_rollouts(rollouts: list[Rollout], min_return: float,
                    greedy: dict[World, float] | None = None) -> list[Rollout]:
    """The episodes to learn from: above their world's baseline (strictly), at least ``min_return``,
    every turn readable. The baseline is the greedy episode's return in that world when ``greedy``
    is given (what the evaluated, greedy policy does there now), else the mean of the world's
    samples. Worlds where nothing beats the baseline teach nothing."""
    groups: dict[World, list[Rollout]] = {}
    for r in rollouts:
        groups.setdefault(r.world, []).append(r)
    kept: list[Rollout] = []
    for world, rs in groups.items():
        base = greedy[world] if greedy is not None else statistics.fmean(r.episode_return for r in rs)
        kept.extend(r for r in rs if r.episode_return > base + 1e-9 and r.episode_return >= min_return
                    and not r.format_errors)
    return kept


def fine_tune(model: Any, tokenizer: Any, records: list[dict[str, Any]], *, output_dir: str, learning_rate: float,
              epochs: float, batch_size: int, seed: int, callbacks: list[Any] | None = None,
              max_steps: int = -1, scheduler: str = "constant", accel: Accel | None = None,
              optimizer: Any = None) -> Any:
    """One ``SFTTrainer`` pass (:class:`~gpu_arena.training.trainer.ArenaSFTTrainer`) over chat
    ``records`` (loss on the answers); returns TRL's train output. The model is trained in place.
    ``optimizer`` (:func:`kept_optimizer`): the pass steps it, at ``learning_rate``, and leaves its
    moments for the next pass; ``None``: a fresh one for this pass, as ``Trainer`` builds it."""
    from trl import SFTConfig

    from .data import records_to_dataset
    from .trainer import ArenaSFTTrainer

    if records and "prompt" in records[0]:  # prompt-completion records: the loss on the completion only
        from datasets import Dataset, Features, Json, List

        columns = ("prompt", "completion", "tools")
        dataset = Dataset.from_dict({k: [r[k] for r in records] for k in columns},
                                    features=Features({k: List(Json()) for k in columns}))
    else:
        dataset = records_to_dataset(records).select_columns(["messages", "tools"])
    args = SFTConfig(
        output_dir=output_dir, num_train_epochs=float(epochs), max_steps=max_steps,
        per_device_train_batch_size=int(batch_size), learning_rate=float(learning_rate),
        lr_scheduler_type=scheduler, warmup_steps=0, logging_steps=1, save_strategy="no", report_to="none",
        seed=seed, data_seed=seed, assistant_only_loss=True, max_length=8192, packing=False, use_cpu=use_cpu(),
        # batches of like lengths (random groups of 8 batches, sorted within): an iteration's records mix
        # short single_trade replays and long episodes, and padding to the batch's longest cost 13% a pass
        train_sampling_strategy="group_by_length",
        dataloader_num_workers=0, disable_tqdm=True, weight_decay=0.0, **(accel or Accel()).trainer_args(),
    )
    if optimizer is not None:
        # this pass's rate: the scheduler Trainer builds starts from each group's initial_lr
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"] = float(learning_rate)
    trainer = ArenaSFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
                              callbacks=callbacks, optimizers=(optimizer, None))
    drop_printer(trainer)
    return trainer.train()


def kept_optimizer(model: Any, learning_rate: float) -> Any:
    """The AdamW a run keeps across its passes (``RFTRun.keep_optimizer``): over the weights that
    train, with Trainer's defaults (betas 0.9 and 0.999, eps 1e-8) and no weight decay, as
    :func:`fine_tune`'s own. Its moments carry over, so a short pass on a few records steps by the
    gradients' size against everything trained before, not by the learning rate on each weight."""
    import torch

    return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=float(learning_rate),
                             betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)


LR_SCHEDULES = ("constant", "linear")


def iteration_lr(run: RFTRun, iteration: int) -> float:
    """The learning rate of iteration ``iteration`` (0-based) under ``run.lr_schedule``."""
    lr = float(run.learning_rate or 1e-4)
    if run.lr_schedule == "linear":
        n = int(run.iterations or 1)
        return lr * (n - iteration) / n
    return lr


REPLAY_SEED_START = 1_000_000  # teacher replay seeds: train worlds far from the SFT data's 0..N-1


def teacher_records(run: RFTRun, iteration: int, mode: str = "tools") -> list[dict[str, Any]]:
    """Iteration ``iteration``'s teacher replay: ``run.replay`` fresh episodes of ``run.teacher``
    on train worlds no earlier iteration (nor the SFT data) used, as SFT records in prompt ``mode``."""
    from .data import play_episode_record

    n = int(run.replay or 0)
    start = REPLAY_SEED_START + iteration * n
    return [play_episode_record(str(run.teacher or "rule_expert"), run.tasks[k % len(run.tasks)], run.split,
                                start + k, mode=mode).to_json()  # type: ignore[arg-type]
            for k in range(n)]


def explore_worlds(run: RFTRun, sampler: BatchedSampler, worlds: list[World], seed: int
                   ) -> tuple[list[Rollout], RolloutStats, dict[World, float] | None]:
    """One iteration's episodes, the run's way (``run.explore``), and each world's greedy return
    (``None`` with the mean baseline). ``stats.episodes`` counts every episode played, the
    lookahead's forked continuations included (each is an episode's worth of the model's work)."""
    if run.explore == "lookahead":
        improved, stats = improve(sampler, worlds, samples=int(run.samples_per_world or 2),
                                  proposals=LOOKAHEAD_PROPOSALS if run.proposal else 0, seed=seed,
                                  finisher=run.finisher or None, roll_in=str(run.roll_in or "best"),
                                  prefer=str(run.prefer or "greedy"), pairs=bool(run.preference))
        for x in improved:
            x.rollout.corrections = [correction_record(m, a, k, sampler.prompt_mode)
                                     for k, (m, a) in enumerate(x.corrections)]
            x.rollout.pairs = [pair_record(m, c, w, k, sampler.prompt_mode) for k, (m, c, w) in enumerate(x.pairs)]
        return [x.rollout for x in improved], stats, {x.rollout.world: x.greedy_return for x in improved}
    n = int(run.samples_per_world or 2)
    greedy: dict[World, float] | None = None
    turns_of: dict[World, int] = {}
    if run.baseline == "greedy":
        with BatchedSampler(sampler.model, sampler.tokenizer, temperature=0.0, max_new_tokens=sampler.max_new_tokens,
                            prompt_mode=sampler.prompt_mode) as plain:
            base_rollouts, base_stats = plain.play(worlds)
        greedy = {r.world: r.episode_return for r in base_rollouts}
        turns_of = {r.world: max(r.turns, 1) for r in base_rollouts}
    group = [w for w in worlds for _ in range(n)]
    # explore=turn: sample k of a world deviates from its greedy episode at turn k mod its length
    # (k // 2 with a proposal, so both kinds of deviation visit every turn)
    step = 2 if run.proposal else 1
    explore = [(k // step) % turns_of[w] for w in worlds for k in range(n)] if run.explore == "turn" else None
    # with a proposal policy, odd samples deviate with its move, even ones with the model's own sample
    propose = [bool(run.proposal) and explore is not None and k % 2 == 1 for _ in worlds for k in range(n)]
    rollouts, stats = sampler.play(group, seed=seed, explore_turns=explore, propose=propose)
    if greedy is not None:
        stats.episodes += base_stats.episodes
    return rollouts, stats, greedy


def run_rft(run: RFTRun, progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Train by expert iteration; write the checkpoint to ``run.output_dir``; log every iteration to
    the store and ``metrics.jsonl``. ``progress`` gets each iteration's metrics."""
    run = run.resolved()
    run.validate()
    preset = get_preset(run.preset)
    out = check_output_dir(run.output_dir, run.overwrite)
    for stale in out.glob("checkpoint-*"):  # an overwritten run's checkpoints are not mixed with this one's
        if stale.is_dir():  # a file of that name is not a checkpoint this command wrote
            shutil.rmtree(stale)
    start = starting_model(preset, run.model, None, run.seed)
    config = {"run": asdict(run), "preset": preset.to_dict(), "model_source": start.source,
              "model": describe_model(start.model), "method": "rft"}
    runlog = RunLog(kind="rft", config=config, output_dir=out, preset=run.preset, model=start.source, db=run.db)

    def train() -> dict[str, Any]:
        model, tok = start.model, start.tokenizer
        sampler = BatchedSampler(model, tok, temperature=float(run.temperature or 1.0),
                                 max_new_tokens=run.max_new_tokens, proposal=run.proposal,
                                 constrained=bool(run.constrained), workers=run.workers, worker_backend=run.backend,
                                 prompt_mode=preset.prompt_mode)
        try:
            return iterate(model, tok, sampler)
        finally:
            sampler.close()

    def iterate(model: Any, tok: Any, sampler: BatchedSampler) -> dict[str, Any]:
        n_worlds = int(run.worlds_per_iteration if run.worlds_per_iteration is not None else 1)
        rng = random.Random(run.seed)
        started = time.perf_counter()
        episodes = 0
        last: dict[str, Any] = {}
        aggregate: list[dict[str, Any]] = []
        memory: list[dict[str, Any]] = []  # the changed turns the corrections pass trains on (train_on=both)
        optimizer = kept_optimizer(model, iteration_lr(run, 0)) if run.keep_optimizer else None
        for it in range(int(run.iterations or 1)):
            base = run.seed_start + it * n_worlds
            worlds = [World(task, run.split, base + k) for k, task in
                      enumerate(world_tasks(run.tasks, run.curriculum, it, int(run.iterations or 1), n_worlds, rng))]
            t0 = time.perf_counter()
            if worlds:
                rollouts, stats, greedy = explore_worlds(run, sampler, worlds, run.seed * 7919 + it)
            else:  # no exploration: teacher replay alone (the supervised control of an RL run)
                rollouts, stats, greedy = [], RolloutStats(0, 0, 0, 0, 0.0, 0.0), None
            sample_s = time.perf_counter() - t0
            kept = select_rollouts(rollouts, float(run.min_return if run.min_return is not None else -1e9), greedy)
            changed = [c for r in rollouts for c in r.corrections]  # the lookahead's changed turns, as records
            memory = memory + changed if run.cumulative_corrections else changed
            if run.train_on == "corrections":  # the changed turns, not whole episodes
                new = changed
            else:
                new = [r.record("rft", sampler.prompt_mode) for r in kept]
                if run.anchors and greedy is not None and run.explore == "lookahead":
                    improved_worlds = {r.world for r in kept}
                    new += [r.record("rft-anchor", sampler.prompt_mode) for r in rollouts
                            if r.world not in improved_worlds and not r.format_errors]
            aggregate = aggregate + new if run.cumulative else new
            records = [r for r in aggregate if r]
            teacher = teacher_records(run, it, sampler.prompt_mode)
            if run.train_on == "corrections":  # two kinds of record, two passes: the teacher's, then the changes
                passes = [teacher, records]
            elif run.train_on == "both":  # the kept episodes and the teacher's, then the changed turns alone
                passes = [records + teacher, memory]
            else:
                passes = [records + teacher]
            t1 = time.perf_counter()
            loss = float("nan")
            # the changed turns' own pass (the last of two) at its own learning rate
            scales = [1.0, float(run.corrections_lr_scale or 1.0)] if run.train_on in ("corrections", "both") else [1.0]
            for part, scale in ((p, k) for p, k in zip(passes, scales, strict=True) if p):
                result = fine_tune(model, tok, part, output_dir=str(out / "trainer"),
                                   learning_rate=iteration_lr(run, it) * scale, epochs=float(run.epochs or 1),
                                   batch_size=int(run.batch_size or 4), seed=run.seed + it, accel=run.accel,
                                   optimizer=optimizer)
                loss = float(result.training_loss)
            pairs = fitting_pairs(tok, [p for r in rollouts for p in r.pairs]) if run.preference else []
            dpo_loss = float("nan")
            if pairs:
                dpo_loss = float(preference_pass(
                    model, tok, pairs, output_dir=str(out / "trainer"),
                    learning_rate=iteration_lr(run, it) * float(run.dpo_lr_scale or 1.0),
                    beta=float(run.dpo_beta or 0.1), epochs=float(run.epochs or 1), batch_size=int(run.batch_size or 4),
                    seed=run.seed + it, accel=run.accel).training_loss)
            train_s = time.perf_counter() - t1
            episodes += stats.episodes
            turns = sum(r.turns for r in rollouts)
            returns = [r.episode_return for r in rollouts]
            metrics = {
                "iteration": it + 1, "reward": statistics.fmean(returns) if returns else float("nan"),
                "reward_std": statistics.pstdev(returns) if returns else float("nan"), "lr": iteration_lr(run, it),
                "kept": len(kept), "trained_on": sum(len(p) for p in passes), "episodes": stats.episodes,
                "worlds": len(worlds), "kept_reward": statistics.fmean([r.episode_return for r in kept]) if kept
                else float("nan"),
                "greedy_reward": statistics.fmean(greedy.values()) if greedy else float("nan"),
                "replayed": int(run.replay or 0), "corrections": len(changed),
                # the changed turns the last pass trained on (with cumulative_corrections, every iteration's so far)
                "corrections_trained": len(passes[-1]) if run.train_on in ("corrections", "both") else 0,
                # the lookahead's pairs, and those short enough to train on (preference.fitting_pairs)
                "pairs": sum(len(r.pairs) for r in rollouts), "pairs_trained": len(pairs), "dpo_loss": dpo_loss,
                # no turns (teacher replay alone): no rates, rather than a valid-action rate of 0
                "loss": loss, "arena/valid_action_rate": sum(r.valid_turns for r in rollouts) / turns if turns
                else float("nan"),
                "arena/format_error_rate": sum(r.format_errors for r in rollouts) / turns if turns else float("nan"),
                # moves made again unchanged (charged as spam) in the episodes played, and in those kept
                "arena/repeated_moves": sum(repeated_moves(r.actions) for r in rollouts),
                "arena/repeated_moves_kept": sum(repeated_moves(r.actions) for r in kept),
                # episodes the model played to their end (lookahead: each forked continuation is one)
                "arena/episodes_per_min": 60.0 * stats.episodes / max(sample_s + train_s, 1e-9),
                "arena/worlds_per_min": 60.0 * len(worlds) / max(sample_s + train_s, 1e-9),
                "sample_s": sample_s, "train_s": train_s,
                "generated_tokens_per_s": stats.generated_tokens / max(stats.generate_seconds, 1e-9),
                # the rollout engine: turns a second while sampling, and the sampling's wall time split
                # between the model's generation and everything else (environment, forks, prompts)
                "arena/turns_per_s": stats.turns_per_s if stats.seconds else float("nan"),
                "generate_s": stats.generate_seconds, "env_s": max(sample_s - stats.generate_seconds, 0.0),
                "generate_share": stats.generate_seconds / max(sample_s, 1e-9),
                # which engine played the sampled episodes (a Rust episode that moved to Python counts as Python)
                "arena/rust_episodes": sum(r.engine == "rust" for r in rollouts),
                "arena/python_episodes": sum(r.engine == "python" for r in rollouts),
                "elapsed_s": time.perf_counter() - started,
            }
            runlog.log(it + 1, metrics)
            if run.save_every and (it + 1) % run.save_every == 0 and it + 1 < int(run.iterations or 1):
                # the run's last iteration is the final checkpoint itself, written below
                save_checkpoint(model, tok, out / f"checkpoint-{it + 1}",
                                meta={"kind": "rft", "run_id": runlog.run_id, "iteration": it + 1, **config})
            last = metrics
            if progress is not None:
                progress(metrics)
        wall = time.perf_counter() - started
        summary = {"iterations": int(run.iterations or 1), "steps": int(run.iterations or 1), "episodes": episodes,
                   "episodes_per_min": 60.0 * episodes / max(wall, 1e-9), "final": last,
                   "train_loss": last.get("loss"), "model": describe_model(model)}
        save_checkpoint(model, tok, out, meta={"kind": "rft", "run_id": runlog.run_id, **config, "summary": summary})
        return summary

    return logged_run(runlog, train)


__all__ = ["RFTRun", "fine_tune", "run_rft", "select_rollouts"]
