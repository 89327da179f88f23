#!/usr/bin/env bash
# Issue 4's reproduction on ETTh1: the paper's own settings (Informer2020 scripts/ETTh1.sh)
# and the common 96/48/24 protocol, three seeds each, plus the two baselines on the same
# windows. Every run checkpoints each epoch (and every 10 minutes) and resumes; finished rows
# are skipped, so re-running this script continues where it stopped. Informer runs come
# first, the Transformer baselines after them (one seed unless BASELINE_SEEDS says more: a
# CPU epoch at this size is 6-15 minutes), S/720 (several times costlier) last.
# Rows: experiments/results/ETTh1.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
FORECAST=${FORECAST:-.venv/bin/forecast}
SEEDS=${SEEDS:-"0 1 2"}
BASELINE_SEEDS=${BASELINE_SEEDS:-0}
ETTH1=experiments/configs/ETTh1  # the paper's settings: Informer2020 scripts/ETTh1.sh (M 48/48/24, S 720/168/24)
COMMON=(--set data.seq_len=96 --set data.label_len=48)  # the common 96/48/24 protocol

run() { "$FORECAST" sweep --sweep experiments/benchmark.yaml --config "$@"; }

run $ETTH1/naive_M_24.yaml
run $ETTH1/naive_M_24.yaml "${COMMON[@]}"
run $ETTH1/naive_S_24.yaml
run $ETTH1/informer_M_24.yaml --seeds $SEEDS
run $ETTH1/informer_M_24.yaml --seeds $SEEDS "${COMMON[@]}" --set model.factor=5
run $ETTH1/transformer_M_24.yaml --seeds $BASELINE_SEEDS
run $ETTH1/transformer_M_24.yaml --seeds $BASELINE_SEEDS "${COMMON[@]}"
# S/720 costs several times more per step: one seed on CPU (SEEDS_S="0 1 2" with a GPU).
run $ETTH1/informer_S_24.yaml --seeds ${SEEDS_S:-0}
run $ETTH1/transformer_S_24.yaml --seeds ${SEEDS_S:-0}
