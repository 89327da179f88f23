"""Split borders: ETT month borders, the 70/10/20 formula, user splits, too-short series."""

from __future__ import annotations

import datetime

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from forecast.data.splits import (
    SPLIT_PROTOCOLS,
    DateSplit,
    FractionSplit,
    RowSplit,
    resolve_split,
    split_borders,
    split_key,
    window_count,
)
from forecast.errors import ConfigError, SeriesTooShortError


def test_ett_hour_borders_are_the_designed_month_borders():
    borders = split_borders(17420, 96, 24, "ett_hour")
    assert borders == {"train": (0, 8640), "val": (8640 - 96, 11520), "test": (11520 - 96, 14400)}


def test_ett_minute_borders_are_four_times_the_hourly_ones():
    hourly = SPLIT_PROTOCOLS["ett_hour"]
    minute = SPLIT_PROTOCOLS["ett_minute"]
    assert (minute.train_end, minute.val_end, minute.test_end) == tuple(
        4 * e for e in (hourly.train_end, hourly.val_end, hourly.test_end)
    )
    borders = split_borders(69680, 96, 24, "ett_minute")
    assert borders == {"train": (0, 34560), "val": (34560 - 96, 46080), "test": (46080 - 96, 57600)}


def field_ratio_borders(n_rows: int, seq_len: int) -> dict[str, tuple[int, int]]:
    """The field's Dataset_Custom borders, written out independently."""
    num_train = int(n_rows * 0.7)
    num_test = int(n_rows * 0.2)
    num_vali = n_rows - num_train - num_test
    border1s = [0, num_train - seq_len, n_rows - num_test - seq_len]
    border2s = [num_train, num_train + num_vali, n_rows]
    return dict(zip(("train", "val", "test"), zip(border1s, border2s)))


@given(
    n_rows=st.integers(min_value=10, max_value=200_000),
    seq_len=st.integers(min_value=1, max_value=800),
    pred_len=st.integers(min_value=1, max_value=800),
)
def test_ratio_borders_follow_the_field_formula_and_forecasts_tile_the_owned_rows(n_rows, seq_len, pred_len):
    expected = field_ratio_borders(n_rows, seq_len)
    assume(all(end - start >= seq_len + pred_len for start, end in expected.values()))
    borders = split_borders(n_rows, seq_len, pred_len, "ratio")
    assert borders == expected
    owned_start = 0
    for name in ("train", "val", "test"):
        start, end = borders[name]
        count = window_count(end - start, seq_len, pred_len)
        first_forecast_row = start + seq_len
        last_forecast_row = start + (count - 1) + seq_len + pred_len - 1
        if name != "train":
            assert first_forecast_row == owned_start  # lookback reaches into the previous split
        assert last_forecast_row == end - 1
        owned_start = end
    assert owned_start == n_rows


@given(
    n_rows=st.integers(min_value=10, max_value=50_000),
    seq_len=st.integers(min_value=1, max_value=300),
    pred_len=st.integers(min_value=1, max_value=300),
)
def test_a_too_short_split_raises_naming_split_rows_and_minimum(n_rows, seq_len, pred_len):
    expected = field_ratio_borders(n_rows, seq_len)
    short = [name for name, (start, end) in expected.items() if end - start < seq_len + pred_len]
    assume(short)
    start, end = expected[short[0]]
    with pytest.raises(SeriesTooShortError) as caught:
        split_borders(n_rows, seq_len, pred_len, "ratio", source="series.csv")
    message = str(caught.value)
    assert f"the {short[0]} split has {end - start} rows" in message
    assert f"seq_len + pred_len = {seq_len + pred_len}" in message
    assert "series.csv" in message and "Fix" in message


def test_protocol_longer_than_the_series_raises():
    with pytest.raises(SeriesTooShortError, match=r"'ett_hour'.*14400.*1000 rows.*split='ratio'"):
        split_borders(1000, 96, 24, "ett_hour")


def test_user_fractions_and_row_ends():
    assert split_borders(1000, 10, 5, (0.6, 0.2, 0.2)) == {"train": (0, 600), "val": (590, 800), "test": (790, 1000)}
    assert split_borders(1000, 10, 5, (500, 700, 900)) == {"train": (0, 500), "val": (490, 700), "test": (690, 900)}
    assert split_borders(1000, 10, 5, RowSplit(500, 700, 900)) == split_borders(1000, 10, 5, (500, 700, 900))
    assert split_borders(1000, 10, 5, FractionSplit()) == split_borders(1000, 10, 5, "ratio")


def test_resolve_split_names_the_kind():
    assert resolve_split("ett_hour")[0] == "ett_hour"
    assert resolve_split((0.8, 0.1, 0.1)) == ("fractions", FractionSplit(0.8, 0.1, 0.1))
    assert resolve_split([100, 200, 300]) == ("rows", RowSplit(100, 200, 300))


@pytest.mark.parametrize(
    "bad",
    ["weekly", (0.7, 0.2, 0.2), (0.7, 0.3), (300, 200, 400), (0, 10, 20), (0.5, -0.1, 0.6), 7, (0.7, True, 0.3),
     ("2021-03-01", "2021-02-01"), ("2021-02-01", "2021-02-01"), ("2021-02-01", "not a date"),
     ("2021-02-01", "2021-03-01", "2021-04-01"), ("2021-02-01T00:00+01:00", "2021-03-01")],
)
def test_invalid_split_specs_raise_config_error(bad):
    with pytest.raises(ConfigError, match="Fix"):
        resolve_split(bad)


def test_two_fractions_are_told_that_fractions_come_in_threes():
    with pytest.raises(ConfigError, match=r"two values are the dates .* or three fractions"):
        resolve_split((0.7, 0.1))


def test_window_count_is_never_negative():
    assert window_count(120, 96, 24) == 1
    assert window_count(119, 96, 24) == 0
    assert window_count(10, 96, 24) == 0


# ------------------------------------------------------------------ date borders

HOURS = pd.date_range("2021-01-01", periods=24 * 90, freq="h")  # 90 days, hourly


@given(val_day=st.integers(10, 50), test_gap=st.integers(5, 30), hour=st.integers(0, 23))
def test_date_borders_are_where_val_and_test_start(val_day, test_gap, hour):
    """Train owns every row before the first border, val the rows up to the second, test the rest."""
    val_start = HOURS[0] + pd.Timedelta(days=val_day, hours=hour)
    test_start = val_start + pd.Timedelta(days=test_gap)
    borders = split_borders(len(HOURS), 24, 12, (str(val_start), str(test_start)), dates=HOURS)
    train_end, val_end = borders["val"][0] + 24, borders["test"][0] + 24  # owned starts, after the lookback
    assert borders["train"] == (0, train_end) and borders["test"][1] == len(HOURS)
    assert HOURS[train_end - 1] < val_start == HOURS[train_end]
    assert HOURS[val_end - 1] < test_start == HOURS[val_end]


def test_date_borders_need_not_fall_on_a_timestamp_and_take_any_date_type():
    daily = pd.date_range("2021-01-01", periods=100, freq="D")
    expected = split_borders(100, 7, 3, (60, 80, 100))
    for borders in (("2021-03-01 12:00", "2021-03-21 06:00"), (datetime.date(2021, 3, 2), pd.Timestamp("2021-03-22")),
                    (np.datetime64("2021-03-02"), datetime.datetime(2021, 3, 22)), DateSplit("2021-03-02", "2021-03-22")):
        assert split_borders(100, 7, 3, borders, dates=daily) == expected
    assert resolve_split(("2021-03-02", "2021-03-22"))[0] == "dates"


def test_date_borders_take_the_series_time_zone():
    zoned = pd.date_range("2021-01-01", periods=100, freq="D", tz="America/New_York")
    naive = split_borders(100, 7, 3, ("2021-03-02", "2021-03-22"), dates=zoned)
    assert naive == split_borders(100, 7, 3, (60, 80, 100))
    utc = split_borders(100, 7, 3, ("2021-03-02T05:00+00:00", "2021-03-22T04:00+00:00"), dates=zoned)
    assert utc == naive
    with pytest.raises(ConfigError, match="time zone"):
        split_borders(100, 7, 3, ("2021-03-02T05:00+00:00", "2021-03-22T04:00+00:00"), dates=zoned.tz_localize(None))


@pytest.mark.parametrize("zone", ["America/New_York", "Asia/Tokyo"])
def test_date_borders_without_a_zone_are_on_the_series_wall_clock_at_an_hourly_frequency(zone):
    """Daily rows cannot tell a border read in UTC from one read on the series' clock: hourly ones can."""
    zoned = pd.date_range("2021-01-01", periods=24 * 6, freq="h", tz=zone)
    borders = split_borders(len(zoned), 6, 2, ("2021-01-03", "2021-01-04 12:00"), dates=zoned)
    assert borders == split_borders(len(zoned), 6, 2, (48, 84, 24 * 6))
    assert zoned[borders["val"][0] + 6] == pd.Timestamp("2021-01-03", tz=zone)  # val's first owned row


@pytest.mark.parametrize(
    ("borders", "message"),
    [(("2020-06-01", "2021-03-01"), "no train rows"), (("2021-02-01", "2021-06-01"), "no test rows"),
     (("2021-02-01 01:00", "2021-02-01 02:00"), "no row falls between"), (("2021-01-03", "2021-02-01"), "train split")],
)
def test_date_borders_outside_the_series_name_its_span(borders, message):
    daily = pd.date_range("2021-01-01", periods=100, freq="D")
    with pytest.raises(SeriesTooShortError, match=message) as caught:
        split_borders(100, 7, 3, borders, dates=daily, source="sales.csv")
    assert "sales.csv" in str(caught.value)
    if message != "train split":
        assert "2021-01-01" in str(caught.value) and "Fix" in str(caught.value)


def test_a_date_split_without_dates_is_a_config_error():
    with pytest.raises(ConfigError, match="timestamps"):
        split_borders(100, 7, 3, ("2021-03-02", "2021-03-22"))


def test_a_split_key_writes_midnight_borders_as_dates_and_keeps_other_times():
    """One form for one split, the form keys held before: YAML's dates, '2023-07-01', not '2023-07-01 00:00:00'."""
    assert split_key(["2023-07-01", "2023-10-01"]) == ["2023-07-01", "2023-10-01"]
    assert split_key([datetime.date(2023, 7, 1), "2023-10-01 00:00:00"]) == ["2023-07-01", "2023-10-01"]
    assert split_key(["2023-07-01 06:00", "2023-10-01"]) == ["2023-07-01 06:00:00", "2023-10-01"]


@pytest.mark.parametrize("spec", [(100, 200.5, 300), (100, 100, 200)])
def test_row_ends_that_are_not_increasing_integers_are_refused(spec):
    """Three numbers are row ends only if all are integers, and ends must increase: a border repeated left a split
    of no rows for a later SeriesTooShortError."""
    with pytest.raises(ConfigError):
        resolve_split(spec)
