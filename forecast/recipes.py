"""Named training recipes: the model options and training settings a run starts from.

Two recipes:

* ``paper``: the papers' own settings. The model configs' defaults are the papers'
  architectures (Informer2020's ``main_informer``, the LogSparse sizes), trained with
  Adam at 1e-4 halved every epoch, at most 6 epochs, patience 3, batch 32, MSE: the
  :class:`~forecast.training.TrainingConfig` defaults. The reproduction scripts and
  ``experiments/configs`` pin it.
* ``improved`` (the default of :class:`~forecast.Forecaster`, ``forecast fit`` and the
  experiment runner): every neural model but DLinear (the linear yardstick takes only the training)
  with reversible instance normalization, centred on
  a learned mix of each window's mean and last value that starts at the variable's
  persistence in the training windows (``revin_center="persistence"``), the channel mode and
  size that forecast best on the validation windows of ETTh1 and exchange_rate ``M`` 96→96
  (experiments/README.md, "Choosing the improved recipe", says how: on validation loss only), a
  linear map from each series' window to its horizon added to the network's forecast
  (``linear_skip``, :class:`~forecast.layers.blocks.LinearSkip`),
  Adam at 1e-3 halved every epoch for at most 10 epochs; after training, the share of the
  network's correction to RevIN's centre that is kept and a Gaussian head's scale, both fitted
  on the validation windows (``calibrate_correction``, ``calibrate_scale``). The share is kept only
  where the whole forecast beats the centre there by a one-sided Diebold-Mariano test at 5%
  (``correction_significance``), none otherwise; where the validation windows are one stretch, on
  the longest prefix of the horizon that the validation period holds twice.

Options given explicitly always win over the recipe's. A run's identity (results key,
run folder) holds the recipe's name, the model options after the recipe is applied, every
training setting that differs from the TrainingConfig defaults and every ``lightning.Trainer``
argument given but those that only log or show (:func:`training_differences`), and the data
options (:attr:`forecast.experiment.Experiment.data_text`), so two recipes of one model at one
window never collide and a smoke run never stands for the real one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from forecast.checks import did_you_mean
from forecast.errors import ConfigError

__all__ = ["DEFAULT_RECIPE", "NEUTRAL_TRAINER_ARGUMENTS", "POST_TRAINING_SETTINGS", "RECIPES", "Recipe",
           "RESULT_SETTINGS", "get_recipe", "resume_settings", "training_differences"]

DEFAULT_RECIPE = "improved"

# TrainingConfig fields that change what a run learns; the accelerator, workers and checkpointing do not. The
# processes do (devices, num_nodes, strategy: the effective batch is batch_size times their number), and so does
# compiling (another summation order, whose rounding a run's later epochs carry on).
RESULT_SETTINGS = ("max_epochs", "patience", "batch_size", "learning_rate", "lr_schedule", "loss",
                   "weight_decay", "precision", "limit_train_batches", "calibrate_scale", "calibrate_correction",
                   "correction_significance", "ema_decay", "devices", "num_nodes", "strategy", "compile_model",
                   "n_samples")
# The RESULT_SETTINGS applied after training (calibrate_on_validation, and the sample paths the test scores):
# runs that differ only in them train the same weights, so the experiment runner re-fits these on a finished run
# instead of training again.
POST_TRAINING_SETTINGS = ("calibrate_scale", "calibrate_correction", "correction_significance", "n_samples")


@dataclass(frozen=True)
class Recipe:
    """A name, training settings (TrainingConfig fields) and model options per registered model."""

    name: str
    description: str
    training: Mapping[str, Any] = field(default_factory=dict)
    model_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def options_for(self, model: str) -> dict[str, Any]:
        """The recipe's options of the registered model ``model`` (none for models it does not name, nor for a
        builder put in the place of a built-in one: they are the built-in model's options)."""
        from forecast.models import is_built_in

        return dict(self.model_options.get(model, {})) if model in self.model_options and is_built_in(model) else {}

    def apply(self, model: str, model_options: Mapping[str, Any],
              training: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(model options, training settings)`` of a run: the recipe's, overridden by those given."""
        return {**self.options_for(model), **model_options}, {**self.training, **training}


PAPER = Recipe(
    "paper",
    "The papers' settings: the model configs' defaults, Adam 1e-4 halved every epoch, at most 6 epochs, "
    "patience 3, batch 32, MSE.",
)

# Chosen on the validation windows of ETTh1 and exchange_rate M 96->96, seed 0 (experiments/README.md):
# independent channels, then the size, then RevIN's centre started at the training windows' persistence,
# then a linear skip from the window to the horizon.
_INFORMER = {"revin": True, "revin_center": "persistence", "channels": "independent", "d_model": 64, "n_heads": 4,
             "d_ff": 128, "linear_skip": True}
_LOGSPARSE = {"revin": True, "revin_center": "persistence", "channels": "independent", "d_model": 32, "n_heads": 4,
              "d_ff": 64, "n_layers": 2, "linear_skip": True}

IMPROVED = Recipe(
    "improved",
    "Reversible instance normalization on every neural model but DLinear, sizes and channel mode chosen on validation "
    "windows, Adam 1e-3 halved every epoch, at most 10 epochs, patience 3; after training, the share of the "
    "network's correction to RevIN's centre kept (none unless the correction beats the centre by a 5% test) and a "
    "Gaussian head's scale, both fitted on the validation windows.",
    training={"learning_rate": 1e-3, "max_epochs": 10, "calibrate_scale": True, "calibrate_correction": True,
              "correction_significance": 0.05},
    model_options={
        "informer": _INFORMER,
        "transformer": _INFORMER,
        "logsparse": _LOGSPARSE,
        "dlinear": {},
    },
)

RECIPES: dict[str, Recipe] = {recipe.name: recipe for recipe in (PAPER, IMPROVED)}


def get_recipe(name: object) -> Recipe:
    """The recipe called ``name``; ConfigError listing the recipes otherwise."""
    if not isinstance(name, str) or name not in RECIPES:
        raise ConfigError(f"unknown recipe {name!r}; choose one of {sorted(RECIPES)} ('paper': the papers' "
                          f"settings, 'improved': the default).{did_you_mean(name, RECIPES)}")
    return RECIPES[name]


# lightning.Trainer arguments that leave what a run learns alone: what it logs and shows. Every other
# Trainer argument a run is given (gradient_clip_val, accumulate_grad_batches, max_steps, ...) is part of it.
NEUTRAL_TRAINER_ARGUMENTS = ("logger", "enable_progress_bar", "enable_model_summary", "log_every_n_steps",
                             "profiler", "detect_anomaly")


def training_differences(training: Any) -> dict[str, Any]:
    """The result-changing settings of a TrainingConfig that differ from the TrainingConfig defaults,
    and under ``trainer`` the ``lightning.Trainer`` arguments given (``extra_trainer_options``) but the
    :data:`NEUTRAL_TRAINER_ARGUMENTS`.

    Part of a run's identity: a smoke run (``max_epochs=1``) never stands for the real run, nor a run
    with its gradients clipped for one without.
    """
    from forecast.training import TrainingConfig

    defaults = TrainingConfig()
    differences = {name: getattr(training, name) for name in RESULT_SETTINGS
                   if getattr(training, name) != getattr(defaults, name)}
    trainer = {name: value for name, value in sorted(training.extra_trainer_options.items())
               if name not in NEUTRAL_TRAINER_ARGUMENTS}
    if trainer:
        differences["trainer"] = trainer
    return differences


# What may change when a fit resumes its checkpoint and leave it the same run: more epochs (or steps), and the
# settings applied after training, which the resumed fit applies afresh when it ends.
RESUMABLE_CHANGES = ("max_epochs", "max_steps", *POST_TRAINING_SETTINGS)


def resume_settings(training: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of a saved run's ``training`` block (``ForecasterOptions.config()``) that a fit resuming its
    checkpoint must share: the :data:`RESULT_SETTINGS`, the seed and the learning Trainer arguments (as
    ``trainer.<name>``), but the :data:`RESUMABLE_CHANGES`. A resumed fit restores the optimizer's learning rate
    and the early stopper's patience from the checkpoint, so another value there would be ignored, and another
    batch size, seed or loss would make its remaining epochs another run's. Settings a folder saved before they
    existed read as their defaults."""
    from forecast.training import TrainingConfig

    defaults = asdict(TrainingConfig())
    bound = {name: training.get(name, defaults[name]) for name in (*RESULT_SETTINGS, "seed")
             if name not in RESUMABLE_CHANGES}
    trainer = training.get("extra_trainer_options", {})
    bound.update((f"trainer.{name}", value) for name, value in sorted(trainer.items())
                 if name not in (*NEUTRAL_TRAINER_ARGUMENTS, *RESUMABLE_CHANGES))
    return bound
