"""YAML run configs: one file names a model, its options, the data and the training.

    model:                     # a registered model and the fields of its config dataclass
      name: informer
      d_model: 512
      factor: 3
    data:                      # a registered dataset or a CSV path, then DataConfig fields
      dataset: ETTh1
      features: M
      seq_len: 48
      label_len: 48
      pred_len: 24
      batch_size: 32
    trainer:                   # TrainingConfig fields and any lightning.Trainer argument
      max_epochs: 6
      learning_rate: 1.0e-4
      accelerator: auto
    seed: 0
    recipe: improved           # optional: the named recipe the options start from (forecast.recipes)
    run_dir: runs/etth1        # optional: checkpoints and the saved forecaster

Files are read with ``yaml.safe_load`` (no Python objects). Several files merge in
order, and every option can be overridden on the command line as ``--section.key
value`` (or ``--section.key=value``, or ``--seed 1`` at the top level); values are read
as YAML, so ``--trainer.max_epochs 1`` is an integer and ``--model.stack [3,2,1]`` a
list. Unknown sections and keys fail with the list of valid ones; values are checked by
the typed configs they feed (``InformerConfig``, ``DataConfig``, ``TrainingConfig``).

A :class:`RunConfig` builds a :class:`~forecast.Forecaster` (the console script's
``fit``/``validate``/``test``/``predict``) or an :class:`~forecast.experiment.Experiment`
(``forecast sweep``), so both routes train exactly what the file says.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from forecast import datasets as registry
from forecast.checks import require_bool, require_int
from forecast.errors import ConfigError
from forecast.recipes import DEFAULT_RECIPE, get_recipe

__all__ = [
    "CONFIG_NAME",
    "RunConfig",
    "apply_overrides",
    "data_option_names",
    "load_config",
    "merge",
    "parse_overrides",
    "read_yaml",
    "trainer_option_names",
]

SECTIONS = ("model", "data", "trainer")
TOP_LEVEL = ("seed", "recipe", "run_dir", "quantiles", "progress")
# Where `forecast fit` and `forecast sweep` keep run folders unless told otherwise: one scheme for both.
DEFAULT_RUNS_DIR = Path("runs")
# Benchmark config files are named <model>_<features>_<pred_len>.yaml, in a folder per dataset.
CONFIG_NAME = re.compile(r"^(?P<model>.+)_(?P<features>M|S|MS)_(?P<pred_len>\d+)$")

# The window and variables an Experiment holds as its own fields; the rest of `data` are data options.
_WINDOW = ("seq_len", "label_len", "pred_len", "features", "target", "time_encoding")
_WINDOW_DEFAULTS = {"seq_len": 96, "label_len": 48, "pred_len": 24, "features": "M", "time_encoding": "timeF"}
# Loader settings that are also training settings; they live in `data`, like a LightningDataModule's.
_LOADER = ("batch_size", "num_workers")
# Options the Forecaster sets itself (checkpoints follow run_dir; callbacks are Python objects).
_MANAGED_TRAINER = ("self", "default_root_dir", "enable_checkpointing", "callbacks")


@functools.lru_cache(maxsize=None)
def data_option_names() -> tuple[str, ...]:
    """Keys of the ``data`` section: ``dataset``, ``split`` and the DataConfig fields (the seed is top-level;
    the windows to score are ``forecast test --windows``)."""
    from forecast.data import DataConfig

    return ("dataset", "split", *(f.name for f in dataclasses.fields(DataConfig)
                                  if f.name not in ("seed", "split", "test_split")))


@functools.lru_cache(maxsize=None)
def trainer_option_names() -> tuple[str, ...]:
    """Keys of the ``trainer`` section: TrainingConfig fields, then ``lightning.Trainer`` arguments."""
    import lightning as L

    from forecast.training import TrainingConfig

    training = [f.name for f in dataclasses.fields(TrainingConfig)
                if f.name not in ("seed", "extra_trainer_options", *_LOADER)]
    trainer = [name for name in inspect.signature(L.Trainer.__init__).parameters
               if name not in (*_MANAGED_TRAINER, *training, *_LOADER)]
    return (*training, *trainer)


# ----------------------------------------------------------------------------- reading


def read_yaml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A YAML mapping from ``path`` (``yaml.safe_load``); ConfigError naming the file otherwise."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist.")
    try:
        content = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ConfigError(f"{path} is not valid YAML: {error}") from error
    if content is None:
        return {}
    if not isinstance(content, dict):
        raise ConfigError(f"{path} must hold a mapping of sections ({', '.join((*SECTIONS, *TOP_LEVEL))}), "
                          f"not a {type(content).__name__}.")
    return content


def merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """``update`` merged into a copy of ``base``; nested mappings merge key by key."""
    merged = copy.deepcopy(dict(base))
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _parse_value(text: str, name: str) -> Any:
    try:
        return yaml.safe_load(text) if text != "" else None
    except yaml.YAMLError as error:
        raise ConfigError(f"--{name} {text!r} is not a valid YAML value: {error}") from error


def parse_overrides(tokens: Sequence[str]) -> list[tuple[str, Any]]:
    """Command-line overrides as ``(dotted.key, value)`` pairs, values read as YAML.

    Accepts ``--model.d_model 64``, ``--model.d_model=64`` and ``model.d_model=64``;
    option names may use ``-`` for ``_`` (``--trainer.max-epochs``).
    """
    pairs: list[tuple[str, Any]] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if token.startswith("--"):
            name, has_value, text = token[2:].partition("=")
            if not has_value:
                if index >= len(tokens) or (tokens[index].startswith("--") and not _is_number(tokens[index])):
                    raise ConfigError(f"option {token} has no value. Fix: {token} VALUE or {token}=VALUE.")
                text = tokens[index]
                index += 1
        elif "=" in token:
            name, _, text = token.partition("=")
        else:
            raise ConfigError(f"unexpected argument {token!r}. Fix: overrides look like --section.key VALUE.")
        name = name.replace("-", "_")
        if not name or name.startswith(".") or name.endswith("."):
            raise ConfigError(f"option {token!r} has no name. Fix: --section.key VALUE, e.g. --model.d_model 64.")
        pairs.append((name, _parse_value(text, name)))
    return pairs


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def apply_overrides(mapping: Mapping[str, Any], overrides: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """A copy of ``mapping`` with each ``(dotted.key, value)`` set (sections are created as needed)."""
    result = copy.deepcopy(dict(mapping))
    for name, value in overrides:
        parts = name.split(".")
        node = result
        for depth, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"--{name}: {'.'.join(parts[:depth + 1])} is a value, not a section.")
            node = child
        node[parts[-1]] = value
    return result


# ------------------------------------------------------------------------------ config


def _require_mapping(value: Any, name: str, source: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{source}: section {name!r} must be a mapping of options, not {value!r}.")
    return dict(value)


def _check_keys(given: Iterable[str], valid: Sequence[str], section: str, source: str, hint: str = "") -> None:
    unknown = sorted(set(given) - set(valid))
    if unknown:
        raise ConfigError(f"{source}: unknown {section} option(s) {unknown}. Valid: {sorted(valid)}.{hint}")


def _model_section(mapping: Mapping[str, Any], source: str) -> tuple[str, dict[str, Any]]:
    from forecast.models import MODELS, model_options

    options = _require_mapping(mapping.get("model"), "model", source)
    name = options.pop("name", None)
    if not isinstance(name, str) or name not in MODELS:
        raise ConfigError(f"{source}: model.name={name!r}; Fix: name a registered model {sorted(MODELS)}.")
    _check_keys(options, model_options(name), f"model {name!r}", source)
    collisions = sorted(set(options) & {*data_option_names(), *trainer_option_names(), *_LOADER, *TOP_LEVEL})
    if collisions:
        raise ConfigError(f"{source}: model {name!r} options {collisions} share names with data or trainer "
                          "options, so they could not be told apart.")
    return name, options


def _data_section(mapping: Mapping[str, Any], source: str) -> dict[str, Any]:
    data = _require_mapping(mapping.get("data"), "data", source)
    _check_keys(data, data_option_names(), "data", source, " (the seed is the top-level key 'seed'.)")
    dataset = data.get("dataset")
    if not isinstance(dataset, str) or not dataset:
        raise ConfigError(f"{source}: data.dataset={dataset!r}; Fix: name a registered dataset "
                          f"{list(registry.names())} or a CSV path.")
    for key, default in _WINDOW_DEFAULTS.items():
        data.setdefault(key, default)
    if "target" not in data:
        info = registry.find(dataset)
        data["target"] = info.target if info is not None else None
    return data


def _trainer_section(mapping: Mapping[str, Any], source: str) -> dict[str, Any]:
    trainer = _require_mapping(mapping.get("trainer"), "trainer", source)
    misplaced = sorted(set(trainer) & set(_LOADER))
    if misplaced:
        raise ConfigError(f"{source}: {misplaced} are loader options. Fix: put them in the data section "
                          f"(--data.{misplaced[0]}).")
    _check_keys(trainer, trainer_option_names(), "trainer", source)
    return trainer


def _top_level(mapping: Mapping[str, Any], source: str) -> dict[str, Any]:
    """``seed``, ``recipe``, ``run_dir``, ``quantiles`` and ``progress``, checked."""
    try:
        seed = require_int("seed", mapping.get("seed", 0), 0)
        progress = require_bool("progress", mapping.get("progress", False))
        recipe = get_recipe(mapping.get("recipe", DEFAULT_RECIPE)).name
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None
    run_dir = mapping.get("run_dir")
    if run_dir is not None and not isinstance(run_dir, str):
        raise ConfigError(f"{source}: run_dir={run_dir!r}; Fix: a directory path.")
    quantiles = mapping.get("quantiles")
    if quantiles is not None and not isinstance(quantiles, list):
        raise ConfigError(f"{source}: quantiles={quantiles!r}; Fix: a list of levels, e.g. [0.1, 0.5, 0.9].")
    return {"seed": seed, "recipe": recipe, "run_dir": run_dir,
            "quantiles": tuple(quantiles) if quantiles is not None else None, "progress": progress}


@dataclass(frozen=True)
class RunConfig:
    """A validated run configuration: model, model options, data, trainer options, seed and recipe.

    Build one with :meth:`from_mapping` (or :func:`load_config` for files and overrides).
    ``data`` always holds ``dataset`` and the window (defaults filled in: the registered
    target of a known dataset, else ``None``: every column for ``M``, the last numeric one
    for ``S``/``MS``); ``trainer`` holds TrainingConfig fields and
    ``lightning.Trainer`` arguments. ``model_options`` and ``trainer`` hold what the file
    says; the ``recipe`` (:mod:`forecast.recipes`) fills in the rest when a Forecaster
    or an Experiment is built.
    """

    model: str
    model_options: dict[str, Any]
    data: dict[str, Any]
    trainer: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    recipe: str = DEFAULT_RECIPE
    run_dir: str | None = None
    quantiles: tuple[float, ...] | None = None
    progress: bool = False
    source: str = "<config>"

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any], source: str = "<config>") -> RunConfig:
        """Check section and option names of a parsed config; ConfigError naming ``source`` and the fix."""
        if not isinstance(mapping, Mapping):
            raise ConfigError(f"{source}: a config is a mapping of sections, not {type(mapping).__name__}.")
        _check_keys(mapping, (*SECTIONS, *TOP_LEVEL), "top-level", source)
        model, options = _model_section(mapping, source)
        return cls(model, options, _data_section(mapping, source), _trainer_section(mapping, source),
                   source=source, **_top_level(mapping, source))

    # ------------------------------------------------------------------- views

    @property
    def dataset(self) -> str:
        return self.data["dataset"]

    @property
    def dataset_label(self) -> str:
        from forecast.experiment import dataset_label

        return dataset_label(self.dataset)

    def to_mapping(self) -> dict[str, Any]:
        """The config as plain YAML types (what ``--print_config`` shows)."""
        mapping: dict[str, Any] = {
            "model": {"name": self.model, **copy.deepcopy(self.model_options)},
            "data": copy.deepcopy(self.data),
            "trainer": copy.deepcopy(self.trainer),
            "seed": self.seed,
            "recipe": self.recipe,
        }
        if self.run_dir is not None:
            mapping["run_dir"] = self.run_dir
        if self.quantiles is not None:
            mapping["quantiles"] = list(self.quantiles)
        if self.progress:
            mapping["progress"] = True
        return mapping

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_mapping(), sort_keys=False)

    def with_seed(self, seed: int) -> RunConfig:
        return dataclasses.replace(self, seed=seed)

    def resolved_run_dir(self, root: str | os.PathLike[str] = DEFAULT_RUNS_DIR) -> Path:
        """``run_dir`` if set, else ``root/<run name>``: the folder ``forecast sweep`` trains this run in
        (:meth:`~forecast.experiment.Experiment.run_name`), so either resumes or predicts from the other's.

        The name covers the dataset, window, seed, recipe, model options and every training setting
        that changes what is learned: a changed option, or more epochs, trains in a fresh folder.
        """
        if self.run_dir is not None:
            return Path(self.run_dir)
        return Path(root) / self.experiment().run_name()

    # ---------------------------------------------------------------- builders

    def forecaster_options(self) -> dict[str, Any]:
        """Keyword arguments of :class:`~forecast.Forecaster` (everything but the data and split)."""
        data = {k: v for k, v in self.data.items() if k not in ("dataset", "split")}
        options: dict[str, Any] = {**data, **self.trainer, **self.model_options, "seed": self.seed,
                                   "recipe": self.recipe, "progress": self.progress}
        if self.quantiles is not None:
            options["quantiles"] = self.quantiles
        return options

    def forecaster(self):
        """An unfitted :class:`~forecast.Forecaster` for this config (values checked here)."""
        from forecast.api import Forecaster

        try:
            return Forecaster(self.model, **self.forecaster_options())
        except ConfigError as error:
            raise ConfigError(f"{self.source}: {error}") from error

    @property
    def split(self) -> Any:
        return self.data.get("split")

    def experiment(self):
        """The :class:`~forecast.experiment.Experiment` of this config (the sweep's unit of work)."""
        from forecast.experiment import Experiment
        from forecast.training import TrainingConfig

        training_fields = {f.name for f in dataclasses.fields(TrainingConfig)}
        training = {k: v for k, v in self.trainer.items() if k in training_fields}
        extra = {k: v for k, v in self.trainer.items() if k not in training_fields}
        loader = {k: self.data[k] for k in _LOADER if k in self.data}
        data_options = {k: v for k, v in self.data.items() if k not in ("dataset", *_WINDOW, *_LOADER)}
        try:
            return Experiment.from_recipe(
                self.recipe, self.model, self.model_options,
                {"seed": self.seed, "extra_trainer_options": extra, **loader, **training},
                dataset=self.dataset, data_options=data_options, **{k: self.data[k] for k in _WINDOW},
            )
        except (ConfigError, TypeError) as error:
            raise ConfigError(f"{self.source}: {error}") from error


def load_config(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    overrides: Iterable[tuple[str, Any]] | Sequence[str] = (),
) -> RunConfig:
    """Read one or more YAML files (merged in order), apply overrides, validate.

    ``overrides`` are ``(dotted.key, value)`` pairs or raw command-line tokens
    (``["--trainer.max_epochs", "1"]``).
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    mapping: dict[str, Any] = {}
    for path in paths:
        mapping = merge(mapping, read_yaml(path))
    pairs = list(overrides)
    if pairs and all(isinstance(item, str) for item in pairs):
        pairs = parse_overrides(pairs)  # type: ignore[arg-type]
    mapping = apply_overrides(mapping, pairs)  # type: ignore[arg-type]
    source = ", ".join(str(path) for path in paths) or "<command line>"
    return RunConfig.from_mapping(mapping, source)
