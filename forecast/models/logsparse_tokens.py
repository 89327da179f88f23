"""The LogSparse Transformer's tokens: a batch of windows laid out as the sequences its network reads.

Token ``t`` of the ``T = L + P`` tokens carries the previous step's value(s) ``z[t-1]`` with a
known flag (a placeholder where unknown), and the calendar features of step ``t``
(:mod:`forecast.models.logsparse` explains why). With independent channels each output variable
is its own sequence, ``B' = B * C_out`` rows whose ``V`` inputs are the exogenous variables then
that series; jointly, one sequence per window with all ``C_in`` inputs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from forecast.layers.channels import merge_series, per_series, series_rows
from forecast.layers.normalization import ReversibleInstanceNorm, WindowStats
from forecast.models.base import DataSpec

__all__ = ["TokenLayout"]


class TokenLayout:
    """Lays a batch out as token sequences (:meth:`tokens`) and maps per-token outputs back (:meth:`outputs`).

    ``n_inputs`` (V) lagged values per token and ``n_outputs`` forecast values per token and sequence;
    ``series_ids``: whether each row carries its series' id (for a series embedding).
    """

    def __init__(self, spec: DataSpec, *, independent: bool, series_ids: bool) -> None:
        self.spec = spec
        self.independent = independent
        self.series_ids = series_ids and independent
        self.n_exogenous = spec.c_in - spec.c_out
        self.n_outputs = 1 if independent else spec.c_out
        self.n_inputs = self.n_exogenous + 1 if independent else spec.c_in

    def rows(self, per_variable: Tensor) -> Tensor:
        """``[B, T, C_in]`` -> ``[B', T, V]``: one row per series, exogenous inputs first, outputs last."""
        if not self.independent:
            return per_variable
        return series_rows(per_variable, self.spec.c_out)  # [B*C_out, T, X + 1]

    def repeat(self, per_window: Tensor) -> Tensor:
        """Repeat a per-window tensor ``[B, ...]`` for every series row of :meth:`rows`."""
        if not self.independent:
            return per_window
        return per_series(per_window, self.spec.c_out)  # [B*C_out, ...]

    def merge(self, outputs: Tensor) -> Tensor:
        """``[B', T, n_out]`` network outputs -> ``[B, T, C_out]``."""
        if not self.independent:
            return outputs
        return merge_series(outputs, self.spec.c_out)  # [B*C_out, T, 1] -> [B, T, C_out]

    def tokens(
        self, x: Tensor, x_mark: Tensor, y_mark: Tensor, future: Tensor | None = None,
        revin: ReversibleInstanceNorm | None = None,
    ) -> tuple[WindowStats | None, Tensor, Tensor, Tensor, Tensor | None]:
        """Network inputs of the ``T = L + P`` tokens.

        Returns the window's RevIN statistics (None without ``revin``), lagged values and
        known flags ``[B', T, V]``, marks ``[B', T, F]`` and series ids ``[B']`` (None
        without them).

        ``future [B, P, C_in]`` (teacher forcing) makes the horizon's output variables
        known; exogenous variables stay placeholders there, as at inference. With
        ``revin`` the window and ``future`` go through the window's statistics.
        """
        stats = revin.statistics(x) if revin is not None else None
        if stats is not None:
            x = revin.normalize(x, stats)
            future = None if future is None else revin.normalize(future, stats)
        batch, length, c_in = x.shape
        horizon = self.spec.pred_len
        observed = torch.ones_like(x)  # [B, L, C_in]
        if future is None:
            future = x.new_zeros(batch, horizon, c_in)
            future_known = torch.zeros_like(future)
        else:
            unknown_exogenous = future.new_zeros(batch, horizon, self.n_exogenous)
            known_outputs = future.new_ones(batch, horizon, self.spec.c_out)
            future_known = torch.cat([unknown_exogenous, known_outputs], dim=-1)  # [B, P, C_in]
        values = torch.cat([x, future], dim=1)  # [B, T, C_in]
        known = torch.cat([observed, future_known], dim=1)  # [B, T, C_in]
        # Token t reads step t - 1; token 0 has no previous step.
        lagged = F.pad(values[:, :-1], (0, 0, 1, 0))  # [B, T, C_in]
        lagged_known = F.pad(known[:, :-1], (0, 0, 1, 0))  # [B, T, C_in]
        marks = torch.cat([x_mark, y_mark[:, y_mark.shape[1] - horizon :]], dim=1)  # [B, T, F]
        series_ids = None
        if self.series_ids:
            series_ids = torch.arange(self.spec.c_out, device=x.device).repeat(batch)  # [B*C_out]
        return stats, self.rows(lagged), self.rows(lagged_known), self.repeat(marks), series_ids

    def outputs(self, values: Tensor, stats: WindowStats | None,
                revin: ReversibleInstanceNorm | None = None) -> Tensor:
        """Network values ``[B', T, n_out]`` -> ``[B, T, C_out]`` in the input's units (RevIN inverted)."""
        values = self.merge(values)
        return values if stats is None else revin.denormalize(values, stats)
