"""The fitted data state: everything forecasting new rows needs from the fit, in one object.

:class:`FittedState` holds the variables (model order, target last), the frequency, the
options that read the table, the window lengths and the scaler fitted on the training rows.
The data module builds it at setup (or is given one, to read new data exactly as the fit
did), the Lightning module scores and un-scales with it, and the Forecaster saves it beside
the model. It is the one place that scales windows, un-scales forecasts and builds the input
for the steps after a series' end. ``state_dict()`` / :meth:`FittedState.from_state_dict`
carry it through checkpoints and saved runs as plain JSON types.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

import numpy as np
import pandas as pd
import torch
from sklearn.preprocessing import StandardScaler

from forecast.data.io import Table, TimeSeries, parse_offset, prepare_series
from forecast.data.timefeatures import n_time_features, seasonal_period, time_feature_sizes, time_features
from forecast.errors import ConfigError, DataError, SeriesTooShortError, UnknownColumnError

__all__ = ["FittedState", "FutureBatch", "fit_scaler", "standardize"]

ArrayOrTensor = TypeVar("ArrayOrTensor", np.ndarray, torch.Tensor)

# A standardized train column has mean 0 and standard deviation 1 (0 if constant); one far
# from that was lost to float64 overflow or to rounding next to a huge offset.
_STANDARDIZED_TOLERANCE = 0.5


def fit_scaler(values: np.ndarray, columns: Sequence[Hashable], source: str) -> StandardScaler:
    """A ``StandardScaler`` fitted on train rows ``values [T_train, C]``, checked to standardize them.

    DataError naming the column when float64 cannot: squares overflow for magnitudes
    beyond ~1e154, and a huge constant (1e40) leaves rounding residue of ~1e24.
    """
    with np.errstate(over="ignore", invalid="ignore"):  # reported below, by column
        scaler = StandardScaler().fit(values)
        standardized = scaler.transform(values)  # [T_train, C]
        mean, spread = standardized.mean(axis=0), standardized.std(axis=0)  # [C]
    usable = (np.isfinite(scaler.mean_) & np.isfinite(scaler.scale_) & np.isfinite(standardized).all(axis=0)
              & (np.abs(mean) <= _STANDARDIZED_TOLERANCE)
              & ((np.abs(spread - 1) <= _STANDARDIZED_TOLERANCE) | (spread <= _STANDARDIZED_TOLERANCE)))
    if not usable.all():
        column = int(np.flatnonzero(~usable)[0])
        largest = float(np.max(np.abs(values[:, column])))
        raise DataError(
            f"{source}: column {columns[column]!r} cannot be standardized in float64 (its train rows reach "
            f"|{largest:.3g}|; standardized they have mean {mean[column]:.3g} and standard deviation "
            f"{spread[column]:.3g} instead of 0 and 1). Fix: rescale the column (e.g. divide it by a power of "
            "ten) or subtract its typical level before passing it."
        )
    return scaler


def standardize(scaler: StandardScaler, values: np.ndarray, columns: Sequence[Hashable], source: str,
                first_row: int = 0) -> np.ndarray:
    """``values [T, C]`` standardized as float32; DataError naming the cell that float32 cannot hold."""
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = scaler.transform(values).astype(np.float32)  # [T, C]
    bad = np.argwhere(~np.isfinite(scaled))
    if bad.size:
        row, column = (int(i) for i in bad[0])
        raise DataError(
            f"{source}: column {columns[column]!r}, row {first_row + row} is {values[row, column]:.3g}, which "
            f"is {len(bad)} value(s) too far from the train rows to standardize in float32 (beyond 3.4e38 "
            "standard deviations). Fix: clean or rescale those values."
        )
    return scaled


class FutureBatch(NamedTuple):
    """Model input for forecasting past the end of a series.

    ``batch``: ``x [1, L, C]``, ``x_mark [1, L, F]``, ``y_mark [1, label_len+P, F]`` and
    ``y [1, label_len+P, C]`` whose last P rows are unknown (NaN). ``index``: the P future
    timestamps, continuing the series' frequency.
    """

    batch: dict[str, torch.Tensor]
    index: pd.DatetimeIndex


def _scaler_state(scaler: StandardScaler) -> dict[str, Any]:
    return {"mean": scaler.mean_.tolist(), "scale": scaler.scale_.tolist(), "var": scaler.var_.tolist(),
            "n_samples_seen": int(np.max(scaler.n_samples_seen_))}


def _scaler_from_state(state: Mapping[str, Any]) -> StandardScaler:
    scaler = StandardScaler()
    scaler.mean_ = np.asarray(state["mean"], dtype=np.float64)
    scaler.scale_ = np.asarray(state["scale"], dtype=np.float64)
    scaler.var_ = np.asarray(state["var"], dtype=np.float64)
    scaler.n_features_in_ = len(scaler.mean_)
    scaler.n_samples_seen_ = np.int64(state["n_samples_seen"])
    return scaler


def persistence(values: np.ndarray, seq_len: int, pred_len: int) -> tuple[float, ...]:
    """Per variable, how much of a window's last offset from its mean persists over the horizon.

    The least-squares weight ``w`` in ``future - mean = w * (last - mean)`` over every window of
    ``values [T, C]`` (``mean`` of the ``seq_len`` inputs, ``last`` the last of them, ``future`` each
    of the next ``pred_len`` values), clipped to ``[0, 1]``: near 1 for a random walk, whose last
    value is its best forecast; near 0 for noise around a level, whose window mean is. Scale-free.
    The ``persistence`` RevIN centre starts from it (:mod:`forecast.layers.normalization`).
    """
    values = np.asarray(values, dtype=np.float64)  # [T, C]
    windows = values.shape[0] - seq_len - pred_len + 1
    if windows < 1:
        return tuple(0.5 for _ in range(values.shape[1]))
    sums = np.concatenate([np.zeros((1, values.shape[1])), np.cumsum(values, axis=0)])  # [T + 1, C]
    starts = np.arange(windows)
    mean = (sums[starts + seq_len] - sums[starts]) / seq_len  # [N, C]
    last = values[starts + seq_len - 1]  # [N, C]
    future = (sums[starts + seq_len + pred_len] - sums[starts + seq_len]) / pred_len  # [N, C], mean over P
    offset = last - mean
    denominator = (offset * offset).sum(axis=0)
    weight = np.divide((offset * (future - mean)).sum(axis=0), denominator, out=np.full(values.shape[1], 0.5),
                       where=denominator > 0)
    return tuple(float(w) for w in np.clip(weight, 0.0, 1.0))


@dataclasses.dataclass(frozen=True)
class FittedState:
    """The variables, frequency, reading options, window lengths and train-row scaler of a fit.

    ``input_columns``/``output_columns`` are in model order (target last); ``freq`` is the
    pandas offset alias in use; ``prepare_options`` are the
    :func:`~forecast.data.io.prepare_series` options that read the fitted table (target, date
    column, frequency and a registered dataset's quirks), so new rows of the series are read
    the same way; ``dataset`` names the data (registered name, file stem or ``<DataFrame>``).
    """

    input_columns: tuple[Hashable, ...]
    output_columns: tuple[Hashable, ...]
    freq: str
    dataset: str
    prepare_options: dict[str, Any]
    seq_len: int
    label_len: int
    pred_len: int
    time_encoding: str
    scaler: StandardScaler
    # Per input variable, :func:`persistence` over the training rows (None: a state saved before it existed).
    persistence: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if len(self.input_columns) != self.scaler.n_features_in_:
            raise ConfigError(f"the scaler has {self.scaler.n_features_in_} variables, the fitted state "
                              f"{len(self.input_columns)} ({list(self.input_columns)!r})")

    @classmethod
    def fit(cls, series: TimeSeries, train_rows: tuple[int, int], dataset: str, prepare_options: dict[str, Any],
            seq_len: int, label_len: int, pred_len: int, time_encoding: str) -> FittedState:
        """The state of a fit: scaler and persistence fitted on the train rows ``[start, end)`` only."""
        start, end = train_rows
        scaler = fit_scaler(series.values[start:end], series.input_columns, series.source)  # fit on [T_train, C]
        return cls(tuple(series.input_columns), tuple(series.output_columns), series.freq.freqstr, dataset,
                   prepare_options, seq_len, label_len, pred_len, time_encoding, scaler,
                   persistence(series.values[start:end], seq_len, pred_len))

    def check_windows(self, seq_len: int, label_len: int, pred_len: int, time_encoding: str) -> None:
        """ConfigError unless this state is for these window lengths and calendar encoding."""
        mine = (self.seq_len, self.label_len, self.pred_len, self.time_encoding)
        if mine != (seq_len, label_len, pred_len, time_encoding):
            raise ConfigError(f"the fitted state is for seq_len, label_len, pred_len, time_encoding = {mine}, the "
                              f"data module for {(seq_len, label_len, pred_len, time_encoding)}. Fix: build the "
                              "data module with the fitted state's windows.")

    # ------------------------------------------------------------------ sizes

    @property
    def c_in(self) -> int:
        return len(self.input_columns)

    @property
    def c_out(self) -> int:
        return len(self.output_columns)

    @property
    def n_time_features(self) -> int:
        """F, the columns of ``x_mark``/``y_mark``."""
        return n_time_features(parse_offset(self.freq), self.time_encoding)

    @property
    def time_feature_sizes(self) -> list[int] | None:
        """Embedding-table size per integer calendar field (fixed/learned); ``None`` for timeF."""
        return time_feature_sizes(parse_offset(self.freq), self.time_encoding)

    @property
    def season(self) -> int | None:
        """Steps in the data's natural cycle (:func:`~forecast.data.timefeatures.seasonal_period`), ``None``
        when its frequency has none (yearly data, a step that does not divide a day)."""
        try:
            return seasonal_period(self.freq)
        except ConfigError:
            return None

    # ---------------------------------------------------------------- scaling

    @property
    def output_mean(self) -> np.ndarray:
        """float64 ``[C_out]``: the scaler's mean of each output variable."""
        return self.scaler.mean_[-self.c_out:]

    @property
    def output_scale(self) -> np.ndarray:
        """float64 ``[C_out]``: the scaler's scale of each output variable."""
        return self.scaler.scale_[-self.c_out:]

    def _output_stats(self, values: np.ndarray | torch.Tensor) -> tuple[Any, Any]:
        if values.shape[-1:] != (self.c_out,):
            raise DataError(
                f"values of shape {tuple(values.shape)}: the last dimension must be c_out={self.c_out} "
                f"(the output variables {list(self.output_columns)!r})."
            )
        if isinstance(values, torch.Tensor):
            dtype = values.dtype if values.is_floating_point() else torch.float32
            return tuple(torch.as_tensor(stat, dtype=dtype, device=values.device)
                         for stat in (self.output_mean, self.output_scale))
        return self.output_mean, self.output_scale

    def to_original(self, values: ArrayOrTensor) -> ArrayOrTensor:
        """Model-scale outputs ``[..., C_out]`` in original units (numpy or torch in, the same kind and
        floating dtype out). ``M`` uses every variable's statistics; ``S``/``MS`` the target's alone."""
        mean, scale = self._output_stats(values)
        if isinstance(values, torch.Tensor):
            return values.to(mean.dtype) * scale + mean
        array = np.asarray(values)
        restored = array * scale + mean
        return restored.astype(array.dtype) if np.issubdtype(array.dtype, np.floating) else restored

    def to_scaled(self, values: ArrayOrTensor) -> ArrayOrTensor:
        """Original-unit values ``[..., C_out]`` on the model's scale (the inverse of :meth:`to_original`)."""
        mean, scale = self._output_stats(values)
        if isinstance(values, torch.Tensor):
            return (values.to(mean.dtype) - mean) / scale
        array = np.asarray(values)
        scaled = (array - mean) / scale
        return scaled.astype(array.dtype) if np.issubdtype(array.dtype, np.floating) else scaled

    def scale(self, series: TimeSeries, first_row: int = 0) -> np.ndarray:
        """A series' rows ``[T, C]`` standardized (float32) after checking its variables are the fitted ones."""
        if tuple(series.input_columns) != self.input_columns:
            raise UnknownColumnError(
                f"{series.source}: variables {list(series.input_columns)!r} differ from those the model was "
                f"fitted on {list(self.input_columns)!r}. Fix: pass data with the same columns."
            )
        return standardize(self.scaler, series.values, series.input_columns, series.source, first_row)

    # ----------------------------------------------------------------- future

    def read(self, data: Table) -> TimeSeries:
        """New rows of the fitted series, read with the fit's options."""
        return prepare_series(data, **self.prepare_options)

    def future_batch(self, data: Table | TimeSeries) -> FutureBatch:
        """The model input for the ``pred_len`` steps after the last row of ``data``, scaled with the
        fitted scaler (never refitted); the future timestamps continue the series' frequency."""
        series = data if isinstance(data, TimeSeries) else self.read(data)
        seq_len, label_len, pred_len = self.seq_len, self.label_len, self.pred_len
        if series.n_rows < seq_len:
            raise SeriesTooShortError(
                f"{series.source}: has {series.n_rows} rows; forecasting the future needs the last "
                f"seq_len={seq_len} rows. Fix: pass a longer frame."
            )
        rows = slice(series.n_rows - seq_len, series.n_rows)
        last = dataclasses.replace(series, dates=series.dates[rows], values=series.values[rows])  # [L] rows
        offset = series.freq
        x_dates = last.dates  # [L]
        future_index = pd.date_range(start=x_dates[-1] + offset, periods=pred_len, freq=offset,
                                     name=series.date_column)  # [P]
        y_dates = x_dates[seq_len - label_len:].append(future_index)  # [label_len+P]
        x = self.scale(last, first_row=series.n_rows - seq_len)  # [L, C]
        y = np.full((label_len + pred_len, x.shape[1]), np.nan, dtype=np.float32)  # [label_len+P, C]
        y[:label_len] = x[seq_len - label_len:]
        batch = {
            "x": torch.from_numpy(x).unsqueeze(0),  # [1, L, C]
            "y": torch.from_numpy(y).unsqueeze(0),  # [1, label_len+P, C]
            "x_mark": torch.from_numpy(time_features(x_dates, offset, self.time_encoding)).unsqueeze(0),  # [1, L, F]
            "y_mark": torch.from_numpy(time_features(y_dates, offset, self.time_encoding)).unsqueeze(0),
        }
        return FutureBatch(batch, future_index)

    # ------------------------------------------------------------ persistence

    def state_dict(self) -> dict[str, Any]:
        """The state as JSON types: ``{"fitted": {...}, "scaler": {...}}`` (a saved run's config.json
        ``fitted`` block and its scaler.json)."""
        return {
            "fitted": {
                "dataset": self.dataset,
                "input_columns": list(self.input_columns),
                "output_columns": list(self.output_columns),
                "freq": self.freq,
                "prepare_options": dict(self.prepare_options),
                "spec": {"seq_len": self.seq_len, "label_len": self.label_len, "pred_len": self.pred_len,
                         "c_in": self.c_in, "c_out": self.c_out, "n_time_features": self.n_time_features,
                         "time_encoding": self.time_encoding, "time_feature_sizes": self.time_feature_sizes},
                "persistence": list(self.persistence) if self.persistence is not None else None,
            },
            "scaler": {"columns": list(self.input_columns), **_scaler_state(self.scaler)},
        }

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> FittedState:
        """The state :meth:`state_dict` wrote (ConfigError when it is incomplete)."""
        try:
            fitted, spec = state["fitted"], state["fitted"]["spec"]
            return cls(tuple(fitted["input_columns"]), tuple(fitted["output_columns"]), fitted["freq"],
                       fitted["dataset"], dict(fitted["prepare_options"]), int(spec["seq_len"]),
                       int(spec["label_len"]), int(spec["pred_len"]), spec.get("time_encoding", "timeF"),
                       _scaler_from_state(state["scaler"]),
                       tuple(fitted["persistence"]) if fitted.get("persistence") is not None else None)
        except (KeyError, TypeError) as error:
            raise ConfigError(f"an incomplete fitted data state (missing {error}); it was not written by "
                              "FittedState.state_dict(). Fix: fit again.") from error
