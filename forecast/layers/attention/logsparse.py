"""LogSparse attention (Li et al., NeurIPS 2019): each query attends to the keys at log-spaced
offsets, computed without building the dense mask."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from forecast.checks import require_real
from forecast.errors import ConfigError
from forecast.layers.attention.autograd import _ShiftedScores, _ShiftedWeightedSum, offset_softmax
from forecast.layers.attention.reference import _check_attention_inputs, dense_masked_attention
from forecast.layers.dropout import apply_dropout
from forecast.layers.masks import (
    logsparse_mask,
    logsparse_offsets,
    logsparse_pattern_is_dense,
    validate_logsparse_options,
)

logger = logging.getLogger(__name__)


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
        weights = offset_softmax(scores).to(values.dtype)  # [B, L, H, n]
        dropped = apply_dropout(weights, self.dropout, self.training)
        out = _ShiftedWeightedSum.apply(dropped, values, offsets)  # [B, L, H, E]
        if not need_weights:
            return out
        offset_tensor = torch.tensor(offsets, device=queries.device)
        return out, LogSparseWeights(weights.permute(0, 2, 1, 3), offset_tensor)  # [B, H, L, n]
