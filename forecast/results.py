"""Results rows (DESIGN.md): one per run, appended atomically, read back for resuming."""

from __future__ import annotations

import csv
import io
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

COLUMNS = [
    "dataset", "model", "features", "seq_len", "label_len", "pred_len", "seed",
    "mse", "mae", "mse_orig", "mae_orig", "n_test_windows", "epochs", "best_epoch",
    "train_seconds", "device", "version", "commit", "options", "command",
    # Probabilistic models only (blank for point forecasts): rho-risks and 80% interval coverage.
    "rho_risk_0.5", "rho_risk_0.9", "rho_risk_0.5_orig", "rho_risk_0.9_orig", "coverage_0.8",
]
PROBABILISTIC_COLUMNS = COLUMNS[COLUMNS.index("rho_risk_0.5"):]
KEY = ["dataset", "model", "features", "seq_len", "label_len", "pred_len", "seed", "options"]


def read_results(path: str | os.PathLike) -> pd.DataFrame:
    """All rows of a results CSV (an empty frame with the columns when it does not exist).

    Blank probabilistic metrics (point-forecast rows) read as NaN.
    """
    path = Path(path)
    if not path.exists():
        return pd.DataFrame(columns=COLUMNS)
    frame = pd.read_csv(path, keep_default_na=False, dtype={"options": str, "command": str})
    for column in PROBABILISTIC_COLUMNS:
        if column in frame:
            frame[column] = pd.to_numeric(frame[column].replace("", float("nan")))
    return frame


def has_row(path: str | os.PathLike, key: dict[str, Any]) -> bool:
    """Whether a finished run with these key fields is already recorded."""
    frame = read_results(path)
    if frame.empty:
        return False
    mask = pd.Series(True, index=frame.index)
    for column in KEY:
        mask &= frame[column].astype(str) == str(key[column])
    return bool(mask.any())


def append_row(path: str | os.PathLike, row: dict[str, Any]) -> None:
    """Append one row; the file is rewritten to a temp file and renamed, so a crash
    mid-write never leaves a torn CSV and never loses earlier rows."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    missing = set(COLUMNS) - set(PROBABILISTIC_COLUMNS) - row.keys()
    if missing:
        raise ValueError(f"results row lacks {sorted(missing)}")
    existing = _in_current_columns(path) if path.exists() else ""
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", newline="") as out:
            out.write(existing)
            writer = csv.DictWriter(out, fieldnames=COLUMNS, extrasaction="ignore", restval="",
                                    lineterminator="\n")
            if not existing:
                writer.writeheader()
            writer.writerow(row)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def merge_results(sources: Iterable[str | os.PathLike], target: str | os.PathLike) -> list[dict[str, Any]]:
    """Copy the rows of every ``<source>/*.csv`` into ``<target>/`` (same file name), skipping
    rows whose key is already there; returns the rows added, in order.

    For runs made elsewhere (another checkout, a GPU machine): their results directories
    merge into the committed one without duplicating a finished run.
    """
    added: list[dict[str, Any]] = []
    for source in sources:
        for path in sorted(Path(source).glob("*.csv")):
            destination = Path(target) / path.name
            if destination.resolve() == path.resolve():
                continue
            for row in read_results(path).to_dict("records"):
                row = {name: "" if isinstance(value, float) and value != value else value
                       for name, value in row.items()}  # NaN: a blank cell, as it was read
                if not has_row(destination, row):
                    append_row(destination, row)
                    added.append(row)
    return added


def _in_current_columns(path: Path) -> str:
    """The file's text, its rows carried over to :data:`COLUMNS` when it was written with fewer."""
    text = path.read_text()
    header = text.split("\n", 1)[0].split(",")
    if header == COLUMNS or not text:
        return text
    unknown = set(header) - set(COLUMNS)
    if unknown:
        raise ValueError(f"{path} has columns {sorted(unknown)} that results files do not have; "
                         "Fix: write these rows to another file.")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(csv.DictReader(io.StringIO(text)))
    return buffer.getvalue()
