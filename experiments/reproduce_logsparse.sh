#!/usr/bin/env bash
# Issue 5's results on ETTh1 in the Informer paper's settings (M 48/48/24 three seeds,
# S 720/168/24 one seed on CPU), against LogTrans's published column and our Informer rows
# from reproduce_informer.sh; then the Gaussian head's rho-risks and 80% coverage on S against
# the seasonal-naive floor (daily season of the hourly series). Sizes and training are those of
# experiments/configs/ETTh1/logsparse_*_24.yaml. Resumable like reproduce_informer.sh.
# Rows: experiments/results/ETTh1.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
FORECAST=${FORECAST:-.venv/bin/forecast}
SEEDS=${SEEDS:-"0 1 2"}
ETTH1=experiments/configs/ETTh1
M_PAPER=(--set data.features=M --set data.seq_len=48 --set data.label_len=48 --set data.pred_len=24)
S_PAPER=(--set data.features=S --set data.seq_len=720 --set data.label_len=168 --set data.pred_len=24)

run() { "$FORECAST" sweep --sweep experiments/benchmark.yaml --config "$@"; }

# The seasonal naive floor: a day of the hourly series, on the same windows.
run experiments/long_horizon/ETTh1/seasonal_naive_M_96.yaml "${S_PAPER[@]}"
run experiments/long_horizon/ETTh1/seasonal_naive_M_96.yaml "${M_PAPER[@]}"
run $ETTH1/logsparse_M_24.yaml --seeds $SEEDS
for seed in ${SEEDS_S:-0}; do
  run $ETTH1/logsparse_S_24.yaml --seeds "$seed"
  run $ETTH1/logsparse_S_24.yaml --seeds "$seed" --set model.head=gaussian
done
