#!/usr/bin/env bash
# Here, after a call of experiments/device_grid.sh on a lent GPU machine: unpacks what it returned (the device
# tool's files_at) and merges it.
#
#   experiments/device_unpack.sh FILES_AT [RUNS_DIR [RESULTS_DIR...]]
#
# The rows go into experiments/results/ (experiments/merge_results.py: only runs not yet recorded) and into
# every further RESULTS_DIR (a pinned worktree's, whose drivers then skip those runs); the saved forecasters
# go into RUNS_DIR (default experiments/runs), each in its run folder, an existing folder left as it is. Paths
# given are read from the folder it is run in.
set -euo pipefail
shopt -s nullglob
files_at=${1:?usage: experiments/device_unpack.sh FILES_AT [RUNS_DIR [RESULTS_DIR...]]}
absolute() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }  # the caller's folder, not the checkout's
files_at=$(absolute "$files_at")
runs_dir=$(absolute "${2:-$(dirname "$0")/../experiments/runs}")
shift $(( $# < 2 ? $# : 2 ))
results_dirs=()
for results_dir in "$@"; do results_dirs+=("$(absolute "$results_dir")"); done
case ${PYTHON:-} in */*) PYTHON=$(absolute "$PYTHON") ;; esac  # a path, as the others; a bare name: from PATH
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
[ -f "$files_at/results.tar.gz" ] \
  || { echo "$files_at holds no results.tar.gz: did experiments/device_grid.sh finish?" >&2; exit 1; }
unpacked=$(mktemp -d)
trap 'rm -rf "$unpacked"' EXIT
tar -xzf "$files_at/results.tar.gz" -C "$unpacked"
for target in experiments/results ${results_dirs[@]+"${results_dirs[@]}"}; do
  "$PYTHON" experiments/merge_results.py "$unpacked/results" --into "$target"
done
parts=()
for part in "$files_at"/runs.tar.part-*; do  # in order, up to the first one missing: the rest is past a gap
  [ "$part" = "$files_at/runs.tar.part-$(printf %02d ${#parts[@]})" ] || break
  parts+=("$part")
done
mkdir -p "$unpacked/runs"
# A part the device tool left out ends the archive early (the ninth loan's, past its 64 MiB): the runs before the
# cut are whole, and the one tar was writing is dropped (-v names each file as tar starts it, as
# written: tar's default escapes a backslash or, in the C locale, any non-ASCII letter of a folder's name).
if [ ${#parts[@]} -gt 0 ] \
  && ! cat "${parts[@]}" | tar -xv --quoting-style=literal -C "$unpacked" > "$unpacked/extracted" 2> /dev/null; then
  cut_run=$(tail -n 1 "$unpacked/extracted" | cut -d/ -f1-2)
  echo "the runs archive ends early (a part missing from $files_at): $cut_run left out" >&2
  [ -n "$cut_run" ] && rm -rf "${unpacked:?}/$cut_run"
fi
mkdir -p "$runs_dir"
for run in "$unpacked"/runs/*/; do
  name=$(basename "$run")
  # An archive cut exactly where a file starts ends without tar's error: the run it was packing lacks files
  if [ ! -f "$run/model.pt" ] || [ ! -f "$run/config.json" ] || [ ! -f "$run/scaler.json" ]; then
    echo "the runs archive ends early: $name lacks files, left out" >&2
    rm -rf "$run"
    continue
  fi
  if [ -e "$runs_dir/$name" ]; then
    echo "kept $runs_dir/$name as it was"
  else
    cp -r "$run" "$runs_dir/$name"
  fi
done
echo "$(ls "$unpacked/runs" | wc -l) saved forecasters in $runs_dir"
