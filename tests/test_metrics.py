"""forecast.metrics against scikit-learn, hand-computed values and one-shot computations."""

from __future__ import annotations

import math

import lightning as L
import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import (
    mean_absolute_error,
    mean_absolute_percentage_error,
    mean_pinball_loss,
    mean_squared_error,
    root_mean_squared_error,
)
from torch.utils.data import DataLoader, TensorDataset

from forecast import metrics
from forecast.errors import ConfigError, DataError
from forecast.training import lightning_warnings

POINT_FUNCTIONS = {
    "mse": metrics.mse,
    "mae": metrics.mae,
    "rmse": metrics.rmse,
    "mape": metrics.mape,
    "mspe": metrics.mspe,
}

shapes = st.tuples(st.integers(1, 5), st.integers(1, 4), st.integers(1, 3))  # (N, P, C)


def random_pair(shape: tuple[int, ...], seed: int, away_from_zero: bool = False) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    pred = rng.normal(size=shape)
    true = rng.normal(size=shape)
    if away_from_zero:
        true = np.sign(true) * (0.5 + np.abs(true))
    return pred, true


def by_horizon(values: np.ndarray) -> np.ndarray:
    """[N, P, C] -> [N*C, P]: one column per horizon step, for sklearn's multioutput."""
    n, p, c = values.shape
    return values.transpose(0, 2, 1).reshape(n * c, p)  # [N, C, P] -> [N*C, P]


def by_variable(values: np.ndarray) -> np.ndarray:
    """[N, P, C] -> [N*P, C]: one column per variable."""
    return values.reshape(-1, values.shape[-1])  # [N*P, C]


# ----------------------------------------------------------------- point metrics vs sklearn


@settings(max_examples=25, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**16))
def test_point_metrics_match_sklearn_overall_and_per_axis(shape: tuple[int, int, int], seed: int) -> None:
    pred, true = random_pair(shape, seed, away_from_zero=True)
    references = {
        "mse": mean_squared_error,
        "mae": mean_absolute_error,
        "rmse": root_mean_squared_error,
        "mape": mean_absolute_percentage_error,
        # MSPE = mean(((p - t) / t)^2) = MSE between p / t and 1.
        "mspe": lambda t, p: mean_squared_error(np.ones_like(t), p / t, multioutput="raw_values")
        if t.ndim == 2
        else mean_squared_error(np.ones_like(t), p / t),
    }
    for name, function in POINT_FUNCTIONS.items():
        reference = references[name]
        kwargs = {} if name == "mspe" else {"multioutput": "raw_values"}
        assert function(pred, true) == pytest.approx(reference(true.ravel(), pred.ravel()), rel=1e-12)
        np.testing.assert_allclose(
            function(pred, true, by="horizon"), reference(by_horizon(true), by_horizon(pred), **kwargs), rtol=1e-12
        )
        np.testing.assert_allclose(
            function(pred, true, by="variable"), reference(by_variable(true), by_variable(pred), **kwargs), rtol=1e-12
        )


@settings(max_examples=15, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**16))
def test_numpy_and_torch_agree_with_matching_return_types(shape: tuple[int, int, int], seed: int) -> None:
    pred, true = random_pair(shape, seed, away_from_zero=True)
    for name, function in POINT_FUNCTIONS.items():
        overall_np = function(pred, true)
        overall_torch = function(torch.from_numpy(pred), torch.from_numpy(true))
        assert type(overall_np) is float and type(overall_torch) is float, name
        assert overall_torch == pytest.approx(overall_np, rel=1e-12)
        for by in ("horizon", "variable"):
            from_numpy = function(pred, true, by=by)
            from_torch = function(torch.from_numpy(pred), torch.from_numpy(true), by=by)
            assert isinstance(from_numpy, np.ndarray) and from_numpy.dtype == np.float64
            assert isinstance(from_torch, torch.Tensor) and from_torch.dtype == torch.float64
            axis_length = shape[1] if by == "horizon" else shape[2]
            assert from_numpy.shape == (axis_length,) and tuple(from_torch.shape) == (axis_length,)
            np.testing.assert_allclose(from_torch.numpy(), from_numpy, rtol=1e-12)


def test_float32_inputs_are_scored_in_float64() -> None:
    rng = np.random.default_rng(3)
    # Large offset: float32 accumulation of the squared errors would lose digits.
    pred32 = (1000.0 + rng.normal(size=(64, 6, 2))).astype(np.float32)
    true32 = (1000.0 + rng.normal(size=(64, 6, 2))).astype(np.float32)
    exact = float(((pred32.astype(np.float64) - true32.astype(np.float64)) ** 2).mean())
    assert metrics.mse(torch.from_numpy(pred32), torch.from_numpy(true32)) == pytest.approx(exact, rel=1e-13)
    assert metrics.mse(pred32, true32) == pytest.approx(exact, rel=1e-13)


def test_breakdowns_use_the_last_two_axes_for_any_leading_shape() -> None:
    pred, true = random_pair((2, 3, 4, 5), seed=1)  # extra leading axis: [.., N, P, C]
    flat_pred, flat_true = pred.reshape(6, 4, 5), true.reshape(6, 4, 5)  # [2*3, P, C]
    np.testing.assert_allclose(metrics.mae(pred, true, by="horizon"), metrics.mae(flat_pred, flat_true, by="horizon"))
    np.testing.assert_allclose(metrics.mae(pred, true, by="variable"), metrics.mae(flat_pred, flat_true, by="variable"))
    assert metrics.mae(pred.ravel(), true.ravel()) == pytest.approx(metrics.mae(pred, true), rel=1e-12)


# ------------------------------------------------------------------------ zeros in the truth


def test_mape_excludes_zero_truths_by_default_where_the_field_gives_inf() -> None:
    pred = np.array([[[1.0], [3.0], [2.0], [5.0]]])  # [N=1, P=4, C=1]
    true = np.array([[[0.0], [2.0], [4.0], [0.0]]])
    with np.errstate(divide="ignore"):
        assert np.isinf(np.mean(np.abs((pred - true) / true)))  # the field's formula
    # Nonzero truths only: |3-2|/2 = 0.5 and |2-4|/4 = 0.5 -> MAPE 0.5; MSPE (0.25 + 0.25) / 2.
    assert metrics.mape(pred, true) == 0.5
    assert metrics.mspe(pred, true) == 0.25
    per_horizon = metrics.mape(pred, true, by="horizon")
    np.testing.assert_array_equal(np.isnan(per_horizon), [True, False, False, True])  # all-zero groups: NaN
    np.testing.assert_allclose(per_horizon[1:3], [0.5, 0.5])
    tensor_horizon = metrics.mape(torch.from_numpy(pred), torch.from_numpy(true), by="horizon")
    np.testing.assert_array_equal(tensor_horizon.isnan().numpy(), [True, False, False, True])


def test_mape_zero_policies_nan_raise_and_eps() -> None:
    pred = np.array([[[1.0, 2.0], [3.0, 1.0]]])  # [N=1, P=2, C=2]
    true = np.array([[[0.0, 1.0], [2.0, 1e-9]]])
    assert np.isnan(metrics.mape(pred, true, zeros="nan"))
    np.testing.assert_array_equal(np.isnan(metrics.mape(pred, true, by="variable", zeros="nan")), [True, False])
    with pytest.raises(DataError, match="1 of 4 truth values"):
        metrics.mspe(pred, true, zeros="raise")
    # 1e-9 is a real, tiny truth: kept with eps=0, excluded once eps reaches it.
    assert metrics.mape(pred, true) == pytest.approx(np.mean([1.0, 0.5, (1.0 - 1e-9) / 1e-9]))
    assert metrics.mape(pred, true, eps=1e-6) == pytest.approx(np.mean([1.0, 0.5]))
    with pytest.raises(ConfigError, match="zeros="):
        metrics.mape(pred, true, zeros="clip")
    with pytest.raises(ConfigError, match="eps="):
        metrics.mape(pred, true, eps=-1.0)


# -------------------------------------------------------------------------------- bad input


def test_bad_inputs_raise_specific_errors() -> None:
    pred, true = random_pair((2, 3, 4), seed=0)
    with pytest.raises(DataError, match="no broadcasting"):
        metrics.mse(pred, true[..., :1])
    with pytest.raises(DataError, match="all numpy arrays or all torch tensors"):
        metrics.mae(pred, torch.from_numpy(true))
    with pytest.raises(DataError, match="all numpy arrays or all torch tensors"):
        metrics.mae(pred.tolist(), true.tolist())
    with pytest.raises(ConfigError, match="by='time'"):
        metrics.mse(pred, true, by="time")
    with pytest.raises(DataError, match=r"\[..., P, C\]"):
        metrics.mse(pred.ravel(), true.ravel(), by="horizon")
    with pytest.raises(DataError, match="empty"):
        metrics.mse(np.zeros((0, 3, 4)), np.zeros((0, 3, 4)))
    with pytest.raises(ConfigError, match="rho=1.5"):
        metrics.rho_risk(pred, true, 1.5)


# ------------------------------------------------------------------------------- rho-risk


def test_rho_risk_hand_computed() -> None:
    # x (truth) and q (0.9-quantile forecast), laid out [N=1, P=2, C=2]:
    #   x = [[-1, 2], [3, 4]],  q = [[0, 2], [1, 5]]
    # D_0.9(x, q) = (0.9 - 1{x <= q}) * (x - q):
    #   x=-1, q=0: x <= q -> (0.9 - 1) * (-1 - 0) = 0.1
    #   x= 2, q=2: x <= q -> (0.9 - 1) * ( 2 - 2) = 0
    #   x= 3, q=1: x >  q ->  0.9      * ( 3 - 1) = 1.8
    #   x= 4, q=5: x <= q -> (0.9 - 1) * ( 4 - 5) = 0.1
    # Overall: 2 * (0.1 + 0 + 1.8 + 0.1) / (1 + 2 + 3 + 4) = 4.0 / 10 = 0.4
    # Horizon 1: 2 * (0.1 + 0) / (1 + 2) = 0.2 / 3;  horizon 2: 2 * (1.8 + 0.1) / (3 + 4) = 3.8 / 7
    # Variable 1: 2 * (0.1 + 1.8) / (1 + 3) = 3.8 / 4; variable 2: 2 * (0 + 0.1) / (2 + 4) = 0.2 / 6
    true = np.array([[[-1.0, 2.0], [3.0, 4.0]]])
    quantile = np.array([[[0.0, 2.0], [1.0, 5.0]]])
    for to in (np.asarray, torch.from_numpy):
        assert metrics.rho_risk(to(quantile), to(true), 0.9) == pytest.approx(0.4, rel=1e-14)
        np.testing.assert_allclose(
            np.asarray(metrics.rho_risk(to(quantile), to(true), 0.9, by="horizon")), [0.2 / 3, 3.8 / 7], rtol=1e-14
        )
        np.testing.assert_allclose(
            np.asarray(metrics.rho_risk(to(quantile), to(true), 0.9, by="variable")), [3.8 / 4, 0.2 / 6], rtol=1e-14
        )
    # The median's rho-risk is the normalised absolute error: 2 * 0.5 * sum|x - q| / sum|x|
    # = (1 + 0 + 2 + 1) / 10.
    assert metrics.rho_risk(quantile, true, 0.5) == pytest.approx(0.4, rel=1e-14)


@settings(max_examples=20, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**16), rho=st.floats(0.05, 0.95))
def test_rho_risk_matches_sklearn_pinball_and_median_relation(
    shape: tuple[int, int, int], seed: int, rho: float
) -> None:
    quantile, true = random_pair(shape, seed)
    # mean_pinball_loss is the mean of D_rho, so R_rho = 2 * n * mean / sum|x|.
    expected = 2 * true.size * mean_pinball_loss(true.ravel(), quantile.ravel(), alpha=rho) / np.abs(true).sum()
    assert metrics.rho_risk(quantile, true, rho) == pytest.approx(expected, rel=1e-10)
    from_torch = metrics.rho_risk(torch.from_numpy(quantile), torch.from_numpy(true), rho)
    assert from_torch == pytest.approx(metrics.rho_risk(quantile, true, rho), rel=1e-13)  # float64 throughout
    median_relation = np.abs(true - quantile).sum() / np.abs(true).sum()
    assert metrics.rho_risk(quantile, true, 0.5) == pytest.approx(median_relation, rel=1e-12)
    per_horizon = np.abs(true - quantile).sum(axis=(0, 2)) / np.abs(true).sum(axis=(0, 2))
    np.testing.assert_allclose(metrics.rho_risk(quantile, true, 0.5, by="horizon"), per_horizon, rtol=1e-12)


def test_rho_risk_of_zero_truth_is_nan() -> None:
    assert np.isnan(metrics.rho_risk(np.ones((1, 2, 1)), np.zeros((1, 2, 1)), 0.5))


def test_rho_risks_from_samples_use_sample_quantiles() -> None:
    rng = np.random.default_rng(5)
    samples = rng.normal(size=(30, 4, 3, 2))  # [S, N, P, C]
    true = rng.normal(size=(4, 3, 2))
    quantiles = np.quantile(samples, [0.5, 0.9], axis=0)  # [2, N, P, C]
    risks = metrics.rho_risks(samples, true)
    assert list(risks) == [0.5, 0.9]
    assert risks[0.9] == pytest.approx(metrics.rho_risk(quantiles[1], true, 0.9), rel=1e-14)
    from_torch = metrics.sample_quantiles(torch.from_numpy(samples), (0.1, 0.5, 0.9))
    np.testing.assert_allclose(from_torch.numpy(), np.quantile(samples, [0.1, 0.5, 0.9], axis=0), rtol=1e-13)
    torch_risks = metrics.rho_risks(torch.from_numpy(samples), torch.from_numpy(true), (0.5, 0.9), by="horizon")
    numpy_risks = metrics.rho_risks(samples, true, by="horizon")
    np.testing.assert_allclose(torch_risks[0.5].numpy(), numpy_risks[0.5], rtol=1e-13)
    with pytest.raises(DataError, match="n_samples"):
        metrics.rho_risks(samples[:, :2], true)


@pytest.mark.parametrize("n_samples", [1, 2, 7, 100])
def test_sample_quantiles_of_tensors_are_torch_quantiles_bit_for_bit(n_samples: int) -> None:
    """One sort and torch.quantile's interpolation: the same float64 values exactly, NaN where a cell has one."""
    samples = torch.randn(n_samples, 3, 5, 2, generator=torch.Generator().manual_seed(n_samples), dtype=torch.float32)
    samples[0, 1, 2, 0] = torch.nan
    levels = (0.1, 0.5, 0.9, 0.05, 0.95, 0.001, 0.999)
    expected = torch.quantile(samples.to(torch.float64), torch.tensor(levels, dtype=torch.float64), dim=0)
    found = metrics.sample_quantiles(samples, levels)
    assert found.dtype == torch.float64 and found.shape == (len(levels), 3, 5, 2)
    assert torch.equal(found.isnan(), expected.isnan()) and found[:, 1, 2, 0].isnan().all()
    assert torch.equal(found.nan_to_num(), expected.nan_to_num())



@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_path_quantiles_are_torch_quantiles_in_the_paths_dtype(dtype: torch.dtype) -> None:
    """The models' quantiles share sample_quantiles' sort: torch.quantile's values bit for bit in the paths' own
    dtype (its ranks and weights computed in that dtype), NaN where a cell holds one."""
    from forecast.models.base import path_quantiles

    paths = torch.randn(37, 4, 6, 3, generator=torch.Generator().manual_seed(3), dtype=dtype)  # [S, B, P, C]
    paths[5, 2, 1, 0] = torch.nan
    levels = (0.1, 0.5, 0.9, 0.33, 0.999)
    expected = torch.quantile(paths, torch.tensor(levels, dtype=dtype), dim=0)  # [Q, B, P, C]
    found = path_quantiles(paths, levels)
    for index, level in enumerate(levels):
        assert found[level].dtype == dtype and found[level].shape == (4, 6, 3)
        assert torch.equal(found[level].isnan(), expected[index].isnan()) and found[level][2, 1, 0].isnan()
        assert torch.equal(found[level].nan_to_num(), expected[index].nan_to_num())


def test_path_quantiles_of_half_precision_interpolate_in_float32() -> None:
    """torch.quantile refuses bfloat16; its paths get float32's quantiles, rounded once to bfloat16."""
    from forecast.models.base import path_quantiles

    paths = torch.randn(100, 2, 5, 3, generator=torch.Generator().manual_seed(4)).to(torch.bfloat16)
    found = path_quantiles(paths, (0.1, 0.9))
    expected = torch.quantile(paths.float(), torch.tensor([0.1, 0.9]), dim=0).to(torch.bfloat16)
    assert found[0.1].dtype == torch.bfloat16 and torch.equal(found[0.1], expected[0])
    assert torch.equal(found[0.9], expected[1])


# ------------------------------------------------------------------------------- coverage


def test_coverage_hand_computed() -> None:
    # truth 1 in [0, 2] yes; 2 in [2, 3] yes (closed); 3 in [3.5, 4] no; 4 in [3, 4] yes;
    # 5 in [0, 4.9] no  ->  3 of 5 = 0.6
    true = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    lower = np.array([0.0, 2.0, 3.5, 3.0, 0.0])
    upper = np.array([2.0, 3.0, 4.0, 4.0, 4.9])
    assert metrics.coverage(lower, upper, true) == pytest.approx(0.6)
    as_tensors = (torch.from_numpy(lower), torch.from_numpy(upper), torch.from_numpy(true))
    assert metrics.coverage(*as_tensors) == pytest.approx(0.6)
    # Laid out [N=1, P=5, C=1], per horizon it is 1 / 0 per step.
    per_step = metrics.coverage(lower.reshape(1, 5, 1), upper.reshape(1, 5, 1), true.reshape(1, 5, 1), by="horizon")
    np.testing.assert_array_equal(per_step, [1, 1, 0, 1, 0])
    with pytest.raises(DataError, match="lower > upper"):
        metrics.coverage(upper, lower, true)


def test_coverage_propagates_nan_as_the_other_metrics_do() -> None:
    true = np.ones((4, 3, 2))
    true[0, 0, 0] = np.nan
    inside = np.zeros_like(true), np.full_like(true, 2.0)
    assert math.isnan(metrics.coverage(*inside, true))
    by_variable = metrics.coverage(*inside, true, by="variable")
    assert math.isnan(by_variable[0]) and by_variable[1] == 1.0  # only the cells a NaN touches
    assert math.isnan(metrics.interval_coverage(np.ones((10, 4, 3, 2)), true))
    samples = np.ones((10, 4, 3, 2))
    samples[3, 1, 1, 1] = np.nan  # a NaN sample makes its cell's quantiles NaN
    assert math.isnan(metrics.interval_coverage(samples, np.ones((4, 3, 2))))
    summary = metrics.probabilistic_summary(np.ones((10, 4, 3, 2)), torch.from_numpy(true))
    assert math.isnan(summary.overall["coverage_0.8"]) and math.isnan(summary.overall["rho_risk_0.5"])


def test_accumulators_skip_missing_truths_when_asked() -> None:
    """``missing="skip"`` scores each cell over the windows that observed it: the same as scoring the observed
    truths alone (scikit-learn on the observed cells), per horizon step too; ``"propagate"`` keeps NaN."""
    rng = np.random.default_rng(0)
    pred, true = rng.normal(size=(2, 40, 3, 2)) + 5
    true[rng.random(true.shape) < 0.3] = np.nan
    observed = ~np.isnan(true)
    point = metrics.MetricAccumulator(missing="skip")
    for rows in (slice(0, 17), slice(17, 40)):  # two batches
        point.update(torch.from_numpy(pred[rows]), torch.from_numpy(true[rows]))
    summary = point.summary()
    assert summary.overall["mse"] == pytest.approx(mean_squared_error(true[observed], pred[observed]), rel=1e-12)
    assert summary.overall["mape"] == pytest.approx(
        mean_absolute_percentage_error(true[observed], pred[observed]), rel=1e-12)
    step = observed[:, 1]  # [N, C] the second step's observed truths
    assert summary.per_horizon["mae"][1] == pytest.approx(
        mean_absolute_error(true[:, 1][step], pred[:, 1][step]), rel=1e-12)
    assert summary.n_windows == 40 and summary.n_zero_truth == 0
    strict = metrics.MetricAccumulator(missing="skip", zeros="raise")  # a missing truth is no zero to refuse
    strict.update(torch.from_numpy(pred), torch.from_numpy(true))
    assert strict.summary().overall["mape"] == pytest.approx(summary.overall["mape"], rel=1e-12)
    quantiles = {0.1: pred - 1, 0.5: pred, 0.9: pred + 1}
    probabilistic = metrics.ProbabilisticAccumulator(missing="skip")
    probabilistic.update({level: torch.from_numpy(values) for level, values in quantiles.items()},
                         torch.from_numpy(true))
    overall = probabilistic.summary().overall
    inside = (np.abs(true - pred) <= 1)[observed]
    assert overall["coverage_0.8"] == pytest.approx(inside.mean(), rel=1e-12)
    pinball = mean_pinball_loss(true[observed], quantiles[0.9][observed], alpha=0.9)
    assert overall["rho_risk_0.9"] == pytest.approx(2 * pinball * observed.sum() / np.abs(true[observed]).sum())
    kept = metrics.MetricAccumulator()  # the default: NaN propagates
    kept.update(torch.from_numpy(pred), torch.from_numpy(true))
    assert math.isnan(kept.summary().overall["mse"])
    with pytest.raises(ConfigError, match="missing"):
        metrics.MetricAccumulator(missing="drop")


def test_interval_coverage_of_samples_hand_computed() -> None:
    # 11 samples 0, 1, ..., 10 per cell: linear quantiles 0.1 -> 1.0 and 0.9 -> 9.0, so the
    # nominal 80% interval is [1, 9]; truths 0.5, 1, 5, 9, 9.5 -> 3 of 5 inside.
    samples = np.broadcast_to(np.arange(11.0).reshape(11, 1, 1, 1), (11, 1, 5, 1))  # [S, N, P, C]
    true = np.array([0.5, 1.0, 5.0, 9.0, 9.5]).reshape(1, 5, 1)
    assert metrics.interval_coverage(samples, true, 0.8) == pytest.approx(0.6)
    sample_tensor = torch.from_numpy(samples.copy())
    assert metrics.interval_coverage(sample_tensor, torch.from_numpy(true), 0.8) == pytest.approx(0.6)


# ---------------------------------------------------------------------------- accumulators


def feed(accumulator: metrics.MetricAccumulator, pred: np.ndarray, true: np.ndarray, sizes: list[int]) -> None:
    start = 0
    for size in sizes:
        accumulator.update(torch.from_numpy(pred[start : start + size]), torch.from_numpy(true[start : start + size]))
        start += size
    assert start == len(true)


def test_accumulator_over_uneven_batches_equals_one_shot_exactly() -> None:
    rng = np.random.default_rng(11)
    # Integer-valued data: every sum is exact in float64, so equality is exact, not approximate.
    pred = rng.integers(-20, 20, size=(11, 4, 3)).astype(np.float64)
    true = rng.integers(1, 20, size=(11, 4, 3)).astype(np.float64)
    accumulator = metrics.MetricAccumulator()
    feed(accumulator, pred, true, [4, 4, 2, 1])
    summary = accumulator.summary()
    assert summary.n_windows == 11 and summary.n_zero_truth == 0
    for name in ("mse", "mae", "rmse"):
        function = POINT_FUNCTIONS[name]
        assert summary.overall[name] == function(pred, true), name
        np.testing.assert_array_equal(summary.per_horizon[name], function(pred, true, by="horizon"))
        np.testing.assert_array_equal(summary.per_variable[name], function(pred, true, by="variable"))
    for name in ("mape", "mspe"):
        function = POINT_FUNCTIONS[name]
        assert summary.overall[name] == pytest.approx(function(pred, true), rel=1e-14)
        np.testing.assert_allclose(summary.per_horizon[name], function(pred, true, by="horizon"), rtol=1e-14)
    computed = accumulator.compute()
    assert set(computed) == set(metrics.POINT_METRICS)
    assert all(value.dtype == torch.float64 and value.ndim == 0 for value in computed.values())
    assert float(computed["mse"]) == summary.overall["mse"]
    # The field's per-batch average weighs the last window (batch of 1) 4x too much.
    batch_means = [((pred[s:e] - true[s:e]) ** 2).mean() for s, e in ((0, 4), (4, 8), (8, 10), (10, 11))]
    assert np.mean(batch_means) != pytest.approx(summary.overall["mse"], rel=1e-6)


@settings(max_examples=20, deadline=None)
@given(
    shape=shapes,
    seed=st.integers(0, 2**16),
    cuts=st.lists(st.integers(1, 4), min_size=1, max_size=5),
    zeros=st.sampled_from(["exclude", "nan"]),
)
def test_accumulator_matches_functions_for_any_batching(
    shape: tuple[int, int, int], seed: int, cuts: list[int], zeros: str
) -> None:
    pred, true = random_pair(shape, seed)
    true[0, 0, -1] = 0.0  # exercise the zero policy too
    sizes = []
    remaining = shape[0]
    for cut in cuts:
        if remaining:
            sizes.append(min(cut, remaining))
            remaining -= sizes[-1]
    sizes += [remaining] if remaining else []
    accumulator = metrics.MetricAccumulator(zeros=zeros)
    feed(accumulator, pred, true, sizes)
    summary = accumulator.summary()
    assert summary.n_zero_truth == 1
    for name, function in POINT_FUNCTIONS.items():
        kwargs = {"zeros": zeros} if name in ("mape", "mspe") else {}
        np.testing.assert_allclose(summary.overall[name], function(pred, true, **kwargs), rtol=1e-12)
        np.testing.assert_allclose(summary.per_horizon[name], function(pred, true, by="horizon", **kwargs), rtol=1e-12)
        per_variable = function(pred, true, by="variable", **kwargs)
        np.testing.assert_allclose(summary.per_variable[name], per_variable, rtol=1e-12)


def test_accumulator_states_reset_dtype_and_validation() -> None:
    accumulator = metrics.MetricAccumulator()
    with pytest.raises(DataError, match="no window"), pytest.warns(UserWarning, match="before the ``update``"):
        accumulator.compute()
    with pytest.raises(DataError, match="no window"):
        accumulator.summary()
    accumulator.half()  # as under a half-precision LightningModule: sums must stay float64
    accumulator.update(torch.ones(2, 3, 2, dtype=torch.float16), torch.full((2, 3, 2), 2.0, dtype=torch.float16))
    assert accumulator.squared_error.dtype == torch.float64 and accumulator.squared_error.shape == (3, 2)
    with pytest.raises(DataError, match=r"\[P, C\] = \[4, 2\]"):
        accumulator.update(torch.ones(2, 4, 2), torch.ones(2, 4, 2))
    with pytest.raises(DataError, match=r"\[B, P, C\]"):
        accumulator.update(torch.ones(3, 2), torch.ones(3, 2))
    assert accumulator.summary().overall["mape"] == 0.5
    accumulator.reset()  # a fresh test set may have another horizon
    accumulator.update(torch.ones(1, 5, 1), torch.ones(1, 5, 1))
    assert accumulator.summary().horizon == 5
    fixed = metrics.MetricAccumulator(horizon=3, n_variables=2)
    assert fixed.squared_error.shape == (3, 2)
    with pytest.raises(DataError, match="expects"):
        fixed.update(torch.ones(1, 2, 2), torch.ones(1, 2, 2))
    raising = metrics.MetricAccumulator(zeros="raise")
    with pytest.raises(DataError, match="1 truth values"):
        raising.update(torch.ones(1, 2, 1), torch.tensor([[[0.0], [1.0]]]))
    with pytest.raises(ConfigError, match="horizon=0"):
        metrics.MetricAccumulator(horizon=0)


def test_the_scored_levels_are_the_papers_and_those_predict_gives() -> None:
    assert metrics.scored_levels(metrics.DEFAULT_QUANTILES) == ((0.1, 0.5, 0.9), (0.8,))
    assert metrics.scored_levels((0.05, 0.5, 0.95)) == ((0.05, 0.5, 0.9, 0.95), (0.8, 0.9))
    assert metrics.scored_levels((0.25, 0.3)) == ((0.25, 0.3, 0.5, 0.9), (0.8,))  # no pair: no other interval
    assert metrics.scored_levels(()) == ((0.5, 0.9), (0.8,))
    assert metrics.scored_levels((0.1, 0.25, 0.75, 0.9)) == ((0.1, 0.25, 0.5, 0.75, 0.9), (0.5, 0.8))


def test_probabilistic_accumulator_matches_functions_over_uneven_batches() -> None:
    rng = np.random.default_rng(7)
    samples = rng.normal(size=(25, 9, 3, 2))  # [S, N, P, C]
    true = rng.normal(size=(9, 3, 2))
    accumulator = metrics.ProbabilisticAccumulator(rhos=(0.5, 0.9), levels=(0.8, 0.5))
    for start, stop in ((0, 4), (4, 8), (8, 9)):
        accumulator.update(torch.from_numpy(samples[:, start:stop]), torch.from_numpy(true[start:stop]))
    summary = accumulator.summary()
    assert summary.metrics == ("rho_risk_0.5", "rho_risk_0.9", "coverage_0.8", "coverage_0.5")
    for rho in (0.5, 0.9):
        name = metrics.rho_risk_name(rho)
        expected = metrics.rho_risks(samples, true, (rho,), by="horizon")[rho]
        np.testing.assert_allclose(summary.per_horizon[name], expected, rtol=1e-12)
        assert summary.overall[name] == pytest.approx(metrics.rho_risks(samples, true, (rho,))[rho], rel=1e-12)
    for level in (0.8, 0.5):
        name = metrics.coverage_name(level)
        expected = metrics.interval_coverage(samples, true, level, by="variable")
        np.testing.assert_allclose(summary.per_variable[name], expected, rtol=1e-12)
    # Quantile forecasts equal to the sample quantiles give the same numbers; 0.1 matches
    # (1 - 0.8) / 2 = 0.0999... .
    levels = (0.1, 0.25, 0.5, 0.75, 0.9)
    quantiles = dict(zip(levels, np.quantile(samples, levels, axis=0), strict=True))
    from_quantiles = metrics.probabilistic_summary(quantiles, true, levels=(0.8, 0.5))
    assert from_quantiles.overall == pytest.approx(summary.overall, rel=1e-12)
    with pytest.raises(DataError, match="missing"):
        metrics.probabilistic_summary({0.5: quantiles[0.5]}, true)
    crossing = {0.1: quantiles[0.9], 0.5: quantiles[0.5], 0.9: quantiles[0.1]}
    with pytest.raises(DataError, match="lower > upper"):
        metrics.probabilistic_summary(crossing, true)


def test_accumulator_in_a_lightning_test_loop() -> None:
    rng = np.random.default_rng(2)
    pred = torch.from_numpy(rng.normal(size=(10, 3, 2))).float()
    true = torch.from_numpy(rng.normal(size=(10, 3, 2))).float()

    class Scorer(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.test_metrics = metrics.MetricAccumulator()
            self.summary: metrics.MetricSummary | None = None

        def test_step(self, batch: list[torch.Tensor], batch_index: int) -> None:
            self.test_metrics.update(*batch)

        def on_test_epoch_end(self) -> None:
            self.log_dict({f"test/{name}": value for name, value in self.test_metrics.compute().items()})
            self.summary = self.test_metrics.summary()

    scorer = Scorer()
    trainer = L.Trainer(
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )
    # batch_size 4 over 10 windows: batches of 4, 4, 2.
    with lightning_warnings():  # the call's warnings the library leaves out too
        trainer.test(scorer, DataLoader(TensorDataset(pred, true), batch_size=4), verbose=False)
    expected = metrics.point_summary(pred, true)
    assert scorer.summary is not None and scorer.summary.n_windows == 10
    assert scorer.summary.overall == pytest.approx(expected.overall, rel=1e-12)
    np.testing.assert_allclose(scorer.summary.per_horizon["mae"], expected.per_horizon["mae"], rtol=1e-12)
    assert float(trainer.callback_metrics["test/mse"]) == pytest.approx(expected.overall["mse"], rel=1e-6)


# --------------------------------------------------------------------------------- reports


def test_report_frame_shape_columns_and_pivots() -> None:
    pred, true = random_pair((6, 4, 3), seed=9, away_from_zero=True)  # N=6, P=4, C=3
    samples = np.random.default_rng(9).normal(size=(20, 6, 4, 3))
    original = metrics.point_summary(pred, true).combine(metrics.probabilistic_summary(samples, true))
    standardized = metrics.point_summary(pred / 2, true / 2)
    frame = metrics.report({"original": original, "standardized": standardized}, variables=["a", "b", "OT"])
    assert list(frame.columns) == ["scale", "metric", "horizon", "variable", "value", "n_windows"]
    rows_per_metric = 1 + 4 + 3  # overall, P horizons, C variables
    assert len(frame) == (8 + 3) * rows_per_metric  # MAPE and MSPE in original units only
    assert set(frame.loc[frame["metric"].isin(["mape", "mspe"]), "scale"]) == {"original"}
    assert list(dict.fromkeys(frame["scale"])) == ["standardized", "original"]  # report order
    assert (frame["n_windows"] == 6).all()
    overall = frame[(frame["horizon"] == "all") & (frame["variable"] == "all")]
    assert len(overall) == 11
    row = frame[(frame["scale"] == "original") & (frame["metric"] == "mae") & (frame["horizon"] == 2)]
    assert row["value"].item() == pytest.approx(metrics.mae(pred, true, by="horizon")[1])
    row = frame[(frame["scale"] == "original") & (frame["metric"] == "mse") & (frame["variable"] == "OT")]
    assert row["value"].item() == pytest.approx(metrics.mse(pred, true, by="variable")[2])

    table = metrics.pivot_report(frame)
    assert list(table.columns) == ["standardized", "original"]
    assert list(table.index) == [*metrics.POINT_METRICS, "rho_risk_0.5", "rho_risk_0.9", "coverage_0.8"]
    assert table.loc["mse", "standardized"] == pytest.approx(metrics.mse(pred, true) / 4)
    assert np.isnan(table.loc["rho_risk_0.5", "standardized"])  # not computed on that scale
    assert np.isnan(table.loc["mape", "standardized"]) and table.loc["mape", "original"] == pytest.approx(
        metrics.mape(pred, true))
    assert table.attrs["n_windows"] == 6
    per_step = metrics.horizon_table(frame, "original")
    assert list(per_step.index) == [1, 2, 3, 4] and per_step.index.dtype == np.int64
    np.testing.assert_allclose(per_step["rmse"].to_numpy(), metrics.rmse(pred, true, by="horizon"))
    default_names = metrics.report({"original": standardized})
    assert sorted(set(default_names["variable"])) == ["0", "1", "2", "all"]


def test_report_and_summary_validation() -> None:
    pred, true = random_pair((2, 3, 2), seed=4, away_from_zero=True)
    summary = metrics.point_summary(pred, true)
    with pytest.raises(ConfigError, match="Unknown scales"):
        metrics.report({"raw": summary})
    with pytest.raises(ConfigError, match="2 variables"):
        metrics.report({"original": summary}, variables=["only_one"])
    with pytest.raises(ConfigError, match="reserved"):
        metrics.report({"original": summary}, variables=["x", "all"])
    with pytest.raises(DataError, match="sharing metrics"):
        summary.combine(summary)
    with pytest.raises(DataError, match="Not a report frame"):
        metrics.pivot_report(pd.DataFrame({"metric": ["mse"]}))
    with pytest.raises(DataError, match="no per-horizon rows"):
        metrics.horizon_table(metrics.report({"original": summary}), "standardized")


def test_summaries_of_badly_shaped_arrays_name_the_type_the_user_passed() -> None:
    """2-D numpy input was told "must be a non-empty torch tensor ... got Tensor": the converted type, not theirs."""
    flat = np.ones((4, 3))
    for call in (lambda: metrics.point_summary(flat, flat), lambda: metrics.probabilistic_summary(flat, flat)):
        with pytest.raises(DataError, match=r"must be a non-empty numpy array or torch tensor shaped \[N, P, C\]; "
                                            r"got ndarray of shape \(4, 3\)"):
            call()
    with pytest.raises(DataError, match=r"samples must be .* shaped \[S, N, P, C\]; got ndarray of shape \(4, 3, 1"):
        metrics.probabilistic_summary(np.ones((4, 3, 1)), np.ones((4, 3, 1)))


def test_levels_that_one_metric_name_would_show_alike_are_refused():
    """rhos 0.1234567 and 0.1234568 both made 'rho_risk_0.123457': the summary kept one value and dropped the other."""
    rng = np.random.default_rng(0)
    samples, true = rng.normal(size=(20, 3, 2, 2)), rng.normal(size=(3, 2, 2))
    with pytest.raises(ConfigError, match=r"differ only after their sixth significant digit"):
        metrics.probabilistic_summary(samples, true, rhos=(0.1234567, 0.1234568), levels=())
    with pytest.raises(ConfigError, match=r"levels=\(0\.8, 0\.80000001\)"):
        metrics.ProbabilisticAccumulator(levels=(0.8, 0.80000001))


def test_point_summary_applies_the_zero_policy_and_eps_it_is_given():
    true = np.array([[[0.0], [1e-9], [2.0]]])  # one window, P=3, C=1: an exact zero and a near-zero truth
    pred = np.array([[[1.0], [1.0], [3.0]]])
    assert math.isnan(metrics.point_summary(pred, true, zeros="nan").overall["mape"])
    assert metrics.point_summary(pred, true, eps=1e-6).overall["mape"] == 0.5  # both near-zeros left out
    assert metrics.point_summary(pred, true, eps=1e-6).n_zero_truth == 2


def test_combine_keeps_the_zero_truth_count_whichever_summary_holds_it():
    true = np.array([[[0.0], [2.0]]])
    pred = np.array([[[1.0], [3.0]]])
    point = metrics.point_summary(pred, true)
    probabilistic = metrics.probabilistic_summary(np.stack([pred, pred + 1]), true)
    assert point.n_zero_truth == 1
    assert probabilistic.combine(point).n_zero_truth == point.combine(probabilistic).n_zero_truth == 1
