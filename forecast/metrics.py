"""Forecast error metrics: point (MSE, MAE, RMSE, MAPE, MSPE) and probabilistic (rho-risk,
interval coverage), as one-shot functions, streaming accumulators and report frames.

Conventions
-----------
* Forecast first, truth second in every call: ``mse(pred, true)``.
* Arrays are laid out ``[..., P, C]``: leading axes are windows (``[N, P, C]`` for a test set,
  ``[B, P, C]`` for a batch), then the horizon P, then the variables C. ``by="all"`` reduces
  everything and returns a Python ``float``; ``by="horizon"`` keeps the P axis (one value per
  step ahead) and ``by="variable"`` keeps the C axis; both return an array of the input's
  kind (numpy ``ndarray`` or torch ``Tensor`` on the input's device).
* Everything is computed in float64 whatever the input dtype, so float32 model outputs are
  scored without float32 accumulation error. (Apple MPS has no float64: move tensors to the
  CPU before scoring there.)
* Averages are per element, hence exact per-window averages: every window contributes the
  same P x C cells. Streaming over batches accumulates sums, never per-batch means (the
  original Informer code averaged batch means, which weights a short last batch wrongly).
* NaN in the inputs propagates to the result; shapes must match exactly (no broadcasting).
  The accumulators take ``missing="skip"`` to leave out the cells whose truth is NaN instead (values
  the data did not hold, such as those ``fill_nan`` filled): each cell's average then runs over the
  windows that observed it.

Zeros in the truth (MAPE, MSPE)
-------------------------------
Percentage errors divide by the truth. The field's code divides blindly and reports ``inf``
whenever a truth value is exactly zero (ETTh1 holds 111 zeros in ``OT`` alone). Here a truth
value counts as zero when ``|true| <= eps`` (``eps=0.0`` by default: exact zeros only) and
``zeros`` chooses what happens:

* ``"exclude"`` (default): those elements are left out of the average, which runs over the
  remaining elements only; a group with no remaining element is NaN. The number left out is
  recorded as ``MetricSummary.n_zero_truth``.
* ``"nan"``: any zero in a group makes that group's value NaN.
* ``"raise"``: a :class:`~forecast.errors.DataError` naming the count.

Near-zero truths are not clamped (scikit-learn clamps to machine epsilon and so reports
numbers around 1e15): a tiny truth gives an honest, large percentage error. Pass a positive
``eps`` to treat near-zeros as zeros. MAPE and MSPE on the standardized scale mean nothing,
because standardized series cross zero: reports give them on the original scale only.

Probabilistic metrics
---------------------
rho-risk (Seeger et al. 2016; used by DeepAR and the LogSparse Transformer paper)::

    R_rho = 2 * sum D_rho(x, q) / sum |x|,   D_rho(x, q) = (rho - 1{x <= q}) * (x - q)

where ``q`` is the forecast's rho-quantile and the sums run over the reduced elements.
``R_0.5`` of the median equals ``sum |x - q| / sum |x|``. Quantiles of sample paths use
linear interpolation (``numpy.quantile`` / ``torch.quantile``). Coverage is the fraction of
truth values inside the closed interval ``[lower, upper]``; the central interval of nominal
level ``l`` runs from the ``(1 - l)/2`` to the ``(1 + l)/2`` quantile. A group whose truth
sums to zero in absolute value has an undefined rho-risk and is NaN.

Why the accumulators subclass ``torchmetrics.Metric`` but keep their own sums
-----------------------------------------------------------------------------
``torchmetrics.Metric`` gives device placement with the LightningModule, ``reset``, and sum
reduction across processes under DDP, and it keeps float64 states float64 when the module is
cast to half or bfloat16; we use all of that. Its ready-made ``MeanSquaredError`` and
``MeanAbsoluteError`` are right for the logged val/test losses, but they hold states in the
input dtype (float32), break down only over the columns of 2-D inputs, and the percentage
error metric clamps zero truths with an epsilon. The per-horizon x per-variable float64 sum
grids here give overall, per-horizon and per-variable values from one pass.

Report frames
-------------
:func:`report` turns :class:`MetricSummary` objects, one per scale (``"standardized"`` and/or
``"original"``), into a long DataFrame with columns
``[scale, metric, horizon, variable, value, n_windows]``; ``horizon`` is the step ahead
(1..P) or ``"all"``, ``variable`` is the variable's name or ``"all"``. :func:`pivot_report`
gives the overall values as metric x scale and :func:`horizon_table` the per-horizon values.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import numpy as np
import pandas as pd
import torch
import torchmetrics

from forecast.checks import require_choice, require_int, require_levels, require_real
from forecast.errors import ConfigError, DataError
from forecast.models.base import sorted_quantiles

__all__ = [
    "ALL",
    "POINT_METRICS",
    "REPORT_COLUMNS",
    "DEFAULT_QUANTILES",
    "SCALES",
    "ORIGINAL_UNITS_ONLY",
    "MetricAccumulator",
    "MetricSummary",
    "ProbabilisticAccumulator",
    "check_variable_names",
    "coverage",
    "coverage_name",
    "horizon_table",
    "interval_coverage",
    "mae",
    "mape",
    "mse",
    "mspe",
    "pivot_report",
    "point_summary",
    "probabilistic_summary",
    "report",
    "rho_risk",
    "rho_risk_name",
    "rho_risks",
    "rmse",
    "sample_quantiles",
    "scored_levels",
]

logger = logging.getLogger(__name__)

Array: TypeAlias = "np.ndarray | torch.Tensor"
Breakdown: TypeAlias = Literal["all", "horizon", "variable"]
ZeroPolicy: TypeAlias = Literal["exclude", "nan", "raise"]

ALL = "all"
"""Label of the ``horizon``/``variable`` column on rows that aggregate over that axis."""
SCALES = ("standardized", "original")
"""Allowed values of the report's ``scale`` column, in report order."""
POINT_METRICS = ("mse", "mae", "rmse", "mape", "mspe")
"""Point metrics, in report order."""
ORIGINAL_UNITS_ONLY = ("mape", "mspe")
"""Metrics that divide by the truth: a standardized series crosses zero, so :func:`report`
gives them in original units only."""
REPORT_COLUMNS = ("scale", "metric", "horizon", "variable", "value", "n_windows")
"""Columns of :func:`report` frames."""

_BREAKDOWNS = ("all", "horizon", "variable")
_ZERO_POLICIES = ("exclude", "nan", "raise")
# Quantile levels are matched after rounding, so 0.1 finds (1 - 0.8) / 2 = 0.0999...98.
_LEVEL_DIGITS = 9


# --------------------------------------------------------------------------- validation


def _check_zero_policy(zeros: str, eps: float) -> None:
    require_choice("zeros", zeros, _ZERO_POLICIES)
    require_real("eps", eps, low=0, hint="|true| <= eps counts as zero")


def _check_levels(values: Sequence[float], name: str, allow_empty: bool = False) -> tuple[float, ...]:
    checked = require_levels(name, values, allow_empty=allow_empty)
    if len({round(value, _LEVEL_DIGITS) for value in checked}) != len(checked):
        raise ConfigError(f"{name}={values!r} repeats a value; list each one once.")
    if len({f"{value:g}" for value in checked}) != len(checked):  # the metric names: one would hide the other
        raise ConfigError(f"{name}={values!r} holds levels that differ only after their sixth significant digit, "
                          "which the metric names (rho_risk_0.123457) do not show. Fix: levels that differ sooner.")
    return checked


def _to_float64(values: Array) -> Array:
    if isinstance(values, torch.Tensor):
        return values.detach().to(torch.float64)
    return np.asarray(values, dtype=np.float64)


def _checked_arrays(arrays: Mapping[str, Any]) -> list[Array]:
    """Validate arrays that are scored together and return them as float64.

    They must all be numpy arrays or all torch tensors (on one device), be non-empty and
    have exactly the same shape: broadcasting ``[N, P, 1]`` against ``[N, P, C]`` would
    silently score the wrong thing.
    """
    kinds = {name: type(value).__name__ for name, value in arrays.items()}
    if all(isinstance(value, np.ndarray) for value in arrays.values()):
        pass
    elif all(isinstance(value, torch.Tensor) for value in arrays.values()):
        devices = {name: value.device for name, value in arrays.items()}
        if len(set(devices.values())) > 1:
            raise DataError(f"Tensors are on different devices {devices}; move them to one device first.")
    else:
        raise DataError(
            f"Arguments must be all numpy arrays or all torch tensors; got {kinds}. "
            "Convert with numpy.asarray(...) or torch.as_tensor(...) first."
        )
    shapes = {name: tuple(value.shape) for name, value in arrays.items()}
    if len(set(shapes.values())) > 1:
        raise DataError(f"Shapes differ: {shapes}; they must match exactly (no broadcasting), e.g. [N, P, C].")
    first_shape = next(iter(shapes.values()))
    if len(first_shape) == 0 or math.prod(first_shape) == 0:
        raise DataError(f"Cannot score empty or 0-d arrays; got shapes {shapes}.")
    return [_to_float64(value) for value in arrays.values()]


def _reduction_axes(shape: tuple[int, ...], by: Breakdown) -> tuple[int, ...]:
    """Axes to reduce so that ``by`` is left: P is axis -2, C is axis -1."""
    require_choice("by", by, _BREAKDOWNS)
    ndim = len(shape)
    if by == "all":
        return tuple(range(ndim))
    if ndim < 2:
        raise DataError(f"by={by!r} needs arrays shaped [..., P, C] (horizon, then variables); got shape {shape}.")
    kept = ndim - 2 if by == "horizon" else ndim - 1
    return tuple(axis for axis in range(ndim) if axis != kept)


# ------------------------------------------------------------------ backend-neutral helpers


def _where(condition: Array, if_true: Any, if_false: Any) -> Array:
    if isinstance(condition, torch.Tensor):
        return torch.where(condition, if_true, if_false)
    return np.where(condition, if_true, if_false)


def _safe_divide(numerator: Array, denominator: Array) -> Array:
    """``numerator / denominator`` with NaN (not inf, not a warning) where the denominator is 0."""
    positive = denominator > 0
    return _where(positive, numerator / _where(positive, denominator, 1), math.nan)


def _finish(value: Array, by: Breakdown) -> float | Array:
    return float(value) if by == "all" else value


def _pinball(quantile_pred: Array, true: Array, rho: float) -> Array:
    """Elementwise D_rho(x, q) = (rho - 1{x <= q}) * (x - q)."""
    # Weigh the float64 differences, not a where() of two Python floats: torch makes that float32.
    difference = true - quantile_pred
    return _where(true <= quantile_pred, (rho - 1.0) * difference, rho * difference)


def _interval_bounds(level: float) -> tuple[float, float]:
    return (1.0 - level) / 2.0, (1.0 + level) / 2.0


# The quantile levels predict gives unless told otherwise: the papers' R0.5 and R0.9, and the 80% interval.
DEFAULT_QUANTILES = (0.1, 0.5, 0.9)


def scored_levels(quantiles: Sequence[float]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The rho-risks and central-interval coverages scored for a forecast with quantile levels ``quantiles``:
    the papers' R0.5, R0.9 and 80% coverage (the tables' columns), each level's rho-risk, and the coverage of each
    interval a pair of levels bounds (0.05 and 0.95: 90%)."""
    rhos = {0.5, 0.9, *(round(float(level), _LEVEL_DIGITS) for level in quantiles)}
    given = {round(float(level), _LEVEL_DIGITS) for level in quantiles}
    levels = {0.8, *(round(1.0 - 2.0 * low, _LEVEL_DIGITS) for low in given
                     if low < 0.5 and round(1.0 - low, _LEVEL_DIGITS) in given)}
    return tuple(sorted(rhos)), tuple(sorted(levels))


def rho_risk_name(rho: float) -> str:
    """Metric name used in summaries and reports, e.g. ``rho_risk_0.9``."""
    return f"rho_risk_{rho:g}"


def coverage_name(level: float) -> str:
    """Metric name used in summaries and reports, e.g. ``coverage_0.8``."""
    return f"coverage_{level:g}"


# ---------------------------------------------------------------------------- point metrics


def mse(pred: Array, true: Array, *, by: Breakdown = "all") -> float | Array:
    """Mean squared error, overall (``float``) or per horizon / per variable (array)."""
    pred64, true64 = _checked_arrays({"pred": pred, "true": true})
    return _finish(((pred64 - true64) ** 2).mean(axis=_reduction_axes(pred64.shape, by)), by)


def mae(pred: Array, true: Array, *, by: Breakdown = "all") -> float | Array:
    """Mean absolute error, overall (``float``) or per horizon / per variable (array)."""
    pred64, true64 = _checked_arrays({"pred": pred, "true": true})
    return _finish(abs(pred64 - true64).mean(axis=_reduction_axes(pred64.shape, by)), by)


def rmse(pred: Array, true: Array, *, by: Breakdown = "all") -> float | Array:
    """Root of the mean squared error over the reduced elements (not a mean of per-window RMSEs)."""
    pred64, true64 = _checked_arrays({"pred": pred, "true": true})
    return _finish(((pred64 - true64) ** 2).mean(axis=_reduction_axes(pred64.shape, by)) ** 0.5, by)


def _percentage_error(
    pred: Array, true: Array, by: Breakdown, zeros: ZeroPolicy, eps: float, power: int, name: str
) -> float | Array:
    _check_zero_policy(zeros, eps)
    pred64, true64 = _checked_arrays({"pred": pred, "true": true})
    axes = _reduction_axes(true64.shape, by)
    is_zero = abs(true64) <= eps
    n_zero = int(is_zero.sum())
    if n_zero and zeros == "raise":
        raise DataError(
            f"{name} divides by the truth, but {n_zero} of {math.prod(true64.shape)} truth values have "
            f"|true| <= eps={eps}. Pass zeros='exclude' to leave them out or zeros='nan', or score "
            "a series that stays away from zero (the original scale rather than the standardized one)."
        )
    ratio = abs((pred64 - true64) / _where(is_zero, 1.0, true64)) ** power
    if zeros == "nan":
        return _finish(_where(is_zero.any(axis=axes), math.nan, ratio.mean(axis=axes)), by)
    if n_zero:
        logger.debug("%s leaves out %d zero truth values (|true| <= %g).", name, n_zero, eps)
    valid = ~is_zero
    return _finish(_safe_divide(_where(valid, ratio, 0.0).sum(axis=axes), valid.sum(axis=axes)), by)


def mape(
    pred: Array, true: Array, *, by: Breakdown = "all", zeros: ZeroPolicy = "exclude", eps: float = 0.0
) -> float | Array:
    """Mean absolute percentage error ``mean(|pred - true| / |true|)``, as a fraction (not %).

    Zero truths (``|true| <= eps``) are handled by ``zeros``: see the module docstring.
    """
    return _percentage_error(pred, true, by, zeros, eps, power=1, name="MAPE")


def mspe(
    pred: Array, true: Array, *, by: Breakdown = "all", zeros: ZeroPolicy = "exclude", eps: float = 0.0
) -> float | Array:
    """Mean squared percentage error ``mean(((pred - true) / true) ** 2)``.

    Zero truths (``|true| <= eps``) are handled by ``zeros``: see the module docstring.
    """
    return _percentage_error(pred, true, by, zeros, eps, power=2, name="MSPE")


# -------------------------------------------------------------------- probabilistic metrics


def sample_quantiles(samples: Array, rhos: Sequence[float]) -> Array:
    """Quantiles over the sample axis (axis 0) of sample paths, linear interpolation.

    ``samples [S, ...]`` gives ``[R, ...]`` in float64, R = ``len(rhos)``, of the input's kind; a NaN
    among a cell's samples makes its quantiles NaN. Torch inputs give ``torch.quantile``'s values
    bit for bit (``forecast.models.base.sorted_quantiles``, which the models' quantiles use too).
    """
    levels = _check_levels(rhos, "rhos")
    if not isinstance(samples, (np.ndarray, torch.Tensor)) or samples.ndim < 2 or samples.shape[0] < 1:
        raise DataError(
            f"samples must be a numpy array or torch tensor shaped [n_samples, ...] with at least one "
            f"sample; got {type(samples).__name__} of shape {tuple(getattr(samples, 'shape', ()))}."
        )
    if isinstance(samples, np.ndarray):
        return np.quantile(samples.astype(np.float64), levels, axis=0)
    return sorted_quantiles(samples.detach().to(torch.float64), levels)


def rho_risk(quantile_pred: Array, true: Array, rho: float, *, by: Breakdown = "all") -> float | Array:
    """rho-risk ``2 * sum D_rho(x, q) / sum |x|`` of a rho-quantile forecast ``q``.

    ``D_rho(x, q) = (rho - 1{x <= q}) * (x - q)``; sums run over the reduced elements, so the
    per-horizon value is the rho-risk of that step over all windows and variables. NaN where
    the truth sums to zero in absolute value.
    """
    rho = require_real("rho", rho, low=0, high=1, low_open=True, high_open=True)
    quantile64, true64 = _checked_arrays({"quantile_pred": quantile_pred, "true": true})
    axes = _reduction_axes(true64.shape, by)
    loss_sum = _pinball(quantile64, true64, rho).sum(axis=axes)
    return _finish(_safe_divide(2.0 * loss_sum, abs(true64).sum(axis=axes)), by)


def _check_samples_match(samples: Array, true: Array) -> None:
    if not isinstance(samples, (np.ndarray, torch.Tensor)) or tuple(samples.shape[1:]) != tuple(true.shape):
        raise DataError(
            f"samples must be shaped [n_samples, *true.shape] = [n_samples, {', '.join(map(str, true.shape))}]; "
            f"got {tuple(getattr(samples, 'shape', ()))}."
        )


def rho_risks(
    samples: Array, true: Array, rhos: Sequence[float] = (0.5, 0.9), *, by: Breakdown = "all"
) -> dict[float, float | Array]:
    """rho-risk at each rho of the quantiles of sample paths ``samples [S, N, P, C]``.

    Returns ``{rho: value}``; for quantile forecasts call :func:`rho_risk` per quantile.
    """
    _check_samples_match(samples, true)
    quantiles = sample_quantiles(samples, rhos)  # [R, N, P, C]
    return {rho: rho_risk(quantiles[index], true, rho, by=by) for index, rho in enumerate(_check_levels(rhos, "rhos"))}


def _inside(lower: Array, upper: Array, true: Array) -> Array:
    """1.0 where ``true`` lies in the closed interval ``[lower, upper]``, 0.0 where it does not, NaN where any
    of the three is NaN (float64 inputs of one kind); DataError for an interval with lower > upper."""
    n_inverted = int((lower > upper).sum())
    if n_inverted:
        raise DataError(f"{n_inverted} intervals have lower > upper (crossing quantiles); pass (lower, upper, true) "
                        "in that order.")
    undefined = (lower != lower) | (upper != upper) | (true != true)  # NaN is the one value unequal to itself
    return _where(undefined, math.nan, _to_float64((lower <= true) & (true <= upper)))


def coverage(lower: Array, upper: Array, true: Array, *, by: Breakdown = "all") -> float | Array:
    """Fraction of truth values inside the closed interval ``[lower, upper]`` (NaN in any input propagates)."""
    lower64, upper64, true64 = _checked_arrays({"lower": lower, "upper": upper, "true": true})
    return _finish(_inside(lower64, upper64, true64).mean(axis=_reduction_axes(true64.shape, by)), by)


def interval_coverage(samples: Array, true: Array, level: float = 0.8, *, by: Breakdown = "all") -> float | Array:
    """Coverage of the central interval of nominal ``level`` of sample paths ``[S, N, P, C]``."""
    level = require_real("level", level, low=0, high=1, low_open=True, high_open=True)
    _check_samples_match(samples, true)
    bounds = sample_quantiles(samples, _interval_bounds(level))  # [2, N, P, C]
    return coverage(bounds[0], bounds[1], true, by=by)


# ------------------------------------------------------------------------------- summaries


@dataclass(frozen=True, eq=False)
class MetricSummary:
    """Metric values over a set of windows: overall, per horizon step and per variable.

    ``per_horizon[name]`` has shape [P] (step 1 first) and ``per_variable[name]`` shape [C]
    (the data's variable order). ``n_zero_truth`` counts truth values left out of MAPE/MSPE
    (policy ``"exclude"``) or that made them NaN (``"nan"``).
    """

    overall: Mapping[str, float]
    per_horizon: Mapping[str, np.ndarray]
    per_variable: Mapping[str, np.ndarray]
    n_windows: int
    n_zero_truth: int = 0
    horizon: int = field(init=False)
    n_variables: int = field(init=False)

    def __post_init__(self) -> None:
        names = list(self.overall)
        if not names or list(self.per_horizon) != names or list(self.per_variable) != names:
            raise DataError(
                f"MetricSummary needs the same non-empty metric names in overall {list(self.overall)}, "
                f"per_horizon {list(self.per_horizon)} and per_variable {list(self.per_variable)}."
            )
        horizon_shapes = {np.shape(values) for values in self.per_horizon.values()}
        variable_shapes = {np.shape(values) for values in self.per_variable.values()}
        if len(horizon_shapes) != 1 or len(variable_shapes) != 1 or any(
            len(shape) != 1 for shape in horizon_shapes | variable_shapes
        ):
            raise DataError(
                f"MetricSummary breakdowns must be 1-D and of one length per axis; got per-horizon shapes "
                f"{horizon_shapes} and per-variable shapes {variable_shapes}."
            )
        if self.n_windows < 1:
            raise DataError(f"MetricSummary covers n_windows={self.n_windows}; score at least one window.")
        object.__setattr__(self, "horizon", horizon_shapes.pop()[0])
        object.__setattr__(self, "n_variables", variable_shapes.pop()[0])

    @property
    def metrics(self) -> tuple[str, ...]:
        """Metric names, in report order."""
        return tuple(self.overall)

    def combine(self, other: MetricSummary) -> MetricSummary:
        """One summary holding both summaries' metrics (e.g. point and probabilistic).

        Both must cover the same number of windows, horizon and variables, with distinct names.
        """
        shared = set(self.metrics) & set(other.metrics)
        shape, other_shape = (self.n_windows, self.horizon, self.n_variables), (
            other.n_windows,
            other.horizon,
            other.n_variables,
        )
        if shared or shape != other_shape:
            raise DataError(
                f"Cannot combine summaries with (n_windows, P, C) {shape} and {other_shape} sharing metrics "
                f"{sorted(shared)}; combine summaries of the same windows with different metrics."
            )
        return MetricSummary(
            overall={**self.overall, **other.overall},
            per_horizon={**self.per_horizon, **other.per_horizon},
            per_variable={**self.per_variable, **other.per_variable},
            n_windows=self.n_windows,
            n_zero_truth=self.n_zero_truth + other.n_zero_truth,
        )


def _group_sums(grid: torch.Tensor) -> dict[str, torch.Tensor]:
    """Sums of a ``[..., P, C]`` grid: all cells, per horizon [..., P], per variable [..., C]."""
    return {"all": grid.sum(dim=(-2, -1)), "horizon": grid.sum(dim=-1), "variable": grid.sum(dim=-2)}


def _summary_from_groups(
    groups: Mapping[str, Mapping[str, torch.Tensor]], n_windows: int, n_zero_truth: int = 0
) -> MetricSummary:
    """Build a summary from ``{metric: {"all": 0-d, "horizon": [P], "variable": [C]}}``."""
    return MetricSummary(
        overall={name: float(values["all"]) for name, values in groups.items()},
        per_horizon={name: values["horizon"].cpu().numpy() for name, values in groups.items()},
        per_variable={name: values["variable"].cpu().numpy() for name, values in groups.items()},
        n_windows=n_windows,
        n_zero_truth=n_zero_truth,
    )


# ---------------------------------------------------------------------------- accumulators


def _check_batch(true: Any, name: str = "true") -> None:
    if not isinstance(true, torch.Tensor) or true.ndim != 3 or true.numel() == 0:
        raise DataError(
            f"{name} must be a non-empty torch tensor shaped [B, P, C]; got {type(true).__name__} "
            f"of shape {tuple(getattr(true, 'shape', ()))}."
        )


Missing = Literal["propagate", "skip"]


class _GridMetric(torchmetrics.Metric):
    """Shared machinery: float64 sum grids over [P, C] cells, shaped lazily or up front, and the count of
    truths each cell observed (``missing="skip"`` leaves NaN truths out; ``"propagate"`` lets them make NaN)."""

    is_differentiable = False
    full_state_update = False

    def __init__(self, horizon: int | None, n_variables: int | None, missing: Missing = "propagate",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        require_choice("missing", missing, ("propagate", "skip"))
        self.missing = missing
        self._given_shape = tuple(require_int(name, value, 1, optional=True, hint="None: taken from the first batch")
                                  for name, value in (("horizon", horizon), ("n_variables", n_variables)))
        self._grid_shape = self._given_shape
        self.add_state("n_windows", default=torch.zeros((), dtype=torch.int64), dist_reduce_fx="sum")
        self._add_grid_state("n_observed", dtype=torch.int64)

    def _observed(self, true64: torch.Tensor) -> torch.Tensor:
        """``[B, P, C]`` bool: the truths scored (all of them, unless NaN ones are skipped); counts them."""
        observed = ~torch.isnan(true64) if self.missing == "skip" else torch.ones_like(true64, dtype=torch.bool)
        self._accumulate("n_observed", observed.sum(dim=0))
        return observed

    def _cells(self) -> dict[str, torch.Tensor]:
        """The truths scored: all cells, per horizon [P], per variable [C] (float64)."""
        self._windows()
        return _group_sums(self.n_observed.to(torch.float64))

    def _add_grid_state(self, name: str, leading: tuple[int, ...] = (), dtype: torch.dtype = torch.float64) -> None:
        # Without a known [P, C] the default is a 0-d zero that the first batch broadcasts up;
        # pass horizon and n_variables under DDP, where a process may see no batch at all.
        shape = (*leading, *self._grid_shape) if None not in self._grid_shape else ()
        self.add_state(name, default=torch.zeros(shape, dtype=dtype), dist_reduce_fx="sum")

    def _check_cells(self, true: torch.Tensor) -> None:
        horizon, n_variables = self._grid_shape
        cells = tuple(true.shape[1:])
        expected = (horizon or cells[0], n_variables or cells[1])
        if cells != expected:
            raise DataError(f"Batch has [P, C] = {list(cells)} but this accumulator expects {list(expected)}.")
        self._grid_shape = expected

    def _accumulate(self, name: str, batch_grid: torch.Tensor) -> None:
        setattr(self, name, getattr(self, name) + batch_grid.to(self.device))

    def reset(self) -> None:
        """Clear all sums (and the [P, C] learnt from batches, unless given at construction)."""
        super().reset()
        self._grid_shape = self._given_shape

    def _windows(self) -> int:
        n_windows = int(self.n_windows)
        if n_windows == 0:
            raise DataError(f"{type(self).__name__} has seen no window; call update() with batches first.")
        return n_windows


class MetricAccumulator(_GridMetric):
    """Streams point metrics over batches ``pred, true [B, P, C]`` on any device, exactly.

    Keeps float64 sums per (horizon step, variable) cell, so the final values are exact
    per-window averages over every window seen, whatever the batch sizes (a short last batch
    weighs what its windows weigh). Use one accumulator per scale::

        self.test_metrics = MetricAccumulator()          # in LightningModule.__init__
        self.test_metrics.update(pred, true)             # in test_step
        self.log_dict(self.test_metrics.compute())       # overall values, in on_test_epoch_end
        summary = self.test_metrics.summary()            # with per-horizon/variable breakdowns

    ``zeros``/``eps`` choose the MAPE/MSPE zero-truth policy (module docstring; ``"raise"``
    raises in ``update``). ``horizon``/``n_variables`` fix [P, C] up front (needed under DDP);
    otherwise the first batch sets them. Other keyword arguments go to ``torchmetrics.Metric``.
    """

    higher_is_better = False

    def __init__(
        self,
        zeros: ZeroPolicy = "exclude",
        eps: float = 0.0,
        *,
        horizon: int | None = None,
        n_variables: int | None = None,
        missing: Missing = "propagate",
        **kwargs: Any,
    ) -> None:
        _check_zero_policy(zeros, eps)
        super().__init__(horizon, n_variables, missing, **kwargs)
        self.zeros = zeros
        self.eps = float(eps)
        for name in ("squared_error", "absolute_error", "absolute_ratio", "squared_ratio"):
            self._add_grid_state(name)
        self._add_grid_state("n_ratio_valid", dtype=torch.int64)

    def update(self, pred: torch.Tensor, true: torch.Tensor) -> None:
        """Add a batch of forecasts and truths, both ``[B, P, C]`` on one device."""
        _check_batch(pred, "pred")
        _check_batch(true, "true")
        pred64, true64 = _checked_arrays({"pred": pred, "true": true})
        self._check_cells(true64)
        observed = self._observed(true64)
        true64 = torch.where(observed, true64, 1.0)  # a truth left out: neither an error nor a zero
        error = torch.where(observed, pred64 - true64, 0.0)
        is_zero = true64.abs() <= self.eps
        n_zero = int(is_zero.sum())
        if n_zero and self.zeros == "raise":
            raise DataError(
                f"MAPE/MSPE divide by the truth, but {n_zero} truth values in this batch have |true| <= "
                f"eps={self.eps}. Use MetricAccumulator(zeros='exclude') or zeros='nan', or score a series "
                "that stays away from zero."
            )
        ratio = torch.where(is_zero, 0.0, error / torch.where(is_zero, 1.0, true64)).abs()  # 0 where not observed
        self._accumulate("squared_error", (error**2).sum(dim=0))
        self._accumulate("absolute_error", error.abs().sum(dim=0))
        self._accumulate("absolute_ratio", ratio.sum(dim=0))
        self._accumulate("squared_ratio", (ratio**2).sum(dim=0))
        self._accumulate("n_ratio_valid", (observed & ~is_zero).sum(dim=0))
        self.n_windows += true64.shape[0]

    def _groups(self) -> dict[str, dict[str, torch.Tensor]]:
        cells = self._cells()
        valid = _group_sums(self.n_ratio_valid.to(torch.float64))
        groups: dict[str, dict[str, torch.Tensor]] = {}
        for name, state in (("mse", self.squared_error), ("mae", self.absolute_error)):
            groups[name] = {key: total / cells[key] for key, total in _group_sums(state).items()}
        groups["rmse"] = {key: value.sqrt() for key, value in groups["mse"].items()}
        for name, state in (("mape", self.absolute_ratio), ("mspe", self.squared_ratio)):
            sums = _group_sums(state)
            if self.zeros == "nan":
                groups[name] = {
                    key: torch.where(valid[key] < cells[key], math.nan, sums[key] / cells[key]) for key in sums
                }
            else:
                groups[name] = {key: _safe_divide(sums[key], valid[key]) for key in sums}
        return groups

    def compute(self) -> dict[str, torch.Tensor]:
        """Overall values as 0-d float64 tensors ``{mse, mae, rmse, mape, mspe}`` (for logging)."""
        return {name: values["all"] for name, values in self._groups().items()}

    def summary(self) -> MetricSummary:
        """Overall, per-horizon and per-variable values (synchronised across processes)."""
        with self.sync_context():
            n_windows = self._windows()
            n_zero_truth = int(self.n_observed.sum()) - int(self.n_ratio_valid.sum())
            return _summary_from_groups(self._groups(), n_windows, n_zero_truth)


class ProbabilisticAccumulator(_GridMetric):
    """Streams rho-risks and interval coverages over batches, exactly (float64 sums).

    ``update(forecast, true)`` takes ``true [B, P, C]`` and either sample paths
    ``forecast [S, B, P, C]`` or quantile forecasts ``forecast = {level: [B, P, C]}``, which
    must hold every rho in ``rhos`` and both bounds ``(1 -/+ level) / 2`` of every level in
    ``levels`` (matched to 9 decimals): ``needed_levels``. Metric names: :func:`rho_risk_name`,
    :func:`coverage_name`. ``horizon``/``n_variables`` as in :class:`MetricAccumulator`.
    """

    def __init__(
        self,
        rhos: Sequence[float] = (0.5, 0.9),
        levels: Sequence[float] = (0.8,),
        *,
        horizon: int | None = None,
        n_variables: int | None = None,
        missing: Missing = "propagate",
        **kwargs: Any,
    ) -> None:
        self.rhos = _check_levels(rhos, "rhos")
        self.levels = _check_levels(levels, "levels", allow_empty=True)
        super().__init__(horizon, n_variables, missing, **kwargs)
        bounds = [bound for level in self.levels for bound in _interval_bounds(level)]
        self.needed_levels = tuple(dict.fromkeys(round(value, _LEVEL_DIGITS) for value in (*self.rhos, *bounds)))
        self._add_grid_state("pinball", leading=(len(self.rhos),))
        self._add_grid_state("absolute_truth")
        self._add_grid_state("n_covered", leading=(len(self.levels),))

    def _quantiles(self, forecast: torch.Tensor | Mapping[float, torch.Tensor], true: torch.Tensor) -> torch.Tensor:
        """The needed quantile forecasts stacked as [Q, B, P, C] float64."""
        if isinstance(forecast, Mapping):
            by_level = {round(float(level), _LEVEL_DIGITS): values for level, values in forecast.items()}
            missing = [level for level in self.needed_levels if level not in by_level]
            if missing:
                raise DataError(
                    f"Quantile forecasts for levels {missing} are missing (got {sorted(by_level)}); rhos "
                    f"{self.rhos} and the bounds of intervals {self.levels} are all needed."
                )
            named = {f"quantile {level}": by_level[level] for level in self.needed_levels}
            chosen = _checked_arrays({"true": true, **named})
            return torch.stack(chosen[1:])  # [Q, B, P, C]
        if not isinstance(forecast, torch.Tensor):
            raise DataError(
                "forecast must be sample paths [S, B, P, C] or a mapping level -> [B, P, C]; "
                f"got {type(forecast).__name__}."
            )
        _check_samples_match(forecast, true)
        if forecast.device != true.device:
            raise DataError(f"samples are on {forecast.device} but true is on {true.device}; use one device.")
        return sample_quantiles(forecast, self.needed_levels)

    def update(self, forecast: torch.Tensor | Mapping[float, torch.Tensor], true: torch.Tensor) -> None:
        """Add a batch: sample paths ``[S, B, P, C]`` or ``{level: [B, P, C]}``, and ``true [B, P, C]``."""
        _check_batch(true)
        true64 = _to_float64(true)
        self._check_cells(true64)
        quantiles = self._quantiles(forecast, true)  # [Q, B, P, C]
        position = {level: index for index, level in enumerate(self.needed_levels)}
        observed = self._observed(true64)

        def quantile(level: float) -> torch.Tensor:
            return quantiles[position[round(level, _LEVEL_DIGITS)]]  # [B, P, C]

        def scored(values: torch.Tensor) -> torch.Tensor:  # [B, P, C] -> [P, C], the observed truths' sum
            return torch.where(observed, values, 0.0).sum(dim=0)

        pinball = [scored(_pinball(quantile(rho), true64, rho)) for rho in self.rhos]
        self._accumulate("pinball", torch.stack(pinball))  # [R, P, C]
        self._accumulate("absolute_truth", scored(true64.abs()))
        if self.levels:
            covered = []
            for level in self.levels:
                lower, upper = (quantile(bound) for bound in _interval_bounds(level))
                covered.append(scored(_inside(lower, upper, true64)))
            self._accumulate("n_covered", torch.stack(covered))  # [K, P, C]
        self.n_windows += true64.shape[0]

    def _groups(self) -> dict[str, dict[str, torch.Tensor]]:
        cells = self._cells()
        absolute = _group_sums(self.absolute_truth)
        groups: dict[str, dict[str, torch.Tensor]] = {}
        for index, rho in enumerate(self.rhos):
            losses = _group_sums(self.pinball[index])
            groups[rho_risk_name(rho)] = {key: _safe_divide(2.0 * losses[key], absolute[key]) for key in losses}
        for index, level in enumerate(self.levels):
            covered = _group_sums(self.n_covered[index])
            groups[coverage_name(level)] = {key: covered[key] / cells[key] for key in covered}
        return groups

    def compute(self) -> dict[str, torch.Tensor]:
        """Overall values as 0-d float64 tensors, e.g. ``{rho_risk_0.5, rho_risk_0.9, coverage_0.8}``."""
        return {name: values["all"] for name, values in self._groups().items()}

    def summary(self) -> MetricSummary:
        """Overall, per-horizon and per-variable values (synchronised across processes)."""
        with self.sync_context():
            return _summary_from_groups(self._groups(), self._windows())


def _as_tensor(values: Any, name: str, dims: str = "N, P, C") -> torch.Tensor:
    """``values`` as a tensor, its shape checked before conversion so that an error names the type passed."""
    if not isinstance(values, (np.ndarray, torch.Tensor)) or values.ndim != dims.count(",") + 1 or 0 in values.shape:
        raise DataError(f"{name} must be a non-empty numpy array or torch tensor shaped [{dims}]; got "
                        f"{type(values).__name__} of shape {tuple(getattr(values, 'shape', ()))}.")
    if isinstance(values, torch.Tensor):
        return values
    return torch.from_numpy(np.ascontiguousarray(values))


def point_summary(pred: Array, true: Array, *, zeros: ZeroPolicy = "exclude", eps: float = 0.0) -> MetricSummary:
    """Point metrics of a whole test set ``pred, true [N, P, C]`` (numpy or torch) in one call."""
    accumulator = MetricAccumulator(zeros, eps)
    pred_tensor, true_tensor = _as_tensor(pred, "pred"), _as_tensor(true, "true")
    accumulator.to(true_tensor.device)
    accumulator.update(pred_tensor, true_tensor)
    return accumulator.summary()


def probabilistic_summary(
    forecast: Array | Mapping[float, Array],
    true: Array,
    *,
    rhos: Sequence[float] = (0.5, 0.9),
    levels: Sequence[float] = (0.8,),
) -> MetricSummary:
    """rho-risks and coverages of a whole test set: samples ``[S, N, P, C]`` or ``{level: [N, P, C]}``."""
    accumulator = ProbabilisticAccumulator(rhos, levels)
    true_tensor = _as_tensor(true, "true")
    if isinstance(forecast, Mapping):
        forecast_tensors: Any = {level: _as_tensor(values, f"quantile {level}") for level, values in forecast.items()}
    else:
        forecast_tensors = _as_tensor(forecast, "samples", "S, N, P, C")
    accumulator.to(true_tensor.device)
    accumulator.update(forecast_tensors, true_tensor)
    return accumulator.summary()


# ---------------------------------------------------------------------------------- reports

def report(summaries: Mapping[str, MetricSummary], *, variables: Sequence[str] | None = None) -> pd.DataFrame:
    """Long report frame ``[scale, metric, horizon, variable, value, n_windows]``.

    ``summaries`` maps a scale (``"standardized"``, ``"original"``) to its summary (combine
    point and probabilistic summaries with :meth:`MetricSummary.combine` first). Per scale and
    metric the rows are: the overall value (horizon and variable ``"all"``), one row per
    horizon step 1..P (variable ``"all"``), one row per variable (horizon ``"all"``).
    ``variables`` names the C variables in data order (default ``"0"``, ``"1"``, ...).
    MAPE and MSPE appear on the original scale only (:data:`ORIGINAL_UNITS_ONLY`).
    """
    if not summaries:
        raise ConfigError("report() needs at least one summary, e.g. {'original': summary}.")
    unknown = [scale for scale in summaries if scale not in SCALES]
    if unknown:
        raise ConfigError(f"Unknown scales {unknown}; use {SCALES}.")
    rows: list[tuple[Any, ...]] = []
    for scale in (scale for scale in SCALES if scale in summaries):
        summary = summaries[scale]
        names = _variable_names(variables, summary.n_variables)
        for metric in summary.metrics:
            if scale != "original" and metric in ORIGINAL_UNITS_ONLY:
                continue
            rows.append((scale, metric, ALL, ALL, summary.overall[metric], summary.n_windows))
            rows.extend(
                (scale, metric, step, ALL, float(value), summary.n_windows)
                for step, value in enumerate(summary.per_horizon[metric], start=1)
            )
            rows.extend(
                (scale, metric, ALL, name, float(value), summary.n_windows)
                for name, value in zip(names, summary.per_variable[metric], strict=True)
            )
    frame = pd.DataFrame(rows, columns=list(REPORT_COLUMNS))
    return frame.astype({"horizon": object, "value": "float64", "n_windows": "int64"})


def check_variable_names(variables: Sequence[Hashable], source: str = "") -> None:
    """ConfigError where :func:`report` could not name the variables of ``source`` (a file or frame, named in
    the message): one named like the rows that pool every variable (:data:`ALL`), or two whose names are one
    text (``1`` and ``"1"``). For a fit to check before training, rather than its evaluation after it."""
    where = f"{source}: " if source else ""
    seen: dict[str, Hashable] = {}
    for variable in variables:
        name = str(variable)
        if name == ALL:
            raise ConfigError(f"{where}variable {variable!r} is named like the report's rows of every variable "
                              f"pooled ({ALL!r}), so evaluate() could not tell them apart. Fix: rename it, e.g. "
                              f"df.rename(columns={{{variable!r}: {name + '_'!r}}}).")
        if name in seen:
            raise ConfigError(f"{where}variables {seen[name]!r} and {variable!r} are both named {name!r} in "
                              "evaluate()'s report, which names variables as text. Fix: rename one of them.")
        seen[name] = variable


def _variable_names(variables: Sequence[str] | None, n_variables: int) -> list[str]:
    if variables is None:
        return [str(index) for index in range(n_variables)]
    names = [str(name) for name in variables]
    if len(names) != n_variables or ALL in names or len(set(names)) != len(names):
        raise ConfigError(
            f"variables={names} must name the {n_variables} variables once each, in data order, "
            f"without the reserved name {ALL!r}."
        )
    return names


def _check_report(frame: pd.DataFrame) -> None:
    missing = [column for column in REPORT_COLUMNS if column not in frame.columns]
    if missing:
        raise DataError(f"Not a report frame: columns {missing} are missing; build it with forecast.metrics.report().")


def pivot_report(frame: pd.DataFrame) -> pd.DataFrame:
    """Overall values (all horizons and variables pooled) as a metric x scale table, metrics
    and scales in report order; a metric not computed on a scale is NaN there. The
    number of windows scored is in ``attrs["n_windows"]``."""
    _check_report(frame)
    overall = frame[(frame["horizon"] == ALL) & (frame["variable"] == ALL)]
    table = overall.pivot(index="metric", columns="scale", values="value")
    scales = [scale for scale in SCALES if scale in table.columns]
    present = list(dict.fromkeys(overall["metric"]))
    order = [m for m in POINT_METRICS if m in present] + [m for m in present if m not in POINT_METRICS]
    table = table.loc[order, scales]
    table.columns.name = "scale"
    table.attrs["n_windows"] = int(overall["n_windows"].max()) if len(overall) else 0
    return table


def horizon_table(frame: pd.DataFrame, scale: str = "original") -> pd.DataFrame:
    """Per-horizon values (over all variables) of one scale: index horizon 1..P, columns metrics."""
    _check_report(frame)
    rows = frame[(frame["scale"] == scale) & (frame["horizon"] != ALL) & (frame["variable"] == ALL)]
    if rows.empty:
        held = sorted(set(frame["scale"]))
        raise DataError(f"The report has no per-horizon rows for scale {scale!r}; it holds {held}.")
    table = rows.pivot(index="horizon", columns="metric", values="value")
    table.index = table.index.astype("int64")
    return table.loc[:, list(dict.fromkeys(rows["metric"]))]
