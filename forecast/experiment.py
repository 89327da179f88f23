"""One benchmark experiment: train (or resume), test every window, append one results row.

This is the runner behind ``experiments/run.py`` and ``forecast sweep``. An
:class:`Experiment` names a dataset, a registered model with its options, the window and
the training recipe; :func:`run_experiment` trains it with a checkpoint every epoch under
``runs_dir/<run name>`` (resuming a killed run from ``last.ckpt``), tests the best epoch
on every test window and appends the row (docs/design.md, results rows,
:mod:`forecast.results`) atomically. A run whose key is already in the results file is
skipped, so repeating a command, a script or a sweep continues where it stopped.

The key of a row (:data:`forecast.results.KEY`) is the dataset, model, features, window,
seed, the recipe's name (:mod:`forecast.recipes`), the model options (the recipe's and
those given) and the training settings that differ from the TrainingConfig defaults, both
as sorted JSON. The run folder is named after the same key, so ``experiments/run.py`` and
``forecast sweep`` share rows and checkpoints for the same run, and a smoke run
(``max_epochs=1``) never stands for the real one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback

import forecast
from forecast.data import WindowDataModule
from forecast.errors import ConfigError
from forecast.models import PARAMETER_FREE, DataSpec, build_model
from forecast.module import ForecastModule
from forecast.recipes import DEFAULT_RECIPE, get_recipe, training_differences
from forecast.results import PROBABILISTIC_COLUMNS, append_new_row, has_row
from forecast.training import (
    TrainClock,
    TrainingConfig,
    build_trainer,
    calibrate_on_validation,
    device_description,
    git_commit,
    has_trainable_parameters,
    last_checkpoint,
    lightning_messages,
    lightning_warnings,
    load_checkpoint,
)

__all__ = ["Experiment", "dataset_label", "run_experiment"]

log = logging.getLogger(__name__)


def dataset_label(dataset: str) -> str:
    """How rows, run folders and results files name a dataset: a CSV path by its file stem."""
    return Path(dataset).stem if dataset.lower().endswith(".csv") else dataset


@dataclass(frozen=True)
class Experiment:
    """One run: data and window, a registered model and its options, the training settings.

    ``dataset`` is a registered name or a CSV path; ``target`` ``None`` means the
    dataset's registered target. ``model_options`` are fields of the model's config
    (kept sorted by name) and ``training`` the settings, both with the recipe already
    applied (:meth:`from_recipe` does it); ``recipe`` names it. ``data_options`` are
    further :class:`~forecast.data.DataConfig` fields for the data module (``split``,
    ``freq``, ...). ``training.seed`` is the run's seed.
    """

    dataset: str
    model: str
    seq_len: int
    label_len: int
    pred_len: int
    features: str = "M"
    target: str | None = None
    time_encoding: str = "timeF"
    model_options: Mapping[str, Any] = field(default_factory=dict)
    data_options: Mapping[str, Any] = field(default_factory=dict)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    recipe: str = DEFAULT_RECIPE

    @classmethod
    def from_recipe(cls, recipe: str, model: str, model_options: Mapping[str, Any],
                    training: Mapping[str, Any], **fields: Any) -> Experiment:
        """An experiment whose model options and training settings start from ``recipe``'s."""
        options, settings = get_recipe(recipe).apply(model, model_options, training)
        return cls(model=model, model_options=options, training=TrainingConfig(**settings), recipe=recipe,
                   **fields)

    def __post_init__(self) -> None:
        if not isinstance(self.dataset, str) or not self.dataset:
            raise ConfigError(f"dataset={self.dataset!r}; Fix: name a registered dataset or a CSV path.")
        reserved = {"seq_len", "label_len", "pred_len", "features", "target", "time_encoding", "seed",
                    "batch_size", "num_workers"} & set(self.data_options)
        if reserved:
            raise ConfigError(f"data_options {sorted(reserved)} are fields of the Experiment itself; set them there.")
        object.__setattr__(self, "model_options", dict(sorted(self.model_options.items())))
        object.__setattr__(self, "data_options", dict(self.data_options))
        get_recipe(self.recipe)

    @property
    def seed(self) -> int:
        return self.training.seed

    @property
    def label(self) -> str:
        return dataset_label(self.dataset)

    @property
    def options_text(self) -> str:
        return json.dumps(self.model_options, sort_keys=True)

    @property
    def training_text(self) -> str:
        """The training settings of the key: none for a parameter-free model, which trains nothing."""
        if self.model in PARAMETER_FREE:
            return "{}"
        return json.dumps(training_differences(self.training), sort_keys=True)

    def key(self) -> dict[str, Any]:
        """The results-row key (:data:`forecast.results.KEY`) of this run."""
        return dict(dataset=self.label, model=self.model, features=self.features, seq_len=self.seq_len,
                    label_len=self.label_len, pred_len=self.pred_len, seed=self.seed, recipe=self.recipe,
                    options=self.options_text, training=self.training_text)

    def run_name(self) -> str:
        """The run folder's name: the key's short fields as ``name=value``, then a digest of the whole key.

        The digest stands for the options and training settings, which would make a name
        longer than file systems allow.
        """
        key = self.key()
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]
        return "_".join(f"{k}={v}" for k, v in key.items() if k not in ("options", "training")) + f"-{digest}"

    def results_path(self, results_dir: str | os.PathLike[str]) -> Path:
        return Path(results_dir) / f"{self.label}.csv"


def run_experiment(
    experiment: Experiment,
    results: str | os.PathLike[str],
    runs_dir: str | os.PathLike[str],
    command: str,
    *,
    callbacks: Sequence[Callback] = (),
    progress: bool = False,
) -> dict[str, Any] | None:
    """Run ``experiment`` unless its row is in ``results``; returns the appended row, or ``None`` when skipped.

    Checkpoints go to ``runs_dir/<experiment.run_name()>/checkpoints`` every epoch; a run
    that was killed resumes from its ``last.ckpt``. Checkpoints are read with
    ``weights_only=True``. ``command`` is recorded in the row (how to reproduce it);
    ``callbacks`` are added to the Trainer's.
    """
    results = Path(results)
    key = experiment.key()
    if has_row(results, key):
        log.info("already in %s, skipping: %s", results, key)
        return None

    training = experiment.training
    L.seed_everything(training.seed, workers=True)
    datamodule_options = {} if experiment.target is None else {"target": experiment.target}
    datamodule = WindowDataModule(
        experiment.dataset, seq_len=experiment.seq_len, label_len=experiment.label_len,
        pred_len=experiment.pred_len, features=experiment.features, time_encoding=experiment.time_encoding,
        batch_size=training.batch_size, num_workers=training.num_workers, seed=training.seed,
        **datamodule_options, **experiment.data_options,
    )
    datamodule.setup()
    model = build_model(experiment.model, DataSpec.from_datamodule(datamodule), **experiment.model_options)
    module = ForecastModule(model, loss=training.loss, learning_rate=training.learning_rate,
                            lr_schedule=training.lr_schedule, weight_decay=training.weight_decay,
                            fitted=datamodule.fitted)

    run_dir = Path(runs_dir) / experiment.run_name()
    clock = TrainClock()
    trained = has_trainable_parameters(model) and training.max_epochs > 0
    # Lightning's own messages (model summary, accelerator lines, tips) only with the progress bar.
    trainer = build_trainer(training, run_dir, callbacks=[clock, *callbacks], enable_progress_bar=progress,
                            enable_model_summary=progress,
                            train_batches=len(datamodule.train_dataloader()) if trained else None)
    if trained:
        resume = last_checkpoint(run_dir)
        if resume is not None:
            log.info("resuming from %s", resume)
        # weights_only: checkpoints never unpickle code
        with lightning_messages(progress), lightning_warnings(num_workers=training.num_workers,
                                                              resuming=resume is not None):
            trainer.fit(module, datamodule=datamodule, ckpt_path=resume, weights_only=True)
        train_seconds, epochs = clock.seconds, trainer.current_epoch
        # The best epoch's weights, then the recipe's calibration on validation windows, then the test.
        module.load_state_dict(load_checkpoint(trainer.checkpoint_callback.best_model_path)["state_dict"])
        calibrate_on_validation(model, datamodule, training)
    else:
        train_seconds, epochs = 0.0, 0
    with lightning_messages(progress), lightning_warnings(num_workers=training.num_workers):
        test_output = trainer.test(module, datamodule=datamodule, verbose=False)
    metrics = test_output[0]
    best_path = trainer.checkpoint_callback.best_model_path if trained else ""
    best_epoch = int(best_path.rsplit("epoch=", 1)[1].split(".")[0]) if best_path else -1
    best_score = trainer.checkpoint_callback.best_model_score if trained else None

    row = dict(
        key,
        mse=metrics["test_mse"], mae=metrics["test_mae"],
        mse_orig=metrics.get("test_mse_orig", float("nan")),
        mae_orig=metrics.get("test_mae_orig", float("nan")),
        n_test_windows=int(metrics["test_windows"]),
        epochs=epochs, best_epoch=best_epoch,
        train_seconds=round(train_seconds, 1), device=device_description(trainer),
        version=forecast.__version__, commit=git_commit(outputs=[Path(results).parent]),
        command=command, val_loss=float(best_score) if best_score is not None else "",
        **{column: metrics.get(f"test_{column}", "") for column in PROBABILISTIC_COLUMNS},
    )
    if not trainer.is_global_zero:  # under DDP every process tests; one writes the row
        return row
    if not append_new_row(results, row):  # another worker finished the same run first
        log.warning("%s already holds this run's row; this run's row was not added: %s", results, key)
        return row
    log.info("wrote %s: mse %.4f mae %.4f over %d windows", results, metrics["test_mse"], metrics["test_mae"],
             int(metrics["test_windows"]))
    return row
