"""Incremental decoding of a stack of pre-norm causal blocks: a key/value cache per layer.

An autoregressive forecast feeds each step's output back as the next token's input.
Recomputing the whole prefix for every new token costs O(T) passes of O(T) tokens;
:class:`KeyValueCache` runs one full pass over the known tokens (:meth:`~KeyValueCache.prefill`)
and then one token at a time (:meth:`~KeyValueCache.step`): each layer keeps the keys and
values of the tokens so far and the last ``k - 1`` inputs of its convolutional query and
key projections, and the new token attends only to the offsets its pattern makes visible.
Used by the LogSparse Transformer; any stack of :class:`~forecast.layers.blocks.PreNormCausalBlock`
whose attention is causal can decode through it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from forecast.layers.attention import MultiHeadAttention
from forecast.layers.attention.autograd import offset_softmax
from forecast.layers.blocks import PreNormCausalBlock
from forecast.layers.dropout import apply_dropout


@dataclass
class LayerCache:
    """One layer's memory of the tokens decoded so far: what the next token's attention reads.

    ``window [B', k-1, D]``: the last ``k - 1`` attention inputs (after the block's first
    LayerNorm); with the new token's they are the receptive field of its convolutional
    query and key (zero rows before token 0, as the convolution's left padding).
    ``keys``/``values``: one ``[B', H, E]`` per token so far, in position order; the
    attention reads only the positions its pattern makes visible from the newest token.
    """

    window: Tensor
    keys: list[Tensor]
    values: list[Tensor]


def _attend_prefix(attention: MultiHeadAttention, normed: Tensor) -> tuple[Tensor, LayerCache]:
    """The attention branch ``[B', S, D]`` of a full pass over ``normed [B', S, D]`` and the layer's cache.

    ``MultiHeadAttention.forward`` spelled out, so that its keys and values are kept
    rather than computed twice.
    """
    batch, length, width = normed.shape
    head_shape = (batch, length, attention.n_heads, width // attention.n_heads)
    queries = attention.query_projection(normed).reshape(head_shape)  # [B', S, D] -> [B', S, H, E]
    keys = attention.key_projection(normed).reshape(head_shape)  # [B', S, D] -> [B', S, H, E]
    values = attention.value_projection(normed).reshape(head_shape)  # [B', S, D] -> [B', S, H, E]
    merged = attention.attention(queries, keys, values).reshape(batch, length, width)  # [B', S, H, E] -> [B', S, D]
    context = attention.query_projection.kernel_size - 1
    last = normed[:, max(length - context, 0):]  # [B', min(S, k-1), D]
    window = F.pad(last, (0, 0, context - last.shape[1], 0))  # [B', k-1, D]: zero rows before token 0
    cache = LayerCache(window, list(keys.unbind(1)), list(values.unbind(1)))
    return attention.dropout(attention.out_projection(merged)), cache


def _attend_newest(
    query: Tensor, keys: Sequence[Tensor], values: Sequence[Tensor], dropout: float, training: bool
) -> Tensor:
    """Attention of one query ``[B, H, E]`` over its visible keys and values (``[B, H, E]`` each, one per offset).

    The arithmetic of LogSparseAttention's fast path for its newest query, in the same
    order: a dot product per offset, the scale, a softmax over the offsets in at least
    float32, and the weighted sum accumulated offset by offset. Returns ``[B, H, E]``.
    """
    accumulate = torch.promote_types(query.dtype, torch.float32)
    scores = query.new_empty(*query.shape[:2], len(keys))  # [B, H, n]
    for slot, key in enumerate(keys):
        scores[..., slot] = torch.linalg.vecdot(query, key)
    scores.mul_(query.shape[-1] ** -0.5)
    weights = offset_softmax(scores).to(values[0].dtype)  # [B, H, n]
    weights = apply_dropout(weights, dropout, training)
    out = torch.zeros_like(query, dtype=accumulate)  # [B, H, E]
    for slot, value in enumerate(values):
        out.addcmul_(weights[..., slot].unsqueeze(-1), value)
    return out.to(values[0].dtype)


class KeyValueCache:
    """The per-layer caches of ``blocks`` for one batch of sequences, filled by :meth:`prefill`.

    ``visible_offsets(position)`` names the offsets back from token ``position`` that its
    attention reads (0 first, every one at most ``position``): ``range(position + 1)`` for
    full causal attention, the log-sparse pattern's otherwise.
    """

    def __init__(self, blocks: Sequence[PreNormCausalBlock],
                 visible_offsets: Callable[[int], tuple[int, ...]]) -> None:
        self.blocks = blocks
        self.visible_offsets = visible_offsets
        self.layers: list[LayerCache] = []

    def prefill(self, hidden: Tensor) -> Tensor:
        """One full pass over the embedded tokens ``hidden [B', n, D]``, filling every layer's cache.

        Returns the last token's state ``[B', D]`` before the stack's final LayerNorm.
        """
        if self.layers:
            raise RuntimeError("KeyValueCache.prefill runs once per cache; make a new cache for new sequences")
        # PreNormCausalBlock.forward, keeping each layer's keys and values.
        for block in self.blocks:
            attended, layer = _attend_prefix(block.attention, block.norm1(hidden))
            hidden = hidden + block.dropout(attended)
            hidden = hidden + block.dropout(block.feed_forward(block.norm2(hidden)))
            self.layers.append(layer)
        return hidden[:, -1]

    def step(self, hidden: Tensor, position: int) -> Tensor:
        """The state ``[B', D]`` (before the final LayerNorm) of the embedded token ``hidden [B', D]``
        at ``position``, from the tokens before it; the caches take it in."""
        # PreNormCausalBlock.forward for one position: LayerNorm and feed-forward act per position.
        for block, layer in zip(self.blocks, self.layers, strict=True):
            hidden = hidden + block.dropout(self._attend_step(block.attention, block.norm1(hidden), position, layer))
            hidden = hidden + block.dropout(block.feed_forward(block.norm2(hidden)))
        return hidden

    def _attend_step(self, attention: MultiHeadAttention, normed: Tensor, position: int, layer: LayerCache) -> Tensor:
        """The attention branch ``[B', D]`` of token ``position`` from its input ``normed [B', D]``.

        Appends the token's key and value to ``layer`` and slides its convolution window.
        """
        batch, width = normed.shape
        head_shape = (batch, attention.n_heads, width // attention.n_heads)
        field = torch.cat([layer.window, normed.unsqueeze(1)], dim=1)  # [B', k, D]: the convolution's receptive field
        layer.window = field[:, 1:]
        query = attention.query_projection.project_last(field).reshape(head_shape)  # [B', D] -> [B', H, E]
        layer.keys.append(attention.key_projection.project_last(field).reshape(head_shape))  # [B', D] -> [B', H, E]
        layer.values.append(attention.value_projection(normed).reshape(head_shape))  # [B', D] -> [B', H, E]
        offsets = self.visible_offsets(position)
        inner = attention.attention
        out = _attend_newest(query, [layer.keys[position - d] for d in offsets],
                             [layer.values[position - d] for d in offsets], inner.dropout, inner.training)
        merged = out.reshape(batch, width)  # [B', H, E] -> [B', D]
        return attention.dropout(attention.out_projection(merged))
