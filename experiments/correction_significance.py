"""What testing the correction weight (``correction_significance``) does to saved runs, on validation windows.

    python experiments/correction_significance.py RUN_DIR... [--significance 0.05]   # runs of the improved recipe

For each saved run (a sweep's run folder, which names the registered dataset): the number of validation
windows, the Diebold-Mariano statistic of the whole forecast against RevIN's centre on them and its critical
value (:func:`~forecast.models.base.correction_test`, the test of
:meth:`~forecast.models.base.ForecastModel.fit_correction_weight`; where the windows hold fewer than two
disjoint horizons, made on the windows of the longest prefix of the horizon that the validation period holds
twice, :meth:`~forecast.data.WindowDataModule.val_prefix_dataloader`, shown as "windows (prefix steps: its
windows)"), the share kept by least squares alone and with the test. The test MSE of each choice
(and of the centre and the whole forecast) is printed for the record only: the test was fixed before it was
read (the prefix test for one-stretch windows was written after the sixth round's table had printed them:
experiments/README.md, the seventh round, says so).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from forecast import Forecaster, datasets
from forecast.models.base import correction_test, kept_share, least_squares_share


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dirs", nargs="+", type=Path)
    parser.add_argument("--significance", type=float, default=0.05)
    args = parser.parse_args(argv)
    print("| run | windows | DM | critical | kept (least squares) | kept (tested) | test MSE: least squares "
          "| tested | centre | whole |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for run_dir in args.run_dirs:
        forecaster = Forecaster.load(run_dir)
        model = forecaster.model.eval()
        data = datasets.load(run_dir.name.split("_model=")[0].removeprefix("dataset="))  # the folder names it
        windows = forecaster.windows_of(data)
        windows.setup("fit")
        windows.setup("test")
        cross, square, _ = model.correction_terms(windows.val_dataloader())  # [N] each
        untested = least_squares_share(cross, square)
        prefix = windows.val_prefix_dataloader()
        on = None if prefix is None else (*model.correction_terms(prefix)[:2], prefix.dataset.target_len)
        tested, test = kept_share(cross, square, model.spec.pred_len, args.significance, tested=on)  # the rule
        if test is None:  # not made by the rule (a least-squares share of 0, or too few windows): shown all the same
            test = correction_test(*(on or (cross, square, model.spec.pred_len)), args.significance)
        statistic, critical = test if test is not None else (float("nan"), float("nan"))
        counted = f"{len(cross)}" if on is None else f"{len(cross)} (prefix {on[2]}: {len(on[0])})"
        t_cross, t_square, t_base = model.correction_terms(windows.test_dataloader())  # [N_test] each
        cells = len(t_base) * model.spec.pred_len * model.spec.c_out

        def mse(weight: float) -> float:
            return float((t_base - 2 * weight * t_cross + weight**2 * t_square).sum() / cells)

        print(f"| {run_dir.name.split('_recipe')[0]} | {counted} | {statistic:.2f} | {critical:.2f} "
              f"| {untested:.3f} | {tested:.3f} | {mse(untested):.4f} | {mse(tested):.4f} | {mse(0.0):.4f} "
              f"| {mse(1.0):.4f} |", flush=True)


if __name__ == "__main__":
    main()
