"""Seasonal naive: the point floor repeats the last season, the sampler is a bootstrapped seasonal random walk."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from forecast.data import WindowDataModule
from forecast.data.timefeatures import seasonal_period
from forecast.errors import ConfigError
from forecast.metrics import ProbabilisticAccumulator, coverage_name
from forecast.models import DataSpec, build_model


def spec(seq_len: int = 48, pred_len: int = 30, c_in: int = 3, c_out: int = 2) -> DataSpec:
    return DataSpec(seq_len=seq_len, label_len=12, pred_len=pred_len, c_in=c_in, c_out=c_out, n_time_features=4)


def marks(model, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x_mark, y_mark)`` of windows ``x``: the baseline reads no calendar, but checks the batch's shapes."""
    s = model.spec
    return (torch.zeros(x.shape[0], s.seq_len, s.n_time_features),
            torch.zeros(x.shape[0], s.label_len + s.pred_len, s.n_time_features))


def test_point_forecast_is_the_value_one_or_more_seasons_back():
    s, m = spec(), 12
    model = build_model("seasonal_naive", s, season_length=m)
    x = torch.randn(4, s.seq_len, s.c_in, generator=torch.Generator().manual_seed(0))
    out = model(x, *marks(model, x))
    length = s.seq_len
    for h in range(1, s.pred_len + 1):  # y[T + h] = y[T + h - m * ceil(h / m)], T the last observed index
        source = length - 1 + h - m * -(-h // m)
        torch.testing.assert_close(out[:, h - 1], x[:, source, -s.c_out:], rtol=0, atol=0)


def test_samples_add_bootstrapped_seasonal_differences_season_after_season():
    s, m = spec(seq_len=20, pred_len=10, c_in=1, c_out=1), 4
    model = build_model("seasonal_naive", s, season_length=m)
    x = torch.arange(20.0).pow(2).view(1, 20, 1)  # distinct seasonal differences: 8t - 16 for t = 4..19
    paths = model.sample(x, *marks(model, x), 300, torch.Generator().manual_seed(1))  # [S, 1, P, 1]
    raw = x[0, m:, 0] - x[0, :-m, 0]
    differences = set((raw - raw.mean()).tolist())  # centred: 8t - 16 less their mean, 8 * 11.5 - 16
    first = paths[:, 0, :m, 0] - x[0, -m:, 0]  # one innovation per step of the first season
    assert set(first.flatten().tolist()) <= differences
    second = paths[:, 0, m : 2 * m, 0] - paths[:, 0, :m, 0]  # the next season adds a fresh innovation
    assert set(second.flatten().tolist()) <= differences
    assert set(first.flatten().tolist()) == differences  # every difference is drawn, the first and last too
    later = paths[:, 0, :, 0].var(dim=0)
    assert later[2 * m :].mean() > later[:m].mean()  # uncertainty grows with the seasons ahead


def test_samples_of_a_trending_window_spread_around_the_point_forecast():
    """A window that trends has seasonal differences of one sign; drawn as they are, every path would carry the
    slope and the point forecast (which has none) would fall outside its own 10-90% band."""
    s, m = spec(seq_len=96, pred_len=48, c_in=1, c_out=1), 12
    model = build_model("seasonal_naive", s, season_length=m)
    t = torch.arange(96.0)
    noise = 0.1 * torch.randn(96, generator=torch.Generator().manual_seed(0))
    x = (0.5 * t + torch.sin(2 * torch.pi * t / m) + noise).view(1, 96, 1)  # each season 6 above the last
    paths = model.sample(x, *marks(model, x), 2000, torch.Generator().manual_seed(2))  # [S, 1, P, 1]
    point = model(x, *marks(model, x))  # [1, P, 1]
    low, high = torch.quantile(paths, torch.tensor([0.1, 0.9]), dim=0)  # [2, 1, P, 1] -> [1, P, 1] each
    assert bool(((low <= point) & (point <= high)).all())
    torch.testing.assert_close(paths.mean(dim=0), point, rtol=0, atol=0.05)


def test_samples_are_reproducible_with_a_generator():
    s = spec()
    model = build_model("seasonal_naive", s, season_length=24)
    x = torch.randn(2, s.seq_len, s.c_in)
    a = model.sample(x, *marks(model, x), 7, torch.Generator().manual_seed(3))
    b = model.sample(x, *marks(model, x), 7, torch.Generator().manual_seed(3))
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_intervals_cover_nominally_on_a_seasonal_random_walk():
    rng = np.random.default_rng(0)
    m, seq_len, pred_len, windows = 6, 240, 6, 400
    season = rng.normal(size=m)
    steps = seq_len + pred_len
    noise = rng.standard_t(df=5, size=(windows, steps))  # heavy-tailed: a Gaussian interval would miss
    series = np.tile(season, steps // m + 1)[:steps] + noise  # y[t] = s[t mod m] + e[t]: y[t] - y[t-m] = e[t] - e[t-m]
    x = torch.tensor(series[:, :seq_len, None])
    true = torch.tensor(series[:, seq_len:, None])
    model = build_model("seasonal_naive", spec(seq_len=seq_len, pred_len=pred_len, c_in=1, c_out=1), season_length=m)
    samples = model.sample(x, *marks(model, x), 400, torch.Generator().manual_seed(0))
    accumulator = ProbabilisticAccumulator(rhos=(0.5,), levels=(0.8,))
    accumulator.update(samples, true)
    coverage = accumulator.summary().overall[coverage_name(0.8)]
    assert abs(coverage - 0.8) < 0.04


def test_invalid_settings_say_what_to_change():
    with pytest.raises(ConfigError, match="season_length must be None or an integer >= 1"):
        build_model("seasonal_naive", spec(), season_length=0)
    with pytest.raises(ConfigError, match="seq_len >= season_length"):
        build_model("seasonal_naive", spec(seq_len=23), season_length=24)
    for seq_len in (24, 25):  # no seasonal difference, or one that centring makes 0 (zero-width bands): points only
        one_season = build_model("seasonal_naive", spec(seq_len=seq_len), season_length=24)
        assert not one_season.probabilistic
        with pytest.raises(ConfigError, match=rf"has {seq_len - 24} at season_length=24.*seq_len >= season_length \+ 2"):
            window = torch.zeros(1, seq_len, one_season.spec.c_in)
            one_season.sample(window, *marks(one_season, window), n_samples=2)
    assert build_model("seasonal_naive", spec(seq_len=26), season_length=24).probabilistic
    with pytest.raises(ConfigError, match="n_samples"):
        twelve, window = build_model("seasonal_naive", spec(), season_length=12), torch.zeros(1, 48, 3)
        twelve.sample(window, *marks(twelve, window), 0)


@pytest.mark.parametrize(("freq", "period"), [("h", 24), ("2h", 12), ("15min", 96), ("10min", 144), ("D", 7),
                                              ("B", 5), ("W-SUN", 52), ("MS", 12), ("QS", 4),
                                              ("SMS", 24), ("SME", 24)])  # semi-months got a week of days (7)
def test_the_natural_cycle_of_a_frequency(freq, period):
    assert seasonal_period(freq) == period


@pytest.mark.parametrize("freq", ["YS", "7h", "2D", "2SMS"])
def test_a_frequency_without_a_cycle_asks_for_season_length(freq):
    with pytest.raises(ConfigError, match="season_length"):
        seasonal_period(freq)


def test_the_default_season_is_the_datas_cycle_read_off_the_data():
    """Daily data repeats last week (not 24 days back), and data without a cycle is refused with the fix."""
    days = 120
    frame = pd.DataFrame({"date": pd.date_range("2023-01-02", periods=days, freq="D"),
                          "y": np.arange(days) % 7 + np.arange(days) * 0.01})
    dm = WindowDataModule(frame, seq_len=28, label_len=7, pred_len=7, features="S")
    dm.setup()
    model = build_model("seasonal_naive", DataSpec.from_fitted(dm.fitted))
    assert model.season_length == 7
    batch = next(iter(dm.test_dataloader()))
    torch.testing.assert_close(model(batch["x"], batch["x_mark"], batch["y_mark"]), batch["x"][:, -7:])
    with pytest.raises(ConfigError, match="season_length"):
        build_model("seasonal_naive", spec())  # built without data: no cycle known
    assert build_model("seasonal_naive", spec(), season_length=12).season_length == 12
