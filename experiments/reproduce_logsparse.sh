#!/usr/bin/env bash
# Issue 5's results on ETTh1 in the Informer paper's settings (M 48/48/24 three seeds,
# S 720/168/24 one seed on CPU), against LogTrans's published column and our Informer rows
# from reproduce_informer.sh; then the Gaussian head's rho-risks and 80% coverage on S against
# the seasonal-naive floor (daily season of the hourly series). Sizes and training are those of
# experiments/configs/ETTh1/logsparse_*_24.yaml. Resumable like reproduce_informer.sh.
# Rows: experiments/results/ETTh1.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
SEEDS=${SEEDS:-"0 1 2"}
SIZES=(--model-option d_model=64 --model-option n_heads=4 --model-option n_layers=3 --model-option d_ff=256
       --model-option dropout=0.1 --model-option attention=logsparse --model-option qk_kernel_size=3
       --max-epochs 6 --patience 3 --batch-size 32 --learning-rate 1e-4 --lr-schedule halve)
M_PAPER=(--features M --seq-len 48 --label-len 48 --pred-len 24)
S_PAPER=(--features S --seq-len 720 --label-len 168 --pred-len 24)

run() { "$PY" experiments/run.py --dataset ETTh1 --recipe paper "$@"; }

run --model seasonal_naive "${S_PAPER[@]}" --model-option season_length=24
run --model seasonal_naive "${M_PAPER[@]}" --model-option season_length=24
for seed in $SEEDS; do
  run --model logsparse "${M_PAPER[@]}" --seed "$seed" "${SIZES[@]}"
done
for seed in ${SEEDS_S:-0}; do
  run --model logsparse "${S_PAPER[@]}" --seed "$seed" "${SIZES[@]}"
  run --model logsparse "${S_PAPER[@]}" --seed "$seed" "${SIZES[@]}" --model-option head=gaussian
done
