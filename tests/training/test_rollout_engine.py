"""The rollout engine plays the episodes the loop before it played: prompts built turn by turn are
the full render's ids, replies read directly are read as the response parser reads them, worker
processes give what inline workers give, and the engine says where its time went."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_arena.llm.tools import action_tools
from gpu_arena.rollouts import RolloutEngine, SessionConfig, TransformersBackend, WorkerPool, World
from gpu_arena.rollouts.chat import ChatTokens, full_ids, incremental, probe_chat
from gpu_arena.rollouts.session import fast_call, read_reply
from gpu_arena.training.data import play_episode_record
from gpu_arena.training.presets import corpus_for_tokenizer, load_pretrained, train_tokenizer
from gpu_arena.training.rollouts import BatchedSampler, chat_mode

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))


@pytest.fixture(scope="module")
def tok() -> Any:
    records = [play_episode_record("rule_expert", t, "train", s).to_json()
               for t in ("single_trade", "market_round", "coalition_market") for s in range(3)]
    return train_tokenizer(corpus_for_tokenizer(records), 1024)


@pytest.mark.parametrize("task", ["single_trade", "market_round", "coalition_market"])
def test_a_prompt_built_turn_by_turn_is_the_full_render(tok: Any, task: str) -> None:
    tools = action_tools()
    assert incremental(tok, tools)
    for seed in (11, 12):
        chat = probe_chat(task, seed, turns=20)  # every turn of the episode, tool calls and the closing turn
        built = ChatTokens(tok, tools, mode="incremental")
        built.start(chat[:2])
        assert built.ids == full_ids(tok, chat[:2], tools)
        for k in range(3, len(chat), 2):
            start = len(built.ids)
            piece = built.extend(chat[k - 1:k + 1])
            assert built.ids[start:] == piece
            assert built.ids == full_ids(tok, chat[:k + 1], tools), f"turn {k // 2} of {task} seed {seed}"


def test_a_template_that_does_not_extend_by_appending_is_rendered_whole(tok: Any) -> None:
    import copy

    other = copy.deepcopy(tok)
    # a template that restates the number of messages first: no chat is a prefix of a longer one
    other.chat_template = "{{ messages | length }}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}" \
                          "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    assert not incremental(other, None)
    assert chat_mode(other) == "full"
    assert chat_mode(tok) == "incremental"
    # verbatim trajectories (GRPO on the engine) cannot be built on such a template: said, not guessed
    from gpu_arena.training.grpo_rollouts import EngineRollouts

    with pytest.raises(ValueError, match="extends a chat by appending"):
        EngineRollouts(other, constrained=False, max_turn_tokens=16)


def test_a_grammar_shaped_reply_is_read_as_the_response_parser_reads_it(tok: Any) -> None:
    import torch

    from gpu_arena.llm.agents import _parsed_tool_calls

    chat = probe_chat("market_round", 3, turns=20)
    prompt = full_ids(tok, chat[:2], action_tools())
    replies = []
    for m in chat:
        for call in m.get("tool_calls") or []:
            fn = call["function"]
            replies.append('<tool_call>\n{"name": "' + fn["name"] + '", "arguments": '
                           + json.dumps(fn["arguments"]) + "}\n</tool_call>")
    replies += ['<tool_call>\n{"name": "wait", "arguments": {}}\n</tool_call>',
                '<tool_call>\n{"name": "send_message", "arguments": {"message": "a\\nb \\"c\\""}}\n</tool_call>']
    assert len(replies) > 3
    for text in replies:
        ids = [*tok.encode(text, add_special_tokens=False), tok.eos_token_id]
        direct = fast_call(text)
        assert direct is not None
        parsed = _parsed_tool_calls(tok, torch.tensor(ids), torch.tensor(prompt), action_tools())
        assert direct == parsed and read_reply(tok, ids, prompt, action_tools())[:2] == parsed
    # anything else goes to the parser: text around the call, two calls, a call that is not an object
    for text in ('hi <tool_call>\n{"name": "wait", "arguments": {}}\n</tool_call>',
                 '<tool_call>\n{"name": "wait", "arguments": []}\n</tool_call>',
                 '<tool_call>\n{"name": "wait", "arguments": {}, "x": 1}\n</tool_call>', "wait"):
        assert fast_call(text) is None


def test_worker_processes_play_the_episodes_inline_workers_play(tiny_sft: Path) -> None:
    model, tok = load_pretrained(tiny_sft)
    worlds = [World("single_trade", "train", s) for s in (3, 4, 5)] + [World("market_round", "holdout", 1)]
    inline, inline_stats = BatchedSampler(model, tok, temperature=0.0, max_new_tokens=40, constrained=True).play(worlds)
    with BatchedSampler(model, tok, temperature=0.0, max_new_tokens=40, constrained=True, workers=2) as sampler:
        assert sampler.pool.kind == "process"
        spread, stats = sampler.play(worlds)
    assert [r.actions for r in spread] == [r.actions for r in inline]
    assert [r.episode_return for r in spread] == [r.episode_return for r in inline]
    assert [r.messages for r in spread] == [r.messages for r in inline]
    assert {r.engine for r in spread} <= {"rust", "python"} and all(r.engine for r in spread)
    # why the Python core played a rollout, if it did (a model's seat binds to no world: nothing moves)
    assert [(r.engine, r.engine_reason) for r in spread] == [(r.engine, r.engine_reason) for r in inline]
    assert all((r.engine == "rust") == (r.engine_reason is None) for r in spread)
    # where the time went: the workers' CPU is counted, generation is part of the wall time
    assert stats.worker_cpu_seconds > 0 and inline_stats.worker_cpu_seconds == 0
    assert 0 < stats.generate_seconds < stats.seconds and stats.turns == sum(r.turns for r in spread)
    summary = stats.summary()
    assert summary["turns"] == stats.turns and 0 < summary["generate_share"] < 1


def test_a_failed_worker_request_is_an_error_naming_its_cause(tok: Any) -> None:
    from gpu_arena.rollouts.workers import WorkerError

    with WorkerPool(SessionConfig(tok, chat_mode="incremental"), workers=1) as pool:
        pool.owner[12345] = 0  # a key the worker never opened
        with pytest.raises(WorkerError, match="KeyError"):
            pool.answer([(12345, "wait")]).wait()
        # the worker goes on serving
        [turn] = pool.open([World("single_trade", "train", 1)]).wait()
        assert turn.ids and not turn.done


def test_the_engine_plays_a_text_backend_through_the_parser(tok: Any) -> None:
    """A server that answers in text (the OpenAI-compatible backend) is read as text replies are."""
    from gpu_arena.rollouts import GenerationStats

    class Text:
        name, constrained = "text", False

        def __init__(self) -> None:
            self.stats = GenerationStats()

        def generate(self, prompts: Any, **kwargs: Any) -> list[Any]:
            return ['<tool_call>\n{"name": "wait", "arguments": {}}\n</tool_call>'] * len(prompts)

    with WorkerPool(SessionConfig(tok, chat_mode="incremental")) as pool:
        rollouts, _stats = RolloutEngine(Text(), pool, temperature=0.0).play([World("single_trade", "train", 2)])
    [r] = rollouts
    assert r.turns > 0 and r.valid_turns == r.turns and r.format_errors == 0
    assert all(a.action_type == "wait" for a in r.actions)


def test_refused_turns_are_counted_by_the_rule_that_refused_them(tok: Any) -> None:
    """A rollout counts its refused turns by code, and GRPO's logged metrics carry each code's
    share of the turns (what a grammar of legal ids cannot see)."""
    from gpu_arena.rollouts import GenerationStats
    from gpu_arena.training.grpo_rollouts import reward_functions

    class Text:
        name, constrained = "text", False

        def __init__(self) -> None:
            self.stats = GenerationStats()

        def generate(self, prompts: Any, **kwargs: Any) -> list[Any]:  # an offer of a block it does not hold
            call = {"name": "send_offer", "arguments": {"target_lab_id": "lab_1", "block_ids": ["b_9_9"]}}
            return [f"<tool_call>\n{json.dumps(call)}\n</tool_call>"] * len(prompts)

    with WorkerPool(SessionConfig(tok, chat_mode="incremental")) as pool:
        rollouts, _stats = RolloutEngine(Text(), pool, temperature=0.0).play([World("single_trade", "train", 2)])
    [r] = rollouts
    assert r.valid_turns == 0 and r.turns > 0
    assert r.refusals == {"unknown_block": r.turns}
    logged: dict[str, float] = {}
    rate = reward_functions()[-1]
    rate(turns=[r.turns, 4], valid_turns=[0, 3], format_errors=[0, 0], episode_return=[0.0, 0.0],
         turns_per_s=[1.0, 1.0], generate_share=[0.5, 0.5], refusals=[r.refusals, {"offer_stale": 1}],
         log_metric=logged.__setitem__)
    total = r.turns + 4
    assert logged["arena/refused/unknown_block"] == pytest.approx(r.turns / total)
    assert logged["arena/refused/offer_stale"] == pytest.approx(1 / total)


def test_unknown_worker_backends_and_counts_are_refused(tok: Any) -> None:
    config = SessionConfig(tok)
    with pytest.raises(ValueError, match="worker backend"):
        WorkerPool(config, 1, "slurm")
    with pytest.raises(ValueError, match="workers"):
        WorkerPool(config, -1)


def test_the_transformers_backend_keeps_the_end_token_and_drops_padding(tiny_sft: Path) -> None:
    model, tok = load_pretrained(tiny_sft)
    backend = TransformersBackend(model, tok)
    prompts = [full_ids(tok, probe_chat("single_trade", s, turns=1)[:2], action_tools()) for s in (1, 2)]
    replies = backend.generate(prompts, temperature=0.0, top_p=1.0, max_new_tokens=12, seed=0)
    for r in replies:
        assert isinstance(r, list) and tok.pad_token_id not in r
        assert tok.eos_token_id not in r[:-1]
    assert backend.stats.calls == 1 and backend.stats.generated_tokens == sum(len(r) for r in replies)


def test_an_openai_compatible_server_generates_with_the_grammar_it_is_sent(tok: Any) -> None:
    """The OpenAI backend against a completions server on 127.0.0.1: prompts go as token ids, the
    grammar as ``structured_outputs``, and the text that comes back is played through the parser."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from gpu_arena.rollouts import OpenAIBackend

    bodies: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            bodies.append(body)
            reply = {"choices": [{"text": '<tool_call>\n{"name": "wait", "arguments": {}}\n</tool_call>'}],
                     "usage": {"completion_tokens": 7}}
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        backend = OpenAIBackend(f"http://127.0.0.1:{server.server_port}/v1", "arena", grammar_field="structured_outputs")
        assert backend.constrained
        with WorkerPool(SessionConfig(tok, constrained=True, chat_mode="incremental")) as pool:
            rollouts, stats = RolloutEngine(backend, pool, temperature=0.0).play(
                [World("single_trade", "train", 4), World("market_round", "train", 4)])
        backend.close()
    finally:
        server.shutdown()
    assert all(r.turns > 0 and r.valid_turns == r.turns for r in rollouts)
    assert len(bodies) == stats.turns and backend.stats.generated_tokens == 7 * stats.turns
    for body in bodies:
        assert body["model"] == "arena" and all(isinstance(t, int) for t in body["prompt"])
        assert body["structured_outputs"]["grammar"].startswith("start: ")
        assert body["max_tokens"] > 64  # room for the longest action the grammar allows
    free = OpenAIBackend("http://127.0.0.1:9/v1", "arena")
    assert not free.constrained  # no grammar field: free decoding, the parser reads the text
    free.close()


def test_greedy_answers_and_samples_share_one_prefill(tiny_sft: Path) -> None:
    """The lookahead's greedy answers and samples from one prefill of each prompt: the greedy replies
    are those of a plain greedy call, and every prompt gets its samples, in a row."""
    model, tok = load_pretrained(tiny_sft)
    backend = TransformersBackend(model, tok)
    prompts = [full_ids(tok, probe_chat(t, s, turns=1)[:2], action_tools())
               for t, s in (("single_trade", 1), ("market_round", 2), ("single_trade", 3))]
    plain = backend.generate(prompts, temperature=0.0, top_p=1.0, max_new_tokens=12, seed=0)
    greedy, drawn = backend.generate_with_samples(prompts, samples=3, temperature=1.0, top_p=1.0, max_new_tokens=12,
                                                  seed=0)
    assert greedy == plain and len(drawn) == 9
    assert all(isinstance(r, list) and r and tok.pad_token_id not in r for r in drawn)
    again = backend.generate_with_samples(prompts, samples=3, temperature=1.0, top_p=1.0, max_new_tokens=12, seed=0)
    assert again == (greedy, drawn)  # seeded


def test_greedy_replies_checked_first_are_the_constrained_replies(tiny_sft: Path) -> None:
    """Decoding a greedy turn freely and keeping the reply where it fits its grammar plays the
    episodes that decoding every turn under its grammar plays, move for move, with sampled
    explore turns among them. (This tiny model's free replies seldom fit: the bench's smoke test
    plays replies that do.)"""
    model, tok = load_pretrained(tiny_sft)
    worlds = [World(t, "train", s) for t in ("single_trade", "market_round", "coalition_market") for s in (1, 2)]
    explore = [None if k == 0 else 1 for k in range(len(worlds))]  # one episode sampled throughout
    played = {}
    for check_first in (True, False):
        with BatchedSampler(model, tok, temperature=0.7, max_new_tokens=40, constrained=True) as sampler:
            sampler.engine.check_first = check_first
            rollouts, _ = sampler.play(worlds, seed=5, explore_turns=explore)
            played[check_first] = ([r.actions for r in rollouts], [r.messages for r in rollouts],
                                   sampler.engine.checked, sampler.engine.redone)
    assert played[True][:2] == played[False][:2]
    checked, redone = played[True][2:]
    assert played[False][2:] == (0, 0) and checked > 0 and redone <= checked


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(st.sampled_from(["", "b_1_2 at 14.50", "<|im_end|>", "<|im_start|>user", "  job j_0_1: 30 GPU-h",
                                       "é ✓ ünïcode", "\t", "offer o_12 → lab_3", "{\"a\": [1, 2]}", " "]),
                      max_size=12),
       end=st.booleans())
def test_line_by_line_ids_are_the_whole_texts_ids(tok: Any, lines: list[str], end: bool) -> None:
    """Where no token can span a line break (the presets' tokenizers), a text tokenized line by line
    with each line's ids kept gives the ids of the whole text, special tokens and all."""
    from gpu_arena.rollouts.chat import _lines_kept, encode

    assert _lines_kept(tok, tok._tokenizer) is not None
    text = "\n".join(lines) + ("\n" if end else "")
    assert encode(tok, text) == tok._tokenizer.encode(text, add_special_tokens=False).ids
    assert encode(tok, text) == tok._tokenizer.encode(text, add_special_tokens=False).ids  # kept lines, again


def test_a_tokenizer_that_may_merge_across_lines_is_tokenized_whole() -> None:
    """A byte-level BPE whose pieces may hold a line break (GPT-2's regex keeps "\\n\\n" and a
    space before a line together) is never split into lines."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from gpu_arena.rollouts.chat import _lines_kept

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    other = PreTrainedTokenizerFast(tokenizer_object=raw)
    assert _lines_kept(other, other._tokenizer) is None
