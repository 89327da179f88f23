#!/usr/bin/env bash
# The standard long-horizon benchmark (experiments/README.md, "The standard long-horizon
# benchmark"), cheap first: the baselines everywhere, then Informer and LogSparse on ETTh1 and
# national_illness, exchange_rate and ETTh2, then ETTm1, ETTm2 and weather (about 4x the windows),
# then the paper-size Informer on ETTh1. Three seeds on ETTh1, one elsewhere
# (SEEDS_OTHER="0 1 2" for more). Every run checkpoints and resumes, finished rows are skipped:
# running this again continues where it stopped. WORKERS=N splits every sweep over N processes
# (forecast sweep --shard), one thread each. Then LogSparse's Gaussian head in the improved
# recipe at the two settings whose calibration experiments/README.md reports.
# Rows: experiments/results/<dataset>.csv; tables: python experiments/long_horizon.py.
set -euo pipefail
cd "$(dirname "$0")/.."
FORECAST=${FORECAST:-.venv/bin/forecast}
WORKERS=${WORKERS:-1}
SEEDS_ETTH1=${SEEDS_ETTH1:-"0 1 2"}
SEEDS_OTHER=${SEEDS_OTHER:-0}
ALL="ETTh1 national_illness exchange_rate ETTh2 ETTm1 ETTm2 weather"

sweep() {  # "datasets" "seeds" models...
  local datasets=$1 seeds=$2 pids=() status=0
  shift 2
  for ((k = 0; k < WORKERS; k++)); do
    OMP_NUM_THREADS=$((WORKERS > 1 ? 1 : ${OMP_NUM_THREADS:-2})) "$FORECAST" sweep \
      --sweep experiments/long_horizon.yaml --datasets $datasets --seeds $seeds --models "$@" \
      --shard "$k/$WORKERS" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
  return "$status"
}

sweep ETTh1 "$SEEDS_ETTH1" naive seasonal_naive dlinear
sweep "${ALL#ETTh1 }" "$SEEDS_OTHER" naive seasonal_naive dlinear
sweep ETTh1 "$SEEDS_ETTH1" informer logsparse
for dataset in ${ALL#ETTh1 }; do
  sweep "$dataset" "$SEEDS_OTHER" informer logsparse
done
sweep ETTh1 "$SEEDS_ETTH1" informer-paper

# LogSparse's Gaussian head in the improved recipe, at the two calibration settings.
GAUSSIAN=(--config experiments/long_horizon/ETTh1/logsparse_M_96.yaml --set model.head=gaussian)
"$FORECAST" sweep --sweep experiments/long_horizon.yaml "${GAUSSIAN[@]}" \
  --set data.features=S --set data.seq_len=720 --set data.label_len=168 --set data.pred_len=24
"$FORECAST" sweep --sweep experiments/long_horizon.yaml "${GAUSSIAN[@]}"
