"""Results rows (docs/design.md): one per run, appended atomically, read back for resuming.

Every change to ``<name>.csv`` is a read-modify-write (the file is rewritten to a temp
file and renamed, so a crash never tears it) done while holding the file lock
``.<name>.csv.lock`` next to it, so several processes (sweep workers of a job array,
on one machine or on the nodes of a cluster sharing the directory) append to the same
file without losing a row. The lock file stays on disk (deleting it could let two
writers lock different files); it is empty and ignored by git.
"""

from __future__ import annotations

import collections
import csv
import io
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from forecast.errors import ConfigError
from forecast.files import held, write_atomically

COLUMNS = [
    "dataset", "model", "features", "seq_len", "label_len", "pred_len", "seed",
    "mse", "mae", "mse_orig", "mae_orig", "n_test_windows", "epochs", "best_epoch",
    "train_seconds", "device", "version", "commit", "options", "command",
    # The named recipe (forecast.recipes), the training settings that differ from TrainingConfig's
    # defaults (sorted JSON), and the best epoch's validation loss (what settings are chosen on).
    "recipe", "training", "val_loss",
    # Rho-risks (a point forecast scored as every quantile since 2026-11-26, blank in older rows) and the 80%
    # interval's coverage (probabilistic models only).
    "rho_risk_0.5", "rho_risk_0.9", "rho_risk_0.5_orig", "rho_risk_0.9_orig", "coverage_0.8",
    # The data options the run was given (sorted JSON; "{}": none, as every row written before the column).
    "data",
    # The share of the network's correction to RevIN's centre the forecast kept (fitted on validation
    # windows by the recipe's calibrate_correction; 1: all of it). Blank where the model has no such split,
    # and in rows written before the column.
    "correction_kept",
]
PROBABILISTIC_COLUMNS = COLUMNS[COLUMNS.index("rho_risk_0.5"):COLUMNS.index("data")]
# Columns a row may leave blank (NaN when read back): what only some models have.
OPTIONAL_NUMBERS = (*PROBABILISTIC_COLUMNS, "correction_kept")
KEY = ["dataset", "model", "features", "seq_len", "label_len", "pred_len", "seed", "recipe", "options", "training",
       "data"]
EMPTY_DATA = "{}"

# An append holds the lock for milliseconds; waiting this long means the lock is broken.
LOCK_TIMEOUT_S = 600.0


def read_results(path: str | os.PathLike) -> pd.DataFrame:
    """All rows of a results CSV (an empty frame with the columns when it does not exist).

    Blank :data:`OPTIONAL_NUMBERS` (point-forecast rows, models without a correction to weigh) read as NaN; a
    blank or missing ``data`` reads as ``"{}"`` (no data options: every row written before the column existed).
    """
    path = Path(path)
    if not path.exists():
        return pd.DataFrame(columns=COLUMNS)
    frame = pd.read_csv(path, keep_default_na=False, dtype={"options": str, "command": str, "data": str})
    # Rows written before runs were keyed by their data options had none.
    frame["data"] = frame["data"].replace("", EMPTY_DATA) if "data" in frame else EMPTY_DATA
    for column in OPTIONAL_NUMBERS:
        if column in frame:
            frame[column] = pd.to_numeric(frame[column].replace("", float("nan")))
    return frame


# What every results file has had, from its first rows on: a CSV file without them holds something else.
RESULTS_IDENTITY = ("dataset", "model", "features", "seq_len", "label_len", "pred_len", "seed", "mse", "mae")


def read_results_file(path: str | os.PathLike, fix: str = "") -> pd.DataFrame:
    """A results file's rows (:func:`read_results`); ConfigError naming it when it is another CSV file (data, a
    report), whose rows would end a report in a type error or a merge in a half-merged target. ``fix``: what
    else the caller's user can do, after moving the file out of its folder."""
    path = Path(path)
    try:
        frame = read_results(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path} is not a results file: it cannot be read as a CSV table ({error}). Fix: move it "
                          f"out of {path.parent}{fix}.") from error
    missing = [column for column in RESULTS_IDENTITY if column not in frame.columns]
    if missing:
        raise ConfigError(f"{path} is not a results file: it lacks the columns {missing} of one. Fix: move it out of "
                          f"{path.parent}{fix}.")
    unkeyed = sorted(set(KEY) - set(frame.columns))  # a report would drop its rows, a sweep take none for done
    if unkeyed:
        raise ConfigError(f"{path} has no {unkeyed} columns: its rows were written before runs were keyed by them. "
                          "Fix: give its rows those columns, with the values each run had (this repository's "
                          "experiments/migrate_results.py reads the recipe and training settings from the rows' "
                          "commands).")
    return frame


def has_row(path: str | os.PathLike, key: dict[str, Any]) -> bool:
    """Whether a finished run with these key fields is already recorded (ConfigError naming ``path`` when it holds
    no results: a sweep's data file in its results folder, a torn file)."""
    frame = read_results_file(path, fix=", or write the results to another folder (results_dir)")
    if frame.empty:
        return False
    mask = pd.Series(True, index=frame.index)
    for column in KEY:
        mask &= frame[column].astype(str) == str(key[column])
    return bool(mask.any())


def require_appendable(path: str | os.PathLike) -> None:
    """ConfigError before a run trains where its row could not be added to ``path`` after it: a folder this
    process cannot write, or a file with columns results files do not have."""
    path = Path(path)
    existing = next((folder for folder in (path.parent, *path.parent.parents) if folder.exists()), Path("/"))
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{path}: {existing} is not writable, so no run's row could be recorded there. Fix: give a "
                          "writable results_dir.")
    if path.is_file():
        with path.open(newline="") as file:
            header = next(csv.reader(file), [])
        _refuse_unknown_columns(path, header)


def _refuse_unknown_columns(path: Path, header: Iterable[str]) -> None:
    unknown = sorted(set(header) - set(COLUMNS))
    if unknown:
        raise ConfigError(f"{path} has columns {unknown} that results files do not have, so no row can be added to "
                          "it. Fix: remove those columns, or move the file out and write the results to another one.")


def lock_path(path: str | os.PathLike) -> Path:
    """The lock file guarding the results file ``path``: ``.<name>.lock`` beside it, so that every
    process (on any node) that can write the results file finds the same lock."""
    path = Path(path)
    return path.with_name(f".{path.name}.lock")


@contextmanager
def locked(path: str | os.PathLike) -> Iterator[None]:
    """Hold the results file's lock, so that a read-modify-write of it excludes every other writer.

    A lock taken by a process that dies is released by the kernel; a wait beyond
    :data:`LOCK_TIMEOUT_S` means the filesystem's locks are broken, which an error says
    rather than a sweep hanging forever.
    """
    lock_file = lock_path(path)
    with held(lock_file, LOCK_TIMEOUT_S, (
            f"waited {LOCK_TIMEOUT_S:.0f} s for the lock {lock_file} of the results file {Path(path).name}. Fix: if "
            "no process is writing there, delete the lock file; if file locks do not work across the nodes of this "
            "filesystem, give each worker its own --results_dir and merge them with "
            "forecast.results.merge_results(worker_dirs, target).")):
        yield


def append_row(path: str | os.PathLike, row: dict[str, Any]) -> None:
    """Append one row under the file's lock (:func:`locked`), so concurrent writers lose no row.

    The file is rewritten to a temp file and renamed, so a crash mid-write never leaves a
    torn CSV and never loses earlier rows.
    """
    _check_complete(row)
    with locked(path):
        _append_unlocked(Path(path), row)


def append_new_row(path: str | os.PathLike, row: dict[str, Any]) -> bool:
    """Append ``row`` unless a row with its :data:`KEY` is recorded; whether it was appended.

    The check and the append happen under one lock, so two processes adding the same run
    (two merges of the same results) record it once.
    """
    _check_complete(row)
    with locked(path):
        if has_row(path, row):
            return False
        _append_unlocked(Path(path), row)
        return True


def update_rows(path: str | os.PathLike, update: Callable[[dict[str, str]], bool]) -> int:
    """Apply ``update`` to every row of ``path`` (its cells as text, changed in place; it returns whether it
    changed the row), then rewrite the file in :data:`COLUMNS` under its lock, the same atomic way as an append,
    with the changed cells of the rows still as they were read. Returns how many rows changed. For migrations of
    recorded rows.

    ``update`` runs without the lock (re-testing a saved model takes minutes, an append waits
    :data:`LOCK_TIMEOUT_S` at most): rows appended meanwhile are kept as they are."""
    path = Path(path)

    def rows_of(text: str) -> list[dict[str, str]]:
        reader = csv.DictReader(io.StringIO(text))
        rows = list(reader)
        _refuse_unknown_columns(path, reader.fieldnames or ())
        return rows

    def cells(row: dict[str, str]) -> tuple[str, ...]:  # a row's cells, whichever columns its file had
        return tuple(row.get(column) or "" for column in COLUMNS)

    changes: dict[tuple[str, ...], dict[str, str]] = {}
    changed = collections.Counter()  # rows by their cells as read: identical rows are each updated
    for row in rows_of(path.read_text()):
        read, key = dict(row), cells(row)
        if update(row):
            changes[key] = {column: value for column, value in row.items() if read.get(column) != value}
            changed[key] += 1
    if not changes:
        return 0
    with locked(path):
        rows = rows_of(path.read_text())
        keys = [cells(row) for row in rows]
        found = collections.Counter(key for key in keys if key in changes)
        if found != changed:
            lost = sum((changed - found).values())
            raise ConfigError(f"{path}: {lost} of the rows being updated were changed by another process meanwhile. "
                              "Fix: run the update again.")
        for row, key in zip(rows, keys, strict=True):
            row.update(changes.get(key, {}))
        _write_atomically(path, rows)
    return sum(changed.values())


def _check_complete(row: dict[str, Any]) -> None:
    """Refuse a row that lacks a required column before anything touches the file."""
    missing = set(COLUMNS) - set(OPTIONAL_NUMBERS) - row.keys()
    if missing:
        raise ValueError(f"results row lacks {sorted(missing)}")


def _append_unlocked(path: Path, row: dict[str, Any]) -> None:
    """The read-modify-write of :func:`append_row`; the caller holds the file's lock (which made the folder)."""
    _write_atomically(path, [row], _in_current_columns(path) if path.exists() else "")


def _write_atomically(path: Path, rows: Iterable[dict[str, Any]], existing: str = "") -> None:
    """``existing`` (a results file's text in :data:`COLUMNS`, or nothing) then ``rows``, written to a temp file
    renamed over ``path`` (:func:`~forecast.files.write_atomically`: a new file gets the umask's permissions, a
    replaced one keeps its own), so a crash never tears the file."""

    def write(temporary: Path) -> None:
        with temporary.open("x", newline="") as out:
            out.write(existing)
            if existing and not existing.endswith("\n"):  # a last row an editor left without its newline
                out.write("\n")
            writer = csv.DictWriter(out, fieldnames=COLUMNS, extrasaction="ignore", restval="",
                                    lineterminator="\n")
            if not existing:
                writer.writeheader()
            writer.writerows(rows)
            out.flush()
            os.fsync(out.fileno())

    write_atomically(path, write)


def merge_results(sources: Iterable[str | os.PathLike], target: str | os.PathLike) -> list[dict[str, Any]]:
    """Copy the rows of every ``<source>/*.csv`` into ``<target>/`` (same file name), skipping
    rows whose key is already there; returns the rows added, in order.

    For runs made elsewhere (another checkout, a GPU machine, sweep workers that each had
    their own results directory): their results directories merge into the committed one
    without duplicating a finished run, even while other processes write to the target.
    """
    # Every file is read and checked before any row is appended: a bad file found halfway would leave the
    # target half merged.
    files: list[tuple[Path, pd.DataFrame]] = []
    for source in sources:
        for path in sorted(Path(source).glob("*.csv")):
            destination = Path(target) / path.name
            if destination.resolve() == path.resolve():
                continue
            rows = read_results_file(path, fix=", or merge only the folders forecast sweep wrote its rows to")
            unrecorded = sorted(set(COLUMNS) - set(OPTIONAL_NUMBERS) - set(rows.columns))
            if unrecorded:  # e.g. val_loss, which rows written before it was recorded lack
                raise ConfigError(f"{path} has no {unrecorded} columns: its rows were written before runs recorded "
                                  "them. Fix: add those columns to it (blank cells where a run did not record a "
                                  "value), then merge again.")
            files.append((destination, rows))
    added: list[dict[str, Any]] = []
    for destination, rows in files:
        for row in rows.to_dict("records"):
            row = {name: "" if isinstance(value, float) and value != value else value
                   for name, value in row.items()}  # NaN: a blank cell, as it was read
            if append_new_row(destination, row):
                added.append(row)
    return added


def _in_current_columns(path: Path) -> str:
    """The file's text, its rows carried over to :data:`COLUMNS` when it was written with fewer."""
    text = path.read_text()
    header = text.split("\n", 1)[0].split(",")
    if header == COLUMNS or not text:
        return text
    _refuse_unknown_columns(path, header)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(csv.DictReader(io.StringIO(text)))
    return buffer.getvalue()
