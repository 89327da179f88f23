"""Merge results rows made elsewhere into experiments/results, skipping finished runs.

    python experiments/merge_results.py ../other-checkout/experiments/results [more dirs]

Runs made in another checkout or on a GPU machine write their own
``experiments/results/<dataset>.csv``; this copies their rows here (one file per dataset,
atomic appends, rows already present by key are skipped). Then ``python
experiments/tables.py`` regenerates the README tables.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from forecast.errors import ForecastError
from forecast.results import merge_results

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="+", type=Path, help="results directories to merge from")
    parser.add_argument("--into", type=Path, default=HERE / "results", help="the results directory to extend")
    args = parser.parse_args(argv)
    missing = [str(source) for source in args.sources if not source.is_dir()]
    if missing:
        parser.error(f"not a directory: {', '.join(missing)}")
    try:
        added = merge_results(args.sources, args.into)
    except ForecastError as error:  # a file that is not a mergeable results file: its message names it and the fix
        print(f"merge_results.py: error: {error}", file=sys.stderr)
        return 1
    for row in added:
        print(f"added {row['dataset']} {row['model']} {row['features']} "
              f"{row['seq_len']}/{row['label_len']}/{row['pred_len']} seed {row['seed']} options {row['options']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
