"""Which output calibration the improved recipe fits after training, chosen on validation windows only.

    python experiments/calibration_variants.py RUN_DIR DATASET   # a saved run of the improved recipe, its data

With RevIN every forecast is the window's centre ``c`` plus the network's correction ``v``. Four ways
to refit that forecast on validation windows, each fitted on the first half of the validation windows
and scored on the second half (the later ones, as test is later still), never on test:

* ``none``: ``c + v``, the trained model;
* ``last``: the window's last value (``naive``), nothing fitted;
* ``w``: ``c + w v``, one least-squares weight in [0, 1] (the fifth round's ``calibrate_correction``);
* ``w tested``: the same weight, kept where ``c + v`` beats ``c`` by the Diebold-Mariano test at 0.05 (the
  recipe since the sixth round, ``correction_significance``);
* ``b,w``: ``mean + b (last - mean) + w v``, the centre refitted too, one ``b`` for every variable;
* ``b_c,w_c``: the same with a ``b`` and a ``w`` per variable;
* ``c,w tested``: ``last + k (c - last) + w v``, the centre tested against the last value: ``k`` the
  least-squares share of the centre's departure from the last value, kept where it beats the last value by the
  Diebold-Mariano test at 0.05, then ``w`` the correction's share over that, tested the same way;
* ``skip``: ``c + s``, the linear skip's share ``s`` of the correction alone (models with ``linear_skip``);
* ``a,w``: ``c + a s + w (v - s)``, the skip and the rest of the network weighted apart;
* ``a,w tested``: the same, nested and tested as the recipe tests ``w``: ``a`` is the skip's least-squares
  share over the centre, kept where ``c + s`` beats ``c`` by the Diebold-Mariano test at 0.05, and ``w`` the
  rest's share over ``c + a s``, kept where the whole forecast beats that.

Test MSE, each variant refitted on every validation window, is printed for the record only.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from forecast import Forecaster
from forecast.models.base import horizon_target, kept_share, model_inputs

VARIANTS = ("none", "last", "w", "w tested", "b,w", "b_c,w_c", "c,w tested")
SKIP_VARIANTS = ("skip", "a,w", "a,w tested")
SIGNIFICANCE = 0.05  # the improved recipe's correction_significance


def has_skip(model) -> bool:
    return getattr(model, "skip", None) is not None  # Informer's and LogSparse's ``linear_skip``


def correction_without_skip(model, inputs) -> torch.Tensor:
    """The correction the model forecasts with its linear skip taken out, ``[B, P, C_out]``."""
    skip, model.skip = model.skip, None
    try:
        return model.center_and_correction(*inputs)[1]
    finally:
        model.skip = skip


def parts(model, loader) -> dict[str, torch.Tensor]:
    """Per window, step and output variable: the input's mean and last-minus-mean, the centre, the correction,
    the linear skip's share of it (zero without one) and the target, ``[N, P, C_out]`` each."""
    names = ("mean", "offset", "center", "correction", "skip", "y")
    rows: dict[str, list[torch.Tensor]] = {name: [] for name in names}
    for batch in loader:
        inputs = model_inputs(model.spec, batch)
        center, correction = model.center_and_correction(*inputs)  # [B, P, C_out] each
        rows["skip"].append(correction - correction_without_skip(model, inputs) if has_skip(model)
                            else torch.zeros_like(correction))  # [B, P, C_out]
        c_out = center.shape[2]
        x = inputs[0][..., -c_out:]  # [B, L, C_out]
        mean = x.mean(dim=1, keepdim=True)  # [B, 1, C_out]
        for name, value in (("mean", mean), ("offset", x[:, -1:] - mean), ("center", center),
                            ("correction", correction), ("y", horizon_target(batch["y"], c_out, center.shape[1]))):
            rows[name].append(value.expand_as(center))
    return {name: torch.cat(values).double() for name, values in rows.items()}


def box_least_squares(features: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Coefficients in [0, 1] with the least squared error (coordinate descent on a convex quadratic)."""
    coefficients = np.clip(np.linalg.lstsq(features, target, rcond=None)[0], 0.0, 1.0)
    for _ in range(200):
        for j in range(features.shape[1]):
            rest = target - features @ coefficients + features[:, j] * coefficients[j]
            norm = features[:, j] @ features[:, j]
            if norm > 0:
                coefficients[j] = np.clip(features[:, j] @ rest / norm, 0.0, 1.0)
    return coefficients


def tested_share(part: np.ndarray, miss: np.ndarray) -> float:
    """The recipe's rule (:func:`forecast.models.base.kept_share`) for a part ``[N, P, C_out]`` of the forecast
    correcting ``miss`` (the target minus the rest): its least-squares share, kept where the test finds it pays
    on these windows. (Where they are one stretch the recipe tests a prefix of the horizon instead, on windows cut
    from the validation period; a half of the validation windows has no such windows of its own, so here the
    least-squares share stands, as it did in the recipe before 2026-11-27.)"""
    per_window = (torch.from_numpy((part * miss).sum(axis=(1, 2))),
                  torch.from_numpy(np.square(part).sum(axis=(1, 2))))  # [N] each
    return kept_share(*per_window, part.shape[1], SIGNIFICANCE)[0]


def weighed_parts(variant: str, windows: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """``(base, first, second)`` of a variant that weighs two parts of the forecast, ``base + a first + w second``:
    the centre, the skip and the rest of the correction (``a,w``, ``a,w tested``), or the last value, the centre's
    departure from it and the correction (``c,w tested``)."""
    if variant == "c,w tested":
        last = windows["mean"] + windows["offset"]
        return last, windows["center"] - last, windows["correction"]
    return windows["center"], windows["skip"], windows["correction"] - windows["skip"]


def fitted(variant: str, windows: dict[str, torch.Tensor]):
    """The forecast function of ``variant`` fitted on ``windows``, and its fitted coefficients."""
    y, mean, offset, center, correction = (windows[name].numpy() for name in ("y", "mean", "offset", "center",
                                                                              "correction"))
    if variant == "none":
        return (lambda w: w["center"] + w["correction"]), np.ones(1)
    if variant == "skip":
        return (lambda w: w["center"] + w["skip"]), np.ones(1)
    if variant == "last":
        return (lambda w: w["mean"] + w["offset"]), np.zeros(0)
    if variant == "b,w":
        kept = box_least_squares(np.stack([offset.reshape(-1), correction.reshape(-1)], 1), (y - mean).reshape(-1))
        return (lambda w: w["mean"] + kept[0] * w["offset"] + kept[1] * w["correction"]), kept
    if variant == "b_c,w_c":
        per_variable = torch.tensor(np.array([
            box_least_squares(np.stack([offset[..., k].reshape(-1), correction[..., k].reshape(-1)], 1),
                              (y[..., k] - mean[..., k]).reshape(-1))
            for k in range(y.shape[2])]))  # [C_out, 2]
        return (lambda w: w["mean"] + per_variable[:, 0] * w["offset"] + per_variable[:, 1] * w["correction"]
                ), per_variable.numpy().T.reshape(-1)
    if variant in ("w", "w tested"):
        kept = (box_least_squares(correction.reshape(-1, 1), (y - center).reshape(-1)) if variant == "w"
                else np.array([tested_share(correction, y - center)]))
        return (lambda w: w["center"] + kept[0] * w["correction"]), kept
    base, first, second = (part.numpy() for part in weighed_parts(variant, windows))
    if variant == "a,w":
        kept = box_least_squares(np.stack([first.reshape(-1), second.reshape(-1)], 1), (y - base).reshape(-1))
    else:  # "a,w tested", "c,w tested": the first part's share over the base, then the second's over both
        a = tested_share(first, y - base)
        kept = np.array([a, tested_share(second, y - base - a * first)])

    def forecast(w: dict[str, torch.Tensor]) -> torch.Tensor:
        base, first, second = weighed_parts(variant, w)
        return base + kept[0] * first + kept[1] * second

    return forecast, kept


def mse(forecast: torch.Tensor, windows: dict[str, torch.Tensor]) -> float:
    return float((forecast - windows["y"]).square().mean())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="a saved run (forecast sweep's run folder, or Forecaster.save's)")
    parser.add_argument("dataset", help="the data it was fitted on: a registered dataset or a CSV path")
    args = parser.parse_args(argv)
    forecaster = Forecaster.load(args.run_dir)
    model = forecaster.model.eval()
    windows = forecaster.windows_of(args.dataset)
    windows.setup("fit")
    windows.setup("test")
    val, held_out = parts(model, windows.val_dataloader()), parts(model, windows.test_dataloader())
    half = val["y"].shape[0] // 2
    first, second = ({name: values[part] for name, values in val.items()} for part in (slice(None, half),
                                                                                        slice(half, None)))
    for variant in VARIANTS + (SKIP_VARIANTS if has_skip(model) else ()):
        on_half, half_coefficients = fitted(variant, first)
        on_all, coefficients = fitted(variant, val)
        print(f"{args.dataset} {type(model).__name__} P={val['y'].shape[1]} {variant:10s} "
              f"later validation half {mse(on_half(second), second):.4f} "
              f"(fitted {np.array2string(half_coefficients, precision=2)}) | for the record, test "
              f"{mse(on_all(held_out), held_out):.4f} (fitted {np.array2string(coefficients, precision=2)})")


if __name__ == "__main__":
    main()
