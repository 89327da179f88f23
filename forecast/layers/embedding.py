"""Input embeddings: values, positions and calendar time, summed (Informer, Sec. 3 / App. B).

Deliberate deviations from the original code, each named where it lives:
- positional encodings are computed for any length (the original stops at 5,000 steps);
- `fixed`/`learned` calendar tables take their sizes from the data
  (`time_feature_sizes`), never a hard-coded ``minute // 15``;
- the value convolution's padding mode is switchable: ``"circular"`` reproduces the
  original, which wraps the end of a window onto its start; ``"replicate"`` does not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import torch
from torch import nn

from forecast.errors import ConfigError
from forecast.layers.dropout import Dropout

PaddingMode = Literal["circular", "replicate", "zeros"]
TimeEncoding = Literal["timeF", "fixed", "learned"]


def sinusoidal_table(n_positions: int, d_model: int) -> torch.Tensor:
    """The Transformer's sin/cos table, ``[n_positions, d_model]``."""
    position = torch.arange(n_positions, dtype=torch.float32).unsqueeze(1)  # [N, 1]
    div_term = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model)
    )  # [ceil(D/2)]
    table = torch.zeros(n_positions, d_model)
    table[:, 0::2] = torch.sin(position * div_term)
    table[:, 1::2] = torch.cos(position * div_term[: d_model // 2])
    return table


class ValueEmbedding(nn.Module):
    """Conv1d over time (kernel 3, length-preserving) from C variables to D."""

    def __init__(self, c_in: int, d_model: int, padding_mode: PaddingMode = "circular"):
        super().__init__()
        self.conv = nn.Conv1d(
            c_in, d_model, kernel_size=3, padding=1, padding_mode=padding_mode, bias=False
        )
        nn.init.kaiming_normal_(self.conv.weight, mode="fan_in", nonlinearity="leaky_relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [B, L, C] -> conv over time wants [B, C, L]
        return self.conv(x.transpose(1, 2)).transpose(1, 2)  # [B, L, D]


class PositionalEmbedding(nn.Module):
    """Sinusoidal positions, cached and extended on demand (no length limit)."""

    def __init__(self, d_model: int, initial_length: int = 1024):
        super().__init__()
        self.d_model = d_model
        self.register_buffer("table", sinusoidal_table(initial_length, d_model), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[1]
        if length > self.table.shape[0]:
            self.table = sinusoidal_table(length, self.d_model).to(self.table.device, self.table.dtype)
        return self.table[:length].unsqueeze(0)  # [1, L, D]


class TimeFeatureEmbedding(nn.Module):
    """`timeF`: a linear map of the continuous calendar features."""

    def __init__(self, n_time_features: int, d_model: int):
        super().__init__()
        self.linear = nn.Linear(n_time_features, d_model, bias=False)

    def forward(self, x_mark: torch.Tensor) -> torch.Tensor:
        return self.linear(x_mark)  # [B, L, F] -> [B, L, D]


class CalendarEmbedding(nn.Module):
    """`fixed` (frozen sinusoidal tables) or `learned` tables, one per integer calendar field."""

    def __init__(self, time_feature_sizes: list[int], d_model: int, learned: bool):
        super().__init__()
        tables = []
        for size in time_feature_sizes:
            table = nn.Embedding(size, d_model)
            if not learned:
                table.weight.data.copy_(sinusoidal_table(size, d_model))
                table.weight.requires_grad_(False)
            tables.append(table)
        self.tables = nn.ModuleList(tables)

    def forward(self, x_mark: torch.Tensor) -> torch.Tensor:
        fields = x_mark.long()  # [B, L, F] integer calendar fields carried as float32
        return sum(table(fields[..., i]) for i, table in enumerate(self.tables))  # [B, L, D]


class NoTimeEmbedding(nn.Module):
    """Series without calendar features (yearly data: F = 0) add nothing for time."""

    def __init__(self, d_model: int):
        super().__init__()
        self.d_model = d_model

    def forward(self, x_mark: torch.Tensor) -> torch.Tensor:
        return x_mark.new_zeros(*x_mark.shape[:-1], self.d_model)  # [B, L, 0] -> [B, L, D]


def split_step_features(marks: torch.Tensor, n_time_features: int,
                        n_known: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``marks [..., F + K + S]`` as ``(calendar [..., F], known [..., K], codes [..., S] int64)``: the layout
    :func:`forecast.models.base.model_inputs` writes (codes carried as float32)."""
    first_code = n_time_features + n_known
    return marks[..., :n_time_features], marks[..., n_time_features:first_code], marks[..., first_code:].long()


class StepEmbedding(nn.Module):
    """Everything known at a step, embedded: ``marks [B, T, F + K + S] -> [B, T, D]``.

    The columns are the F calendar features (embedded as their encoding says), the K known
    covariates (a linear map) and S integer codes carried as float32 (a panel's series position
    and static covariates), each code with its own table.
    """

    def __init__(self, calendar: nn.Module, n_time_features: int, d_model: int, n_known: int,
                 code_sizes: Sequence[int]):
        super().__init__()
        self.calendar = calendar
        self.n_time_features, self.n_known = n_time_features, n_known
        self.known = nn.Linear(n_known, d_model, bias=False) if n_known else None
        self.codes = nn.ModuleList(nn.Embedding(size, d_model) for size in code_sizes)

    def forward(self, marks: torch.Tensor) -> torch.Tensor:
        calendar, known, codes = split_step_features(marks, self.n_time_features, self.n_known)  # [B, T, F|K|S]
        embedded = self.calendar(calendar)  # [B, T, D]
        if self.known is not None:
            embedded = embedded + self.known(known)  # [B, T, K] -> [B, T, D]
        for i, table in enumerate(self.codes):
            embedded = embedded + table(codes[..., i])
        return embedded


def time_embedding(
    d_model: int,
    n_time_features: int,
    time_encoding: TimeEncoding = "timeF",
    time_feature_sizes: Sequence[int] | None = None,
    n_known: int = 0,
    code_sizes: Sequence[int] = (),
) -> nn.Module:
    """The embedding of the marks ``[B, L, F] -> [B, L, D]``: the calendar embedding of an encoding, and
    with ``n_known`` known covariates or ``code_sizes`` (a panel's), a :class:`StepEmbedding` around it.

    Without them the module is the calendar embedding itself, so the parameters of a wide table's
    model keep their names.
    """
    if n_time_features == 0:
        calendar: nn.Module = NoTimeEmbedding(d_model)
    elif time_encoding == "timeF":
        calendar = TimeFeatureEmbedding(n_time_features, d_model)
    elif not time_feature_sizes or len(time_feature_sizes) != n_time_features:
        raise ConfigError(
            f"time_encoding={time_encoding!r} needs one table size per calendar field "
            f"(got {time_feature_sizes} for {n_time_features} fields)"
        )
    else:
        calendar = CalendarEmbedding(list(time_feature_sizes), d_model, time_encoding == "learned")
    if not n_known and not code_sizes:
        return calendar
    return StepEmbedding(calendar, n_time_features, d_model, n_known, code_sizes)


class DataEmbedding(nn.Module):
    """Value + position + step (calendar, known covariates, codes) embedding, then dropout:
    ``[B, L, C], [B, L, F + K + S] -> [B, L, D]``."""

    def __init__(
        self,
        c_in: int,
        d_model: int,
        n_time_features: int,
        time_encoding: TimeEncoding = "timeF",
        time_feature_sizes: list[int] | None = None,
        padding_mode: PaddingMode = "circular",
        dropout: float = 0.0,
        n_known: int = 0,
        code_sizes: Sequence[int] = (),
    ):
        super().__init__()
        self.value = ValueEmbedding(c_in, d_model, padding_mode)
        self.position = PositionalEmbedding(d_model)
        self.time = time_embedding(d_model, n_time_features, time_encoding, time_feature_sizes, n_known, code_sizes)
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor, x_mark: torch.Tensor) -> torch.Tensor:
        # The calendar term comes first because a sum takes the memory layout of its first
        # operand and the value conv returns a transposed view: a transposed embedding would
        # make every projection after it copy its input and add its bias in a separate pass.
        return self.dropout(self.time(x_mark) + self.value(x) + self.position(x))
