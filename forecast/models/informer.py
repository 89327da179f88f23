"""Informer (Zhou et al., AAAI 2021) and InformerStack, with any attention in the encoder.

Deliberate deviations from the original code (each switchable or harmless to numbers):
- no ``mix`` option: the original reshapes ``[B, H, L, E]`` as ``[B, L, H, E]`` there,
  scrambling heads with time steps;
- distilling keeps ``ceil(L/2)`` steps (the original's extra conv padding gives L/2 + 1);
- ProbSparse is deterministic in eval mode and its masked variant ranks decoder queries
  against visible keys only (see ``forecast.layers.attention``).

Three options the paper does not have, all off by default (the paper's model) and all on
in the ``improved`` recipe (:mod:`forecast.recipes`):
- ``revin``: reversible instance normalization of every window
  (:class:`~forecast.layers.normalization.ReversibleInstanceNorm`); the decoder's start
  tokens are the normalized window's last ``label_len`` steps, so they share its statistics;
- ``channels="independent"``: each output variable is its own sequence through the shared
  network (``B * C_out`` sequences of ``X + 1`` inputs, :mod:`forecast.layers.channels`);
- ``linear_skip``: a linear map from each sequence's window to its horizon, added to the
  decoder's forecast (:class:`~forecast.layers.blocks.LinearSkip`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import nn

from forecast.checks import require_bool, require_choice, require_int, require_ints, require_real
from forecast.errors import ConfigError
from forecast.layers.attention import ATTENTIONS, MultiHeadAttention, build_attention
from forecast.layers.blocks import (
    Activation,
    DecoderLayer,
    DistillingLayer,
    Encoder,
    EncoderLayer,
    LinearSkip,
)
from forecast.layers.channels import merge_series, per_series, series_rows
from forecast.layers.embedding import DataEmbedding, PaddingMode
from forecast.layers.normalization import (
    Center,
    ReversibleInstanceNorm,
    WindowStats,
    documents_revin_options,
    validate_revin_options,
)
from forecast.models.base import DataSpec, ForecastModel, check_batch

Channels = Literal["joint", "independent"]


@documents_revin_options
@dataclass(frozen=True)
class InformerConfig:
    """Architecture of Informer; the defaults are the paper's (Informer2020 ``main_informer``).

    Attributes:
        d_model: the width D of every layer.
        n_heads: attention heads H (``d_model`` a multiple of it).
        e_layers: encoder layers.
        d_layers: decoder layers.
        d_ff: the feed-forward block's hidden width.
        dropout: the dropout rate throughout.
        attention: the encoder's self-attention: ``prob`` (ProbSparse), ``full`` or ``logsparse``.
        decoder_attention: the decoder's masked self-attention. None: the encoder's family.
        factor: ProbSparse's sampling factor c: ``c * ln(L)`` queries kept and keys sampled.
        distil: halve the sequence between encoder layers (a convolution and max-pooling).
        activation: the feed-forward activation, ``gelu`` or ``relu``.
        padding_mode: the value embedding's convolution padding: ``circular`` (the paper's),
            ``replicate`` or ``zeros``.
        stack: InformerStack: one encoder per entry, entry i having ``stack[i]`` layers and reading
            the last ``seq_len / 2**i`` steps, their outputs concatenated in time (the original uses
            ``(3, 2, 1)``). None: one encoder.
        attention_options: further arguments of the attention classes.
        channels: ``joint`` (the paper's: one sequence of all variables per window) or
            ``independent`` (one sequence per output variable, shared weights).
        linear_skip: add a linear map of each forecast variable's input window to its forecast
            (:class:`~forecast.layers.blocks.LinearSkip`), in RevIN's normalized space when ``revin`` is on.
    """

    d_model: int = 512
    n_heads: int = 8
    e_layers: int = 2
    d_layers: int = 1
    d_ff: int = 2048
    dropout: float = 0.05
    attention: str = "prob"
    decoder_attention: str | None = None  # default: same family as the encoder, masked
    factor: int = 5
    distil: bool = True
    activation: Activation = "gelu"
    padding_mode: PaddingMode = "circular"
    stack: tuple[int, ...] | None = None
    attention_options: dict = field(default_factory=dict)
    channels: Channels = "joint"
    revin: bool = False
    revin_affine: bool = False
    revin_center: Center = "mean"
    linear_skip: bool = False

    def __post_init__(self) -> None:
        for name in ("d_model", "n_heads", "e_layers", "d_layers", "d_ff", "factor"):
            require_int(name, getattr(self, name), 1)
        if self.d_model % self.n_heads:
            raise ConfigError(f"d_model={self.d_model} must be a positive multiple of n_heads={self.n_heads}")
        require_real("dropout", self.dropout, low=0, high=1, high_open=True)
        decoder_attention = self.decoder_attention or self.attention
        for option, name in (("attention", self.attention), ("decoder_attention", decoder_attention)):
            if not isinstance(name, str) or name not in ATTENTIONS:
                raise ConfigError(f"unknown attention {option}={name!r}; choose one of {sorted(ATTENTIONS)}")
        require_bool("distil", self.distil)
        require_bool("linear_skip", self.linear_skip)
        require_choice("channels", self.channels, ("joint", "independent"))
        validate_revin_options(self.revin, self.revin_affine, self.revin_center)
        require_choice("activation", self.activation, ("gelu", "relu"))
        require_choice("padding_mode", self.padding_mode, ("circular", "replicate", "zeros"))
        if self.stack is not None:
            object.__setattr__(self, "stack", require_ints("stack", self.stack, 1))
        if not isinstance(self.attention_options, dict):
            raise ConfigError(f"attention_options must be a dict of attention arguments, "
                              f"got attention_options={self.attention_options!r}")
        owned = sorted({"causal", "dropout"} & set(self.attention_options))
        if owned:
            raise ConfigError(f"attention_options={self.attention_options!r}: {owned} are the model's own (dropout is "
                              "the dropout option; the decoder's self-attention is causal, the encoder's is not). "
                              "Fix: leave them out of attention_options.")
        if "causal_lazy_fill" in self.attention_options and self.attention == "prob" and decoder_attention != "prob":
            raise ConfigError(f"attention_options causal_lazy_fill={self.attention_options['causal_lazy_fill']!r} "
                              f"does nothing here: it fills the lazy queries of a causal ProbSparse attention, and "
                              f"the decoder's self-attention is {decoder_attention!r} (the encoder's is not causal). "
                              "Fix: decoder_attention='prob', or leave causal_lazy_fill out.")


class Informer(ForecastModel):
    """Encoder-decoder forecaster with a generative one-shot decoder.

    ``forward(x [B, L, C_in], x_mark [B, L, F], y_mark [B, label_len + P, F]) -> [B, P, C_out]``.
    The decoder input is the last ``label_len`` steps of ``x`` followed by P zero
    placeholders; the model builds it itself.
    """

    def __init__(self, spec: DataSpec, config: InformerConfig | None = None):
        super().__init__()
        config = config or InformerConfig()
        self.spec, self.config = spec, config
        embedding = dict(
            d_model=config.d_model, n_time_features=spec.n_time_features,
            time_encoding=spec.time_encoding,
            time_feature_sizes=list(spec.time_feature_sizes or []) or None,
            padding_mode=config.padding_mode, dropout=config.dropout, n_known=spec.n_known,
            code_sizes=spec.code_sizes,
        )
        independent = config.channels == "independent"
        # Per network sequence: the inputs it reads and the values it forecasts.
        n_inputs = spec.c_in - spec.c_out + 1 if independent else spec.c_in
        n_outputs = 1 if independent else spec.c_out
        self.revin = (ReversibleInstanceNorm(spec.c_in, config.revin_affine, center=config.revin_center,
                                             start=spec.persistence)
                      if config.revin else None)
        self.encoder_embedding = DataEmbedding(n_inputs, **embedding)
        self.decoder_embedding = DataEmbedding(n_inputs, **embedding)
        depths = config.stack or (config.e_layers,)
        if len(depths) > spec.seq_len.bit_length():  # encoder i reads the last seq_len // 2**i steps: at least one
            deepest = spec.seq_len.bit_length()
            raise ConfigError(f"stack={config.stack}: its entry {deepest} (from 0) would read the last seq_len // "
                              f"2**{deepest} = 0 steps of seq_len={spec.seq_len}. Fix: at most {deepest} encoders, "
                              "or a longer seq_len.")
        self.encoders = nn.ModuleList(self._encoder(depth) for depth in depths)
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(
                self._attention(config.decoder_attention or config.attention, causal=True),
                self._attention("full", causal=False),
                config.d_model, config.d_ff, config.dropout, config.activation,
            )
            for _ in range(config.d_layers)
        )
        self.decoder_norm = nn.LayerNorm(config.d_model)
        self.projection = nn.Linear(config.d_model, n_outputs)
        self.skip = LinearSkip(spec.seq_len, spec.pred_len) if config.linear_skip else None

    def _attention(self, name: str, causal: bool) -> MultiHeadAttention:
        # attention_options configure the encoder's family; cross-attention stays plain full
        options = dict(self.config.attention_options) if name == self.config.attention else {}
        if name == "prob":
            options.setdefault("factor", self.config.factor)
        inner = build_attention(name, causal=causal, dropout=self.config.dropout, **options)
        return MultiHeadAttention(inner, self.config.d_model, self.config.n_heads)

    def _encoder(self, depth: int) -> Encoder:
        c = self.config
        layers = [
            EncoderLayer(self._attention(c.attention, causal=False), c.d_model, c.d_ff,
                         c.dropout, c.activation)
            for _ in range(depth)
        ]
        distilling = (
            [DistillingLayer(c.d_model, c.padding_mode) for _ in range(depth - 1)]
            if c.distil else None
        )
        return Encoder(layers, distilling, c.d_model)

    def _sequences(self, x: torch.Tensor,
                   *marks: torch.Tensor) -> tuple[WindowStats | None, *tuple[torch.Tensor, ...]]:
        """The window's RevIN statistics (None without ``revin``), then the network's sequences:
        ``x [B, L, C_in]`` normalized and, with independent channels, one row per series
        (``[B', L, V]``), and the ``marks`` repeated to match."""
        stats = self.revin.statistics(x) if self.revin is not None else None
        if stats is not None:
            x = self.revin.normalize(x, stats)
        if self.config.channels == "independent":
            c_out = self.spec.c_out
            x, marks = series_rows(x, c_out), tuple(per_series(mark, c_out) for mark in marks)
        return stats, x, *marks

    def _outputs(self, out: torch.Tensor, stats: WindowStats | None) -> torch.Tensor:
        """Network outputs ``[B', P, n_out]`` -> forecasts ``[B, P, C_out]`` in the input's units."""
        if self.config.channels == "independent":
            out = merge_series(out, self.spec.c_out)  # [B*C_out, P, 1] -> [B, P, C_out]
        return out if stats is None else self.revin.denormalize(out, stats)

    def encode(self, x: torch.Tensor, x_mark: torch.Tensor, need_weights: bool = False):
        """Encoder memory ``[B', S, D]`` (and per-layer attention weights when asked).

        ``B'`` is ``B * C_out`` with independent channels (series rows of
        :mod:`forecast.layers.channels`), else ``B``.
        """
        _, x, x_mark = self._sequences(x, x_mark)
        return self._encode(x, x_mark, need_weights)

    def attention_weights(self, x: torch.Tensor, x_mark: torch.Tensor, y_mark: torch.Tensor) -> list[object]:
        """The encoder's attention weights, one entry per layer (stacked encoders in order)."""
        check_batch(self.spec, type(self).__name__, x, x_mark, y_mark)
        return list(self.encode(x, x_mark, need_weights=True)[1])

    def _encode(self, x: torch.Tensor, x_mark: torch.Tensor, need_weights: bool = False):
        embedded = self.encoder_embedding(x, x_mark)  # [B', L, D]
        memories, weights = [], []
        for i, encoder in enumerate(self.encoders):
            length = embedded.shape[1] // 2**i
            memory, encoder_weights = encoder(embedded[:, -length:], need_weights)
            memories.append(memory)
            weights.extend(encoder_weights)
        return torch.cat(memories, dim=1), weights  # [B', S, D], S summed over the stack

    @property
    def correctable(self) -> bool:
        """With ``revin``, the forecast is the window's centre plus the network's correction."""
        return self.revin is not None

    def forward(self, x: torch.Tensor, x_mark: torch.Tensor, y_mark: torch.Tensor) -> torch.Tensor:
        spec = self.spec
        check_batch(spec, type(self).__name__, x, x_mark, y_mark, y_mark_steps=spec.label_len + spec.pred_len)
        stats, x, x_mark, y_mark = self._sequences(x, x_mark, y_mark)  # [B', L, V], [B', L, F], [B', T, F]
        memory, _ = self._encode(x, x_mark)
        placeholders = x.new_zeros(x.shape[0], spec.pred_len, x.shape[2])  # [B', P, V]
        decoder_input = torch.cat([x[:, x.shape[1] - spec.label_len:], placeholders], dim=1)
        h = self.decoder_embedding(decoder_input, y_mark)  # [B', label_len + P, D]
        for layer in self.decoder_layers:
            h = layer(h, memory)
        out = self.projection(self.decoder_norm(h))[:, -spec.pred_len:]  # [B', P, n_out]
        if self.skip is not None:
            out = out + self.skip(x[..., x.shape[2] - out.shape[2]:])  # the forecast variables' inputs [B', L, n_out]
        return self._outputs(out, stats)  # [B, P, C_out]
