"""The library's Lightning calls raise no warning: the suite stays quiet, and so do users' runs.

Lightning's hint to use dataloader workers fires only on machines with more than two cores;
``many_cores`` makes every machine look like one, so these tests check it everywhere.
"""

from __future__ import annotations

import contextlib
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from lightning.fabric.utilities import data as fabric_data
from lightning.pytorch.callbacks import ModelCheckpoint

from forecast import Forecaster
from forecast.experiment import Experiment, run_experiment
from forecast.training import RunCheckpoint, TrainingConfig, build_trainer, lightning_warnings, log_interval

TINY = {"d_model": 16, "n_heads": 2, "d_ff": 32, "e_layers": 1, "d_layers": 1, "factor": 2, "dropout": 0.0}
WINDOW = {"seq_len": 32, "label_len": 16, "pred_len": 8}


def toy_frame(rows: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    t = np.arange(rows)
    return pd.DataFrame({"date": pd.date_range("2021-01-01", periods=rows, freq="h"),
                         "a": np.sin(2 * np.pi * t / 24) + 0.05 * rng.standard_normal(rows),
                         "OT": np.cos(2 * np.pi * t / 12) + 0.05 * rng.standard_normal(rows)})


@pytest.fixture
def many_cores(monkeypatch) -> None:
    """Lightning sees 8 cores, so it would suggest dataloader workers on any machine."""
    monkeypatch.setattr(fabric_data, "_num_cpus_available", lambda: 8)


@pytest.fixture
def caught() -> Iterator[list[warnings.WarningMessage]]:
    """Every warning raised inside the test, each one recorded (``always``), none printed."""
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        yield records


def described(records: list[warnings.WarningMessage]) -> list[str]:
    return [f"{w.category.__name__} at {w.filename}:{w.lineno}: {w.message}" for w in records]


def forecaster(max_epochs: int) -> Forecaster:
    return Forecaster("informer", **WINDOW, max_epochs=max_epochs, batch_size=16, learning_rate=1e-3, **TINY)


def test_fit_evaluate_and_predict_raise_no_warning(many_cores, caught):
    frame = toy_frame()
    fitted = forecaster(max_epochs=1).fit(frame)
    report = fitted.evaluate()
    future = fitted.predict()
    assert np.isfinite(future.to_numpy()).all() and not report.empty
    assert not caught, described(caught)


def test_resuming_a_run_directory_and_a_copy_of_it_raises_no_warning(many_cores, caught, tmp_path):
    frame = toy_frame()
    forecaster(max_epochs=1).fit(frame, run_dir=tmp_path / "run")
    # Resumed in place: Lightning would say its checkpoint directory "exists and is not empty".
    forecaster(max_epochs=2).fit(frame, run_dir=tmp_path / "run")
    # Resumed from a copy: Lightning would say "The dirpath has changed" and forget the best score.
    shutil.copytree(tmp_path / "run", tmp_path / "copy")
    resumed = forecaster(max_epochs=3).fit(frame, run_dir=tmp_path / "copy")
    resumed.predict()
    assert not caught, described(caught)


def test_an_experiment_run_on_a_short_epoch_raises_no_warning(many_cores, caught, tmp_path):
    """Its CSV logger is on: Lightning would warn that 12 batches are fewer than its logging interval."""
    csv = tmp_path / "toy.csv"
    toy_frame().to_csv(csv, index=False)
    experiment = Experiment.from_recipe("paper", "informer", TINY, {"max_epochs": 1, "batch_size": 16},
                                        dataset=str(csv), features="M", **WINDOW)
    row = run_experiment(experiment, tmp_path / "results.csv", tmp_path / "runs", "test")
    assert row is not None and np.isfinite(row["mse"])
    assert not caught, described(caught)
    (metrics,) = (tmp_path / "runs").glob("*/lightning_logs/version_*/metrics.csv")
    assert pd.read_csv(metrics)["train_loss"].notna().any()  # the short epoch logged its training loss


def test_other_warnings_still_go_through():
    """The filter is narrow: a warning it does not name is raised as before, inside and after it."""
    with pytest.warns(UserWarning, match="something else"), lightning_warnings(resuming=True):
        warnings.warn("something else", UserWarning)
    with pytest.warns(FutureWarning, match="LeafSpec"):  # only Lightning's use of it is left out
        warnings.warn("`isinstance(treespec, LeafSpec)` is deprecated", FutureWarning)
    with pytest.warns(UserWarning, match="not empty"), lightning_warnings():  # not resuming: kept
        warnings.warn("Checkpoint directory /x exists and is not empty.", UserWarning)


@pytest.mark.parametrize("batches, processes, limit, expected", [
    (12, 1, None, 12), (500, 1, None, 50), (12, 2, None, 6), (100, 1, 2, 2), (100, 1, 0.1, 10), (1, 4, None, 1),
])
def test_the_logging_interval_is_at_most_one_epoch(batches, processes, limit, expected):
    assert log_interval(batches, processes, limit) == expected


def test_build_trainer_lowers_the_logging_interval_unless_it_is_given(tmp_path):
    config = TrainingConfig(limit_train_batches=2)
    assert build_trainer(config, tmp_path, train_batches=12).log_every_n_steps == 2
    assert build_trainer(config, tmp_path).log_every_n_steps == 50
    assert build_trainer(config, tmp_path, train_batches=12, log_every_n_steps=7).log_every_n_steps == 7


def checkpoint_state(directory: Path) -> dict:
    best = str(directory / "best-epoch=1.ckpt")
    return {"monitor": "val_loss", "best_model_score": torch.tensor(0.5), "best_model_path": best,
            "current_score": torch.tensor(0.7), "dirpath": str(directory), "best_k_models": {best: torch.tensor(0.5)},
            "kth_best_model_path": best, "kth_value": torch.tensor(0.5), "last_model_path": str(directory / "last.ckpt")}


def test_a_copied_run_directory_resumes_with_its_best_score(tmp_path):
    new = tmp_path / "new"
    callback = RunCheckpoint(dirpath=new, filename="best-{epoch}", monitor="val_loss", save_top_k=1, save_last=True)
    new = Path(callback.dirpath)
    new.mkdir()
    (new / "best-epoch=1.ckpt").write_bytes(b"")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        callback.load_state_dict(checkpoint_state(tmp_path / "old"))
    assert callback.best_model_score == pytest.approx(0.5)
    assert callback.best_model_path == str(new / "best-epoch=1.ckpt")
    assert callback.last_model_path == str(new / "last.ckpt")
    assert list(callback.best_k_models) == [str(new / "best-epoch=1.ckpt")]


def test_a_copy_without_its_best_checkpoint_resumes_as_lightning_does(tmp_path):
    callback = RunCheckpoint(dirpath=tmp_path / "new", monitor="val_loss", save_top_k=1)
    with pytest.warns(UserWarning, match="The dirpath has changed"):
        callback.load_state_dict(checkpoint_state(tmp_path / "old"))
    assert callback.best_model_score is None


@pytest.mark.parametrize("moved", [False, True])
def test_a_resumed_checkpoint_names_no_file_outside_its_directory_to_delete_or_read(tmp_path, moved):
    """A checkpoint is plain data (it passes weights_only=True), and Lightning deletes the checkpoints a better one
    displaces by the paths its state names: `best_k_models` holding `checkpoints/../../victim.txt` (or an absolute
    path elsewhere) deleted that file when the resumed run saved a better checkpoint."""
    home = tmp_path / "run" / "checkpoints"
    callback = RunCheckpoint(dirpath=home, filename="best-{epoch}", monitor="val_loss", save_top_k=1, save_last=True)
    home.mkdir(parents=True)
    (home / "best-epoch=1.ckpt").write_bytes(b"")
    written_in = tmp_path / "old" if moved else home
    state = checkpoint_state(written_in)
    escaping, elsewhere = str(home / ".." / ".." / "victim.ckpt"), str(tmp_path / "victim.txt")
    state.update(best_k_models={**state["best_k_models"], escaping: torch.tensor(0.1), elsewhere: torch.tensor(0.2)},
                 kth_best_model_path=escaping, last_model_path=elsewhere)
    callback.load_state_dict(state)
    assert list(callback.best_k_models) == [str(home / "best-epoch=1.ckpt")]
    assert callback.best_model_path == str(home / "best-epoch=1.ckpt")
    assert callback.kth_best_model_path == "" and callback.last_model_path == ""
    state["best_model_path"] = escaping  # with no best checkpoint in the new place, a moved run resumes as Lightning's
    with pytest.warns(UserWarning, match="The dirpath has changed") if moved else contextlib.nullcontext():
        callback.load_state_dict(state)
    assert callback.best_model_path == ""  # never read the best weights from there


def test_run_checkpoints_keep_lightnings_state_key():
    """Checkpoints written with Lightning's ModelCheckpoint resume with RunCheckpoint, and back."""
    options = {"monitor": "val_loss", "mode": "min", "every_n_train_steps": 5}
    assert RunCheckpoint(**options).state_key == ModelCheckpoint(**options).state_key
