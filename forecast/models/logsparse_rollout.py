"""The LogSparse Transformer's autoregressive rollout: its horizon forecast one step at a time.

Each horizon step feeds back the step before it (the forecast mean, or in sampling each
path's own draw). :class:`Rollout` runs the window's tokens through the network once and
then one token per horizon step against the per-layer key/value caches of
:class:`~forecast.layers.decoding.KeyValueCache`; with ``cached=False`` it recomputes the
whole prefix at every step instead, the reference the cache is tested and timed against
(benchmarks/README.md, "LogSparse autoregressive sampling").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor

from forecast.layers.decoding import KeyValueCache
from forecast.layers.masks import logsparse_offsets
from forecast.models.base import WindowDraws

if TYPE_CHECKING:
    from forecast.models.logsparse import LogSparseTransformer

__all__ = ["Rollout"]


class Rollout:
    """Decodes a :class:`~forecast.models.logsparse.LogSparseTransformer`'s horizon from its tokens.

    Calling it with the model's tokens (lagged values and known flags ``[B', T, V]``, marks
    ``[B', T, F]``, series ids ``[B']`` or None) returns the fed-back values ``[B', P, n_out]``
    on the network's (normalized) scale. ``noise`` (standard normal ``[B', P, n_out]``) feeds
    back a draw from each step's Gaussian instead of its mean.
    """

    def __init__(self, model: LogSparseTransformer, cached: bool = True) -> None:
        self.model = model
        self.cached = cached

    def __call__(self, lagged: Tensor, known: Tensor, marks: Tensor, series_ids: Tensor | None,
                 noise: Tensor | None = None) -> Tensor:
        decode = self._cached if self.cached else self._uncached
        return decode(lagged, known, marks, series_ids, noise)

    def forecast(self, x: Tensor, x_mark: Tensor, y_mark: Tensor, noise: Tensor | None = None) -> Tensor:
        """The model's autoregressive forecast ``[B, P, C_out]`` of a batch: its means fed back, or with
        ``noise`` (standard normal ``[B, P, C_out]``) a draw, made on the normalized scale and mapped back with
        the window's statistics."""
        model = self.model
        stats, *tokens = model.layout.tokens(x, x_mark, y_mark, revin=model.revin)
        noise = None if noise is None else model.layout.rows(noise)  # [B, P, C_out] -> [B', P, n_out]
        fed_back = self(*tokens, noise)  # [B', P, n_out]
        return model.layout.outputs(fed_back, stats, model.revin)  # [B', P, n_out] -> [B, P, C_out]

    def paths(self, x: Tensor, x_mark: Tensor, y_mark: Tensor, n_samples: int,
              generator: torch.Generator | None = None, chunk_size: int | None = None) -> Tensor:
        """Ancestral sample paths ``[S, B, P, C_out]``, each feeding back its own draws (each window's from
        its own stream: :class:`~forecast.models.base.WindowDraws`), ``chunk_size`` paths of every window at a
        time (all at once by default)."""
        batch, horizon, c_out = x.shape[0], self.model.spec.pred_len, self.model.spec.c_out
        draws = WindowDraws(self.model.spec, x, x_mark, y_mark, generator)
        paths = []
        for start in range(0, n_samples, chunk_size or n_samples):
            count = min(chunk_size or n_samples, n_samples - start)
            repeated = (tensor.repeat(count, 1, 1) for tensor in (x, x_mark, y_mark))  # [count*B, ...]
            noise = draws.normal(count, horizon, c_out).flatten(0, 1)  # [count, B, P, C_out] -> [count*B, P, C_out]
            drawn = self.forecast(*repeated, noise)  # [count*B, P, C_out]
            paths.append(drawn.reshape(count, batch, horizon, c_out))  # -> [count, B, P, C_out]
        return torch.cat(paths, dim=0)

    def visible_offsets(self, position: int) -> tuple[int, ...]:
        """Offsets back from token ``position`` to the keys it attends (0 first, all <= position)."""
        c = self.model.config
        if c.attention == "full":
            return tuple(range(position + 1))
        return logsparse_offsets(position + 1, c.local_window, c.sub_len)

    def prefill(
        self, lagged: Tensor, known: Tensor, marks: Tensor, series_ids: Tensor | None
    ) -> tuple[Tensor, KeyValueCache]:
        """One full pass over the first tokens: the last token's state ``[B', D]`` (before the final
        LayerNorm) and the cache the next tokens attend through."""
        model = self.model
        cache = KeyValueCache(model.blocks, self.visible_offsets)
        return cache.prefill(model.dropout(model._embed(lagged, known, marks, series_ids))), cache  # [B', n, D] in

    def step(
        self, lagged: Tensor, known: Tensor, marks: Tensor, series_ids: Tensor | None, position: int,
        cache: KeyValueCache,
    ) -> Tensor:
        """State ``[B', D]`` (before the final LayerNorm) of the one token at ``position`` (lagged, known
        ``[B', V]``, marks ``[B', F]``), from the cache of the tokens before it; extends it."""
        model = self.model
        token = model._embed(lagged.unsqueeze(1), known.unsqueeze(1), marks.unsqueeze(1), series_ids, first=position)
        return cache.step(model.dropout(token[:, 0]), position)  # [B', 1, D] -> [B', D]

    @staticmethod
    def _next_value(mean: Tensor, scale: Tensor | None, noise: Tensor | None, step: int) -> Tensor:
        """The value ``[B', n_out]`` fed back for horizon step ``step``: its mean, or with ``noise`` a draw."""
        if noise is None:
            return mean
        return mean + scale * noise[:, step]

    def _exogenous_pad(self) -> tuple[int, int]:
        """Left padding of a fed-back value to a token's inputs: exogenous inputs stay unknown over the horizon."""
        return self.model.layout.n_inputs - self.model.layout.n_outputs, 0

    def _uncached(self, lagged: Tensor, known: Tensor, marks: Tensor, series_ids: Tensor | None,
                  noise: Tensor | None) -> Tensor:
        """Fed-back values ``[B', P, n_out]``, each step a full pass over the whole prefix (the reference)."""
        model, pad = self.model, self._exogenous_pad()
        length = model.spec.seq_len
        fed_back: list[Tensor] = []  # [B', n_out] per horizon step
        for step in range(model.spec.pred_len):
            end = length + step + 1  # tokens 0..L read observed steps; token L+1+j reads horizon step j
            step_lagged, step_known = lagged[:, : length + 1], known[:, : length + 1]
            if fed_back:
                values = torch.stack(fed_back, dim=1)  # [B', step, n_out]
                step_lagged = torch.cat([step_lagged, F.pad(values, pad)], dim=1)  # [B', end, V]
                step_known = torch.cat([step_known, F.pad(torch.ones_like(values), pad)], dim=1)
            mean, scale = model._predict(step_lagged, step_known, marks[:, :end], series_ids)
            fed_back.append(self._next_value(mean[:, -1], None if scale is None else scale[:, -1], noise, step))
        return torch.stack(fed_back, dim=1)

    def _cached(self, lagged: Tensor, known: Tensor, marks: Tensor, series_ids: Tensor | None,
                noise: Tensor | None) -> Tensor:
        """Fed-back values ``[B', P, n_out]``: one pass over tokens 0..L, then one token per step on the caches.

        Equal to :meth:`_uncached` to float rounding, sometimes bit for bit but not in
        general: a token's row can round differently alone (``[B', D]`` here) than inside
        the full pass's ``[B' * S, D]``, because the CPU's matrix-product routines pick
        their kernel by the matrix's size; a convolutional query or key (k > 1) is one
        matrix product over the k taps here and a convolution there; full attention runs
        SDPA there. Only recomputing at the full pass's shapes, the very cost the cache
        removes, would pin the rounding.
        """
        model, pad = self.model, self._exogenous_pad()
        length = model.spec.seq_len
        # Tokens 0..L read observed steps only: one pass, whose last token forecasts horizon step 0.
        hidden, cache = self.prefill(lagged[:, : length + 1], known[:, : length + 1], marks[:, : length + 1],
                                     series_ids)
        fed_back: list[Tensor] = []  # [B', n_out] per horizon step
        for position in range(length, length + model.spec.pred_len):  # token L+j forecasts horizon step j
            if fed_back:  # ... reading step j-1's fed-back value
                value = fed_back[-1]
                hidden = self.step(F.pad(value, pad), F.pad(torch.ones_like(value), pad), marks[:, position],
                                   series_ids, position, cache)
            mean, scale = model._head(model.norm(hidden))  # [B', n_out] each
            fed_back.append(self._next_value(mean, scale, noise, position - length))
        return torch.stack(fed_back, dim=1)
