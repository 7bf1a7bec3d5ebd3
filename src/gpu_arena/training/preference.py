"""A preference pass on the lookahead's ranked turns: DPO with TRL's ``DPOTrainer``.

RFT's fine-tuning pass (:mod:`gpu_arena.training.rft`) learns the moves the lookahead kept, beside
the teacher's replayed episodes, which the SFT start already imitates: on a turn where the model's
greedy answer lost to another move, the loss raises the better move and says nothing about the
worse one. The lookahead knows both (:func:`gpu_arena.training.lookahead.pair_record`: the move
played and the greedy answer it beat), so a pairwise loss can push the model's greedy answer away
from the move the environment scored lower. Only the changed turns are paired: a DPO step costs
about three of SFT's (the pair's two sequences, and the reference's), on prompts of whole
conversations. DPO (Rafailov et al., 2023) does that against a frozen copy of the model as it stood before
the pass, which keeps the step small where the pair says nothing new.
"""

from __future__ import annotations

import copy
from typing import Any

from .accel import Accel
from .common import use_cpu
from .presets import PresetError, check_positive
from .progress import drop_printer

PREFERENCES = ("dpo",)  # the pairwise losses a run may add (RFTRun.preference)
MAX_LENGTH = 8192  # tokens of a pair's prompt and longer answer, as the fine-tuning pass's bound


def check_preference(preference: str | None, explore: str | None, dpo_beta: float | None,
                     dpo_lr_scale: float | None) -> None:
    """The preference pass's settings, refused with a :class:`PresetError` where the pass cannot run:
    an unknown loss, no lookahead to rank turns, a DPO number that is not finite and above 0. RFT's
    run and the pipeline (before its data stage) both check here."""
    if preference not in (None, "", *PREFERENCES):
        raise PresetError(f"unknown preference {preference!r}; expected one of {', '.join(PREFERENCES)}")
    if preference and explore != "lookahead":
        raise PresetError("preference pairs are the lookahead's ranked turns: a preference pass needs explore=lookahead")
    check_positive("dpo_beta", dpo_beta)
    check_positive("dpo_lr_scale", dpo_lr_scale)


def fitting_pairs(tokenizer: Any, records: list[dict[str, Any]], max_length: int = MAX_LENGTH) -> list[dict[str, Any]]:
    """The preference ``records`` whose prompt and both answers fit ``max_length`` tokens. TRL
    would drop a row whose prompt alone fills it and cut the answers of a longer one; a pass on
    the rows left says what it trained on, and a pass with none left is skipped."""
    kept = []
    for r in records:
        longest = max(len(tokenizer.apply_chat_template(r["prompt"] + r[side], tools=r["tools"] or None, tokenize=True,
                                                        return_dict=True)["input_ids"]) for side in ("chosen", "rejected"))
        if longest <= max_length:
            kept.append(r)
    return kept


def reference_copy(model: Any) -> Any:
    """A frozen copy of ``model`` built from its config and weights: a trainer may have wrapped
    the model's ``forward`` (a copy of the object would call the wrapped, trained model)."""
    reference = type(model)(copy.deepcopy(model.config))
    reference.load_state_dict(model.state_dict())
    reference.to(device=model.device, dtype=model.dtype).eval()
    for p in reference.parameters():
        p.requires_grad_(False)
    return reference


def preference_pass(model: Any, tokenizer: Any, records: list[dict[str, Any]], *, output_dir: str,
                    learning_rate: float, beta: float, epochs: float, batch_size: int, seed: int,
                    accel: Accel | None = None) -> Any:
    """One ``DPOTrainer`` pass over preference ``records`` (conversational ``prompt``, ``chosen``,
    ``rejected`` and the prompt's ``tools``; :func:`fitting_pairs` first), against
    :func:`reference_copy` of ``model`` as it is now. The model is trained in place; returns TRL's
    train output."""
    from datasets import Dataset, Features, Json, List
    from trl import DPOConfig, DPOTrainer

    columns = ("prompt", "chosen", "rejected", "tools")
    dataset = Dataset.from_dict({k: [r[k] for r in records] for k in columns},
                                features=Features({k: List(Json()) for k in columns}))
    args = DPOConfig(
        output_dir=output_dir, num_train_epochs=float(epochs), per_device_train_batch_size=int(batch_size),
        learning_rate=float(learning_rate), lr_scheduler_type="constant", warmup_steps=0, logging_steps=1,
        save_strategy="no", report_to="none", seed=seed, data_seed=seed, beta=float(beta), max_length=MAX_LENGTH,
        use_cpu=use_cpu(), dataloader_num_workers=0, disable_tqdm=True, weight_decay=0.0,
        **(accel or Accel()).trainer_args(),
    )
    trainer = DPOTrainer(model=model, ref_model=reference_copy(model), args=args, train_dataset=dataset,
                         processing_class=tokenizer)
    drop_printer(trainer)
    return trainer.train()


__all__ = ["MAX_LENGTH", "PREFERENCES", "fitting_pairs", "preference_pass", "reference_copy"]
