"""Reversible instance normalization (RevIN; Kim et al., ICLR 2022).

Each window is normalized by its own statistics before the network and the forecast is
mapped back with them, so the network sees shapes, not levels: a series that drifts
after the training period (ETTh2's oil temperature, exchange rates) no longer arrives
far outside the range the network was trained on.

Statistics are per window and per variable, over the input window only, so the
forecast never depends on values it forecasts. The location is the window's mean (RevIN) or,
with ``center="last"``, its last value (as NLinear subtracts it): a network that outputs zeros
then forecasts the last value, the floor a random walk such as an exchange rate is hard to beat.
With ``center="learned"`` it is a learned per-variable point between the two,
``mean + sigmoid(a) * (last - mean)``, starting halfway: neither centre is best on every dataset
(experiments/README.md), and one model should not need a choice per dataset. ``center="persistence"``
is the same learned point started where the training windows put it (``start``: per variable, the
least-squares share of the last value's offset that persists over the horizon,
:func:`forecast.data.scaling.persistence`), since a weak gradient (an exchange rate's) moves it little. Output
variables are the last ``C_out`` inputs (the package's variable order), so un-normalizing reads the last ``C_out``
statistics. The inverse is the exact inverse of the forward map; a Gaussian's scale
maps with the absolute slope, and quantiles are taken after un-normalizing (a negative
learned weight would otherwise swap them).

The forecast is the window's centre plus the network's correction, and ``correction_weight``
(a buffer, 1 unless fitted) scales that correction on the way back: 0 forecasts the centre
itself. :meth:`forecast.models.base.ForecastModel.fit_correction_weight` fits it on validation
windows after training, so a correction that does not pay on held-out windows (an exchange
rate's, where the last value is hard to beat) is shrunk towards the centre instead of kept whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple

import torch
from torch import Tensor, nn

from forecast.checks import require_bool, require_choice, require_int, require_real
from forecast.errors import ConfigError

__all__ = ["CENTERS", "Center", "ReversibleInstanceNorm", "WindowStats", "validate_revin_options"]

# Adam moves a parameter by about the learning rate a step: at 1e-3 halved every epoch that is a
# few tenths in all, too little for the learned centre's logit to reach either centre (about +-4).
# The logit is this multiple of its parameter, so it moves as if its learning rate were that much larger.
CENTER_LOGIT_SCALE = 20.0

Center = Literal["mean", "last", "learned", "persistence"]
CENTERS: tuple[str, ...] = ("mean", "last", "learned", "persistence")
# The persistence centre's start is kept this far inside (0, 1), where the logit is finite and still moves.
_START_MARGIN = 0.02


_REVIN_ATTRIBUTES = """
        revin: reversible instance normalization: each window normalized by its own location and
            standard deviation per variable, the forecast mapped back.
        revin_affine: RevIN's learned per-variable affine.
        revin_center: the location RevIN subtracts: the window's ``mean``, its ``last`` value, a
            ``learned`` per-variable mix of the two, or that mix started where the training windows
            put it (``persistence``).
"""


def documents_revin_options(config: type) -> type:
    """Class decorator: the RevIN options' descriptions added to a config dataclass's ``Attributes:`` section,
    its docstring's last, which ``--help`` reads (one copy for every model that has the options)."""
    config.__doc__ = (config.__doc__ or "").rstrip() + _REVIN_ATTRIBUTES
    return config


def validate_revin_options(revin: object, revin_affine: object, revin_center: object = "mean") -> None:
    """The ``revin``/``revin_affine``/``revin_center`` options every neural model's config shares."""
    require_bool("revin", revin)
    require_bool("revin_affine", revin_affine)
    require_choice("revin_center", revin_center, CENTERS)
    if revin_affine and not revin:
        raise ConfigError("revin_affine=True is the affine of reversible instance normalization; "
                          "set revin=True too, or leave revin_affine False")


class WindowStats(NamedTuple):
    """Per-window, per-variable input statistics, ``[B, 1, C_in]`` each: the location (the mean, or
    the last value) and the standard deviation."""

    location: Tensor
    std: Tensor


class ReversibleInstanceNorm(nn.Module):
    """``normalize(x, stats)`` before the network, ``denormalize(y, stats)`` after it.

    ``std`` is ``sqrt(var + eps)`` (population variance), so a constant window maps to
    zeros instead of dividing by zero. ``affine`` adds a learned per-variable weight and
    bias in the normalized space (RevIN's optional affine). ``center``: subtract the
    window's ``mean`` (RevIN), its ``last`` value, or a per-variable mix of the two, ``learned`` from
    halfway or from the ``persistence`` weights ``start`` of the training windows.
    """

    def __init__(self, n_variables: int, affine: bool = False, eps: float = 1e-5, center: Center = "mean",
                 start: Sequence[float] | None = None):
        super().__init__()
        self.n_variables = require_int("n_variables", n_variables, 1)
        self.eps = require_real("eps", eps, low=0, low_open=True)
        self.center = require_choice("center", center, CENTERS)
        self.weight = nn.Parameter(torch.ones(n_variables)) if affine else None
        self.bias = nn.Parameter(torch.zeros(n_variables)) if affine else None
        # Each variable's weight on the last value is sigmoid(CENTER_LOGIT_SCALE * center_logit): 0 starts halfway,
        # the persistence centre at the given start (halfway without one, e.g. a model built without data).
        self.center_logit = None
        if center in ("learned", "persistence"):
            weights = torch.full((n_variables,), 0.5)
            if center == "persistence" and start is not None:
                if len(start) != n_variables:
                    raise ConfigError(f"start has {len(start)} weights for {n_variables} variables")
                weights = torch.tensor([float(w) for w in start]).clamp(_START_MARGIN, 1 - _START_MARGIN)
            self.center_logit = nn.Parameter(torch.logit(weights) / CENTER_LOGIT_SCALE)
        self.register_buffer("correction_weight", torch.ones(()))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        # Checkpoints written before the correction weight existed forecast with the whole correction.
        state_dict.setdefault(prefix + "correction_weight", torch.ones(()))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def weight_on_last(self) -> Tensor:
        """Each variable's weight on the last value, ``[C_in]``: 0 for the mean, 1 for the last value."""
        if self.center_logit is None:
            return torch.full((self.n_variables,), float(self.center == "last"))
        return torch.sigmoid(CENTER_LOGIT_SCALE * self.center_logit)

    def statistics(self, x: Tensor) -> WindowStats:
        """Statistics of an input window ``x [B, L, C_in]`` over its L steps."""
        mean, last = x.mean(dim=1, keepdim=True), x[:, -1:]  # [B, 1, C_in] each
        if self.center_logit is not None:
            location = mean + self.weight_on_last() * (last - mean)
        else:
            location = mean if self.center == "mean" else last
        variance = x.var(dim=1, keepdim=True, unbiased=False)  # [B, 1, C_in]
        return WindowStats(location, torch.sqrt(variance + self.eps))

    def _affine(self, n_last: int) -> tuple[Tensor, Tensor] | None:
        if self.weight is None:
            return None
        return self.weight[self.n_variables - n_last:], self.bias[self.n_variables - n_last:]  # [C] each

    def normalize(self, values: Tensor, stats: WindowStats) -> Tensor:
        """``values [B, T, C]`` (the last C of the C_in variables) in the window's normalized space.

        Any steps, the window's own or later ones (teacher-forced targets), go through the
        window's statistics.
        """
        width = values.shape[-1]
        location, std = stats.location[..., -width:], stats.std[..., -width:]  # [B, 1, C]
        normalized = (values - location) / std
        affine = self._affine(width)
        return normalized if affine is None else normalized * affine[0] + affine[1]

    def _slope(self, width: int) -> Tensor | None:
        affine = self._affine(width)
        # RevIN's guard against a weight that training drove to zero.
        return None if affine is None else affine[0] + self.eps * self.eps

    def denormalize(self, values: Tensor, stats: WindowStats) -> Tensor:
        """Map values ``[..., B, T, C]`` of the last C variables back: the exact inverse of :meth:`normalize`
        while ``correction_weight`` is 1, the centre itself at 0."""
        width = values.shape[-1]
        affine = self._affine(width)
        if affine is not None:
            values = (values - affine[1]) / self._slope(width)
        return values * self.correction_weight * stats.std[..., -width:] + stats.location[..., -width:]

    def denormalize_scale(self, scale: Tensor, stats: WindowStats) -> Tensor:
        """A scale (standard deviation) ``[..., B, T, C]`` in the normalized space mapped back."""
        width = scale.shape[-1]
        slope = self._slope(width)
        if slope is not None:
            scale = scale / slope.abs()
        return scale * stats.std[..., -width:]
