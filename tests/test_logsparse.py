"""LogSparse Transformer: contract, causality, sparse = dense, heads, sampling, training."""

from __future__ import annotations

import itertools
import math

import lightning as L
import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from forecast.data import WindowDataModule
from forecast.errors import ConfigError, DataError
from forecast.layers.attention import CausalConv1dProjection, LogSparseWeights
from forecast.models import (
    MODELS,
    DataSpec,
    Informer,
    InformerConfig,
    LogSparseConfig,
    LogSparseTransformer,
    build_model,
)
from forecast.models.base import WindowDraws
from forecast.models.logsparse_rollout import Rollout
from forecast.module import ForecastModule
from forecast.training import lightning_warnings

TINY = dict(d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0)
LAYOUTS = {"M": (3, 3), "S": (1, 1), "MS": (3, 1)}  # features -> (c_in, c_out)
MODES = list(itertools.product(["one_shot", "autoregressive"], ["point", "gaussian"], ["independent", "joint"]))


@pytest.fixture(autouse=True, scope="module")
def one_intra_op_thread():
    """Tiny tensors gain nothing from intra-op threads, and on a shared CPU oversubscribed threads
    made this file about ten times slower. Restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def spec(features: str = "M", seq_len: int = 32, label_len: int = 16, pred_len: int = 8, **overrides) -> DataSpec:
    c_in, c_out = LAYOUTS[features]
    return DataSpec(seq_len=seq_len, label_len=label_len, pred_len=pred_len, c_in=c_in, c_out=c_out,
                    n_time_features=4, **overrides)


def model_for(s: DataSpec, seed: int = 0, **options) -> LogSparseTransformer:
    torch.manual_seed(seed)
    return LogSparseTransformer(s, LogSparseConfig(**{**TINY, "sub_len": 8, **options}))


def inputs(s: DataSpec, batch_size: int = 3, seed: int = 0, dtype: torch.dtype = torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch_size, s.seq_len, s.c_in, generator=g, dtype=dtype)
    x_mark = torch.rand(batch_size, s.seq_len, s.n_time_features, generator=g, dtype=dtype) - 0.5
    y_mark = torch.rand(batch_size, s.label_len + s.pred_len, s.n_time_features, generator=g, dtype=dtype) - 0.5
    return x, x_mark, y_mark


def future_values(s: DataSpec, batch_size: int = 3, seed: int = 1, dtype: torch.dtype = torch.float32):
    return torch.randn(batch_size, s.pred_len, s.c_in, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def as_batch(s: DataSpec, x, x_mark, y_mark, future) -> dict[str, torch.Tensor]:
    y = torch.cat([x[:, s.seq_len - s.label_len:], future], dim=1)  # [B, label_len + P, C]
    return {"x": x, "y": y, "x_mark": x_mark, "y_mark": y_mark}


def objective(model: LogSparseTransformer, s: DataSpec, x, x_mark, y_mark, future) -> torch.Tensor:
    return model.loss(as_batch(s, x, x_mark, y_mark, future))


# ------------------------------------------------------------------------------- contract


@pytest.mark.parametrize("features", ["M", "S", "MS"])
@pytest.mark.parametrize("decoding, head, channels", MODES)
def test_shapes_and_api_match_informer(features, decoding, head, channels):
    s = spec(features)
    model = model_for(s, decoding=decoding, head=head, channels=channels)
    informer = Informer(s, InformerConfig(d_model=16, n_heads=2, d_ff=32, e_layers=1, d_layers=1, factor=2))
    x, x_mark, y_mark = inputs(s)
    out = model(x, x_mark, y_mark)
    assert out.shape == informer(x, x_mark, y_mark).shape == (3, s.pred_len, s.c_out)
    assert torch.isfinite(out).all()
    objective(model, s, x, x_mark, y_mark, future_values(s)).backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_registry_builds_it_and_refuses_foreign_options():
    assert "logsparse" in MODELS
    s = spec("MS", seq_len=24, label_len=12, pred_len=6)
    model = build_model("logsparse", s, d_model=16, n_heads=2, qk_kernel_size=6, local_window=2, sub_len=6)
    assert isinstance(model, LogSparseTransformer)
    assert model(*inputs(s)).shape == (3, 6, 1)
    with pytest.raises(ConfigError, match="factor"):
        build_model("logsparse", s, factor=2)


def test_loss_is_the_given_point_loss_one_shot_and_the_models_own_objective_otherwise():
    s = spec("MS")
    x, x_mark, y_mark = inputs(s)
    batch = as_batch(s, x, x_mark, y_mark, future_values(s))
    target = batch["y"][:, -s.pred_len:, -s.c_out:]  # [B, P, C_out]
    point = model_for(s, decoding="one_shot", head="point").eval()
    torch.testing.assert_close(point.loss(batch, F.l1_loss), F.l1_loss(point(x, x_mark, y_mark), target))
    gaussian = model_for(s, decoding="one_shot", head="gaussian").eval()
    prediction = gaussian.step_outputs(x, x_mark, y_mark)
    nll = -torch.distributions.Normal(prediction.mean[:, -s.pred_len:], prediction.scale[:, -s.pred_len:]).log_prob(target)
    torch.testing.assert_close(gaussian.loss(batch, F.l1_loss), nll.mean())  # the likelihood, whatever loss_fn
    # Autoregressive: each step teacher-forced, from step 1 (step 0 has no previous value) to the horizon's end;
    # with RevIN the horizon's steps only (the window's own are normalized by statistics of the values they forecast).
    future = batch["y"][:, -s.pred_len:]
    series = torch.cat([x, future], dim=1)[:, :, -s.c_out:]  # [B, L + P, C_out]
    for revin, first in ((False, 1), (True, s.seq_len)):
        teacher_forced = model_for(s, decoding="autoregressive", head="point", revin=revin).eval()
        means = teacher_forced.step_outputs(x, x_mark, y_mark, future=future).mean  # [B, L + P, C_out]
        torch.testing.assert_close(teacher_forced.loss(batch, F.l1_loss),
                                   F.l1_loss(means[:, first:], series[:, first:]))
    assert (point.calibratable, gaussian.calibratable) == (False, True)
    assert not model_for(s, decoding="autoregressive", head="gaussian").calibratable


@pytest.mark.parametrize("decoding, head, channels", MODES)
def test_outputs_are_batch_invariant_and_reproducible_in_eval_mode(decoding, head, channels):
    s = spec("MS")
    model = model_for(s, decoding=decoding, head=head, channels=channels).eval()
    x, x_mark, y_mark = inputs(s, batch_size=4)
    with torch.no_grad():
        together = model(x, x_mark, y_mark)
        one_by_one = torch.cat([model(x[i:i + 1], x_mark[i:i + 1], y_mark[i:i + 1]) for i in range(4)])
        torch.testing.assert_close(model(x, x_mark, y_mark), together, rtol=0, atol=0)
    torch.testing.assert_close(together, one_by_one, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("encoding", ["fixed", "learned"])
def test_calendar_embeddings_take_table_sizes_from_the_data(encoding):
    sizes = (13, 32, 7, 24)
    s = spec("M", time_encoding=encoding, time_feature_sizes=sizes)
    model = model_for(s)
    x, _, _ = inputs(s)
    x_mark = torch.stack([torch.randint(0, n, (3, s.seq_len)) for n in sizes], -1).float()
    y_mark = torch.stack([torch.randint(0, n, (3, s.label_len + s.pred_len)) for n in sizes], -1).float()
    assert model(x, x_mark, y_mark).shape == (3, s.pred_len, 3)


@pytest.mark.parametrize("bad, message", [
    (dict(sub_len=1), "sub_len"),
    (dict(local_window=-1), "local_window"),
    (dict(d_model=10, n_heads=3), "multiple of n_heads"),
    (dict(decoding="beam"), "decoding"),
    (dict(head="quantile"), "head"),
    (dict(channels="mixed"), "channels"),
    (dict(attention="prob"), "attention"),
    (dict(attention="full", sub_len=8), "attention='full'"),
    (dict(dropout=1.0), "dropout"),
    (dict(qk_kernel_size=0), "qk_kernel_size"),
    (dict(min_scale=0.0), "min_scale"),
    (dict(n_layers=True), "n_layers"),
])
def test_config_rejects_bad_settings(bad, message):
    with pytest.raises(ConfigError, match=message):
        LogSparseConfig(**bad)


def test_inputs_of_the_wrong_shape_raise_data_errors():
    s = spec("M")
    model = model_for(s)
    x, x_mark, y_mark = inputs(s)
    with pytest.raises(DataError, match="x has shape"):
        model(x[:, 1:], x_mark, y_mark)
    with pytest.raises(DataError, match="x_mark"):
        model(x, x_mark[..., :2], y_mark)
    with pytest.raises(DataError, match="y_mark"):
        model(x, x_mark, y_mark[:, :3])


# ------------------------------------------------------------------------------ causality


def _causality_cases():
    return [
        dict(channels="independent", qk_kernel_size=3),
        dict(channels="joint", qk_kernel_size=6),
        dict(channels="independent", qk_kernel_size=1, local_window=2, sub_len=None),
        dict(channels="joint", qk_kernel_size=3, attention="full", sub_len=None),
        dict(channels="independent", qk_kernel_size=9, dense_reference=True),
    ]


@pytest.mark.parametrize("options", _causality_cases())
def test_no_output_depends_on_its_own_or_later_steps(options):
    """Output at token t (the forecast of step t) has exactly zero gradient from values at steps >= t
    and from calendar features after t, through the whole model (embedding, conv Q/K, attention, heads)."""
    s = spec("MS", seq_len=24, label_len=8, pred_len=8)
    model = model_for(s, head="gaussian", **options)
    x, x_mark, y_mark = (t.requires_grad_() for t in inputs(s))
    future = future_values(s).requires_grad_()
    prediction = model.step_outputs(x, x_mark, y_mark, future=future)
    per_token = prediction.mean + prediction.scale  # [B, T, C_out]
    for position in (1, 5, 17, 23, 24, 28, 31):
        grads = torch.autograd.grad(per_token[:, position].sum(), (x, future, x_mark, y_mark), retain_graph=True)
        values_grad = torch.cat(grads[:2], dim=1)  # [B, T, C_in]
        marks_grad = torch.cat([grads[2], grads[3][:, -s.pred_len:]], dim=1)  # [B, T, F]
        assert torch.count_nonzero(values_grad[:, position:]) == 0
        assert torch.count_nonzero(marks_grad[:, position + 1:]) == 0
        assert torch.count_nonzero(grads[3][:, :-s.pred_len]) == 0  # label part of y_mark is never read
        # ... while the step just before (values) and the step itself (marks) do matter.
        assert values_grad[:, position - 1].abs().sum() > 0
        assert marks_grad[:, position].abs().sum() > 0


@pytest.mark.parametrize("decoding", ["one_shot", "autoregressive"])
def test_forecast_of_a_horizon_step_ignores_later_calendar_features(decoding):
    s = spec("MS")
    model = model_for(s, decoding=decoding).eval()
    x, x_mark, y_mark = inputs(s)
    with torch.no_grad():
        reference = model(x, x_mark, y_mark)
        for step in (0, 3, 6):
            changed = y_mark.clone()
            changed[:, y_mark.shape[1] - s.pred_len + step + 1:] += 1.0
            changed[:, : s.label_len] += 1.0  # duplicates of x_mark's last steps: not read
            out = model(x, x_mark, changed)
            torch.testing.assert_close(out[:, : step + 1], reference[:, : step + 1], rtol=0, atol=0)
            assert not torch.allclose(out[:, step + 1:], reference[:, step + 1:])
        assert not torch.allclose(model(x + 1.0, x_mark, y_mark), reference)


@pytest.mark.parametrize("channels", ["independent", "joint"])
def test_rollout_equals_teacher_forcing_on_its_own_forecast(channels):
    """Step j of the autoregressive forecast is the one-pass output given the forecast's own earlier steps
    (exogenous future values are unknown at inference, so their teacher-forced values must not matter)."""
    s = spec("MS")
    model = model_for(s, decoding="autoregressive", channels=channels, qk_kernel_size=3).eval()
    x, x_mark, y_mark = inputs(s)
    with torch.no_grad():
        forecast = model(x, x_mark, y_mark)  # [B, P, 1]
        future = torch.cat([future_values(s)[..., :-1], forecast], dim=-1)  # random exogenous, forecast target
        teacher_forced = model.step_outputs(x, x_mark, y_mark, future=future).mean[:, s.seq_len:]
        one_shot = model.step_outputs(x, x_mark, y_mark).mean[:, s.seq_len:]
    torch.testing.assert_close(teacher_forced, forecast, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(one_shot[:, 0], forecast[:, 0])  # the first step reads the window only
    assert not torch.allclose(one_shot[:, 1:], forecast[:, 1:])  # placeholders are not fed-back values


def test_placeholders_are_not_observed_zeros():
    s = spec("S")
    model = model_for(s).eval()
    x, x_mark, y_mark = inputs(s)
    with torch.no_grad():
        placeholders = model.step_outputs(x, x_mark, y_mark).mean
        zeros = model.step_outputs(x, x_mark, y_mark, future=torch.zeros(3, s.pred_len, 1)).mean
    torch.testing.assert_close(placeholders[:, : s.seq_len + 1], zeros[:, : s.seq_len + 1])
    assert not torch.allclose(placeholders[:, s.seq_len + 1:], zeros[:, s.seq_len + 1:])


# -------------------------------------------------------------------- variables and series


def test_series_id_embedding_gets_gradient_and_moves_only_its_series():
    s = spec("M")
    model = model_for(s, channels="independent")
    x, x_mark, y_mark = inputs(s)
    objective(model, s, x, x_mark, y_mark, future_values(s)).backward()
    grad = model.series_embedding.weight.grad  # [C_out, D]
    assert grad.shape == (3, 16) and bool((grad.abs().sum(dim=1) > 0).all())
    model.eval()
    with torch.no_grad():
        reference = model(x, x_mark, y_mark)
        model.series_embedding.weight[1] += torch.randn(16)  # not a constant: LayerNorm removes those
        moved = model(x, x_mark, y_mark)
    torch.testing.assert_close(moved[..., [0, 2]], reference[..., [0, 2]], rtol=0, atol=0)
    assert not torch.allclose(moved[..., 1], reference[..., 1])


def test_series_embedding_is_optional_and_absent_in_joint_mode():
    assert model_for(spec("M"), series_embedding=False).series_embedding is None
    assert model_for(spec("M"), channels="joint").series_embedding is None


def test_independent_channels_do_not_mix_but_exogenous_inputs_reach_the_target():
    model_m = model_for(spec("M"), channels="independent").eval()
    x, x_mark, y_mark = inputs(spec("M"))
    changed = x.clone()
    changed[:, :, 0] += 1.0
    with torch.no_grad():
        reference, out = model_m(x, x_mark, y_mark), model_m(changed, x_mark, y_mark)
    torch.testing.assert_close(out[..., 1:], reference[..., 1:], rtol=0, atol=0)
    assert not torch.allclose(out[..., 0], reference[..., 0])
    model_ms = model_for(spec("MS"), channels="independent").eval()
    with torch.no_grad():
        assert not torch.allclose(model_ms(changed, x_mark, y_mark), model_ms(x, x_mark, y_mark))


# ---------------------------------------------------------------------- sparse = dense


@pytest.mark.parametrize("seq_len, pred_len, local_window, sub_len", [
    (32, 8, 0, None), (32, 8, 0, 8), (24, 9, 2, 6), (40, 24, 3, 16), (17, 5, 1, None),
])
@pytest.mark.parametrize("channels", ["independent", "joint"])
def test_sparse_fast_path_matches_the_dense_reference(seq_len, pred_len, local_window, sub_len, channels):
    s = spec("MS", seq_len=seq_len, label_len=seq_len // 2, pred_len=pred_len)
    options = dict(local_window=local_window, sub_len=sub_len, channels=channels, head="gaussian",
                   decoding="autoregressive", qk_kernel_size=3)
    fast = model_for(s, **options).double()
    dense = model_for(s, seed=1, **options, dense_reference=True).double()
    dense.load_state_dict(fast.state_dict())
    x, x_mark, y_mark = inputs(s, dtype=torch.float64)
    batch = as_batch(s, x, x_mark, y_mark, future_values(s, dtype=torch.float64))
    losses = [model.loss(batch) for model in (fast, dense)]
    for loss in losses:
        loss.backward()
    torch.testing.assert_close(losses[0], losses[1], rtol=1e-10, atol=1e-12)
    for (name, p_fast), p_dense in zip(fast.named_parameters(), dense.parameters()):
        torch.testing.assert_close(p_fast.grad, p_dense.grad, rtol=1e-9, atol=1e-11, msg=name)
    with torch.no_grad():
        torch.testing.assert_close(fast(x, x_mark, y_mark), dense(x, x_mark, y_mark), rtol=1e-10, atol=1e-12)


def test_full_attention_ablation_equals_a_log_sparse_pattern_that_sees_everything():
    s = spec("M")
    full = model_for(s, attention="full", sub_len=None).eval()
    everything = model_for(s, local_window=s.seq_len + s.pred_len, sub_len=None).eval()
    everything.load_state_dict(full.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(full(*inputs(s)), everything(*inputs(s)), rtol=1e-5, atol=1e-6)


def test_attention_weights_are_causal_per_layer():
    s = spec("S", seq_len=16, label_len=8, pred_len=4)
    weights = model_for(s, sub_len=None).attention_weights(*inputs(s))
    assert len(weights) == 2 and all(isinstance(w, LogSparseWeights) for w in weights)
    dense = weights[0].to_dense()  # [B, H, T, T]
    assert dense.shape == (3, 2, 20, 20)
    assert torch.count_nonzero(dense.triu(diagonal=1)) == 0
    torch.testing.assert_close(dense.sum(-1), torch.ones(3, 2, 20))


# ------------------------------------------------------------------------ probabilistic API


def test_point_head_has_no_distribution():
    s = spec("S")
    model = model_for(s, head="point")
    assert not model.probabilistic and model_for(s, head="gaussian").probabilistic
    with pytest.raises(ConfigError, match="head='gaussian'"):
        model.sample(*inputs(s), n_samples=4)
    with pytest.raises(ConfigError, match="head='gaussian'"):
        model.quantiles(*inputs(s))
    with pytest.raises(ConfigError, match="levels"):
        model_for(s, head="gaussian").quantiles(*inputs(s), levels=(0.1, 1.0))


def test_autoregressive_samples_are_ancestral_paths():
    """Path step j = its teacher-forced mean + scale * the j-th draw: each path feeds back its own draws."""
    s = spec("S", pred_len=5)
    model = model_for(s, decoding="autoregressive", head="gaussian").eval()
    x, x_mark, y_mark = inputs(s, batch_size=2)
    n_samples = 4
    with torch.no_grad():
        paths = model.sample(x, x_mark, y_mark, n_samples, generator=torch.Generator().manual_seed(7))
        again = model.sample(x, x_mark, y_mark, n_samples, torch.Generator().manual_seed(7))
        other = model.sample(x, x_mark, y_mark, n_samples, generator=torch.Generator().manual_seed(8))
        chunked = model.sample(x, x_mark, y_mark, n_samples, torch.Generator().manual_seed(7), chunk_size=3)
        assert paths.shape == chunked.shape == (n_samples, 2, 5, 1)
        torch.testing.assert_close(again, paths, rtol=0, atol=0)
        assert not torch.allclose(other, paths)
        repeated = [t.repeat(n_samples, 1, 1) for t in (x, x_mark, y_mark)]  # [S*B, ...]
        forced = model.step_outputs(*repeated, future=paths.reshape(n_samples * 2, 5, 1))
        residual = (paths.reshape(n_samples * 2, 5, 1) - forced.mean[:, -5:]) / forced.scale[:, -5:]
    draws = WindowDraws(s, x, x_mark, y_mark, torch.Generator().manual_seed(7))
    noise = draws.normal(n_samples, 5, 1)  # [S, B, P, 1]
    torch.testing.assert_close(residual, noise.reshape(n_samples * 2, 5, 1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("features, options", [
    pytest.param("M", dict(decoding="autoregressive", head="gaussian"), id="autoregressive-independent-M"),
    pytest.param("MS", dict(decoding="autoregressive", head="gaussian", channels="joint", revin=True),
                 id="autoregressive-joint-MS"),
    pytest.param("M", dict(decoding="one_shot", head="gaussian"), id="one-shot-M"),
    pytest.param("M", None, id="seasonal-naive-M"),
])
def test_a_windows_sample_paths_do_not_depend_on_its_batch(features, options):
    """Catches: one generator's draws spread over the batch in order (the sampler before WindowDraws), so a window's
    paths, and the quantiles evaluate() scores and predict() gives, changed with the batch size, the window's place
    in it and the windows beside it (a panel's q0.1 moved by up to 4.85 between two batchings)."""
    s = spec(features, pred_len=5)
    model = (model_for(s, **options) if options else build_model("seasonal_naive", s, season_length=4)).eval()
    x, x_mark, y_mark = inputs(s, batch_size=4)
    order = [2, 0, 3]  # the same windows: another batch size, another order, window 1 left out

    def paths(windows):
        return model.sample(x[windows], x_mark[windows], y_mark[windows], 6, torch.Generator().manual_seed(3))

    with torch.no_grad():
        whole, part, alone = paths([0, 1, 2, 3]), paths(order), paths([3])
    torch.testing.assert_close(part, whole[:, order], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(alone, whole[:, [3]], rtol=1e-5, atol=1e-5)
    assert not torch.allclose(whole[:, 0], whole[:, 1])  # the windows' draws are not one stream repeated
    twin = paths([0, 0])  # one window twice: the same paths (its dates seed its stream)
    torch.testing.assert_close(twin[:, 0], twin[:, 1], rtol=0, atol=0)


def test_one_shot_samples_and_quantiles_agree_with_the_predictive_gaussian():
    s = spec("M")
    model = model_for(s, head="gaussian").eval()
    x, x_mark, y_mark = inputs(s, batch_size=2)
    with torch.no_grad():
        mean = model(x, x_mark, y_mark)
        quantiles = model.quantiles(x, x_mark, y_mark, levels=(0.1, 0.5, 0.9))
        samples = model.sample(x, x_mark, y_mark, 4000, generator=torch.Generator().manual_seed(0))
    assert samples.shape == (4000, 2, s.pred_len, 3)
    torch.testing.assert_close(quantiles[0.5], mean)
    assert bool((quantiles[0.1] < quantiles[0.5]).all() and (quantiles[0.5] < quantiles[0.9]).all())
    empirical = torch.quantile(samples, torch.tensor([0.1, 0.9]), dim=0)
    spread = (quantiles[0.9] - quantiles[0.1]).max()
    torch.testing.assert_close(empirical[0], quantiles[0.1], rtol=0, atol=0.08 * spread.item())
    torch.testing.assert_close(empirical[1], quantiles[0.9], rtol=0, atol=0.08 * spread.item())


def test_gaussian_quantiles_are_finite_and_exact_at_extreme_levels():
    from statistics import NormalDist

    s = spec("S")
    model = model_for(s, head="gaussian").eval()
    x, x_mark, y_mark = inputs(s, batch_size=2)
    levels = (1e-9, 1e-7, 0.5, 1 - 1e-8)  # 1 - 1e-8 is 1.0 in float32, whose icdf is inf
    with torch.no_grad():
        quantiles = model.quantiles(x, x_mark, y_mark, levels=levels)
        prediction = model.step_outputs(x, x_mark, y_mark)
    mean, scale = prediction.mean[:, -s.pred_len:], prediction.scale[:, -s.pred_len:]
    for level in levels:
        assert bool(quantiles[level].isfinite().all()), level
        expected = mean.double() + scale.double() * NormalDist().inv_cdf(level)
        torch.testing.assert_close(quantiles[level].double(), expected, rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------- key/value cache (rollout)

# Cached and uncached rollouts run the same operations, but the CPU's matrix products pick
# their kernel by the matrix's size (one token alone against the full pass's B'*S rows), and
# a convolutional Q/K is one product over its k taps in a cached step: equal to rounding.
TOLERANCE = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-12, atol=1e-12)}

CACHE_CASES = [
    pytest.param("M", dict(head="point", qk_kernel_size=1), id="point-k1-M"),
    pytest.param("S", dict(head="point", qk_kernel_size=3, revin=True), id="point-k3-revin-S"),
    pytest.param("MS", dict(head="point", channels="joint", n_layers=3), id="point-joint-3layers-MS"),
    pytest.param("S", dict(head="gaussian", qk_kernel_size=1), id="gaussian-k1-S"),
    pytest.param("M", dict(head="gaussian", qk_kernel_size=3, revin=True, revin_affine=True), id="gaussian-k3-revin-M"),
    pytest.param("M", dict(head="gaussian", qk_kernel_size=3, sub_len=6, n_layers=3), id="gaussian-sub_len6-3layers-M"),
    pytest.param("MS", dict(head="gaussian", qk_kernel_size=6, local_window=2, sub_len=None),
                 id="gaussian-k6-window2-MS"),
    pytest.param("MS", dict(head="gaussian", local_window=1, sub_len=5, n_layers=1, revin=True),
                 id="gaussian-window1-sub_len5-1layer-revin-MS"),
    pytest.param("M", dict(head="gaussian", channels="joint", qk_kernel_size=1, series_embedding=False),
                 id="gaussian-joint-k1-M"),
    pytest.param("M", dict(head="gaussian", attention="full", sub_len=None), id="gaussian-full-attention-M"),
    pytest.param("S", dict(head="gaussian", dense_reference=True, qk_kernel_size=9), id="gaussian-dense-reference-S"),
]


def rollouts(model: LogSparseTransformer, x, x_mark, y_mark, cache: bool) -> dict[str, torch.Tensor]:
    """Everything the rollout serves: the point forecast and, for the Gaussian head, sample paths
    (all at once and in chunks) and quantiles, from fixed seeds."""
    model.kv_cache = cache
    out = {"forward": model(x, x_mark, y_mark)}
    if model.probabilistic:
        out["sample"] = model.sample(x, x_mark, y_mark, 3, generator=torch.Generator().manual_seed(5))
        out["chunked"] = model.sample(x, x_mark, y_mark, 3, torch.Generator().manual_seed(6), chunk_size=2)
        quantiles = model.quantiles(x, x_mark, y_mark, (0.1, 0.9), n_samples=4,
                                    generator=torch.Generator().manual_seed(7))
        out["quantiles"] = torch.stack(list(quantiles.values()))
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("features, options", CACHE_CASES)
def test_cached_rollout_equals_the_uncached_one(features, options, dtype):
    s = spec(features, seq_len=24, label_len=12, pred_len=8)
    model = model_for(s, decoding="autoregressive", **options).to(dtype).eval()
    model.scale_factor.fill_(1.7)  # a calibrated scale multiplies every draw's spread
    x, x_mark, y_mark = inputs(s, dtype=dtype)
    with torch.no_grad():
        cached, uncached = (rollouts(model, x, x_mark, y_mark, cache) for cache in (True, False))
    assert cached.keys() == uncached.keys()
    for name in cached:
        torch.testing.assert_close(cached[name], uncached[name], **TOLERANCE[dtype], msg=name)
    if model.probabilistic:  # the draws, not only the means, went through both
        assert not torch.allclose(cached["sample"][0], cached["forward"])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("prefix", [1, 5, 25])
@pytest.mark.parametrize("options", [
    dict(qk_kernel_size=3, sub_len=6, n_layers=3),
    dict(qk_kernel_size=6, local_window=2, sub_len=None, channels="joint"),
    dict(qk_kernel_size=2, attention="full", sub_len=None),
])
def test_cached_steps_give_the_full_pass_states_without_seeing_later_tokens(options, prefix, dtype):
    """Token t's state from the caches (which never receive a token after t) equals the full pass's
    state at t, layer stack and final LayerNorm included; and the full pass itself, the model
    without the cache, gives the same states up to t whatever the tokens after t are."""
    s = spec("MS", seq_len=24, label_len=12, pred_len=8)
    model = model_for(s, decoding="autoregressive", head="gaussian", **options).to(dtype).eval()
    x, x_mark, y_mark = inputs(s, dtype=dtype)
    with torch.no_grad():
        _, lagged, known, marks, series_ids = model.layout.tokens(x, x_mark, y_mark, future_values(s, dtype=dtype), model.revin)
        full, _ = model._hidden(lagged, known, marks, series_ids)  # [B', T, D]
        rollout = Rollout(model)
        hidden, cache = rollout.prefill(lagged[:, :prefix], known[:, :prefix], marks[:, :prefix], series_ids)
        states = [hidden]
        for position in range(prefix, lagged.shape[1]):
            states.append(rollout.step(lagged[:, position], known[:, position], marks[:, position], series_ids,
                                       position, cache))
        stepped = model.norm(torch.stack(states, dim=1))  # [B', T - prefix + 1, D]
        cut = 15
        later = torch.randn(lagged[:, cut + 1:].shape, generator=torch.Generator().manual_seed(3), dtype=dtype)
        changed = torch.cat([lagged[:, : cut + 1], later], dim=1)  # [B', T, V]
        changed_marks = torch.cat([marks[:, : cut + 1], marks[:, cut + 1:] + 1.0], dim=1)
        changed_full, _ = model._hidden(changed, known, changed_marks, series_ids)
    torch.testing.assert_close(stepped, full[:, prefix - 1:], **TOLERANCE[dtype])
    torch.testing.assert_close(changed_full[:, : cut + 1], full[:, : cut + 1], rtol=0, atol=0)
    assert not torch.allclose(changed_full[:, cut + 1:], full[:, cut + 1:])


@pytest.mark.parametrize("kernel_size", [1, 3, 6])
def test_a_causal_convolution_projects_its_last_step_from_its_receptive_field(kernel_size):
    """What a cached step's query and key come from: the last k inputs, no padding, one matrix product."""
    torch.manual_seed(0)
    projection = CausalConv1dProjection(8, 6, kernel_size).double()
    sequence = torch.randn(4, 10, 8, dtype=torch.float64)  # [B, L, D_in]
    last = projection.project_last(sequence[:, -kernel_size:])  # [B, D_out]
    torch.testing.assert_close(last, projection(sequence)[:, -1], rtol=1e-12, atol=1e-12)
    with pytest.raises(ConfigError, match="kernel_size"):
        projection.project_last(sequence[:, -kernel_size - 1:])


def test_forward_sample_and_quantiles_take_the_cached_path(monkeypatch):
    s = spec("S", seq_len=16, label_len=8, pred_len=4)
    model = model_for(s, decoding="autoregressive", head="gaussian").eval()
    assert model.kv_cache

    def refuse(*args, **kwargs):
        raise AssertionError("the uncached rollout ran")

    monkeypatch.setattr(Rollout, "_uncached", refuse)
    x, x_mark, y_mark = inputs(s, batch_size=2)
    with torch.no_grad():
        assert model(x, x_mark, y_mark).shape == (2, 4, 1)
        assert model.sample(x, x_mark, y_mark, 3).shape == (3, 2, 4, 1)
        assert model.quantiles(x, x_mark, y_mark, n_samples=3)[0.5].shape == (2, 4, 1)


def test_gradients_through_the_cached_rollout_equal_the_uncached_ones():
    """The cache's in-place writes (scores, weighted sums) keep autograd intact."""
    s = spec("MS", seq_len=16, label_len=8, pred_len=5)
    x, x_mark, y_mark = inputs(s, dtype=torch.float64)
    grads = {}
    for cache in (True, False):
        model = model_for(s, decoding="autoregressive", head="gaussian", revin=True).double().eval()
        model.kv_cache = cache
        paths = model.sample(x, x_mark, y_mark, 2, generator=torch.Generator().manual_seed(0))
        (model(x, x_mark, y_mark).square().sum() + paths.square().sum()).backward()
        grads[cache] = {name: p.grad for name, p in model.named_parameters()}
    for name, grad in grads[True].items():
        torch.testing.assert_close(grad, grads[False][name], rtol=1e-9, atol=1e-11, msg=name)


def test_cached_rollout_runs_in_training_mode_with_dropout():
    """In training mode each token's dropout masks are drawn once, when the token is computed."""
    s = spec("M", seq_len=16, label_len=8, pred_len=4)
    model = model_for(s, decoding="autoregressive", head="gaussian", dropout=0.5).train()
    x, x_mark, y_mark = inputs(s)
    torch.manual_seed(0)
    first = model.sample(x, x_mark, y_mark, 2, generator=torch.Generator().manual_seed(0))
    second = model.sample(x, x_mark, y_mark, 2, generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(first).all() and not torch.allclose(first, second)  # the masks differ between calls
    first.sum().backward()
    assert all(p.grad is not None for p in model.blocks.parameters())


# ---------------------------------------------------------------------- learning the noise

SIGMA, PERIOD = 0.3, 24


def noisy_sine_windows(s: DataSpec, starts: torch.Tensor, seed: int = 0) -> dict[str, torch.Tensor]:
    """Windows of ``sin(2 pi t / 24) + 0.3 * noise`` with the phase as the two calendar features."""
    steps = 3000
    phase = 2 * math.pi * torch.arange(steps) / PERIOD
    series = torch.sin(phase) + SIGMA * torch.randn(steps, generator=torch.Generator().manual_seed(seed))
    marks = 0.5 * torch.stack([torch.sin(phase), torch.cos(phase)], dim=-1)  # [steps, 2]
    index = starts[:, None] + torch.arange(s.seq_len + s.pred_len)  # [N, L + P]
    values, window_marks = series[index].unsqueeze(-1), marks[index]  # [N, L + P, 1], [N, L + P, 2]
    first = s.seq_len - s.label_len
    return {"x": values[:, : s.seq_len], "y": values[:, first:],
            "x_mark": window_marks[:, : s.seq_len], "y_mark": window_marks[:, first:]}


@pytest.fixture(scope="module", params=["autoregressive", "one_shot"])
def trained_on_noisy_sine(request):
    s = DataSpec(seq_len=32, label_len=16, pred_len=8, c_in=1, c_out=1, n_time_features=2)
    model = model_for(s, head="gaussian", decoding=request.param)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    draws = torch.Generator().manual_seed(0)
    for _ in range(100):
        batch = noisy_sine_windows(s, torch.randint(0, 2000 - 40, (32,), generator=draws))
        loss = model.loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return s, model.eval()


def test_gaussian_head_learns_the_noise_level(trained_on_noisy_sine):
    s, model = trained_on_noisy_sine
    held_out = noisy_sine_windows(s, torch.arange(2000, 2950, 7))  # after every training window
    with torch.no_grad():
        scale = model.step_outputs(held_out["x"], held_out["x_mark"], held_out["y_mark"]).scale
    assert scale[:, s.seq_len:].mean().item() == pytest.approx(SIGMA, rel=0.2)


def test_nominal_80_percent_intervals_cover_about_80_percent(trained_on_noisy_sine):
    s, model = trained_on_noisy_sine
    held_out = noisy_sine_windows(s, torch.arange(2000, 2950, 40))  # 24 windows x 8 steps
    with torch.no_grad():
        quantiles = model.quantiles(held_out["x"], held_out["x_mark"], held_out["y_mark"], levels=(0.1, 0.9),
                                    n_samples=50, generator=torch.Generator().manual_seed(1))
    truth = held_out["y"][:, -s.pred_len:]
    covered = ((truth >= quantiles[0.1]) & (truth <= quantiles[0.9])).float().mean().item()
    assert 0.70 <= covered <= 0.90


# ------------------------------------------------------------------------- ForecastModule


def sine_frame(rows: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    t = np.arange(rows)
    return pd.DataFrame({
        "date": pd.date_range("2021-01-01", periods=rows, freq="h"),
        "a": np.sin(2 * np.pi * t / 24) + 0.1 * rng.standard_normal(rows),
        "OT": np.cos(2 * np.pi * t / 12) * 3 + 10 + 0.1 * rng.standard_normal(rows),
    })


@pytest.mark.parametrize("features, decoding, head",
                         [("M", "one_shot", "point"), ("MS", "autoregressive", "gaussian")])
def test_forecast_module_fits_and_scores_every_test_window(features, decoding, head):
    dm = WindowDataModule(sine_frame(), seq_len=32, label_len=16, pred_len=8, features=features, batch_size=8)
    dm.setup()
    model = model_for(DataSpec.from_fitted(dm.fitted), decoding=decoding, head=head)
    before = [p.detach().clone() for p in model.parameters()]
    module = ForecastModule(model, learning_rate=1e-3, lr_schedule="none")
    trainer = L.Trainer(max_epochs=1, limit_train_batches=2, limit_val_batches=1, enable_progress_bar=False,
                        enable_model_summary=False, logger=False, enable_checkpointing=False)
    with lightning_warnings():  # the calls' warnings the library leaves out too
        trainer.fit(module, datamodule=dm)
        assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
        metrics = trainer.test(module, datamodule=dm, verbose=False)[0]
    assert metrics["test_windows"] == len(dm.test_dataset)
    assert math.isfinite(metrics["test_mse"])


# -- calibrating the Gaussian scale on held-out windows ---------------------------------------------


def held_out_batches(s: DataSpec, n_batches: int = 3, noise: float = 3.0) -> list[dict[str, torch.Tensor]]:
    """Windows whose future is far noisier than an untrained model's scale says."""
    g = torch.Generator().manual_seed(7)
    batches = []
    for _ in range(n_batches):
        x = torch.randn(4, s.seq_len, s.c_in, generator=g)
        y = torch.cat([x[:, -s.label_len:], noise * torch.randn(4, s.pred_len, s.c_in, generator=g)], dim=1)
        marks = torch.rand(4, s.seq_len + s.pred_len, s.n_time_features, generator=g) - 0.5
        batches.append({"x": x, "y": y, "x_mark": marks[:, :s.seq_len], "y_mark": marks[:, s.seq_len - s.label_len:]})
    return batches


def coverage(model: LogSparseTransformer, batches: list[dict[str, torch.Tensor]]) -> float:
    inside, total = 0, 0
    with torch.no_grad():
        for batch in batches:
            q = model.quantiles(batch["x"], batch["x_mark"], batch["y_mark"], (0.1, 0.9))
            target = batch["y"][:, -model.spec.pred_len:, model.layout.n_exogenous:]
            inside += int(((target >= q[0.1]) & (target <= q[0.9])).sum())
            total += target.numel()
    return inside / total


@pytest.mark.parametrize("features, revin", [("M", False), ("MS", True)])
def test_calibrated_scale_covers_the_calibration_windows_as_promised(features, revin):
    s = spec(features)
    model = model_for(s, head="gaussian", revin=revin).eval()
    batches = held_out_batches(s)
    before = coverage(model, batches)
    factor = model.calibrate_scale(batches, coverage=0.8)
    assert before < 0.6 and factor > 1  # too narrow for this noise, so widened
    assert float(model.scale_factor) == pytest.approx(factor)
    assert coverage(model, batches) == pytest.approx(0.8, abs=1 / (len(batches) * 4 * s.pred_len * s.c_out) + 1e-9)
    with torch.no_grad():  # the mean (the point forecast) is untouched
        point = model(batches[0]["x"], batches[0]["x_mark"], batches[0]["y_mark"])
        model.scale_factor.fill_(1.0)
        torch.testing.assert_close(model(batches[0]["x"], batches[0]["x_mark"], batches[0]["y_mark"]), point)


def test_the_calibrated_scale_covers_the_observed_cells_and_ignores_the_filled_ones():
    s = spec()
    model = model_for(s, head="gaussian").eval()
    batches = held_out_batches(s)
    g = torch.Generator().manual_seed(5)
    for batch in batches:  # half the horizon's cells made up by fill_nan, with wild values there
        target = batch["y"][:, -s.pred_len:]
        filled = torch.rand(target.shape, generator=g) < 0.5
        batch["truth"] = target.masked_fill(filled, math.nan)
        target.masked_fill_(filled, 1e3)
    model.calibrate_scale(batches, coverage=0.8)
    inside = total = 0
    with torch.no_grad():
        for batch in batches:
            q = model.quantiles(batch["x"], batch["x_mark"], batch["y_mark"], (0.1, 0.9))
            observed = ~batch["truth"].isnan()
            target = batch["y"][:, -s.pred_len:]
            inside += int(((target >= q[0.1]) & (target <= q[0.9]) & observed).sum())
            total += int(observed.sum())
    assert inside / total == pytest.approx(0.8, abs=1 / total + 1e-9)


def test_the_recipe_fits_the_correction_first_and_the_scale_around_the_forecast_it_leaves():
    from forecast.training import TrainingConfig, calibrate_on_validation

    s = spec("MS")
    model = model_for(s, head="gaussian", revin=True, revin_center="last").eval()
    batches = held_out_batches(s)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():  # futures that the centre plus half the network's correction forecast best
        for batch in batches:
            inputs = (batch["x"], batch["x_mark"], batch["y_mark"])
            model.revin.correction_weight.fill_(0.0)
            center = model(*inputs)
            model.revin.correction_weight.fill_(1.0)
            half = center + 0.5 * (model(*inputs) - center)  # [B, P, 1]
            batch["y"][:, -s.pred_len:, -1:] = half + 0.02 * torch.randn(half.shape, generator=g)

    class Windows:
        def val_dataloader(self, sharded: bool = True):
            return batches

    with torch.no_grad():
        trained = model(batches[0]["x"], batches[0]["x_mark"], batches[0]["y_mark"])
    calibrate_on_validation(model, Windows(), TrainingConfig(calibrate_scale=True, calibrate_correction=True))
    with torch.no_grad():
        calibrated = model(batches[0]["x"], batches[0]["x_mark"], batches[0]["y_mark"])
    assert 0.3 < float(model.revin.correction_weight) < 0.7 and not torch.allclose(calibrated, trained)
    # The interval is fitted around the corrected mean: the promised coverage holds for the forecast kept.
    assert coverage(model, batches) == pytest.approx(0.8, abs=1 / (len(batches) * 4 * s.pred_len * s.c_out) + 1e-9)


def test_calibration_needs_a_one_shot_gaussian():
    s = spec()
    with pytest.raises(ConfigError, match="head='gaussian'"):
        model_for(s).calibrate_scale(held_out_batches(s))
    with pytest.raises(ConfigError, match="one_shot"):
        model_for(s, head="gaussian", decoding="autoregressive").calibrate_scale(held_out_batches(s))


def test_the_recipe_calibrates_on_validation_windows_only_when_asked(tmp_path):
    from forecast import Forecaster
    from forecast.experiment import Experiment, run_experiment

    t = np.arange(400)
    csv = tmp_path / "toy.csv"
    pd.DataFrame({"date": pd.date_range("2022-01-01", periods=400, freq="h"),
                  "OT": np.sin(t / 5.0) + np.random.default_rng(0).normal(0, 0.5, 400)}).to_csv(csv, index=False)
    rows, fitted = {}, {}
    for calibrate in (False, True):
        experiment = Experiment.from_recipe(
            "improved", "logsparse", {**TINY, "head": "gaussian"},
            {"max_epochs": 1, "limit_train_batches": 2, "calibrate_scale": calibrate},
            dataset=str(csv), features="S", seq_len=32, label_len=16, pred_len=8)
        rows[calibrate] = run_experiment(experiment, tmp_path / "results.csv", tmp_path / "runs", "test")
        fitted[calibrate] = Forecaster.load(tmp_path / "runs" / experiment.run_name())
    assert rows[True]["mse"] == pytest.approx(rows[False]["mse"])  # the same point forecast
    assert rows[True]["coverage_0.8"] != rows[False]["coverage_0.8"]
    assert float(fitted[False].model.scale_factor) == 1.0
    # Fitted on the validation windows: their exact 80% intervals cover 80% of them, to the grid of their steps.
    validation = fitted[True].evaluate(str(csv), windows="val")
    steps = validation.attrs["n_windows"] * 8
    assert validation.loc["coverage_0.8", "standardized"] == pytest.approx(0.8, abs=1 / steps + 1e-9)


def test_the_offset_softmax_equals_torch_softmax_and_its_gradient():
    from forecast.layers.attention.autograd import offset_softmax

    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(3, 7, 2, 5, generator=generator, dtype=torch.float64)
    scores[:, :3, :, 2:] = float("-inf")  # offsets before the sequence start: invalid
    scores.requires_grad_(True)
    reference = scores.detach().clone().requires_grad_(True)
    weights = offset_softmax(scores)
    expected = torch.softmax(reference, dim=-1)
    torch.testing.assert_close(weights, expected, rtol=1e-12, atol=1e-15)
    assert (weights[:, :3, :, 2:] == 0).all()
    upstream = torch.randn(weights.shape, generator=generator, dtype=torch.float64)
    (weights * upstream).sum().backward()
    (expected * upstream).sum().backward()
    torch.testing.assert_close(scores.grad, reference.grad, rtol=1e-10, atol=1e-12)
    finite = torch.randn(2, 3, 4, generator=generator, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(offset_softmax, (finite,))
    assert offset_softmax(torch.zeros(2, 3, dtype=torch.bfloat16)).dtype == torch.float32  # at least float32
