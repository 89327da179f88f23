# Sourced from the repository root on a lent GPU machine by experiments/device_grid.sh and
# benchmarks/device_bench.sh: installs what experiments/device_prepare.sh carried (.device-carry/) and sets
# the environment the package needs there. That machine's image has torch, Lightning and the rest; the copied
# tree has no .git, so FORECAST_COMMIT names the commit it was copied from.
CARRY=.device-carry
if [ -d "$CARRY/whl" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$CARRY"/whl/*.whl || return 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 MPLBACKEND=Agg
export FORECAST_DATA_DIR=${FORECAST_DATA_DIR:-$PWD/$CARRY/data}
[ -f "$CARRY/commit" ] && export FORECAST_COMMIT=$(cat "$CARRY/commit")
OUT=${OUT:-/tmp/device-out}  # the device tool sets it; what is written under it comes back
mkdir -p "$OUT"
