#!/usr/bin/env bash
# Here, after a call of experiments/device_grid.sh on a lent GPU machine: unpacks what it returned (the device
# tool's files_at) and merges it.
#
#   experiments/device_unpack.sh FILES_AT [RUNS_DIR [RESULTS_DIR...]]
#
# The rows go into experiments/results/ (experiments/merge_results.py: only runs not yet recorded) and into
# every further RESULTS_DIR (a pinned worktree's, whose drivers then skip those runs); the saved forecasters
# go into RUNS_DIR (default experiments/runs), each in its run folder, an existing folder left as it is.
set -euo pipefail
shopt -s nullglob
files_at=${1:?usage: experiments/device_unpack.sh FILES_AT [RUNS_DIR [RESULTS_DIR...]]}
files_at=$(cd "$files_at" 2> /dev/null && pwd || echo "$files_at")  # relative to the caller's folder, not the checkout
cd "$(dirname "$0")/.."
runs_dir=${2:-experiments/runs}
shift $(( $# < 2 ? $# : 2 ))
PYTHON=${PYTHON:-.venv/bin/python}
[ -f "$files_at/results.tar.gz" ] \
  || { echo "$files_at holds no results.tar.gz: did experiments/device_grid.sh finish?" >&2; exit 1; }
unpacked=$(mktemp -d)
trap 'rm -rf "$unpacked"' EXIT
tar -xzf "$files_at/results.tar.gz" -C "$unpacked"
parts=("$files_at"/runs.tar.part-*)
mkdir -p "$unpacked/runs"
[ ${#parts[@]} -eq 0 ] || cat "${parts[@]}" | tar -x -C "$unpacked"
for target in experiments/results "$@"; do
  "$PYTHON" experiments/merge_results.py "$unpacked/results" --into "$target"
done
mkdir -p "$runs_dir"
for run in "$unpacked"/runs/*/; do
  name=$(basename "$run")
  if [ -e "$runs_dir/$name" ]; then
    echo "kept $runs_dir/$name as it was"
  else
    cp -r "$run" "$runs_dir/$name"
  fi
done
echo "$(ls "$unpacked/runs" | wc -l) saved forecasters in $runs_dir"
