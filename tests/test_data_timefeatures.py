"""Time features: chosen by a properly parsed frequency; timeF in [-0.5, 0.5] equal to the
field's formulas; integer calendar fields bucketed by the series' own step."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forecast.data.timefeatures import (
    calendar_fields,
    frequency_resolution,
    n_time_features,
    time_feature_sizes,
    time_features,
    timef_feature_names,
)
from forecast.errors import ConfigError

DAILY = ("day_of_week", "day_of_month", "day_of_year")


@pytest.mark.parametrize(
    ("freq", "resolution", "names"),
    [
        ("s", "second", ("second_of_minute", "minute_of_hour", "hour_of_day", *DAILY)),
        ("500ms", "second", ("second_of_minute", "minute_of_hour", "hour_of_day", *DAILY)),
        ("15min", "minute", ("minute_of_hour", "hour_of_day", *DAILY)),
        ("10min", "minute", ("minute_of_hour", "hour_of_day", *DAILY)),
        ("90min", "minute", ("minute_of_hour", "hour_of_day", *DAILY)),
        ("60min", "hour", ("hour_of_day", *DAILY)),
        ("h", "hour", ("hour_of_day", *DAILY)),
        ("2h", "hour", ("hour_of_day", *DAILY)),
        ("D", "day", DAILY),
        ("B", "business_day", DAILY),
        ("W", "week", ("day_of_month", "week_of_year")),
        ("W-TUE", "week", ("day_of_month", "week_of_year")),
        ("MS", "month", ("month_of_year",)),
        ("ME", "month", ("month_of_year",)),
        ("WOM-3FRI", "month", ("month_of_year",)),  # pandas infers it from third Fridays; it had no mapping
        ("QS", "quarter", ("month_of_year",)),
        ("YS", "year", ()),
    ],
)
def test_timef_features_are_chosen_by_the_parsed_frequency(freq, resolution, names):
    # The field cuts the alias to its last character, so '15min' or '10min' broke there.
    assert frequency_resolution(freq) == resolution
    assert timef_feature_names(freq) == names
    assert n_time_features(freq, "timeF") == len(names)
    assert time_feature_sizes(freq, "timeF") is None


def reference_timef(timestamp: dt.datetime, name: str) -> float:
    """The field's (GluonTS) formulas on the standard library's calendar."""
    iso_week = timestamp.isocalendar()[1]
    return {
        "second_of_minute": timestamp.second / 59.0 - 0.5,
        "minute_of_hour": timestamp.minute / 59.0 - 0.5,
        "hour_of_day": timestamp.hour / 23.0 - 0.5,
        "day_of_week": timestamp.weekday() / 6.0 - 0.5,
        "day_of_month": (timestamp.day - 1) / 30.0 - 0.5,
        "day_of_year": (timestamp.timetuple().tm_yday - 1) / 365.0 - 0.5,
        "month_of_year": (timestamp.month - 1) / 11.0 - 0.5,
        "week_of_year": (iso_week - 1) / 52.0 - 0.5,
    }[name]


@settings(max_examples=40, deadline=None)
@given(
    start=st.datetimes(min_value=dt.datetime(1990, 1, 1), max_value=dt.datetime(2030, 12, 31)),
    freq=st.sampled_from(["s", "15min", "10min", "h", "D", "B", "W-TUE", "MS", "QS"]),
)
def test_timef_matches_reference_formulas_and_stays_in_range(start, freq):
    dates = pd.date_range(start, periods=30, freq=freq)
    features = time_features(dates, freq, "timeF")
    names = timef_feature_names(freq)
    assert features.dtype == np.float32 and features.shape == (30, len(names))
    assert (features >= -0.5).all() and (features <= 0.5).all()
    expected = np.array([[reference_timef(ts.to_pydatetime(), n) for n in names] for ts in dates])
    np.testing.assert_allclose(features, expected, rtol=0, atol=1e-6)


def test_hourly_timef_of_the_first_etth1_row():
    # 2016-07-01 00:00 was a Friday, the 183rd day of a leap year.
    features = time_features(pd.DatetimeIndex(["2016-07-01 00:00"]), "h")
    np.testing.assert_allclose(features[0], [-0.5, 4 / 6 - 0.5, -0.5, 182 / 365 - 0.5], atol=1e-7)


@pytest.mark.parametrize(
    ("freq", "sizes"),
    [
        ("h", [13, 32, 7, 24]),
        ("2h", [13, 32, 7, 12]),
        ("15min", [13, 32, 7, 24, 4]),
        ("10min", [13, 32, 7, 24, 6]),
        ("5min", [13, 32, 7, 24, 12]),
        ("min", [13, 32, 7, 24, 60]),
        ("7min", [13, 32, 7, 24, 60]),
        ("90min", [13, 32, 7, 24, 2]),
        ("30s", [13, 32, 7, 24, 60, 2]),
        ("D", [13, 32, 7]),
        ("B", [13, 32, 7]),
        ("W-TUE", [13, 32, 54]),
        ("MS", [13]),
        ("YS", []),
    ],
)
def test_integer_field_sizes_follow_the_step(freq, sizes):
    for encoding in ("fixed", "learned"):
        assert time_feature_sizes(freq, encoding) == sizes
        assert n_time_features(freq, encoding) == len(sizes)


@settings(max_examples=40, deadline=None)
@given(
    start=st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2030, 12, 31)).map(
        lambda t: t.replace(second=0, microsecond=0)
    ),
    freq=st.sampled_from(["15min", "10min", "5min", "20min", "h", "2h", "3h"]),
)
def test_integer_fields_fit_their_tables_and_the_finest_one_fills_it(start, freq):
    # Two days of data visit every value of the finest field exactly as often.
    step = pd.Timedelta(pd.tseries.frequencies.to_offset(freq))
    dates = pd.date_range(start, periods=int(pd.Timedelta(days=2) / step), freq=freq)
    marks = time_features(dates, freq, "fixed")
    sizes = time_feature_sizes(freq, "fixed")
    assert marks.shape == (len(dates), len(sizes))
    np.testing.assert_array_equal(marks, np.round(marks))  # integers stored as float32
    assert (marks >= 0).all() and (marks < np.array(sizes)).all()
    finest_values, counts = np.unique(marks[:, -1], return_counts=True)
    assert len(finest_values) == sizes[-1] and len(set(counts)) == 1


def test_fixed_fields_hold_the_calendar_values():
    dates = pd.DatetimeIndex(["2021-03-07 13:45"])  # a Sunday
    np.testing.assert_array_equal(time_features(dates, "15min", "fixed")[0], [3, 7, 6, 13, 3])
    np.testing.assert_array_equal(time_features(dates, "15min", "learned")[0], [3, 7, 6, 13, 3])
    assert [f.name for f in calendar_fields("15min")] == ["month", "day", "weekday", "hour", "minute"]


def test_yearly_data_has_no_time_features():
    marks = time_features(pd.date_range("2000", periods=5, freq="YS"), "YS")
    assert marks.shape == (5, 0) and marks.dtype == np.float32


def test_bad_frequency_or_encoding_raises_config_error():
    with pytest.raises(ConfigError, match="offset alias"):
        frequency_resolution("fortnightly")
    with pytest.raises(ConfigError, match="no calendar-feature mapping"):
        frequency_resolution(pd.DateOffset(months=2))
    with pytest.raises(ConfigError, match="time_encoding"):
        time_features(pd.date_range("2020", periods=3, freq="h"), "h", "sinusoid")
