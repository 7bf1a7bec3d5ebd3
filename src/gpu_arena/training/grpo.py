"""Multi-turn GRPO against the live environment with TRL's ``GRPOTrainer`` and ``environment_factory``.

Each dataset row names a world (``task``, ``split``, ``seed``); TRL repeats a row
``num_generations`` times, so a group is that many whole episodes of the same world, opponents and
shocks, and the advantage of a rollout is its episode return against its group's. The prompt is
the agents' system prompt in tools mode with the first turn appended by
:meth:`ArenaToolEnv.reset`; the model sees the tool schemas of :func:`gpu_arena.llm.action_tools`
(the trainer's tool list is replaced by them: TRL would otherwise describe the tools from the
environment's Python signatures, which is not what the agents are shown); every tool call plays
one round (see :mod:`gpu_arena.training.arena_env`).

Rewards: the environment's ``get_reward`` (weight 1, the episode return) and, with weight 0 so they
are only logged, one function per reward column and ``valid_action_rate``.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..core.tasks import task_params
from ..core.types import SPLITS, TASKS
from ..llm.prompts import system_prompt
from ..llm.tools import action_tools
from .accel import Accel
from .arena_env import ArenaToolEnv, reward_functions
from .common import MetricsCallback, check_output_dir, describe_model, logged_run, starting_model, use_cpu
from .grpo_rollouts import EngineRollouts, world_prompt
from .grpo_rollouts import reward_functions as engine_reward_functions
from .presets import SCALE_REWARDS, PresetError, fill_defaults, get_preset, save_checkpoint
from .progress import drop_printer, progress_callback
from .runlog import RunLog


@dataclass
class GRPORun:
    """One GRPO run. ``None`` fields take the preset's value. ``model`` is the checkpoint to start
    from (typically the SFT output); ``None`` only for the smollm2 preset (its GGUF)."""

    output_dir: str
    model: str | None = None
    preset: str = "tiny"
    tasks: tuple[str, ...] = ("single_trade",)
    split: str = "train"
    seeds: tuple[int, ...] = tuple(range(1000, 1200))
    env_url: str | None = None
    opponents: str | None = None  # a policy for every other seat, or league:topK (a pool, one per world)
    opponent_pool: tuple[str, ...] = ()  # league:topK resolved when the run starts (recorded with it)
    max_steps: int | None = None
    num_generations: int | None = None
    prompts_per_step: int | None = None
    learning_rate: float | None = None
    temperature: float | None = None
    max_completion_length: int | None = None
    max_turn_tokens: int = 128  # tokens the model may generate per turn (an action needs far fewer)
    beta: float | None = None
    scale_rewards: str | None = None  # "group" | "batch" | "none" (TRL scale_rewards)
    lora: bool | None = None
    # who plays the rollouts: "engine" (the rollout engine through TRL's rollout_func: every episode of a
    # step at once, grammar-constrained when `constrained`) or "trl" (TRL's tool-call loop; the only way
    # to play against a server, --env-url). None: engine, unless env_url is given
    rollouts: str | None = None
    constrained: bool | None = None  # None: the preset's (its pipeline decodes under the action grammar)
    workers: int = 0  # the engine's environment workers (0: in this process)
    backend: str = "process"
    seed: int = 0
    db: str | None = None
    overwrite: bool = False
    accel: Accel = field(default_factory=Accel)  # the GPU recipe's switches (vLLM, bf16, checkpointing)

    def resolved(self) -> GRPORun:
        run = fill_defaults(self, get_preset(self.preset).grpo)
        rollouts = run.rollouts or ("trl" if run.env_url else "engine")
        constrained = run.constrained if run.constrained is not None else get_preset(self.preset).pipeline.constrained
        return replace(run, rollouts=rollouts, constrained=constrained)

    def validate(self) -> None:
        for t in self.tasks:
            if t not in TASKS:
                raise PresetError(f"unknown task {t!r}; expected one of {', '.join(TASKS)}")
        if self.split not in SPLITS:
            raise PresetError(f"unknown split {self.split!r}; expected one of {', '.join(SPLITS)}")
        if not self.seeds:
            raise PresetError("no seeds given")
        if self.model is None and get_preset(self.preset).model is not None:
            raise PresetError(f"GRPO with preset {self.preset} starts from a checkpoint: pass --model (the SFT output)")
        if self.scale_rewards is not None and self.scale_rewards not in SCALE_REWARDS:
            raise PresetError(f"unknown scale_rewards {self.scale_rewards!r}; expected one of {', '.join(SCALE_REWARDS)}")
        if (self.num_generations or 2) < 2:
            raise PresetError("num_generations must be at least 2 (GRPO compares rollouts within a group)")
        if self.rollouts not in (None, *ROLLOUTS):
            raise PresetError(f"unknown rollouts {self.rollouts!r}; expected one of {', '.join(ROLLOUTS)}")
        if self.rollouts == "engine" and self.env_url:
            raise PresetError("the rollout engine plays in-process: --env-url needs --rollouts trl")
        if self.constrained and self.rollouts == "trl":
            raise PresetError("TRL's tool-call loop decodes freely: --constrained needs --rollouts engine")
        if self.workers < 0 or self.backend not in ("process", "ray"):
            raise PresetError("workers must be 0 or more and backend process or ray")
        self.accel.validate()


ROLLOUTS = ("engine", "trl")


def prompt_rows(tasks: tuple[str, ...], split: str, seeds: tuple[int, ...], pool: tuple[str, ...] = (),
                seed: int = 0) -> list[dict[str, Any]]:
    """The GRPO dataset: one row per world. The prompt is the system prompt and an empty user turn
    that ``reset`` fills with the first observation. With an opponent ``pool`` each world draws
    one of its policies for every other seat (reproducibly from ``seed``): a group of rollouts of
    one world meets the same opponents, and the worlds spread over the pool."""
    prompt = [{"role": "system", "content": system_prompt("tools")}, {"role": "user", "content": ""}]
    rows: list[dict[str, Any]] = [{"prompt": prompt, "task": t, "split": split, "seed": int(s)}
                                  for t in tasks for s in seeds]
    for row in rows if pool else ():
        row["opponents"] = pool[random.Random(f"{seed}:{row['task']}:{row['seed']}").randrange(len(pool))]
    return rows


def with_opponent_pool(run: GRPORun) -> GRPORun:
    """``run`` with ``league:topK`` opponents resolved to the league's entrants (else unchanged)."""
    if run.opponents is None or not run.opponents.startswith("league:"):
        return run
    from ..league import league_pool

    try:
        pool = league_pool(run.opponents, run.db)
    except (LookupError, ValueError) as e:
        raise PresetError(str(e)) from None
    return replace(run, opponent_pool=tuple(pool))


def grpo_config_kwargs(run: GRPORun) -> dict[str, Any]:
    """The ``GRPOConfig`` keyword arguments of an already resolved run (the GPU recipe's switches
    included), checked by the tests without building a trainer."""
    g = int(run.num_generations or 2)
    per_step = int(run.prompts_per_step or 1)
    max_rounds = max(task_params(t, run.split).rounds[1] for t in run.tasks)
    if run.rollouts == "engine":  # the episode return is the first reward function (weight 1)
        n_engine = len(engine_reward_functions())
        weights = [1.0] + [0.0] * (n_engine - 1)
    else:  # the environment's get_reward has weight 1 of its own
        weights = [0.0] * len(reward_functions())
    return dict(
        output_dir=f"{run.output_dir}/trainer", max_steps=int(run.max_steps or 1), per_device_train_batch_size=g,
        gradient_accumulation_steps=per_step, num_generations=g, learning_rate=float(run.learning_rate or 1e-5),
        lr_scheduler_type="constant", warmup_steps=0, temperature=float(run.temperature or 1.0),
        max_completion_length=int(run.max_completion_length or 1024), beta=float(run.beta or 0.0),
        scale_rewards=str(run.scale_rewards or "group"),
        # one turn's cap (the whole rollout's is max_completion_length): a model that babbles instead
        # of calling a tool loses that round, as an agent with max_tokens would
        generation_kwargs={"max_new_tokens": int(run.max_turn_tokens)},
        # a rollout is at most one call per round plus the answer after the end; two spare calls
        # absorb calls to unknown tool names, which TRL answers without playing a round
        max_tool_calling_iterations=max_rounds + 2,
        reward_weights=weights, logging_steps=1, save_strategy="no", report_to="none", seed=run.seed,
        data_seed=run.seed, use_cpu=use_cpu(), dataloader_num_workers=0,
        disable_tqdm=True, log_completions=False, shuffle_dataset=True, **run.accel.grpo_args(),
    )


def build_trainer(run: GRPORun, model: Any, tokenizer: Any, callbacks: list[Any] | None = None) -> Any:
    """The configured ``GRPOTrainer`` (not yet trained) for an already resolved run."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    funcs: list[Any] = reward_functions()
    args = GRPOConfig(**grpo_config_kwargs(run))
    dataset = Dataset.from_list(prompt_rows(run.tasks, run.split, run.seeds, run.opponent_pool, run.seed))
    peft_config = None
    if run.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear",
                                 task_type="CAUSAL_LM")
    if run.rollouts == "engine":
        import os

        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is TRL's, marked experimental
        rows = [{**row, "prompt": world_prompt(row["task"], row["split"], row["seed"], row.get("opponents"))}
                for row in prompt_rows(run.tasks, run.split, run.seeds, run.opponent_pool, run.seed)]
        rollout_func = EngineRollouts(tokenizer, constrained=bool(run.constrained), max_turn_tokens=run.max_turn_tokens,
                                      opponents=None if run.opponent_pool else run.opponents, workers=run.workers,
                                      backend=run.backend)
        engine_funcs: list[Any] = engine_reward_functions()
        return GRPOTrainer(model=model, reward_funcs=engine_funcs, args=args,
                           train_dataset=Dataset.from_list(rows), processing_class=tokenizer, peft_config=peft_config,
                           callbacks=callbacks, rollout_func=rollout_func)
    env_url = run.env_url
    opponents = None if run.opponent_pool else run.opponents  # a pool: each row names its opponents
    trainer = GRPOTrainer(model=model, reward_funcs=funcs, args=args, train_dataset=dataset,
                          processing_class=tokenizer, peft_config=peft_config, callbacks=callbacks,
                          environment_factory=lambda: ArenaToolEnv(env_url=env_url, opponents=opponents))
    # Show the model the agents' tool schemas (gpu_arena.llm.action_tools), not the ones TRL would
    # derive from ArenaToolEnv's Python signatures; calls still dispatch to the methods by name.
    tools_by_env = getattr(trainer, "_env_tools", None)
    if not isinstance(tools_by_env, dict) or set(tools_by_env) != {None}:
        raise RuntimeError("this TRL version keeps environment tools differently; gpu_arena.training needs TRL 1.16")
    tools_by_env[None] = action_tools()
    return trainer


def run_grpo(run: GRPORun, display: Any = None) -> dict[str, Any]:
    """Train with GRPO; write the checkpoint to ``run.output_dir``; log to the store and JSONL.
    ``display``: a :class:`~gpu_arena.training.progress.StageProgress` moved step by step."""
    run = with_opponent_pool(run.resolved())
    run.validate()
    preset = get_preset(run.preset)
    out = check_output_dir(run.output_dir, run.overwrite)
    start = starting_model(preset, run.model, None, run.seed)
    config = {"run": asdict(run), "preset": preset.to_dict(), "model_source": start.source,
              "model": describe_model(start.model)}
    runlog = RunLog(kind="grpo", config=config, output_dir=out, preset=run.preset, model=start.source, db=run.db)
    callback = MetricsCallback(runlog, episodes_per_step=int(run.num_generations or 2) * int(run.prompts_per_step or 1))
    def train() -> dict[str, Any]:
        callbacks: list[Any] = [callback]
        if display is not None:
            callbacks.append(progress_callback(display))
        trainer = build_trainer(run, start.model, start.tokenizer, callbacks)
        drop_printer(trainer)
        try:
            result = trainer.train()
        finally:
            if hasattr(trainer.rollout_func, "close"):
                trainer.rollout_func.close()
        model: Any = trainer.model
        if run.lora:
            model = model.merge_and_unload()
        summary = {"train_loss": result.training_loss, "steps": result.global_step, "final": callback.last,
                   "model": describe_model(model)}
        save_checkpoint(model, start.tokenizer, out, meta={"kind": "grpo", "run_id": runlog.run_id, **config,
                                                           "summary": summary})
        return summary

    return logged_run(runlog, train)


__all__ = ["ROLLOUTS", "GRPORun", "build_trainer", "grpo_config_kwargs", "prompt_rows", "run_grpo"]
