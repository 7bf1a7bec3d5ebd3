"""The GPU recipe's switches, passed through to TRL as TRL names them.

On a GPU machine (decision 0020, README "Training on GPUs"): ``--use-vllm`` with ``--vllm-mode
colocate`` (vLLM inside the trainer's process) or ``server`` (a ``trl vllm-serve`` process),
``--bf16``, ``--gradient-checkpointing`` and ``--lora``, under ``accelerate launch`` for several
GPUs. Each is checked here before any model loads, so that a switch the machine cannot honour is
a one-line error rather than a traceback from deep inside a trainer: vLLM that is not installed,
bf16 without a GPU (on these CPUs bfloat16 matmul measures about 100× slower than float32:
``bench/bench_train.py``).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from .presets import PresetError

VLLM_MODES = ("colocate", "server")


@dataclass(frozen=True)
class Accel:
    """How a trainer uses the hardware. The defaults are the CPU run's."""

    use_vllm: bool = False
    vllm_mode: str = "colocate"
    vllm_server_url: str | None = None  # server mode: where ``trl vllm-serve`` listens
    bf16: bool = False
    gradient_checkpointing: bool = False

    def validate(self, *, cuda: bool | None = None) -> None:
        if self.vllm_mode not in VLLM_MODES:
            raise PresetError(f"unknown vLLM mode {self.vllm_mode!r}; expected one of {', '.join(VLLM_MODES)}")
        if self.vllm_server_url is not None and not self.use_vllm:
            raise PresetError("--vllm-server-url needs --use-vllm --vllm-mode server")
        if self.use_vllm and importlib.util.find_spec("vllm") is None:
            raise PresetError("--use-vllm needs vLLM, which is not installed: pip install vllm (on a CUDA machine; "
                              "TRL's GRPO then generates with it)")
        if self.bf16:
            if cuda is None:
                import torch

                cuda = bool(torch.cuda.is_available())
            if not cuda:
                raise PresetError("--bf16 needs a GPU: on this CPU bfloat16 matmul is about 100x slower than float32 "
                                  "(bench/bench_train.py measures both); leave it off here")

    def trainer_args(self) -> dict[str, Any]:
        """Keyword arguments for TRL's ``SFTConfig`` (bf16, gradient checkpointing).

        Checkpointing is always set: TRL's configs turn it on by default, which on the CPU run
        recomputes every forward pass during the backward one for memory it does not need
        (``activation_checkpointing`` is the name transformers 5 reads)."""
        return {"bf16": self.bf16, "fp16": False, "activation_checkpointing": self.gradient_checkpointing}

    def grpo_args(self) -> dict[str, Any]:
        """Keyword arguments for TRL's ``GRPOConfig`` (the above and vLLM generation)."""
        out = self.trainer_args()
        if self.use_vllm:
            out.update(use_vllm=True, vllm_mode=self.vllm_mode)
            if self.vllm_mode == "server" and self.vllm_server_url:
                out["vllm_server_base_url"] = self.vllm_server_url
        return out


__all__ = ["VLLM_MODES", "Accel"]
