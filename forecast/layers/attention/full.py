"""Exact softmax attention through ``scaled_dot_product_attention``, or its explicit equal with dropout on the CPU."""

from __future__ import annotations

from torch import Tensor, nn

from forecast.checks import require_real
from forecast.layers.attention.reference import _check_attention_inputs, dense_masked_attention, head_attention
from forecast.layers.masks import causal_mask


class FullAttention(nn.Module):
    """Exact softmax attention through ``torch.nn.functional.scaled_dot_product_attention``
    (:func:`~forecast.layers.attention.reference.head_attention`).

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
        out = head_attention(
            queries.transpose(1, 2),  # [B, L, H, E] -> [B, H, L, E]
            keys.transpose(1, 2),  # [B, S, H, E] -> [B, H, S, E]
            values.transpose(1, 2),
            causal=self.causal,
            dropout=self.dropout if self.training else 0.0,
        )
        return out.transpose(1, 2)  # [B, H, L, E] -> [B, L, H, E]
