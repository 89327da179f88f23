"""The models' details the other model tests left unpinned: defaults, skips, token flags, cached rollouts, the
Gaussian floor and calibration, batch checks and the correction's terms (tiny models, CPU)."""

from __future__ import annotations

import pytest
import torch

from forecast.errors import ConfigError, DataError
from forecast.models import DataSpec, InformerConfig, LogSparseConfig, LogSparseTransformer, build_model
from forecast.models.base import least_squares_share
from forecast.models.dlinear import DLinear, DLinearConfig, moving_average
from forecast.models.logsparse_rollout import Rollout

LS_TINY = dict(d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0, sub_len=8)
INF_TINY = dict(d_model=16, n_heads=2, d_ff=32, e_layers=2, d_layers=1, dropout=0.0, factor=2)


def spec(c_in: int = 3, c_out: int = 3, seq_len: int = 32, label_len: int = 16, pred_len: int = 8, **kw) -> DataSpec:
    return DataSpec(seq_len=seq_len, label_len=label_len, pred_len=pred_len, c_in=c_in, c_out=c_out,
                    n_time_features=4, **kw)


def inputs(s: DataSpec, batch_size: int = 3, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch_size, s.seq_len, s.c_in, generator=g)
    x_mark = torch.rand(batch_size, s.seq_len, s.n_time_features, generator=g) - 0.5
    y_mark = torch.rand(batch_size, s.label_len + s.pred_len, s.n_time_features, generator=g) - 0.5
    return x, x_mark, y_mark


def test_logsparse_revin_teacher_forcing_normalizes_the_future_like_the_rollout():
    """Catches: teacher-forced ``future`` not normalized by the window's RevIN statistics.
    Under revin the rollout feeds back values in the normalized space, so teacher forcing on the rollout's own
    forecast (in data units) must reproduce it."""
    s = spec(3, 3)
    torch.manual_seed(0)
    model = LogSparseTransformer(s, LogSparseConfig(**LS_TINY, decoding="autoregressive", revin=True)).eval()
    x, x_mark, y_mark = inputs(s)
    x = x * 3.0 + 5.0  # a window far from the normalized scale
    with torch.no_grad():
        forecast = model(x, x_mark, y_mark)  # [B, P, C]
        teacher_forced = model.step_outputs(x, x_mark, y_mark, future=forecast).mean[:, s.seq_len:]
    torch.testing.assert_close(teacher_forced, forecast, rtol=1e-4, atol=1e-4)


def test_dlinear_default_moving_average_is_the_papers_25_steps():
    """Catches: ``kernel_size`` default 25 -> 23. The default model's trend is a 25-step moving average."""
    s = spec(1, 1, seq_len=48, label_len=0, pred_len=4)
    model = DLinear(s).eval()
    assert model.config.kernel_size == DLinearConfig().kernel_size == 25
    with torch.no_grad():
        model.seasonal.maps[0].weight.zero_()
        model.seasonal.maps[0].bias.zero_()
        model.trend.maps[0].bias.zero_()
        model.trend.maps[0].weight.zero_()
        model.trend.maps[0].weight[:, 24] = 1.0  # forecast = trend at step 24
    x, x_mark, y_mark = inputs(s)
    with torch.no_grad():
        out = model(x, x_mark, y_mark)  # [B, P, 1]
    expected = x[:, 12:37].mean(dim=1, keepdim=True)  # the 25 steps centred on step 24
    torch.testing.assert_close(out, expected.expand_as(out))
    torch.testing.assert_close(moving_average(x, 25)[:, 24:25], expected)


def test_reads_other_inputs_says_whether_the_other_inputs_move_the_forecast():
    """Catches: ``reads_other_inputs = True``. The flag (which ForecastModule reports) must agree with
    the model: under 'MS' the non-output inputs move the forecast exactly when it says so."""
    s = spec(3, 1, season=4)
    models = {"informer": INF_TINY, "dlinear": {}, "naive": {}, "seasonal_naive": {},
              "logsparse": {k: v for k, v in LS_TINY.items()}}
    x, x_mark, y_mark = inputs(s)
    moved = x.clone()
    moved[..., :-1] += 1.0  # the two inputs that are not outputs
    for name, options in models.items():
        torch.manual_seed(0)
        model = build_model(name, s, **options).eval()
        with torch.no_grad():
            reads = not torch.allclose(model(moved, x_mark, y_mark), model(x, x_mark, y_mark))
        assert model.reads_other_inputs == reads, name


def test_informer_attention_options_reach_the_encoders_family_only():
    """Catches: ``attention_options`` passed to every attention. They configure the encoder's family;
    the decoder's full self-attention and the full cross-attention take none (ProbSparse's ``factor`` would be
    refused there)."""
    s = spec(3, 3)
    model = build_model("informer", s, **{**INF_TINY, "decoder_attention": "full"}, attention_options={"factor": 3})
    assert model.encoders[0].layers[0].attention.attention.factor == 3
    assert model.eval()(*inputs(s)).shape == (3, s.pred_len, 3)


def test_logsparse_token_zero_has_no_known_previous_value():
    """Catches: token 0's lagged value (there is no step before the window) flagged known.
    Token t carries step t-1's value with a known flag; token 0's is a placeholder, never an observed zero."""
    s = spec(3, 1)
    torch.manual_seed(0)
    model = LogSparseTransformer(s, LogSparseConfig(**LS_TINY))
    x, x_mark, y_mark = inputs(s)
    _, lagged, known, _, _ = model.layout.tokens(x, x_mark, y_mark)  # [B', T, V]
    assert not known[:, 0].any() and not lagged[:, 0].any()
    assert known[:, 1: s.seq_len + 1].all()  # the window's steps, read by tokens 1..L
    assert not known[:, s.seq_len + 1:].any()  # the horizon's placeholders (one-shot)


def test_informers_linear_skip_reads_the_forecast_variables_own_window():
    """Catches: the skip reads ``x[..., :n_out]`` (under 'MS' the first covariate) instead of the
    forecast variables' inputs. With the network's projection zeroed and the skip picking the window's last step,
    the forecast is the target's last value, joint or channel-independent. (The existing test's
    ``not allclose(skipped, network)`` passes on this mutant when run after the rest of tests/test_models.py.)"""
    s = spec(3, 1)
    x, x_mark, y_mark = inputs(s)
    for channels in ("joint", "independent"):
        torch.manual_seed(0)
        model = build_model("informer", s, **INF_TINY, linear_skip=True, channels=channels).eval()
        with torch.no_grad():
            model.projection.weight.zero_()
            model.projection.bias.zero_()
            model.skip.linear.weight.zero_()
            model.skip.linear.weight[:, -1] = 1.0
            out = model(x, x_mark, y_mark)  # [B, P, 1]
        torch.testing.assert_close(out, x[:, -1:, -1:].expand_as(out))


def test_informer_refuses_a_y_mark_without_the_label_steps():
    """Catches: ``check_batch`` without ``y_mark_steps``. Informer's decoder embeds label_len + P steps
    of ``y_mark``: a y_mark of P steps must be a DataError naming it, not a shape error inside the embedding."""
    s = spec(3, 3)
    model = build_model("informer", s, **INF_TINY)
    x, x_mark, y_mark = inputs(s)
    with pytest.raises(DataError, match="y_mark"):
        model(x, x_mark, y_mark[:, s.label_len:])


def test_informers_cross_attention_reads_the_whole_encoder_memory():
    """Catches: causal cross-attention. Informer2020 builds it as ``FullAttention(False, ...)``: every
    decoder step reads every encoder step, so the first forecast step (decoder position 0 at label_len 0)
    moves with the memory's last step."""
    s = spec(3, 3, label_len=0)
    torch.manual_seed(0)
    model = build_model("informer", s, **INF_TINY).eval()
    x, x_mark, y_mark = inputs(s)
    encode = model._encode

    def shifted(*args, **kwargs):
        memory, weights = encode(*args, **kwargs)
        memory = memory.clone()
        memory[:, -1] += 3.0
        return memory, weights

    with torch.no_grad():
        plain = model(x, x_mark, y_mark)
        model._encode = shifted
        moved = model(x, x_mark, y_mark)
    assert not torch.allclose(plain[:, 0], moved[:, 0])
    assert model.decoder_layers[0].cross_attention.attention.causal is False


def test_every_decoder_layer_of_informer_is_applied():
    """Catches: only the first of ``d_layers`` decoder layers applied."""
    s = spec(3, 3)
    torch.manual_seed(0)
    model = build_model("informer", s, **{**INF_TINY, "d_layers": 2}).eval()
    inputs_ = inputs(s)
    with torch.no_grad():
        before = model(*inputs_)
        for parameter in model.decoder_layers[1].parameters():
            parameter.add_(0.5)
        after = model(*inputs_)
    assert not torch.allclose(before, after)


def test_informer_defaults_are_informer2020s_main_informer():
    """Catches: defaults factor 5 -> 3, dropout 0.05 -> 0.1, padding circular -> zeros. The docstring
    promises the paper's (Informer2020 main_informer.py: --factor 5, --dropout 0.05, TokenEmbedding's
    padding_mode='circular', d_model 512, n_heads 8, e_layers 2, d_layers 1, d_ff 2048, attn prob, distil)."""
    c = InformerConfig()
    assert (c.d_model, c.n_heads, c.e_layers, c.d_layers, c.d_ff) == (512, 8, 2, 1, 2048)
    assert (c.factor, c.dropout, c.attention, c.distil, c.activation, c.padding_mode) == (
        5, 0.05, "prob", True, "gelu", "circular")
    assert (c.channels, c.revin, c.linear_skip, c.stack) == ("joint", False, False, None)


def test_gaussian_scale_never_falls_below_min_scale():
    """Catches: ``softplus(raw) + min_scale`` -> ``softplus(raw)``. A raw scale driven far negative
    leaves exactly the floor (no revin: the standardized scale)."""
    s = spec(3, 3)
    torch.manual_seed(0)
    model = LogSparseTransformer(s, LogSparseConfig(**LS_TINY, head="gaussian", min_scale=0.01)).eval()
    with torch.no_grad():
        n_out = model.layout.n_outputs
        model.head.weight[n_out:].zero_()
        model.head.bias[n_out:].fill_(-200.0)
        scale = model.step_outputs(*inputs(s)).scale
    torch.testing.assert_close(scale, torch.full_like(scale, 0.01))


def test_the_cached_rollout_maps_every_token_embedding_as_the_full_pass_does():
    """Catches: ``prefill`` skips the embedding dropout the full pass (and ``step``) apply. With
    that dropout replaced by a deterministic map, the cached rollout must still equal the uncached one."""
    class Halve(torch.nn.Module):
        def forward(self, x):
            return 0.5 * x

    s = spec(3, 3, seq_len=16, label_len=8, pred_len=4)
    torch.manual_seed(0)
    model = LogSparseTransformer(s, LogSparseConfig(**LS_TINY, decoding="autoregressive")).eval()
    model.dropout = Halve()
    x, x_mark, y_mark = inputs(s)
    with torch.no_grad():
        cached = Rollout(model, cached=True).forecast(x, x_mark, y_mark, draw=False)
        uncached = Rollout(model, cached=False).forecast(x, x_mark, y_mark, draw=False)
    torch.testing.assert_close(cached, uncached, rtol=1e-4, atol=1e-5)


def test_data_spec_bounds_label_len_by_seq_len_inclusive_and_c_out_by_c_in():
    """Catches: ``label_len > seq_len`` -> ``>=`` (refuses the documented ``[0, seq_len]``'s upper end);
    the ``c_out > c_in`` refusal dropped."""
    assert spec(3, 3, seq_len=16, label_len=16).label_len == 16
    with pytest.raises(ConfigError, match="label_len"):
        spec(3, 3, seq_len=16, label_len=17)
    with pytest.raises(ConfigError, match="c_out"):
        spec(3, 4)


def test_logsparse_linear_skip_reads_each_series_own_window_under_ms():
    """Catches: the skip reads ``window[..., :n_out]`` (an exogenous input under 'MS', channel
    independent) instead of the series' own values. Head zeroed, skip picking the last step: the forecast is the
    target's last value."""
    s = spec(3, 1)
    torch.manual_seed(0)
    model = LogSparseTransformer(s, LogSparseConfig(**LS_TINY, linear_skip=True)).eval()
    x, x_mark, y_mark = inputs(s)
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.bias.zero_()
        model.skip.linear.weight.zero_()
        model.skip.linear.weight[:, -1] = 1.0
        out = model(x, x_mark, y_mark)
    torch.testing.assert_close(out, x[:, -1:, -1:].expand_as(out))


def _noisy_batches(s: DataSpec, n: int = 4, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(n):
        x, x_mark, y_mark = inputs(s, batch_size=4, seed=int(torch.randint(1000, (1,), generator=g)))
        y = torch.cat([x[:, s.seq_len - s.label_len:], 2.0 * torch.randn(4, s.pred_len, s.c_in, generator=g)], dim=1)
        batches.append({"x": x, "y": y, "x_mark": x_mark, "y_mark": y_mark})
    return batches


def test_calibrating_the_scale_twice_gives_the_same_factor():
    """Catches: ``calibrate_scale`` no longer resets ``scale_factor`` to 1 first, so a second
    calibration (a re-fit after training, a sweep re-fitting post-training steps) compounds the first."""
    s = spec(3, 3)
    torch.manual_seed(0)
    model = LogSparseTransformer(s, LogSparseConfig(**LS_TINY, head="gaussian")).eval()
    batches = _noisy_batches(s)
    first = model.calibrate_scale(batches, 0.8)
    second = model.calibrate_scale(batches, 0.8)
    assert abs(first - 1.0) > 1e-3
    assert second == first


def test_one_shot_gaussian_samples_come_from_the_given_generator():
    """Catches: one-shot ``sample`` draws from the global RNG, not ``generator``."""
    s = spec(3, 3)
    torch.manual_seed(0)
    model = LogSparseTransformer(s, LogSparseConfig(**LS_TINY, head="gaussian")).eval()
    x, x_mark, y_mark = inputs(s)
    with torch.no_grad():
        torch.manual_seed(1)
        first = model.sample(x, x_mark, y_mark, 5, generator=torch.Generator().manual_seed(7))
        torch.manual_seed(2)
        second = model.sample(x, x_mark, y_mark, 5, generator=torch.Generator().manual_seed(7))
    torch.testing.assert_close(first, second, rtol=0, atol=0)


def test_logsparse_linear_skip_trains_through_the_loss():
    """Catches: the skip's horizon detached: its map would never learn."""
    s = spec(3, 3)
    torch.manual_seed(0)
    model = LogSparseTransformer(s, LogSparseConfig(**LS_TINY, linear_skip=True))
    x, x_mark, y_mark = inputs(s)
    y = torch.cat([x[:, s.seq_len - s.label_len:], torch.randn(3, s.pred_len, 3)], dim=1)
    model.loss({"x": x, "y": y, "x_mark": x_mark, "y_mark": y_mark}, torch.nn.functional.mse_loss).backward()
    assert model.skip.linear.weight.grad is not None and model.skip.linear.weight.grad.abs().sum() > 0


def test_batch_checks_name_a_wrong_batch_size_and_a_short_y_mark():
    """Catches: ``check_batch`` no longer compares the inputs' batch sizes; its ``y_mark`` length floor
    lowered to ``pred_len - 1``. Both must be DataErrors naming the input, before the first layer."""
    s = spec(3, 3)
    x, x_mark, y_mark = inputs(s)
    informer = build_model("informer", s, **INF_TINY)
    with pytest.raises(DataError, match="x_mark"):
        informer(x, x_mark[:2], y_mark)
    logsparse = LogSparseTransformer(s, LogSparseConfig(**LS_TINY))
    with pytest.raises(DataError, match="y_mark"):
        logsparse(x, x_mark, y_mark[:, -(s.pred_len - 1):])


def test_no_correction_keeps_the_whole_forecast():
    """Catches: ``least_squares_share`` of an all-zero correction 0 instead of 1 (documented: 1 for no
    correction)."""
    assert least_squares_share(torch.zeros(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)) == 1.0


def test_correction_terms_leave_unobserved_cells_out_of_every_term():
    """Catches: the correction not zeroed where ``truth`` is NaN, so ``(f - c)^2`` counts cells
    ``fill_nan`` made up (the fitted share shrinks for no reason)."""
    s = spec(1, 1, label_len=8)
    torch.manual_seed(0)
    model = build_model("dlinear", s, revin=True).eval()
    with torch.no_grad():
        model.trend.maps[0].weight.normal_(0, 0.2)
    x, x_mark, y_mark = inputs(s, batch_size=2)
    y = torch.cat([x[:, s.seq_len - s.label_len:], torch.randn(2, s.pred_len, 1)], dim=1)
    truth = torch.randn(2, s.pred_len, 1, dtype=torch.float64)
    truth[:, 3:] = float("nan")
    batch = {"x": x, "y": y, "x_mark": x_mark, "y_mark": y_mark, "truth": truth}
    cross, square, base = model.correction_terms([batch])
    center, correction = model.center_and_correction(x, x_mark, y_mark)
    kept = correction[:, :3].double()
    torch.testing.assert_close(square, kept.square().sum(dim=(1, 2)))
    observed = (y[:, s.label_len:s.label_len + 3] - center[:, :3]).double()  # [B, 3, 1]: the steps with a truth
    torch.testing.assert_close(cross, (kept * observed).sum(dim=(1, 2)))
