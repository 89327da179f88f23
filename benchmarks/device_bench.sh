#!/usr/bin/env bash
# Issue 21's GPU rows within one call of the device tool (benchmarks/README.md, "On a lent GPU"). There, from
# the repository root, after experiments/device_prepare.sh here (carry .device-carry):
#
#   bash benchmarks/device_bench.sh              # about BUDGET seconds; CSVs and log.txt under $OUT
#
# Five steps, each cut off at its share of BUDGET (what a step finished is kept: roofline.py and train.py write
# their CSV after each model, attention.py after each case), the cheap ones first: the roofline of a training step
# (benchmarks/roofline.py: FLOPs against the GPU's GEMM rate); training steps of the paper-size Informer and
# LogSparse in fp32 and bf16 autocast (benchmarks/train.py, interleaved), and inference; the attention kernels
# against SDPA (on CUDA its flash kernel in bf16, its memory-efficient kernel in fp32) at L = 16384 and 2048,
# forward and forward+backward (benchmarks/attention.py); last the training steps again with the compiled variant
# beside them (compiling took 111 s of the first loan's Informer step). Back here: merge each CSV into its file in
# benchmarks/results/ (SCRIPT --merge CSV --output benchmarks/results/CSV: a loan's files hold only its rows, which a
# copy would put in place of the earlier loans') and regenerate the tables (--markdown ... --readme: one block each).
# DEVICE=cpu LENGTHS="96 192" TRAIN_ARGS="--d-model 16 --heads 2 --d-ff 32" tries the script on a CPU.
# STEPS picks steps by name (roofline train attention-bf16 attention-fp32 compile, all by default) and MODES the
# attention modes (forward train): a short call finishes what an earlier loan missed, the picked steps sharing the
# whole BUDGET, e.g. STEPS="attention-bf16 attention-fp32 compile" MODES=train BUDGET=240.
set -uo pipefail
cd "$(dirname "$0")/.."
BUDGET=${BUDGET:-360}
DEVICE=${DEVICE:-cuda}
LENGTHS=${LENGTHS:-16384 2048}  # the longest first; each case is a fresh process (seconds with CUDA)
TRAIN_ARGS=${TRAIN_ARGS:-}
STEPS=${STEPS:-roofline train attention-bf16 attention-fp32 compile}
MODES=${MODES:-forward train}
declare -A SHARE=([roofline]=10 [train]=25 [attention-bf16]=25 [attention-fp32]=20 [compile]=20)  # % of BUDGET
total=0
for name in $STEPS; do
  [ -n "${SHARE[$name]:-}" ] || { echo "unknown step '$name'; steps: ${!SHARE[*]}" >&2; exit 2; }
  total=$((total + SHARE[$name]))
done
source experiments/device_env.sh || exit 1
tag=${DEVICE%%:*}
log="$OUT/log.txt"

step() {  # step NAME COMMAND...: run it if STEPS names it, cut off at its share of BUDGET
  local name=$1; shift
  [[ " $STEPS " == *" $name "* ]] || return 0
  local seconds=$((BUDGET * SHARE[$name] / total))
  echo "== $* (at most ${seconds} s)" | tee -a "$log"
  timeout --signal=TERM --kill-after=15 "$seconds" "$@" 2>&1 | tail -n 60 | tee -a "$log"
}

nvidia-smi -L 2>/dev/null | tee -a "$log"
step roofline python3 benchmarks/roofline.py --device "$DEVICE" --steps 5 --output "$OUT/roofline_$tag.csv"
# shellcheck disable=SC2086  # TRAIN_ARGS and LENGTHS are lists of arguments
step train python3 benchmarks/train.py --device "$DEVICE" --kinds train infer --variants fp32 bf16 \
  --train-budget 10 --infer-budget 5 --quiet-wait 0 $TRAIN_ARGS --output "$OUT/train_$tag.csv"
# shellcheck disable=SC2086
step attention-bf16 python3 benchmarks/attention.py --device "$DEVICE" --dtype bfloat16 --methods sdpa prob logsparse \
  --modes $MODES --lengths $LENGTHS --time-budget 1 --quiet-wait 0 --retries 0 --output "$OUT/attention_${tag}_bf16.csv"
# shellcheck disable=SC2086
step attention-fp32 python3 benchmarks/attention.py --device "$DEVICE" --dtype float32 --methods sdpa prob logsparse \
  --modes $MODES --lengths $LENGTHS --time-budget 1 --quiet-wait 0 --retries 0 --output "$OUT/attention_$tag.csv"
# shellcheck disable=SC2086
step compile python3 benchmarks/train.py --device "$DEVICE" --kinds train --variants fp32 bf16 compile \
  --train-budget 10 --quiet-wait 0 $TRAIN_ARGS --output "$OUT/train_$tag.csv"
ls -l "$OUT" | tee -a "$log"
