#!/usr/bin/env bash
# One `forecast sweep` worker of the long-horizon grid, started in the background from a git worktree pinned at
# a commit, so that no run mixes two code versions while the checkout moves on (experiments/README.md, "The
# standard long-horizon benchmark"). Each worker runs on one thread: start two for this 2-core machine, on
# disjoint cells (--horizons, --datasets or --shard K/N), never two on one cell.
#
#   FORECAST_DATA_DIR=../shared/datasets experiments/background_sweep.sh A \
#     --datasets ETTm2 --models informer --horizons 96
#   kill -TERM "$(cat ../runs/A.pid)"    # the same command resumes
#
# SIGTERM during training stops after the current step and checkpoints it; during validation (the end of an
# epoch), or a SIGKILL then, leaves the checkpoint written a step before it (forecast.training's
# PreValidationCheckpoint, since 2026-11-27), so the resumed run repeats that one step and the validation.
#
# GRID_DIR (default ../runs) holds the worktree (wt-<commit>), the run folders (runs/), NAME.log, NAME.pid and
# NAME.commit; COMMIT pins the code (default: the commit NAME.commit recorded for the same sweep options, so that
# the same command resumes its runs on the code that started them, else HEAD); PYTHON (default
# .venv/bin/python) has the package's dependencies.
# Rows go to the worktree's experiments/results/: merge them with
#   python experiments/merge_results.py "$GRID_DIR/wt-<commit>/experiments/results"
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || [[ $1 == -* ]]; then
  echo "usage: $0 NAME [forecast sweep options...]" >&2
  exit 2
fi
: "${FORECAST_DATA_DIR:?set FORECAST_DATA_DIR to the benchmark CSVs (../shared/datasets)}"
[ -d "$FORECAST_DATA_DIR" ] || { echo "FORECAST_DATA_DIR=$FORECAST_DATA_DIR is not a folder: set it to the \
benchmark CSVs (../shared/datasets)" >&2; exit 2; }
# Absolute: the worker runs in the worktree, where a path relative to the checkout names nothing.
FORECAST_DATA_DIR=$(cd "$FORECAST_DATA_DIR" && pwd)
export FORECAST_DATA_DIR
name=$1
shift
python=${PYTHON:-.venv/bin/python}
python=$(cd "$(dirname "$python")" && pwd)/$(basename "$python")  # absolute, a venv's link kept
mkdir -p "${GRID_DIR:-../runs}"
grid=$(cd "${GRID_DIR:-../runs}" && pwd)
options=$(printf '%q ' "$@")
pinned=${COMMIT:-}
recorded='' recorded_options=''
if [ -f "$grid/$name.commit" ]; then
  # Two lines, the commit and the options; a file of one line (written before the options were) pins its commit.
  { IFS= read -r recorded || true; IFS= read -r recorded_options || recorded_options=$options; } < "$grid/$name.commit"
fi
if [ -z "$pinned" ] && [ -n "$recorded" ]; then
  if [ "$recorded_options" = "$options" ]; then
    pinned=$recorded
    echo "worker $name: resuming at its commit $pinned ($grid/$name.commit; COMMIT=... for another)"
  elif [ "$(git rev-parse --short=7 "$recorded")" != "$(git rev-parse --short=7 HEAD)" ]; then
    # Run folders are shared by every worktree: its partial runs would resume on other code.
    echo "worker $name was started at $recorded with the options: $recorded_options" >&2
    echo "these are other options: $options" >&2
    echo "Fix: COMMIT=$recorded to go on at its commit, COMMIT=HEAD for today's code, or another NAME." >&2
    exit 2
  fi
fi
commit=$(git rev-parse --short=7 "${pinned:-HEAD}")
tree=$grid/wt-$commit
if [ ! -d "$tree" ]; then
  git worktree prune  # a worktree whose folder was lost with GRID_DIR is still registered, and add refuses it
  git worktree add --quiet --detach "$tree" "$commit"
fi
printf '%s\n%s\n' "$commit" "$options" > "$grid/$name.commit"
cd "$tree"
# PYTHONPATH: the worktree's package, not the checkout's editable install. `python -m forecast` sets the allocator
# itself as it starts (forecast.cli.console, forecast/allocator.py).
PYTHONPATH=$tree OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} PYTHONUNBUFFERED=1 setsid nohup "$python" -m forecast sweep \
  --sweep experiments/long_horizon.yaml --runs_dir "$grid/runs" --progress false "$@" \
  >> "$grid/$name.log" 2>&1 < /dev/null &
echo $! > "$grid/$name.pid"
echo "worker $name: pid $!, code at $commit ($tree), log $grid/$name.log"
