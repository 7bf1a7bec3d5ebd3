"""``gpu-arena train``: SFT, GRPO, expert iteration (RFT) and the whole pipeline, with its
evidence and comparisons, and a preset's starting model. Only typer and rich load with the
command; the training stack loads inside each command, so ``gpu-arena --help`` stays fast."""

from __future__ import annotations

import json

import typer

from ..core.types import MAX_SEED  # world seeds: 64-bit, as every store keeps them
from .console import FitTable, console
from .options import MAX_SEEDS, split_list, task_list
from .train_checks import (
    BF16_HELP,
    CKPT_HELP,
    DPO_BETA_HELP,
    DPO_LR_SCALE_HELP,
    MAX_TRAIN_SEED,
    PREFERENCE_HELP,
    VLLM_HELP,
    VLLM_MODE_HELP,
    check_env_url,
    check_finite,
    check_number,
    check_opponents,
    check_output,
    check_proposals,
    check_scripted,
    check_start,
    fail,
    train_errors,
    training_accel,
)

train_app = typer.Typer(add_completion=False, no_args_is_help=True,
                        help="Train LLM negotiators: SFT, then multi-turn GRPO against the live environment.")


@train_app.command("sft")
def train_sft(
    data: str = typer.Option(..., help="SFT data (a `gpu-arena data sft` directory or its sft.jsonl)"),
    output: str = typer.Option(..., "--output", "-o", help="checkpoint directory to write"),
    preset: str = typer.Option("tiny", help="tiny | small | smollm2 (hyperparameters, and the model if no --model)"),
    model: str | None = typer.Option(None, help="start from this checkpoint directory or .gguf file "
                                                "(default: the preset's model)"),
    epochs: float | None = typer.Option(None, help="epochs (default: the preset's)"),
    lr: float | None = typer.Option(None, "--lr", help="learning rate"),
    batch_size: int | None = typer.Option(None, min=1, help="episodes per device batch"),
    grad_accum: int | None = typer.Option(None, min=1, help="gradient accumulation steps"),
    max_length: int | None = typer.Option(None, min=64, help="truncate episodes to this many tokens"),
    max_steps: int | None = typer.Option(None, min=1, help="stop after this many optimiser steps"),
    lora: bool | None = typer.Option(None, "--lora/--full", help="LoRA adapters (merged at the end) or full fine-tune"),
    assistant_only: bool | None = typer.Option(None, "--assistant-only/--whole-chat",
                                               help="loss on the answers only (default), or on whole chats"),
    group_by_length: bool | None = typer.Option(None, "--group-by-length/--random-batches",
                                                help="batch chats of about the same length (less padding; "
                                                     "default: the preset's)"),
    seed: int = typer.Option(0, min=0, max=MAX_TRAIN_SEED, help="seed (initialisation, data order)"),
    db: str | None = typer.Option(None, help="SQLite store (default .arena/arena.db or $GPU_ARENA_DB)"),
    overwrite: bool = typer.Option(False, help="write into a non-empty --output"),
    bf16: bool = typer.Option(False, "--bf16", help=BF16_HELP),
    gradient_checkpointing: bool = typer.Option(False, "--gradient-checkpointing", help=CKPT_HELP),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="show third-party warnings and logs"),
) -> None:
    """Supervised fine-tuning on arena chats (TRL SFTTrainer, loss on the assistant turns only)."""
    from pathlib import Path

    check_number("--epochs", epochs)
    check_number("--lr", lr)
    if not Path(data).exists():
        raise typer.BadParameter(f"--data {data}: no such file or directory")
    check_start(preset, model)
    check_output("--output", output)
    from ..training.progress import StageProgress, quiet_third_party
    from ..training.sft import SFTRun, run_sft

    try:
        accel = training_accel(bf16=bf16, gradient_checkpointing=gradient_checkpointing)
        accel.validate()
        with quiet_third_party(verbose), StageProgress("sft", max_steps or 0, console=console) as bar:
            result = run_sft(SFTRun(data=data, output_dir=output, preset=preset, model=model, epochs=epochs,
                                    learning_rate=lr, batch_size=batch_size, grad_accum=grad_accum,
                                    max_length=max_length, max_steps=max_steps, lora=lora,
                                    assistant_only_loss=assistant_only, group_by_length=group_by_length,
                                    seed=seed, db=db, overwrite=overwrite,
                                    accel=accel),
                             display=bar)
    except train_errors() as e:
        raise fail(e) from None
    console.print(f"SFT run {result['run_id']}: {result['steps']} steps, train loss {result['train_loss']:.4f}, "
                  f"{result['model']['parameters']:,} parameters, {result['duration_s']:.0f} s; checkpoint {output} "
                  f"(play it: llm:hf:{output}?mode=tools)")


@train_app.command("grpo")
def train_grpo(
    output: str = typer.Option(..., "--output", "-o", help="checkpoint directory to write"),
    model: str | None = typer.Option(None, help="checkpoint to start from (the SFT output); smollm2: default GGUF"),
    preset: str = typer.Option("tiny", help="tiny | small | smollm2 (hyperparameters)"),
    task: str = typer.Option("single_trade", "--task", "--tasks", help="comma-separated tasks"),
    split: str = typer.Option("train", help="train | holdout (train on train)"),
    seeds: int = typer.Option(200, min=1, max=MAX_SEEDS, help="worlds seed_start..seed_start+N-1 per task"),
    seed_start: int = typer.Option(1000, min=0, max=MAX_SEED, help="first world seed"),
    env_url: str | None = typer.Option(None, help="play against a GPU Arena server (http://host:port) "
                                                  "instead of in-process"),
    opponents: str | None = typer.Option(None, help="one policy for every other seat (default: the world's "
                                                    "archetypes), or league:topK: each world draws one of the "
                                                    "newest league's K best-rated entrants"),
    max_steps: int | None = typer.Option(None, "--max-steps", "--steps", min=1,
                                         help="optimiser steps (default: the preset's)"),
    generations: int | None = typer.Option(None, min=2, help="rollouts per world (the GRPO group)"),
    prompts_per_step: int | None = typer.Option(None, min=1, help="worlds per step"),
    lr: float | None = typer.Option(None, "--lr", help="learning rate"),
    temperature: float | None = typer.Option(None, help="sampling temperature"),
    max_completion_length: int | None = typer.Option(None, min=64, help="token budget of a whole rollout "
                                                                        "(tool results included)"),
    max_turn_tokens: int = typer.Option(128, min=8, help="tokens the model may generate per turn"),
    beta: float | None = typer.Option(None, min=0.0, help="KL coefficient against the starting model (0: none)"),
    scale_rewards: str | None = typer.Option(None, help="advantage scaling: group | batch | none "
                                                        "(default: the preset's)"),
    lora: bool | None = typer.Option(None, "--lora/--full", help="LoRA adapters (merged at the end) or full"),
    rollouts: str | None = typer.Option(None, help="engine (every episode of a step at once on the rollout "
                                                   "engine) | trl (TRL's tool-call loop; needed for --env-url)"),
    constrained: bool | None = typer.Option(None, "--constrained/--free", help="engine: decode under the seat's "
                                            "action grammar (default: the preset's)"),
    workers: int = typer.Option(0, min=0, help="engine: environment worker processes (0: in this process)"),
    backend: str = typer.Option("process", help="engine: the workers as process | ray"),
    seed: int = typer.Option(0, min=0, max=MAX_TRAIN_SEED, help="seed (sampling, data order)"),
    db: str | None = typer.Option(None, help="SQLite store (default .arena/arena.db or $GPU_ARENA_DB)"),
    overwrite: bool = typer.Option(False, help="write into a non-empty --output"),
    use_vllm: bool = typer.Option(False, "--use-vllm", help=VLLM_HELP),
    vllm_mode: str = typer.Option("colocate", help=VLLM_MODE_HELP),
    vllm_server_url: str | None = typer.Option(None, help="server mode: the `trl vllm-serve` address"),
    bf16: bool = typer.Option(False, "--bf16", help=BF16_HELP),
    gradient_checkpointing: bool = typer.Option(False, "--gradient-checkpointing", help=CKPT_HELP),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="show third-party warnings and logs"),
) -> None:
    """Multi-turn GRPO: whole episodes against the environment, the seat's actions as tools, the
    episode return as the reward (TRL GRPOTrainer fed by the rollout engine, or its own tool loop)."""
    from ..training.grpo import GRPORun, run_grpo
    from ..training.presets import get_preset
    from ..training.progress import StageProgress, quiet_third_party

    check_number("--lr", lr)
    check_number("--temperature", temperature)  # GRPO samples: 0 would divide the logits by zero
    check_number("--beta", beta, zero=True)
    try:
        total = max_steps or get_preset(preset).grpo.max_steps
        accel = training_accel(use_vllm, vllm_mode, vllm_server_url, bf16, gradient_checkpointing)
        run = GRPORun(
            output_dir=output, model=model, preset=preset, tasks=task_list(task, "--task"), split=split,
            seeds=tuple(range(seed_start, seed_start + seeds)), env_url=env_url,
            opponents=check_opponents(opponents, league=True),
            max_steps=max_steps, num_generations=generations, prompts_per_step=prompts_per_step,
            learning_rate=lr, temperature=temperature, max_completion_length=max_completion_length,
            max_turn_tokens=max_turn_tokens, beta=beta, scale_rewards=scale_rewards, lora=lora, rollouts=rollouts,
            constrained=constrained, workers=workers, backend=backend, seed=seed, db=db, overwrite=overwrite,
            accel=accel)
        run.resolved().validate()  # the run's own checks (split, --model, --scale-rewards, ...) first
        check_start(preset, model)
        check_output("--output", output)
        check_env_url(env_url)
        with quiet_third_party(verbose), StageProgress("grpo", total, console=console) as bar:
            result = run_grpo(run, display=bar)
    except train_errors() as e:
        raise fail(e) from None
    except ConnectionError as e:  # the server went away during the run
        if env_url is None:
            raise
        console.print(f"[red]error:[/red] the arena server at {env_url} could not be reached: {e}")
        raise typer.Exit(1) from None
    final = result.get("final") or {}
    console.print(f"GRPO run {result['run_id']}: {result['steps']} steps in {result['duration_s']:.0f} s; last step "
                  f"reward {final.get('reward', float('nan')):+.4f}; checkpoint {output} (llm:hf:{output}?mode=tools)")


@train_app.command("rft")
def train_rft(
    output: str = typer.Option(..., "--output", "-o", help="checkpoint directory to write"),
    model: str = typer.Option(..., help="checkpoint to start from (the SFT output)"),
    preset: str = typer.Option("tiny", help="tiny | small | smollm2 (hyperparameters)"),
    task: str = typer.Option("single_trade", "--task", "--tasks", help="comma-separated tasks"),
    curriculum: str = typer.Option("mixed", help="mixed (each world's task drawn from all) | ordered (the tasks "
                                                 "opened in the order given, earlier ones kept in the mix)"),
    seed_start: int = typer.Option(1000, min=0, max=MAX_SEED,
                                   help="first train world seed (each iteration takes fresh ones)"),
    max_steps: int | None = typer.Option(None, "--max-steps", "--iterations", min=1,
                                         help="iterations: sample, keep the better episodes, fine-tune"),
    worlds: int | None = typer.Option(None, min=0, max=MAX_SEEDS, help="fresh train worlds per iteration (0: teacher replay "
                                                         "alone, the supervised control)"),
    samples: int | None = typer.Option(None, min=2, help="sampled episodes per world (the group)"),
    temperature: float | None = typer.Option(None, help="sampling temperature"),
    lr: float | None = typer.Option(None, "--lr", help="learning rate of each fine-tuning pass"),
    lr_schedule: str | None = typer.Option(None, help="constant | linear (down over the iterations)"),
    epochs: float | None = typer.Option(None, min=0.01, help="passes over each iteration's records"),
    explore: str | None = typer.Option(None, help="lookahead | turn | episode"),
    proposal: str | None = typer.Option(None, help="scripted policies whose moves are candidates, comma-separated "
                                                          "(rule_expert_short,without:buy; '' for none)"),
    finisher: str | None = typer.Option(None, help="lookahead: scripted policy finishing the forks ('' the model)"),
    roll_in: str | None = typer.Option(None, help="lookahead: go on with the best move or the model's (best | "
                                                  "greedy)"),
    prefer: str | None = typer.Option(None, help="lookahead ties: greedy | proposal"),
    train_on: str | None = typer.Option(None, help="episodes | corrections (the lookahead's changed turns) | both (the "
                                                  "changed turns in a pass of their own after the episodes)"),
    cumulative_corrections: bool | None = typer.Option(None, "--cumulative-corrections/--no-cumulative-corrections",
                                                       help="train-on both: the changed turns' pass trains on every "
                                                            "iteration's so far (DAgger's aggregate)"),
    corrections_lr_scale: float | None = typer.Option(None, "--corrections-lr-scale",
                                                      help="the changed turns' pass's learning rate over the "
                                                           "iteration's"),
    keep_optimizer: bool | None = typer.Option(None, "--keep-optimizer/--fresh-optimizer",
                                               help="one AdamW for the run, its moments kept from pass to pass "
                                                    "(default: a fresh one each pass)"),
    save_every: int | None = typer.Option(None, "--save-every", min=0,
                                          help="a checkpoint every N iterations, OUT/checkpoint-N (0: the final "
                                               "one alone)"),
    preference: str | None = typer.Option(None, help=PREFERENCE_HELP),
    dpo_beta: float | None = typer.Option(None, "--dpo-beta", help=DPO_BETA_HELP),
    dpo_lr_scale: float | None = typer.Option(None, "--dpo-lr-scale", help=DPO_LR_SCALE_HELP),
    replay: int | None = typer.Option(None, min=0, max=MAX_SEEDS,
                                      help="fresh teacher episodes mixed into each iteration"),
    teacher: str | None = typer.Option(None, help="the replayed teacher policy"),
    constrained: bool | None = typer.Option(None, "--constrained/--free",
                                            help="decode under the seat's action grammar in rollouts"),
    cumulative: bool | None = typer.Option(None, "--cumulative/--no-cumulative",
                                           help="fine-tune on every kept episode so far"),
    anchors: bool | None = typer.Option(None, "--anchors/--no-anchors",
                                        help="and on the unimproved worlds' greedy episodes"),
    min_return: float | None = typer.Option(None, help="keep only episodes with at least this return"),
    workers: int = typer.Option(0, min=0, help="environment workers holding the episodes while the model "
                                                "generates (0: in this process)"),
    backend: str = typer.Option("process", help="the workers: process (local processes) | ray (Ray actors)"),
    seed: int = typer.Option(0, min=0, max=MAX_TRAIN_SEED, help="seed (sampling, data order)"),
    db: str | None = typer.Option(None, help="SQLite store (default .arena/arena.db or $GPU_ARENA_DB)"),
    overwrite: bool = typer.Option(False, help="write into a non-empty --output"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="show third-party warnings and logs"),
) -> None:
    """Expert iteration against the live environment: per iteration, play fresh train worlds (whole
    sampled episodes, one sampled turn, or a lookahead that lets the environment pick each move), keep
    the episodes that beat the greedy policy's, fine-tune on them with any teacher replay (TRL
    SFTTrainer), repeat. Options left out take the preset's values."""
    from ..training.presets import get_preset
    from ..training.progress import StageProgress, quiet_third_party
    from ..training.rft import RFTRun, run_rft

    check_number("--temperature", temperature)  # sampling: 0 gives every sample the same episode
    check_number("--lr", lr)
    check_number("--epochs", epochs)
    check_finite("--min-return", min_return)
    check_number("--dpo-beta", dpo_beta)
    check_number("--dpo-lr-scale", dpo_lr_scale)
    check_number("--corrections-lr-scale", corrections_lr_scale)
    check_proposals("--proposal", proposal)
    check_scripted("--finisher", finisher, none=True)
    check_scripted("--teacher", teacher)
    try:
        total = max_steps or get_preset(preset).rft.iterations
        run = RFTRun(output_dir=output, model=model, preset=preset, tasks=task_list(task, "--task"),
                     curriculum=curriculum, seed_start=seed_start,
                     iterations=max_steps, worlds_per_iteration=worlds, samples_per_world=samples,
                     temperature=temperature, learning_rate=lr, lr_schedule=lr_schedule, epochs=epochs,
                     explore=explore, proposal=proposal, finisher=finisher, roll_in=roll_in, prefer=prefer,
                     train_on=train_on, cumulative_corrections=cumulative_corrections,
                     corrections_lr_scale=corrections_lr_scale, keep_optimizer=keep_optimizer,
                     save_every=save_every, replay=replay,
                     teacher=teacher, cumulative=cumulative, anchors=anchors,
                     preference=preference, dpo_beta=dpo_beta, dpo_lr_scale=dpo_lr_scale,
                     constrained=constrained, min_return=min_return, workers=workers, backend=backend, seed=seed,
                     db=db, overwrite=overwrite)
        run.resolved().validate()  # the run's own checks (--explore, --roll-in, --replay, ...) first
        check_start(preset, model)
        check_output("--output", output)
        with quiet_third_party(verbose), StageProgress("rft", total, console=console) as bar:
            result = run_rft(run, progress=lambda m: bar.update(int(m["iteration"]), m))
    except train_errors() as e:
        raise fail(e) from None
    final = result.get("final") or {}
    console.print(f"RFT run {result['run_id']}: {result['steps']} iterations, {result['episodes']} episodes in "
                  f"{result['duration_s']:.0f} s ({result['episodes_per_min']:.0f}/min); last sampled reward "
                  f"{final.get('reward', float('nan')):+.4f}; checkpoint {output} (llm:hf:{output}?mode=tools)")


@train_app.command("pipeline")
def train_pipeline(
    output: str = typer.Option(..., "--output", "-o", help="directory for every stage's output and evidence.json"),
    preset: str = typer.Option("small", help="tiny (CI, minutes) | small (the documented CPU run)"),
    tasks: str = typer.Option("single_trade", "--tasks", "--task", help="comma-separated tasks to train on: SFT data "
                              "and RL worlds from each, evaluated on each (and the preset's extra tasks)"),
    curriculum: str = typer.Option("mixed", help="RFT: mixed (each world's task drawn from all) | ordered (the "
                                                 "tasks opened in the order given, earlier ones kept in the mix)"),
    from_stage: str = typer.Option("data", help="first stage to run: data | sft | rl | select | eval (earlier "
                                                "outputs are reused)"),
    to_stage: str = typer.Option("eval", help="last stage to run"),
    rl_method: str | None = typer.Option(None, "--rl", help="rft (expert iteration, default) | grpo"),
    model: str | None = typer.Option(None, help="start SFT from this checkpoint (default: the preset's model)"),
    teacher: str | None = typer.Option(None, help="scripted policy the model learns from: SFT data, RFT's replayed "
                                                  "episodes and lookahead proposals (default: the preset's, "
                                                  "rule_expert; rule_expert_short never names blocks)"),
    max_steps: int | None = typer.Option(None, "--max-steps", min=1, help="SFT optimiser steps"),
    rl_steps: int | None = typer.Option(None, "--rl-steps", min=1, help="RL iterations (rft) or steps (grpo)"),
    rl_worlds: int | None = typer.Option(None, "--rl-worlds", min=0, help="RFT: fresh worlds per iteration (0: the "
                                                                        "teacher replay alone, the control)"),
    rl_replay: int | None = typer.Option(None, "--rl-replay", min=0, help="RFT: teacher episodes replayed into "
                                                                        "each iteration's fine-tuning (default: "
                                                                        "the preset's)"),
    rl_proposals: str | None = typer.Option(None, "--rl-proposals", help="RFT: more scripted policies whose moves "
                                            "the lookahead scores, comma-separated (beside the teacher's; "
                                            "without:<step> is the teacher's next move)"),
    rl_train_on: str | None = typer.Option(None, "--rl-train-on", help="RFT: episodes | corrections | both (the "
                                           "lookahead's changed turns in a pass of their own after the episodes)"),
    rl_cumulative_corrections: bool = typer.Option(False, "--rl-cumulative-corrections",
                                                   help="RFT, --rl-train-on both: the changed turns' pass trains on "
                                                        "every iteration's so far (DAgger's aggregate)"),
    rl_corrections_lr_scale: float | None = typer.Option(None, "--rl-corrections-lr-scale",
                                                         help="RFT: the changed turns' pass's learning rate over "
                                                              "the iteration's"),
    rl_keep_optimizer: bool = typer.Option(False, "--rl-keep-optimizer",
                                           help="RFT: one AdamW for the stage, its moments kept from pass to pass"),
    rl_save_every: int | None = typer.Option(None, "--rl-save-every", min=0,
                                             help="RFT: a checkpoint every N iterations, OUT/rl/checkpoint-N"),
    rl_select: int | None = typer.Option(None, "--rl-select", min=1,
                                         help="RFT: evaluate the one of rl/checkpoint-* and rl/ that does best on "
                                              "the last K validation seeds (select stage)"),
    preference: str | None = typer.Option(None, help="RFT: " + PREFERENCE_HELP),
    dpo_beta: float | None = typer.Option(None, "--dpo-beta", help="RFT: " + DPO_BETA_HELP),
    dpo_lr_scale: float | None = typer.Option(None, "--dpo-lr-scale", help="RFT: " + DPO_LR_SCALE_HELP),
    constrained: bool | None = typer.Option(None, "--constrained/--free", help="decode under the seat's action "
                                            "grammar in RL rollouts and the evaluation (default: the preset's)"),
    data_seeds: int | None = typer.Option(None, min=1, max=MAX_SEEDS, help="teacher episodes per task (train "
                                                                          "seeds 0..N-1)"),
    eval_seeds: int | None = typer.Option(None, min=1, max=MAX_SEEDS, help="holdout seeds per task: the first N of "
                                                                          "--eval-range"),
    eval_tasks: str | None = typer.Option(None, help="comma-separated holdout tasks (default: the tasks and the "
                                                     "preset's extra ones)"),
    eval_range: str = typer.Option("validation", help="holdout seeds evaluated: validation (0-9,999: choose on it) | "
                                   "test (10,000-19,999: report, once per run) | check (20,000-29,999: a last look)"),
    reopen: bool = typer.Option(False, "--reopen", help="evaluate again on a test or check range this output was "
                                                        "evaluated on (the evidence records the second look)"),
    workers: int = typer.Option(2, min=1, help="worker processes: the evaluation's, and the RL stage's "
                                              "environment workers (stepping, prompts, grammars off the model's path)"),
    backend: str = typer.Option("process", help="process (local processes) | ray (Ray tasks and actors; a local "
                                                "Ray instance unless RAY_ADDRESS names a cluster)"),
    seed: int = typer.Option(0, min=0, max=MAX_TRAIN_SEED, help="seed (initialisation, sampling, data order)"),
    db: str | None = typer.Option(None, help="SQLite store (default .arena/arena.db or $GPU_ARENA_DB)"),
    lora: bool | None = typer.Option(None, "--lora/--full", help="LoRA adapters for SFT and GRPO (merged) or full"),
    use_vllm: bool = typer.Option(False, "--use-vllm", help=VLLM_HELP + "; --rl grpo"),
    vllm_mode: str = typer.Option("colocate", help=VLLM_MODE_HELP),
    vllm_server_url: str | None = typer.Option(None, help="server mode: the `trl vllm-serve` address"),
    bf16: bool = typer.Option(False, "--bf16", help=BF16_HELP),
    gradient_checkpointing: bool = typer.Option(False, "--gradient-checkpointing", help=CKPT_HELP),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="show third-party warnings and logs"),
) -> None:
    """SFT data -> SFT -> RL against the live environment -> holdout evaluation with paired CIs ->
    OUTPUT/evidence.json; every stage recorded in the store, resumable with --from-stage."""
    from ..training.pipeline import PipelineRun, run_pipeline
    from ..training.progress import StageProgress, quiet_third_party

    run = PipelineRun(output=output, preset=preset, tasks=task_list(tasks, "--tasks"), curriculum=curriculum,
                      eval_range=eval_range, reopen=reopen, from_stage=from_stage, to_stage=to_stage,
                      rl_method=rl_method, model=model, teacher=teacher, data_seeds=data_seeds, sft_steps=max_steps,
                      rl_iterations=rl_steps, rl_worlds=rl_worlds, rl_replay=rl_replay, rl_proposals=rl_proposals,
                      rl_train_on=rl_train_on, rl_cumulative_corrections=rl_cumulative_corrections,
                      rl_corrections_lr_scale=rl_corrections_lr_scale, rl_keep_optimizer=rl_keep_optimizer,
                      rl_save_every=rl_save_every, rl_select=rl_select,
                      preference=preference, dpo_beta=dpo_beta,
                      dpo_lr_scale=dpo_lr_scale, constrained=constrained, eval_seeds=eval_seeds,
                      eval_tasks=tuple(split_list(eval_tasks)) if eval_tasks else None, workers=workers,
                      backend=backend, seed=seed, db=db,
                      lora=lora, accel=training_accel(use_vllm, vllm_mode, vllm_server_url, bf16, gradient_checkpointing))
    check_number("--dpo-beta", dpo_beta)
    check_number("--dpo-lr-scale", dpo_lr_scale)
    check_number("--rl-corrections-lr-scale", rl_corrections_lr_scale)
    try:
        # the run's own checks (stages, tasks, --rl, and the model the sft stage starts from) before the
        # data stage plays its episodes
        run.resolved().validate()
        check_output("--output", output)
        with quiet_third_party(verbose):
            state = run_pipeline(run, display=lambda stage, total: StageProgress(stage, total, console=console))
    except train_errors() as e:
        raise fail(e) from None
    for stage, info in state["stages"].items():
        console.print(f"{stage}: {info['status']} in {info.get('wall_s', 0):.0f} s")
    if "evidence" in state and run.to_stage == "eval":  # an earlier evaluation's is not this command's
        _print_evidence(state["evidence"])


def _print_evidence(path: str) -> None:
    from pathlib import Path

    from ..training.evidence import comparison_rows, per_task, range_line
    from ..training.selection import selection_line

    evidence = json.loads(Path(path).read_text())
    rows = comparison_rows(evidence)
    roles = per_task(evidence.get("results") or [])
    console.print(range_line(evidence))
    if evidence.get("selection"):
        console.print(selection_line(evidence["selection"]))
    for task in dict.fromkeys(r[0] for r in rows):  # one table per task, so each reads at 80 columns
        mine = [r for r in rows if r[0] == task]
        table = FitTable(f"{task} holdout, paired by seed (n = {mine[0][2]})", ("comparison", "mean", "95% CI", "W/L"),
                         numeric=("mean", "W/L"), whole=("comparison", "95% CI"))
        for _task, comparison, _n, *cells in mine:
            table.add_row(comparison, *cells)
        table.print()
        # the return beside the deal rate and the surplus: which way each stage moved the model
        mix = FitTable(None, ("role", "return", "deal rate", "surplus"), numeric=("return", "deal rate", "surplus"))
        for role, r in roles.get(task, {}).items():
            mix.add_row(role, f"{r['mean_return']:+.4f}", f"{r.get('deal_rate', float('nan')):.3f}",
                        f"{r.get('surplus_over_batna', float('nan')):+.2f}")
        mix.print()
    console.print(f"evidence: {path}")


@train_app.command("evidence")
def train_evidence(
    path: str = typer.Argument(..., help="a pipeline's evidence.json (or its output directory)"),
    markdown: bool = typer.Option(False, "--markdown", help="print Markdown tables (for docs) instead"),
) -> None:
    """Show a pipeline's evidence: the paired comparisons, the holdout rows and each stage's wall time."""
    from pathlib import Path

    from ..training.evidence import EvidenceError, load_evidence, markdown_report

    p = Path(path)
    try:
        evidence = load_evidence(p / "evidence.json" if p.is_dir() else p)
    except EvidenceError as e:
        raise fail(e) from None
    if markdown:
        print(markdown_report(evidence))
        return
    _print_evidence(str(p / "evidence.json" if p.is_dir() else p))


@train_app.command("compare")
def train_compare(
    first: str = typer.Argument(..., help="a finished pipeline's output directory"),
    second: str = typer.Argument(..., help="another, evaluated on the same holdout worlds (e.g. its control)"),
    role: str = typer.Option("trained", help="which model of each: trained | sft | a baseline"),
    markdown: bool = typer.Option(False, "--markdown", help="print a Markdown table (for docs) instead"),
) -> None:
    """FIRST's model minus SECOND's, paired by holdout world with a 95% bootstrap CI: an RL run
    against its supervised control (`train pipeline --from-stage rl --rl-worlds 0` on a copy of its
    data and sft), or two seeds, presets or methods."""
    from ..training.evidence import difference_cells, verdict
    from ..training.pipeline_compare import compare_pipelines

    try:
        rows = compare_pipelines(first, second, role)
    except train_errors() as e:
        raise fail(e) from None
    if markdown:
        print(f"`{first}` − `{second}` ({role})\n")
        print("| task | n | mean difference | 95% CI | wins / losses | verdict |\n|---|---|---|---|---|---|")
        for r in rows:
            print("| " + " | ".join((r["task"], *difference_cells(r, sep=" / "), verdict(r))) + " |")
        return
    table = FitTable(f"{role}: {first} − {second}, paired by holdout world", ("task", "n", "mean", "95% CI", "W/L"),
                     numeric=("n", "mean", "W/L"), whole=("task", "95% CI"))
    for r in rows:
        table.add_row(r["task"], *difference_cells(r))
    table.print()


@train_app.command("prepare")
def train_prepare(
    output: str = typer.Option(..., "--output", "-o", help="checkpoint directory to write"),
    preset: str = typer.Option("smollm2", help="smollm2 (the GGUF as a checkpoint), tiny or small (random init)"),
    data: str | None = typer.Option(None, help="SFT data to train the tokenizer on (tiny, small)"),
    keep_template: bool = typer.Option(True, help="smollm2: keep its own chat template (JSON mode, zero-shot) "
                                                  "instead of the tool-calling one"),
    seed: int = typer.Option(0, min=0, max=MAX_TRAIN_SEED, help="initialisation seed (tiny, small)"),
) -> None:
    """Write a preset's starting model as a checkpoint directory, e.g. SmolLM2 for a zero-shot row:
    `gpu-arena eval --policies "llm:hf:DIR?mode=json"`."""
    from ..training.common import describe_model, starting_model
    from ..training.data import load_sft_data
    from ..training.presets import get_preset, load_pretrained, save_checkpoint, smollm2_gguf

    check_output("--output", output)
    try:
        p = get_preset(preset)
        if p.model is None:
            m, tok = load_pretrained(smollm2_gguf(), tools_template=not keep_template)
            source = f"gguf:{smollm2_gguf().name}"
        else:
            if data is None:
                raise typer.BadParameter(f"preset {preset} trains its tokenizer on SFT data: pass --data")
            ds, _ = load_sft_data(data)
            start = starting_model(p, None, [dict(r) for r in ds], seed)
            m, tok, source = start.model, start.tokenizer, start.source
    except train_errors() as e:
        raise fail(e) from None
    save_checkpoint(m, tok, output, meta={"kind": "prepare", "preset": preset, "source": source,
                                          "model": describe_model(m)})
    console.print(f"wrote {output} ({describe_model(m)['parameters']:,} parameters, from {source})")

