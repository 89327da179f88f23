"""forecast.data.panel: long-format panels read into their series, bad panels refused by name."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecast.data import prepare_panel
from forecast.errors import (
    ConfigError,
    DataError,
    DuplicateColumnError,
    DuplicateTimestampError,
    IrregularTimestampError,
    MixedFrequencyError,
    NonFiniteValueError,
    NonNumericColumnError,
    UnknownColumnError,
    UnparsableDateError,
    UnsortedTimestampError,
)

ROLES = dict(id_column="unique_id", target="y", past_covariates=["footfall"], future_covariates=["promo"],
             static_covariates=["region"])


def long_frame(lengths=(30, 12, 20), starts=("2024-01-01", "2024-01-02 05:00", "2023-12-30"), freq="h",
               interleave: bool = True) -> pd.DataFrame:
    """Series of their own lengths and starts; rows sorted by time across series when ``interleave``."""
    blocks = []
    for index, (length, start) in enumerate(zip(lengths, starts, strict=True)):
        t = np.arange(length)
        blocks.append(pd.DataFrame({
            "unique_id": f"s{index}", "ds": pd.date_range(start, periods=length, freq=freq),
            "y": 10.0 * index + t, "footfall": t % 5, "promo": (t % 7 == 0).astype(int),
            "region": ["north", "south", "east"][index],
        }))
    frame = pd.concat(blocks, ignore_index=True)
    return frame.sort_values("ds", kind="stable", ignore_index=True) if interleave else frame


def test_a_long_frame_splits_into_its_series_with_their_roles():
    frame = long_frame()
    panel = prepare_panel(frame, **ROLES)
    assert panel.ids == ("s2", "s0", "s1")  # the order ids first appear (the interleaved rows start with s2)
    assert panel.freq == pd.offsets.Hour() and panel.date_column == "ds"
    for series in panel.series:
        rows = frame[frame["unique_id"] == series.id]
        assert series.n_rows == len(rows) and series.dates.equals(pd.DatetimeIndex(rows["ds"]).rename(None))
        np.testing.assert_array_equal(series.target, rows["y"].to_numpy(float))
        np.testing.assert_array_equal(series.past[:, 0], rows["footfall"].to_numpy(float))
        np.testing.assert_array_equal(series.future[:, 0], rows["promo"].to_numpy(float))
        assert series.static == {"region": rows["region"].iloc[0]}
    assert panel["s1"].n_rows == 12 and panel["s1"].dates[0] == pd.Timestamp("2024-01-02 05:00")
    with pytest.raises(KeyError, match="no series 's9'") as raised:
        panel["s9"]
    assert isinstance(raised.value, DataError) and str(raised.value).startswith("<DataFrame>: no series 's9'")
    numbered = prepare_panel(frame.assign(unique_id=frame["unique_id"].str[1:].astype(int)), id_column="unique_id",
                             target="y", date_column="ds")
    with pytest.raises(DataError, match=r"no series '1'.*Fix: name it 1, as the data holds it"):
        numbered["1"]  # plot(df, series='1') of a panel numbered 0-2


@pytest.mark.parametrize(("value", "words"), [(np.nan, r"'region' is missing.*fillna\('unknown'\)"),
                                             (pd.Timestamp("2020-01-01"), r"'region' is Timestamp.*astype\(str\)")])
def test_a_static_covariate_that_a_saved_run_could_not_keep_is_refused(value, words):
    """Saved runs keep static categories as JSON: NaN never equals itself and a Timestamp comes back as text,
    so a loaded model would refuse its own training data."""
    frame = long_frame()
    frame["region"] = frame["region"].astype(object).where(frame["unique_id"] != "s1", value)
    with pytest.raises(DataError, match=r"series 's1': static covariate " + words):
        prepare_panel(frame, **ROLES)
    numbers = prepare_panel(long_frame().assign(region=lambda f: f["unique_id"].str[1:].astype(int)), **ROLES)
    assert [type(series.static["region"]) for series in numbers.series] == [int, int, int]  # not numpy int64


def test_a_panel_frame_with_two_columns_of_one_name_is_refused_by_name():
    frame = long_frame()
    frame.columns = ["unique_id", "ds", "y", "footfall", "footfall", "region"]
    with pytest.raises(DuplicateColumnError, match=r"\['footfall'\] appear more than once"):
        prepare_panel(frame, id_column="unique_id", target="y")


def test_a_csv_panel_reads_like_the_frame(tmp_path):
    path = tmp_path / "panel.csv"
    long_frame(interleave=False).to_csv(path, index=False)
    panel = prepare_panel(path, id_column="unique_id", target="y")  # date column found: the one with timestamps
    assert panel.ids == ("s0", "s1", "s2") and panel.source == str(path)
    assert panel.series[0].past.shape == (30, 0) and panel.series[0].future.shape == (30, 0)


def test_series_on_different_clocks_are_refused_by_name():
    hourly, daily = long_frame(lengths=(10,), starts=("2024-01-01",)), long_frame(lengths=(10,), starts=("2024-01-01",),
                                                                                    freq="D")
    frame = pd.concat([hourly, daily.assign(unique_id="d0")], ignore_index=True)
    with pytest.raises(MixedFrequencyError, match=r"series 's0' steps by 'h' and series 'd0' by 'D'.*resample"):
        prepare_panel(frame, id_column="unique_id", target="y")
    with pytest.raises(IrregularTimestampError, match="series 'd0'"):  # a given frequency is checked per series
        prepare_panel(frame, id_column="unique_id", target="y", freq="h")


@pytest.mark.parametrize("break_it, error, words", [
    (lambda f: f.drop(index=f.index[(f.unique_id == "s1")][3]), IrregularTimestampError,
     ["series 's1'", "irregular", "date column 'ds'", "row 33 (index 34)", ".groupby('unique_id').resample('h')"]),
    (lambda f: pd.concat([f, f[f.unique_id == "s0"].iloc[[4]]]).sort_values(["unique_id", "ds"], kind="stable"),
     DuplicateTimestampError, ["series 's0'", "appears on", "date column 'ds'", "row 4 (index 4) and row 5 (index 4)",
                               "drop_duplicates(subset=['unique_id', 'ds'])"]),
    (lambda f: f.iloc[::-1], UnsortedTimestampError, ["series 's2'", "backwards", "sort_values(['unique_id', 'ds'])"]),
    (lambda f: f.assign(y=f.y.where(f.index != 7)), NonFiniteValueError, ["series", "'y'", "row 7", "fill_nan="]),
    (lambda f: f.assign(footfall=f.footfall.astype(object).where(f.index != 3, "n/a")), NonNumericColumnError,
     ["'footfall'", "'n/a'"]),
    (lambda f: f.assign(region=f.region.where(f.index != 5, "west")), DataError,
     ["static covariate 'region'", "constant within each series", "series 's0'"]),
    (lambda f: f.assign(unique_id=f.unique_id.where(f.index != 2)), DataError, ["id column 'unique_id'", "row 2"]),
])
def test_a_bad_series_is_named_with_the_fix(break_it, error, words):
    frame = break_it(long_frame(interleave=False))
    with pytest.raises(error) as raised:
        prepare_panel(frame, **ROLES)
    for word in words:
        assert word in str(raised.value)


def test_a_duplicate_date_names_the_file_series_column_and_table_rows_with_a_panel_fix(tmp_path):
    frame = long_frame(interleave=False)  # s0: table rows 0-29, s1: 30-41, s2: 42-61
    twice = pd.concat([frame, frame.iloc[[32]]]).sort_values(["unique_id", "ds"], kind="stable", ignore_index=True)
    path = tmp_path / "panel.csv"
    twice.to_csv(path, index=False)
    with pytest.raises(DuplicateTimestampError) as raised:
        prepare_panel(path, **ROLES)
    message = str(raised.value)
    for words in (f"{path}, series 's1'", "timestamp 2024-01-02 07:00:00 of date column 'ds'",
                  "row 32 (line 34 of the file) and row 33 (line 35 of the file)",
                  "df.drop_duplicates(subset=['unique_id', 'ds'])", "df.groupby(['unique_id', 'ds'], as_index=False)"):
        assert words in message
    assert "allow_duplicates" not in message and "drop_duplicates(date_column)" not in message  # a wide table's fixes
    fixed = prepare_panel(twice.drop_duplicates(subset=["unique_id", "ds"]), **ROLES)  # the fix it gives works
    assert fixed.ids == ("s0", "s1", "s2") and fixed["s1"].dates.equals(prepare_panel(frame, **ROLES)["s1"].dates)


def test_a_gap_names_the_file_series_column_and_table_row_with_a_panel_fix(tmp_path):
    frame = long_frame(interleave=False)
    gap = frame.drop(index=33)  # s1's 2024-01-02 08:00
    path = tmp_path / "panel.csv"
    gap.to_csv(path, index=False)
    with pytest.raises(IrregularTimestampError) as raised:
        prepare_panel(path, **ROLES)
    message = str(raised.value)
    recipe = ("df.set_index('ds').groupby('unique_id').resample('h').asfreq()"
              ".drop(columns='unique_id', errors='ignore').reset_index()")
    for words in (f"{path}, series 's1'", "date column 'ds'", "row 33 (line 35 of the file)",
                  "2024-01-02 07:00:00 is followed by 2024-01-02 09:00:00", recipe, "fill_nan='ffill'"):
        assert words in message
    assert "allow_irregular" not in message  # a wide table's fix
    # The fix it gives, as written, works on the long table, and the missing step stays marked as filled, never
    # scored (a resample's ffill, the fix before, made it up as an observed value).
    fixed = prepare_panel(eval(recipe, {"df": gap}), **ROLES, fill_nan="ffill")
    assert fixed["s1"].n_rows == 12 and fixed["s1"].target[3] == fixed["s1"].target[2]
    assert fixed["s1"].filled_target.tolist() == [index == 3 for index in range(12)]
    assert fixed["s0"].n_rows == 30 and fixed["s2"].static == {"region": "east"}


def test_a_series_without_any_value_in_a_column_gets_a_panels_fix():
    """It was told to drop the column or pass columns=[...], which a panel refuses."""
    frame = long_frame(interleave=False)
    frame.loc[frame.unique_id == "s1", "y"] = np.nan
    with pytest.raises(NonFiniteValueError, match=r"series 's1': column 'y' holds no finite value.*Fix: leave this "
                                                  r"series out of the table, or give it values in that column\."):
        prepare_panel(frame, **ROLES, fill_nan="ffill")


def test_gaps_filled_by_policy_stay_inside_their_series():
    frame = long_frame(interleave=False)
    first_of_s1 = frame.index[frame.unique_id == "s1"][0]
    frame.loc[first_of_s1, "y"] = np.nan
    with pytest.raises(NonFiniteValueError, match="series 's1'"):
        prepare_panel(frame, **ROLES)
    # A forward fill over the whole table would copy s0's last value (29.0); per series, s1's
    # leading gap takes its own next value.
    assert prepare_panel(frame, **ROLES, fill_nan="ffill")["s1"].target[0] == 11.0
    assert prepare_panel(frame, **ROLES, fill_nan="interpolate")["s1"].target[0] == 11.0


def test_column_roles_are_checked():
    frame = long_frame()
    with pytest.raises(UnknownColumnError, match=r"future_covariates 'price' is not a column.*'unique_id'"):
        prepare_panel(frame, id_column="unique_id", target="y", future_covariates=["price"])
    with pytest.raises(ConfigError, match="'promo' is given as both past_covariates and future_covariates"):
        prepare_panel(frame, id_column="unique_id", target="y", past_covariates=["promo"], future_covariates=["promo"])
    with pytest.raises(ConfigError, match="id column"):
        prepare_panel(frame.set_index("ds")["y"], id_column="unique_id", target="y")


def test_a_role_spelt_in_another_case_is_named_as_the_table_spells_it():
    frame = long_frame().rename(columns={"unique_id": "Store"})
    with pytest.raises(UnknownColumnError, match=r"id_column 'store' is not a column; the columns are \[.*\]\. The "
                                                 r"table spells 'store' as 'Store'\. Fix: name the column"):
        prepare_panel(frame, **{**ROLES, "id_column": "store"})


def test_a_column_held_in_the_index_is_named_as_an_index_level_with_reset_index_as_the_fix():
    """frame.set_index(['unique_id', 'ds']) was refused as if the id column did not exist."""
    frame = long_frame()
    roles = dict(id_column="unique_id", date_column="ds", target="y")
    with pytest.raises(UnknownColumnError, match=r"id_column 'unique_id' is a level of the table's index "
                                                 r"\['unique_id', 'ds'\], not a column.*Fix: df\.reset_index\(\)"):
        prepare_panel(frame.set_index(["unique_id", "ds"]), **roles)
    with pytest.raises(UnknownColumnError, match=r"id_column 'unique_id' is a level of the table's index.*"
                                                 r"Fix: df\.reset_index\(\)"):
        prepare_panel(frame.set_index("unique_id"), **roles)
    with pytest.raises(DataError, match=r"the timestamps are level 'ds' of the table's index \['unique_id', 'ds'\]; "
                                        r"df\.reset_index\(\) makes them a column"):
        prepare_panel(frame.set_index(["unique_id", "ds"]), id_column="unique_id", target="y")


def test_future_covariates_indexed_by_date_name_the_index_level_with_reset_index_as_the_fix():
    from forecast.data.panel import forecast_index, future_covariate_rows

    panel = prepare_panel(long_frame(), **ROLES)
    steps = forecast_index(panel, 3)
    future = steps.to_frame(index=False).assign(promo=1.0)
    with pytest.raises(UnknownColumnError, match=r"future covariates <DataFrame>: 'ds' is a level of the table's "
                                                 r"index \['ds'\], not a column.*Fix: df\.reset_index\(\)"):
        future_covariate_rows(panel, future.set_index("ds"), steps)
    with pytest.raises(UnknownColumnError, match=r"has no column 'promo'"):
        future_covariate_rows(panel, future.drop(columns="promo"), steps)


def test_semi_monthly_series_are_read_as_semi_monthly():
    frame = long_frame(lengths=(30, 12), starts=("2020-01-01", "2021-03-15"), freq="SMS")
    assert prepare_panel(frame, **ROLES).freq == pd.tseries.frequencies.to_offset("SMS")
    with pytest.raises(IrregularTimestampError, match=r"semi-monthly.*Fix: pass freq='SMS'"):
        prepare_panel(frame.drop(index=5), **ROLES)


def test_splits_are_cut_inside_each_series_and_short_series_are_named():
    from forecast.data import panel_borders
    from forecast.data.splits import split_borders
    from forecast.errors import SeriesTooShortError

    frame = long_frame(lengths=(60, 45, 80), starts=("2024-01-01", "2024-01-01 10:00", "2023-12-31"))
    panel = prepare_panel(frame, id_column="unique_id", target="y")
    borders = panel_borders(panel, seq_len=8, pred_len=2, split=(0.6, 0.2, 0.2))
    assert list(borders) == list(panel.ids)
    for series in panel.series:  # each series by its own length
        assert borders[series.id] == split_borders(series.n_rows, 8, 2, (0.6, 0.2, 0.2))
    # By dates, every series is cut at the same instants.
    by_date = panel_borders(panel, seq_len=8, pred_len=2, split=("2024-01-02 12:00", "2024-01-03 00:00"))
    for series in panel.series:
        train_end = by_date[series.id]["train"][1]
        assert series.dates[train_end] == pd.Timestamp("2024-01-02 12:00")
    with pytest.raises(SeriesTooShortError, match=r"2 of 3 series are too short.*\['s0', 's1'\].*series 's0'"):
        panel_borders(panel, seq_len=30, pred_len=5, split=(0.5, 0.25, 0.25))


def test_a_categorical_id_column_gives_the_series_it_holds():
    frame = long_frame()
    frame["unique_id"] = pd.Categorical(frame["unique_id"], categories=["s0", "s1", "s2", "unused"])
    assert prepare_panel(frame, id_column="unique_id", target="y").ids == ("s2", "s0", "s1")


def test_windows_are_cut_inside_each_series_and_cover_every_position_once():
    from forecast.data import panel_borders, panel_windows
    from forecast.data.splits import window_count

    panel = prepare_panel(long_frame(lengths=(60, 45, 80), starts=("2024-01-01", "2024-01-01 10:00", "2023-12-31")),
                          id_column="unique_id", target="y")
    seq_len, pred_len = 6, 3
    borders = panel_borders(panel, seq_len, pred_len, (0.6, 0.2, 0.2))
    for split in ("train", "val", "test"):
        windows = panel_windows(panel, borders, split, seq_len, pred_len)
        assert windows.dtype == np.int64 and windows.shape[1] == 2
        expected = sum(window_count(end - start, seq_len, pred_len) for start, end in
                       (borders[series.id][split] for series in panel.series))
        assert len(windows) == expected and len({tuple(w) for w in windows}) == expected  # each once
        for position, first in windows:
            start, end = borders[panel.series[position].id][split]
            assert start <= first and first + seq_len + pred_len <= end  # inside its series' split
    with pytest.raises(ConfigError, match="split"):
        panel_windows(panel, borders, "holdout", seq_len, pred_len)


def test_a_panels_truth_is_each_series_observed_target_and_nan_where_fill_nan_filled():
    """Each split's truth: every series' target over its own split rows, back to back, NaN on the values fill_nan made
    up and only there; the filled values still feed the windows' inputs."""
    from forecast.data import WindowDataModule

    frame = long_frame(lengths=(40, 30, 50), interleave=False)
    frame.loc[frame.index[40 + 26], "y"] = np.nan  # s1's test rows
    frame.loc[frame.index[70 + 10], "y"] = np.nan  # s2's train rows
    frame.loc[frame.index[70 + 37], "y"] = np.nan  # s2's val rows
    dm = WindowDataModule(frame, seq_len=4, label_len=2, pred_len=2, **ROLES, fill_nan="ffill")
    for split in ("train", "val", "test"):
        expected = np.concatenate([frame.loc[frame["unique_id"] == series.id, "y"].to_numpy()[
            slice(*dm.borders[series.id][split])] for series in dm.panel.series])
        ds = dm.dataset(split)
        np.testing.assert_array_equal(ds.truth.numpy()[:, 0], expected)
        assert np.isfinite(ds.values.numpy()).all()
    assert np.isnan(dm.test_dataset.truth.numpy()).sum() == 2  # s1's, and s2's val row in its lookback rows


def test_a_csv_panels_ids_are_read_as_written(tmp_path):
    """pandas read '007' as the number 7 (and '010' as 10), so a forecast renamed the series; 'NA' is an id too."""
    frame = long_frame().assign(unique_id=lambda f: f["unique_id"].map({"s0": "007", "s1": "NA", "s2": "010"}))
    path = tmp_path / "panel.csv"
    frame.to_csv(path, index=False)
    panel = prepare_panel(path, **ROLES)  # the date column is still found: '007' is no date
    assert panel.ids == ("010", "007", "NA") and panel.date_column == "ds"
    assert panel["007"].n_rows == 30
    numbers = long_frame().assign(unique_id=lambda f: f["unique_id"].str[1:].astype(int))
    assert prepare_panel(numbers, **ROLES).ids == (2, 0, 1)  # a frame's ids keep their type
    frame.loc[4, "unique_id"] = ""
    frame.to_csv(path, index=False)
    with pytest.raises(DataError, match=r"id column 'unique_id' is empty on row 4 \(line 6 of the file\)"):
        prepare_panel(path, **ROLES)


def test_dates_written_day_first_are_read_in_one_order_for_every_series(tmp_path):
    """s1's twelve days read both ways (daily or monthly); s0's '13/01/2024' only day first: one order for the
    column, where each series read alone took its own (s1 monthly) or was refused."""
    frame = long_frame(lengths=(20, 12), starts=("2024-01-01", "2024-01-01"), freq="D", interleave=False)
    days = frame["ds"]
    path = tmp_path / "panel.csv"
    frame.assign(ds=days.dt.strftime("%d/%m/%Y")).to_csv(path, index=False)
    panel = prepare_panel(path, id_column="unique_id", target="y")
    assert panel.freq.freqstr == "D" and panel.date_format == "%d/%m/%Y"
    for series in panel.series:
        assert series.dates.equals(pd.DatetimeIndex(days[frame["unique_id"] == series.id]).rename(None))


def test_future_covariates_are_matched_on_the_series_clock():
    """Timestamps without a zone never match zoned ones: the table was 'without rows' for every series. Another
    zone's timestamps are the same instants: converted, they match."""
    from forecast.data.panel import forecast_index, future_covariate_rows

    frame = long_frame(lengths=(20, 15), starts=("2024-03-30", "2024-03-29 20:00"))
    frame["ds"] = frame["ds"].dt.tz_localize("Europe/Paris")
    panel = prepare_panel(frame, **ROLES)
    steps = forecast_index(panel, 4)
    future = steps.to_frame(index=False).assign(promo=np.arange(8.0))
    naive = future.assign(ds=future["ds"].dt.tz_localize(None))
    with pytest.raises(DataError) as raised:
        future_covariate_rows(panel, naive, steps)
    for words in ("future covariates <DataFrame>: date column 'ds' has no time zone", "'Europe/Paris'",
                  "Fix: give them their zone", ".dt.tz_localize("):
        assert words in str(raised.value)
    expected = future_covariate_rows(panel, future, steps)
    in_utc = future.assign(ds=future["ds"].dt.tz_convert("UTC"))
    np.testing.assert_array_equal(future_covariate_rows(panel, in_utc, steps), expected)
    assert panel.time_zone == "Europe/Paris"
    utc_panel = prepare_panel(frame.assign(ds=frame["ds"].dt.tz_convert("UTC")), **ROLES, time_zone="Europe/Paris")
    assert [series.dates.equals(mine.dates) for series, mine in zip(utc_panel.series, panel.series)] == [True, True]
    with pytest.raises(DataError, match="date column 'ds' is in time zone 'Europe/Paris', but the fitted data's"):
        prepare_panel(frame, **ROLES, time_zone="naive")


def test_a_future_covariates_table_is_read_whole_and_only_its_forecast_steps_used():
    """As its docstring says: other rows may miss values, but every row is read, so a bad cell anywhere is named."""
    from forecast.data.panel import forecast_index, future_covariate_rows

    panel = prepare_panel(long_frame(), **ROLES)
    steps = forecast_index(panel, 3)
    future = steps.to_frame(index=False).assign(promo=1.0)
    history = future.assign(ds=future["ds"] - pd.Timedelta("10h"), promo=np.nan)  # no forecast step among them
    known = future_covariate_rows(panel, pd.concat([history, future], ignore_index=True), steps)
    assert known.shape == (3, 3, 1) and (known == 1.0).all()
    history["promo"] = history["promo"].astype(object)
    history.loc[1, "promo"] = "?"
    with pytest.raises(NonNumericColumnError, match=r"future covariates <DataFrame>: column 'promo'.*row 1 holds '\?'"):
        future_covariate_rows(panel, pd.concat([history, future], ignore_index=True), steps)


def _paris_panel_read_back(tmp_path, caplog, spring: pd.DatetimeIndex, winter: pd.DatetimeIndex):
    """Series 'a' at ``spring``'s dates and 'b' at ``winter``'s, written by to_csv (each row's UTC offset) and
    read back: ``(the frame written, the panel read)``."""
    frame = pd.concat([pd.DataFrame({"unique_id": "a", "ds": spring, "y": np.arange(len(spring), dtype=float)}),
                       pd.DataFrame({"unique_id": "b", "ds": winter, "y": np.arange(len(winter), dtype=float)})])
    path = tmp_path / "paris.csv"
    frame.to_csv(path, index=False)
    with caplog.at_level("INFO", logger="forecast"):
        return frame, prepare_panel(path, id_column="unique_id", target="y")


def test_a_daylight_saving_csv_puts_every_series_on_one_clock(tmp_path, caplog):
    """pandas writes a Paris panel with each row's offset: a series across the March change reads as UTC instants
    (its offsets vary), one within winter as a fixed +01:00. Left so, the panel recorded no zone and new data for
    the winter series that crossed the change was read on another clock; every series is now in UTC, and logged."""
    spring = pd.date_range("2024-03-25", periods=200, freq="h", tz="Europe/Paris")  # crosses 31 March
    winter = pd.date_range("2024-01-10", periods=200, freq="h", tz="Europe/Paris")
    frame, panel = _paris_panel_read_back(tmp_path, caplog, spring, winter)
    assert panel.time_zone == "UTC"
    assert panel["a"].dates.equals(spring.tz_convert("UTC")) and panel["b"].dates.equals(winter.tz_convert("UTC"))
    assert "series 'b'" in caplog.text and "read in UTC" in caplog.text
    rereading = prepare_panel(frame, id_column="unique_id", target="y", time_zone=panel.time_zone)  # new data
    assert [series.dates.equals(mine.dates) for series, mine in zip(rereading.series, panel.series)] == [True, True]


def test_a_daily_daylight_saving_csv_puts_every_series_on_its_local_clock(tmp_path, caplog):
    """Daily Paris rows: a series across the March change reads on its local clock (in UTC it steps by 23 hours),
    and so does one within winter at a fixed +01:00 (it was kept zoned, then moved to the other's clock)."""
    spring = pd.date_range("2024-02-25", periods=100, freq="D", tz="Europe/Paris")
    winter = pd.date_range("2023-11-10", periods=100, freq="D", tz="Europe/Paris")
    _, panel = _paris_panel_read_back(tmp_path, caplog, spring, winter)
    assert panel.time_zone == "naive" and panel.freq == pd.tseries.frequencies.to_offset("D")
    assert panel["a"].dates.equals(spring.tz_localize(None)) and panel["b"].dates.equals(winter.tz_localize(None))
    assert "series 'b': date column 'ds': every row is at 00:00 on the clock of its UTC offset" in caplog.text


@pytest.mark.parametrize(("column", "cells"), [("footfall", ["busy"]), ("y", ["1,234", "high"])])
def test_text_in_a_panel_column_is_fixed_by_its_roles_not_by_columns(column, cells):
    """The fix named columns=[...], which a panel refuses ("chooses a wide table's variables")."""
    frame = long_frame().astype({column: object})
    for row, cell in enumerate(cells):
        frame.loc[row, column] = cell
    with pytest.raises(NonNumericColumnError, match=rf"series 's2': column '{column}' is not numeric.*Fix: .*leave it "
                                                    r"out of past_covariates and future_covariates") as caught:
        prepare_panel(frame, **ROLES)
    assert "columns=" not in str(caught.value)


@pytest.mark.parametrize("ids", [{"s0": ("north", 1), "s1": ("south", 2), "s2": ("west", 3)},  # a two-key groupby
                                 {"s0": pd.Timestamp("2020-01-01"), "s1": pd.Timestamp("2020-02-01"),
                                  "s2": pd.Timestamp("2020-03-01")}])
def test_ids_other_than_text_or_numbers_are_refused_with_the_fix(ids):
    """Tuple ids fitted, then predict and evaluate(by_series=True) failed inside pandas; date ids were saved as
    text and the loaded forecaster refused its own series as unseen."""
    frame = long_frame().assign(unique_id=lambda f: f["unique_id"].map(ids))
    kind = type(ids["s0"]).__name__
    with pytest.raises(DataError, match=rf"id column 'unique_id' holds .* \({kind}\), not text or a number.*"
                                        r"Fix: df\['unique_id'\] = df\['unique_id'\].astype\(str\)"):
        prepare_panel(frame, **ROLES, date_column="ds")
    text = frame.assign(unique_id=frame["unique_id"].astype(str))  # the fix it names
    assert len(prepare_panel(text, **ROLES, date_column="ds").ids) == 3


def test_two_ids_written_alike_are_refused_by_name():
    """Ids 1 and '1' were two series that a forecast's CSV and evaluate(by_series=True) both wrote as '1'."""
    frame = long_frame().assign(unique_id=lambda f: f["unique_id"].map({"s0": 1, "s1": "1", "s2": "s2"}))
    with pytest.raises(DataError, match=r"ids 1 and '1' of id column 'unique_id' are two series written alike.*"
                                        r"astype\(str\)"):
        prepare_panel(frame, **ROLES)
    mixed = long_frame().assign(unique_id=lambda f: f["unique_id"].map({"s0": 1, "s1": "s1", "s2": 2.5}))
    assert prepare_panel(mixed, **ROLES).ids == (2.5, 1, "s1")  # types may mix where the texts differ


def test_a_csv_whose_series_mix_zoned_and_unzoned_timestamps_is_refused_by_name(tmp_path):
    """Read per series, each series parsed alone: the panel was fitted and its forecast's dates mixed aware and
    naive timestamps, where the same column read whole (a wide table's) is refused."""
    frame = long_frame(interleave=False).astype({"ds": str})
    frame.loc[frame["unique_id"] == "s1", "ds"] += "+02:00"
    path = tmp_path / "panel.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(UnparsableDateError) as raised:
        prepare_panel(path, **ROLES)
    for words in (f"{path}: date column 'ds' mixes zoned and unzoned timestamps", "series 's1' is in 'UTC+02:00'",
                  "series 's0' has no time zone", "Fix: put the whole column on one clock",
                  "pd.to_datetime(df['ds'], utc=True, format='ISO8601')"):
        assert words in str(raised.value)
    frame["ds"] = pd.to_datetime(frame["ds"], utc=True, format="ISO8601")  # the fix it names
    assert prepare_panel(frame, **ROLES).time_zone == "UTC"
