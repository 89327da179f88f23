"""Fill the blank rho-risk columns of results rows by testing each row's saved model again.

    python experiments/fill_rho_risks.py RUNS_DIR --datasets ETTh1_panel synthetic_panel \
        [--data-dir experiments/data] [--results-dir experiments/results]

Point forecasts gained rho-risks (the forecast taken as every quantile) after some runs were
tested; their rows leave those columns blank. Each such run saved its fitted forecaster in its
run folder (``RUNS_DIR/<run name>``, the name a function of the row's key). This loads it, tests
every test window of the row's dataset again (a registered dataset, else ``DATA_DIR/<dataset>.csv``:
the panels ``experiments/run_panel.sh`` writes) and copies the probabilistic columns the test logs
into the row. The re-test must reproduce the row's MSE (relative tolerance ``--rtol``), else the
folder holds another model than the row's and the script stops, changing nothing in that file.
Rows with rho-risks, or without a saved forecaster, are left as they are. Files are rewritten
under their lock (:func:`forecast.results.update_rows`).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

from forecast import Forecaster, datasets
from forecast.experiment import row_key, run_name
from forecast.predictor import WEIGHTS_FILE
from forecast.results import PROBABILISTIC_COLUMNS, update_rows
from forecast.training import test_windows

HERE = Path(__file__).resolve().parent


def retested_metrics(run_dir: Path, dataset: str) -> dict[str, float]:
    """The test metrics of the forecaster saved in ``run_dir`` on every test window of ``dataset``."""
    forecaster = Forecaster.load(run_dir)
    return test_windows(forecaster.module, forecaster.windows_of(dataset), forecaster.training)


def dataset_source(label: str, data_dir: Path) -> str:
    """What a row's dataset label names: a registered dataset, else the CSV of that stem (the label less the
    digest of the file's bytes that rows written since carry, ``@1a2b3c4d5e``) in ``data_dir``."""
    return label if datasets.find(label) is not None else str(data_dir / f"{re.sub(r'@[0-9a-f]{10}$', '', label)}.csv")


def fill(path: Path, runs_dir: Path, data_dir: Path, rtol: float = 1e-4) -> int:
    """Fill the blank rho-risk cells of ``path`` from ``runs_dir``; returns how many rows were filled."""

    def update(row: dict[str, str]) -> bool:
        run_dir = runs_dir / run_name(row_key(row))
        if row["rho_risk_0.5"] or not (run_dir / WEIGHTS_FILE).is_file():
            return False
        metrics = retested_metrics(run_dir, dataset_source(row["dataset"], data_dir))
        if not math.isclose(metrics["test_mse"], float(row["mse"]), rel_tol=rtol):
            raise ValueError(f"{run_dir} tests at MSE {metrics['test_mse']:.6g}, but its row in {path} says "
                             f"{row['mse']}: the folder holds another model. Fix: point RUNS_DIR at the runs "
                             "that wrote these rows.")
        for column in PROBABILISTIC_COLUMNS:
            if f"test_{column}" in metrics:
                row[column] = repr(float(metrics[f"test_{column}"]))
        print(f"{path.name}: {row['model']} seed {row['seed']}: rho-risks "
              f"{row['rho_risk_0.5']} / {row['rho_risk_0.9']} (MSE {metrics['test_mse']:.4f} as recorded)")
        return True

    return update_rows(path, update)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs_dir", type=Path, help="the run folders' parent (a sweep's --runs_dir)")
    parser.add_argument("--datasets", nargs="+", required=True,
                        help="results files (dataset labels) to fill: each row is a full test pass")
    parser.add_argument("--data-dir", type=Path, default=HERE / "data",
                        help="where the CSVs of datasets that are not registered are")
    parser.add_argument("--results-dir", type=Path, default=HERE / "results")
    parser.add_argument("--rtol", type=float, default=1e-4, help="how closely the re-test must give the row's MSE")
    args = parser.parse_args(argv)
    if not args.runs_dir.is_dir():
        parser.error(f"not a directory: {args.runs_dir}")
    for dataset in args.datasets:
        path = args.results_dir / f"{dataset}.csv"
        if not path.is_file():
            parser.error(f"no results file {path}")
        print(f"{path}: {fill(path, args.runs_dir, args.data_dir, args.rtol)} rows filled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
