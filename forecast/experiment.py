"""One benchmark experiment: train (or resume), test every window, append one results row.

This is the runner behind ``forecast sweep``. An
:class:`Experiment` names a dataset, a registered model with its options, the window and
the training recipe; :func:`run_experiment` trains it with :meth:`Forecaster.fit
<forecast.Forecaster.fit>` (the one recipe, :func:`forecast.training.fit_best`) with a checkpoint
every epoch under ``runs_dir/<run name>`` (resuming a killed run from ``last.ckpt``; the folder
ends as a saved forecaster), tests the best epoch
on every test window and appends the row (docs/design.md, results rows,
:mod:`forecast.results`) atomically. A run whose key is already in the results file is
skipped, so repeating a command, a script or a sweep continues where it stopped.

The key of a row (:data:`forecast.results.KEY`) is the dataset (a CSV file by its stem and a digest of its
bytes: :func:`dataset_label`), model, features, window, seed, the recipe's name (:mod:`forecast.recipes`), the
model options (the recipe's and those given), the training settings that differ from the TrainingConfig defaults and the
data options given (a panel's id column and covariates, a split), all three as sorted JSON.
The run folder is named after the same key, so ``forecast sweep`` and ``forecast fit`` share
checkpoints for the same run, and a smoke run (``max_epochs=1``) never stands for the real one.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lightning.pytorch.callbacks import Callback

import forecast
from forecast import datasets
from forecast.api import Forecaster
from forecast.data import DataConfig
from forecast.data.splits import split_key
from forecast.datasets import file_digest
from forecast.errors import ConfigError
from forecast.models import PARAMETER_FREE
from forecast.options import LOADING_OPTIONS
from forecast.predictor import WEIGHTS_FILE, DataFile, Predictor, fit_lock
from forecast.recipes import DEFAULT_RECIPE, POST_TRAINING_SETTINGS, get_recipe, training_differences
from forecast.results import (EMPTY_DATA, KEY, PROBABILISTIC_COLUMNS, append_new_row, has_row, read_results_file,
                              require_appendable)
from forecast.machine import device_description
from forecast.training import TrainingConfig, calibrate_on_validation, git_commit, load_checkpoint, test_windows

__all__ = ["Experiment", "dataset_label", "row_key", "run_experiment", "run_name", "runs_on_other_versions"]

log = logging.getLogger(__name__)

_DEFAULT_TIME_ENCODING = DataConfig.time_encoding  # "timeF": left out of a run's key


def dataset_label(dataset: str) -> str:
    """How rows and run folders name a dataset: a registered one by its name (given by an alias or in another case
    too); a file by its stem and the first 10 hex digits of the sha256 of its bytes (``toy@1a2b3c4d5e``;
    ``toy@missing`` for a ``.csv`` path that is no file).

    The stem alone named two files of one name, or a file before and after an edit, as one dataset: a sweep took
    one's row for the other's, and ``forecast test``/``predict`` loaded the other's run folder. Rows written
    before have the stem alone and match no run now (:func:`run_experiment` warns and runs it again)."""
    path, registered = Path(dataset), datasets.find(dataset)
    if registered is not None:  # 'etth1', 'ili': the registered name, so each spelling finds the same runs and rows
        return registered.name
    if not (path.is_file() or dataset.lower().endswith(".csv")):
        return dataset  # naming nothing that a run could read: as given
    if not path.is_file():  # a run on it fails (the reader says why), so no row is written under this label
        return f"{path.stem}@missing"
    return f"{path.stem}@{file_digest(path)}"


@dataclass(frozen=True)
class Experiment:
    """One run: data and window, a registered model and its options, the training settings.

    ``dataset`` is a registered name or a CSV path; ``target`` ``None`` means the
    dataset's registered target. ``model_options`` are fields of the model's config
    (kept sorted by name) and ``training`` the settings, both with the recipe already
    applied (:meth:`from_recipe` does it); ``recipe`` names it. ``data_options`` are
    further :class:`~forecast.data.DataConfig` fields for the data module (``split``,
    ``freq``, ...). ``training.seed`` is the run's seed. ``quantiles``: the levels of the quantile columns the
    saved run predicts (``None``: the Forecaster's default); they change nothing it learns, so no key names them.
    """

    dataset: str
    model: str
    seq_len: int
    label_len: int
    pred_len: int
    features: str = "M"
    target: str | None = None
    time_encoding: str = _DEFAULT_TIME_ENCODING
    model_options: Mapping[str, Any] = field(default_factory=dict)
    data_options: Mapping[str, Any] = field(default_factory=dict)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    recipe: str = DEFAULT_RECIPE
    quantiles: tuple[float, ...] | None = None

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
        """The training settings of the key; of a parameter-free model, which trains nothing, only the sample
        paths its test draws."""
        differences = training_differences(self.training)
        if self.model in PARAMETER_FREE:
            differences = {name: value for name, value in differences.items() if name == "n_samples"}
        return json.dumps(differences, sort_keys=True)

    @property
    def data_text(self) -> str:
        """The data options given (a panel's id column and covariates, a split, ...), as sorted JSON: they
        change what a run learns from, so they belong to its key. So do a target other than a registered
        dataset's own (any target of a CSV path) and a time encoding other than ``timeF``; the defaults
        are left out, so the keys of runs that use them stay what they were, and so are options given at their
        defaults and those that only load the windows (:data:`~forecast.options.LOADING_OPTIONS` but
        ``drop_last_train``): ``--data.pin_memory false`` or another ``eval_batch_size`` names the same run."""
        defaults = {f.name: f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
                    for f in dataclasses.fields(DataConfig)}
        options = {name: value for name, value in self.data_options.items()
                   if not (name in LOADING_OPTIONS and name != "drop_last_train")
                   and not (name in defaults and value == defaults[name])}
        if "split" in options:  # '2023-01-18' and '2023-01-18 00:00:00' are one split: one run
            options["split"] = split_key(options["split"])
        info = datasets.find(self.dataset)
        if self.target is not None and (info is None or self.target != info.target):
            options["target"] = self.target
        if self.time_encoding != _DEFAULT_TIME_ENCODING:
            options["time_encoding"] = self.time_encoding
        return json.dumps(options, sort_keys=True, default=str)

    def key(self) -> dict[str, Any]:
        """The results-row key (:data:`forecast.results.KEY`) of this run."""
        return dict(dataset=self.label, model=self.model, features=self.features, seq_len=self.seq_len,
                    label_len=self.label_len, pred_len=self.pred_len, seed=self.seed, recipe=self.recipe,
                    options=self.options_text, training=self.training_text, data=self.data_text)

    def run_name(self) -> str:
        """The run folder's name (:func:`run_name` of :meth:`key`)."""
        return run_name(self.key())

    def forecaster(self, *, progress: bool | None = None, callbacks: Sequence[Callback] = ()) -> Forecaster:
        """The unfitted :class:`~forecast.Forecaster` that trains this run (its options are the recipe's already);
        ``progress=None``: the Forecaster's default (the bar in interactive use only)."""
        training = dataclasses.asdict(self.training)
        max_epochs, seed = training.pop("max_epochs"), training.pop("seed")
        data = {name: value for name, value in self.data_options.items() if name != "split"}
        if self.quantiles is not None:  # else the Forecaster's default levels
            data["quantiles"] = self.quantiles
        return Forecaster(self.model, self.seq_len, self.label_len, self.pred_len, self.features, self.target,
                          max_epochs, seed, recipe=self.recipe, progress=progress, callbacks=list(callbacks),
                          time_encoding=self.time_encoding, **data, **training, **self.model_options)

    def results_path(self, results_dir: str | os.PathLike[str]) -> Path:
        """``<results_dir>/<stem>.csv``: rows of every version of a CSV file share its file, told apart by their
        ``dataset`` (:func:`dataset_label`)."""
        return Path(results_dir) / f"{Path(self.label.partition('@')[0]).stem}.csv"


def run_name(key: Mapping[str, Any]) -> str:
    """The run folder of the run with results key ``key`` (:data:`forecast.results.KEY`, the window and seed as
    ints): the key's short fields as ``name=value``, then a digest of the whole key.

    The digest stands for the options, training settings and data options, which would make a
    name longer than file systems allow. Without data options the digest is that of the key
    before it had them, so run folders made then are resumed.
    """
    hashed = {name: value for name, value in key.items() if not (name == "data" and value == EMPTY_DATA)}
    digest = hashlib.sha256(json.dumps(hashed, sort_keys=True).encode()).hexdigest()[:10]
    return "_".join(f"{k}={v}" for k, v in key.items() if k not in ("options", "training", "data")) + f"-{digest}"


def runs_on_other_versions(key: Mapping[str, Any], runs_dir: Path) -> list[Path]:
    """The run folders in ``runs_dir`` of the run ``key`` names, but on another version of its CSV file (another
    digest, or the stem alone of folders made before): where a changed file's earlier fits are."""
    stem = key["dataset"].rpartition("@")[0]
    if not stem:  # a registered dataset
        return []
    labels = {folder: folder.name.removeprefix("dataset=").partition("_model=")[0]
              for folder in runs_dir.glob(f"dataset={glob.escape(stem)}*")}
    return sorted(folder for folder, label in labels.items()
                  if label != key["dataset"] and folder.name == run_name({**key, "dataset": label}))


def row_key(row: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`~forecast.results.KEY` of a results row as read back (:func:`run_name` takes it): the window
    and seed as ints, the rest as text; a blank or missing ``data`` cell (rows written before the column) is no
    data options, as :func:`~forecast.results.read_results` reads it."""
    key = {name: int(row[name]) if name in ("seq_len", "label_len", "pred_len", "seed") else str(row[name])
           for name in KEY if name != "data"}
    return {**key, "data": row.get("data") or EMPTY_DATA}


def _blank_if_none(value: float | None) -> float | str:
    return "" if value is None else value


def _trained_settings(training_text: str) -> dict[str, Any]:
    return {name: value for name, value in json.loads(training_text).items() if name not in POST_TRAINING_SETTINGS}


@dataclass(frozen=True)
class _TrainedRun:
    """A finished run whose training ``experiment`` shares: its folder, best checkpoint and row."""

    folder: Path
    best_checkpoint: Path
    row: dict[str, Any]


def _trained_sibling(experiment: Experiment, results: Path, runs_dir: Path) -> _TrainedRun | None:
    """The latest recorded run that differs from ``experiment`` only in :data:`POST_TRAINING_SETTINGS` and
    whose folder in ``runs_dir`` holds its saved model and its one best checkpoint; None without one."""
    if experiment.model in PARAMETER_FREE:
        return None
    key = experiment.key()
    trained = _trained_settings(key["training"])
    for row in reversed(read_results_file(results).to_dict("records")):
        sibling = row_key(row)
        if (any(sibling[name] != key[name] for name in KEY if name != "training")
                or _trained_settings(sibling["training"]) != trained):
            continue
        folder = runs_dir / run_name(sibling)
        best = sorted((folder / "checkpoints").glob("best-epoch=*.ckpt"))
        if (folder / WEIGHTS_FILE).is_file() and len(best) == 1:
            return _TrainedRun(folder, best[0], row)
    return None


def _refit_after_training(experiment: Experiment, trained: _TrainedRun, run_dir: Path, progress: bool | None
                          ) -> tuple[Forecaster, dict[str, float]]:
    """``trained``'s weights as training left them (its best checkpoint), with ``experiment``'s steps after
    training fitted on the validation windows, and the test metrics of every window.

    The re-fitted forecaster is saved in ``run_dir`` under ``experiment``'s own config (no checkpoints: it
    trained nothing), so ``forecast predict`` and ``Forecaster.load`` find it by its own run name."""
    log.info("%s differs from %s only in what is fitted after training: re-fitting that on its trained weights",
             run_dir.name, trained.folder.name)
    forecaster = Forecaster.load(trained.folder)
    forecaster.module.load_state_dict(load_checkpoint(trained.best_checkpoint)["state_dict"])
    forecaster.predictor.n_samples = experiment.training.n_samples  # the paths this run's test draws
    datamodule = forecaster.windows_of(experiment.dataset, split=experiment.data_options.get("split"))
    datamodule.setup("fit")
    calibrate_on_validation(forecaster.model, datamodule, experiment.training)
    progress = forecaster.progress if progress is None else progress
    metrics = test_windows(forecaster.module, datamodule, experiment.training, progress=progress)
    predictor = forecaster.predictor
    with fit_lock(run_dir):  # as a fit into run_dir holds it
        Predictor(predictor.module, predictor.fitted_state, experiment.forecaster().config,
                  split=predictor.split, data_file=DataFile.of(experiment.dataset)).save(run_dir)
    return forecaster, metrics


def _commit_throughout(started: str, results: Path) -> str:
    """The commit the code started at, ``-dirty`` when the checkout is another now (a module imported after the
    change may be the new code's)."""
    ended = git_commit(outputs=[results.parent])
    if ended == started:
        return started
    log.warning("the checkout changed from %s to %s while this code ran: its row records %s-dirty", started, ended,
                started.removesuffix("-dirty"))
    return started.removesuffix("-dirty") + "-dirty"


def run_experiment(
    experiment: Experiment,
    results: str | os.PathLike[str],
    runs_dir: str | os.PathLike[str],
    command: str,
    *,
    callbacks: Sequence[Callback] = (),
    progress: bool | None = None,
    commit: str | None = None,
) -> dict[str, Any] | None:
    """Run ``experiment`` unless its row is in ``results``; returns the appended row, or ``None`` when skipped (its
    row was there before it ran, or another worker's was by the time it finished).

    The row records ``commit``, the commit of the code this process runs (a sweep's: read as it starts; default:
    read as this run starts), ``-dirty`` when the checkout is not that commit as the row is written.

    Checkpoints go to ``runs_dir/<experiment.run_name()>/checkpoints`` every epoch; a run
    that was killed resumes from its ``last.ckpt``. A run that differs from a finished one (its row in
    ``results``, its folder with the saved model and best checkpoint in ``runs_dir``) only in
    :data:`~forecast.recipes.POST_TRAINING_SETTINGS` would train the same weights: it starts from that run's
    best checkpoint instead, fits its own steps after training, saves the result in its own run folder (no
    checkpoints) and copies the training columns (epochs, best epoch, seconds, device, validation loss) from
    that run's row. Checkpoints are read with
    ``weights_only=True``. ``command`` is recorded in the row (how to reproduce it);
    ``callbacks`` are added to the Trainer's. ``progress``: Lightning's progress bar (``None``: in
    interactive use, as :class:`~forecast.Forecaster` decides).
    """
    results = Path(results)
    key = experiment.key()  # once: a CSV file edited while the run trains keeps the digest of what it read
    if has_row(results, key):
        log.info("already in %s, skipping: %s", results, key)
        return None
    require_appendable(results)  # before the run trains, not after it
    commit = commit or git_commit(outputs=[results.parent])  # the checkout may move while the run trains
    legacy = {**key, "dataset": Path(experiment.dataset).stem}
    if legacy["dataset"] != key["dataset"] and has_row(results, legacy):
        log.warning("%s has a row of this run from before CSV runs were keyed by the sha256 of their file "
                    "(dataset %r): which version of %s it scored cannot be told, so the run is made again as %r. "
                    "If the file is unchanged since, stop and set that row's dataset to %r instead (and rename "
                    "its run folder %s to %s).", results, legacy["dataset"], experiment.dataset, key["dataset"],
                    key["dataset"], run_name(legacy), run_name(key))

    trained = _trained_sibling(experiment, results, Path(runs_dir))
    trainer = None
    if trained is not None:
        forecaster, metrics = _refit_after_training(experiment, trained, Path(runs_dir) / run_name(key), progress)
        training = {name: trained.row[name] for name in ("epochs", "best_epoch", "train_seconds", "device",
                                                          "val_loss")}
    else:
        forecaster = experiment.forecaster(progress=progress, callbacks=callbacks)
        forecaster.fit(experiment.dataset, split=experiment.data_options.get("split"),
                       run_dir=Path(runs_dir) / run_name(key))
        fit = forecaster.last_fit
        trainer = fit.trainer
        metrics = test_windows(forecaster.module, forecaster.datamodule, experiment.training, trainer=trainer,
                               progress=forecaster.progress)
        training = dict(epochs=fit.epochs, best_epoch=fit.best_epoch, train_seconds=round(fit.train_seconds, 1),
                        device=device_description(trainer),
                        val_loss=fit.best_val_loss if fit.best_val_loss is not None else "")
    row = dict(
        key,
        mse=metrics["test_mse"], mae=metrics["test_mae"],
        mse_orig=metrics.get("test_mse_orig", float("nan")),
        mae_orig=metrics.get("test_mae_orig", float("nan")),
        n_test_windows=int(metrics["test_windows"]),
        version=forecast.__version__, commit=_commit_throughout(commit, results), command=command,
        correction_kept=_blank_if_none(forecaster.model.correction_kept),
        **training,
        **{column: metrics.get(f"test_{column}", "") for column in PROBABILISTIC_COLUMNS},
    )
    if trainer is not None and not trainer.is_global_zero:  # under DDP every process tests; one writes
        return row
    if not append_new_row(results, row):  # another worker finished the same run first
        log.warning("%s already holds this run's row; this run's row was not added: %s", results, key)
        return None
    log.info("wrote %s: mse %.4f mae %.4f over %d windows", results, metrics["test_mse"], metrics["test_mae"],
             int(metrics["test_windows"]))
    return row
