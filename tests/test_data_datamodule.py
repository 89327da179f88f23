"""WindowDataModule on small synthetic series: options, scaling, loaders, timestamps, future input."""

from __future__ import annotations

import dataclasses
import logging

import lightning as L
import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.preprocessing import StandardScaler

from forecast import datasets
from forecast.data import FittedState, WindowDataModule, describe_splits, time_features
from forecast.data.dataset import ITEM_KEYS
from forecast.errors import ConfigError, DataError, SeriesTooShortError, UnknownColumnError
from forecast.training import lightning_warnings


def make_frame(n: int = 200, columns=("a", "OT", "c"), freq: str = "h", start: str = "2021-01-01", seed: int = 0):
    rng = np.random.default_rng(seed)
    data = {"date": pd.date_range(start, periods=n, freq=freq)}
    for i, column in enumerate(columns):
        data[column] = rng.normal(loc=10.0 * i, scale=i + 1.0, size=n).cumsum() / 10 + 5 * i
    return pd.DataFrame(data)


def make_module(frame=None, **kwargs) -> WindowDataModule:
    options = {"seq_len": 12, "label_len": 6, "pred_len": 4, "batch_size": 7, "target": "OT"}
    options.update(kwargs)
    return WindowDataModule(make_frame() if frame is None else frame, **options)


def stack(loader) -> dict[str, torch.Tensor]:
    batches = list(loader)
    return {key: torch.cat([b[key] for b in batches]) for key in ITEM_KEYS}


# ------------------------------------------------------------------ arguments


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"seq_len": 0}, "seq_len"),
        ({"seq_len": 4, "label_len": 5}, "label_len"),
        ({"pred_len": 2.5}, "pred_len"),
        ({"features": "X"}, "features"),
        ({"time_encoding": "sinusoid"}, "time_encoding"),
        ({"batch_size": 0}, "batch_size"),
        ({"num_workers": -1}, "num_workers"),
        ({"freq": "every hour"}, "offset alias"),
        ({"split": "weird"}, "split"),
        ({"split": (0.5, 0.1, 0.1)}, "sum to 1"),
        ({"split": ("2021-03-01", "2021-01-01")}, "before the test border"),
        ({"date_column": ""}, "date_column"),
        ({"fill_nan": "mean"}, "fill_nan"),
        ({"columns": "a"}, "columns"),
        ({"predict_split": "future"}, "predict_split"),
        ({"test_split": "validation"}, "test_split"),
        ({"seed": -1}, "seed"),
        ({"allow_irregular": "yes"}, "allow_irregular"),
    ],
)
def test_invalid_arguments_raise_config_error(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        make_module(**kwargs)


def test_data_must_be_a_frame_a_path_or_a_registered_name(tmp_path):
    with pytest.raises(ConfigError, match="DataFrame, a Series indexed by timestamps, a CSV path"):
        WindowDataModule(123, 12, 6, 4)
    with pytest.raises(ConfigError, match="neither a registered dataset"):
        WindowDataModule("no_such_dataset", 12, 6, 4).setup()


# ------------------------------------------------------------ variables, items


@pytest.mark.parametrize(
    ("features", "inputs", "outputs"),
    [("M", ["a", "c", "OT"], ["a", "c", "OT"]), ("S", ["OT"], ["OT"]), ("MS", ["a", "c", "OT"], ["OT"])],
)
def test_variables_in_model_order_and_item_shapes(features, inputs, outputs):
    dm = make_module(features=features)
    assert dm.input_columns == inputs and dm.output_columns == outputs
    assert (dm.c_in, dm.c_out) == (len(inputs), len(outputs))
    assert dm.n_time_features == 4 and dm.time_feature_sizes is None and dm.freq == "h"
    item = dm.train_dataset[0]
    assert tuple(item) == ITEM_KEYS
    assert item["x"].shape == (12, dm.c_in) and item["y"].shape == (10, dm.c_in)
    assert item["x_mark"].shape == (12, 4) and item["y_mark"].shape == (10, 4)
    assert all(item[key].dtype == torch.float32 for key in ("x", "y", "x_mark", "y_mark", "x_known", "y_known"))
    # a wide table is one series with no covariates
    assert item["x_known"].shape == (12, 0) and item["y_known"].shape == (10, 0) and item["static"].shape == (0,)
    assert item["series"].dtype == item["static"].dtype == torch.int64 and int(item["series"]) == 0


@pytest.mark.parametrize(("features", "inputs", "outputs"),
                         [("M", ["a", "OT", "c"], ["a", "OT", "c"]), ("S", ["c"], ["c"]), ("MS", ["a", "OT", "c"], ["c"])])
def test_without_a_target_a_plain_table_keeps_its_order_or_forecasts_its_last_column(features, inputs, outputs):
    dm = make_module(features=features, target=None)
    assert dm.input_columns == inputs and dm.output_columns == outputs
    assert dm.fitted.prepare_options["target"] == (None if features == "M" else "c")


def test_a_series_and_a_time_indexed_frame_give_the_windows_of_the_frame():
    frame = make_frame()
    expected = stack(make_module(frame).test_dataloader())
    indexed = stack(make_module(frame.set_index("date")).test_dataloader())
    for key in ITEM_KEYS:
        torch.testing.assert_close(indexed[key], expected[key])
    single = make_module(frame.set_index("date")["OT"], features="S", target=None)
    assert single.input_columns == ["OT"]
    torch.testing.assert_close(stack(single.test_dataloader())["y"], expected["y"][..., -1:])


def test_a_date_split_cuts_the_windows_at_its_borders():
    dm = make_module(split=("2021-01-05 00:00", "2021-01-07 12:00"))
    assert dm.split_protocol == "dates"
    assert dm.dates[dm.borders["train"][1] - 1] == pd.Timestamp("2021-01-04 23:00")
    first_val, first_test = dm.forecast_timestamps("val")[0, 0], dm.forecast_timestamps("test")[0, 0]
    assert (first_val, first_test) == (np.datetime64("2021-01-05T00:00"), np.datetime64("2021-01-07T12:00"))
    assert dm.borders["test"][1] == dm.n_rows


def test_fixed_encoding_exposes_field_sizes():
    dm = make_module(make_frame(freq="15min"), time_encoding="fixed")
    assert dm.time_feature_sizes == [13, 32, 7, 24, 4]
    assert dm.n_time_features == 5 and dm.train_dataset[0]["x_mark"].shape == (12, 5)


def test_setup_is_idempotent_and_properties_set_up_lazily():
    dm = make_module()
    assert dm.c_in == 3  # no explicit setup()
    scaler = dm.fitted.scaler
    for stage in ("fit", "validate", "test", "predict", None):
        dm.setup(stage)
    assert dm.fitted.scaler is scaler


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(min_value=120, max_value=300),  # every split holds a window
    seq_len=st.integers(min_value=2, max_value=16),
    pred_len=st.integers(min_value=1, max_value=8),
    features=st.sampled_from(["M", "S", "MS"]),
)
def test_windows_hold_scaled_rows_and_counts_match_borders(n, seq_len, pred_len, features):
    frame = make_frame(n=n)
    dm = WindowDataModule(frame, seq_len, seq_len // 2, pred_len, features=features)
    raw = frame[dm.input_columns].to_numpy()
    train_end = dm.borders["train"][1]
    expected_scaler = StandardScaler().fit(raw[:train_end])
    for name in ("train", "val", "test"):
        start, end = dm.borders[name]
        dataset = dm.dataset(name)
        assert dm.split_sizes[name] == len(dataset) == end - start - seq_len - pred_len + 1
        for i in (0, len(dataset) - 1):
            row = start + i
            np.testing.assert_allclose(
                dataset[i]["x"].numpy(), expected_scaler.transform(raw[row : row + seq_len]), rtol=1e-5, atol=1e-5
            )
            target_rows = raw[row + seq_len : row + seq_len + pred_len, -dm.c_out :]  # [P, c_out]
            restored = dm.fitted.to_original(dataset[i]["y"][-pred_len:, -dm.c_out :].numpy())
            np.testing.assert_allclose(restored, target_rows, rtol=1e-5, atol=1e-4)


# -------------------------------------------------------------------- scaling


def test_scaler_is_fitted_on_train_rows_only():
    frame = make_frame()
    dm = make_module(frame)
    train_rows = frame[dm.input_columns].iloc[: dm.borders["train"][1]]
    np.testing.assert_allclose(dm.fitted.scaler.mean_, train_rows.mean().to_numpy())
    np.testing.assert_allclose(dm.fitted.scaler.scale_, train_rows.std(ddof=0).to_numpy())
    changed = frame.copy()
    changed.loc[dm.borders["test"][0] :, "OT"] += 1000.0  # the test period cannot move the scaler
    np.testing.assert_array_equal(make_module(changed).fitted.scaler.mean_, dm.fitted.scaler.mean_)


def test_constant_column_gets_unit_scale_not_nan():
    frame = make_frame().assign(c=3.5)
    dm = make_module(frame)
    assert dm.fitted.scaler.scale_[dm.input_columns.index("c")] == 1.0
    x = stack(dm.test_dataloader())["x"]
    assert torch.isfinite(x).all()
    assert (x[..., dm.input_columns.index("c")] == 0).all()


@pytest.mark.parametrize("features", ["M", "S", "MS"])
def test_inverse_transform_numpy_and_torch(features):
    dm = make_module(features=features)
    assert dm.fitted.output_mean.shape == (dm.c_out,)
    assert dm.fitted.output_scale.shape == (dm.c_out,)
    scaled = np.random.default_rng(1).normal(size=(5, 4, dm.c_out)).astype(np.float32)  # [B, P, c_out]
    restored = dm.fitted.to_original(scaled)
    assert isinstance(restored, np.ndarray) and restored.dtype == np.float64
    target_stats = dm.fitted.scaler.mean_[-dm.c_out :], dm.fitted.scaler.scale_[-dm.c_out :]
    np.testing.assert_allclose(restored, scaled * target_stats[1] + target_stats[0], rtol=1e-6)
    if features == "M":
        flat = scaled.reshape(-1, dm.c_out).astype(np.float64)  # [B*P, C]
        reference = dm.fitted.scaler.inverse_transform(flat).reshape(scaled.shape)  # [B, P, C]
        np.testing.assert_allclose(restored, reference, rtol=1e-6)
    # the target is the middle column of the table; its own statistics are used (PITFALLS:
    # the field takes the last column's statistics without moving the target there)
    train_target = make_frame()["OT"].iloc[: dm.borders["train"][1]]
    np.testing.assert_allclose(dm.fitted.output_mean[-1], train_target.mean(), rtol=1e-6)
    np.testing.assert_allclose(dm.fitted.output_scale[-1], train_target.std(ddof=0), rtol=1e-6)
    tensor = torch.from_numpy(scaled)
    restored_tensor = dm.fitted.to_original(tensor)
    assert isinstance(restored_tensor, torch.Tensor) and restored_tensor.dtype == torch.float64
    np.testing.assert_allclose(restored_tensor.numpy(), restored, rtol=1e-12)
    np.testing.assert_allclose(dm.fitted.to_scaled(restored), scaled, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(dm.fitted.to_scaled(restored_tensor).float(), tensor, rtol=1e-5, atol=1e-5)
    with pytest.raises(DataError, match="c_out"):
        dm.fitted.to_original(np.zeros((2, dm.c_out + 1)))


# ---------------------------------------------------------------- dataloaders


def test_eval_loaders_serve_every_window_once_in_order():
    dm = make_module(batch_size=7)
    for split, loader in (("val", dm.val_dataloader()), ("test", dm.test_dataloader()), ("test", dm.predict_dataloader())):
        dataset = dm.dataset(split)
        assert len(dataset) % 7 != 0  # the last batch is partial and must be kept
        served = stack(loader)
        expected = torch.stack([dataset[i]["x"] for i in range(len(dataset))])
        torch.testing.assert_close(served["x"], expected, rtol=0, atol=0)


def test_a_validation_period_shorter_than_two_horizons_gets_the_windows_of_its_longest_testable_prefix():
    """200 rows split 70/10/20: 20 validation rows. A horizon of 4 fits 17 windows, more than 4: None. A horizon
    of 12 fits 9, one stretch: the prefix of 10 steps fits 11 windows, more than 10, each cut there."""
    assert make_module(pred_len=4).val_prefix_dataloader() is None
    dm = make_module(pred_len=12, batch_size=4)
    start, end = dm.borders["val"]
    owned, val = end - start - dm.config.seq_len, dm.dataset("val")
    assert owned == 20 and len(val) == 9
    prefix = dm.val_prefix_dataloader()
    windows = prefix.dataset
    assert windows.target_len == 10 and len(windows) == 11 > windows.target_len
    served = stack(prefix)  # every window once, in order
    assert served["y"].shape == (11, 6 + 10, 3) and served["y_mark"].shape == (11, 6 + 12, 4)
    # Every value is one of the validation period's: the windows it shares with the validation windows are theirs,
    # cut; the test period's values are not in the windows at all (NaN), only the calendar of its dates.
    assert not torch.isnan(served["x"]).any() and not torch.isnan(served["y"]).any()
    assert torch.isnan(windows.values[end - start:]).all()
    for i in range(len(val)):
        torch.testing.assert_close(windows[i]["x"], val[i]["x"], rtol=0, atol=0)
        torch.testing.assert_close(windows[i]["y"], val[i]["y"][: 6 + 10], rtol=0, atol=0)
    test = dm.dataset("test")  # its first row is the validation period's end less seq_len
    overhang = windows.marks[end - start:]  # [T' - (end - start), F]: the test period's first dates
    torch.testing.assert_close(overhang, test.marks[dm.config.seq_len: dm.config.seq_len + len(overhang)],
                               rtol=0, atol=0)
    # As many windows as steps (9 rows, horizon 5: 5 windows) still span one stretch: the prefix of 4 steps, 6 windows.
    boundary = make_module(pred_len=5, split=(150, 159, 200))
    assert len(boundary.dataset("val")) == 5 and len(boundary.val_prefix_dataloader().dataset) == 6
    # A single validation row holds one window of one step, and no shorter prefix: nothing to test.
    single = make_module(pred_len=1, split=(150, 151, 200))
    assert len(single.dataset("val")) == 1 and single.val_prefix_dataloader() is None


def test_predict_split_is_configurable():
    dm = make_module(predict_split="val")
    assert len(stack(dm.predict_dataloader())["x"]) == dm.split_sizes["val"]


@pytest.mark.parametrize("split", ["train", "val"])
def test_test_split_serves_that_splits_windows_in_order(split):
    dm = make_module(test_split=split)
    served = stack(dm.test_dataloader())
    windows = dm.dataset(split)
    for key in ITEM_KEYS:
        expected = torch.stack([windows[i][key] for i in range(len(windows))])
        torch.testing.assert_close(served[key], expected, rtol=0, atol=0)
    other = dm.with_options(test_split="test")
    assert other.config == dataclasses.replace(dm.config, test_split="test")
    assert len(stack(other.test_dataloader())["x"]) == dm.split_sizes["test"]


def test_train_loader_shuffles_deterministically_by_seed():
    def first_rows(seed):
        return stack(make_module(seed=seed).train_dataloader())["x"][:, 0, 0]

    dm = make_module()
    in_order = torch.stack([dm.train_dataset[i]["x"][0, 0] for i in range(len(dm.train_dataset))])
    a, b, c = first_rows(0), first_rows(0), first_rows(1)
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert not torch.equal(a, c) and not torch.equal(a, in_order)
    torch.testing.assert_close(a.sort().values, in_order.sort().values)  # a permutation, all kept


def test_drop_last_train_is_opt_in():
    dm = make_module(batch_size=7)
    n_train = len(dm.train_dataset)
    assert len(stack(dm.train_dataloader())["x"]) == n_train
    dropping = make_module(batch_size=7, drop_last_train=True)
    assert len(stack(dropping.train_dataloader())["x"]) == n_train - n_train % 7
    # the training loader's alone: validation and test windows are never dropped
    for loader, windows in ((dropping.val_dataloader(), dropping.val_dataset),
                            (dropping.test_dataloader(), dropping.test_dataset)):
        assert len(windows) % 7 and len(stack(loader)["x"]) == len(windows)
    with pytest.raises(ConfigError, match="drop_last_train"):
        make_module(batch_size=10_000, drop_last_train=True).train_dataloader()


def test_eval_batch_size():
    dm = make_module(batch_size=7, eval_batch_size=5)
    assert dm.test_dataloader().batch_size == 5 and dm.train_dataloader().batch_size == 7


def test_two_workers_serve_the_same_batches(tmp_path):
    frame = make_frame(n=80)
    serial = make_module(frame, num_workers=0)
    parallel = make_module(frame, num_workers=2)
    for name in ("train_dataloader", "test_dataloader"):
        expected = stack(getattr(serial, name)())
        served = stack(getattr(parallel, name)())
        for key in ITEM_KEYS:
            torch.testing.assert_close(served[key], expected[key], rtol=0, atol=0)


def test_lightning_trainer_consumes_the_module():
    class Linear(L.LightningModule):
        def __init__(self, c_in: int, seq_len: int, pred_len: int) -> None:
            super().__init__()
            self.pred_len = pred_len
            self.layer = torch.nn.Linear(seq_len, pred_len)

        def forward(self, x):  # [B, L, C] -> [B, P, C]
            return self.layer(x.transpose(1, 2)).transpose(1, 2)

        def training_step(self, batch, batch_idx):
            return torch.nn.functional.mse_loss(self(batch["x"]), batch["y"][:, -self.pred_len :])

        def validation_step(self, batch, batch_idx):
            return torch.nn.functional.mse_loss(self(batch["x"]), batch["y"][:, -self.pred_len :])

        def predict_step(self, batch, batch_idx):
            return self(batch["x"])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    dm = make_module()
    model = Linear(dm.c_in, 12, 4)
    trainer = L.Trainer(
        max_steps=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, accelerator="cpu", devices=1,
    )
    with lightning_warnings():  # the calls' warnings the library leaves out too
        trainer.fit(model, datamodule=dm)
        predictions = trainer.predict(model, datamodule=dm)
    assert sum(len(p) for p in predictions) == dm.split_sizes["test"]


# ----------------------------------------------------------------- timestamps


def test_window_and_forecast_timestamps_follow_each_window():
    frame = make_frame()
    dm = make_module(frame)
    dates = frame["date"].to_numpy()
    for split in ("train", "val", "test"):
        start, _ = dm.borders[split]
        x_dates, y_dates = dm.window_timestamps(split)
        forecast = dm.forecast_timestamps(split)
        count = dm.split_sizes[split]
        assert x_dates.shape == (count, 12) and y_dates.shape == (count, 10) and forecast.shape == (count, 4)
        for i in (0, count // 2, count - 1):
            row = start + i
            np.testing.assert_array_equal(x_dates[i], dates[row : row + 12])
            np.testing.assert_array_equal(y_dates[i], dates[row + 6 : row + 16])
            np.testing.assert_array_equal(forecast[i], dates[row + 12 : row + 16])
    test_start = dm.borders["test"][0]
    assert forecast[0, 0] == dates[test_start + 12]  # the first row the test split owns
    np.testing.assert_array_equal(dm.forecast_timestamps("predict"), forecast)
    every = dm.window_timestamps("test")
    for picked in (count // 2, -1, [count - 1, 0], slice(1, 3)):  # a predict batch's windows, a plot's one
        for some, whole in zip(dm.window_timestamps("test", windows=picked), every):
            np.testing.assert_array_equal(some, np.atleast_2d(whole[picked]))
        np.testing.assert_array_equal(dm.forecast_timestamps("test", windows=picked), np.atleast_2d(forecast[picked]))


def test_time_zone_aware_series_give_wall_clock_timestamps():
    frame = make_frame().assign(date=lambda f: f["date"].dt.tz_localize("America/New_York"))
    dm = make_module(frame)
    start = dm.borders["test"][0]
    assert dm.forecast_timestamps("test")[0, 0] == frame["date"].iloc[start + 12].tz_localize(None).to_datetime64()
    assert dm.future_batch().index.tz is not None


def test_describe_splits_names_rows_windows_and_dates():
    frame = make_frame()
    dm = make_module(frame)
    text = describe_splits(dm)
    for split in ("train", "val", "test"):
        start, end = dm.borders[split]
        assert split in text and f"{start}-{end - 1}" in text and str(dm.split_sizes[split]) in text
    assert str(frame["date"].iloc[0]) in text and "ratio" in text and "freq h" in text


# --------------------------------------------------------------------- future


@pytest.mark.parametrize(("freq", "encoding"), [("h", "timeF"), ("15min", "fixed"), ("W-TUE", "timeF"), ("MS", "learned")])
def test_future_batch_scales_the_last_rows_and_continues_the_calendar(freq, encoding):
    frame = make_frame(freq=freq, start="2001-01-02")
    dm = make_module(frame, time_encoding=encoding, features="MS")
    future = dm.future_batch()
    batch, index = future.batch, future.index
    raw = frame[dm.input_columns].to_numpy()
    np.testing.assert_allclose(batch["x"][0].numpy(), dm.fitted.scaler.transform(raw[-12:]), rtol=1e-5, atol=1e-6)
    expected_index = pd.date_range(frame["date"].iloc[-1], periods=5, freq=freq)[1:]
    np.testing.assert_array_equal(index.to_numpy(), expected_index.to_numpy())
    y_dates = pd.DatetimeIndex(frame["date"].iloc[-6:]).append(expected_index)
    np.testing.assert_array_equal(batch["y_mark"][0].numpy(), time_features(y_dates, freq, encoding))
    np.testing.assert_array_equal(batch["x_mark"][0].numpy(), time_features(pd.DatetimeIndex(frame["date"].iloc[-12:]), freq, encoding))
    assert batch["x"].shape == (1, 12, 3) and batch["y"].shape == (1, 10, 3)
    assert batch["y_mark"].shape == (1, 10, dm.n_time_features)
    torch.testing.assert_close(batch["y"][0, :6], batch["x"][0, -6:])
    assert torch.isnan(batch["y"][0, 6:]).all()


def test_future_batch_of_another_frame_uses_the_fitted_scaler():
    frame = make_frame()
    dm = make_module(frame)
    later = make_frame(n=250, seed=5)
    future = dm.future_batch(later)
    raw = later[dm.input_columns].to_numpy()
    np.testing.assert_allclose(future.batch["x"][0].numpy(), dm.fitted.scaler.transform(raw[-12:]),
                               rtol=1e-5, atol=1e-6)
    assert future.index[0] == later["date"].iloc[-1] + pd.Timedelta(hours=1)
    # the fitted variables are found by name: other columns (text and dates too, which refused the frame as not
    # numeric) and another column order read the same
    columns = [name for name in later.columns if name != "date"]
    for other in (later.assign(extra=1.0), later.assign(note="text", when=later["date"]),
                  later[["date", *reversed(columns)]]):
        torch.testing.assert_close(dm.future_batch(other).batch, future.batch, equal_nan=True)
    with pytest.raises(UnknownColumnError, match=rf"has no column\(s\) \[{columns[0]!r}\]"):
        dm.future_batch(later.drop(columns=columns[0]))
    with pytest.raises(SeriesTooShortError, match="seq_len=12"):
        dm.future_batch(later.iloc[:5])


# ------------------------------------------------------------- data sources


def test_csv_path_and_dataframe_give_the_same_windows(tmp_path):
    frame = make_frame()
    path = tmp_path / "my_series.csv"
    frame.to_csv(path, index=False)
    from_csv = make_module(path)
    from_frame = make_module(frame)
    assert from_csv.dataset_name == "my_series" and from_csv.source == str(path)
    assert from_frame.source == "<DataFrame>"
    torch.testing.assert_close(from_csv.test_dataset[-1]["x"], from_frame.test_dataset[-1]["x"])


def test_a_whole_registered_frame_gets_its_protocol_a_cut_one_does_not(caplog):
    info = datasets.get("ETTh1")
    frame = make_frame(n=info.n_rows, columns=("HUFL", "OT"))
    frame.attrs[datasets.DATASET_ATTR] = "ETTh1"
    dm = WindowDataModule(frame, 96, 48, 24)
    assert dm.split_protocol == "ett_hour" and dm.split_sizes == {"train": 8521, "val": 2857, "test": 2857}
    assert dm.dataset_name == "ETTh1"
    cut = frame.iloc[:1000]
    with caplog.at_level(logging.INFO, logger="forecast.data.datamodule"):
        assert WindowDataModule(cut, 96, 48, 24).split_protocol == "ratio"
    assert "plain table" in caplog.text
    assert WindowDataModule(frame, 96, 48, 24, split="ratio").split_protocol == "ratio"


def test_a_csv_named_like_a_registered_file_but_different_is_plain(tmp_path):
    path = tmp_path / "ETTh1.csv"
    make_frame(n=500).to_csv(path, index=False)
    dm = make_module(path)
    assert dm.split_protocol == "ratio" and dm.dataset_info is None


def test_user_split_and_too_short_split_errors():
    dm = make_module(split=(100, 150, 200))
    assert dm.borders == {"train": (0, 100), "val": (88, 150), "test": (138, 200)}
    with pytest.raises(SeriesTooShortError, match="the val split has 15 rows"):
        make_module(split=(180, 183, 200)).setup()
    # Each named as it was asked for (the protocol was called 'rows', the kind of split it resolves to).
    with pytest.raises(SeriesTooShortError, match=r"split 'ett_hour' ends its test block at row 14400 but the series "
                                                  r"has 200 rows\. Fix: .*the full file it was drawn for"):
        make_module(split="ett_hour").setup()
    with pytest.raises(SeriesTooShortError, match=r"the row split \(100, 150, 250\) ends its test block at row 250 "
                                                  r"but the series has 200 rows\. Fix: .*row ends or dates within"):
        make_module(split=[100, 150, 250]).setup()


def test_validation_options_reach_the_series():
    frame = make_frame()
    frame.loc[50, "a"] = np.nan
    with pytest.raises(DataError, match="fill_nan"):
        make_module(frame).setup()
    assert torch.isfinite(stack(make_module(frame, fill_nan="interpolate").train_dataloader())["x"]).all()
    gappy = frame.drop(index=[30]).reset_index(drop=True)
    assert make_module(gappy, allow_irregular=True, fill_nan="ffill").freq == "h"
    assert make_module(frame.drop(columns=["c"]), fill_nan="ffill", columns=["OT"]).input_columns == ["OT"]


@pytest.mark.parametrize("features", ["S", "MS"])
def test_a_registered_dataset_brings_its_own_target(features):
    """ETTh1's target is OT although its last column is OT only by the file's order: moved, it stays OT."""
    frame = datasets.load("ETTh1")
    moved = frame[["date", "OT", *[c for c in frame.columns if c not in ("date", "OT")]]]
    moved.attrs.update(frame.attrs)
    dm = WindowDataModule(moved, 96, 48, 24, features=features)
    assert dm.output_columns == ["OT"] and dm.split_protocol == "ett_hour"


def test_a_file_named_like_a_benchmark_but_different_says_so(tmp_path, caplog):
    path = tmp_path / "ETTh1.csv"
    make_frame().to_csv(path, index=False)
    with caplog.at_level(logging.WARNING, logger="forecast.data.datamodule"):
        dm = make_module(path)
        dm.setup()
    assert dm.split_protocol == "ratio"
    assert "named like dataset ETTh1 but its bytes differ" in caplog.text and "split='ett_hour'" in caplog.text


# ------------------------------------------------------------ the fitted state


def test_the_fitted_state_round_trips_and_reads_new_data_as_the_fit_did():
    dm = make_module()
    state = dm.fitted.state_dict()
    restored = FittedState.from_state_dict(state)
    assert restored.state_dict() == state and dm.state_dict() == state
    later = make_frame(n=250, seed=5)
    for key, value in restored.future_batch(later).batch.items():
        torch.testing.assert_close(value, dm.future_batch(later).batch[key], equal_nan=True)
    values = np.random.default_rng(0).normal(size=(3, 4, dm.c_out))
    np.testing.assert_allclose(restored.to_scaled(restored.to_original(values)), values)
    with pytest.raises(ConfigError, match="incomplete"):
        FittedState.from_state_dict({"fitted": state["fitted"]})


def test_a_given_fitted_state_scales_other_data_without_refitting():
    dm = make_module()
    other = make_frame(seed=3)
    given = make_module(other, fitted=dm.fitted)
    assert given.fitted is dm.fitted and given.fitted.scaler is dm.fitted.scaler
    raw = other[dm.input_columns].to_numpy()
    start = given.borders["test"][0]
    np.testing.assert_allclose(given.test_dataset[0]["x"].numpy(), dm.fitted.scaler.transform(raw[start:start + 12]),
                               rtol=1e-5, atol=1e-6)
    assert not np.allclose(make_module(other).fitted.scaler.mean_, dm.fitted.scaler.mean_)  # a refit would differ
    with pytest.raises(UnknownColumnError, match=r"has no column\(s\) \['c'\]"):
        make_module(other.rename(columns={"c": "d"}), fitted=dm.fitted).setup()
    reordered = make_module(other[other.columns[::-1]], fitted=dm.fitted)
    assert reordered.input_columns == dm.input_columns
    torch.testing.assert_close(reordered.test_dataset[0], given.test_dataset[0])
    with pytest.raises(ConfigError, match="seq_len, label_len, pred_len"):
        make_module(other, fitted=dm.fitted, pred_len=5).setup()
    assert make_module(other, fitted=dm.fitted).with_options(test_split="val").fitted is dm.fitted


@pytest.mark.parametrize("reordered", [False, True], ids=["fitted", "given in another column order"])
def test_the_truth_is_the_observed_outputs_and_nan_where_fill_nan_filled(reordered):
    """Each split's truth rows: the output columns in original units in model order, NaN on each cell fill_nan made
    up and only there, also for data whose columns come in another order than the fit's."""
    gappy = make_frame()
    gappy.loc[[150, 151], "a"] = np.nan  # val rows
    gappy.loc[[170, 171, 172], "c"] = np.nan  # test rows
    gappy.loc[185, "OT"] = np.nan
    dm = make_module(gappy, fill_nan="ffill")
    if reordered:
        dm = make_module(gappy[gappy.columns[::-1]], fill_nan="ffill", fitted=dm.fitted)
    assert dm.output_columns == ["a", "c", "OT"]
    truth = gappy[dm.output_columns].to_numpy()  # [T, C_out], NaN where filled
    for split in ("train", "val", "test"):
        start, end = dm.borders[split]
        ds = dm.dataset(split)
        np.testing.assert_array_equal(ds.truth.numpy(), truth[start:end])
        for index in range(len(ds)):
            first = ds.window_start(index) + 12
            np.testing.assert_array_equal(ds[index]["truth"].numpy(), truth[start + first:start + first + 4])
    assert np.isfinite(dm.test_dataset.values.numpy()).all()  # the inputs are filled
    assert np.isnan(dm.test_dataset.truth.numpy()).sum() == 6  # val's 2 in its lookback rows, and its own 4


@pytest.mark.parametrize("features", ["MS", "S"])
def test_the_truth_is_the_target_alone_in_original_units_when_it_is_the_only_output(features):
    frame = make_frame()
    dm = make_module(frame, features=features)
    assert dm.output_columns == ["OT"] and dm.c_out == 1
    for split in ("train", "val", "test"):
        start, end = dm.borders[split]
        np.testing.assert_array_equal(dm.dataset(split).truth.numpy(), frame[["OT"]].to_numpy()[start:end])


def test_an_eval_split_with_as_many_windows_as_processes_gives_each_process_one():
    from forecast.data.sampling import eval_sampler

    shards = [list(eval_sampler(range(3), 3, rank, split="test")) for rank in range(3)]
    assert shards == [[0], [1], [2]]


def test_checkpoints_hold_the_fitted_state_and_refuse_to_resume_on_other_data(tmp_path):
    from forecast.models import DataSpec, build_model
    from forecast.module import ForecastModule

    dm = make_module()
    module = ForecastModule(build_model("dlinear", DataSpec.from_fitted(dm.fitted)), fitted=dm.fitted)
    trainer = L.Trainer(max_steps=1, logger=False, enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=tmp_path, limit_val_batches=0)
    with lightning_warnings(num_workers=0):
        trainer.fit(module, datamodule=dm)
    path = tmp_path / "one_step.ckpt"
    trainer.save_checkpoint(path)
    checkpoint = torch.load(path, weights_only=True)
    assert checkpoint["WindowDataModule"] == dm.fitted.state_dict()
    make_module().load_state_dict(checkpoint["WindowDataModule"])  # the same data resumes
    with pytest.raises(DataError, match="fitted on other data"):
        make_module(make_frame(seed=3)).load_state_dict(checkpoint["WindowDataModule"])
