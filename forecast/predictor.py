"""``Predictor``: a fitted model with the data state it was fitted with.

What :meth:`Forecaster.fit <forecast.Forecaster.fit>` leaves and :meth:`Forecaster.load
<forecast.Forecaster.load>` reads back (gluonts' split: the estimator trains, the predictor
forecasts). It forecasts the real future in original units (with quantile columns for
probabilistic models), plots a forecast or a window, returns attention weights, and saves and loads
itself as a directory: ``config.json`` (the configuration that built it, the fitted variables,
frequency and sizes, the CSV file it was fitted on: :class:`DataFile`), ``scaler.json`` (the train-row
scaling statistics) and ``model.pt`` (the model's ``state_dict``, read back with ``weights_only=True``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import json
import logging
import os
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from lightning.pytorch.utilities import rank_zero_only
from matplotlib.figure import Figure
from torch import nn

import forecast
from forecast import datasets as registry
from forecast.checks import require_choice, require_int, require_levels
from forecast.data import FutureBatch, WindowDataModule
from forecast.data.datamodule import require_table
from forecast.data.fitted import FittedState, as_recorded
from forecast.data.io import NAIVE, Table, TimeSeries
from forecast.data.panel import Panel
from forecast.data.panel_state import comparable, static_changes
from forecast.data.splits import SPLIT_NAMES
from forecast.errors import ConfigError, NonFiniteForecastError
from forecast.files import held, write_atomically, write_text_atomically
from forecast.metrics import DEFAULT_QUANTILES, MetricAccumulator, ProbabilisticAccumulator, pivot_report, report
from forecast.models import MODELS, DataSpec, ForecastModel, build_model, model_inputs
from forecast.module import ForecastModule
from forecast.plotting import check_forecast_names, plot_forecast, quantile_column
from forecast.recipes import resume_settings
from forecast.training import last_checkpoint, load_checkpoint

__all__ = ["DataFile", "Predictor"]

log = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
SCALER_FILE = "scaler.json"
WEIGHTS_FILE = "model.pt"
FORMAT = "forecast.Forecaster"
FORMAT_VERSION = 1


# ------------------------------------------------------------------------------ helpers


@contextlib.contextmanager
def private_rng(seed: int | None = None, device: torch.device | None = None) -> Iterator[None]:
    """Run a block without touching the caller's torch RNG (seeded inside when ``seed`` is given)."""
    cuda = device is not None and device.type == "cuda"
    with torch.random.fork_rng(devices=[device] if cuda else []):
        if seed is not None:
            torch.random.default_generator.manual_seed(seed)
            if cuda:
                with torch.cuda.device(device):
                    torch.cuda.manual_seed(seed)  # this device only: the others were not forked
        yield


def checked_quantiles(levels: Sequence[float]) -> tuple[float, ...]:
    """The quantile levels, as floats in (0, 1), sorted; ConfigError for a repeated one or one whose column names
    would collide."""
    checked = require_levels("quantiles", levels, allow_empty=True)
    if len(set(checked)) != len(checked):
        raise ConfigError(f"quantiles={list(checked)!r} repeats a level.")
    check_forecast_names((), checked)
    return tuple(sorted(checked))


def refuse_point_quantiles(model: str, levels: tuple[float, ...], probabilistic: bool) -> None:
    """ConfigError for levels other than the default asked of a model that forecasts points: predict adds quantile
    columns for probabilistic models only, so they would be ignored. Checked on the options, then at fit on the
    model built for the data (seasonal_naive's season is the data's), and as a fitted predictor's levels are set."""
    if levels and levels != DEFAULT_QUANTILES and not probabilistic:
        raise ConfigError(f"quantiles={list(levels)} name the quantile columns predict adds for a model that forecasts "
                          f"a distribution, but {model!r} with these options forecasts points. Fix: leave quantiles "
                          "out, or choose a probabilistic model (logsparse with head='gaussian', seasonal_naive with "
                          "seq_len >= season_length + 2).")


def resolve_table(data: Table) -> Table:
    """A registered dataset name becomes its frame; frames, series and paths pass through."""
    if isinstance(data, str) and registry.find(data) is not None:
        return registry.load(data)
    require_table(data)
    return data


def _device_of(model: nn.Module) -> torch.device:
    tensor = next(model.parameters(), None)
    if tensor is None:
        tensor = next(model.buffers(), None)
    return tensor.device if tensor is not None else torch.device("cpu")


@contextlib.contextmanager
def inference(model: ForecastModel, batch: Mapping[str, torch.Tensor]) -> Iterator[tuple[torch.Tensor, ...]]:
    """``(x, x_mark, y_mark)`` (:func:`~forecast.models.model_inputs`) on the model's device, in eval mode
    without grad; mode restored after."""
    device = _device_of(model)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield tuple(tensor.to(device) for tensor in model_inputs(model.spec, batch))
    finally:
        model.train(was_training)


def series_report(module: ForecastModule, fitted: FittedState, loader: Iterable[Mapping[str, torch.Tensor]]
                  ) -> pd.DataFrame:
    """The metrics of a panel's windows (``loader``'s batches) by series: one row per series id (index named like
    the id column), a column per metric ``evaluate()`` reports, standardized (``mse``, ``rho_risk_0.5``, ...;
    each series on its own training scale) and in original units (``mse_orig``, ``coverage_0.8_orig``, ...),
    and ``n_windows``. Scored as ``evaluate()`` scores the windows pooled (:meth:`ForecastModule.score_batch`)."""
    if fitted.panel is None:
        raise ConfigError("a breakdown by series needs a panel (fit with id_column=...); a wide table is one "
                          "series: use evaluate()")
    device, was_training = _device_of(module), module.training
    errors = module.test_errors["standardized"]

    def accumulators() -> tuple[MetricAccumulator, ProbabilisticAccumulator]:
        return (MetricAccumulator(errors.zeros, errors.eps, missing=errors.missing).to(device),
                module.quantile_accumulator().to(device))

    by_series: dict[int, dict[str, tuple[MetricAccumulator, ProbabilisticAccumulator]]] = {}
    module.eval()
    try:
        with torch.no_grad():
            for batch in loader:
                batch = {name: tensor.to(device) for name, tensor in batch.items()}
                scored = module.score_batch(batch)
                for index in batch["series"].unique().tolist():
                    mine = batch["series"] == index  # [B]: the windows of series `index`
                    series = by_series.setdefault(index, {scale: accumulators() for scale in scored})
                    for scale, (pred, target, forecast) in scored.items():
                        series[scale][0].update(pred[mine], target[mine])
                        series[scale][1].update({level: values[mine] for level, values in forecast.items()},
                                                target[mine])
    finally:
        module.train(was_training)
    rows = []
    for index in sorted(by_series):
        table = pivot_report(report({scale: point.summary().combine(probabilistic.summary())
                                     for scale, (point, probabilistic) in by_series[index].items()}))
        values = {f"{metric}{'' if scale == 'standardized' else '_orig'}": table.loc[metric, scale]
                  for scale in table.columns for metric in table.index if pd.notna(table.loc[metric, scale])}
        rows.append({**values, "n_windows": table.attrs["n_windows"]})
    return pd.DataFrame(rows, index=pd.Index([fitted.panel.ids[index] for index in sorted(by_series)],
                                             name=fitted.panel.id_column))


def jsonable(value: Any, name: str) -> Any:
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
        return [jsonable(item, name) for item in value]
    if isinstance(value, Mapping):
        if not all(isinstance(key, str) for key in value):
            raise ConfigError(f"option {name}={value!r}: only string keys can be saved. Fix: use string keys.")
        return {key: jsonable(item, f"{name}.{key}") for key, item in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(list(dataclasses.astuple(value)), name)
    raise ConfigError(
        f"option {name}={value!r} ({type(value).__name__}) cannot be saved as JSON. Fix: pass numbers, "
        "strings, lists or dicts."
    )


def is_jsonable(value: Any) -> bool:
    try:
        jsonable(value, "")
    except ConfigError:
        return False
    return True


def read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"{path} does not exist. Fix: pass a directory written by Forecaster.save().")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path} is not valid JSON ({error}). Fix: save the forecaster again.") from error


def _write_json(path: Path, content: Mapping[str, Any]) -> None:
    write_text_atomically(path, json.dumps(content, indent=2) + "\n")


@dataclasses.dataclass(frozen=True)
class DataFile:
    """The CSV file a fit read: its resolved ``path`` and ``sha256``, the first 10 hex digits of the sha256 of its
    bytes then (:func:`forecast.datasets.file_digest`). ``config.json`` keeps it as ``data_file``, so a saved
    run can read its data again and tell whether the file changed since; the fitted state names the file by its
    stem only. ``None`` for other data (a registered name, a frame) and in a run saved before it was kept."""

    path: str
    sha256: str

    @classmethod
    def of(cls, data: Table) -> DataFile | None:
        """The record of ``data`` if it is a file's path (not a registered dataset's name), else ``None``."""
        if not isinstance(data, (str, os.PathLike)) or (isinstance(data, str) and registry.find(data) is not None):
            return None
        path = Path(data)
        return cls(str(path.resolve()), registry.file_digest(path)) if path.is_file() else None

    def current_digest(self) -> str | None:
        """The digest of the file's bytes now (``None`` when it is gone)."""
        path = Path(self.path)
        return registry.file_digest(path) if path.is_file() else None

    @classmethod
    def recorded_in(cls, config: Mapping[str, Any], config_file: Path) -> DataFile | None:
        """The record ``config`` (read from ``config_file``) holds; ``None`` in a run saved before it was kept."""
        recorded = config.get("data_file")
        try:
            return cls(**recorded) if recorded is not None else None
        except TypeError:
            raise ConfigError(f"{config_file}: data_file {recorded!r} is not a path and a sha256. Fix: fit again, "
                              "or remove data_file (the run then names its file by its stem only).") from None


def _check_saved_names(fitted: FittedState) -> None:
    """ConfigError for variable names that JSON gives back as others (a tuple as a list, a Timestamp as text):
    a loaded forecaster would look for those others in the data, and not find the variables it was fitted on."""
    names = [*fitted.input_columns, *fitted.output_columns]
    if fitted.panel is not None:
        names += [*fitted.panel.known_columns, *fitted.panel.static_columns]
    restored = json.loads(json.dumps(jsonable(names, "variables")))
    changed = {name: back for name, back in zip(names, restored) if back != name}  # a tuple never equals a list
    if changed:
        raise ConfigError(
            f"{fitted.dataset}: variable names {list(changed)!r} cannot be saved: config.json gives them back as "
            f"{list(changed.values())!r}, which a loaded forecaster would not find in the data. Fix: name the "
            "variables by text or numbers, e.g. df.rename(columns=str), and fit again."
        )


def _saved_state(fitted: FittedState) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fitted state as a saved run holds it: ``config.json``'s ``fitted`` block and ``scaler.json`` (a wide
    table's scaler as it is; a panel's per-series scaling under ``panel``), as JSON types."""
    _check_saved_names(fitted)
    state = fitted.state_dict()
    scaling = state["scaler"] if "scaler" in state else {"panel": state["panel"]}
    return jsonable(state["fitted"], "fitted"), jsonable(scaling, "scaler")


def write_config(directory: Path, config: Mapping[str, Any], saved: tuple[dict[str, Any], dict[str, Any]],
                 split: Any, data_file: DataFile | None, *, with_weights: bool = False) -> None:
    """``scaler.json``, then ``config.json`` (``config``, the split, the file fitted on, the fitted state and the
    sha256 of ``scaler.json``, and of ``model.pt`` ``with_weights``) in ``directory``; ``saved`` is the fitted
    state as :func:`_saved_state` gives it. ``config.json`` comes last and names the files it was saved with, so a
    save killed part way, or two saves into one folder, leave files a load refuses, not a mix it forecasts with."""
    fitted_block, scaling = saved
    _write_json(directory / SCALER_FILE, scaling)
    files = (SCALER_FILE, WEIGHTS_FILE) if with_weights else (SCALER_FILE,)
    # Beside the fitted state, not in it: resuming compares that state, and a checkpoint may resume on the file
    # after an edit that leaves the training rows as they were.
    _write_json(directory / CONFIG_FILE, {"format": FORMAT, "format_version": FORMAT_VERSION,
                                          "package_version": forecast.__version__, **config,
                                          "split": jsonable(split, "split"),
                                          "data_file": dataclasses.asdict(data_file) if data_file is not None else None,
                                          "fitted": fitted_block,
                                          "digest": {"of": list(_BUILT_FROM), "sha256": _built_digest(config)},
                                          "files": {name: _file_sha256(directory / name) for name in files}})


def _file_sha256(path: Path) -> str:
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def _check_saved_together(directory: Path, config: Mapping[str, Any]) -> None:
    """``directory``'s ``scaler.json`` and ``model.pt`` are the files its ``config.json`` was saved with (the
    sha256 it names; a run saved before 2026-11-29, or whose fit is under way, names fewer or none)."""
    files = config.get("files", {})
    if not (isinstance(files, Mapping) and set(files) <= {SCALER_FILE, WEIGHTS_FILE}):
        raise ConfigError(f"{directory / CONFIG_FILE}: files {files!r} is not the sha256 of {SCALER_FILE} and "
                          f"{WEIGHTS_FILE} (the file was edited or damaged). Fix: save the forecaster again, or fit again.")
    other = [name for name, digest in files.items() if _file_sha256(directory / name) != digest]
    if other:
        raise ConfigError(f"{directory}: {' and '.join(other)} {'is' if len(other) == 1 else 'are'} not the "
                          f"file{'s' * (len(other) > 1)} its {CONFIG_FILE} was saved with: a save was cut off part "
                          "way, two saves wrote into this folder, or the file was edited, and forecasting would mix "
                          "them. Fix: save the forecaster again, or fit again.")


def _built_digest(config: Mapping[str, Any], keys: Sequence[str] = ()) -> str:
    """sha256 of what builds the model and what it forecasts (``keys``, default ``_BUILT_FROM``): a saved run
    keeps it with its keys, so that an edit the weights still fit (dlinear's ``kernel_size``, ProbSparse's
    ``factor``, a ``features`` mode) is refused on load instead of forecasting with a model the weights were never
    trained for, and a later version that digests other keys still reads it."""
    built = {key: config.get(key) for key in keys or _BUILT_FROM}
    return hashlib.sha256(json.dumps(jsonable(built, "config"), sort_keys=True).encode()).hexdigest()


def read_config(directory: Path) -> dict[str, Any]:
    """A saved predictor's ``config.json``, checked to be one this version reads."""
    config = read_json(directory / CONFIG_FILE)
    if config.get("format") != FORMAT or config.get("format_version") != FORMAT_VERSION:
        raise ConfigError(
            f"{directory / CONFIG_FILE} is not a Forecaster directory of format version {FORMAT_VERSION} "
            f"(found {config.get('format')!r} version {config.get('format_version')!r})."
        )
    edited = (f"(the file was edited or damaged). Fix: restore {directory / CONFIG_FILE} as the fit saved it, or fit "
              "again.")
    for key, kind in _SAVED_BLOCKS.items():
        if not isinstance(config.get(key), kind):
            found = "missing" if key not in config else f"{config[key]!r} ({type(config[key]).__name__})"
            raise ConfigError(f"{directory / CONFIG_FILE}: {key!r} is {found}, not a {kind.__name__} {edited}")
    if config["model"] not in MODELS:
        raise ConfigError(f"{directory}: model {config['model']!r} is not registered; known: {sorted(MODELS)}. Fix: "
                          "import the code that registers it (forecast.models.MODELS[name] = ...) before loading.")
    spec = config["fitted"].get("spec")
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{directory / CONFIG_FILE}: fitted.spec is missing {edited}")
    # The model is built for the fitted windows: a window edited in `data` would be reported, never forecast.
    differing = [f"data.{name} {config['data'].get(name)!r}, fitted.spec.{name} {spec.get(name)!r}"
                 for name in ("seq_len", "label_len", "pred_len", "time_encoding")
                 if (name in config["data"] or name != "time_encoding") and config["data"].get(name) != spec.get(name)]
    if differing:
        raise ConfigError(f"{directory / CONFIG_FILE} holds a run fitted for other windows than it names "
                          f"({'; '.join(differing)}) {edited} Other windows need another fit.")
    digest = config.get("digest")  # absent from runs saved before 2026-11-29, which load unchecked
    if digest is not None:
        keys = digest.get("of") if isinstance(digest, Mapping) else None
        if not (isinstance(keys, list) and keys and all(isinstance(key, str) for key in keys)):
            raise ConfigError(f"{directory / CONFIG_FILE}: digest {digest!r} is not its keys and sha256 {edited}")
        if digest.get("sha256") != _built_digest(config, keys):
            raise ConfigError(f"{directory / CONFIG_FILE}: its {', '.join(keys)} are not those the run was fitted "
                              f"with {edited} Other options need another fit.")
    return config


# The blocks of a saved config.json and their JSON types (read_config checks them before anything reads them).
_SAVED_BLOCKS = {"model": str, "model_options": dict, "data": dict, "training": dict, "quantiles": list,
                 "progress": bool, "fitted": dict}
# What write_config adds to a predictor's config (a loaded one saved again writes them afresh).
_WRITTEN_BESIDE = ("format", "format_version", "package_version", "split", "data_file", "fitted", "digest",
                   "files")
# What config.json's digest covers: the blocks that build the model and name what it forecasts (not the quantile
# levels, which are read from the model as it forecasts: `forecast predict` takes a config's own).
_BUILT_FROM = ("model", "recipe", "model_options", "data")


def _run_identity(config: Mapping[str, Any], fitted: Mapping[str, Any]) -> dict[str, Any]:
    """What must match for a checkpoint to be resumed: model, options, data and variables."""
    return {"model": config["model"], "model_options": config["model_options"], "data": config["data"],
            "input_columns": fitted["input_columns"], "output_columns": fitted["output_columns"]}


def _differences(previous: Mapping[str, Any], current: Mapping[str, Any], prefix: str = "") -> list[str]:
    """``"name 16 in the run, 8 now"`` for each setting that differs, those of a block by their own names
    (``model_options.d_model``)."""
    differing = []
    for name in sorted({*previous, *current}, key=str):
        before, now = previous.get(name), current.get(name)
        if isinstance(before, Mapping) and isinstance(now, Mapping):
            differing += _differences(before, now, f"{prefix}{name}.")
        elif before != now:
            differing.append(f"{prefix}{name} {before!r} in the run, {now!r} now")
    return differing


def _require_same_training(run_dir: Path, stored: Mapping[str, Any], training: Mapping[str, Any]) -> None:
    """ConfigError naming each training setting a fit resuming ``run_dir``'s checkpoint must share and does not
    (:func:`~forecast.recipes.resume_settings`): the checkpoint's values would win over some silently, and the
    rest would make the run's later epochs another run's."""
    differing = _differences(resume_settings(stored), resume_settings(training))
    if training.get("lr_schedule") == "cosine" and stored.get("max_epochs") != training.get("max_epochs"):
        # The restored scheduler keeps its span: from the run's last epoch the rate would reach 0, then climb.
        differing.append(f"max_epochs {stored.get('max_epochs')!r} in the run, {training.get('max_epochs')!r} now, "
                         "which lr_schedule='cosine' spans")
    if differing:
        raise ConfigError(
            f"{run_dir} holds a run trained with other settings ({'; '.join(differing)}); resuming its checkpoint "
            "would restore the run's learning rate and patience over those given, and train its remaining epochs "
            "unlike its first. Only max_epochs (max_steps; not under a cosine schedule) and what is applied after "
            "training (the calibration settings, n_samples) may change on resume. "
            "Fix: fit with the run's settings to resume it, use another run_dir, or resume=False to train from "
            "scratch there."
        )


FIT_LOCK_FILE = ".fit.lock"
SAVE_LOCK_FILE = ".save.lock"
SAVE_LOCK_TIMEOUT_S = 600  # a save of the largest models takes seconds: a holder this long is stuck


@contextlib.contextmanager
def fit_lock(run_dir: Path | None) -> Iterator[None]:
    """Hold ``run_dir``'s fit lock while a fit prepares, trains and saves there: a second process fitting the same
    folder (the same config started twice, overlapping sweep workers) is refused rather than interleaving its
    checkpoints and weights with this one's. Only rank 0 takes it (DDP's other processes train the same fit);
    the kernel releases the lock of a process that dies."""
    if run_dir is None or run_dir.is_file() or rank_zero_only.rank != 0:  # a file: prepare_run_dir says so
        yield
        return
    with held(run_dir / FIT_LOCK_FILE, 0, (
            f"{run_dir} is being fitted by another process (it holds {run_dir / FIT_LOCK_FILE}). Fix: wait for that "
            "fit to end (fit again then to resume it), or fit into another run_dir; if no process is fitting there "
            "(a filesystem without file locks keeps a killed fit's lock), delete that file.")):
        yield


def prepare_run_dir(run_dir: Path, config: Mapping[str, Any], fitted: FittedState, split: Any,
                    data_file: DataFile | None, resume: bool) -> bool:
    """Before a fit into ``run_dir``: whether to resume its checkpoint (``resume`` and one is there, made
    with the same model, options, data and variables, else ConfigError); writes the config."""
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"run_dir {run_dir} is a file. Fix: name a folder for the run's checkpoints and weights.")
    checkpoint = last_checkpoint(run_dir) if resume else None
    saved = _saved_state(fitted)
    if checkpoint is not None:
        stored = _same_run(run_dir, config, saved, "a checkpoint", "it cannot be resumed by this Forecaster")
        _require_same_training(run_dir, stored.get("training", {}), config["training"])
        if "split" in stored and stored["split"] != jsonable(split, "split"):
            raise ConfigError(
                f"{run_dir} holds a run split {stored['split']!r}, not {jsonable(split, 'split')!r}: its best epoch so "
                "far was chosen on other validation windows, and resuming would compare losses over two sets. Fix: "
                "fit with the run's split to resume it, use another run_dir, or resume=False to train from scratch."
            )
        _same_data(run_dir, stored, saved, "so its checkpoint cannot be resumed on this data")
    elif resume and (run_dir / WEIGHTS_FILE).is_file():
        # A finished run without checkpoints (a sweep's re-fit after training, a Forecaster.save() folder): a
        # resuming fit must not delete another run's model. The same run has nothing to resume: it trains again,
        # as a fit resuming a finished run's checkpoints trains on to the same result.
        refusal = "this fit would replace its model"
        _same_data(run_dir, _same_run(run_dir, config, saved, f"a finished run ({WEIGHTS_FILE})", refusal),
                   saved, refusal)
        log.info("%s holds this run finished, without checkpoints to resume: training it again", run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    _remove_previous_fit(run_dir, resuming=checkpoint is not None)
    write_config(run_dir, config, saved, split, data_file)
    return checkpoint is not None


def _same_run(run_dir: Path, config: Mapping[str, Any], saved: tuple[dict[str, Any], dict[str, Any]],
              held: str, refusal: str) -> dict[str, Any]:
    """``run_dir``'s config.json, where ``held`` is; ConfigError (saying ``refusal``) unless it names the run of
    ``config`` and ``saved`` (:func:`_saved_state`): the same model, options, data and variables."""
    try:
        stored = read_json(run_dir / CONFIG_FILE) if (run_dir / CONFIG_FILE).is_file() else None
        previous = _run_identity(stored, stored.get("fitted", {})) if isinstance(stored, dict) else None
    except (ConfigError, KeyError, TypeError, AttributeError):  # a config.json this package did not write
        previous = None
    if previous is None:
        raise ConfigError(
            f"{run_dir} holds {held} but no {CONFIG_FILE} of a forecast run, so it cannot be checked against this "
            "Forecaster. Fix: use another run_dir, or resume=False to train from scratch there."
        )
    differing = _differences(previous, _run_identity(config, saved[0]))
    if differing:
        raise ConfigError(
            f"{run_dir} holds another run ({'; '.join(differing)}); {refusal}. "
            "Fix: use another run_dir, or resume=False to train from scratch there."
        )
    return stored


def _same_data(run_dir: Path, stored: Mapping[str, Any], saved: tuple[dict[str, Any], dict[str, Any]],
               refusal: str) -> None:
    """ConfigError (saying ``refusal``) unless ``run_dir``'s run was fitted on the data ``saved`` holds.
    Checked before the folder is touched: its finished model and scaling stay as they were."""
    scaling = read_json(run_dir / SCALER_FILE)
    fitted = saved[0]
    options = stored.get("fitted", {}).get("prepare_options") if isinstance(stored.get("fitted"), Mapping) else None
    if isinstance(options, Mapping) and isinstance(fitted.get("prepare_options"), Mapping):
        fitted = {**fitted, "prepare_options": as_recorded(fitted["prepare_options"], options)}
    if (stored.get("fitted"), scaling) != (fitted, comparable(saved[1], scaling)):
        differing = static_changes(scaling, saved[1]) or (
            "its data's name, frequency, windows or the scaling of its training rows differ")
        raise ConfigError(
            f"{run_dir} holds a run fitted on other data ({differing}), {refusal}. Fix: fit on the data the run "
            "was fitted on, use another run_dir, or resume=False to train from scratch there."
        )


def _remove_previous_fit(run_dir: Path, resuming: bool) -> None:
    """Before a fit rewrites ``run_dir``'s config and scaler: the weights a finished fit left there go, and so do
    that fit's checkpoints unless this fit resumes them. Then the folder never pairs this fit's config and
    scaler with another fit's weights (a fit killed before it finishes leaves no ``model.pt``: "the run never
    finished"), and never resumes another fit's checkpoint under this config later."""
    stale = [run_dir / WEIGHTS_FILE, *([] if resuming else sorted((run_dir / "checkpoints").glob("*.ckpt")))]
    removed = [path for path in stale if path.is_file()]
    for path in removed:
        path.unlink(missing_ok=True)  # missing_ok: under DDP every process clears the folder
    if removed:
        log.info("%s: removed %s; this fit %s", run_dir, ", ".join(path.name for path in removed),
                 "resumes the checkpoint and saves the model again when it finishes" if resuming
                 else "replaces the fit the folder held")


# --------------------------------------------------------------------------- Predictor


def window_batch(datamodule: WindowDataModule, window: int, split: str
                 ) -> tuple[dict[str, torch.Tensor], pd.DatetimeIndex, pd.DatetimeIndex]:
    """Window ``window`` of ``datamodule``'s ``split`` as a batch of one, with its lookback and label+horizon
    timestamps, in the data's time zone (a wall clock repeats the hour it goes back)."""
    # evaluate's choices: the data module's 'predict' is another split's windows under its loader's name.
    require_choice("split", split, SPLIT_NAMES)
    window = require_int("window", window)
    dataset = datamodule.dataset(split)
    if not -len(dataset) <= window < len(dataset):
        raise ConfigError(f"window={window} is out of range: the {split} split has {len(dataset)} windows.")
    window %= len(dataset)
    zone = datamodule.fitted.prepare_options.get("time_zone")  # None: a zone without a name, read on its clock
    zoned = zone not in (None, NAIVE)
    x_dates, y_dates = datamodule.window_timestamps(split, utc=zoned, windows=window)  # [1, L], [1, label_len+P]
    x_index, y_index = pd.DatetimeIndex(x_dates[0]), pd.DatetimeIndex(y_dates[0])
    if zoned:
        x_index, y_index = (index.tz_localize("UTC").tz_convert(zone) for index in (x_index, y_index))
    return {key: value.unsqueeze(0) for key, value in dataset[window].items()}, x_index, y_index


def _observed_outputs(data: TimeSeries | Panel, n_outputs: int,
                      series_id: Hashable | None) -> tuple[np.ndarray, pd.DatetimeIndex]:
    """The output variables' values ``[T, C_out]`` of ``data`` (a panel: of series ``series_id``) and their dates,
    NaN where fill_nan made a value up: a filled gap is drawn as a gap, as a window's truth is."""
    if isinstance(data, Panel):
        one = data[series_id]
        values, dates = one.target[:, None], one.dates  # [T, 1]
        filled = one.filled_target[:, None] if one.filled_target is not None else None
    else:
        values, dates = data.values[:, -n_outputs:], data.dates  # [T, C_out]
        filled = data.filled[:, -n_outputs:] if data.filled is not None else None
    return (values if filled is None else np.where(filled, np.nan, values)), dates


def _last_rows(length: int, rows: int) -> slice:
    """The last ``rows`` of ``length`` rows (all of them at most; none for 0, where ``[-0:]`` would be all)."""
    return slice(length - min(rows, length), None)


def model_quantiles(module: ForecastModule, levels: Sequence[float], x: torch.Tensor, x_mark: torch.Tensor,
                    y_mark: torch.Tensor) -> dict[float, torch.Tensor]:
    """``{level: [B, P, C_out]}`` on the model's scale from ``module``'s model if it is probabilistic, else ``{}``.

    Drawn as ``evaluate()`` draws the quantiles it scores (:meth:`ForecastModule.drawn_quantiles`: ``n_samples``
    paths from a generator seeded with ``sample_seed``, not the training seed), so the same forecaster gives the
    same quantiles every time. The caller's RNG is left as it was, and seeded alike inside for models that draw from it instead.
    """
    model = module.model
    if not levels or not model.probabilistic:
        return {}
    with private_rng(module.hparams.sample_seed, x.device):
        result = module.drawn_quantiles(levels, x, x_mark, y_mark)
    return {level: result[level].to(torch.float64) for level in levels}


class Predictor:
    """A fitted model (in its :class:`~forecast.module.ForecastModule`) with its :class:`FittedState`.

    ``config`` is the JSON configuration that built it (:attr:`Forecaster.config
    <forecast.Forecaster.config>`), saved with it; ``quantile_levels`` are the levels of ``predict``'s quantile
    columns, and those ``evaluate`` scores. ``datamodule`` holds the data it was fitted on (``None`` after
    :meth:`load`): ``predict()``, ``plot()`` and ``attention_weights()`` without data read it. ``data_file``
    records the CSV file it was fitted on (:class:`DataFile`; ``None`` for other data), saved with it.
    """

    def __init__(self, module: ForecastModule, fitted: FittedState, config: Mapping[str, Any], *,
                 split: Any = None, datamodule: WindowDataModule | None = None,
                 data_file: DataFile | None = None) -> None:
        self.module, self.fitted_state, self.config = module.eval(), fitted, dict(config)
        self.model_name: str = config["model"]
        self.module.quantile_levels = config["quantiles"]
        self.split, self.datamodule, self.data_file = split, datamodule, data_file

    @property
    def model(self) -> ForecastModel:
        return self.module.model

    @property
    def quantile_levels(self) -> tuple[float, ...]:
        return self.module.quantile_levels

    @quantile_levels.setter
    def quantile_levels(self, levels: Sequence[float]) -> None:
        levels = checked_quantiles(levels)  # as the option: floats (numpy's are no JSON), sorted
        refuse_point_quantiles(self.model_name, levels, self.model.probabilistic)
        self.module.quantile_levels = levels
        self.config["quantiles"] = list(self.module.quantile_levels)  # saved with it: a loaded one forecasts alike

    @property
    def n_samples(self) -> int:
        """The sample paths behind the quantiles (the module's ``n_samples``): drawn as the model forecasts, so
        another count re-scores the same fitted model."""
        return self.module.hparams.n_samples

    @n_samples.setter
    def n_samples(self, count: int) -> None:
        self.module.hparams.n_samples = int(require_int("n_samples", count, 1))  # an np.int64 is no JSON
        self.config["training"] = {**self.config["training"], "n_samples": self.module.hparams.n_samples}  # saved

    @property
    def input_columns(self) -> list[Hashable]:
        return list(self.fitted_state.input_columns)

    @property
    def output_columns(self) -> list[Hashable]:
        return list(self.fitted_state.output_columns)

    @property
    def freq(self) -> str:
        return self.fitted_state.freq

    def require_data(self, action: str) -> WindowDataModule:
        if self.datamodule is None:
            raise ConfigError(
                f"{action} needs the data the model was fitted on, and a loaded Forecaster holds none. Fix: "
                "pass the data explicitly: predict(df), evaluate(data), plot(df, window=i), "
                "attention_weights(df, window=i)."
            )
        return self.datamodule

    def _windows(self, windows: WindowDataModule | None) -> WindowDataModule:
        return windows if windows is not None else self.require_data("a window of the data")

    # ---------------------------------------------------------------------- forecast

    def _future_input(self, df: Table | None, future: Table | None = None) -> FutureBatch:
        if df is None:
            return self.require_data("predict() without df").future_batch(future=future)
        return self.fitted_state.future_batch(resolve_table(df), future)

    def _forecast(self, batch: Mapping[str, torch.Tensor]) -> tuple[np.ndarray, dict[float, np.ndarray]]:
        """Point forecast ``[B, P, C_out]`` and quantiles ``{level: [B, P, C_out]}`` in original units."""
        model, fitted = self.model, self.fitted_state
        with inference(model, batch) as (x, x_mark, y_mark):
            point = model(x, x_mark, y_mark)  # [B, P, C_out]
            quantiles = model_quantiles(self.module, self.quantile_levels, x, x_mark, y_mark)
        series = batch["series"].numpy() if fitted.panel is not None else None  # [B]: a panel's scaling
        original = {level: fitted.to_original(values.cpu().numpy(), series) for level, values in quantiles.items()}
        point_original = fitted.to_original(point.cpu().numpy(), series)
        if not all(np.isfinite(values).all() for values in (point_original, *original.values())):
            raise NonFiniteForecastError(
                f"{self.model_name} forecasts NaN or inf for this input. Fix: check the input for extreme "
                "values; if every input does this, the training diverged: fit again with a lower learning_rate."
            )
        return point_original, original

    def _forecast_frame(self, batch: Mapping[str, torch.Tensor], index: pd.DatetimeIndex) -> pd.DataFrame:
        point, quantiles = self._forecast(batch)
        columns = self.output_columns
        frame = pd.DataFrame(point[0], index=index, columns=columns)  # [P, C_out]
        for position, column in enumerate(columns):
            for level, values in quantiles.items():
                frame[quantile_column(column, level)] = values[0, :, position]
        return frame

    def _panel_frame(self, batch: Mapping[str, torch.Tensor], index: pd.MultiIndex) -> pd.DataFrame:
        point, quantiles = self._forecast(batch)  # [N, P, 1] each
        target = self.output_columns[0]
        frame = index.to_frame(index=False)  # [N*P] (id, date) rows, series by series
        frame[target] = point[..., 0].reshape(-1)
        for level, values in quantiles.items():
            frame[quantile_column(target, level)] = values[..., 0].reshape(-1)
        return frame

    def predict(self, df: Table | None = None, future_covariates: Table | None = None) -> pd.DataFrame:
        """Forecast the ``pred_len`` steps after the last row of ``df`` (default: the fitted data).

        A panel's forecast is a long frame with the id and date columns, the target in original
        units and its quantile columns: ``pred_len`` rows per series of ``df``, after that series'
        own end. ``future_covariates``, a long table (id, date, the future covariates), must give
        the known covariates of every one of those steps, else :class:`~forecast.errors.DataError`
        names the series and the missing steps (:class:`~forecast.errors.NonFiniteValueError` the
        covariate, series and steps whose value is NaN or inf). Past covariates need no future values.

        Returns a frame indexed by the future timestamps (continuing the series'
        frequency, named like the date column), one column per output variable in
        original units, and, when the model forecasts distributions, the quantile
        columns ``f"{variable}_q{level:g}"`` (e.g. ``OT_q0.1``). Inputs are scaled with
        the scaler fitted on the training rows (never refitted). ``df`` must hold the
        fitted variables, else :class:`~forecast.errors.UnknownColumnError`; they are found by
        name, so their order and any other columns do not matter.
        """
        future = self._future_input(df, future_covariates)
        if isinstance(future.index, pd.MultiIndex):
            return self._panel_frame(future.batch, future.index)
        return self._forecast_frame(future.batch, future.index)

    def _window_frames(self, window: int, split: str, windows: WindowDataModule | None
                       ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, int | None]:
        """History, forecast and truth frames (original units) of one window of a split, and its panel series'
        index (``None`` for a wide table)."""
        batch, x_dates, y_dates = window_batch(self._windows(windows), window, split)
        fitted, label_len = self.fitted_state, self.fitted_state.label_len
        c_out = len(fitted.output_columns)
        columns = self.output_columns
        series = int(batch["series"][0]) if fitted.panel is not None else None  # a panel's scaling
        history = fitted.to_original(batch["x"][0, :, -c_out:].numpy(), series)  # [L, C_out]
        dataset = self._windows(windows).dataset(split)
        if dataset.truth.shape[1] == c_out:  # the lookback's own values: NaN where fill_nan made them up, as truth
            start = dataset.window_start(window)
            history[np.isnan(dataset.truth[start:start + fitted.seq_len].numpy())] = np.nan
        truth = batch["truth"][0].numpy()  # [P, C_out]
        index = y_dates[label_len:].rename(fitted.prepare_options["date_column"])  # the time axis
        return (pd.DataFrame(history, index=x_dates, columns=columns),
                self._forecast_frame(batch, index),
                pd.DataFrame(truth, index=index, columns=columns), series)

    def _history(self, df: Table | None, rows: int, series_id: Hashable | None = None) -> pd.DataFrame:
        """The last ``rows`` rows of the output variables (a panel: of series ``series_id``), original units,
        indexed by timestamp."""
        fitted = self.fitted_state
        # Without df, the rows held since the fit, as the forecast is: a re-read file may have changed since.
        data = self.require_data("plot() without df").series if df is None else fitted.read(resolve_table(df))
        values, dates = _observed_outputs(data, len(fitted.output_columns), series_id)
        last = _last_rows(len(dates), rows)
        return pd.DataFrame(values[last], index=dates[last], columns=self.output_columns)

    # -------------------------------------------------------------------------- plots

    def plot(
        self,
        df: Table | None = None,
        *,
        window: int | None = None,
        split: str = "test",
        columns: Sequence[Hashable] | None = None,
        history: int | None = None,
        series: Hashable | None = None,
        future_covariates: Table | None = None,
        windows: WindowDataModule | None = None,
    ) -> Figure:
        """A Figure of the forecast with its history (and quantile bands, if any).

        Default: the real future after the last row of ``df`` (default the fitted
        data) with the last ``history`` rows (default ``seq_len``); for a panel, of the
        series ``series``, with the ``future_covariates`` of :meth:`predict`. With ``window=i``:
        the forecast of window ``i`` of the fitted data's ``split`` (``'train'``, ``'val'`` or ``'test'``; a
        panel's windows of every series in turn) against the truth, with its lookback as history. ``columns`` picks
        variables (a name or a list; default all outputs). ``history`` also shortens a window's lookback.
        ``windows``: the data module whose window ``window`` is drawn, default the fitted data's
        (:meth:`Forecaster.windows_of <forecast.api.Forecaster.windows_of>` cuts other data's, as
        ``Forecaster.plot(df, window=i)`` does).
        """
        fitted = self.fitted_state
        rows = require_int("history", history, 0, optional=True)
        if window is not None:
            if df is not None or series is not None or future_covariates is not None:
                raise ConfigError("plot(window=...) draws a window of the fitted data or of windows=...: df, series "
                                  "and future_covariates are for the forecast of the real future. Fix: give either.")
            past, future, truth, series_index = self._window_frames(window, split, windows)
            if rows is not None:
                past = past.iloc[_last_rows(len(past), rows)]
            title = f"{self.model_name}: {split} window {window}"
            if series_index is not None:
                title += f", series {fitted.panel.ids[series_index]!r}"
        else:
            if df is None:
                self.require_data("plot() without df")
            if fitted.panel is not None and series is None:
                raise ConfigError(f"plot() of a panel's future needs series=<one id>, e.g. {fitted.panel.ids[0]!r}")
            if fitted.panel is None and series is not None:
                raise ConfigError(f"plot(series={series!r}): this model was fitted on a wide table, whose variables "
                                  "are columns. Fix: columns=[...] picks variables.")
            future = self.predict(df, future_covariates)
            if fitted.panel is not None:
                id_column, date_column = fitted.panel.id_column, fitted.prepare_options["date_column"]
                future = future[future[id_column] == series].drop(columns=id_column).set_index(date_column)
            past = self._history(df, rows if rows is not None else fitted.seq_len, series)
            truth = None
            steps = "1 step" if fitted.pred_len == 1 else f"{fitted.pred_len} steps"
            title = f"{self.model_name}: forecast of the next {steps}"
            if series is not None:
                title += f" of series {series!r}"
        return plot_forecast(future, history=past, truth=truth, columns=columns, title=title)

    def attention_weights(
        self,
        df: Table | None = None,
        *,
        window: int | None = None,
        split: str = "test",
        windows: WindowDataModule | None = None,
    ) -> list[Any]:
        """The encoder's attention weights, one entry per layer, for one input window.

        The input is the lookback before the real future of ``df`` (default the fitted
        data), or window ``window`` of ``split`` (of ``windows``, as :meth:`plot`). Entries are what each attention
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
            if df is not None:
                raise ConfigError("attention_weights(df, window=...): a window of df is cut by its data module; "
                                  "Forecaster.attention_weights(df, window=i) does it, or pass windows=...")
            batch = window_batch(self._windows(windows), window, split)[0]
        else:
            batch = self._future_input(df).batch
        with inference(model, batch) as (x, x_mark, y_mark):
            return list(model.attention_weights(x, x_mark, y_mark))

    # ---------------------------------------------------------------- save and load

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write ``config.json``, ``scaler.json`` and ``model.pt`` to directory ``path``; returns it.

        Other files in the directory (checkpoints, logs) are left alone.
        """
        directory = Path(path).expanduser()  # as fit's run_dir, which save(run_dir) may name
        if directory.exists() and not directory.is_dir():  # mkdir's FileExistsError named no fix
            raise ConfigError(f"save({str(path)!r}): {directory} is a file; a saved forecaster is a folder "
                              "(config.json, scaler.json, model.pt). Fix: name a folder.")
        saved = _saved_state(self.fitted_state)  # refuses what config.json cannot keep before anything is written
        directory.mkdir(parents=True, exist_ok=True)
        state = {name: tensor.detach().cpu() for name, tensor in self.model.state_dict().items()}
        with held(directory / SAVE_LOCK_FILE, SAVE_LOCK_TIMEOUT_S, (
                f"save({str(path)!r}): another process has been saving into {directory} for "
                f"{SAVE_LOCK_TIMEOUT_S} s (it holds {directory / SAVE_LOCK_FILE}). Fix: save into another folder.")):
            write_atomically(directory / WEIGHTS_FILE, lambda temporary: torch.save(state, temporary))
            write_config(directory, self.config, saved, self.split, self.data_file, with_weights=True)
        return directory

    @classmethod
    def load(cls, path: str | os.PathLike[str], config: Mapping[str, Any], model_options: Mapping[str, Any],
             new_module: Callable[[ForecastModel, FittedState], ForecastModule], *,
             device: torch.device | None = None) -> Predictor:
        """The predictor saved in ``path``, whose ``config.json`` holds ``config``; the model is built with
        ``model_options`` and wrapped by ``new_module`` (:meth:`ForecasterOptions.new_module
        <forecast.options.ForecasterOptions.new_module>`, with the training settings).

        The weights are read with ``torch.load(..., weights_only=True)`` onto the CPU (then moved to ``device``,
        where it forecasts, when given): a file holding pickled code (or a damaged one) raises
        :class:`~forecast.errors.ConfigError`.
        """
        directory = Path(path)
        if not (directory / WEIGHTS_FILE).is_file():
            raise ConfigError(f"{directory / WEIGHTS_FILE} does not exist: the run never finished. Fix: fit again.")
        _check_saved_together(directory, config)
        scaling = read_json(directory / SCALER_FILE)
        try:
            fitted = FittedState.from_state_dict({"fitted": config["fitted"],
                                                  **(scaling if "panel" in scaling else {"scaler": scaling})})
        except ConfigError as error:
            raise ConfigError(f"{directory / CONFIG_FILE} and {SCALER_FILE}: {error}") from None
        with private_rng():  # the initial weights are overwritten; keep the caller's RNG as it was
            model = build_model(config["model"], DataSpec.from_fitted(fitted), **model_options)
        _load_weights(model, directory)
        return cls(new_module(model, fitted).to(device or "cpu"), fitted,
                   {k: v for k, v in config.items() if k not in _WRITTEN_BESIDE},
                   split=config.get("split"), data_file=DataFile.recorded_in(config, directory / CONFIG_FILE))


def _load_weights(model: ForecastModel, directory: Path) -> None:
    """Load a saved run's ``model.pt`` into ``model``: ConfigError for pickled code, a damaged file, or weights
    of another model."""
    state = load_checkpoint(directory / WEIGHTS_FILE, fix="save the forecaster again, or fit it again")
    if not isinstance(state, Mapping) or not all(isinstance(value, torch.Tensor) for value in state.values()):
        raise ConfigError(f"{directory / WEIGHTS_FILE} is not a state_dict of tensors. Fix: save the forecaster again.")
    try:
        model.load_state_dict(state)
    except RuntimeError as error:
        raise ConfigError(f"{directory / WEIGHTS_FILE} does not fit the model in {CONFIG_FILE}: {error}") from error
