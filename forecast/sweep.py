"""Sweeps: datasets x models x feature modes x horizons x seeds, one results row per run.

    forecast sweep --datasets ETTh1 --models informer naive --horizons 24 48 --seeds 0 1 2
    forecast sweep --sweep experiments/benchmark.yaml --datasets ETTh1 --dry_run
    forecast sweep --sweep experiments/benchmark.yaml --shard ${SLURM_ARRAY_TASK_ID}/4

A sweep selects config files ``<configs_dir>/<dataset>/<model>_<features>_<pred_len>.yaml``
(or takes the files it is given), runs each for every seed with
:func:`forecast.experiment.run_experiment` and appends one row per finished run to
``<results_dir>/<dataset>.csv``. It resumes: a run whose row exists is skipped, a run
killed mid-training continues from its last checkpoint under ``<runs_dir>``, and rows
are appended atomically, so a sweep killed at any point loses no finished row. Every
row records the command that reproduces that one run (on the same data: a CSV file's rows name
the digest of its bytes, :func:`forecast.experiment.dataset_label`).

``--shard K/N`` splits one sweep over N independent workers (a SLURM job array): worker K
(0-based) takes the runs at positions ``i`` of the full plan with ``i % N == K``, so every
run belongs to exactly one worker and the shares differ by at most one run. The workers
append to the shared results files, whose lock (:mod:`forecast.results`) keeps every row.

A sweep file is YAML with the same names as the flags (flags win)::

    configs_dir: experiments/configs     # default configs/
    results_dir: experiments/results     # default results/ (runs_dir: default runs/)
    datasets: [ETTh1, ETTh2]
    models: [informer, transformer, naive]
    features: [M]
    horizons: [24, 48]
    seeds: [0, 1, 2]
    overrides: {trainer.max_epochs: 2}   # applied to every config
    shard: "0/4"                         # this worker's share (usually given as --shard)
"""

from __future__ import annotations

import logging
import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from lightning.pytorch.callbacks import Callback

from forecast.checks import did_you_mean, is_int, require_ints
from forecast.config import (CONFIG_NAME, DEFAULT_RUNS_DIR, WINDOW_DEFAULTS, RunConfig, load_config,
                             read_yaml)
from forecast.errors import ConfigError, ForecastError
from forecast.experiment import Experiment, run_experiment
from forecast.results import has_row
from forecast.training import git_commit, last_checkpoint

__all__ = ["PlannedRun", "SweepSpec", "SweepSummary", "parse_shard", "plan_sweep", "run_sweep"]

log = logging.getLogger(__name__)

# A project's own folders by default; the repository's benchmark names its own in experiments/*.yaml sweep files.
DEFAULT_CONFIGS_DIR = Path("configs")
DEFAULT_RESULTS_DIR = Path("results")
# How the sweep's overrides (--set, or the sweep file's overrides:) set an option: what its errors name.
SET_FLAG = "--set {}=VALUE"
_LIST_FIELDS = ("configs", "datasets", "models", "features", "horizons", "seeds")
_SHARD = re.compile(r"\s*(-?\d+)\s*/\s*(-?\d+)\s*")
_SHARD_FIX = ("Fix: --shard K/N with 0 <= K < N (K is 0-based: the N workers are 0/N, 1/N, ..., (N-1)/N), "
              "e.g. --shard ${SLURM_ARRAY_TASK_ID}/4 under #SBATCH --array=0-3.")


def parse_shard(value: object) -> tuple[int, int] | None:
    """``"K/N"`` (a flag or a sweep file) or ``(K, N)`` as ``(K, N)``, checked: a bad share would
    silently skip runs or run some twice, so it is refused before anything runs."""
    if value is None:
        return None
    if isinstance(value, str):
        match = _SHARD.fullmatch(value)
        if match is None:
            raise ConfigError(f"shard {value!r} is not K/N. {_SHARD_FIX}")
        index, count = int(match[1]), int(match[2])
    elif isinstance(value, (tuple, list)) and len(value) == 2 and all(is_int(v) for v in value):
        index, count = int(value[0]), int(value[1])
    else:
        raise ConfigError(f"shard {value!r} is not K/N. {_SHARD_FIX}")
    if count < 1:
        raise ConfigError(f"shard {index}/{count}: N (the number of workers) must be at least 1. {_SHARD_FIX}")
    if not 0 <= index < count:
        one_based = (f" For a 1-based --array=1-{count}, pass --shard $((SLURM_ARRAY_TASK_ID - 1))/{count}."
                     if index == count else "")
        raise ConfigError(f"shard {index}/{count}: K must be in 0..{count - 1}. {_SHARD_FIX}{one_based}")
    return index, count


@dataclass(frozen=True)
class SweepSpec:
    """What to run. Empty filters select every config found; empty ``seeds`` keeps each config's seed."""

    configs_dir: Path = DEFAULT_CONFIGS_DIR
    configs: tuple[Path, ...] = ()
    datasets: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    horizons: tuple[int, ...] = ()
    seeds: tuple[int, ...] = ()
    results_dir: Path = DEFAULT_RESULTS_DIR
    runs_dir: Path = DEFAULT_RUNS_DIR
    overrides: tuple[tuple[str, Any], ...] = ()
    shard: tuple[int, int] | None = None  # (K, N): this worker's runs, see plan_sweep; "K/N" is accepted too

    def __post_init__(self) -> None:
        for name in ("configs_dir", "results_dir", "runs_dir"):  # "~" from a sweep file: see resolved_run_dir
            object.__setattr__(self, name, Path(getattr(self, name)).expanduser())
        object.__setattr__(self, "configs", tuple(Path(path).expanduser() for path in self.configs))
        for name in ("horizons", "seeds"):
            object.__setattr__(self, name, require_ints(name, getattr(self, name), 0, allow_empty=True))
        for name in ("datasets", "models", "features"):
            if any(not isinstance(v, str) for v in getattr(self, name)):
                raise ConfigError(f"sweep {name}={list(getattr(self, name))!r}; Fix: a list of names.")
        object.__setattr__(self, "shard", parse_shard(self.shard))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> SweepSpec:
        """A sweep file (YAML, ``yaml.safe_load``) with the fields of this class."""
        mapping = read_yaml(path)
        known = {"configs_dir", "results_dir", "runs_dir", "overrides", "shard", *_LIST_FIELDS}
        unknown = sorted(set(mapping) - known)
        if unknown:
            hints = "".join(did_you_mean(name, known) for name in unknown)
            raise ConfigError(f"{path}: unknown sweep option(s) {unknown}.{hints} Valid: {sorted(known)}.")
        values: dict[str, Any] = {}
        for name in _LIST_FIELDS:
            if name in mapping:
                value = mapping[name]
                values[name] = tuple(value if isinstance(value, list) else [value])
        for name in ("configs_dir", "results_dir", "runs_dir"):
            if name in mapping:
                values[name] = Path(mapping[name])
        overrides = mapping.get("overrides") or {}
        if not isinstance(overrides, Mapping):
            raise ConfigError(f"{path}: overrides must map dotted keys to values, e.g. {{trainer.max_epochs: 2}}.")
        values["overrides"] = tuple((str(k), v) for k, v in overrides.items())
        values["shard"] = mapping.get("shard")
        try:
            return cls(**values)
        except ConfigError as error:
            raise ConfigError(f"{path}: {error}") from error

    def updated(self, **changes: Any) -> SweepSpec:
        """A copy with the given fields replaced (``None`` and empty lists leave a field as it is)."""
        kept = {k: (tuple(v) if isinstance(v, list) else v) for k, v in changes.items()
                if v is not None and v != [] and v != ()}
        if "overrides" in kept:
            kept["overrides"] = self.overrides + tuple(kept["overrides"])
        return replace(self, **kept)


@dataclass(frozen=True)
class PlannedRun:
    """One run of a sweep: its config file, the config (seed set), the experiment and where its row goes."""

    config_path: Path
    config: RunConfig
    experiment: Experiment
    results: Path
    run_dir: Path
    command: str

    def status(self) -> str:
        """``done`` (row recorded), ``partial`` (a checkpoint to resume), ``unreadable`` (a damaged checkpoint: the
        run fails with the fix and the sweep goes on) or ``pending``."""
        if has_row(self.results, self.experiment.key()):
            return "done"
        try:
            return "partial" if last_checkpoint(self.run_dir) is not None else "pending"
        except ConfigError:
            return "unreadable"


@dataclass
class SweepSummary:
    """What a sweep did: rows appended, runs skipped as done, runs that failed (with the error)."""

    ran: list[PlannedRun] = field(default_factory=list)
    skipped: list[PlannedRun] = field(default_factory=list)
    failed: list[tuple[PlannedRun, BaseException]] = field(default_factory=list)


def _display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _selected_configs(spec: SweepSpec) -> list[Path]:
    if spec.configs:
        # The filters select from configs_dir: beside the files given they would be ignored, running what they
        # were meant to leave out.
        filters = [name for name in ("datasets", "models", "features", "horizons") if getattr(spec, name)]
        if filters:
            flags = ", ".join(f"--{name}" for name in filters)
            raise ConfigError(f"{flags} ({', '.join(f'{name}:' for name in filters)} in a sweep file) select configs "
                              f"from the configs folder, and do not apply to the config files given "
                              f"({', '.join(map(str, spec.configs))}). Fix: pass only the config files to run, or "
                              f"drop --config and select from --configs_dir with {flags}.")
        missing = [str(path) for path in spec.configs if not path.is_file()]
        if missing:
            raise ConfigError(f"config file(s) {missing} do not exist.")
        return list(spec.configs)
    if not spec.configs_dir.is_dir():
        raise ConfigError(f"configs directory {spec.configs_dir} does not exist. Fix: --configs_dir DIR, "
                          "or generate them with python experiments/make_configs.py.")
    datasets = spec.datasets or tuple(sorted(p.name for p in spec.configs_dir.iterdir() if p.is_dir()))
    chosen = []
    present: dict[str, set] = {"models": set(), "features": set(), "horizons": set()}  # what the filters could pick
    for dataset in datasets:
        folder = spec.configs_dir / dataset
        if not folder.is_dir():
            known = sorted(p.name for p in spec.configs_dir.iterdir() if p.is_dir())
            raise ConfigError(f"no configs for dataset {dataset!r} in {spec.configs_dir}; it has {known}.")
        for path in sorted(folder.glob("*.yaml")):
            name = CONFIG_NAME.match(path.stem)
            if name is None:
                continue
            model, features, horizon = name["model"], name["features"], int(name["pred_len"])
            for values, value in zip(present.values(), (model, features, horizon), strict=True):
                values.add(value)
            if ((not spec.models or model in spec.models) and (not spec.features or features in spec.features)
                    and (not spec.horizons or horizon in spec.horizons)):
                chosen.append(path)
    if not chosen and any(getattr(spec, name) for name in present):
        asked = [(name, getattr(spec, name)) for name in present if getattr(spec, name)]
        hints = "".join(did_you_mean(str(value), map(str, present[name])) for name, values in asked
                        for value in values if value not in present[name])
        of = f"of {list(datasets)} " if spec.datasets else ""
        raise ConfigError(
            f"the sweep selects no run: no config {of}in {spec.configs_dir} has "
            f"{', '.join(f'--{name} {list(values)}' for name, values in asked)}. "
            f"Theirs: --models {sorted(present['models'])}, --features {sorted(present['features'])}, --horizons "
            f"{sorted(present['horizons'])}.{hints} Fix: select from those."
        )
    return chosen


def _command(path: Path, seed: int, spec: SweepSpec) -> str:
    words = ["forecast", "sweep", "--config", _display_path(path), "--seeds", str(seed)]
    for flag, folder, default in (("--results_dir", spec.results_dir, DEFAULT_RESULTS_DIR),
                                  ("--runs_dir", spec.runs_dir, DEFAULT_RUNS_DIR)):
        if folder.resolve() != default.resolve():
            words += [flag, _display_path(folder)]
    for name, value in spec.overrides:
        text = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()
        words += ["--set", f"{name}={text}"]
    return " ".join(shlex.quote(word) for word in words)


def plan_sweep(spec: SweepSpec) -> list[PlannedRun]:
    """Every run of ``spec`` in order (config file, then seed), each once (a run named twice, by a repeated seed
    or dataset or a copied config, where it first appears); every config is validated first.

    With ``spec.shard == (K, N)`` only the runs at positions ``i % N == K`` of that order:
    the order depends only on the spec, so N workers given the same spec split it without
    talking to each other, and each run has exactly one owner.
    """
    runs: list[PlannedRun] = []
    planned: dict[tuple[Path, Path], PlannedRun] = {}
    for path in _selected_configs(spec):
        base = load_config(path, spec.overrides, flag=SET_FLAG)
        if base.run_dir is not None:  # every run (each seed) trains in its own folder, where fit and test find it
            raise ConfigError(f"{base.source} sets run_dir {base.run_dir}, which a sweep does not use: it trains each "
                              f"run in {_display_path(spec.runs_dir)}/<run name> (a folder per seed), where `forecast "
                              "fit`, `test` and `predict` with the config find it without run_dir. Fix: remove "
                              "run_dir from the config (or --set), or train that one run there with `forecast fit`.")
        if not spec.configs:  # chosen from configs_dir by their names, which must say what the files hold
            _require_named_as_it_holds(path)
        # Every value checked as the run would check it (the window, the features, the quantile levels), so that
        # a bad config fails the plan, not the sweep after the runs before it trained; a seed changes none of it.
        base.forecaster()
        for seed in spec.seeds or (base.seed,):
            config = base.with_seed(seed)
            experiment = config.experiment()
            run = PlannedRun(path, config, experiment, experiment.results_path(spec.results_dir),
                             spec.runs_dir / experiment.run_name(), _command(path, seed, spec))
            # A run named twice (--seeds 0 0, --datasets ETTh1 ETTh1, a copied config) would train twice, and
            # two shards would each take a copy and train it in the same run folder at once.
            first = planned.setdefault((run.results, run.run_dir), run)
            if first is not run:
                log.warning("%s seed %d is the same run as %s seed %d, named earlier in the sweep: it is planned "
                            "once", _display_path(path), seed, _display_path(first.config_path), first.experiment.seed)
                continue
            runs.append(run)
    if not runs:
        raise ConfigError(f"the sweep selects no run: no config in {spec.configs_dir} matches datasets="
                          f"{list(spec.datasets)}, models={list(spec.models)}, features={list(spec.features)}, "
                          f"horizons={list(spec.horizons)}.")
    return _shard_of(runs, spec.shard)


def _require_named_as_it_holds(path: Path) -> None:
    """ConfigError unless a config named ``<model>_<features>_<pred_len>.yaml`` holds that feature mode and horizon
    (before any ``--set``): the filters select files by name, so ``naive_S_24.yaml`` holding ``features: M``
    would run ``M`` for ``--features S``."""
    name = CONFIG_NAME.match(path.stem)
    data = read_yaml(path).get("data")
    if name is None or not isinstance(data, dict):  # a malformed data section is the full check's to name
        return
    named = {"features": name["features"], "pred_len": int(name["pred_len"])}
    # As the file says them (the window's defaults where it does not), unchecked: a --set may complete the rest.
    held = {key: data.get(key, WINDOW_DEFAULTS[key]) for key in named}
    if held != named:
        fixed = f"{name['model']}_{held['features']}_{held['pred_len']}.yaml"
        raise ConfigError(f"{path}: its name says {named} and it holds {held}, while the sweep's filters (--features, "
                          f"--horizons) select configs by name. Fix: rename it {fixed}, or correct its data section.")


def _shard_of(runs: list[PlannedRun], shard: tuple[int, int] | None) -> list[PlannedRun]:
    """Worker K's share of the full plan: positions K, K+N, K+2N, ... (balanced to within one run).

    A worker left without a run is refused: the split is wider than the sweep, and an
    error says so where an idle array task would not.
    """
    if shard is None:
        return runs
    index, count = shard
    share = runs[index::count]
    if not share:
        raise ConfigError(f"shard {index}/{count} gets no run: the sweep has only {len(runs)} run(s). "
                          f"Fix: split it over at most {len(runs)} workers (#SBATCH --array=0-{len(runs) - 1}).")
    return share


def run_sweep(
    spec: SweepSpec,
    *,
    callbacks: Sequence[Callback] = (),
    progress: bool | None = None,
    fail_fast: bool = False,
    announce: Callable[[str], None] = log.info,
) -> SweepSummary:
    """Run every pending run of ``spec``; finished runs are skipped, interrupted ones resume.

    A run that raises is recorded in the summary and the sweep goes on (unless
    ``fail_fast``); interrupting the process (``KeyboardInterrupt``) stops it, keeping
    every row appended so far. ``announce`` receives one line per run. ``progress``: Lightning's
    progress bar (``None``: in interactive use, as :class:`~forecast.Forecaster` decides).
    """
    summary = SweepSummary()
    runs = plan_sweep(spec)
    commit = git_commit(outputs=[spec.results_dir])  # of the code this process runs: every row records it
    for index, run in enumerate(runs, start=1):
        label = f"[{index}/{len(runs)}] {_display_path(run.config_path)} seed {run.experiment.seed}"
        if run.status() == "done":
            announce(f"{label}: done, skipped")
            summary.skipped.append(run)
            continue
        announce(f"{label}: running")
        try:
            row = run_experiment(run.experiment, run.results, spec.runs_dir, run.command,
                                 callbacks=callbacks, progress=progress, commit=commit)
        except Exception as error:  # one failed run (e.g. data not available) must not stop a long sweep
            if fail_fast:
                raise
            log.error("%s failed: %s", label, error, exc_info=not isinstance(error, ForecastError))
            announce(f"{label}: FAILED: {error}")
            summary.failed.append((run, error))
            continue
        if row is None:
            summary.skipped.append(run)
        else:
            summary.ran.append(run)
            announce(f"{label}: mse {row['mse']:.4f} mae {row['mae']:.4f} -> {_display_path(run.results)}")
    return summary
