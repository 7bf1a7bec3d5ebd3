"""What one ``gpu-arena train pipeline`` run is: its options (:class:`PipelineRun`), the preset's
defaults filled in (:meth:`PipelineRun.resolved`), the checks made before the data stage plays an
episode (:meth:`PipelineRun.validate`), and the command line that repeats it. The stages themselves
are :mod:`gpu_arena.training.pipeline`'s.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field, replace

from ..core.types import TASKS
from ..evaluation.ranges import DEFAULT_RANGE, RANGES, get_range
from ..policies import policy_names, scripted_policies
from .accel import Accel
from .curriculum import CURRICULA
from .preference import check_preference
from .presets import (
    PresetError,
    check_positive,
    check_rft_sources,
    check_save_every,
    check_starting_model,
    get_preset,
)

STAGES = ("data", "sft", "rl", "select", "eval")
RL_METHODS = ("rft", "grpo")


@dataclass
class PipelineRun:
    """One pipeline run. ``None`` fields take the preset's pipeline defaults."""

    output: str
    preset: str = "small"
    # the tasks trained on: SFT data and RL worlds from each, evaluated on each (and the preset's extra ones)
    tasks: tuple[str, ...] = ("single_trade",)
    # RFT: how the iterations' worlds walk the tasks (curriculum.py): mixed | ordered
    curriculum: str = "mixed"
    from_stage: str = "data"
    to_stage: str = "eval"
    rl_method: str | None = None
    model: str | None = None  # start SFT from this checkpoint instead of the preset's
    # the scripted policy the model learns from (None: the preset's): the SFT data's episodes, RFT's
    # replayed teacher episodes, and its lookahead proposals where the preset proposes its teacher's moves
    teacher: str | None = None
    data_seeds: int | None = None
    sft_steps: int | None = None
    rl_iterations: int | None = None
    # RFT: fresh worlds explored per iteration (None: the preset's); 0 runs the RL stage's supervised term
    # alone (teacher replay), the control an RL run is measured against
    rl_worlds: int | None = None
    # RFT: fresh teacher episodes replayed into each iteration's fine-tuning (None: the preset's); most of
    # an iteration's fine-tuning time on a CPU (decision 0050)
    rl_replay: int | None = None
    # RFT: scripted policies whose moves the lookahead scores beside the teacher's (comma-separated;
    # ``without:<step>``: the teacher's next move); None: the teacher's alone
    rl_proposals: str | None = None
    # RFT: what each iteration fine-tunes on (training.rft.TRAIN_ON); None: the preset's
    rl_train_on: str | None = None
    # RFT with rl_train_on=both: the changed turns' pass trains on every iteration's so far (DAgger's aggregate)
    rl_cumulative_corrections: bool = False
    # RFT: the changed turns' pass's learning rate over the iteration's (training.rft); None: the same
    rl_corrections_lr_scale: float | None = None
    # RFT: one AdamW for the stage, its moments kept from pass to pass (training.rft.RFTRun.keep_optimizer)
    rl_keep_optimizer: bool = False
    # RFT: a checkpoint every this many iterations, rl/checkpoint-N (training.rft.RFTRun.save_every)
    rl_save_every: int | None = None
    # RFT with rl_save_every: choose the trained model among rl/checkpoint-* and rl/ on this many of the
    # validation range's last seeds (training.selection); None: the final rl/
    rl_select: int | None = None
    # RFT: a DPO pass on the lookahead's ranked turns after each fine-tuning pass (training.preference);
    # None: the preset's
    preference: str | None = None
    dpo_beta: float | None = None
    dpo_lr_scale: float | None = None
    # replies decoded under the seat's action grammar, in the RL stage's rollouts and in the evaluation of
    # both checkpoints (llm:hf:DIR?constrained=1); None: the preset's
    constrained: bool | None = None
    eval_seeds: int | None = None
    eval_tasks: tuple[str, ...] | None = None
    # which holdout seed range the evaluation plays (gpu_arena.evaluation.ranges); reopen: evaluate a
    # test or check range this run's output was already evaluated on (recorded as a second look)
    eval_range: str = DEFAULT_RANGE
    reopen: bool = False
    baselines: tuple[str, ...] = ("no_negotiation", "rule_expert", "random_valid")
    # evaluation worker processes, and the RL stage's environment workers (the rollout engine's):
    # processes ("process") or Ray actors ("ray")
    workers: int = 2
    backend: str = "process"
    seed: int = 0
    db: str | None = None
    lora: bool | None = None  # SFT and GRPO: LoRA adapters (merged) instead of a full fine-tune
    accel: Accel = field(default_factory=Accel)  # the GPU recipe's switches, passed to the trainers

    def command_line(self) -> str:
        """The ``gpu-arena train pipeline`` command that repeats this run (options left at their
        defaults are not written)."""
        words = ["gpu-arena", "train", "pipeline", "--preset", self.preset, "--output", self.output]
        flags = {"curriculum": "--curriculum", "eval_range": "--eval-range", "rl_method": "--rl", "model": "--model",
                 "teacher": "--teacher", "sft_steps": "--max-steps",
                 "rl_iterations": "--rl-steps", "rl_worlds": "--rl-worlds", "rl_replay": "--rl-replay",
                 "rl_proposals": "--rl-proposals", "rl_train_on": "--rl-train-on",
                 "rl_corrections_lr_scale": "--rl-corrections-lr-scale", "preference": "--preference",
                 "dpo_beta": "--dpo-beta", "dpo_lr_scale": "--dpo-lr-scale", "data_seeds": "--data-seeds", "eval_seeds": "--eval-seeds",
                 "workers": "--workers", "backend": "--backend", "seed": "--seed"}
        defaults = PipelineRun(output=self.output)
        for name, flag in flags.items():
            value = getattr(self, name)
            if value is not None and value != getattr(defaults, name):
                words += [flag, str(value)]
        if self.tasks != defaults.tasks:
            words += ["--tasks", ",".join(self.tasks)]
        if self.eval_tasks is not None:
            words += ["--eval-tasks", ",".join(self.eval_tasks)]
        if self.rl_cumulative_corrections:
            words.append("--rl-cumulative-corrections")
        if self.rl_keep_optimizer:
            words.append("--rl-keep-optimizer")
        if self.rl_save_every:
            words += ["--rl-save-every", str(self.rl_save_every)]
        if self.rl_select:
            words += ["--rl-select", str(self.rl_select)]
        if self.reopen:
            words.append("--reopen")
        if self.constrained is not None:
            words.append("--constrained" if self.constrained else "--free")
        if self.lora is not None:
            words.append("--lora" if self.lora else "--full")
        a = self.accel
        words += (["--use-vllm", "--vllm-mode", a.vllm_mode] if a.use_vllm else []) + (
            ["--vllm-server-url", a.vllm_server_url] if a.vllm_server_url else []) + (
            ["--bf16"] if a.bf16 else []) + (["--gradient-checkpointing"] if a.gradient_checkpointing else [])
        return shlex.join(words)

    def resolved(self) -> PipelineRun:
        d = get_preset(self.preset).pipeline
        pick = (lambda v, default: default if v is None else v)  # noqa: E731
        return replace(self, **{"rl_method": pick(self.rl_method, d.rl_method), "teacher": pick(self.teacher, d.teacher),
                              "data_seeds": pick(self.data_seeds, d.data_seeds),
                              "sft_steps": pick(self.sft_steps, d.sft_steps),
                              "rl_iterations": pick(self.rl_iterations, d.rl_iterations),
                              "eval_seeds": pick(self.eval_seeds, d.eval_seeds),
                              "constrained": pick(self.constrained, d.constrained),
                              "eval_tasks": tuple(dict.fromkeys(pick(self.eval_tasks,
                                                                     (*self.tasks, *d.extra_eval_tasks))))})

    def validate(self) -> None:
        if not self.tasks:
            raise PresetError(f"--tasks names no task; expected some of {', '.join(TASKS)}")
        if len(set(self.tasks)) < len(self.tasks):
            raise PresetError(f"--tasks names a task twice: {','.join(self.tasks)}")
        for option, t in (*(("--tasks", t) for t in self.tasks), *(("--eval-tasks", t) for t in self.eval_tasks or ())):
            if t not in TASKS:
                raise PresetError(f"{option}: unknown task {t!r}; expected one of {', '.join(TASKS)}")
        if self.curriculum not in CURRICULA:
            raise PresetError(f"unknown curriculum {self.curriculum!r}; expected one of {', '.join(CURRICULA)}")
        if self.teacher is not None and self.teacher not in policy_names():
            raise PresetError(f"--teacher: unknown scripted policy {self.teacher!r}; expected one of "
                              f"{', '.join(policy_names())}")
        if self.curriculum != "mixed" and self.rl_method != "rft":
            raise PresetError("--curriculum orders RFT's iterations: it needs --rl rft")
        if self.eval_range not in RANGES:
            raise PresetError(f"unknown --eval-range {self.eval_range!r}; expected one of {', '.join(RANGES)}")
        if self.eval_seeds is not None and self.eval_seeds > get_range(self.eval_range).size:
            raise PresetError(f"--eval-seeds {self.eval_seeds}: the {self.eval_range} range holds "
                              f"{get_range(self.eval_range).size:,} seeds (the ranges do not overlap)")
        for name in (self.from_stage, self.to_stage):
            if name not in STAGES:
                raise PresetError(f"unknown stage {name!r}; expected one of {', '.join(STAGES)}")
        if STAGES.index(self.from_stage) > STAGES.index(self.to_stage):
            raise PresetError(f"--from-stage {self.from_stage} comes after --to-stage {self.to_stage}")
        if self.rl_method not in RL_METHODS:
            raise PresetError(f"unknown RL method {self.rl_method!r}; expected one of {', '.join(RL_METHODS)}")
        if "no_negotiation" not in self.baselines or "rule_expert" not in self.baselines:
            raise PresetError("the evidence compares with no_negotiation and rule_expert: keep both in --baselines")
        if self.workers < 1:
            raise PresetError("workers must be at least 1")
        if self.backend not in ("process", "ray"):
            raise PresetError(f"unknown backend {self.backend!r}; expected process or ray")
        if self.rl_worlds is not None and (self.rl_worlds < 0 or self.rl_method == "grpo"):
            raise PresetError("--rl-worlds is RFT's (0 or more fresh worlds per iteration)")
        if self.rl_replay is not None and (self.rl_replay < 0 or self.rl_method == "grpo"):
            raise PresetError("--rl-replay is RFT's (0 or more teacher episodes per iteration)")
        if self.rl_proposals is not None:
            if self.rl_method == "grpo" or get_preset(self.preset).rft.explore != "lookahead":
                raise PresetError("--rl-proposals are candidates of RFT's lookahead")
            try:
                scripted_policies(self.rl_proposals)
            except ValueError as e:
                raise PresetError(f"--rl-proposals: {e}") from None
        if self.rl_train_on is not None:
            from .rft import TRAIN_ON

            if self.rl_method == "grpo" or self.rl_train_on not in TRAIN_ON:
                raise PresetError(f"--rl-train-on is RFT's: one of {', '.join(TRAIN_ON)}")
            if self.rl_train_on != "episodes" and get_preset(self.preset).rft.explore != "lookahead":
                raise PresetError("--rl-train-on corrections and both train on the lookahead's changed turns")
        if self.rl_cumulative_corrections and (self.rl_method == "grpo" or self.rl_train_on != "both"):
            raise PresetError("--rl-cumulative-corrections keeps the changed turns' own pass: it needs "
                              "--rl-train-on both")
        if self.rl_keep_optimizer and self.rl_method == "grpo":
            raise PresetError("--rl-keep-optimizer is RFT's (GRPO's trainer keeps its own optimizer)")
        check_save_every(self.rl_save_every, "--rl-save-every")
        if self.rl_save_every and self.rl_method == "grpo":
            raise PresetError("--rl-save-every is RFT's (a GRPO stage keeps its final checkpoint alone)")
        self._validate_select()
        check_positive("--rl-corrections-lr-scale", self.rl_corrections_lr_scale)
        if self.rl_corrections_lr_scale is not None and (self.rl_method == "grpo"
                                                         or self.rl_train_on not in ("corrections", "both")):
            raise PresetError("--rl-corrections-lr-scale sets the changed turns' own pass: it needs "
                              "--rl-train-on both or corrections")
        if self.rl_method == "rft":
            rft = get_preset(self.preset).rft
            check_rft_sources(rft.worlds_per_iteration if self.rl_worlds is None else self.rl_worlds,
                              rft.replay if self.rl_replay is None else self.rl_replay, "--rl-replay")
        self._validate_preference()
        if self.accel.use_vllm and self.rl_method != "grpo":
            raise PresetError("--use-vllm generates GRPO's rollouts: add --rl grpo")
        self.accel.validate()
        if STAGES.index(self.from_stage) <= STAGES.index("sft") <= STAGES.index(self.to_stage):
            # what the sft stage loads, found missing before the data stage plays its episodes
            check_starting_model(get_preset(self.preset), self.model)

    def _validate_select(self) -> None:
        if self.rl_select is None:
            return
        validation = get_range("validation")
        if self.rl_select < 1 or self.rl_select > validation.size // 2:
            raise PresetError(f"--rl-select {self.rl_select}: 1 to {validation.size // 2:,} validation seeds")
        if self.rl_method == "grpo" or not self.rl_save_every or self.rl_save_every >= int(self.rl_iterations or 1):
            raise PresetError("--rl-select chooses among RFT's saved checkpoints: it needs --rl-save-every N "
                              "with N below --rl-steps")
        if self.eval_range == "validation" and int(self.eval_seeds or 0) + self.rl_select > validation.size:
            raise PresetError(f"--eval-seeds {self.eval_seeds} and --rl-select {self.rl_select} would share "
                              f"validation seeds (the evaluation plays the range's first, the choice its last)")

    def _validate_preference(self) -> None:
        # found before the data and sft stages spend an hour, not when the rl stage builds its run
        if (self.preference or self.dpo_beta is not None or self.dpo_lr_scale is not None) and self.rl_method == "grpo":
            raise PresetError("--preference and its --dpo-* options are RFT's: a pass on its lookahead's ranked turns")
        check_preference(self.preference, get_preset(self.preset).rft.explore, self.dpo_beta, self.dpo_lr_scale)
