"""CSV/DataFrame validation: one specific error per bad-input case, each message naming
the source, the column or row and the fix; and the clean series for good input."""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forecast.data.io import prepare_series, zone_name
from forecast.errors import (
    ConfigError,
    CsvReadError,
    DataError,
    DuplicateColumnError,
    DuplicateTimestampError,
    ForecastError,
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


def make_frame(n: int = 24, columns=("a", "b", "OT"), freq: str = "h", start: str = "2021-01-01", seed: int = 0):
    rng = np.random.default_rng(seed)
    data = {"date": pd.date_range(start, periods=n, freq=freq)}
    for i, column in enumerate(columns):
        data[column] = rng.normal(size=n) + 10 * i
    return pd.DataFrame(data)


def with_value(column: str, row: int, value) -> Callable[[], pd.DataFrame]:
    def build() -> pd.DataFrame:
        frame = make_frame()
        if column == "date" or not isinstance(value, float):
            frame[column] = frame[column].astype(object)
        frame.loc[row, column] = value
        return frame

    return build


def swapped_rows() -> pd.DataFrame:
    frame = make_frame()
    frame.loc[[5, 6], "date"] = frame.loc[[6, 5], "date"].to_numpy()
    return frame


def repeated_row() -> pd.DataFrame:
    frame = make_frame(n=23)
    return pd.concat([frame.iloc[:7], frame.iloc[6:]], ignore_index=True)  # row 6 twice


def gap_at_row_9() -> pd.DataFrame:
    return make_frame(n=25).drop(index=9).reset_index(drop=True)


# (case id, frame builder, prepare_series kwargs, error, substrings the message must hold)
BAD_INPUT = [
    ("no date column", lambda: make_frame().rename(columns={"date": "when"}), {"date_column": "date"},
     MissingDateColumnError, ["'date'", "'when'", "date_column="]),
    ("no timestamps", lambda: make_frame().drop(columns="date"), {},
     MissingDateColumnError, ["no column holds timestamps", "'OT'", "date_column="]),
    ("two date columns", lambda: make_frame().assign(end=lambda f: f["date"].astype(str)), {},
     MissingDateColumnError, ["'date'", "'end'", "date_column="]),
    ("mixed date formats", lambda: make_frame().assign(
        date=lambda f: f["date"].dt.strftime("%Y-%m-%d %H:%M").where(f.index != 5, "01/06/2021")), {},
     UnparsableDateError, ["row 5", "'01/06/2021'", "mixes date formats", "format="]),
    ("unparsable date", with_value("date", 3, "not a date"), {},
     UnparsableDateError, ["row 3", "'not a date'", "Fix"]),
    ("empty date", with_value("date", 4, None), {},
     UnparsableDateError, ["row 4", "is empty", "Fix"]),
    ("numeric date column", lambda: make_frame().assign(date=np.arange(24)), {},
     UnparsableDateError, ["'date'", "numbers", "pd.to_datetime"]),
    ("unsorted", swapped_rows, {},
     UnsortedTimestampError, ["row 6", "backwards", "sort"]),
    ("duplicate", repeated_row, {},
     DuplicateTimestampError, ["row 6", "row 7", "drop_duplicates", "allow_duplicates=True"]),
    ("gap", gap_at_row_9, {},
     IrregularTimestampError, ["1 irregular step for frequency 'h'; the first at row 9", "allow_irregular=True",
                               "asfreq"]),
    ("wrong freq given", make_frame, {"freq": "30min"},
     IrregularTimestampError, ["'30min'", "row 1", "freq="]),
    ("NaN", with_value("b", 5, float("nan")), {},
     NonFiniteValueError, ["'b'", "row 5", "fill_nan="]),
    ("inf", with_value("OT", 2, float("inf")), {},
     NonFiniteValueError, ["'OT'", "row 2", "inf", "fill_nan="]),
    ("non-numeric", with_value("a", 8, "n/a?"), {},
     NonNumericColumnError, ["'a'", "row 8", "'n/a?'", "columns=["]),
    ("unknown target", make_frame, {"target": "load"},
     UnknownTargetError, ["'load'", "'OT'", "target="]),
    ("unknown column", make_frame, {"columns": ["a", "zzz"]},
     UnknownColumnError, ["'zzz'", "columns="]),
    ("no variables", lambda: make_frame()[["date"]], {},
     NoVariablesError, ["no variable column"]),
    # Each was given a fix that does not apply: unit='s', pd.to_numeric, fill_nan=, no name close to the one given.
    ("dates written as YYYYMMDD numbers", lambda: make_frame(freq="D").assign(
        date=lambda f: f["date"].dt.strftime("%Y%m%d").astype(int)), {},
     UnparsableDateError, ["holds numbers (int64)", ".astype(str), format='%Y%m%d')", "YYYYMMDD"]),
    ("spreadsheet day serials", lambda: make_frame(freq="D").assign(  # unit='s' made them 1970 seconds
        date=lambda f: (f["date"] - pd.Timestamp("1899-12-30")).dt.days), {},
     UnparsableDateError, ["holds numbers (int64)", "unit='D', origin='1899-12-30')", "spreadsheet day serials"]),
    ("thousands separators in every cell", lambda: make_frame().assign(
        OT=lambda f: [f"1,{i:03d}.5" for i in range(len(f))]), {},
     NonNumericColumnError, ["'OT'", "'1,000.5' (24 such rows). Fix:", "','"]),  # thousands=',' or .replace(',', '')
    ("an empty column", lambda: make_frame().assign(a=np.nan), {},
     NonFiniteValueError, ["column 'a' holds no finite value (all 24 rows are NaN or inf)", "drop the column"]),
    ("a target spelt in another case", lambda: make_frame().rename(columns={"OT": "Ot"}), {"target": "OT"},
     UnknownTargetError, ["target 'OT' is not a column", "The table spells 'OT' as 'Ot'."]),
    ("columns spelt with spaces", make_frame, {"columns": [" a"]},
     UnknownColumnError, ["columns=[' a'] not in the table", "The table spells ' a' as 'a'."]),
    ("a date column spelt in another case", make_frame, {"date_column": "Date"},
     MissingDateColumnError, ["no date column 'Date'", "The table spells 'Date' as 'date'."]),
    ("a number for a header's digits", lambda: make_frame().rename(columns={"a": "1"}), {"columns": [1]},
     UnknownColumnError, ["The table spells 1 as '1' (text: quote it in YAML and on the command line)."]),
]


def test_dates_as_text_in_the_index_are_pointed_at():
    """A table indexed by date strings was told to pass date_column= or to index it by a DatetimeIndex."""
    frame = make_frame().set_index("date")
    frame.index = frame.index.strftime("%Y-%m-%d %H:%M")
    with pytest.raises(MissingDateColumnError, match=r"the table's index holds dates as text.*pd.to_datetime"):
        prepare_series(frame)


@pytest.mark.parametrize("as_csv", [False, True], ids=["DataFrame", "csv"])
@pytest.mark.parametrize(("case", "build", "kwargs", "error", "substrings"), BAD_INPUT, ids=[c[0] for c in BAD_INPUT])
def test_each_bad_input_raises_its_error_naming_source_place_and_fix(
    tmp_path, as_csv, case, build, kwargs, error, substrings
):
    frame = build()
    if as_csv:
        path = tmp_path / "series.csv"
        frame.to_csv(path, index=False)
        data, source = path, str(path)
    else:
        data, source = frame, "<DataFrame>"
    with pytest.raises(error) as caught:
        prepare_series(data, **kwargs)
    message = str(caught.value)
    assert source in message
    for text in substrings:
        assert text in message, f"{text!r} missing from: {message}"
    assert isinstance(caught.value, DataError) and isinstance(caught.value, ValueError)
    if as_csv and any(text.startswith("row ") for text in substrings):
        assert "line " in message  # files also give the line number


def test_row_messages_give_file_line_numbers(tmp_path):
    path = tmp_path / "s.csv"
    with_value("date", 3, "not a date")().to_csv(path, index=False)
    with pytest.raises(UnparsableDateError, match=r"row 3 \(line 5 of the file\)"):
        prepare_series(path)


def test_duplicate_column_names_are_rejected():
    frame = make_frame()
    frame.columns = ["date", "a", "a", "OT"]
    with pytest.raises(DuplicateColumnError, match="<DataFrame>.*'a'"):
        prepare_series(frame)


def test_unreadable_files_raise_csv_read_error(tmp_path):
    with pytest.raises(CsvReadError, match="no such file"):
        prepare_series(tmp_path / "missing.csv")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(CsvReadError, match="empty"):
        prepare_series(empty)
    with pytest.raises(CsvReadError, match="directory"):
        prepare_series(tmp_path)


def test_invalid_options_raise_config_error():
    with pytest.raises(ConfigError, match="features"):
        prepare_series(make_frame(), features="X")
    with pytest.raises(ConfigError, match="fill_nan"):
        prepare_series(make_frame(), fill_nan="mean")
    with pytest.raises(ConfigError, match="offset alias"):
        prepare_series(make_frame(), freq="every hour")


def test_too_few_rows_to_infer_frequency():
    with pytest.raises(SeriesTooShortError, match="freq="):
        prepare_series(make_frame(n=1))


def test_errors_share_the_package_hierarchy():
    for error in (MissingDateColumnError, NonFiniteValueError, SeriesTooShortError, UnknownTargetError):
        assert issubclass(error, DataError) and issubclass(error, ForecastError)


# ------------------------------------------------------------------ good input


@pytest.mark.parametrize(
    ("features", "expected_in", "expected_out"),
    [("M", ("a", "c", "b"), ("a", "c", "b")), ("S", ("b",), ("b",)), ("MS", ("a", "c", "b"), ("b",))],
)
def test_columns_keep_table_order_with_target_last(features, expected_in, expected_out):
    frame = make_frame(columns=("a", "b", "c"))
    series = prepare_series(frame, features=features, target="b")
    assert series.input_columns == expected_in
    assert series.output_columns == expected_out
    np.testing.assert_array_equal(series.values, frame[list(expected_in)].to_numpy())
    assert series.values.dtype == np.float64


def test_without_a_target_m_keeps_every_column_in_order():
    frame = make_frame(columns=("x", "y", "OT", "z"))
    series = prepare_series(frame)
    assert series.input_columns == series.output_columns == ("x", "y", "OT", "z")
    assert series.target is None
    with pytest.raises(UnknownTargetError, match="target=None"):
        prepare_series(frame, target="load")


@pytest.mark.parametrize("features", ["S", "MS"])
def test_without_a_target_s_and_ms_forecast_the_last_numeric_column(features, caplog):
    """A flag after the series (a holiday column) was taken for the target, and forecast as 0 or 1."""
    frame = make_frame(columns=("x", "y")).assign(site="north", holiday=False)  # the last columns: text, a flag
    with caplog.at_level(logging.INFO, logger="forecast.data.io"):
        series = prepare_series(frame, features=features, columns=["x", "y"] if features == "MS" else None)
    assert series.target == "y" and series.output_columns == ("y",)
    assert series.input_columns == (("y",) if features == "S" else ("x", "y"))
    assert "target 'y' (the last numeric column" in caplog.text


def test_without_a_target_and_no_numeric_column_s_names_the_fix():
    frame = make_frame(columns=()).assign(site="north")
    with pytest.raises(NonNumericColumnError, match="target="):
        prepare_series(frame, features="S")


def test_single_target_ignores_other_non_numeric_columns():
    frame = make_frame().assign(site="north")
    with pytest.raises(NonNumericColumnError, match="'site'"):
        prepare_series(frame)
    assert prepare_series(frame, features="S", target="OT").input_columns == ("OT",)
    assert prepare_series(frame, columns=["a"]).input_columns == ("a",)
    assert prepare_series(frame, columns=["a"], target="OT").input_columns == ("a", "OT")  # target always kept


# ------------------------------------------------------------ the time axis


def test_the_one_timestamp_column_is_found_and_named_in_the_log(caplog):
    frame = make_frame().rename(columns={"date": "when"})
    frame["when"] = frame["when"].astype(str)  # as read from a CSV
    frame = frame[["a", "when", "b", "OT"]]
    with caplog.at_level(logging.INFO, logger="forecast.data.io"):
        series = prepare_series(frame)
    assert series.date_column == "when" and series.input_columns == ("a", "b", "OT")
    assert "date column 'when'" in caplog.text


def test_a_text_column_that_is_no_date_is_not_taken_for_one():
    frame = make_frame().assign(site="north", code=["1"] * 24)
    series = prepare_series(frame, columns=["a"])
    assert series.date_column == "date"


def test_a_frame_indexed_by_time_and_a_series_are_accepted(caplog):
    frame = make_frame()
    indexed = frame.set_index("date")
    expected = prepare_series(frame)
    for data, kwargs in ((indexed, {}), (indexed, {"date_column": "date"}), (indexed.rename_axis(None), {})):
        series = prepare_series(data, **kwargs)
        np.testing.assert_array_equal(series.values, expected.values)
        assert series.dates.equals(expected.dates) and series.input_columns == expected.input_columns
    assert prepare_series(indexed).date_column == "date"
    named = prepare_series(indexed["b"])
    assert named.input_columns == ("b",) and named.dates.equals(expected.dates)
    with caplog.at_level(logging.INFO, logger="forecast.data.io"):
        unnamed = prepare_series(indexed["b"].rename(None), features="S")
    assert unnamed.input_columns == ("value",) and unnamed.target == "value"
    assert "no name" in caplog.text


def test_a_named_date_column_that_is_absent_is_an_error_even_with_a_time_index():
    indexed = make_frame().set_index("date")
    with pytest.raises(MissingDateColumnError, match="date_column=None"):
        prepare_series(indexed, date_column="timestamp")


def test_a_series_without_timestamps_is_refused():
    with pytest.raises(MissingDateColumnError, match="<Series>.*DatetimeIndex"):
        prepare_series(pd.Series([1.0, 2.0, 3.0], name="load"))


def test_other_data_types_are_refused():
    with pytest.raises(DataError, match="data of type list"):
        prepare_series([1.0, 2.0])  # type: ignore[arg-type]


# ------------------------------------------------------- CSV headers as written


def test_repeated_header_names_are_refused_not_renamed(tmp_path):
    path = tmp_path / "dup.csv"
    path.write_text("date,b,b,OT\n2021-01-01 00:00,1,2,3\n2021-01-01 01:00,1,2,3\n")
    with pytest.raises(DuplicateColumnError, match=r"dup.csv.*\['b'\].*\['b', 'b.1'\]"):
        prepare_series(path)


def test_an_unnamed_index_column_is_refused_with_the_fix(tmp_path):
    path = tmp_path / "indexed.csv"
    make_frame().to_csv(path)  # index=True writes an unnamed first column
    with pytest.raises(CsvReadError, match=r"indexed.csv.*\[1\].*'Unnamed: 0'.*index=False"):
        prepare_series(path)


def test_rows_longer_than_the_header_are_refused(tmp_path):
    path = tmp_path / "long.csv"
    path.write_text("date,a\n2021-01-01 00:00,1,2\n2021-01-01 01:00,1,2\n")
    with pytest.raises(CsvReadError, match="long.csv.*3 fields but the header has 2") as refused:
        prepare_series(path)
    assert "comment" not in str(refused.value)


def test_a_comment_line_above_the_header_is_named_as_a_comment(tmp_path):
    """Not "give every column a name": the header the message counts is the comment."""
    path = tmp_path / "exported.csv"
    # fewer fields than a row, or as many
    for comment in ("# exported by the logger", "# exported by the logger, v2"):
        path.write_text(f"{comment}\ndate,a\n2021-01-01 00:00,1\n2021-01-01 01:00,2\n")
        with pytest.raises(CsvReadError, match=rf"exported.csv: The first line, '{comment}', looks like a comment.*"
                                               r"comment='#'"):
            prepare_series(path)
    path.write_text("date,#id,a\n2021-01-01 00:00,1,1\n2021-01-01 01:00,2,2\n")  # a column may be called so
    assert prepare_series(path).input_columns == ("#id", "a")


def test_numeric_strings_and_booleans_in_a_dataframe_are_converted():
    frame = make_frame().assign(a=lambda f: f["a"].astype(str), b=True)
    series = prepare_series(frame)
    np.testing.assert_allclose(series.values[:, 0], make_frame()["a"].to_numpy())
    np.testing.assert_array_equal(series.values[:, 1], 1.0)


def test_datetime_index_is_accepted_as_the_date_column():
    frame = make_frame()
    series = prepare_series(frame.set_index("date"))
    np.testing.assert_array_equal(series.dates.to_numpy(), frame["date"].to_numpy())


def test_date_column_name_is_configurable(tmp_path):
    frame = make_frame().rename(columns={"date": "timestamp"})
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    series = prepare_series(path, date_column="timestamp")
    assert series.n_rows == 24 and series.freq.freqstr == "h"


@pytest.mark.parametrize("freq", ["15min", "10min", "h", "2h", "D", "B", "W-TUE", "MS", "ME", "QS-JAN", "YS-JAN", "s"])
def test_frequency_is_inferred(freq):
    series = prepare_series(make_frame(n=30, freq=freq))
    assert series.freq == pd.tseries.frequencies.to_offset(freq)


@pytest.mark.parametrize("freq", ["SMS", "SME"])
def test_semi_monthly_dates_which_pandas_does_not_infer_are_read_as_semi_monthly(freq):
    """pandas infers no frequency for them: the most common step ('336h', '360h') called them irregular."""
    series = prepare_series(make_frame(n=30, freq=freq))
    assert series.freq == pd.tseries.frequencies.to_offset(freq)
    with pytest.raises(IrregularTimestampError, match=rf"semi-monthly.*Fix: pass freq='{freq}'"):
        prepare_series(make_frame(n=30, freq=freq).drop(index=9))  # a gap: not on the grid, but its days are
    with pytest.raises(IrregularTimestampError) as monthly:  # all on the 1st: monthly, not semi-monthly
        prepare_series(make_frame(n=30, freq="MS").drop(index=9))
    assert "semi-monthly" not in str(monthly.value)


def test_irregular_series_opt_in_uses_the_most_common_step(caplog):
    frame = gap_at_row_9()
    with caplog.at_level(logging.INFO, logger="forecast.data.io"):
        series = prepare_series(frame, allow_irregular=True)
    assert series.freq.freqstr == "h"
    assert series.n_rows == 24
    assert "irregular" in caplog.text


def test_duplicates_opt_in_keeps_every_row_and_is_not_counted_as_irregular():
    series = prepare_series(repeated_row(), allow_duplicates=True)
    assert series.n_rows == 24 and series.freq.freqstr == "h"


def test_iso_8601_variants_parse_without_a_word(caplog):
    frame = make_frame(n=5)
    frame["date"] = ["2021-01-01 00:00", "2021-01-01T01:00", "2021-01-01 02:00", "2021-01-01T03:00:00", "2021-01-01 04:00"]
    with caplog.at_level(logging.WARNING, logger="forecast.data.io"):
        series = prepare_series(frame)
    expected = pd.date_range("2021-01-01", periods=5, freq="h")
    np.testing.assert_array_equal(series.dates.to_numpy(), expected.to_numpy())
    assert caplog.text == ""


def test_day_and_month_are_never_guessed_row_by_row():
    """Row by row, '01/02/2021' would read as January 2 and '13/02/2021' as February 13; no one order reads
    every row here ('02/14/2021' is month first)."""
    frame = make_frame(n=3, freq="D")
    frame["date"] = ["01/02/2021", "13/02/2021", "02/14/2021"]
    with pytest.raises(UnparsableDateError, match=r"'%m/%d/%Y', but row 1 holds '13/02/2021' \(1 such rows\)"):
        prepare_series(frame)


@pytest.mark.parametrize("written", ["%d/%m/%y", "%m/%d/%y", "%d.%m.%y"])
def test_dates_with_a_two_digit_year_are_read_in_the_order_that_fits(tmp_path, written):
    """'13/01/23' (a UK spreadsheet's): pandas guesses no format for a two-digit year and read the dates one by one,
    month first where it could, so a sorted file was 'not sorted', and its fixes ended in wrong forecast dates."""
    days = pd.date_range("2023-01-01", periods=400, freq="D", name="date")
    path = tmp_path / "uk.csv"
    pd.DataFrame({"date": days.strftime(written), "v": np.arange(400.0)}).to_csv(path, index=False)
    series = prepare_series(path)
    assert series.dates.equals(days) and series.freq == pd.tseries.frequencies.to_offset("D")


def test_dates_written_day_first_are_read_in_the_one_order_that_fits_or_refused(caplog):
    """pandas reads the first date month first: twelve daily rows 01/01/2024 .. 12/01/2024 became monthly."""
    days = pd.date_range("2024-01-01", periods=12, freq="D")
    frame = make_frame(n=12, freq="D").assign(date=days.strftime("%d/%m/%Y"))
    with pytest.raises(UnparsableDateError) as caught:
        prepare_series(frame)  # daily one way, monthly the other: both regular
    for words in ("<DataFrame>: date column 'date' reads both day first and month first (e.g. '01/01/2024')",
                  "'%d/%m/%Y' reads 2024-01-01 00:00:00 to 2024-01-12 00:00:00 in steps of 'D'",
                  "'%m/%d/%Y' reads 2024-01-01 00:00:00 to 2024-12-01 00:00:00 in steps of 'MS'",
                  "Fix: pass freq=", "pd.to_datetime(df['date'], format='%d/%m/%Y')"):
        assert words in str(caught.value)
    series = prepare_series(frame, freq="D")  # the order whose steps follow freq
    assert series.dates.equals(days) and series.freq.freqstr == "D" and series.date_format == "%d/%m/%Y"
    assert prepare_series(frame, date_format="%d/%m/%Y").dates.equals(days)  # a fit's order, kept
    later = pd.date_range("2024-01-05", periods=12, freq="D")  # '13/01/2024' onwards read day first only
    with caplog.at_level(logging.INFO, logger="forecast.data.io"):
        assert prepare_series(frame.assign(date=later.strftime("%d/%m/%Y"))).dates.equals(later)
    assert "date column 'date' read as '%d/%m/%Y', the only day and month order every row fits" in caplog.text
    with pytest.raises(UnparsableDateError, match="neither gives steps that are regular"):
        prepare_series(frame.iloc[[0, 1, 2, 4, 5, 6]], allow_irregular=True)
    one_day = pd.date_range("2024-01-01", periods=12, freq="h")  # 01/01: the same date either way
    assert prepare_series(frame.assign(date=one_day.strftime("%d/%m/%Y %H:%M"))).dates.equals(one_day)
    iso = prepare_series(frame.assign(date=days.strftime("%Y-%m-%d")))  # year first: read as ISO 8601, no question
    assert iso.dates.equals(days) and iso.date_format is None


@pytest.mark.parametrize(("row", "bad", "fix", "frame_fix"), [
    (5, "?", "pd.read_csv(<the file>, na_values=['?'])", "pd.to_numeric(df['b'], errors='coerce')"),
    (0, "1,234.5", "pd.read_csv(<the file>, thousands=',')", "pd.to_numeric(df['b'].str.replace(',', ''))"),
])
def test_a_numeric_column_with_a_bad_cell_is_no_date_column(tmp_path, row, bad, fix, frame_fix):
    """pandas reads '2000' and '1,234.5' as dates: a column of numbers left as text by one bad cell was taken for
    a second date column (its first value decided), and the table refused for holding two."""
    frame = make_frame(freq="D")
    frame["b"] = (2000 + np.arange(24)).astype(object)
    frame.loc[row, "b"] = bad
    path = tmp_path / "series.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(NonNumericColumnError) as caught:
        prepare_series(path)
    for words in (f"{path}: column 'b' is not numeric: row {row} (line {row + 2} of the file) holds {bad!r} "
                  "(1 such rows) among numbers", "Fix: clean those cells", fix, "drop the column"):
        assert words in str(caught.value)
    with pytest.raises(NonNumericColumnError, match=re.escape(frame_fix)):
        prepare_series(frame)
    series = prepare_series(path, columns=["a", "OT"])  # without b, the file reads: 'date' is its date column
    assert series.date_column == "date" and series.input_columns == ("a", "OT") and series.n_rows == 24


def test_time_zone_aware_dates_are_kept():
    frame = make_frame().assign(date=lambda f: f["date"].dt.tz_localize("Europe/Berlin"))
    series = prepare_series(frame)
    assert str(series.dates.tz) == "Europe/Berlin"


def test_a_file_written_in_a_daylight_saving_zone_reads_as_utc_instants(tmp_path, caplog):
    """pandas writes a Europe/Paris index with the offset of each row (+01:00, then +02:00 after the March
    change): the file was refused as mixing time zones, though every row names one instant."""
    local = pd.date_range("2024-03-29", periods=96, freq="h", tz="Europe/Paris")
    path = tmp_path / "paris.csv"
    pd.DataFrame({"date": local, "OT": np.arange(96.0)}).to_csv(path, index=False)
    assert {"+01:00", "+02:00"} <= {line[19:25] for line in path.read_text().splitlines()[1:]}
    with caplog.at_level(logging.INFO, logger="forecast.data.io"):
        series = prepare_series(path)
    assert series.dates.equals(local.tz_convert("UTC")) and series.freq == pd.tseries.frequencies.to_offset("h")
    assert caplog.text.count("offsets vary (e.g. daylight saving)") == 1
    # Timestamps without a zone among zoned ones name no instant: still refused.
    text = path.read_text().splitlines()
    text[5] = text[5][:19] + text[5][25:]  # the offset cut
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(UnparsableDateError, match=r"date column 'date' mixes zoned and unzoned timestamps: row 4 "
                                                  r"\(line 6 of the file\) holds '2024-03-29 04:00:00', .*Fix:"):
        prepare_series(path)


def test_day_first_dates_some_without_their_offset_are_named_as_such():
    """'13/01/2024 00:00' among '13/01/2024 01:00+0100': refused with pandas' 'Mixed timezones detected' and the
    fix 'use one timestamp format and one time zone', as ISO dates are not: the row without its offset is named."""
    stamps = pd.date_range("2024-01-13", periods=48, freq="h")
    dates = [stamp.strftime("%d/%m/%Y %H:%M") + ("+0100" if row % 2 else "") for row, stamp in enumerate(stamps)]
    with pytest.raises(UnparsableDateError, match=r"mixes zoned and unzoned timestamps: row 0 holds '13/01/2024 "
                                                  r"00:00', without the time zone or UTC offset other rows carry"):
        prepare_series(pd.DataFrame({"date": dates, "OT": np.arange(48.0)}))


@pytest.mark.parametrize(("written", "dayfirst"), [("%Y-%m-%d %H:%M:%S", False), ("%d/%m/%Y %H:%M", True)])
def test_the_utc_read_named_for_zoned_and_unzoned_timestamps_reads_them(written, dayfirst):
    """The fix was df[col] = pd.to_datetime(df[col], utc=True), which pandas 2+ refuses for rows whose offsets
    differ ('doesn't match format'): the call named is one that reads the column, run here on the same data."""
    instants = pd.date_range("2024-02-01", periods=48, freq="h", tz="UTC")  # days <= 12: day-first text reads both ways
    local = instants.tz_convert("Europe/Paris")
    dates = [instants[row].strftime(written) if row % 5 == 4 else stamp.strftime(written + "%z")  # every 5th: UTC
             for row, stamp in enumerate(local)]
    frame = pd.DataFrame({"date": dates, "OT": np.arange(48.0)})
    with pytest.raises(UnparsableDateError, match=r"mixes zoned and unzoned timestamps: row 4 ") as raised:
        prepare_series(frame)
    fix = re.search(r"read the column with (df\[.*?\] = pd\.to_datetime\(.*?\))(?: \(|\.$)",
                    str(raised.value)).group(1)
    if dayfirst:
        assert "(with dayfirst=True if the day is written before the month)" in str(raised.value)
        fix = fix[:-1] + ", dayfirst=True)"
    df = frame.copy()
    exec(fix, {"pd": pd, "df": df, "col": "date"})
    assert prepare_series(df).dates.equals(instants)


@pytest.mark.parametrize(("freq", "start"), [("MS", "2000-01-01"), ("ME", "2000-01-31"), ("W-SUN", "2000-01-02"),
                                             ("B", "2020-01-01"), ("QS-JAN", "2000-01-01"), ("YS-JAN", "2000-01-01")])
def test_calendar_dates_with_a_gap_keep_their_calendar_frequency(freq, start):
    """Monthly dates with one month missing: pandas infers no frequency, and the most common step (744 hours) was
    taken, so the message counted 25 irregular steps for '744h' and allow_irregular=True forecast dates 31 days
    apart. The calendar offset every date falls on and most steps follow is taken."""
    dates = pd.date_range(start, periods=60, freq=freq).delete(30)
    frame = pd.DataFrame({"date": dates, "OT": np.arange(59.0)})
    with pytest.raises(IrregularTimestampError, match=rf"1 irregular step for frequency '{freq}'; the first at row "
                                                      rf"30: {dates[29]} is followed by {dates[30]}, expected "):
        prepare_series(frame)
    assert prepare_series(frame, allow_irregular=True).freq == pd.tseries.frequencies.to_offset(freq)
    hourly = pd.date_range("2000-01-01", periods=60, freq="h").delete(30)  # finer steps keep the step itself
    with pytest.raises(IrregularTimestampError, match="1 irregular step for frequency 'h'"):
        prepare_series(pd.DataFrame({"date": hourly, "OT": np.arange(59.0)}))


@pytest.mark.parametrize(("freq", "months", "period"), [("MS", 1, "M"), ("QS", 3, "Q"), ("YS", 12, "Y")])
@pytest.mark.parametrize("gap", [False, True])
def test_months_on_a_day_no_frequency_anchors_are_refused_with_the_fix(freq, months, period, gap):
    """Monthly dates on the 15th: with a gap and allow_irregular=True a fixed step of 744 hours was taken, so the
    forecast dates drifted (15 September, 16 October, 16 November, 17 December); without one the message blamed
    irregular steps of '744h' and offered a freq that no pandas alias gives."""
    dates = pd.date_range("2010-01-01", periods=40, freq=freq) + pd.Timedelta(days=14)
    dates = dates.delete([10, 30]) if gap else dates
    frame = pd.DataFrame({"date": dates, "OT": np.arange(len(dates), dtype=float)})
    step = "s" * (months > 1)
    with pytest.raises(IrregularTimestampError, match=re.escape(
            f"the dates step by {months} calendar month{step} on day 15") + ".*" + re.escape(
            f"Fix: date each row at the start of its period: a date column's .dt.to_period('{period}')")):
        prepare_series(frame, allow_irregular=gap)
    fixed = frame.assign(date=frame["date"].dt.to_period(period).dt.to_timestamp())
    assert prepare_series(fixed, allow_irregular=gap).freq == pd.tseries.frequencies.to_offset(freq)


def test_daily_dates_with_a_gap_step_by_calendar_days_across_a_clock_change():
    """Berlin days with a gap: pandas infers nothing, and the most common step, 24 hours, put the forecasts after 29
    March 2020 at 01:00. Whole days are calendar days (D), which keep the local time of day."""
    dates = pd.date_range(end="2020-03-27", periods=80, freq="D", tz="Europe/Berlin").delete([10, 40])
    series = prepare_series(pd.DataFrame({"OT": np.arange(78.0)}, index=dates), allow_irregular=True)
    assert series.freq == pd.tseries.frequencies.to_offset("D")
    following = pd.date_range(dates[-1], periods=5, freq=series.freq)[1:]
    assert (following.hour == 0).all() and following[-1] == pd.Timestamp("2020-03-31", tz="Europe/Berlin")
    hours = pd.date_range("2020-02-01", periods=80, freq="24h", tz="UTC").tz_convert("Europe/Berlin").delete(10)
    assert prepare_series(pd.DataFrame({"OT": np.arange(79.0)}, index=hours),  # 24-hour instants stay 24 hours
                          allow_irregular=True).freq == pd.tseries.frequencies.to_offset("24h")


@pytest.mark.parametrize("written", ["iso", "day first"])
def test_daily_rows_written_in_a_daylight_saving_zone_read_on_their_local_clock(tmp_path, caplog, written):
    """Paris days written by to_csv ('2024-03-30 00:00:00+01:00', '2024-03-31 00:00:00+02:00') were read as UTC
    instants, whose step across the change is 23 hours: the file was refused as irregular for '24h'. Rows at one
    local time of day are read on that clock, without a zone; finer rows stay UTC instants (the test above)."""
    local = pd.date_range("2024-02-01", periods=120, freq="D", tz="Europe/Paris")  # across 31 March
    dates = local if written == "iso" else local.strftime("%d/%m/%Y %H:%M%z")
    path = tmp_path / "paris.csv"
    pd.DataFrame({"date": dates, "OT": np.arange(120.0)}).to_csv(path, index=False)
    with caplog.at_level(logging.INFO, logger="forecast.data.io"):
        series = prepare_series(path)
    assert series.dates.equals(local.tz_localize(None)) and series.freq == pd.tseries.frequencies.to_offset("D")
    assert "every row is at 00:00 local time, so its timestamps are read, and forecasts written, as local times " \
           "without a zone" in caplog.text


@pytest.mark.parametrize("written", ["iso", "day first"])
def test_daily_rows_of_one_source_read_alike_whichever_offsets_a_file_spans(tmp_path, written):
    """A winter's days (+01:00 only) were read in the fixed zone 'UTC+01:00' and the year's (+01:00 and +02:00)
    without a zone, so a fit on one refused the other, and the fix it named (tz_localize) read winter days at
    01:00. Text that carries UTC offsets at one time of day reads on that clock whatever offsets it spans;
    timestamps given as such keep their zone."""
    year = pd.date_range("2021-01-01", "2021-12-31", freq="D", tz="Europe/Berlin")
    parts = {"year": year, "winter": year[year.month < 3], "summer": year[(year.month > 4) & (year.month < 9)]}
    read = {}
    for name, dates in parts.items():
        path = tmp_path / f"{name}.csv"
        text = dates if written == "iso" else dates.strftime("%d/%m/%Y %H:%M%z")
        pd.DataFrame({"date": text, "load": np.arange(len(dates), dtype=float)}).to_csv(path, index=False)
        read[name] = prepare_series(path)
        assert read[name].dates.equals(dates.tz_localize(None)) and zone_name(read[name].dates) == "naive"
    for fitted, other in (("year", "winter"), ("summer", "year")):
        again = prepare_series(tmp_path / f"{other}.csv", freq=read[fitted].freq,
                               time_zone=zone_name(read[fitted].dates))
        assert again.dates.equals(read[other].dates)
    finer = pd.date_range("2021-01-01", periods=48, freq="h", tz="Europe/Berlin")  # not at one time of day
    pd.DataFrame({"date": finer, "load": np.arange(48.0)}).to_csv(tmp_path / "hourly.csv", index=False)
    assert zone_name(prepare_series(tmp_path / "hourly.csv").dates) == "UTC+01:00"
    given = pd.DataFrame({"load": np.arange(len(parts["winter"]), dtype=float)}, index=parts["winter"])
    assert zone_name(prepare_series(given).dates) == "Europe/Berlin"


@pytest.mark.parametrize(("zone", "example"), [("Europe/Paris", "e.g. 'Europe/Paris' for its local times or 'UTC';"),
                                               ("UTC", "e.g. 'UTC' for UTC times;")])
def test_timestamps_without_the_fitted_zone_are_refused_with_the_fix(zone, example):
    """With a fit in UTC, the fix offered "'UTC' for its local times or 'UTC'"."""
    with pytest.raises(DataError) as caught:
        prepare_series(make_frame(), time_zone=zone)
    assert (f"date column 'date' has no time zone, but the fitted data's timestamps are in {zone!r}. Fix: give them "
            f"their zone, df['date'] = df['date'].dt.tz_localize(<their zone>), {example} any zone is converted to "
            f"{zone!r}.") in str(caught.value)
    indexed = make_frame().set_index("date")  # the fix named df['<index>'].dt, which is no code
    with pytest.raises(DataError, match=re.escape("Fix: give them their zone, df.index = df.index.tz_localize(")):
        prepare_series(indexed, time_zone=zone)
    with pytest.raises(DataError, match=re.escape("df.index = df.index.tz_convert('<that zone>').tz_localize(None)")):
        prepare_series(indexed.tz_localize(zone), time_zone="naive")


@pytest.mark.parametrize("policy", ["ffill", "interpolate", "zero"])
def test_fill_policies_match_pandas(policy, caplog):
    frame = make_frame(n=12)
    frame.loc[[0, 4, 5], "a"] = np.nan
    frame.loc[7, "OT"] = np.inf
    with caplog.at_level(logging.INFO, logger="forecast"):
        series = prepare_series(frame, fill_nan=policy)
    # row 0 has no earlier value: ffill and interpolate copy the first one back, which said nothing
    leading = ", 1 of them before their column's first value, filled with that value" if policy != "zero" else ""
    assert f"filled 4 non-finite values with policy {policy!r}{leading}." in caplog.text
    expected_input = frame[["a", "b", "OT"]].replace([np.inf, -np.inf], np.nan)
    expected = {
        "ffill": expected_input.ffill().bfill(),
        "interpolate": expected_input.interpolate(limit_direction="both"),
        "zero": expected_input.fillna(0.0),
    }[policy]
    np.testing.assert_allclose(series.values, expected.to_numpy())
    assert np.isfinite(series.values).all()
    # the inf is made up as much as the NaNs: left out of the scores alike
    np.testing.assert_array_equal(series.filled, expected_input.isna().to_numpy())
    # interpolation reads the value after each gap, the future of a window ending inside it: said where it fills one
    warned = [record for record in caplog.records if record.levelno == logging.WARNING and "interpolate" in
              record.getMessage()]
    assert len(warned) == (policy == "interpolate") and all("Fix: fill_nan='ffill'" in record.getMessage()
                                                              for record in warned)


@pytest.mark.parametrize("policy", ["ffill", "interpolate", "zero"])
def test_fill_policies_never_fill_after_the_last_observation(policy):
    """Rows appended for the future (NaN target) would move the forecast's start past the last observation."""
    frame = make_frame(n=12)
    frame.loc[[10, 11], "OT"] = np.nan
    with pytest.raises(NonFiniteValueError,
                       match=r"'OT' is empty on its last 2 row\(s\), from row 10.*drop") as caught:
        prepare_series(frame, fill_nan=policy)
    assert "panel" not in str(caught.value)  # a wide table was pointed to a panel's future_covariates


@pytest.mark.parametrize("policy", [None, "ffill"])
def test_infinities_after_the_last_finite_value_are_not_called_empty(policy):
    """Last rows holding inf were refused as 'empty on its last 2 row(s)' with 'drop those rows' as the only fix."""
    frame = make_frame(n=12)
    frame.loc[[10, 11], "OT"] = [np.inf, -np.inf]
    with pytest.raises(NonFiniteValueError, match=r"'OT' holds -inf and inf on its last 2 row\(s\), from row 10, "
                                                  r"after its last finite value.*Fix: correct those values") as error:
        prepare_series(frame, fill_nan=policy)
    assert "empty" not in str(error.value)


def test_fill_cannot_invent_a_column_that_is_all_nan():
    frame = make_frame().assign(a=np.nan)
    with pytest.raises(NonFiniteValueError, match="'a'.*columns="):
        prepare_series(frame, fill_nan="ffill")


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(min_value=3, max_value=40),
    n_columns=st.integers(min_value=1, max_value=5),
    target_index=st.integers(min_value=0, max_value=4),
    features=st.sampled_from(["M", "S", "MS"]),
)
def test_values_are_the_table_columns_in_model_order(n, n_columns, target_index, features):
    columns = tuple(f"v{i}" for i in range(n_columns))
    target = columns[target_index % n_columns]
    frame = make_frame(n=n, columns=columns, freq="15min")
    series = prepare_series(frame, features=features, target=target)
    assert series.input_columns[-1] == target
    assert series.output_columns[-1] == target
    assert set(series.input_columns) == ({target} if features == "S" else set(columns))
    np.testing.assert_array_equal(series.values, frame[list(series.input_columns)].to_numpy())


@pytest.mark.parametrize("ids", [["s1", "s2", "s3"], [101, 102, 103]])
def test_a_long_format_panel_read_as_one_series_is_named_with_the_fixes(ids):
    """unique_id, ds, y: one block of rows per series (timestamps go backwards at each new series), or
    the rows sorted by time (each timestamp repeats once per series)."""
    blocks = [pd.DataFrame({"unique_id": series, "ds": pd.date_range("2024-01-01", periods=30, freq="h"),
                            "y": np.arange(30.0) + index}) for index, series in enumerate(ids)]
    by_series = pd.concat(blocks, ignore_index=True)
    with pytest.raises(UnsortedTimestampError, match=r"long-format panel of 3 series told apart by column "
                       r"'unique_id'.*df\.pivot\(index='ds', columns='unique_id'"):
        prepare_series(by_series, date_column="ds", target="y", features="S")
    by_time = by_series.sort_values(["ds", "unique_id"], kind="stable", ignore_index=True)
    with pytest.raises(DuplicateTimestampError,
                       match=r"long-format panel of 3 series.*df\[df\['unique_id'\] ==") as raised:
        prepare_series(by_time, date_column="ds", target="y", features="S")
    # read as a panel first; never the one-series fixes, which would merge the series (allow_duplicates=True fitted
    # the ids as a variable, drop_duplicates kept one series per timestamp)
    message = str(raised.value)
    assert "Fix: read it as one, fit(..., id_column='unique_id', target=<the column to forecast>)" in message
    assert "allow_duplicates" not in message and "drop_duplicates" not in message and message.count("Fix:") == 1


@pytest.mark.parametrize("start", ["2024-03-30", "2024-03-01"])  # day > 12 first, and dates that read both ways
def test_day_first_dates_with_daylight_saving_offsets_read_as_utc_instants(tmp_path, caplog, start):
    """'01/03/2024 00:00+01:00' .. '31/03/2024 05:00+02:00' (day first, a Paris clock) was refused with pandas'
    'Mixed timezones detected. Pass utc=True in to_datetime' and the fix 'use one time zone', or read with
    pandas' day-first UserWarning escaping."""
    local = pd.date_range(start, periods=24 * 40, freq="h", tz="Europe/Paris")
    path = tmp_path / "paris.csv"
    pd.DataFrame({"date": local.strftime("%d/%m/%Y %H:%M%z"), "OT": np.arange(len(local), dtype=float)}).to_csv(
        path, index=False)
    with caplog.at_level(logging.INFO, logger="forecast.data.io"), warnings.catch_warnings():
        warnings.simplefilter("error")
        series = prepare_series(path)
    assert series.dates.equals(local.tz_convert("UTC")) and series.freq == pd.tseries.frequencies.to_offset("h")
    assert caplog.text.count("offsets vary (e.g. daylight saving)") == 1


@pytest.mark.parametrize(("start", "freq", "error"), [("2021-03-27", "h", IrregularTimestampError),  # 02:00 skipped
                                                      ("2021-10-30", "h", DuplicateTimestampError),  # 02:00 twice
                                                      ("2021-10-30", "15min", UnsortedTimestampError)])  # 02:45, 02:00
def test_a_local_clocks_daylight_saving_change_is_named_with_the_fix(start, freq, error):
    local = pd.date_range(start, periods=300, freq=freq, tz="Europe/Berlin")
    frame = pd.DataFrame({"date": local.tz_localize(None), "OT": np.arange(300.0)})
    with pytest.raises(error, match=r"daylight saving.*Fix: give the timestamps their time zone.*tz_localize"):
        prepare_series(frame)
    frame["date"] = frame["date"].dt.tz_localize("Europe/Berlin", ambiguous="infer")  # the fix it names
    assert prepare_series(frame).dates.equals(local)


def test_a_repeat_at_night_outside_the_clock_change_months_or_dates_without_times_get_no_daylight_saving_hint():
    """Any repeat before 04:00 (3 January's, hourly rows written as dates alone) was blamed on a clock change."""
    january = pd.date_range("2023-01-01", periods=100, freq="h")
    repeated = pd.DataFrame({"date": january.insert(50, january[49]), "OT": np.arange(101.0)})  # 01:00 twice
    with pytest.raises(DuplicateTimestampError) as caught:
        prepare_series(repeated)
    assert "daylight" not in str(caught.value)
    dates_only = pd.DataFrame({"date": january.strftime("%Y-%m-%d"), "OT": np.arange(100.0)})
    with pytest.raises(DuplicateTimestampError, match=r"a date without a time of day, and up to 24 rows share one.*"
                                                      r"Fix: write the timestamps with their time of day") as caught:
        prepare_series(dates_only)
    assert "daylight" not in str(caught.value)


def test_periods_are_read_as_the_timestamps_they_start_at():
    """A Period date column was refused as 'not a date' on every row (fix: drop those rows); a PeriodIndex had no
    column holding timestamps."""
    days = pd.period_range("2023-01-01", periods=100, freq="D")
    frame = pd.DataFrame({"date": days, "OT": np.arange(100.0)})
    series = prepare_series(frame)
    assert series.dates.equals(pd.DatetimeIndex(days.to_timestamp(), name="date"))
    assert series.freq == pd.tseries.frequencies.to_offset("D")
    assert isinstance(frame["date"].dtype, pd.PeriodDtype)  # the caller's frame left as it was
    months = pd.period_range("2000-01", periods=60, freq="M")
    for table in (pd.DataFrame({"OT": np.arange(60.0)}, index=months), pd.Series(np.arange(60.0), index=months)):
        read = prepare_series(table)
        assert read.dates.equals(months.to_timestamp()) and read.freq == pd.tseries.frequencies.to_offset("MS")


def test_python_dates_are_read_as_timestamps_at_midnight():
    """``df['ts'].dt.date`` and ``groupby(df['ts'].dt.date).sum()``'s index hold datetime.date objects: 'no column
    holds timestamps', and a Series so indexed was 'not timestamps'."""
    days = pd.date_range("2024-01-01", periods=100, freq="D")
    frame = pd.DataFrame({"OT": np.arange(100.0), "day": days.date})
    for table in (frame, frame.set_index("day"), frame.set_index("day")["OT"]):
        read = prepare_series(table)
        assert read.dates.equals(pd.DatetimeIndex(days)) and read.freq == pd.tseries.frequencies.to_offset("D")
    assert frame["day"].dtype == object  # the caller's frame left as it was
    mixed = frame.assign(day=[*days.date[:50], *days[50:]])  # datetime.datetime objects too: not converted here
    assert prepare_series(mixed, date_column="day").dates.equals(pd.DatetimeIndex(days))


def test_other_irregular_duplicate_and_unsorted_rows_get_no_daylight_saving_hint():
    frame = make_frame()
    for faulty, error in ((frame.drop(index=12), IrregularTimestampError),
                          (pd.concat([frame.iloc[:13], frame.iloc[12:]]), DuplicateTimestampError),
                          (frame.iloc[[*range(12), 13, 12, *range(14, len(frame))]], UnsortedTimestampError)):
        with pytest.raises(error) as caught:
            prepare_series(faulty)
        assert "daylight" not in str(caught.value)


def test_a_single_unsorted_series_gets_no_panel_hint():
    frame = make_frame()
    frame.loc[[5, 6], "date"] = frame.loc[[6, 5], "date"].to_numpy()
    frame["label"] = "x"  # a constant text column splits nothing
    with pytest.raises(UnsortedTimestampError) as error:
        prepare_series(frame)
    assert "long-format" not in str(error.value)


def test_a_time_zone_without_a_name_to_save_is_said_with_the_fix(caplog):
    """dateutil's zones have none pandas reads back: new data in another zone was read there (its forecasts
    stamped and its calendar features computed in it) with only an INFO line to say so."""
    import dateutil.tz

    dates = pd.date_range("2023-01-01", periods=48, freq="h", tz=dateutil.tz.gettz("Europe/Berlin"))
    with caplog.at_level(logging.WARNING, logger="forecast"):
        assert zone_name(dates) is None
    assert "has no name to save" in caplog.text and "dt.tz_convert('Europe/Berlin')" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="forecast"):
        assert zone_name(dates.tz_convert("Europe/Berlin")) == "Europe/Berlin"
    assert not caplog.records


@pytest.mark.parametrize(("freq", "renamed"), [("H", "'H' is now 'h'"), ("15T", "'T' is now 'min'"),
                                               ("M", "'M' is now 'ME'"), ("every hour", None)])
def test_a_frequency_alias_pandas_renamed_is_refused_with_its_new_name(freq, renamed):
    """The original Informer code's and older pandas' aliases got the generic list of aliases only."""
    with pytest.raises(ConfigError, match="is not a pandas offset alias") as caught:
        prepare_series(make_frame(), freq=freq)
    assert (f"({renamed} in pandas)" in str(caught.value)) if renamed else " in pandas)" not in str(caught.value)


def test_a_timestamp_written_in_a_date_and_a_time_column_gets_the_fix_that_joins_them(tmp_path):
    """The fixes named one of the two as the time axis, or the other as a panel's id column; a column of times of
    day alone was read onto today's date."""
    dates = pd.date_range("2024-01-01", periods=400, freq="h")  # past the 12th: day first, as written
    path = tmp_path / "household.csv"
    pd.DataFrame({"Date": dates.strftime("%d/%m/%Y"), "Time": dates.strftime("%H:%M:%S"),
                  "power": np.arange(400.0)}).to_csv(path, index=False)
    joined = "Fix: join them into one column, df['timestamp'] = pd.to_datetime(df['Date'] + ' ' + df['Time'])"
    for date_column, error in ((None, MissingDateColumnError), ("Date", DuplicateTimestampError),
                               ("Time", UnparsableDateError)):
        with pytest.raises(error) as caught:
            prepare_series(path, date_column=date_column)
        assert joined in str(caught.value) and "id_column" not in str(caught.value)
    frame = pd.read_csv(path)
    frame["timestamp"] = pd.to_datetime(frame["Date"] + " " + frame["Time"], dayfirst=True)  # the fix, as written
    series = prepare_series(frame.drop(columns=["Date", "Time"]))
    assert series.dates.equals(pd.DatetimeIndex(dates)) and series.freq == pd.tseries.frequencies.to_offset("h")


@pytest.mark.parametrize(("freq", "grid"), [("D", "D"), ("h", "h"), ("15min", "15min")])
@pytest.mark.parametrize("allow_irregular", [False, True])
def test_jittered_timestamps_are_refused_with_the_grid_to_put_them_on(freq, grid, allow_irregular):
    """Daily rows jittered by up to an hour took a step of '86289s' (two of 119 steps), which placed every
    forecast off the grid, drifting; without allow_irregular the fix offered asfreq('86289s'), blanking each row."""
    regular = pd.date_range("2024-01-01", periods=120, freq=freq)
    scale = (regular[1] - regular[0]) / 48  # up to half an hour on days, 75 seconds on hours
    jitter = pd.to_timedelta(np.random.default_rng(0).uniform(0, 1, 120) * scale.total_seconds(), unit="s")
    frame = pd.DataFrame({"date": regular + jitter.round("s"), "OT": np.arange(120.0)})
    with pytest.raises(IrregularTimestampError, match=re.escape(f"resample({grid!r}).mean()")):
        prepare_series(frame, allow_irregular=allow_irregular)
    rounded = frame.assign(date=frame["date"].dt.round(grid))  # the fix, as written
    assert prepare_series(rounded).dates.equals(pd.DatetimeIndex(regular, name="date"))


def test_days_at_a_local_midnight_recorded_in_utc_get_the_conversion_to_their_zone():
    """In UTC they step by 23 and 25 hours at the clock changes; the fix was a generic resample."""
    berlin = pd.date_range("2021-01-01", "2021-06-30", freq="D", tz="Europe/Berlin")
    frame = pd.DataFrame({"date": berlin.tz_convert("UTC"), "OT": np.arange(len(berlin), dtype=float)})
    with pytest.raises(IrregularTimestampError, match=re.escape(
            "recorded at a fixed offset (UTC), step by 23 and 25 hours there. Fix: convert them to their local zone "
            "(df[date] = df[date].dt.tz_convert('<your zone>'))")):
        prepare_series(frame)
    converted = prepare_series(frame.assign(date=frame["date"].dt.tz_convert("Europe/Berlin")))  # the fix
    assert converted.dates.equals(pd.DatetimeIndex(berlin, name="date"))
    hourly = pd.date_range("2021-03-01", periods=24 * 40, freq="h", tz="UTC").delete(100)  # a gap, no clock
    with pytest.raises(IrregularTimestampError) as caught:
        prepare_series(pd.DataFrame({"date": hourly, "OT": np.arange(len(hourly), dtype=float)}))
    assert "daylight saving" not in str(caught.value)


def test_an_empty_first_row_of_daily_text_with_offsets_is_named():
    """Reading such text on its local clock logged the first row's time of day: NaT had none (ValueError)."""
    days = pd.date_range("2024-01-01", periods=30, freq="D", tz="Europe/Berlin").strftime("%Y-%m-%d %H:%M:%S%z")
    frame = pd.DataFrame({"date": [None, *days[1:]], "OT": np.arange(30.0)})
    with pytest.raises(UnparsableDateError, match=r"date column 'date', row 0 .*is empty"):
        prepare_series(frame)


def test_the_first_non_finite_cell_is_named_by_its_own_column_and_value():
    frame = make_frame()
    frame.loc[0, "a"] = np.nan
    frame.loc[3, "b"] = np.inf
    with pytest.raises(NonFiniteValueError, match=r"column 'a', row 0 .*is nan \(2 non-finite values"):
        prepare_series(frame)
