"""Reversible instance normalization, channel independence and DLinear: the properties they promise."""

from __future__ import annotations

import unittest.mock

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from forecast.data import WindowDataModule
from forecast.data.fitted import FittedState
from forecast.data.scaling import persistence, persistence_sums
from forecast.errors import ConfigError
from forecast.layers.normalization import ReversibleInstanceNorm
from forecast.models import DataSpec, DLinear, DLinearConfig, build_model
from forecast.models.dlinear import moving_average

LAYOUTS = {"M": (3, 3), "S": (1, 1), "MS": (3, 1)}  # features -> (c_in, c_out)
TINY = {
    "informer": dict(d_model=16, n_heads=2, d_ff=32, dropout=0.0, factor=2),
    "transformer": dict(d_model=16, n_heads=2, d_ff=32, dropout=0.0),
    "logsparse": dict(d_model=16, n_heads=2, d_ff=32, n_layers=2, dropout=0.0),
    "dlinear": dict(kernel_size=5),
}
# Every neural model's variants that change how RevIN is threaded through it.
VARIANTS = [
    ("informer", {}), ("informer", {"channels": "independent"}), ("informer", {"stack": (2, 1), "e_layers": 2}),
    ("transformer", {}), ("transformer", {"channels": "independent"}),
    ("logsparse", {}), ("logsparse", {"channels": "joint"}), ("logsparse", {"head": "gaussian"}),
    ("logsparse", {"decoding": "autoregressive"}),
    ("dlinear", {}), ("dlinear", {"individual": True}),
]


def spec(features: str = "M", seq_len: int = 32, label_len: int = 16, pred_len: int = 8) -> DataSpec:
    c_in, c_out = LAYOUTS[features]
    return DataSpec(seq_len=seq_len, label_len=label_len, pred_len=pred_len, c_in=c_in, c_out=c_out,
                    n_time_features=4)


def batch(s: DataSpec, batch_size: int = 3, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch_size, s.seq_len, s.c_in, generator=g).cumsum(1)  # drifting, like real series
    x_mark = torch.rand(batch_size, s.seq_len, s.n_time_features, generator=g) - 0.5
    y_mark = torch.rand(batch_size, s.label_len + s.pred_len, s.n_time_features, generator=g) - 0.5
    return x, x_mark, y_mark


def model(name: str, s: DataSpec, seed: int = 0, **options) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_model(name, s, **{**TINY[name], **options}).eval()


# ------------------------------------------------------------------------------------ RevIN layer


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), affine=st.booleans(), width=st.integers(1, 3),
       center=st.sampled_from(["mean", "last", "learned", "persistence"]))
def test_denormalize_inverts_normalize_exactly(seed, affine, width, center):
    g = torch.Generator().manual_seed(seed)
    norm = ReversibleInstanceNorm(3, affine=affine, center=center).double()
    if affine:  # a trained affine, not the identity it starts as
        with torch.no_grad():
            norm.weight.copy_(torch.rand(3, generator=g) + 0.5)
            norm.bias.copy_(torch.randn(3, generator=g))
    if norm.center_logit is not None:  # a trained mix, not the point it starts at
        with torch.no_grad():
            norm.center_logit.copy_(torch.randn(3, generator=g) * 0.2)
    x = torch.randn(4, 20, 3, generator=g, dtype=torch.float64) * 50 + 1000
    stats = norm.statistics(x)
    values = x[..., 3 - width:]  # the last `width` variables, as output variables are
    torch.testing.assert_close(norm.denormalize(norm.normalize(values, stats), stats), values)
    normalized = norm.normalize(x, stats)
    if not affine:  # each window and variable is centred at 0 and has (up to eps) unit variance
        weight_on_last = norm.weight_on_last()
        # the location (a point between the mean and the last value) maps to 0
        centred = normalized.mean(1) + weight_on_last * (normalized[:, -1] - normalized.mean(1))
        torch.testing.assert_close(centred, torch.zeros(4, 3, dtype=torch.float64))
        torch.testing.assert_close(normalized.std(1, unbiased=False), torch.ones(4, 3, dtype=torch.float64),
                                   atol=1e-6, rtol=1e-6)


def test_a_constant_window_normalizes_to_zeros_not_nan():
    norm = ReversibleInstanceNorm(2)
    x = torch.full((1, 10, 2), 7.0)
    stats = norm.statistics(x)
    assert torch.equal(norm.normalize(x, stats), torch.zeros_like(x))
    assert torch.equal(norm.denormalize(torch.zeros(1, 4, 2), stats), torch.full((1, 4, 2), 7.0))


def test_a_window_is_scaled_by_its_population_spread_with_epsilon():
    """RevIN's spread is the window's population standard deviation (divisor L, as the paper's), with epsilon
    inside the root: a mutation to the unbiased (L - 1) variance survived every RevIN test (helper 76)."""
    norm = ReversibleInstanceNorm(2, eps=1e-5)
    x = torch.tensor([[[1.0, -2.0], [3.0, 0.0], [8.0, 4.0], [0.0, 2.0]]], dtype=torch.float64)  # [1, L=4, C=2]
    stats = norm.statistics(x)
    centred = x - x.mean(dim=1, keepdim=True)
    expected = torch.sqrt((centred**2).sum(dim=1, keepdim=True) / 4 + 1e-5)
    torch.testing.assert_close(stats.std, expected)


def test_the_gaussian_scale_maps_with_the_absolute_slope():
    norm = ReversibleInstanceNorm(2, affine=True)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([-2.0, 0.5]))
    x = torch.randn(1, 10, 2) * torch.tensor([3.0, 10.0])
    stats = norm.statistics(x)
    scale = norm.denormalize_scale(torch.ones(1, 4, 2), stats)
    expected = stats.std / torch.tensor([2.0, 0.5])  # |slope|, so a negative weight keeps scales positive
    torch.testing.assert_close(scale, expected.expand(1, 4, 2), rtol=1e-5, atol=1e-6)
    with torch.no_grad():  # the share of the correction kept moves the mean only: the spread is its own
        norm.correction_weight.fill_(0.5)
    torch.testing.assert_close(norm.denormalize_scale(torch.ones(1, 4, 2), stats), scale, rtol=0, atol=0)


def test_revin_options_are_checked():
    with pytest.raises(ConfigError, match="revin=True"):
        build_model("informer", spec(), revin_affine=True)
    with pytest.raises(ConfigError, match="revin"):
        build_model("dlinear", spec(), revin="yes")


# ------------------------------------------------------------------------------- RevIN in models


@pytest.mark.parametrize("name, options", VARIANTS, ids=lambda v: str(v))
@pytest.mark.parametrize("features", ["M", "MS"])
@pytest.mark.parametrize("affine, center", [(False, "mean"), (True, "mean"), (False, "last"), (False, "learned"),
                                            (False, "persistence")])
def test_revin_forecasts_follow_a_shifted_and_scaled_window(name, options, features, affine, center):
    """f(a * x + b) == a * f(x) + b per variable: the forecast has no memory of the window's level or scale."""
    s = spec(features)
    net = model(name, s, revin=True, revin_affine=affine, revin_center=center, **options)
    x, x_mark, y_mark = batch(s)
    shift = torch.tensor([5.0, -300.0, 40.0])[: s.c_in]
    factor = torch.tensor([0.5, 20.0, 3.0])[: s.c_in]
    with torch.no_grad():
        out = net(x, x_mark, y_mark)
        moved = net(x * factor + shift, x_mark, y_mark)
    expected = out * factor[s.c_in - s.c_out:] + shift[s.c_in - s.c_out:]
    torch.testing.assert_close(moved, expected, rtol=1e-4, atol=1e-3 * float(factor.max()))


def test_last_value_centring_makes_a_zero_output_the_naive_forecast():
    s = spec("M")
    net = model("dlinear", s, revin=True, revin_center="last")
    with torch.no_grad():
        for parameter in net.parameters():
            parameter.zero_()  # the network outputs zeros in the normalized space
    x, x_mark, y_mark = batch(s)
    torch.testing.assert_close(net(x, x_mark, y_mark), x[:, -1:].expand(-1, s.pred_len, -1))
    with pytest.raises(ConfigError, match="revin_center"):
        model("informer", s, revin=True, revin_center="median")


def test_the_learned_centre_starts_halfway_and_learns_towards_the_better_centre():
    """On a random walk the last value is the better centre: training moves the weight towards it."""
    s = spec("S")
    net = model("dlinear", s, revin=True, revin_center="learned").train()
    x, x_mark, y_mark = batch(s, batch_size=64)
    norm = net.revin
    torch.testing.assert_close(norm.statistics(x).location, (x.mean(1, keepdim=True) + x[:, -1:]) / 2)
    with torch.no_grad():
        for parameter in net.parameters():
            parameter.zero_()  # a network that outputs zeros forecasts the location
    target = x[:, -1:].expand(-1, s.pred_len, -1)  # a random walk's best forecast: its last value
    # Adam at the improved recipe's learning rate: a few hundred steps reach the last value
    optimizer = torch.optim.Adam([norm.center_logit], lr=1e-3)
    for _ in range(300):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(net(x, x_mark, y_mark), target).backward()
        optimizer.step()
    assert norm.weight_on_last().item() > 0.9  # without CENTER_LOGIT_SCALE it would stay below 0.6


def test_the_persistence_statistic_matches_its_definition_and_tells_a_walk_from_noise():
    rng = np.random.default_rng(0)
    values = rng.standard_normal((60, 2)).cumsum(0)
    seq_len, pred_len = 8, 3
    numerator = denominator = np.zeros(2)
    for start in range(60 - seq_len - pred_len + 1):  # the definition, window by window and step by step
        window, future = values[start:start + seq_len], values[start + seq_len:start + seq_len + pred_len]
        offset = window[-1] - window.mean(0)
        numerator = numerator + (offset * (future - window.mean(0))).sum(0)
        denominator = denominator + pred_len * offset**2
    np.testing.assert_allclose(persistence(values, seq_len, pred_len), np.clip(numerator / denominator, 0, 1))
    # the sums themselves, before clipping hides a weight past 1 (the mean over P: both divided by pred_len)
    np.testing.assert_allclose(persistence_sums(values, seq_len, pred_len), (numerator / pred_len,
                                                                           denominator / pred_len))
    # ... in chunks of windows, as a wide table's are summed (a chunk of 7 windows here, the last one short)
    with unittest.mock.patch("forecast.data.scaling._CHUNK_ELEMENTS", 14):
        np.testing.assert_allclose(persistence_sums(values, seq_len, pred_len), (numerator / pred_len,
                                                                               denominator / pred_len))
    walk = rng.standard_normal((5000, 1)).cumsum(0)
    noise = 3.0 + rng.standard_normal((5000, 1))
    assert persistence(walk, 96, 24)[0] > 0.9 and persistence(noise, 96, 24)[0] < 0.05


def test_the_persistence_centre_starts_at_the_training_windows_weights():
    norm = ReversibleInstanceNorm(3, center="persistence", start=[0.0, 0.3, 1.0])
    torch.testing.assert_close(norm.weight_on_last(), torch.tensor([0.02, 0.3, 0.98]))  # kept inside (0, 1)
    assert torch.equal(ReversibleInstanceNorm(2, center="persistence").weight_on_last(), torch.full((2,), 0.5))
    rng = np.random.default_rng(1)
    ar = np.zeros(400)  # AR(1) at 0.97: a weight inside (0, 1), where clipping would hide a change
    for t in range(1, 400):
        ar[t] = 0.97 * ar[t - 1] + rng.standard_normal()
    ar[280:] = rng.standard_normal(120).cumsum() * 5  # after the training rows, another process
    frame = pd.DataFrame({"date": pd.date_range("2024-01-01", periods=400, freq="h"), "ar": ar,
                          "noise": np.random.default_rng(2).standard_normal(400)})
    dm = WindowDataModule(frame, seq_len=32, label_len=16, pred_len=8, split=(0.7, 0.1, 0.2))
    dm.setup()
    train_rows = frame[["ar", "noise"]].to_numpy()[:280]
    assert 0 < dm.fitted.persistence[0] < 1
    assert dm.fitted.persistence == pytest.approx(persistence(train_rows, 32, 8))  # fitted on the training rows only
    assert dm.fitted.persistence[0] != pytest.approx(persistence(frame[["ar", "noise"]].to_numpy(), 32, 8)[0])
    assert FittedState.from_state_dict(dm.fitted.state_dict()).persistence == dm.fitted.persistence
    net = model("informer", DataSpec.from_fitted(dm.fitted), revin=True, revin_center="persistence",
                channels="independent")
    torch.testing.assert_close(net.revin.weight_on_last(),
                               torch.tensor(dm.fitted.persistence, dtype=torch.float32).clamp(0.02, 0.98))


def test_without_revin_a_model_is_not_invariant():
    s = spec()
    net = model("informer", s)
    x, x_mark, y_mark = batch(s)
    with torch.no_grad():
        assert not torch.allclose(net(x + 100.0, x_mark, y_mark), net(x, x_mark, y_mark) + 100.0, atol=1.0)


@pytest.mark.parametrize("decoding", ["one_shot", "autoregressive"])
def test_logsparse_revin_maps_gaussian_quantiles_and_samples_back(decoding):
    s = spec("M")
    net = model("logsparse", s, revin=True, head="gaussian", decoding=decoding)
    x, x_mark, y_mark = batch(s)
    shift, factor = 250.0, 8.0
    with torch.no_grad():
        base = net.quantiles(x, x_mark, y_mark, (0.1, 0.9), n_samples=64, generator=torch.Generator().manual_seed(1))
        moved = net.quantiles(x * factor + shift, x_mark, y_mark, (0.1, 0.9), n_samples=64,
                              generator=torch.Generator().manual_seed(1))
    for level in (0.1, 0.9):
        torch.testing.assert_close(moved[level], base[level] * factor + shift, rtol=1e-4, atol=1e-2)
    assert (moved[0.9] > moved[0.1]).all()


def test_logsparse_revin_keeps_the_horizon_causal():
    """Teacher-forced step j of the horizon never reads horizon steps >= j, normalization included."""
    s = spec("M")
    net = model("logsparse", s, revin=True, decoding="autoregressive")
    x, x_mark, y_mark = batch(s)
    future = torch.randn(3, s.pred_len, s.c_in)
    changed = future.clone()
    changed[:, 5:] += 100.0  # horizon steps 5.. change
    with torch.no_grad():
        before = net.step_outputs(x, x_mark, y_mark, future=future).mean
        after = net.step_outputs(x, x_mark, y_mark, future=changed).mean
    horizon_start = s.seq_len
    torch.testing.assert_close(after[:, : horizon_start + 6], before[:, : horizon_start + 6])  # tokens up to step 5
    assert not torch.allclose(after[:, horizon_start + 6:], before[:, horizon_start + 6:])


def test_logsparse_revin_trains_autoregressive_mode_on_the_horizon_only():
    """The window's own steps are normalized with statistics that include them; the loss leaves them out."""
    s = spec("S")
    net = model("logsparse", s, revin=True, decoding="autoregressive")
    x, x_mark, y_mark = batch(s)
    y = torch.cat([x[:, -s.label_len:], torch.randn(3, s.pred_len, 1)], dim=1)
    loss = net.loss({"x": x, "y": y, "x_mark": x_mark, "y_mark": y_mark})
    prediction = net.step_outputs(x, x_mark, y_mark, future=y[:, -s.pred_len:]).mean
    torch.testing.assert_close(loss, torch.nn.functional.mse_loss(prediction[:, s.seq_len:], y[:, -s.pred_len:]))


# ------------------------------------------------------------------------------ channel independence


@pytest.mark.parametrize("name, extra", [("informer", {}), ("informer", {"revin": True}),
                                         ("informer", {"distil": False}), ("transformer", {}),
                                         ("transformer", {"revin": True}),
                                         ("informer", {"revin": True, "linear_skip": True})], ids=str)
def test_independent_channels_equal_running_each_variable_alone(name, extra):
    s = spec("M")
    net = model(name, s, channels="independent", **extra)
    net = with_random_skip(net) if extra.get("linear_skip") else net
    alone = build_model(name, spec("S"), **{**TINY[name], "channels": "independent", **extra}).eval()
    alone.load_state_dict(net.state_dict())  # the same shared weights
    x, x_mark, y_mark = batch(s)
    with torch.no_grad():
        together = net(x, x_mark, y_mark)
        one_by_one = torch.cat([alone(x[..., [c]], x_mark, y_mark) for c in range(s.c_in)], dim=-1)
    torch.testing.assert_close(together, one_by_one, rtol=1e-5, atol=1e-6)


def test_independent_channels_read_ms_covariates_and_forecast_the_target():
    s = spec("MS")
    net = model("informer", s, channels="independent")
    x, x_mark, y_mark = batch(s)
    changed = x.clone()
    changed[..., 0] += 1.0  # a covariate
    with torch.no_grad():
        assert net(x, x_mark, y_mark).shape == (3, s.pred_len, 1)
        assert not torch.allclose(net(changed, x_mark, y_mark), net(x, x_mark, y_mark))


def test_independent_channels_are_batch_invariant():
    s = spec("M")
    net = model("informer", s, channels="independent", revin=True)
    x, x_mark, y_mark = batch(s, batch_size=4)
    with torch.no_grad():
        whole = net(x, x_mark, y_mark)
        parts = torch.cat([net(x[i:i + 1], x_mark[i:i + 1], y_mark[i:i + 1]) for i in range(4)])
    torch.testing.assert_close(whole, parts, rtol=1e-5, atol=1e-6)


def test_channels_option_is_checked():
    with pytest.raises(ConfigError, match="channels"):
        build_model("informer", spec(), channels="mixed")


# ------------------------------------------------------------------------------------ linear skip

SKIP_VARIANTS = [("informer", {}), ("informer", {"channels": "independent"}), ("transformer", {}),
                 ("logsparse", {}), ("logsparse", {"channels": "joint"}), ("logsparse", {"head": "gaussian"})]


def with_random_skip(net: torch.nn.Module, seed: int = 1) -> torch.nn.Module:
    """The skip starts at zero; tests that it is threaded through need one that is not."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        net.skip.linear.weight.copy_(torch.randn(net.skip.linear.weight.shape, generator=g) * 0.2)
        net.skip.linear.bias.copy_(torch.randn(net.skip.linear.bias.shape, generator=g))
    return net


@pytest.mark.parametrize("name, options", SKIP_VARIANTS, ids=str)
def test_an_untrained_linear_skip_leaves_the_forecast_unchanged(name, options):
    s = spec("M")
    x, x_mark, y_mark = batch(s)
    with torch.no_grad():
        plain = model(name, s, revin=True, **options)(x, x_mark, y_mark)
        skipped = model(name, s, revin=True, linear_skip=True, **options)(x, x_mark, y_mark)
    torch.testing.assert_close(skipped, plain, rtol=0, atol=0)


@pytest.mark.parametrize("name, options", SKIP_VARIANTS, ids=str)
@pytest.mark.parametrize("revin", [False, True])
def test_the_linear_skip_adds_its_map_of_the_normalized_window(name, options, revin):
    """Forecast with skip - forecast without == the skip's map of each variable's (normalized) window, mapped back."""
    s = spec("M")
    net = with_random_skip(model(name, s, revin=revin, linear_skip=True, revin_center="last", **options))
    plain = model(name, s, revin=revin, revin_center="last", **options)
    plain.load_state_dict({k: v for k, v in net.state_dict().items() if not k.startswith("skip.")})
    x, x_mark, y_mark = batch(s)
    weight, bias = net.skip.linear.weight, net.skip.linear.bias  # [P, L], [P]
    with torch.no_grad():
        difference = net(x, x_mark, y_mark) - plain(x, x_mark, y_mark)
        last, std = x[:, -1:], torch.sqrt(x.var(dim=1, keepdim=True, unbiased=False) + 1e-5)  # [B, 1, C]
        window = (x - last) / std if revin else x
        expected = torch.einsum("pl,blc->bpc", weight, window) + bias[:, None]  # [B, P, C]
        expected = expected * std if revin else expected
    torch.testing.assert_close(difference, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name, options", SKIP_VARIANTS, ids=str)
def test_forecasts_with_a_linear_skip_follow_a_shifted_and_scaled_window(name, options):
    s = spec("MS")
    net = with_random_skip(model(name, s, revin=True, revin_center="persistence", linear_skip=True, **options))
    x, x_mark, y_mark = batch(s)
    shift, factor = torch.tensor([5.0, -300.0, 40.0]), torch.tensor([0.5, 20.0, 3.0])
    with torch.no_grad():
        expected = net(x, x_mark, y_mark) * factor[-1:] + shift[-1:]
        moved = net(x * factor + shift, x_mark, y_mark)
    torch.testing.assert_close(moved, expected, rtol=1e-4, atol=1e-3 * float(factor.max()))


def test_the_linear_skip_needs_one_shot_decoding():
    with pytest.raises(ConfigError, match="linear_skip.*one_shot"):
        build_model("logsparse", spec(), linear_skip=True, decoding="autoregressive")
    with pytest.raises(ConfigError, match="linear_skip"):
        build_model("informer", spec(), linear_skip="yes")


# ----------------------------------------------------------------------------- correction weight

# Every model whose forecast is RevIN's centre plus a correction (with a linear skip where it has one).
CORRECTABLE = [
    ("informer", {"linear_skip": True}), ("informer", {"channels": "independent", "linear_skip": True}),
    ("transformer", {}), ("logsparse", {"linear_skip": True}), ("logsparse", {"head": "gaussian"}),
    ("dlinear", {}),
]


def correctable(name: str, s: DataSpec, center: str = "persistence", **options) -> torch.nn.Module:
    net = model(name, s, revin=True, revin_center=center, **options)
    return with_random_skip(net) if options.get("linear_skip") else net


def forecast_at(net: torch.nn.Module, weight: float, *inputs: torch.Tensor) -> torch.Tensor:
    net.revin.correction_weight.fill_(weight)
    with torch.no_grad():
        return net(*inputs)


@pytest.mark.parametrize("name, options", CORRECTABLE, ids=str)
@pytest.mark.parametrize("center", ["mean", "last", "persistence"])
def test_the_correction_weight_moves_the_forecast_between_the_centre_and_the_network(name, options, center):
    s = spec("MS")
    net = correctable(name, s, center, **options)
    inputs = batch(s)
    whole, none, part = (forecast_at(net, weight, *inputs) for weight in (1.0, 0.0, 0.3))
    location = net.revin.statistics(inputs[0]).location[..., -s.c_out:]  # [B, 1, C_out]
    torch.testing.assert_close(none, location.expand_as(none), rtol=0, atol=1e-5)
    torch.testing.assert_close(part, none + 0.3 * (whole - none), rtol=1e-5, atol=1e-4)
    assert not torch.allclose(whole, none)
    # The two parts the correction is fitted from: the centre read off the statistics is the forecast at 0.
    center, correction = net.center_and_correction(*inputs)
    assert torch.equal(center, none)
    torch.testing.assert_close(center + correction, whole, rtol=1e-6, atol=1e-6)
    assert float(net.revin.correction_weight) == pytest.approx(0.3)  # left as it was


def correction_batch(net: torch.nn.Module, s: DataSpec, share: float, seed: int = 0) -> dict[str, torch.Tensor]:
    """Windows whose horizon is the centre plus ``share`` of the network's correction."""
    x, x_mark, y_mark = batch(s, batch_size=4, seed=seed)
    whole, center = forecast_at(net, 1.0, x, x_mark, y_mark), forecast_at(net, 0.0, x, x_mark, y_mark)
    y = torch.randn(x.shape[0], s.label_len + s.pred_len, s.c_in)
    y[:, s.label_len:, s.c_in - s.c_out:] = center + share * (whole - center)
    return {"x": x, "y": y, "x_mark": x_mark, "y_mark": y_mark}


@pytest.mark.parametrize("name, options", CORRECTABLE, ids=str)
@pytest.mark.parametrize("share, fitted", [(0.3, 0.3), (1.0, 1.0), (0.0, 0.0), (2.5, 1.0), (-0.7, 0.0)])
def test_the_fitted_correction_weight_is_the_least_squares_share_kept_in_zero_one(name, options, share, fitted):
    s = spec("MS")
    net = correctable(name, s, **options)
    assert net.correctable and net.correction_kept == 1.0  # the whole correction until fitted
    batches = [correction_batch(net, s, share, seed) for seed in (0, 1)]
    assert net.fit_correction_weight(batches) == pytest.approx(fitted, abs=1e-4)
    assert float(net.revin.correction_weight) == pytest.approx(fitted, abs=1e-4)
    assert net.correction_kept == float(net.revin.correction_weight)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16), share=st.floats(0.0, 1.0))
def test_the_fitted_correction_weight_has_the_least_squared_error_on_its_windows(seed, share):
    """Noisy windows: no weight on a grid forecasts them better than the fitted one."""
    s = spec("M")
    net = correctable("informer", s, linear_skip=True)
    windows = correction_batch(net, s, share, seed)
    horizon = windows["y"][:, s.label_len:]
    horizon.add_(torch.randn(horizon.shape, generator=torch.Generator().manual_seed(seed)))
    inputs = (windows["x"], windows["x_mark"], windows["y_mark"])

    def error(weight: float) -> float:
        return float((forecast_at(net, weight, *inputs) - horizon).square().mean())

    fitted = net.fit_correction_weight([windows])
    assert 0.0 <= fitted <= 1.0
    assert all(error(fitted) <= error(weight) + 1e-6 for weight in np.linspace(0, 1, 21))


@pytest.mark.parametrize("name, options", CORRECTABLE[:1] + CORRECTABLE[-1:], ids=str)
def test_a_tested_correction_is_kept_only_where_the_whole_forecast_beats_the_centre(name, options):
    """Windows that are the centre plus 0.8 of the correction: the whole forecast beats the centre on every one,
    so the test keeps the fitted share. Plus 0.1 of it: the least-squares share is 0.1, but the whole
    correction forecasts worse than none, so the test keeps none."""
    s = spec("MS")
    net = correctable(name, s, **options)
    helpful = [correction_batch(net, s, 0.8, seed) for seed in (0, 1, 2)]
    assert net.fit_correction_weight(helpful, significance=0.05) == pytest.approx(0.8, abs=1e-4)
    unhelpful = [correction_batch(net, s, 0.1, seed) for seed in (0, 1, 2)]
    assert net.fit_correction_weight(unhelpful) == pytest.approx(0.1, abs=1e-4)
    assert net.fit_correction_weight(unhelpful, significance=0.05) == 0.0
    assert net.correction_kept == 0.0
    # The rule as a pure function of the terms (what experiments/correction_significance.py applies): the test it
    # made is returned, and it rejected the correction.
    from forecast.models.base import kept_share
    cross, square, _ = net.correction_terms(unhelpful)
    share, (statistic, critical) = kept_share(cross, square, s.pred_len, 0.05)
    assert share == 0.0 and not statistic > critical
    assert kept_share(cross, square, s.pred_len) == (pytest.approx(0.1, abs=1e-4), None)
    # Eight windows of eight steps hold one horizon's stretch: nothing to test, the fitted share stands.
    assert net.fit_correction_weight(unhelpful[:2], significance=0.05) == pytest.approx(0.1, abs=1e-4)


def horizon_prefix(windows: dict[str, torch.Tensor], steps: int, s: DataSpec) -> dict[str, torch.Tensor]:
    """The windows with ``y`` cut to the horizon's first ``steps`` (the marks still cover all of it)."""
    return {**windows, "y": windows["y"][:, : s.label_len + steps]}


def never_read():
    raise AssertionError("the prefix windows were read")
    yield


@pytest.mark.parametrize("name, options", CORRECTABLE[:1] + CORRECTABLE[-1:], ids=str)
def test_windows_too_few_to_test_are_tested_on_the_prefix_windows(name, options):
    """Eight windows of eight steps are one stretch: the test is made on the prefix windows (twelve windows, their
    first four steps) instead. The share stays the least-squares one of the whole horizon's windows; the prefix
    decides only whether it is kept."""
    s = spec("MS")
    net = correctable(name, s, **options)
    helpful = [correction_batch(net, s, 0.8, seed) for seed in (0, 1, 2)]
    unhelpful = [correction_batch(net, s, 0.1, seed) for seed in (0, 1, 2)]

    def prefix(windows):
        return 4, [horizon_prefix(w, 4, s) for w in windows]

    assert net.fit_correction_weight(unhelpful[:2], 0.05, prefix=prefix(unhelpful)) == 0.0
    assert net.fit_correction_weight(unhelpful[:2], 0.05, prefix=prefix(helpful)) == pytest.approx(0.1, abs=1e-4)
    assert net.fit_correction_weight(helpful[:2], 0.05, prefix=prefix(unhelpful)) == 0.0
    assert net.fit_correction_weight(helpful[:2], 0.05, prefix=prefix(helpful)) == pytest.approx(0.8, abs=1e-4)
    # Windows that can be tested are, and without a significance nothing is: the prefix is not read.
    assert net.fit_correction_weight(helpful, 0.05, prefix=(4, never_read())) == pytest.approx(0.8, abs=1e-4)
    assert net.fit_correction_weight(unhelpful[:2], prefix=(4, never_read())) == pytest.approx(0.1, abs=1e-4)
    # Nor where the least-squares share is already 0: there is nothing to keep or test.
    harmful = [correction_batch(net, s, -0.7, seed) for seed in (0, 1)]
    assert net.fit_correction_weight(harmful, 0.05, prefix=(4, never_read())) == 0.0
    # The prefix windows' terms are those of the horizon's first four steps.
    windows = helpful[0]
    center, correction = net.center_and_correction(windows["x"], windows["x_mark"], windows["y_mark"])
    miss = windows["y"][:, s.label_len: s.label_len + 4, -s.c_out:] - center[:, :4]  # [B, 4, C_out]
    cross, square, base = net.correction_terms([horizon_prefix(windows, 4, s)])
    torch.testing.assert_close(cross, (correction[:, :4] * miss).sum(dim=(1, 2), dtype=torch.float64))
    torch.testing.assert_close(square, correction[:, :4].square().sum(dim=(1, 2), dtype=torch.float64))
    torch.testing.assert_close(base, miss.square().sum(dim=(1, 2), dtype=torch.float64))


def test_the_diebold_mariano_statistic_is_the_mean_over_its_newey_west_standard_error():
    from forecast.models.base import diebold_mariano

    rng = np.random.default_rng(0)
    d = rng.normal(0.3, 1.0, 40).cumsum() * 0.1 + rng.normal(0.2, 1.0, 40)  # autocorrelated
    n, e = len(d), d - d.mean()

    def gamma(k: int) -> float:  # the k-th sample autocovariance, divided by n as Newey and West do
        return float(np.sum(e[k:] * e[:n - k])) / n

    for lag in (0, 1, 5, 39, 100):  # 39 = n - 1; 100 > n - 1: every autocovariance, with Bartlett weights of lag 100
        weights = [1 - k / (lag + 1) for k in range(1, min(lag, n - 1) + 1)]
        variance = gamma(0) + 2 * sum(w * gamma(k) for k, w in enumerate(weights, start=1))
        expected = d.mean() / np.sqrt(variance / n)
        assert float(diebold_mariano(torch.tensor(d), lag)) == pytest.approx(expected, rel=1e-10)
    statistic = float(diebold_mariano(torch.tensor(d), 3))
    assert float(diebold_mariano(torch.tensor(2.5 * d), 3)) == pytest.approx(statistic, rel=1e-12)  # scale-free
    assert float(diebold_mariano(torch.tensor(-d), 3)) == pytest.approx(-statistic, rel=1e-12)  # antisymmetric
    rows = torch.tensor(np.stack([d, -2 * d]))  # [2, N]: one statistic per row
    torch.testing.assert_close(diebold_mariano(rows, 3), torch.tensor([statistic, -statistic], dtype=torch.float64))
    assert float(diebold_mariano(torch.ones(5), 2)) == float("inf")


def test_the_diebold_mariano_critical_value_is_the_normals_at_a_small_lag_and_wider_at_a_long_one():
    from forecast.models.base import diebold_mariano_critical_value as critical

    assert critical(2000, 0, 0.05) == pytest.approx(1.645, abs=0.08)  # white noise: the normal quantile
    assert critical(2000, 0, 0.05) < critical(100, 10, 0.05) < critical(100, 99, 0.05)  # wider as lag / n grows
    assert critical(100, 10, 0.01) > critical(100, 10, 0.05)
    assert critical(100, 10, 0.05) == critical(100, 10, 0.05)  # the same draws every call


def test_a_model_without_a_correction_to_weigh_says_so():
    s = spec("M")
    for name, options in (("informer", {}), ("logsparse", {"decoding": "autoregressive", "revin": True}),
                          ("naive", {}), ("seasonal_naive", {"season_length": 4})):
        net = build_model(name, s, **{**TINY.get(name, {}), **options})
        assert not net.correctable and net.correction_kept is None
        with pytest.raises(ConfigError, match="no correction to weigh"):
            net.fit_correction_weight([])


def test_the_correction_weight_is_saved_and_older_checkpoints_keep_the_whole_correction():
    s = spec("M")
    net = correctable("informer", s, linear_skip=True)
    net.revin.correction_weight.fill_(0.25)
    restored = correctable("informer", s, linear_skip=True)
    restored.load_state_dict(net.state_dict())
    assert float(restored.revin.correction_weight) == 0.25
    older = {key: value for key, value in net.state_dict().items() if not key.endswith("correction_weight")}
    restored.load_state_dict(older)
    assert float(restored.revin.correction_weight) == 1.0


# ------------------------------------------------------------------------------------------- DLinear


@settings(max_examples=20, deadline=None)
@given(length=st.integers(1, 40), kernel=st.sampled_from([1, 3, 5, 25]), seed=st.integers(0, 1000))
def test_moving_average_matches_an_edge_padded_numpy_reference(length, kernel, seed):
    x = np.random.default_rng(seed).normal(size=(2, length, 3))
    half = (kernel - 1) // 2
    padded = np.concatenate([np.repeat(x[:, :1], half, 1), x, np.repeat(x[:, -1:], half, 1)], axis=1)
    expected = np.stack([padded[:, t:t + kernel].mean(1) for t in range(length)], axis=1)
    np.testing.assert_allclose(moving_average(torch.from_numpy(x), kernel).numpy(), expected, rtol=1e-10)


@pytest.mark.parametrize("individual", [False, True])
def test_dlinear_is_the_sum_of_two_linear_maps_over_the_decomposition(individual):
    s = spec("MS")
    net = model("dlinear", s, individual=individual)
    x, x_mark, y_mark = batch(s)
    target = x[..., -1:]  # [B, L, 1]: DLinear never mixes variables, so the covariates are not read
    trend = moving_average(target, 5)
    seasonal_map, trend_map = net.seasonal.maps[0], net.trend.maps[0]
    expected = (seasonal_map(((target - trend)[..., 0])) + trend_map(trend[..., 0])).unsqueeze(-1)
    with torch.no_grad():
        torch.testing.assert_close(net(x, x_mark, y_mark), expected)
        changed = x.clone()
        changed[..., 0] += 5.0
        torch.testing.assert_close(net(changed, x_mark, y_mark), net(x, x_mark, y_mark))


def test_individual_dlinear_has_its_own_maps_per_variable():
    s = spec("M")
    shared, individual = DLinear(s, DLinearConfig()), DLinear(s, DLinearConfig(individual=True))
    assert len(shared.seasonal.maps) == 1 and len(individual.seasonal.maps) == s.c_out
    x, x_mark, y_mark = batch(s)
    with torch.no_grad():
        individual.seasonal.maps[1].weight.zero_()
        individual.trend.maps[1].weight.zero_()
        out = individual(x, x_mark, y_mark)
    torch.testing.assert_close(out[..., 1], (individual.seasonal.maps[1].bias + individual.trend.maps[1].bias)
                               .expand(3, -1).detach())


def test_dlinear_kernel_must_be_odd():
    with pytest.raises(ConfigError, match="odd"):
        DLinearConfig(kernel_size=24)


@pytest.mark.parametrize("length", [8, 9, 10, 20])
def test_positional_embedding_extends_its_table_for_any_longer_sequence(length):
    """Kills an extension that waits one step too long (``length > table + 1``): a sequence exactly one step
    longer than the cached table got one row too few."""
    from forecast.layers.embedding import PositionalEmbedding, sinusoidal_table

    embedding = PositionalEmbedding(16, initial_length=8)
    out = embedding(torch.zeros(2, length, 16))
    assert out.shape == (1, length, 16)
    torch.testing.assert_close(out[0], sinusoidal_table(length, 16))


@pytest.mark.parametrize("affine", [False, True])
def test_a_scale_maps_back_as_the_spread_denormalize_gives_the_last_variables(affine):
    """``denormalize(m + s) - denormalize(m) == denormalize_scale(s)`` for the last C_out of C_in variables
    (positive slope): kills a scale mapped back with the first C_out variables' standard deviations."""
    torch.manual_seed(0)
    revin = ReversibleInstanceNorm(3, affine=affine)
    if affine:
        with torch.no_grad():
            revin.weight.copy_(torch.tensor([0.5, 2.0, 1.5]))
            revin.bias.copy_(torch.tensor([0.1, -0.3, 0.2]))
    x = torch.randn(2, 32, 3) * torch.tensor([1.0, 10.0, 100.0]) + torch.tensor([5.0, -3.0, 40.0])
    stats = revin.statistics(x)
    mean, scale = torch.randn(2, 4, 2), torch.rand(2, 4, 2) + 0.1  # the last 2 variables' [B, P, C_out]
    spread = revin.denormalize(mean + scale, stats) - revin.denormalize(mean, stats)
    torch.testing.assert_close(revin.denormalize_scale(scale, stats), spread, rtol=1e-4, atol=1e-4)
