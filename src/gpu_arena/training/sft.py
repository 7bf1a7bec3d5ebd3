"""Supervised fine-tuning on arena chats with TRL's ``SFTTrainer`` (full fine-tune, or LoRA via peft).

The loss covers the assistant turns only (``assistant_only_loss``: TRL swaps in the training
variant of the Qwen2.5 template, whose ``{% generation %}`` markers delimit them); ``--whole-chat``
trains on the turns too. The result is a plain checkpoint directory (LoRA
adapters are merged) that ``llm:hf:<dir>?mode=tools`` plays and ``gpu-arena train grpo`` starts from.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from .accel import Accel
from .common import MetricsCallback, check_output_dir, describe_model, logged_run, starting_model, use_cpu
from .data import load_sft_data
from .presets import get_preset, save_checkpoint
from .progress import drop_printer, progress_callback
from .runlog import RunLog


@dataclass
class SFTRun:
    """One SFT run. ``None`` fields take the preset's value."""

    data: str
    output_dir: str
    preset: str = "tiny"
    model: str | None = None  # checkpoint dir or .gguf; None: build from the preset (tiny, small) or SmolLM2's GGUF
    epochs: float | None = None
    learning_rate: float | None = None
    batch_size: int | None = None
    grad_accum: int | None = None
    max_length: int | None = None
    max_steps: int | None = None
    lora: bool | None = None
    lora_r: int | None = None
    lora_alpha: int | None = None
    assistant_only_loss: bool | None = None
    group_by_length: bool | None = None
    seed: int = 0
    db: str | None = None
    overwrite: bool = False
    accel: Accel = field(default_factory=Accel)  # bf16, gradient checkpointing (the GPU recipe)

    def resolved(self) -> SFTRun:
        d = get_preset(self.preset).sft
        return replace(self, epochs=self.epochs if self.epochs is not None else d.epochs,
                       learning_rate=self.learning_rate if self.learning_rate is not None else d.learning_rate,
                       batch_size=self.batch_size or d.batch_size, grad_accum=self.grad_accum or d.grad_accum,
                       max_length=self.max_length if self.max_length is not None else d.max_length,
                       lora=self.lora if self.lora is not None else d.lora, lora_r=self.lora_r or d.lora_r,
                       lora_alpha=self.lora_alpha or d.lora_alpha,
                       assistant_only_loss=d.assistant_only_loss if self.assistant_only_loss is None
                       else self.assistant_only_loss,
                       group_by_length=d.group_by_length if self.group_by_length is None else self.group_by_length)


def sft_args(run: SFTRun, out: Path) -> Any:
    """The ``SFTConfig`` of a resolved run writing to ``out``: a cosine schedule, no checkpoints on
    the way, and batches drawn at random or grouped by length (``run.group_by_length``)."""
    from trl import SFTConfig

    return SFTConfig(
        output_dir=str(out / "trainer"), num_train_epochs=float(run.epochs or 1), max_steps=run.max_steps or -1,
        per_device_train_batch_size=int(run.batch_size or 1), gradient_accumulation_steps=int(run.grad_accum or 1),
        learning_rate=float(run.learning_rate or 1e-4), lr_scheduler_type="cosine", warmup_steps=0.05,
        logging_steps=1, save_strategy="no", report_to="none", seed=run.seed, data_seed=run.seed,
        assistant_only_loss=bool(run.assistant_only_loss), max_length=run.max_length, packing=False, use_cpu=use_cpu(),
        dataloader_num_workers=0, disable_tqdm=True, weight_decay=0.0,
        # LengthGroupedSampler: random megabatches, each sorted by length, so few pad tokens
        train_sampling_strategy="group_by_length" if run.group_by_length else "random",
        **run.accel.trainer_args(),
    )


def run_sft(run: SFTRun, display: Any = None) -> dict[str, Any]:
    """Train; write the checkpoint to ``run.output_dir``; log config and metrics to the store and
    ``metrics.jsonl``. Returns a summary (run id, parameters, final loss, duration, ...).
    ``display``: a :class:`~gpu_arena.training.progress.StageProgress` moved step by step."""
    from .trainer import ArenaSFTTrainer

    run = run.resolved()
    run.accel.validate()
    preset = get_preset(run.preset)
    out = check_output_dir(run.output_dir, run.overwrite)
    dataset, provenance = load_sft_data(run.data)
    records = [dict(r) for r in dataset]
    start = starting_model(preset, run.model, records, run.seed)
    columns = ["messages", *(["tools"] if "tools" in dataset.column_names else [])]
    train_ds = dataset.select_columns(columns)
    config = {"run": asdict(run), "preset": preset.to_dict(), "data_provenance": provenance,
              "model_source": start.source, "model": describe_model(start.model), "episodes": len(records)}
    runlog = RunLog(kind="sft", config=config, output_dir=out, preset=run.preset, model=start.source, db=run.db)
    callback = MetricsCallback(runlog)

    def train() -> dict[str, Any]:
        args = sft_args(run, out)
        peft_config = None
        if run.lora:
            from peft import LoraConfig

            peft_config = LoraConfig(r=int(run.lora_r or 16), lora_alpha=int(run.lora_alpha or 32), lora_dropout=0.0,
                                     target_modules="all-linear", task_type="CAUSAL_LM")
        callbacks: list[Any] = [callback]
        if display is not None:
            callbacks.append(progress_callback(display))
        trainer = ArenaSFTTrainer(model=start.model, args=args, train_dataset=train_ds,
                                  processing_class=start.tokenizer, peft_config=peft_config, callbacks=callbacks)
        drop_printer(trainer)
        result = trainer.train()
        model: Any = trainer.model
        if run.lora:
            model = model.merge_and_unload()  # a plain checkpoint: llm:hf:<dir> needs no peft
        summary = {"train_loss": result.training_loss, "steps": result.global_step,
                   "final": callback.last, "model": describe_model(model), "episodes": len(records)}
        save_checkpoint(model, start.tokenizer, out, meta={"kind": "sft", "run_id": runlog.run_id, **config,
                                                           "summary": summary})
        return summary

    return logged_run(runlog, train)


__all__ = ["SFTRun", "run_sft", "sft_args"]
