"""Dropout whose mask costs less on the CPU, with the same distribution.

``torch.nn.functional.dropout`` on the CPU draws its mask with ``bernoulli_``, one draw per
element. At the small rates these models use (0.05-0.1) almost every element is kept, so
:func:`dropped_positions` draws only the gaps between dropped elements instead: for independent
Bernoulli(p) drops the numbers of kept elements before each drop are independent geometric
variables, ``P(gap = k) = (1 - p)**k * p``, drawn by inverting float64 uniforms. That is about
``p * n`` draws instead of ``n``; the output is the input scaled by ``1 / (1 - p)`` with the
dropped elements zeroed, and the backward pass keeps only their positions, not a mask
(benchmarks/README.md, "Dropout masks"). At higher rates (from :data:`GAP_DRAWS_BELOW`) one
float32 uniform per element is cheaper: ``rand < 1 - p`` is the same Bernoulli mask (to float32's
2**-24 steps), about twice as fast as ``bernoulli_``. Both draw from torch's global generator, so
seeding and checkpointed random states cover them. Other devices keep ``F.dropout`` (CUDA's is one
fused kernel).

Between an activation and a linear layer (the feed-forward block), :func:`activation_dropout_linear`
draws the same gaps but never scales the activations: the activation zeroes the dropped elements in
place, and ``1 / (1 - p)`` multiplies the linear layer's weight instead, a ``[D, d_ff]`` tensor rather
than the ``[B, L, d_ff]`` activations. That saves one pass over the block's widest tensor forward and
one backward; the output differs from the unfused one by float rounding only. A residual's
``x + dropout(y)`` (:func:`add_dropout`) likewise adds ``y`` scaled in the same pass.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# Drop rates below which drawing the gaps beats one uniform per element on the CPU (measured at 0.05-0.5: about
# even at 0.2, 1.5-2.4x faster at 0.05-0.1, slower from 0.3).
GAP_DRAWS_BELOW = 0.2


def dropped_positions(numel: int, p: float, chunk: int | None = None) -> Tensor:
    """Flat (row-major) positions, increasing int64, of the elements that independent Bernoulli(``p``) drops
    remove from ``numel`` elements, drawn as the geometric gaps between drops, ``chunk`` gaps at a time."""
    log_keep = math.log1p(-p)
    expected = numel * p
    if chunk is None:  # enough gaps to pass numel but with a probability of about 1e-9; else the loop draws more
        chunk = int(expected + 6 * math.sqrt(expected * (1 - p))) + 16
    parts, last = [], -1
    while True:
        uniform = torch.rand(chunk, dtype=torch.float64)  # [chunk] in [0, 1)
        # kept elements before each drop; a gap past numel ends the draws, and at p near 0 overflows int64
        gaps = torch.log1p(-uniform).div_(log_keep).floor_().clamp_(max=numel).long()
        positions = gaps.add_(1).cumsum_(0).add_(last)  # [chunk]
        if int(positions[-1]) >= numel:
            parts.append(positions[: int(torch.searchsorted(positions, numel))])
            return parts[0] if len(parts) == 1 else torch.cat(parts)
        parts.append(positions)
        last = int(positions[-1])


def _scaled_and_zeroed(x: Tensor, positions: Tensor, scale: float) -> Tensor:
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)  # row-major whatever x's layout: positions are flat
    torch.mul(x, scale, out=out)
    out.view(-1).index_fill_(0, positions, 0)
    return out


class _DropAt(torch.autograd.Function):
    """``x * scale`` with the elements at ``positions`` zeroed; the gradient likewise."""

    @staticmethod
    def forward(ctx, x: Tensor, positions: Tensor, scale: float) -> Tensor:
        ctx.save_for_backward(positions)
        ctx.scale = scale
        return _scaled_and_zeroed(x, positions, scale)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None]:
        (positions,) = ctx.saved_tensors
        return _scaled_and_zeroed(grad, positions, ctx.scale), None, None


def apply_dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """``x`` with each element zeroed with probability ``p`` and the rest scaled by ``1 / (1 - p)``
    when ``training``; ``x`` itself otherwise."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or p >= 1.0:
        return F.dropout(x, p, True)
    keep = 1.0 - p
    if p < GAP_DRAWS_BELOW:
        return _DropAt.apply(x, dropped_positions(x.numel(), p), 1.0 / keep)
    noise = torch.rand(x.shape, device=x.device).lt_(keep).mul_(1.0 / keep)  # same shape as x: 0 or 1 / keep
    return x * noise.to(x.dtype)


class _ActivateAndDropAt(torch.autograd.Function):
    """GELU (or ReLU) of ``x`` with the elements at ``positions`` zeroed, unscaled; the gradient likewise.

    The zeroing is in place on the tensors this function creates, so it costs ``p * n`` writes, not a pass.
    """

    @staticmethod
    def forward(ctx, x: Tensor, positions: Tensor, relu: bool) -> Tensor:
        ctx.save_for_backward(x, positions)
        ctx.relu = relu
        out = (torch.relu(x) if relu else F.gelu(x)).contiguous()  # row-major: positions are flat
        out.view(-1).index_fill_(0, positions, 0)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None]:
        x, positions = ctx.saved_tensors
        if ctx.relu:
            grad_x = torch.ops.aten.threshold_backward(grad, x, 0)
        else:
            grad_x = torch.ops.aten.gelu_backward(grad, x)
        grad_x = grad_x.contiguous()
        grad_x.view(-1).index_fill_(0, positions, 0)
        return grad_x, None, None


class _AddDroppedAt(torch.autograd.Function):
    """``x + y * scale`` with ``y``'s elements at ``positions`` left out; the gradients likewise."""

    @staticmethod
    def forward(ctx, x: Tensor, y: Tensor, positions: Tensor, scale: float) -> Tensor:
        ctx.save_for_backward(positions)
        ctx.scale, ctx.dtypes = scale, (x.dtype, y.dtype)
        out = torch.empty(x.shape, dtype=torch.result_type(x, y), device=x.device)  # row-major: positions are flat
        torch.add(x, y, alpha=scale, out=out)
        out.view(-1).index_copy_(0, positions, x.reshape(-1).index_select(0, positions).to(out.dtype))
        return out

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, Tensor, None, None]:
        (positions,) = ctx.saved_tensors
        x_dtype, y_dtype = ctx.dtypes  # under autocast a float32 residual stream adds a bfloat16 branch
        return grad.to(x_dtype), _scaled_and_zeroed(grad, positions, ctx.scale).to(y_dtype), None, None


def add_dropout(x: Tensor, y: Tensor, p: float, training: bool) -> Tensor:
    """``x + apply_dropout(y, p, training)`` (``x`` and ``y`` of one shape: a residual), in one pass on the
    CPU at the rates whose masks are drawn as gaps."""
    if not (training and 0.0 < p < GAP_DRAWS_BELOW and y.device.type == "cpu") or x.shape != y.shape:
        return x + apply_dropout(y, p, training)
    return _AddDroppedAt.apply(x, y, dropped_positions(y.numel(), p), 1.0 / (1.0 - p))


def activation_dropout_linear(x: Tensor, activation: nn.Module, p: float, training: bool,
                              linear: nn.Linear) -> Tensor:
    """``linear(apply_dropout(activation(x), p, training))`` where ``activation`` is ``nn.GELU()`` or
    ``nn.ReLU()``; on the CPU, at the rates whose masks are drawn as gaps, with the dropout's scale
    folded into ``linear``'s weight (the same mask, drawn from the same generator)."""
    fusable = (training and 0.0 < p < GAP_DRAWS_BELOW and x.device.type == "cpu"
               and (isinstance(activation, nn.ReLU) or (isinstance(activation, nn.GELU)
                                                        and activation.approximate == "none")))
    if not fusable:
        return linear(apply_dropout(activation(x), p, training))
    dropped = _ActivateAndDropAt.apply(x, dropped_positions(x.numel(), p), isinstance(activation, nn.ReLU))
    return F.linear(dropped, linear.weight * (1.0 / (1.0 - p)), linear.bias)


class Dropout(nn.Dropout):
    """``nn.Dropout`` drawing its mask with :func:`apply_dropout`."""

    def forward(self, x: Tensor) -> Tensor:
        return apply_dropout(x, self.p, self.training)
