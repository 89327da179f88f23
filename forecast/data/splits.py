"""Train/val/test borders as the long-sequence forecasting literature draws them.

Each split *owns* a block of rows (the rows its forecasts land on). Val and test windows
start ``seq_len`` rows before their block, so their first lookback reaches into the
previous split and their first forecast step is the block's first row. A split of
``rows`` rows (lookback included) holds ``rows - seq_len - pred_len + 1`` windows.

* ETT hourly (``'ett_hour'``): 12/4/4 months of 30 days: owned rows [0, 8640),
  [8640, 11520), [11520, 14400); the rest of the file is unused, as in the field.
* ETT 15-minute (``'ett_minute'``): the same months, x4.
* Otherwise (``'ratio'``): ``n_train = int(T * 0.7)``, ``n_test = int(T * 0.2)``,
  ``n_val = T - n_train - n_test``.
* By dates (two timestamps, :class:`DateSplit`): val owns the rows from the first
  timestamp on, test those from the second on, to the end of the series.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Union

import numpy as np
import pandas as pd

from forecast.checks import is_int, is_real
from forecast.errors import ConfigError, SeriesTooShortError

SPLIT_NAMES: tuple[str, str, str] = ("train", "val", "test")


@dataclass(frozen=True)
class RowSplit:
    """Explicit owned-row ends: train [0, train_end), val [train_end, val_end), test [val_end, test_end)."""

    train_end: int
    val_end: int
    test_end: int

    def __post_init__(self) -> None:
        ends = (self.train_end, self.val_end, self.test_end)
        if not all(is_int(e) for e in ends) or not 0 < self.train_end < self.val_end < self.test_end:
            raise ConfigError(
                f"row split {ends!r}: Fix: give three increasing positive integers "
                "(train_end, val_end, test_end), each split owning the rows up to its end."
            )

    def owned_ends(self, n_rows: int, *, source: str = "<DataFrame>", name: str = "rows") -> tuple[int, int, int]:
        """The row ends, checked against a series of ``n_rows`` rows; ``name``: the protocol asked for, if one."""
        if self.test_end > n_rows:
            ends = (self.train_end, self.val_end, self.test_end)
            protocol = name in SPLIT_PROTOCOLS
            raise SeriesTooShortError(
                f"{source}: {f'split {name!r}' if protocol else f'the row split {ends}'} ends its test block at "
                f"row {self.test_end} but the series has {n_rows} rows. Fix: use split='ratio' (70/10/20), row ends "
                f"or dates within the series, or the full file{' it was drawn for' if protocol else ''}."
            )
        return self.train_end, self.val_end, self.test_end


@dataclass(frozen=True)
class FractionSplit:
    """Fractions of rows; val gets the remainder ``T - int(T*train) - int(T*test)`` as in the field."""

    train: float = 0.7
    val: float = 0.1
    test: float = 0.2

    def __post_init__(self) -> None:
        parts = (self.train, self.val, self.test)
        valid = all(is_real(p) and 0 < p < 1 for p in parts)
        if not valid or not math.isclose(sum(parts), 1.0, abs_tol=1e-9):
            raise ConfigError(
                f"fraction split {parts!r}: Fix: give three fractions in (0, 1) that sum to 1, "
                "e.g. (0.7, 0.1, 0.2)."
            )

    def owned_ends(self, n_rows: int, *, source: str = "<DataFrame>", name: str = "ratio") -> tuple[int, int, int]:
        n_train = int(n_rows * self.train)
        n_test = int(n_rows * self.test)
        n_val = n_rows - n_train - n_test
        return n_train, n_train + n_val, n_rows


DateLike = Union[str, datetime.date, np.datetime64]  # datetime.datetime and pd.Timestamp are dates too


def _timestamp(value: DateLike, name: str) -> pd.Timestamp:
    if not isinstance(value, (str, datetime.date, np.datetime64)):
        raise ConfigError(f"date split: {name}={value!r} is not a date; two values are the dates where val and "
                          "test start. Fix: pass a date string such as '2023-07-01' or a timestamp, or three "
                          "fractions (0.7, 0.1, 0.2) or three row ends.")
    try:
        stamp = pd.Timestamp(value)
    except (ValueError, TypeError, OverflowError) as error:
        raise ConfigError(f"date split: {name}={value!r} cannot be read as a date ({error}). Fix: pass an ISO "
                          "date such as '2023-07-01' or '2023-07-01 00:00'.") from error
    if pd.isna(stamp):
        raise ConfigError(f"date split: {name}={value!r} is not a date. Fix: pass a date such as '2023-07-01'.")
    return stamp


@dataclass(frozen=True)
class DateSplit:
    """Two timestamps as borders: val owns the rows from ``val_start`` on, test those from
    ``test_start`` on, to the end of the series; train owns the rows before ``val_start``.

    A border is a point in time, so ``DateSplit('2023-07-01', '2023-10-01')`` trains on
    every row before July 1 00:00 at any frequency. Borders without a time zone take
    the series' zone.
    """

    val_start: DateLike
    test_start: DateLike

    def __post_init__(self) -> None:
        val_start, test_start = _timestamp(self.val_start, "val_start"), _timestamp(self.test_start, "test_start")
        if (val_start.tzinfo is None) != (test_start.tzinfo is None):
            raise ConfigError(f"date split ({val_start}, {test_start}): Fix: give both borders a time zone, or neither.")
        if not val_start < test_start:
            raise ConfigError(
                f"date split ({val_start}, {test_start}): Fix: the val border must come before the test border."
            )
        object.__setattr__(self, "val_start", val_start)
        object.__setattr__(self, "test_start", test_start)

    def _in_zone_of(self, stamp: pd.Timestamp, dates: pd.DatetimeIndex, source: str) -> pd.Timestamp:
        if dates.tz is None and stamp.tzinfo is not None:
            raise ConfigError(
                f"{source}: the split border {stamp} has a time zone and the series has none. Fix: give the "
                "borders without a time zone."
            )
        if dates.tz is not None:
            return stamp.tz_localize(dates.tz) if stamp.tzinfo is None else stamp.tz_convert(dates.tz)
        return stamp

    def row_split(self, dates: pd.DatetimeIndex, *, source: str = "<DataFrame>") -> RowSplit:
        """The owned-row ends these borders draw in a sorted series."""
        val_start = self._in_zone_of(pd.Timestamp(self.val_start), dates, source)
        test_start = self._in_zone_of(pd.Timestamp(self.test_start), dates, source)
        train_end, val_end = (int(dates.searchsorted(stamp, side="left")) for stamp in (val_start, test_start))
        span = f"the series runs from {dates[0]} to {dates[-1]}"
        if train_end == 0:
            raise SeriesTooShortError(f"{source}: the val border {val_start} leaves no train rows: {span}. "
                                      "Fix: move the border later.")
        if val_end == len(dates):
            raise SeriesTooShortError(f"{source}: the test border {test_start} leaves no test rows: {span}. "
                                      "Fix: move the border earlier.")
        if val_end == train_end:
            raise SeriesTooShortError(f"{source}: no row falls between the borders {val_start} and {test_start}: "
                                      f"{span}. Fix: move them apart.")
        return RowSplit(train_end, val_end, len(dates))


Split = Union[RowSplit, FractionSplit, DateSplit]
SplitLike = Union[str, RowSplit, FractionSplit, DateSplit, Sequence[int], Sequence[float], Sequence[DateLike]]

_HOURS_PER_MONTH = 30 * 24
SPLIT_PROTOCOLS: dict[str, Split] = {
    "ett_hour": RowSplit(12 * _HOURS_PER_MONTH, 16 * _HOURS_PER_MONTH, 20 * _HOURS_PER_MONTH),
    "ett_minute": RowSplit(12 * _HOURS_PER_MONTH * 4, 16 * _HOURS_PER_MONTH * 4, 20 * _HOURS_PER_MONTH * 4),
    "ratio": FractionSplit(0.7, 0.1, 0.2),
}


_SPLIT_FORMS = (
    f"a protocol name {tuple(SPLIT_PROTOCOLS)}, three fractions (0.7, 0.1, 0.2), three row ends "
    "(train_end, val_end, test_end), two dates where val and test start ('2023-07-01', '2023-10-01'), "
    "or a RowSplit/FractionSplit/DateSplit"
)


def resolve_split(spec: SplitLike) -> tuple[str, Split]:
    """(name, split) from a protocol name, a split object, 3 fractions, 3 integer row ends or 2 dates."""
    if isinstance(spec, str):
        if spec not in SPLIT_PROTOCOLS:
            raise ConfigError(f"split={spec!r}: Fix: use {_SPLIT_FORMS}.")
        return spec, SPLIT_PROTOCOLS[spec]
    if isinstance(spec, (RowSplit, FractionSplit, DateSplit)):
        return {RowSplit: "rows", FractionSplit: "fractions", DateSplit: "dates"}[type(spec)], spec
    if isinstance(spec, Sequence) and len(spec) == 3:
        if all(is_int(v) for v in spec):
            return "rows", RowSplit(*(int(v) for v in spec))
        return "fractions", FractionSplit(*spec)
    if isinstance(spec, Sequence) and len(spec) == 2:
        return "dates", DateSplit(*spec)
    raise ConfigError(f"split={spec!r}: Fix: use {_SPLIT_FORMS}.")


def _border_text(stamp: pd.Timestamp) -> str:
    """A date border as a run's key writes it: the date alone at midnight without a zone (as YAML's dates read),
    else pandas' text of the time, in UTC for one with a zone (an instant, whatever zone it was written in)."""
    if stamp.tzinfo is not None:
        return str(stamp.tz_convert("UTC"))
    return str(stamp.date()) if stamp == stamp.normalize() else str(stamp)


def split_key(spec: object) -> object:
    """``spec`` as a run's key writes it: one form for one split, however it was given (``'2023-01-18'``,
    ``'2023-01-18 00:00:00'``, a date and a :class:`DateSplit` of it are one border). The forms keys held before
    stay as they were: a name, three row ends or fractions, YAML's dates. A spec :func:`resolve_split` refuses is
    kept as given: the fit reports it."""
    try:
        _, split = resolve_split(spec)
    except ConfigError:
        return spec
    if isinstance(spec, str):
        return spec
    if isinstance(split, DateSplit):
        return [_border_text(split.val_start), _border_text(split.test_start)]
    if isinstance(split, RowSplit):
        return [int(split.train_end), int(split.val_end), int(split.test_end)]
    return [float(split.train), float(split.val), float(split.test)]


def window_count(rows: int, seq_len: int, pred_len: int) -> int:
    """Windows in a block of ``rows`` rows (never negative)."""
    return max(rows - seq_len - pred_len + 1, 0)


def split_borders(
    n_rows: int,
    seq_len: int,
    pred_len: int,
    split: SplitLike = "ratio",
    *,
    source: str = "<DataFrame>",
    dates: pd.DatetimeIndex | None = None,
) -> dict[str, tuple[int, int]]:
    """Row ranges ``[start, end)`` of train/val/test, lookback included.

    A date split needs the series' ``dates [T]``. Raises ``SeriesTooShortError`` naming
    the first split that cannot hold one window.
    """
    name, spec = resolve_split(split)
    if isinstance(spec, DateSplit):
        if dates is None or len(dates) != n_rows:
            raise ConfigError(f"{source}: a date split needs the series' {n_rows} timestamps (dates=...).")
        spec = spec.row_split(dates, source=source)
    train_end, val_end, test_end = spec.owned_ends(n_rows, source=source, name=name)
    borders = {
        "train": (0, train_end),
        "val": (train_end - seq_len, val_end),
        "test": (val_end - seq_len, test_end),
    }
    needed = seq_len + pred_len
    for split_name, (start, end) in borders.items():
        if end - start < needed:
            lookback = "" if split_name == "train" else f", including the {seq_len}-row lookback"
            raise SeriesTooShortError(
                f"{source}: the {split_name} split has {end - start} rows (rows {start} to "
                f"{end - 1} of {n_rows}{lookback}) but one window needs seq_len + pred_len = "
                f"{needed} rows. Fix: shorten seq_len/pred_len, use a longer series, or give a "
                f"split with more {split_name} rows (split=...)."
            )
    return borders
