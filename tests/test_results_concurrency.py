"""Results files under concurrent writers: sweep workers appending at once lose no row and duplicate none."""

from __future__ import annotations

import csv
import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import forecast.results
from forecast.errors import ConfigError
from forecast.results import COLUMNS, KEY, OPTIONAL_NUMBERS, lock_path, merge_results, read_results

ROOT = Path(__file__).resolve().parent.parent
WORKERS = 4
ROWS_PER_WORKER = 25

# A worker imports, says it is ready, waits for the start file, then runs its body as fast as it can.
BARRIER = """
import os, sys, time
from pathlib import Path
ready, start, *args = sys.argv[1:]
Path(ready).touch()
while not os.path.exists(start):
    time.sleep(0.001)
"""
APPEND = """
import json
from forecast.results import append_row
""" + BARRIER + """
results, rows = args
for row in json.loads(Path(rows).read_text()):
    append_row(results, row)
"""
MERGE = "from forecast.results import merge_results\n" + BARRIER + "merge_results([args[0]], args[1])\n"


def make_row(worker: int, index: int) -> dict[str, object]:
    """A complete row, built from ``COLUMNS`` as it is when the test runs; its identity is ``model``, ``seed``."""
    row: dict[str, object] = {column: "" if column in OPTIONAL_NUMBERS else 1.5 for column in COLUMNS}
    row.update({name: value for name, value in {"dataset": "toy", "features": "M", "options": "{}",
                                                "command": "x", "device": "cpu"}.items() if name in COLUMNS})
    row.update(model=f"worker{worker}", seed=index)
    return row


def identity(row: dict[str, object]) -> tuple[str, int]:
    return str(row["model"]), int(row["seed"])


def run_together(tmp_path: Path, code: str, arguments: list[list[str]]) -> None:
    """Start one worker per argument list, release them together once all have imported, wait for them."""
    start = tmp_path / "start"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    workers, ready = [], []
    for number, args in enumerate(arguments):
        ready.append(tmp_path / f"ready{number}")
        workers.append(subprocess.Popen([sys.executable, "-c", code, str(ready[-1]), str(start), *args], env=env,
                                        stderr=subprocess.PIPE, text=True))
    deadline = time.monotonic() + 60
    while not all(path.exists() for path in ready) and time.monotonic() < deadline:
        if any(process.poll() is not None for process in workers):
            break
        time.sleep(0.01)
    start.touch()
    for process in workers:
        _, errors = process.communicate(timeout=120)
        assert process.returncode == 0, errors


def test_concurrent_appends_keep_every_row_exactly_once(tmp_path):
    assert {"model", "seed"} <= set(KEY)
    results = tmp_path / "results" / "toy.csv"
    arguments = []
    for worker in range(WORKERS):
        rows = tmp_path / f"rows{worker}.json"
        rows.write_text(json.dumps([make_row(worker, index) for index in range(ROWS_PER_WORKER)]))
        arguments.append([str(results), str(rows)])
    run_together(tmp_path, APPEND, arguments)

    with results.open(newline="") as handle:  # the CSV parses: one header, every line complete
        lines = list(csv.reader(handle))
    assert lines[0] == COLUMNS and all(len(line) == len(COLUMNS) for line in lines[1:])
    frame = read_results(results)
    expected = {(f"worker{worker}", index) for worker in range(WORKERS) for index in range(ROWS_PER_WORKER)}
    found = [identity(row) for row in frame.to_dict("records")]
    assert len(found) == WORKERS * ROWS_PER_WORKER, f"{len(found)} rows of {WORKERS * ROWS_PER_WORKER}"
    assert set(found) == expected
    for worker in range(WORKERS):  # each worker's rows in the order it appended them
        assert [seed for model, seed in found if model == f"worker{worker}"] == list(range(ROWS_PER_WORKER))
    # Only the file and its lock are left: no temporary file.
    assert sorted(path.name for path in results.parent.iterdir()) == [lock_path(results).name, "toy.csv"]
    assert lock_path(results).name == ".toy.csv.lock"


def test_concurrent_merges_add_each_row_once(tmp_path):
    """Three merges of the same rows into one target, racing: the key check and the append share the lock."""
    source = tmp_path / "worker"
    source.mkdir()
    with (source / "toy.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(make_row(0, index) for index in range(ROWS_PER_WORKER))
    target = tmp_path / "results"
    run_together(tmp_path, MERGE, [[str(source), str(target)]] * 3)
    frame = read_results(target / "toy.csv")
    assert sorted(identity(row) for row in frame.to_dict("records")) == [("worker0", i) for i in range(ROWS_PER_WORKER)]
    assert merge_results([source], target) == []  # nothing left to add



def test_a_lock_held_too_long_is_an_error_that_names_the_fix(tmp_path, monkeypatch):
    """A broken lock (held by no one alive, or by a filesystem that loses unlocks) must not hang a sweep."""
    results = tmp_path / "toy.csv"
    monkeypatch.setattr(forecast.results, "LOCK_TIMEOUT_S", 0.2)
    with open(lock_path(results), "w") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)  # another writer's lock, as the kernel sees it
        with pytest.raises(ConfigError, match="Fix: if no process is writing there, delete the lock file"):
            forecast.results.append_row(results, make_row(0, 0))
    assert not results.exists()
    forecast.results.append_row(results, make_row(0, 0))  # free again
    assert len(read_results(results)) == 1


def test_rows_appended_while_rows_are_updated_are_kept_and_so_are_the_updates(tmp_path, monkeypatch):
    """update_rows ran its update (re-testing a saved model: minutes) holding the file's lock, so a sweep worker
    appending meanwhile waited, and lost its row past LOCK_TIMEOUT_S. Now only the rewrite holds it."""
    results = tmp_path / "toy.csv"
    forecast.results.append_row(results, make_row(0, 0))
    monkeypatch.setattr(forecast.results, "LOCK_TIMEOUT_S", 0.2)

    def slow_update(row: dict[str, str]) -> bool:
        forecast.results.append_row(results, make_row(1, 0))  # another worker finishes a run meanwhile
        row["rho_risk_0.5"] = "0.25"
        return True

    assert forecast.results.update_rows(results, slow_update) == 1
    frame = read_results(results)
    assert frame["model"].tolist() == ["worker0", "worker1"]
    assert frame["rho_risk_0.5"].tolist()[0] == 0.25 and pd.isna(frame["rho_risk_0.5"].tolist()[1])


def test_an_update_of_a_row_another_process_changed_meanwhile_is_refused_and_changes_nothing(tmp_path, monkeypatch):
    results = tmp_path / "toy.csv"
    forecast.results.append_row(results, make_row(0, 0))
    monkeypatch.setattr(forecast.results, "LOCK_TIMEOUT_S", 0.2)

    def racing_update(row: dict[str, str]) -> bool:
        forecast.results.update_rows(results, lambda other: not other.update(commit="other"))
        row["rho_risk_0.5"] = "0.25"
        return True

    with pytest.raises(ConfigError, match=r"1 of the rows being updated were changed by another process meanwhile"):
        forecast.results.update_rows(results, racing_update)
    frame = read_results(results)
    assert frame["commit"].tolist() == ["other"] and frame["rho_risk_0.5"].isna().all()


def test_an_update_finds_its_rows_after_an_append_rewrote_an_older_file_and_updates_repeated_rows(tmp_path,
                                                                                                 monkeypatch):
    """Rows were matched by their cells in the file's own columns: an append that rewrote a file of an older
    format into today's columns, or two identical rows, made the update fail as "changed by another process"."""
    results = tmp_path / "toy.csv"
    older = COLUMNS[: COLUMNS.index("correction_kept")]
    row = make_row(0, 0)
    results.write_text(",".join(older) + "\n" + 2 * (",".join(str(row[column]) for column in older) + "\n"))
    monkeypatch.setattr(forecast.results, "LOCK_TIMEOUT_S", 0.2)
    appended = []

    def update(cells: dict[str, str]) -> bool:
        if not appended:  # another worker finishes a run meanwhile: its append rewrites the file in COLUMNS
            appended.append(forecast.results.append_row(results, make_row(1, 0)))
        cells["rho_risk_0.5"] = "0.25"
        return True

    assert forecast.results.update_rows(results, update) == 2
    frame = read_results(results)
    assert frame["model"].tolist() == ["worker0", "worker0", "worker1"]
    assert frame["rho_risk_0.5"].tolist()[:2] == [0.25, 0.25] and pd.isna(frame["rho_risk_0.5"].tolist()[2])


def test_an_update_of_one_of_two_identical_rows_changed_meanwhile_is_refused(tmp_path):
    results = tmp_path / "toy.csv"
    for _ in range(2):
        forecast.results.append_row(results, make_row(0, 0))
    calls = []
    text = results.read_text().splitlines()
    changed = text[1].replace(",1.5,", ",2.5,", 1)  # the first row, edited by another process meanwhile

    def update(row: dict[str, str]) -> bool:
        if not calls:
            calls.append(results.write_text("\n".join([text[0], changed, text[2]]) + "\n"))
        row["rho_risk_0.5"] = "0.25"
        return True

    with pytest.raises(ConfigError, match=r"1 of the rows being updated were changed by another process"):
        forecast.results.update_rows(results, update)
