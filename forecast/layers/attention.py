"""Attention kernels: full (SDPA), ProbSparse, LogSparse, and the multi-head wrapper.

Every inner attention module has the same contract::

    forward(queries [B, L, H, E], keys [B, S, H, E], values [B, S, H, E],
            need_weights: bool = False) -> out [B, L, H, E]   or   (out, weights)

``weights`` is meant for plotting and differs per module (see each class): a dense
``[B, H, L, S]`` tensor for :class:`FullAttention`, a :class:`ProbSparseWeights` and a
:class:`LogSparseWeights` for the sparse modules; both have ``to_dense()`` for small
``L``. Returned weights are the attention probabilities before dropout.

Causal alignment is top-left, as in ``scaled_dot_product_attention``: query ``i``
sees keys ``j <= i`` (see :mod:`forecast.layers.masks`).

Informer's ``mix`` option is deliberately not offered: its reshape treats
``[B, H, L, E]`` as ``[B, L, H, E]`` and scrambles heads with time steps.
"""

from __future__ import annotations

import inspect
import logging
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from forecast.checks import require_choice, require_int, require_real
from forecast.errors import ConfigError
from forecast.layers.masks import (
    causal_mask,
    logsparse_mask,
    logsparse_offsets,
    logsparse_pattern_is_dense,
    validate_logsparse_options,
)

__all__ = [
    "ATTENTIONS",
    "CausalConv1dProjection",
    "FullAttention",
    "KeySample",
    "LogSparseAttention",
    "LogSparseWeights",
    "MultiHeadAttention",
    "ProbSparseAttention",
    "ProbSparseWeights",
    "build_attention",
    "dense_masked_attention",
    "draw_key_sample",
    "sparsity_measurement",
]

logger = logging.getLogger(__name__)

LAZY_FILLS = ("mean", "cumsum")


# --------------------------------------------------------------------------- checks


def _accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """Softmaxes and sums of half-precision terms run in float32; float64 stays float64."""
    return torch.promote_types(dtype, torch.float32)


def _check_attention_inputs(queries: Tensor, keys: Tensor, values: Tensor) -> None:
    """Raise ConfigError unless queries [B, L, H, E] and keys/values [B, S, H, E] agree."""
    shapes = f"queries {tuple(queries.shape)}, keys {tuple(keys.shape)}, values {tuple(values.shape)}"
    if queries.dim() != 4 or keys.dim() != 4 or values.dim() != 4:
        raise ConfigError(f"attention expects queries [B, L, H, E] and keys/values [B, S, H, E]; got {shapes}")
    if keys.shape != values.shape:
        raise ConfigError(f"keys and values must have the same shape [B, S, H, E]; got {shapes}")
    batch, query_len, heads, head_dim = queries.shape
    if (keys.shape[0], keys.shape[2], keys.shape[3]) != (batch, heads, head_dim):
        raise ConfigError(f"queries and keys must agree on B, H and E; got {shapes}")
    if query_len == 0 or keys.shape[1] == 0:
        raise ConfigError(f"attention needs at least one query and one key; got {shapes}")


# ------------------------------------------------------------------- dense reference


def dense_masked_attention(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    mask: Tensor | None = None,
    *,
    dropout: float = 0.0,
    training: bool = False,
    need_weights: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """Plain softmax attention that materializes the ``[B, H, L, S]`` scores.

    The reference for tests and the "naive dense-masked" line of the benchmark.
    ``mask`` is boolean, broadcastable to ``[B, H, L, S]`` (usually ``[L, S]``),
    ``True`` where a query may attend; a row without any visible key is refused
    (ConfigError) rather than turned into NaN or uniform attention. Returns
    ``out [B, L, H, E]`` and, with ``need_weights``, the ``[B, H, L, S]`` probabilities.
    """
    _check_attention_inputs(queries, keys, values)
    scale = queries.shape[-1] ** -0.5
    scores = torch.einsum("blhe,bshe->bhls", queries, keys) * scale  # [B, H, L, S]
    if mask is not None:
        if mask.dtype != torch.bool:
            raise ConfigError(f"attention masks must be boolean (True = may attend), got {mask.dtype}")
        if not bool(mask.any(dim=-1).all()):
            raise ConfigError("the attention mask leaves a query without any visible key; every row needs a True")
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores.to(_accumulation_dtype(scores.dtype)), dim=-1).to(values.dtype)  # [B, H, L, S]
    dropped = F.dropout(weights, dropout, training)
    out = torch.einsum("bhls,bshe->blhe", dropped, values)  # [B, L, H, E]
    return (out, weights) if need_weights else out


# ---------------------------------------------------------------------- full (SDPA)


class FullAttention(nn.Module):
    """Exact softmax attention through ``torch.nn.functional.scaled_dot_product_attention``.

    ``causal=True`` masks keys after each query (top-left alignment when L != S).
    ``dropout`` applies to the attention probabilities in training mode.
    ``need_weights=True`` takes the dense reference path and returns the
    ``[B, H, L, S]`` probabilities (small L only: it materializes them).
    """

    def __init__(self, causal: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        self.causal = bool(causal)
        self.dropout = require_real("dropout", dropout, low=0, high=1, high_open=True)

    def extra_repr(self) -> str:
        return f"causal={self.causal}, dropout={self.dropout}"

    def forward(
        self, queries: Tensor, keys: Tensor, values: Tensor, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, Tensor]:
        _check_attention_inputs(queries, keys, values)
        if need_weights:
            mask = causal_mask(queries.shape[1], keys.shape[1], queries.device) if self.causal else None
            return dense_masked_attention(
                queries, keys, values, mask, dropout=self.dropout, training=self.training, need_weights=True
            )
        out = F.scaled_dot_product_attention(
            queries.transpose(1, 2),  # [B, L, H, E] -> [B, H, L, E]
            keys.transpose(1, 2),  # [B, S, H, E] -> [B, H, S, E]
            values.transpose(1, 2),
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=self.causal,
        )
        return out.transpose(1, 2)  # [B, H, L, E] -> [B, L, H, E]


# ------------------------------------------------------------------------ ProbSparse


@dataclass(frozen=True)
class KeySample:
    """The keys each query's sparsity measurement looks at.

    Consecutive queries are grouped in blocks of ``block_size``; the queries of one
    block share one row of ``indices``, so the sampled scores of a block are one small
    matrix product instead of a per-query gather.

    Attributes:
        indices: ``[n_blocks, U]`` key positions (long).
        valid: ``[n_blocks * block_size, U]`` bool per query: whether the query uses
            that sample (False for keys in its future, and for the repeated slots of a
            block that enumerates fewer than U keys). Rows past ``query_len`` pad.
        block_size: queries per block.
        query_len: L.
    """

    indices: Tensor
    valid: Tensor
    block_size: int
    query_len: int

    def per_query(self) -> tuple[Tensor, Tensor]:
        """``([L, U] key index, [L, U] validity)`` for every query."""
        indices = self.indices.repeat_interleave(self.block_size, dim=0)  # [n_blocks*G, U]
        return indices[: self.query_len], self.valid[: self.query_len]


def draw_key_sample(
    query_len: int,
    key_len: int,
    sample_size: int,
    *,
    causal: bool,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> KeySample:
    """Draw the keys for ProbSparse's sparsity measurement.

    Queries are split in blocks of ``U = min(sample_size, key_len)`` consecutive
    positions. A block draws U keys uniformly with replacement (as the original
    does) from the keys visible to its last query (all keys when not causal); each
    query then uses the draws it may see, which are a uniform sample of its own
    visible keys. When a block can see at most U keys it enumerates them exactly
    instead of sampling. Drawn on the CPU from ``generator`` (the global RNG when
    ``None``) and moved to ``device``.
    """
    slots = min(sample_size, key_len)
    n_blocks = math.ceil(query_len / slots)
    first_query = torch.arange(n_blocks) * slots
    last_query = (first_query + slots - 1).clamp(max=query_len - 1)
    if causal:
        block_range = last_query.clamp(max=key_len - 1) + 1  # keys visible to the block's last query
    else:
        block_range = torch.full((n_blocks,), key_len)
    uniform = torch.rand(n_blocks, slots, generator=generator, dtype=torch.float64)
    highest = (block_range - 1).unsqueeze(-1)  # [n_blocks, 1]
    sampled = (uniform * block_range.unsqueeze(-1)).long().minimum(highest)  # [n_blocks, U]
    slot = torch.arange(slots)
    enumerated = (block_range <= slots).unsqueeze(-1)  # [n_blocks, 1]
    indices = torch.where(enumerated, slot.minimum(highest), sampled)  # [n_blocks, U]
    # Sampled blocks have block_range > U, so only enumerated blocks lose repeated slots.
    valid = (slot < block_range.unsqueeze(-1)).repeat_interleave(slots, dim=0)  # [n_blocks*G, U]
    if causal:
        query_position = torch.arange(n_blocks * slots).unsqueeze(-1)  # [n_blocks*G, 1]
        valid = valid & (indices.repeat_interleave(slots, dim=0) <= query_position)
    return KeySample(indices.to(device), valid.to(device), slots, query_len)


def _query_blocks(queries: Tensor, n_blocks: int, block: int) -> Tensor:
    """Queries regrouped as ``[B, n_blocks, H, G, E]`` (zero rows pad the last block), in one copy."""
    batch, query_len, heads, head_dim = queries.shape
    blocks = queries.new_empty(batch, n_blocks, heads, block, head_dim)
    full = query_len // block
    position_major = blocks.transpose(2, 3)  # [B, n_blocks, G, H, E] view of the same memory
    position_major[:, :full] = queries[:, : full * block].view(batch, full, block, heads, head_dim)
    if full < n_blocks:
        position_major[:, full, : query_len - full * block] = queries[:, full * block :]
        position_major[:, full, query_len - full * block :] = 0
    return blocks


def sparsity_measurement(queries: Tensor, keys: Tensor, sample: KeySample, scale: float) -> Tensor:
    """ProbSparse's query sparsity ``M = max - mean`` of the sampled scaled scores.

    The mean divides by the number of samples the query uses (the original divides
    by L_K). A query with no usable sample gets ``M = 0``. Never builds more than
    ``[B, L, H, U]`` scores; the gathered keys are the size of ``queries``. Returns
    ``[B, H, L]`` in at least float32. No gradient is needed: M only ranks queries.
    """
    batch, query_len, heads, head_dim = queries.shape
    n_blocks, slots = sample.indices.shape
    block = sample.block_size
    query_blocks = _query_blocks(queries, n_blocks, block)  # [B, n_blocks, H, G, E]
    sampled_keys = keys.index_select(1, sample.indices.reshape(-1))  # [B, n_blocks*U, H, E]
    sampled_keys = sampled_keys.view(batch, n_blocks, slots, heads, head_dim)  # [B, n_blocks, U, H, E]
    scores = query_blocks @ sampled_keys.permute(0, 1, 3, 4, 2)  # [B, n_blocks, H, G, U]
    scores = scores.to(_accumulation_dtype(scores.dtype))
    valid = sample.valid.view(1, n_blocks, 1, block, slots)
    count = valid.sum(dim=-1)  # [1, n_blocks, 1, G]
    if bool(valid.all()):
        measurement = scores.amax(dim=-1) - scores.mean(dim=-1)  # [B, n_blocks, H, G]
    else:
        peak = scores.masked_fill(~valid, float("-inf")).amax(dim=-1)
        mean = scores.masked_fill(~valid, 0.0).sum(dim=-1) / count.clamp(min=1)
        measurement = torch.where(count > 0, peak - mean, 0.0)
    # max - mean is positively homogeneous, so scaling M equals scaling every score.
    measurement = measurement * scale
    measurement = measurement.transpose(1, 2)  # [B, n_blocks, H, G] -> [B, H, n_blocks, G]
    return measurement.reshape(batch, heads, n_blocks * block)[:, :, :query_len]  # [B, H, L]


def _running_sum(values: Tensor, reverse: bool = False, weights: Tensor | None = None) -> Tensor:
    """Cumulative sum of ``[B, S, ...]`` over S (``reverse``: from the end), in float32 or wider.

    ``weights`` (``[S]``) multiplies each position first. A blocked scan: a loop over
    the ~sqrt(S) positions of a block, vectorized over all blocks, then one carry per
    block. ``torch.cumsum`` over a non-last dimension is about 6x slower on CPU and
    made the masked ProbSparse slower than its attention.
    """
    batch, length = values.shape[:2]
    width = values[0, 0].numel()
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


def _log_count(factor: int, length: int) -> int:
    """``factor * ceil(ln length)``, at least 1 (ln 1 = 0 would select nothing)."""
    return max(1, factor * math.ceil(math.log(length)))


@dataclass(frozen=True)
class ProbSparseWeights:
    """What ProbSparse attention did, for plotting query sparsity.

    Attributes:
        sparsity: ``[B, H, L]`` measurement (at least float32) M of every query.
        selected_queries: ``[B, H, u]`` positions of the queries given exact attention.
        selected_weights: ``[B, H, u, S]`` their attention probabilities.
        causal: whether the masked (decoder) variant ran.
        lazy_fill: the masked variant's ``"mean"`` or ``"cumsum"`` (see :class:`ProbSparseAttention`);
            unmasked lazy queries always get the mean.
    """

    sparsity: Tensor
    selected_queries: Tensor
    selected_weights: Tensor
    causal: bool
    lazy_fill: str

    def to_dense(self) -> Tensor:
        """``[B, H, L, S]`` weights (at least float32) every query effectively used (small L only).

        Lazy rows are uniform over the keys they may see (all ones over them with the
        masked variant's ``"cumsum"`` fill, which is not an average).
        """
        batch, heads, query_len = self.sparsity.shape
        key_len = self.selected_weights.shape[-1]
        device = self.sparsity.device
        dtype = _accumulation_dtype(self.selected_weights.dtype)
        if self.causal:
            lazy = causal_mask(query_len, key_len, device).to(dtype)  # [L, S]
        else:
            lazy = torch.ones(query_len, key_len, device=device, dtype=dtype)
        if self.lazy_fill == "mean" or not self.causal:
            lazy = lazy / lazy.sum(dim=-1, keepdim=True)
        dense = lazy.expand(batch, heads, query_len, key_len)  # [B, H, L, S]
        index = self.selected_queries.unsqueeze(-1).expand(-1, -1, -1, key_len)  # [B, H, u, S]
        return dense.scatter(2, index, self.selected_weights.to(dtype))


def _default_generator_state(module: nn.Module, state_dict: dict, prefix: str, *args: object) -> None:
    """Let state dicts saved before the sampler state was stored load (the generator restarts from ``seed``)."""
    state_dict.setdefault(prefix + "_extra_state", torch.empty(0, dtype=torch.uint8))


class ProbSparseAttention(nn.Module):
    """ProbSparse self-attention (Zhou et al., AAAI 2021), deterministic and O(L log L).

    Draws ``U = factor * ceil(ln S)`` keys, measures each query's sparsity
    ``M = max - mean`` of its sampled scores, gives the top ``u = factor * ceil(ln L)``
    queries exact attention over all keys, and fills the other ("lazy") queries with
    the mean of the values. ``causal=True`` is the masked decoder variant.

    Deliberate deviations from the original code (docs/pitfalls.md):

    * Sampling is reproducible. In eval mode the key sample is drawn from a fresh
      generator seeded with ``seed``, so the same input always gives the same output.
      In training mode it is re-drawn on every call from this module's own generator
      (seeded with ``seed``; never the global RNG). ``seed=None`` restores the
      original: draws from the global RNG on every call, eval included. The
      sample depends only on ``seed``, L and S, so give each layer its own seed.
      The training generator's state is part of ``state_dict()`` (an ``_extra_state``
      uint8 tensor), so a run resumed from a checkpoint draws the samples an
      uninterrupted run would; state dicts saved without it load with the generator
      restarted from ``seed``. (Activation checkpointing would recompute a training
      forward with a fresh sample.)
    * Consecutive queries share their key draws in blocks of U (see
      :func:`draw_key_sample`); each query's sample is still uniform over the keys
      it may see. This makes the sampled scores batched matrix products and keeps
      memory O(L E) where the original copies a ``[B, H, L, U, E]`` tensor.
    * M averages over the samples used (U), not over L_K. A block that may see at
      most U keys uses all of them exactly.
    * Masked variant: M and the lazy fill only use keys each query may see (the
      original ranks decoder queries against future keys), and lazy queries get the
      mean of the values they may see. ``causal_lazy_fill="cumsum"`` gives the
      original's un-normalized cumulative sum, whose scale grows with position.
    * ``dropout`` is applied to the selected queries' attention probabilities, as in
      full attention (the original never applies it). Lazy queries carry no
      attention probabilities to drop.
    * No ``mix`` option (it scrambles heads and time steps).

    Causality of the masked variant: every output uses only keys and values at or
    before its position, and a query's M only its own query and those keys; but, as
    in the paper, the
    top-u choice ranks all L queries at once, so a change at positions >= t can turn
    an earlier query from exact to lazy or back. Informer's decoder feeds
    placeholders, not targets, at future positions, so nothing leaks there.

    Memory is O(L log L): the largest tensors are the ``[B, H, L, U]`` sampled scores,
    the ``[B, H, u, S]`` scores of the selected queries, and copies the size of the
    inputs. Gradients reach queries (selected ones), keys and values; M is computed
    without gradient because it only ranks.

    ``need_weights=True`` returns ``(out, ProbSparseWeights)``.
    """

    def __init__(
        self,
        factor: int = 5,
        causal: bool = False,
        dropout: float = 0.0,
        seed: int | None = 0,
        causal_lazy_fill: str = "mean",
    ) -> None:
        super().__init__()
        self.factor = require_int("factor", factor, 1)
        self.causal = bool(causal)
        self.dropout = require_real("dropout", dropout, low=0, high=1, high_open=True)
        self.seed = require_int("seed", seed, 0, optional=True)
        self.causal_lazy_fill = require_choice("causal_lazy_fill", causal_lazy_fill, LAZY_FILLS)
        self._train_generator: torch.Generator | None = None
        self.register_load_state_dict_pre_hook(_default_generator_state)

    def get_extra_state(self) -> Tensor:
        """The training generator's state (uint8), empty before the first training draw."""
        if self._train_generator is None:
            return torch.empty(0, dtype=torch.uint8)
        return self._train_generator.get_state()

    def set_extra_state(self, state: Tensor) -> None:
        if not isinstance(state, Tensor) or state.dtype != torch.uint8 or state.dim() != 1:
            raise ConfigError(
                f"ProbSparseAttention: the saved sampler state must be a 1-D uint8 tensor, got {type(state).__name__}"
            )
        if state.numel() == 0:
            self._train_generator = None
            return
        generator = torch.Generator()
        generator.set_state(state.cpu())
        self._train_generator = generator

    def extra_repr(self) -> str:
        return (
            f"factor={self.factor}, causal={self.causal}, dropout={self.dropout}, seed={self.seed}, "
            f"causal_lazy_fill={self.causal_lazy_fill!r}"
        )

    def selected_count(self, query_len: int) -> int:
        """u: how many queries get exact attention."""
        return min(query_len, _log_count(self.factor, query_len))

    def sample_size(self, key_len: int) -> int:
        """U: how many keys each query's sparsity measurement draws."""
        return _log_count(self.factor, key_len)

    def _generator(self) -> torch.Generator | None:
        if self.seed is None:
            return None
        if not self.training:
            return torch.Generator().manual_seed(self.seed)
        if self._train_generator is None:
            self._train_generator = torch.Generator().manual_seed(self.seed)
        return self._train_generator

    def sample_keys(self, query_len: int, key_len: int, device: torch.device | str | None = None) -> KeySample:
        """The key sample the next forward call would use (advances it in training mode)."""
        return draw_key_sample(
            query_len,
            key_len,
            self.sample_size(key_len),
            causal=self.causal,
            generator=self._generator(),
            device=device,
        )

    def _lazy_fill(self, values: Tensor, query_len: int) -> Tensor:
        """``[B, L, H, E]`` output of the lazy queries."""
        batch, key_len, heads, head_dim = values.shape
        if not self.causal:
            mean = values.mean(dim=1, keepdim=True, dtype=_accumulation_dtype(values.dtype))  # [B, 1, H, E]
            return mean.to(values.dtype).expand(batch, query_len, heads, head_dim)
        running = _CausalRunningAverage.apply(values, self.causal_lazy_fill == "mean")  # [B, S, H, E]
        if query_len <= key_len:
            return running[:, :query_len]
        last_visible = torch.arange(query_len, device=values.device).clamp(max=key_len - 1)
        return running.index_select(1, last_visible)  # [B, L, H, E]

    def _attend_selected(
        self, queries: Tensor, keys: Tensor, values: Tensor, selected: Tensor, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """Exact attention of the selected queries: ``[B, H, u, E]`` and optional weights."""
        batch, _, heads, head_dim = queries.shape
        key_len = keys.shape[1]
        index = selected.transpose(1, 2).unsqueeze(-1).expand(-1, -1, -1, head_dim)  # [B, u, H, E]
        selected_queries = queries.gather(1, index).transpose(1, 2)  # [B, u, H, E] -> [B, H, u, E]
        key_heads = keys.transpose(1, 2)  # [B, S, H, E] -> [B, H, S, E]
        value_heads = values.transpose(1, 2)
        mask = None
        if self.causal:
            key_position = torch.arange(key_len, device=queries.device)
            mask = key_position <= selected.unsqueeze(-1)  # [B, H, u, S]
        dropout = self.dropout if self.training else 0.0
        if not need_weights:
            out = F.scaled_dot_product_attention(
                selected_queries, key_heads, value_heads, attn_mask=mask, dropout_p=dropout
            )
            return out, None
        scores = selected_queries @ key_heads.transpose(-1, -2) * head_dim**-0.5  # [B, H, u, S]
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores.to(_accumulation_dtype(scores.dtype)), dim=-1).to(values.dtype)
        return F.dropout(weights, dropout, self.training) @ value_heads, weights

    def forward(
        self, queries: Tensor, keys: Tensor, values: Tensor, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, ProbSparseWeights]:
        _check_attention_inputs(queries, keys, values)
        batch, query_len, heads, head_dim = queries.shape
        sample = self.sample_keys(query_len, keys.shape[1], queries.device)
        with torch.no_grad():
            sparsity = sparsity_measurement(queries, keys, sample, head_dim**-0.5)  # [B, H, L]
        selected = sparsity.topk(self.selected_count(query_len), dim=-1, sorted=False).indices  # [B, H, u]
        attended, weights = self._attend_selected(queries, keys, values, selected, need_weights)
        index = selected.transpose(1, 2).unsqueeze(-1).expand(-1, -1, -1, head_dim)  # [B, u, H, E]
        fill = self._lazy_fill(values, query_len).to(attended.dtype)
        out = fill.scatter(1, index, attended.transpose(1, 2))  # [B, L, H, E]
        if not need_weights:
            return out
        assert weights is not None
        return out, ProbSparseWeights(sparsity, selected, weights, self.causal, self.causal_lazy_fill)


# ------------------------------------------------------------------------- LogSparse


_DOT_CHUNK_ELEMENTS = 1 << 20


def _dot_into(out: Tensor, left: Tensor, right: Tensor) -> None:
    """``out[b, i, h] = <left[b, i, h], right[b, i, h]>`` for ``[B, n, H, E]`` inputs.

    In chunks of rows: a dot product over E first materializes the elementwise
    product, and a full-size one would be the largest tensor LogSparse allocates.
    """
    batch, rows, heads, head_dim = left.shape
    chunk = max(1, _DOT_CHUNK_ELEMENTS // (batch * heads * head_dim))
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


@dataclass(frozen=True)
class LogSparseWeights:
    """LogSparse attention probabilities in their compact form.

    Attributes:
        weights: ``[B, H, L, n]``; ``weights[b, h, i, k]`` is the weight query ``i``
            gives key ``i - offsets[k]`` (0 where ``i < offsets[k]``).
        offsets: ``[n]`` long, the pattern's distinct offsets in increasing order.
    """

    weights: Tensor
    offsets: Tensor

    def to_dense(self) -> Tensor:
        """``[B, H, L, L]`` probabilities (small L only)."""
        batch, heads, length, _ = self.weights.shape
        key = torch.arange(length, device=self.offsets.device).unsqueeze(-1) - self.offsets  # [L, n]
        visible = key >= 0
        index = key.clamp(min=0).expand(batch, heads, -1, -1)  # [B, H, L, n]
        dense = self.weights.new_zeros(batch, heads, length, length)
        return dense.scatter_add(-1, index, self.weights * visible)


class LogSparseAttention(nn.Module):
    """LogSparse self-attention (Li et al., NeurIPS 2019): always causal, O(L log L).

    Query ``i`` attends key ``i - d`` for each offset ``d`` of
    :func:`~forecast.layers.masks.logsparse_offsets` (``i`` itself and ``i - 2^m``; a
    dense ``local_window`` before the log steps; restart every ``sub_len`` steps).
    Requires self-attention (L == S). The fast path computes the scores one shifted
    view per distinct offset, softmaxes over the offsets with a validity table, and
    never builds an L x S score or mask matrix. ``dense_reference=True`` runs the
    dense boolean-masked reference instead (for tests and comparisons).

    ``sub_len`` so small that the restarted pattern covers every past step is allowed
    but logged as a warning, since the attention is then dense causal at O(L^2) cost.
    ``need_weights=True`` returns ``(out, LogSparseWeights)`` (dense ``[B, H, L, L]``
    probabilities with ``dense_reference=True``). Double backward is not supported.
    """

    def __init__(
        self,
        local_window: int = 0,
        sub_len: int | None = None,
        dropout: float = 0.0,
        dense_reference: bool = False,
    ) -> None:
        super().__init__()
        validate_logsparse_options(local_window, sub_len)
        self.local_window = local_window
        self.sub_len = sub_len
        self.dropout = require_real("dropout", dropout, low=0, high=1, high_open=True)
        self.dense_reference = bool(dense_reference)
        if logsparse_pattern_is_dense(local_window, sub_len):
            logger.warning(
                "LogSparse sub_len=%s with local_window=%s attends every past step: this is dense causal "
                "attention at quadratic cost; use sub_len >= %s for a sparse pattern",
                sub_len,
                local_window,
                local_window + 4,
            )

    def extra_repr(self) -> str:
        return (
            f"local_window={self.local_window}, sub_len={self.sub_len}, dropout={self.dropout}, "
            f"dense_reference={self.dense_reference}"
        )

    def forward(
        self, queries: Tensor, keys: Tensor, values: Tensor, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, LogSparseWeights] | tuple[Tensor, Tensor]:
        _check_attention_inputs(queries, keys, values)
        length, key_len = queries.shape[1], keys.shape[1]
        if length != key_len:
            raise ConfigError(
                f"LogSparse attention is self-attention: queries and keys need the same length, got "
                f"L={length} and S={key_len}; use 'full' or 'prob' for cross-attention"
            )
        if self.dense_reference:
            mask = logsparse_mask(length, self.local_window, self.sub_len, queries.device)
            return dense_masked_attention(
                queries, keys, values, mask, dropout=self.dropout, training=self.training, need_weights=need_weights
            )
        offsets = logsparse_offsets(length, self.local_window, self.sub_len)
        scale = queries.shape[-1] ** -0.5
        scores = _ShiftedScores.apply(queries, keys, offsets, scale)  # [B, L, H, n]
        weights = torch.softmax(scores.to(_accumulation_dtype(scores.dtype)), dim=-1).to(values.dtype)  # [B, L, H, n]
        dropped = F.dropout(weights, self.dropout, self.training)
        out = _ShiftedWeightedSum.apply(dropped, values, offsets)  # [B, L, H, E]
        if not need_weights:
            return out
        offset_tensor = torch.tensor(offsets, device=queries.device)
        return out, LogSparseWeights(weights.permute(0, 2, 1, 3), offset_tensor)  # [B, H, L, n]


# ------------------------------------------------------------ projections, multi-head


class CausalConv1dProjection(nn.Module):
    """Position-wise projection ``[B, L, D_in] -> [B, L, D_out]`` by a causal convolution.

    Output step ``t`` sees input steps ``t - k + 1 .. t`` (left zero padding of
    ``k - 1``; no circular padding). ``kernel_size=1`` is exactly a linear layer (and
    runs as one). Parameters are those of ``nn.Conv1d`` (``conv.weight [D_out, D_in, k]``).
    """

    def __init__(self, in_features: int, out_features: int, kernel_size: int = 1, bias: bool = True) -> None:
        super().__init__()
        require_int("in_features", in_features, 1)
        require_int("out_features", out_features, 1)
        self.kernel_size = require_int("kernel_size", kernel_size, 1)
        self.conv = nn.Conv1d(in_features, out_features, kernel_size, bias=bias)

    def forward(self, inputs: Tensor) -> Tensor:
        if self.kernel_size == 1:
            return F.linear(inputs, self.conv.weight[:, :, 0], self.conv.bias)
        channels_first = inputs.transpose(1, 2)  # [B, L, D_in] -> [B, D_in, L]
        padded = F.pad(channels_first, (self.kernel_size - 1, 0))  # [B, D_in, k-1+L]
        return self.conv(padded).transpose(1, 2)  # [B, D_out, L] -> [B, L, D_out]

    def project_last(self, window: Tensor) -> Tensor:
        """The output at the last step of ``window [B, k, D_in]``, its whole receptive field: ``[B, D_out]``.

        For incremental decoding, where one new step is projected without recomputing the
        earlier ones. One matrix product over the k taps: a convolution whose output has a
        single step is a linear map of the flattened window.
        """
        if window.dim() != 3 or window.shape[1] != self.kernel_size:
            raise ConfigError(f"project_last needs the last kernel_size={self.kernel_size} steps [B, k, D_in]; "
                              f"got {tuple(window.shape)}")
        weight = self.conv.weight.permute(0, 2, 1)  # [D_out, D_in, k] -> [D_out, k, D_in], tap-major like window
        flat_weight = weight.reshape(weight.shape[0], -1)  # [D_out, k, D_in] -> [D_out, k*D_in]
        flat_window = window.reshape(window.shape[0], -1)  # [B, k, D_in] -> [B, k*D_in]
        return F.linear(flat_window, flat_weight, self.conv.bias)


class MultiHeadAttention(nn.Module):
    """Projections, head split/merge and output projection around any inner attention.

    ``forward(queries [B, L, D], keys [B, S, D], values [B, S, D], need_weights=False)
    -> [B, L, D]`` (or ``(out, weights)`` with the inner module's weights). Queries
    and keys are projected by :class:`CausalConv1dProjection` with ``qk_kernel_size``
    (the LogSparse paper's convolutional self-attention; 1 = ordinary projection),
    values by a linear (1x1) projection. ``dropout`` applies to the output
    projection's result. Informer's ``mix`` option is not supported (it scrambles
    heads and time steps).
    """

    def __init__(
        self,
        attention: nn.Module,
        d_model: int,
        n_heads: int,
        qk_kernel_size: int = 1,
        dropout: float = 0.0,
        bias: bool = True,
    ) -> None:
        super().__init__()
        require_int("d_model", d_model, 1)
        require_int("n_heads", n_heads, 1)
        if d_model % n_heads:
            raise ConfigError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
        self.attention = attention
        self.d_model = d_model
        self.n_heads = n_heads
        self.query_projection = CausalConv1dProjection(d_model, d_model, qk_kernel_size, bias)
        self.key_projection = CausalConv1dProjection(d_model, d_model, qk_kernel_size, bias)
        self.value_projection = nn.Linear(d_model, d_model, bias=bias)
        self.out_projection = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(require_real("dropout", dropout, low=0, high=1, high_open=True))

    def _check_inputs(self, queries: Tensor, keys: Tensor, values: Tensor) -> None:
        shapes = f"queries {tuple(queries.shape)}, keys {tuple(keys.shape)}, values {tuple(values.shape)}"
        if queries.dim() != 3 or keys.dim() != 3 or values.dim() != 3:
            raise ConfigError(f"MultiHeadAttention expects [B, L, D] queries and [B, S, D] keys/values; got {shapes}")
        if queries.shape[-1] != self.d_model or keys.shape[-1] != self.d_model or values.shape[-1] != self.d_model:
            raise ConfigError(f"inputs must have d_model={self.d_model} features; got {shapes}")
        if keys.shape[:2] != values.shape[:2] or keys.shape[0] != queries.shape[0]:
            raise ConfigError(f"keys and values need the same [B, S] and the batch of the queries; got {shapes}")

    def forward(
        self, queries: Tensor, keys: Tensor, values: Tensor, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, object]:
        self._check_inputs(queries, keys, values)
        batch, query_len, _ = queries.shape
        key_len = keys.shape[1]
        head_dim = self.d_model // self.n_heads
        q = self.query_projection(queries).reshape(batch, query_len, self.n_heads, head_dim)  # [B, L, H, E]
        k = self.key_projection(keys).reshape(batch, key_len, self.n_heads, head_dim)  # [B, S, H, E]
        v = self.value_projection(values).reshape(batch, key_len, self.n_heads, head_dim)  # [B, S, H, E]
        result = self.attention(q, k, v, need_weights=need_weights)
        out, weights = result if need_weights else (result, None)
        merged = out.reshape(batch, query_len, self.d_model)  # [B, L, H, E] -> [B, L, D]
        out = self.dropout(self.out_projection(merged))
        return (out, weights) if need_weights else out


# -------------------------------------------------------------------------- registry

ATTENTIONS: dict[str, type[nn.Module]] = {
    "full": FullAttention,
    "prob": ProbSparseAttention,
    "logsparse": LogSparseAttention,
}


def build_attention(name: str, *, causal: bool, dropout: float, **options: object) -> nn.Module:
    """Build an inner attention module by registry name (``"full"``, ``"prob"``, ``"logsparse"``).

    ``options`` are the class's other constructor arguments (``factor``, ``seed``,
    ``causal_lazy_fill`` for "prob"; ``local_window``, ``sub_len`` for "logsparse").
    LogSparse is causal by construction, so ``causal=False`` (an encoder's
    self-attention) still gets the causal pattern: a stricter mask is always valid,
    whereas a non-causal LogSparse would invent a pattern the paper does not have.
    Informer's ``mix`` option is refused: it scrambles heads and time steps.
    """
    if name not in ATTENTIONS:
        raise ConfigError(f"unknown attention {name!r}; choose one of {sorted(ATTENTIONS)}")
    cls = ATTENTIONS[name]
    accepted = sorted(set(inspect.signature(cls).parameters) - {"causal", "dropout", "dense_reference"})
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        hint = " ('mix' is not supported: it scrambles heads and time steps)" if "mix" in unknown else ""
        raise ConfigError(f"unknown option(s) {unknown} for attention {name!r}; valid options: {accepted}{hint}")
    if name == "logsparse":
        if not causal:
            logger.debug("LogSparse attention is always causal; building it causal for a causal=False request")
        return cls(dropout=dropout, **options)
    return cls(causal=causal, dropout=dropout, **options)
