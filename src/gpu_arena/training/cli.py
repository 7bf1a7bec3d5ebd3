"""``gpu-arena data``, ``gpu-arena train`` and ``gpu-arena runs``: typer sub-apps added to the main
command. Only typer and rich load with the command; the training stack loads inside each command,
so ``gpu-arena --help`` stays fast."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import typer

from ..cli_options import MAX_SEEDS, split_list, task_list
from ..console import FitTable, console
from ..core.types import MAX_SEED  # world seeds: 64-bit, as every store keeps them

data_app = typer.Typer(add_completion=False, no_args_is_help=True, help="Training data from scripted policies.")
train_app = typer.Typer(add_completion=False, no_args_is_help=True,
                        help="Train LLM negotiators: SFT, then multi-turn GRPO against the live environment.")
runs_app = typer.Typer(add_completion=False, invoke_without_command=True,
                       help="Training runs in the results store (no subcommand: list them).")


def _fail(e: Exception) -> typer.BadParameter:
    return typer.BadParameter(str(e))


# ---------------------------------------------------------------------- option checks
# Every command checks its options here, before it plays an episode, loads a model, creates an
# output folder or records a run: a bad value is a usage error (exit status 2) naming the option.

MAX_TRAIN_SEED = 2**32 - 1  # the trainers seed numpy, whose seeds are 32-bit


def _number(option: str, value: float | None, *, zero: bool = False) -> None:
    """``value`` (if given) is finite and above 0 (or at least 0 with ``zero``)."""
    if value is not None and (not math.isfinite(value) or value < 0 or (value == 0 and not zero)):
        raise typer.BadParameter(f"{option} must be a finite number {'of at least' if zero else 'above'} 0, "
                                 f"got {value}")


def _finite(option: str, value: float | None) -> None:
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{option} must be a finite number, got {value}")


def _scripted(option: str, name: str | None, *, none: bool = False) -> None:
    """``name`` (if given) is a scripted policy; ``none``: '' (no policy) is allowed too."""
    from ..policies import policy_names

    if name is None or (none and name == ""):
        return
    if name not in policy_names():
        extra = " or '' for none" if none else ""
        raise typer.BadParameter(f"{option}: unknown scripted policy {name!r}; expected one of "
                                 f"{', '.join(policy_names())}{extra}")


def _opponents(value: str | None, *, league: bool = False) -> str | None:
    """One policy for every other seat: ``archetypes``, a policy name (a family's, ``llm:...``, is
    not built here) or, with ``league``, ``league:topK`` (resolved from the store when the run
    starts)."""
    from ..policies import SEAT_DEFAULT, policy_families, policy_names

    if value is None:
        return None
    name = value.strip()
    if not name or "," in name or re.match(r"lab_\d+=", name):
        raise typer.BadParameter(f"--opponents takes one policy for every other seat, got {value!r}")
    if league and name.startswith("league:"):
        rest = name.removeprefix("league:")
        if not (rest.startswith("top") and rest[3:].isdigit() and int(rest[3:]) >= 1):
            raise typer.BadParameter(f"--opponents: expected league:topK (K >= 1), got {value!r}")
        return name
    prefix, family, _ = name.partition(":")
    if name != SEAT_DEFAULT and name not in policy_names() and not (family and prefix in policy_families()):
        known = [SEAT_DEFAULT, *policy_names(), *(f"{p}:..." for p in policy_families())]
        raise typer.BadParameter(f"--opponents: unknown policy {name!r}; expected one of {', '.join(known)}")
    return name


def _output(option: str, path: str) -> None:
    """``path`` can become the directory a command writes: not a file, its parent creatable."""
    import os
    from pathlib import Path

    p = Path(path)
    if p.exists() and not p.is_dir():
        raise typer.BadParameter(f"{option} {path} is a file; expected a directory to write")
    above = next((a for a in p.parents if a.exists()), None)
    if above is not None and not above.is_dir():
        raise typer.BadParameter(f"cannot write {option} {path}: {above} is a file")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise typer.BadParameter(f"cannot write {option} {path}: {e.strerror}") from None
    where = p if p.exists() else p.parent
    if not os.access(where, os.W_OK | os.X_OK):
        raise typer.BadParameter(f"cannot write {option} {path}: permission denied")


def _start(preset: str, model: str | None) -> None:
    """The preset exists and what the run starts from is there (the checkpoint or GGUF)."""
    from .presets import PresetError, check_starting_model, get_preset

    try:
        check_starting_model(get_preset(preset), model)
    except PresetError as e:
        raise _fail(e) from None


def _env_url(url: str | None) -> None:
    """``http(s)://host[:port]`` where a GPU Arena server answers: refused before the model loads."""
    from contextlib import suppress
    from urllib.parse import urlsplit

    if url is None:
        return
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port that is not a number in range raises ValueError
    except ValueError as e:
        raise typer.BadParameter(f"--env-url {url!r}: {e}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise typer.BadParameter(f"--env-url expects http(s)://host[:port], got {url!r}")
    from ..client import GpuArenaClient

    client = GpuArenaClient(base_url=url).sync()
    try:
        client.connect()
    except ConnectionError as e:
        raise typer.BadParameter(f"--env-url {url}: no GPU Arena server answers ({e})") from None
    finally:
        with suppress(Exception):
            client.close()


@data_app.command("sft")
def data_sft(
    output: str = typer.Option(..., "--output", "-o", help="directory for dataset/, sft.jsonl, provenance.json"),
    policy: str = typer.Option("rule_expert", help="scripted policy that plays the seat (rule_expert, oracle, ...)"),
    task: str = typer.Option("single_trade", "--task", "--tasks", help="comma-separated tasks"),
    split: str = typer.Option("train", help="train | holdout"),
    seeds: int = typer.Option(100, min=1, max=MAX_SEEDS, help="seeds seed_start..seed_start+N-1 of every task"),
    seed_start: int = typer.Option(0, min=0, max=MAX_SEED, help="first seed"),
    mode: str = typer.Option("tools", help="tools (function calls) | json (one JSON object per answer) | compact "
                             "(function calls, short prompt, one turn shown: pretrained tokenizers)"),
    opponents: str | None = typer.Option(None, help="one policy for every other seat (default: the world's archetypes)"),
    min_return: float | None = typer.Option(None, help="keep only episodes with at least this return"),
    top_fraction: float | None = typer.Option(None, help="keep only the best fraction of episodes per task"),
) -> None:
    """Play episodes with a scripted policy and write them as chats in the LLM agents' format."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .data import DataError, SFTDataSpec, build_sft_records, save_sft_data

    _finite("--min-return", min_return)
    spec = SFTDataSpec(policy=policy, tasks=task_list(task, "--task"), split=split, seeds=tuple(range(seed_start, seed_start + seeds)),
                       mode=mode, opponents=_opponents(opponents), min_return=min_return, top_fraction=top_fraction)
    try:
        spec.validate()
        _output("--output", output)  # found unwritable before the episodes are played, not after
        with Progress(TextColumn("[bold]episodes"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console) as progress:
            bar = progress.add_task("play", total=len(spec.tasks) * len(spec.seeds))
            records, provenance = build_sft_records(spec, progress=lambda n: progress.advance(bar, n))
    except DataError as e:
        raise _fail(e) from None
    try:
        paths = save_sft_data(records, provenance, output)
    except OSError as e:
        raise typer.BadParameter(f"cannot write --output {output}: {e.strerror or e}") from None
    console.print(f"{provenance['episodes_kept']} of {provenance['episodes_played']} episodes kept (mean return "
                  f"{provenance['mean_return_kept']:+.4f}, played {provenance['mean_return_played']:+.4f}); "
                  f"wrote {paths['dataset']}, {paths['jsonl']}, {paths['provenance']}")


def _accel(use_vllm: bool = False, vllm_mode: str = "colocate", vllm_server_url: str | None = None,
           bf16: bool = False, gradient_checkpointing: bool = False) -> Any:
    from .accel import Accel

    return Accel(use_vllm=use_vllm, vllm_mode=vllm_mode, vllm_server_url=vllm_server_url, bf16=bf16,
                 gradient_checkpointing=gradient_checkpointing)


BF16_HELP = "bfloat16 training (GPUs; refused on a CPU, where it measures ~100x slower than float32)"
CKPT_HELP = "gradient checkpointing (less memory, more compute: large models on GPUs)"
VLLM_HELP = "generate GRPO rollouts with vLLM (TRL's use_vllm; needs vllm installed, a GPU)"
VLLM_MODE_HELP = "colocate (vLLM in the trainer's process) | server (a `trl vllm-serve` process)"


def _common_train_errors() -> tuple[type[Exception], ...]:
    from .data import DataError
    from .presets import PresetError

    return (DataError, PresetError)


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
    seed: int = typer.Option(0, min=0, max=MAX_TRAIN_SEED, help="seed (initialisation, data order)"),
    db: str | None = typer.Option(None, help="SQLite store (default .arena/arena.db or $GPU_ARENA_DB)"),
    overwrite: bool = typer.Option(False, help="write into a non-empty --output"),
    bf16: bool = typer.Option(False, "--bf16", help=BF16_HELP),
    gradient_checkpointing: bool = typer.Option(False, "--gradient-checkpointing", help=CKPT_HELP),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="show third-party warnings and logs"),
) -> None:
    """Supervised fine-tuning on arena chats (TRL SFTTrainer, loss on the assistant turns only)."""
    from pathlib import Path

    _number("--epochs", epochs)
    _number("--lr", lr)
    if not Path(data).exists():
        raise typer.BadParameter(f"--data {data}: no such file or directory")
    _start(preset, model)
    _output("--output", output)
    from .progress import StageProgress, quiet_third_party
    from .sft import SFTRun, run_sft

    try:
        accel = _accel(bf16=bf16, gradient_checkpointing=gradient_checkpointing)
        accel.validate()
        with quiet_third_party(verbose), StageProgress("sft", max_steps or 0, console=console) as bar:
            result = run_sft(SFTRun(data=data, output_dir=output, preset=preset, model=model, epochs=epochs,
                                    learning_rate=lr, batch_size=batch_size, grad_accum=grad_accum,
                                    max_length=max_length, max_steps=max_steps, lora=lora,
                                    assistant_only_loss=assistant_only, seed=seed, db=db, overwrite=overwrite,
                                    accel=accel),
                             display=bar)
    except _common_train_errors() as e:
        raise _fail(e) from None
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
    from .grpo import GRPORun, run_grpo
    from .presets import get_preset
    from .progress import StageProgress, quiet_third_party

    _number("--lr", lr)
    _number("--temperature", temperature)  # GRPO samples: 0 would divide the logits by zero
    _number("--beta", beta, zero=True)
    try:
        total = max_steps or get_preset(preset).grpo.max_steps
        accel = _accel(use_vllm, vllm_mode, vllm_server_url, bf16, gradient_checkpointing)
        run = GRPORun(
            output_dir=output, model=model, preset=preset, tasks=task_list(task, "--task"), split=split,
            seeds=tuple(range(seed_start, seed_start + seeds)), env_url=env_url,
            opponents=_opponents(opponents, league=True),
            max_steps=max_steps, num_generations=generations, prompts_per_step=prompts_per_step,
            learning_rate=lr, temperature=temperature, max_completion_length=max_completion_length,
            max_turn_tokens=max_turn_tokens, beta=beta, scale_rewards=scale_rewards, lora=lora, rollouts=rollouts,
            constrained=constrained, workers=workers, backend=backend, seed=seed, db=db, overwrite=overwrite,
            accel=accel)
        run.resolved().validate()  # the run's own checks (split, --model, --scale-rewards, ...) first
        _start(preset, model)
        _output("--output", output)
        _env_url(env_url)
        with quiet_third_party(verbose), StageProgress("grpo", total, console=console) as bar:
            result = run_grpo(run, display=bar)
    except _common_train_errors() as e:
        raise _fail(e) from None
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
    proposal: str | None = typer.Option(None, help="scripted policy whose moves are candidates ('' for none)"),
    finisher: str | None = typer.Option(None, help="lookahead: scripted policy finishing the forks ('' the model)"),
    roll_in: str | None = typer.Option(None, help="lookahead: go on with the best move or the model's (best | "
                                                  "greedy)"),
    prefer: str | None = typer.Option(None, help="lookahead ties: greedy | proposal"),
    train_on: str | None = typer.Option(None, help="episodes | corrections (the lookahead's changed turns)"),
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
    from .presets import get_preset
    from .progress import StageProgress, quiet_third_party
    from .rft import RFTRun, run_rft

    _number("--temperature", temperature)  # sampling: 0 gives every sample the same episode
    _number("--lr", lr)
    _number("--epochs", epochs)
    _finite("--min-return", min_return)
    _scripted("--proposal", proposal, none=True)
    _scripted("--finisher", finisher, none=True)
    _scripted("--teacher", teacher)
    try:
        total = max_steps or get_preset(preset).rft.iterations
        run = RFTRun(output_dir=output, model=model, preset=preset, tasks=task_list(task, "--task"),
                     curriculum=curriculum, seed_start=seed_start,
                     iterations=max_steps, worlds_per_iteration=worlds, samples_per_world=samples,
                     temperature=temperature, learning_rate=lr, lr_schedule=lr_schedule, epochs=epochs,
                     explore=explore, proposal=proposal, finisher=finisher, roll_in=roll_in, prefer=prefer,
                     train_on=train_on, replay=replay, teacher=teacher, cumulative=cumulative, anchors=anchors,
                     constrained=constrained, min_return=min_return, workers=workers, backend=backend, seed=seed,
                     db=db, overwrite=overwrite)
        run.resolved().validate()  # the run's own checks (--explore, --roll-in, --replay, ...) first
        _start(preset, model)
        _output("--output", output)
        with quiet_third_party(verbose), StageProgress("rft", total, console=console) as bar:
            result = run_rft(run, progress=lambda m: bar.update(int(m["iteration"]), m))
    except _common_train_errors() as e:
        raise _fail(e) from None
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
    from_stage: str = typer.Option("data", help="first stage to run: data | sft | rl | eval (earlier outputs are "
                                                "reused)"),
    to_stage: str = typer.Option("eval", help="last stage to run"),
    rl_method: str | None = typer.Option(None, "--rl", help="rft (expert iteration, default) | grpo"),
    model: str | None = typer.Option(None, help="start SFT from this checkpoint (default: the preset's model)"),
    max_steps: int | None = typer.Option(None, "--max-steps", min=1, help="SFT optimiser steps"),
    rl_steps: int | None = typer.Option(None, "--rl-steps", min=1, help="RL iterations (rft) or steps (grpo)"),
    rl_worlds: int | None = typer.Option(None, "--rl-worlds", min=0, help="RFT: fresh worlds per iteration (0: the "
                                                                        "teacher replay alone, the control)"),
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
    from .pipeline import PipelineRun, run_pipeline
    from .progress import StageProgress, quiet_third_party

    run = PipelineRun(output=output, preset=preset, tasks=task_list(tasks, "--tasks"), curriculum=curriculum,
                      eval_range=eval_range, reopen=reopen, from_stage=from_stage, to_stage=to_stage,
                      rl_method=rl_method, model=model, data_seeds=data_seeds, sft_steps=max_steps,
                      rl_iterations=rl_steps, rl_worlds=rl_worlds, constrained=constrained, eval_seeds=eval_seeds,
                      eval_tasks=tuple(split_list(eval_tasks)) if eval_tasks else None, workers=workers,
                      backend=backend, seed=seed, db=db,
                      lora=lora, accel=_accel(use_vllm, vllm_mode, vllm_server_url, bf16, gradient_checkpointing))
    try:
        # the run's own checks (stages, tasks, --rl, and the model the sft stage starts from) before the
        # data stage plays its episodes
        run.resolved().validate()
        _output("--output", output)
        with quiet_third_party(verbose):
            state = run_pipeline(run, display=lambda stage, total: StageProgress(stage, total, console=console))
    except _common_train_errors() as e:
        raise _fail(e) from None
    for stage, info in state["stages"].items():
        console.print(f"{stage}: {info['status']} in {info.get('wall_s', 0):.0f} s")
    if "evidence" in state:
        _print_evidence(state["evidence"])


def _print_evidence(path: str) -> None:
    from pathlib import Path

    from .evidence import comparison_rows, per_task, range_line

    evidence = json.loads(Path(path).read_text())
    rows = comparison_rows(evidence)
    roles = per_task(evidence.get("results") or [])
    console.print(range_line(evidence))
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

    from .evidence import EvidenceError, load_evidence, markdown_report

    p = Path(path)
    try:
        evidence = load_evidence(p / "evidence.json" if p.is_dir() else p)
    except EvidenceError as e:
        raise _fail(e) from None
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
    from .evidence import difference_cells, verdict
    from .pipeline_compare import compare_pipelines

    try:
        rows = compare_pipelines(first, second, role)
    except _common_train_errors() as e:
        raise _fail(e) from None
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
    from .common import describe_model, starting_model
    from .data import load_sft_data
    from .presets import get_preset, load_pretrained, save_checkpoint, smollm2_gguf

    _output("--output", output)
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
    except _common_train_errors() as e:
        raise _fail(e) from None
    save_checkpoint(m, tok, output, meta={"kind": "prepare", "preset": preset, "source": source,
                                          "model": describe_model(m)})
    console.print(f"wrote {output} ({describe_model(m)['parameters']:,} parameters, from {source})")


def _fmt(v: Any, spec: str = "+.4f") -> str:
    return "-" if not isinstance(v, int | float) else format(v, spec)


@runs_app.callback()
def runs_main(
    ctx: typer.Context,
    kind: str | None = typer.Option(None, help="sft | grpo"),
    limit: int = typer.Option(30, min=1, help="newest N runs"),
    db: str | None = typer.Option(None, help="SQLite store (default .arena/arena.db or $GPU_ARENA_DB)"),
    as_json: bool = typer.Option(False, "--json", help="print the runs as JSON"),
    wide: bool = typer.Option(False, "--wide", help="every column (created, model, tokens/s, output)"),
) -> None:
    """List training runs (newest first) from the store."""
    if ctx.invoked_subcommand is not None:
        return
    from .runlog import connect, list_training_runs

    runs = list_training_runs(connect(db), kind=kind, limit=limit)
    if as_json:
        print(json.dumps(runs, indent=2, default=str))
        return
    table = FitTable("training runs (newest first)",
                     ("id", "kind", "status", "created", "preset", "model", "steps", "loss", "reward", "valid",
                      "tok/s", "time", "output"),
                     wide_only=("created", "model", "tok/s", "output"), whole=("kind", "status", "preset"),
                     numeric=("id", "steps", "loss", "reward", "valid", "tok/s", "time"), wide=wide)
    for r in runs:
        final = (r["summary"] or {}).get("final") or {}
        table.add_row(str(r["id"]), r["kind"], r["status"], str(r["created_at"]), str(r["preset"]), str(r["model"]),
                      str(r["last_step"] if r["last_step"] is not None else "-"),
                      _fmt((r["summary"] or {}).get("train_loss"), ".4f"), _fmt(final.get("reward")),
                      _fmt(final.get("arena/valid_action_rate"), ".2f"), _fmt(final.get("tokens_per_s"), ".0f"),
                      f"{r['duration_s']:.0f} s" if r["duration_s"] else "-", str(r["output_dir"]))
    table.print()


@runs_app.command("show")
def runs_show(
    run_id: int = typer.Argument(..., help="training run id"),
    db: str | None = typer.Option(None, help="SQLite store"),
    as_json: bool = typer.Option(False, "--json", help="print the run and its metric series as JSON"),
) -> None:
    """One run: its config and, per metric, the first, last, min and max logged value."""
    from .runlog import connect, load_training_run

    run = load_training_run(connect(db), run_id)
    if run is None:
        raise typer.BadParameter(f"no training run {run_id} in the store")
    if as_json:
        print(json.dumps(run, indent=2, default=str))
        return
    console.print(f"[bold]run {run['id']}[/bold] {run['kind']} ({run['status']}), preset {run['preset']}, model "
                  f"{run['model']}, commit {str(run['git_commit'])[:8]}, output {run['output_dir']}")
    table = FitTable("metrics", ("metric", "logs", "first", "last", "min", "max"),
                     numeric=("logs", "first", "last", "min", "max"), whole=("metric",))
    for name, s in sorted(run["series"].items()):
        v = s["value"]
        table.add_row(name, str(len(v)), *(_fmt(x, ".4g") for x in (v[0], v[-1], min(v), max(v))))
    table.print()


@runs_app.command("turns")
def runs_turns(
    replays: str = typer.Argument(..., help="replay JSONL from `gpu-arena eval --replays`"),
    seat: str = typer.Option("lab_0", help="the seat to count"),
    wide: bool = typer.Option(False, "--wide", help="every column (split, refusals by code)"),
) -> None:
    """Per policy: the seat's turns, the share the rules accepted, and format errors (unreadable
    model output) by code, from recorded episodes."""
    from .evaluate import turn_stats

    try:
        rows = turn_stats(replays, seat=seat)
    except (OSError, ValueError) as e:
        raise _fail(e) from None
    table = FitTable(f"turns of {seat} (valid: share the rules accepted; unreadable: format errors)",
                     ("policy", "task", "split", "episodes", "turns", "valid", "unreadable", "refused", "codes"),
                     wide_only=("split", "codes"), numeric=("episodes", "turns", "valid", "unreadable", "refused"),
                     whole=("task",), wide=wide)
    for r in rows:
        table.add_row(r["policy"], r["task"], r["split"], str(r["episodes"]), str(r["turns"]),
                      f"{r['valid_rate']:.3f}", str(r["format_errors"]), str(r["rule_errors"]),
                      ", ".join(f"{k} {v}" for k, v in sorted(r["codes"].items())))
    table.print()


__all__ = ["data_app", "runs_app", "train_app"]
