"""The option checks of ``gpu-arena data`` and ``gpu-arena train``.

Every command checks its options here, before it plays an episode, loads a model, creates an
output folder or records a run: a bad value is a usage error (exit status 2) naming the option.
Only typer loads with them; what a check needs of the training stack loads inside it."""

from __future__ import annotations

import math
from typing import Any

import typer


def fail(e: Exception) -> typer.BadParameter:
    return typer.BadParameter(str(e))


MAX_TRAIN_SEED = 2**32 - 1  # the trainers seed numpy, whose seeds are 32-bit


def check_number(option: str, value: float | None, *, zero: bool = False) -> None:
    """``value`` (if given) is finite and above 0 (or at least 0 with ``zero``)."""
    if value is not None and (not math.isfinite(value) or value < 0 or (value == 0 and not zero)):
        raise typer.BadParameter(f"{option} must be a finite number {'of at least' if zero else 'above'} 0, "
                                 f"got {value}")


def check_finite(option: str, value: float | None) -> None:
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{option} must be a finite number, got {value}")


def check_scripted(option: str, name: str | None, *, none: bool = False) -> None:
    """``name`` (if given) is a scripted policy; ``none``: '' (no policy) is allowed too."""
    from ..policies import policy_names

    if name is None or (none and name == ""):
        return
    if name not in policy_names():
        extra = " or '' for none" if none else ""
        raise typer.BadParameter(f"{option}: unknown scripted policy {name!r}; expected one of "
                                 f"{', '.join(policy_names())}{extra}")


def check_proposals(option: str, spec: str | None) -> None:
    """``spec`` (if given and not '') names scripted policies separated by commas (``without:<step>``
    included): the lookahead's proposal policies."""
    from ..policies import scripted_policies

    if spec is None or spec == "":
        return
    try:
        scripted_policies(spec)
    except ValueError as e:
        raise typer.BadParameter(f"{option}: {e}") from None


def check_opponents(value: str | None, *, league: bool = False) -> str | None:
    """One policy for every other seat: ``archetypes``, a policy name (a family's, ``llm:...``, is
    not built here) or, with ``league``, ``league:topK`` (resolved from the store when the run
    starts)."""
    from ..policies import DEFAULT_OPPONENTS, OpponentsError, OpponentsSpec, policy_families, policy_names

    if value is None:
        return None
    try:
        one = OpponentsSpec.parse(value).one if value.strip() else None
    except OpponentsError:
        one = None
    if not isinstance(one, str):  # nothing, a list in seat order, seat=policy pairs
        raise typer.BadParameter(f"--opponents takes one policy for every other seat, got {value!r}")
    name = one
    if league and name.startswith("league:"):
        rest = name.removeprefix("league:")
        if not (rest.startswith("top") and rest[3:].isdigit() and int(rest[3:]) >= 1):
            raise typer.BadParameter(f"--opponents: expected league:topK (K >= 1), got {value!r}")
        return name
    prefix, family, _ = name.partition(":")
    if name != DEFAULT_OPPONENTS and name not in policy_names() and not (family and prefix in policy_families()):
        known = [DEFAULT_OPPONENTS, *policy_names(), *(f"{p}:..." for p in policy_families())]
        raise typer.BadParameter(f"--opponents: unknown policy {name!r}; expected one of {', '.join(known)}")
    return name


def check_output(option: str, path: str) -> None:
    """``path`` can become the directory a command writes: not a file, its parent creatable."""
    import os
    from pathlib import Path

    p = Path(path)
    if p.exists() and not p.is_dir():
        raise typer.BadParameter(f"{option} {path} is a file; expected a directory to write")
    above = next((a for a in p.parents if a.exists()), None)
    if above is not None and not above.is_dir():
        raise typer.BadParameter(f"cannot write {option} {path}: {above} is a file")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise typer.BadParameter(f"cannot write {option} {path}: {e.strerror}") from None
    where = p if p.exists() else p.parent
    if not os.access(where, os.W_OK | os.X_OK):
        raise typer.BadParameter(f"cannot write {option} {path}: permission denied")


def check_start(preset: str, model: str | None) -> None:
    """The preset exists and what the run starts from is there (the checkpoint or GGUF)."""
    from ..training.presets import PresetError, check_starting_model, get_preset

    try:
        check_starting_model(get_preset(preset), model)
    except PresetError as e:
        raise fail(e) from None


def check_env_url(url: str | None) -> None:
    """``http(s)://host[:port]`` where a GPU Arena server answers: refused before the model loads."""
    from contextlib import suppress
    from urllib.parse import urlsplit

    if url is None:
        return
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port that is not a number in range raises ValueError
    except ValueError as e:
        raise typer.BadParameter(f"--env-url {url!r}: {e}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise typer.BadParameter(f"--env-url expects http(s)://host[:port], got {url!r}")
    from ..client import GpuArenaClient

    client = GpuArenaClient(base_url=url).sync()
    try:
        client.connect()
    except ConnectionError as e:
        raise typer.BadParameter(f"--env-url {url}: no GPU Arena server answers ({e})") from None
    finally:
        with suppress(Exception):
            client.close()



def training_accel(use_vllm: bool = False, vllm_mode: str = "colocate", vllm_server_url: str | None = None,
           bf16: bool = False, gradient_checkpointing: bool = False) -> Any:
    from ..training.accel import Accel

    return Accel(use_vllm=use_vllm, vllm_mode=vllm_mode, vllm_server_url=vllm_server_url, bf16=bf16,
                 gradient_checkpointing=gradient_checkpointing)


BF16_HELP = "bfloat16 training (GPUs; refused on a CPU, where it measures ~100x slower than float32)"
CKPT_HELP = "gradient checkpointing (less memory, more compute: large models on GPUs)"
VLLM_HELP = "generate GRPO rollouts with vLLM (TRL's use_vllm; needs vllm installed, a GPU)"
VLLM_MODE_HELP = "colocate (vLLM in the trainer's process) | server (a `trl vllm-serve` process)"
# RFT's preference pass, the same words in `train rft` and `train pipeline`
PREFERENCE_HELP = "a pass on the lookahead's ranked turns after each fine-tuning: dpo ('' for none)"
DPO_BETA_HELP = "DPO's beta (how far a pass moves from the model before it)"
DPO_LR_SCALE_HELP = "the DPO pass's learning rate over the iteration's"


def train_errors() -> tuple[type[Exception], ...]:
    from ..training.data import DataError
    from ..training.presets import PresetError

    return (DataError, PresetError)

