"""DLinear (Zeng et al., "Are Transformers Effective for Time Series Forecasting?", AAAI 2023).

The linear yardstick: each window is split into a trend (a moving average) and a
remainder, and one linear map from the L input steps to the P horizon steps forecasts
each part; the forecast is their sum. Variables never mix: with ``individual`` each
variable has its own two maps (the paper's DLinear-I), otherwise every variable shares
them. The moving average pads both ends by repeating the first and last value, as the
original does, so the trend has the window's length.

``revin`` adds reversible instance normalization (off by default: the paper's model).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from forecast.checks import require_bool, require_int
from forecast.errors import ConfigError
from forecast.layers.embedding import split_step_features
from forecast.layers.normalization import (
    Center,
    ReversibleInstanceNorm,
    documents_revin_options,
    validate_revin_options,
)
from forecast.models.base import DataSpec, ForecastModel, check_batch

__all__ = ["DLinear", "DLinearConfig", "moving_average"]


@documents_revin_options
@dataclass(frozen=True)
class DLinearConfig:
    """Options of DLinear (Zeng et al., AAAI 2023).

    Attributes:
        kernel_size: the moving average's length in steps (odd; the paper's 25).
        individual: a pair of linear maps per variable instead of one shared pair.
    """

    kernel_size: int = 25
    individual: bool = False
    revin: bool = False
    revin_affine: bool = False
    revin_center: Center = "mean"

    def __post_init__(self) -> None:
        require_int("kernel_size", self.kernel_size, 1)
        if self.kernel_size % 2 == 0:
            raise ConfigError(f"kernel_size must be odd so the moving average is centred on each step, "
                              f"got kernel_size={self.kernel_size}; use {self.kernel_size + 1}")
        require_bool("individual", self.individual)
        validate_revin_options(self.revin, self.revin_affine, self.revin_center)


def moving_average(x: Tensor, kernel_size: int) -> Tensor:
    """Centred moving average of ``x [B, L, C]`` over time, ends padded with the edge values: ``[B, L, C]``."""
    half = (kernel_size - 1) // 2
    padded = torch.cat([x[:, :1].expand(-1, half, -1), x, x[:, -1:].expand(-1, half, -1)], dim=1)  # [B, L+k-1, C]
    return F.avg_pool1d(padded.transpose(1, 2), kernel_size, stride=1).transpose(1, 2)  # [B, L, C]


class _Linear(nn.Module):
    """``[B, C, L] -> [B, C, P]``: one linear map over time, shared or one per variable."""

    def __init__(self, seq_len: int, pred_len: int, n_variables: int, individual: bool):
        super().__init__()
        n_maps = n_variables if individual else 1
        self.maps = nn.ModuleList(nn.Linear(seq_len, pred_len) for _ in range(n_maps))

    def forward(self, x: Tensor) -> Tensor:
        if len(self.maps) == 1:
            return self.maps[0](x)  # [B, C, P]
        return torch.stack([linear(x[:, i]) for i, linear in enumerate(self.maps)], dim=1)  # [B, C, P]


class DLinear(ForecastModel):
    """``forward(x [B, L, C_in], x_mark, y_mark) -> [B, P, C_out]``; calendar features are unused.

    The output variables are the last ``C_out`` inputs; the other inputs (``MS``'s
    covariates) are not read, since the model never mixes variables. A panel's known
    covariates (in ``y_mark``, :func:`~forecast.models.base.model_inputs`) add a linear term per
    forecast step and its series and static codes a learned level each.
    """

    reads_other_inputs = False  # each output variable forecast from its own past only

    def __init__(self, spec: DataSpec, config: DLinearConfig | None = None):
        super().__init__()
        config = config or DLinearConfig()
        self.spec, self.config = spec, config
        self.revin = (ReversibleInstanceNorm(spec.c_in, config.revin_affine, center=config.revin_center,
                                             start=spec.persistence)
                      if config.revin else None)
        self.seasonal = _Linear(spec.seq_len, spec.pred_len, spec.c_out, config.individual)
        self.trend = _Linear(spec.seq_len, spec.pred_len, spec.c_out, config.individual)
        # A panel's: the forecast steps' known covariates act linearly on each step, and every code (series,
        # static covariate) shifts the forecast by its own learned level; none for a wide table.
        # Both start at zero, so an untrained model forecasts as plain DLinear does.
        self.known = nn.Linear(spec.n_known, spec.c_out, bias=False) if spec.n_known else None
        self.codes = nn.ModuleList(nn.Embedding(size, spec.c_out) for size in spec.code_sizes)
        for parameter in (*(self.known.parameters() if self.known is not None else ()), *self.codes.parameters()):
            nn.init.zeros_(parameter)

    @property
    def correctable(self) -> bool:
        """With ``revin``, the forecast is the window's centre plus the linear maps' correction."""
        return self.revin is not None

    def forward(self, x: Tensor, x_mark: Tensor, y_mark: Tensor) -> Tensor:
        check_batch(self.spec, "dlinear", x, x_mark, y_mark)
        stats = self.revin.statistics(x) if self.revin is not None else None
        if stats is not None:
            x = self.revin.normalize(x, stats)
        x = x[..., x.shape[2] - self.spec.c_out:]  # [B, L, C_out]
        trend = moving_average(x, self.config.kernel_size)  # [B, L, C_out]
        seasonal = x - trend
        out = self.seasonal(seasonal.transpose(1, 2)) + self.trend(trend.transpose(1, 2))  # [B, C_out, P]
        out = out.transpose(1, 2)  # [B, C_out, P] -> [B, P, C_out]
        _, known, codes = split_step_features(y_mark, self.spec.n_time_features, self.spec.n_known)  # [B, T, K|S]
        if self.known is not None:
            out = out + self.known(known[:, -self.spec.pred_len:])  # [B, P, K] -> [B, P, C_out]
        for i, table in enumerate(self.codes):
            out = out + table(codes[:, 0, i]).unsqueeze(1)  # [B, 1, C_out] over all P
        return out if stats is None else self.revin.denormalize(out, stats)
