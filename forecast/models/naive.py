"""The floors every report needs: the last value, or the last season, repeated over the horizon."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from forecast.checks import require_int
from forecast.errors import ConfigError
from forecast.models.base import DataSpec, ForecastModel, WindowDraws, check_batch


class RepeatLast(ForecastModel):
    """``x [B, L, C_in] -> [B, P, C_out]``: the last step of the output variables, repeated.

    Output variables are the last ``C_out`` inputs (the target sits last for S/MS).
    It has no parameters, so training it is a no-op.
    """

    reads_other_inputs = False  # each output variable forecast from its own past only

    def __init__(self, spec: DataSpec):
        super().__init__()
        self.spec = spec

    def forward(self, x: torch.Tensor, x_mark: torch.Tensor, y_mark: torch.Tensor) -> torch.Tensor:
        # Checked as the networks check it: a window of other variables would forecast its last columns silently.
        check_batch(self.spec, "naive", x, x_mark, y_mark)
        last = x[:, -1:, x.shape[2] - self.spec.c_out:]  # [B, 1, C_out]
        return last.expand(-1, self.spec.pred_len, -1)  # [B, P, C_out]


@dataclass(frozen=True)
class SeasonalNaiveConfig:
    """Options of the seasonal naive forecast.

    Attributes:
        season_length: the period in steps. None: the data's natural cycle
            (``DataSpec.season``, :func:`~forecast.data.timefeatures.seasonal_period`): a day of
            sub-daily data (24 hourly, 96 at 15 minutes, 144 at 10 minutes), a week of daily data
            (7), a year of weekly or monthly data.
    """

    season_length: int | None = None

    def __post_init__(self) -> None:
        require_int("season_length", self.season_length, 1, optional=True,
                    hint="the period in steps; None: the data's natural cycle")


class SeasonalNaive(ForecastModel):
    """``x [B, L, C_in] -> [B, P, C_out]``: the last observed season, repeated over the horizon.

    The probabilistic floor for rho-risks and interval coverage: :meth:`sample` draws
    paths of the seasonal random walk ``y[t] = y[t - m] + e[t]`` whose innovations ``e``
    are bootstrapped from the window's own seasonal differences ``y[t] - y[t - m]``
    (``L - m`` of them per window and variable), so steps more than one season ahead
    widen as they should. The differences are centred first, as R's ``forecast`` package
    centres residuals before it bootstraps them: the walk has no drift, so its paths
    spread around the point forecast instead of carrying a trending window's slope past
    it. Parameter-free; ``m`` is ``config.season_length``. A window of
    exactly one season (``L == m``, a day of 15-minute data at input 96) has no seasonal
    difference to bootstrap, and one of ``L == m + 1`` has one, which centring makes 0 (every
    path would be the point forecast): the model then forecasts points only (``probabilistic``
    is False).
    """

    reads_other_inputs = False  # each output variable forecast from its own past only

    def __init__(self, spec: DataSpec, config: SeasonalNaiveConfig):
        super().__init__()
        season_length = config.season_length
        if season_length is None:
            if spec.season is None:
                raise ConfigError("seasonal_naive: the data has no natural cycle that its frequency tells (or the "
                                  "model was built without data). Fix: set season_length, the period in steps.")
            season_length = spec.season
        if spec.seq_len < season_length:
            chosen = "" if config.season_length is not None else " (the data's natural cycle)"
            raise ConfigError(
                f"seasonal_naive needs seq_len >= season_length to see one season, got seq_len={spec.seq_len}, "
                f"season_length={season_length}{chosen}; lengthen seq_len or set season_length"
            )
        self.spec = spec
        self.config = config
        self.season_length = season_length

    @property
    def probabilistic(self) -> bool:
        """Whether :meth:`sample` has seasonal differences to draw from, two at least (``seq_len >= season_length +
        2``): a single one, centred, is 0."""
        return self.spec.seq_len >= self.season_length + 2

    def _outputs(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, :, x.shape[2] - self.spec.c_out:]  # [B, L, C_out]

    def forward(self, x: torch.Tensor, x_mark: torch.Tensor, y_mark: torch.Tensor) -> torch.Tensor:
        check_batch(self.spec, "seasonal_naive", x, x_mark, y_mark)
        season = self._outputs(x)[:, -self.season_length:]  # [B, m, C_out]
        repeats = math.ceil(self.spec.pred_len / self.season_length)
        return season.repeat(1, repeats, 1)[:, : self.spec.pred_len]  # [B, P, C_out]

    def sample(
        self,
        x: torch.Tensor,
        x_mark: torch.Tensor,
        y_mark: torch.Tensor,
        n_samples: int,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Sample paths ``[S, B, P, C_out]`` of the bootstrapped seasonal random walk."""
        check_batch(self.spec, "seasonal_naive", x, x_mark, y_mark)
        require_int("n_samples", n_samples, 1)
        if not self.probabilistic:
            raise ConfigError(
                f"seasonal_naive samples centred seasonal differences, and a window of seq_len={self.spec.seq_len} "
                f"has {self.spec.seq_len - self.season_length} at season_length={self.season_length} (two at least "
                "give a spread). Fix: seq_len >= season_length + 2, or use its point forecast"
            )
        values = self._outputs(x)
        m = self.season_length
        batch, length, channels = values.shape
        differences = values[:, m:] - values[:, :-m]  # [B, L - m, C_out]
        differences = differences - differences.mean(dim=1, keepdim=True)
        seasons = math.ceil(self.spec.pred_len / m)
        draws = WindowDraws(self.spec, x, x_mark, y_mark, generator)  # each window's from a stream of its own
        drawn = draws.integers(length - m, n_samples, seasons * m, channels)  # [S, B, K*m, C_out] indices into L - m
        pool = differences.unsqueeze(0).expand(n_samples, -1, -1, -1)  # [S, B, L - m, C_out]
        innovations = torch.gather(pool, 2, drawn)  # [S, B, K*m, C_out]
        innovations = innovations.view(n_samples, batch, seasons, m, channels)  # [S, B, K, m, C_out]
        paths = values[:, -m:].unsqueeze(0).unsqueeze(2) + innovations.cumsum(dim=2)  # [S, B, K, m, C_out]
        return paths.reshape(n_samples, batch, seasons * m, channels)[:, :, : self.spec.pred_len]  # [S, B, P, C_out]
