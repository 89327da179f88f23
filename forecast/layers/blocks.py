"""Transformer blocks shared by the models: feed-forward, encoder/decoder layers, distilling.

Layers are post-norm as in Informer. Attention comes in as a ready
``forecast.layers.attention.MultiHeadAttention`` so every block works with any
attention variant.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from forecast.layers.dropout import Dropout, activation_dropout_linear, add_dropout
from forecast.layers.embedding import PaddingMode

Activation = Literal["gelu", "relu"]


class FeedForward(nn.Module):
    """Position-wise D -> d_ff -> D with dropout on the d_ff activations (its scale folded into the
    second layer's weight on the CPU: :func:`~forecast.layers.dropout.activation_dropout_linear`)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float, activation: Activation = "gelu"):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_model, d_ff),
            nn.GELU() if activation == "gelu" else nn.ReLU(),
            Dropout(dropout),
            nn.Linear(d_ff, d_model),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        expand, activation, dropout, project = self.net  # a Sequential for the checkpoints' names
        return activation_dropout_linear(expand(x), activation, dropout.p, self.training, project)


class _ResidualBlock(nn.Module):
    """A block whose branches join the stream as ``x + dropout(branch)`` (one pass: :func:`add_dropout`)."""

    def __init__(self, dropout: float):
        super().__init__()
        self.dropout = Dropout(dropout)

    def _residual(self, x: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
        return add_dropout(x, branch, self.dropout.p, self.training)


class EncoderLayer(_ResidualBlock):
    """Self-attention then feed-forward, each with a residual and LayerNorm."""

    def __init__(self, attention: nn.Module, d_model: int, d_ff: int, dropout: float,
                 activation: Activation = "gelu"):
        super().__init__(dropout)
        self.attention = attention
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor, need_weights: bool = False):
        attended = self.attention(x, x, x, need_weights=need_weights)
        attended, weights = attended if need_weights else (attended, None)
        x = self.norm1(self._residual(x, attended))
        x = self.norm2(self._residual(x, self.feed_forward(x)))
        return x, weights


class DistillingLayer(nn.Module):
    """Self-attention distilling: conv, BatchNorm, ELU, max-pool with stride 2 (L -> ceil(L/2)).

    The original pads the conv by 2 (length L+2, circular), so 96 steps become 49; here
    the conv preserves length and 96 become 48. The padding mode is switchable.
    """

    def __init__(self, d_model: int, padding_mode: PaddingMode = "circular"):
        super().__init__()
        self.conv = nn.Conv1d(d_model, d_model, kernel_size=3, padding=1, padding_mode=padding_mode)
        self.norm = nn.BatchNorm1d(d_model)
        self.activation = nn.ELU()
        self.pool = nn.MaxPool1d(kernel_size=3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.transpose(1, 2)  # [B, L, D] -> [B, D, L]
        y = self.pool(self.activation(self.norm(self.conv(y))))  # [B, D, ceil(L/2)]
        # One copy here saves one in each projection of the next layer, which would
        # otherwise copy a transposed input and add its bias in a separate pass.
        return y.transpose(1, 2).contiguous()  # [B, ceil(L/2), D]


class Encoder(nn.Module):
    """Encoder layers with an optional distilling layer between consecutive ones."""

    def __init__(self, layers: list[EncoderLayer], distilling: list[DistillingLayer] | None,
                 d_model: int):
        super().__init__()
        if distilling is not None and len(distilling) != len(layers) - 1:
            raise ValueError("one distilling layer goes between each pair of encoder layers")
        self.layers = nn.ModuleList(layers)
        self.distilling = nn.ModuleList(distilling) if distilling is not None else None
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor, need_weights: bool = False):
        all_weights = []
        for i, layer in enumerate(self.layers):
            x, weights = layer(x, need_weights)
            all_weights.append(weights)
            if self.distilling is not None and i < len(self.distilling):
                x = self.distilling[i](x)
        return self.norm(x), all_weights


class DecoderLayer(_ResidualBlock):
    """Masked self-attention, cross-attention to the encoder, feed-forward (post-norm)."""

    def __init__(self, self_attention: nn.Module, cross_attention: nn.Module, d_model: int,
                 d_ff: int, dropout: float, activation: Activation = "gelu"):
        super().__init__(dropout)
        self.self_attention = self_attention
        self.cross_attention = cross_attention
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        x = self.norm1(self._residual(x, self.self_attention(x, x, x)))
        x = self.norm2(self._residual(x, self.cross_attention(x, memory, memory)))
        return self.norm3(self._residual(x, self.feed_forward(x)))


class PreNormCausalBlock(EncoderLayer):
    """GPT-style block, the parts of EncoderLayer in pre-norm order: ``x + attention(LN(x))``, then ``x + feed_forward(LN(x))``.

    Used by decoder-only stacks (the LogSparse Transformer). Pre-norm leaves the
    residual stream unnormalized, so a stack of these needs one final LayerNorm.
    The block is causal exactly when its attention is: LayerNorm and the feed-forward
    act on each position alone.
    """

    def forward(self, x: torch.Tensor, need_weights: bool = False):
        normed = self.norm1(x)
        attended = self.attention(normed, normed, normed, need_weights=need_weights)
        attended, weights = attended if need_weights else (attended, None)
        x = self._residual(x, attended)
        return self._residual(x, self.feed_forward(self.norm2(x))), weights


class LinearSkip(nn.Module):
    """A linear map from a sequence's L input steps to its P forecast steps, added to a network's forecast.

    LSTNet's "highway" (Lai et al., SIGIR 2018) and TiDE's global residual (Das et al., TMLR 2023): the
    linear map carries what a linear forecaster gets right (DLinear's level on ETTh1), and the network
    learns what is left. Its weight and bias start at zero, so an untrained skip adds nothing and the
    model starts as it would without one. ``forward(x [B', L, V]) -> [B', P, V]``, one map shared by the
    V variables.
    """

    def __init__(self, seq_len: int, pred_len: int):
        super().__init__()
        self.linear = nn.Linear(seq_len, pred_len)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x.transpose(1, 2)).transpose(1, 2)  # [B', V, L] -> [B', V, P] -> [B', P, V]
