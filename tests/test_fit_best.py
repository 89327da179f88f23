"""The recipe's own promises (forecast.training.fit_best): early stopping after `patience` epochs, the loss history
over windows, the best epoch restored (also from a resumed run's checkpoint) and read safely, the correction fitted
after that restore. Each test was written against a mutation of training.py that the suite let pass."""

from __future__ import annotations

import logging
import re

import pytest
import torch
from lightning.pytorch.callbacks import Callback

from forecast import Forecaster
from forecast.errors import ConfigError
from tests.test_hostile import TINY_INFORMER, WINDOW, PlantsAFile, clean_frame
@pytest.mark.parametrize("damage", ["pickled code", "truncated", "deleted"])
def test_a_resumed_runs_best_checkpoint_is_read_safely_or_refused_with_the_fix(tmp_path, damage):
    """The best checkpoint a resumed finished run restores was read with a bare torch.load: pickled code, a cut
    file or a missing one raised a raw traceback (torch's own advice: weights_only=False). Its code never runs."""
    frame, marker, run = clean_frame(60), tmp_path / "code-ran", tmp_path / "run"
    options = dict(**WINDOW, max_epochs=1, calibrate_correction=False, **TINY_INFORMER)
    Forecaster("informer", **options).fit(frame, run_dir=run)
    (best,) = (run / "checkpoints").glob("best-epoch=*.ckpt")
    if damage == "pickled code":
        torch.save({**torch.load(best, weights_only=True), "payload": PlantsAFile(marker)}, best)
    elif damage == "truncated":
        best.write_bytes(best.read_bytes()[:1000])
    else:
        best.unlink()
    with pytest.raises(ConfigError, match=r"Fix: train the run from scratch \(resume=False\)"):
        Forecaster("informer", **options).fit(frame, run_dir=run)  # resumes the finished run, restores its best
    assert not marker.exists()


class BatchLosses(Callback):
    def __init__(self) -> None:
        self.losses: list[tuple[float, int]] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.losses.append((float(outputs["loss"]), int(batch["x"].shape[0])))


def test_the_history_train_loss_is_the_mean_over_windows_not_over_batches():
    recorder = BatchLosses()
    fc = Forecaster("dlinear", **WINDOW, max_epochs=1, batch_size=16, learning_rate=1e-2, calibrate_correction=False,
                    callbacks=[recorder]).fit(clean_frame(80))
    sizes = [size for _, size in recorder.losses]
    assert len(set(sizes)) > 1  # a short last batch
    over_windows = sum(loss * size for loss, size in recorder.losses) / sum(sizes)
    over_batches = sum(loss for loss, _ in recorder.losses) / len(sizes)
    assert fc.history["train_loss"][0] == pytest.approx(over_windows, rel=1e-6)
    assert over_windows != pytest.approx(over_batches, rel=1e-6)


class SpoilFromEpochOne(Callback):
    """Adds noise to every weight at each step from epoch 1 on: every epoch after the first validates worse."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.current_epoch >= 1:
            with torch.no_grad():
                for parameter in pl_module.model.parameters():
                    parameter.add_(10 * torch.randn_like(parameter))


@pytest.mark.parametrize("patience", [1, 2])
def test_training_stops_after_patience_epochs_without_a_lower_validation_loss(patience):
    fc = Forecaster("dlinear", **WINDOW, max_epochs=6, patience=patience, learning_rate=1e-3,
                    calibrate_correction=False, callbacks=[SpoilFromEpochOne()]).fit(clean_frame(80))
    losses = fc.history["val_loss"].tolist()
    assert losses[0] < min(losses[1:])  # the first epoch stays the best
    assert len(losses) == 1 + patience and fc.last_fit.best_epoch == 0


def test_a_resumed_run_reports_the_best_epoch_of_its_checkpoint(tmp_path):
    """The best epoch comes from the best checkpoint, which survives resumption (the in-memory copy does not)."""
    frame, run = clean_frame(80), tmp_path / "run"
    options = dict(**WINDOW, max_epochs=3, learning_rate=1e-3, calibrate_correction=False)
    first = Forecaster("dlinear", callbacks=[SpoilFromEpochOne()], patience=5, **options).fit(frame, run_dir=run)
    assert first.last_fit.best_epoch == 0
    again = Forecaster("dlinear", patience=5, **options).fit(frame, run_dir=run)  # finished: resumes, trains nothing
    assert (again.last_fit.epochs, again.last_fit.best_epoch) == (3, 0)
    assert again.last_fit.best_val_loss == pytest.approx(first.history["val_loss"][0])


@pytest.mark.parametrize("with_run_dir", [False, True])
def test_the_correction_fitted_after_training_is_the_one_the_model_keeps(tmp_path, caplog, with_run_dir):
    """Calibration comes after the best epoch's weights are restored: restored after it, they would undo it."""
    with caplog.at_level(logging.INFO, logger="forecast"):
        fc = Forecaster("informer", **WINDOW, max_epochs=2, learning_rate=1e-2, calibrate_correction=True,
                        **TINY_INFORMER).fit(clean_frame(80), run_dir=tmp_path / "run" if with_run_dir else None)
    kept = (re.match(r"kept ([\d.]+) of the network", record.getMessage()) for record in caplog.records)
    (logged,) = [float(match[1]) for match in kept if match]
    assert logged != 1.0  # the fit moved it off its training value
    assert fc.model.correction_kept == pytest.approx(logged, abs=5e-4)


@pytest.mark.parametrize("damage", ["truncated", "deleted"])
def test_a_resumed_run_that_trains_on_refuses_a_lost_best_checkpoint_instead_of_a_later_epoch(tmp_path, damage):
    """The memory copy holds the best epoch since the resume, not the checkpoint's: standing in for a damaged or
    deleted best checkpoint, it made a worse later epoch the run's best with a warning only."""
    frame, run = clean_frame(80), tmp_path / "run"
    options = dict(**WINDOW, learning_rate=1e-3, calibrate_correction=False, patience=5)
    Forecaster("dlinear", max_epochs=1, **options).fit(frame, run_dir=run)
    (best,) = (run / "checkpoints").glob("best-epoch=0.ckpt")
    if damage == "truncated":
        best.write_bytes(best.read_bytes()[:1000])
    else:
        best.unlink()
    resumed = Forecaster("dlinear", max_epochs=3, callbacks=[SpoilFromEpochOne()], **options)  # epochs 1, 2 worse
    with pytest.raises(ConfigError, match=r"best-epoch=0\.ckpt.*Fix: train the run from scratch"):
        resumed.fit(frame, run_dir=run)
