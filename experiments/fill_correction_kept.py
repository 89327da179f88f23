"""Fill the ``correction_kept`` column of results rows written without it, from their run folders.

    python experiments/fill_correction_kept.py RUNS_DIR [--results-dir experiments/results]

Rows written by code older than the column (runs from a worktree pinned before it, merged with
``merge_results.py``) leave it blank. Each such run saved its fitted model in its run folder
(``RUNS_DIR/<run name>/model.pt``, the run name being a function of the row's key), with the
correction weight it forecast with as the buffer ``revin.correction_weight``; this copies that
weight into the row. Rows whose folder or saved model is missing, and models without the buffer
(no RevIN, or autoregressive LogSparse), stay blank. Files are rewritten under their lock
(:func:`forecast.results.update_rows`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from forecast.experiment import row_key, run_name
from forecast.predictor import WEIGHTS_FILE
from forecast.results import update_rows

HERE = Path(__file__).resolve().parent
_BUFFER = "correction_weight"


def saved_correction_weight(run_dir: Path) -> float | None:
    """The correction weight of the model saved in ``run_dir``; None without a saved model or the buffer."""
    path = run_dir / WEIGHTS_FILE
    if not path.exists():
        return None
    state = torch.load(path, map_location="cpu", weights_only=True)
    weights = [float(value) for name, value in state.items() if name.rsplit(".", 1)[-1] == _BUFFER]
    if len(weights) > 1:
        raise ValueError(f"{path} holds {len(weights)} correction weights; a model has one")
    return weights[0] if weights else None


def fill(path: Path, runs_dir: Path) -> int:
    """Fill the blank ``correction_kept`` cells of ``path`` from ``runs_dir``; returns how many were filled."""

    def update(row: dict[str, str]) -> bool:
        weight = None if row.get("correction_kept") else saved_correction_weight(runs_dir / run_name(row_key(row)))
        if weight is not None:
            row["correction_kept"] = repr(weight)
        return weight is not None

    return update_rows(path, update)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs_dir", type=Path, help="the run folders' parent (a sweep's --runs_dir)")
    parser.add_argument("--results-dir", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    if not args.runs_dir.is_dir():
        parser.error(f"not a directory: {args.runs_dir}")
    for path in sorted(args.results_dir.glob("*.csv")):
        print(f"{path}: {fill(path, args.runs_dir)} rows filled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
