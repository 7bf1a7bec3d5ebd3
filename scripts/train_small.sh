#!/usr/bin/env bash
# The documented CPU run of the `small` preset (README, Training): SFT data from rule_expert on train
# seeds, SFT, an evaluation on holdout beside random_valid and rule_expert, GRPO against the live
# environment, and the evaluation again with GRPO and SFT paired seed by seed.
#
#   nice -n 10 scripts/train_small.sh [OUT_DIR] > .arena/small-run.log 2>&1 &
#
# Every phase prints its wall time; runs and evaluations go to the store (.arena/arena.db or
# $GPU_ARENA_DB). Sizes can be changed with the variables below (the README numbers used the defaults).
set -euo pipefail
OUT=${1:-.arena/small-run}
GA=${GA:-.venv/bin/gpu-arena}
TASK=${TASK:-single_trade}
DATA_SEEDS=${DATA_SEEDS:-800}      # rule_expert episodes (train seeds 0..N-1)
SFT_STEPS=${SFT_STEPS:-200}        # optimiser steps of 4 episodes (1 epoch of 800)
GRPO_STEPS=${GRPO_STEPS:-60}       # optimiser steps of 2 worlds x 4 rollouts (train seeds from 1000)
EVAL_SEEDS=${EVAL_SEEDS:-100}      # holdout seeds 0..N-1
export TRL_EXPERIMENTAL_SILENCE=1 TOKENIZERS_PARALLELISM=false

SFT="llm:hf:$OUT/sft?mode=tools&max_tokens=64"
GRPO="llm:hf:$OUT/grpo?mode=tools&max_tokens=64"
started=$(date +%s)
phase() { echo "== $(date -u +%FT%TZ) $1 (t+$(( $(date +%s) - started )) s)"; }

phase "SFT data: rule_expert, $TASK, train seeds 0..$((DATA_SEEDS - 1))"
$GA data sft --policy rule_expert --split train --seeds "$DATA_SEEDS" --task "$TASK" --output "$OUT/data"

phase "SFT: preset small, $SFT_STEPS steps"
$GA train sft --preset small --data "$OUT/data" --output "$OUT/sft" --max-steps "$SFT_STEPS" --overwrite

phase "evaluate SFT on holdout seeds 0..$((EVAL_SEEDS - 1))"
$GA eval --policies "$SFT,random_valid,rule_expert" --tasks "$TASK" --split holdout --seeds "$EVAL_SEEDS" \
    --workers 2 --out "$OUT/eval-sft.json" --replays "$OUT/eval-sft.jsonl"
$GA runs turns "$OUT/eval-sft.jsonl"

phase "GRPO: preset small, $GRPO_STEPS steps, from the SFT checkpoint"
$GA train grpo --preset small --model "$OUT/sft" --output "$OUT/grpo" --task "$TASK" --steps "$GRPO_STEPS" --overwrite

phase "evaluate GRPO and SFT (paired) on the same holdout seeds"
$GA eval --policies "$GRPO,$SFT,random_valid,rule_expert" --reference "$GRPO" --tasks "$TASK" --split holdout \
    --seeds "$EVAL_SEEDS" --workers 2 --out "$OUT/eval-grpo.json" --replays "$OUT/eval-grpo.jsonl"
$GA runs turns "$OUT/eval-grpo.jsonl"
$GA runs --limit 2
phase "done"
