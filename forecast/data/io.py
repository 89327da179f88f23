"""CSV loading and validation: a table in, a clean, ordered, numeric series out.

Every check raises a specific :mod:`forecast.errors` exception whose message names the
source (a file path, or ``'<DataFrame>'``), the column or row, and the fix. Rows are
counted from 0 over the data rows; for files the line number (header = line 1) is
given too.
"""

from __future__ import annotations

import datetime
import logging
import os
import re
import warnings
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Union

import numpy as np
import pandas as pd
from pandas.tseries.api import guess_datetime_format
from pandas.tseries.frequencies import to_offset

from forecast.checks import require_choice
from forecast.errors import (
    ConfigError,
    CsvReadError,
    DataError,
    DuplicateColumnError,
    DuplicateTimestampError,
    IrregularTimestampError,
    MissingDateColumnError,
    NonFiniteValueError,
    NonNumericColumnError,
    NoVariablesError,
    SeriesTooShortError,
    UnknownColumnError,
    UnknownTargetError,
    UnparsableDateError,
    UnsortedTimestampError,
)

logger = logging.getLogger(__name__)

DATAFRAME_SOURCE = "<DataFrame>"
Features = Literal["M", "S", "MS"]
FEATURES: tuple[str, ...] = ("M", "S", "MS")
FillPolicy = Literal["ffill", "interpolate", "zero"]
FILL_POLICIES: tuple[str, ...] = ("ffill", "interpolate", "zero")


@dataclass(frozen=True)
class Origin:
    """Where a table came from, to name it and its rows in error messages.

    ``rows`` and ``index`` describe a part of a table checked on its own (a panel's series):
    its position ``i`` is the table's row ``rows[i]``, and ``index`` is the table's index, so
    a message names the row a user can find in the table or file, not the part's own count.
    """

    label: str
    is_file: bool = False
    rows: np.ndarray | None = field(default=None, compare=False)
    index: pd.Index | None = field(default=None, compare=False)

    @classmethod
    def of_file(cls, path: str | os.PathLike[str]) -> Origin:
        return cls(str(path), is_file=True)

    def part(self, label: str, rows: np.ndarray, index: pd.Index) -> Origin:
        """The origin of the table's rows ``rows`` (positions, in order), named ``label``; ``index`` is the
        table's index."""
        return Origin(label, self.is_file, np.asarray(rows, dtype=np.int64), index)

    def row(self, position: int, index: pd.Index | None = None) -> str:
        """Describe data row ``position`` (0-based) for a message (a part's: the table's row it is)."""
        if self.rows is not None:
            position, index = int(self.rows[position]), self.index
        if self.is_file:
            return f"row {position} (line {position + 2} of the file)"
        if index is not None and not isinstance(index, pd.RangeIndex):
            label = index[position]
            return f"row {position} (index {label.item() if isinstance(label, np.generic) else label!r})"
        return f"row {position}"


@dataclass(frozen=True)
class TimeSeries:
    """A validated series: regular (unless allowed otherwise) timestamps and finite numbers.

    ``values`` holds the model's variables in model order: the table's column order with
    the target moved last (``M``/``MS``), or the target alone (``S``). ``target`` is the
    target column as resolved (``None``: ``M`` over every column with no target),
    ``date_column`` the name of the time axis: its column, or the DatetimeIndex's name, and
    ``date_format`` the format its text was read in when it leads with day and month (else ``None``).
    ``filled`` marks the values ``fill_nan`` filled (``None``: none was), which are no truth to score.
    """

    source: str
    dates: pd.DatetimeIndex  # [T]
    values: np.ndarray  # [T, C] float64
    input_columns: tuple[Hashable, ...]
    output_columns: tuple[Hashable, ...]
    freq: pd.DateOffset
    target: Hashable | None = None
    date_column: Hashable | None = None
    date_format: str | None = None
    filled: np.ndarray | None = None  # [T, C] bool

    @property
    def n_rows(self) -> int:
        return len(self.dates)


# pandas' hint for an alias it renamed ('H' -> 'h', 'T' -> 'min', 'M' -> 'ME'), in either of its wordings
_RENAMED_ALIAS = re.compile(r"Invalid frequency: (\S+?)\. Did you mean (\S+?)\?"
                            r"|'([^']+)' is no longer supported for offsets\. Please use '([^']+)' instead")


def parse_offset(freq: str | pd.DateOffset) -> pd.DateOffset:
    """Turn a pandas offset alias (``'15min'``, ``'h'``, ``'W-TUE'``...) into an offset."""
    try:
        return to_offset(freq)
    except (ValueError, TypeError) as error:
        renamed = _RENAMED_ALIAS.search(str(error))
        old, new = [name for name in renamed.groups() if name] if renamed else ("", "")
        hint = f" ({old!r} is now {new!r} in pandas)" if renamed else ""
        raise ConfigError(
            f"freq={freq!r} is not a pandas offset alias{hint}. "
            "Fix: pass an alias such as '15min', '10min', 'h', 'D', 'B', 'W', 'MS', 'QS' or 'YS', "
            "or freq=None to infer it from the timestamps."
        ) from error


def read_csv(path: str | os.PathLike[str], text_columns: Sequence[Hashable] = ()) -> pd.DataFrame:
    """Read a CSV file as a table whose columns are exactly the header's names.

    pandas renames what it cannot use as it is: a repeated name ``b`` becomes ``b.1``, an
    empty one ``Unnamed: 3``, and rows longer than the header turn their first fields
    into the index. Each of those raises here instead of reaching a model under a name
    the file does not hold. Unreadable files raise ``CsvReadError``.

    ``text_columns`` (those the file has) are read as the text written, e.g. a panel's ids: pandas
    would read ``007`` as the number 7 and ``NA`` as missing. Only an empty field is missing there.
    """
    path = Path(path)
    try:
        # A header's names are text: another key would name a column by position.
        frame = pd.read_csv(path, dtype={column: str for column in text_columns if isinstance(column, str)})
        header = [] if frame.columns.empty else _raw_header(path)
    except FileNotFoundError as error:
        raise CsvReadError(f"{path}: no such file. Fix: check the path (it is read as CSV).") from error
    except IsADirectoryError as error:
        raise CsvReadError(f"{path}: is a directory, not a CSV file. Fix: name the file.") from error
    except pd.errors.EmptyDataError as error:
        raise CsvReadError(
            f"{path}: the file is empty. Fix: give a CSV with a header line (date column and "
            "numeric columns) and data rows."
        ) from error
    except (pd.errors.ParserError, UnicodeDecodeError) as error:
        raise CsvReadError(
            f"{path}: cannot be parsed as a UTF-8 CSV table ({error}). Fix: save it as "
            "comma-separated UTF-8 text with one header line."
        ) from error
    _check_header(path, header, frame)
    for column in text_columns:
        if column in frame.columns and frame[column].isna().any():
            # pandas' missing-value markers ('NA', 'null', 'nan') are ids as written; only an empty field is none.
            written = pd.read_csv(path, usecols=[column], dtype=str, keep_default_na=False)[column]
            frame[column] = written.where(written != "")
    return frame


def _raw_header(path: Path) -> list[str]:
    """The header line's fields as written (compressed files included)."""
    first = pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False)
    return first.iloc[0].tolist()


def _check_header(path: Path, header: list[str], frame: pd.DataFrame) -> None:
    comment = _comment_fix(header)
    if comment:  # whatever else it would break: the date column's name, the count of fields
        raise CsvReadError(f"{path}: {comment}")
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        renamed = [column for column in frame.columns if str(column).split(".")[0] in repeated]
        raise DuplicateColumnError(
            f"{path}: the header names column(s) {repeated!r} more than once (pandas would read them as "
            f"{renamed!r}). Fix: give every column its own name."
        )
    empty = [position for position, name in enumerate(header) if not name.strip()]
    if empty:
        hint = (
            " The first column is unnamed, as in a file written by DataFrame.to_csv() with its index: save "
            "it with to_csv(index=False)."
            if empty[0] == 0 else ""
        )
        raise CsvReadError(
            f"{path}: header field(s) {[p + 1 for p in empty]} (counting from 1) have no name, so their "
            f"columns cannot be chosen or reported (pandas would call them "
            f"{[frame.columns[p] for p in empty if p < len(frame.columns)]!r}). Fix: name every column, "
            f"or delete the unnamed ones.{hint}"
        )
    if not isinstance(frame.index, pd.RangeIndex):
        fix = (_separator_fix(header, decimal_commas=True)
               or "Fix: give every column a name in the header line (or remove trailing separators from the rows).")
        raise CsvReadError(
            f"{path}: the data rows have {frame.index.nlevels + len(frame.columns)} fields but the header has "
            f"{len(frame.columns)}, so pandas would turn the first field(s) into an index. {fix}"
        )


def _comment_fix(header: Sequence[Hashable]) -> str:
    """For a first line that is a comment (``# exported by ...``: a hash, then a space), read as the header: the
    fix, else ``""``. A column may be called ``#`` or ``#id``."""
    if not header or not re.match(r"#+\s", str(header[0])):
        return ""
    return (f"The first line, {','.join(map(str, header))!r}, looks like a comment, not the header. Fix: delete the "
            "comment lines above the header, e.g. pd.read_csv(path, comment='#').to_csv(new_path, index=False).")


def _separator_fix(header: Sequence[Hashable], *, decimal_commas: bool = False) -> str:
    """For a header read as one field that holds another separator: the fix, else ``""``. A ';'-separated file
    (a European spreadsheet's) often writes decimal commas, which split its rows into more fields than its
    header (``decimal_commas``)."""
    separators = [sep for sep in (";", "\t", "|") if len(header) == 1 and sep in str(header[0])]
    if not separators:
        return ""
    decimal = ", decimal=','" if decimal_commas else ""
    return (f"The header looks {separators[0]!r}-separated{' and the numbers hold decimal commas' * decimal_commas}. "
            f"Fix: save the file comma-separated with decimal points, e.g. pd.read_csv(path, sep={separators[0]!r}"
            f"{decimal}).to_csv(new_path, index=False).")


def parse_dates(raw: pd.Series, *, column: Hashable, origin: Origin, date_format: str | None = None
                ) -> pd.DatetimeIndex:
    """Parse a date column; empty or unparsable values raise ``UnparsableDateError``. Text is read in
    ``date_format`` when given (:func:`day_month_format`'s), else as pandas infers it."""
    if pd.api.types.is_datetime64_any_dtype(raw.dtype):
        parsed = raw
    elif pd.api.types.is_numeric_dtype(raw.dtype):
        # 20240131: a date written as a number, which pandas would read as nanoseconds since 1970.
        as_days = (pd.to_datetime(raw.astype("string"), format="%Y%m%d", errors="coerce")
                   if pd.api.types.is_integer_dtype(raw.dtype) else None)
        # Spreadsheet serials count days from 1899-12-30: 20000-80000 are the years 1954-2119.
        spreadsheet = bool(raw.between(20_000, 80_000).all())
        convert = (f"pd.to_datetime(df[{column!r}].astype(str), format='%Y%m%d') (its numbers are dates written "
                   "YYYYMMDD)" if as_days is not None and as_days.notna().all()
                   else f"pd.to_datetime(df[{column!r}], unit='D', origin='1899-12-30') (its numbers look like "
                   "spreadsheet day serials)" if spreadsheet
                   else f"pd.to_datetime(df[{column!r}], unit='s') (if they are seconds since 1970)")
        raise UnparsableDateError(
            f"{origin.label}: date column {column!r} holds numbers ({raw.dtype}), not timestamps. "
            f"Fix: convert it first, e.g. df[{column!r}] = {convert}, or name the right column with "
            "date_column=..."
        )
    elif date_format is not None:
        parsed, offsets_vary = _read_in_format(raw, date_format)
        parsed = (_on_their_clock(raw, parsed, origin=origin, column=column) if offsets_vary
                  else _one_offset_on_their_clock(raw, parsed, origin=origin, column=column))
    else:
        parsed = _parse_date_strings(raw, column=column, origin=origin)
    missing = np.flatnonzero(pd.isna(parsed).to_numpy())
    if missing.size:
        position = int(missing[0])
        value = raw.iloc[position]
        written = f" written {date_format!r}" if date_format is not None and not pd.isna(value) else ""
        what = "is empty" if pd.isna(value) else f"holds {value!r}, which is not a date{written}"
        raise UnparsableDateError(
            f"{origin.label}: date column {column!r}, {origin.row(position, raw.index)} {what} "
            f"({missing.size} such rows). Fix: correct or drop those rows."
        )
    return pd.DatetimeIndex(parsed).rename(None)


def day_month_format(raw: pd.Series, *, column: Hashable, origin: Origin, freq: str | pd.DateOffset | None = None,
                     groups: pd.Series | None = None, known: str | None = None) -> str | None:
    """The format of text dates that lead with day and month (``'01/02/2024'``), in the order that fits them;
    ``None`` for other dates (year first, month names: pandas infers one reading) or when neither order reads
    every row (:func:`parse_dates` then names the bad rows).

    pandas takes the first date month first, so twelve daily rows ``01/01/2024 .. 12/01/2024`` written day
    first would become a monthly series. ``known`` (the format a fit read its dates in) is taken when it reads
    every row; else the order that does; when both do, the one whose steps are regular (follow ``freq`` when
    given) in every series (``groups``: each row's series id). When that does not tell them apart,
    ``UnparsableDateError`` names both readings and the fix.
    """
    present = raw.dropna()
    if present.empty or not isinstance(present.iloc[0], str):
        return None
    first = present.iloc[0]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Parsing dates in", UserWarning)  # the day-first guess, asked for here
        guessed = guess_datetime_format(first), guess_datetime_format(first, dayfirst=True)
    found = next((guess for guess in guessed if guess is not None), None)
    short_year = re.fullmatch(r"\d{1,2}([/.-])\d{1,2}\1\d{2}", first.strip())
    if found is None and short_year:  # '13/01/23': pandas guesses no format with a two-digit year
        found = "%d{0}%m{0}%y".format(short_year.group(1))
    if found is None or not found.startswith(("%m", "%d")) or "%m" not in found or "%d" not in found:
        return None
    swapped = found.replace("%m", "<month>").replace("%d", "%m").replace("<month>", "%d")
    day_first, month_first = (found, swapped) if found.startswith("%d") else (swapped, found)
    readings = {}
    for date_format in (day_first, month_first):
        try:
            parsed = _read_in_format(present, date_format)[0]
        except (ValueError, TypeError, OverflowError):
            continue
        if parsed.notna().all():
            readings[date_format] = parsed
    if known in readings:
        return known
    if len(readings) == 2 and readings[day_first].equals(readings[month_first]):
        return day_first  # day and month alike on every row (01/01, 02/02): nothing to tell
    if len(readings) < 2:
        chosen = next(iter(readings), None)
        if chosen is not None and guessed[0] != guessed[1]:
            logger.info("%s: date column %r read as %r, the only day and month order every row fits.",
                        origin.label, column, chosen)
        return chosen
    regular = {date_format: _regular_steps(parsed, freq, groups) for date_format, parsed in readings.items()}
    if sum(regular.values()) == 1:
        chosen = day_first if regular[day_first] else month_first
        logger.info("%s: date column %r read as %r: its dates read both day first and month first, and only this "
                    "order gives regular steps%s.", origin.label, column, chosen,
                    f" of freq {parse_offset(freq).freqstr!r}" if freq is not None else "")
        return chosen
    steps = {date_format: _steps_of(parsed, groups) for date_format, parsed in readings.items()}
    spans = [f"{date_format!r} reads {parsed.min()} to {parsed.max()}{steps[date_format]}"
             for date_format, parsed in readings.items()]
    rule = f"follow freq={parse_offset(freq).freqstr!r}" if freq is not None else "are regular"
    # freq tells them apart only when one reading's steps are regular and the two differ.
    by_freq = ("pass freq=<the series' frequency, e.g. 'D'> to take the order whose steps follow it, "
               if freq is None and any(regular.values()) and (groups is not None or len(set(steps.values())) > 1)
               else "")
    raise UnparsableDateError(
        f"{origin.label}: date column {column!r} reads both day first and month first (e.g. {first!r}): "
        f"{spans[0]}, {spans[1]}, and {'both give' if any(regular.values()) else 'neither gives'} steps that "
        f"{rule}, so the order cannot be told. Fix: {by_freq}write the dates as ISO 8601 (2024-01-31), or "
        f"parse them first with pd.to_datetime(df[{column!r}], format={day_first!r}) (or {month_first!r})."
    )


def _read_in_format(values: pd.Series, date_format: str) -> tuple[pd.Series, bool]:
    """``values`` read in ``date_format``, NaT where one does not fit it, and whether their UTC offsets vary.
    Offsets that differ from row to row (daylight saving) each name one instant: read as UTC, the one clock on
    which they all keep their steps."""
    try:
        return pd.to_datetime(values, format=date_format, errors="coerce"), False
    except ValueError:
        if "%z" not in date_format:
            raise
        return pd.to_datetime(values, format=date_format, errors="coerce", utc=True), True


_UTC_OFFSET = r"([+-])(\d{2}):?(\d{2})$"  # how to_csv and ISO 8601 write one: +01:00, -0500


def at_one_time_of_day(dates: pd.DatetimeIndex) -> bool:
    """Whether every timestamp is at one time of day on its own clock (daily or coarser rows)."""
    return (dates - dates.normalize()).nunique() == 1


def _one_offset_on_their_clock(raw: pd.Series, parsed: pd.Series, *, origin: Origin, column: Hashable) -> pd.Series:
    """``parsed`` from ``raw``, text that carries one UTC offset in every row, read as :func:`_on_their_clock` reads
    text whose offsets vary: rows at one time of day (daily or coarser) on their local clock, without a zone. Else
    one source read two ways: a winter's daily rows (+01:00 only) in a fixed zone, the year's (+01:00 and +02:00)
    without one, and a fit on one refused the other. Timestamps given as such keep their zone."""
    if parsed.dt.tz is None or pd.api.types.infer_dtype(raw, skipna=True) != "string":
        return parsed
    local = pd.DatetimeIndex(parsed).tz_localize(None)  # [T] the wall clock each row was written at
    on_local = _local_times(local, parsed.index, origin=origin, column=column,
                            because="every row is at {time} on the clock of its UTC offset")
    return parsed if on_local is None else on_local


def _local_times(local: pd.DatetimeIndex, index: pd.Index, *, origin: Origin, column: Hashable, because: str
                 ) -> pd.Series | None:
    """``local``, the wall clock each row was written at, as the dates without a zone when every row is at one
    time of day (logged: ``because``, its ``{time}`` that time), else ``None``."""
    if not at_one_time_of_day(local):
        return None
    logger.info("%s: date column %r: %s, so its timestamps are read, and forecasts written, as local times without a "
                "zone.", origin.label, column,
                because.format(time=local.dropna()[0].strftime("%H:%M")))  # an empty row (NaT) is reported after
    return pd.Series(local, index=index)


def _on_their_clock(raw: pd.Series, instants: pd.Series, *, origin: Origin, column: Hashable) -> pd.Series:
    """``raw``, whose UTC offsets vary from row to row (daylight saving), read on the clock its steps keep: the
    rows' own local clock, without a zone, when every row is at one local time of day (daily or coarser rows of
    a daylight-saving zone, which in UTC step by 23 and 25 hours twice a year), else UTC (``instants``), the one
    clock on which finer rows keep theirs."""
    found = raw.astype("string").str.strip().str.extract(_UTC_OFFSET)
    if not found.isna().any().any():
        minutes = (found[1].astype(int) * 60 + found[2].astype(int)) * found[0].map({"+": 1, "-": -1})
        # [T] the wall-clock time each row was written at
        local = pd.DatetimeIndex(instants).tz_convert(None) + pd.to_timedelta(minutes.to_numpy(), unit="min")
        on_local = _local_times(local, raw.index, origin=origin, column=column,
                                because="its UTC offsets vary (e.g. daylight saving) and every row is at {time} "
                                        "local time")
        if on_local is not None:
            return on_local
    logger.info("%s: date column %r: its UTC offsets vary (e.g. daylight saving), so its timestamps are read, and "
                "forecasts written, in UTC.", origin.label, column)
    return instants


def _steps_of(dates: pd.Series, groups: pd.Series | None) -> str:
    """`` in steps of 'D'`` for one series of dates with a frequency pandas infers, else ``""``."""
    inferred = _inferred_offset(pd.DatetimeIndex(dates).unique()) if groups is None else None
    return f" in steps of {inferred.freqstr!r}" if inferred is not None else ""


def _inferred_offset(stamps: pd.DatetimeIndex) -> pd.DateOffset | None:
    """The frequency pandas infers from three or more timestamps, else ``None``."""
    try:
        return pd.DatetimeIndex(stamps, freq="infer").freq if len(stamps) >= 3 else None
    except (ValueError, TypeError):
        return None


def _regular_steps(dates: pd.Series, freq: str | pd.DateOffset | None, groups: pd.Series | None) -> bool:
    """Whether every series (``groups``, aligned on ``dates``' index; ``None``: one series) steps by ``freq``,
    or by one frequency pandas infers when ``None``; a series too short to tell says nothing."""
    offset = parse_offset(freq) if freq is not None else None
    parts = [dates] if groups is None else [part for _, part in dates.groupby(groups.reindex(dates.index).to_numpy(),
                                                                               sort=False)]
    told = False
    for part in parts:
        stamps = pd.DatetimeIndex(part).unique()  # a repeated timestamp (allow_duplicates) is no step
        if len(stamps) < (2 if offset is not None else 3):
            continue
        told = True
        if offset is not None:
            regular = bool((stamps[:-1] + offset == stamps[1:]).all())
        else:
            regular = _inferred_offset(stamps) is not None
        if not regular:
            return False
    return told


NAIVE = "naive"  # the time zone a fit records for timestamps that have none


def zone_name(dates: pd.DatetimeIndex) -> str | None:
    """The time zone of ``dates`` as a fit records it: :data:`NAIVE` for none, else a name pandas reads back
    (``'UTC'``, ``'Europe/Paris'``, ``'UTC+01:00'``); ``None`` for a zone without one (a dateutil file)."""
    if dates.tz is None:
        return NAIVE
    name = str(dates.tz)
    try:
        kept = dates.tz_convert(name).tz_localize(None).equals(dates.tz_localize(None))  # the same wall clock
    except (ValueError, TypeError, KeyError):  # an unknown zone name (zoneinfo's and pytz's are KeyErrors)
        kept = False
    if not kept:  # new data in another zone would be stamped, and its calendar features computed, in that one
        logger.warning("time zone %r has no name to save, so new data is read in whatever zone it is in. Fix: give "
                       "the timestamps a named zone, df[col] = df[col].dt.tz_convert('Europe/Berlin') (an IANA name, "
                       "zoneinfo's), or convert them to 'UTC'.", dates.tz)
    return name if kept else None


def to_zone(dates: pd.DatetimeIndex, time_zone: str | None, *, column: Hashable, origin: Origin,
            whose: str = "the fitted data's", on_index: bool = False) -> pd.DatetimeIndex:
    """``dates`` in ``time_zone`` (:func:`zone_name`'s; ``None``: as they are): another zone's timestamps are
    converted, the same instants on the clock that time features and steps were computed on; DataError for
    timestamps with a zone where ``time_zone`` has none, or the other way round (``whose`` names it; ``on_index``:
    the dates are the table's index, which its fix names)."""
    if time_zone is None or (time_zone == NAIVE and dates.tz is None):
        return dates
    # the dates as code names them: a column's values, or the index (``on_index``, which has no .dt)
    named, values = ("df.index", "df.index") if on_index else (f"df[{column!r}]", f"df[{column!r}].dt")
    if time_zone == NAIVE:
        raise DataError(
            f"{origin.label}: date column {column!r} is in time zone {str(dates.tz)!r}, but {whose} timestamps "
            f"have none. Fix: give them as local times without a zone, in the zone {whose} were recorded in: "
            f"{named} = {values}.tz_convert('<that zone>').tz_localize(None)."
        )
    if dates.tz is None:
        example = "'UTC' for UTC times" if time_zone == "UTC" else f"{time_zone!r} for its local times or 'UTC'"
        raise DataError(
            f"{origin.label}: date column {column!r} has no time zone, but {whose} timestamps are in "
            f"{time_zone!r}. Fix: give them their zone, {named} = {values}.tz_localize(<their zone>), e.g. "
            f"{example}; any zone is converted to {time_zone!r}."
        )
    if str(dates.tz) != time_zone:
        logger.info("%s: date column %r converted from time zone %r to %r, that of %s timestamps.",
                    origin.label, column, str(dates.tz), time_zone, whose)
    return dates.tz_convert(time_zone)


def _as_utc(raw: pd.Series) -> pd.Series | None:
    """The values as UTC instants when every one parses so (one without a zone read as UTC), else ``None``."""
    # The first value's format, else ISO 8601's variants: one with an offset and one without are two formats.
    for date_format in (None, "ISO8601"):
        try:
            with warnings.catch_warnings():
                # pandas warns when the first value gives no format, or reads day-first text month first; a
                # probe's answer is the instants or None.
                warnings.filterwarnings("ignore", "Could not infer format", UserWarning)
                warnings.filterwarnings("ignore", "Parsing dates in", UserWarning)
                parsed = pd.to_datetime(raw, utc=True, format=date_format)
        except (ValueError, TypeError, OverflowError):
            continue
        return None if pd.isna(parsed).any() else parsed
    return None


_DIGITS = re.compile(r"\d")


def _zoned(value: object) -> bool:
    try:
        with warnings.catch_warnings():  # a probe of the offset: day-first text read month first says nothing
            warnings.filterwarnings("ignore", "Parsing dates in", UserWarning)
            return pd.Timestamp(value).tzinfo is not None
    except (ValueError, TypeError, OverflowError):
        return False


def _zoned_rows(raw: pd.Series) -> np.ndarray:
    """``[T]`` bool: whether each value carries a time zone or UTC offset."""
    shapes: dict[str, bool] = {}
    zoned = np.zeros(len(raw), dtype=bool)
    for position, value in enumerate(raw):
        if isinstance(value, str):
            # Text written alike but for its digits carries an offset alike: one value of each shape tells.
            shape = _DIGITS.sub("0", value)
            if shape not in shapes:
                shapes[shape] = _zoned(value)
            zoned[position] = shapes[shape]
        else:
            zoned[position] = _zoned(value)
    return zoned


def _utc_read_fix(raw: pd.Series, column: Hashable) -> str:
    """The ``pd.to_datetime(..., utc=True)`` call that reads ``raw``, zoned and unzoned rows alike: pandas refuses
    ``utc=True`` alone on text whose rows differ in their offset (one format is inferred from the first row)."""
    call = f"df[{column!r}] = pd.to_datetime(df[{column!r}], utc=True, format="
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            iso = pd.to_datetime(raw, utc=True, format="ISO8601")
        if not pd.isna(iso[raw.notna()]).any():
            return call + "'ISO8601')"
    except (ValueError, TypeError, OverflowError):
        pass
    # Not ISO 8601: each row read in its own format, which reads '01/02/2024' month first unless told otherwise.
    return call + "'mixed') (with dayfirst=True if the day is written before the month)"


def _parse_date_strings(raw: pd.Series, *, column: Hashable, origin: Origin) -> pd.Series:
    try:
        with warnings.catch_warnings(record=True) as said:
            # pandas warns when the first value gives no format (e.g. 'tomorrow'), then fails on it:
            # the fallbacks below parse with explicit formats or report the row.
            warnings.filterwarnings("ignore", "Could not infer format", UserWarning)
            parsed = pd.to_datetime(raw)
    except (ValueError, TypeError, OverflowError) as strict_error:
        # Variants of ISO 8601 ('2021-01-01 03:00', '2021-01-01T04:00') read one way only.
        try:
            return _one_offset_on_their_clock(raw, pd.to_datetime(raw, format="ISO8601"), origin=origin, column=column)
        except (ValueError, TypeError, OverflowError):
            pass
        as_utc = _as_utc(raw)
        # In any format (day first too, which as_utc does not read), a row without the offset others carry.
        zoned = _zoned_rows(raw)
        if zoned.all() and as_utc is not None:
            # Each row's offset names one instant (a daylight-saving zone written by to_csv changes it twice a year).
            return _on_their_clock(raw, as_utc, origin=origin, column=column)
        if zoned.any() and not zoned.all():
            unzoned = int(np.flatnonzero(~zoned)[0])
            raise UnparsableDateError(
                f"{origin.label}: date column {column!r} mixes zoned and unzoned timestamps: "
                f"{origin.row(unzoned, raw.index)} holds {raw.iloc[unzoned]!r}, without the time zone or UTC offset "
                "other rows carry, so it names no instant. Fix: give every row its offset, or, if the unzoned ones "
                f"are UTC times, read the column with {_utc_read_fix(raw, column)}."
            ) from strict_error
        # Rows that are no date in any format are reported by the caller, row by row.
        try:
            parsed = pd.to_datetime(raw, format="mixed", errors="coerce")
        except (ValueError, TypeError) as error:
            raise UnparsableDateError(
                f"{origin.label}: date column {column!r} cannot be parsed ({error}). Fix: use one "
                "timestamp format and one time zone (e.g. ISO 8601, converted to UTC)."
            ) from error
        if pd.isna(parsed[raw.notna()]).any():
            return parsed
        # Every row is a date, in more than one format. Refused: row by row, '01/02/2021'
        # and '13/02/2021' would silently become January 2 and February 13.
        raise UnparsableDateError(_mixed_format_message(raw, column, origin, strict_error)) from strict_error
    # What pandas said of a column it read stands; of one it could not read, the messages above say what is wrong.
    for warning in said:
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return _one_offset_on_their_clock(raw, parsed, origin=origin, column=column)


def _mixed_format_message(raw: pd.Series, column: Hashable, origin: Origin, error: Exception) -> str:
    """Name the first row that does not follow the format of the first date."""
    present = raw.dropna()
    first = str(present.iloc[0]) if len(present) else ""
    date_format = guess_datetime_format(first) if first else None
    where = f"({error})"
    if date_format is not None:
        parsed = pd.to_datetime(raw, format=date_format, errors="coerce")
        bad = np.flatnonzero((pd.isna(parsed) & raw.notna()).to_numpy())
        if bad.size:
            position = int(bad[0])
            where = (
                f"the first date {first!r} reads as {date_format!r}, but {origin.row(position, raw.index)} holds "
                f"{raw.iloc[position]!r} ({bad.size} such rows)"
            )
    return (
        f"{origin.label}: date column {column!r} mixes date formats: {where}. Guessing each row's format "
        "could read day and month the wrong way round. Fix: write the dates in one format (ISO 8601, "
        "e.g. 2021-01-31 23:00), or parse them first with pd.to_datetime(df[col], format=...)."
    )


Table = Union[pd.DataFrame, pd.Series, str, os.PathLike]
"""What the package reads as a series: a DataFrame, a Series indexed by time, or a CSV path."""

SERIES_COLUMN = "value"  # the variable's name for a pd.Series that has none


def read_table(data: Table, text_columns: Sequence[Hashable] = ()) -> tuple[pd.DataFrame, Origin]:
    """A DataFrame as it is, a Series as a one-column frame, or a CSV path read (its ``text_columns`` as the
    text written: :func:`read_csv`); with the origin used in messages. DuplicateColumnError for a frame with two
    columns of one name."""
    if isinstance(data, pd.Series):
        return _series_frame(data), Origin("<Series>")
    if isinstance(data, pd.DataFrame):
        repeated = sorted(set(data.columns[data.columns.duplicated()]), key=str)
        if repeated:
            raise DuplicateColumnError(f"{DATAFRAME_SOURCE}: column(s) {repeated!r} appear more than once. Fix: "
                                       "give every column its own name.")
        return _periods_as_timestamps(data, DATAFRAME_SOURCE), Origin(DATAFRAME_SOURCE)
    if isinstance(data, (str, os.PathLike)):
        return read_csv(data, text_columns), Origin.of_file(data)
    raise DataError(
        f"data of type {type(data).__name__}. Fix: pass a DataFrame, a Series indexed by timestamps, or a CSV path."
    )


def index_level_fix(frame: pd.DataFrame, column: Hashable) -> str | None:
    """Why ``column`` is missing from ``frame.columns`` when it names a level of its index, with the fix; else None.

    A panel indexed by ``(id, date)`` (``set_index([...])``) is common; "not a column" alone reads as a typo.
    """
    names = list(frame.index.names)
    if column is None or column not in names:
        return None
    return f"is a level of the table's index {names!r}, not a column. Fix: df.reset_index() makes it a column"


def _python_dates(values: pd.Series | pd.Index) -> bool:
    """Whether ``values`` are Python ``datetime.date`` objects (``df['ts'].dt.date``, ``groupby(...dt.date)``'s
    index), which pandas keeps as objects, not timestamps."""
    if not pd.api.types.is_object_dtype(values.dtype):  # every numeric column of every table read: no copy
        return False
    present = values.dropna()
    return len(present) > 0 and all(type(value) is datetime.date for value in present)


def _periods_as_timestamps(frame: pd.DataFrame, label: str) -> pd.DataFrame:
    """``frame`` with its Period columns and PeriodIndex (pandas' spans: ``to_period('M')``, ``period_range``) as
    the timestamps their periods start at, and its columns and index of ``datetime.date`` as midnights, in a copy;
    the frame itself where it has none."""
    periods = [column for column in frame.columns if isinstance(frame[column].dtype, pd.PeriodDtype)]
    days = [column for column in frame.columns if _python_dates(frame[column])]
    if not periods and not days and not isinstance(frame.index, pd.PeriodIndex) and not _python_dates(frame.index):
        return frame
    converted = frame.copy(deep=False)
    for column in periods:
        converted[column] = converted[column].dt.to_timestamp()
    for column in days:
        converted[column] = pd.to_datetime(converted[column])
    if isinstance(converted.index, pd.PeriodIndex):
        converted.index = converted.index.to_timestamp()
        periods.append("<index>")
    elif _python_dates(converted.index):
        converted.index = pd.DatetimeIndex(pd.to_datetime(converted.index), name=converted.index.name)
        days.append("<index>")
    if periods:
        logger.info("%s: the periods of %s are read as the timestamps they start at.", label,
                    ", ".join(map(repr, periods)))
    if days:
        logger.info("%s: the dates (datetime.date) of %s are read as timestamps at midnight.", label,
                    ", ".join(map(repr, days)))
    return converted


def _series_frame(series: pd.Series) -> pd.DataFrame:
    if isinstance(series.index, pd.PeriodIndex):
        series = series.set_axis(series.index.to_timestamp())
        logger.info("<Series>: the periods of its index are read as the timestamps they start at.")
    elif _python_dates(series.index):
        series = series.set_axis(pd.DatetimeIndex(pd.to_datetime(series.index), name=series.index.name))
        logger.info("<Series>: the dates (datetime.date) of its index are read as timestamps at midnight.")
    if not isinstance(series.index, pd.DatetimeIndex):
        raise MissingDateColumnError(
            f"<Series>: its index is a {type(series.index).__name__}, not timestamps. Fix: index it by a "
            "DatetimeIndex (series.index = pd.to_datetime(...)), or pass a DataFrame with a date column."
        )
    name = series.name
    if name is None:
        logger.info("<Series>: it has no name; its variable is called %r.", SERIES_COLUMN)
        name = SERIES_COLUMN
    return series.to_frame(name)


_CONVENTIONAL_DATE_NAMES = ("date", "ds", "timestamp", "time", "datetime")


_DATE_SAMPLE = 100  # values looked at to tell a column of timestamps from one of text or numbers


def _looks_like_dates(column: pd.Series) -> bool:
    """Whether a column holds timestamps: datetime values, or text of which most values read as dates and
    none of those as a number.

    Most, not all: a date column with a bad row is still found, and :func:`parse_dates` reports that
    row. Numbers never count: pandas reads ``'2024'``, ``'007'`` or ``'1,234.5'`` as dates, so a numeric
    column left as text by one bad cell (``'?'``) would pass for a second date column, and a panel's
    numeric-looking ids for a first one.
    """
    if pd.api.types.is_datetime64_any_dtype(column.dtype):
        return True
    if not (pd.api.types.is_object_dtype(column.dtype) or pd.api.types.is_string_dtype(column.dtype)):
        return False
    sample = column.dropna().iloc[:_DATE_SAMPLE]
    text = sample[[isinstance(value, str) for value in sample]].astype(str)
    if text.empty:
        return False
    numbers = pd.to_numeric(text.str.replace(",", "", regex=False), errors="coerce").notna()
    with warnings.catch_warnings():
        # pandas warns about formats and day-first readings; whether a value reads as a date is the answer here.
        warnings.simplefilter("ignore", UserWarning)
        try:
            dates = pd.to_datetime(text, format="mixed", errors="coerce", utc=True).notna()
        except (ValueError, TypeError, OverflowError):
            return False
    return 2 * int((dates & ~numbers).sum()) > len(sample)


_TIME_OF_DAY = re.compile(r"\s*\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?\s*")  # '13:45', '13:45:00.5': no date


def _times_of_day(column: pd.Series) -> bool:
    """Whether a column's values are times of day without dates (which pandas reads as today's)."""
    sample = column.dropna().iloc[:_DATE_SAMPLE]
    return len(sample) > 0 and all(isinstance(value, str) and _TIME_OF_DAY.fullmatch(value) for value in sample)


def _date_and_time_fix(frame: pd.DataFrame) -> str:
    """The fix for a timestamp written in two columns, its date in one and its time of day in another (the UCI
    household-power layout, many SCADA exports), else ``""``."""
    times = [column for column in frame.columns if _times_of_day(frame[column])]
    dates = [column for column in frame.columns if column not in times and _looks_like_dates(frame[column])]
    if len(times) != 1 or len(dates) != 1:
        return ""
    return (f"Columns {dates[0]!r} and {times[0]!r} hold the dates and the times of day of one timestamp. Fix: join "
            f"them into one column, df['timestamp'] = pd.to_datetime(df[{dates[0]!r}] + ' ' + df[{times[0]!r}]) "
            "(dayfirst=True for dates like 31/01/2024; a CSV read with pd.read_csv first), and pass that frame.")


def _find_date_column(frame: pd.DataFrame, origin: Origin) -> Hashable | None:
    """The one datetime-like column (``None``: the DatetimeIndex); else an error naming the candidates."""
    candidates = [column for column in frame.columns if _looks_like_dates(frame[column])]
    if isinstance(frame.index, pd.DatetimeIndex) and not candidates:
        logger.info("%s: timestamps from the DatetimeIndex.", origin.label)
        return None
    if len(candidates) == 1:
        logger.info("%s: date column %r (the only column holding timestamps).", origin.label, candidates[0])
        return candidates[0]
    if isinstance(frame.index, pd.DatetimeIndex):
        raise MissingDateColumnError(
            f"{origin.label}: both the DatetimeIndex and column(s) {candidates!r} hold timestamps. Fix: pass "
            "date_column=<one of the columns>, or drop the date columns to use the index."
        )
    if candidates:
        raise MissingDateColumnError(
            f"{origin.label}: columns {candidates!r} all hold timestamps. "
            f"{_date_and_time_fix(frame) or 'Fix: name the time axis with date_column=<one of them>.'}"
        )
    named = [column for column in frame.columns if str(column).lower() in _CONVENTIONAL_DATE_NAMES]
    if len(named) == 1:
        return named[0]  # holds no timestamps: parse_dates says what is wrong with it
    levels = [name for name, level in zip(frame.index.names, frame.index.levels, strict=True)
              if isinstance(level, pd.DatetimeIndex)] if isinstance(frame.index, pd.MultiIndex) else []
    if levels:  # e.g. a panel indexed by (id, date): only a DatetimeIndex alone is read as the time axis
        fix = (f"Fix: the timestamps are level {levels[0]!r} of the table's index {list(frame.index.names)!r}; "
               "df.reset_index() makes them a column.")
    elif not isinstance(frame.index, pd.MultiIndex) and _looks_like_dates(frame.index.to_series()):
        fix = ("Fix: the table's index holds dates as text; make them timestamps: df.index = "
               "pd.to_datetime(df.index).")
    else:
        fix = _separator_fix(list(frame.columns)) or ("Fix: pass date_column=<the name of the timestamp column>, "
                                                      "or index the data by a DatetimeIndex.")
    raise MissingDateColumnError(f"{origin.label}: no column holds timestamps; the columns are "
                                 f"{list(frame.columns)!r}. {fix}")


def _extract_dates(
    frame: pd.DataFrame, date_column: Hashable | None, origin: Origin, freq: str | pd.DateOffset | None = None,
    date_format: str | None = None,
) -> tuple[pd.DatetimeIndex, list[Hashable], Hashable | None, str | None]:
    """The parsed dates, the names of the other columns, the name of the time axis (a column's, or
    the DatetimeIndex's own name, which may be ``None``) and the format its text was read in
    (:func:`day_month_format`; ``date_format``: a fit's, ``freq`` tells the order).

    ``date_column=None`` finds the time axis: the DatetimeIndex, else the one column that
    holds timestamps.
    """
    if isinstance(frame.columns, pd.MultiIndex):
        raise DataError(
            f"{origin.label}: the columns have {frame.columns.nlevels} levels ({list(frame.columns)[:3]!r}...). "
            "Fix: flatten them to one level of names first, e.g. df.columns = ['_'.join(map(str, c)) for c in "
            "df.columns]."
        )
    if date_column is None:
        date_column = _find_date_column(frame, origin)
        if date_column is None:
            dates = parse_dates(frame.index.to_series(), column="<index>", origin=origin)
            return dates, list(frame.columns), frame.index.name, None
    if date_column in frame.columns:
        raw = frame[date_column]
        if _times_of_day(raw):
            raise UnparsableDateError(
                f"{origin.label}: date column {date_column!r} holds times of day without their dates "
                f"({raw.dropna().iloc[0]!r}), which would be read as today's. "
                f"{_date_and_time_fix(frame) or 'Fix: name the column that holds whole timestamps.'}"
            )
        date_format = day_month_format(raw, column=date_column, origin=origin, freq=freq, known=date_format)
        dates = parse_dates(raw, column=date_column, origin=origin, date_format=date_format)
        return dates, [c for c in frame.columns if c != date_column], date_column, date_format
    if isinstance(frame.index, pd.DatetimeIndex) and frame.index.name == date_column:
        # A frame indexed by its date column (df.set_index('date')).
        dates = parse_dates(frame.index.to_series(), column=date_column, origin=origin)
        return dates, list(frame.columns), date_column, None
    index = (
        f" The index holds timestamps (named {frame.index.name!r}): pass date_column=None to use it."
        if isinstance(frame.index, pd.DatetimeIndex) else ""
    )
    raise MissingDateColumnError(
        f"{origin.label}: no date column {date_column!r}; the columns are "
        f"{list(frame.columns)!r}.{spelt_alike([date_column], list(frame.columns))} Fix: pass "
        "date_column=<the name of the timestamp column>, or "
        f"date_column=None to find the one column holding timestamps.{index}"
    )


def spelt_alike(names: Sequence[Hashable], columns: Sequence[Hashable]) -> str:
    """`` The table spells 'OT' as 'Ot'.`` for each of ``names`` that is no column but differs from one only in
    case or surrounding spaces, else ``""``."""
    def key(name: Hashable) -> str:
        return str(name).strip().lower()

    def quote(name: Hashable, column: Hashable) -> str:  # a config's unquoted 1 is a number, the header's '1' text
        return " (text: quote it in YAML and on the command line)" if isinstance(column, str) and not isinstance(
            name, str) else ""

    alike = [(name, column) for name in names for column in columns
             if name not in columns and key(column) == key(name)]
    return "".join(f" The table spells {name!r} as {column!r}{quote(name, column)}." for name, column in alike)


def _step_faults(dates: pd.DatetimeIndex) -> tuple[np.ndarray, np.ndarray]:
    """``(backwards, repeated)``: the steps ``i`` (from row i to row i+1) whose timestamp goes back, and
    those whose timestamp repeats."""
    steps = dates[1:] - dates[:-1]
    return np.flatnonzero(steps < pd.Timedelta(0)), np.flatnonzero(steps == pd.Timedelta(0))


# The months in which local clocks change for daylight saving somewhere (north: March, October, November; south:
# April, September, October).
_CLOCK_CHANGE_MONTHS = (3, 4, 9, 10, 11)


def _clock_change_hint(dates: pd.DatetimeIndex, rows: np.ndarray) -> str:
    """The fix for timestamps without a time zone whose faulty ``rows`` all fall in the night hours of the months
    where local clocks change for daylight saving (an hour skipped in spring, one repeated in autumn); for dates
    without a time of day, that they lack it; for days at a local time recorded at a fixed UTC offset (23 and 25
    hours apart at the changes), the conversion to their zone; else ``""``."""
    if not rows.size:
        return ""
    if dates.tz is not None:
        offsets = dates.tz_localize(None) - dates.tz_convert("UTC").tz_localize(None)  # [T] each row's UTC offset
        fixed = offsets.nunique() == 1  # UTC, or 'UTC+01:00' all year
        if not (fixed and dates[rows].month.isin(_CLOCK_CHANGE_MONTHS).all()
                and (pd.Series(dates[1:] - dates[:-1]) >= pd.Timedelta(hours=23)).all()):
            return ""
        return (f" They fall where a local clock changes for daylight saving: rows at one local time of day, recorded "
                f"at a fixed offset ({dates.tz}), step by 23 and 25 hours there. Fix: convert them to their local zone "
                "(df[date] = df[date].dt.tz_convert('<your zone>')); otherwise")
    if (dates == dates.normalize()).all():
        per_day = int(pd.Series(1, index=dates[rows]).groupby(level=0).size().max()) + 1
        return (f" Every timestamp is a date without a time of day, and up to {per_day} rows share one: were the "
                "times left out when the dates were written? Fix: write the timestamps with their time of day; "
                "otherwise")
    faulty = dates[rows]
    if not ((faulty.hour < 4) & faulty.month.isin(_CLOCK_CHANGE_MONTHS)).all():
        return ""
    return (" They fall where a local clock changes for daylight saving (an hour skipped in spring, repeated in "
            "autumn). Fix: give the timestamps their time zone (df[date] = df[date].dt.tz_localize('<your zone>', "
            "ambiguous='infer')), or record them in UTC; otherwise")


def _check_order(dates: pd.DatetimeIndex, *, allow_duplicates: bool, origin: Origin) -> None:
    backwards, repeated = _step_faults(dates)
    if backwards.size:
        row = int(backwards[0]) + 1
        # An autumn clock change in sub-hourly rows goes back by less than an hour (02:45, then 02:00 again).
        within_hour = ((dates[backwards] - dates[backwards + 1]) < pd.Timedelta(hours=1)).all()
        fix = (_clock_change_hint(dates, backwards + 1) if within_hour else "") or " Fix:"
        raise UnsortedTimestampError(
            f"{origin.label}: timestamps go backwards at {origin.row(row)}: {dates[row - 1]} is "
            f"followed by {dates[row]} ({backwards.size} such places).{fix} "
            "sort the rows by date first (df.sort_values(date_column))."
        )
    if repeated.size and not allow_duplicates:
        row = int(repeated[0]) + 1
        fix = _clock_change_hint(dates, repeated + 1) or " Fix:"
        raise DuplicateTimestampError(
            f"{origin.label}: timestamp {dates[row]} appears on {origin.row(row - 1)} and "
            f"{origin.row(row)} ({repeated.size} repeated rows).{fix} "
            "drop or aggregate the duplicates (df.drop_duplicates(date_column) or df.groupby(date_column).mean()), "
            "or pass allow_duplicates=True to keep them as separate steps."
        )


def _long_format_hint(frame: pd.DataFrame, dates: pd.DatetimeIndex, date_column: Hashable | None) -> str:
    """The fix for a long-format panel read as one series: a column whose values split the rows into
    series, each with increasing and unique timestamps (``unique_id`` in ``unique_id, ds, y``)."""
    joined = _date_and_time_fix(frame)
    if joined:  # the repeats are the rows of one day, told apart by their times of day
        return f" {joined}"
    stamps = pd.Series(np.asarray(dates), index=frame.index)
    for column in frame.columns:
        ids = frame[column]
        if column == date_column or pd.api.types.is_float_dtype(ids.dtype) or pd.api.types.is_bool_dtype(ids.dtype):
            continue
        count = ids.nunique()
        if not 2 <= count <= len(frame) // 2:
            continue
        groups = stamps.groupby(ids.to_numpy(), sort=False)
        if all(group.is_monotonic_increasing and group.is_unique for _, group in groups):
            return (f" The rows look like a long-format panel of {count} series told apart by column {column!r}, "
                    f"each in time order. Fix: read it as one, fit(..., id_column={column!r}, target=<the column to "
                    f"forecast>); or forecast one series at a time (df[df[{column!r}] == some_id]), or make one "
                    f"column per series (df.pivot(index={date_column!r}, columns={column!r}, values=<the target "
                    "column>)).")
    return ""


def _holds_numbers(dtype: np.dtype) -> bool:
    """Whether a column's values are numbers as they are (booleans count as 0/1, durations do not)."""
    return pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_timedelta64_dtype(dtype)


def _default_target(frame: pd.DataFrame, variables: list[Hashable], features: str, origin: Origin) -> Hashable:
    """``S``/``MS`` without a named target: the last numeric column that is not a flag (a boolean column is an input
    such as a holiday, never the quantity a user forecasts without naming it)."""
    numeric = [c for c in variables
               if _holds_numbers(frame[c].dtype) and not pd.api.types.is_bool_dtype(frame[c].dtype)]
    if not numeric:
        raise NonNumericColumnError(
            f"{origin.label}: features={features!r} forecasts one target, and none of the columns "
            f"{variables!r} is numeric. Fix: pass target=<the column to forecast> after converting it to numbers."
        )
    logger.info("%s: target %r (the last numeric column that is not a flag; pass target=... to choose another).",
                origin.label, numeric[-1])
    return numeric[-1]


def _select_columns(
    frame: pd.DataFrame,
    variables: list[Hashable],
    *,
    features: str,
    target: Hashable | None,
    columns: Sequence[Hashable] | None,
    origin: Origin,
    fitted_columns: Sequence[Hashable] | None = None,
) -> tuple[tuple[Hashable, ...], tuple[Hashable, ...], Hashable | None]:
    """(input columns, output columns, target) in model order: table order, target last.

    Without a target, ``M`` keeps every chosen column as it is and ``S``/``MS`` take the
    last numeric one. ``fitted_columns`` (new rows of a fitted series) chooses instead of ``columns``: the
    variables a fit read, each required, every other column left unread.
    """
    if fitted_columns is not None:
        require_fitted_columns(variables, fitted_columns, origin.label)
        columns = fitted_columns
    if columns is not None:
        unknown = [c for c in columns if c not in variables]
        if unknown:
            raise UnknownColumnError(
                f"{origin.label}: columns={unknown!r} not in the table; its variable columns are "
                f"{variables!r}.{spelt_alike(unknown, variables)} Fix: pass names from that list."
            )
        chosen = set(columns) | ({target} if target in variables else set())
        variables = [c for c in variables if c in chosen]
    if not variables:
        raise NoVariablesError(
            f"{origin.label}: the table has no variable column besides the date. "
            "Fix: give at least one numeric column."
        )
    if target is None and features == "M":
        return tuple(variables), tuple(variables), None
    if target is None:
        target = _default_target(frame, variables, features, origin)
    if target not in variables:
        raise UnknownTargetError(
            f"{origin.label}: target {target!r} is not a column; the variable columns are "
            f"{variables!r}.{spelt_alike([target], variables)} Fix: pass target=<one of them>, or target=None "
            "(features='M': every column; 'S'/'MS': the last numeric one)."
        )
    if features == "S":
        return (target,), (target,), target
    ordered = tuple(c for c in variables if c != target) + (target,)
    return ordered, (ordered if features == "M" else (target,)), target


def require_fitted_columns(variables: Sequence[Hashable], fitted: Sequence[Hashable], source: str) -> None:
    """UnknownColumnError naming the variables a fit read (``fitted``) that new data's ``variables`` lack."""
    missing = [column for column in fitted if column not in variables]
    if missing:
        raise UnknownColumnError(
            f"{source}: has no column(s) {missing!r} of those the model was fitted on {list(fitted)!r} (its "
            f"variables: {list(variables)!r}).{spelt_alike(missing, variables)} Fix: pass data holding every "
            "fitted variable."
        )


# How to leave a column of text out: a wide table's variables, a panel's (which the roles name).
_DROP_WIDE = "pass columns=[...] naming only numeric variables (features='S' uses the target alone)"
_DROP_PANEL = "leave it out of past_covariates and future_covariates (a panel's target must hold numbers)"


def _numeric_values(frame: pd.DataFrame, columns: Sequence[Hashable], origin: Origin, *, panel: bool = False
                    ) -> pd.DataFrame:
    """The chosen columns as float64; non-numbers raise ``NonNumericColumnError`` (whose fix, for a ``panel``,
    names its roles)."""
    drop = _DROP_PANEL if panel else _DROP_WIDE
    converted = {}
    for column in columns:
        series = frame[column]
        dtype = series.dtype
        if pd.api.types.is_complex_dtype(dtype):
            raise NonNumericColumnError(
                f"{origin.label}: column {column!r} holds complex numbers ({dtype}). Fix: pass its real part, "
                "its modulus or both as separate real columns."
            )
        if _holds_numbers(dtype):
            converted[column] = series.astype("float64")
            continue
        as_numbers = (
            pd.Series(np.nan, index=series.index)
            if pd.api.types.is_datetime64_any_dtype(dtype) or pd.api.types.is_timedelta64_dtype(dtype)
            else pd.to_numeric(series, errors="coerce")
        )
        bad = np.flatnonzero((as_numbers.isna() & series.notna()).to_numpy())
        if bad.size:
            position = int(bad[0])
            value = series.iloc[position]
            if as_numbers.notna().sum() > bad.size or _with_thousands_separators(value):
                raise NonNumericColumnError(_bad_cells_message(origin, column, frame.index, position, value, bad.size,
                                                               among_numbers=bool(as_numbers.notna().any()), drop=drop))
            raise NonNumericColumnError(
                f"{origin.label}: column {column!r} is not numeric: {origin.row(position, frame.index)} "
                f"holds {value!r} ({bad.size} such rows). Fix: convert it with pd.to_numeric, or {drop}."
            )
        converted[column] = as_numbers.astype("float64")
    return pd.DataFrame(converted, index=frame.index)


def _with_thousands_separators(value: object) -> bool:
    """Whether ``value`` is a number written with thousands separators ('1,000.5')."""
    return isinstance(value, str) and "," in value and not pd.isna(pd.to_numeric(value.replace(",", ""),
                                                                                errors="coerce"))


def _bad_cells_message(origin: Origin, column: Hashable, index: pd.Index, position: int, value: object,
                       count: int, *, among_numbers: bool, drop: str = _DROP_WIDE) -> str:
    """The message for a column of numbers with ``count`` cells that are not (the first at ``position``), the
    other cells numbers (``among_numbers``) or none (every one written with thousands separators); ``drop``
    says how to leave the column out."""
    thousands = _with_thousands_separators(value)
    if origin.is_file:
        option = "thousands=','" if thousands else f"na_values=[{value!r}]"
        convert = f"read the file with pd.read_csv(<the file>, {option}) and pass the DataFrame"
    elif thousands:
        convert = f"convert the column, e.g. pd.to_numeric(df[{column!r}].str.replace(',', ''))"
    else:
        convert = f"convert the column, e.g. pd.to_numeric(df[{column!r}], errors='coerce') (each such cell missing)"
    return (f"{origin.label}: column {column!r} is not numeric: {origin.row(position, index)} holds {value!r} "
            f"({count} such rows){' among numbers' if among_numbers else ''}. Fix: clean those cells (an empty one "
            "is a missing value), "
            f"{convert}, or drop the column: {drop}.")


def _fill_non_finite(values: pd.DataFrame, fill_nan: str | None, origin: Origin, *, panel: bool = False
                     ) -> tuple[pd.DataFrame, np.ndarray | None]:
    """The values with the fill policy applied to NaN and ±inf, and ``[T, C]`` bool of the cells it filled (``None``:
    none), or ``NonFiniteValueError`` (for a ``panel``'s series, naming where its future steps go)."""
    finite = np.isfinite(values.to_numpy())
    if finite.all():
        return values, None
    # A forecast starts after the last row: empty last rows, filled or not, would move it past the last observation.
    after_last = ~np.maximum.accumulate(finite[::-1], axis=0)[::-1] & finite.any(axis=0)  # [T, C] after the last value
    if after_last.any():
        column = int(np.flatnonzero(after_last.any(axis=0))[0])
        n_rows = int(after_last[:, column].sum())
        tail = values.iloc[len(values) - n_rows:, column].to_numpy()
        infinite = np.unique(tail[np.isinf(tail)])
        where = f"on its last {n_rows} row(s), from {origin.row(len(values) - n_rows, values.index)}"
        if infinite.size:  # not empty: values no forecast may start from
            raise NonFiniteValueError(
                f"{origin.label}: column {values.columns[column]!r} holds {' and '.join(map(str, infinite))} "
                f"{where}, after its last finite value: a forecast starts after the last row, and fill_nan fills "
                "non-finite values before the last finite one only. Fix: correct those values, or drop those rows."
            )
        future = " (a panel's future steps go in predict(..., future_covariates=...))" if panel else ""
        raise NonFiniteValueError(
            f"{origin.label}: column {values.columns[column]!r} is empty {where}: a forecast starts after the last "
            f"row, and fill_nan fills gaps before the last observation only. Fix: drop those rows{future}."
        )
    empty = values.columns[~finite.any(axis=0)]
    if len(empty):  # no fill policy helps
        fix = ("leave this series out of the table, or give it values in that column" if panel
               else "drop the column (or pass columns=[...] without it)")
        raise NonFiniteValueError(
            f"{origin.label}: column {empty[0]!r} holds no finite value (all {len(values)} rows are NaN or inf). "
            f"Fix: {fix}."
        )
    if fill_nan is None:
        rows, cols = np.nonzero(~finite)
        column = values.columns[cols[0]]
        value = values.iat[rows[0], cols[0]]
        raise NonFiniteValueError(
            f"{origin.label}: column {column!r}, {origin.row(int(rows[0]), values.index)} is "
            f"{value} ({rows.size} non-finite values in the used columns). Fix: clean the data, "
            f"or pass fill_nan= one of {FILL_POLICIES} (NaN and inf are filled alike)."
        )
    missing = values.replace([np.inf, -np.inf], np.nan)
    if fill_nan == "ffill":
        filled = missing.ffill().bfill()  # bfill covers a leading gap only
    elif fill_nan == "interpolate":
        filled = missing.interpolate(method="linear", limit_direction="both")
    else:
        filled = missing.fillna(0.0)
    leading = int((~np.maximum.accumulate(finite, axis=0)).sum())  # before a column's first finite value
    # ffill and interpolate have no earlier value there: the first one is copied back, which the log says.
    before = (f", {leading} of them before their column's first value, filled with that value"
              if leading and fill_nan != "zero" else "")
    logger.info("%s: filled %d non-finite values with policy %r%s.", origin.label, (~finite).sum(), fill_nan, before)
    if fill_nan == "interpolate" and leading < (~finite).sum():
        logger.warning("%s: fill_nan='interpolate' fills each gap from the values on both sides of it, so a window "
                       "whose lookback ends inside a gap reads the value after it, its own future: its forecast "
                       "scores better than forecasting can (the filled values themselves are not scored). Fix: "
                       "fill_nan='ffill' for honest scores.", origin.label)
    return filled, ~finite


def _positive_steps(dates: pd.DatetimeIndex) -> pd.Series:
    """The steps between consecutive timestamps, repeats (no step) left out."""
    steps = pd.Series(dates[1:] - dates[:-1])
    return steps[steps > pd.Timedelta(0)]


def _most_common_step(dates: pd.DatetimeIndex, origin: Origin) -> pd.DateOffset:
    steps = _positive_steps(dates)
    if steps.empty:
        raise SeriesTooShortError(
            f"{origin.label}: {len(dates)} distinct timestamp(s) are too few to infer the "
            "frequency. Fix: give more rows or pass freq=..."
        )
    return to_offset(steps.mode().iloc[0])


def _refuse_jitter(dates: pd.DatetimeIndex, origin: Origin) -> None:
    """IrregularTimestampError where no fixed step is taken by half the steps or more: jittered timestamps, whose
    most common step is one of many by chance (86289 seconds), would place every forecast off the grid."""
    steps = _positive_steps(dates)
    counts = steps.value_counts()
    if 2 * counts.iloc[0] >= len(steps):
        return
    median = steps.median()
    # the median step in the coarsest unit within 5% of it: days, hours, minutes or seconds ('D', 'h', '15min')
    unit = next((unit for unit in ("D", "h", "min") if abs(median - median.round(unit)) <= 0.05 * median), "s")
    count = round(median / pd.Timedelta(1, unit=unit))
    grid = f"{count if count != 1 else ''}{unit}"
    raise IrregularTimestampError(
        f"{origin.label}: the steps between rows vary: the most common, {counts.index[0]}, is {counts.iloc[0]} of "
        f"{len(steps)}, and their median {median}, so no frequency can be inferred. Fix: put the rows on a regular "
        f"grid, df.set_index(date).resample({grid!r}).mean() (or round their timestamps, df[date].dt.round("
        f"{grid!r})), or pass freq=... with allow_irregular=True."
    )


def _semi_month(dates: pd.DatetimeIndex) -> tuple[str, str] | None:
    """The semi-month alias (and its days) whose two days the dates fall on, both of them, else None.

    pandas infers no semi-month offset: its steps of 13 to 16 days made such data irregular in a fixed step.
    Both days must occur, else monthly data with a gap (all on the 1st) would be taken for semi-monthly.
    """
    if len(dates) < 3:
        return None
    fifteenth = np.asarray(dates.day == 15)
    for alias, days, other in (("SMS", "the 1st and 15th", np.asarray(dates.day == 1)),
                               ("SME", "the 15th and the month's end", np.asarray(dates.is_month_end))):
        if (fifteenth | other).all() and fifteenth.any() and other.any():
            return alias, days
    return None


def semi_month_hint(dates: pd.DatetimeIndex, freq: str | pd.DateOffset | None) -> str:
    """A fix for irregular dates whose days are a semi-month's (a freq to pass), else ``""``."""
    semi = _semi_month(dates) if freq is None else None
    if semi is None:
        return ""
    alias, days = semi
    return f" The dates all fall on {days} (semi-monthly, which pandas does not infer). Fix: pass freq={alias!r};"


def _infer_offset(dates: pd.DatetimeIndex, freq: str | pd.DateOffset | None, origin: Origin) -> pd.DateOffset:
    """The given offset, or the one pandas infers, or a semi-month one the dates follow, else the calendar offset
    most steps follow (:func:`_calendar_offset`, for steps of a day or more), else the most common step (whole
    days as calendar days: :func:`_calendar_days`). Months on a day no offset anchors are refused."""
    if freq is not None:
        return parse_offset(freq)
    inferred = pd.DatetimeIndex(dates, freq="infer").freq if len(dates) >= 3 else None
    if inferred is not None:
        return inferred
    semi = _semi_month(dates)
    if semi is not None and not _off_grid(dates, to_offset(semi[0]), allow_duplicates=False)[0].size:
        logger.info("%s: semi-monthly dates (%s): frequency %r.", origin.label, semi[1], semi[0])
        return to_offset(semi[0])
    step = _most_common_step(dates, origin)
    if pd.Timedelta(step) < pd.Timedelta(days=1):
        _refuse_jitter(dates, origin)
        return step
    calendar = _calendar_offset(dates)
    if calendar is not None:
        return calendar
    _refuse_months_off_their_anchors(dates, step, origin)
    _refuse_jitter(dates, origin)
    return _calendar_days(dates, step)


def _off_grid_count(dates: pd.DatetimeIndex, offset: pd.DateOffset) -> int:
    return _off_grid(dates, offset, allow_duplicates=False)[0].size


def _calendar_days(dates: pd.DatetimeIndex, step: pd.DateOffset) -> pd.DateOffset:
    """A step of whole days as calendar days (``D``), which keep a time-zone-aware series at its local time of day
    across a clock change (24 hours move it by one), unless fixed steps fit more of the dates."""
    days, rest = divmod(pd.Timedelta(step), pd.Timedelta(days=1))
    if rest or not days:
        return step
    calendar = to_offset(f"{days}D")
    return calendar if _off_grid_count(dates, calendar) <= _off_grid_count(dates, step) else step


def _refuse_months_off_their_anchors(dates: pd.DatetimeIndex, step: pd.DateOffset, origin: Origin) -> None:
    """IrregularTimestampError where the dates step by calendar months (or quarters, years) on a day that no
    pandas frequency anchors (the 15th): a fixed step (744 hours) would misplace every forecast date after the
    first short month."""
    months = round(pd.Timedelta(step) / pd.Timedelta(days=30.44))
    if months < 1:
        return
    calendar = pd.DateOffset(months=months)
    if _off_grid_count(dates, calendar) >= _off_grid_count(dates, step):
        return
    period = {3: "Q", 12: "Y"}.get(months, "M")
    raise IrregularTimestampError(
        f"{origin.label}: the dates step by {months} calendar month{'s' * (months > 1)} on day {dates[0].day} "
        f"({dates[0]}, {dates[1]}, ...), which no pandas frequency describes (MS, QS and YS start a period, ME, QE "
        f"and YE end it), and a fixed step of {step.freqstr} would misplace every forecast date. Fix: date each "
        f"row at the start of its period: a date column's .dt.to_period('{period}').dt.to_timestamp(), or a "
        f"DatetimeIndex's .to_period('{period}').to_timestamp()."
    )


_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
# The calendar frequencies pandas infers from dates without a gap (semi-months aside: _semi_month), each anchor.
_CALENDAR_ALIASES = ("B", "MS", "ME", "BMS", "BME", *(f"W-{day}" for day in ("MON", "TUE", "WED", "THU", "FRI",
                                                                             "SAT", "SUN")),
                     *(f"QS-{month}" for month in _MONTHS[:3]), *(f"QE-{month}" for month in ("DEC", "JAN", "FEB")),
                     *(f"YS-{month}" for month in _MONTHS), *(f"YE-{month}" for month in _MONTHS))


def _calendar_offset(dates: pd.DatetimeIndex) -> pd.DateOffset | None:
    """The calendar offset every date falls on that most steps follow (more than half), else ``None``: with a gap
    pandas infers no frequency, and the most common step of monthly dates (744 hours) would misplace every
    forecast date after it."""
    best, followed_most = None, (len(dates) - 1) // 2
    for alias in _CALENDAR_ALIASES:
        offset = to_offset(alias)
        if not all(offset.is_on_offset(date) for date in dates):
            continue
        followed = len(dates) - 1 - _off_grid(dates, offset, allow_duplicates=False)[0].size
        if followed > followed_most:
            best, followed_most = offset, followed
    return best


def _off_grid(dates: pd.DatetimeIndex, offset: pd.DateOffset, *,
              allow_duplicates: bool) -> tuple[np.ndarray, pd.DatetimeIndex]:
    """``(positions [n], expected [T-1])``: the steps ``i`` (from row i to row i+1) that do not follow
    ``offset``, and the timestamp each row's successor should have."""
    expected = dates[:-1] + offset
    mismatch = np.asarray(expected != dates[1:])
    if allow_duplicates:
        mismatch &= np.asarray(dates[1:] != dates[:-1])
    return np.flatnonzero(mismatch), expected


def _resolve_frequency(
    dates: pd.DatetimeIndex,
    freq: str | pd.DateOffset | None,
    *,
    allow_irregular: bool,
    allow_duplicates: bool,
    origin: Origin,
    fitted: bool = False,
) -> pd.DateOffset:
    """The given or inferred offset; steps that do not follow it are irregular.

    Repeated timestamps, once accepted by ``allow_duplicates``, are not counted as steps. ``fitted``: new rows of a
    fitted series, read with the fit's frequency and options (which a message must not offer to change).
    """
    offset = _infer_offset(dates, freq, origin)
    off_grid, expected = _off_grid(dates, offset, allow_duplicates=allow_duplicates)
    if off_grid.size:
        row = int(off_grid[0]) + 1
        message = (
            f"{origin.label}: {off_grid.size} irregular step{'s' * (off_grid.size > 1)} for frequency "
            f"{offset.freqstr!r}; the "
            f"first at {origin.row(row)}: {dates[row - 1]} is followed by {dates[row]}, expected "
            f"{expected[row - 1]}."
        )
        missed = dates[off_grid + 1] - expected[off_grid]  # an hour skipped; in UTC also an hour early (23 hours)
        by_an_hour = (missed == pd.Timedelta(hours=1)).all() or (
            dates.tz is not None and (abs(missed) == pd.Timedelta(hours=1)).all())
        fix = ((_clock_change_hint(dates, off_grid + 1) if by_an_hour else "") or semi_month_hint(dates, freq)
               or " Fix:")
        if fitted and not allow_irregular:
            own = _inferred_offset(dates.unique())  # rows of another frequency are not gaps
            if own is not None and own != offset:
                raise IrregularTimestampError(
                    f"{origin.label}: the rows step by {own.freqstr!r}, but the model was fitted on rows every "
                    f"{offset.freqstr!r}, and reads new rows the same way. Fix: give rows every {offset.freqstr!r} "
                    f"(the series it was fitted on, or their continuation), or fit a model on these rows."
                )
            raise IrregularTimestampError(
                f"{message} The model was fitted on rows every {offset.freqstr!r}, and reads new rows the same way."
                f"{fix} put them on that grid (df.set_index(date).asfreq({offset.freqstr!r}), then fill the gaps), or "
                "give rows without gaps."
            )
        if not allow_irregular:
            raise IrregularTimestampError(
                f"{message}{fix} resample to a regular grid (df.set_index(date).asfreq(freq)) and pass "
                "fill_nan='ffill' (the filled steps feed the model and are left out of the scores), pass the right "
                "freq=..., or pass allow_irregular=True to use the rows as they are (time features still use each "
                "row's own timestamp)."
            )
        logger.info("%s Accepted: allow_irregular=True.", message)
    return offset


def prepare_series(
    data: Table,
    *,
    date_column: Hashable | None = None,
    features: str = "M",
    target: Hashable | None = None,
    columns: Sequence[Hashable] | None = None,
    freq: str | pd.DateOffset | None = None,
    allow_irregular: bool = False,
    allow_duplicates: bool = False,
    fill_nan: str | None = None,
    date_format: str | None = None,
    time_zone: str | None = None,
    fitted_columns: Sequence[Hashable] | None = None,
) -> TimeSeries:
    """Validate a table (DataFrame, Series or CSV path) and return its model-ready series.

    Checks, in order: the time axis exists and parses (``date_column``, or with ``None``
    the DatetimeIndex, else the one column holding timestamps, logged); timestamps
    are sorted and unique (``allow_duplicates`` keeps repeats); the chosen columns exist,
    the target among them; they are numeric; they are finite (``fill_nan`` opts in to
    ``'ffill'``, ``'interpolate'`` or ``'zero'``, before each column's last finite value, never
    after it: a forecast starts after the last row); steps follow ``freq`` (inferred when
    ``None``; ``allow_irregular`` accepts gaps, the frequency then the calendar one most steps follow, such as
    ``'MS'``, else the most common step, whole days as calendar days ``'D'``; monthly dates on the 15th are
    refused, as no frequency gives their forecast dates).
    ``columns`` selects variables (the target is always kept); their order stays the
    table's, with the target moved last. Without a ``target``, ``M`` uses every column
    and ``S``/``MS`` the last numeric one (logged). Dates written day and month first are read in the
    order that fits them (:func:`day_month_format`; ``date_format``, a fit's, is kept where it fits).
    ``time_zone`` (a fit's :func:`zone_name`) converts the timestamps into the fitted zone before any check
    (:func:`to_zone`); ``None`` keeps them as they are. ``fitted_columns``, new rows of a fitted series: the
    variables the fit read, each required, in place of ``columns``; other columns, numeric or not, go unread.
    """
    require_choice("features", features, FEATURES)
    require_choice("fill_nan", fill_nan, (None, *FILL_POLICIES))
    frame, origin = read_table(data)
    try:
        dates, variables, date_column, date_format = _extract_dates(frame, date_column, origin, freq, date_format)
    except MissingDateColumnError as error:
        if fitted_columns is None or "date_column=" not in str(error):  # its own fix stands where it offers no option
            raise
        # New rows of a fitted series are read with the fit's date column, which no call reading them takes.
        # A file's header is renamed in the file: the command line reads new rows with the fit's options, no
        # other (a DataFrame's rename is Python's alone).
        if date_column is None:
            fix = (f"write the timestamps in one column of {origin.label}" if origin.is_file else
                   "index the rows by their timestamps (df.set_index('<the timestamp column>')), as the fitted rows "
                   "were")
        elif origin.is_file:
            fix = (f"name the timestamp column {date_column!r} in {origin.label}: change its header to "
                   f"{date_column!r} (or, reading the file with pandas first, "
                   f"df.rename(columns={{'<its name>': {date_column!r}}}))")
        else:
            fix = (f"name the timestamp column (or the DatetimeIndex) {date_column!r}: "
                   f"df.rename(columns={{'<its name>': {date_column!r}}}), or df.rename_axis({date_column!r})")
        fitted_with = "a DatetimeIndex" if date_column is None else repr(date_column)
        raise MissingDateColumnError(f"{str(error).partition(' Fix:')[0]} The model was fitted with its timestamps in "
                                     f"{fitted_with} and reads new rows the same way. Fix: {fix}.") from None
    dates = to_zone(dates, time_zone, column=date_column if date_column is not None else "<index>", origin=origin,
                    on_index=date_column not in frame.columns)
    try:
        _check_order(dates, allow_duplicates=allow_duplicates, origin=origin)
    except (UnsortedTimestampError, DuplicateTimestampError) as error:
        hint = _long_format_hint(frame, dates, date_column)
        if hint:  # its fixes replace the error's own (sorting, dropping or allowing repeats would merge the series)
            raise type(error)(f"{str(error).partition(' Fix:')[0]}{hint}") from None
        raise
    input_columns, output_columns, target = _select_columns(
        frame, variables, features=features, target=target, columns=columns, origin=origin,
        fitted_columns=fitted_columns,
    )
    values = _numeric_values(frame, input_columns, origin)
    values, filled = _fill_non_finite(values, fill_nan, origin)
    offset = _resolve_frequency(dates, freq, allow_irregular=allow_irregular, allow_duplicates=allow_duplicates,
                                origin=origin, fitted=fitted_columns is not None)
    return TimeSeries(
        source=origin.label,
        dates=dates,
        values=values.to_numpy(dtype=np.float64),
        input_columns=input_columns,
        output_columns=output_columns,
        freq=offset,
        target=target,
        date_column=date_column,
        date_format=date_format,
        filled=filled,
    )
