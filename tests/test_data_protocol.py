"""The benchmark protocol on the real files: window counts, exact window contents at
every split edge, train-only scaler statistics, and every test window scored once."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.preprocessing import StandardScaler

from forecast import datasets
from forecast.data import WindowDataModule
from forecast.errors import DatasetUnavailableError, DuplicateTimestampError

SEQ_LEN, LABEL_LEN = 96, 48


def ratio_owned_ends(n_rows: int) -> tuple[int, int, int]:
    n_train, n_test = int(n_rows * 0.7), int(n_rows * 0.2)
    return n_train, n_rows - n_test, n_rows


# name, pred_len, expected owned-row ends, expected window counts (train, val, test)
PROTOCOL = [
    ("ETTh1", 24, (8640, 11520, 14400), (8521, 2857, 2857)),
    ("ETTm1", 24, (34560, 46080, 57600), (34441, 11497, 11497)),
    ("exchange_rate", 24, ratio_owned_ends(7588), (5192, 737, 1494)),
    ("weather", 96, ratio_owned_ends(52696), (36696, 5175, 10444)),
]


class LocalFrames(dict):
    """The registered frames, loaded on first use without a download.

    ETTh1 ships inside the package, so its tests always run; a dataset with no local copy
    skips its test while the mirror is unset (CI sets it, and then a missing file fails).
    """

    def __missing__(self, name: str) -> pd.DataFrame:
        try:
            self[name] = datasets.load(name, download=False)
        except DatasetUnavailableError:
            if os.environ.get(datasets.DATA_DIR_ENV):
                raise
            pytest.skip(f"{datasets.DATA_DIR_ENV} is unset and {name} has no local copy (CI sets it)")
        return self[name]


@pytest.fixture(scope="module")
def frames() -> LocalFrames:
    return LocalFrames()


@pytest.mark.parametrize(("name", "pred_len", "owned_ends", "counts"), PROTOCOL, ids=[p[0] for p in PROTOCOL])
def test_benchmark_protocol(frames, name, pred_len, owned_ends, counts):
    frame = frames[name]
    dm = WindowDataModule(name, SEQ_LEN, LABEL_LEN, pred_len, features="M", batch_size=100)
    train_end, val_end, test_end = owned_ends
    assert dm.borders == {
        "train": (0, train_end),
        "val": (train_end - SEQ_LEN, val_end),
        "test": (val_end - SEQ_LEN, test_end),
    }
    assert tuple(dm.split_sizes.values()) == counts

    # the scaler: train rows only, population statistics, model order (OT is last in these files)
    columns = [c for c in frame.columns if c != "date"]
    assert dm.input_columns == columns and columns[-1] == "OT"
    raw = frame[columns].to_numpy(dtype=np.float64)  # [T, C]
    np.testing.assert_allclose(dm.fitted.scaler.mean_, raw[:train_end].mean(axis=0), rtol=1e-10)
    np.testing.assert_allclose(dm.fitted.scaler.scale_, raw[:train_end].std(axis=0), rtol=1e-10)
    scaled = StandardScaler().fit(raw[:train_end]).transform(raw).astype(np.float32)  # [T, C]

    # first and last window of every split hold exactly their rows
    dates = frame["date"].to_numpy()
    for split in ("train", "val", "test"):
        start, end = dm.borders[split]
        dataset = dm.dataset(split)
        for i, x_start in ((0, start), (len(dataset) - 1, end - SEQ_LEN - pred_len)):
            item = dataset[i]
            np.testing.assert_array_equal(item["x"].numpy(), scaled[x_start : x_start + SEQ_LEN])
            y_start = x_start + SEQ_LEN - LABEL_LEN
            np.testing.assert_array_equal(item["y"].numpy(), scaled[y_start : x_start + SEQ_LEN + pred_len])
        forecast_dates = dm.forecast_timestamps(split)
        assert forecast_dates[-1, -1] == dates[end - 1]
        if split != "train":
            assert forecast_dates[0, 0] == dates[start + SEQ_LEN]  # first row the split owns
    assert dm.forecast_timestamps("val")[0, 0] == dates[train_end]
    assert dm.forecast_timestamps("test")[0, 0] == dates[val_end]

    # the test loader serves every test window exactly once, in order, none dropped
    assert counts[2] % 100 != 0
    test_start = dm.borders["test"][0]
    first_rows, last_rows, n_served = [], [], 0
    for batch in dm.test_dataloader():
        first_rows.append(batch["x"][:, 0])  # [B, C]
        last_rows.append(batch["y"][:, -1])  # [B, C]
        n_served += len(batch["x"])
    assert n_served == counts[2]
    window_rows = test_start + np.arange(counts[2])
    np.testing.assert_array_equal(torch.cat(first_rows).numpy(), scaled[window_rows])
    np.testing.assert_array_equal(torch.cat(last_rows).numpy(), scaled[window_rows + SEQ_LEN + pred_len - 1])


def test_weather_quirks_are_accepted_only_for_the_registered_file(frames):
    dm = WindowDataModule(frames["weather"], SEQ_LEN, LABEL_LEN, 96)
    assert dm.freq == "10min" and dm.split_protocol == "ratio" and dm.split_sizes["test"] == 10444
    edited = frames["weather"].copy()
    edited.attrs = {}
    with pytest.raises(DuplicateTimestampError, match="2020-05-12 06:00:00.*allow_duplicates=True"):
        WindowDataModule(edited, SEQ_LEN, LABEL_LEN, 96).setup()


@pytest.mark.parametrize("features", ["S", "MS"])
def test_etth1_target_only_outputs_use_the_target_statistics(frames, features):
    frame = frames["ETTh1"]
    dm = WindowDataModule("ETTh1", SEQ_LEN, LABEL_LEN, 24, features=features)
    ot_train = frame["OT"].to_numpy()[:8640]
    assert dm.c_out == 1 and dm.c_in == (1 if features == "S" else 7)
    np.testing.assert_allclose(dm.fitted.output_mean, [ot_train.mean()], rtol=1e-6)
    np.testing.assert_allclose(dm.fitted.output_scale, [ot_train.std()], rtol=1e-6)
    last = dm.test_dataset[-1]
    restored = dm.fitted.to_original(last["y"][-24:, -1:])  # [P, 1]
    np.testing.assert_allclose(restored.numpy()[:, 0], frame["OT"].to_numpy()[14400 - 24 : 14400], rtol=1e-5,
                               atol=1e-5)  # the windows hold float32: a zero comes back as 3e-7


def test_etth1_future_batch_continues_after_the_last_row(frames):
    dm = WindowDataModule("ETTh1", SEQ_LEN, LABEL_LEN, 24)
    future = dm.future_batch()
    last = frames["ETTh1"]["date"].iloc[-1]
    assert future.index[0] == last + pd.Timedelta(hours=1) and len(future.index) == 24
    assert future.batch["y_mark"].shape == (1, LABEL_LEN + 24, 4)
