"""Forecaster end to end on a small synthetic CSV: fit, evaluate, predict, plot, save, load."""

from __future__ import annotations

import datetime
import json
import logging
import os
import shutil
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from matplotlib.figure import Figure

import forecast
from forecast import Forecaster
from forecast.api import model_option_names
from forecast.config import RunConfig
from forecast.data import WindowDataModule
from forecast.errors import ConfigError, DataError
from forecast.experiment import dataset_label
from forecast.layers.attention import ProbSparseWeights
from forecast.models import MODELS, ForecastModel
from forecast.models.base import SAMPLE_PATHS, SAMPLE_SEED
from forecast.plotting import plot_attention, plot_probsparse, quantile_column
from forecast.recipes import get_recipe
from forecast.sweep import SweepSpec

ROWS, SEQ_LEN, LABEL_LEN, PRED_LEN = 400, 32, 16, 8
WINDOW = dict(seq_len=SEQ_LEN, label_len=LABEL_LEN, pred_len=PRED_LEN)
ATTENTIVE = {"informer", "transformer", "logsparse"}  # the registered models with attention weights
# the smallest sensible size of every model field that exists
TINY_SIZES = {"d_model": 16, "n_heads": 2, "d_ff": 32, "n_layers": 1, "factor": 2, "dropout": 0.0}


def tiny(model: str) -> dict:
    fields = set(model_option_names(model)) - ({"factor"} if model == "transformer" else set())  # no ProbSparse
    return {name: value for name, value in TINY_SIZES.items() if name in fields}


def make_frame(rows: int = ROWS, freq: str = "h", seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    t = np.arange(rows)
    return pd.DataFrame({
        "date": pd.date_range("2021-01-01", periods=rows, freq=freq),
        "a": np.sin(2 * np.pi * t / 24) + 0.05 * rng.standard_normal(rows),
        "b": np.cos(2 * np.pi * t / 12) + 0.05 * rng.standard_normal(rows),
        "OT": 1000 + 10 * np.sin(2 * np.pi * t / 24 + 1.0) + 0.5 * rng.standard_normal(rows),
    })


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return make_frame()


@pytest.fixture(scope="module")
def csv(tmp_path_factory, frame) -> str:
    path = tmp_path_factory.mktemp("data") / "series.csv"
    frame.to_csv(path, index=False)
    return str(path)


@pytest.fixture(scope="module")
def fitted(csv) -> Forecaster:
    return Forecaster("informer", **WINDOW, max_epochs=2, learning_rate=1e-3, **tiny("informer")).fit(csv)


def future_index(frame: pd.DataFrame, freq: str = "h") -> pd.DatetimeIndex:
    last = frame["date"].iloc[-1]
    return pd.date_range(last + pd.tseries.frequencies.to_offset(freq), periods=PRED_LEN, freq=freq, name="date")


# ---------------------------------------------------------------------------- predict


def test_predict_forecasts_the_steps_after_the_last_row_in_original_units(fitted, frame):
    future = fitted.predict()
    assert len(future) == PRED_LEN
    pd.testing.assert_index_equal(future.index, future_index(frame))
    assert list(future.columns) == ["a", "b", "OT"]  # target last; informer has no quantiles
    assert np.isfinite(future.to_numpy()).all()
    assert future["OT"].between(960, 1040).all()  # original units: the standardized scale is near 0
    shorter = fitted.predict(frame.iloc[:300])
    pd.testing.assert_index_equal(shorter.index, future_index(frame.iloc[:300]))
    pd.testing.assert_frame_equal(fitted.predict(frame), future)
    # only the last seq_len rows matter, scaled with the training statistics (never refitted)
    pd.testing.assert_frame_equal(fitted.predict(frame.iloc[-SEQ_LEN:]), future)


@pytest.mark.parametrize(("features", "freq"), [("M", "15min"), ("S", "h"), ("MS", "D")])
def test_naive_forecast_repeats_the_last_value(features, freq):
    frame = make_frame(rows=300, freq=freq, seed=1)
    fc = Forecaster("naive", **WINDOW, features=features).fit(frame)
    future = fc.predict()
    pd.testing.assert_index_equal(future.index, future_index(frame, freq))
    outputs = ["a", "b", "OT"] if features == "M" else ["OT"]
    assert list(future.columns) == outputs
    last = frame[outputs].iloc[-1].to_numpy()
    np.testing.assert_allclose(future.to_numpy(), np.broadcast_to(last, (PRED_LEN, len(outputs))), rtol=1e-6)


# 70/10/20 by rows: train rows [0, 280), val [280, 320), test [320, 400); val and test windows
# start SEQ_LEN rows before their block.
@pytest.mark.parametrize(("windows", "first_row", "end_row"),
                         [("test", 320 - SEQ_LEN, ROWS), ("val", 280 - SEQ_LEN, 320), ("train", 0, 280)])
def test_evaluate_scores_every_window_of_the_split_asked_for_on_both_scales(frame, windows, first_row, end_row):
    fc = Forecaster("naive", **WINDOW).fit(frame)
    report = fc.evaluate(detail=True) if windows == "test" else fc.evaluate(windows=windows, detail=True)
    assert set(report["scale"]) == {"standardized", "original"}
    n_windows = end_row - first_row - SEQ_LEN - PRED_LEN + 1
    assert (report["n_windows"] == n_windows).all()
    values = frame[["a", "b", "OT"]].to_numpy()
    starts = np.arange(first_row, first_row + n_windows)
    errors = [values[s + SEQ_LEN: s + SEQ_LEN + PRED_LEN] - values[s + SEQ_LEN - 1] for s in starts]
    overall = report.query("horizon == 'all' and variable == 'all' and scale == 'original'")
    mse = overall.query("metric == 'mse'")["value"].item()
    mae = overall.query("metric == 'mae'")["value"].item()
    assert mse == pytest.approx(np.mean(np.square(errors)), rel=1e-5)
    assert mae == pytest.approx(np.mean(np.abs(errors)), rel=1e-5)
    pd.testing.assert_frame_equal(fc.evaluate(frame, windows=windows, detail=True), report)
    # the fitted data module still serves the test windows
    pd.testing.assert_frame_equal(fc.evaluate(), fc.evaluate(windows="test"))
    assert fc.evaluate().attrs["n_windows"] == ROWS - 320 - PRED_LEN + 1


def test_original_units_keep_the_digits_of_a_series_at_a_high_level():
    """A meter reading near 2e7 that moves by about 1 a step: float32 holds it to +-1, so un-scaling in float32
    overstated the report's MSE by a fifth."""
    rows = 500
    level = 2e7 + np.random.default_rng(0).normal(size=rows).cumsum()
    frame = pd.DataFrame({"date": pd.date_range("2021-01-01", periods=rows, freq="h"), "y": level})
    fc = Forecaster("naive", seq_len=24, label_len=12, pred_len=6).fit(frame)
    starts = np.arange(400 - 24, rows - 24 - 6 + 1)  # the test windows of the 70/10/20 split
    errors = np.stack([level[s + 24: s + 30] - level[s + 23] for s in starts])  # [N, P]
    report = fc.evaluate()
    assert report.loc["mse", "original"] == pytest.approx(np.mean(errors ** 2), rel=1e-6)
    assert report.loc["mae", "original"] == pytest.approx(np.mean(np.abs(errors)), rel=1e-6)
    assert fc.predict()["y"].to_numpy() == pytest.approx(level[-1], abs=1e-6)


def test_original_units_score_against_the_datas_own_values():
    """Truths were the float32 windows scaled back, so a zero came back as about 3e-7 and MAPE, which leaves zero
    truths out, divided by it (ETTh1's seasonal_naive: 1.1e6 instead of 0.58)."""
    rows = 400
    values = np.round(20 + 5 * np.sin(np.arange(rows) / 5), 1)
    values[::7] = 0.0  # exact zeros, far below the mean
    frame = pd.DataFrame({"date": pd.date_range("2021-01-01", periods=rows, freq="h"), "y": values})
    fc = Forecaster("naive", seq_len=24, label_len=12, pred_len=6).fit(frame)
    truths = np.stack([values[s + 24: s + 30] for s in range(320 - 24, rows - 30 + 1)])  # [N, P] test windows
    last = np.stack([np.full(6, values[s + 23]) for s in range(320 - 24, rows - 30 + 1)])
    observed = truths != 0
    expected = np.mean(np.abs((last - truths)[observed] / truths[observed]))
    assert fc.evaluate().loc["mape", "original"] == pytest.approx(expected, rel=1e-6)  # forecasts: float32 windows


def test_new_rows_off_the_fitted_grid_get_a_fix_predict_takes(frame):
    """predict/evaluate on rows with gaps offered freq=... and allow_irregular=True, options they do not take."""
    fc = Forecaster("naive", **WINDOW).fit(frame)
    gappy = frame.drop(index=[350, 351])
    for call in (lambda: fc.predict(gappy), lambda: fc.evaluate(gappy)):
        with pytest.raises(DataError) as raised:
            call()
        message = str(raised.value)
        assert "The model was fitted on rows every 'h', and reads new rows the same way. Fix: put them on that grid " \
               "(df.set_index(date).asfreq('h'), then fill the gaps)" in message
        assert "allow_irregular" not in message and "freq=" not in message


def test_values_fill_nan_made_up_are_not_scored():
    """An outage in the test period, forward filled: the filled stretch is what naive forecasts, and it was
    scored as truth (MSE 0.0143 against 0.0336 over the observed values)."""
    rows = 400
    values = np.random.default_rng(0).normal(size=rows).cumsum() + 50
    frame = pd.DataFrame({"date": pd.date_range("2021-01-01", periods=rows, freq="h"), "y": values})
    frame.loc[340:389, "y"] = np.nan
    fc = Forecaster("naive", seq_len=24, label_len=12, pred_len=6, fill_nan="ffill").fit(frame)
    filled = frame["y"].ffill().to_numpy()
    starts = range(320 - 24, rows - 30 + 1)
    truths = np.stack([frame["y"].to_numpy()[s + 24: s + 30] for s in starts])  # [N, P], NaN where filled
    errors = np.stack([np.full(6, filled[s + 23]) for s in starts]) - truths
    observed = ~np.isnan(truths)
    report = fc.evaluate()
    assert report.loc["mse", "original"] == pytest.approx(np.mean(errors[observed] ** 2), rel=1e-6)
    scale = frame["y"].iloc[:280].std(ddof=0)
    assert report.loc["mse", "standardized"] == pytest.approx(np.mean(errors[observed] ** 2) / scale ** 2, rel=1e-5)
    assert report.attrs["n_windows"] == len(starts)  # every window kept, scored on what it observed


def test_evaluate_summarizes_metrics_by_scale_with_percentages_in_original_units_only(frame):
    fc = Forecaster("naive", **WINDOW).fit(frame)
    summary, detail = fc.evaluate(), fc.evaluate(detail=True)
    assert list(summary.columns) == ["standardized", "original"]
    assert list(summary.index) == ["mse", "mae", "rmse", "mape", "mspe", "rho_risk_0.1", "rho_risk_0.5",
                                   "rho_risk_0.9"]
    overall = detail.query("horizon == 'all' and variable == 'all'")
    for row in overall.itertuples():
        assert summary.loc[row.metric, row.scale] == row.value
    assert summary.loc[["mape", "mspe"], "standardized"].isna().all()
    assert set(detail.loc[detail["metric"].isin(["mape", "mspe"]), "scale"]) == {"original"}
    with pytest.raises(ConfigError, match="detail"):
        fc.evaluate(detail="yes")


# ------------------------------------------------------------ any table, defaults


@pytest.mark.parametrize("features", ["M", "S", "MS"])
def test_a_csv_without_ot_needs_no_target_and_its_date_column_is_found(tmp_path, frame, features):
    other = frame.rename(columns={"date": "timestamp", "OT": "load"})[["a", "timestamp", "b", "load"]]
    path = tmp_path / "meter.csv"
    other.to_csv(path, index=False)
    fc = Forecaster("naive", **WINDOW, features=features).fit(path)
    outputs = ["a", "b", "load"] if features == "M" else ["load"]
    assert fc.output_columns == outputs
    future = fc.predict(path)
    assert future.index.name == "timestamp" and list(future.columns) == outputs
    np.testing.assert_allclose(future.iloc[0], other[outputs].iloc[-1], rtol=1e-6)


def test_a_series_and_a_time_indexed_frame_fit_like_the_frame(frame, tmp_path):
    reference = Forecaster("naive", **WINDOW).fit(frame)
    indexed = Forecaster("naive", **WINDOW).fit(frame.set_index("date"))
    pd.testing.assert_frame_equal(indexed.evaluate(), reference.evaluate())
    pd.testing.assert_frame_equal(indexed.predict(), reference.predict())
    series = frame.set_index("date")["OT"]
    single = Forecaster("naive", **WINDOW, features="S").fit(series)
    assert single.output_columns == ["OT"]
    pd.testing.assert_frame_equal(single.predict(series), reference.predict()[["OT"]])
    loaded = Forecaster.load(single.save(tmp_path / "single"))
    pd.testing.assert_frame_equal(loaded.predict(series), single.predict())


def test_a_date_split_is_fitted_saved_and_reused(frame, tmp_path):
    fc = Forecaster("naive", **WINDOW).fit(frame, split=("2021-01-12 16:00", "2021-01-14 08:00"))
    dm = fc.datamodule
    assert dm.split_protocol == "dates"
    assert dm.borders == {"train": (0, 280), "val": (280 - SEQ_LEN, 320), "test": (320 - SEQ_LEN, ROWS)}
    by_rows = Forecaster("naive", **WINDOW).fit(frame, split=(280, 320, ROWS))
    pd.testing.assert_frame_equal(fc.evaluate(), by_rows.evaluate())
    saved = json.loads((fc.save(tmp_path / "dated") / "config.json").read_text())
    assert saved["split"] == ["2021-01-12 16:00", "2021-01-14 08:00"]
    stamps = (pd.Timestamp("2021-01-12 16:00"), datetime.date(2021, 1, 14))
    fc.fit(frame, split=stamps, run_dir=tmp_path / "stamps")
    saved = json.loads((tmp_path / "stamps" / "config.json").read_text())
    assert saved["split"] == ["2021-01-12T16:00:00", "2021-01-14T00:00:00"]


def test_evaluate_splits_the_fitted_data_as_asked_and_scales_it_with_the_fitted_state(frame):
    """evaluate(split=...) without data scored the fit's own test windows, the split silently dropped."""
    fc = Forecaster("naive", **WINDOW).fit(frame)
    for windows in ("test", "val"):
        resplit = fc.evaluate(split=(0.5, 0.25, 0.25), windows=windows, detail=True)
        assert (resplit["n_windows"] == 100 - PRED_LEN + 1).all()  # 100 rows, and the SEQ_LEN before them
        pd.testing.assert_frame_equal(resplit, fc.evaluate(frame, split=(0.5, 0.25, 0.25), windows=windows,
                                                            detail=True))
    # the fitted scaler (70% of the rows), not one refitted on the new split's training rows
    scale = frame[["a", "b", "OT"]].iloc[:280].std(ddof=0).to_numpy()
    report = fc.evaluate(split=(0.5, 0.25, 0.25), detail=True).query("horizon == 'all' and metric == 'mse'")
    by_variable = report[report["variable"] != "all"].pivot(index="variable", columns="scale", values="value")
    np.testing.assert_allclose(by_variable.loc[["a", "b", "OT"], "original"] / scale**2,
                               by_variable.loc[["a", "b", "OT"], "standardized"], rtol=1e-6)
    pd.testing.assert_frame_equal(fc.evaluate(), fc.evaluate(split=None))


def test_evaluate_and_predict_read_the_fitted_variables_alone(frame):
    """A text or date column beside the fitted variables (features='M') was refused as not numeric, with a fix
    (columns=[...]) that only a new fit could follow; a numeric one was left out."""
    fc = Forecaster("naive", **WINDOW).fit(frame)
    extras = frame.assign(note="text", when=frame["date"], extra=1.0)
    pd.testing.assert_frame_equal(fc.evaluate(extras), fc.evaluate(frame))
    pd.testing.assert_frame_equal(fc.predict(extras), fc.predict(frame))


def test_evaluate_scores_the_quantile_levels_predict_gives(frame):
    """quantiles=(0.05, 0.95) changed predict's columns, while evaluate still scored 0.1/0.5/0.9 and the 80%
    interval alone."""
    default = Forecaster("seasonal_naive", **WINDOW).fit(frame)
    wide = Forecaster("seasonal_naive", **WINDOW, quantiles=(0.05, 0.5, 0.95)).fit(frame)
    report = wide.evaluate()
    assert list(wide.predict(frame).columns) == ["a", "b", "OT", *(f"{name}_q{level}" for name in ("a", "b", "OT")
                                                                     for level in (0.05, 0.5, 0.95))]
    assert list(report.index[5:]) == ["rho_risk_0.05", "rho_risk_0.5", "rho_risk_0.9", "rho_risk_0.95",
                                      "coverage_0.8", "coverage_0.9"]
    # the same sample paths: the papers' columns as with the default levels, the wider interval covering more
    papers = ["rho_risk_0.5", "rho_risk_0.9", "coverage_0.8"]
    pd.testing.assert_frame_equal(report.loc[papers], default.evaluate().loc[papers])
    assert (report.loc["coverage_0.9"] >= report.loc["coverage_0.8"]).all()
    default.predictor.quantile_levels = (0.05, 0.5, 0.95)  # the CLI's levels for a fitted run: scored alike
    pd.testing.assert_frame_equal(default.evaluate(), report)


def test_evaluate_refuses_unknown_windows(frame):
    fc = Forecaster("naive", **WINDOW).fit(frame)
    with pytest.raises(ConfigError, match="windows"):
        fc.evaluate(windows="validation")


# ------------------------------------------------------------------------ save / load


@pytest.mark.parametrize(("edit", "refusal"), [
    ({"mean": float("nan")}, " has a mean or scale that is not a finite number"),
    ({"scale": 0.0}, " has a mean or scale that is not a finite number"),
    ({"scale": float("inf")}, " has a mean or scale that is not a finite number"),
    ({"mean": "x"}, "'s mean, scale and var must be lists of numbers"),  # was a bare ValueError
])
def test_a_saved_scaler_edited_to_no_number_is_named_with_the_file(fitted, frame, tmp_path, edit, refusal):
    """A NaN mean in scaler.json was blamed on the data: "column 'OT', row 1968 ... too far to standardize"."""
    directory = fitted.save(tmp_path / "model")
    scaler = json.loads((directory / "scaler.json").read_text())
    for key, value in edit.items():
        scaler[key][0] = value
    (directory / "scaler.json").write_text(json.dumps(scaler))
    with pytest.raises(ConfigError, match=r"scaler.json is not the file its config.json was saved with: .* or "
                                          r"the file was edited"):
        Forecaster.load(directory)
    config = json.loads((directory / "config.json").read_text())
    del config["files"]  # as a run saved before config.json named its files
    (directory / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=rf"config.json and scaler.json: the fitted scaler{re.escape(refusal)}.*it "
                                          r"was edited"):
        Forecaster.load(directory)


def test_loading_a_run_whose_attention_or_model_is_not_registered_says_to_register_it(frame, tmp_path, monkeypatch):
    """A run fitted with an attention registered at run time, loaded in a fresh process, was called an edited or
    damaged config.json ("restore it as the fit saved it"), though the file was intact."""
    from forecast.layers.attention import ATTENTIONS, FullAttention

    monkeypatch.setitem(ATTENTIONS, "local", FullAttention)
    directory = Forecaster("informer", **WINDOW, max_epochs=1, attention="local", **tiny("transformer")).fit(
        frame).save(tmp_path / "model")
    monkeypatch.delitem(ATTENTIONS, "local")  # as a fresh process, which never registered it
    with pytest.raises(ConfigError, match=r"fitted with attention='local', which this process has not registered .*"
                                          r"Fix: import the code that registers it"):
        Forecaster.load(directory)
    monkeypatch.setitem(ATTENTIONS, "local", FullAttention)
    assert Forecaster.load(directory).predict(frame).shape[0] == PRED_LEN


def test_save_load_gives_identical_predictions(fitted, frame, tmp_path, monkeypatch):
    directory = fitted.save(tmp_path / "model")
    assert sorted(os.listdir(directory)) == [".save.lock", "config.json", "model.pt", "scaler.json"]
    config = json.loads((directory / "config.json").read_text())
    assert config["model"] == "informer" and config["recipe"] == "improved"
    assert config["model_options"] == {**get_recipe("improved").options_for("informer"), **tiny("informer")}
    assert config["data"]["seq_len"] == SEQ_LEN and config["training"]["learning_rate"] == 1e-3
    calls = []
    real_load = torch.load
    monkeypatch.setattr(torch, "load", lambda *args, **kwargs: calls.append(kwargs) or real_load(*args, **kwargs))
    loaded = Forecaster.load(directory)
    assert calls and all(call.get("weights_only") is True for call in calls)
    assert loaded.config == fitted.config
    pd.testing.assert_frame_equal(loaded.predict(frame), fitted.predict())
    pd.testing.assert_frame_equal(loaded.predict(frame.iloc[:250]), fitted.predict(frame.iloc[:250]))
    assert isinstance(loaded.plot(frame), Figure)


@pytest.mark.parametrize("names", [{"a": ("x", 1), "b": ("x", 2), "OT": ("y", 1)},
                                   {"a": pd.Timestamp("2020-01-01"), "b": pd.Timestamp("2020-01-02")}])
def test_variables_whose_names_json_cannot_keep_are_refused_before_saving(frame, tmp_path, names):
    """Saved as lists and text, a loaded forecaster then refused the very frame it was fitted on, listing the
    same names as missing."""
    renamed = frame.rename(columns=names)
    fc = Forecaster("naive", **WINDOW).fit(renamed)
    assert len(fc.predict()) == PRED_LEN  # in memory, the names work
    with pytest.raises(ConfigError, match=r"<DataFrame>: variable names .*cannot be saved.*Fix: .*rename"):
        fc.save(tmp_path / "model")
    assert not (tmp_path / "model" / "model.pt").exists()
    with pytest.raises(ConfigError, match="cannot be saved"):  # before training, not after it
        Forecaster("naive", **WINDOW).fit(renamed, run_dir=tmp_path / "run")
    # numbers are kept as numbers
    numbered = frame.rename(columns={"a": np.int64(0), "b": 1.5})
    fc = Forecaster("naive", **WINDOW).fit(numbered)
    pd.testing.assert_frame_equal(Forecaster.load(fc.save(tmp_path / "numbered")).predict(numbered), fc.predict())


def test_a_saved_forecaster_records_the_csv_file_it_was_fitted_on(fitted, csv, frame, tmp_path):
    """The record `forecast validate|test|predict --run_dir` reads: the file's resolved path and digest, kept when a
    loaded forecaster is saved again; none for a frame. A loaded forecaster never reads it back by itself."""
    recorded = json.loads((fitted.save(tmp_path / "model") / "config.json").read_text())["data_file"]
    assert recorded == {"path": str(Path(csv).resolve()), "sha256": dataset_label(csv).rpartition("@")[2]}
    loaded = Forecaster.load(tmp_path / "model")
    assert loaded.predictor.data_file == fitted.predictor.data_file
    assert json.loads((loaded.save(tmp_path / "again") / "config.json").read_text())["data_file"] == recorded
    for without_data in (loaded.evaluate, loaded.predict):
        with pytest.raises(ConfigError, match="a loaded Forecaster holds none. Fix: pass the data explicitly"):
            without_data()
    on_frame = Forecaster("naive", **WINDOW).fit(frame).save(tmp_path / "frame")
    assert json.loads((on_frame / "config.json").read_text())["data_file"] is None


def test_a_loaded_forecaster_plots_and_explains_a_window_of_the_data_given(fitted, csv, tmp_path):
    """A loaded forecaster holds no data: plot(window=0) asked for it, and the fix (pass the data) was refused,
    plot(df, window=0) as "give either", attention_weights(df, window=0) by ignoring df."""
    loaded = Forecaster.load(fitted.save(tmp_path / "model"))
    for without_data in (lambda: loaded.plot(window=0), lambda: loaded.attention_weights(window=0)):
        with pytest.raises(ConfigError, match=re.escape("plot(df, window=i), attention_weights(df, window=i)")):
            without_data()
    for split in ("test", "val"):
        expected, drawn = fitted.plot(window=3, split=split), loaded.plot(csv, window=3, split=split)
        assert drawn.texts[0].get_text() == expected.texts[0].get_text()  # the title names the window
        for ours, theirs in zip(drawn.axes, expected.axes, strict=True):
            for line, reference in zip(ours.get_lines(), theirs.get_lines(), strict=True):
                np.testing.assert_allclose(line.get_ydata(), reference.get_ydata(), rtol=1e-6)
    weights = loaded.attention_weights(csv, window=2)  # ProbSparseWeights, one per encoder layer
    for ours, theirs in zip(weights, fitted.attention_weights(window=2), strict=True):
        torch.testing.assert_close(ours.selected_weights, theirs.selected_weights)
        torch.testing.assert_close(ours.selected_queries, theirs.selected_queries)


def test_a_forecaster_fitted_in_a_time_zone_reads_other_zones_into_it(frame, tmp_path):
    """The same instants in another zone gave another forecast (time features on the other clock); timestamps
    without a zone are refused by name. A run saved before the zone was kept reads data as it comes."""
    zoned = frame.assign(date=frame["date"].dt.tz_localize("UTC"))
    fc = Forecaster("informer", **WINDOW, max_epochs=1, **tiny("informer")).fit(zoned)
    expected = fc.predict(zoned)
    assert str(expected.index.tz) == "UTC"
    pd.testing.assert_frame_equal(fc.predict(zoned.assign(date=zoned["date"].dt.tz_convert("Asia/Tokyo"))), expected)
    with pytest.raises(DataError, match=r"'date' has no time zone, but the fitted data's timestamps are in 'UTC'\. "
                                        r"Fix: .*tz_localize"):
        fc.predict(frame)
    assert fc.fitted_state.prepare_options["time_zone"] == "UTC"
    directory = fc.save(tmp_path / "model")
    config = json.loads((directory / "config.json").read_text())
    for key in ("time_zone", "date_format"):
        del config["fitted"]["prepare_options"][key]
    (directory / "config.json").write_text(json.dumps(config))
    loaded = Forecaster.load(directory)
    assert "time_zone" not in loaded.fitted_state.prepare_options
    pd.testing.assert_frame_equal(loaded.predict(zoned), expected)


def test_a_file_written_in_a_daylight_saving_zone_fits_and_forecasts_its_instants(frame, tmp_path):
    """A Europe/Paris series saved by to_csv across the March change (offsets +01:00, then +02:00) was refused as
    mixing time zones; read as UTC instants, it fits, and the same instants in another form forecast alike."""
    local = frame.assign(date=pd.date_range("2024-03-20", periods=len(frame), freq="h", tz="Europe/Paris"))
    path = tmp_path / "paris.csv"
    local.to_csv(path, index=False)
    fc = Forecaster("informer", **WINDOW, max_epochs=1, limit_train_batches=2, limit_val_batches=1,
                    **tiny("informer")).fit(path)
    assert fc.fitted_state.freq == "h" and fc.fitted_state.prepare_options["time_zone"] == "UTC"
    expected = fc.predict(path)
    assert expected.index.equals(future_index(local).tz_convert("UTC"))
    for same in (local, local.assign(date=local["date"].dt.tz_convert("Asia/Tokyo")), local.set_index("date")):
        pd.testing.assert_frame_equal(fc.predict(same), expected)


def test_loaded_forecaster_refuses_data_with_other_columns(fitted, frame, csv, tmp_path):
    loaded = Forecaster.load(fitted.save(tmp_path / "model"))
    with pytest.raises(DataError, match=r"'c'.*'b'|'b'.*'c'"):
        loaded.predict(frame.rename(columns={"b": "c"}))
    with pytest.raises(DataError, match="variables"):
        loaded.predict(frame.drop(columns="a"))
    with pytest.raises(ConfigError, match="loaded Forecaster"):
        loaded.predict()
    # evaluation on the same series reproduces the fitted report
    pd.testing.assert_frame_equal(loaded.evaluate(csv, detail=True), fitted.evaluate(detail=True))


def test_other_data_is_scored_with_the_fitted_scaler_never_a_refitted_one(fitted, frame):
    """RevIN makes the forecast follow OT * 3; the fitted scaler then sees 3x the errors on its own scale,
    where a scaler refitted on the tripled series would see the same errors as before."""
    assert fitted.model_options["revin"]
    def ot_mse(data: pd.DataFrame) -> pd.Series:
        report = fitted.evaluate(data, detail=True)
        rows = report[(report.metric == "mse") & (report.horizon == "all") & (report.variable == "OT")]
        return rows.set_index("scale")["value"]
    base, tripled = ot_mse(frame), ot_mse(frame.assign(OT=frame["OT"] * 3))
    np.testing.assert_allclose(tripled.to_numpy(), 9 * base.to_numpy(), rtol=1e-3)
    state = fitted.fitted_state.state_dict()
    assert json.loads(json.dumps(state)) == state  # plain JSON types, as saved runs and checkpoints hold it


def test_other_data_is_read_at_the_fitted_frequency_as_predict_reads_it(frame):
    """Daily rows scored by an hourly model: predict refused them, evaluate scored them with daily calendar
    features (or failed deep in the model with an integer calendar), now both refuse them alike, as rows of another
    frequency (they were called irregular, with an hourly fill of the gaps as the fix)."""
    daily = frame.assign(date=pd.date_range("2021-01-01", periods=len(frame), freq="D"))
    fc = Forecaster("naive", **WINDOW).fit(frame)
    another = r"the rows step by 'D', but the model was fitted on rows every 'h'.*Fix: give rows every 'h'"
    for score in (fc.predict, fc.evaluate, lambda data: fc.evaluate(data, windows="val")):
        with pytest.raises(DataError, match=another):
            score(daily)
    with pytest.raises(DataError, match=another):
        WindowDataModule(daily, **WINDOW, fitted=fc.fitted_state).setup()


def test_windows_of_other_data_are_cut_as_the_fit_cut_them_and_scaled_with_the_fitted_state(fitted, frame):
    """OT + 10: the same windows, each input shifted by 10 over the fitted OT scale (a refitted scaler would
    shift nothing); the test loader serves the split asked for."""
    def first_batch(data: pd.DataFrame, windows: str) -> dict:
        module = fitted.windows_of(data, windows=windows)
        module.setup("test")
        return next(iter(module.test_dataloader()))

    base, shifted = first_batch(frame, "test"), first_batch(frame.assign(OT=frame["OT"] + 10), "test")
    column = fitted.input_columns.index("OT")
    difference = (shifted["x"] - base["x"])[..., column]  # [B, L]: 10 / the fitted scale of OT, everywhere
    scale = frame["OT"].iloc[:int(0.7 * len(frame))].std(ddof=0)  # the 70/10/20 split's training rows
    torch.testing.assert_close(difference, torch.full_like(difference, 10 / scale), rtol=1e-4, atol=1e-4)
    assert not torch.equal(first_batch(frame, "val")["x"], base["x"])
    with pytest.raises(ConfigError, match="windows"):
        fitted.windows_of(frame, windows="future")


@pytest.mark.parametrize(("edit", "message"), [
    (lambda config: config["data"].update(pred_len=16),
     r"holds a run fitted for other windows than it names \(data.pred_len 16, fitted.spec.pred_len 8\)"),
    (lambda config: config.pop("model_options"), r"'model_options' is missing, not a dict"),
    (lambda config: config.update(training=5), r"'training' is 5 \(int\), not a dict"),
    (lambda config: config["training"].pop("seed"), r"training.seed is missing"),
    (lambda config: config["training"].update(learning_rat=0.1), r"unknown option\(s\) \['learning_rat'\]"),
    (lambda config: config["fitted"].update(input_columns=["x", "b", "OT"]),
     r"the fitted inputs \['x', 'b', 'OT'\] are not the scaled columns \['a', 'b', 'OT'\]"),
    (lambda config: config["model_options"].update(factor=5),  # no weight depends on it: loaded silently
     r"its model, recipe, model_options, data are not those the run was fitted with"),
    (lambda config: config["data"].update(features="S"),
     r"its model, recipe, model_options, data are not those the run was fitted with"),
])
def test_load_names_what_was_edited_in_a_saved_config(tmp_path, fitted, edit, message):
    """An edited pred_len loaded silently (the model forecast the fitted horizon while the forecaster reported the
    edited one); a missing or mistyped block was a KeyError or TypeError; an edited input column was blamed on
    the data given to predict; an option no weight depends on loaded and forecast with the edited option."""
    directory = fitted.save(tmp_path / "model")
    config = json.loads((directory / "config.json").read_text())
    edit(config)
    (directory / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=rf"{re.escape(str(directory))}.*config.json.*{message}.*Fix: restore"):
        Forecaster.load(directory)


def test_a_saved_digest_is_checked_over_the_keys_it_names(tmp_path, fitted, csv):
    """A version that digests other blocks still reads a run saved by this one, and this one an older run's."""
    from forecast.predictor import _built_digest

    directory = fitted.save(tmp_path / "model")
    config = json.loads((directory / "config.json").read_text())
    assert config["digest"]["of"] == ["model", "recipe", "model_options", "data"]
    keys = ["model", "model_options", "quantiles"]  # another version's choice
    config["digest"] = {"of": keys, "sha256": _built_digest(config, keys)}
    (directory / "config.json").write_text(json.dumps(config))
    pd.testing.assert_frame_equal(Forecaster.load(directory).predict(csv), fitted.predict())
    config["quantiles"] = [0.2, 0.8]  # one of its keys edited
    (directory / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=r"its model, model_options, quantiles are not those the run was fitted"):
        Forecaster.load(directory)


def test_a_device_setting_lightning_refuses_is_named_before_the_data_is_read(tmp_path):
    """accelerator='gpux' was refused only after the data was read and windowed (minutes for a large table)."""
    with pytest.raises(ConfigError, match=r"Lightning refuses the training settings \{'accelerator': 'gpux'"):
        Forecaster("dlinear", **WINDOW, accelerator="gpux").fit(tmp_path / "not_read_yet.csv")


def test_load_refuses_directories_that_are_not_forecasters(tmp_path, fitted):
    with pytest.raises(ConfigError, match="config.json"):
        Forecaster.load(tmp_path)
    directory = fitted.save(tmp_path / "model")
    (directory / "model.pt").unlink()
    with pytest.raises(ConfigError, match="model.pt"):
        Forecaster.load(directory)
    (tmp_path / "notes.csv").write_text("kept\n")  # save() into a file: was mkdir's FileExistsError
    with pytest.raises(ConfigError, match=r"notes.csv is a file; a saved forecaster is a folder.*Fix: name a folder"):
        fitted.save(tmp_path / "notes.csv")
    assert (tmp_path / "notes.csv").read_text() == "kept\n"


class _FailsAtFirstStep(Callback):
    def on_train_batch_start(self, *args) -> None:
        raise RuntimeError("stopped at the first step")


def test_a_fit_stopped_in_a_folder_another_fit_finished_in_leaves_none_of_that_fits_weights(frame, tmp_path):
    """The folder's config and scaler are the new fit's from its start: the old weights and checkpoints go with
    them, so the folder neither loads them under the new scaler nor resumes them under the new config."""
    run_dir = tmp_path / "run"
    options = dict(**WINDOW, **tiny("informer"), max_epochs=1)
    Forecaster("informer", **options).fit(frame, run_dir=run_dir)
    assert (run_dir / "model.pt").is_file() and list((run_dir / "checkpoints").glob("*.ckpt"))
    other = frame.assign(OT=frame["OT"] * 100)
    with pytest.raises(RuntimeError, match="the first step"):
        Forecaster("informer", **options, callbacks=[_FailsAtFirstStep()]).fit(other, run_dir=run_dir, resume=False)
    with pytest.raises(ConfigError, match="the run never finished"):
        Forecaster.load(run_dir)
    assert not list((run_dir / "checkpoints").glob("*.ckpt"))


def test_resuming_a_finished_run_on_other_data_fails_before_the_folder_is_touched(frame, tmp_path):
    run_dir = tmp_path / "run"
    options = dict(**WINDOW, **tiny("informer"), max_epochs=1)
    finished = Forecaster("informer", **options).fit(frame, run_dir=run_dir).predict(frame)
    saved = {path.name: path.read_bytes() for path in run_dir.iterdir() if path.is_file()}
    with pytest.raises(ConfigError, match="fitted on other data"):
        Forecaster("informer", **options).fit(frame.assign(OT=frame["OT"] * 100), run_dir=run_dir)
    assert {path.name: path.read_bytes() for path in run_dir.iterdir() if path.is_file()} == saved
    pd.testing.assert_frame_equal(Forecaster.load(run_dir).predict(frame), finished)


@pytest.mark.parametrize(("changed", "named"), [
    ({"learning_rate": 0.01}, "learning_rate 0.001 in the run, 0.01 now"),
    ({"patience": 1}, "patience 3 in the run, 1 now"),
    ({"seed": 5}, "seed 0 in the run, 5 now"),
    ({"gradient_clip_val": 0.5}, "trainer.gradient_clip_val None in the run, 0.5 now"),
    ({"devices": 2, "strategy": "ddp"}, "devices 'auto' in the run, 2 now; strategy 'auto' in the run, 'ddp' now"),
    ({"compile_model": True}, "compile_model False in the run, True now"),
])
def test_resuming_with_other_training_settings_is_refused_before_the_folder_is_touched(frame, tmp_path, changed,
                                                                                        named):
    """A resumed fit restored the checkpoint's learning rate and patience over those given, and went on with
    another seed or clipping: the run's config then named settings it was not trained with."""
    run_dir = tmp_path / "run"
    options = dict(**WINDOW, **tiny("dlinear"), learning_rate=1e-3, max_epochs=1)
    Forecaster("dlinear", **options).fit(frame, run_dir=run_dir)
    saved = {path.name: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()}
    with pytest.raises(ConfigError, match=re.escape(f"trained with other settings ({named}); resuming")):
        Forecaster("dlinear", **{**options, **changed}).fit(frame, run_dir=run_dir)
    assert {path.name: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()} == saved
    # more epochs, or another calibration, continue the same run
    Forecaster("dlinear", **{**options, "max_epochs": 2, "calibrate_correction": True}).fit(frame, run_dir=run_dir)


def test_resuming_a_cosine_run_with_more_epochs_or_with_another_split_is_refused(frame, tmp_path):
    """The restored cosine schedule kept the run's span, so an extended run trained an epoch at learning rate 0; a
    resume with another split chose its best epoch across two sets of validation windows."""
    run_dir = tmp_path / "run"
    options = dict(**WINDOW, **tiny("dlinear"), lr_schedule="cosine", max_epochs=1)
    Forecaster("dlinear", **options).fit(frame, run_dir=run_dir, split=(0.7, 0.1, 0.2))
    with pytest.raises(ConfigError, match=re.escape("max_epochs 1 in the run, 2 now, which lr_schedule='cosine' "
                                                    "spans")):
        Forecaster("dlinear", **{**options, "max_epochs": 2}).fit(frame, run_dir=run_dir, split=(0.7, 0.1, 0.2))
    with pytest.raises(ConfigError, match=re.escape("holds a run split [0.7, 0.1, 0.2], not [0.7, 0.25, 0.05]: its "
                                                    "best epoch")):
        Forecaster("dlinear", **options).fit(frame, run_dir=run_dir, split=(0.7, 0.25, 0.05))
    Forecaster("dlinear", **options).fit(frame, run_dir=run_dir, split=(0.7, 0.1, 0.2))  # the same run resumes


def test_a_checkpoint_of_another_model_put_in_a_run_folder_is_named_with_the_fix(frame, tmp_path):
    """Resuming it ended in Lightning's RuntimeError (Error(s) in loading state_dict), twelve frames deep."""
    options = dict(**WINDOW, max_epochs=1)
    Forecaster("dlinear", **options).fit(frame, run_dir=tmp_path / "dlinear")
    Forecaster("informer", **options, **tiny("informer")).fit(frame, run_dir=tmp_path / "informer")
    shutil.copy(tmp_path / "dlinear" / "checkpoints" / "last.ckpt", tmp_path / "informer" / "checkpoints")
    with pytest.raises(ConfigError, match=r"last.ckpt holds another model's weights .*Fix: delete it"):
        Forecaster("informer", **{**options, "max_epochs": 2}, **tiny("informer")).fit(frame,
                                                                                        run_dir=tmp_path / "informer")


def test_resuming_another_model_names_each_option_that_differs(frame, tmp_path):
    """The refusal said only "different ['model_options']"."""
    run_dir = tmp_path / "run"
    Forecaster("dlinear", **WINDOW, kernel_size=5, max_epochs=1).fit(frame, run_dir=run_dir)
    with pytest.raises(ConfigError, match=re.escape("holds another run (data.pred_len 8 in the run, 4 now; "
                                                    "model_options.kernel_size 5 in the run, 7 now)")):
        Forecaster("dlinear", **{**WINDOW, "pred_len": 4}, kernel_size=7, max_epochs=1).fit(frame, run_dir=run_dir)


def test_a_finished_run_without_checkpoints_is_not_replaced_by_another_run(frame, tmp_path):
    """A resuming fit checked a folder's run only against a checkpoint: a finished run without one (a sweep's re-fit
    after training, a Forecaster.save() folder) lost its model.pt to a fit of another model."""
    run_dir = tmp_path / "run"
    Forecaster("dlinear", **WINDOW, max_epochs=1).fit(frame).save(run_dir)
    kept = ("config.json", "model.pt", "scaler.json")
    saved = {name: (run_dir / name).read_bytes() for name in kept}
    with pytest.raises(ConfigError, match=re.escape(f"{run_dir} holds another run (model 'dlinear' in the run, "
                                                    "'naive' now); this fit would replace its model. Fix: use "
                                                    "another run_dir, or resume=False")):
        Forecaster("naive", **WINDOW).fit(frame, run_dir=run_dir)
    assert {name: (run_dir / name).read_bytes() for name in kept} == saved
    (run_dir / "config.json").write_text("{}")  # a folder of someone else's model
    with pytest.raises(ConfigError, match=r"holds a finished run \(model.pt\) but no config.json of a forecast run"):
        Forecaster("naive", **WINDOW).fit(frame, run_dir=run_dir)
    Forecaster("naive", **WINDOW).fit(frame, run_dir=run_dir, resume=False)  # trains from scratch there
    Forecaster("naive", **WINDOW).fit(frame, run_dir=run_dir)  # the same run, finished: trained again
    assert json.loads((run_dir / "config.json").read_text())["model"] == "naive"


def test_a_run_dir_under_home_keeps_the_whole_run_there_and_resumes(frame, tmp_path, monkeypatch):
    """"~/run" put config.json, scaler.json and model.pt in a folder named "~" under the working directory, and
    Lightning's checkpoints (which it expands) in the home folder: the same fit again never resumed."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    Forecaster("dlinear", **WINDOW, max_epochs=1).fit(frame, run_dir="~/run")
    assert not (tmp_path / "~").exists()
    assert {"config.json", "scaler.json", "model.pt", "checkpoints"} <= {path.name for path in (home / "run").iterdir()}
    resumed = Forecaster("dlinear", **WINDOW, max_epochs=2).fit(frame, run_dir="~/run")
    assert resumed.last_fit.epochs == 2 and Forecaster.load("~/run").config["model"] == "dlinear"
    config = RunConfig.from_mapping({"model": {"name": "dlinear"}, "run_dir": "~/run",
                                     "data": {"dataset": "x.csv", "seq_len": 32, "label_len": 16, "pred_len": 8}})
    assert config.resolved_run_dir() == home / "run"
    sweep = SweepSpec(runs_dir="~/runs", results_dir="~/results")
    assert (sweep.runs_dir, sweep.results_dir) == (home / "runs", home / "results")


def test_a_run_folder_being_fitted_by_another_process_is_refused_untouched(frame, tmp_path):
    """Two processes fitting one run_dir (a config started twice) interleaved their checkpoints and weights."""
    run_dir = tmp_path / "run"
    options = dict(**WINDOW, **tiny("informer"), max_epochs=1)
    Forecaster("informer", **options).fit(frame, run_dir=run_dir)
    saved = {path.name: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()}
    hold = (f"import time\nfrom filelock import FileLock\nlock = FileLock({str(run_dir / '.fit.lock')!r})\n"
            "lock.acquire()\nprint('held', flush=True)\ntime.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", hold], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        for resume in (True, False):
            with pytest.raises(ConfigError, match=r"is being fitted by another process .* Fix: wait for that fit"):
                Forecaster("informer", **options).fit(frame, run_dir=run_dir, resume=resume)
    finally:
        holder.kill()
        holder.wait()
    assert {path.name: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()} == saved
    Forecaster("informer", **options).fit(frame, run_dir=run_dir)  # the lock of a process that ended is free


def test_save_replaces_the_weights_whole_or_not_at_all(fitted, tmp_path, monkeypatch):
    directory = fitted.save(tmp_path / "model")
    saved = torch.load(directory / "model.pt", weights_only=True)

    def interrupted(state, path) -> None:
        Path(path).write_bytes(b"half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fitted.save(directory)
    monkeypatch.undo()
    assert sorted(path.name for path in directory.iterdir()
                  if path.name != ".save.lock") == ["config.json", "model.pt", "scaler.json"]
    reloaded = torch.load(directory / "model.pt", weights_only=True)
    assert all(torch.equal(reloaded[name], tensor) for name, tensor in saved.items())


@pytest.mark.parametrize("cut_before", ["scaler.json", "config.json"])
def test_a_save_cut_off_part_way_over_another_fits_is_refused_on_load_not_mixed(fitted, frame, tmp_path, monkeypatch,
                                                                                   cut_before):
    """A save killed after model.pt (or before scaler.json) over another fit's folder loaded one fit's weights with
    the other's config and scaler and forecast wrongly without a word (386 where the fit gave 2022)."""
    directory = fitted.save(tmp_path / "model")
    moved = frame.assign(**{column: frame[column] * 100 + 1000 for column in ("a", "b", "OT")})
    other = Forecaster("informer", **WINDOW, max_epochs=1, **tiny("informer")).fit(moved)  # the same model's weights
    write_json = forecast.predictor._write_json

    def killed(path, content):
        if path.name == cut_before:
            raise KeyboardInterrupt
        write_json(path, content)

    monkeypatch.setattr(forecast.predictor, "_write_json", killed)
    with pytest.raises(KeyboardInterrupt):
        other.save(directory)
    monkeypatch.undo()
    with pytest.raises(ConfigError, match=r": (scaler.json and )?model.pt (are|is) not the files? its config.json "
                                          r"was saved with: a save was cut off part way"):
        Forecaster.load(directory)
    other.save(directory)  # saved again, whole
    pd.testing.assert_frame_equal(Forecaster.load(directory).predict(moved), other.predict(moved))


# ---------------------------------------------------------------------------- options


def test_unknown_options_name_the_valid_ones():
    with pytest.raises(ConfigError) as caught:
        Forecaster("informer", d_modle=16)
    message = str(caught.value)
    for name in ("d_modle", "d_model", "factor", "learning_rate", "patience", "freq", "time_encoding"):
        assert name in message
    with pytest.raises(ConfigError, match=r"\['d_model'\].*model \(none\)"):
        Forecaster("naive", d_model=16)
    with pytest.raises(ConfigError, match="choose one of"):
        Forecaster("nope")
    with pytest.raises(ConfigError, match="fit"):
        Forecaster(split="ratio")


@pytest.mark.parametrize("options", [
    dict(d_model=15, n_heads=2), dict(loss="l3"), dict(lr_schedule="weekly"), dict(learning_rate=-1.0),
    dict(features="X"), dict(time_encoding="clock"), dict(label_len=200), dict(quantiles=(0.1, 1.5)),
    dict(quantiles=(0.1, 0.1000001, 0.9)), dict(patience=0), dict(progress="yes"),
    dict(extra_trainer_options={"callbacks": []}),
    dict(default_root_dir="runs"),
])
def test_bad_option_values_fail_at_construction(options):
    with pytest.raises(ConfigError):
        Forecaster("informer", **options)


@pytest.mark.parametrize("limit", [0, 0.0])
def test_a_fit_without_validation_windows_is_refused_at_construction_naming_the_option(limit):
    """limit_val_batches=0 failed at the end of the first epoch, in Lightning's early stopping."""
    with pytest.raises(ConfigError, match=r"limit_val_batches=0.*validation loss.*Fix: limit_val_batches="):
        Forecaster("dlinear", **WINDOW, limit_val_batches=limit)


@pytest.mark.parametrize("limit", [0, 0.0])
def test_a_fit_on_no_training_batch_is_refused_at_construction_naming_the_option(limit):
    """limit_train_batches=0 ran its epochs on no batch and saved the untrained weights as the best epoch's."""
    with pytest.raises(ConfigError, match=r"limit_train_batches=0.*trains on no batch.*Fix: limit_train_batches="):
        Forecaster("dlinear", **WINDOW, limit_train_batches=limit)


@pytest.mark.parametrize("name, limit", [("limit_train_batches", -3), ("limit_val_batches", -2),
                                         ("limit_test_batches", -0.5), ("limit_predict_batches", 1.5)])
def test_a_negative_or_fractional_above_one_batch_limit_is_refused_at_construction_naming_it(name, limit):
    """A negative limit passed, and Lightning's refusal named the device settings, not the limit."""
    with pytest.raises(ConfigError, match=rf"{name}={limit}.*neither a number of batches nor a fraction.*Fix: {name}="):
        Forecaster("dlinear", **WINDOW, **{name: limit})
    Forecaster("dlinear", **WINDOW, **{name: 2.0})  # a whole number of batches, as Lightning reads it


def test_validation_less_often_than_the_epochs_trained_is_refused_at_construction():
    """check_val_every_n_epoch > max_epochs never validated: the last weights were kept, the history all NaN."""
    with pytest.raises(ConfigError, match=r"check_val_every_n_epoch=5.*max_epochs=2.*lowest validation loss.*"
                                          r"Fix: check_val_every_n_epoch= at most 2"):
        Forecaster("dlinear", **WINDOW, max_epochs=2, check_val_every_n_epoch=5)
    Forecaster("dlinear", **WINDOW, max_epochs=4, check_val_every_n_epoch=4)  # validates after the last epoch
    Forecaster("dlinear", **WINDOW, max_epochs=0, check_val_every_n_epoch=5)  # trains nothing, needs no validation
    Forecaster("dlinear", **WINDOW, max_epochs=2, check_val_every_n_epoch=None, val_check_interval=5)  # by steps


def test_a_variable_named_like_another_ones_quantile_column_is_refused_before_training(frame):
    """Forecast frames name quantile columns '<variable>_q<level>': 'a_q0.1' beside 'a' would be read as a's
    0.1 quantile (by plot(), and by a user), or be overwritten by it."""
    ambiguous = frame.rename(columns={"b": "a_q0.1"})
    with pytest.raises(ConfigError, match=r"'a_q0.1' reads as the 0.1 quantile column of variable 'a'.*a_p0.1"):
        Forecaster("seasonal_naive", **WINDOW, season_length=24).fit(ambiguous)
    renamed = frame.rename(columns={"b": "a_p0.1"})
    assert "a_p0.1_q0.1" in Forecaster("seasonal_naive", **WINDOW, season_length=24).fit(renamed).predict()


@pytest.mark.parametrize(("names", "message"), [({"a": "all"}, r"'all' is named like the report's rows of every"),
                                                ({"a": 1, "b": "1"}, r"1 and '1' are both named '1'")])
def test_a_variable_the_evaluation_report_cannot_name_is_refused_before_training(frame, names, message):
    """Reports name the variables as text beside 'all' (every variable pooled): evaluate() failed after training,
    with a message about its report's arguments."""
    with pytest.raises(ConfigError, match=r"<DataFrame>: .*" + message + r".*Fix: rename"):
        Forecaster("dlinear", **WINDOW, max_epochs=1, limit_train_batches=2).fit(frame.rename(columns=names))
    # the report names output variables only: an input of "MS" may be called anything
    report = Forecaster("naive", **WINDOW, features="MS").fit(frame.rename(columns=names)).evaluate(detail=True)
    assert set(report["variable"]) == {"all", "OT"}


def test_options_are_routed_to_data_training_trainer_and_model():
    before = torch.random.get_rng_state()
    fc = Forecaster("informer", d_model=32, n_heads=4, freq="h", learning_rate=1e-2, batch_size=8,
                    limit_val_batches=3, extra_trainer_options={"gradient_clip_val": 1.0})
    assert torch.equal(torch.random.get_rng_state(), before)  # checking options draws no random numbers
    assert fc.model_options == {**get_recipe("improved").options_for("informer"), "d_model": 32, "n_heads": 4}
    assert fc.training.learning_rate == 1e-2 and fc.training.batch_size == 8
    assert fc.training.extra_trainer_options == {"gradient_clip_val": 1.0, "limit_val_batches": 3}
    assert fc.config["data"]["freq"] == "h"


# ------------------------------------------------------------------- training recipe


def test_fit_is_reproducible_from_the_seed(csv):
    def fit(seed: int) -> pd.DataFrame:
        options = dict(**WINDOW, max_epochs=1, seed=seed, learning_rate=1e-3, **tiny("informer"))
        return Forecaster("informer", **options).fit(csv).predict()

    first = fit(3)
    pd.testing.assert_frame_equal(fit(3), first)
    assert not np.allclose(fit(4).to_numpy(), first.to_numpy())


class EpochRecorder(Callback):
    def __init__(self) -> None:
        self.epochs: list[int] = []

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self.epochs.append(trainer.current_epoch)


def test_run_dir_checkpoints_every_epoch_and_resumes(csv, frame, tmp_path):
    run = tmp_path / "run"
    options = dict(**WINDOW, learning_rate=1e-3, **tiny("informer"))
    first = Forecaster("informer", max_epochs=1, **options).fit(csv, run_dir=run)
    assert (run / "checkpoints" / "last.ckpt").is_file()
    pd.testing.assert_frame_equal(Forecaster.load(run).predict(frame), first.predict())
    recorder = EpochRecorder()
    Forecaster("informer", max_epochs=2, callbacks=[recorder], **options).fit(csv, run_dir=run)
    assert recorder.epochs == [1]  # epoch 0 came from the checkpoint
    other = dict(options, d_model=32)
    with pytest.raises(ConfigError, match="model_options"):
        Forecaster("informer", max_epochs=1, **other).fit(csv, run_dir=run)
    assert sorted(path.name for path in (run / "checkpoints").glob("best-*.ckpt")) == ["best-epoch=1.ckpt"]
    recorder = EpochRecorder()
    # Training from scratch where another run left its checkpoints: they go, so nothing resumes them later.
    Forecaster("informer", max_epochs=1, callbacks=[recorder], **other).fit(csv, run_dir=run, resume=False)
    assert recorder.epochs == [0]
    assert sorted(path.name for path in (run / "checkpoints").glob("*.ckpt")) == ["best-epoch=0.ckpt", "last.ckpt"]


class NumpyState(Callback):
    """Keeps the mean training loss as numpy makes it (np.float64) and a numpy array in its checkpointed state, and
    stops the fit (as a kill would) when ``stop_at_epoch`` starts."""

    def __init__(self, stop_at_epoch: int | None = None) -> None:
        self.stop_at_epoch, self.losses, self.restored = stop_at_epoch, [], None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.losses.append(float(outputs["loss"]))

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        if trainer.current_epoch == self.stop_at_epoch:
            raise RuntimeError("stopped")

    def state_dict(self) -> dict:
        return {"mean_loss": np.mean(self.losses), "losses": np.asarray(self.losses)}

    def load_state_dict(self, state_dict: dict) -> None:
        self.restored = state_dict


def test_a_run_whose_callback_keeps_numpy_values_resumes(frame, tmp_path):
    """weights_only=True refused the numpy scalar in the run's own checkpoints: once stopped, the run could never
    resume ("holds pickled objects that are not plain data")."""
    run_dir = tmp_path / "run"
    options = dict(**WINDOW, **tiny("dlinear"), max_epochs=2, limit_train_batches=3, limit_val_batches=1)
    with pytest.raises(RuntimeError, match="stopped"):
        Forecaster("dlinear", callbacks=[NumpyState(stop_at_epoch=1)], **options).fit(frame, run_dir=run_dir)
    resumed = NumpyState()
    fc = Forecaster("dlinear", callbacks=[resumed], **options).fit(frame, run_dir=run_dir)
    assert isinstance(resumed.restored["mean_loss"], np.float64) and resumed.restored["losses"].shape == (3,)
    assert fc.last_fit.epochs == 2 and fc.history["epoch"].tolist() == [0, 1]


class LastCheckpointStep(Callback):
    """The step ``last.ckpt`` holds as each training batch starts (``None``: not written yet)."""

    def __init__(self, path) -> None:
        self.path = path
        self.steps: list[int | None] = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        saved = torch.load(self.path, weights_only=True)["global_step"] if self.path.exists() else None
        self.steps.append(saved)


# The last step's start always sees step 4: the checkpoint a step before the epoch's validation.
@pytest.mark.parametrize(("minutes", "expected"), [(1e-9, [None, 1, 2, 3, 4]), (60.0, [None, None, None, None, 4])])
def test_checkpoint_every_minutes_writes_last_ckpt_within_an_epoch(csv, tmp_path, minutes, expected):
    run = tmp_path / "run"
    recorder = LastCheckpointStep(run / "checkpoints" / "last.ckpt")
    Forecaster("informer", **WINDOW, max_epochs=1, limit_train_batches=5, limit_val_batches=1, learning_rate=1e-3,
               checkpoint_every_minutes=minutes, callbacks=[recorder], **tiny("informer")).fit(csv, run_dir=run)
    assert recorder.steps == expected
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 5  # the epoch's end


class SpoilLastEpoch(Callback):
    """Records val_loss and weights per epoch, and wrecks the weights during the last epoch."""

    def __init__(self, last_epoch: int) -> None:
        self.last_epoch = last_epoch
        self.losses: list[float] = []
        self.states: list[dict[str, torch.Tensor]] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.current_epoch == self.last_epoch:
            with torch.no_grad():
                for parameter in pl_module.model.parameters():
                    parameter.add_(torch.randn_like(parameter))

    def on_validation_end(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking:
            self.losses.append(float(trainer.callback_metrics["val_loss"]))
            self.states.append({k: v.clone() for k, v in pl_module.model.state_dict().items()})


@pytest.mark.parametrize("run", ["in_memory", "run_dir", "run_dir_and_a_user_checkpoint", "a_user_checkpoint"])
def test_fit_keeps_the_weights_of_the_best_validation_epoch(csv, tmp_path, run):
    """A user's own ModelCheckpoint without a run_dir made Lightning refuse the fit (checkpointing was off), and
    evaluate() refused it always; with one, it must not become the "best" one restored."""
    spoiler = SpoilLastEpoch(last_epoch=1)
    user = [ModelCheckpoint(dirpath=tmp_path / "user")] if run.endswith("a_user_checkpoint") else []  # the latest
    # calibrate_correction off: the weights restored are the epoch's own, before any fit after training.
    fc = Forecaster("informer", **WINDOW, max_epochs=2, learning_rate=1e-3, callbacks=[*user, spoiler],
                    limit_train_batches=2, calibrate_correction=False, **tiny("informer"))
    fc.fit(csv, run_dir=tmp_path / "run" if run.startswith("run_dir") else None)
    assert len(spoiler.losses) == 2 and spoiler.losses[0] < spoiler.losses[1]
    for name, value in fc.model.state_dict().items():
        torch.testing.assert_close(value, spoiler.states[0][name], rtol=0, atol=0)
    if user:
        assert list((tmp_path / "user").glob("*.ckpt"))  # the user's callback did its own job
        assert np.isfinite(fc.evaluate().loc["mse", "standardized"])


def test_a_lightning_logger_passed_to_the_forecaster_receives_the_training_curves(csv, tmp_path):
    from lightning.pytorch.loggers import TensorBoardLogger
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tensorboard = TensorBoardLogger(tmp_path)
    Forecaster("informer", **WINDOW, max_epochs=2, learning_rate=1e-3, limit_train_batches=2, limit_val_batches=1,
               logger=tensorboard, log_every_n_steps=1, **tiny("informer")).fit(csv)
    events = EventAccumulator(tensorboard.log_dir)
    events.Reload()
    assert [event.step for event in events.Scalars("train_loss")] == [0, 1, 2, 3]
    assert len(events.Scalars("val_loss")) == 2


@pytest.mark.parametrize("model", sorted(MODELS))
def test_every_registered_model_works_through_the_forecaster(model, csv, frame, tmp_path):
    fc = Forecaster(model, **WINDOW, max_epochs=1, learning_rate=1e-3, limit_train_batches=2, limit_val_batches=2,
                    **tiny(model)).fit(csv)
    future = fc.predict()
    assert list(future.columns[:3]) == ["a", "b", "OT"] and len(future) == PRED_LEN
    assert np.isfinite(future.to_numpy()).all()
    assert set(fc.evaluate(detail=True)["scale"]) == {"standardized", "original"}
    pd.testing.assert_frame_equal(Forecaster.load(fc.save(tmp_path / model)).predict(frame), future)
    if model not in ATTENTIVE:
        with pytest.raises(ConfigError, match="no attention weights"):
            fc.attention_weights()
    else:
        weights = fc.attention_weights()
        first = weights[0]
        figure = plot_probsparse(first) if isinstance(first, ProbSparseWeights) else plot_attention(first)
        assert isinstance(figure, Figure)


@pytest.mark.parametrize(("model", "time_encoding"),
                         [("informer", "timeF"), ("informer", "fixed"), ("logsparse", "learned")])
def test_yearly_series_without_calendar_features_fit_and_predict(model, time_encoding):
    frame = make_frame(rows=120, freq="YS", seed=2)
    fc = Forecaster(model, seq_len=12, label_len=6, pred_len=3, time_encoding=time_encoding, max_epochs=1,
                    learning_rate=1e-3, **tiny(model)).fit(frame)
    assert fc.datamodule.n_time_features == 0
    future = fc.predict()
    pd.testing.assert_index_equal(future.index, pd.date_range(frame["date"].iloc[-1], periods=4, freq="YS")[1:],
                                  check_names=False)
    assert np.isfinite(future.to_numpy()).all()


# ------------------------------------------------------------------ probabilistic


def test_each_variables_quantile_columns_are_its_own(frame):
    """Mutation testing: every variable's quantile columns filled from the last variable's values passed the suite.
    The variables here lie about 1000 apart: each band must hold its own variable's point forecast."""
    future = Forecaster("seasonal_naive", **WINDOW, quantiles=(0.05, 0.95)).fit(frame).predict()
    for column in ("a", "b", "OT"):
        low, high = future[quantile_column(column, 0.05)], future[quantile_column(column, 0.95)]
        assert (low <= future[column]).all() and (future[column] <= high).all(), column


def test_gaussian_logsparse_adds_ordered_quantile_columns(csv, frame, tmp_path):
    if "logsparse" not in MODELS:
        pytest.skip("the LogSparse Transformer is not registered")
    fc = Forecaster("logsparse", **WINDOW, features="S", max_epochs=1, learning_rate=1e-3, head="gaussian",
                    quantiles=(0.1, 0.5, 0.9), **tiny("logsparse")).fit(csv)
    future = fc.predict()
    assert list(future.columns) == ["OT", "OT_q0.1", "OT_q0.5", "OT_q0.9"]
    assert (future["OT_q0.1"] < future["OT_q0.5"]).all() and (future["OT_q0.5"] < future["OT_q0.9"]).all()
    np.testing.assert_allclose(future["OT_q0.5"], future["OT"], rtol=1e-6)  # a Gaussian's median is its mean
    pd.testing.assert_frame_equal(Forecaster.load(fc.save(tmp_path / "gaussian")).predict(frame), future)
    assert len(fc.plot().axes[0].collections) == 1  # the 80% band


def test_validation_coverage_after_scale_calibration_is_logged_as_in_sample(csv, caplog):
    """evaluate(windows='val') gave coverage_0.8 = 0.8 of a scale fitted to cover 80% of those very windows, with
    nothing saying so, though the docstring offered it as the check of calibration before looking at test."""
    if "logsparse" not in MODELS:
        pytest.skip("the LogSparse Transformer is not registered")
    fc = Forecaster("logsparse", **WINDOW, features="S", max_epochs=1, head="gaussian", limit_train_batches=2,
                    **tiny("logsparse")).fit(csv)
    with caplog.at_level(logging.INFO, logger="forecast"):
        val = fc.evaluate(windows="val")
        assert val.loc["coverage_0.8"].iloc[0] == pytest.approx(0.8, abs=0.02)
        assert "in-sample: calibrate_scale fitted the predictive scale to cover 80% of them" in caplog.text
        caplog.clear()
        fc.evaluate()
    assert "in-sample" not in caplog.text


class NoisyLast(ForecastModel):
    """Repeats the last value; ``sample`` adds unit Gaussian noise (standardized scale)."""

    probabilistic = True

    def __init__(self, spec) -> None:
        super().__init__()
        self.spec = spec

    def forward(self, x, x_mark, y_mark):
        return x[:, -1:, -self.spec.c_out:].expand(-1, self.spec.pred_len, -1)  # [B, P, C_out]

    def sample(self, x, x_mark, y_mark, n_samples, generator=None):
        mean = self(x, x_mark, y_mark)
        return mean + torch.randn(n_samples, *mean.shape)  # [S, B, P, C_out]


def test_sampling_models_get_seeded_quantiles_without_touching_the_global_rng(frame, monkeypatch):
    monkeypatch.setitem(MODELS, "noisy", lambda spec: NoisyLast(spec))
    fc = Forecaster("noisy", **WINDOW, features="S", quantiles=(0.25, 0.75)).fit(frame)
    before = torch.random.get_rng_state()
    future = fc.predict()
    assert torch.equal(torch.random.get_rng_state(), before)
    pd.testing.assert_frame_equal(fc.predict(), future)
    # the same draws, made by hand: evaluate()'s SAMPLE_PATHS paths from the RNG seeded with SAMPLE_SEED
    with torch.random.fork_rng():
        torch.manual_seed(SAMPLE_SEED)
        noise = torch.randn(SAMPLE_PATHS, 1, PRED_LEN, 1).numpy()  # [S, B, P, C_out]
    scale = fc.datamodule.fitted.scaler.scale_[-1]
    for level in (0.25, 0.75):
        expected = future["OT"] + scale * np.quantile(noise, level, axis=0)[0, :, 0]
        np.testing.assert_allclose(future[f"OT_q{level}"], expected, rtol=1e-6)


def test_quantiles_asked_of_a_model_that_forecasts_points_are_refused():
    """Forecaster('dlinear', quantiles=[0.1, 0.9]) fitted and predicted without a quantile column, saying nothing."""
    for model, options in (("dlinear", {}), ("informer", tiny("informer"))):
        with pytest.raises(ConfigError, match=re.escape(f"quantiles=[0.1, 0.9] name the quantile columns predict "
                                                        f"adds for a model that forecasts a distribution, but "
                                                        f"{model!r} with these options forecasts points. Fix:")):
            Forecaster(model, **WINDOW, quantiles=(0.1, 0.9), **options)
    Forecaster("dlinear", **WINDOW)  # the default levels, and none, ask nothing of a point model
    Forecaster("dlinear", **WINDOW, quantiles=())
    Forecaster("logsparse", **WINDOW, quantiles=(0.1, 0.9), head="gaussian", **tiny("logsparse"))


def test_quantiles_asked_of_a_seasonal_naive_the_data_makes_point_only_are_refused_at_fit(frame):
    """Hourly data's season is 24 steps, so a 24-step window has no seasonal difference: predict gave no quantile
    column, saying nothing (the options alone cannot tell: the season is the data's)."""
    one_season = Forecaster("seasonal_naive", seq_len=24, label_len=12, pred_len=8, quantiles=(0.05, 0.5, 0.95))
    with pytest.raises(ConfigError, match=r"'seasonal_naive' with these options forecasts points.*seq_len >= "
                                          r"season_length \+ 2"):
        one_season.fit(frame)
    assert not one_season.is_fitted


def test_n_samples_sets_the_paths_predict_and_evaluate_draw_and_is_saved(frame, tmp_path):
    """n_samples was fixed at 100: no Forecaster, config or CLI option reached the module's."""
    seasonal = dict(WINDOW, features="S", season_length=24, quantiles=(0.1, 0.9))
    fc = Forecaster("seasonal_naive", **seasonal, n_samples=7).fit(frame)
    assert fc.predictor.module.hparams.n_samples == 7
    module = fc.predictor.module
    batch = fc.datamodule.future_batch().batch
    x, x_mark, y_mark = (batch[key].to(module.device) for key in ("x", "x_mark", "y_mark"))
    drawn = module.model.quantiles(x, x_mark, y_mark, (0.1, 0.9), 7, torch.Generator().manual_seed(SAMPLE_SEED))
    scaler = fc.datamodule.fitted.scaler
    future = fc.predict()
    np.testing.assert_allclose(future["OT_q0.9"], drawn[0.9][0, :, 0].double().numpy() * scaler.scale_[-1]
                               + scaler.mean_[-1], rtol=1e-6)
    report = fc.evaluate()
    assert not report.equals(Forecaster("seasonal_naive", **seasonal).fit(frame).evaluate())
    loaded = Forecaster.load(fc.save(tmp_path / "seven"))
    assert loaded.predictor.module.hparams.n_samples == 7
    pd.testing.assert_frame_equal(loaded.predict(frame), future)
    pd.testing.assert_frame_equal(loaded.evaluate(frame), report)
    with pytest.raises(ConfigError, match="n_samples"):
        Forecaster("seasonal_naive", **seasonal, n_samples=0)


def test_predict_draws_sampled_quantiles_as_evaluate_does(frame):
    """Seeded by the same rule as evaluate(), not by the training seed, from as many paths."""
    seasonal = dict(WINDOW, features="S", season_length=24, quantiles=(0.1, 0.9))
    fc = Forecaster("seasonal_naive", **seasonal, seed=0).fit(frame)
    assert fc.predictor.module.hparams.n_samples == SAMPLE_PATHS
    assert fc.predictor.module.hparams.sample_seed == SAMPLE_SEED
    future = fc.predict()
    pd.testing.assert_frame_equal(Forecaster("seasonal_naive", **seasonal, seed=7).fit(frame).predict(), future)
    module = fc.predictor.module
    batch = fc.datamodule.future_batch().batch
    x, x_mark, y_mark = (batch[key].to(module.device) for key in ("x", "x_mark", "y_mark"))
    drawn = module.model.quantiles(x, x_mark, y_mark, (0.1, 0.9), SAMPLE_PATHS,
                                   torch.Generator().manual_seed(SAMPLE_SEED))  # evaluate()'s draws for one window
    scaler = fc.datamodule.fitted.scaler
    for level in (0.1, 0.9):
        expected = drawn[level][0, :, 0].double().numpy() * scaler.scale_[-1] + scaler.mean_[-1]
        np.testing.assert_allclose(future[f"OT_q{level:g}"], expected, rtol=1e-6)


def test_evaluate_scores_the_same_sampled_quantiles_at_any_batch_size(frame):
    """Catches: one generator seeded per test epoch drew the paths of every batch in turn, so a window's sampled
    quantiles, and the rho-risks and coverages scored from them, changed with the batch size."""
    seasonal = dict(WINDOW, features="S", season_length=24, quantiles=(0.1, 0.9))
    reports = [Forecaster("seasonal_naive", **seasonal, batch_size=size).fit(frame).evaluate(frame)
               for size in (4, 7)]
    assert "rho_risk_0.1" in reports[0].index and "coverage_0.8" in reports[0].index
    pd.testing.assert_frame_equal(reports[0], reports[1], rtol=1e-6)


# ------------------------------------------------------------------- plots, attention


def test_plot_without_df_draws_the_history_the_forecast_was_made_from_even_after_the_file_changed(frame, tmp_path):
    """plot() re-read the CSV for its history line while predict() used the data held since the fit."""
    path = tmp_path / "series.csv"
    frame.to_csv(path, index=False)
    fc = Forecaster("dlinear", **WINDOW, features="S", max_epochs=0).fit(str(path))
    frame.assign(OT=frame["OT"] + 100.0).to_csv(path, index=False)  # edited after the fit
    history, forecast = fc.plot().axes[0].get_lines()
    np.testing.assert_allclose(history.get_ydata(), frame["OT"].iloc[-SEQ_LEN:], rtol=1e-12)
    np.testing.assert_allclose(forecast.get_ydata(), fc.predict()["OT"], rtol=1e-12)


def test_fit_leaves_the_callers_random_states_and_environment_as_they_were(frame, monkeypatch):
    """fit reseeded Python, numpy and torch for good (a caller's later draws repeated after every fit) and left
    PL_GLOBAL_SEED and PL_SEED_WORKERS set, which seed a later Trainer's workers."""
    import random

    monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)
    monkeypatch.delenv("PL_SEED_WORKERS", raising=False)

    def draws() -> tuple:
        return random.random(), float(np.random.rand()), float(torch.rand(()))

    random.seed(11), np.random.seed(11), torch.manual_seed(11)
    expected = draws()
    random.seed(11), np.random.seed(11), torch.manual_seed(11)
    for model in ("naive", "dlinear"):
        Forecaster(model, **WINDOW, max_epochs=1).fit(frame)
    assert draws() == expected
    assert "PL_GLOBAL_SEED" not in os.environ and "PL_SEED_WORKERS" not in os.environ


def test_windows_and_forecasts_across_the_clock_going_back_plot_hour_by_hour():
    """Hourly Berlin rows over 31 October 2021: a window's wall clock repeats 02:00, and such windows (and the
    forecast of data ending there) were refused as a panel's repeated timestamps."""
    import matplotlib.dates as mdates

    dates = pd.date_range("2021-10-29", periods=96, freq="h", tz="Europe/Berlin")
    frame = pd.DataFrame({"date": dates, "y": np.sin(np.arange(96) / 4)})
    fc = Forecaster("naive", seq_len=12, label_len=6, pred_len=6, features="S").fit(frame, split=(0.3, 0.1, 0.6))
    crossing = [i for i, (_, y) in enumerate(zip(*fc.predictor.datamodule.window_timestamps("test")))
                if pd.Index(y).has_duplicates]
    cut = frame[frame["date"] <= pd.Timestamp("2021-10-31 01:00", tz="Europe/Berlin")]
    for fig in (fc.plot(window=crossing[0]), fc.plot(cut)):
        lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
        steps = np.diff(mdates.date2num(np.concatenate([lines["history"].get_xdata(), lines["forecast"].get_xdata()])))
        np.testing.assert_allclose(steps[-6:], 1 / 24)


def test_plot_returns_figures_of_the_future_and_of_test_windows(fitted, frame):
    fig = fitted.plot()
    assert isinstance(fig, Figure) and len(fig.axes) == 3
    for ax in fig.axes:
        history, forecast = ax.get_lines()
        assert len(history.get_xdata()) == SEQ_LEN and len(forecast.get_xdata()) == PRED_LEN
        assert history.get_xdata()[-1] < forecast.get_xdata()[0]
    np.testing.assert_allclose(fig.axes[2].get_lines()[0].get_ydata(), frame["OT"].iloc[-SEQ_LEN:], rtol=1e-12)
    fig = fitted.plot(window=-1, columns=["OT"])
    assert len(fig.axes) == 1 and [line.get_label() for line in fig.axes[0].get_lines()] == [
        "history", "truth", "forecast"]
    truth = fig.axes[0].get_lines()[1].get_ydata()
    np.testing.assert_allclose(truth, frame["OT"].iloc[-PRED_LEN:], rtol=1e-6)  # the last test window
    one = fitted.plot(columns="OT", history=5)  # a column by its name; the last 5 rows as history
    assert len(one.axes) == 1
    np.testing.assert_allclose(one.axes[0].get_lines()[0].get_ydata(), frame["OT"].iloc[-5:], rtol=1e-12)
    assert "history" not in [line.get_label() for line in fitted.plot(history=0).axes[0].get_lines()]  # none, not all
    with pytest.raises(ConfigError, match="history must be None or an integer >= 0"):
        fitted.plot(history=-5)
    short = fitted.plot(window=0, history=5, columns="OT").axes[0].get_lines()[0]  # the lookback's last 5 rows
    assert len(short.get_xdata()) == 5
    np.testing.assert_array_equal(short.get_ydata(), fitted.plot(window=0).axes[2].get_lines()[0].get_ydata()[-5:])
    # What would be silently ignored is refused by name.
    for bad, words in ((dict(series="OT"), "wide table"), (dict(window=0, series="OT"), "series"),
                       (dict(window=0, future_covariates=frame), "future_covariates"), (dict(window=True), "window"),
                       (dict(window=1.0), "window")):
        with pytest.raises(ConfigError, match=words):
            fitted.plot(**bad)
    with pytest.raises(ConfigError, match="future covariates were given.*wide table"):
        fitted.predict(frame, future_covariates=frame)


def test_a_window_split_offers_the_splits_evaluate_takes(fitted):
    """plot and attention_weights listed 'predict' (the data module's loader, whose windows are another split's)
    among the valid splits, a split evaluate refuses; they now take and offer the same three."""
    for call in (fitted.plot, fitted.predictor.plot, fitted.attention_weights):
        for split in ("bogus", "predict"):
            with pytest.raises(ConfigError, match=re.escape(f"split must be one of ('train', 'val', 'test'), got "
                                                            f"split={split!r}")):
                call(window=0, split=split)
    with pytest.raises(ConfigError, match=re.escape("windows must be one of ('train', 'val', 'test')")):
        fitted.evaluate(windows="predict")


def test_attention_weights_come_per_encoder_layer(fitted):
    weights = fitted.attention_weights()
    series = len(fitted.output_columns)  # independent channels: one row per variable of the window
    assert fitted.model_options["channels"] == "independent"
    assert len(weights) == 2 and all(isinstance(w, ProbSparseWeights) for w in weights)
    assert weights[0].sparsity.shape == (series, 2, SEQ_LEN)
    assert weights[1].sparsity.shape == (series, 2, SEQ_LEN // 2)  # after distilling
    assert fitted.attention_weights(window=0)[0].sparsity.shape == (series, 2, SEQ_LEN)
    with pytest.raises(ConfigError, match="no attention"):
        Forecaster("naive", **WINDOW).fit(make_frame()).attention_weights()


# ------------------------------------------------------------- datasets and imports


def test_registered_dataset_gets_its_canonical_split():
    # ETTh1 ships inside the package (forecast/embedded/), so this runs with no mirror and no network.
    fc = Forecaster("naive", seq_len=96, label_len=48, pred_len=24).fit("ETTh1")
    assert fc.datamodule.split_protocol == "ett_hour"
    assert fc.datamodule.split_sizes == {"train": 8521, "val": 2857, "test": 2857}
    future = fc.predict()
    assert future.index[0] == fc.datamodule.dates[-1] + pd.Timedelta(hours=1) and len(future) == 24


def test_import_forecast_is_light_and_exports_the_api():
    code = "import sys, forecast; assert 'torch' not in sys.modules and 'pandas' not in sys.modules"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    code = ("import sys; from forecast import datasets; from forecast.data import DataConfig, read_csv; "
            "assert 'torch' not in sys.modules and 'lightning' not in sys.modules, 'loading a CSV imports torch'")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    from forecast import ForecastModule, datasets, plotting
    from forecast.module import ForecastModule as defined

    assert ForecastModule is defined and Forecaster.__module__ == "forecast.api"
    assert datasets.__name__ == "forecast.datasets" and plotting.__name__ == "forecast.plotting"
    assert {"Forecaster", "ForecastModule", "datasets"} <= set(dir(forecast))


def test_every_public_name_is_exported_and_resolves():
    assert set(forecast.__all__) == {"ConfigError", "DataError", "ForecastError", "__version__", *forecast._LAZY}
    for name in forecast.__all__:
        assert getattr(forecast, name) is not None, name


def test_fit_logs_each_epoch_the_restored_best_and_early_stopping_and_keeps_a_history(frame, caplog, tmp_path):
    options = dict(**WINDOW, learning_rate=1e-3, limit_train_batches=2, limit_val_batches=2, **tiny("dlinear"))
    with caplog.at_level(logging.INFO, logger="forecast"):
        fc = Forecaster("dlinear", max_epochs=2, **options).fit(frame, run_dir=tmp_path / "run")
    history = fc.history
    assert list(history.columns) == ["epoch", "train_loss", "val_loss", "learning_rate", "seconds"]
    assert history["epoch"].tolist() == [0, 1] and np.isfinite(history[["train_loss", "val_loss"]]).all().all()
    assert history["learning_rate"].tolist() == [1e-3, 5e-4]  # the improved recipe halves it every epoch
    lines = [record.getMessage() for record in caplog.records]
    assert sum(line.startswith("epoch ") and "train_loss" in line and "val_loss" in line for line in lines) == 2
    best = int(history["val_loss"].idxmin())
    assert f"restored the weights of epoch {best} (val_loss {history['val_loss'][best]:.4f})" in lines
    fit = fc.last_fit  # what the one recipe (forecast.training.fit_best) reports to the experiment runner
    assert (fit.epochs, fit.best_epoch) == (2, best) and fit.train_seconds > 0 and fit.trainer is not None
    assert fit.best_val_loss == pytest.approx(history["val_loss"][best])
    # resumed for a third epoch, the history keeps the two before it
    resumed = Forecaster("dlinear", max_epochs=3, **options).fit(frame, run_dir=tmp_path / "run")
    assert resumed.history["epoch"].tolist() == [0, 1, 2]
    pd.testing.assert_frame_equal(resumed.history.iloc[:2], history)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="forecast"):
        stopped = Forecaster("dlinear", max_epochs=20, patience=1, learning_rate=1.0, lr_schedule="none",
                             **{k: v for k, v in options.items() if k != "learning_rate"}).fit(frame)
    assert len(stopped.history) < 20
    assert any(record.getMessage().startswith("early stopping after epoch") for record in caplog.records)
    naive = Forecaster("naive", **WINDOW).fit(frame)
    assert naive.history.empty and naive.last_fit.trainer is None and naive.last_fit.best_epoch == -1


@pytest.mark.parametrize(("trainer_options", "validated"), [({"check_val_every_n_epoch": 2}, [False, True, False]),
                                                            ({"max_steps": 5}, [True, True, False])])
def test_an_epoch_without_validation_has_no_validation_loss_in_the_history(frame, caplog, trainer_options,
                                                                            validated):
    """It showed the last validated epoch's loss again (Lightning keeps the last logged value), and logged it."""
    options = dict(**WINDOW, learning_rate=1e-3, limit_train_batches=2, limit_val_batches=2, **tiny("dlinear"))
    with caplog.at_level(logging.INFO, logger="forecast"):
        history = Forecaster("dlinear", max_epochs=3, **options, **trainer_options).fit(frame).history
    assert history["epoch"].tolist() == [0, 1, 2]
    assert history["val_loss"].notna().tolist() == validated
    assert history["train_loss"].notna().all()
    lines = [record.getMessage() for record in caplog.records if record.getMessage().startswith("epoch ")]
    assert ["val_loss nan" not in line for line in lines] == validated


def test_the_progress_bar_is_on_in_interactive_use_only(monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert not Forecaster("naive", **WINDOW).config["progress"]
    monkeypatch.delenv("CI")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert Forecaster("naive", **WINDOW).config["progress"]
    assert not Forecaster("naive", **WINDOW, progress=False).config["progress"]
