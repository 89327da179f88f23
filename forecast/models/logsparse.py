"""LogSparse Transformer (Li et al., NeurIPS 2019): a decoder-only forecaster with
convolutional causal self-attention and the log-sparse attention pattern.

Tokens (:class:`~forecast.models.logsparse_tokens.TokenLayout`). The model reads one token per
step of the window and of its horizon, ``T = L + P`` tokens. Token ``t`` carries the *previous* step's value(s) ``z[t-1]``
(or a placeholder where unknown), the calendar features of step ``t``, the sinusoidal
position ``t`` and, in channel-independent mode, the id of the series; its output is
the forecast of step ``t`` (a value, or a Gaussian's mean and scale). Every lagged
value comes with a known flag and the value projection reads ``[value * known,
known]``, so a placeholder is never mistaken for an observed zero. After the
embedding everything is causal: the attention (log-sparse or full, both causal), the
convolutional Q/K projections (left zero padding), LayerNorm and the feed-forward
(per position). The output at ``t`` therefore depends on values before ``t`` and
calendar features up to ``t`` only.

Decoding (``LogSparseConfig.decoding``):

* ``one_shot``: the horizon's tokens are placeholders carrying their known calendar
  features; one pass gives all P forecasts (the windows and protocol of Informer).
  A point head is trained by ForecastModule's loss on the forward output.
* ``autoregressive`` (the paper's): trained with teacher forcing on every token of the
  window and horizon; at inference the horizon is rolled forward one step at a time,
  feeding back the prediction (the mean for the Gaussian head) or, in
  :meth:`LogSparseTransformer.sample`, each path's own draw. The rollout keeps a
  key/value cache: the window's tokens go through the network once, then each horizon
  step computes only its own token, layer by layer, against the cached keys and values
  of the earlier tokens (and the last ``k - 1`` attention inputs that the convolutional
  Q/K projections of kernel ``k`` read). Everything after the embedding is causal, so
  the cached states are those a full pass over the prefix would recompute, to float
  rounding (see :class:`~forecast.models.logsparse_rollout.Rollout`).

Variables (``LogSparseConfig.channels``); output variables are the last ``C_out`` inputs:

* ``independent`` (default, the paper's many-series setting): each output variable is
  its own series through one shared network (``B * C_out`` sequences), told apart by a
  learned series-id embedding (``series_embedding``). The other input variables (the
  ``C_in - C_out`` non-target columns of ``MS``) are exogenous covariates of every
  series: their lagged values join the token, and they are placeholders over the
  horizon because they are not known there. ``M`` and ``S`` have no exogenous variables.
* ``joint``: one sequence per window, tokens read all ``C_in`` lagged values and the
  head emits ``C_out`` values per step (Informer's multivariate in/out).

Heads (``LogSparseConfig.head``): ``point``, or ``gaussian`` (mean and
``softplus(.) + min_scale`` scale, trained by Gaussian negative log-likelihood on the
standardized targets; ``forward`` returns the mean, which is also the median).

Deliberate deviations from the public implementation (see docs/pitfalls.md): the
log-sparse pattern is never a dense additive mask (the attention's fast path shifts
views), ``sub_len=1`` is refused rather than leaking the future, and the series-id
embedding is added to the token, never overwritten by the position embedding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from forecast.checks import require_bool, require_choice, require_int, require_levels, require_real
from forecast.errors import ConfigError
from forecast.layers.attention import FullAttention, LogSparseAttention, MultiHeadAttention
from forecast.layers.blocks import Activation, LinearSkip, PreNormCausalBlock
from forecast.layers.dropout import Dropout
from forecast.layers.embedding import PositionalEmbedding, time_embedding
from forecast.layers.masks import validate_logsparse_options
from forecast.layers.normalization import (
    Center,
    ReversibleInstanceNorm,
    documents_revin_options,
    validate_revin_options,
)
from forecast.models.base import (SAMPLE_PATHS, DataSpec, ForecastModel, WindowDraws, check_batch, model_inputs,
                                  observed_loss, observed_target, path_quantiles)
from forecast.models.logsparse_rollout import Rollout
from forecast.models.logsparse_tokens import TokenLayout

__all__ = ["LogSparseConfig", "LogSparseTransformer", "StepPrediction"]

Decoding = Literal["one_shot", "autoregressive"]
Head = Literal["point", "gaussian"]
Channels = Literal["independent", "joint"]

@documents_revin_options
@dataclass(frozen=True)
class LogSparseConfig:
    """Architecture of the LogSparse Transformer (no training settings).

    Attributes:
        d_model: the width D of every layer.
        n_heads: attention heads H (``d_model`` a multiple of it).
        n_layers: decoder-only Transformer layers.
        d_ff: the feed-forward block's hidden width.
        dropout: the dropout rate throughout.
        activation: the feed-forward activation, ``gelu`` or ``relu``.
        attention: ``logsparse``, or causal ``full`` attention (the ablation).
        local_window: steps before each query that it always attends, on top of the log-sparse
            offsets (:func:`forecast.layers.masks.logsparse_offsets`).
        sub_len: restart the log-sparse pattern every this many steps. None: no restart.
        qk_kernel_size: the paper's k, the causal convolution's kernel behind queries and keys (it
            tries 1, 2, 3, 6, 9; 1 is canonical self-attention).
        decoding: ``one_shot`` (the whole horizon from the window at once) or ``autoregressive``
            (the paper's: one step at a time, each fed back).
        head: ``point``, or ``gaussian`` (mean and scale, trained by negative log-likelihood; its
            quantiles are predict's quantile columns).
        channels: ``independent`` (each output variable its own series through shared weights) or
            ``joint`` (one sequence of all variables per window).
        series_embedding: tell the independent series apart by a learned series-id embedding.
        min_scale: the floor of the Gaussian head's scale in the network's space: the standardized scale, or with
            ``revin`` each window's normalized one, which maps back times the window's standard deviation (a flat
            window's is tiny, and so is its floor).
        dense_reference: run the log-sparse attention through its dense masked reference (tests and
            comparisons only: the same numbers, quadratic memory).
        linear_skip: add a linear map of each series' input window to its one-shot forecast
            (:class:`~forecast.layers.blocks.LinearSkip`; the Gaussian head's mean), in RevIN's
            normalized space when ``revin`` is on.
    """

    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 3
    d_ff: int = 256
    dropout: float = 0.1
    activation: Activation = "gelu"
    attention: Literal["logsparse", "full"] = "logsparse"
    local_window: int = 0
    sub_len: int | None = None
    qk_kernel_size: int = 3
    decoding: Decoding = "one_shot"
    head: Head = "point"
    channels: Channels = "independent"
    series_embedding: bool = True
    min_scale: float = 1e-3
    dense_reference: bool = False
    revin: bool = False
    revin_affine: bool = False
    revin_center: Center = "mean"
    linear_skip: bool = False

    def __post_init__(self) -> None:
        for name in ("d_model", "n_heads", "n_layers", "d_ff", "qk_kernel_size"):
            require_int(name, getattr(self, name), 1)
        if self.d_model % self.n_heads:
            raise ConfigError(f"d_model={self.d_model} must be a multiple of n_heads={self.n_heads}")
        require_real("dropout", self.dropout, low=0, high=1, high_open=True)
        require_choice("activation", self.activation, ("gelu", "relu"))
        require_choice("attention", self.attention, ("logsparse", "full"))
        require_choice("decoding", self.decoding, ("one_shot", "autoregressive"))
        require_choice("head", self.head, ("point", "gaussian"))
        require_choice("channels", self.channels, ("independent", "joint"))
        validate_logsparse_options(self.local_window, self.sub_len)
        if self.attention == "full" and (self.local_window or self.sub_len is not None or self.dense_reference):
            raise ConfigError(
                "local_window, sub_len and dense_reference shape the log-sparse pattern; "
                "leave them at their defaults with attention='full'"
            )
        for name in ("series_embedding", "dense_reference", "linear_skip"):
            require_bool(name, getattr(self, name))
        if self.linear_skip and self.decoding != "one_shot":
            raise ConfigError("linear_skip adds a map of the window to the whole horizon at once, which "
                              "autoregressive decoding never forecasts. Fix: decoding='one_shot', or linear_skip=False")
        validate_revin_options(self.revin, self.revin_affine, self.revin_center)
        require_real("min_scale", self.min_scale, low=0, low_open=True)


class StepPrediction(NamedTuple):
    """Per-token forecasts ``[B, T, C_out]``: ``mean`` (point forecast), ``scale`` (Gaussian head, else None)."""

    mean: Tensor
    scale: Tensor | None


def _gaussian_nll(mean: Tensor, scale: Tensor, target: Tensor) -> Tensor:
    """The Gaussian head's training loss: the mean negative log-likelihood of ``target``."""
    return -torch.distributions.Normal(mean, scale).log_prob(target).mean()


class LogSparseTransformer(ForecastModel):
    """Decoder-only LogSparse Transformer; see the module docstring for tokens, decoding, variables and heads.

    ``forward(x [B, L, C_in], x_mark [B, L, F], y_mark [B, label_len + P, F]) -> [B, P, C_out]``
    (the point forecast). The Gaussian head adds :meth:`sample` and :meth:`quantiles`.
    :meth:`loss` is the model's own objective: the Gaussian likelihood, teacher forcing in
    autoregressive mode, or the given point loss over the one-shot horizon.
    """

    def __init__(self, spec: DataSpec, config: LogSparseConfig | None = None):
        super().__init__()
        config = config or LogSparseConfig()
        self.spec, self.config = spec, config
        independent = config.channels == "independent"
        self.layout = TokenLayout(spec, independent=independent, series_ids=config.series_embedding)
        d_model = config.d_model
        self.revin = (ReversibleInstanceNorm(spec.c_in, config.revin_affine, center=config.revin_center,
                                             start=spec.persistence)
                      if config.revin else None)
        self.value_embedding = nn.Linear(2 * self.layout.n_inputs, d_model)
        self.time_embedding = time_embedding(d_model, spec.n_time_features, spec.time_encoding,
                                             spec.time_feature_sizes, spec.n_known, spec.code_sizes)
        self.position_embedding = PositionalEmbedding(d_model)
        self.series_embedding = (
            nn.Embedding(spec.c_out, d_model) if self.layout.series_ids else None
        )
        self.dropout = Dropout(config.dropout)
        self.blocks = nn.ModuleList(
            PreNormCausalBlock(self._attention(), d_model, config.d_ff, config.dropout, config.activation)
            for _ in range(config.n_layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, self.layout.n_outputs * (2 if config.head == "gaussian" else 1))
        self.skip = LinearSkip(spec.seq_len, spec.pred_len) if config.linear_skip else None
        # Multiplies every Gaussian scale; 1 until calibrate_scale fits it on validation windows.
        self.register_buffer("scale_factor", torch.ones(()))
        # False runs the autoregressive rollout without its key/value cache (Rollout(cached=False)).
        self.kv_cache = True

    def _attention(self) -> MultiHeadAttention:
        c = self.config
        if c.attention == "full":
            inner: nn.Module = FullAttention(causal=True, dropout=c.dropout)
        else:
            inner = LogSparseAttention(c.local_window, c.sub_len, c.dropout, dense_reference=c.dense_reference)
        # No output dropout here: the block already drops the attention branch before the
        # residual sum, and a second dropout would drop it at 1 - (1 - p)^2 (0.19 for p = 0.1).
        return MultiHeadAttention(inner, c.d_model, c.n_heads, qk_kernel_size=c.qk_kernel_size)

    # -- network -----------------------------------------------------------------------------

    def _embed(
        self, lagged: Tensor, known: Tensor, marks: Tensor, series_ids: Tensor | None, first: int = 0
    ) -> Tensor:
        """Vectors ``[B', n, D]`` of the n tokens from position ``first``.

        ``lagged`` and ``known`` are ``[B', n, V]``, ``marks`` ``[B', n, F]``. The cached
        rollout embeds its one new token here too, summed in the full pass's order.
        """
        tokens = self.value_embedding(torch.cat([lagged * known, known], dim=-1))  # [B', n, D]
        steps = tokens.new_empty(1, first + tokens.shape[1], 0)  # the position embedding reads only a length
        tokens = tokens + self.time_embedding(marks) + self.position_embedding(steps)[:, first:]
        if series_ids is not None:
            tokens = tokens + self.series_embedding(series_ids).unsqueeze(1)  # [B', 1, D] over all n
        return tokens

    def _hidden(
        self, lagged: Tensor, known: Tensor, marks: Tensor, series_ids: Tensor | None, need_weights: bool = False
    ) -> tuple[Tensor, list[object]]:
        """Token states ``[B', T, D]`` after the final LayerNorm (and per-layer attention weights when asked)."""
        hidden = self.dropout(self._embed(lagged, known, marks, series_ids))  # [B', T, D]
        weights = []
        for block in self.blocks:
            hidden, layer_weights = block(hidden, need_weights)
            weights.append(layer_weights)
        return self.norm(hidden), weights

    def _head(self, hidden: Tensor) -> tuple[Tensor, Tensor | None]:
        """Mean ``[..., n_out]`` and scale (Gaussian head) or None of normed states ``[..., D]``."""
        out = self.head(hidden)  # [..., n_out] or [..., 2 * n_out]
        if self.config.head == "point":
            return out, None
        mean, raw_scale = out.chunk(2, dim=-1)  # 2 x [..., n_out]
        return mean, (F.softplus(raw_scale) + self.config.min_scale) * self.scale_factor

    def _predict(
        self, lagged: Tensor, known: Tensor, marks: Tensor, series_ids: Tensor | None
    ) -> tuple[Tensor, Tensor | None]:
        """Head outputs per token: mean ``[B', T, n_out]`` and scale (Gaussian head) or None."""
        hidden, _ = self._hidden(lagged, known, marks, series_ids)
        return self._head(hidden)

    def step_outputs(
        self, x: Tensor, x_mark: Tensor, y_mark: Tensor, future: Tensor | None = None
    ) -> StepPrediction:
        """One causal pass over all ``T = L + P`` tokens: the forecast of every step, ``[B, T, C_out]``.

        Position ``t`` forecasts step ``t`` (0-based over window then horizon) from
        values before it. Without ``future`` the horizon's values are placeholders (the
        one-shot forecast is ``mean[:, L:]``); with ``future [B, P, C_in]`` they are
        teacher-forced.
        """
        check_batch(self.spec, "LogSparseTransformer", x, x_mark, y_mark, future)
        stats, *tokens = self.layout.tokens(x, x_mark, y_mark, future, self.revin)
        mean, scale = self._predict(*tokens)
        if self.skip is not None:
            window = self.layout.rows(x if stats is None else self.revin.normalize(x, stats))  # [B', L, V]
            horizon = self.skip(window[..., window.shape[2] - self.layout.n_outputs:])  # [B', P, n_out]
            mean = torch.cat([mean[:, : x.shape[1]], mean[:, x.shape[1]:] + horizon], dim=1)  # [B', T, n_out]
        if scale is not None:
            scale = self.layout.merge(scale)
            scale = scale if stats is None else self.revin.denormalize_scale(scale, stats)
        return StepPrediction(self.layout.outputs(mean, stats, self.revin), scale)

    def attention_weights(self, x: Tensor, x_mark: Tensor, y_mark: Tensor) -> list[object]:
        """Per-layer attention weights over the one-shot token sequence (for plotting).

        Each entry is what the inner attention returns: ``LogSparseWeights`` (compact,
        ``to_dense()`` for small T), or dense ``[B', H, T, T]`` tensors for full attention
        and the dense reference. Rows are series in channel-independent mode (``B * C_out``).
        """
        check_batch(self.spec, "LogSparseTransformer", x, x_mark, y_mark)
        _, *tokens = self.layout.tokens(x, x_mark, y_mark, revin=self.revin)
        _, weights = self._hidden(*tokens, need_weights=True)
        return weights

    def forward(self, x: Tensor, x_mark: Tensor, y_mark: Tensor) -> Tensor:
        """Point forecast ``[B, P, C_out]`` (the Gaussian head's mean)."""
        if self.config.decoding == "one_shot":
            return self.step_outputs(x, x_mark, y_mark).mean[:, -self.spec.pred_len :]
        check_batch(self.spec, "LogSparseTransformer", x, x_mark, y_mark)
        return Rollout(self, cached=self.kv_cache).forecast(x, x_mark, y_mark)

    # -- training ----------------------------------------------------------------------------

    def loss(self, batch: Mapping[str, Tensor], loss_fn: Callable[[Tensor, Tensor], Tensor] = F.mse_loss) -> Tensor:
        """Scalar loss of a batch (x, y, x_mark, y_mark) on the standardized scale.

        Gaussian head: negative log-likelihood, ``loss_fn`` unused. Point head: ``loss_fn``.

        One-shot: the P horizon steps. Autoregressive: steps 1..L+P-1 teacher-forced
        (step 0 has no previous value), or with ``revin`` the P horizon steps teacher-forced:
        the window's own steps are normalized by statistics that include the very value each
        step forecasts (the normalized window sums to zero), a leak no horizon step has.
        """
        x, x_mark, y_mark = model_inputs(self.spec, batch)
        y = batch["y"]
        horizon = self.spec.pred_len
        future = y[:, y.shape[1] - horizon :]  # [B, P, C_in]
        first = x.shape[1]
        if self.config.decoding == "autoregressive":
            prediction = self.step_outputs(x, x_mark, y_mark, future=future)
            first = first if self.revin is not None else 1
        else:
            prediction = self.step_outputs(x, x_mark, y_mark)
        # The horizon's cells that fill_nan made up are left out; the window's own steps are all kept.
        target = torch.cat([x[:, first:, self.layout.n_exogenous :], observed_target(batch, self.spec.c_out, horizon)],
                           dim=1)  # [B, T - first, C_out]
        mean = prediction.mean[:, first:]  # [B, T - first, C_out]
        if prediction.scale is None:
            return observed_loss(loss_fn, mean, target=target)
        return observed_loss(_gaussian_nll, mean, prediction.scale[:, first:], target=target)

    # -- probabilistic forecasts -------------------------------------------------------------

    @property
    def own_objective(self) -> str | None:
        return "the Gaussian negative log-likelihood" if self.config.head == "gaussian" else None

    @property
    def probabilistic(self) -> bool:
        """Whether :meth:`sample` and :meth:`quantiles` are available (the Gaussian head)."""
        return self.config.head == "gaussian"

    @property
    def calibratable(self) -> bool:
        """Whether :meth:`calibrate_scale` applies: a one-shot Gaussian head."""
        return self.probabilistic and self.config.decoding == "one_shot"

    @property
    def correctable(self) -> bool:
        """Whether :meth:`fit_correction_weight` applies: ``revin`` with one-shot decoding (an autoregressive
        rollout feeds its forecasts back, so a weight on them would compound over the horizon)."""
        return self.revin is not None and self.config.decoding == "one_shot"

    def _require_gaussian(self, what: str) -> None:
        if not self.probabilistic:
            raise ConfigError(f"{what} needs a predictive distribution; build the model with head='gaussian'")

    @torch.no_grad()
    def calibrate_scale(self, batches: Iterable[Mapping[str, Tensor]], coverage: float = 0.8) -> float:
        """Fit :attr:`scale_factor` so that the central ``coverage`` interval covers that share of ``batches``.

        A likelihood-trained Gaussian is often too wide or too narrow on new windows. The
        factor is the ``coverage`` quantile of ``|target - mean| / scale`` over every
        horizon step of every window, divided by the standard normal's: on these windows
        the interval then covers exactly ``coverage``. Pass validation windows, never
        test ones. One-shot decoding only (the paths of autoregressive sampling compound
        the scale). Returns the factor.
        """
        self._require_gaussian("calibrate_scale")
        require_real("coverage", coverage, low=0, high=1, low_open=True, high_open=True)
        if self.config.decoding != "one_shot":
            raise ConfigError("calibrate_scale fits one-shot Gaussians; autoregressive sample paths compound the "
                              "scale over the horizon. Fix: decoding='one_shot', or leave the scale uncalibrated")
        self.scale_factor.fill_(1.0)
        horizon = self.spec.pred_len
        errors = []
        for batch in batches:
            prediction = self.step_outputs(*model_inputs(self.spec, batch))
            target = observed_target(batch, self.spec.c_out, horizon)  # [B, P, C_out]
            z = (target - prediction.mean[:, -horizon:]) / prediction.scale[:, -horizon:]
            errors.append(z.abs()[~z.isnan()])  # [N] the observed cells
        errors = torch.cat(errors)
        if errors.numel() == 0:
            raise ConfigError("calibrate_scale got no windows. Fix: pass the validation loader's batches")
        k = max(1, math.ceil(coverage * errors.numel()))
        factor = float(torch.kthvalue(errors, k).values) / NormalDist().inv_cdf((1 + coverage) / 2)
        self.scale_factor.fill_(factor)
        return factor

    def sample(
        self,
        x: Tensor,
        x_mark: Tensor,
        y_mark: Tensor,
        n_samples: int,
        generator: torch.Generator | None = None,
        chunk_size: int | None = None,
    ) -> Tensor:
        """Sample paths ``[S, B, P, C_out]`` on the standardized scale.

        Autoregressive: ancestral sampling, each path feeding back its own draws
        (``chunk_size`` paths at a time bounds memory; all at once by default).
        One-shot: independent draws per step from the predictive Gaussians. Each window
        draws from a stream of its own, seeded by one draw from ``generator`` (the global
        RNG when None) and the window's dates (:class:`~forecast.models.base.WindowDraws`):
        a generator in the same state gives a window the same paths in any batch, and a
        given seed reproduces them for the same ``chunk_size``. Dropout follows the module's
        mode (with the rollout's key/value cache, a token's dropout masks are drawn once,
        when it is computed) and draws from the global RNG.
        """
        self._require_gaussian("sample")
        require_int("n_samples", n_samples, 1)
        require_int("chunk_size", chunk_size, 1, optional=True)
        horizon = self.spec.pred_len
        if self.config.decoding == "one_shot":
            prediction = self.step_outputs(x, x_mark, y_mark)
            mean, scale = prediction.mean[:, -horizon:], prediction.scale[:, -horizon:]  # [B, P, C_out]
            draws = WindowDraws(self.spec, x, x_mark, y_mark, generator)
            return mean + scale * draws.normal(n_samples, horizon, self.spec.c_out)  # [S, B, P, C_out]
        check_batch(self.spec, "LogSparseTransformer", x, x_mark, y_mark)
        return Rollout(self, cached=self.kv_cache).paths(x, x_mark, y_mark, n_samples, generator, chunk_size)

    def quantiles(
        self,
        x: Tensor,
        x_mark: Tensor,
        y_mark: Tensor,
        levels: Sequence[float] = (0.1, 0.5, 0.9),
        n_samples: int = SAMPLE_PATHS,
        generator: torch.Generator | None = None,
        chunk_size: int | None = None,
    ) -> dict[float, Tensor]:
        """Quantile forecasts ``{level: [B, P, C_out]}`` on the standardized scale.

        One-shot: exact quantiles of each step's Gaussian (``n_samples`` unused).
        Autoregressive: empirical quantiles (linear interpolation) of ``n_samples``
        sample paths (``chunk_size`` as in :meth:`sample`). The caller un-scales; quantiles commute with the positive affine
        map ``value * scale + mean``.
        """
        checked = require_levels("levels", levels)
        self._require_gaussian("quantiles")
        if self.config.decoding == "one_shot":
            prediction = self.step_outputs(x, x_mark, y_mark)
            horizon = self.spec.pred_len
            mean, scale = prediction.mean[:, -horizon:], prediction.scale[:, -horizon:]  # [B, P, C_out]
            # The standard normal's quantile in double precision: float32's icdf is inf at 1 - 1e-8.
            return {level: mean + scale * NormalDist().inv_cdf(level) for level in checked}
        return path_quantiles(self.sample(x, x_mark, y_mark, n_samples, generator, chunk_size), checked)
