"""``WindowDataModule``: a table in, scaled forecasting windows out, through Lightning.

The only data module that imports Lightning. It validates the table
(:func:`forecast.data.io.prepare_series`), draws the split borders
(:mod:`forecast.data.splits`), fits a scikit-learn ``StandardScaler`` on the train rows
only, computes time features once for the whole series and serves
:class:`~forecast.data.dataset.WindowDataset` views of the result.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view
from torch.utils.data import DataLoader

from forecast import datasets as registry
from forecast.data.config import DataConfig
from forecast.data.dataset import WindowDataset
from forecast.data.fitted import RECORDED_READING, FittedState, FutureBatch, as_recorded
from forecast.data.io import DATAFRAME_SOURCE, Table, TimeSeries, prepare_series, zone_name
from forecast.data.panel import Panel, panel_borders, panel_windows, prepare_panel
from forecast.data.panel_state import comparable, static_changes
from forecast.data.sampling import trainer_processes, window_loader
from forecast.data.splits import SPLIT_NAMES, SplitLike, resolve_split, split_borders, window_count
from forecast.data.timefeatures import n_time_features, time_feature_sizes, time_features
from forecast.errors import ChecksumError, ConfigError, DataError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Source:
    data: pd.DataFrame | pd.Series | Path
    name: str
    info: registry.DatasetInfo | None

    @property
    def label(self) -> str:
        """Registered name, file stem, or ``'<DataFrame>'``."""
        return self.info.name if self.info is not None else self.name

    @property
    def default_split(self) -> str:
        """The split a wide table from here gets when none is given: a registered dataset's protocol, else 70/10/20
        by rows."""
        return self.info.split if self.info is not None else "ratio"


@dataclass(frozen=True)
class _Prepared:
    source: _Source
    series: TimeSeries | Panel
    split_protocol: str
    borders: dict[str, tuple[int, int]] | dict[Hashable, dict[str, tuple[int, int]]]
    fitted: FittedState
    datasets: dict[str, WindowDataset]
    split_dates: dict[str, np.ndarray]  # [T_split] datetime64 of each split's rows, wall-clock time
    split_instants: dict[str, np.ndarray]  # [T_split] the same rows in UTC: the same arrays without a time zone


def _datetimes(dates: pd.DatetimeIndex, utc: bool) -> np.ndarray:
    """datetime64 ``[T]`` of an index; a time-zone-aware one on its wall clock, which repeats an hour where it
    goes back, or with ``utc`` as UTC instants."""
    if dates.tz is None:
        return dates.to_numpy()
    return (dates.tz_convert("UTC") if utc else dates).tz_localize(None).to_numpy()


def _split_datetimes(pieces: dict[str, list[pd.DatetimeIndex]]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``(split_dates, split_instants)`` of each split's rows, given as pieces (a panel's series) put back to back:
    computed once, as the timestamps of a few windows are asked for at every predict batch."""
    dates = {name: np.concatenate([_datetimes(piece, utc=False) for piece in split]) for name, split in pieces.items()}
    if all(piece.tz is None for split in pieces.values() for piece in split):
        return dates, dates
    return dates, {name: np.concatenate([_datetimes(piece, utc=True) for piece in split])
                   for name, split in pieces.items()}


def _observed(values: np.ndarray, filled: np.ndarray | None) -> np.ndarray:
    """The values a forecast is scored against (original units): NaN where ``fill_nan`` filled them, as no
    forecast should be scored against a value made up for the gap (a forward fill is what ``naive`` forecasts)."""
    return values if filled is None else np.where(filled, np.nan, values)


def _panel_splits(panel: Panel, borders: dict[Hashable, dict[str, tuple[int, int]]], fitted: FittedState,
                  cfg: DataConfig) -> dict[str, WindowDataset]:
    """Each split's windows over a panel: every series' split rows back to back, each window inside its series."""
    rows = fitted.scale_panel(panel)
    static = np.zeros((max(fitted.n_series, 1), len(fitted.static_sizes)), dtype=np.int64)  # [N_series, S]
    for scaled in rows:
        static[scaled.position] = scaled.static
    marks = [time_features(series.dates, panel.freq, cfg.time_encoding) for series in panel.series]  # [T_i, F] each
    datasets = {}
    for name in SPLIT_NAMES:
        spans = [borders[series.id][name] for series in panel.series]
        lengths = np.array([end - start for start, end in spans])
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])  # first concatenated row of each series' span
        windows = panel_windows(panel, borders, name, cfg.seq_len, cfg.pred_len)  # [N, 2] (series, first row)
        first = np.array([start for start, _ in spans])
        pick = [slice(start, end) for start, end in spans]
        datasets[name] = WindowDataset(
            np.concatenate([scaled.inputs[span] for scaled, span in zip(rows, pick)]),  # [T_split, C]
            np.concatenate([mark[span] for mark, span in zip(marks, pick)]),  # [T_split, F]
            cfg.seq_len, cfg.label_len, cfg.pred_len,
            known=np.concatenate([scaled.known[span] for scaled, span in zip(rows, pick)]),  # [T_split, K]
            starts=offsets[windows[:, 0]] + windows[:, 1] - first[windows[:, 0]],  # [N]
            series=np.array([scaled.position for scaled in rows], dtype=np.int64)[windows[:, 0]],  # [N]
            static=static,
            truth=np.concatenate([_observed(series.target, series.filled_target)[span]
                                  for series, span in zip(panel.series, pick)])[:, None],  # [T_split, 1]
        )
    return datasets


def require_table(data: object) -> None:
    """ConfigError unless ``data`` is a kind of table the package reads: a DataFrame, a Series, a path or a name."""
    if not isinstance(data, (pd.DataFrame, pd.Series, str, os.PathLike)):
        raise ConfigError(
            f"data of type {type(data).__name__}; Fix: pass a DataFrame, a Series indexed by timestamps, a "
            f"CSV path or a registered dataset name {registry.names()}."
        )


def _registered_frame_info(frame: pd.DataFrame) -> registry.DatasetInfo | None:
    """The registry entry a frame from ``datasets.load`` names, if the frame is still whole."""
    name = frame.attrs.get(registry.DATASET_ATTR)
    info = registry.find(name) if isinstance(name, str) else None
    if info is not None and info.n_rows is not None and info.n_rows != len(frame):
        logger.warning(
            "DataFrame is marked as dataset %s but has %d rows, not %d: treated as a plain table (split 70/10/20).",
            info.name, len(frame), info.n_rows,
        )
        return None
    return info


def _registered_file_info(path: Path) -> registry.DatasetInfo | None:
    """The registry entry of a CSV file that is byte for byte a registered file."""
    info = registry.find_by_file(path)
    if info is None or not path.is_file():
        return None
    try:
        registry.verify_file(path, info)
    except ChecksumError:
        # A warning: the file gets the plain 70/10/20 split instead of the benchmark's protocol.
        logger.warning("%s is named like dataset %s but its bytes differ: treated as a plain CSV (split 70/10/20, "
                       "not %s). Pass split=%r to use the benchmark's borders.", path, info.name, info.split, info.split)
        return None
    return info


def default_split(data: Table, *, panel: bool = False) -> str:
    """The split a fit given none uses for ``data``: a registered dataset's protocol (by its name, or a file or
    frame that is byte for byte one), else 70/10/20 by rows, ``"ratio"``, as a panel's always is."""
    return "ratio" if panel else _resolve_source(data).default_split


def _resolve_source(data: Table) -> _Source:
    """Where the data comes from and the registry entry whose protocol applies, if any."""
    if isinstance(data, pd.Series):
        return _Source(data, "<Series>", None)
    if isinstance(data, pd.DataFrame):
        return _Source(data, DATAFRAME_SOURCE, _registered_frame_info(data))
    if isinstance(data, str) and registry.find(data) is not None:
        info = registry.get(data)
        return _Source(registry.locate(info), info.name, info)
    path = Path(data)
    if not path.exists() and isinstance(data, str) and not data.lower().endswith(".csv"):
        raise ConfigError(
            f"data={data!r} is neither a registered dataset {registry.names()} nor an "
            "existing file. Fix: pass one of those names, a CSV path or a DataFrame."
        )
    return _Source(path, path.stem, _registered_file_info(path))


def _read_options(cfg: DataConfig, info: registry.DatasetInfo | None) -> dict[str, Any]:
    """The :func:`~forecast.data.io.prepare_series` options: the config's, with a registered
    dataset's target, frequency and accepted quirks where the config leaves them open."""
    return {
        "date_column": cfg.date_column,
        "features": cfg.features,
        "target": cfg.target if cfg.target is not None or info is None else info.target,
        "columns": cfg.columns,
        "freq": cfg.freq if cfg.freq is not None or info is None else info.freq,
        "allow_irregular": cfg.allow_irregular or (info is not None and info.has_gaps),
        "allow_duplicates": cfg.allow_duplicates or (info is not None and info.has_duplicate_timestamps),
        "fill_nan": cfg.fill_nan,
    }


def _recorded_reading(given: FittedState | None) -> dict[str, Any]:
    """How ``given``'s fit read its timestamps (:data:`~forecast.data.fitted.RECORDED_READING`), to read other
    data alike; nothing without a fit, or for a state saved before it was kept."""
    options = given.prepare_options if given is not None else {}
    return {key: options[key] for key in RECORDED_READING if key in options}


def _reading_freq(freq: str | None, given: FittedState | None) -> str | None:
    """The frequency to read rows at: a fit's own, so that rows at another one are refused as
    :meth:`FittedState.read` refuses them for a forecast, not windowed with another calendar; else ``freq``."""
    return given.freq if given is not None else freq


def _prepare_table(source: _Source, cfg: DataConfig, given: FittedState | None) -> _Prepared:
    """A wide table validated, split, scaled (by ``given``, else by a fit on its train rows) and windowed."""
    info = source.info
    options = _read_options(cfg, info)
    options["freq"] = _reading_freq(options["freq"], given)
    # Other data scored by a fitted model: its variables alone (other columns go unread), by name, in the fitted
    # order, and its dates in the fit's date column (a second column of dates is another column, as for predict).
    if given is not None and options["date_column"] is None:
        options["date_column"] = given.prepare_options.get("date_column")
    series = prepare_series(source.data, **options, **_recorded_reading(given),
                            fitted_columns=given.input_columns if given is not None else None)
    if given is not None:
        series = given.select(series)
    split_spec = cfg.split if cfg.split is not None else source.default_split
    split_protocol, _ = resolve_split(split_spec)
    # The split as asked for, not as resolved: its messages name the protocol ('ett_hour'), not its kind ('rows').
    borders = split_borders(series.n_rows, cfg.seq_len, cfg.pred_len, split_spec, source=series.source,
                            dates=series.dates)
    options = {**options, "freq": series.freq.freqstr, "target": series.target, "date_column": series.date_column,
               "columns": list(cfg.columns) if cfg.columns is not None else None, "date_format": series.date_format,
               "time_zone": zone_name(series.dates)}
    windows = (cfg.seq_len, cfg.label_len, cfg.pred_len, cfg.time_encoding)
    fitted = given or FittedState.fit(series, borders["train"], source.label, options, *windows)
    scaled = fitted.scale(series)  # [T, C]
    marks = time_features(series.dates, series.freq, cfg.time_encoding)  # [T, F]
    outputs = slice(series.values.shape[1] - fitted.c_out, None)
    truth = _observed(series.values[:, outputs], series.filled[:, outputs] if series.filled is not None else None)
    datasets = {name: WindowDataset(scaled[start:end], marks[start:end], cfg.seq_len, cfg.label_len, cfg.pred_len,
                                    truth=truth[start:end])
                for name, (start, end) in borders.items()}
    logger.info("%s: %d rows, freq %s, windows %s.", source.name, series.n_rows, series.freq.freqstr,
                {name: len(ds) for name, ds in datasets.items()})
    dates, instants = _split_datetimes({name: [series.dates[start:end]] for name, (start, end) in borders.items()})
    return _Prepared(source=source, series=series, split_protocol=split_protocol, borders=borders, fitted=fitted,
                     datasets=datasets, split_dates=dates, split_instants=instants)


def _prepare_panel(source: _Source, cfg: DataConfig, given: FittedState | None) -> _Prepared:
    """A long-format panel validated, split and scaled per series (by ``given``, else by a fit on each
    series' train rows) and windowed inside each series."""
    options = {"id_column": cfg.id_column, "target": cfg.target, "date_column": cfg.date_column,
               "past_covariates": list(cfg.past_covariates), "future_covariates": list(cfg.future_covariates),
               "static_covariates": list(cfg.static_covariates), "freq": _reading_freq(cfg.freq, given),
               "fill_nan": cfg.fill_nan}
    panel = prepare_panel(source.data, **options, **_recorded_reading(given), fitted=given is not None)
    split_spec = cfg.split if cfg.split is not None else "ratio"
    split_protocol, _ = resolve_split(split_spec)
    borders = panel_borders(panel, cfg.seq_len, cfg.pred_len, split_spec)
    options = {**options, "freq": panel.freq.freqstr, "date_column": panel.date_column,
               "date_format": panel.date_format, "time_zone": panel.time_zone}
    windows = (cfg.seq_len, cfg.label_len, cfg.pred_len, cfg.time_encoding)
    fitted = given or FittedState.fit_panel(panel, {series_id: spans["train"] for series_id, spans in borders.items()},
                                            source.label, options, *windows)
    datasets = _panel_splits(panel, borders, fitted, cfg)
    logger.info("%s: %d series, %d rows, freq %s, windows %s.", source.name, len(panel.series),
                sum(series.n_rows for series in panel.series), panel.freq.freqstr,
                {name: len(ds) for name, ds in datasets.items()})
    # each series' split rows back to back, as _panel_splits windows them
    dates, instants = _split_datetimes({name: [one.dates[slice(*borders[one.id][name])] for one in panel.series]
                                        for name in SPLIT_NAMES})
    return _Prepared(source=source, series=panel, split_protocol=split_protocol, borders=borders, fitted=fitted,
                     datasets=datasets, split_dates=dates, split_instants=instants)


def _window_dates(prepared: _Prepared, split: str, first: int, length: int, utc: bool = False, windows: Any = None
                  ) -> np.ndarray:
    """``[N, length]``: the timestamps of ``length`` rows from the ``first`` of each window of ``split`` (of those
    ``windows`` picks, a numpy index, when given), on the wall clock (in UTC when ``utc``)."""
    starts = prepared.datasets[split].starts.numpy()  # [N]
    if windows is not None:
        starts = np.atleast_1d(starts[windows])  # [N']
    rows = (prepared.split_instants if utc else prepared.split_dates)[split]  # [T_split]
    return sliding_window_view(rows[first:], length)[starts]  # [N, length]


def _val_prefix_windows(prepared: _Prepared, cfg: DataConfig) -> WindowDataset | None:
    """The windows of the longest prefix of the horizon that a wide table's validation period holds twice,
    ``steps = V // 2`` of its ``V`` rows; ``None`` where its windows hold two disjoint horizons (more
    windows than ``pred_len``) or it has too few rows.

    Fewer windows than ``pred_len`` span one stretch of the validation rows, which no test can weigh
    (:func:`~forecast.models.base.correction_test`); its first ``steps`` steps fit in ``V - steps + 1 >
    steps`` windows. Each starts as a validation window does, and its ``y`` holds ``label_len + steps``
    rows, all inside the validation period: the values after it (the test period's) are not in these
    windows at all, only the calendar marks of their dates, which the forecast's ``y_mark`` needs.
    """
    if len(prepared.datasets["val"]) > cfg.pred_len:
        return None
    start, end = prepared.borders["val"]
    owned = end - start - cfg.seq_len
    steps = owned // 2
    if steps < 1:
        return None
    reach = end + cfg.pred_len - steps  # the last window's forecast ends here, inside the test rows
    series = prepared.series
    values = np.full((reach - start, prepared.fitted.c_in), np.nan, dtype=np.float32)  # [T', C]: NaN after the period
    values[: end - start] = prepared.datasets["val"].values.numpy()
    truth = np.full((reach - start, prepared.fitted.c_out), np.nan)  # [T', C_out]
    truth[: end - start] = prepared.datasets["val"].truth.numpy()
    marks = time_features(series.dates[start:reach], series.freq, cfg.time_encoding)  # [T', F]
    return WindowDataset(values, marks, cfg.seq_len, cfg.label_len, cfg.pred_len,
                         starts=np.arange(owned - steps + 1), target_len=steps, truth=truth)


def _split_name(split: str, cfg: DataConfig) -> str:
    """The split whose windows ``split`` names: ``'predict'`` is the configured ``predict_split``."""
    if split == "predict":
        return cfg.predict_split
    if split not in SPLIT_NAMES:
        raise ConfigError(f"split {split!r}; Fix: use one of {(*SPLIT_NAMES, 'predict')}.")
    return split


def _check_resumed_state(state_dict: dict[str, Any], prepared: _Prepared) -> None:
    """DataError unless a checkpoint's data state ``state_dict`` is the one ``prepared`` was scaled with."""
    saved = FittedState.from_state_dict(state_dict)
    mine = prepared.fitted.state_dict()
    mine["fitted"]["prepare_options"] = as_recorded(mine["fitted"]["prepare_options"], saved.prepare_options)
    mine = comparable(mine, state_dict)
    if saved.state_dict() != mine:
        # The codes a model learned for a series' static covariates would stand for other values: name them.
        differing = static_changes(state_dict, mine) or (
            f"variables {list(saved.input_columns)!r}, freq {saved.freq}, windows {saved.seq_len}/{saved.label_len}/"
            f"{saved.pred_len}, or other train-row scaling")
        raise DataError(
            f"{prepared.series.source}: the checkpoint was fitted on other data ({differing}). Fix: resume with the "
            "data and split the run was fitted on, or start a new run directory."
        )


class WindowDataModule(L.LightningDataModule):
    """Forecasting windows of a DataFrame, a CSV path or a registered dataset name.

    After :meth:`setup` (idempotent, any stage; properties call it on first use) it
    exposes ``train_dataset``/``val_dataset``/``test_dataset``, ``c_in``/``c_out``,
    ``n_time_features``, ``time_feature_sizes``, column names in model order (target
    last), ``freq``, ``split_sizes``, ``borders`` and window timestamps; ``fitted`` is the
    :class:`~forecast.data.fitted.FittedState` (scaler, un-scaling, persistence) of the fit.
    Items are dicts of float32 tensors ``x [L, C]``, ``y [label_len+P, C]``, ``x_mark [L, F]``,
    ``y_mark [label_len+P, F]``, where ``C = c_in`` (for ``MS`` the target is ``y[..., -1:]``;
    in general ``y[..., -c_out:]``), and the panel tensors ``x_known``, ``y_known``, ``series`` and
    ``static`` (:class:`~forecast.data.dataset.WindowDataset`; empty for a wide table). See
    :class:`~forecast.data.config.DataConfig` for the options.

    With ``id_column`` the data is a long-format panel: each series is validated, split (by
    fractions, rows or dates, per series) and scaled on its own training rows, and its windows
    never cross into another series; the loaders shuffle windows across series.

    A registered dataset (by name, by a frame from ``datasets.load``, or by a CSV path
    whose bytes are the registered file) gets its split protocol and frequency, and the
    quirks of its published file (weather: one repeated timestamp and one gap) are
    accepted.
    """

    def __init__(
        self,
        data: Table,
        seq_len: int,
        label_len: int,
        pred_len: int,
        features: str = "M",
        target: Hashable | None = None,
        freq: str | None = None,
        time_encoding: str = "timeF",
        batch_size: int = 32,
        num_workers: int = 0,
        date_column: str | None = None,
        split: SplitLike | None = None,
        allow_irregular: bool = False,
        fill_nan: str | None = None,
        *,
        columns: Sequence[Hashable] | None = None,
        allow_duplicates: bool = False,
        seed: int = 0,
        drop_last_train: bool = False,
        eval_batch_size: int | None = None,
        test_split: str = "test",
        predict_split: str = "test",
        pin_memory: bool = False,
        persistent_workers: bool | None = None,
        fitted: FittedState | None = None,
        id_column: Hashable | None = None,
        past_covariates: Sequence[Hashable] = (),
        future_covariates: Sequence[Hashable] = (),
        static_covariates: Sequence[Hashable] = (),
    ) -> None:
        super().__init__()
        require_table(data)
        self.config = DataConfig(
            seq_len=seq_len, label_len=label_len, pred_len=pred_len, features=features, target=target, freq=freq,
            time_encoding=time_encoding, batch_size=batch_size, eval_batch_size=eval_batch_size,
            num_workers=num_workers, date_column=date_column, split=split, allow_irregular=allow_irregular,
            allow_duplicates=allow_duplicates, fill_nan=fill_nan, columns=columns, seed=seed,
            drop_last_train=drop_last_train, test_split=test_split, predict_split=predict_split,
            pin_memory=pin_memory, persistent_workers=persistent_workers, id_column=id_column,
            past_covariates=past_covariates, future_covariates=future_covariates, static_covariates=static_covariates)
        if fitted is not None and not isinstance(fitted, FittedState):
            raise ConfigError(f"fitted must be a FittedState (a fitted data module's .fitted), got {type(fitted).__name__}")
        self._data = data
        self._given_fitted = fitted
        self._prepared: _Prepared | None = None

    def with_options(self, **changes: Any) -> WindowDataModule:
        """A new data module of the same data with some options changed, e.g. ``test_split='val'``."""
        options = {field.name: getattr(self.config, field.name) for field in fields(DataConfig)}
        return WindowDataModule(self._data, **{"fitted": self._given_fitted, **options, **changes})

    # ----------------------------------------------------------------- preparation

    def prepare_data(self) -> None:
        """Download a registered dataset if needed (Lightning runs this on one process)."""
        if isinstance(self._data, str) and registry.find(self._data) is not None:
            registry.locate(self._data)

    def setup(self, stage: str | None = None) -> None:
        """Validate, split, scale and window the data once; later calls do nothing."""
        if self._prepared is not None:
            return
        cfg = self.config
        source = _resolve_source(self._data)
        windows = (cfg.seq_len, cfg.label_len, cfg.pred_len, cfg.time_encoding)
        if self._given_fitted is not None:
            self._given_fitted.check_windows(*windows)
        prepare = _prepare_panel if cfg.id_column is not None else _prepare_table
        self._prepared = prepare(source, cfg, self._given_fitted)

    def _state(self) -> _Prepared:
        self.setup()  # the first call prepares, later ones return at once
        assert self._prepared is not None
        return self._prepared

    # ------------------------------------------------------------------ datasets

    def dataset(self, split: str) -> WindowDataset:
        """The windows of ``'train'``, ``'val'``, ``'test'`` or ``'predict'``."""
        return self._state().datasets[_split_name(split, self.config)]

    @property
    def train_dataset(self) -> WindowDataset:
        return self.dataset("train")

    @property
    def val_dataset(self) -> WindowDataset:
        return self.dataset("val")

    @property
    def test_dataset(self) -> WindowDataset:
        return self.dataset("test")

    # --------------------------------------------------------------- data facts

    @property
    def dataset_name(self) -> str:
        """Registered name, file stem, or ``'<DataFrame>'``."""
        return self._state().source.label

    @property
    def dataset_info(self) -> registry.DatasetInfo | None:
        """The registry entry whose protocol applies, if any."""
        return self._state().source.info

    @property
    def source(self) -> str:
        """The file path, or ``'<DataFrame>'``."""
        return self._state().series.source

    @property
    def is_panel(self) -> bool:
        """Whether the data is a long-format panel of many series (``id_column``)."""
        return self.config.id_column is not None

    @property
    def panel(self) -> Panel:
        """The validated panel (its series, their dates and covariates); ConfigError for a wide table."""
        series = self._state().series
        if not isinstance(series, Panel):
            raise ConfigError("the data is a wide table, not a panel; build the data module with id_column=... "
                              "to read a long-format panel")
        return series

    @property
    def series(self) -> TimeSeries | Panel:
        """The data as read and checked at setup, held in memory: a wide table's series or a panel."""
        return self._state().series

    @property
    def dates(self) -> pd.DatetimeIndex:
        """Timestamps of every row of a wide table (a panel: ``panel[series_id].dates``)."""
        series = self._state().series
        if isinstance(series, Panel):
            raise ConfigError(f"{series.source}: a panel has its dates per series: use dm.panel[series_id].dates")
        return series.dates

    @property
    def n_rows(self) -> int:
        """Rows of the table (of every series of a panel together)."""
        return self._state().series.n_rows

    @property
    def input_columns(self) -> list[Hashable]:
        """Model input variables in model order (target last)."""
        return list(self.fitted.input_columns)

    @property
    def output_columns(self) -> list[Hashable]:
        """Model output variables in model order (target last)."""
        return list(self.fitted.output_columns)

    @property
    def c_in(self) -> int:
        return self.fitted.c_in

    @property
    def c_out(self) -> int:
        return self.fitted.c_out

    @property
    def freq(self) -> str:
        """The pandas offset alias in use (given, registered or inferred)."""
        return self._state().series.freq.freqstr

    @property
    def n_time_features(self) -> int:
        """F, the columns of ``x_mark``/``y_mark``."""
        return n_time_features(self._state().series.freq, self.config.time_encoding)

    @property
    def time_feature_sizes(self) -> list[int] | None:
        """Embedding-table size per integer calendar field (fixed/learned); ``None`` for timeF."""
        return time_feature_sizes(self._state().series.freq, self.config.time_encoding)

    @property
    def split_protocol(self) -> str:
        """``'ett_hour'``, ``'ett_minute'``, ``'ratio'``, ``'rows'`` or ``'fractions'``."""
        return self._state().split_protocol

    @property
    def borders(self) -> dict[str, tuple[int, int]]:
        """Row range ``[start, end)`` of each split, lookback rows included."""
        return dict(self._state().borders)

    @property
    def split_sizes(self) -> dict[str, int]:
        """Window count of each split."""
        return {name: len(ds) for name, ds in self._state().datasets.items()}

    # ------------------------------------------------------------------- scaling

    @property
    def fitted(self) -> FittedState:
        """The fitted data state (variables, frequency, windows, train-row scaler): the one the module
        scores with and the Forecaster saves; the given one when the module was built with ``fitted``."""
        return self._state().fitted

    def state_dict(self) -> dict[str, Any]:
        """The fitted data state, which Lightning saves in every checkpoint."""
        return self.fitted.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume from a checkpoint: DataError unless its data state is this module's (same variables,
        frequency, windows and train-row scaling), so a run never resumes on data it was not fitted on."""
        if state_dict:  # empty in a checkpoint written before the data state was saved
            _check_resumed_state(state_dict, self._state())

    # ---------------------------------------------------------------- timestamps

    def window_timestamps(self, split: str, utc: bool = False, windows: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """``(x_dates [N, L], y_dates [N, label_len+P])`` of every window of a split, in order, or of the
        ``windows`` a numpy index picks (an int gives one row).

        datetime64 arrays: wall-clock time for time-zone-aware series, which repeats an hour where the clock goes
        back, or with ``utc`` their UTC instants; a panel's windows each in their own series' time.
        """
        cfg = self.config
        state, name = self._state(), _split_name(split, cfg)
        return (_window_dates(state, name, 0, cfg.seq_len, utc, windows),
                _window_dates(state, name, cfg.seq_len - cfg.label_len, cfg.label_len + cfg.pred_len, utc, windows))

    def forecast_timestamps(self, split: str, windows: Any = None) -> np.ndarray:
        """datetime64 ``[N, P]``: the timestamps of the P forecast steps of every window (of those ``windows``
        picks, a numpy index, when given)."""
        cfg = self.config
        return _window_dates(self._state(), _split_name(split, cfg), cfg.seq_len, cfg.pred_len, windows=windows)

    # -------------------------------------------------------------------- future

    def future_batch(self, df: Table | None = None, future: Table | None = None) -> FutureBatch:
        """The input for forecasting the P steps after the last row of ``df`` (default: the data; a panel:
        of each series), scaled with the fitted scaling; ``future``: a panel's future covariates
        (:meth:`FittedState.future_batch`)."""
        return self.fitted.future_batch(self._state().series if df is None else df, future)

    # --------------------------------------------------------------- dataloaders

    def _loader(self, split: str, *, train: bool, windows: WindowDataset | None = None, sharded: bool = True
                ) -> DataLoader:
        replicas, rank = trainer_processes(getattr(self, "trainer", None)) if sharded else (1, 0)
        return window_loader(self.dataset(split) if windows is None else windows, self.config, train=train,
                             split=split, num_replicas=replicas, rank=rank)

    def train_dataloader(self) -> DataLoader:
        """Shuffled per epoch from ``seed`` and the epoch number, sharded across DDP processes,
        resumable mid-epoch (:mod:`forecast.data.sampling`); drops the last batch only if asked."""
        return self._loader("train", train=True)

    def val_dataloader(self, sharded: bool = True) -> DataLoader:
        """Every val window once, in order; under DDP each process takes every W-th window, unpadded (every
        window on every process when not ``sharded``: what each fits alike on after training)."""
        return self._loader("val", train=False, sharded=sharded)

    def val_prefix_dataloader(self, sharded: bool = True) -> DataLoader | None:
        """Windows that test a forecast on the validation period when its windows cannot: ``None`` where they
        hold two disjoint horizons (more windows than ``pred_len``), or for a panel (its windows are pooled
        over the series); else every window of :func:`_val_prefix_windows` once, in order (``sharded`` as
        :meth:`val_dataloader`'s)."""
        windows = None if self.is_panel else _val_prefix_windows(self._state(), self.config)
        return None if windows is None else self._loader("val", train=False, windows=windows, sharded=sharded)

    def test_dataloader(self) -> DataLoader:
        """The ``test_split`` windows (test by default), every one once, in order, as ``val_dataloader``."""
        return self._loader(self.config.test_split, train=False)

    def predict_dataloader(self) -> DataLoader:
        """The ``predict_split`` windows (test by default), in order, none dropped."""
        return self._loader("predict", train=False)


def describe_splits(dm: WindowDataModule) -> str:
    """Rows, windows and date ranges of each split of a data module, as text."""
    cfg = dm.config
    if dm.is_panel:
        panel, shown = dm.panel, 20
        table = pd.DataFrame([{
            "series": series.id, "rows": series.n_rows, "first date": str(series.dates[0]),
            "last date": str(series.dates[-1]),
            **{f"{name} windows": window_count(end - start, cfg.seq_len, cfg.pred_len)
               for name, (start, end) in dm.borders[series.id].items()},
        } for series in panel.series[:shown]]).set_index("series").to_string()
        more = [f"... and {len(panel.series) - shown} more series"] if len(panel.series) > shown else []
        return "\n".join([
            f"dataset {dm.dataset_name} ({dm.source}): a panel of {len(panel.series)} series, {dm.n_rows} rows, "
            f"freq {dm.freq}",
            f"target {panel.target!r}, past covariates {list(panel.past_covariates)!r}, future covariates "
            f"{list(panel.future_covariates)!r}, static covariates {list(panel.static_covariates)!r}",
            f"split {dm.split_protocol} per series; seq_len {cfg.seq_len}, label_len {cfg.label_len}, pred_len "
            f"{cfg.pred_len}; windows {dm.split_sizes}",
            table, *more,
        ])
    dates = dm.dates
    rows = []
    for name in SPLIT_NAMES:
        start, end = dm.borders[name]
        forecast = dm.forecast_timestamps(name, windows=0)  # [1, P]
        rows.append({
            "split": name,
            "rows": f"{start}-{end - 1}",
            "n_rows": end - start,
            "windows": dm.split_sizes[name],
            "first date": str(dates[start]),
            "last date": str(dates[end - 1]),
            "first forecast": str(pd.Timestamp(forecast[0, 0])),
        })
    table = pd.DataFrame(rows).set_index("split").to_string()
    used_end = dm.borders["test"][1]
    unused = dm.n_rows - used_end
    lines = [
        f"dataset {dm.dataset_name} ({dm.source}): {dm.n_rows} rows x {dm.c_in} variables, "
        f"freq {dm.freq}, {dates[0]} to {dates[-1]}",
        f"features {cfg.features} (in {dm.c_in}, out {dm.c_out}; target {dm.fitted.prepare_options['target']!r}), "
        f"time encoding {cfg.time_encoding} (F={dm.n_time_features})",
        f"split {dm.split_protocol}; seq_len {cfg.seq_len}, label_len {cfg.label_len}, pred_len "
        f"{cfg.pred_len}; val/test rows include the {cfg.seq_len}-row lookback",
        table,
    ]
    if unused:
        lines.append(f"unused rows: {used_end}-{dm.n_rows - 1} ({unused} rows after the test split)")
    return "\n".join(lines)
