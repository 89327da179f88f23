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
from collections.abc import Hashable, Mapping
from typing import Any, NamedTuple, TypeVar

import numpy as np
import pandas as pd
import torch
from sklearn.preprocessing import StandardScaler

from forecast.data.io import Table, TimeSeries, parse_offset, prepare_series, require_fitted_columns
from forecast.data.panel import Panel, forecast_index, future_covariate_rows, prepare_panel
from forecast.data.panel_state import PanelFit
from forecast.data.scaling import fit_scaler, persistence, standardize
from forecast.data.timefeatures import n_time_features, seasonal_period, time_feature_sizes, time_features
from forecast.errors import ConfigError, DataError, SeriesTooShortError, UnknownColumnError

__all__ = ["FittedState", "FutureBatch", "fit_scaler", "standardize"]

# How a fit read its timestamps, kept in ``prepare_options`` so that new rows are read alike. A state saved
# before one was kept lacks its key, and new rows are read as they come, as they were then.
RECORDED_READING = ("date_format", "time_zone")


def as_recorded(options: Mapping[str, Any], recorded: Mapping[str, Any]) -> dict[str, Any]:
    """A fit's ``prepare_options`` as a state that ``recorded`` them would hold them: without the
    :data:`RECORDED_READING` keys it lacks (saved before they were kept, its data was read alike)."""
    return {key: value for key, value in options.items() if key in recorded or key not in RECORDED_READING}

ArrayOrTensor = TypeVar("ArrayOrTensor", np.ndarray, torch.Tensor)


class FutureBatch(NamedTuple):
    """Model input for forecasting past the end of a series (of each series of a panel).

    ``batch``: the item keys with a batch dimension of 1 (N for a panel's N series): ``x [N, L, C]``,
    ``x_mark [N, L, F]``, ``y_mark [N, label_len+P, F]``, ``y [N, label_len+P, C]`` whose last P rows
    are unknown (NaN), and the covariate tensors. ``index``: the P future timestamps, continuing the
    series' frequency; for a panel an (id, date) MultiIndex of the N*P forecast steps, series by series.
    """

    batch: dict[str, torch.Tensor]
    index: pd.Index


class PanelRows(NamedTuple):
    """One series of a panel scaled as its fit: fit ``position``, ``inputs [T, C_in]`` and ``known [T, K]``
    (float32), ``static`` codes ``[S]`` (int64)."""

    position: int
    inputs: np.ndarray
    known: np.ndarray
    static: np.ndarray


def _scaler_state(scaler: StandardScaler) -> dict[str, Any]:
    return {"mean": scaler.mean_.tolist(), "scale": scaler.scale_.tolist(), "var": scaler.var_.tolist(),
            "n_samples_seen": int(np.max(scaler.n_samples_seen_))}


def _scaler_from_state(state: Mapping[str, Any]) -> StandardScaler:
    scaler = StandardScaler()
    try:
        scaler.mean_, scaler.scale_, scaler.var_ = (np.asarray(state[name], dtype=np.float64)
                                                    for name in ("mean", "scale", "var"))
    except (TypeError, ValueError) as error:
        raise ConfigError(f"the fitted scaler's mean, scale and var must be lists of numbers ({error}); it was "
                          "edited. Fix: restore it as the fit saved it, or fit again.") from None
    if not (np.isfinite(scaler.mean_).all() and np.isfinite(scaler.scale_).all() and (scaler.scale_ > 0).all()):
        # A fit never writes these: the file was edited, and every window would be scaled wrongly.
        raise ConfigError(f"the fitted scaler has a mean or scale that is not a finite number (scale > 0): mean "
                          f"{scaler.mean_.tolist()!r}, scale {scaler.scale_.tolist()!r}; it was edited. Fix: restore "
                          "it as the fit saved it, or fit again.")
    scaler.n_features_in_ = len(scaler.mean_)
    scaler.n_samples_seen_ = np.int64(state["n_samples_seen"])
    return scaler


@dataclasses.dataclass(frozen=True)
class FittedState:
    """The variables, frequency, reading options, window lengths and train-row scaler of a fit.

    ``input_columns``/``output_columns`` are in model order (target last); ``freq`` is the
    pandas offset alias in use; ``prepare_options`` are the
    :func:`~forecast.data.io.prepare_series` options that read the fitted table (target, date
    column, frequency and a registered dataset's quirks), so new rows of the series are read
    the same way; ``dataset`` names the data (registered name, file stem or ``<DataFrame>``).

    A wide table has one ``scaler`` over its training rows. A panel (``panel``, a
    :class:`~forecast.data.panel_state.PanelFit`) has no single scaler: each series is scaled by its
    own training rows, so un-scaling takes the series of each window (``series=``), and
    ``prepare_options`` are :func:`~forecast.data.panel.prepare_panel`'s.
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
    scaler: StandardScaler | None
    # Per input variable, :func:`persistence` over the training rows (None: a state saved before it existed).
    persistence: tuple[float, ...] | None = None
    panel: PanelFit | None = None

    def __post_init__(self) -> None:
        if (self.scaler is None) == (self.panel is None):
            raise ConfigError("a fitted state has either a scaler (a wide table) or a panel fit (many series), "
                              "exactly one of them")
        n_scaled = self.scaler.n_features_in_ if self.scaler is not None else self.panel.mean.shape[1]
        if len(self.input_columns) != n_scaled:
            raise ConfigError(f"the scaling has {n_scaled} variables, the fitted state "
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

    @classmethod
    def fit_panel(cls, panel: Panel, train_rows: Mapping[Hashable, tuple[int, int]], dataset: str,
                  prepare_options: dict[str, Any], seq_len: int, label_len: int, pred_len: int,
                  time_encoding: str) -> FittedState:
        """The state of a panel fit: each series' scaling, and persistence, from its train rows only."""
        inputs = (*panel.past_covariates, panel.target)
        blocks = [series.inputs[slice(*train_rows[series.id])] for series in panel.series]  # [T_train_i, C] each
        return cls(inputs, (panel.target,), panel.freq.freqstr, dataset, prepare_options, seq_len, label_len,
                   pred_len, time_encoding, None, persistence(blocks, seq_len, pred_len),
                   PanelFit.fit(panel, train_rows))

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
    def n_known(self) -> int:
        """K, the known (future) covariates of a panel; 0 for a wide table."""
        return len(self.panel.known_columns) if self.panel is not None else 0

    @property
    def n_series(self) -> int:
        """The series a panel was fitted on (the id embedding's rows); 0 for a wide table, which has none."""
        return len(self.panel.ids) if self.panel is not None else 0

    @property
    def static_sizes(self) -> tuple[int, ...]:
        """Codes per static covariate of a panel (its embedding's rows); empty for a wide table."""
        return self.panel.static_sizes if self.panel is not None else ()

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
        """float64 ``[C_out]`` (a wide table) or ``[N_series, C_out]`` (a panel): the output variables' means."""
        return self.scaler.mean_[-self.c_out:] if self.panel is None else self.panel.mean[:, -self.c_out:]

    @property
    def output_scale(self) -> np.ndarray:
        """float64 ``[C_out]`` or ``[N_series, C_out]``: the output variables' scales (as :attr:`output_mean`)."""
        return self.scaler.scale_[-self.c_out:] if self.panel is None else self.panel.scale[:, -self.c_out:]

    def _output_stats(self, values: np.ndarray | torch.Tensor, series: int | np.ndarray | torch.Tensor | None,
                      dtype: torch.dtype | None = None) -> tuple[Any, Any]:
        """The output statistics broadcastable to ``values [..., C_out]``: ``[C_out]`` for a wide table or one
        series of a panel, ``[B, 1, C_out]`` for the series ``[B]`` of a batch ``[..., B, P, C_out]``; tensors of
        ``dtype`` (default: the values' floating dtype) on their device for tensor values."""
        if values.shape[-1:] != (self.c_out,):
            raise DataError(
                f"values of shape {tuple(values.shape)}: the last dimension must be c_out={self.c_out} "
                f"(the output variables {list(self.output_columns)!r})."
            )
        mean, scale = self.output_mean, self.output_scale
        if self.panel is not None:
            if series is None:
                raise ConfigError("a panel's series are scaled one by one: pass series= (each window's series "
                                  "position, the batch's 'series') to un-scale them")
            index = series.cpu().numpy() if isinstance(series, torch.Tensor) else np.asarray(series)
            mean, scale = mean[index], scale[index]  # [C_out] or [B, C_out]
            if index.ndim == 1:
                mean, scale = mean[:, None, :], scale[:, None, :]  # [B, 1, C_out]
        if isinstance(values, torch.Tensor):
            dtype = dtype or (values.dtype if values.is_floating_point() else torch.float32)
            return tuple(torch.as_tensor(stat, dtype=dtype, device=values.device) for stat in (mean, scale))
        return mean, scale

    def to_original(self, values: ArrayOrTensor, series: int | np.ndarray | torch.Tensor | None = None
                    ) -> ArrayOrTensor:
        """Model-scale outputs ``[..., C_out]`` in original units, float64 (numpy or torch in, the same kind
        out): a series at a level far from zero and varying little (a meter reading near 2e7) keeps its digits,
        which float32 would round away. ``M`` uses every variable's statistics; ``S``/``MS`` the target's alone.
        A panel's values need their ``series``: one position, or ``[B]`` for values ``[..., B, P, C_out]``."""
        if isinstance(values, torch.Tensor):
            mean, scale = self._output_stats(values, series, torch.float64)
            return values.to(torch.float64) * scale + mean
        mean, scale = self._output_stats(values, series)
        return np.asarray(values, dtype=np.float64) * scale + mean

    def to_scaled(self, values: ArrayOrTensor, series: int | np.ndarray | torch.Tensor | None = None
                  ) -> ArrayOrTensor:
        """Original-unit values ``[..., C_out]`` on the model's scale (the inverse of :meth:`to_original`)."""
        mean, scale = self._output_stats(values, series)
        if isinstance(values, torch.Tensor):
            return (values.to(mean.dtype) - mean) / scale
        array = np.asarray(values)
        scaled = (array - mean) / scale
        return scaled.astype(array.dtype) if np.issubdtype(array.dtype, np.floating) else scaled

    def scale(self, series: TimeSeries, first_row: int = 0) -> np.ndarray:
        """A series' rows ``[T, C]`` standardized (float32) after checking its variables are the fitted ones."""
        if self.panel is not None:
            raise ConfigError(f"{series.source}: the model was fitted on a panel; pass long-format data with its "
                              f"id column {self.panel.id_column!r}")
        if tuple(series.input_columns) != self.input_columns:
            raise UnknownColumnError(
                f"{series.source}: variables {list(series.input_columns)!r} differ from those the model was "
                f"fitted on {list(self.input_columns)!r}. Fix: pass data with the same columns."
            )
        return standardize(self.scaler, series.values, series.input_columns, series.source, first_row)

    # ----------------------------------------------------------------- future

    def read(self, data: Table) -> TimeSeries | Panel:
        """New rows of the fitted series (a panel: of some of its series), read with the fit's options; a wide
        table's fitted variables found by name (:meth:`select`)."""
        if self.panel is not None:
            return prepare_panel(data, **self.prepare_options, fitted=True)
        return self.select(prepare_series(data, **self.prepare_options, fitted_columns=self.input_columns))

    def select(self, series: TimeSeries) -> TimeSeries:
        """``series`` with the fitted variables, found by name and put in the fitted order; its other columns
        left out. UnknownColumnError names the fitted variables it lacks."""
        if tuple(series.input_columns) == self.input_columns:
            return series
        require_fitted_columns(series.input_columns, self.input_columns, series.source)
        positions = [list(series.input_columns).index(column) for column in self.input_columns]
        filled = series.filled[:, positions] if series.filled is not None else None
        return dataclasses.replace(series, values=series.values[:, positions], input_columns=self.input_columns,
                                   output_columns=self.output_columns, filled=filled)  # [T, C] in the fitted order

    def scale_panel(self, panel: Panel) -> list[PanelRows]:
        """Each series of ``panel`` scaled as the fit scaled it: its fit position, inputs ``[T, C_in]``,
        known covariates ``[T, K]`` (float32) and static codes ``[S]``; DataError for a series the fit
        never saw."""
        if self.panel is None:
            raise ConfigError(f"{panel.source}: the model was fitted on a wide table; pass one (no id column)")
        rows, columns = [], (*panel.past_covariates, panel.target)  # the order of PanelSeries.inputs
        positions = self.panel.positions([series.id for series in panel.series], panel.source)
        static_codes = self.panel.static_codes(panel.series, panel.source)  # [N, S]
        for position, series, codes in zip(positions, panel.series, static_codes):
            source = f"{panel.source}, series {series.id!r}"
            rows.append(PanelRows(position, self.panel.scale_inputs(position, series, columns, panel.source),
                                  self.panel.scale_known(series.future, source), codes))
        return rows

    def future_batch(self, data: Table | TimeSeries | Panel, future: Table | None = None) -> FutureBatch:
        """The model input for the ``pred_len`` steps after the last row of ``data``, scaled with the
        fitted scaler (never refitted); the future timestamps continue the series' frequency.

        A panel's batch holds one window per series, and ``future`` gives the known covariates of
        their forecast steps (:func:`~forecast.data.panel.future_covariate_rows`).
        """
        series = data if isinstance(data, (TimeSeries, Panel)) else self.read(data)
        if future is not None and self.n_known == 0:
            wide = " (it was fitted on a wide table, which has none)" if self.panel is None else ""
            raise ConfigError(f"{series.source}: future covariates were given, but the model was fitted with "
                              f"none{wide}. Fix: leave future_covariates out, or fit a long table of many series "
                              "with id_column=... and future_covariates=[...].")
        if isinstance(series, Panel):
            return _panel_future_batch(self, series, future)
        seq_len, label_len, pred_len = self.seq_len, self.label_len, self.pred_len
        if series.n_rows < seq_len:
            raise SeriesTooShortError(
                f"{series.source}: has {series.n_rows} rows; forecasting the future needs the last "
                f"seq_len={seq_len} rows. Fix: pass a longer frame."
            )
        rows = slice(series.n_rows - seq_len, series.n_rows)
        last = dataclasses.replace(series, dates=series.dates[rows], values=series.values[rows],
                                   filled=series.filled[rows] if series.filled is not None else None)  # [L] rows
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
            "x_known": torch.zeros(1, seq_len, 0),  # [1, L, 0]: a wide table has no known covariates
            "y_known": torch.zeros(1, label_len + pred_len, 0),  # [1, label_len+P, 0]
            "series": torch.zeros(1, dtype=torch.int64),  # [1]
            "static": torch.zeros(1, 0, dtype=torch.int64),  # [1, 0]
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
            **({"scaler": {"columns": list(self.input_columns), **_scaler_state(self.scaler)}}
               if self.scaler is not None else {"panel": self.panel.state_dict()}),
        }

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> FittedState:
        """The state :meth:`state_dict` wrote (ConfigError when it is incomplete)."""
        try:
            _check_scaled_columns(state)
            fitted, spec = state["fitted"], state["fitted"]["spec"]
            return cls(tuple(fitted["input_columns"]), tuple(fitted["output_columns"]), fitted["freq"],
                       fitted["dataset"], dict(fitted["prepare_options"]), int(spec["seq_len"]),
                       int(spec["label_len"]), int(spec["pred_len"]), spec.get("time_encoding", "timeF"),
                       _scaler_from_state(state["scaler"]) if "panel" not in state else None,
                       tuple(fitted["persistence"]) if fitted.get("persistence") is not None else None,
                       PanelFit.from_state_dict(state["panel"]) if "panel" in state else None)
        except (KeyError, TypeError, AttributeError) as error:
            raise ConfigError(f"an incomplete fitted data state (missing {error}); it was not written by "
                              "FittedState.state_dict(). Fix: fit again.") from error


def _check_scaled_columns(state: Mapping[str, Any]) -> None:
    """ConfigError where the scaler names other columns than the fitted inputs (a saved file edited)."""
    scaled = state.get("scaler", {}).get("columns")
    inputs = state["fitted"].get("input_columns")
    if scaled is not None and scaled != inputs:
        raise ConfigError(f"the fitted inputs {inputs!r} are not the scaled columns {scaled!r}; one of the two was "
                          "edited. Fix: restore it as the fit saved it, or fit again.")


def _panel_future_batch(state: FittedState, panel: Panel, future: Table | None) -> FutureBatch:
    """One window per series of ``panel``: its last ``seq_len`` rows and the ``pred_len`` steps after its end."""
    seq_len, label_len, pred_len = state.seq_len, state.label_len, state.pred_len
    short = [series.id for series in panel.series if series.n_rows < seq_len]
    if short:
        raise SeriesTooShortError(f"{panel.source}: {len(short)} series have fewer than seq_len={seq_len} rows, "
                                  f"which forecasting the future needs: {short[:10]!r}. Fix: pass longer "
                                  "series, or leave those out.")
    index = forecast_index(panel, pred_len)  # [N * P] (id, date)
    future_known = future_covariate_rows(panel, future, index)  # [N, P, K]
    future_dates = index.get_level_values(1)  # [N * P]
    items = []
    for position, (series, rows) in enumerate(zip(panel.series, state.scale_panel(panel))):
        steps = future_dates[position * pred_len:(position + 1) * pred_len]  # [P]
        x_dates = series.dates[-seq_len:]  # [L]
        y_dates = series.dates[series.n_rows - label_len:].append(steps)  # [label_len+P]
        future_scaled = state.panel.scale_known(future_known[position],
                                                f"future covariates of {panel.source}, series {series.id!r}")
        known = np.concatenate([rows.known, future_scaled])  # [T + P, K]
        y = np.full((label_len + pred_len, rows.inputs.shape[1]), np.nan, dtype=np.float32)
        y[:label_len] = rows.inputs[len(rows.inputs) - label_len:]
        items.append({
            "x": rows.inputs[-seq_len:],  # [L, C]
            "y": y,  # [label_len+P, C], the last P unknown
            "x_mark": time_features(x_dates, panel.freq, state.time_encoding),  # [L, F]
            "y_mark": time_features(y_dates, panel.freq, state.time_encoding),  # [label_len+P, F]
            "x_known": known[-seq_len - pred_len:-pred_len],  # [L, K]
            "y_known": known[len(known) - label_len - pred_len:],  # [label_len+P, K]
            "series": np.int64(rows.position),
            "static": rows.static,  # [S]
        })
    batch = {key: torch.as_tensor(np.stack([item[key] for item in items])) for key in items[0]}  # [N, ...]
    return FutureBatch(batch, index)
