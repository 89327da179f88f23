"""ProbSparse self-attention (Informer): the top-u queries by sparsity attend exactly, the lazy
queries get the mean of the (visible) values."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from forecast.checks import require_choice, require_int, require_real
from forecast.errors import ConfigError
from forecast.layers.attention.autograd import _CausalRunningAverage
from forecast.layers.attention.reference import _accumulation_dtype, _check_attention_inputs, head_attention
from forecast.layers.dropout import apply_dropout
from forecast.layers.masks import causal_mask

LAZY_FILLS = ("mean", "cumsum")


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
        all_valid: whether every entry of ``valid`` is True, known when the sample is drawn (on the CPU), so
            that the measurement never reads it back from the device: no synchronization there, and no graph
            break under ``torch.compile``.
    """

    indices: Tensor
    valid: Tensor
    block_size: int
    query_len: int
    all_valid: bool

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
    return KeySample(indices.to(device), valid.to(device), slots, query_len, bool(valid.all()))


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
    if sample.all_valid:
        measurement = scores.amax(dim=-1) - scores.mean(dim=-1)  # [B, n_blocks, H, G]
    else:
        peak = scores.masked_fill(~valid, float("-inf")).amax(dim=-1)
        mean = scores.masked_fill(~valid, 0.0).sum(dim=-1) / count.clamp(min=1)
        measurement = torch.where(count > 0, peak - mean, 0.0)
    # max - mean is positively homogeneous, so scaling M equals scaling every score.
    measurement = measurement * scale
    measurement = measurement.transpose(1, 2)  # [B, n_blocks, H, G] -> [B, H, n_blocks, G]
    return measurement.reshape(batch, heads, n_blocks * block)[:, :, :query_len]  # [B, H, L]


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

    # Compiled, the draw runs eagerly as one graph break: dynamo traces neither a torch.Generator nor reading
    # the sample's validity back.
    @torch.compiler.disable
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
            return head_attention(selected_queries, key_heads, value_heads, mask, dropout=dropout), None
        scores = selected_queries @ key_heads.transpose(-1, -2) * head_dim**-0.5  # [B, H, u, S]
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores.to(_accumulation_dtype(scores.dtype)), dim=-1).to(values.dtype)
        return apply_dropout(weights, dropout, self.training) @ value_heads, weights

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
