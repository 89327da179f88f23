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
PY=${PYTHON:-.venv/bin/python}
PAPER=(--model-option d_model=512 --model-option n_heads=8 --model-option e_layers=2
       --model-option d_layers=1 --model-option d_ff=2048 --model-option dropout=0.05
       --max-epochs 6 --patience 3 --batch-size 32 --learning-rate 1e-4 --lr-schedule halve)
SEEDS=${SEEDS:-"0 1 2"}
BASELINE_SEEDS=${BASELINE_SEEDS:-0}
M_PAPER=(--features M --seq-len 48 --label-len 48 --pred-len 24)
M_COMMON=(--features M --seq-len 96 --label-len 48 --pred-len 24)
S_PAPER=(--features S --seq-len 720 --label-len 168 --pred-len 24)

run() { "$PY" experiments/run.py --dataset ETTh1 --recipe paper "$@"; }

for window in M_PAPER M_COMMON S_PAPER; do
  declare -n args="$window"
  run --model naive "${args[@]}"
done
for seed in $SEEDS; do
  run --model informer "${M_PAPER[@]}" --seed "$seed" --model-option factor=3 "${PAPER[@]}"
  run --model informer "${M_COMMON[@]}" --seed "$seed" --model-option factor=5 "${PAPER[@]}"
done
for seed in $BASELINE_SEEDS; do
  run --model transformer "${M_PAPER[@]}" --seed "$seed" "${PAPER[@]}"
  run --model transformer "${M_COMMON[@]}" --seed "$seed" "${PAPER[@]}"
done
# S/720 costs several times more per step: one seed on CPU (SEEDS_S="0 1 2" with a GPU).
for seed in ${SEEDS_S:-0}; do
  run --model informer "${S_PAPER[@]}" --seed "$seed" --model-option factor=5 "${PAPER[@]}"
  run --model transformer "${S_PAPER[@]}" --seed "$seed" "${PAPER[@]}"
done
