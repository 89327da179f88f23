"""What every model gets from the data, so sizes are never typed by hand."""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor, nn

from forecast.checks import require_choice, require_int, require_ints, require_levels
from forecast.errors import ConfigError, DataError

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # the data layer's type, named for readers only: models never import data
    from forecast.data.fitted import FittedState
    from forecast.layers.normalization import ReversibleInstanceNorm


@dataclass(frozen=True)
class DataSpec:
    """Window lengths and sizes a model is built for, read off a fit's data (:meth:`from_fitted`)."""

    seq_len: int
    label_len: int
    pred_len: int
    c_in: int
    c_out: int
    n_time_features: int
    time_encoding: str = "timeF"
    time_feature_sizes: tuple[int, ...] | None = None
    season: int | None = None  # steps in the data's natural cycle, when known (DataSpec.from_fitted)
    # Per input variable, how much of a window's last offset persists over the horizon in the training
    # windows (forecast.data.scaling.persistence): where the ``persistence`` RevIN centre starts.
    persistence: tuple[float, ...] | None = None
    # A panel's (forecast.data.panel): K known covariates, the series the id embedding has rows for
    # (0: no id embedding) and the codes of each static covariate.
    n_known: int = 0
    n_series: int = 0
    static_sizes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        # F = 0 is valid: yearly data has no calendar features.
        for name, minimum in (("seq_len", 1), ("label_len", 0), ("pred_len", 1), ("c_in", 1),
                              ("c_out", 1), ("n_time_features", 0), ("n_known", 0), ("n_series", 0)):
            require_int(name, getattr(self, name), minimum)
        if self.label_len > self.seq_len:
            raise ConfigError(
                f"label_len must lie in [0, seq_len={self.seq_len}], got {self.label_len}: "
                "the decoder's start token is the last label_len steps of the input window"
            )
        if self.c_out > self.c_in:
            raise ConfigError(f"c_out={self.c_out} cannot exceed c_in={self.c_in}")
        require_choice("time_encoding", self.time_encoding, ("timeF", "fixed", "learned"))
        require_int("season", self.season, 1, optional=True)
        if self.persistence is not None:
            if len(self.persistence) != self.c_in or not all(0.0 <= float(w) <= 1.0 for w in self.persistence):
                raise ConfigError(f"persistence={self.persistence!r}: one weight in [0, 1] per input variable "
                                  f"(c_in={self.c_in}); take it from WindowDataModule.fitted.persistence")
            object.__setattr__(self, "persistence", tuple(float(w) for w in self.persistence))
        object.__setattr__(self, "static_sizes", require_ints("static_sizes", self.static_sizes, 1, allow_empty=True))
        if self.time_feature_sizes is not None:
            sizes = require_ints("time_feature_sizes", self.time_feature_sizes, 1, allow_empty=True)
            object.__setattr__(self, "time_feature_sizes", sizes)
        if self.time_encoding != "timeF" and (
            self.time_feature_sizes is None or len(self.time_feature_sizes) != self.n_time_features
        ):
            raise ConfigError(
                f"time_encoding={self.time_encoding!r} needs time_feature_sizes with one "
                f"cardinality per calendar field ({self.n_time_features}); "
                "take them from WindowDataModule.time_feature_sizes"
            )

    @property
    def code_sizes(self) -> tuple[int, ...]:
        """Rows of each code's embedding: the series (when there is an id embedding), then each static covariate."""
        return ((self.n_series,) if self.n_series else ()) + self.static_sizes

    @property
    def n_step_features(self) -> int:
        """The columns of the marks a model takes (:func:`model_inputs`): calendar, known covariates, codes."""
        return self.n_time_features + self.n_known + len(self.code_sizes)

    @classmethod
    def from_fitted(cls, state: FittedState) -> DataSpec:
        """The sizes of a fit's data (``WindowDataModule.fitted`` or a saved run's state)."""
        sizes = state.time_feature_sizes
        return cls(
            seq_len=state.seq_len, label_len=state.label_len, pred_len=state.pred_len,
            c_in=state.c_in, c_out=state.c_out, n_time_features=state.n_time_features,
            time_encoding=state.time_encoding,
            time_feature_sizes=tuple(sizes) if sizes is not None else None, season=state.season,
            persistence=state.persistence, n_known=state.n_known, n_series=state.n_series,
            static_sizes=state.static_sizes,
        )


def model_inputs(spec: DataSpec, batch: Mapping[str, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    """``(x, x_mark, y_mark)`` of a batch as a model built for ``spec`` takes them.

    A panel's known covariates and codes are what is known at every step, like the calendar, so
    they travel in the marks: ``x_mark [B, L, F + K + S]`` and ``y_mark [B, label_len + P, F + K + S]``
    hold the calendar features, the known covariates (``x_known``/``y_known``, forecast steps
    included) and the codes (the ``series`` position when the spec has an id embedding, then the
    ``static`` codes) as float32, in :class:`DataSpec.n_step_features` columns. A wide table's
    marks are the calendar features alone.
    """
    x, x_mark, y_mark = batch["x"], batch["x_mark"], batch["y_mark"]
    if spec.n_step_features == spec.n_time_features:
        return x, x_mark, y_mark
    codes = batch["static"].to(x_mark.dtype)  # [B, S]
    if spec.n_series:
        codes = torch.cat([batch["series"].to(x_mark.dtype).unsqueeze(1), codes], dim=1)  # [B, 1 + S]
    marks = []
    for calendar, known in ((x_mark, batch["x_known"]), (y_mark, batch["y_known"])):
        steps = calendar.shape[1]
        marks.append(torch.cat([calendar, known.to(calendar.dtype), codes.unsqueeze(1).expand(-1, steps, -1)],
                               dim=2))  # [B, T, F + K + S]
    return x, marks[0], marks[1]


# The sample paths behind a sampling model's quantiles, and the seed of the generator that draws them afresh
# for every batch of predict() and evaluate() (ForecastModule's n_samples, sample_seed; each window from a stream of
# its own, WindowDraws): predict() gives the quantiles evaluate() scores. Not the training seed, so evaluate()'s
# published numbers stay as they were.
SAMPLE_PATHS = 100
SAMPLE_SEED = 0


class WindowDraws:
    """Random draws for a batch of windows, each window from a stream of its own.

    A window's stream is seeded by one draw from ``generator`` (the global RNG when None) and the window's
    calendar features (the first ``spec.n_time_features`` columns of ``x_mark, y_mark``: its dates), so its
    sample paths do not depend on the other windows of its batch or on its place there: the same window
    forecast alone, in another batch or in another order gets the same paths from a generator in the same state.
    Not on its values, covariates or codes either: a window shifted or scaled draws what it drew (RevIN's
    invariance holds for sampled quantiles too), and a model that ignores a panel's covariates forecasts the
    same quantiles whatever they hold. Windows whose calendar features are the same draw alike: a panel's series
    at one time, every window of a series without calendar features, and windows a whole cycle of the features
    apart (a year for monthly data, whose one feature is the month). Each window's paths are still a sample of
    its own forecast, but the Monte-Carlo error of a score averaged over such windows is correlated, not
    independent. Successive draws continue the streams.
    """

    def __init__(self, spec: DataSpec, x: Tensor, x_mark: Tensor, y_mark: Tensor,
                 generator: torch.Generator | None) -> None:
        draw_device = generator.device if generator is not None else torch.device("cpu")
        key = int(torch.randint(2**62, (1,), generator=generator, device=draw_device)).to_bytes(8, "little")
        calendar = slice(0, spec.n_time_features)
        marks = [tensor[..., calendar].detach().to("cpu", torch.float64).numpy() for tensor in (x_mark, y_mark)]
        self.like = x
        self.streams = []
        for window in range(x.shape[0]):
            digest = hashlib.blake2b(key=key, digest_size=8)
            for values in marks:
                digest.update(values[window].tobytes())
            seed = int.from_bytes(digest.digest(), "little")
            self.streams.append(torch.Generator(device=x.device).manual_seed(seed))

    def normal(self, count: int, steps: int, width: int) -> Tensor:
        """Standard normal draws ``[count, B, steps, width]`` of ``x``'s dtype."""
        shape, like = (count, steps, width), self.like
        return torch.stack([torch.randn(shape, generator=stream, device=like.device, dtype=like.dtype)
                            for stream in self.streams], dim=1)  # [count, B, steps, width]

    def integers(self, high: int, count: int, steps: int, width: int) -> Tensor:
        """Integers in ``[0, high)`` drawn uniformly, ``[count, B, steps, width]``."""
        shape = (count, steps, width)
        return torch.stack([torch.randint(high, shape, generator=stream, device=self.like.device)
                            for stream in self.streams], dim=1)  # [count, B, steps, width]


def check_batch(spec: DataSpec, model: str, x: Tensor, x_mark: Tensor, y_mark: Tensor, future: Tensor | None = None,
                y_mark_steps: int | None = None) -> None:
    """DataError unless a batch has the shapes of ``spec``: ``x [B, L, C_in]``, ``x_mark [B, L, F]``,
    ``y_mark [B, y_mark_steps, F]`` (at least ``P`` steps when ``None``) and ``future [B, P, C_in]``.

    Checked before the first layer, where a wrong width would otherwise surface as a matrix-product
    error deep inside the model.
    """
    expected = {
        "x": (x, spec.seq_len, spec.c_in),
        "x_mark": (x_mark, spec.seq_len, spec.n_step_features),
        "y_mark": (y_mark, y_mark_steps, spec.n_step_features),
    }
    if future is not None:
        expected["future"] = (future, spec.pred_len, spec.c_in)
    for name, (tensor, length, width) in expected.items():
        if (tensor.dim() != 3 or tensor.shape[0] != x.shape[0] or (length is not None and tensor.shape[1] != length)
                or tensor.shape[2] != width):
            raise DataError(
                f"{model}: {name} has shape {tuple(tensor.shape)}, expected [B, "
                f"{length if length is not None else 'label_len + P'}, {width}] for the DataSpec it was built with "
                f"(seq_len={spec.seq_len}, label_len={spec.label_len}, pred_len={spec.pred_len}, c_in={spec.c_in}, "
                f"F={spec.n_time_features}, known covariates K={spec.n_known}, codes {len(spec.code_sizes)}); build the "
                "model from the data module that serves the batches (a panel's marks: forecast.models.model_inputs)"
            )
    if y_mark.shape[1] < spec.pred_len:
        raise DataError(f"{model}: y_mark has {y_mark.shape[1]} steps, fewer than pred_len={spec.pred_len}; it must "
                        "cover label_len + pred_len steps")


def sorted_quantiles(samples: Tensor, levels: Sequence[float]) -> Tensor:
    """Quantiles over the sample axis: ``samples [S, ...] -> [R, ...]`` in their dtype (float64 for integer or bool
    samples), R = ``len(levels)`` (checked already). In float32 and float64 ``torch.quantile``'s values bit for
    bit, NaN in a cell that holds one, from one sort: on the CPU numpy's, which computes no indices and takes a
    sixth to a twelfth of ``torch.quantile``'s time (46 against 7 ms for 100 samples of a batch of 32 windows,
    24 steps and 7 variables; 4.5 against 0.38 s at 720 steps)."""
    n_samples = samples.shape[0]
    # Half precision interpolates in float32, as torch.quantile refuses it (its ranks would be rounded). Integer
    # (and bool) samples interpolate in float64, exact for integers up to 2**53, and stay there: in their dtype
    # the median of 1 and 2 was truncated to 1 (torch.quantile refuses them, numpy's quantile gives float64).
    exact = samples.dtype in (torch.float32, torch.float64)
    whole = not samples.is_floating_point()
    out_dtype = torch.float64 if whole else samples.dtype
    flat = samples.reshape(n_samples, -1)  # [S, M]
    flat = flat if exact else flat.to(torch.float64 if whole else torch.float32)
    if flat.device.type == "cpu":
        ordered = torch.from_numpy(np.sort(flat.numpy(), axis=0))  # [S, M]
    else:
        ordered = flat.sort(dim=0).values  # [S, M]
    # torch.quantile's own interpolation, in the samples' dtype: lerp from the order statistic below the rank
    # to the one above.
    ranks = torch.tensor(levels, dtype=flat.dtype, device=flat.device) * (n_samples - 1)  # [R]
    below, above = ranks.floor().long(), ranks.ceil().long()
    quantiles = ordered[below].lerp(ordered[above], (ranks - below).unsqueeze(1))  # [R, M]
    quantiles[:, flat.isnan().any(dim=0)] = torch.nan
    return quantiles.reshape(len(levels), *samples.shape[1:]).to(out_dtype)  # [R, ...trailing dims]


def path_quantiles(paths: Tensor, levels: Sequence[float]) -> dict[float, Tensor]:
    """Empirical quantiles (linear interpolation) of sample paths: ``[S, B, P, C] -> {level: [B, P, C]}``."""
    checked = require_levels("levels", levels)
    values = sorted_quantiles(paths.detach(), checked)  # [Q, B, P, C]
    return {level: values[index] for index, level in enumerate(checked)}


def diebold_mariano(differential: Tensor, lag: int) -> Tensor:
    """The Diebold-Mariano statistic (Diebold and Mariano, 1995) of loss differentials ``[..., N]`` in time
    order, one per leading index: the mean over its standard error, whose long-run variance is Newey and
    West's (Bartlett weights ``1 - k / (lag + 1)`` on the autocovariances up to ``lag``, at most ``N - 1``).
    Positive when the first forecast's losses are the larger. ``lag`` is ``h - 1`` for ``h``-step
    forecasts, whose errors overlap. ``inf`` (``-inf``, NaN for a zero mean) where the differential
    does not vary."""
    d = differential.double()
    n = d.shape[-1]
    centred = d - d.mean(dim=-1, keepdim=True)  # [..., N]
    # The Bartlett-weighted sum of autocovariances, sum over |k| <= lag of (1 - |k| / (lag + 1)) gamma_k, is the sum
    # of squares of every (lag + 1)-long window sum of the series padded with lag zeros at each end, over
    # (lag + 1) n: two steps k apart share lag + 1 - k windows (none beyond lag, and no pair is more than N - 1
    # apart). Prefix sums give it in O(N + lag) instead of a loop over the lags.
    padded = torch.nn.functional.pad(centred, (lag, lag))  # [..., N + 2 lag]
    prefix = torch.nn.functional.pad(padded.cumsum(dim=-1), (1, 0))  # [..., N + 2 lag + 1]
    windows = prefix[..., lag + 1:] - prefix[..., : prefix.shape[-1] - (lag + 1)]  # [..., N + lag]
    variance = windows.square().sum(dim=-1) / ((lag + 1) * n)  # [...]
    return d.mean(dim=-1) / (variance / n).sqrt()


def diebold_mariano_critical_value(n: int, lag: int, significance: float, draws: int = 4000) -> float:
    """The one-sided critical value of :func:`diebold_mariano` at ``significance`` for ``n`` differentials and
    that ``lag``: the ``1 - significance`` quantile of the statistic over ``draws`` Gaussian white-noise
    series of length ``n`` (a fixed seed, so the same every call).

    With the lag a fixed share of ``n`` (Kiefer and Vogelsang's fixed-b asymptotics) the statistic's
    limit does not depend on the differential's autocorrelation but is wider than the standard normal
    (Coroneo and Iacone, 2020, recommend these critical values for comparing forecasts on small
    samples): at a lag near ``n`` the normal's 1.645 would reject far too often.
    """
    generator = torch.Generator().manual_seed(0)
    chunk = max(1, min(draws, 2**22 // max(n, 1)))  # rows per batch of draws, about 32 MB of float64
    statistics = [diebold_mariano(torch.randn(min(chunk, draws - start), n, generator=generator,
                                              dtype=torch.float64), lag)
                  for start in range(0, draws, chunk)]
    return float(torch.cat(statistics).quantile(1 - significance))


def least_squares_share(cross: Tensor, square: Tensor) -> float:
    """The share ``w`` in [0, 1] of a correction with the least squared error, from the per-window terms of
    :meth:`ForecastModel.correction_terms`: ``sum(cross) / sum(square)``, clipped (1 for no correction)."""
    total = float(square.sum())
    return min(1.0, max(0.0, float(cross.sum()) / total)) if total > 0 else 1.0


def correction_test(cross: Tensor, square: Tensor, horizon: int, significance: float) -> tuple[float, float] | None:
    """``(statistic, critical value)`` of the one-sided Diebold-Mariano test that the whole forecast beats the
    centre on these windows (terms of :meth:`ForecastModel.correction_terms`, time order), lag ``horizon - 1``;
    ``None`` where the windows hold fewer than two disjoint horizons (no more windows than ``horizon``)."""
    if len(cross) <= horizon:
        return None
    lag = horizon - 1
    # Per window, the centre's squared error minus the whole forecast's: positive where the correction pays.
    statistic = float(diebold_mariano(2 * cross - square, lag))
    return statistic, diebold_mariano_critical_value(len(cross), lag, significance)


def kept_share(cross: Tensor, square: Tensor, horizon: int, significance: float | None = None, *,
               tested: tuple[Tensor, Tensor, int] | None = None) -> tuple[float, tuple[float, float] | None]:
    """The share of the correction kept (:meth:`ForecastModel.fit_correction_weight`'s rule) and the
    :func:`correction_test` behind it: the least-squares share, or none of it where ``significance`` is given and
    the test does not find the whole forecast better. The test is made on ``tested`` (the terms of other windows
    and the steps they score) where given, else on these windows; it is ``None`` where it was not made (no
    significance, a share of 0 already, or too few windows, where the least-squares share stands)."""
    fitted = least_squares_share(cross, square)
    if significance is None or fitted == 0:
        return fitted, None
    test = correction_test(*(tested if tested is not None else (cross, square, horizon)), significance)
    return (0.0 if test is not None and not test[0] > test[1] else fitted), test


def horizon_target(y: Tensor, c_out: int, horizon: int) -> Tensor:
    """The values a forecast is scored against: ``y [B, label_len + P, C_in] -> [B, P, C_out]``.

    The last ``horizon`` steps of the output variables (the last ``c_out`` columns).
    """
    return y[:, y.shape[1] - horizon:, y.shape[2] - c_out:]  # [B, P, C_out]


def observed_target(batch: Mapping[str, Tensor], c_out: int, horizon: int) -> Tensor:
    """:func:`horizon_target` of ``batch["y"]``, NaN where the data observed no value: ``batch["truth"]
    [B, >= horizon, C_out]`` is NaN where ``fill_nan`` made one up (a batch without it, or with no columns in
    it, is all observed). Training, validation, calibration and the test alike leave those cells out."""
    target = horizon_target(batch["y"], c_out, horizon)  # [B, P, C_out]
    truth = batch.get("truth")
    if truth is None or truth.shape[-1] == 0:
        return target
    return target.masked_fill(truth[:, :horizon].isnan(), math.nan)


def checked_forecast(model: nn.Module, pred: Tensor) -> Tensor:
    """``pred``, the output of ``model.forward``, if it is ``[B, spec.pred_len, spec.c_out]``; ConfigError naming
    the model otherwise (a model forecasting every input variable under features 'MS' would train against the wrong
    target without a word)."""
    spec = model.spec
    if pred.dim() != 3 or tuple(pred.shape[1:]) != (spec.pred_len, spec.c_out):
        raise ConfigError(f"{type(model).__name__}.forward returned shape {tuple(pred.shape)}; a model forecasts "
                          f"[B, pred_len={spec.pred_len}, c_out={spec.c_out}] (spec.c_out counts the forecast "
                          "variables: 1 under features 'MS' and 'S'). Fix: return that shape.")
    return pred


def observed_cells(*tensors: Tensor, target: Tensor) -> tuple[Tensor, ...]:
    """``tensors`` and ``target`` (all ``[B, P, C_out]``) at the cells whose target is observed (not NaN), flat
    ``[N]`` each; as they are where every cell is (the common case keeps its exact arithmetic)."""
    observed = ~target.isnan()
    if bool(observed.all()):
        return (*tensors, target)
    return (*(tensor[observed] for tensor in tensors), target[observed])


def observed_loss(loss: Callable[..., Tensor], *outputs: Tensor, target: Tensor) -> Tensor:
    """``loss(*outputs, target)`` over the cells whose target is observed (:func:`observed_cells`). A batch with none
    (every horizon value made up by ``fill_nan``) has loss 0 with a zero gradient, where the mean over no cells
    would be NaN and poison every weight."""
    *kept, kept_target = observed_cells(*outputs, target=target)
    if kept_target.numel() == 0:
        return sum(output.sum() for output in outputs) * 0.0
    return loss(*kept, kept_target)


class ForecastModel(nn.Module):
    """The contract of every registered model, relied on by ForecastModule, the Forecaster and the recipe.

    Required: :meth:`forward` ``(x [B, L, C_in], x_mark [B, L, F], y_mark [B, label_len + P, F])
    -> [B, P, C_out]`` on the standardized scale, and the :class:`DataSpec` it was built for
    in ``self.spec``. For a panel the marks also carry the known covariates and codes
    (:func:`model_inputs`, ``spec.n_step_features`` columns); a model that reads only the
    calendar takes ``x_mark[..., :spec.n_time_features]``, and the naive baselines ignore them.

    Optional capabilities each have a default that declares them absent, so callers ask the
    model, never ``hasattr``:

    * :meth:`loss`: the training objective of a batch. Default: the given point loss of
      ``forward`` against the horizon; a model with its own objective (a likelihood,
      teacher forcing) overrides it.
    * :attr:`reads_other_inputs` (True): whether an output's forecast reads the inputs that are not outputs
      (``MS``'s other variables, a panel's past covariates); the baselines that forecast each variable from
      its own past say False.
    * :attr:`probabilistic` (False) with :meth:`sample` and :meth:`quantiles`: predictive
      distributions. :meth:`quantiles` defaults to the empirical quantiles of sample paths.
    * :attr:`calibratable` (False) with :meth:`calibrate_scale`: a predictive scale fitted on
      held-out windows after training.
    * :attr:`correctable` (False) with :meth:`fit_correction_weight`: how much of the network's
      correction to the window's centre to keep, fitted on held-out windows after training
      (:meth:`center_and_correction` gives the forecast's two parts, :attr:`correction_kept` the share
      kept). A correctable model keeps its
      reversible instance normalization in ``self.revin``.
    * :meth:`attention_weights`: per-layer attention weights of one input, for plotting.
    """

    spec: DataSpec

    def forward(self, x: Tensor, x_mark: Tensor, y_mark: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} must define forward(x, x_mark, y_mark)")

    def loss(self, batch: Mapping[str, Tensor], loss_fn: Callable[[Tensor, Tensor], Tensor]) -> Tensor:
        """Scalar training loss of a batch (``x``, ``y``, ``x_mark``, ``y_mark``), standardized scale, over the
        cells the data observed (:func:`observed_target`)."""
        pred = checked_forecast(self, self(*model_inputs(self.spec, batch)))  # [B, P, C_out]
        return observed_loss(loss_fn, pred, target=observed_target(batch, self.spec.c_out, self.spec.pred_len))

    @property
    def own_objective(self) -> str | None:
        """What :meth:`loss` trains on where it ignores ``loss_fn`` (a likelihood), else None."""
        return None

    @property
    def reads_other_inputs(self) -> bool:
        """Whether the inputs that are not outputs (``MS``'s other variables, past covariates) reach the forecast."""
        return True

    @property
    def probabilistic(self) -> bool:
        """Whether :meth:`sample` and :meth:`quantiles` forecast distributions."""
        return False

    def sample(self, x: Tensor, x_mark: Tensor, y_mark: Tensor, n_samples: int,
               generator: torch.Generator | None = None) -> Tensor:
        """Sample paths ``[S, B, P, C_out]`` on the standardized scale (probabilistic models)."""
        raise ConfigError(f"{type(self).__name__} forecasts points only; it has no sample paths")

    def quantiles(self, x: Tensor, x_mark: Tensor, y_mark: Tensor, levels: Sequence[float],
                  n_samples: int = SAMPLE_PATHS, generator: torch.Generator | None = None) -> dict[float, Tensor]:
        """Quantile forecasts ``{level: [B, P, C_out]}``: by default those of ``n_samples`` paths."""
        require_levels("levels", levels)
        return path_quantiles(self.sample(x, x_mark, y_mark, n_samples, generator), levels)

    @property
    def calibratable(self) -> bool:
        """Whether :meth:`calibrate_scale` can fit a predictive scale."""
        return False

    def calibrate_scale(self, batches: Iterable[Mapping[str, Tensor]], coverage: float = 0.8) -> float:
        """Fit the predictive scale so the central ``coverage`` interval covers that share of
        ``batches`` (held-out windows); returns the factor applied."""
        raise ConfigError(f"{type(self).__name__} has no predictive scale to calibrate")

    @property
    def correctable(self) -> bool:
        """Whether :meth:`fit_correction_weight` applies: the forecast is RevIN's centre plus a correction."""
        return False

    @torch.no_grad()
    def fit_correction_weight(self, batches: Iterable[Mapping[str, Tensor]], significance: float | None = None,
                              prefix: tuple[int, Iterable[Mapping[str, Tensor]]] | None = None) -> float:
        """Fit ``revin.correction_weight``, the share of the network's correction kept, on ``batches``
        (held-out windows in time order, never test ones); returns it.

        With ``c`` the window's centre (weight 0) and ``f`` the whole forecast (weight 1), the
        forecast ``c + w (f - c)`` has the least squared error over every horizon step and variable
        at ``w = sum((y - c)(f - c)) / sum((f - c)^2)``, kept in [0, 1]: a correction is shrunk
        where it does not pay, never amplified. Below 1/2 exactly when the whole correction
        forecasts worse than the centre.

        With ``significance``, that share is kept only when the whole forecast beats the centre on
        these windows by a one-sided Diebold-Mariano test at that level (:func:`diebold_mariano` of
        the per-window squared-error differences, lag ``pred_len - 1`` as overlapping windows' errors
        are correlated; critical value from :func:`diebold_mariano_critical_value`); otherwise none
        is: a share fitted on a few independent stretches of a random walk is noise, and the centre is
        the safer forecast there. The test needs two disjoint horizons among the windows (more windows
        than ``pred_len``); with fewer, their errors are one stretch that no test can weigh. Then the test
        is made on ``prefix``, ``(steps, batches)``: the windows of the longest prefix of the horizon that
        the held-out period holds twice, their ``y`` cut to its ``steps``
        (:meth:`~forecast.data.WindowDataModule.val_prefix_dataloader`); without it the fitted share
        stands. Call in eval mode (no dropout).
        """
        revin = self._correctable_revin()
        cross, square, _ = self.correction_terms(batches)
        tested = None
        fitted, test = kept_share(cross, square, self.spec.pred_len, significance)
        untested = significance is not None and test is None and fitted > 0  # too few windows for the test
        if untested and prefix is not None:
            steps, prefix_batches = prefix
            tested = (*self.correction_terms(prefix_batches)[:2], steps)
            fitted, test = kept_share(cross, square, self.spec.pred_len, significance, tested=tested)
        if untested and test is None:
            log.info("%d validation windows of %d steps hold fewer than two disjoint horizons: too few to test "
                     "the correction, so the least-squares share stands", len(cross), self.spec.pred_len)
        elif test is not None and fitted == 0:
            log.info("the network's correction did not beat the centre on the validation windows%s "
                     "(Diebold-Mariano %.2f, needed > %.2f at %g): kept none of it",
                     "" if tested is None else f" (their first {tested[2]} steps, on {len(tested[0])} windows)",
                     *test, significance)
        revin.correction_weight.fill_(fitted)
        return fitted

    @torch.no_grad()
    def correction_terms(self, batches: Iterable[Mapping[str, Tensor]]) -> tuple[Tensor, Tensor, Tensor]:
        """Per window of ``batches``, ``[N]`` each in float64, summed over horizon steps and variables:
        ``(f - c)(y - c)``, ``(f - c)^2`` and ``(y - c)^2``, with ``c`` the centre and ``f`` the whole forecast.
        The squared error at weight ``w`` is ``third - 2 w first + w^2 second``. A batch whose ``y`` holds
        ``label_len + k`` rows, ``k < pred_len``, is scored on the horizon's first ``k`` steps."""
        crosses, squares, bases = [], [], []
        for batch in batches:
            center, correction = self.center_and_correction(*model_inputs(self.spec, batch))  # [B, P, C_out] each
            steps = batch["y"].shape[1] - self.spec.label_len  # P, or fewer for a horizon prefix's windows
            center, correction = center[:, :steps], correction[:, :steps]  # [B, steps, C_out] each
            miss = observed_target(batch, center.shape[2], steps) - center  # [B, steps, C_out]
            unobserved = miss.isnan()  # cells fill_nan made up count in no term
            correction, miss = correction.masked_fill(unobserved, 0.0), miss.masked_fill(unobserved, 0.0)
            crosses.append((correction * miss).sum(dim=(1, 2), dtype=torch.float64))  # [B]
            squares.append(correction.square().sum(dim=(1, 2), dtype=torch.float64))  # [B]
            bases.append(miss.square().sum(dim=(1, 2), dtype=torch.float64))  # [B]
        return torch.cat(crosses), torch.cat(squares), torch.cat(bases)

    @property
    def correction_kept(self) -> float | None:
        """The share of the network's correction the forecast keeps (1 until :meth:`fit_correction_weight`
        fits it); ``None`` for a model that is not :attr:`correctable`."""
        return float(self.revin.correction_weight) if self.correctable else None

    @torch.no_grad()
    def center_and_correction(self, x: Tensor, x_mark: Tensor, y_mark: Tensor) -> tuple[Tensor, Tensor]:
        """The two parts of a correctable model's forecast, ``[B, P, C_out]`` each: RevIN's centre (none of
        the correction) and the network's whole correction. ``revin.correction_weight`` is left as it was.

        The centre is the forecast at weight 0, which is the window's location (RevIN maps the network's
        output ``o`` back as ``w * o * std + location``, the model's last step): read off the statistics
        instead of a second pass through the network."""
        revin = self._correctable_revin()
        weight = revin.correction_weight
        kept = weight.clone()
        try:
            weight.fill_(1.0)
            forecast = self(x, x_mark, y_mark)  # [B, P, C_out]
        finally:
            weight.copy_(kept)
        location = revin.statistics(x).location[..., -forecast.shape[-1]:]  # [B, 1, C_out]
        center = location.expand_as(forecast)  # [B, 1, C_out] -> [B, P, C_out]
        return center, forecast - center

    def _correctable_revin(self) -> ReversibleInstanceNorm:
        if not self.correctable:
            raise ConfigError(f"{type(self).__name__} has no correction to weigh: it needs revin=True "
                              "(and one-shot decoding for LogSparse)")
        return self.revin

    def attention_weights(self, x: Tensor, x_mark: Tensor, y_mark: Tensor) -> list[object]:
        """Per-layer attention weights of the input windows (see :mod:`forecast.layers.attention`)."""
        raise ConfigError(f"{type(self).__name__} has no attention weights to show")
