"""Markdown results tables: our runs side by side with the published numbers.

    forecast report --results_dir R --configs_dir C --published P      # print the tables
    forecast report --results_dir R --configs_dir C                     # a project's own: no published figures
    forecast report ... --readme experiments/README.md                 # rewrite the block between its markers

Two kinds of table, from the results CSVs (one row per run, :mod:`forecast.results`):

* **Summary** per dataset and feature mode: one row per horizon, one column per model
  with our mean MSE / MAE over seeds (standardized scale, the field's convention) at the
  setting of its config in ``experiments/configs``, next to the published figure
  (``experiments/published.csv``: the Informer paper's tables for ETTh1, ETTh2, ETTm1;
  the Autoformer paper's re-runs for the others). A setting with a config but no row is
  marked **not run**, never left out.
* **Detail** per setting actually run: every model and option set, with seeds, scored
  windows, original-unit errors, epochs, training time and device.

Numbers are printed to 3 decimals, rounded half-even, never in our favour.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from forecast.config import CONFIG_NAME, load_config
from forecast.errors import ConfigError, DataError
from forecast.results import COLUMNS, EMPTY_DATA, OPTIONAL_NUMBERS, read_results_file

__all__ = [
    "BEGIN",
    "END",
    "PUBLISHED_COLUMNS",
    "configured_settings",
    "detail_tables",
    "read_published",
    "read_results_dir",
    "render_report",
    "summarize",
    "summary_tables",
    "update_block",
]

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
PUBLISHED_COLUMNS = ("dataset", "features", "pred_len", "model", "published_as", "mse", "mae", "source")
# Optional in published.csv: the window a figure was measured with. Blank: the paper's own
# per-horizon window, which is the configured setting's, so the figure is cited there only.
PUBLISHED_WINDOW = ("seq_len", "label_len")
NOT_RUN = "not run"
MISSING = "–"
MODEL_ORDER = ("informer", "transformer", "logsparse", "seasonal_naive", "naive")
FEATURE_NAMES = {"M": "multivariate", "S": "univariate", "MS": "multivariate in, univariate out"}


# ------------------------------------------------------------------------------ inputs


def read_results_dir(results_dir: str | os.PathLike[str]) -> pd.DataFrame:
    """Every row of every ``*.csv`` in ``results_dir`` (an empty frame with the columns if none)."""
    if not Path(results_dir).is_dir():  # a mistyped folder would render a report of nothing run
        what = "is a file, not a folder" if Path(results_dir).exists() else "does not exist"
        raise ConfigError(f"results folder {results_dir} {what}. Fix: pass --results_dir DIR, the folder "
                          "forecast sweep wrote its rows to.")
    paths = sorted(Path(results_dir).glob("*.csv"))
    frames = [read_results_file(path, fix=", or pass --results_dir DIR, the folder forecast sweep wrote its rows to")
              .reindex(columns=COLUMNS) for path in paths]  # older files lack some columns
    frames = [frame for frame in frames if not frame.empty]
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    results = pd.concat(frames, ignore_index=True)
    for column in ("mse", "mae", "mse_orig", "mae_orig", "epochs", "train_seconds", *OPTIONAL_NUMBERS):
        results[column] = pd.to_numeric(results[column], errors="coerce")
    return results


def read_published(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The published figures: one row per (dataset, features, pred_len, model, window).

    Empty MSE/MAE read as NaN. ``seq_len``/``label_len`` (optional columns, blank by
    default) name the window a figure was measured with when it is not the paper's own
    per-horizon window, e.g. the original code re-run at the common 96/48 protocol.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"published numbers file {path} does not exist. Fix: pass --published PATH.")
    frame = pd.read_csv(path, dtype={"dataset": str, "features": str, "model": str, "source": str})
    missing = [column for column in PUBLISHED_COLUMNS if column not in frame.columns]
    if missing:
        raise DataError(f"{path} lacks the column(s) {missing} of a published numbers file (its columns: "
                        f"{list(frame.columns)}; those needed: {list(PUBLISHED_COLUMNS)}). Fix: pass --published PATH "
                        "of such a file.")
    for column in PUBLISHED_WINDOW:
        frame[column] = pd.to_numeric(frame[column], errors="raise") if column in frame else float("nan")
    if (frame["seq_len"].isna() != frame["label_len"].isna()).any():
        raise DataError(f"{path}: give both seq_len and label_len of a window, or neither.")
    duplicated = frame.duplicated(["dataset", "features", "pred_len", "model", *PUBLISHED_WINDOW])
    if duplicated.any():
        raise DataError(f"{path}: settings listed twice: {frame[duplicated].iloc[:, :4].to_dict('records')}.")
    return frame


@functools.lru_cache(maxsize=None)
def _setting_of(path: str, mtime: float) -> dict[str, object]:
    experiment = load_config(path).experiment()
    key = experiment.key()
    key.pop("seed")
    return key


def configured_settings(configs_dir: str | os.PathLike[str]) -> pd.DataFrame:
    """One row per config file under ``configs_dir/<dataset>/<model>_<features>_<pred_len>.yaml``.

    Columns: the results key without the seed (dataset, model, features, seq_len,
    label_len, pred_len, recipe, options, training, data) and ``config`` (the file).
    """
    if not Path(configs_dir).is_dir():
        raise ConfigError(f"configs folder {configs_dir} does not exist. Fix: pass --configs_dir DIR, the folder "
                          "of <dataset>/<model>_<features>_<horizon>.yaml configs.")
    rows = []
    for path in sorted(Path(configs_dir).glob("*/*.yaml")):
        if CONFIG_NAME.match(path.stem) is None:
            continue
        rows.append({**_setting_of(str(path), path.stat().st_mtime), "config": str(path)})
    columns = ["dataset", "model", "features", "seq_len", "label_len", "pred_len", "recipe", "options", "training",
               "data", "config"]
    return pd.DataFrame(rows, columns=columns)


# ------------------------------------------------------------------------ aggregation

_SETTING = ["dataset", "features", "seq_len", "label_len", "pred_len", "model", "recipe", "options", "training",
            "data"]
# Summary name -> results column: rho-risks on the original scale (the field reports them in
# the data's units) and the 80% interval's coverage; NaN where a row has none (a point forecast's coverage, and
# its rho-risks in rows written before 2026-11-26).
_PROBABILISTIC = {"r50_orig": "rho_risk_0.5_orig", "r90_orig": "rho_risk_0.9_orig", "coverage80": "coverage_0.8"}


def summarize(results: pd.DataFrame) -> pd.DataFrame:
    """Per setting and option set: seeds, scored windows, mean and std of the errors over seeds."""
    if results.empty:
        return pd.DataFrame(columns=[*_SETTING, "seeds", "windows", "mse", "mse_std", "mae", "mae_std",
                                     "mse_orig", "mae_orig", "epochs", "train_minutes", "device",
                                     "correction_kept", *_PROBABILISTIC])
    frame = results.astype({"seq_len": int, "label_len": int, "pred_len": int, "device": str})
    _refuse_uneven_seeds(frame)
    table = frame.groupby(_SETTING, sort=True).agg(
        seeds=("seed", "nunique"), windows=("n_test_windows", "min"),
        mse=("mse", "mean"), mse_std=("mse", "std"), mae=("mae", "mean"), mae_std=("mae", "std"),
        mse_orig=("mse_orig", "mean"), mae_orig=("mae_orig", "mean"),
        epochs=("epochs", "mean"), correction_kept=("correction_kept", "mean"),
        **{name: (column, "mean") for name, column in _PROBABILISTIC.items()},
    )
    # Seeds trained on a lent GPU sit beside seeds trained here: every device is named, each with its own
    # mean training time (a mean over both would describe neither).
    # A mean over the timed seeds only says so (a row written before training was timed has none).
    by_device = frame.groupby([*_SETTING, "device"], sort=True)["train_seconds"].agg(["mean", "count", "size"])
    by_device["train_seconds"] = [_minutes(mean / 60) + (f" ({count} of {size} timed)" if 0 < count < size else "")
                                  for mean, count, size in by_device.itertuples(index=False)]
    devices = by_device.reset_index().groupby(_SETTING, sort=True).agg(
        device=("device", ", ".join), train_minutes=("train_seconds", ", ".join))
    return table.join(devices).reset_index()


def _refuse_uneven_seeds(frame: pd.DataFrame) -> None:
    """DataError where a setting's mean over seeds would mislead: a seed recorded twice (it would weigh twice) or
    seeds scored on different test windows (their mean describes no one set of windows)."""
    repeated = frame[frame.duplicated([*_SETTING, "seed"], keep=False)]
    if not repeated.empty:
        first = repeated.iloc[0]
        raise DataError(f"{first.dataset} {first.model} {first.seq_len}/{first.label_len}/{first.pred_len} seed "
                        f"{first.seed}: {len(repeated)} rows of one run (recipe {first.recipe!r}, options "
                        f"{first.options}). Fix: keep one of them in the results file.")
    windows = frame.groupby(_SETTING, sort=False)["n_test_windows"].nunique()
    if (windows > 1).any():
        setting = dict(zip(_SETTING, windows[windows > 1].index[0], strict=True))
        raise DataError(f"{setting['dataset']} {setting['model']} {setting['seq_len']}/{setting['label_len']}/"
                        f"{setting['pred_len']}: its seeds scored different numbers of test windows, so their mean "
                        "describes no one test set. Fix: score every seed on every test window (re-run the odd one).")


def _minutes(value: float) -> str:
    return MISSING if pd.isna(value) else f"{value:.1f}"


def _number(value: float) -> str:
    """Three decimals, the field's convention; four significant digits for large values (counts in
    original units reach 1e10, where decimals are noise and the width breaks the table)."""
    if pd.isna(value):
        return MISSING
    return f"{value:.3f}" if abs(value) < 1e4 else f"{value:.4g}"


def _mean_std(mean: float, std: float) -> str:
    return _number(mean) if pd.isna(std) else f"{mean:.3f} ± {std:.3f}"


def _risks(row) -> str:
    """Rho-risks of a summary row; a dash where its rows have none."""
    return MISSING if pd.isna(row.r50_orig) else f"{_number(row.r50_orig)} / {_number(row.r90_orig)}"


def _ours(row: pd.Series | None) -> str:
    if row is None:
        return f"**{NOT_RUN}**"
    return f"{_mean_std(row.mse, row.mse_std)} / {_mean_std(row.mae, row.mae_std)} ({row.seeds})"


def _cited(published: pd.DataFrame, dataset: str, features: str, model: str, pred_len: int, seq_len: int | None,
           label_len: int | None, configured: bool) -> pd.Series | None:
    """The published figure for a setting: one measured at its very window, else (only at the
    configured window, the paper's own) one without a stated window; ``None`` if neither."""
    rows = published[(published.dataset == dataset) & (published.features == features)
                     & (published.model == model) & (published.pred_len == pred_len)]
    exact = rows[(rows.seq_len == seq_len) & (rows.label_len == label_len)]
    if not exact.empty:
        return exact.iloc[0]
    own_window = rows[rows.seq_len.isna()]
    return own_window.iloc[0] if configured and not own_window.empty else None


def _published_cell(row: pd.Series | None) -> str:
    if row is None:
        return MISSING
    return f"{_number(row.mse)} / {_number(row.mae)}"


def _ordered_models(models: Iterable[str]) -> list[str]:
    models = set(models)
    return [m for m in MODEL_ORDER if m in models] + sorted(models - set(MODEL_ORDER))


@dataclass(frozen=True)
class _Block:
    dataset: str
    features: str
    settings: pd.DataFrame  # configured settings of this dataset and feature mode
    published: pd.DataFrame


def _blocks(settings: pd.DataFrame, published: pd.DataFrame, order: Sequence[str]) -> list[_Block]:
    keys = {(d, f) for d, f in zip(settings["dataset"], settings["features"], strict=True)}
    keys |= {(d, f) for d, f in zip(published["dataset"], published["features"], strict=True)}
    rank = {name: index for index, name in enumerate(order)}
    ordered = sorted(keys, key=lambda k: (rank.get(k[0], len(rank)), k[0], "MS".find(k[1][0]), k[1]))
    return [_Block(d, f, settings[(settings.dataset == d) & (settings.features == f)],
                   published[(published.dataset == d) & (published.features == f)]) for d, f in ordered]


def _summary_block(block: _Block, summary: pd.DataFrame) -> list[str]:
    papers = block.published[block.published.seq_len.isna()]  # the papers' own windows
    setting = ["model", "seq_len", "label_len", "pred_len"]
    configured = set(block.settings[setting].astype({"seq_len": int, "label_len": int, "pred_len": int})
                     .itertuples(index=False, name=None))
    # A figure measured at a configured setting's own window has its column too (the Autoformer protocol's 96/48).
    at_config = block.published[[not pd.isna(row[1]) and (row[0], int(row[1]), int(row[2]), int(row[3])) in configured
                                 for row in block.published[setting].itertuples(index=False, name=None)]]
    citable = pd.concat([papers, at_config])
    models = _ordered_models([*block.settings["model"], *papers["model"]])
    paper_label = {m: citable[citable.model == m]["published_as"].iloc[0] for m in models
                   if (citable.model == m).any()}
    cited_sources: set[str] = set()
    header = ["horizon", "window"]
    for model in models:
        header.append(model)
        if model in paper_label:
            header.append(f"{paper_label[model]} (paper)")
    lines = [f"### {block.dataset}, {FEATURE_NAMES.get(block.features, block.features)} (`{block.features}`)", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    horizons = sorted({*block.settings["pred_len"].astype(int), *papers["pred_len"].astype(int)})
    for horizon in horizons:
        at = block.settings[block.settings.pred_len == horizon]
        windows = sorted({f"{s}/{l}" for s, l in zip(at["seq_len"], at["label_len"], strict=True)})
        cells = [str(horizon), ", ".join(windows) or MISSING]
        for model in models:
            config = at[at.model == model]
            # A horizon the paper published but no config covers still shows the paper's figure.
            window = (None, None) if config.empty else (config.iloc[0].seq_len, config.iloc[0].label_len)
            paper = _cited(block.published, block.dataset, block.features, model, horizon, *window, configured=True)
            if config.empty:
                cells.append(MISSING)
            else:
                setting = config.iloc[0]  # the configured run, its data options too: no other row's mean
                match = summary[(summary[_SETTING] == setting[_SETTING]).all(axis=1)]
                cells.append(_ours(match.iloc[0] if not match.empty else None))
            if model in paper_label:
                cells.append(_published_cell(paper))
                if paper is not None:
                    cited_sources.add(paper.source)
        lines.append("| " + " | ".join(cells) + " |")
    sources = sorted(cited_sources)
    if sources:
        lines += ["", "Published: " + "; ".join(sources) + "."]
    lines.append("")
    return lines


def summary_tables(results: pd.DataFrame, settings: pd.DataFrame, published: pd.DataFrame,
                   dataset_order: Sequence[str] = ()) -> str:
    """Markdown summary tables (see the module docstring); ``dataset_order`` orders the datasets."""
    summary = summarize(results)
    lines: list[str] = []
    for block in _blocks(settings, published, dataset_order):
        lines += _summary_block(block, summary)
    return "\n".join(lines)


def _options_cell(row: Any) -> str:
    """The model options, and the data options when the run was given any (a panel's roles, a split)."""
    cell = f"`{row.options}`"
    return cell if row.data == EMPTY_DATA else f"{cell}, data `{row.data}`"


def detail_tables(results: pd.DataFrame, published: pd.DataFrame | None = None,
                  settings: pd.DataFrame | None = None) -> str:
    """One Markdown table per setting run (dataset, features, window): every model and option set.

    A published figure is cited beside a row measured at its window: a paper's own figures
    at the configured setting's window (``settings``, from :func:`configured_settings`),
    others at the window ``published.csv`` gives them. Without ``published`` the tables have no column for them.
    """
    table = summarize(results)
    if table.empty:
        return "_No results yet._\n"
    cites = published is not None  # else a column that would be blank in every row
    published = published if cites else pd.DataFrame(columns=[*PUBLISHED_COLUMNS, *PUBLISHED_WINDOW])
    configured = set() if settings is None else set(
        settings[["dataset", "features", "seq_len", "label_len", "pred_len"]].itertuples(index=False, name=None))
    lines: list[str] = []
    for (dataset, features, seq, label, pred), block in table.groupby(
            ["dataset", "features", "seq_len", "label_len", "pred_len"], sort=True):
        lines += [f"#### {dataset} `{features}` {seq}/{label}/{pred}", "",
                  "| model | recipe | options | training | seeds | test windows | MSE | MAE | MSE (orig) | MAE (orig) "
                  "| R0.5 / R0.9 (orig) | 80% coverage | correction kept | epochs | train min/run | device |"
                  + (" published MSE / MAE |" if cites else ""),
                  "|---" * (17 if cites else 16) + "|"]
        at_configured = (dataset, features, seq, label, pred) in configured
        for row in block.itertuples():
            paper = _cited(published, dataset, features, row.model, pred, seq, label, at_configured)
            cited = f"{_published_cell(paper)} ({paper.published_as})" if paper is not None else ""
            lines.append(
                f"| {row.model} | {row.recipe} | {_options_cell(row)} | `{row.training}` | {row.seeds} | {row.windows} "
                f"| {_mean_std(row.mse, row.mse_std)} | {_mean_std(row.mae, row.mae_std)} "
                f"| {_number(row.mse_orig)} | {_number(row.mae_orig)} | {_risks(row)} | {_number(row.coverage80)} "
                f"| {_number(row.correction_kept)} | {row.epochs:.1f} "
                f"| {row.train_minutes} | {row.device} |" + (f" {cited} |" if cites else ""))
        lines.append("")
    return "\n".join(lines)


def render_report(results_dir: str | os.PathLike[str], configs_dir: str | os.PathLike[str],
                  published: str | os.PathLike[str] | None = None) -> str:
    """The whole Markdown report: summary tables, then detail tables; beside the published figures of
    ``published`` (:func:`read_published`), or ours alone when ``None`` (a project's own data has none)."""
    from forecast import datasets

    results = read_results_dir(results_dir)
    settings = configured_settings(configs_dir)
    cited_frame = None  # detail_tables' published figures: none, no column for them
    if published is None:
        published_frame = pd.DataFrame(columns=[*PUBLISHED_COLUMNS, *PUBLISHED_WINDOW])
        title, cited = "### Summary", ("No published figures are compared (`forecast report --published FILE.csv` "
                                       f"adds them, columns {list(PUBLISHED_COLUMNS)}).")
    else:
        published_frame = cited_frame = read_published(published)
        title, cited = "### Summary: ours against the published numbers", (
            "Published figures come from each paper's own per-horizon settings; `transformer` is compared with the "
            "paper's Informer† (canonical attention) and `logsparse` with LogTrans.")
    return "\n".join([
        title, "",
        "MSE / MAE on the standardized scale. Ours: mean (± standard deviation) over seeds, seed count in "
        "brackets, at the setting of its config (`<dataset>/<model>_<features>_<horizon>.yaml` in the configs "
        "directory) "
        "(window = input/label length); **not run** marks a configured setting without results yet; "
        f"{MISSING} marks no figure. {cited}", "",
        summary_tables(results, settings, published_frame, datasets.names()),
        "### Every setting run", "",
        detail_tables(results, cited_frame, settings),
    ])


def update_block(text: str, body: str, begin: str = BEGIN, end: str = END, *, source: str = "the text") -> str:
    """``text`` (of file ``source``) with the part between the ``begin`` and ``end`` markers replaced by ``body``."""
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    if pattern.search(text) is None:
        raise ConfigError(f"{source}: the markers {begin} ... {end} are missing. Fix: add them where the tables "
                          "belong.")
    return pattern.sub(lambda _: f"{begin}\n{body}\n{end}", text)
