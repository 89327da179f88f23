"""WindowDataset: the window contract of docs/design.md, by index arithmetic only."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from forecast.data.dataset import ITEM_KEYS, WindowDataset
from forecast.errors import ConfigError


@settings(max_examples=50, deadline=None)
@given(
    n_rows=st.integers(min_value=2, max_value=60),
    n_vars=st.integers(min_value=1, max_value=4),
    n_feats=st.integers(min_value=0, max_value=5),
    seq_len=st.integers(min_value=1, max_value=20),
    label_frac=st.floats(min_value=0, max_value=1),
    pred_len=st.integers(min_value=1, max_value=20),
    target_frac=st.one_of(st.none(), st.floats(min_value=0, max_value=1)),
)
def test_items_are_the_designed_slices(n_rows, n_vars, n_feats, seq_len, label_frac, pred_len, target_frac):
    """``target_len`` (None: the whole horizon) cuts ``y`` to the horizon's first steps, never the marks."""
    label_len = int(label_frac * seq_len)
    target_len = None if target_frac is None else max(1, round(target_frac * pred_len))
    values = np.random.default_rng(0).normal(size=(n_rows, n_vars))  # [T, C]
    marks = np.arange(n_rows * n_feats, dtype=np.float64).reshape(n_rows, n_feats)  # [T, F]
    dataset = WindowDataset(values, marks, seq_len, label_len, pred_len, target_len=target_len)
    assert len(dataset) == max(n_rows - seq_len - pred_len + 1, 0)
    scored = pred_len if target_len is None else target_len
    for i in range(len(dataset)):
        item = dataset[i]
        assert tuple(item) == ITEM_KEYS
        y_rows = slice(i + seq_len - label_len, i + seq_len + pred_len)
        expected = {
            "x": values[i : i + seq_len],
            "y": values[i + seq_len - label_len : i + seq_len + scored],
            "x_mark": marks[i : i + seq_len],
            "y_mark": marks[y_rows],
        }
        for key, array in expected.items():
            assert item[key].dtype == torch.float32
            np.testing.assert_array_equal(item[key].numpy(), array.astype(np.float32))
        assert item["y"].shape == (label_len + scored, n_vars)
    with pytest.raises(IndexError):
        dataset[len(dataset)]


def test_negative_indices_count_from_the_end_and_numpy_integers_work():
    values = np.arange(40, dtype=np.float32).reshape(20, 2)
    dataset = WindowDataset(values, np.zeros((20, 1)), seq_len=5, label_len=2, pred_len=3)
    assert len(dataset) == 13
    torch.testing.assert_close(dataset[-1]["x"], dataset[12]["x"])
    torch.testing.assert_close(dataset[np.int64(4)]["y"], dataset[4]["y"])
    assert dataset.window_start(-1) == 12
    with pytest.raises(IndexError):
        dataset[-14]


def test_the_last_window_ends_on_the_last_row():
    values = np.arange(30, dtype=np.float32)[:, None]  # [T, 1]
    dataset = WindowDataset(values, np.zeros((30, 0)), seq_len=8, label_len=4, pred_len=5)
    assert dataset[-1]["y"][-1, 0].item() == 29.0
    assert dataset[0]["x"][0, 0].item() == 0.0


@pytest.mark.parametrize(
    ("values", "marks", "sizes", "match"),
    [
        (np.zeros(10), np.zeros((10, 1)), (3, 1, 2), "2-D"),
        (np.zeros((10, 2)), np.zeros((9, 1)), (3, 1, 2), "same timestamps"),
        (np.zeros((10, 2)), np.zeros((10, 1)), (3, 4, 2), "label_len <= seq_len"),
        (np.zeros((10, 2)), np.zeros((10, 1)), (0, 0, 2), "seq_len >= 1"),
        (np.zeros((10, 2)), np.zeros((10, 1)), (3, 1, 0), "pred_len >= 1"),
    ],
)
def test_bad_arrays_or_sizes_raise_config_error(values, marks, sizes, match):
    with pytest.raises(ConfigError, match=match):
        WindowDataset(values, marks, *sizes)


@pytest.mark.parametrize("target_len", [0, 3])
def test_a_target_longer_than_the_horizon_or_empty_raises_config_error(target_len):
    with pytest.raises(ConfigError, match="target_len"):
        WindowDataset(np.zeros((10, 2)), np.zeros((10, 1)), 3, 1, 2, target_len=target_len)


def test_windows_at_given_starts_carry_their_series_known_rows_and_static_codes():
    values = np.arange(40, dtype=np.float32).reshape(20, 2)  # two series of 10 rows, back to back
    known = -np.arange(20, dtype=np.float32).reshape(20, 1)
    starts, series = np.array([0, 3, 10, 13]), np.array([0, 0, 1, 1])
    static = np.array([[5, 1], [7, 0]])
    dataset = WindowDataset(values, np.zeros((20, 1)), seq_len=4, label_len=2, pred_len=3, known=known,
                            starts=starts, series=series, static=static)
    assert len(dataset) == 4 and dataset.window_start(-1) == 13
    item = dataset[2]
    np.testing.assert_array_equal(item["x"].numpy(), values[10:14])
    np.testing.assert_array_equal(item["y"].numpy(), values[12:17])
    np.testing.assert_array_equal(item["x_known"].numpy(), known[10:14])
    np.testing.assert_array_equal(item["y_known"].numpy(), known[12:17])
    assert int(item["series"]) == 1 and item["static"].tolist() == [7, 0]
    # A target cut short (the validation prefix's) cuts y and the truth, never the known inputs of the horizon.
    short = WindowDataset(values, np.zeros((20, 1)), seq_len=4, label_len=2, pred_len=3, known=known,
                          starts=starts, series=series, static=static, target_len=1)[2]
    np.testing.assert_array_equal(short["y"].numpy(), values[12:15])
    np.testing.assert_array_equal(short["y_known"].numpy(), known[12:17])
    # The whole lookback as the label (label_len == seq_len) is a window too.
    whole = WindowDataset(values, np.zeros((20, 1)), seq_len=4, label_len=4, pred_len=2)[0]
    np.testing.assert_array_equal(whole["y"].numpy(), values[0:6])
    with pytest.raises(ConfigError, match="starts outside"):
        WindowDataset(values, np.zeros((20, 1)), 4, 2, 3, starts=np.array([14]))
    with pytest.raises(ConfigError, match="series position"):
        WindowDataset(values, np.zeros((20, 1)), 4, 2, 3, starts=np.array([0]), series=np.array([1]))
