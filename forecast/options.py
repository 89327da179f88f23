"""``ForecasterOptions``: a :class:`~forecast.Forecaster`'s options, routed by name and checked.

The :class:`~forecast.Forecaster` keeps the fitted results; this keeps what it was asked for.
The constructor's window, seed and ``**options`` are laid over the named recipe's defaults and
routed by name: :class:`~forecast.data.DataConfig` fields go to the data,
:class:`~forecast.training.TrainingConfig` fields to training (``batch_size`` and
``num_workers`` to both), ``lightning.Trainer`` arguments to the trainer, and every other name
must be a field of the model's config. Every value is checked before any data is read. The
result builds the data module and the Lightning module a fit needs, and writes the JSON
configuration that a saved forecaster is rebuilt from.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback

from forecast.checks import did_you_mean, require_bool
from forecast.data import DataConfig, WindowDataModule
from forecast.data.fitted import FittedState
from forecast.data.io import Table
from forecast.errors import ConfigError
from forecast.metrics import DEFAULT_QUANTILES
from forecast.models import (MODELS, DataSpec, ForecastModel, build_model, checks_own_options, is_built_in,
                             model_config_class)
from forecast.models import model_options as model_option_fields
from forecast.module import ForecastModule
from forecast.predictor import checked_quantiles, is_jsonable, jsonable, private_rng, refuse_point_quantiles
from forecast.recipes import Recipe, get_recipe
from forecast.training import TrainingConfig

__all__ = ["MANAGED_TRAINER_ARGUMENTS", "ForecasterOptions", "refuse_point_quantiles"]

logger = logging.getLogger(__name__)

# Option routing. The window, variables and seed are the constructor's own arguments,
# the split is fit's and the windows to score evaluate's; batch size and workers are both
# a loader and a training setting.
_OWN_ARGUMENTS = ("seq_len", "label_len", "pred_len", "features", "target", "max_epochs", "seed")
_SHARED_OPTIONS = ("batch_size", "num_workers")
_DATA_OPTIONS = tuple(f.name for f in dataclasses.fields(DataConfig)
                      if f.name not in (*_OWN_ARGUMENTS, *_SHARED_OPTIONS, "split", "test_split"))
# How fit(data, ...) may say to read its data: the columns' roles, a panel's included.
_READING_OPTIONS = ("target", "date_column", "id_column", "past_covariates", "future_covariates",
                    "static_covariates", "freq", "fill_nan", "columns")
# Data options that only load the windows, and training settings that only place the computation (worker
# processes, device, precision): a fitted model scored with other values is the same model.
LOADING_OPTIONS = ("eval_batch_size", "drop_last_train", "predict_split", "pin_memory", "persistent_workers")
SCORING_DEVICE = ("num_workers", "accelerator", "devices", "precision")
_TRAINING_OPTIONS = tuple(f.name for f in dataclasses.fields(TrainingConfig)
                          if f.name not in (*_OWN_ARGUMENTS, *_SHARED_OPTIONS))
# run_dir decides checkpoints and the root directory; callbacks are added, not replaced.
MANAGED_TRAINER_ARGUMENTS = ("self", "default_root_dir", "enable_checkpointing", "callbacks")
_TRAINER_OPTIONS = tuple(
    name for name in inspect.signature(L.Trainer.__init__).parameters
    if name not in (*MANAGED_TRAINER_ARGUMENTS, *_OWN_ARGUMENTS, *_SHARED_OPTIONS, *_TRAINING_OPTIONS)
)


# ------------------------------------------------------------------------------ helpers


def _interactive() -> bool:
    """Whether a person is likely watching: a terminal or a Jupyter kernel, outside CI."""
    if os.environ.get("CI"):
        return False
    return "ipykernel" in sys.modules or sys.stderr.isatty()


def _probe_spec(seq_len: int, label_len: int, pred_len: int) -> DataSpec:
    """Sizes for building a model only to check its options (one variable, four timeF features, a cycle of one)."""
    return DataSpec(seq_len=seq_len, label_len=label_len, pred_len=pred_len, c_in=1, c_out=1,
                    n_time_features=4, season=1)


def _route(options: Mapping[str, Any]) -> tuple[dict, dict, dict, dict]:
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


def _check_model_options(model: str, window: Mapping[str, Any], model_options: Mapping[str, Any],
                         recipe: Recipe, given: Sequence[str], levels: tuple[float, ...]) -> None:
    """Build the model once on probe sizes: unknown names and bad values fail here, not at fit, and so do quantile
    ``levels`` for a model that forecasts points. A refusal that names an option the recipe set, not ``given``,
    says so: the user never wrote it."""
    if not model_options and levels in ((), DEFAULT_QUANTILES):
        return
    try:
        with private_rng():
            probe = build_model(model, _probe_spec(window["seq_len"], window["label_len"], window["pred_len"]),
                                **model_options)
    except (ConfigError, TypeError) as error:
        if checks_own_options(model):  # registered at run time: its builder's refusal, as it worded it
            if isinstance(error, ConfigError):
                raise
            raise ConfigError(
                f"Forecaster({model!r}): the model's builder refused the options {sorted(model_options)} ({error}). "
                "Every option that is not a data, training or lightning.Trainer option goes to the model. Fix: check "
                "those names (a misspelt Trainer option reaches the model), or give the options the model takes."
            ) from error
        if isinstance(error, TypeError):  # a bug inside a model given only its own options
            raise
        known = model_option_fields(model)
        fixed = model_config_class(model)[1]
        unknown = sorted(name for name in model_options if name not in known and name not in fixed)
        if not unknown:
            implied = {name: value for name, value in recipe.options_for(model).items()
                       if name not in given and re.search(rf"\b{name}\b", str(error))}
            if implied:
                raise ConfigError(f"{error} ({', '.join(f'{name}={value!r}' for name, value in implied.items())} "
                                  f"came from recipe {recipe.name!r}: pass it to Forecaster(...) to override it, or "
                                  "recipe='paper')") from error
            raise
        valid = (*known, *_DATA_OPTIONS, *_SHARED_OPTIONS, *_TRAINING_OPTIONS, "max_epochs", "seed", "recipe",
                 "quantiles", "progress")
        hints = "".join(did_you_mean(name, valid) for name in unknown)
        raise ConfigError(
            f"unknown option(s) {unknown} for Forecaster({model!r}).{hints} Valid options: model "
            f"{list(known) or '(none)'}; data {sorted((*_DATA_OPTIONS, *_SHARED_OPTIONS))}; training "
            f"{sorted((*_TRAINING_OPTIONS, *_SHARED_OPTIONS))}; quantiles, progress; any "
            "lightning.Trainer argument (limit_val_batches, logger, callbacks, ...)."
        ) from error
    refuse_point_quantiles(model, levels, probe.probabilistic)
    if is_built_in(model) and model_config_class(model)[0] is not None:  # it keeps its options as its config
        _refuse_idle_options(model, model_options, probe.config, recipe, given)


# Model options the others can leave with nothing to do: each one's reason, given the built model's config, and the
# fix besides leaving it out.
_IDLE_WHEN: dict[str, tuple[Callable[[Any], str | None], str]] = {
    "revin_center": (lambda config: None if config.revin else "reversible instance normalization is off (revin=False)",
                     "pass revin=True"),
    "factor": (lambda config: None if "prob" in (config.attention, config.decoder_attention or config.attention)
               else "no attention is ProbSparse, whose sampling factor it is",
               "choose ProbSparse attention (model 'informer', attention='prob')"),
    "e_layers": (lambda config: None if config.stack is None else f"stack={config.stack} sets each encoder's layers",
                 "leave stack out"),
    "min_scale": (lambda config: None if config.head == "gaussian" else "the point head has no scale (head='point')",
                  "pass head='gaussian'"),
    "series_embedding": (lambda config: None if config.channels == "independent"
                         else "channels='joint' runs one sequence per window, with no series to tell apart",
                         "pass channels='independent'"),
}


def _refuse_idle_options(model: str, model_options: Mapping[str, Any], config: Any, recipe: Recipe,
                         given: Sequence[str]) -> None:
    """ConfigError for a model option the others leave idle (:data:`_IDLE_WHEN`, judged on ``config``, the built
    model's). Refused only where it was given and differs from what the recipe (else the model's config) sets: a CLI
    config carries every option, and ``revin=False`` alone under a recipe that centres its RevIN must keep working."""
    defaults = dataclasses.asdict(config.__class__())
    for option, (idle, fix) in _IDLE_WHEN.items():
        if option not in given or option not in model_option_fields(model):
            continue
        reason = idle(config)
        if reason and model_options[option] != recipe.options_for(model).get(option, defaults[option]):
            raise ConfigError(f"{option}={model_options[option]!r} does nothing here: {reason}. Fix: {fix}, or "
                              f"leave {option} out.")


# --------------------------------------------------------------------- ForecasterOptions


@dataclasses.dataclass(frozen=True, eq=False)
class ForecasterOptions:
    """A Forecaster's options after routing (:meth:`route`), each checked; a new one for other options.

    ``window`` holds ``seq_len``, ``label_len``, ``pred_len``, ``features`` and ``target``;
    ``data`` the other :class:`~forecast.data.DataConfig` options given (batch size, workers
    and seed come from ``training``); ``model_options`` the fields of the model's config;
    ``callbacks`` the Lightning callbacks added to the trainer (never saved).
    """

    model: str
    recipe: Recipe
    window: dict[str, Any]
    data: dict[str, Any]
    training: TrainingConfig
    model_options: dict[str, Any]
    quantiles: tuple[float, ...]
    progress: bool
    callbacks: list[Callback]

    @classmethod
    def route(cls, model: str, window: Mapping[str, Any], max_epochs: int | None, seed: int, *, recipe: str,
              quantiles: Sequence[float], progress: bool | None, options: Mapping[str, Any]) -> ForecasterOptions:
        """The :class:`~forecast.Forecaster` constructor's arguments over recipe ``recipe``'s defaults,
        routed and checked; ConfigError names an unknown model, option or a bad value."""
        if model not in MODELS:
            raise ConfigError(f"unknown model {model!r}; choose one of {sorted(MODELS)}.{did_you_mean(model, MODELS)}")
        chosen = get_recipe(recipe)
        # The recipe's training settings and model options, beneath those given (their names never overlap).
        given, options = tuple(options), {**chosen.training, **chosen.options_for(model), **options}
        if max_epochs is None:
            max_epochs = options.pop("max_epochs", TrainingConfig.max_epochs)
        else:
            options.pop("max_epochs", None)
        levels = checked_quantiles(quantiles)
        progress = _interactive() if progress is None else require_bool("progress", progress)
        callbacks = list(options.pop("callbacks", None) or [])
        data_options, training_options, trainer_options, model_options = _route(options)
        shared = {name: options[name] for name in _SHARED_OPTIONS if name in options}
        window = dict(window)
        # Validates the window, variables and data options before any data is read.
        DataConfig(**window, seed=seed, **shared, **data_options)
        extra = {**dict(training_options.pop("extra_trainer_options", None) or {}), **trainer_options}
        managed = sorted(set(extra) & set(MANAGED_TRAINER_ARGUMENTS))
        if managed:
            raise ConfigError(
                f"Trainer options {managed} are managed by the Forecaster: checkpoints and their directory "
                "follow fit(run_dir=...), and callbacks=[...] is a constructor option of its own."
            )
        training = TrainingConfig(max_epochs=max_epochs, seed=seed, **shared, **training_options,
                                  extra_trainer_options=extra)
        _check_model_options(model, window, model_options, chosen, given, levels)
        routed = cls(model, chosen, window, data_options, training, model_options, levels, progress, callbacks)
        routed.new_module(ForecastModel(), None)  # validates loss, learning_rate and lr_schedule
        return routed

    def with_reading(self, reading: Mapping[str, Any]) -> ForecasterOptions:
        """These options with ``fit``'s reading options (``target``, ``date_column``, ...) in place of the
        constructor's; ConfigError for another name or a bad value."""
        unknown = sorted(set(reading) - set(_READING_OPTIONS))
        if unknown:
            raise ConfigError(f"fit() takes the data-reading options {list(_READING_OPTIONS)}, not {unknown}; "
                              "pass other options to Forecaster(...).")
        window = {**self.window, **{name: reading[name] for name in ("target",) if name in reading}}
        data_options = {**self.data, **{name: value for name, value in reading.items() if name != "target"}}
        DataConfig(**window, seed=self.training.seed, **data_options)
        return dataclasses.replace(self, window=window, data=data_options)

    def with_scoring(self, other: ForecasterOptions) -> ForecasterOptions:
        """These options with ``other``'s settings that only load the windows (:data:`LOADING_OPTIONS`) and place
        the computation (:data:`SCORING_DEVICE`): what a fitted model is scored with, which never changes the
        model, so a run is scored as its config says however it was saved."""
        data = {name: value for name, value in self.data.items() if name not in LOADING_OPTIONS}
        data.update({name: value for name, value in other.data.items() if name in LOADING_OPTIONS})
        training = dataclasses.replace(self.training, **{name: getattr(other.training, name)
                                                         for name in SCORING_DEVICE})
        return dataclasses.replace(self, data=data, training=training)

    def config(self) -> dict[str, Any]:
        """Everything needed to rebuild the forecaster (unfitted), as JSON types; Trainer options without
        a JSON form are left out (logged)."""
        training = dataclasses.asdict(self.training)
        extra = training.pop("extra_trainer_options")
        kept = {name: value for name, value in extra.items() if is_jsonable(value)}
        if kept.keys() != extra.keys():
            logger.info("Trainer options %s are not saved (no JSON form).", sorted(extra.keys() - kept.keys()))
        return {
            "model": self.model,
            "recipe": self.recipe.name,
            "model_options": jsonable(self.model_options, "model_options"),
            "data": jsonable({**self.window, **self.data}, "data"),
            "training": jsonable({**training, "extra_trainer_options": kept}, "training"),
            "quantiles": list(self.quantiles),
            "progress": self.progress,
        }

    # ---------------------------------------------------------------------- building

    def new_datamodule(self, data: Table, split: Any, **options: Any) -> WindowDataModule:
        """A data module of ``data`` with these options; ``options`` adds data module arguments (``fitted``, ...)."""
        training = self.training
        return WindowDataModule(
            data, **self.window, batch_size=training.batch_size, num_workers=training.num_workers,
            split=split, seed=training.seed, **self.data, **options,
        )

    def new_module(self, model: ForecastModel, fitted: FittedState | None) -> ForecastModule:
        """``model`` in a :class:`~forecast.module.ForecastModule` with these training settings."""
        training = self.training
        return ForecastModule(
            model, loss=training.loss, learning_rate=training.learning_rate, lr_schedule=training.lr_schedule,
            weight_decay=training.weight_decay,
            fitted=fitted, n_samples=training.n_samples, quantiles=self.quantiles,
        )
