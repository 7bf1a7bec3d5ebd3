"""The plain loss of :class:`ArenaSFTTrainer` is TRL's loss: same records, same model, same batch,
the fused head and the plain path give the same value and the same next-token accuracy."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_arena.training import trainer as trainer_mod
from gpu_arena.training.data import play_episode_record
from gpu_arena.training.presets import load_pretrained


def _trainer(tiny_sft: Path, tmp_path: Path) -> trainer_mod.ArenaSFTTrainer:
    from trl import SFTConfig

    from gpu_arena.training.data import records_to_dataset

    model, tok = load_pretrained(tiny_sft)
    records = [play_episode_record("rule_expert", task, "train", 40 + k).to_json()
               for k, task in enumerate(("single_trade", "market_round", "coalition_market"))]
    data = records_to_dataset(records).select_columns(["messages", "tools"])
    args = SFTConfig(output_dir=str(tmp_path / "t"), per_device_train_batch_size=3, report_to="none", use_cpu=True,
                     assistant_only_loss=True, max_length=8192, save_strategy="no", disable_tqdm=True,
                     activation_checkpointing=False)
    return trainer_mod.ArenaSFTTrainer(model=model, args=args, train_dataset=data, processing_class=tok)


def test_the_plain_loss_is_the_fused_heads(tiny_sft: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    trainer = _trainer(tiny_sft, tmp_path)
    batch = next(iter(trainer.get_train_dataloader()))
    assert int((batch["labels"] != -100).sum()) > 0
    trainer.model.train()
    values = {}
    for lean in (True, False):
        monkeypatch.setattr(trainer_mod, "lean_loss", lambda lean=lean: lean)
        trainer._metrics["train"].clear()
        with torch.no_grad():
            values[lean] = (float(trainer.compute_loss(trainer.model, dict(batch))),
                            trainer._metrics["train"]["mean_token_accuracy"][-1])
    assert values[True][0] == pytest.approx(values[False][0], rel=1e-5)
    # the same tokens right (one token more or fewer moves it by 1/count, over 1e-4 here); the two
    # paths divide in float32 and float64, so the last digits of the same ratio may differ
    assert values[True][1] == pytest.approx(values[False][1], abs=1e-6)
    assert trainer_mod.lean_loss() is False  # monkeypatched last to the fused path: the switch is what decides


def test_the_cpu_run_takes_the_plain_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_ARENA_TRAIN_CPU", "1")
    assert trainer_mod.lean_loss() is True


def test_a_right_padded_batch_trains_the_same_without_its_mask(tiny_sft: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    trainer = _trainer(tiny_sft, tmp_path)
    batch = next(iter(trainer.get_train_dataloader()))
    mask = batch["attention_mask"]
    assert trainer_mod.right_padded(mask) and int((mask == 0).sum()) > 0  # rows of different lengths
    monkeypatch.setattr(trainer_mod, "lean_loss", lambda: True)
    trainer.model.train()
    runs = {}
    for drop in (True, False):
        monkeypatch.setattr(trainer_mod, "right_padded", lambda m, drop=drop: drop)
        trainer.model.zero_grad()
        loss = trainer.compute_loss(trainer.model, dict(batch))
        loss.backward()
        runs[drop] = (float(loss.detach()), [p.grad.clone() for p in trainer.model.parameters() if p.grad is not None])
    assert runs[True][0] == pytest.approx(runs[False][0], rel=1e-5)
    assert len(runs[True][1]) == len(runs[False][1]) > 0
    for a, b in zip(runs[True][1], runs[False][1], strict=True):
        assert torch.allclose(a, b, rtol=1e-3, atol=1e-6)


def test_right_padded_reads_the_mask() -> None:
    import torch

    assert trainer_mod.right_padded(torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0]]))
    assert not trainer_mod.right_padded(torch.tensor([[1, 1, 1], [0, 1, 1]]))  # left padding
    assert not trainer_mod.right_padded(torch.tensor([[1, 0, 1]]))  # a hole: packed or odd
