"""forecast.layers.dropout: the same Bernoulli masks as F.dropout, drawn more cheaply on the CPU."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from forecast.layers.dropout import (
    GAP_DRAWS_BELOW,
    Dropout,
    activation_dropout_linear,
    add_dropout,
    apply_dropout,
    dropped_positions,
)
from forecast.models import MODELS, DataSpec, build_model

N = 1_000_000


def within(observed: float, expected: float, n: int, sigmas: float = 5.0) -> bool:
    """``observed`` is a frequency of ``n`` draws within ``sigmas`` binomial standard errors of ``expected``."""
    return abs(observed - expected) <= sigmas * math.sqrt(expected * (1 - expected) / n)


@pytest.mark.parametrize("p", [1e-19, 1e-25])
def test_a_rate_near_zero_drops_nothing_instead_of_overflowing(p):
    """The geometric gap before the first drop overflowed int64 below p of about 1e-18 (an IndexError)."""
    torch.manual_seed(0)
    assert dropped_positions(1000, p).numel() == 0
    x = torch.randn(1000)
    torch.testing.assert_close(apply_dropout(x, p, True), x / (1 - p))


@pytest.mark.parametrize("p", [0.05, 0.1, 0.3, 0.5, 0.013])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_keep_rate_is_one_minus_p_and_kept_values_are_scaled(p, dtype):
    torch.manual_seed(0)
    out = apply_dropout(torch.ones(N, dtype=dtype), p, True)
    kept = out != 0
    assert out.dtype == dtype
    # bfloat16 uniforms would move a keep rate of 0.987 by about 0.002 (18 standard errors here): the draw is float32.
    assert within(kept.double().mean().item(), 1 - p, N)
    torch.testing.assert_close(out[kept], torch.full((int(kept.sum()),), 1 / (1 - p), dtype=dtype))


@pytest.mark.parametrize("p", [0.05, 0.3])  # the gaps' draw and the uniforms' (GAP_DRAWS_BELOW)
def test_masks_are_independent_across_elements_and_calls(p):
    torch.manual_seed(1)
    keep = 1 - p
    first = apply_dropout(torch.ones(N), p, True) != 0
    second = apply_dropout(torch.ones(N), p, True) != 0
    both_neighbours = (first[:-1] & first[1:]).double().mean().item()
    assert within(both_neighbours, keep**2, N - 1)
    every_other = (first[:-2] & first[2:]).double().mean().item()
    assert within(every_other, keep**2, N - 2)
    assert within((first & second).double().mean().item(), keep**2, N)
    rows = first.reshape(1000, 1000).double()  # no element position is favoured
    column_rates = rows.mean(0)
    assert within(column_rates.min().item(), keep, 1000, sigmas=6)
    assert within(column_rates.max().item(), keep, 1000, sigmas=6)


@pytest.mark.parametrize("p", [0.05, 0.3])  # the gaps' draw and the uniforms' (GAP_DRAWS_BELOW)
def test_masks_of_a_many_dimensional_input_are_independent_along_every_dimension(p):
    # Kills a mask drawn for the last dimension only and broadcast over the others (a 1-D input cannot tell).
    torch.manual_seed(2)
    keep = 1 - p
    kept = apply_dropout(torch.ones(40, 50, 60), p, True) != 0  # [B, L, D]-like
    n = kept.numel()
    assert within(kept.double().mean().item(), keep, n)
    for dim in range(kept.dim()):
        length = kept.shape[dim]
        both = (kept.narrow(dim, 0, length - 1) & kept.narrow(dim, 1, length - 1)).double().mean().item()
        assert within(both, keep**2, n * (length - 1) // length), f"masks of neighbours along dim {dim} are related"


def test_the_gradient_is_the_mask_times_the_scale():
    torch.manual_seed(2)
    x = torch.randn(64, 32, requires_grad=True)
    out = apply_dropout(x, 0.25, True)
    out.sum().backward()
    torch.testing.assert_close(x.grad, (out != 0).float() / 0.75)
    torch.testing.assert_close(out, x.detach() * x.grad)


def test_eval_and_edge_probabilities():
    x = torch.randn(5, 7)
    assert apply_dropout(x, 0.4, False) is x
    assert apply_dropout(x, 0.0, True) is x
    assert torch.equal(apply_dropout(x, 1.0, True), torch.zeros_like(x))
    layer = Dropout(0.4)
    assert isinstance(layer, nn.Dropout) and not layer.state_dict()
    assert torch.equal(layer.eval()(x), x)
    torch.manual_seed(3)
    trained = layer.train()(torch.ones(N))
    assert within((trained != 0).double().mean().item(), 0.6, N)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_model_drops_out_through_the_cheap_masks(name):
    spec = DataSpec(seq_len=32, label_len=16, pred_len=8, c_in=3, c_out=3, n_time_features=4, season=4)
    model = build_model(name, spec)
    plain = [type(module).__name__ for module in model.modules()
             if isinstance(module, nn.Dropout) and not isinstance(module, Dropout)]
    assert not plain


@pytest.mark.parametrize("chunk", [None, 7])  # the usual single draw, and many rounds of the loop
def test_the_gaps_between_drops_are_geometric(chunk):
    torch.manual_seed(4)
    p, numel = 0.05, 400_000
    positions = dropped_positions(numel, p, chunk)
    assert positions.dtype == torch.int64 and bool((positions[1:] > positions[:-1]).all())
    assert int(positions[0]) >= 0 and int(positions[-1]) < numel
    assert within(positions.numel() / numel, p, numel)
    gaps = torch.diff(positions, prepend=torch.tensor([-1])) - 1  # kept elements before each drop
    for k in range(4):  # P(gap = k) = (1 - p)^k p
        assert within((gaps == k).double().mean().item(), (1 - p) ** k * p, gaps.numel())
    assert within((gaps >= 40).double().mean().item(), (1 - p) ** 40, gaps.numel())


def test_the_gap_draw_is_below_the_threshold_and_handles_any_layout():
    assert 0.1 < GAP_DRAWS_BELOW <= 0.5  # the models' rates (0.05, 0.1) take the gaps
    torch.manual_seed(5)
    x = torch.randn(40, 30).t().requires_grad_()  # not contiguous: positions count in its logical order
    out = apply_dropout(x, 0.1, True)
    kept = out != 0
    torch.testing.assert_close(out[kept], x.detach()[kept] / 0.9)
    out.backward(torch.ones_like(out))
    torch.testing.assert_close(x.grad, kept.float() / 0.9)
    torch.testing.assert_close(apply_dropout(torch.ones(1), 1e-6, True), torch.ones(1) / (1 - 1e-6))


@pytest.mark.parametrize("activation", [nn.GELU(), nn.ReLU()])
@pytest.mark.parametrize("p", [0.05, 0.1, 0.3])  # fused below GAP_DRAWS_BELOW, the plain path above it
def test_the_feed_forward_folds_the_scale_into_its_weight_with_the_same_mask_and_gradients(activation, p):
    torch.manual_seed(4)
    expand, project = nn.Linear(16, 64), nn.Linear(64, 16)
    x = torch.randn(3, 32, 16, requires_grad=True)
    outputs, gradients = [], []
    for fused in (True, False):
        torch.manual_seed(5)  # the same draw of dropped positions
        hidden = expand(x)
        out = (activation_dropout_linear(hidden, activation, p, True, project) if fused
               else project(apply_dropout(activation(hidden), p, True)))
        grads = torch.autograd.grad((out * torch.linspace(-1, 1, 16)).sum(),
                                    [x, *expand.parameters(), *project.parameters()])
        outputs.append(out)
        gradients.append(grads)
    # float rounding apart: the same mask as apply_dropout's, whose keep rate and independence are tested above
    torch.testing.assert_close(outputs[0], outputs[1])
    for fused_grad, plain_grad in zip(*gradients, strict=True):
        torch.testing.assert_close(fused_grad, plain_grad)


def test_the_feed_forward_without_training_or_dropout_is_the_plain_block():
    torch.manual_seed(6)
    expand, project = nn.Linear(16, 64), nn.Linear(64, 16)
    x = torch.randn(2, 8, 16)
    plain = project(nn.functional.gelu(expand(x)))
    assert torch.equal(activation_dropout_linear(expand(x), nn.GELU(), 0.1, False, project), plain)
    assert torch.equal(activation_dropout_linear(expand(x), nn.GELU(), 0.0, True, project), plain)


@pytest.mark.parametrize("p", [0.05, 0.3])  # one pass below GAP_DRAWS_BELOW, the plain path above it
@pytest.mark.parametrize("branch_dtype", [torch.float32, torch.bfloat16])  # bf16 branches join fp32 under autocast
def test_a_residual_adds_the_dropped_branch_with_the_same_mask_and_gradients(p, branch_dtype):
    x = torch.randn(4, 24, 16, requires_grad=True)
    y = torch.randn(4, 24, 16).to(branch_dtype).requires_grad_()
    outputs, gradients = [], []
    for fused in (True, False):
        torch.manual_seed(7)
        out = add_dropout(x, y, p, True) if fused else x + apply_dropout(y, p, True)
        outputs.append(out)
        gradients.append(torch.autograd.grad((out * torch.linspace(-1, 1, 16)).sum(), [x, y]))
    assert outputs[0].dtype == outputs[1].dtype
    # a bfloat16 branch is scaled in float32 here, not rounded to bfloat16 first: closer, by its rounding
    tolerance = {} if branch_dtype == torch.float32 else {"rtol": 1.6e-2, "atol": 1.6e-2}
    torch.testing.assert_close(outputs[0], outputs[1], **tolerance)
    dropped = apply_dropout(torch.ones(4, 24, 16), 0.0, True)  # nothing dropped at p = 0
    assert torch.equal(add_dropout(x, y, 0.0, True), x + y) and torch.equal(dropped, torch.ones(4, 24, 16))
    for fused_grad, plain_grad in zip(*gradients, strict=True):
        assert fused_grad.dtype == plain_grad.dtype
        torch.testing.assert_close(fused_grad, plain_grad)
    assert torch.equal(add_dropout(x, y, p, False), x + y)
