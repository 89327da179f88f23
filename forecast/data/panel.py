"""Long-format panels: many series of their own lengths and starts, on one clock.

    unique_id, ds,                  y,    promo, region
    store_1,   2024-01-01 00:00:00, 3.0,  0,     north
    store_2,   2024-01-03 12:00:00, 7.5,  1,     south

The format neuralforecast, Darts and pytorch-forecasting accept. :func:`prepare_panel`
validates such a table (a DataFrame or a CSV path) and returns a :class:`Panel`: one
:class:`PanelSeries` per id, in the order the ids first appear. Each series is checked as a wide
table is (:func:`~forecast.data.io.prepare_series`): its timestamps parse, go forward, do not
repeat and follow the frequency; its target and covariates are finite numbers (``fill_nan``
opts in to filling). Every message names the series. The series share one frequency (given, or
inferred per series and required to agree), and a static covariate holds one value per series.

Covariates have roles: ``past_covariates`` are known up to the forecast's start only,
``future_covariates`` are known ahead (a promotion calendar, holidays, a price plan), and
``static_covariates`` describe a series (region, category; any type). This module reads and
checks a panel; :class:`~forecast.data.WindowDataModule` cuts windows from it (``id_column=...``).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from forecast.checks import require_choice
from forecast.data.io import (
    FILL_POLICIES,
    Origin,
    Table,
    _fill_non_finite,
    _find_date_column,
    _infer_offset,
    _numeric_values,
    _off_grid,
    _step_faults,
    at_one_time_of_day,
    day_month_format,
    index_level_fix,
    parse_dates,
    read_table,
    semi_month_hint,
    spelt_alike,
    to_zone,
    zone_name,
)
from forecast.data.splits import SPLIT_NAMES, SplitLike, split_borders, window_count
from forecast.errors import (
    ConfigError,
    DataError,
    DuplicateTimestampError,
    IrregularTimestampError,
    MixedFrequencyError,
    NonFiniteValueError,
    SeriesTooShortError,
    UnknownColumnError,
    UnknownSeriesError,
    UnparsableDateError,
    UnsortedTimestampError,
)

__all__ = ["Panel", "PanelSeries", "panel_borders", "panel_windows", "prepare_panel"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PanelSeries:
    """One series of a panel: ``dates [T]``, ``target [T]``, ``past [T, K_past]``,
    ``future [T, K_future]`` (float64) and its static covariates by name; ``filled_target [T]`` marks the
    target values ``fill_nan`` filled (``None``: none was)."""

    id: Hashable
    dates: pd.DatetimeIndex
    target: np.ndarray
    past: np.ndarray
    future: np.ndarray
    static: dict[Hashable, Any]
    filled_target: np.ndarray | None = None

    @property
    def n_rows(self) -> int:
        return len(self.dates)

    @property
    def inputs(self) -> np.ndarray:
        """float64 ``[T, K_past + 1]``: the model's input variables, past covariates then the target."""
        return np.column_stack([self.past, self.target])


@dataclass(frozen=True)
class Panel:
    """A validated long-format panel: its series in first-appearance order and the columns' roles."""

    source: str
    id_column: Hashable
    date_column: Hashable
    target: Hashable
    past_covariates: tuple[Hashable, ...]
    future_covariates: tuple[Hashable, ...]
    static_covariates: tuple[Hashable, ...]
    freq: pd.DateOffset
    series: tuple[PanelSeries, ...]
    date_format: str | None = None  # the format of dates written day and month first (day_month_format)

    @property
    def ids(self) -> tuple[Hashable, ...]:
        return tuple(series.id for series in self.series)

    @property
    def n_rows(self) -> int:
        """Rows of every series together."""
        return sum(series.n_rows for series in self.series)

    @property
    def time_zone(self) -> str | None:
        """The series' time zone as a fit records it (:func:`~forecast.data.io.zone_name`); ``None`` when they
        differ (each series then keeps its own)."""
        zones = {zone_name(series.dates) for series in self.series}
        return zones.pop() if len(zones) == 1 else None

    def __getitem__(self, series_id: Hashable) -> PanelSeries:
        for series in self.series:
            if series.id == series_id:
                return series
        alike = [known for known in self.ids if str(known) == str(series_id)]  # 2 asked as '2', or the reverse
        fix = f"name it {alike[0]!r}, as the data holds it" if len(alike) == 1 else "name one of them"
        raise UnknownSeriesError(f"{self.source}: no series {series_id!r}; it has {len(self.series)} series, e.g. "
                                 f"{list(self.ids[:5])!r}. Fix: {fix}.")


def _roles(frame: pd.DataFrame, origin: Origin, id_column: Hashable, date_column: Hashable, target: Hashable,
           covariates: dict[str, tuple[Hashable, ...]], fitted: bool = False) -> None:
    """ConfigError for a column given two roles, UnknownColumnError for a column the table lacks (``fitted``:
    one the model was fitted with, so the fix is the data, not the name)."""
    named = [("id_column", id_column), ("date_column", date_column), ("target", target)]
    named += [(role, column) for role, columns in covariates.items() for column in columns]
    seen: dict[Hashable, str] = {}
    for role, column in named:
        if column in seen:
            raise ConfigError(f"{origin.label}: column {column!r} is given as both {seen[column]} and {role}. "
                              "Fix: give each column one role.")
        seen[column] = role
    missing = [(role, column) for role, column in named if column not in frame.columns]
    if missing:
        role, column = missing[0]
        in_index = index_level_fix(frame, column)
        if in_index is not None:
            raise UnknownColumnError(f"{origin.label}: {role} {column!r} {in_index}.")
        fix = (f"; the model was fitted with it.{spelt_alike([column], list(frame.columns))} Fix: pass data holding "
               f"the fitted columns {[c for _, c in named]!r}" if fitted else
               f".{spelt_alike([column], list(frame.columns))} Fix: name the column as the table spells it")
        raise UnknownColumnError(f"{origin.label}: {role} {column!r} is not a column; the columns are "
                                 f"{list(frame.columns)!r}{fix}.")


def _check_ids(ids: Sequence[Hashable], label: str, id_column: Hashable) -> None:
    """DataError for an id that is not text or a number (a tuple from a groupby on two keys, a date): a saved
    forecaster, a forecast's index and ``evaluate(by_series=True)`` keep ids as text or numbers only; and for two
    ids written alike (``1`` and ``"1"``): a forecast's CSV, ``evaluate(by_series=True)`` and the id a file is read
    back with write ids as text, so the two series would be one there."""
    for series_id in ids:
        if not isinstance(series_id, (str, int, float, np.integer, np.floating, np.bool_)):
            raise DataError(f"{label}: id column {id_column!r} holds {series_id!r} ({type(series_id).__name__}), "
                            "not text or a number, which a saved forecaster, a forecast's index and "
                            f"evaluate(by_series=True) keep ids as. Fix: df[{id_column!r}] = "
                            f"df[{id_column!r}].astype(str).")
    seen: dict[str, Hashable] = {}
    for series_id in ids:
        other = seen.setdefault(str(series_id), series_id)
        if other is not series_id:
            raise DataError(f"{label}: ids {other!r} and {series_id!r} of id column {id_column!r} are two series "
                            f"written alike ({str(series_id)!r}), so a forecast's CSV and reports could not tell "
                            f"them apart. Fix: give the ids one type, e.g. df[{id_column!r}] = "
                            f"df[{id_column!r}].astype(str), and rename one of the two.")


def id_positions(wanted: Sequence[Hashable], ids: Sequence[Hashable]) -> list[int | None]:
    """The position in ``ids`` (a fit's or a panel's) of each ``wanted`` id, ``None`` where none is that series: an
    id is found as it is, or as the text a CSV writes it as (one table's ids read from another's file)."""
    exact: dict[Hashable, int] = {}
    texts: dict[str, int | None] = {}
    for position, known in enumerate(ids):
        exact.setdefault(known, position)
        texts[str(known)] = None if str(known) in texts else position  # two written alike: the text names neither
    numbers_only = not any(isinstance(known, str) for known in ids)
    found: list[int | None] = []
    for series_id in wanted:
        position = exact.get(series_id)
        if position is None and isinstance(series_id, str):
            # A frame's ids of mixed types (1 and 's2') are written as text in its CSV: a fit never holds two
            # ids written alike (prepare_panel refuses them), so the text names one.
            position = texts.get(series_id)
            # A fit whose ids are numbers (a frame's, or a file's read before ids were kept as written) knows the
            # series a file now names '007' as 7.
            if position is None and numbers_only:
                try:
                    position = exact.get(float(series_id))
                except ValueError:
                    pass
        elif (position is None and isinstance(series_id, (int, float, np.integer, np.floating))
              and not isinstance(series_id, bool)):
            # A fit on a file (ids as written, '10') knows the series a frame numbers 10.
            position = exact.get(str(int(series_id)) if float(series_id).is_integer() else str(series_id))
        found.append(position)
    return found


def _check_clock(dates: pd.DatetimeIndex, freq: str | pd.DateOffset | None, origin: Origin, *,
                 id_column: Hashable, date_column: Hashable, target: Hashable) -> pd.DateOffset:
    """A series' offset (``freq``, or inferred); its timestamps must go forward, be unique and follow it.

    A wide table's checks (:func:`~forecast.data.io.prepare_series`) with a panel's messages: the
    series, the date column and the table's rows are named, and the fix works on the whole long
    table (``df.drop_duplicates(subset=[id, date])``, not a wide table's ``drop_duplicates(date)``;
    a wide table's ``allow_duplicates`` and ``allow_irregular`` do not exist for a panel: each
    window's steps must be one frequency step apart within its series).
    """
    by_series = f"[{id_column!r}, {date_column!r}]"
    backwards, repeated = _step_faults(dates)
    if backwards.size:
        row = int(backwards[0]) + 1
        raise UnsortedTimestampError(
            f"{origin.label}: date column {date_column!r} goes backwards at {origin.row(row)}: {dates[row - 1]} "
            f"({origin.row(row - 1)}) is followed by {dates[row]} ({backwards.size} such places in this series). "
            f"Fix: sort the rows by series, then date: df.sort_values({by_series})."
        )
    if repeated.size:
        row = int(repeated[0]) + 1
        raise DuplicateTimestampError(
            f"{origin.label}: timestamp {dates[row]} of date column {date_column!r} appears on "
            f"{origin.row(row - 1)} and {origin.row(row)} ({repeated.size} repeated (id, date) pairs in this "
            f"series); a panel holds one row per series and timestamp. Fix: keep one of each, "
            f"df.drop_duplicates(subset={by_series}) (the first), or aggregate them, "
            f"df.groupby({by_series}, as_index=False).agg({{{target!r}: 'mean', ...}})."
        )
    offset = _infer_offset(dates, freq, origin)
    off_grid, expected = _off_grid(dates, offset, allow_duplicates=False)
    if off_grid.size:
        row = int(off_grid[0]) + 1
        raise IrregularTimestampError(
            f"{origin.label}: date column {date_column!r} has {off_grid.size} irregular "
            f"step{'s' * (off_grid.size > 1)} for frequency "
            f"{offset.freqstr!r}; the first at {origin.row(row)}: {dates[row - 1]} is followed by {dates[row]}, "
            f"expected {expected[row - 1]}.{semi_month_hint(dates, freq) or ' Fix:'} put every series on a regular "
            "grid, e.g. "
            f"df = df.set_index({date_column!r}).groupby({id_column!r}).resample({offset.freqstr!r}).asfreq()"
            f".drop(columns={id_column!r}, errors='ignore').reset_index(), and pass fill_nan='ffill' (the missing "
            "steps, empty there, are filled for the model's inputs and left out of the scores), pass the right "
            "freq=..., or leave the series out of the data."
        )
    return offset


def _static_values(rows: pd.DataFrame, columns: Sequence[Hashable], origin: Origin) -> dict[Hashable, Any]:
    """Each static covariate's one value in a series' ``rows``: rows without it (a step a resample inserted) do
    not contradict it."""
    values = {}
    for column in columns:
        given = rows[column].dropna()
        distinct = (given if len(given) else rows[column]).drop_duplicates()
        if len(distinct) != 1:
            raise DataError(f"{origin.label}: static covariate {column!r} takes {len(distinct)} values "
                            f"({list(distinct[:3])!r}...), one per series is expected. Fix: make it constant "
                            "within each series, or pass it as a past or future covariate.")
        value = distinct.iloc[0]
        value = value.item() if isinstance(value, np.generic) else value  # a Python scalar, as saved runs keep it
        if pd.api.types.is_scalar(value) and pd.isna(value):  # None, NaN, NaT, pd.NA
            raise DataError(f"{origin.label}: static covariate {column!r} is missing. Fix: give the series a "
                            f"category of its own, e.g. df[{column!r}].fillna('unknown').")
        if not isinstance(value, (str, int, float)):  # bool is an int
            raise DataError(f"{origin.label}: static covariate {column!r} is {value!r}, a {type(value).__name__}: "
                            "static covariates are categories, saved with a run as text or numbers. Fix: "
                            f"df[{column!r}] = df[{column!r}].astype(str).")
        values[column] = value
    return values


def _on_one_clock(series: list[PanelSeries], label: str, date_column: Hashable) -> list[PanelSeries]:
    """Zoned series in several zones, all in UTC: a file written from a daylight-saving zone reads a series across
    the change as UTC instants and one within a season at its fixed offset, and a fit records one zone only.
    Daily or coarser rows of such a file read a series across the change on its local clock, without a zone
    (:func:`~forecast.data.io.parse_dates`): then the others are read on theirs. Other zoned series beside
    unzoned ones are refused (UnparsableDateError), as :func:`~forecast.data.io.parse_dates` refuses the column."""
    zoned = [one.id for one in series if one.dates.tz is not None]
    if len(zoned) < len(series):
        if not zoned:
            return series
        if not all(at_one_time_of_day(one.dates) for one in series if one.dates.tz is not None):
            # Read per series, each part parses on its own: unrefused, the forecast's dates mix aware and naive.
            aware = next(one for one in series if one.dates.tz is not None)
            naive = next(one for one in series if one.dates.tz is None)
            raise UnparsableDateError(
                f"{label}: date column {date_column!r} mixes zoned and unzoned timestamps: series {aware.id!r} is "
                f"in {str(aware.dates.tz)!r} (e.g. {aware.dates[0]}), series {naive.id!r} has no time zone or UTC "
                f"offset (e.g. {naive.dates[0]}), so its times name no instant. Fix: put the whole column on one "
                "clock: give every row its offset, or, if the unzoned ones are UTC times, read the column with "
                f"df[{date_column!r}] = pd.to_datetime(df[{date_column!r}], utc=True, format='ISO8601') (or the "
                "format they are written in)."
            )
        logger.info("%s: series %s are read as local times without a zone, as the others (each row at one local "
                    "time of day, e.g. daily rows of a daylight-saving zone).", label, ", ".join(map(repr, zoned)))
        return [replace(one, dates=one.dates.tz_localize(None)) if one.dates.tz is not None else one
                for one in series]
    zones = [str(one.dates.tz) for one in series]
    if len(set(zones)) < 2:
        return series
    moved = [one.id for one, zone in zip(series, zones, strict=True) if zone != "UTC"]
    logger.info("%s: the series' timestamps are in %d time zones or UTC offsets (e.g. daylight saving), so series "
                "%s are read in UTC, as the others.", label, len(set(zones)), ", ".join(map(repr, moved)))
    return [replace(one, dates=one.dates.tz_convert("UTC")) for one in series]


def prepare_panel(
    data: Table,
    *,
    id_column: Hashable,
    target: Hashable,
    date_column: Hashable | None = None,
    past_covariates: Sequence[Hashable] = (),
    future_covariates: Sequence[Hashable] = (),
    static_covariates: Sequence[Hashable] = (),
    freq: str | pd.DateOffset | None = None,
    fill_nan: str | None = None,
    date_format: str | None = None,
    time_zone: str | None = None,
    fitted: bool = False,
) -> Panel:
    """Validate a long-format table and split it into its series (see the module docstring).

    ``date_column=None`` takes the one column holding timestamps. ``freq`` (a pandas
    offset alias) is checked against every series; ``None`` infers it per series and requires
    the series to agree (:class:`~forecast.errors.MixedFrequencyError` names two that do not).
    Dates written day and month first are read in one order for the whole column, the one that fits every
    series (:func:`~forecast.data.io.day_month_format`; ``date_format``, a fit's, is kept where it fits).
    ``time_zone`` (a fit's) converts every series' timestamps into the fitted zone first
    (:func:`~forecast.data.io.to_zone`). ``fitted``: the roles are a fitted model's, so a missing column is
    named as one the model was fitted with.
    """
    require_choice("fill_nan", fill_nan, (None, *FILL_POLICIES))
    if isinstance(data, pd.Series):
        raise ConfigError("<Series>: a panel is a table with an id column. Fix: pass a DataFrame or a CSV path.")
    frame, origin = read_table(data, text_columns=(id_column,))  # a file's ids as written: '007' stays '007'
    if date_column is None:
        date_column = _find_date_column(frame, origin)
        if date_column is None:
            raise ConfigError(f"{origin.label}: a panel's timestamps must be a column, not the index. Fix: "
                              "df.reset_index(), then pass date_column=<its name>.")
    covariates = {"past_covariates": tuple(past_covariates), "future_covariates": tuple(future_covariates),
                  "static_covariates": tuple(static_covariates)}
    _roles(frame, origin, id_column, date_column, target, covariates, fitted)
    missing_ids = np.flatnonzero(frame[id_column].isna().to_numpy())
    if missing_ids.size:
        raise DataError(f"{origin.label}: id column {id_column!r} is empty on {origin.row(int(missing_ids[0]))} "
                        f"({missing_ids.size} such rows). Fix: give every row its series id, or drop those rows.")
    numeric = [target, *covariates["past_covariates"], *covariates["future_covariates"]]  # the values' columns
    n_past = len(covariates["past_covariates"])
    series, first_freq = [], None
    # One day and month order for the whole column, told by every series' steps.
    date_format = day_month_format(frame[date_column], column=date_column, origin=origin, freq=freq,
                                   groups=frame[id_column], known=date_format)
    groups = frame.groupby(id_column, sort=False, observed=True)
    for series_id, rows in groups:
        # Messages name the table's rows (and a file's lines), not the series' own count.
        where = origin.part(f"{origin.label}, series {series_id!r}", groups.indices[series_id], frame.index)
        dates = parse_dates(rows[date_column], column=date_column, origin=where, date_format=date_format)
        dates = to_zone(dates, time_zone, column=date_column, origin=where)
        offset = _check_clock(dates, freq, where, id_column=id_column, date_column=date_column, target=target)
        values, filled = _fill_non_finite(_numeric_values(rows, numeric, where, panel=True), fill_nan, where,
                                          panel=True)
        values = values.to_numpy(np.float64)
        if first_freq is None:
            first_freq = (series_id, offset)
        elif offset != first_freq[1]:
            raise MixedFrequencyError(
                f"{origin.label}: series {first_freq[0]!r} steps by {first_freq[1].freqstr!r} and series "
                f"{series_id!r} by {offset.freqstr!r}; one model needs one clock. Fix: resample the series "
                "to one frequency (df.set_index(date).groupby(id).resample(freq)), or pass freq=... to "
                "check every series against it."
            )
        series.append(PanelSeries(series_id, dates, values[:, 0], values[:, 1:1 + n_past], values[:, 1 + n_past:],
                                  _static_values(rows, covariates["static_covariates"], where),
                                  filled[:, 0] if filled is not None and filled[:, 0].any() else None))  # target
    if not series:
        raise DataError(f"{origin.label}: the table has no rows. Fix: pass a panel with at least one series.")
    _check_ids([one.id for one in series], origin.label, id_column)
    series = _on_one_clock(series, origin.label, date_column)
    return Panel(origin.label, id_column, date_column, target, covariates["past_covariates"],
                 covariates["future_covariates"], covariates["static_covariates"], first_freq[1], tuple(series),
                 date_format)


def panel_borders(panel: Panel, seq_len: int, pred_len: int,
                  split: SplitLike = "ratio") -> dict[Hashable, dict[str, tuple[int, int]]]:
    """Each series' row ranges ``[start, end)`` of train/val/test, lookback included
    (:func:`~forecast.data.splits.split_borders` applied per series).

    Windows are then cut inside a series, never across two. A split by dates cuts every
    series at the same instants; one by fractions or rows cuts each series by its own length.
    :class:`~forecast.errors.SeriesTooShortError` names every series too short for one window
    in some split, with the first one's reason.
    """
    borders, short = {}, []
    for series in panel.series:
        try:
            borders[series.id] = split_borders(series.n_rows, seq_len, pred_len, split,
                                               source=f"{panel.source}, series {series.id!r}", dates=series.dates)
        except SeriesTooShortError as error:
            short.append((series.id, error))
    if short:
        ids = [series_id for series_id, _ in short]
        listed = f"{ids[:10]!r}{' and more' if len(ids) > 10 else ''}"
        raise SeriesTooShortError(
            f"{panel.source}: {len(ids)} of {len(panel.series)} series are too short for one window in every "
            f"split: {listed}. The first: {short[0][1]} Fix also: drop those series "
            f"(df[~df[{panel.id_column!r}].isin(short_ids)])."
        )
    return borders


def panel_windows(panel: Panel, borders: dict[Hashable, dict[str, tuple[int, int]]], split: str, seq_len: int,
                  pred_len: int) -> np.ndarray:
    """int64 ``[N, 2]``: (series position in ``panel.series``, first row) of every window of ``split``.

    Windows are cut inside each series' rows of the split (``borders`` from
    :func:`panel_borders`), never across two series, series by series in panel order and by
    start within a series: a window's rows are ``first .. first + seq_len + pred_len - 1`` of
    its own series. A sampler shuffles these rows to mix the series in a batch.
    """
    require_choice("split", split, SPLIT_NAMES)
    blocks = []
    for position, series in enumerate(panel.series):
        start, end = borders[series.id][split]
        starts = start + np.arange(window_count(end - start, seq_len, pred_len), dtype=np.int64)  # [N_i]
        blocks.append(np.stack([np.full_like(starts, position), starts], axis=1))  # [N_i, 2]
    return np.concatenate(blocks) if blocks else np.empty((0, 2), dtype=np.int64)


def forecast_index(panel: Panel, pred_len: int) -> pd.MultiIndex:
    """``[N * P]`` (id, date): the ``pred_len`` steps after each series' own end, series by series, named
    like the panel's id and date columns."""
    ids = np.repeat(np.array(panel.ids, dtype=object), pred_len)  # [N * P]
    steps = [pd.date_range(series.dates[-1] + panel.freq, periods=pred_len, freq=panel.freq)  # [P] each
             for series in panel.series]
    return pd.MultiIndex.from_arrays([ids, steps[0].append(steps[1:])], names=[panel.id_column, panel.date_column])


def future_covariate_rows(panel: Panel, future: Table | None, steps: pd.MultiIndex) -> np.ndarray:
    """float64 ``[N, P, K_future]``: the known covariates of each series' forecast ``steps``
    (:func:`forecast_index`), in panel order.

    ``future`` is a long table with the panel's id and date columns and its future covariates,
    holding (at least) those steps for every series; None is fine when there are no future
    covariates. DataError naming the series and its missing steps, or a column the table lacks;
    :class:`~forecast.errors.NonFiniteValueError` naming the covariate, the series and the forecast
    steps whose value is NaN or inf: a forecast is never made from guessed covariates. The whole table is
    read and checked (every row needs its id, a timestamp, covariates that are numbers or empty, and no
    second row for its series and step); only the forecast steps' values are used, so those of other rows
    may be missing. A CSV's ids are read as written and found among the panel's as a fit finds a file's series
    (:func:`id_positions`: a frame's ``1`` written ``'1'``).
    """
    columns = list(panel.future_covariates)
    n_series = len(panel.series)
    pred_len = len(steps) // n_series
    if not columns:
        return np.zeros((n_series, pred_len, 0))
    if future is None:
        raise DataError(f"{panel.source}: the model was fitted with future covariates {columns!r}; forecasting "
                        f"needs their values for the {pred_len} steps after each series' end. Fix: pass "
                        f"future_covariates=<a long table with {panel.id_column!r}, {panel.date_column!r} and "
                        f"{columns!r}>.")
    if isinstance(future, (list, tuple)):  # fit's future_covariates=[...] names them; forecasting needs values
        raise ConfigError(f"{panel.source}: future_covariates={list(future)!r} names columns, as fit(...) does, but "
                          f"a forecast takes their values. Fix: pass a long table (or its CSV path) holding "
                          f"{panel.id_column!r}, {panel.date_column!r} and {columns!r} at the pred_len={pred_len} "
                          "steps after each series' end.")
    frame, origin = read_table(future, text_columns=(panel.id_column,))  # a file's ids as written: '007'
    where = Origin(f"future covariates {origin.label}", origin.is_file)
    for column in (panel.id_column, panel.date_column, *columns):
        if column not in frame.columns:
            in_index = index_level_fix(frame, column)
            if in_index is not None:
                raise UnknownColumnError(f"{where.label}: {column!r} {in_index}.")
            raise UnknownColumnError(f"{where.label}: has no column {column!r} (its columns: {list(frame.columns)!r})."
                                     f" Fix: give it the id, date and future covariate columns of the fitted data.")
    date_format = day_month_format(frame[panel.date_column], column=panel.date_column, origin=where, freq=panel.freq,
                                   groups=frame[panel.id_column], known=panel.date_format)
    dates = parse_dates(frame[panel.date_column], column=panel.date_column, origin=where, date_format=date_format)
    step_dates = steps.get_level_values(1)
    if isinstance(step_dates, pd.DatetimeIndex):  # matched on the forecast steps' clock, or refused by name
        dates = to_zone(dates, zone_name(step_dates), column=panel.date_column, origin=where, whose="the series'")
    values = _numeric_values(frame, columns, where, panel=True).to_numpy(np.float64)  # [rows, K], checked where used
    ids = frame[panel.id_column]
    by_text = where.is_file and not all(isinstance(series_id, str) for series_id in panel.ids)
    if by_text:
        # A file writes a frame's numbers and mixed ids (1, 's2') as text: each found as a fit finds a file's series.
        written = ids.dropna().unique()
        named = {text: panel.ids[position]
                 for text, position in zip(written, id_positions(written, panel.ids)) if position is not None}
        ids = pd.Series([named.get(text, text) for text in ids], index=frame.index, dtype=object)
    lookup = pd.Series(np.arange(len(frame)), index=pd.MultiIndex.from_arrays([ids, dates]))
    if lookup.index.has_duplicates:
        series_id, date = lookup.index[lookup.index.duplicated()][0]
        raise DataError(f"{where.label}: series {series_id!r} has two rows at {date}. Fix: one row per series "
                        "and step.")
    found = lookup.reindex(steps).to_numpy().reshape(n_series, pred_len)  # [N, P] row of each step, NaN if absent
    absent = np.isnan(found)
    for position in np.flatnonzero(absent.any(axis=1)):
        series_id = panel.series[position].id
        series_steps = steps.get_level_values(1)[position * pred_len:(position + 1) * pred_len]  # [P]
        if absent[position].all():
            raise DataError(f"{where.label}: series {series_id!r} has no rows; forecasting it needs its future "
                            f"covariates at the {pred_len} steps after its end, {series_steps[0]} to "
                            f"{series_steps[-1]}. Fix: add its rows (id column {panel.id_column!r}), or leave the "
                            f"series out of the data.{'' if by_text else _id_type_hint(series_id, ids)}")
        missing = series_steps[absent[position]]
        raise DataError(f"{where.label}: series {series_id!r} lacks its future covariates at {len(missing)} of "
                        f"the {pred_len} steps after its end, from {missing[0]} (e.g. {[str(d) for d in missing[:3]]})."
                        f" Fix: give every series a row for each of its next {pred_len} steps.")
    rows = found.astype(np.int64)  # [N, P]
    known = values[rows]  # [N, P, K]
    _check_known_finite(panel, known, rows, steps, where, frame.index)
    return known


def _id_type_hint(series_id: Hashable, ids: pd.Series) -> str:
    """Why a table's ids miss a series named the same in another type (``7`` and ``'007'``), else ``""``."""
    named = ids.dropna()
    if named.empty or isinstance(named.iloc[0], str) == isinstance(series_id, str):
        return ""
    return (f" Its ids are {type(named.iloc[0]).__name__} (e.g. {named.iloc[0]!r}) where the series' is "
            f"{type(series_id).__name__}: give them as the data does (a CSV's ids are read as text).")


def _check_known_finite(panel: Panel, known: np.ndarray, rows: np.ndarray, steps: pd.MultiIndex, origin: Origin,
                        index: pd.Index) -> None:
    """NonFiniteValueError for a NaN or inf among the future covariates ``known [N, P, K]`` (table rows
    ``rows [N, P]``) of the forecast ``steps``: it names the covariate, the series and their steps
    (1-based, and their timestamps), and the table row of the first.

    No fill policy applies here: ``fill_nan`` fills a fit's history, but a covariate known ahead is
    given, not guessed, so the fix is in the table passed to ``predict``.
    """
    bad = ~np.isfinite(known)  # [N, P, K]
    if not bad.any():
        return
    n_series, pred_len, _ = known.shape
    column_position = int(np.flatnonzero(bad.any(axis=(0, 1)))[0])
    column = panel.future_covariates[column_position]
    in_column = bad[..., column_position]  # [N, P]
    positions = np.flatnonzero(in_column.any(axis=1))  # the series, in panel order
    dates = steps.get_level_values(1).to_numpy().reshape(n_series, pred_len)  # [N, P]
    first = int(positions[0])
    first_steps = np.flatnonzero(in_column[first])
    value = known[first, first_steps[0], column_position]
    first_dates = [str(pd.Timestamp(date)) for date in dates[first, first_steps[:3]]]
    first_row = origin.row(int(rows[first, first_steps[0]]), index)
    named = [f"series {panel.series[position].id!r} at step(s) {(np.flatnonzero(in_column[position]) + 1).tolist()}"
             for position in positions[:3]]
    more = f" and {len(positions) - 3} more series" if len(positions) > 3 else ""
    id_column = panel.id_column
    raise NonFiniteValueError(
        f"{origin.label}: future covariate {column!r} is {value} for {'; '.join(named)}{more} of the {pred_len} "
        f"forecast steps (series {panel.series[first].id!r}: {first_dates}, the first on {first_row}; "
        f"{int(bad.sum())} non-finite values in the forecast steps). A forecast is not made from guessed "
        "covariates. Fix: give their known values in the table passed as predict(..., future_covariates=...), "
        f"e.g. fill each series' gaps: future[{column!r}] = future.groupby({id_column!r})[{column!r}].ffill(), "
        "or .fillna(0) where a missing value means none."
    )
