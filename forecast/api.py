"""``Forecaster``: fit, evaluate, predict the real future, plot, save and load, in a few lines.

    from forecast import Forecaster, datasets
    fc = Forecaster("informer", seq_len=96, label_len=48, pred_len=24, max_epochs=6, seed=0)
    fc.fit(datasets.load("ETTh1"))      # the canonical split of a known dataset, else 70/10/20
    report = fc.evaluate()              # metric x scale table over every test window (detail=True: long)
    future = fc.predict()               # the pred_len steps after the last row, original units
    fc.save("runs/etth1"); fc = Forecaster.load("runs/etth1")

It composes the package's parts and adds no modelling of its own: a
:class:`~forecast.data.WindowDataModule` cuts and scales the windows, a registered model
(:data:`forecast.models.MODELS`) is trained by :class:`~forecast.module.ForecastModule`
through the shared recipe of :mod:`forecast.training` (early stopping on validation
loss; the best epoch's weights are kept).

Options are routed by name: :class:`~forecast.data.DataConfig` fields go to the data,
:class:`~forecast.training.TrainingConfig` fields to training (``batch_size`` and
``num_workers`` to both), ``lightning.Trainer`` arguments to the trainer, and every
other name must be a field of the model's config (``InformerConfig`` for ``informer``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import inspect
import json
import logging
import os
import sys
import tempfile
from collections.abc import Hashable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure
from torch import nn

import forecast
from forecast import datasets as registry
from forecast.checks import require_bool, require_choice, require_levels
from forecast.data import DataConfig, FutureBatch, WindowDataModule, prepare_series
from forecast.data.fitted import FittedState
from forecast.data.io import Table
from forecast.data.splits import SPLIT_NAMES
from forecast.errors import ConfigError, NonFiniteForecastError
from forecast.metrics import pivot_report
from forecast.models import MODELS, DataSpec, ForecastModel, build_model, model_options
from forecast.module import ForecastModule
from forecast.plotting import plot_forecast, quantile_column
from forecast.recipes import DEFAULT_RECIPE, get_recipe
from forecast.training import (EpochLog, TrainedRun, TrainingConfig, fit_best, last_checkpoint, load_checkpoint,
                               test_windows)

__all__ = ["Forecaster", "model_option_names"]

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
SCALER_FILE = "scaler.json"
WEIGHTS_FILE = "model.pt"
FORMAT = "forecast.Forecaster"
FORMAT_VERSION = 1
DEFAULT_QUANTILES = (0.1, 0.5, 0.9)

# Option routing. The window, variables and seed are the constructor's own arguments,
# the split is fit's and the windows to score evaluate's; batch size and workers are both
# a loader and a training setting.
_OWN_ARGUMENTS = ("seq_len", "label_len", "pred_len", "features", "target", "max_epochs", "seed")
_SHARED_OPTIONS = ("batch_size", "num_workers")
_DATA_OPTIONS = tuple(f.name for f in dataclasses.fields(DataConfig)
                      if f.name not in (*_OWN_ARGUMENTS, *_SHARED_OPTIONS, "split", "test_split"))
_TRAINING_OPTIONS = tuple(f.name for f in dataclasses.fields(TrainingConfig)
                          if f.name not in (*_OWN_ARGUMENTS, *_SHARED_OPTIONS))
# run_dir decides checkpoints and the root directory; callbacks are added, not replaced.
_MANAGED_TRAINER_ARGUMENTS = ("self", "default_root_dir", "enable_checkpointing", "callbacks")
_TRAINER_OPTIONS = tuple(
    name for name in inspect.signature(L.Trainer.__init__).parameters
    if name not in (*_MANAGED_TRAINER_ARGUMENTS, *_OWN_ARGUMENTS, *_SHARED_OPTIONS, *_TRAINING_OPTIONS)
)


# ------------------------------------------------------------------------------ helpers


@contextlib.contextmanager
def _private_rng(seed: int | None = None, device: torch.device | None = None) -> Iterator[None]:
    """Run a block without touching the caller's torch RNG (seeded inside when ``seed`` is given)."""
    cuda = device is not None and device.type == "cuda"
    with torch.random.fork_rng(devices=[device] if cuda else []):
        if seed is not None:
            torch.random.default_generator.manual_seed(seed)
            if cuda:
                with torch.cuda.device(device):
                    torch.cuda.manual_seed(seed)  # this device only: the others were not forked
        yield


def _interactive() -> bool:
    """Whether a person is likely watching: a terminal or a Jupyter kernel, outside CI."""
    if os.environ.get("CI"):
        return False
    return "ipykernel" in sys.modules or sys.stderr.isatty()


def _probe_spec(seq_len: int, label_len: int, pred_len: int) -> DataSpec:
    """Sizes for building a model only to check its options (one variable, four timeF features)."""
    return DataSpec(seq_len=seq_len, label_len=label_len, pred_len=pred_len, c_in=1, c_out=1,
                    n_time_features=4)


def model_option_names(model: str) -> tuple[str, ...]:
    """The options the registered ``model`` accepts: the fields of its config dataclass."""
    return model_options(model)


def _jsonable(value: Any, name: str) -> Any:
    """``value`` as JSON types (tuples become lists); ConfigError when it has no JSON form."""
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (datetime.date, np.datetime64)):
        return pd.Timestamp(value).isoformat()  # a date split's border
    if isinstance(value, (list, tuple)):
        return [_jsonable(item, name) for item in value]
    if isinstance(value, Mapping):
        if not all(isinstance(key, str) for key in value):
            raise ConfigError(f"option {name}={value!r}: only string keys can be saved. Fix: use string keys.")
        return {key: _jsonable(item, f"{name}.{key}") for key, item in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(list(dataclasses.astuple(value)), name)
    raise ConfigError(
        f"option {name}={value!r} ({type(value).__name__}) cannot be saved as JSON. Fix: pass numbers, "
        "strings, lists or dicts."
    )


def _is_jsonable(value: Any) -> bool:
    try:
        _jsonable(value, "")
    except ConfigError:
        return False
    return True


def _check_quantiles(levels: Sequence[float]) -> tuple[float, ...]:
    checked = require_levels("quantiles", levels, allow_empty=True)
    if len(set(checked)) != len(checked):
        raise ConfigError(f"quantiles={levels!r} repeats a level.")
    return tuple(sorted(checked))


def _resolve_table(data: Table) -> Table:
    """A registered dataset name becomes its frame; frames, series and paths pass through."""
    if isinstance(data, str) and registry.find(data) is not None:
        return registry.load(data)
    if not isinstance(data, (pd.DataFrame, pd.Series, str, os.PathLike)):
        raise ConfigError(
            f"data of type {type(data).__name__}; Fix: pass a DataFrame, a Series indexed by timestamps, a CSV "
            f"path or a registered dataset name {registry.names()}."
        )
    return data


def _device_of(model: nn.Module) -> torch.device:
    tensor = next(model.parameters(), None)
    if tensor is None:
        tensor = next(model.buffers(), None)
    return tensor.device if tensor is not None else torch.device("cpu")

@contextlib.contextmanager
def _inference(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> Iterator[tuple[torch.Tensor, ...]]:
    """``(x, x_mark, y_mark)`` on the model's device, in eval mode without grad; mode restored after."""
    device = _device_of(model)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield tuple(batch[key].to(device) for key in ("x", "x_mark", "y_mark"))
    finally:
        model.train(was_training)


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"{path} does not exist. Fix: pass a directory written by Forecaster.save().")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path} is not valid JSON ({error}). Fix: save the forecaster again.") from error


def _write_json(path: Path, content: Mapping[str, Any]) -> None:
    # A temporary file of its own: under DDP every process writes the (same) config at once.
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as out:
            out.write(json.dumps(content, indent=2) + "\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


# --------------------------------------------------------------------------- Forecaster


class Forecaster:
    """Fit a registered model on a table, evaluate it, forecast the real future, save and load it.

    Args:
        model: a registered model name (``informer``, ``transformer``, ``naive``, ...).
        seq_len, label_len, pred_len: lookback L, decoder start tokens, horizon P.
        features: ``"M"`` all variables in and out, ``"S"`` the target alone, ``"MS"``
            all in, the target out.
        target: the target column (last in model order). ``None`` (the default): a
            registered dataset's own target; otherwise ``M`` uses every column as it is and
            ``S``/``MS`` the last numeric column (logged).
        max_epochs: training epochs at most (early stopping on validation loss); ``None``
            takes the recipe's.
        seed: seeds Python, numpy and torch at ``fit`` (``lightning.seed_everything``),
            the training loader's shuffling and the sampling of quantile forecasts.
        recipe: the named recipe (:mod:`forecast.recipes`) whose model options and
            training settings the forecaster starts from: ``improved`` (the default:
            reversible instance normalization and the settings chosen on validation
            windows) or ``paper`` (the papers' settings). Options given here win.
        quantiles: levels of the quantile columns ``predict`` adds for models that
            forecast distributions (``model.probabilistic``).
        progress: show Lightning's progress bar; ``None`` (the default): in interactive use (a
            terminal or a Jupyter kernel) unless the ``CI`` environment variable is set.
            Lightning's own messages (accelerator summary, tips) are never shown; every
            epoch logs one INFO line on the ``forecast`` logger, and :attr:`history` keeps them.
        **options: data options (:class:`~forecast.data.DataConfig` fields such as
            ``freq``, ``time_encoding``, ``columns``, ``date_column``), training options
            (:class:`~forecast.training.TrainingConfig` fields such as ``learning_rate``,
            ``patience``, ``batch_size``, ``accelerator``), ``lightning.Trainer``
            arguments (``limit_val_batches``, ``logger``, ``callbacks``, ...) and model
            options (the fields of the model's config, e.g. ``d_model``, ``factor``).
            An unknown name raises :class:`~forecast.errors.ConfigError` listing them.
            ``callbacks`` (Lightning callbacks) and Trainer options without a JSON form
            are used by ``fit`` but not saved.

    ``fit`` trains; ``evaluate`` scores the test windows; ``predict`` forecasts the
    ``pred_len`` steps after the last row; ``plot`` draws it; ``attention_weights``
    returns the encoder's attention for the attention plots; ``save``/``load`` keep
    the whole forecaster in a directory. A loaded forecaster predicts on any frame with
    the fitted variables and evaluates on data given to ``evaluate``.
    """

    def __init__(
        self,
        model: str = "informer",
        seq_len: int = 96,
        label_len: int = 48,
        pred_len: int = 24,
        features: str = "M",
        target: Hashable | None = None,
        max_epochs: int | None = None,
        seed: int = 0,
        *,
        recipe: str = DEFAULT_RECIPE,
        quantiles: Sequence[float] = DEFAULT_QUANTILES,
        progress: bool | None = None,
        **options: Any,
    ) -> None:
        if model not in MODELS:
            raise ConfigError(f"unknown model {model!r}; choose one of {sorted(MODELS)}")
        self._model_name = model
        self._recipe = get_recipe(recipe)
        # The recipe's training settings and model options, beneath those given (their names never overlap).
        options = {**self._recipe.training, **self._recipe.options_for(model), **options}
        if max_epochs is None:
            max_epochs = options.pop("max_epochs", TrainingConfig.max_epochs)
        else:
            options.pop("max_epochs", None)
        self._quantiles = _check_quantiles(quantiles)
        self._progress = _interactive() if progress is None else require_bool("progress", progress)
        self._callbacks = list(options.pop("callbacks", None) or [])
        data_options, training_options, trainer_options, model_options = self._route(options)
        shared = {name: options[name] for name in _SHARED_OPTIONS if name in options}
        self._window = {"seq_len": seq_len, "label_len": label_len, "pred_len": pred_len,
                        "features": features, "target": target}
        self._data_options = data_options
        # Validates the window, variables and data options before any data is read.
        DataConfig(**self._window, seed=seed, **shared, **data_options)
        extra = {**dict(training_options.pop("extra_trainer_options", None) or {}), **trainer_options}
        managed = sorted(set(extra) & set(_MANAGED_TRAINER_ARGUMENTS))
        if managed:
            raise ConfigError(
                f"Trainer options {managed} are managed by the Forecaster: checkpoints and their directory "
                "follow fit(run_dir=...), and callbacks=[...] is a constructor option of its own."
            )
        self._training = TrainingConfig(max_epochs=max_epochs, seed=seed, **shared, **training_options,
                                        extra_trainer_options=extra)
        self._model_options = model_options
        self._check_model_options()
        self._new_module(ForecastModel(), None)  # validates loss, learning_rate and lr_schedule
        self._fitted: FittedState | None = None
        self._run = TrainedRun(None, EpochLog().frame())
        self._module: ForecastModule | None = None
        self._datamodule: WindowDataModule | None = None
        self._data: Table | None = None
        self._split: Any = None

    # ---------------------------------------------------------------- configuration

    def _route(self, options: Mapping[str, Any]) -> tuple[dict, dict, dict, dict]:
        """Split ``options`` into data, training, Trainer and model options."""
        if "split" in options:
            raise ConfigError("split is an argument of fit(), not of the constructor: fit(data, split=...).")
        data, training, trainer, model = {}, {}, {}, {}
        for name, value in options.items():
            if name in _SHARED_OPTIONS:
                continue  # given to both the data module and the training config
            if name in _DATA_OPTIONS:
                data[name] = value
            elif name in _TRAINING_OPTIONS:
                training[name] = value
            elif name in _TRAINER_OPTIONS:
                trainer[name] = value
            else:
                model[name] = value
        return data, training, trainer, model

    def _check_model_options(self) -> None:
        """Build the model once on probe sizes: unknown names and bad values fail here, not at fit."""
        if not self._model_options:
            return
        window = self._window
        try:
            with _private_rng():
                build_model(self._model_name, _probe_spec(window["seq_len"], window["label_len"], window["pred_len"]),
                            **self._model_options)
        except ConfigError as error:
            known = model_option_names(self._model_name)
            unknown = sorted(name for name in self._model_options if name not in known)
            if not unknown:
                raise
            raise ConfigError(
                f"unknown option(s) {unknown} for Forecaster({self._model_name!r}). Valid options: model "
                f"{list(known) or '(none)'}; data {sorted((*_DATA_OPTIONS, *_SHARED_OPTIONS))}; training "
                f"{sorted((*_TRAINING_OPTIONS, *_SHARED_OPTIONS))}; quantiles, progress; any "
                "lightning.Trainer argument (limit_val_batches, logger, callbacks, ...)."
            ) from error

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def model_options(self) -> dict[str, Any]:
        """The model's config options given to the constructor."""
        return dict(self._model_options)

    @property
    def training(self) -> TrainingConfig:
        return self._training

    @property
    def seed(self) -> int:
        return self._training.seed

    @property
    def quantile_levels(self) -> tuple[float, ...]:
        return self._quantiles

    @property
    def config(self) -> dict[str, Any]:
        """Everything needed to rebuild this forecaster (unfitted), as JSON types."""
        training = dataclasses.asdict(self._training)
        extra = training.pop("extra_trainer_options")
        kept = {name: value for name, value in extra.items() if _is_jsonable(value)}
        if kept.keys() != extra.keys():
            logger.info("Trainer options %s are not saved (no JSON form).", sorted(extra.keys() - kept.keys()))
        return {
            "model": self._model_name,
            "recipe": self._recipe.name,
            "model_options": _jsonable(self._model_options, "model_options"),
            "data": _jsonable({**self._window, **self._data_options}, "data"),
            "training": _jsonable({**training, "extra_trainer_options": kept}, "training"),
            "quantiles": list(self._quantiles),
            "progress": self._progress,
        }

    @property
    def is_fitted(self) -> bool:
        return self._module is not None

    @property
    def module(self) -> ForecastModule:
        """The trained :class:`~forecast.module.ForecastModule` (after ``fit`` or ``load``)."""
        return self._require_fitted()

    @property
    def model(self) -> ForecastModel:
        """The trained model (after ``fit`` or ``load``)."""
        return self._require_fitted().model

    @property
    def datamodule(self) -> WindowDataModule | None:
        """The data module of the last ``fit`` (``None`` for a loaded forecaster)."""
        return self._datamodule

    @property
    def input_columns(self) -> list[Hashable]:
        return list(self._require_state().input_columns)

    @property
    def output_columns(self) -> list[Hashable]:
        return list(self._require_state().output_columns)

    @property
    def freq(self) -> str:
        return self._require_state().freq

    def __repr__(self) -> str:
        window = ", ".join(f"{key}={value!r}" for key, value in self._window.items())
        options = "".join(f", {key}={value!r}" for key, value in self._model_options.items())
        state = f"fitted on {self._fitted.dataset}" if self._fitted is not None else "not fitted"
        return f"Forecaster({self._model_name!r}, {window}{options}, seed={self.seed}) [{state}]"

    def _require_fitted(self) -> ForecastModule:
        if self._module is None:
            raise ConfigError("this Forecaster is not fitted. Fix: call fit(data) or Forecaster.load(path) first.")
        return self._module

    @property
    def history(self) -> pd.DataFrame:
        """One row per epoch of the last ``fit`` (``epoch``, ``train_loss``, ``val_loss``, ``learning_rate``,
        ``seconds``), a resumed run's earlier epochs included; empty for a model that does not train
        and for a loaded forecaster."""
        return self._run.history.copy()

    @property
    def last_fit(self) -> TrainedRun:
        """What the last ``fit`` left: its history, training seconds, epochs, best epoch and validation
        loss, and the Lightning trainer (``None`` when nothing was trained, or for a loaded forecaster)."""
        return self._run

    @property
    def fitted_state(self) -> FittedState:
        """The fitted data state (variables, frequency, windows, train-row scaler) that scales any data
        this forecaster reads, e.g. ``WindowDataModule(other, ..., fitted=fc.fitted_state)``."""
        return self._require_state()

    def _require_state(self) -> FittedState:
        self._require_fitted()
        assert self._fitted is not None
        return self._fitted

    def _require_datamodule(self, action: str) -> WindowDataModule:
        self._require_fitted()
        if self._datamodule is None:
            raise ConfigError(
                f"{action} needs the data the model was fitted on, and a loaded Forecaster holds none. Fix: "
                "pass the data explicitly (predict(df), evaluate(data)) or fit again."
            )
        return self._datamodule

    # ---------------------------------------------------------------------- building

    def _new_datamodule(self, data: Table, split: Any,
                        **options: Any) -> WindowDataModule:
        training = self._training
        return WindowDataModule(
            data, **self._window, batch_size=training.batch_size, num_workers=training.num_workers,
            split=split, seed=training.seed, **self._data_options, **options,
        )

    def _new_module(self, model: ForecastModel, fitted: FittedState | None) -> ForecastModule:
        training = self._training
        return ForecastModule(
            model, loss=training.loss, learning_rate=training.learning_rate, lr_schedule=training.lr_schedule,
            weight_decay=training.weight_decay,
            fitted=fitted,
        )

    def _run_identity(self, config: Mapping[str, Any], fitted: Mapping[str, Any]) -> dict[str, Any]:
        """What must match for a checkpoint to be resumed: model, options, data and variables."""
        return {"model": config["model"], "model_options": config["model_options"], "data": config["data"],
                "input_columns": fitted["input_columns"], "output_columns": fitted["output_columns"]}

    def _prepare_run_dir(self, run_dir: Path, fitted: FittedState, split: Any, resume: bool) -> Path | None:
        """Check that a resumable checkpoint belongs to this configuration; write the config."""
        checkpoint = last_checkpoint(run_dir) if resume else None
        current = self._run_identity(self.config, fitted.state_dict()["fitted"])
        if checkpoint is not None:
            if not (run_dir / CONFIG_FILE).is_file():
                raise ConfigError(
                    f"{run_dir} holds a checkpoint but no {CONFIG_FILE}, so it cannot be checked against this "
                    "Forecaster. Fix: use another run_dir, or resume=False to train from scratch."
                )
            stored = _read_json(run_dir / CONFIG_FILE)
            previous = self._run_identity(stored, stored.get("fitted", {}))
            differing = sorted(key for key in current if previous.get(key) != current[key])
            if differing:
                raise ConfigError(
                    f"{run_dir} holds a run with different {differing}; it cannot be resumed by this Forecaster. "
                    "Fix: use another run_dir, or resume=False to train from scratch there."
                )
            logger.info("resuming from %s", checkpoint)
        run_dir.mkdir(parents=True, exist_ok=True)
        self._write_config(run_dir, fitted, split)
        return checkpoint

    def _write_config(self, path: Path, fitted: FittedState, split: Any) -> None:
        state = fitted.state_dict()
        _write_json(path / CONFIG_FILE, {"format": FORMAT, "format_version": FORMAT_VERSION,
                                         "package_version": forecast.__version__, **self.config,
                                         "split": _jsonable(split, "split"),
                                         "fitted": _jsonable(state["fitted"], "fitted")})
        _write_json(path / SCALER_FILE, _jsonable(state["scaler"], "scaler"))

    # --------------------------------------------------------------------------- fit

    def fit(
        self,
        data: Table,
        *,
        split: Any = None,
        run_dir: str | os.PathLike[str] | None = None,
        resume: bool = True,
    ) -> Forecaster:
        """Train on a DataFrame, a Series, a CSV path or a registered dataset name; returns ``self``.

        ``split``: ``None`` gives a registered dataset its canonical protocol and other
        data 70/10/20 by rows; or a protocol name, three fractions, three row ends, or two
        timestamps where val and test start, e.g. ``("2023-07-01", "2023-10-01")`` (see
        :class:`~forecast.data.DataConfig`). ``data`` may also be a DataFrame indexed by
        its timestamps or a ``pd.Series``. Everything is seeded from ``seed``.
        The weights of the epoch with the lowest validation loss are kept. Models
        without trainable parameters (``naive``) and ``max_epochs=0`` skip training.

        With ``run_dir``: a checkpoint every epoch under ``run_dir/checkpoints``
        (``last.ckpt`` and the best), the curves in ``run_dir/lightning_logs`` (unless a
        ``logger`` option says otherwise), and the saved forecaster (as :meth:`save`) in
        ``run_dir``. With ``resume`` (default), a run killed earlier continues from its
        ``last.ckpt``, after checking that it was made with the same model, options
        and variables.
        """
        L.seed_everything(self.seed, workers=True, verbose=False)
        datamodule = self._new_datamodule(data, split)
        datamodule.setup()
        fitted = datamodule.fitted
        model = build_model(self._model_name, DataSpec.from_datamodule(fitted), **self._model_options)
        module = self._new_module(model, fitted)
        run_path = Path(run_dir) if run_dir is not None else None
        checkpoint = self._prepare_run_dir(run_path, fitted, split, resume) if run_path is not None else None
        run = fit_best(module, datamodule, self._training, run_path, callbacks=self._callbacks,
                       progress=self._progress, resume=checkpoint is not None)
        self._module, self._datamodule, self._fitted, self._data, self._split = module, datamodule, fitted, data, split
        self._run = run
        module.eval()
        # under DDP one process saves
        if run_path is not None and (run.trainer is None or run.trainer.is_global_zero):
            self.save(run_path)
        return self

    # ---------------------------------------------------------------------- evaluate

    def evaluate(self, data: Table | None = None, *, split: Any = None, windows: str = "test",
                 detail: bool = False) -> pd.DataFrame:
        """Score every window of a split (test by default).

        Returns a metric x scale table (:func:`forecast.metrics.pivot_report`): MSE, MAE,
        RMSE on the standardized and the original scale, MAPE and MSPE in original units
        only, and rho-risks and coverage for probabilistic models, all horizons and
        variables pooled; ``attrs["n_windows"]`` counts the windows. ``detail=True``
        returns the long report (:func:`forecast.metrics.report`) instead, with columns
        ``scale``, ``metric``, ``horizon`` (``"all"`` or 1..P), ``variable``, ``value``,
        ``n_windows``, for per-horizon and per-variable breakdowns.

        Default: the fitted data's test windows. ``windows='val'`` (or ``'train'``) scores
        that split's windows instead: e.g. a probabilistic model's interval coverage on
        validation, checked before looking at test. ``data`` (with ``split``, default the
        fit's) scores other data, e.g. after ``load``, scaled with the fitted state (never
        refitted); it must hold the fitted variables, else
        :class:`~forecast.errors.UnknownColumnError`.
        """
        require_choice("windows", windows, SPLIT_NAMES)
        module = self._require_fitted()
        if data is None:
            datamodule = self._require_datamodule("evaluate()")
            if windows != datamodule.test_split:
                datamodule = datamodule.with_options(test_split=windows)
        else:
            datamodule = self._new_datamodule(data, split if split is not None else self._split, test_split=windows,
                                              fitted=self._require_state())
        test_windows(module, datamodule, self._training, callbacks=self._callbacks, progress=self._progress)
        assert module.test_report is not None
        return module.test_report.copy() if require_bool("detail", detail) else pivot_report(module.test_report)

    # ---------------------------------------------------------------------- forecast

    def _future_input(self, df: Table | None) -> FutureBatch:
        if df is None:
            return self._require_datamodule("predict() without df").future_batch()
        return self._require_state().future_batch(_resolve_table(df))

    @property
    def _date_column(self) -> Hashable | None:
        """The name of the fitted data's time axis (its column, or its DatetimeIndex's name)."""
        return self._require_state().prepare_options["date_column"]

    def _forecast(self, batch: Mapping[str, torch.Tensor]) -> tuple[np.ndarray, dict[float, np.ndarray]]:
        """Point forecast ``[B, P, C_out]`` and quantiles ``{level: [B, P, C_out]}`` in original units."""
        model, fitted = self.model, self._require_state()
        with _inference(model, batch) as (x, x_mark, y_mark):
            point = model(x, x_mark, y_mark)  # [B, P, C_out]
            quantiles = self._model_quantiles(model, x, x_mark, y_mark)
        original = {level: fitted.to_original(values.cpu().numpy()) for level, values in quantiles.items()}
        point_original = fitted.to_original(point.cpu().numpy().astype(np.float64))
        if not all(np.isfinite(values).all() for values in (point_original, *original.values())):
            raise NonFiniteForecastError(
                f"{self._model_name} forecasts NaN or inf for this input. Fix: check the input for extreme "
                "values; if every input does this, the training diverged: fit again with a lower learning_rate."
            )
        return point_original, original

    def _model_quantiles(self, model: ForecastModel, x: torch.Tensor, x_mark: torch.Tensor,
                         y_mark: torch.Tensor) -> dict[float, torch.Tensor]:
        """``{level: [B, P, C_out]}`` on the model's scale from a probabilistic model, else ``{}``.

        Sampling runs on a private RNG seeded with ``seed``, so the same forecaster gives the
        same quantiles every time.
        """
        levels = self._quantiles
        if not levels or not model.probabilistic:
            return {}
        with _private_rng(self.seed, x.device):
            result = model.quantiles(x, x_mark, y_mark, levels)
        return {level: result[level].to(torch.float64) for level in levels}

    def _forecast_frame(self, batch: Mapping[str, torch.Tensor], index: pd.DatetimeIndex) -> pd.DataFrame:
        point, quantiles = self._forecast(batch)
        columns = self.output_columns
        frame = pd.DataFrame(point[0], index=index, columns=columns)  # [P, C_out]
        for position, column in enumerate(columns):
            for level, values in quantiles.items():
                frame[quantile_column(column, level)] = values[0, :, position]
        return frame

    def predict(self, df: Table | None = None) -> pd.DataFrame:
        """Forecast the ``pred_len`` steps after the last row of ``df`` (default: the fitted data).

        Returns a frame indexed by the future timestamps (continuing the series'
        frequency, named like the date column), one column per output variable in
        original units, and, when the model forecasts distributions, the quantile
        columns ``f"{variable}_q{level:g}"`` (e.g. ``OT_q0.1``). Inputs are scaled with
        the scaler fitted on the training rows (never refitted). ``df`` must hold the
        fitted variables, else :class:`~forecast.errors.UnknownColumnError`.
        """
        self._require_fitted()
        future = self._future_input(df)
        return self._forecast_frame(future.batch, future.index)

    def _window_input(self, window: int, split: str) -> tuple[dict[str, torch.Tensor], np.ndarray, np.ndarray]:
        """One dataset window as a batch of one, with its lookback and label+horizon timestamps."""
        datamodule = self._require_datamodule("a window of the data")
        dataset = datamodule.dataset(split)
        if not -len(dataset) <= window < len(dataset):
            raise ConfigError(f"window={window} is out of range: the {split} split has {len(dataset)} windows.")
        window %= len(dataset)
        item = dataset[window]
        x_dates, y_dates = datamodule.window_timestamps(split)
        return {key: value.unsqueeze(0) for key, value in item.items()}, x_dates[window], y_dates[window]

    def _window_frames(self, window: int, split: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        """History, forecast and truth frames (original units) of one window of a split."""
        batch, x_dates, y_dates = self._window_input(window, split)
        fitted, label_len = self._require_state(), self._window["label_len"]
        c_out = len(fitted.output_columns)
        columns = self.output_columns
        history = fitted.to_original(batch["x"][0, :, -c_out:].numpy().astype(np.float64))  # [L, C_out]
        truth = fitted.to_original(batch["y"][0, label_len:, -c_out:].numpy().astype(np.float64))  # [P, C_out]
        index = pd.DatetimeIndex(y_dates[label_len:], name=self._date_column)
        return (pd.DataFrame(history, index=pd.DatetimeIndex(x_dates), columns=columns),
                self._forecast_frame(batch, index),
                pd.DataFrame(truth, index=index, columns=columns))

    def _history(self, df: Table | None, rows: int) -> pd.DataFrame:
        """The last ``rows`` rows of the output variables, original units, indexed by timestamp."""
        fitted = self._require_state()
        table = _resolve_table(df) if df is not None else _resolve_table(self._data)  # type: ignore[arg-type]
        series = prepare_series(table, **fitted.prepare_options)
        c_out = len(fitted.output_columns)
        return pd.DataFrame(series.values[-rows:, -c_out:], index=series.dates[-rows:], columns=self.output_columns)

    # -------------------------------------------------------------------------- plots

    def plot(
        self,
        df: Table | None = None,
        *,
        window: int | None = None,
        split: str = "test",
        columns: Sequence[Hashable] | None = None,
        history: int | None = None,
    ) -> Figure:
        """A Figure of the forecast with its history (and quantile bands, if any).

        Default: the real future after the last row of ``df`` (default the fitted
        data) with the last ``history`` rows (default ``seq_len``). With ``window=i``:
        the forecast of window ``i`` of the fitted data's ``split`` against the truth,
        with its lookback as history. ``columns`` picks variables (default all outputs).
        """
        self._require_fitted()
        if window is not None:
            if df is not None:
                raise ConfigError("plot() takes df or window, not both: a window comes from the fitted data.")
            past, future, truth = self._window_frames(window, split)
            title = f"{self._model_name}: {split} window {window}"
        else:
            if df is None:
                self._require_datamodule("plot() without df")
            future = self.predict(df)
            past = self._history(df, history if history is not None else self._window["seq_len"])
            truth = None
            title = f"{self._model_name}: forecast of the next {self._window['pred_len']} steps"
        return plot_forecast(future, history=past, truth=truth, columns=columns, title=title)

    def attention_weights(
        self,
        df: Table | None = None,
        *,
        window: int | None = None,
        split: str = "test",
    ) -> list[Any]:
        """The encoder's attention weights, one entry per layer, for one input window.

        The input is the lookback before the real future of ``df`` (default the fitted
        data), or window ``window`` of ``split``. Entries are what each attention
        returns (see :mod:`forecast.layers.attention`): ``ProbSparseWeights`` for
        ``prob`` (plot with :func:`forecast.plotting.plot_probsparse`), a dense
        ``[1, H, L, S]`` tensor for ``full``, ``LogSparseWeights`` for ``logsparse``
        (both with :func:`forecast.plotting.plot_attention`). With independent channels
        (the ``improved`` recipe) the leading dimension is one row per output variable,
        ``C_out`` instead of 1. A model without attention (``dlinear``, the baselines) raises
        ConfigError.
        """
        model = self.model
        if window is not None:
            batch = self._window_input(window, split)[0]
        else:
            batch = self._future_input(df).batch
        with _inference(model, batch) as (x, x_mark, y_mark):
            return list(model.attention_weights(x, x_mark, y_mark))

    # ---------------------------------------------------------------- save and load

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the forecaster to directory ``path``; returns it.

        ``config.json`` (model name and options, data and training settings, the fitted
        variables, frequency and sizes), ``scaler.json`` (the train-row scaling
        statistics) and ``model.pt`` (the model's ``state_dict``). Other files in the
        directory (checkpoints) are left alone.
        """
        module, fitted = self._require_fitted(), self._require_state()
        directory = Path(path)
        directory.mkdir(parents=True, exist_ok=True)
        state = {name: tensor.detach().cpu() for name, tensor in module.model.state_dict().items()}
        torch.save(state, directory / WEIGHTS_FILE)
        self._write_config(directory, fitted, self._split)
        return directory

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Forecaster:
        """A forecaster written by :meth:`save` (or by ``fit(..., run_dir=path)``), ready to predict.

        The weights are read with ``torch.load(..., weights_only=True)`` onto the CPU: a file holding
        pickled code (or a damaged one) raises :class:`~forecast.errors.ConfigError`.
        """
        directory = Path(path)
        config = _read_json(directory / CONFIG_FILE)
        if config.get("format") != FORMAT or config.get("format_version") != FORMAT_VERSION:
            raise ConfigError(
                f"{directory / CONFIG_FILE} is not a Forecaster directory of format version {FORMAT_VERSION} "
                f"(found {config.get('format')!r} version {config.get('format_version')!r})."
            )
        if config["model"] not in MODELS:
            raise ConfigError(f"{directory}: model {config['model']!r} is not registered; known: {sorted(MODELS)}.")
        if not (directory / WEIGHTS_FILE).is_file():
            raise ConfigError(f"{directory / WEIGHTS_FILE} does not exist: the run never finished. Fix: fit again.")
        training = dict(config["training"])
        # Saved before recipes existed: the paper's settings were the only ones.
        forecaster = cls(config["model"], **config["data"], max_epochs=training.pop("max_epochs"),
                         seed=training.pop("seed"), recipe=config.get("recipe", "paper"),
                         quantiles=config["quantiles"], progress=config["progress"],
                         **config["model_options"], **training)
        fitted = FittedState.from_state_dict({"fitted": config["fitted"], "scaler": _read_json(directory / SCALER_FILE)})
        with _private_rng():  # the initial weights are overwritten; keep the caller's RNG as it was
            model = build_model(forecaster._model_name, DataSpec.from_datamodule(fitted), **forecaster._model_options)
        state = load_checkpoint(directory / WEIGHTS_FILE)  # refuses pickled code and damaged files
        if not isinstance(state, Mapping) or not all(isinstance(value, torch.Tensor) for value in state.values()):
            raise ConfigError(f"{directory / WEIGHTS_FILE} is not a state_dict of tensors. Fix: save the forecaster "
                              "again.")
        try:
            model.load_state_dict(state)
        except RuntimeError as error:
            raise ConfigError(f"{directory / WEIGHTS_FILE} does not fit the model in {CONFIG_FILE}: {error}") from error
        forecaster._module = forecaster._new_module(model, fitted).eval()
        forecaster._fitted = fitted
        forecaster._split = config.get("split")
        return forecaster
