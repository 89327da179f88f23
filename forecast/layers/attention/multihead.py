"""Projections, head split and merge around any inner attention."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from forecast.checks import require_int, require_real
from forecast.errors import ConfigError
from forecast.layers.dropout import Dropout


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
            # squeeze, not [:, :, 0]: its backward is a view, where select's allocates and copies the gradient
            return F.linear(inputs, self.conv.weight.squeeze(2), self.conv.bias)
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
        self.dropout = Dropout(require_real("dropout", dropout, low=0, high=1, high_open=True))

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
        if need_weights and not (isinstance(result, tuple) and len(result) == 2):
            raise ConfigError(f"{type(self.attention).__qualname__} returned {type(result).__name__} for "
                              "need_weights=True; an inner attention returns (output, weights) then. Fix: return "
                              "them (or raise ConfigError where it has no weights to show).")
        out, weights = result if need_weights else (result, None)
        merged = out.reshape(batch, query_len, self.d_model)  # [B, L, H, E] -> [B, L, D]
        out = self.dropout(self.out_projection(merged))
        return (out, weights) if need_weights else out
