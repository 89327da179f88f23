"""Hostile inputs: malformed tables, CSV bytes, configs, checkpoints and YAML.

Property tests generate broken inputs (NaNs, repeated and shuffled timestamps, text in
numeric columns, empty and one-row tables, huge values, wrong encodings, mixed time
zones, impossible window and model settings). Every case must end in one of the
package's exceptions (``ForecastError``) whose message names the source or the option
and says how to fix it, or succeed with a result checked against an independent
computation. Anything else (a pandas, numpy or torch exception, a NaN forecast) fails.

The downloader's checksum and partial-file behaviour is tested in tests/test_datasets.py.
"""

from __future__ import annotations

import ast
import functools
import json
import pathlib
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from lightning.pytorch.callbacks import Callback

from forecast import Forecaster
from forecast.api import model_option_names
from forecast.data import WindowDataModule
from forecast.errors import (
    ConfigError,
    DataError,
    ForecastError,
    NonFiniteValueError,
    NonNumericColumnError,
    UnparsableDateError,
    UnsortedTimestampError,
)
from forecast.experiment import Experiment, run_experiment
from forecast.layers.attention import ATTENTIONS
from forecast.models import MODELS, DataSpec, InformerConfig, build_model
from forecast.errors import NonFiniteForecastError
from forecast.training import TrainingConfig

ROOT = Path(__file__).resolve().parent.parent
WINDOW = dict(seq_len=6, label_len=3, pred_len=2)
TINY_INFORMER = dict(d_model=8, n_heads=2, d_ff=8, e_layers=1, d_layers=1, factor=1, dropout=0.0)
PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def clean_frame(rows: int = 60, n_variables: int = 2, freq: str = "h", seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    columns = {"date": pd.date_range("2021-03-26", periods=rows, freq=freq)}
    for index in range(n_variables - 1):
        columns[f"v{index}"] = rng.standard_normal(rows)
    columns["OT"] = 100 + 10 * rng.standard_normal(rows)
    return pd.DataFrame(columns)


def assert_helpful(error: ForecastError, *names: str) -> None:
    """The message names one of ``names`` (source, column or option) and says how to fix it."""
    message = str(error)
    assert any(str(name) in message for name in names), f"{message!r} names none of {names}"
    assert "Fix" in message or "choose one of" in message or "must" in message, message


# ------------------------------------------------------------------ hostile tables

CORRUPTIONS = ("nan", "duplicate", "shuffle", "text", "huge", "float32_overflow", "inf", "mixed_zones",
               "one_zone", "date_text", "number_text", "empty", "one_row", "constant", "drop_date")
HUGE = (1e300, -1e300, 1.7e308, 1e200, 1e160)
TEXT = ("x", "", "1,5", "nan?", "∞", "12 kg", "None", "0x1F", "1e999e")


@st.composite
def hostile_frames(draw) -> tuple[pd.DataFrame, frozenset[str]]:
    """A small regular series with a random set of corruptions applied."""
    rows = draw(st.one_of(st.integers(0, 3), st.integers(24, 70)))
    frame = clean_frame(rows, draw(st.integers(1, 3)), draw(st.sampled_from(["h", "15min", "D"])),
                        draw(st.integers(0, 1000)))
    corruptions = frozenset(draw(st.sets(st.sampled_from(CORRUPTIONS), max_size=3)))
    numeric = [c for c in frame.columns if c != "date"]

    def cell() -> tuple[int, str]:
        return draw(st.integers(0, max(len(frame) - 1, 0))), draw(st.sampled_from(numeric))

    if len(frame):
        if "constant" in corruptions:  # first: the corruptions below change single cells
            frame[cell()[1]] = draw(st.sampled_from([0.0, 5.0, 1e40, -1e17]))
        if "nan" in corruptions:
            frame.loc[frame.index[cell()[0]], cell()[1]] = np.nan
        if "inf" in corruptions:
            frame.loc[frame.index[cell()[0]], cell()[1]] = draw(st.sampled_from([np.inf, -np.inf]))
        if "huge" in corruptions:  # made to vary first: a constant column scales to zeros, whatever its size
            column = cell()[1]
            values = frame[column].to_numpy(np.float64)
            # Steps of the column's own magnitude: a constant 1e40 plus 0, 1, 2, ... would stay constant.
            step = float(np.max(np.abs(values[np.isfinite(values)]), initial=1.0))
            frame[column] = (frame[column] + np.arange(len(frame)) * step) * draw(st.sampled_from(HUGE))
        if "float32_overflow" in corruptions:  # a test-period value far outside the train rows
            frame.loc[frame.index[-1], cell()[1]] = 1e45
        if "text" in corruptions:
            row, column = cell()
            frame[column] = frame[column].astype(object)
            frame.loc[frame.index[row], column] = draw(st.sampled_from(TEXT))
        if "number_text" in corruptions:  # numbers stored as text are still numbers
            column = cell()[1]
            frame[column] = frame[column].map(repr).astype(object)
        if "duplicate" in corruptions:
            frame = pd.concat([frame, frame.iloc[[cell()[0]]]]).sort_values("date", kind="stable")
        if "shuffle" in corruptions:
            frame = frame.sample(frac=1.0, random_state=draw(st.integers(0, 100)))
        if "one_zone" in corruptions:
            frame["date"] = frame["date"].dt.tz_localize(draw(st.sampled_from(["UTC", "Europe/Paris"])),
                                                         ambiguous="NaT", nonexistent="NaT")
        if "mixed_zones" in corruptions:  # one timestamp without the zone the others carry: it names no instant
            zoned = frame["date"] if frame["date"].dt.tz is not None else frame["date"].dt.tz_localize("UTC")
            stamps = list(zoned)
            row = cell()[0]
            stamps[row] = stamps[row].tz_localize(None)
            frame["date"] = pd.Series(stamps, index=frame.index, dtype=object)
        if "date_text" in corruptions:
            row = cell()[0]
            frame["date"] = frame["date"].astype(str).astype(object)
            frame.loc[frame.index[row], "date"] = draw(st.sampled_from(["", "tomorrow", "2021-13-45", "31/02/2021"]))
    if "one_row" in corruptions:
        frame = frame.head(1)
    if "empty" in corruptions:
        frame = frame.head(0)
    if "drop_date" in corruptions:
        frame = frame.drop(columns="date")
    return frame.reset_index(drop=True), corruptions


def expected_standardized(frame: pd.DataFrame, dm: WindowDataModule) -> np.ndarray:
    """The scaled series computed independently: numpy mean and std (ddof=0) of the train rows."""
    values = np.column_stack([pd.to_numeric(frame[c]).to_numpy(np.float64) for c in dm.input_columns])  # [T, C]
    start, end = dm.borders["train"]
    mean, std = values[start:end].mean(axis=0), values[start:end].std(axis=0)
    return (values - mean) / np.where(std > 0, std, 1.0)


def check_datamodule(data, source: str) -> WindowDataModule | None:
    """Set up a data module; a ForecastError must be helpful, a success must match the reference."""
    try:
        dm = WindowDataModule(data, **WINDOW, batch_size=8)
        dm.setup()
    except ForecastError as error:
        assert_helpful(error, source)
        return None
    frame = data if isinstance(data, pd.DataFrame) else pd.read_csv(data)  # what pandas reads is the truth
    scaled = np.concatenate([dm.dataset(split).values.numpy() for split in ("train", "val", "test")])
    assert np.isfinite(scaled).all()
    for split, (start, end) in dm.borders.items():
        assert len(dm.dataset(split)) == end - start - WINDOW["seq_len"] - WINDOW["pred_len"] + 1
        np.testing.assert_allclose(dm.dataset(split).values.numpy(), expected_standardized(frame, dm)[start:end],
                                   rtol=1e-5, atol=1e-5)
    return dm


@PROPERTY
@given(hostile_frames())
def test_window_data_module_on_hostile_frames(case):
    frame, corruptions = case
    dm = check_datamodule(frame, "<DataFrame>")
    if dm is not None:  # what must have been refused was refused
        assert not corruptions & {"nan", "inf", "text", "shuffle", "duplicate", "mixed_zones", "empty", "huge",
                                  "one_row", "drop_date", "date_text", "float32_overflow"}


ENCODINGS = ("utf-8", "utf-8-sig", "utf-16", "latin-1", "cp1252")
BYTE_DAMAGE = ("none", "truncate", "garbage", "nul", "semicolon", "header_only", "empty", "crlf", "inf_literal")


@PROPERTY
@given(hostile_frames(), st.sampled_from(ENCODINGS), st.sampled_from(BYTE_DAMAGE), st.booleans(),
       st.integers(0, 10_000))
def test_window_data_module_on_hostile_csv_files(case, encoding, damage, accented, seed):
    frame, _ = case
    text = frame.to_csv(index=False)
    if accented and len(frame.columns) > 1:  # a non-ASCII column name: fine in UTF-8, not in the others
        text = text.replace(str(frame.columns[1]), "débit", 1)
        frame = frame.rename(columns={frame.columns[1]: "débit"})
    if damage == "semicolon":
        text = text.replace(",", ";")
    elif damage == "header_only":
        text = text.splitlines()[0] + "\n"
    elif damage == "empty":
        text = ""
    elif damage == "crlf":
        text = text.replace("\n", "\r\n")
    elif damage == "inf_literal" and len(text.splitlines()) > 1:
        lines = text.splitlines()
        lines[1] = lines[1].rsplit(",", 1)[0] + ",1e999"
        text = "\n".join(lines) + "\n"
    data = text.encode(encoding, errors="replace")
    rng = np.random.default_rng(seed)
    if damage == "truncate" and data:
        data = data[: int(rng.integers(0, len(data)))]
    elif damage == "garbage" and data:
        at = int(rng.integers(0, len(data)))
        data = data[:at] + bytes(rng.integers(0, 256, 16, dtype=np.uint8)) + data[at:]
    elif damage == "nul" and data:
        at = int(rng.integers(0, len(data)))
        data = data[:at] + b"\x00" + data[at:]
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "series.csv"
        path.write_bytes(data)
        dm = check_datamodule(path, str(path))
        if dm is not None and damage in ("none", "crlf") and encoding in ("utf-8", "utf-8-sig"):
            assert dm.n_rows == len(frame)


def assert_round_trips(forecast, expected, fitted_series: pd.DataFrame) -> None:
    """Equal up to the float32 standardization a forecast passes through: a value of 0 returns as about 1e-10,
    so the absolute tolerance follows the size of the series the scaler was fitted on."""
    size = fitted_series.map(float).abs().max().to_numpy(np.float64)  # [C]; numbers may be stored as text
    size = np.where(size > 0, size, 1.0)
    np.testing.assert_allclose(np.asarray(forecast) / size, np.asarray(expected, np.float64) / size, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ the Forecaster


@PROPERTY
@given(hostile_frames())
def test_forecaster_fits_and_predicts_hostile_frames_or_refuses(case):
    """The naive model repeats the last value: a successful forecast is checked exactly."""
    frame, _ = case
    forecaster = Forecaster("naive", **WINDOW, max_epochs=0)
    try:
        forecaster.fit(frame)
        future = forecaster.predict()
    except ForecastError as error:
        assert_helpful(error, "<DataFrame>", "seq_len", "pred_len")
        return
    last_date = pd.to_datetime(frame["date"]).iloc[-1]
    step = pd.tseries.frequencies.to_offset(forecaster.freq)
    assert list(future.index) == list(pd.date_range(last_date + step, periods=WINDOW["pred_len"], freq=step))
    last = frame[forecaster.output_columns].iloc[-1].map(float).to_numpy()
    assert_round_trips(future.to_numpy(), np.tile(last, (WINDOW["pred_len"], 1)), frame[forecaster.output_columns])


NAIVE_FIT_FRAME = clean_frame(80, 2)


@pytest.fixture(scope="module")
def fitted_naive() -> Forecaster:
    return Forecaster("naive", **WINDOW, max_epochs=0).fit(NAIVE_FIT_FRAME)


@PROPERTY
@given(hostile_frames())
def test_a_fitted_forecaster_predicts_hostile_frames_or_refuses(fitted_naive, case):
    frame, _ = case
    try:
        future = fitted_naive.predict(frame)
    except ForecastError as error:
        assert_helpful(error, "<DataFrame>")
        return
    assert np.isfinite(future.to_numpy()).all()
    assert_round_trips(future.to_numpy()[0], frame[fitted_naive.output_columns].iloc[-1].map(float),
                       NAIVE_FIT_FRAME[fitted_naive.output_columns])


class PoisonWeights(Callback):
    """Makes every weight NaN after every training step: a training that diverges."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        with torch.no_grad():
            for parameter in pl_module.parameters():
                parameter.fill_(float("nan"))


def test_a_diverged_training_raises_instead_of_forecasting_nan():
    forecaster = Forecaster("informer", **WINDOW, max_epochs=1, callbacks=[PoisonWeights()], **TINY_INFORMER)
    with pytest.raises(NonFiniteForecastError, match="diverged"):
        forecaster.fit(clean_frame(60))


def test_non_finite_forecasts_raise_in_predict_and_evaluate():
    forecaster = Forecaster("informer", **WINDOW, max_epochs=1, learning_rate=1e-3, **TINY_INFORMER)
    forecaster.fit(clean_frame(60))
    with torch.no_grad():
        forecaster.model.projection.bias.fill_(float("inf"))
    with pytest.raises(NonFiniteForecastError, match="NaN or inf"):
        forecaster.predict()
    with pytest.raises(NonFiniteForecastError, match="not all finite"):
        forecaster.evaluate()


def test_values_too_large_for_float32_after_scaling_name_their_cell():
    frame = clean_frame(60)
    frame.loc[59, "v0"] = 1e45  # train rows are ordinary; the last (test) row is not
    with pytest.raises(DataError, match=r"column 'v0', row 59 .* float32"):
        WindowDataModule(frame, **WINDOW).setup()


@pytest.mark.parametrize("value", [1e300, 1e200, 1e40])
def test_columns_float64_cannot_standardize_are_refused(value):
    frame = clean_frame(60)
    frame["v0"] = value if value == 1e40 else frame["v0"] * value  # a huge constant, or huge spread
    with pytest.raises(DataError, match=r"column 'v0' cannot be standardized"):
        WindowDataModule(frame, **WINDOW).setup()
    frame["v0"] = clean_frame(60)["v0"] * 1e30  # large but representable: fine
    WindowDataModule(frame, **WINDOW).setup()


@pytest.mark.parametrize("offset, spread", [(1e11, 3e-4), (-1e9, 3e-6), (1e5, 3e-10)])
def test_a_column_that_varies_on_a_large_offset_is_scaled_by_its_own_spread(offset, spread):
    """StandardScaler took a column moving by some 20 float64 steps of its level or more as constant (scale 1), as
    it did a meter reading 1e11 moving by 0.007 over 8,640 train rows: its standardized errors came out 19,000 times
    too small."""
    frame = clean_frame(60)
    frame["v0"] = offset + spread * frame["v0"]
    dm = WindowDataModule(frame, **WINDOW)
    dm.setup()
    train = frame["v0"].to_numpy()[: dm.borders["train"][1]]
    scaler = dm.fitted.scaler
    assert scaler.scale_[0] == pytest.approx((train - train[0]).std(), rel=1e-9)  # numpy's own loses digits at 1e11
    assert scaler.mean_[0] == pytest.approx(train.mean(), rel=1e-15)
    assert dm.train_dataset.values[:, 0].std(correction=0) == pytest.approx(1.0, rel=1e-4)


def test_a_column_too_small_for_its_variance_to_be_measured_is_refused():
    """At 1e-170 the squares underflow, the scaler took the column as constant and naive forecast the mean."""
    frame = clean_frame(60)
    frame["v0"] = 1e-170 * (2 + frame["v0"])
    with pytest.raises(DataError, match=r"column 'v0' varies by less than float64 can measure.*Fix: rescale"):
        WindowDataModule(frame, **WINDOW).setup()


def test_specific_table_errors():
    frame = clean_frame(60)
    multi = frame.copy()
    multi.columns = pd.MultiIndex.from_arrays([multi.columns, ["a"] * 3])
    with pytest.raises(DataError, match="levels"):
        WindowDataModule(multi, **WINDOW).setup()
    complex_values = frame.assign(v0=frame["v0"].astype(complex))
    with pytest.raises(NonNumericColumnError, match="complex"):
        WindowDataModule(complex_values, **WINDOW).setup()
    stamps = list(frame["date"].dt.tz_localize("UTC"))
    stamps[5] = stamps[5].tz_convert("Asia/Tokyo")  # the same instant in another zone: read as UTC
    zones = WindowDataModule(frame.assign(date=pd.Series(stamps, dtype=object)), **WINDOW)
    assert zones.fitted.prepare_options["time_zone"] == "UTC"
    stamps[5] = stamps[5].tz_localize(None)
    with pytest.raises(UnparsableDateError, match="mixes zoned and unzoned timestamps: row 5"):
        WindowDataModule(frame.assign(date=pd.Series(stamps, dtype=object)), **WINDOW).setup()
    offsets = frame["date"].astype(str) + np.where(np.arange(60) % 2, "+00:00", "+02:00")
    with pytest.raises(UnsortedTimestampError, match="go backwards"):  # as instants, they do
        WindowDataModule(frame.assign(date=offsets), **WINDOW).setup()
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "semicolons.csv"
        path.write_text(frame.to_csv(index=False, sep=";"))
        with pytest.raises(DataError, match="';'-separated"):
            WindowDataModule(path, **WINDOW).setup()
        # a European spreadsheet's decimal commas split the rows into more fields than the header has
        path.write_text(frame.to_csv(index=False, sep=";", decimal=","))
        with pytest.raises(DataError, match=r"';'-separated and the numbers hold decimal commas. Fix: "
                                             r".*pd\.read_csv\(path, sep=';', decimal=','\)"):
            WindowDataModule(path, **WINDOW).setup()
        fixed = pd.read_csv(path, sep=";", decimal=",")  # the fix it names
        np.testing.assert_allclose(WindowDataModule(fixed, **WINDOW).fitted.scaler.mean_,
                                   WindowDataModule(frame, **WINDOW).fitted.scaler.mean_)
    with pytest.raises(NonFiniteValueError, match="row 3"):
        WindowDataModule(frame.assign(OT=frame["OT"].where(frame.index != 3)), **WINDOW).setup()


# --------------------------------------------------------------------- configs

LENGTHS = st.one_of(st.integers(-3, 30), st.sampled_from([None, "8", 8.0, 8.5, True, float("nan")]))
ATTENTION_NAMES = st.sampled_from([*ATTENTIONS, "ProbSparse", "", "nope", "FULL"])


def invalid_window_settings(seq_len, label_len, pred_len) -> list[str]:
    """The names of the window settings that are invalid (the window contract of docs/design.md)."""
    def integer(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    bad = [name for name, value, low in (("seq_len", seq_len, 1), ("label_len", label_len, 0),
                                         ("pred_len", pred_len, 1)) if not integer(value) or value < low]
    if not bad and label_len > seq_len:
        bad.append("label_len")
    return bad


def invalid_model_options(d_model, n_heads, attention, factor, dropout) -> list[str]:
    bad = []
    if d_model < 1 or n_heads < 1 or d_model % n_heads:
        bad += ["d_model", "n_heads"]
    if attention not in ATTENTIONS:
        bad.append("attention")
    if factor < 1:
        bad.append("factor")
    if not 0.0 <= dropout < 1.0:
        bad.append("dropout")
    return bad


@settings(max_examples=100, deadline=None)
@given(LENGTHS, LENGTHS, LENGTHS, st.integers(-4, 24), st.integers(-2, 6), ATTENTION_NAMES, st.integers(-1, 4),
       st.one_of(st.floats(-1, 2), st.sampled_from([float("nan"), float("inf")])))
def test_forecaster_refuses_exactly_the_invalid_configs(seq_len, label_len, pred_len, d_model, n_heads,
                                                        attention, factor, dropout):
    bad = (invalid_window_settings(seq_len, label_len, pred_len)
           + invalid_model_options(d_model, n_heads, attention, factor, dropout))
    if attention in ATTENTIONS and attention != "prob" and factor != InformerConfig().factor:
        bad.append("factor")  # ProbSparse's sampling factor with no ProbSparse attention: given, and idle
    try:
        Forecaster("informer", seq_len=seq_len, label_len=label_len, pred_len=pred_len, d_model=d_model,
                   n_heads=n_heads, attention=attention, factor=factor, dropout=dropout)
    except ForecastError as error:
        assert bad, f"a valid config was refused: {error}"
        assert_helpful(error, *bad)
        return
    assert not bad, f"invalid {bad} accepted"


@settings(max_examples=60, deadline=None)
@given(st.integers(-4, 24), st.integers(-2, 6), ATTENTION_NAMES, st.integers(-1, 4), st.floats(-0.5, 1.5),
       st.integers(1, 3), st.integers(1, 3))
def test_build_model_refuses_invalid_options_and_builds_working_models(d_model, n_heads, attention, factor, dropout,
                                                                       c_in, batch):
    bad = invalid_model_options(d_model, n_heads, attention, factor, dropout)
    spec = DataSpec(seq_len=8, label_len=4, pred_len=3, c_in=c_in, c_out=c_in, n_time_features=4)
    try:
        model = build_model("informer", spec, d_model=d_model, n_heads=n_heads, attention=attention, factor=factor,
                            dropout=dropout)
    except ForecastError as error:
        assert bad, f"valid options refused: {error}"
        assert_helpful(error, *bad)
        return
    assert not bad
    generator = torch.Generator().manual_seed(0)
    out = model.eval()(torch.randn(batch, 8, c_in, generator=generator), torch.rand(batch, 8, 4, generator=generator),
                       torch.rand(batch, 7, 4, generator=generator))
    assert out.shape == (batch, 3, c_in) and torch.isfinite(out).all()


@functools.cache
def tiny(model: str) -> dict:
    sizes = {"d_model": 8, "n_heads": 2, "d_ff": 8, "n_layers": 1, "e_layers": 2, "d_layers": 1, "factor": 1,
             "dropout": 0.0}
    fields = set(model_option_names(model)) - ({"factor"} if model == "transformer" else set())  # no ProbSparse
    return {name: value for name, value in sizes.items() if name in fields}


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.integers(0, 12), st.integers(1, 8), st.sampled_from(sorted(MODELS)), st.integers(1, 3))
def test_every_model_forecasts_every_valid_window(seq_len, label_len, pred_len, model, c_in):
    """The configs the Forecaster accepts give models that run (no torch error at fit time)."""
    assume(label_len <= seq_len)
    spec = DataSpec(seq_len=seq_len, label_len=label_len, pred_len=pred_len, c_in=c_in, c_out=c_in, n_time_features=4)
    options = tiny(model) if model != "seasonal_naive" else {"season_length": max(1, seq_len // 2)}
    net = build_model(model, spec, **options)
    if model == "seasonal_naive":  # one step holds a season but no seasonal difference to sample
        assert net.probabilistic == (seq_len > options["season_length"])
    generator = torch.Generator().manual_seed(0)
    for training in (True, False):
        out = net.train(training)(torch.randn(2, seq_len, c_in, generator=generator),
                                  torch.rand(2, seq_len, 4, generator=generator),
                                  torch.rand(2, label_len + pred_len, 4, generator=generator))
        assert out.shape == (2, pred_len, c_in) and torch.isfinite(out).all()


@pytest.mark.parametrize("options", [
    dict(learning_rate=float("nan")), dict(learning_rate="fast"), dict(weight_decay=-1.0),
    dict(weight_decay=float("inf")), dict(max_epochs=float("inf")), dict(patience=2.5), dict(batch_size=True),
])
def test_training_options_are_checked_at_construction(options):
    name = next(iter(options))
    with pytest.raises(ConfigError, match=name):
        Forecaster("informer", **WINDOW, **options)
    with pytest.raises(ConfigError, match=name):
        TrainingConfig(**options)


@pytest.mark.parametrize("options", [dict(precision="bogus"), dict(accelerator="quantum"), dict(devices=-3),
                                     dict(strategy="nonsense"), dict(accelerator="tpu")])  # tpu: torch_xla missing
def test_trainer_settings_lightning_refuses_raise_config_errors(options):
    forecaster = Forecaster("informer", **WINDOW, max_epochs=1, **TINY_INFORMER, **options)
    with pytest.raises(ConfigError, match="Lightning refuses"):
        forecaster.fit(clean_frame(60))


# --------------------------------------------------------------- pickled code


class PlantsAFile:
    """Unpickling this calls ``Path.touch``: proof, if the file appears, that code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (self.marker,))


def test_forecaster_load_refuses_weights_holding_pickled_code(tmp_path):
    saved = Forecaster("informer", **WINDOW, max_epochs=1, **TINY_INFORMER).fit(clean_frame(60)).save(tmp_path / "fc")
    marker = tmp_path / "code-ran"
    state = torch.load(saved / "model.pt", weights_only=True)
    torch.save({**state, "payload": PlantsAFile(marker)}, saved / "model.pt")
    with pytest.raises(ConfigError, match="model.pt is not the file its config.json was saved with"):
        Forecaster.load(saved)  # refused unread: its config.json names another model.pt
    config = json.loads((saved / "config.json").read_text())
    del config["files"]  # as a run saved before config.json named its files: read, with weights_only
    (saved / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="pickled"):
        Forecaster.load(saved)
    assert not marker.exists()
    torch.save(torch.nn.Linear(2, 2), saved / "model.pt")  # a whole pickled module, not a state_dict
    with pytest.raises(ConfigError, match="pickled"):
        Forecaster.load(saved)
    (saved / "model.pt").write_bytes((saved / "model.pt").read_bytes()[:100])  # damaged: cut short
    with pytest.raises(ConfigError, match="damaged or not a checkpoint. Fix: save the forecaster again") as error:
        Forecaster.load(saved)
    assert "resume" not in str(error.value)  # it said 'resume from another checkpoint': a saved folder resumes nothing


def poison_checkpoint(directory: Path, marker: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": {}, "epoch": 0, "payload": PlantsAFile(marker)}, directory / "last.ckpt")


def test_resuming_refuses_checkpoints_holding_pickled_code(tmp_path):
    frame, marker = clean_frame(60), tmp_path / "code-ran"
    csv = tmp_path / "series.csv"
    frame.to_csv(csv, index=False)
    experiment = Experiment(dataset=str(csv), model="informer", **WINDOW, model_options=TINY_INFORMER,
                            training=TrainingConfig(max_epochs=1))
    poison_checkpoint(tmp_path / "runs" / experiment.run_name() / "checkpoints", marker)
    with pytest.raises(ConfigError, match="pickled"):
        run_experiment(experiment, tmp_path / "results.csv", tmp_path / "runs", "test")
    forecaster = Forecaster("informer", **WINDOW, max_epochs=1, **TINY_INFORMER)
    forecaster.fit(frame, run_dir=tmp_path / "api")  # a genuine run directory, then poisoned
    poison_checkpoint(tmp_path / "api" / "checkpoints", marker)
    with pytest.raises(ConfigError, match="pickled"):
        Forecaster("informer", **WINDOW, max_epochs=2, **TINY_INFORMER).fit(frame, run_dir=tmp_path / "api")
    assert not marker.exists() and not (tmp_path / "results.csv").exists()


# ----------------------------------------------------------------------- YAML

UNSAFE_YAML = ("load", "load_all", "full_load", "full_load_all", "unsafe_load", "unsafe_load_all", "Loader",
               "FullLoader", "UnsafeLoader", "UnsafeConstructor")


def test_yaml_is_only_read_with_safe_load():
    """Every ``yaml.<name>`` in the package, experiments and benchmarks is a safe_* function."""
    sources = [p for folder in ("forecast", "experiments", "benchmarks") for p in (ROOT / folder).rglob("*.py")]
    used = set()
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "yaml":
                used.add((path.relative_to(ROOT).as_posix(), node.attr))
            if isinstance(node, ast.ImportFrom) and node.module == "yaml":
                used.update((path.relative_to(ROOT).as_posix(), alias.name) for alias in node.names)
    assert used, "the package reads YAML somewhere (configs, sweeps)"
    unsafe = sorted(entry for entry in used if entry[1] in UNSAFE_YAML)
    assert not unsafe, f"unsafe YAML calls: {unsafe}"


def test_yaml_files_with_python_tags_are_refused(tmp_path):
    from forecast.config import load_config, read_yaml
    from forecast.sweep import SweepSpec

    marker = tmp_path / "code-ran"
    path = tmp_path / "evil.yaml"
    path.write_text(f"model: !!python/object/apply:pathlib.Path.touch [{str(marker)!r}]\n")
    for reader in (read_yaml, load_config, SweepSpec.from_file):
        with pytest.raises(ConfigError, match="evil.yaml"):
            reader(path)
    assert not marker.exists()
    assert yaml.safe_load("a: 1") == {"a": 1}  # the safe loader itself works


def test_hostile_frame_generator_covers_its_corruptions():
    """The property tests above are only as good as their generator: it must produce each corruption."""
    seen: set[str] = set()

    @settings(max_examples=200, deadline=None, derandomize=True, database=None)
    @given(hostile_frames())
    def collect(case):
        seen.update(case[1])

    collect()
    assert seen == set(CORRUPTIONS)
