"""Channel independence: each output variable its own sequence through one shared network.

Pure functions that move between a window's ``[B, T, C_in]`` layout and one row per
output series, ``[B * C_out, T, X + 1]``: the series' own values last, after the
``X = C_in - C_out`` exogenous inputs (the non-target columns of ``MS``) that every
series reads as covariates. ``M`` and ``S`` have no exogenous inputs, so a row is one
variable alone. Rows are ordered window-major (window b, series c at row ``b * C_out + c``).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["merge_series", "per_series", "series_rows"]


def series_rows(values: Tensor, c_out: int) -> Tensor:
    """``[B, T, C_in]`` -> ``[B * C_out, T, X + 1]``: exogenous inputs first, the series' own value last."""
    batch, steps, c_in = values.shape
    n_exogenous = c_in - c_out
    exogenous = values[..., :n_exogenous].repeat_interleave(c_out, dim=0)  # [B*C_out, T, X]
    own = values[..., n_exogenous:].transpose(1, 2)  # [B, T, C_out] -> [B, C_out, T]
    own = own.reshape(batch * c_out, steps, 1)  # [B, C_out, T] -> [B*C_out, T, 1]
    return torch.cat([exogenous, own], dim=-1)  # [B*C_out, T, X + 1]


def per_series(per_window: Tensor, c_out: int) -> Tensor:
    """Repeat a per-window tensor ``[B, ...]`` for each of its ``C_out`` series rows: ``[B * C_out, ...]``."""
    return per_window.repeat_interleave(c_out, dim=0)


def merge_series(outputs: Tensor, c_out: int) -> Tensor:
    """``[B * C_out, T, 1]`` per-series outputs -> ``[B, T, C_out]``."""
    steps = outputs.shape[1]
    per_window = outputs.reshape(-1, c_out, steps)  # [B*C_out, T, 1] -> [B, C_out, T]
    return per_window.transpose(1, 2)  # [B, C_out, T] -> [B, T, C_out]
