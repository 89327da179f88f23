"""What testing the correction weight (``correction_significance``) does to saved runs, on validation windows.

    python experiments/correction_significance.py RUN_DIR... [--significance 0.05]   # runs of the improved recipe

For each saved run (a sweep's run folder, which names the registered dataset): the number of validation
windows, the Diebold-Mariano statistic of the whole forecast against RevIN's centre on them and its critical
value (:meth:`~forecast.models.base.ForecastModel.fit_correction_weight`; none where the windows hold fewer
than two disjoint horizons), the share kept by least squares alone and with the test. The test MSE of each
choice (and of the centre and the whole forecast) is printed for the record only: the rule was fixed before
it was read.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from forecast import Forecaster, datasets
from forecast.models.base import (diebold_mariano, diebold_mariano_critical_value, horizon_target,
                                  model_inputs)


def window_terms(model, loader) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Per window: sum of correction x (target - centre), of correction^2, of (target - centre)^2; and P x C."""
    cross, square, base, cells = [], [], [], 1
    for batch in loader:
        center, correction = model.center_and_correction(*model_inputs(model.spec, batch))  # [B, P, C_out] each
        target = horizon_target(batch["y"], center.shape[2], center.shape[1])
        cross.append((correction * (target - center)).sum(dim=(1, 2), dtype=torch.float64))
        square.append(correction.square().sum(dim=(1, 2), dtype=torch.float64))
        base.append((target - center).square().sum(dim=(1, 2), dtype=torch.float64))
        cells = center.shape[1] * center.shape[2]
    return torch.cat(cross), torch.cat(square), torch.cat(base), cells


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
        validation = forecaster.windows_of(data)
        validation.setup("fit")
        with torch.no_grad():
            untested = model.fit_correction_weight(validation.val_dataloader())
            tested = model.fit_correction_weight(validation.val_dataloader(), args.significance)
            cross, square, _, _ = window_terms(model, validation.val_dataloader())
            lag = model.spec.pred_len - 1
            testable = len(cross) > model.spec.pred_len  # two disjoint horizons (fit_correction_weight's rule)
            statistic = float(diebold_mariano(2 * cross - square, lag)) if testable else float("nan")
            critical = diebold_mariano_critical_value(len(cross), lag, args.significance) if testable else float("nan")
            test = forecaster.windows_of(data)
            test.setup("test")
            t_cross, t_square, t_base, cells = window_terms(model, test.test_dataloader())

        def mse(weight: float) -> float:
            return float((t_base - 2 * weight * t_cross + weight**2 * t_square).sum() / (len(t_base) * cells))

        print(f"| {run_dir.name.split('_recipe')[0]} | {len(cross)} | {statistic:.2f} | {critical:.2f} "
              f"| {untested:.3f} | {tested:.3f} | {mse(untested):.4f} | {mse(tested):.4f} | {mse(0.0):.4f} "
              f"| {mse(1.0):.4f} |", flush=True)


if __name__ == "__main__":
    main()
