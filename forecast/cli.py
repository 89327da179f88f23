"""The ``forecast`` console script.

    forecast fit      --config experiments/configs/ETTh1/informer_M_24.yaml --trainer.max_epochs 1
    forecast validate --config experiments/configs/ETTh1/informer_M_24.yaml
    forecast test     --config experiments/configs/ETTh1/informer_M_24.yaml
    forecast predict  --config experiments/configs/ETTh1/informer_M_24.yaml --output future.csv
    forecast predict  --run_dir runs/etth1 --output future.csv      # a fitted run's folder alone
    forecast sweep    --sweep experiments/benchmark.yaml --datasets ETTh1 --models informer naive --seeds 0 1 2
    forecast report   --results_dir experiments/results --configs_dir experiments/configs \\
                      --published experiments/published.csv --readme experiments/README.md
    forecast splits   ETTh1 --seq_len 96 --label_len 48 --pred_len 24
    forecast demo     # the README's main job: the default Informer on ETTh1 against three baselines

``fit`` trains and saves the run (checkpoints every epoch, resumed when the same command
runs again; ``--resume false`` trains from scratch) to ``run_dir`` (default ``runs/<run name>``, the folder
``forecast sweep`` trains the same run in:
:meth:`forecast.experiment.Experiment.run_name`, the dataset, window, seed and recipe, then a digest
of the model options and training settings; a CSV file by its stem and a digest of its bytes); ``validate``,
``test`` and ``predict`` load the run the same config (and model/data overrides) names (refused, naming the
earlier run, when the CSV file has changed since the fit), or ``--run_dir DIR``; with ``--run_dir`` and no config,
the run as it was saved: its split, and the data it was fitted on (a registered dataset, or the CSV file whose path
and digest the run recorded) unless ``--input`` names other data. The run's own CSV file is read, by a config or
not, only while its bytes are those of the fit: edited or gone, it is refused, naming both digests (``--input``
uses the run on other data explicitly, that file as it is now included). ``test``
scores every test window (``--windows val`` the validation windows, with the same report). ``predict``
writes the forecast of the ``pred_len`` steps after the last row of the data as a CSV
(timestamps, original units).

Options are parsed by ``jsonargparse`` with their types (:func:`forecast.config.config_parser`):
YAML configs with ``model``, ``data`` and ``trainer`` sections (``--config``, repeatable, later
files win), then any option as ``--section.key value``, e.g. ``--model.d_model 64``,
``--data.batch_size 16``, ``--trainer.max_epochs 1``, ``--seed 3``. ``forecast fit --help`` lists
every option of the model the config names, of the data, of the training and every
``lightning.Trainer`` argument, with its type and the default the run gets under the recipe in
effect (the config's ``recipe:`` or ``--recipe``, default ``improved``; the options the recipe sets
say so); each value is checked against its type as it is parsed, ``--print_config`` included, and an
unknown option fails with the closest name and the valid ones. ``--print_config`` (every config
command) prints the config as given, then what the recipe and the defaults fill in as comments
(:func:`forecast.config.describe_config`), so the printed text, fed back, names the same run.
Config files are described in :mod:`forecast.config`.
``splits`` takes the same data options (:func:`forecast.config.add_data_arguments`) without the
``data.`` prefix.

The sizes a model is built for (input and output variables, time features, the season, a
panel's series and covariates) are no options: ``fit`` reads and scales the data first
(:class:`~forecast.data.WindowDataModule`), then builds the model from the fitted data state
(``DataSpec.from_fitted``), through :class:`~forecast.Forecaster` and the one training recipe that
``forecast sweep`` and the Python API use too. That state (scaler, columns, frequency) is saved
with the run, so ``predict`` forecasts in original units from the run folder alone.

One flag style: ``--snake_case`` (jsonargparse's and Lightning's); the dashed spelling
(``--dry-run``) is accepted too. ``fit`` and ``sweep`` take ``--progress true|false`` for
Lightning's progress bar; without it the bar shows in interactive use (a terminal or Jupyter)
unless the ``CI`` environment variable is set, as in the Python API.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd

from forecast.errors import ConfigError, ForecastError
from forecast.files import write_atomically

if TYPE_CHECKING:  # Lightning's import, which --help and the commands that train nothing never pay
    from forecast.api import Forecaster
    from forecast.config import RunConfig

__all__ = ["build_parser", "main"]

# The demo's schedule: the default (improved) recipe, capped at three epochs so that the trained
# models fit and test on ETTh1 in minutes on two CPU cores. The papers' settings are the
# configs in experiments/configs (recipe: paper; see experiments/README.md).
DEMO_TRAINING = dict(max_epochs=3, patience=2)

Command = Callable[[argparse.Namespace, list[str]], int]


# ------------------------------------------------------------------ config commands


# Each config command's own flags besides the config's options: (name, type, default, help).
_COMMAND_FLAGS: dict[str, list[tuple[str, Any, Any, str]]] = {
    "fit": [("resume", bool, True, "resume the run folder's last checkpoint; false trains from scratch, replacing "
                                   "the run there")],
    "validate": [],
    "test": [("windows", Literal["train", "val", "test"], "test", "the split whose windows are scored"),
             ("report", str | None, None, "where the full report goes (default RUN_DIR/<windows>_report.csv; "
                                            "of --input data, RUN_DIR/<windows>_report_<its name>.csv)")],
    "predict": [("output", str | None, None, "where the forecast goes (default RUN_DIR/forecast.csv; of "
                                             "--input data, RUN_DIR/forecast_<its name>.csv)"),
                ("future_covariates", str | None, None, "a panel's future covariates for the forecast steps: a "
                 "long-format CSV with the id, date and future covariate columns")],
}
_INPUT = ("input", str | None, None, "data to score or forecast from: a CSV path or dataset name (default: the "
                                     "config's data.dataset)")
_PRINT_CONFIG = ("--print_config",)


def _config(command: str, tokens: list[str]) -> tuple[Any, dict[str, Any]]:
    """The command's run config (files given by ``--config``, then overrides) and its own flags' values."""
    from forecast.config import parse_config

    flags = [*_COMMAND_FLAGS[command], *([_INPUT] if command != "fit" else [])]
    if not _names_a_config(tokens):
        run_dir = "" if command == "fit" else "; or --run_dir DIR of a fitted run alone"
        raise ConfigError(f"no config given. Fix: forecast {command} --config FILE.yaml (see experiments/configs/), "
                          "then overrides such as --trainer.max_epochs 1; or name everything by flags, starting "
                          f"with --model.name and --data.dataset (forecast fit --help lists them){run_dir}.")

    config, given = parse_config([], tokens, prog=f"forecast {command}",
                                 add_arguments=lambda parser: _add_flags(parser, flags, print_config=True),
                                 description=f"{COMMAND_HELP[command]}. Options come from YAML files (--config, "
                                             "repeatable) and flags (--model.d_model 64, --data.batch_size 16, "
                                             "--trainer.max_epochs 1, --seed 3, --run_dir DIR); later ones win. "
                                             "The defaults listed are those of the recipe in effect (the "
                                             "config's recipe: or --recipe); --print_config shows the config "
                                             "and, as comments, what the recipe and defaults fill in.")
    return config, {name: given.get(name, default) for name, _, default, _ in flags}


def _add_flags(parser: Any, flags: Sequence[tuple[str, Any, Any, str]], *, print_config: bool = False) -> None:
    """A command's own flags, ``(name, type, default, help)`` each, on its jsonargparse parser; with
    ``print_config``, its ``--print_config`` described as :func:`_print_config` takes it."""
    for name, annotation, default, help_text in flags:
        parser.add_argument(f"--{name}", type=annotation, default=default, help=help_text)
    if print_config:  # jsonargparse's help offers `[=flags]` (skip_default, skip_unset), which _print_config refuses
        for action in parser._actions:
            if _PRINT_CONFIG[0] in action.option_strings:
                action.metavar = ""
                action.help = ("print the config as given, then what the recipe and the defaults fill in, as "
                               "comments, and exit (no flags: --print_config alone)")


def _names_a_config(tokens: Sequence[str]) -> bool:
    """Whether ``tokens`` give a config: files, or flags starting with the model's name (whose mistakes, a
    misspelt ``--data.dataset`` among them, the parser names better than "no config given")."""
    return bool({token.partition("=")[0] for token in tokens}
                & {"--config", "--model.name", "--data.dataset", "-h", "--help"})


def _names_saved_run_only(tokens: Sequence[str]) -> bool:
    return "--run_dir" in {token.partition("=")[0] for token in tokens} and not _names_a_config(tokens)


def _require_fitted(run_dir: Path, config: RunConfig | None = None) -> Path:
    """``run_dir`` if it holds a fitted run. Else, where ``config`` named it by its CSV file (not by ``run_dir``),
    an error naming the file: it is missing, or this config's runs were fitted on other bytes of that name (their
    folders name another digest, :func:`forecast.experiment.dataset_label`)."""
    if (run_dir / "config.json").is_file():
        return run_dir
    if config is not None and config.run_dir is None:
        from forecast.errors import CsvReadError
        from forecast.experiment import runs_on_other_versions

        key = config.experiment().key()
        if key["dataset"].endswith("@missing"):
            raise CsvReadError(f"{config.dataset} does not exist, and a run on a CSV file is found by the file's "
                               "bytes. Fix: restore the file, or pass --run_dir DIR of the run fitted on it.")
        others = runs_on_other_versions(key, run_dir.parent)
        if others:  # the folders name the file's stem and digest, not its path: another file, or this one edited
            raise ConfigError(
                f"no run of this config is fitted on {config.dataset} as it is now (sha256 "
                f"{key['dataset'].rpartition('@')[2]}...; {run_dir} holds none). {', '.join(map(str, others))}: "
                f"this config's run on other bytes named {Path(config.dataset).name} (another file of that name, or "
                "this one before an edit). Fix: `forecast fit` with the same config to fit on the file as it is, "
                f"or --run_dir with one of those folders and --input {config.dataset} to use that run on it (if "
                "the edit moved the test split, its test scores are not that run's).")
    state = "holds no fitted run" if run_dir.exists() else "does not exist"
    raise ConfigError(f"{run_dir} {state}. Fix: run `forecast fit` with the same config and overrides first, or "
                      "pass --run_dir DIR of a fitted run.")


@dataclass(frozen=True)
class _FittedRun:
    """What ``validate``, ``test`` and ``predict`` work from: the run folder, its forecaster, the data to
    read (``--input``, else the config's dataset), the split (``None``: the fit's) and the command's flags."""

    run_dir: Path
    forecaster: Forecaster
    data: str
    split: Any
    flags: dict[str, Any]
    command: str


def _fitted_run(command: str, tokens: list[str]) -> _FittedRun:
    """The run a config names (its options and overrides, or ``--run_dir``), or, with ``--run_dir`` and no
    config, the run in that folder as it was saved: its data what it was fitted on unless ``--input`` names
    other data, its split the fit's."""
    from forecast.api import Forecaster

    if _names_saved_run_only(tokens):
        flags = _saved_run_flags(command, tokens)
        run_dir = _require_fitted(Path(flags.pop("run_dir")).expanduser())
        forecaster = Forecaster.load(run_dir)
        return _FittedRun(run_dir, forecaster, flags["input"] or _fitted_data(forecaster, run_dir), None, flags,
                          command)
    config, flags = _config(command, tokens)
    run_dir = _require_fitted(config.resolved_run_dir(), config)
    wanted = config.forecaster()
    # The config's loader and device settings (never the saved ones, which may be another machine's) score the run.
    forecaster = Forecaster.load(run_dir, scored_like=wanted)
    if config.run_dir is not None:  # else the run's folder is named by the config's options, so it is theirs
        _require_same_model(config, wanted, forecaster, run_dir)
    if config.quantiles is not None:  # read from the model as it forecasts and scores, never fitted: the config's
        forecaster.predictor.quantile_levels = wanted.quantile_levels  # checked as fit's
    if "n_samples" in config.trainer:  # the sample paths behind them, drawn as it forecasts: the config's too
        forecaster.predictor.n_samples = config.trainer["n_samples"]
    return _FittedRun(run_dir, forecaster, flags["input"] or _fitted_data(forecaster, run_dir, config.dataset),
                      config.split, flags, command)


def _require_same_model(config: RunConfig, wanted_forecaster: Forecaster, forecaster: Forecaster, run_dir: Path
                        ) -> None:
    """ConfigError naming each difference where ``run_dir`` (named by ``--run_dir``) holds another model or window
    than ``config`` names: the run is used as saved, so the config's options would be ignored. Training settings
    may differ (a run resumed with more epochs is the same run)."""
    from forecast import datasets
    from forecast.data.splits import split_key
    from forecast.options import LOADING_OPTIONS

    # Options that only load the windows: a run scored with other values is the same run (scored with the config's).
    loading = {*LOADING_OPTIONS, "num_workers"}
    wanted, saved = wanted_forecaster.config, forecaster.config
    registered = datasets.find(config.dataset)
    differences = [] if wanted["model"] == saved["model"] else [("model.name", saved["model"], wanted["model"])]
    for section, name in (("model_options", "model"), ("data", "data")):
        for option in sorted({*wanted[section], *saved[section]} - loading):
            ours, theirs = (values[section].get(option) for values in (wanted, saved))
            if option == "target" and registered is not None:  # None: the dataset's own target
                ours, theirs = (value if value is not None else registered.target for value in (ours, theirs))
            if ours != theirs:
                differences.append((f"{name}.{option}", theirs, ours))
    # The split is fit's argument, not the Forecaster's, so its config holds none: the run's config.json does. Scored
    # with another split, the test windows could be ones the model trained on. No split in the config: the run's.
    # A run fitted without a split (None in its config.json) was split by its data's default, as fit splits it.
    fitted_split = forecaster.predictor.split
    if fitted_split is None:
        from forecast.data.datamodule import default_split

        # A CSV path that is byte for byte a registered file is split by its protocol too, as fit splits it.
        panel = forecaster.predictor.fitted_state.panel is not None
        fitted_split = default_split(os.path.expanduser(config.dataset), panel=panel)
    if config.split is not None and split_key(config.split) != split_key(fitted_split):
        differences.append(("data.split", split_key(fitted_split), split_key(config.split)))
    if differences:
        listed = "; ".join(f"--{option} {theirs} in the run, {ours} in the config"
                           for option, theirs, ours in differences)
        raise ConfigError(f"--run_dir {run_dir}: the run holds another model than the config names: {listed}. Fix: "
                          f"drop --run_dir to use the config's own run (`forecast fit` fits it), or drop the config "
                          f"and its overrides to use {run_dir} as it was saved.")


def _saved_run_flags(command: str, tokens: list[str]) -> dict[str, Any]:
    """``--run_dir`` and the command's own flags, parsed with their types; ConfigError for any other option."""
    from jsonargparse import ArgumentError, ArgumentParser

    flags = [*_COMMAND_FLAGS[command], _INPUT]
    parser = ArgumentParser(prog=f"forecast {command}", exit_on_error=False, allow_abbrev=False)
    parser.add_argument("--run_dir", type=str, required=True)
    _add_flags(parser, flags)
    try:
        return parser.parse_args(tokens).as_dict()
    except ArgumentError as error:
        message = " ".join(str(error).split())
        if message.startswith("unrecognized arguments"):
            message += (f". With --run_dir and no config the run is used as it was saved, and the valid options are "
                        f"{['--run_dir', *(f'--{flag[0]}' for flag in flags)]}. Fix: name the run by its config "
                        "(--config FILE.yaml, then overrides) to set others")
        raise ConfigError(f"forecast {command}: {message}.") from None


def _fitted_data(forecaster: Forecaster, run_dir: Path, named: str | None = None) -> str:
    """What the run reads without ``--input``: ``named`` (its config's dataset), else the data it was fitted on.

    The CSV file the run recorded (:class:`~forecast.predictor.DataFile`), named or not, is read only while its
    bytes are those of the fit: else ConfigError naming the file, both digests and the fix. Without a record
    (a run saved before runs kept one, or fitted on a frame) a run alone reads the registered dataset it was
    fitted on, and ConfigError naming ``--input`` for any other data, named by its stem only."""
    from forecast import datasets

    recorded = forecaster.predictor.data_file
    if recorded is not None and (named is None or Path(named).resolve() == Path(recorded.path)):
        current = recorded.current_digest()
        if current != recorded.sha256:
            now, as_is = ((f"has changed since (sha256 {current}... now)", f" (--input {recorded.path}: the file as "
                           "it is now; if the edit moved the split, its scores are not the fit's)")
                          if current is not None else ("no longer exists", ""))
            raise ConfigError(
                f"{run_dir} was fitted on {recorded.path} (sha256 {recorded.sha256}... then), which {now}. Fix: "
                f"--input PATH to score or forecast other data with this run explicitly{as_is}, or `forecast fit` "
                "again to fit on the data as it is now.")
        return named or recorded.path
    if named is not None:
        return named
    name = forecaster.fitted_state.dataset
    if datasets.find(name) is None:
        raise ConfigError(f"{run_dir} was fitted on {name!r}, which is not a registered dataset, and records no "
                          "CSV file (saved before runs kept theirs, or fitted on a frame). Fix: pass the data with "
                          "--input (a CSV path), or the run's config with --config FILE.yaml.")
    return name


def _table(frame: pd.DataFrame) -> str:
    return frame.to_string(float_format="{:.4f}".format)


def _print_config(command: str, tokens: list[str]) -> int:
    """``--print_config``: the config as given, then what the recipe and the defaults fill in, as comments."""
    from forecast.config import describe_config

    flags = [token.partition("=")[2] for token in tokens if token.partition("=")[0] in _PRINT_CONFIG]
    if any(flags):  # jsonargparse's help offers skip_default, skip_null, comments: this one prints all, commented
        raise ConfigError(f"--print_config={next(flag for flag in flags if flag)} takes no flags here: it prints the "
                          "config as given, then what the recipe and the defaults fill in, as comments. Fix: "
                          "--print_config alone.")
    tokens = [token for token in tokens if token.partition("=")[0] not in _PRINT_CONFIG]
    if _names_saved_run_only(tokens):
        raise ConfigError("--print_config prints a config given by --config files or flags. Fix: read a fitted "
                          "run's configuration in the config.json of its --run_dir folder.")
    config, _ = _config(command, tokens)
    config.forecaster()  # the options checked together, as fit checks them: a config shown is one fit takes
    print(describe_config(config), end="")
    return 0


def _fit(args: argparse.Namespace, tokens: list[str]) -> int:
    from forecast.training import has_trainable_parameters

    config, flags = _config("fit", tokens)
    run_dir = config.resolved_run_dir()
    forecaster = config.forecaster()
    args.resume = flags["resume"]  # what a stop may say: the same command with --resume false starts over
    print(f"fitting {config.model} on {config.dataset} ({config.data['features']}, "
          f"{config.data['seq_len']}/{config.data['label_len']}/{config.data['pred_len']}), run directory {run_dir}",
          flush=True)
    started = time.perf_counter()
    forecaster.fit(config.dataset, split=config.split, run_dir=run_dir, resume=flags["resume"])
    trained = forecaster.last_fit
    if trained.epochs == 0 and has_trainable_parameters(forecaster.model):
        print(f"trained no epoch (max_epochs={forecaster.training.max_epochs}): the initial weights are saved in "
              f"{run_dir}")
    else:
        print(f"fitted in {time.perf_counter() - started:.1f} s; the best epoch's weights are saved in {run_dir}")
    if trained.best_val_loss is not None:
        print(f"best epoch {trained.best_epoch} of {trained.epochs}: validation loss {trained.best_val_loss:.4f}")
    return 0


def _validate(args: argparse.Namespace, tokens: list[str]) -> int:
    run = _fitted_run("validate", tokens)
    report = run.forecaster.evaluate(run.data, split=run.split, windows="val")
    print(f"validation of {run.run_dir} on {run.data} over {report.attrs['n_windows']} windows:")
    print(_table(report))
    return 0


def _destination(run: _FittedRun, flag: str, default: str) -> Path:
    """Where a command writes (``--<flag>``, else ``default`` in the run folder), checked before any work: never
    the data it reads, never a folder; its parent folder created."""
    destination = Path(run.flags[flag]).expanduser() if run.flags[flag] else run.run_dir / default
    if destination.is_dir():
        raise ConfigError(f"--{flag} {destination} is a folder. Fix: name a file, e.g. {destination / default}.")
    if destination.suffix.lower() != ".csv":  # written as CSV whatever the name says
        raise ConfigError(f"--{flag} {destination}: {run.command} writes CSV. Fix: name a .csv file, e.g. "
                          f"{destination.with_suffix('.csv')}.")
    for source, which in ((run.data, ""), (run.flags.get("future_covariates"), " (--future_covariates)")):
        source = _file_read(source) if source else None
        if source is not None and destination.exists() and destination.samefile(source):
            raise ConfigError(f"--{flag} {destination} is the data this command reads{which}; writing it would destroy "
                              "it. Fix: name another file.")
    try:
        destination.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(f"--{flag} {destination}: cannot create its folder ({error.strerror}). Fix: name a "
                          "writable place.") from None
    if not os.access(destination.parent, os.W_OK | os.X_OK):  # said before the work, not after it
        raise ConfigError(f"--{flag} {destination}: its folder {destination.parent} is not writable. Fix: name a "
                          f"writable place with --{flag}.")
    return destination


def _file_read(source: str) -> Path | None:
    """The file ``source`` names: a path, else a registered dataset's local copy (FORECAST_DATA_DIR, the cache,
    the package's own), so that a name such as ``ETTh1`` is guarded like its path; ``None`` where none is found."""
    from forecast import datasets

    if Path(source).expanduser().exists():  # --input ~/data.csv is read from the home folder (pandas expands it)
        return Path(source).expanduser()
    if datasets.find(source) is None:
        return None
    try:  # never a download here: a dataset not yet on disk cannot be the destination
        return datasets.locate(source, download=False, verify=False)
    except ForecastError:
        return None


def _test(args: argparse.Namespace, tokens: list[str]) -> int:
    from forecast.metrics import pivot_report

    run = _fitted_run("test", tokens)
    windows = run.flags["windows"]
    # Other data's report beside the fitted data's, never over it.
    other = f"_{Path(run.flags['input']).stem}" if run.flags["input"] else ""
    destination = _destination(run, "report", f"{windows}_report{other}.csv")
    report = run.forecaster.evaluate(run.data, split=run.split, windows=windows, detail=True)
    write_atomically(destination, lambda temporary: report.to_csv(temporary, index=False))
    print(f"test of {run.run_dir} on {run.data} over {int(report['n_windows'].iloc[0])} {windows} windows:")
    print(_table(pivot_report(report)))
    print(f"full report (per horizon step and variable): {destination}")
    return 0


def _predict(args: argparse.Namespace, tokens: list[str]) -> int:
    run = _fitted_run("predict", tokens)
    forecaster = run.forecaster
    # Other data's forecast beside the fitted data's, never over it (as test's report).
    other = f"_{Path(run.flags['input']).stem}" if run.flags["input"] else ""
    destination = _destination(run, "output", f"forecast{other}.csv")
    future = forecaster.predict(run.data, future_covariates=run.flags["future_covariates"])
    if forecaster.fitted_state.panel is not None:  # a long frame: its id and date are columns
        write_atomically(destination, lambda temporary: future.to_csv(temporary, index=False))
        state = forecaster.fitted_state
        n_series = future[state.panel.id_column].nunique()
        print(f"forecast of {state.pred_len} steps after each series' last row ({n_series} series, {len(future)} rows) "
              f"written to {destination}")
    else:
        write_atomically(destination, future.to_csv)
        print(f"forecast of the {len(future)} steps after the last row ({future.index[0]} to {future.index[-1]}) "
              f"written to {destination}")
    print(_table(future.head()))
    return 0


# --------------------------------------------------------------- sweep and report

DEFAULT_PUBLISHED = Path("published.csv")  # forecast report's figures where the folder has them


def _set_override(item: str) -> tuple[str, Any]:
    """``--set KEY=VALUE`` as ``(KEY, VALUE)``: a JSON value (``4``, ``[3, 2, 1]``, ``true``, ``null``) as
    such, anything else as typed, read by the config parser with the option's type."""
    name, equals, text = item.partition("=")
    if not equals or not name:
        raise ConfigError(f"--set {item!r}; Fix: --set section.key=value, e.g. --set trainer.max_epochs=2.")
    try:
        return name.strip().removeprefix("--"), json.loads(text)
    except ValueError:
        return name.strip().removeprefix("--"), text


def _optional_bool(text: str) -> bool | None:
    """``true``, ``false`` or ``null`` (any case), as the typed parser of ``forecast fit`` reads ``--progress``."""
    try:
        return {"true": True, "false": False, "null": None}[text.lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"{text!r} is not true, false or null") from None


def _flags(parser: argparse.ArgumentParser) -> tuple[str, ...]:
    return tuple(option for action in parser._actions for option in action.option_strings if option.startswith("--"))


def _unexpected(command: str, extra: list[str], flags: Sequence[str], fix: str = "") -> ConfigError:
    """The refusal of a command's ``extra`` arguments, offering the flag each misspelt one most likely meant."""
    from forecast.checks import did_you_mean

    hints = "".join(did_you_mean(token.partition("=")[0], flags) for token in extra if token.startswith("--"))
    return ConfigError(f"forecast {command}: unexpected arguments {extra}.{hints}{fix}")


def _sweep(args: argparse.Namespace, extra: list[str]) -> int:
    from forecast.sweep import SweepSpec, plan_sweep, run_sweep

    if extra:
        raise _unexpected("sweep", extra, args.flags, " Fix: set config options with --set section.key=value.")
    spec = SweepSpec.from_file(args.sweep) if args.sweep else SweepSpec()
    overrides = [_set_override(item) for item in args.set] or None
    spec = spec.updated(configs=args.config, configs_dir=args.configs_dir, datasets=args.datasets,
                        models=args.models, features=args.features, horizons=args.horizons, seeds=args.seeds,
                        results_dir=args.results_dir, runs_dir=args.runs_dir, overrides=overrides,
                        shard=args.shard)
    share = f" (shard {spec.shard[0]}/{spec.shard[1]})" if spec.shard else ""
    if args.dry_run:
        runs = plan_sweep(spec)
        frame = pd.DataFrame([{"status": run.status(), "config": str(run.config_path), "seed": run.experiment.seed,
                               "results": str(run.results)} for run in runs])
        print(frame.to_string(index=False))
        counts = frame["status"].value_counts()
        shown = ("done", "partial", "pending", *(("unreadable",) if counts.get("unreadable") else ()))
        statuses = ", ".join(f"{counts.get(status, 0)} {status}" for status in shown)
        print(f"{len(runs)} run{'s' * (len(runs) != 1)}: {statuses}{share}")
        return 0
    summary = run_sweep(spec, progress=args.progress, fail_fast=args.fail_fast,
                        announce=lambda line: print(line, flush=True))
    print(f"sweep{share}: {len(summary.ran)} ran, {len(summary.skipped)} already done, "
          f"{len(summary.failed)} failed")
    for run, error in summary.failed:
        print(f"  failed: {run.config_path} seed {run.experiment.seed}: {error}")
    return 1 if summary.failed else 0


def _report(args: argparse.Namespace, extra: list[str]) -> int:
    from forecast.files import write_text_atomically
    from forecast.report import render_report, update_block

    if extra:
        raise _unexpected("report", extra, args.flags)
    # The defaults suit a folder laid out like experiments/; a project's own data has no published figures.
    published = args.published or (DEFAULT_PUBLISHED if DEFAULT_PUBLISHED.is_file() else None)
    body = render_report(args.results_dir, args.configs_dir, published)
    if args.readme:
        readme = Path(args.readme)
        if not readme.is_file():
            raise ConfigError(f"{readme} does not exist. Fix: pass the Markdown file holding the result markers.")
        text = update_block(readme.read_text(), body, source=str(readme))
        # Whole or not at all: a crash mid-write would truncate the README's own text around the tables.
        write_text_atomically(readme, text)
        print(f"updated the results tables in {readme}")
    elif args.output:
        output = Path(args.output)
        if output.is_dir():
            raise ConfigError(f"--output {output} is a folder. Fix: name a file, e.g. {output / 'results.md'}.")
        output.parent.mkdir(parents=True, exist_ok=True)  # as predict's and test's --output do
        write_text_atomically(output, body + "\n")
        print(f"wrote {output}")
    else:
        print(body)
    return 0


# ------------------------------------------------------------------ splits and demo


def _split_part(text: str) -> str | int | float:
    """One word of ``--split``: a row end, a fraction, or a protocol name or date (kept as text)."""
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


# DataConfig fields that move no split border (loader settings, the windows scored, the time features):
# `forecast splits` takes every other data option, as `forecast fit` defines it.
_NOT_SPLITTING = ("time_encoding", "batch_size", "eval_batch_size", "num_workers", "drop_last_train",
                  "predict_split", "pin_memory", "persistent_workers")


def _splits_parser() -> Any:
    from jsonargparse import ArgumentParser

    from forecast.config import add_data_arguments

    parser = ArgumentParser(prog="forecast splits", exit_on_error=False, allow_abbrev=False,
                            description=f"{SPLITS_HELP[0].upper()}{SPLITS_HELP[1:]}: rows, dates and windows of "
                                        "train, val and test, read with the data options of `forecast fit` "
                                        "(without its data. prefix).")
    parser.add_argument("data", type=str, help="registered dataset name or CSV path")
    add_data_arguments(parser, None, skip=(*_NOT_SPLITTING, "split"))
    parser.add_argument("--split", nargs="+", type=str, default=None,
                        help="a protocol name, 3 fractions, 3 row ends, or 2 dates where val and test start")
    return parser


def _splits(args: argparse.Namespace, tokens: list[str]) -> int:
    from jsonargparse import ArgumentError

    from forecast.config import valid_options_hint

    prefixed = [token.partition("=")[0] for token in tokens if token.startswith("--data.")]
    if prefixed:  # the parser would read it as the positional data, silently replaced
        raise ConfigError(f"forecast splits: {prefixed[0]}: splits takes fit's data options without the data. "
                          f"prefix. Fix: --{prefixed[0][len('--data.'):]} (see `forecast splits --help`).")
    parser = _splits_parser()
    try:
        options = parser.parse_args(tokens).as_dict()
    except ArgumentError as error:
        message = " ".join(str(error).split())
        raise ConfigError(f"forecast splits: {message}.{valid_options_hint(parser, message)} Fix: see "
                          "`forecast splits --help` for every option and its type.") from None
    from forecast.data import WindowDataModule, describe_splits  # Lightning's import, after --help and errors
    data, split = options.pop("data"), [_split_part(part) for part in options.pop("split") or ()]
    datamodule = WindowDataModule(data, split=split[0] if len(split) == 1 else split or None, **options)
    datamodule.setup()
    print(describe_splits(datamodule))
    return 0


def _demo(args: argparse.Namespace, extra: list[str]) -> int:
    from forecast.api import Forecaster
    from forecast.data import describe_splits

    if extra:
        raise _unexpected("demo", extra, args.flags)
    rows = []
    models = (("naive", {}), ("seasonal_naive", {}), ("dlinear", {}), ("informer", {}))  # the season: the data's
    # Validation only picks the epoch to keep; a cap makes a quick run quicker, test stays whole.
    limits = {"limit_val_batches": args.val_batches} if args.val_batches is not None else {}
    for name, options in models:
        forecaster = Forecaster(name, seq_len=96, label_len=48, pred_len=24, features="M", seed=args.seed,
                                limit_train_batches=args.train_batches, **limits, **DEMO_TRAINING, **options)
        started = time.perf_counter()
        forecaster.fit(args.data)
        if not rows:
            print(describe_splits(forecaster.datamodule), flush=True)
        overall = forecaster.evaluate()
        rows.append(dict(model=name, mse=overall.loc["mse", "standardized"], mae=overall.loc["mae", "standardized"],
                         mse_orig=overall.loc["mse", "original"], mae_orig=overall.loc["mae", "original"],
                         test_windows=overall.attrs["n_windows"],
                         seconds=round(time.perf_counter() - started, 1)))
        print(f"{name}: done in {rows[-1]['seconds']} s", flush=True)
    print()
    print(pd.DataFrame(rows).to_string(index=False, float_format="{:.4f}".format))
    return 0


# --------------------------------------------------------------------------- parser


SPLITS_HELP = "summarize a dataset's splits and windows"
COMMAND_HELP = {
    "fit": "train a model from a YAML config and save the run",
    "validate": "score a fitted run on the validation windows",
    "test": "score a fitted run on every test window",
    "predict": "forecast the steps after the last row to a CSV",
}


def _config_command(commands: argparse._SubParsersAction, name: str, run: Command) -> None:
    # Every token (--help included) goes to the typed config parser of forecast.config, which lists and
    # checks every option of the model the config names.
    parser = commands.add_parser(name, help=COMMAND_HELP[name], add_help=False, allow_abbrev=False)

    def run_or_print(args: argparse.Namespace, tokens: list[str]) -> int:
        if any(token.partition("=")[0] in _PRINT_CONFIG for token in tokens):
            return _print_config(name, tokens)
        return run(args, tokens)

    parser.set_defaults(run=run_or_print)


def build_parser() -> argparse.ArgumentParser:
    """The console script's parser. One flag style throughout: ``--snake_case`` (Lightning's and
    jsonargparse's); :func:`main` reads a dashed spelling (``--dry-run``) as that flag."""
    from forecast.config import terminal_text

    parser = argparse.ArgumentParser(prog="forecast", description=terminal_text(__doc__), allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    for name, run in (("fit", _fit), ("validate", _validate), ("test", _test), ("predict", _predict)):
        _config_command(commands, name, run)
    commands.choices["fit"].set_defaults(resume=True)  # _fit sets what --resume said: a stop's message reads it

    sweep = commands.add_parser("sweep", allow_abbrev=False,
                                help="run datasets x models x horizons x seeds, one results row per run",
                                description="Run benchmark configs over seeds; finished rows are skipped and "
                                            "interrupted runs resume. See forecast.sweep.")
    sweep.add_argument("--sweep", default=None, metavar="FILE.yaml", help="sweep file (flags override it)")
    sweep.add_argument("--config", nargs="+", action="extend", default=None, metavar="FILE.yaml",
                       help="run these config files instead of selecting from --configs_dir (each its own run, never "
                            "merged as fit merges them)")
    sweep.add_argument("--configs_dir", type=Path, default=None,
                       help="default configs (experiments/benchmark.yaml names the repository's)")
    sweep.add_argument("--datasets", nargs="+", action="extend", default=None,
                       help="only the configs of these datasets")
    sweep.add_argument("--models", nargs="+", action="extend", default=None, help="only the configs of these models")
    sweep.add_argument("--features", nargs="+", action="extend", default=None, choices=["M", "S", "MS"],
                       help="only the configs of these feature modes")
    sweep.add_argument("--horizons", nargs="+", action="extend", type=int, default=None,
                       help="only the configs of these pred_len")
    sweep.add_argument("--seeds", nargs="+", action="extend", type=int, default=None,
                       help="default: each config's seed")
    sweep.add_argument("--results_dir", type=Path, default=None,
                       help="the folder of results CSVs, one per dataset (default: results)")
    sweep.add_argument("--runs_dir", type=Path, default=None,
                       help="default runs (where forecast fit keeps the same runs)")
    sweep.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config option in every run, e.g. trainer.max_epochs=2 (repeatable)")
    sweep.add_argument("--shard", default=None, metavar="K/N",
                       help="run only worker K's share of N (0-based; the runs at plan positions i %% N == K), "
                            "e.g. --shard ${SLURM_ARRAY_TASK_ID}/4 in a job array")
    sweep.add_argument("--dry_run", action="store_true",
                       help="list the runs and their status, run nothing")
    sweep.add_argument("--fail_fast", action="store_true", help="stop at the first failed run")
    sweep.add_argument("--progress", type=_optional_bool, default=None, metavar="{true,false,null}",
                       help="show Lightning's progress bar (default: in interactive use, a terminal or Jupyter, "
                            "unless the CI environment variable is set)")
    sweep.set_defaults(run=_sweep, flags=_flags(sweep))

    report = commands.add_parser("report", allow_abbrev=False,
                                 help="Markdown tables of the results next to the published numbers",
                                 description="Markdown tables of the results rows (mean and spread over seeds) next "
                                             "to the published numbers and the baselines.")
    report.add_argument("--results_dir", type=Path, default=Path("results"),
                        help="the folder of results CSVs (default: results)")
    report.add_argument("--configs_dir", type=Path, default=Path("configs"),
                        help="the <dataset>/<model>_<features>_<horizon>.yaml configs: a setting with a "
                             "config but no row is marked not run (default: configs)")
    report.add_argument("--published", type=Path, default=None,
                        help="the published figures to compare with (default published.csv if there is one, else "
                             "none: our numbers alone; the repository's: experiments/published.csv)")
    destination = report.add_mutually_exclusive_group()
    destination.add_argument("--readme", default=None, metavar="FILE.md",
                             help="rewrite the block between <!-- results:begin --> and <!-- results:end -->")
    destination.add_argument("--output", default=None, metavar="FILE.md", help="write the tables to a file")
    report.set_defaults(run=_report, flags=_flags(report))

    # Every token (--help included) goes to the typed parser of _splits_parser.
    splits = commands.add_parser("splits", help=SPLITS_HELP, add_help=False, allow_abbrev=False)
    splits.set_defaults(run=_splits)

    demo = commands.add_parser("demo", help="train the default Informer on ETTh1 against baselines",
                               allow_abbrev=False,
                               description="The default Informer against naive, seasonal_naive (the data's natural "
                                           "cycle) and dlinear, 96 steps in, 24 out, every test window scored.")
    demo.add_argument("--data", default="ETTh1", help="registered dataset name or CSV path (default: ETTh1)")
    demo.add_argument("--seed", type=int, default=0, help="seeds the training and the loader's shuffling")
    demo.add_argument("--train_batches", type=int, default=None,
                      help="cap on training batches per epoch (default: all)")
    demo.add_argument("--val_batches", type=int, default=None,
                      help="cap on validation batches per epoch (default: all); what the recipe fits on "
                           "the validation windows after training, and the test report, use every window")
    demo.set_defaults(run=_demo, flags=_flags(demo))
    return parser


@contextlib.contextmanager
def _console_log() -> Iterator[None]:
    """The package's INFO lines (one per epoch, "resuming from ...", "already in ..., skipping") on
    stderr for the duration of one command; the logger is left as it was."""
    package_logger = logging.getLogger("forecast")
    handler, level = logging.StreamHandler(), package_logger.level
    package_logger.addHandler(handler)
    package_logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        package_logger.removeHandler(handler)
        package_logger.setLevel(level)


# How each command spells a data option on its command line; the library's messages name the Python parameter.
_DATA_FLAG_PREFIX = {**dict.fromkeys(COMMAND_HELP, "--data."), "sweep": "--set data.", "splits": "--"}
# ... and a model option (`set season_length`: --model.season_length), where the command takes them.
_MODEL_FLAG_PREFIX = {**dict.fromkeys(("fit", "validate", "test", "predict"), "--model."), "sweep": "--set model."}
# The demo's own names for the training parameters it sets.
_DEMO_FLAGS = {"limit_train_batches": "--train_batches", "limit_val_batches": "--val_batches"}


def with_command_line_flags(message: str, command: str) -> str:
    """``message`` with the ``command``'s flags for the data options its fix names as Python parameters
    (``pass columns=[...]``: ``--data.columns`` for ``fit``, ``--columns`` for ``splits``)."""
    from forecast.config import data_option_names
    from forecast.models import MODELS, model_options

    prefix = _DATA_FLAG_PREFIX.get(command)
    # predict's --future_covariates CSV; fit's --resume false, the fix's resume=False
    own = {name: f"--{name} {str(not default).lower()}" if isinstance(default, bool) else f"--{name}"
           for name, _, default, _ in _COMMAND_FLAGS.get(command, ())}
    if command == "demo":
        own = dict(_DEMO_FLAGS)
    model_prefix = _MODEL_FLAG_PREFIX.get(command)
    modelled = {name for model in MODELS for name in model_options(model)} if model_prefix else set()
    # `pass columns=[...]`, `(fill_nan=...)`: not `runs/dataset=ETTh1_model=...`, a run folder's name, nor what the
    # message says before its fix (`models=[...]` of a sweep's filters)
    fix = message[message.find("Fix:"):] if "Fix:" in message else message
    # nor a keyword of a method call the fix shows (`df.rename(columns={...})`, `df.pivot(index=..., columns=...)`):
    # the arguments of a dotted name's parentheses are dropped, innermost first; the package's own calls
    # (`fit(..., id_column=...)`, `predict(..., future_covariates=...)`) keep theirs (their parentheses marked \x02
    # \x03, read as an opening one); a parenthesis after a space is prose, kept
    while (bare := re.sub(r"(\.\w+)?(?<=[\w\]])\(([^()]*)\)",
                          lambda call: "" if call[1] else f"\x02{call[2]}\x03", fix)) != fix:
        fix = bare
    named = dict.fromkeys(name for name in re.findall(r"(?:^|[\s(,`\x02])(\w+)=", fix)
                          if name in {*data_option_names(), *own, *modelled})
    if (prefix is None and command != "demo") or not named:
        return message
    reading = [prefix + name for name in named if name not in own and name not in modelled]
    if command in ("validate", "test", "predict") and reading:
        # A fitted run reads data with its fit's options: the flags would name another (unfitted) run.
        options = "is an option" if len(reading) == 1 else "are options"
        return (f"{message} ({command} reads data as the run's fit did: {', '.join(reading)} {options} of a new "
                "`forecast fit`; or correct the data.)")
    flags = ", ".join(own[name] if name in own else f"{model_prefix}{name}" if name in modelled else prefix + name
                      for name in named)
    return f"{message} (On the command line: {flags}.)"


INTERRUPTED_EXIT_STATUS = 130  # what a shell reports for a process that Ctrl-C (SIGINT) ended
# What a stopped command can pick up again: fit and sweep resume from the last checkpoint; the demo starts over.
_RESUMES = {"fit": "; the same command resumes from the last checkpoint",
            "fit --resume false": "; the same command without --resume false resumes from the last checkpoint (with "
                                  "it, the fit starts over)",
            "sweep": "; the same command skips the finished runs and resumes the stopped one from its last checkpoint"}


def _stopped_command(args: argparse.Namespace) -> str:
    """The key of :data:`_RESUMES` for a stopped command: ``fit --resume false`` does not resume when repeated."""
    return "fit --resume false" if args.command == "fit" and not args.resume else args.command


def main(argv: Sequence[str] | None = None) -> int:
    from forecast.config import snake_case_flag
    from forecast.plugins import load_plugins

    try:
        load_plugins()  # installed packages' models and attentions, before any option names them
    except ForecastError as error:
        print(f"forecast: error: {error}", file=sys.stderr)
        return 2
    parser = build_parser()
    args, extra = parser.parse_known_args([snake_case_flag(token) for token in
                                           (sys.argv[1:] if argv is None else argv)])
    try:
        with _console_log():
            return args.run(args, extra)
    except ForecastError as error:
        print(f"forecast: error: {with_command_line_flags(str(error), args.command)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"forecast: interrupted{_RESUMES.get(_stopped_command(args), '')}", file=sys.stderr)
        return INTERRUPTED_EXIT_STATUS
    except SystemExit as stop:
        if type(stop) is SystemExit:  # --help, a parser's error: not Lightning's stop, whose class subclasses it
            raise
        from forecast.training import SIGTERM_EXIT_STATUS, stopped_by_sigterm  # Lightning, loaded by then

        if not stopped_by_sigterm(stop):
            raise
        print(f"forecast: stopped by SIGTERM{_RESUMES.get(_stopped_command(args), '')}", file=sys.stderr)
        return SIGTERM_EXIT_STATUS


def console() -> int:
    """The ``forecast`` command (and ``python -m forecast``): :func:`main` in a process whose allocator keeps
    freed memory for reuse (:func:`~forecast.allocator.reuse_freed_memory`: up to twice as fast training
    steps on the CPU, results bit-identical). The process is the command's own, so its allocator may be set."""
    from forecast.allocator import reuse_freed_memory

    reuse_freed_memory()
    return main()


if __name__ == "__main__":
    sys.exit(console())
