"""Autograd helpers of the sparse attentions: running sums (ProbSparse's lazy queries),
scores and weighted sums over shifted keys and the softmax over their few offsets (LogSparse),
each with a hand-written backward."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from forecast.layers.attention.reference import _accumulation_dtype


def _running_sum(values: Tensor, reverse: bool = False, weights: Tensor | None = None) -> Tensor:
    """Cumulative sum of ``[B, S, ...]`` over S (``reverse``: from the end), in float32 or wider.

    ``weights`` (``[S]``) multiplies each position first. A blocked scan: a loop over
    the ~sqrt(S) positions of a block, vectorized over all blocks, then one carry per
    block. ``torch.cumsum`` over a non-last dimension is about 6x slower on CPU and
    made the masked ProbSparse slower than its attention.
    """
    batch, length = values.shape[:2]
    width = math.prod(values.shape[2:])  # of the shape: values[0, 0] does not exist in an empty batch
    block = math.ceil(math.sqrt(length))
    full, ragged = divmod(length, block)
    result = values.new_empty(values.shape, dtype=_accumulation_dtype(values.dtype))
    flat = result.view(batch, length, width)  # [B, S, N]
    if weights is None:
        flat.copy_(values.reshape(batch, length, width))
    else:
        torch.mul(values.reshape(batch, length, width), weights.view(length, 1), out=flat)
    # The partial block sits where the scan ends: last when forward, first when reverse.
    partial = flat[:, :ragged] if reverse else flat[:, full * block :]  # [B, ragged, N]
    blocks = flat[:, ragged:] if reverse else flat[:, : full * block]
    blocks = blocks.view(batch, full, block, width)  # [B, full, block, N]
    if reverse:
        for position in range(block - 2, -1, -1):
            blocks[:, :, position] += blocks[:, :, position + 1]
        for position in range(ragged - 2, -1, -1):
            partial[:, position] += partial[:, position + 1]
        totals = blocks[:, :, 0]  # [B, full, N]
        carry = totals.flip(1).cumsum(1).flip(1) - totals
    else:
        for position in range(1, block):
            blocks[:, :, position] += blocks[:, :, position - 1]
        for position in range(1, ragged):
            partial[:, position] += partial[:, position - 1]
        totals = blocks[:, :, -1]
        carry = totals.cumsum(1) - totals
    partial += totals.sum(dim=1, keepdim=True)  # before the blocks change: totals is a view
    blocks += carry.unsqueeze(2)
    return result


class _CausalRunningAverage(torch.autograd.Function):
    """``out[:, s] = sum(values[:, :s+1]) / (s + 1 if normalize else 1)`` over dim 1."""

    @staticmethod
    def forward(ctx, values: Tensor, normalize: bool) -> Tensor:
        running = _running_sum(values)
        if normalize:
            counts = torch.arange(1, values.shape[1] + 1, device=values.device, dtype=running.dtype)
            running /= counts.view(-1, *([1] * (values.dim() - 2)))
        ctx.normalize = normalize
        ctx.dtype = values.dtype
        return running.to(values.dtype)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        inverse_counts = None
        if ctx.normalize:
            counts = torch.arange(1, grad.shape[1] + 1, device=grad.device, dtype=_accumulation_dtype(grad.dtype))
            inverse_counts = counts.reciprocal()
        return _running_sum(grad, reverse=True, weights=inverse_counts).to(ctx.dtype), None


_DOT_CHUNK_ELEMENTS = 1 << 20


def _dot_into(out: Tensor, left: Tensor, right: Tensor) -> None:
    """``out[b, i, h] = <left[b, i, h], right[b, i, h]>`` for ``[B, n, H, E]`` inputs.

    In chunks of rows: a dot product over E first materializes the elementwise
    product, and a full-size one would be the largest tensor LogSparse allocates.
    """
    batch, rows, heads, head_dim = left.shape
    chunk = max(1, _DOT_CHUNK_ELEMENTS // max(1, batch * heads * head_dim))  # an empty batch: any chunk
    for start in range(0, rows, chunk):
        stop = min(start + chunk, rows)
        out[:, start:stop] = torch.linalg.vecdot(left[:, start:stop], right[:, start:stop])


class _ShiftedScores(torch.autograd.Function):
    """``scores[b, i, h, k] = scale * <q[b, i, h], k[b, i - offsets[k], h]>``; -inf where ``i < offsets[k]``.

    One shifted view per distinct offset: no gather, no L x S tensor. The backward
    accumulates in place instead of letting autograd allocate a full-size gradient
    per offset and slice.
    """

    @staticmethod
    def forward(ctx, queries: Tensor, keys: Tensor, offsets: tuple[int, ...], scale: float) -> Tensor:
        batch, length, heads, _ = queries.shape
        scores = queries.new_full((batch, length, heads, len(offsets)), float("-inf"))  # [B, L, H, n]
        for slot, offset in enumerate(offsets):
            _dot_into(scores[:, offset:, :, slot], queries[:, offset:], keys[:, : length - offset])
        scores.mul_(scale)
        ctx.save_for_backward(queries, keys)
        ctx.offsets = offsets
        ctx.scale = scale
        return scores

    @staticmethod
    def backward(ctx, grad_scores: Tensor) -> tuple[Tensor | None, Tensor | None, None, None]:
        queries, keys = ctx.saved_tensors
        length = queries.shape[1]
        accumulate = _accumulation_dtype(queries.dtype)
        grad_scores = (grad_scores * ctx.scale).to(queries.dtype)
        want_queries, want_keys = ctx.needs_input_grad[:2]
        grad_queries = torch.zeros_like(queries, dtype=accumulate) if want_queries else None
        grad_keys = torch.zeros_like(keys, dtype=accumulate) if want_keys else None
        for slot, offset in enumerate(ctx.offsets):
            grad = grad_scores[:, offset:, :, slot].unsqueeze(-1)  # [B, L-d, H, 1]
            if grad_queries is not None:
                grad_queries[:, offset:].addcmul_(grad, keys[:, : length - offset])
            if grad_keys is not None:
                grad_keys[:, : length - offset].addcmul_(grad, queries[:, offset:])
        return (
            None if grad_queries is None else grad_queries.to(queries.dtype),
            None if grad_keys is None else grad_keys.to(keys.dtype),
            None,
            None,
        )


class _ShiftedWeightedSum(torch.autograd.Function):
    """``out[b, i, h] = sum_k weights[b, i, h, k] * v[b, i - offsets[k], h]`` over valid ``k``."""

    @staticmethod
    def forward(ctx, weights: Tensor, values: Tensor, offsets: tuple[int, ...]) -> Tensor:
        length = values.shape[1]
        out = torch.zeros_like(values, dtype=_accumulation_dtype(values.dtype))  # [B, L, H, E]
        for slot, offset in enumerate(offsets):
            out[:, offset:].addcmul_(weights[:, offset:, :, slot].unsqueeze(-1), values[:, : length - offset])
        ctx.save_for_backward(weights, values)
        ctx.offsets = offsets
        return out.to(values.dtype)

    @staticmethod
    def backward(ctx, grad_out: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
        weights, values = ctx.saved_tensors
        length = values.shape[1]
        grad_out = grad_out.to(values.dtype)
        want_weights, want_values = ctx.needs_input_grad[:2]
        grad_weights = torch.zeros_like(weights) if want_weights else None
        grad_values = torch.zeros_like(values, dtype=_accumulation_dtype(values.dtype)) if want_values else None
        for slot, offset in enumerate(ctx.offsets):
            if grad_weights is not None:
                _dot_into(grad_weights[:, offset:, :, slot], grad_out[:, offset:], values[:, : length - offset])
            if grad_values is not None:
                grad_values[:, : length - offset].addcmul_(
                    weights[:, offset:, :, slot].unsqueeze(-1), grad_out[:, offset:]
                )
        return grad_weights, None if grad_values is None else grad_values.to(values.dtype), None


class _ShortSoftmax(torch.autograd.Function):
    """Softmax over a short last dimension, as max, exp, sum and divide: ``y = exp(s - max s) / sum``.

    Backward: ``grad_s = y * (grad_y - sum(grad_y * y))``.
    """

    @staticmethod
    def forward(ctx, scores: Tensor) -> Tensor:
        weights = scores - scores.amax(dim=-1, keepdim=True)
        weights.exp_()
        weights /= weights.sum(dim=-1, keepdim=True)
        ctx.save_for_backward(weights)
        return weights

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        (weights,) = ctx.saved_tensors
        return weights * (grad - (grad * weights).sum(dim=-1, keepdim=True))


def offset_softmax(scores: Tensor) -> Tensor:
    """Softmax over the last dimension of LogSparse's scores (one entry per offset, about log2 L of them)
    in float32 or wider, returned in that dtype.

    On the CPU, PyTorch's softmax kernel handles a last dimension this short row by row:
    [224, 191, 4, 9] float32 scores take 61 ms against 9 ms as max, exp, sum and divide, and its
    backward 24 ms (benchmarks/README.md, "LogSparse's softmax over offsets"). Other devices
    keep ``torch.softmax``.
    """
    scores = scores.to(_accumulation_dtype(scores.dtype))
    if scores.device.type != "cpu":
        return torch.softmax(scores, dim=-1)
    return _ShortSoftmax.apply(scores)
