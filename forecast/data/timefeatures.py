"""Calendar features of timestamps, chosen by the series frequency.

Two encodings, as in the field:

* ``timeF``: continuous features in [-0.5, 0.5] (the GluonTS formulas the field uses),
  e.g. hourly data gets hour-of-day, day-of-week, day-of-month, day-of-year.
* ``fixed`` / ``learned``: integer calendar fields (month, day, weekday, hour, ...) that
  index embedding tables; :func:`time_feature_sizes` gives each table's size.

Deliberate deviations from the field's code (docs/pitfalls.md): the frequency is parsed as a
pandas offset, not cut to its last character, so ``'15min'``, ``'10min'``, ``'2h'`` or
``'W-TUE'`` all work; the finest integer field is bucketed by the series' own step, not
by a hard-coded ``minute // 15`` (15-minute data gets 4 minute values, 10-minute data 6).
Yearly data has no calendar feature that varies, so it gets none (F = 0).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from forecast.checks import require_choice
from forecast.data.io import parse_offset
from forecast.errors import ConfigError

TimeEncoding = Literal["timeF", "fixed", "learned"]
TIME_ENCODINGS: tuple[str, ...] = ("timeF", "fixed", "learned")
Resolution = Literal[
    "second", "minute", "hour", "day", "business_day", "week", "month", "quarter", "year"
]

_DAY = pd.Timedelta(days=1)
_HOUR = pd.Timedelta(hours=1)
_MINUTE = pd.Timedelta(minutes=1)
_SECOND = pd.Timedelta(seconds=1)

_MONTHLY = (
    pd.offsets.MonthBegin, pd.offsets.MonthEnd, pd.offsets.BusinessMonthBegin,
    pd.offsets.BusinessMonthEnd, pd.offsets.CustomBusinessMonthBegin,
    pd.offsets.CustomBusinessMonthEnd,
    pd.offsets.WeekOfMonth, pd.offsets.LastWeekOfMonth,  # 'WOM-3FRI', which pandas infers from third Fridays
)
_QUARTERLY = (
    pd.offsets.QuarterBegin, pd.offsets.QuarterEnd, pd.offsets.BQuarterBegin,
    pd.offsets.BQuarterEnd, pd.offsets.FY5253Quarter,
)
_YEARLY = (
    pd.offsets.YearBegin, pd.offsets.YearEnd, pd.offsets.BYearBegin, pd.offsets.BYearEnd,
    pd.offsets.FY5253, pd.offsets.Easter,
)


def _tick_resolution(step: pd.Timedelta) -> Resolution:
    """The finest calendar unit that a fixed step makes vary (90min -> minute, 60min -> hour)."""
    for unit, resolution in ((_DAY, "day"), (_HOUR, "hour"), (_MINUTE, "minute")):
        if step % unit == pd.Timedelta(0):
            return resolution  # type: ignore[return-value]
    return "second"


def frequency_resolution(freq: str | pd.DateOffset) -> Resolution:
    """Classify a pandas offset (alias or object) by the calendar unit it steps in."""
    offset = parse_offset(freq)
    if isinstance(offset, pd.offsets.Day):  # a Tick before pandas 3, a calendar day since
        return "day"
    if isinstance(offset, pd.offsets.Tick):
        return _tick_resolution(pd.Timedelta(offset))
    if isinstance(offset, pd.offsets.BusinessHour | pd.offsets.CustomBusinessHour):
        return "hour"
    if isinstance(offset, pd.offsets.BusinessDay | pd.offsets.CustomBusinessDay):
        return "business_day"
    if isinstance(offset, pd.offsets.Week):
        return "week"
    if isinstance(offset, pd.offsets.SemiMonthBegin | pd.offsets.SemiMonthEnd):
        return "day"
    if isinstance(offset, _MONTHLY):
        return "month"
    if isinstance(offset, _QUARTERLY):
        return "quarter"
    if isinstance(offset, _YEARLY):
        return "year"
    raise ConfigError(
        f"freq={offset.freqstr!r} has no calendar-feature mapping. Fix: pass a frequency in "
        "seconds, minutes, hours, days, business days, weeks, months, quarters or years."
    )


# The natural cycle of a resolution whose step does not divide a day: a week of days, a year of the rest.
_SEASON_OF = {"day": 7, "business_day": 5, "week": 52, "month": 12, "quarter": 4}


def seasonal_period(freq: str | pd.DateOffset) -> int:
    """The steps of the series' natural cycle: a day of sub-daily data (24 hourly, 96 at 15 minutes, 144 at
    10), a week of days (7; 5 business days), a year of weeks, semi-months, months or quarters (52, 24, 12, 4).

    ConfigError, naming the fix, for a step that does not divide a day and for yearly data.
    """
    offset = parse_offset(freq)
    resolution = frequency_resolution(offset)
    if isinstance(offset, pd.offsets.Tick) and resolution in ("second", "minute", "hour"):
        step = pd.Timedelta(offset)
        if _DAY % step == pd.Timedelta(0):
            return int(_DAY // step)
    elif isinstance(offset, pd.offsets.SemiMonthBegin | pd.offsets.SemiMonthEnd):  # their calendar features are days'
        if offset.n == 1:
            return 24
    elif resolution in _SEASON_OF and offset.n == 1:
        return _SEASON_OF[resolution]
    raise ConfigError(f"freq={offset.freqstr!r} has no natural cycle to repeat. Fix: set season_length, the "
                      "period in steps.")


# timeF: each feature maps the calendar value linearly onto [-0.5, 0.5].
_TIMEF: dict[str, Callable[[pd.DatetimeIndex], np.ndarray]] = {
    "second_of_minute": lambda d: d.second / 59.0 - 0.5,
    "minute_of_hour": lambda d: d.minute / 59.0 - 0.5,
    "hour_of_day": lambda d: d.hour / 23.0 - 0.5,
    "day_of_week": lambda d: d.day_of_week / 6.0 - 0.5,
    "day_of_month": lambda d: (d.day - 1) / 30.0 - 0.5,
    "day_of_year": lambda d: (d.day_of_year - 1) / 365.0 - 0.5,
    "month_of_year": lambda d: (d.month - 1) / 11.0 - 0.5,
    "week_of_year": lambda d: (d.isocalendar().week.to_numpy(dtype=np.float64) - 1) / 52.0 - 0.5,
}
_DAILY_TIMEF = ("day_of_week", "day_of_month", "day_of_year")
_TIMEF_BY_RESOLUTION: dict[str, tuple[str, ...]] = {
    "second": ("second_of_minute", "minute_of_hour", "hour_of_day", *_DAILY_TIMEF),
    "minute": ("minute_of_hour", "hour_of_day", *_DAILY_TIMEF),
    "hour": ("hour_of_day", *_DAILY_TIMEF),
    "day": _DAILY_TIMEF,
    "business_day": _DAILY_TIMEF,
    "week": ("day_of_month", "week_of_year"),
    "month": ("month_of_year",),
    "quarter": ("month_of_year",),
    "year": (),
}


@dataclass(frozen=True)
class CalendarField:
    """An integer calendar field for an embedding table: value ``// divisor`` in ``[0, size)``."""

    name: str
    size: int
    divisor: int = 1

    def values(self, dates: pd.DatetimeIndex) -> np.ndarray:
        if self.name == "week":
            raw = dates.isocalendar().week.to_numpy(dtype=np.int64)
        else:
            raw = np.asarray(getattr(dates, "day_of_week" if self.name == "weekday" else self.name))
        return raw // self.divisor


_FIELD_SIZES = {"month": 13, "day": 32, "weekday": 7, "hour": 24, "minute": 60, "second": 60, "week": 54}
_FIELDS_BY_RESOLUTION: dict[str, tuple[str, ...]] = {
    "second": ("month", "day", "weekday", "hour", "minute", "second"),
    "minute": ("month", "day", "weekday", "hour", "minute"),
    "hour": ("month", "day", "weekday", "hour"),
    "day": ("month", "day", "weekday"),
    "business_day": ("month", "day", "weekday"),
    "week": ("month", "day", "week"),
    "month": ("month",),
    "quarter": ("month",),
    "year": (),
}
_FINEST_UNIT = {"hour": (_HOUR, 24), "minute": (_MINUTE, 60), "second": (_SECOND, 60)}


def _finest_divisor(offset: pd.DateOffset, resolution: str) -> int:
    """Bucket width of the finest field: a 15-minute step visits minutes 0/15/30/45 -> 15."""
    if resolution not in _FINEST_UNIT or not isinstance(offset, pd.offsets.Tick):
        return 1
    unit, cycle = _FINEST_UNIT[resolution]
    step = pd.Timedelta(offset)
    if step % unit != pd.Timedelta(0):
        return 1  # sub-second steps: every second value can occur
    return math.gcd(int(step // unit), cycle)


def timef_feature_names(freq: str | pd.DateOffset) -> tuple[str, ...]:
    """Names of the ``timeF`` features for a frequency, in column order."""
    return _TIMEF_BY_RESOLUTION[frequency_resolution(freq)]


def calendar_fields(freq: str | pd.DateOffset) -> tuple[CalendarField, ...]:
    """Integer fields for ``fixed``/``learned`` encodings, in column order."""
    offset = parse_offset(freq)
    resolution = frequency_resolution(offset)
    names = _FIELDS_BY_RESOLUTION[resolution]
    fields = [CalendarField(name, _FIELD_SIZES[name]) for name in names]
    divisor = _finest_divisor(offset, resolution)
    if fields and divisor > 1:
        last = fields[-1]
        fields[-1] = CalendarField(last.name, last.size // divisor, divisor)
    return tuple(fields)


def time_feature_sizes(freq: str | pd.DateOffset, encoding: str = "timeF") -> list[int] | None:
    """Embedding-table sizes of the integer fields; ``None`` for ``timeF``."""
    require_choice("time_encoding", encoding, TIME_ENCODINGS)
    if encoding == "timeF":
        return None
    return [field.size for field in calendar_fields(freq)]


def n_time_features(freq: str | pd.DateOffset, encoding: str = "timeF") -> int:
    """Number of time-feature columns F."""
    require_choice("time_encoding", encoding, TIME_ENCODINGS)
    if encoding == "timeF":
        return len(timef_feature_names(freq))
    return len(calendar_fields(freq))


def time_features(
    dates: pd.DatetimeIndex, freq: str | pd.DateOffset, encoding: str = "timeF"
) -> np.ndarray:
    """Time features of each timestamp: float32 ``[T, F]`` (integers for fixed/learned)."""
    require_choice("time_encoding", encoding, TIME_ENCODINGS)
    dates = pd.DatetimeIndex(dates)
    if encoding == "timeF":
        columns = [np.asarray(_TIMEF[name](dates), dtype=np.float64) for name in timef_feature_names(freq)]
    else:
        columns = [field.values(dates) for field in calendar_fields(freq)]
    if not columns:
        return np.zeros((len(dates), 0), dtype=np.float32)
    return np.stack(columns, axis=1).astype(np.float32)  # [T, F]
