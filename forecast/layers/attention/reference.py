"""Shared by every attention: input checks, the accumulation dtype, softmax attention of heads,
and the dense reference."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from forecast.errors import ConfigError
from forecast.layers.dropout import apply_dropout
from forecast.layers.masks import causal_mask


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


def head_attention(queries: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None = None, *,
                   causal: bool = False, dropout: float = 0.0) -> Tensor:
    """Softmax attention of head-major ``queries [B, H, L, E]`` over ``keys``/``values [B, H, S, E]``:
    ``[B, H, L, E]``. ``mask`` (boolean, ``True`` = may attend) and/or ``causal`` (top-left; with a mask, a key
    must pass both); every query must see a key. ``dropout`` applies to the probabilities (pass 0 outside training).

    ``scaled_dot_product_attention``, except with dropout on the CPU: there SDPA takes its math path,
    whose ``_safe_softmax`` reduction and ``bernoulli_`` mask made forward and backward 1.4-1.7x as
    long as this explicit product with :func:`~forecast.layers.dropout.apply_dropout`'s cheaper
    mask (Informer's cross-attention at the improved recipe's size; benchmarks/README.md).
    """
    if dropout == 0.0 or queries.device.type != "cpu":
        return F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask, dropout_p=dropout,
                                              is_causal=causal)
    scores = queries @ keys.transpose(-1, -2) * queries.shape[-1] ** -0.5  # [B, H, L, S]
    if causal:  # both given: a key must pass both, as SDPA reads them
        causal_keys = causal_mask(queries.shape[-2], keys.shape[-2], queries.device)  # [L, S]
        mask = causal_keys if mask is None else mask & causal_keys
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores.to(_accumulation_dtype(scores.dtype)), dim=-1).to(values.dtype)
    return apply_dropout(weights, dropout, True) @ values  # [B, H, L, E]


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
    dropped = apply_dropout(weights, dropout, training)
    out = torch.einsum("bhls,bshe->blhe", dropped, values)  # [B, L, H, E]
    return (out, weights) if need_weights else out
