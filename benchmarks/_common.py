"""Helpers shared by the benchmark scripts: machine facts, CPU contention, Markdown tables.

The benchmarks run on shared machines. A case records ``others_cpu``, the share of the
machine's cores that *other* processes kept busy while it ran (from ``/proc/stat``
minus this process's own CPU time and that of its children, such as DataLoader
workers), and waits for the CPU to go quiet before it starts.
"""

from __future__ import annotations

import csv
import os
import platform
import resource
import shlex
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
README = REPO / "benchmarks" / "README.md"


def busy_cpu_seconds() -> float | None:
    """CPU seconds spent busy by the whole machine so far (Linux /proc/stat), or None."""
    try:
        fields = [float(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def _live_children_cpu_seconds() -> float:
    """CPU seconds of this process's running children (DataLoader workers), from /proc."""
    total = 0.0
    try:
        tasks = list(Path(f"/proc/{os.getpid()}/task").iterdir())
    except OSError:
        return 0.0
    for task in tasks:
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                # Fields after the parenthesised command name; utime and stime are the 12th and 13th.
                fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            except (OSError, IndexError, ValueError):
                continue
    return total


def own_cpu_seconds() -> float:
    """CPU seconds used by this process and its children (finished and running)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    finished = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + finished.ru_utime + finished.ru_stime + _live_children_cpu_seconds()


def others_cpu(busy_before: float | None, own_before: float, wall: float) -> float | None:
    """Fraction of the machine's cores that other processes kept busy during ``wall`` seconds."""
    busy_after = busy_cpu_seconds()
    if busy_before is None or busy_after is None or wall <= 0:
        return None
    others = (busy_after - busy_before) - (own_cpu_seconds() - own_before)
    return min(max(others / (wall * (os.cpu_count() or 1)), 0.0), 1.0)


class CpuLoad:
    """Accumulates the others' CPU share over several timed stretches (``with load: ...``).

    ``share`` is the others' busy core-seconds over the machine's core-seconds of all
    stretches together, or None where /proc/stat cannot be read.
    """

    def __init__(self) -> None:
        self._others = 0.0
        self._wall = 0.0
        self._readable = True
        self._start: tuple[float | None, float, float] | None = None

    def __enter__(self) -> CpuLoad:
        self._start = (busy_cpu_seconds(), own_cpu_seconds(), time.perf_counter())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._start is not None
        busy_before, own_before, started = self._start
        wall = time.perf_counter() - started
        busy_after = busy_cpu_seconds()
        if busy_before is None or busy_after is None:
            self._readable = False
            return
        self._others += max((busy_after - busy_before) - (own_cpu_seconds() - own_before), 0.0)
        self._wall += wall

    @property
    def share(self) -> float | None:
        if not self._readable or self._wall <= 0:
            return None
        return min(self._others / (self._wall * (os.cpu_count() or 1)), 1.0)


def wait_for_quiet(threshold: float, limit: float) -> float | None:
    """Wait (up to ``limit`` s) until other processes use less than ``threshold`` of the cores.

    Returns the share last seen, None when it cannot be read or ``limit`` is 0 (no wait).
    """
    if limit <= 0:
        return None
    waited = 0.0
    while True:
        before, own = busy_cpu_seconds(), own_cpu_seconds()
        time.sleep(1.0)
        others = others_cpu(before, own, 1.0)
        if others is None or others <= threshold or waited >= limit:
            return others
        time.sleep(4.0)
        waited += 5.0


def machine(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """CPU, core count and OS, e.g. ``AMD EPYC (family 25 model 1, AVX2), 2 cores, Linux``
    (:func:`forecast.machine.cpu_label`: two 2-core "AMD EPYC" VMs of this project ran the roofline's fp32 GEMM
    at 192 and 118 GFLOP/s)."""
    from forecast.machine import cpu_label

    return f"{cpu_label(cpuinfo)}, {os.cpu_count()} cores, {platform.system()}"


def bf16_runs_natively(device: str) -> bool:
    """Whether bf16 autocast runs at speed on ``device`` (``cpu``, ``cuda``, ``cuda:1``): a GPU, or a CPU with bf16
    instructions (:func:`forecast.machine.cpu_has_bf16`). Elsewhere oneDNN emulates bf16: on this project's AVX2
    host a 1,024-square product ran 136x slower than in fp32, so bf16 rows there take hours and measure the
    emulation, not the model."""
    if not device.startswith("cpu"):
        return True
    from forecast.machine import cpu_has_bf16

    return cpu_has_bf16()


def by_default(device: str, what: str, names: Sequence[str] = ("fp32", "bf16"),
               precision: Callable[[str], str] = str) -> list[str]:
    """The default ``names`` (precisions, or variants whose ``precision(name)`` says theirs) to measure on
    ``device``: without the bf16 ones where bf16 is emulated (said on stdout). Names given on the command line
    are not passed through here: they always run."""
    native = bf16_runs_natively(device)
    kept = [name for name in names if native or precision(name) != "bf16"]
    if len(kept) < len(names):
        skipped = ", ".join(name for name in names if name not in kept)
        print(f"{what}: {skipped} left out by default, as this CPU emulates bf16 (name them to run them anyway)",
              flush=True)
    return kept


def commit() -> str:
    """The commit of the checkout, ``-dirty`` when its code is modified (:func:`forecast.training.git_commit`: on a
    copied tree without ``.git``, a lent GPU machine's, the ``FORECAST_COMMIT`` it was copied from)."""
    from forecast.training import git_commit  # Lightning's import, only where a row is stamped

    return git_commit()


def short_commit(full: str) -> str:
    """``abcdef123456`` or ``abcdef123456-dirty`` from a :func:`commit` string."""
    return full[:12] + ("-dirty" if full.endswith("-dirty") else "")


def command_line(argv: Sequence[str] | None = None) -> str:
    """The invocation as a reproducible command, script path relative to the repository."""
    argv = list(sys.argv if argv is None else argv)
    return "python " + shlex.join([os.path.relpath(argv[0], REPO), *argv[1:]])


def markdown_table(header: Sequence[str], body: Iterable[Sequence[str]]) -> str:
    """A right-aligned Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return "\n".join(lines)


def write_rows(rows: Iterable[dict[str, Any]], path: Path, columns: Sequence[str]) -> None:
    """Write ``rows`` as CSV with exactly ``columns`` (missing values empty), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns))
        writer.writeheader()
        for row in rows:
            writer.writerow({column: row.get(column, "") for column in columns})
    partial.replace(path)


def readme_markers(name: str) -> tuple[str, str]:
    """The comment lines around a generated block of benchmarks/README.md."""
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def update_readme(name: str, body: str, readme: Path = README) -> None:
    """Rewrite the ``name`` block of the README with ``body`` (the ``--markdown`` output)."""
    from forecast.report import update_block

    begin, end = readme_markers(name)
    readme.write_text(update_block(readme.read_text(), body.rstrip("\n") + "\n", begin, end))


def timed(step: Any, device: str) -> tuple[float, Any]:
    """Wall seconds of ``step()`` and its result, waiting for a CUDA device to finish the work."""
    import torch

    begin = time.perf_counter()
    result = step()
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - begin, result


def emit_tables(name: str, tables: str, readme: Path | None, source: Path | None = None) -> None:
    """Print the ``--markdown`` tables, or rewrite the README's block of them: ``name`` for a results file
    ``<script>_cpu.csv``, ``name-<rest>`` for ``<script>_<rest>.csv`` (``attention_cuda_bf16.csv``:
    ``attention-tables-cuda-bf16``), so each device's rows keep a block of their own."""
    if readme is None:
        print(tables.rstrip("\n"))
        return
    rest = source.stem.partition("_")[2] if source is not None else "cpu"
    update_readme(name if rest in ("", "cpu") else f"{name}-{rest.replace('_', '-')}", tables, readme)


def add_table_arguments(parser: Any) -> None:
    """``--markdown CSV`` (print a results file's README tables and exit) and ``--readme [PATH]``."""
    parser.add_argument("--markdown", type=Path, help="print the README tables of this results CSV and exit")
    parser.add_argument("--readme", type=Path, nargs="?", const=README, metavar="README",
                        help="with --markdown: rewrite this README's block (default benchmarks/README.md) instead")


def csv_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a results CSV, as written by :func:`write_rows`."""
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def upsert(rows: Sequence[dict[str, Any]], new: Iterable[dict[str, Any]], key: Callable[[dict[str, Any]], Any],
           failed: Callable[[dict[str, Any]], bool] = lambda row: False) -> list[dict[str, Any]]:
    """``rows`` with each of ``new`` in place of the row of its case (``key``), or appended where the case is new
    (``--merge``: a lent GPU's files hold only that loan's rows, which a copy over the results would lose).
    A failed row (``failed``) does not displace an ok one: a case a loan timed out keeps its earlier figure."""
    merged = list(rows)
    position = {key(row): index for index, row in enumerate(merged)}
    for row in new:
        index = position.get(key(row))
        if index is None:
            position[key(row)] = len(merged)
            merged.append(row)
        elif not failed(row) or failed(merged[index]):
            merged[index] = row
    return merged


def add_merge_argument(parser: Any) -> None:
    """``--merge NEW.csv``: upsert a results file's rows into ``--output`` (which it needs) and exit."""
    parser.add_argument("--merge", type=Path, metavar="CSV",
                        help="merge this results file's rows into --output (a case's row replaced by the new one "
                             "unless it failed, new cases appended) and exit: a lent GPU's files hold only its rows")


def commits_of(rows: Iterable[dict[str, Any]]) -> str:
    """The short commits of the rows, sorted and joined."""
    return ", ".join(sorted({short_commit(row["commit"]) for row in rows}))


ALLOCATORS = ("reuse", "glibc")


def add_allocator_argument(parser: Any) -> None:
    """``--allocator``: ``reuse`` (the ``forecast`` command's: freed memory kept for reuse,
    :func:`forecast.allocator.reuse_freed_memory`) or ``glibc`` (its defaults, as a Python session has them)."""
    parser.add_argument("--allocator", choices=ALLOCATORS, default="reuse",
                        help="reuse: freed memory kept for reuse, as the forecast command runs (default); glibc: "
                             "malloc's defaults, which map every block over 32 MiB afresh")


def allocator_of(row: dict[str, Any]) -> str:
    """The allocator a results row ran with: rows from before the ``allocator`` column ran with glibc's defaults."""
    return row.get("allocator") or "glibc"


def use_allocator(name: str) -> str:
    """Set this process's allocator to ``name`` (:data:`ALLOCATORS`); returns what it runs with, for the rows:
    ``glibc`` where keeping freed memory is not possible."""
    from forecast.allocator import reuse_freed_memory

    if name not in ALLOCATORS:
        raise ValueError(f"unknown allocator {name!r}; choose from {ALLOCATORS}")
    return "reuse" if name == "reuse" and reuse_freed_memory() else "glibc"
