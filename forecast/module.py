"""ForecastModule: trains, validates, tests and predicts with ANY forecasting model.

It never imports a concrete model or dataset. It owns the loss, the optimizer and its
schedule, and the metrics; a ``WindowDataModule`` owns the data. Original-unit metrics
and forecasts use the fitted data state (:class:`~forecast.data.fitted.FittedState`) given
here or, when absent, the trainer's datamodule's (``datamodule.fitted``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Literal

import lightning as L
import pandas as pd
import torch
import torch.nn.functional as F
import torchmetrics
from torch import nn

from forecast.checks import require_choice, require_int, require_real
from forecast.data.datamodule import WindowDataModule
from forecast.data.fitted import FittedState
from forecast.errors import ConfigError, NonFiniteForecastError
from forecast.metrics import (
    DEFAULT_QUANTILES,
    ORIGINAL_UNITS_ONLY,
    MetricAccumulator,
    ProbabilisticAccumulator,
    report,
    scored_levels,
)
from forecast.models.base import (SAMPLE_PATHS, SAMPLE_SEED, ForecastModel, checked_forecast, model_inputs,
                                  observed_cells, observed_target)

logger = logging.getLogger(__name__)

LossName = Literal["mse", "mae", "huber"]
Schedule = Literal["halve", "cosine", "none"]

LOSSES = {
    "mse": F.mse_loss,
    "mae": F.l1_loss,
    "huber": F.huber_loss,
}
LR_SCHEDULES: tuple[str, ...] = ("halve", "cosine", "none")


def adam(parameters: Sequence[torch.nn.Parameter], learning_rate: float, weight_decay: float = 0.0, *,
         fused: bool = True) -> torch.optim.Adam:
    """The recipe's optimizer: Adam, with the fused kernel where the parameters' device has one (and ``fused``).

    The fused kernel updates every tensor in one pass, the same update to float rounding: a paper-size
    Informer's optimizer step takes 13 ms against 71 ms for the per-tensor loop on one CPU thread
    (benchmarks/README.md).
    """
    fused = fused and bool(parameters) and all(p.device.type in ("cpu", "cuda") for p in parameters)
    return torch.optim.Adam(parameters, lr=learning_rate, weight_decay=weight_decay, fused=fused or None)


class ForecastModule(L.LightningModule):
    """LightningModule around a :class:`~forecast.models.base.ForecastModel`.

    Args:
        model: the model; it trains on ``model.loss`` and is scored on ``forward`` (and on
            ``sample`` when ``model.probabilistic``).
        loss: training loss on the standardized scale, and the validation loss (early stopping, the
            best epoch). A model with its own objective (``model.own_objective``: LogSparse's Gaussian
            head trains on the negative log-likelihood) uses ``loss`` for the validation loss only.
        learning_rate: Adam's initial learning rate.
        lr_schedule: ``halve`` (Informer: x0.5 after every epoch), ``cosine`` over
            ``max_epochs``, or ``none``.
        weight_decay: Adam's L2 penalty.
        fitted: the fitted data state (scaler and variables) for metrics and forecasts in
            original units; default: the trainer's datamodule's.
        n_samples, sample_seed: for probabilistic models (``model.probabilistic``), the
            sample paths per window behind the test's rho-risks and interval coverages, drawn from a
            generator seeded afresh for every batch, each window from a stream of its own (so its
            quantiles do not depend on the batch it is in; ``predict`` draws them the same way,
            :class:`~forecast.predictor.Predictor`). A point forecast's rho-risks take it as every
            quantile; it has no interval to cover.
        quantiles: the levels ``predict`` gives (:attr:`quantile_levels`, read as the model forecasts,
            never fitted): the test scores each one's rho-risk and each central interval a pair of them
            bounds, beside the papers' R0.5, R0.9 and 80% coverage (:func:`~forecast.metrics.scored_levels`).
    """

    def __init__(
        self,
        model: ForecastModel,
        loss: LossName = "mse",
        learning_rate: float = 1e-4,
        lr_schedule: Schedule = "halve",
        weight_decay: float = 0.0,
        fitted: FittedState | None = None,
        n_samples: int = SAMPLE_PATHS,
        sample_seed: int = SAMPLE_SEED,
        quantiles: Sequence[float] = DEFAULT_QUANTILES,
    ):
        super().__init__()
        require_choice("loss", loss, tuple(LOSSES))
        require_choice("lr_schedule", lr_schedule, LR_SCHEDULES)
        require_real("learning_rate", learning_rate, low=0, low_open=True)
        require_real("weight_decay", weight_decay, low=0)
        require_int("n_samples", n_samples, 1)
        require_int("sample_seed", sample_seed)
        if not isinstance(model, ForecastModel):
            raise ConfigError(f"ForecastModule needs a forecast.models.ForecastModel, got {type(model).__name__}; "
                              "subclass ForecastModel (forward, and optionally loss, sample and quantiles)")
        self.save_hyperparameters(ignore=["model", "fitted", "quantiles"])
        self.model = model
        self.fitted = fitted
        self.loss_fn = LOSSES[loss]
        # NaN propagates ("disable"), as in val_mse/val_mae: torchmetrics' default would drop NaN
        # batch losses with a warning and score a partly diverged epoch on its finite windows
        # only, so early stopping and the best checkpoint could pick it. A NaN val_loss is never
        # the best, and EarlyStopping (check_finite) stops the run.
        self.val_loss = torchmetrics.MeanMetric(nan_strategy="disable")
        self.val_mse = torchmetrics.MeanSquaredError()
        self.val_mae = torchmetrics.MeanAbsoluteError()
        self.test_errors = nn.ModuleDict(
            {"standardized": MetricAccumulator(missing="skip"), "original": MetricAccumulator(missing="skip")})
        self.quantile_levels = quantiles  # builds test_quantiles
        self.test_report: pd.DataFrame | None = None
        self._predict_offset = 0
        self._predict_windows: list[int] | None = None

    # -- helpers ---------------------------------------------------------------------------

    @property
    def quantile_levels(self) -> tuple[float, ...]:
        """The quantile levels ``predict`` gives, and the test scores; set to forecast and score others."""
        return self._quantile_levels

    @quantile_levels.setter
    def quantile_levels(self, levels: Sequence[float]) -> None:
        self._quantile_levels = tuple(levels)
        self.test_quantiles = nn.ModuleDict({scale: self.quantile_accumulator()
                                             for scale in ("standardized", "original")})

    def quantile_accumulator(self, **shape: int) -> ProbabilisticAccumulator:
        """An empty accumulator of the rho-risks and coverages the test scores (``shape``: ``horizon``,
        ``n_variables``). A point forecast is scored as every quantile (no interval, so no coverage), as the DeepAR
        and LogSparse papers score their point baselines: its R0.5 is the normalized deviation sum|y - f| / sum|y|.
        """
        rhos, levels = scored_levels(self._quantile_levels)
        return ProbabilisticAccumulator(rhos, levels if self.model.probabilistic else (), missing="skip", **shape)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return checked_forecast(self.model, self.model(*model_inputs(self.model.spec, batch)))  # [B, P, C_out]

    def _target(self, batch: dict[str, torch.Tensor], pred: torch.Tensor) -> torch.Tensor:
        return observed_target(batch, pred.shape[2], pred.shape[1])  # [B, P, C_out], NaN where not observed

    def _fitted_state(self) -> FittedState | None:
        """The fitted data state: the one given, else the trainer's datamodule's (None without either)."""
        if self.fitted is not None or self._trainer is None:
            return self.fitted
        datamodule = self._trainer.datamodule
        return datamodule.fitted if isinstance(datamodule, WindowDataModule) else None

    def to_original(self, values: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """Un-standardize a batch's ``[..., B, P, C_out]`` values (a panel's by each window's series);
        ``None`` when no fitted data state is known."""
        fitted = self._fitted_state()
        if fitted is None:
            return None
        return fitted.to_original(values, batch["series"] if fitted.panel is not None else None)

    def setup(self, stage: str) -> None:
        """Shape the test accumulators ``[P, C_out]`` from the datamodule before the first batch.

        Under DDP the accumulators' states are summed across processes, which needs every
        process's states shaped alike even before (or without) a batch. Without a fitted
        data state (given or the datamodule's) they shape themselves on their first batch
        (fine on one process).
        """
        fitted = self._fitted_state()
        if fitted is None:
            return
        shape = dict(horizon=fitted.pred_len, n_variables=fitted.c_out)
        self.test_errors = nn.ModuleDict({
            scale: MetricAccumulator(metric.zeros, metric.eps, missing="skip", **shape)
            for scale, metric in self.test_errors.items()})
        self.test_quantiles = nn.ModuleDict({scale: self.quantile_accumulator(**shape)
                                             for scale in self.test_quantiles})

    # -- training ----------------------------------------------------------------------------

    def on_fit_start(self) -> None:
        # Said when training starts, not at construction: loading a saved run trains nothing.
        if self.model.own_objective is not None:
            logger.info("%s trains on %s; loss=%r sets only the validation loss (early stopping, the best epoch).",
                        type(self.model).__name__, self.model.own_objective, self.hparams.loss)
        spec = self.model.spec
        if not self.model.reads_other_inputs and spec.c_in > spec.c_out:
            unread = (f"{spec.c_in - spec.c_out} input(s)" if self.fitted is None else
                      repr(list(self.fitted.input_columns)[:spec.c_in - spec.c_out]))  # inputs end with the outputs
            logger.info("%s forecasts each output variable from its own past, so its other inputs, %s (features="
                        "'MS', or a panel's past_covariates), are not read.", type(self.model).__name__, unread)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.model.loss(batch, self.loss_fn)
        self.log("train_loss", loss, prog_bar=True, batch_size=batch["x"].shape[0])
        return loss

    def on_validation_epoch_start(self) -> None:
        # Fresh states: a previous `Trainer.validate` left them as inference-mode tensors,
        # which a later fit's (no_grad, not inference-mode) validation cannot update.
        for metric in (self.val_loss, self.val_mse, self.val_mae):
            metric.reset()

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        pred = self(batch)
        windows = pred.shape[0]
        pred, target = observed_cells(pred, target=self._target(batch, pred))
        if target.numel() > 0:  # else every value of these windows' horizons was made up by fill_nan
            # One entry per observed cell, so the epoch value is the mean over cells, not batches: MeanMetric
            # drops `weight` under nan_strategy="disable" (torchmetrics#3434), which made it a mean over batches.
            self.val_loss.update(self.loss_fn(pred, target).expand(target.numel()))
            # flattened with reshape: torchmetrics views its inputs, and slices are not contiguous
            self.val_mse.update(pred.reshape(-1), target.reshape(-1))
            self.val_mae.update(pred.reshape(-1), target.reshape(-1))
        self.log("val_loss", self.val_loss, prog_bar=True, batch_size=windows)
        self.log("val_mse", self.val_mse, batch_size=windows)
        self.log("val_mae", self.val_mae, batch_size=windows)

    def configure_optimizers(self):
        # Lightning refuses to clip the gradients of a fused optimizer under mixed precision (it would unscale them
        # itself), so a run that clips there takes the per-tensor loop.
        trainer = self._trainer
        clipped_in_mixed = (trainer is not None and bool(trainer.gradient_clip_val)
                            and str(trainer.precision).endswith("-mixed"))
        optimizer = adam([p for p in self.parameters() if p.requires_grad], self.hparams.learning_rate,
                         self.hparams.weight_decay, fused=not clipped_in_mixed)
        if self.hparams.lr_schedule == "halve":
            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: 0.5**epoch)
        elif self.hparams.lr_schedule == "cosine":
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
                optimizer, T_max=max(1, self.trainer.max_epochs or 1))
        else:
            return optimizer
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "epoch"}}

    # -- testing -----------------------------------------------------------------------------

    @property
    def probabilistic(self) -> bool:
        return self.model.probabilistic

    def on_test_epoch_start(self) -> None:
        for metric in (*self.test_errors.values(), *self.test_quantiles.values()):
            metric.reset()

    def drawn_quantiles(self, levels: Sequence[float], x: torch.Tensor, x_mark: torch.Tensor,
                        y_mark: torch.Tensor) -> dict[float, torch.Tensor]:
        """The model's quantiles ``{level: [B, P, C_out]}`` of a batch as the test and ``predict`` draw them:
        ``n_samples`` paths from a generator seeded afresh with ``sample_seed`` (each window from a stream of its
        own), so a window's quantiles are the same in any batch."""
        generator = torch.Generator(device=x.device).manual_seed(self.hparams.sample_seed)
        return self.model.quantiles(x, x_mark, y_mark, levels, self.hparams.n_samples, generator)

    def score_batch(self, batch: dict[str, torch.Tensor]
                    ) -> dict[str, tuple[torch.Tensor, torch.Tensor, dict[float, torch.Tensor]]]:
        """A test batch's ``(point forecast, target, quantile forecast {level: ...})``, each ``[B, P, C_out]``, on
        every scale it is scored on: ``standardized``, and ``original`` where the fitted state is known, whose
        target is the data's own values (``batch["truth"]``), NaN where ``fill_nan`` filled them: no truth on
        either scale, left out by the test's accumulators (``missing="skip"``)."""
        pred = self(batch)
        target = self._target(batch, pred)
        pred_orig = self.to_original(pred, batch)
        if self.probabilistic:
            # The quantiles predict() gives: exact where the model has them (the one-shot Gaussian head), else
            # those of n_samples paths (linear interpolation, the field's: the central 80% of S paths covers about
            # (S - 1) / (S + 1) of that, 78.4% at 100, of a calibrated forecast's truths).
            levels = self.test_quantiles["standardized"].needed_levels
            forecast = self.drawn_quantiles(levels, *model_inputs(self.model.spec, batch))
        else:  # the point forecast as every quantile
            forecast = dict.fromkeys(self.test_quantiles["standardized"].rhos, pred)
        scored = {"standardized": (pred, target, forecast)}
        if pred_orig is not None:
            # Quantiles commute with the positive affine un-scaling.
            forecast_orig = ({level: self.to_original(values, batch) for level, values in forecast.items()}
                             if self.probabilistic else dict.fromkeys(forecast, pred_orig))
            scored["original"] = (pred_orig, batch["truth"], forecast_orig)
        return scored

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        for scale, (pred, target, forecast) in self.score_batch(batch).items():
            self.test_errors[scale].update(pred, target)
            self.test_quantiles[scale].update(forecast, target)

    def on_test_epoch_end(self) -> None:
        """Log overall test metrics and keep the full report (per horizon and variable)."""
        summaries = {scale: errors.summary() for scale, errors in self.test_errors.items()
                     if errors.update_count > 0}
        if not math.isfinite(summaries["standardized"].overall["mse"]):
            raise NonFiniteForecastError(
                "the model's test forecasts are not all finite (NaN or inf), so no metric would mean anything. "
                "Fix: the training diverged or the inputs are extreme: check the data's scale, lower "
                "learning_rate, or train in float32."
            )
        for scale, quantiles in self.test_quantiles.items():
            if quantiles.update_count > 0:
                summaries[scale] = summaries[scale].combine(quantiles.summary())
        # The summaries are already synchronised across processes: the mean over them (sync_dist)
        # changes nothing and keeps Lightning from warning under DDP.
        for scale, summary in summaries.items():
            suffix = "" if scale == "standardized" else "_orig"
            for name, value in summary.overall.items():
                if scale == "original" or name not in ORIGINAL_UNITS_ONLY:
                    self.log(f"test_{name}{suffix}", value, sync_dist=True)
        self.log("test_windows", float(summaries["standardized"].n_windows), sync_dist=True)
        fitted = self._fitted_state()
        self.test_report = report(summaries, variables=list(fitted.output_columns) if fitted is not None else None)

    # -- prediction --------------------------------------------------------------------------

    def on_predict_epoch_start(self) -> None:
        self._predict_offset = 0
        self._predict_windows = self._served_windows()

    def _served_windows(self) -> list[int] | None:
        """The dataset indices the predict loader serves on this process, in order, if it says.

        One process: 0, 1, 2, ...; under DDP this process's share (every W-th window).
        """
        loader = self.trainer.predict_dataloaders
        # Lightning re-wraps the predict loader's batch sampler (to record indices) and leaves
        # `loader.sampler` a default SequentialSampler; the real one is the batch sampler's.
        sampler = getattr(getattr(loader, "batch_sampler", None), "sampler", None) or getattr(loader, "sampler", None)
        return [int(index) for index in sampler] if sampler is not None else None

    def predict_step(self, batch: dict[str, torch.Tensor], batch_idx: int,
                     dataloader_idx: int = 0) -> dict[str, object]:
        """Forecasts in original units (when statistics are known) with their window indices and timestamps.

        ``window``: the predict split's window index of each forecast; ``timestamps``
        ``[B, P]``: the datamodule's ``forecast_timestamps`` of those windows. Under DDP
        each process predicts its own share of the windows (every W-th one) and
        ``Trainer.predict`` returns that process's share only; ``window`` tells where
        each forecast belongs (docs/scaling.md).
        """
        pred = self(batch)
        out: dict[str, object] = {"forecast_standardized": pred}
        original = self.to_original(pred, batch)
        if original is not None:
            out["forecast"] = original
        windows = self._predict_windows
        if windows is not None:
            served = windows[self._predict_offset:self._predict_offset + pred.shape[0]]
            out["window"] = torch.tensor(served, dtype=torch.long)
            datamodule = self._trainer.datamodule if self._trainer else None
            if isinstance(datamodule, WindowDataModule):
                out["timestamps"] = datamodule.forecast_timestamps(datamodule.config.predict_split,
                                                                   windows=served)  # [B, P]
        self._predict_offset += pred.shape[0]
        return out
