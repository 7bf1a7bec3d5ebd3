"""Helpers for the training tests: small SFT data sets and a "scripted" checkpoint.

The scripted checkpoint is a real model (Llama architecture, the training tokenizer, the Qwen2.5
template) whose weights make it answer every turn with one fixed reply whatever the prompt and
the sampling temperature: every layer's output projections are zeroed, so the logits depend on
the last token only, and the unembedding maps the generation prompt's last token to the reply
(one added token) and the reply to end-of-turn, with margins far beyond sampling noise. GRPO
rollouts of it are known actions played through the real trainer and environment.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from gpu_arena.training.data import SFTDataSpec, build_sft_records, save_sft_data
from gpu_arena.training.presets import (
    ModelSpec,
    build_model,
    corpus_for_tokenizer,
    save_checkpoint,
    train_tokenizer,
)


def make_sft_data(out_dir: Path, seeds: int = 6, **changes: Any) -> Path:
    spec = SFTDataSpec(seeds=tuple(range(seeds)), **changes)
    records, provenance = build_sft_records(spec)
    save_sft_data(records, provenance, out_dir)
    return out_dir


def tiny_sft_checkpoint(root: Path, steps: int = 6) -> Path:
    """A tiny model after a few SFT steps on 8 teacher episodes (``root/sft``): it writes tool calls,
    some readable, some not."""
    from gpu_arena.training.sft import SFTRun, run_sft

    data = make_sft_data(root / "data", seeds=8)
    run_sft(SFTRun(data=str(data), output_dir=str(root / "sft"), preset="tiny", max_steps=steps,
                   db=str(root / "arena.db")))
    return root / "sft"


def replay(world: Any, actions: list[Any]) -> tuple[float, dict[str, float]]:
    """The return and summed reward columns of ``actions`` played again in a fresh environment on
    ``world`` (a rollouts ``World``), which they must finish."""
    from gpu_arena.core.types import REWARD_COLUMNS
    from gpu_arena.env import GpuArenaEnv

    env = GpuArenaEnv(task=world.task, split=world.split)
    env.reset(seed=world.seed)
    total, columns = 0.0, dict.fromkeys(REWARD_COLUMNS, 0.0)
    for a in actions:
        obs = env.step(a)
        total += obs.reward or 0.0
        for c in REWARD_COLUMNS:
            columns[c] += obs.reward_breakdown[c]
    assert env.episode is not None and env.episode.done
    return total, columns


def scripted_checkpoint(out_dir: Path, records: list[dict[str, Any]], reply: str) -> Path:
    import torch

    tok = train_tokenizer(corpus_for_tokenizer(records), 2048)
    tok.add_tokens([reply])
    spec = ModelSpec(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4,
                     num_kv_heads=2, tie_embeddings=False)
    model = build_model(spec, tok, seed=0)
    prompt = tok.apply_chat_template([{"role": "user", "content": "x"}], add_generation_prompt=True, tokenize=True,
                                     return_dict=False)
    chain = [int(prompt[-1]), *tok.encode(reply, add_special_tokens=False), int(tok.eos_token_id)]
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        emb, head = model.model.embed_tokens.weight, model.lm_head.weight
        for a, b in itertools.pairwise(chain):
            head[b] = emb[a] / emb[a].norm() * 50.0  # after the final RMSNorm the hidden state is ~ emb[a] / rms
    return save_checkpoint(model, tok, out_dir)
