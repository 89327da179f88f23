"""Models: shapes for every data layout and attention, config validation, invariances."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from forecast.errors import ConfigError, DataError
from forecast.models import (MODELS, DataSpec, ForecastModel, Informer, InformerConfig, LogSparseConfig,
                             LogSparseTransformer, build_model, model_options)
from forecast.models.base import least_squares_share, path_quantiles, sorted_quantiles
from forecast.models.dlinear import DLinear, DLinearConfig, moving_average
from forecast.models.logsparse_rollout import Rollout

TINY = dict(d_model=16, n_heads=2, d_ff=32, e_layers=2, d_layers=1, dropout=0.0, factor=2)
LAYOUTS = {"M": (3, 3), "S": (1, 1), "MS": (3, 1)}  # features -> (c_in, c_out)


def spec(features: str = "M", seq_len: int = 32, label_len: int = 16, pred_len: int = 8,
         **overrides) -> DataSpec:
    c_in, c_out = LAYOUTS[features]
    return DataSpec(seq_len=seq_len, label_len=label_len, pred_len=pred_len, c_in=c_in,
                    c_out=c_out, n_time_features=4, **overrides)


def batch(s: DataSpec, batch_size: int = 3, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch_size, s.seq_len, s.c_in, generator=g)
    x_mark = torch.rand(batch_size, s.seq_len, s.n_time_features, generator=g) - 0.5
    y_mark = torch.rand(batch_size, s.label_len + s.pred_len, s.n_time_features, generator=g) - 0.5
    return x, x_mark, y_mark


@pytest.mark.parametrize("features", ["M", "S", "MS"])
@pytest.mark.parametrize("attention", ["prob", "full", "logsparse"])
def test_informer_shapes_for_every_layout_and_attention(features, attention):
    s = spec(features)
    model = Informer(s, InformerConfig(**TINY, attention=attention))
    out = model(*batch(s))
    assert out.shape == (3, s.pred_len, s.c_out)
    assert torch.isfinite(out).all()
    out.sum().backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_registered_model_keeps_the_contract(name):
    s = spec("MS", seq_len=24, label_len=12, pred_len=6)
    baselines = {"naive": {}, "seasonal_naive": {"season_length": 12}, "dlinear": {"kernel_size": 5}}
    options = baselines[name] if name in baselines else {
        k: v for k, v in TINY.items() if name != "logsparse" or k in ("d_model", "n_heads")}
    model = build_model(name, s, **options)
    assert isinstance(model, ForecastModel)
    assert model(*batch(s)).shape == (3, 6, 1)


@pytest.mark.parametrize("name, options", [("informer", {}), ("informer", {"stack": [2, 1]}), ("transformer", {}),
                                           ("logsparse", {}), ("naive", {}), ("seasonal_naive", {})])
def test_every_model_names_a_batch_of_the_wrong_shape(name, options):
    """The baselines forecast a window's last columns, so a window of other variables was forecast silently."""
    s = spec("MS", seq_len=24, label_len=12, pred_len=6, season=4)
    sizes = {} if name in ("naive", "seasonal_naive") else {"d_model": 16, "n_heads": 2}
    model = build_model(name, s, **sizes, **options)
    x, x_mark, y_mark = batch(s)
    with pytest.raises(DataError, match=r"x has shape \(3, 24, 2\), expected \[B, 24, 3\]"):
        model(x[..., :2], x_mark, y_mark)
    with pytest.raises(DataError, match="x_mark has shape"):
        model(x, x_mark[:, :20], y_mark)
    with pytest.raises(DataError, match="y_mark"):
        model(x, x_mark, y_mark[:, :4])


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_default_loss_is_the_given_loss_of_forward_against_the_horizon(name):
    s = spec("MS", seq_len=24, label_len=12, pred_len=6)
    options = {"seasonal_naive": {"season_length": 12}}.get(name, {})
    model = build_model(name, s, **options).eval()
    x, x_mark, y_mark = batch(s)
    y = torch.randn(3, s.label_len + s.pred_len, s.c_in)
    expected = F.l1_loss(model(x, x_mark, y_mark), y[:, -s.pred_len:, -1:])
    torch.testing.assert_close(model.loss({"x": x, "y": y, "x_mark": x_mark, "y_mark": y_mark}, F.l1_loss), expected)


def test_capabilities_a_model_does_not_declare_raise_clear_errors():
    s = spec("S")
    model = build_model("dlinear", s)
    assert not model.probabilistic and not model.calibratable
    for call, message in ((lambda: model.sample(*batch(s), 5), "points only"),
                          (lambda: model.quantiles(*batch(s), (0.1, 0.9)), "points only"),
                          (lambda: model.calibrate_scale([]), "no predictive scale"),
                          (lambda: model.attention_weights(*batch(s)), "no attention weights")):
        with pytest.raises(ConfigError, match=message):
            call()
    weights = build_model("informer", s, **TINY).eval().attention_weights(*batch(s))
    assert len(weights) == TINY["e_layers"]


def test_default_quantiles_are_those_of_the_sample_paths():
    s = spec("S", seq_len=48, pred_len=6)
    model = build_model("seasonal_naive", s, season_length=12)
    x, x_mark, y_mark = batch(s)
    quantiles = model.quantiles(x, x_mark, y_mark, (0.1, 0.5, 0.9), n_samples=50,
                                generator=torch.Generator().manual_seed(4))
    paths = model.sample(x, x_mark, y_mark, 50, torch.Generator().manual_seed(4))  # [S, B, P, C_out]
    for level, values in quantiles.items():
        torch.testing.assert_close(values, torch.quantile(paths, level, dim=0))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
def test_quantiles_of_integer_samples_are_interpolated_in_float_not_truncated(dtype):
    """Integer samples were interpolated, then cast back to their dtype: the median of 1 and 2 came out 1."""
    paths = torch.tensor([[1, 0], [2, 1], [4, 1], [7, 0]]).to(dtype)  # [S=4, M=2]
    levels = (0.1, 0.5, 0.9)
    values = sorted_quantiles(paths, levels)
    expected = torch.stack([torch.quantile(paths.double(), level, dim=0) for level in levels])
    assert values.dtype == torch.float64
    torch.testing.assert_close(values, expected)
    if dtype != torch.bool:
        assert values[1, 0].item() == 3.0  # between 2 and 4
        assert path_quantiles(paths, levels)[0.5].tolist() == [3.0, 0.5]


def test_the_registry_refuses_a_model_outside_the_contract(monkeypatch):
    monkeypatch.setitem(MODELS, "plain", lambda spec: torch.nn.Linear(1, 1))
    with pytest.raises(ConfigError, match="not a forecast.models.ForecastModel; subclass it"):
        build_model("plain", spec())


class Wide(ForecastModel):
    """Forecasts every input variable: under features 'MS' one more than the spec's c_out."""

    def __init__(self, spec, keep_spec=True):
        super().__init__()
        if keep_spec:
            self.spec = spec
        self.scale = torch.nn.Parameter(torch.ones(()))

    def forward(self, x, x_mark, y_mark):
        return self.scale * x[:, -1:, :].expand(-1, self.spec.pred_len, -1)  # [B, P, C_in]


def test_a_model_must_keep_its_spec_and_forecast_the_specs_shape(monkeypatch):
    """A model forecasting [B, P, C_in] under 'MS' trained and validated against a target cut to its own width
    (the wrong variables) without a word; one without self.spec failed with an AttributeError deep in the module."""
    monkeypatch.setitem(MODELS, "nospec", lambda spec: Wide(spec, keep_spec=False))
    with pytest.raises(ConfigError, match=r"model 'nospec' built a Wide without its DataSpec: set self.spec = spec"):
        build_model("nospec", spec())
    monkeypatch.setitem(MODELS, "wide", Wide)
    s = spec("MS")
    model = build_model("wide", s)
    x, x_mark, y_mark = batch(s)
    assert model(x, x_mark, y_mark).shape[-1] == s.c_in != s.c_out
    train_batch = {"x": x, "x_mark": x_mark, "y_mark": y_mark, "y": torch.randn(x.shape[0], s.label_len + s.pred_len,
                                                                             s.c_in)}
    with pytest.raises(ConfigError, match=r"Wide.forward returned shape \(\d+, \d+, 3\); a model forecasts "
                                          r"\[B, pred_len=\d+, c_out=1\] .*Fix: return that shape"):
        model.loss(train_batch, torch.nn.functional.mse_loss)


def test_the_forecaster_words_option_refusals_as_the_model_would(monkeypatch):
    """A model registered at run time that checks its own options had its ConfigError replaced by "unknown
    option(s) ['hidden']", and a misspelt Trainer option reached its builder as a bare TypeError; the Transformer's
    fixed options were called unknown ("did you mean 'attention_options'?")."""
    from forecast import Forecaster

    def checked(spec, hidden=4):
        if hidden < 1:
            raise ConfigError(f"hidden={hidden} must be >= 1")
        return Wide(spec)

    monkeypatch.setitem(MODELS, "checked", checked)
    with pytest.raises(ConfigError, match=r"^hidden=-1 must be >= 1$"):
        Forecaster("checked", hidden=-1)
    with pytest.raises(ConfigError, match=r"Forecaster\('checked'\): the model's builder refused the options "
                                          r"\['limit_val_batchs'\] .*a misspelt Trainer option reaches the model"):
        Forecaster("checked", limit_val_batchs=2)
    with pytest.raises(ConfigError, match=r"model 'transformer' fixes \['attention'\]; use model 'informer'"):
        Forecaster("transformer", attention="prob")


# Properties a mutation of one line broke without any test failing (informer.py, dlinear.py, normalization.py).


def test_informers_decoder_reads_the_last_label_len_inputs_then_placeholders():
    s = spec("M")
    model = Informer(s, InformerConfig(**TINY))
    seen = []
    model.decoder_embedding.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0]))
    x, x_mark, y_mark = batch(s)
    model(x, x_mark, y_mark)
    torch.testing.assert_close(seen[0][:, :s.label_len], x[:, -s.label_len:])  # [B, label_len, C]
    assert not seen[0][:, s.label_len:].any()  # [B, P, C] placeholders


@pytest.mark.parametrize("name", ["transformer", "informer_full_decoder"])
def test_the_decoders_self_attention_is_causal(name):
    """A forecast step never reads a later step's time features: its self-attention sees earlier positions only."""
    s = spec("M")
    if name == "transformer":  # full attention everywhere: no ProbSparse factor
        model = build_model("transformer", s, **{k: v for k, v in TINY.items() if k != "factor"}).eval()
    else:
        model = build_model("informer", s, **TINY, decoder_attention="full").eval()
    x, x_mark, y_mark = batch(s)
    later = y_mark.clone()
    later[:, -1] += 5.0  # the last forecast step's calendar
    with torch.no_grad():
        torch.testing.assert_close(model(x, x_mark, later)[:, :-1], model(x, x_mark, y_mark)[:, :-1])
        assert not torch.allclose(model(x, x_mark, later)[:, -1], model(x, x_mark, y_mark)[:, -1])


def test_each_encoder_of_a_stack_reads_the_last_steps_of_the_window():
    s = spec("M", seq_len=32)
    model = Informer(s, InformerConfig(**{**TINY, "e_layers": 1}, stack=(1, 1))).eval()  # one key sample
    x, x_mark, _ = batch(s)
    earlier = x.clone()
    earlier[:, 1:15] += 3.0  # outside the second encoder's last 16 steps (and its embedding's circular kernel-3 conv)
    with torch.no_grad():
        memory, _ = model.encode(x, x_mark)  # [B, 32 + 16, D]: the first encoder's steps, then the second's
        moved, _ = model.encode(earlier, x_mark)
    assert memory.shape[1] == 32 + 16
    assert not torch.allclose(moved[:, :32], memory[:, :32])  # the first encoder reads them
    torch.testing.assert_close(moved[:, 32:], memory[:, 32:])  # the second one does not


@pytest.mark.parametrize("model_name", ["informer", "dlinear"])
def test_the_linear_skip_and_per_variable_maps_read_each_variables_own_input(model_name):
    """Under 'MS' the skip maps the target's own past (the last input), and DLinear's individual maps each read
    their own variable."""
    s = spec("MS" if model_name == "informer" else "M")
    options = ({**TINY, "linear_skip": True} if model_name == "informer" else {"individual": True})
    model = build_model(model_name, s, **options).eval()
    x, x_mark, y_mark = batch(s)
    for variable in range(s.c_in):
        moved = x.clone()
        moved[..., variable] += 1.0
        with torch.no_grad():
            changed = (model(moved, x_mark, y_mark) - model(x, x_mark, y_mark)).abs().amax(dim=(0, 1))  # [C_out]
        if model_name == "dlinear":  # variable i moves forecast i alone
            assert torch.equal(changed > 0, torch.arange(s.c_out) == variable)
    if model_name == "informer":
        model.skip.linear.weight.data.normal_()  # its effect apart from the network's: the same network, another skip
        moved = x.clone()
        moved[..., -1] += 1.0
        with torch.no_grad():
            skipped = model(moved, x_mark, y_mark) - model(x, x_mark, y_mark)
        model.skip.linear.weight.data.zero_()
        with torch.no_grad():
            network = model(moved, x_mark, y_mark) - model(x, x_mark, y_mark)
        assert not torch.allclose(skipped, network)


def test_revin_applies_each_output_variables_own_affine_parameters():
    from forecast.layers.normalization import ReversibleInstanceNorm

    norm = ReversibleInstanceNorm(3, affine=True)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([1.0, 2.0, 4.0]))
        norm.bias.copy_(torch.tensor([0.0, 0.5, -1.0]))
    x = torch.randn(2, 16, 3)
    stats = norm.statistics(x)
    target = x[..., -1:]  # the last variable: 'MS''s output
    normalized = norm.normalize(target, stats)
    torch.testing.assert_close(normalized, (target - stats.location[..., -1:]) / stats.std[..., -1:] * 4.0 - 1.0)
    torch.testing.assert_close(norm.denormalize(normalized, stats), target)


def test_informer_stack_concatenates_encoders_over_halved_inputs():
    s = spec("M", seq_len=32)
    model = Informer(s, InformerConfig(**{**TINY, "e_layers": 3}, stack=(3, 2, 1)))
    memory, _ = model.encode(*batch(s)[:2])
    # 3 layers: 32 -> 16 -> 8; 2 layers over the last 16: 16 -> 8; 1 layer over the last 8: 8
    assert memory.shape == (3, 8 + 8 + 8, 16)
    assert model(*batch(s)).shape == (3, s.pred_len, 3)


@pytest.mark.parametrize("distil, expected", [(True, 8), (False, 32)])
def test_distilling_halves_the_encoder_length_per_layer(distil, expected):
    s = spec("M", seq_len=32)
    model = Informer(s, InformerConfig(**{**TINY, "e_layers": 3}, distil=distil))
    memory, _ = model.encode(*batch(s)[:2])
    assert memory.shape[1] == expected


@pytest.mark.parametrize("name", ["informer", "transformer", "naive"])
def test_outputs_are_batch_invariant_in_eval_mode(name):
    s = spec("M")
    options = {} if name == "naive" else TINY
    model = build_model(name, s, **options).eval()
    x, x_mark, y_mark = batch(s, batch_size=4)
    with torch.no_grad():
        together = model(x, x_mark, y_mark)
        one_by_one = torch.cat([model(x[i:i + 1], x_mark[i:i + 1], y_mark[i:i + 1])
                                for i in range(4)])
    torch.testing.assert_close(together, one_by_one, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("channels", ["joint", "independent"])
def test_an_empty_batch_gives_an_empty_forecast(name, channels):
    """A batch of no windows crashed the causal ProbSparse and LogSparse kernels (an IndexError, a
    ZeroDivisionError) and the channel merge (a reshape of 0 elements with -1)."""
    s = spec("M")
    baselines = {"naive": {}, "seasonal_naive": {"season_length": 4}, "dlinear": {"kernel_size": 5}}
    if name in baselines and channels == "independent":
        pytest.skip("the baselines have no channel mode")
    sizes = {k: v for k, v in TINY.items() if name != "logsparse" or k in ("d_model", "n_heads")}
    options = baselines.get(name, {**sizes, "channels": channels})
    model = build_model(name, s, **options).eval()
    with torch.no_grad():
        out = model(*batch(s, batch_size=0))
    assert out.shape == (0, s.pred_len, s.c_out)


def test_eval_forecasts_are_reproducible():
    s = spec("M")
    model = Informer(s, InformerConfig(**TINY)).eval()
    inputs = batch(s)
    with torch.no_grad():
        torch.testing.assert_close(model(*inputs), model(*inputs), rtol=0, atol=0)


def test_forecast_ignores_the_values_of_future_placeholders():
    """The decoder input is built inside: nothing after the window can reach the output."""
    s = spec("M")
    model = Informer(s, InformerConfig(**TINY)).eval()
    x, x_mark, y_mark = batch(s)
    with torch.no_grad():
        reference = model(x, x_mark, y_mark)
        torch.testing.assert_close(model(x.clone(), x_mark, y_mark), reference)
        # Changing the input window does change the forecast (the test can fail).
        assert not torch.allclose(model(x + 1.0, x_mark, y_mark), reference)


def test_naive_repeats_the_last_value_of_the_output_variables():
    s = spec("MS", pred_len=5)
    x, x_mark, y_mark = batch(s)
    out = build_model("naive", s)(x, x_mark, y_mark)
    torch.testing.assert_close(out, x[:, -1:, -1:].expand(-1, 5, -1))


@pytest.mark.parametrize("encoding, sizes", [("fixed", (13, 32, 7, 24)), ("learned", (13, 32, 7, 24))])
def test_calendar_embeddings_take_table_sizes_from_the_data(encoding, sizes):
    s = spec("M", time_encoding=encoding, time_feature_sizes=sizes)
    model = Informer(s, InformerConfig(**TINY))
    x, _, _ = batch(s)
    x_mark = torch.stack([torch.randint(0, n, (3, s.seq_len)) for n in sizes], -1).float()
    y_mark = torch.stack([torch.randint(0, n, (3, s.label_len + s.pred_len)) for n in sizes],
                         -1).float()
    assert model(x, x_mark, y_mark).shape == (3, s.pred_len, 3)
    frozen = [p for n, p in model.named_parameters() if "time.tables" in n]
    assert frozen and all(p.requires_grad == (encoding == "learned") for p in frozen)


def test_positional_encoding_has_no_length_limit():
    s = spec("S", seq_len=5200, label_len=8, pred_len=4)
    model = Informer(s, InformerConfig(**{**TINY, "e_layers": 1}, attention="prob"))
    x, x_mark, y_mark = batch(s, batch_size=1)
    assert torch.isfinite(model(x, x_mark, y_mark)).all()


@pytest.mark.parametrize("bad, message", [
    (dict(d_model=10, n_heads=3), "multiple of n_heads"),
    (dict(attention="sparse"), "unknown attention"),
    (dict(dropout=1.5), "dropout"),
    (dict(e_layers=0), "e_layers"),
    (dict(stack=()), "stack"),
])
def test_informer_config_rejects_bad_settings(bad, message):
    with pytest.raises(ConfigError, match=message):
        InformerConfig(**bad)


@pytest.mark.parametrize("bad, message", [
    (dict(label_len=40), "label_len"),
    (dict(seq_len=0), "seq_len"),
    (dict(time_encoding="fixed"), "time_feature_sizes"),
    (dict(time_encoding="hourly"), "time_encoding"),
])
def test_data_spec_rejects_bad_sizes(bad, message):
    with pytest.raises(ConfigError, match=message):
        spec("M", **bad)


def test_registry_errors_name_the_choices():
    with pytest.raises(ConfigError, match="informer"):
        build_model("autoformer", spec())
    with pytest.raises(ConfigError, match=r"no option\(s\) \['d_model'\]; its options are none"):
        build_model("naive", spec(), d_model=16)
    with pytest.raises(ConfigError, match="fixes"):
        build_model("transformer", spec(), attention="prob")
    with pytest.raises(ConfigError, match=r"model 'informer' has no option\(s\) \['d_modle'\]; .*'d_model'"):
        build_model("informer", spec(), d_modle=16)
    assert "d_model" in model_options("transformer") and "attention" not in model_options("transformer")


def test_a_type_error_inside_a_model_is_not_reported_as_an_unknown_option(monkeypatch):
    def broken(spec, **options):
        raise TypeError("a bug inside the model")

    monkeypatch.setitem(MODELS, "informer", broken)
    with pytest.raises(TypeError, match="a bug inside the model"):
        build_model("informer", spec(), d_model=16)


def test_a_stack_deeper_than_the_window_halves_is_refused():
    """InformerStack's encoder i reads the last seq_len // 2**i steps; one that rounds to 0 read the whole window
    ([:, -0:]), so seq_len=4 with four encoders made a memory of 11 steps instead of 7."""
    s = DataSpec(seq_len=4, label_len=0, pred_len=1, c_in=1, c_out=1, n_time_features=1)
    options = dict(d_model=16, n_heads=2, d_ff=16)
    with pytest.raises(ConfigError, match=r"stack=\(1, 1, 1, 1\): its entry 3 \(from 0\) would read the last "
                                          r"seq_len // 2\*\*3 = 0 steps"):
        build_model("informer", s, stack=(1, 1, 1, 1), **options)
    memory, _ = build_model("informer", s, stack=(1, 1, 1), **options).encode(torch.randn(1, 4, 1), torch.rand(1, 4, 1))
    assert memory.shape[1] == 4 + 2 + 1


@pytest.mark.parametrize("owned", ["causal", "dropout"])
def test_attention_options_the_model_sets_itself_are_refused(owned):
    """They reached build_attention twice: a raw TypeError (multiple values for keyword argument)."""
    with pytest.raises(ConfigError, match=rf"\['{owned}'\] are the model's own.*Fix: leave them out"):
        InformerConfig(attention_options={owned: 0.2})


def test_a_causal_lazy_fill_no_causal_probsparse_attention_reads_is_refused():
    """With a full decoder self-attention the option reached only the encoder's ProbSparse, which is not causal,
    and was ignored."""
    with pytest.raises(ConfigError, match=r"causal_lazy_fill='cumsum' does nothing here.*decoder's self-attention "
                                          r"is 'full'.*Fix: decoder_attention='prob'"):
        InformerConfig(attention="prob", decoder_attention="full", attention_options={"causal_lazy_fill": "cumsum"})
    InformerConfig(attention="prob", attention_options={"causal_lazy_fill": "cumsum"})  # the decoder's reads it


def test_dlinear_checks_its_batch_against_its_spec():
    """A batch of other variables or marks was forecast silently, another window length failed inside a matmul."""
    s = DataSpec(seq_len=32, label_len=8, pred_len=8, c_in=1, c_out=1, n_time_features=1)
    model = build_model("dlinear", s)
    with pytest.raises(DataError, match=r"dlinear: x has shape \(2, 32, 4\), expected \[B, 32, 1\]"):
        model(torch.randn(2, 32, 4), torch.rand(2, 32, 1), torch.rand(2, 16, 1))
    with pytest.raises(DataError, match=r"dlinear: x has shape \(2, 40, 1\)"):
        model(torch.randn(2, 40, 1), torch.rand(2, 40, 1), torch.rand(2, 16, 1))


def test_positions_past_the_cached_table_keep_the_models_dtype():
    """The position table regrown past 1024 steps came back float32 in a bf16 model (a mixed-dtype error)."""
    s = DataSpec(seq_len=1000, label_len=0, pred_len=30, c_in=1, c_out=1, n_time_features=1)
    model = build_model("logsparse", s, d_model=16, n_heads=2, d_ff=16, n_layers=1).to(torch.bfloat16).eval()
    marks = torch.rand(1, 1000, 1, dtype=torch.bfloat16), torch.rand(1, 30, 1, dtype=torch.bfloat16)
    assert model(torch.randn(1, 1000, 1, dtype=torch.bfloat16), *marks).dtype == torch.bfloat16


# ------------------------------------------------------------------------------ details
# What a mutation round of forecast/models found unpinned: defaults, skips, token flags, cached rollouts, the
# Gaussian floor and calibration, batch checks and the correction's terms.

LS_TINY = dict(d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0, sub_len=8)


def test_logsparse_revin_teacher_forcing_normalizes_the_future_like_the_rollout():
    """Catches: teacher-forced ``future`` not normalized by the window's RevIN statistics.
    Under revin the rollout feeds back values in the normalized space, so teacher forcing on the rollout's own
    forecast (in data units) must reproduce it."""
    s = spec("M")
    torch.manual_seed(0)
    model = LogSparseTransformer(s, LogSparseConfig(**LS_TINY, decoding="autoregressive", revin=True)).eval()
    x, x_mark, y_mark = batch(s)
    x = x * 3.0 + 5.0  # a window far from the normalized scale
    with torch.no_grad():
        forecast = model(x, x_mark, y_mark)  # [B, P, C]
        teacher_forced = model.step_outputs(x, x_mark, y_mark, future=forecast).mean[:, s.seq_len:]
    torch.testing.assert_close(teacher_forced, forecast, rtol=1e-4, atol=1e-4)


def test_dlinear_default_moving_average_is_the_papers_25_steps():
    """Catches: ``kernel_size`` default 25 -> 23. The default model's trend is a 25-step moving average."""
    s = spec("S", seq_len=48, label_len=0, pred_len=4)
    model = DLinear(s).eval()
    assert model.config.kernel_size == DLinearConfig().kernel_size == 25
    with torch.no_grad():
        model.seasonal.maps[0].weight.zero_()
        model.seasonal.maps[0].bias.zero_()
        model.trend.maps[0].bias.zero_()
        model.trend.maps[0].weight.zero_()
        model.trend.maps[0].weight[:, 24] = 1.0  # forecast = trend at step 24
    x, x_mark, y_mark = batch(s)
    with torch.no_grad():
        out = model(x, x_mark, y_mark)  # [B, P, 1]
    expected = x[:, 12:37].mean(dim=1, keepdim=True)  # the 25 steps centred on step 24
    torch.testing.assert_close(out, expected.expand_as(out))
    torch.testing.assert_close(moving_average(x, 25)[:, 24:25], expected)


def test_reads_other_inputs_says_whether_the_other_inputs_move_the_forecast():
    """Catches: ``reads_other_inputs = True``. The flag (which ForecastModule reports) must agree with
    the model: under 'MS' the non-output inputs move the forecast exactly when it says so."""
    s = spec("MS", season=4)
    models = {"informer": TINY, "dlinear": {}, "naive": {}, "seasonal_naive": {},
              "logsparse": {k: v for k, v in LS_TINY.items()}}
    x, x_mark, y_mark = batch(s)
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
    s = spec("M")
    model = build_model("informer", s, **{**TINY, "decoder_attention": "full"}, attention_options={"factor": 3})
    assert model.encoders[0].layers[0].attention.attention.factor == 3
    assert model.eval()(*batch(s)).shape == (3, s.pred_len, 3)


def test_logsparse_token_zero_has_no_known_previous_value():
    """Catches: token 0's lagged value (there is no step before the window) flagged known.
    Token t carries step t-1's value with a known flag; token 0's is a placeholder, never an observed zero."""
    s = spec("MS")
    torch.manual_seed(0)
    model = LogSparseTransformer(s, LogSparseConfig(**LS_TINY))
    x, x_mark, y_mark = batch(s)
    _, lagged, known, _, _ = model.layout.tokens(x, x_mark, y_mark)  # [B', T, V]
    assert not known[:, 0].any() and not lagged[:, 0].any()
    assert known[:, 1: s.seq_len + 1].all()  # the window's steps, read by tokens 1..L
    assert not known[:, s.seq_len + 1:].any()  # the horizon's placeholders (one-shot)


def test_informers_linear_skip_reads_the_forecast_variables_own_window():
    """Catches: the skip reads ``x[..., :n_out]`` (under 'MS' the first covariate) instead of the
    forecast variables' inputs. With the network's projection zeroed and the skip picking the window's last step,
    the forecast is the target's last value, joint or channel-independent (the skip test above tells the two apart
    only by a rounding difference when it runs after the rest of this file)."""
    s = spec("MS")
    x, x_mark, y_mark = batch(s)
    for channels in ("joint", "independent"):
        torch.manual_seed(0)
        model = build_model("informer", s, **TINY, linear_skip=True, channels=channels).eval()
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
    s = spec("M")
    model = build_model("informer", s, **TINY)
    x, x_mark, y_mark = batch(s)
    with pytest.raises(DataError, match="y_mark"):
        model(x, x_mark, y_mark[:, s.label_len:])


def test_informers_cross_attention_reads_the_whole_encoder_memory():
    """Catches: causal cross-attention. Informer2020 builds it as ``FullAttention(False, ...)``: every
    decoder step reads every encoder step, so the first forecast step (decoder position 0 at label_len 0)
    moves with the memory's last step."""
    s = spec("M", label_len=0)
    torch.manual_seed(0)
    model = build_model("informer", s, **TINY).eval()
    x, x_mark, y_mark = batch(s)
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
    s = spec("M")
    torch.manual_seed(0)
    model = build_model("informer", s, **{**TINY, "d_layers": 2}).eval()
    inputs = batch(s)
    with torch.no_grad():
        before = model(*inputs)
        for parameter in model.decoder_layers[1].parameters():
            parameter.add_(0.5)
        after = model(*inputs)
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
    s = spec("M")
    torch.manual_seed(0)
    model = LogSparseTransformer(s, LogSparseConfig(**LS_TINY, head="gaussian", min_scale=0.01)).eval()
    with torch.no_grad():
        n_out = model.layout.n_outputs
        model.head.weight[n_out:].zero_()
        model.head.bias[n_out:].fill_(-200.0)
        scale = model.step_outputs(*batch(s)).scale
    torch.testing.assert_close(scale, torch.full_like(scale, 0.01))


def test_the_cached_rollout_maps_every_token_embedding_as_the_full_pass_does():
    """Catches: ``prefill`` skips the embedding dropout the full pass (and ``step``) apply. With
    that dropout replaced by a deterministic map, the cached rollout must still equal the uncached one."""
    class Halve(torch.nn.Module):
        def forward(self, x):
            return 0.5 * x

    s = spec("M", seq_len=16, label_len=8, pred_len=4)
    torch.manual_seed(0)
    model = LogSparseTransformer(s, LogSparseConfig(**LS_TINY, decoding="autoregressive")).eval()
    model.dropout = Halve()
    x, x_mark, y_mark = batch(s)
    with torch.no_grad():
        cached = Rollout(model, cached=True).forecast(x, x_mark, y_mark)
        uncached = Rollout(model, cached=False).forecast(x, x_mark, y_mark)
    torch.testing.assert_close(cached, uncached, rtol=1e-4, atol=1e-5)


def test_data_spec_bounds_label_len_by_seq_len_inclusive_and_c_out_by_c_in():
    """Catches: ``label_len > seq_len`` -> ``>=`` (refuses the documented ``[0, seq_len]``'s upper end);
    the ``c_out > c_in`` refusal dropped."""
    assert spec("M", seq_len=16, label_len=16).label_len == 16
    with pytest.raises(ConfigError, match="label_len"):
        spec("M", seq_len=16, label_len=17)
    with pytest.raises(ConfigError, match="c_out"):
        DataSpec(seq_len=32, label_len=16, pred_len=8, c_in=3, c_out=4, n_time_features=4)


def test_logsparse_linear_skip_reads_each_series_own_window_under_ms():
    """Catches: the skip reads ``window[..., :n_out]`` (an exogenous input under 'MS', channel
    independent) instead of the series' own values. Head zeroed, skip picking the last step: the forecast is the
    target's last value."""
    s = spec("MS")
    torch.manual_seed(0)
    model = LogSparseTransformer(s, LogSparseConfig(**LS_TINY, linear_skip=True)).eval()
    x, x_mark, y_mark = batch(s)
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
        x, x_mark, y_mark = batch(s, batch_size=4, seed=int(torch.randint(1000, (1,), generator=g)))
        y = torch.cat([x[:, s.seq_len - s.label_len:], 2.0 * torch.randn(4, s.pred_len, s.c_in, generator=g)], dim=1)
        batches.append({"x": x, "y": y, "x_mark": x_mark, "y_mark": y_mark})
    return batches


def test_calibrating_the_scale_twice_gives_the_same_factor():
    """Catches: ``calibrate_scale`` no longer resets ``scale_factor`` to 1 first, so a second
    calibration (a re-fit after training, a sweep re-fitting post-training steps) compounds the first."""
    s = spec("M")
    torch.manual_seed(0)
    model = LogSparseTransformer(s, LogSparseConfig(**LS_TINY, head="gaussian")).eval()
    batches = _noisy_batches(s)
    first = model.calibrate_scale(batches, 0.8)
    second = model.calibrate_scale(batches, 0.8)
    assert abs(first - 1.0) > 1e-3
    assert second == first


def test_one_shot_gaussian_samples_come_from_the_given_generator():
    """Catches: one-shot ``sample`` draws from the global RNG, not ``generator``."""
    s = spec("M")
    torch.manual_seed(0)
    model = LogSparseTransformer(s, LogSparseConfig(**LS_TINY, head="gaussian")).eval()
    x, x_mark, y_mark = batch(s)
    with torch.no_grad():
        torch.manual_seed(1)
        first = model.sample(x, x_mark, y_mark, 5, generator=torch.Generator().manual_seed(7))
        torch.manual_seed(2)
        second = model.sample(x, x_mark, y_mark, 5, generator=torch.Generator().manual_seed(7))
    torch.testing.assert_close(first, second, rtol=0, atol=0)


def test_logsparse_linear_skip_trains_through_the_loss():
    """Catches: the skip's horizon detached: its map would never learn."""
    s = spec("M")
    torch.manual_seed(0)
    model = LogSparseTransformer(s, LogSparseConfig(**LS_TINY, linear_skip=True))
    x, x_mark, y_mark = batch(s)
    y = torch.cat([x[:, s.seq_len - s.label_len:], torch.randn(3, s.pred_len, 3)], dim=1)
    model.loss({"x": x, "y": y, "x_mark": x_mark, "y_mark": y_mark}, torch.nn.functional.mse_loss).backward()
    assert model.skip.linear.weight.grad is not None and model.skip.linear.weight.grad.abs().sum() > 0


def test_batch_checks_name_a_wrong_batch_size_and_a_short_y_mark():
    """Catches: ``check_batch`` no longer compares the inputs' batch sizes; its ``y_mark`` length floor
    lowered to ``pred_len - 1``. Both must be DataErrors naming the input, before the first layer."""
    s = spec("M")
    x, x_mark, y_mark = batch(s)
    informer = build_model("informer", s, **TINY)
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
    s = spec("S", label_len=8)
    torch.manual_seed(0)
    model = build_model("dlinear", s, revin=True).eval()
    with torch.no_grad():
        model.trend.maps[0].weight.normal_(0, 0.2)
    x, x_mark, y_mark = batch(s, batch_size=2)
    y = torch.cat([x[:, s.seq_len - s.label_len:], torch.randn(2, s.pred_len, 1)], dim=1)
    truth = torch.randn(2, s.pred_len, 1, dtype=torch.float64)
    truth[:, 3:] = float("nan")
    windows = {"x": x, "y": y, "x_mark": x_mark, "y_mark": y_mark, "truth": truth}
    cross, square, base = model.correction_terms([windows])
    center, correction = model.center_and_correction(x, x_mark, y_mark)
    kept = correction[:, :3].double()
    torch.testing.assert_close(square, kept.square().sum(dim=(1, 2)))
    observed = (y[:, s.label_len:s.label_len + 3] - center[:, :3]).double()  # [B, 3, 1]: the steps with a truth
    torch.testing.assert_close(cross, (kept * observed).sum(dim=(1, 2)))


@pytest.mark.parametrize("padding_mode", ["circular", "replicate", "zeros"])
def test_the_distilling_layer_pads_its_convolution_with_the_configured_mode(padding_mode):
    """Conv (padded by one step each side in ``padding_mode``), BatchNorm, ELU, max-pool with stride 2: kills a
    distilling convolution that ignores ``padding_mode`` (the circular default's wrap-around would stay)."""
    from forecast.layers.blocks import DistillingLayer

    torch.manual_seed(0)
    layer = DistillingLayer(16, padding_mode).eval()
    x = torch.randn(2, 32, 16)  # [B, L, D]
    padded = F.pad(x.transpose(1, 2), (1, 1), mode="constant" if padding_mode == "zeros" else padding_mode)
    expected = F.conv1d(padded, layer.conv.weight, layer.conv.bias)  # [B, D, L]
    expected = F.max_pool1d(F.elu(layer.norm(expected)), kernel_size=3, stride=2, padding=1).transpose(1, 2)
    out = layer(x)
    assert out.shape == (2, 16, 16)
    torch.testing.assert_close(out, expected)
