#!/usr/bin/env bash
# Here, before a lent GPU machine runs experiments/device_grid.sh: puts what that machine lacks into
# .device-carry/ (git-ignored; name it in the device tool's `carry`):
#   data/    the benchmark CSVs from $FORECAST_DATA_DIR (the machine cannot download them; sha256-checked on use)
#   whl/     jsonargparse and its two helpers as wheels (the machine's image has the rest: torch, lightning, ...)
#   commit   this checkout's commit, which the copied tree (no .git) stamps its rows with
set -euo pipefail
cd "$(dirname "$0")/.."
: "${FORECAST_DATA_DIR:?point FORECAST_DATA_DIR at the benchmark CSVs}"
PYTHON=${PYTHON:-.venv/bin/python}
CARRY=.device-carry
rm -rf "$CARRY" && mkdir -p "$CARRY/data" "$CARRY/whl"
for name in ETTh1 ETTh2 ETTm1 ETTm2 weather exchange_rate national_illness; do
  cp "$FORECAST_DATA_DIR/$name.csv" "$CARRY/data/"
done
# The versions constraints.txt pins; pure-Python wheels, so the machine's Python (3.12) takes them.
pins=$(grep -E '^(jsonargparse|docstring_parser|typeshed_client)==' constraints.txt)
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 -d "$CARRY/whl" $pins
echo "$(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD -- forecast experiments || echo -dirty)" > "$CARRY/commit"
du -sh "$CARRY"
