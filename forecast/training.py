"""The training recipe shared by the Python API, the CLI and the experiment runner.

One place builds the Trainer (early stopping on validation loss, a checkpoint every
epoch), resumes a killed run from its last checkpoint, restores the best epoch's weights and
calibrates on the validation windows (:func:`fit_best`); :func:`test_windows` is the recipe's
test, kept apart so that fitting in Python does not score the test windows unasked
(``Forecaster.evaluate`` and the experiment runner call it; forecast.experiment writes the
results row). See docs/design.md.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import math
import os
import pickle
import random
import re
import signal
import subprocess
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import pandas as pd
import torch
from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch.accelerators import CPUAccelerator
from lightning.pytorch.callbacks import Callback, Checkpoint, EarlyStopping, EMAWeightAveraging, ModelCheckpoint, Timer
from lightning.pytorch.loggers import CSVLogger, Logger
from lightning.pytorch.profilers import Profiler
from lightning.pytorch.strategies.launchers import _MultiProcessingLauncher
from lightning.pytorch.trainer.states import RunningStage
from lightning.pytorch.utilities.exceptions import SIGTERMException
from lightning.pytorch.utilities.warnings import PossibleUserWarning

import forecast
from forecast.checks import require_bool, require_choice, require_int, require_real
from forecast.errors import ConfigError, NonFiniteForecastError
from forecast.machine import cpu_has_bf16
from forecast.models.base import SAMPLE_PATHS, ForecastModel
from forecast.module import LOSSES, LR_SCHEDULES

log = logging.getLogger(__name__)


# Lightning's precisions that cast the weights themselves ("64" is "64-true"; "32-true" is plain float32).
_CASTING_PRECISIONS = frozenset({"64", "64-true", "16-true", "bf16-true"})


@dataclass(frozen=True)
class TrainingConfig:
    """How to train: optimisation, schedule, stopping, hardware. Not part of any model.

    ``calibrate_correction`` and ``calibrate_scale`` are :func:`calibrate_on_validation`; the
    ``improved`` recipe turns both on. ``precision="bf16-mixed"`` and ``compile_model`` are measured in
    benchmarks/README.md: bf16 pays on CPUs with avx512_bf16 (on one without bf16 instructions it is
    several times slower, and the Trainer warns); compiling pays only for long LogSparse runs.

    Attributes:
        max_epochs: the most epochs to train (0: keep the initial weights).
        patience: stop after this many epochs without a lower validation loss.
        batch_size: training windows per batch.
        learning_rate: Adam's initial learning rate.
        lr_schedule: ``halve`` (Informer's: x0.5 after every epoch), ``cosine`` over ``max_epochs``,
            or ``none``.
        loss: the training and validation loss on the standardized scale: ``mse``, ``mae`` or
            ``huber`` (a model with its own likelihood trains on that, and validates on this).
        weight_decay: Adam's L2 penalty.
        seed: seeds Python, numpy and torch and the loader's shuffling.
        num_workers: DataLoader worker processes.
        accelerator: Lightning's accelerator (``auto``, ``cpu``, ``gpu``).
        devices: Lightning's devices (``auto``, a count, or a list of indices).
        strategy: Lightning's strategy (``ddp`` trains on several processes; docs/scaling.md).
        num_nodes: machines to train on, with a distributed strategy.
        precision: Lightning's precision (``bf16-mixed``: bf16 autocast). None: fp32.
        limit_train_batches: training batches per epoch: a positive count, or a fraction of them (at most 1).
            None: all. (``limit_val_batches`` and the other ``limit_*`` Trainer options are checked alike.)
        checkpoint_every_n_steps: also write ``last.ckpt`` every that many optimizer steps (with a run
            folder), so a run killed during a long epoch resumes close to where it died.
        checkpoint_every_minutes: also write ``last.ckpt`` every that many minutes of training.
            Minutes bound the loss on any machine; a step count does not (100 steps at ETTh1 ``S``
            720/168/24 take 34-50 minutes on two CPU cores, and a small fraction of that on a GPU).
        compile_model: compile the model's forward with ``torch.compile``.
        calibrate_scale: after training, fit the predictive scale of a model that can
            (``model.calibratable``) on the validation windows, so its 80% interval covers 80% there.
        calibrate_correction: after training, fit by least squares on the validation windows how
            much of the network's correction to the window's centre to keep (``model.correctable``:
            RevIN on; :meth:`~forecast.models.base.ForecastModel.fit_correction_weight`). Off: nothing
            is fitted or tested.
        correction_significance: keep that share only where the whole forecast beats the centre on
            the validation windows by a one-sided Diebold-Mariano test at this level (e.g. 0.05), and
            none otherwise; where the validation windows are one stretch (no more of them than the
            horizon's steps) the test is made on the longest prefix of the horizon that the validation
            period holds twice. None: keep the share untested.
        ema_decay: keep an exponential moving average of the weights, updated after every optimizer
            step (Lightning's ``EMAWeightAveraging``): validation, early stopping, the best checkpoint
            and the weights kept are the average's. None: no averaging.
        n_samples: the sample paths per window behind a probabilistic model's quantiles (``predict``'s
            columns, and the test's rho-risks and interval coverages); more paths give steadier quantiles at
            that many times the sampling cost. Applied after training: it changes what a run scores, not
            what it learns.
        extra_trainer_options: other ``lightning.Trainer`` arguments, passed on as given.
    """

    max_epochs: int = 6
    patience: int = 3
    batch_size: int = 32
    learning_rate: float = 1e-4
    lr_schedule: str = "halve"
    loss: str = "mse"
    weight_decay: float = 0.0
    seed: int = 0
    num_workers: int = 0
    accelerator: str = "auto"
    devices: int | str = "auto"
    strategy: str = "auto"
    num_nodes: int = 1
    precision: str | None = None
    limit_train_batches: float | int | None = None
    checkpoint_every_n_steps: int | None = None
    checkpoint_every_minutes: float | None = None
    compile_model: bool = False
    calibrate_scale: bool = False
    calibrate_correction: bool = False
    correction_significance: float | None = None
    ema_decay: float | None = None
    n_samples: int = SAMPLE_PATHS
    extra_trainer_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, minimum in (("max_epochs", 0), ("patience", 1), ("batch_size", 1), ("seed", 0),
                              ("num_workers", 0), ("num_nodes", 1), ("n_samples", 1)):
            require_int(name, getattr(self, name), minimum)
        require_real("learning_rate", self.learning_rate, low=0, low_open=True)
        require_real("weight_decay", self.weight_decay, low=0)
        require_choice("loss", self.loss, tuple(LOSSES))
        require_choice("lr_schedule", self.lr_schedule, LR_SCHEDULES)
        if not isinstance(self.strategy, str) or not self.strategy:
            raise ConfigError(f"strategy={self.strategy!r}; Fix: a Lightning strategy name such as 'auto' or 'ddp'.")
        require_bool("compile_model", self.compile_model)
        require_bool("calibrate_scale", self.calibrate_scale)
        require_bool("calibrate_correction", self.calibrate_correction)
        if self.correction_significance is not None:
            require_real("correction_significance", self.correction_significance, low=0, high=0.5, low_open=True,
                         high_open=True, hint="None: keep the least-squares share untested; e.g. 0.05")
        if self.ema_decay is not None:
            require_real("ema_decay", self.ema_decay, low=0, high=1, low_open=True, high_open=True,
                         hint="None: no weight averaging; e.g. 0.99 averages over about the last 100 steps")
        require_int("checkpoint_every_n_steps", self.checkpoint_every_n_steps, 1, optional=True,
                    hint="None: a checkpoint per epoch only")
        if self.checkpoint_every_minutes is not None:
            require_real("checkpoint_every_minutes", self.checkpoint_every_minutes, low=0, low_open=True,
                         hint="None: a checkpoint per epoch only")
        if not isinstance(self.extra_trainer_options, dict):
            raise ConfigError(f"extra_trainer_options must be a dict of lightning.Trainer arguments, "
                              f"got extra_trainer_options={self.extra_trainer_options!r}")
        if str(self.precision) in _CASTING_PRECISIONS:  # Lightning casts the batches it feeds, not the package's own
            raise ConfigError(f"precision={self.precision!r} casts the weights themselves, and calibration and "
                              "predict feed the model float32 windows. Fix: precision='bf16-mixed' (autocast, the "
                              "weights in float32) or leave it unset.")
        for name in ("limit_train_batches", "limit_val_batches", "limit_test_batches", "limit_predict_batches"):
            limit = self.limit_train_batches if name == "limit_train_batches" else self.extra_trainer_options.get(name)
            # Lightning refuses these only as it builds the Trainer, in a message naming the device settings.
            if (isinstance(limit, (int, float)) and not isinstance(limit, bool)
                    and not (limit >= 0 and (limit <= 1 or float(limit).is_integer()))):
                raise ConfigError(
                    f"{name}={limit!r} is neither a number of batches nor a fraction of them. Fix: {name}= a "
                    "positive number of batches or a fraction (e.g. 0.25), or leave it out."
                )
        limit = self.limit_train_batches
        if isinstance(limit, (int, float)) and not isinstance(limit, bool) and limit == 0:  # Lightning's way to skip
            raise ConfigError(
                f"limit_train_batches={limit!r} trains on no batch, and the untrained weights would be saved as the "
                "best epoch's. Fix: limit_train_batches= a positive number of batches or a fraction (e.g. 0.25), "
                "or leave it out; max_epochs=0 keeps a model's initial weights on purpose."
            )
        limit = self.extra_trainer_options.get("limit_val_batches")
        # Lightning would fail only at the first epoch's end, in the early stopping the recipe always adds.
        if isinstance(limit, (int, float)) and not isinstance(limit, bool) and limit == 0:
            raise ConfigError(
                f"limit_val_batches={limit!r} runs no validation, but training stops early on the validation loss "
                "and keeps the weights of the epoch where it was lowest. Fix: limit_val_batches= a positive number "
                "of batches or a fraction (e.g. 0.25), or leave it out."
            )
        every = self.extra_trainer_options.get("check_val_every_n_epoch")
        # Lightning would train without validating once: the last weights kept, the history all NaN.
        if (isinstance(every, int) and not isinstance(every, bool) and self.max_epochs > 0
                and every > self.max_epochs):
            raise ConfigError(
                f"check_val_every_n_epoch={every} with max_epochs={self.max_epochs} never validates, but training "
                "stops early on the validation loss and keeps the weights of the epoch with the lowest validation "
                f"loss. Fix: check_val_every_n_epoch= at most {self.max_epochs} (1 validates every epoch), or "
                f"max_epochs= at least {every}, or leave it out."
            )


class ConstantsKeptEMA(EMAWeightAveraging):
    """Lightning's :class:`~lightning.pytorch.callbacks.EMAWeightAveraging`, a model's non-persistent buffers
    left as built: they are constants it derives (Informer's position table), never saved, and Lightning
    averages and swaps every buffer, so their average drifted from them by float rounding (2e-7) and a fitted
    model forecast other digits than its weights saved and loaded. (Lightning's swap and copy are private
    methods; the pinned version's are wrapped.)"""

    @property
    def state_key(self) -> str:
        return EMAWeightAveraging.__qualname__  # the key its checkpoints were written under: they resume alike

    def _swap_models(self, pl_module: L.LightningModule) -> None:
        constants = _constant_buffers(pl_module)
        super()._swap_models(pl_module)
        _restore(constants)

    def _copy_average_to_current(self, pl_module: L.LightningModule) -> None:
        constants = _constant_buffers(pl_module)
        super()._copy_average_to_current(pl_module)
        _restore(constants)


def _constant_buffers(module: torch.nn.Module) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each non-persistent buffer of ``module`` with a copy of its value."""
    return [(buffer, buffer.clone()) for owner in module.modules()
            for name, buffer in owner.named_buffers(recurse=False) if name in owner._non_persistent_buffers_set]


def _restore(constants: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    with torch.no_grad():
        for buffer, value in constants:
            buffer.copy_(value)


class StopKeptEarlyStopping(EarlyStopping):
    """Lightning's :class:`~lightning.pytorch.callbacks.EarlyStopping`, whose stop survives a checkpoint.

    Lightning saves why a run stopped, but a fit resumed from that checkpoint trains on: a run killed after it
    stopped early (while calibrating or testing) would, run again, train past its stop and record other
    weights. Resumed from a stopped run, it ends the fit before any epoch, as the uninterrupted run ended.
    """

    @property
    def state_key(self) -> str:  # Lightning's: checkpoints written with either class resume with the other
        return EarlyStopping.__qualname__ + super().state_key.removeprefix(type(self).__qualname__)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.stopped_epoch > 0:  # restored from a run that stopped (as EpochLog reads it)
            trainer.should_stop = True


class TrainTimer(Timer):
    """Lightning's :class:`~lightning.pytorch.callbacks.Timer` without a limit: the seconds spent in fit,
    carried through checkpoints so resumed runs add up (a mid-epoch checkpoint holds the time up to it).

    It keeps the state key and reads the state of the clock it replaced, so a run checkpointed by that
    one resumes its time instead of starting from zero.
    """

    def __init__(self) -> None:
        super().__init__(verbose=False)

    @property
    def state_key(self) -> str:
        return "TrainClock"

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if "seconds" in state_dict:  # written before Lightning's Timer kept the time
            state_dict = {"time_elapsed": {RunningStage.TRAINING.value: float(state_dict["seconds"])}}
        super().load_state_dict(state_dict)


class EpochLog(Callback):
    """Feedback while training: one INFO line per epoch and a history that survives resumption.

    Each epoch logs its mean training loss (over windows), validation loss (NaN for an epoch
    that ran no validation, e.g. under ``check_val_every_n_epoch``), learning rate and
    seconds, and marks a new best validation loss; early stopping logs why it stopped.
    :meth:`frame` is the history, one row per epoch; it is saved in checkpoints with the running
    epoch's sums, so a run resumed midway through an epoch keeps the epochs it trained before and
    that epoch's loss over all its steps (its seconds: those before the checkpoint and since the
    resume). Under DDP the training loss is over every process's windows (the steps before a mid-epoch
    checkpoint: the first process's, whose sums the checkpoint holds).
    """

    def __init__(self, timer: Callable[[], float] = time.perf_counter) -> None:
        self.epochs: list[dict[str, float]] = []
        self._timer = timer
        self._started = 0.0
        self._loss_sum: float | torch.Tensor = 0.0
        self._windows = 0.0
        self._learning_rate = math.nan
        self._val_loss = math.nan
        self._resumed: dict[str, float] | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # A run resumed mid-epoch gets no on_train_epoch_start for that epoch: its sums continue here. (Resumed
        # at an epoch's end, on_train_epoch_start follows and starts the next epoch afresh.)
        self.on_train_epoch_start(trainer, pl_module)
        if self._resumed is not None:
            running, self._resumed = self._resumed, None
            if trainer.is_global_zero:  # the sums of the process that saved them, which the epoch's end adds up
                self._loss_sum, self._windows = running["loss_sum"], running["windows"]
            self._learning_rate = running["learning_rate"]
            self._val_loss = running.get("val_loss", math.nan)  # absent in checkpoints written before it was kept
            self._started -= running["seconds"]

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._started, self._loss_sum, self._windows, self._val_loss = self._timer(), 0.0, 0.0, math.nan
        # Read now: the epoch's scheduler step comes before on_train_epoch_end.
        self._learning_rate = float(trainer.optimizers[0].param_groups[0]["lr"]) if trainer.optimizers else math.nan

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        if isinstance(loss, torch.Tensor):
            windows = float(batch["x"].shape[0])
            # Summed where the loss lives: float() here would wait for the device at every step.
            self._loss_sum = self._loss_sum + loss.detach() * windows
            self._windows += windows

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Taken here, not from callback_metrics at the epoch's end: Lightning keeps the last value logged
        # there, so an epoch without validation would show the one before it as its own.
        val_loss = trainer.callback_metrics.get("val_loss")
        if not trainer.sanity_checking and val_loss is not None:
            self._val_loss = float(val_loss)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        loss_sum, windows = float(self._loss_sum), self._windows
        if trainer.world_size > 1:  # each process trained its share of the windows
            sums = torch.tensor([loss_sum, windows], dtype=torch.float64, device=pl_module.device)
            loss_sum, windows = trainer.strategy.reduce(sums, reduce_op="sum").tolist()
        record = {
            "epoch": trainer.current_epoch,
            "train_loss": loss_sum / windows if windows else float("nan"),
            "val_loss": self._val_loss,
            "learning_rate": self._learning_rate,
            "seconds": self._timer() - self._started,
        }
        previous = [epoch["val_loss"] for epoch in self.epochs if math.isfinite(epoch["val_loss"])]
        best = math.isfinite(record["val_loss"]) and all(record["val_loss"] < value for value in previous)
        self.epochs.append(record)
        if trainer.is_global_zero:
            log.info("epoch %d: train_loss %.4f, val_loss %.4f%s, lr %.3g, %.1f s", record["epoch"],
                     record["train_loss"], record["val_loss"], " (best so far)" if best else "",
                     record["learning_rate"], record["seconds"])

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        stopper = next((cb for cb in trainer.callbacks if isinstance(cb, EarlyStopping)), None)
        if trainer.is_global_zero and stopper is not None and stopper.stopped_epoch > 0:
            log.info("early stopping after epoch %d: val_loss has not improved on %.4f for %d epochs",
                     stopper.stopped_epoch, float(stopper.best_score), stopper.patience)

    def frame(self) -> pd.DataFrame:
        """One row per epoch: ``epoch``, ``train_loss``, ``val_loss``, ``learning_rate``, ``seconds``."""
        return pd.DataFrame(self.epochs, columns=["epoch", "train_loss", "val_loss", "learning_rate", "seconds"])

    def state_dict(self) -> dict[str, Any]:
        running = {"loss_sum": float(self._loss_sum), "windows": self._windows, "learning_rate": self._learning_rate,
                   "val_loss": self._val_loss, "seconds": self._timer() - self._started}
        return {"epochs": [dict(epoch) for epoch in self.epochs], "running": running}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.epochs = [dict(epoch) for epoch in state_dict.get("epochs", [])]
        self._resumed = state_dict.get("running")  # absent in checkpoints written before it was kept


def _numpy_state_to_torch(state: tuple) -> dict[str, Any]:
    name, keys, position, has_gauss, cached_gaussian = state
    return {"name": name, "keys": torch.from_numpy(keys.astype(np.int64)), "position": int(position),
            "has_gauss": int(has_gauss), "cached_gaussian": float(cached_gaussian)}


def _numpy_state_from_torch(state: dict[str, Any]) -> tuple:
    keys = state["keys"].numpy().astype(np.uint32)
    return state["name"], keys, state["position"], state["has_gauss"], state["cached_gaussian"]


class CompileModel(Callback):
    """Compiles the LightningModule's ``model`` in place (``nn.Module.compile``), so its
    state_dict keys, checkpoints and saved weights stay those of the plain model."""

    def __init__(self, backend: str = "inductor") -> None:
        self.backend = backend

    def setup(self, trainer, pl_module, stage: str) -> None:
        pl_module.model.compile(backend=self.backend)


class RandomStateCheckpoint(Callback):
    """Saves the global random states (torch, CUDA, numpy, Python) in checkpoints and restores them on resume.

    Dropout draws from torch's global generator; without this a resumed run would draw
    other masks than the run it continues. The states are those of the process that
    writes the checkpoint (rank 0); under DDP every process restores them (processes are
    seeded alike and draw as many numbers per step, so their states agree). Stored as
    tensors and plain numbers, so checkpoints stay loadable with ``weights_only=True``.
    """

    def __init__(self) -> None:
        self._pending: dict[str, Any] | None = None

    def state_dict(self) -> dict[str, Any]:
        version, python_state, gauss = random.getstate()
        return {
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "numpy": _numpy_state_to_torch(np.random.get_state()),
            "python": {"version": version, "state": list(python_state), "gauss": gauss},
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # Applied when training starts: nothing between restoring and the first batch may draw.
        self._pending = state_dict

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        state, self._pending = self._pending, None
        if state is None:
            return
        torch.set_rng_state(state["torch"])
        if state["cuda"] and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(state["cuda"])
        np.random.set_state(_numpy_state_from_torch(state["numpy"]))
        python = state["python"]
        random.setstate((python["version"], tuple(python["state"]), python["gauss"]))


class SigtermCheckpoint(Callback):
    """Writes ``last.ckpt`` when a SIGTERM stops training, so the run resumes from that very step.

    After a SIGTERM, Lightning finishes the current training step and raises
    ``SIGTERMException``; without this the run would lose every step since its last
    periodic checkpoint.
    Only a stop between two training steps is saved: that state is the one the periodic
    checkpoints hold. A stop during validation leaves ``last.ckpt`` as it is: the one
    :class:`PreValidationCheckpoint` wrote a step before.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        if not (isinstance(exception, SIGTERMException) and trainer.training and not trainer.sanity_checking):
            return
        if trainer.world_size > 1:
            # Saving waits for every process, and Lightning stops them at different steps: both would hang.
            log.info("stopped by SIGTERM after step %d; the run resumes from its last checkpoint, %s (with several "
                     "processes the stop is not saved)", trainer.global_step, self.path)
            return
        trainer.save_checkpoint(self.path, weights_only=False)  # the full state: a checkpoint to resume
        log.info("stopped by SIGTERM after step %d; saved %s", trainer.global_step, self.path)


class PreValidationCheckpoint(Callback):
    """Writes ``last.ckpt`` one training step before each epoch's end, so that a run killed while it
    validates (SIGKILL, or SIGTERM, which :class:`SigtermCheckpoint` cannot save then) redoes that one
    step instead of everything since its last periodic checkpoint. Validating every window takes minutes
    on a CPU: about 8 of the 38 minutes of an epoch of the grid's Informer at weather 192 (5,079 windows,
    one thread, three other runs beside it).

    Not after the last step itself: Lightning 2.6 resumes a checkpoint saved there as an epoch whose
    training is done and skips that epoch's validation, with its early-stopping and best-checkpoint
    decisions. From the step before, the resumed run trains the last step and validates as usual.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        batches = trainer.num_training_batches
        if math.isfinite(batches) and batches >= 2 and batch_idx == batches - 2:
            trainer.save_checkpoint(self.path, weights_only=False)


class RunCheckpoint(ModelCheckpoint):
    """The run directory's ModelCheckpoint, which resumes a run directory that was moved or copied.

    A checkpoint stores the absolute paths of its directory and of the best checkpoints. Resumed
    from another directory (a run copied from scratch space, or the tests' copy of a killed
    sweep), Lightning's ModelCheckpoint warns "The dirpath has changed" and forgets the best
    score: the next epoch becomes the best however bad, and ``best_model_path`` points into the
    old directory. Here the paths under the old directory are read from the new one instead,
    when the best checkpoint is there, so the resumed run keeps its best score and restores
    the best weights from its own directory. Its ``state_key`` stays Lightning's
    ``ModelCheckpoint{...}``: checkpoints written with either class resume with the other.
    """

    @property
    def state_key(self) -> str:
        return ModelCheckpoint.__qualname__ + super().state_key.removeprefix(type(self).__qualname__)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        old = state_dict.get("dirpath")
        if isinstance(old, str) and isinstance(self.dirpath, str) and old != self.dirpath:
            moved = _relocated_checkpoint_state(state_dict, old, self.dirpath)
            best = moved.get("best_model_path")
            if not best or Path(best).is_file():
                log.info("the checkpoints moved from %s to %s; resuming with their paths in the new place",
                         old, self.dirpath)
                state_dict = moved
        if isinstance(self.dirpath, str):
            state_dict = _checkpoints_inside(state_dict, self.dirpath)
        super().load_state_dict(state_dict)


class PeriodicCheckpoint(RunCheckpoint):
    """The run's checkpoint every n steps or every m minutes, never at an epoch's last step: saved there it would
    replace :class:`PreValidationCheckpoint`'s, and a run killed while it validates would resume that epoch as
    validated. A time trigger due then fires at the next step."""

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if batch_idx + 1 != trainer.num_training_batches:  # the same step on every process
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)


def _checkpoints_inside(state: dict[str, Any], directory: str) -> dict[str, Any]:
    """``state`` (ModelCheckpoint's) without the paths that are not ``.ckpt`` files in ``directory`` itself.

    Lightning deletes the checkpoints a better one displaces, by the paths the resumed state names, and reads the
    best weights from its ``best_model_path``: a checkpoint copied from elsewhere, or crafted (plain data passes
    ``weights_only=True``), could name any file (``checkpoints/../../notes.txt``) to be deleted or read.
    """
    home = os.path.normpath(os.path.abspath(directory))

    def inside(path: Any) -> bool:
        return (isinstance(path, str) and path.endswith(".ckpt")
                and os.path.dirname(os.path.normpath(os.path.abspath(path))) == home)

    kept = dict(state)
    for name in ("best_model_path", "kth_best_model_path", "last_model_path"):
        if name in kept and kept[name] and not inside(kept[name]):
            log.warning("the checkpoint's %s %r is not a checkpoint in %s: left out", name, kept[name], directory)
            kept[name] = ""
    if isinstance(kept.get("best_k_models"), dict):
        outside = [path for path in kept["best_k_models"] if not inside(path)]
        if outside:
            log.warning("the checkpoint's best_k_models %r are not checkpoints in %s: left out", outside, directory)
        kept["best_k_models"] = {path: score for path, score in kept["best_k_models"].items() if inside(path)}
    return kept


def _relocated_checkpoint_state(state: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """``state`` (ModelCheckpoint's) with the paths of files in directory ``old`` moved into ``new``."""

    def move(path: Any) -> Any:
        if isinstance(path, str) and path and os.path.dirname(path) == old:
            return os.path.join(new, os.path.basename(path))
        return path

    moved = dict(state, dirpath=new)
    for name in ("best_model_path", "kth_best_model_path", "last_model_path"):
        if name in moved:
            moved[name] = move(moved[name])
    if isinstance(moved.get("best_k_models"), dict):
        moved["best_k_models"] = {move(path): score for path, score in moved["best_k_models"].items()}
    return moved


SIGTERM_EXIT_STATUS = 128 + signal.SIGTERM  # what a shell reports for a process that SIGTERM ended


def stopped_by_sigterm(stop: SystemExit) -> bool:
    """Whether ``stop`` is Lightning's stop after a SIGTERM (its ``SIGTERMException``).

    That exception is a ``SystemExit`` without a code: a command that lets it through exits
    with status 0 as if its run had finished, and a ``set -e`` script or a scheduler goes on
    to the next run. The ``forecast`` commands catch it and exit
    with :data:`SIGTERM_EXIT_STATUS` instead; the same command then resumes the run.
    """
    return isinstance(stop, SIGTERMException)


def build_trainer(config: TrainingConfig, run_dir: str | os.PathLike | None,
                  callbacks: list[Callback] | None = None, *, train_batches: int | None = None,
                  **overrides: Any) -> L.Trainer:
    """A Trainer with early stopping and per-epoch checkpoints under ``run_dir``.

    Checkpoints: ``best-epoch=N.ckpt`` (lowest ``val_loss``) and ``last.ckpt`` after every
    epoch, and also every ``config.checkpoint_every_n_steps`` optimizer steps and every
    ``config.checkpoint_every_minutes`` of training (whichever are set). They hold
    the global random states (:class:`RandomStateCheckpoint`) and the training loader's
    position, so a killed run resumed from ``last.ckpt`` continues as if uninterrupted. A
    run stopped by SIGTERM also writes ``last.ckpt`` at the step it stopped after
    (:class:`SigtermCheckpoint`), and every epoch writes it once more a step before its
    validation (:class:`PreValidationCheckpoint`).
    Every epoch logs one INFO line and adds a row to the history (:class:`EpochLog`).
    The curves go to ``run_dir/lightning_logs/version_N/metrics.csv`` (pass ``logger=`` for
    another). Without ``run_dir`` nothing is written (no checkpoints, no logs): for tests and
    quick in-memory fits. ``train_batches`` (the training loader's length, when known) lowers
    Lightning's logging interval of 50 steps to an epoch's batches per process
    (:func:`log_interval`), so that an epoch shorter than 50 steps still logs ``train_loss``.
    """
    callbacks = list(callbacks or [])
    if config.ema_decay is not None:
        # First: it swaps the averaged weights in before any other callback sees a validation epoch.
        callbacks.insert(0, ConstantsKeptEMA(decay=config.ema_decay))
    callbacks.append(StopKeptEarlyStopping(monitor="val_loss", patience=config.patience, mode="min"))
    callbacks.append(EpochLog())
    callbacks.append(KeyboardInterruptKept())
    if config.compile_model:
        callbacks.append(CompileModel())
    if run_dir is not None:
        directory = Path(run_dir) / "checkpoints"
        # No version counter: these callbacks all write last.ckpt, and a resumed run overwrites its files.
        # First in the list: Lightning's checkpoint_callback, whose best checkpoint fit restores and
        # test(ckpt_path="best") loads, is the first ModelCheckpoint, and a user's own must not be it.
        callbacks.insert(0, RunCheckpoint(
            dirpath=directory, filename="best-{epoch}",
            monitor="val_loss", mode="min", save_top_k=1, save_last=True, enable_version_counter=False,
        ))
        # One callback per trigger: Lightning takes one trigger per ModelCheckpoint. The time one is
        # Lightning's own timer: rank 0 decides and broadcasts, so processes never disagree.
        minutes = config.checkpoint_every_minutes
        triggers = {"every_n_train_steps": config.checkpoint_every_n_steps,
                    "train_time_interval": timedelta(minutes=minutes) if minutes is not None else None}
        for trigger, every in triggers.items():
            if every is not None:
                callbacks.append(PeriodicCheckpoint(dirpath=directory, save_top_k=0, save_last=True,
                                                    enable_version_counter=False, **{trigger: every}))
        callbacks.append(RandomStateCheckpoint())
        callbacks.append(PreValidationCheckpoint(directory / "last.ckpt"))
        callbacks.append(SigtermCheckpoint(directory / "last.ckpt"))
    options: dict[str, Any] = dict(
        max_epochs=config.max_epochs,
        accelerator=config.accelerator,
        devices=config.devices,
        strategy=config.strategy,
        num_nodes=config.num_nodes,
        callbacks=callbacks,
        default_root_dir=str(run_dir) if run_dir is not None else None,
        # A user's own ModelCheckpoint needs it on, also without a run folder (Lightning refuses the pair otherwise).
        enable_checkpointing=run_dir is not None or any(isinstance(callback, Checkpoint) for callback in callbacks),
        # Named, not Lightning's default, which turns into TensorBoard once the tensorboard
        # extra is installed: the same run writes lightning_logs/version_N/metrics.csv anywhere.
        logger=CSVLogger(run_dir) if run_dir is not None else False,
        deterministic=False,
    )
    if config.precision is not None:
        options["precision"] = config.precision
    if config.limit_train_batches is not None:
        options["limit_train_batches"] = config.limit_train_batches
    options.update({name: _built_trainer_option(name, value) for name, value in config.extra_trainer_options.items()})
    options.update(overrides)
    try:
        trainer = L.Trainer(**options)
    except (MisconfigurationException, ValueError, TypeError, ImportError) as error:
        # Lightning checks accelerator, devices, strategy and precision here (ImportError: one needs a package
        # that is not installed, as the TPU accelerator needs torch_xla); say which setting.
        chosen = {name: options.get(name) for name in ("accelerator", "devices", "strategy", "num_nodes",
                                                        "precision") if name in options}
        extra = f" and Trainer options {sorted(config.extra_trainer_options)}" if config.extra_trainer_options else ""
        raise ConfigError(f"Lightning refuses the training settings {chosen}{extra}: {error} Fix: change the "
                          "setting it names (see lightning.Trainer's documentation).") from error
    if isinstance(trainer.strategy.launcher, _MultiProcessingLauncher):
        raise ConfigError(f"strategy={config.strategy!r} trains in processes it starts from this one, and fit "
                          "cannot take the trained run back from them (its history, best epoch and test report). Fix: "
                          "strategy='ddp' from a script (python train.py), which starts the other processes itself.")
    if "bf16" in str(trainer.precision) and isinstance(trainer.accelerator, CPUAccelerator) and not cpu_has_bf16():
        log.warning("precision=%s on a CPU without bf16 instructions (oneDNN reports none: no AVX-512 or AMX): "
                    "bf16 matrix products are emulated there, 7-140 times slower than fp32 (benchmarks/README.md, "
                    "\"bf16 on a CPU without bf16\"). Fix: leave precision unset (fp32) on this machine.",
                    trainer.precision)
    if train_batches is not None and options.get("log_every_n_steps") is None and trainer.log_every_n_steps > 0:
        # Set after construction: the number of processes is known once Lightning resolved the devices.
        trainer.log_every_n_steps = log_interval(train_batches, trainer.world_size, config.limit_train_batches,
                                                 trainer.log_every_n_steps)
    return trainer


# Trainer arguments a config may give as a class to build ({class_path, init_args}, as jsonargparse parses
# `--trainer.logger CSVLogger --trainer.logger.save_dir logs`), with the base class it must extend.
_BUILT_FROM_CLASS_PATH = {"logger": Logger, "profiler": Profiler}


def _built_trainer_option(name: str, value: Any) -> Any:
    """A Trainer argument as Lightning takes it: a logger or profiler given by its class path built (a subclass of
    Lightning's base class only); ConfigError for another class path, which Lightning would keep as a dict and fail
    on at the end of training."""
    if not (isinstance(value, dict) and "class_path" in value) and not (name == "logger" and isinstance(value, str)):
        return value
    base = _BUILT_FROM_CLASS_PATH.get(name)
    path = value["class_path"] if isinstance(value, dict) else value
    module_name, _, class_name = str(path).rpartition(".")
    try:
        built = getattr(importlib.import_module(module_name), class_name) if module_name else None
    except (ImportError, AttributeError):
        built = None
    if base is None or not (isinstance(built, type) and issubclass(built, base)):
        fix = (f"a class path of a {base.__module__}.{base.__name__} subclass, e.g. "
               "lightning.pytorch.loggers.CSVLogger" if base is not None else "set it from Python, where the "
               f"Trainer takes the object: Forecaster(..., {name}=...)")
        raise ConfigError(f"Trainer option {name}={value!r} is not a class this package builds from a config. Fix: "
                          f"{fix}.")
    try:
        return built(**dict(value.get("init_args") or {})) if isinstance(value, dict) else built()
    except TypeError as error:
        raise ConfigError(f"Trainer option {name}={value!r}: {built.__name__} refuses its init_args ({error}). Fix: "
                          f"give the arguments {built.__name__} takes.") from None


def placement(config: TrainingConfig) -> torch.device:
    """The device a scoring trainer of ``config`` runs the model on (one process's), as evaluation resolves it:
    ``accelerator='auto'`` a GPU where there is one. ConfigError names a setting Lightning refuses."""
    with lightning_messages(False):
        return build_trainer(config, None, enable_progress_bar=False, enable_model_summary=False).strategy.root_device


def log_interval(train_batches: int, processes: int = 1, limit_train_batches: float | int | None = None,
                 default: int = 50) -> int:
    """Lightning's ``log_every_n_steps`` for an epoch of ``train_batches`` batches: at most one epoch.

    Lightning logs the training loss every ``default`` (50) steps and warns when an epoch has
    fewer batches; a small data set then writes ``train_loss`` once every few epochs, if at
    all. The interval is lowered to a lower bound of the batches one process trains per epoch
    (its share under DDP, cut by ``limit_train_batches``), so every epoch logs at least once;
    epochs of 50 batches or more keep Lightning's interval.
    """
    batches = max(1, train_batches // max(1, processes))
    if isinstance(limit_train_batches, int):
        batches = min(batches, limit_train_batches)
    elif isinstance(limit_train_batches, float):
        batches = int(batches * limit_train_batches)
    return max(1, min(default, batches))


RESUME_FIX = "delete it and resume from another checkpoint, or train from scratch (resume=False)"
BEST_FIX = "train the run from scratch (resume=False), or use another run_dir"
# numpy scalars and arrays are data too: a callback's state (np.mean of its losses) holds them, and Lightning saves
# it in every checkpoint, which weights_only=True refused on resume.
NUMPY_DATA = (np._core.multiarray.scalar, np._core.multiarray._reconstruct, np.ndarray, np.dtype,
              *(getattr(np.dtypes, name) for name in dir(np.dtypes)  # numbers, booleans, text, dates: not objects
                if name.endswith("DType") and name not in ("ObjectDType", "StringDType", "VoidDType")))


def numpy_data_allowed() -> contextlib.AbstractContextManager[None]:
    """Around a ``weights_only=True`` load (ours or Lightning's): numpy scalars and arrays read as the data they are."""
    return torch.serialization.safe_globals(list(NUMPY_DATA))


def load_checkpoint(path: str | os.PathLike, *, mmap: bool = False, fix: str = RESUME_FIX) -> Any:
    """Read a checkpoint or weights file onto the CPU with ``torch.load(weights_only=True)``.

    Checkpoints are data (tensors, numbers, strings, containers, numpy scalars and arrays); a file that needs
    unpickling code to load (a pickled callable or class instance) is refused with a
    ConfigError, like a damaged one. ``mmap`` maps the tensors instead of reading them
    (a cheap check of a large file). ``fix`` ends the messages: what to do instead (default: a resumed run's).
    """
    try:
        with numpy_data_allowed():
            return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as error:
        raise ConfigError(
            f"{path} holds pickled objects that are not plain data (weights_only=True refuses them: "
            f"{str(error).splitlines()[0]}). Checkpoints are never unpickled as code. Fix: {fix}."
        ) from error
    except (RuntimeError, EOFError, OSError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ConfigError(
            f"{path} cannot be read as a checkpoint ({reason}): it is damaged or not a checkpoint. Fix: {fix}."
        ) from error


def last_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    """The checkpoint a killed run resumes from, if it wrote one.

    It is opened with :func:`load_checkpoint` first (tensors memory-mapped, not read), so
    pickled code or a damaged file raises ConfigError before Lightning restores anything
    from it.
    """
    path = Path(run_dir) / "checkpoints" / "last.ckpt"
    if not path.exists():
        return None
    load_checkpoint(path, mmap=True)
    return path


def calibrate_on_validation(model: ForecastModel, datamodule: Any, config: TrainingConfig) -> None:
    """The recipe's last steps, on the validation windows, in eval mode on the model's own device:
    with ``config.calibrate_correction`` a ``correctable`` model fits the share of its correction it
    keeps, then with ``config.calibrate_scale`` a ``calibratable`` one (the one-shot Gaussian LogSparse)
    fits its predictive scale around that forecast. Each is logged. Under DDP every process reads every
    validation window (not its share), so all fit the same values as one process would."""
    correct = config.calibrate_correction and model.correctable
    scale = config.calibrate_scale and model.calibratable
    if config.calibrate_scale and model.probabilistic and not model.calibratable:
        log.info("%s has no predictive scale to calibrate; its distribution is used as trained", type(model).__name__)
    if not (correct or scale):
        return
    device = next(model.parameters()).device

    def batches(loader: Iterable[dict[str, torch.Tensor]]) -> Iterator[dict[str, torch.Tensor]]:
        return ({name: tensor.to(device) for name, tensor in batch.items()} for batch in loader)

    was_training = model.training
    model.eval()
    try:
        if correct:
            prefix = (datamodule.val_prefix_dataloader(sharded=False) if config.correction_significance is not None
                      else None)
            kept = model.fit_correction_weight(
                batches(datamodule.val_dataloader(sharded=False)), config.correction_significance,
                prefix=None if prefix is None else (prefix.dataset.target_len, batches(prefix)))
            log.info("kept %.3f of the network's correction to the window's centre, fitted on the validation "
                     "windows", kept)
        if scale:
            log.info("calibrated the predictive scale on the validation windows: x%.3f",
                     model.calibrate_scale(batches(datamodule.val_dataloader(sharded=False))))
    finally:
        model.train(was_training)


class KeyboardInterruptKept(Callback):
    """Ctrl-C stays a KeyboardInterrupt. Lightning answers one with ``sys.exit(1)``: a script stopped silently
    with status 1 and a notebook reported SystemExit. Around a Lightning call, :meth:`kept` raises
    KeyboardInterrupt instead, as any other Python call would, with the SIGINT handler put back (Lightning
    ignores SIGINT while it shuts down)."""

    def __init__(self) -> None:
        self.pressed = False

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self.pressed = self.pressed or isinstance(exception, KeyboardInterrupt)

    @contextlib.contextmanager
    def kept(self) -> Iterator[None]:
        handler = signal.getsignal(signal.SIGINT)
        try:
            yield
        except SystemExit:
            if not self.pressed:
                raise
            if handler is not None and threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGINT, handler)
            raise KeyboardInterrupt from None


def _callback(trainer: L.Trainer, kind: type[Callback]) -> Any:
    return next(callback for callback in trainer.callbacks if isinstance(callback, kind))


class BestWeights(Callback):
    """Keeps in memory the weights of the epoch with the lowest ``val_loss``: the fallback when
    no best checkpoint was written (a fit without a run directory).

    The weights are those validated, taken as validation starts: with weight averaging
    (``ema_decay``, whose callback comes first) the average's, not the ones training goes on with.
    """

    def __init__(self) -> None:
        self.score = math.inf
        self.epoch = -1
        self.state: dict[str, torch.Tensor] | None = None
        self._validated: dict[str, torch.Tensor] | None = None

    def on_validation_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._validated = {k: v.detach().to("cpu", copy=True) for k, v in pl_module.model.state_dict().items()}

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or "val_loss" not in trainer.callback_metrics or self._validated is None:
            return
        score = float(trainer.callback_metrics["val_loss"])
        if score < self.score:
            self.score, self.epoch, self.state = score, trainer.current_epoch, self._validated
        self._validated = None


@dataclass(frozen=True)
class TrainedRun:
    """What :func:`fit_best` leaves: the trainer (to test with), the per-epoch history, the training
    seconds summed over resumes, the epochs trained, and the best epoch with its validation loss
    (``-1`` and ``None`` when nothing was trained)."""

    trainer: L.Trainer | None
    history: pd.DataFrame
    train_seconds: float = 0.0
    epochs: int = 0
    best_epoch: int = -1
    best_val_loss: float | None = None


def _quiet(config: TrainingConfig, progress: bool) -> dict[str, bool]:
    """Trainer options of the recipe's output: Lightning's progress bar only with ``progress``, its model
    summary never (each epoch logs a line instead); ``config.extra_trainer_options`` may say otherwise.
    Lightning's INFO messages (accelerator lines, tips) are hidden around every call."""
    quiet = {"enable_progress_bar": progress, "enable_model_summary": False}
    return {name: value for name, value in quiet.items() if name not in config.extra_trainer_options}


def fit_best(module: L.LightningModule, datamodule: Any, config: TrainingConfig,
             run_dir: str | os.PathLike | None = None, *, callbacks: Sequence[Callback] = (),
             progress: bool = False, resume: bool = True) -> TrainedRun:
    """The training recipe: build the trainer, fit (resuming ``run_dir``'s last checkpoint), restore
    the best epoch's weights and calibrate on the validation windows.

    :class:`~forecast.Forecaster` (and through it ``forecast fit``, ``forecast sweep`` and the
    experiment runner) trains only through here. A model without trainable parameters, or
    ``max_epochs=0``, trains nothing. Raises :class:`~forecast.errors.NonFiniteForecastError` when the weights are not
    finite after training.
    """
    model = module.model
    if not (has_trainable_parameters(model) and config.max_epochs > 0):
        return TrainedRun(None, EpochLog().frame())
    checkpoint = last_checkpoint(run_dir) if run_dir is not None and resume else None
    if checkpoint is not None:
        log.info("resuming from %s", checkpoint)
    timer, best = TrainTimer(), BestWeights()
    with lightning_messages(False):
        trainer = build_trainer(config, run_dir, callbacks=[timer, best, *callbacks],
                                train_batches=len(datamodule.train_dataloader()), **_quiet(config, progress))
        # weights_only: checkpoints never unpickle code
        with lightning_warnings(num_workers=config.num_workers, resuming=checkpoint is not None), \
                _callback(trainer, KeyboardInterruptKept).kept(), numpy_data_allowed():
            try:
                trainer.fit(module, datamodule=datamodule, ckpt_path=checkpoint, weights_only=True)
            except RuntimeError as error:
                if checkpoint is None or "loading state_dict" not in str(error):
                    raise
                raise ConfigError(f"{checkpoint} holds another model's weights (their names or shapes are not "
                                  f"this run's model's): it came from another run. Fix: {RESUME_FIX}.") from None
    best_epoch, best_score = _restore_best(trainer, module, best)
    history = _callback(trainer, EpochLog).frame()
    if best_epoch >= 0:
        log.info("restored the weights of epoch %d (val_loss %.4f)", best_epoch, best_score)
    calibrate_on_validation(model, datamodule, config)
    if not all(torch.isfinite(tensor).all() for tensor in model.state_dict().values() if tensor.is_floating_point()):
        raise NonFiniteForecastError(
            f"training diverged: {type(model).__name__}'s weights are NaN or inf after fit, and no epoch "
            "with a finite validation loss was there to restore. Fix: check the data for extreme values, "
            "lower learning_rate, or train in float32."
        )
    return TrainedRun(trainer, history, timer.time_elapsed(RunningStage.TRAINING), trainer.current_epoch, best_epoch,
                      best_score)


def test_windows(module: L.LightningModule, datamodule: Any, config: TrainingConfig, *,
                 trainer: L.Trainer | None = None, callbacks: Sequence[Callback] = (),
                 progress: bool = False) -> dict[str, float]:
    """The recipe's test: score every window of ``datamodule``'s test split; returns the logged metrics.

    ``trainer`` is the one :func:`fit_best` trained with (under DDP every process tests its share),
    else a plain one is built; the module keeps the long report (``module.test_report``).
    """
    with lightning_messages(False), lightning_warnings(num_workers=config.num_workers):
        if trainer is None:
            trainer = build_trainer(config, None, callbacks=list(callbacks), **_quiet(config, progress))
        with _callback(trainer, KeyboardInterruptKept).kept():
            return trainer.test(module, datamodule=datamodule, verbose=False)[0]


def _restore_best(trainer: L.Trainer, module: L.LightningModule, best: BestWeights) -> tuple[int, float | None]:
    """Load the best epoch's weights; returns that epoch and its validation loss (-1, None: none).

    The best checkpoint survives resumption, so it comes first; the memory copy stands in
    without a run directory, or when a user's callback stored objects that ``weights_only``
    refuses.
    """
    checkpoint = trainer.checkpoint_callback  # the run folder's (first) one; never a user's, whose monitor is its own
    path = checkpoint.best_model_path if isinstance(checkpoint, RunCheckpoint) else ""
    if path:
        score, epoch = checkpoint.best_model_score, re.search(r"epoch=(\d+)", Path(path).name)
        try:  # a resumed run's best checkpoint was never read before: pickled code, damaged or gone, it is refused
            module.load_state_dict(load_checkpoint(path, fix=BEST_FIX)["state_dict"])
            return (int(epoch[1]) if epoch else best.epoch), None if score is None else float(score)
        except ConfigError as error:
            # The memory copy stands in only for the checkpoint's own epoch: a resumed run's memory holds the best
            # epoch since the resume, not the checkpoint's (an earlier, better one), and would be kept silently.
            same_epoch = int(epoch[1]) == best.epoch if epoch else (
                score is not None and math.isclose(float(score), best.score))
            if best.state is None or not same_epoch:
                raise
            log.warning("%s (keeping this run's best weights from memory)", error)
    if best.state is None:
        return -1, None
    module.model.load_state_dict(best.state)
    return best.epoch, best.score


def has_trainable_parameters(model: torch.nn.Module) -> bool:
    return any(p.requires_grad for p in model.parameters())


def git_commit(default: str = "unknown", outputs: Sequence[str | os.PathLike] = ()) -> str:
    """The commit of the checkout the package runs from, ``-dirty`` when its files are modified.

    ``outputs`` (files or directories, e.g. the results directory a run appends to) are left out
    of the check: a run that wrote its own outputs is not "dirty". Outside a git checkout (a tree
    copied to another machine) the ``FORECAST_COMMIT`` environment variable names the commit it was
    copied from, else ``default``. So does an installed package, whose folder may lie inside another
    project's checkout (``myproject/.venv/lib/...``): only a checkout that tracks the package's files is its.
    """
    root = Path(forecast.__file__).resolve().parent.parent
    # git refuses a pathspec outside the checkout: outputs elsewhere cannot make it dirty anyway.
    excluded = [f":(exclude){path}" for path in (Path(output).resolve() for output in outputs)
                if path.is_relative_to(root)]
    try:
        subprocess.run(["git", "ls-files", "--error-unmatch", "--", str(Path(forecast.__file__).resolve())],
                       cwd=root, capture_output=True, check=True)
        commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root,
                                capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *excluded],
                               cwd=root, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return os.environ.get("FORECAST_COMMIT") or default
    return commit + ("-dirty" if dirty.strip() else "")


@contextlib.contextmanager
def lightning_messages(show: bool) -> Iterator[None]:
    """Hide Lightning's INFO lines (accelerator summary, tips) unless ``show``; levels restored after."""
    if show:
        yield
        return
    loggers = [logging.getLogger(name) for name in ("lightning.pytorch", "lightning.fabric")]
    levels = [each.level for each in loggers]
    for each in loggers:
        each.setLevel(max(each.getEffectiveLevel(), logging.WARNING))
    try:
        yield
    finally:
        for each, level in zip(loggers, levels, strict=True):
            each.setLevel(level)


# Lightning 2.6.6 (the newest release) builds torch.utils._pytree.LeafSpec() each time it
# flattens the dataloaders of fit/validate/test/predict, and torch 2.13 deprecates that class:
# a FutureWarning on every call that says nothing about the run.
_LEAF_SPEC_MESSAGE = r"`isinstance\(treespec, LeafSpec\)` is deprecated"
_LEAF_SPEC_MODULE = r"(lightning\.pytorch|pytorch_lightning)\.utilities\._pytree\Z"
_FEW_WORKERS_MESSAGE = r"The '\w+' does not have many workers which may be a bottleneck"
_NOT_EMPTY_MESSAGE = r"Checkpoint directory .* exists and is not empty\."


@contextlib.contextmanager
def lightning_warnings(*, num_workers: int = 0, resuming: bool = False) -> Iterator[None]:
    """Around one Lightning call (``fit``, ``validate``, ``test``, ``predict``): leave out the
    warnings that are wrong for this package's runs; every other warning goes through.

    * Lightning's LeafSpec use, deprecated by torch (see ``_LEAF_SPEC_MESSAGE``): not ours
      to fix, and no Lightning release without it exists yet.
    * "does not have many workers", when ``num_workers`` is 0: Lightning suggests worker
      processes on any machine with more than two cores, but the windows are indexed in
      memory and workers make loading 6 to 10 times slower (benchmarks/README.md), so 0 is
      the measured default. A user who chose 1 worker still gets the hint.
    * "Checkpoint directory ... exists and is not empty", when ``resuming`` from a checkpoint
      of that directory: a resumed run is expected to find its own checkpoints there.

    Only these messages, with their category, and only inside the call: no global filter.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_LEAF_SPEC_MESSAGE, category=FutureWarning,
                                module=_LEAF_SPEC_MODULE)
        if num_workers == 0:
            warnings.filterwarnings("ignore", message=_FEW_WORKERS_MESSAGE, category=PossibleUserWarning)
        if resuming:
            warnings.filterwarnings("ignore", message=_NOT_EMPTY_MESSAGE, category=UserWarning)
        yield
