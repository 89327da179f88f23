#!/usr/bin/env bash
# The panel benchmark (experiments/README.md, "The panel benchmark"): long-format panels through the
# panel path (id column, per-series splits and scaling, covariates), every model on the same windows.
# Writes its data under experiments/data/ (never committed), then sweeps the baselines first and the
# trained models after; finished rows are skipped and killed runs resume, so running it again continues.
# Rows: experiments/results/<panel>.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
FORECAST=${FORECAST:-.venv/bin/forecast}
mkdir -p experiments/data
[ -f experiments/data/synthetic_panel.csv ] || "$PYTHON" experiments/make_panel.py --series 100 --seed 0 \
  --min-length 400 --max-length 1400 --max-start 1000 --output experiments/data/synthetic_panel.csv \
  --params experiments/data/synthetic_panel_params.csv
[ -f experiments/data/synthetic_panel_300.csv ] || "$PYTHON" experiments/make_panel.py --series 300 --seed 0 \
  --min-length 400 --max-length 1400 --max-start 1000 --output experiments/data/synthetic_panel_300.csv \
  --params experiments/data/synthetic_panel_300_params.csv
[ -f experiments/data/ETTh1_panel.csv ] || "$PYTHON" experiments/make_panel.py --from-wide ETTh1 \
  --output experiments/data/ETTh1_panel.csv
for models in "naive seasonal_naive dlinear" "logsparse informer"; do
  "$FORECAST" sweep --sweep experiments/panel.yaml --datasets synthetic_panel_300 synthetic_panel ETTh1_panel \
    --models $models
done
