"""Benchmark the attention kernels: time and peak memory against sequence length.

Every case (method x causal x mode x length) runs in fresh subprocesses. On CPU, peak
memory comes from a subprocess that builds the inputs and runs one step: the peak
resident set of its own address space (``VmHWM``, with glibc told to return freed blocks
at once) minus that of a baseline subprocess that builds the same inputs and imports the
same modules, and runs nothing; times come
from another subprocess: the median over several repeats after warm-up. On CUDA one
subprocess does both, since the allocator's peak counts only what the process itself
holds: the peak allocated memory of one step above the inputs, then the times (a
process start with CUDA costs seconds, and a lent GPU only minutes). Methods:

* ``sdpa``: :class:`FullAttention` (``scaled_dot_product_attention``, ``is_causal``).
* ``naive``: dense masked attention that materializes ``[B, H, L, L]``.
* ``prob``: :class:`ProbSparseAttention` (factor 5).
* ``logsparse``: :class:`LogSparseAttention`, fast path (causal only).
* ``sdpa_logmask``: SDPA with the LogSparse pattern as a boolean mask (causal only).
* ``naive_logmask``: dense masked attention with the LogSparse mask (causal only).

Modes: ``forward`` (eval, no grad) and ``train`` (forward + backward).

Usage::

    python benchmarks/attention.py                      # full grid, writes results CSV, prints tables
    python benchmarks/attention.py --lengths 96 384 --methods sdpa prob
    python benchmarks/attention.py --markdown benchmarks/results/attention_cpu.csv
    python benchmarks/attention.py --update benchmarks/results/attention_cpu.csv   # redo disturbed rows
    python benchmarks/attention.py --compare prob sdpa --lengths 1536 6144 --modes train
    python benchmarks/attention.py --merge attention_cuda.csv --output benchmarks/results/attention_cuda.csv

On a shared machine other processes distort timings (on 2 cores a busy neighbour
stalls every parallel region). Before each case the script waits for the CPU to
go quiet, records the share of the cores others used during the case
(``others_cpu``), reruns disturbed cases, and ``--update`` re-measures them later.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from _common import (
    README,
    REPO,
    RESULTS,
    add_merge_argument,
    busy_cpu_seconds,
    command_line,
    commit,
    csv_rows,
    emit_tables,
    machine,
    markdown_table,
    others_cpu,
    own_cpu_seconds,
    upsert,
    wait_for_quiet,
)

LENGTHS = (96, 192, 384, 768, 1536, 3072, 6144)
METHODS = ("sdpa", "naive", "prob", "logsparse", "sdpa_logmask", "naive_logmask")
CAUSAL_ONLY = {"logsparse", "sdpa_logmask", "naive_logmask"}
DENSE = {"naive", "naive_logmask"}
MODES = ("forward", "train")
MAX_REPEATS = 200
COLUMNS = (
    "method", "causal", "mode", "batch", "heads", "head_dim", "length", "dtype", "status", "median_ms", "min_ms",
    "repeats", "peak_mb", "baseline_mb", "others_cpu", "device", "machine", "threads", "torch", "commit", "seed",
    "command",
)


# ------------------------------------------------------------------------- worker side


def _make_attention(method: str, causal: bool, length: int, seed: int, device: Any) -> Callable[..., Any]:
    """The attention function a method name stands for."""
    import torch.nn.functional as F

    from forecast.layers.attention import (
        FullAttention,
        LogSparseAttention,
        ProbSparseAttention,
        dense_masked_attention,
    )
    from forecast.layers.masks import causal_mask, logsparse_mask

    if method == "sdpa":
        return FullAttention(causal=causal)
    if method == "prob":
        return ProbSparseAttention(factor=5, causal=causal, seed=seed)
    if method == "logsparse":
        return LogSparseAttention()
    if method in ("naive", "naive_logmask"):
        mask = logsparse_mask(length, device=device) if method == "naive_logmask" else None
        if method == "naive" and causal:
            mask = causal_mask(length, length, device)
        return lambda q, k, v: dense_masked_attention(q, k, v, mask)
    if method == "sdpa_logmask":
        logmask = logsparse_mask(length, device=device)
        return lambda q, k, v: F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=logmask  # [B, H, L, E]
        ).transpose(1, 2)
    raise ValueError(f"unknown method {method!r}")


def _build_case(spec: dict[str, Any]) -> tuple[dict[str, Callable[[], None]], Callable[[], None] | None]:
    """Inputs and one step function per method (``spec['methods']`` or ``spec['method']``)."""
    import torch

    device = torch.device(spec["device"])
    dtype = getattr(torch, spec["dtype"])
    train = spec["mode"] == "train"
    generator = torch.Generator(device="cpu").manual_seed(spec["seed"])
    shape = (spec["batch"], spec["length"], spec["heads"], spec["head_dim"])  # [B, L, H, E]
    q, k, v = (
        torch.randn(shape, generator=generator, dtype=dtype).to(device).requires_grad_(train) for _ in range(3)
    )
    upstream = torch.randn(shape, generator=generator, dtype=dtype).to(device) if train else None
    if spec["kind"] == "baseline":
        return {}, None

    def make_step(method: str) -> Callable[[], None]:
        attention = _make_attention(method, spec["causal"], spec["length"], spec["seed"], device)
        if isinstance(attention, torch.nn.Module):
            attention.train(train)

        def step() -> None:
            if train:
                for tensor in (q, k, v):
                    tensor.grad = None
                attention(q, k, v).backward(upstream)
            else:
                with torch.no_grad():
                    attention(q, k, v)

        return step

    methods = spec.get("methods") or [spec["method"]]
    synchronize = torch.cuda.synchronize if device.type == "cuda" else None
    return {method: make_step(method) for method in methods}, synchronize


def _peak_mb(device: str, status: Path = Path("/proc/self/status")) -> float:
    """The worker's peak memory: the CUDA allocator's, or the high-water RSS of this process's address space.

    Not ``ru_maxrss``: a child's starts at its parent's RSS at the fork (Linux carries the peak across
    ``exec``), so every peak below the driver's (some 450 MB once it has imported Lightning) read as the
    driver's. ``VmHWM`` belongs to the address space ``exec`` made; ``ru_maxrss`` serves where there is no /proc.
    """
    if device.startswith("cuda"):
        import torch

        return torch.cuda.max_memory_allocated() / 2**20
    try:
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024  # macOS reports bytes, Linux KiB


def _warm_up_runtime() -> None:
    """Pay torch's one-time costs before measuring anything.

    The first backward through a reduction imports sympy and mpmath (about 40 MB of
    Python modules); the baseline would not, and the first method measured would be
    charged for it. So would the kernels' modules: the baseline builds no kernel, and
    ``forecast.layers.attention`` imports ``torch._dynamo`` (ProbSparse's
    ``torch.compiler.disable``), some 37 MiB, which every method's peak counted.
    """
    import torch

    import forecast.layers.attention  # noqa: F401  (the modules _make_attention imports, in every worker)
    import forecast.layers.masks  # noqa: F401

    tensor = torch.ones(1, 2, 1, 2, requires_grad=True)
    (tensor * tensor).sum(-1).backward(torch.ones(1, 2, 1))


def run_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one case in this process.

    ``spec['kind']`` is ``"baseline"`` (build the inputs, report the peak memory),
    ``"memory"`` (one step, report the peak memory), ``"time"`` (warm-up and timed
    repeats) or ``"paired"`` (``spec['methods']`` timed in alternation).
    """
    import torch

    if spec["threads"]:
        torch.set_num_threads(spec["threads"])
    _warm_up_runtime()
    steps, synchronize = _build_case(spec)
    if spec["kind"] == "memory":
        steps[spec["method"]]()
    if spec["kind"] in ("baseline", "memory"):
        return {"peak_mb": _peak_mb(spec["device"])}
    memory: dict[str, float] = {}
    if spec["kind"] == "time" and spec["device"].startswith("cuda"):
        memory["baseline_mb"] = _peak_mb(spec["device"])  # the inputs alone
        steps[spec["method"]]()
        memory["peak_mb"] = _peak_mb(spec["device"])

    def timed(step: Callable[[], None]) -> float:
        begin = time.perf_counter()
        step()
        if synchronize is not None:
            synchronize()
        return time.perf_counter() - begin

    if spec["kind"] == "paired":
        # Alternate the methods on the same inputs, so that a machine whose speed
        # drifts over minutes slows them alike.
        started = time.perf_counter()
        busy_before, own_before = busy_cpu_seconds(), own_cpu_seconds()
        for step in steps.values():
            timed(step)
        rounds: dict[str, list[float]] = {method: [] for method in steps}
        for _ in range(spec["repeats"]):
            for method, step in steps.items():
                rounds[method].append(timed(step))
        medians = {method: statistics.median(times) * 1e3 for method, times in rounds.items()}
        return {**medians, "others_cpu": others_cpu(busy_before, own_before, time.perf_counter() - started)}

    step = steps[spec["method"]]

    def timed_step() -> float:
        return timed(step)

    times: list[float] = []
    started = time.perf_counter()
    busy_before, own_before = busy_cpu_seconds(), own_cpu_seconds()
    for _ in range(spec["warmup"]):
        timed_step()
    while True:
        times.append(timed_step())
        if time.perf_counter() - started > spec["time_budget"]:
            break  # slow cases keep fewer repeats; the CSV records how many ran
        enough = len(times) >= spec["repeats"] and sum(times) >= spec["min_time"]
        if enough or len(times) >= MAX_REPEATS:
            break
    others = others_cpu(busy_before, own_before, time.perf_counter() - started)
    return {
        "others_cpu": others,
        "median_ms": statistics.median(times) * 1e3,
        "min_ms": min(times) * 1e3,
        "repeats": len(times),
        **memory,
    }


# ------------------------------------------------------------------------- driver side


def _subprocess(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(spec)]
    environment = dict(os.environ)
    if spec["kind"] in ("baseline", "memory"):
        # glibc otherwise keeps freed blocks of recently freed sizes in its heap, so
        # the peak RSS would also count memory no tensor holds any more. Every block
        # of 64 KiB or more is mapped and unmapped instead: RSS follows live memory.
        # Too slow for timing, which runs without it ("time", and --compare's "paired",
        # whose sparse kernels it slowed some 1.6x).
        environment["MALLOC_MMAP_THRESHOLD_"] = "65536"
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=REPO, env=environment)
    except subprocess.TimeoutExpired:
        return {"status": f"timeout after {timeout:.0f}s"}
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"status": f"error (exit {done.returncode}): {tail[:200]}"}
    return {"status": "ok", **json.loads(done.stdout.strip().splitlines()[-1])}


def _run_case(spec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Run a case; rerun it (up to ``--retries``) when other processes competed for the CPU."""
    best: dict[str, Any] | None = None
    for _ in range(args.retries + 1):
        wait_for_quiet(args.busy_threshold, args.quiet_wait)
        result = _subprocess(spec, args.timeout)
        if result["status"] != "ok":
            return result
        if best is None or (result.get("others_cpu") or 0.0) < (best.get("others_cpu") or 0.0):
            best = result
        if (best.get("others_cpu") or 0.0) <= args.busy_threshold:
            break
    assert best is not None
    return best


def _dense_gb(args: argparse.Namespace, length: int, mode: str) -> float:
    """Rough peak of a dense [B, H, L, L] implementation: a few score-sized tensors."""
    copies = 4 if mode == "train" else 3
    element = 2 if args.dtype in ("float16", "bfloat16") else 4
    return copies * args.batch * args.heads * length * length * element / 2**30


Case = tuple[str, int, bool, str]  # mode, length, causal, method


def grid_cases(args: argparse.Namespace) -> list[Case]:
    causal_settings = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    return [
        (mode, length, causal, method)
        for mode in args.modes
        for length in args.lengths
        for causal in causal_settings
        for method in args.methods
        if causal or method not in CAUSAL_ONLY
    ]


def measure(args: argparse.Namespace, cases: list[Case], on_row: Callable[[dict[str, Any]], None]) -> None:
    """Run every case in its own subprocess and hand each finished row to ``on_row``."""
    import torch

    device_name = torch.cuda.get_device_name() if args.device.startswith("cuda") else machine()
    common = {
        "device": args.device, "machine": device_name, "torch": torch.__version__, "commit": commit(),
        "seed": args.seed, "threads": args.threads or torch.get_num_threads(), "dtype": args.dtype,
        "batch": args.batch, "heads": args.heads, "head_dim": args.head_dim,
        "command": command_line(),
    }
    in_process = args.device.startswith("cuda")  # one subprocess a case measures memory and time (run_worker)
    baselines: dict[tuple[str, int], float] = {}
    for mode, length, causal, method in cases:
        spec = {
            "batch": args.batch, "heads": args.heads, "head_dim": args.head_dim, "length": length, "mode": mode,
            "dtype": args.dtype, "device": args.device, "seed": args.seed, "threads": args.threads,
            "warmup": args.warmup, "repeats": args.repeats, "min_time": args.min_time,
            "time_budget": args.time_budget,
            "kind": "baseline", "method": method, "causal": causal,
        }
        if not in_process and (mode, length) not in baselines:
            baseline = _subprocess(spec, args.timeout)
            if baseline["status"] != "ok":
                raise RuntimeError(f"the baseline (inputs only) for L={length} failed: {baseline['status']}")
            baselines[(mode, length)] = baseline["peak_mb"]
        row = {**common, "method": method, "causal": causal, "mode": mode, "length": length}
        estimate = _dense_gb(args, length, mode)
        if method in DENSE and estimate > args.max_dense_gb:
            row["status"] = f"skipped: needs about {estimate:.0f} GB > --max-dense-gb {args.max_dense_gb}"
        else:
            memory = {"status": "ok"} if in_process else _subprocess({**spec, "kind": "memory"}, args.timeout)
            result = _run_case({**spec, "kind": "time"}, args) if memory["status"] == "ok" else memory
            row["status"] = result["status"]
            if result["status"] == "ok":
                baseline_mb = result["baseline_mb"] if in_process else baselines[(mode, length)]
                peak_mb = result["peak_mb"] if in_process else memory["peak_mb"]
                row.update(
                    median_ms=round(result["median_ms"], 2), min_ms=round(result["min_ms"], 2),
                    repeats=result["repeats"], baseline_mb=round(baseline_mb, 1),
                    peak_mb=round(max(peak_mb - baseline_mb, 0.0), 1),
                    others_cpu="" if result["others_cpu"] is None else round(result["others_cpu"], 2),
                )
        print(_progress(row), file=sys.stderr, flush=True)
        on_row(row)


def compare(args: argparse.Namespace) -> str:
    """Markdown table of paired timings: ``--compare FAST SLOW`` alternated in one process per L."""
    fast, slow = args.compare
    causal_settings = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    lines = [f"Paired medians over {args.repeats} alternating rounds, {args.threads or 'default'} thread(s): "
             f"`{command_line()}`", "",
             f"| mode | L | masking | {fast} ms | {slow} ms | {slow} / {fast} | others' CPU |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for mode in args.modes:
        for length in args.lengths:
            for causal in causal_settings:
                if not causal and ({fast, slow} & CAUSAL_ONLY):
                    continue
                spec = {
                    "batch": args.batch, "heads": args.heads, "head_dim": args.head_dim, "length": length,
                    "mode": mode, "dtype": args.dtype, "device": args.device, "seed": args.seed,
                    "threads": args.threads, "repeats": args.repeats, "kind": "paired",
                    "methods": [fast, slow], "causal": causal,
                }
                wait_for_quiet(args.busy_threshold, args.quiet_wait)
                result = _subprocess(spec, args.timeout)
                others = result.get("others_cpu")
                masking = "causal" if causal else "non-causal"
                if result["status"] != "ok":
                    lines.append(f"| {mode} | {length} | {masking} | {result['status']} | | | |")
                    continue
                share = "" if others is None else f"{others:.2f}"
                lines.append(f"| {mode} | {length} | {masking} | {result[fast]:,.1f} | {result[slow]:,.1f} | "
                             f"{result[slow] / result[fast]:.1f}x | {share} |")
                print(lines[-1], file=sys.stderr, flush=True)
    return "\n".join(lines) + "\n"


def _disturbed(row: dict[str, Any], threshold: float) -> bool:
    """A row worth measuring again: failed, or other processes competed for the CPU."""
    if row["status"].startswith("skipped"):
        return False
    return row["status"] != "ok" or (row["others_cpu"] not in ("", None) and float(row["others_cpu"]) > threshold)


def _steadier(new: dict[str, Any], old: dict[str, Any]) -> bool:
    """Whether ``new`` should replace ``old`` in --update: ``old`` failed, or ``new`` is ok and less disturbed."""
    if old["status"] != "ok":
        return True

    def others(row: dict[str, Any]) -> float:
        return float(row["others_cpu"]) if row.get("others_cpu") not in ("", None) else 0.0

    return new["status"] == "ok" and others(new) < others(old)


def _progress(row: dict[str, Any]) -> str:
    causal = "causal" if row["causal"] else "full"
    if row["status"] != "ok":
        return f"{row['mode']:7s} L={row['length']:5d} {causal:6s} {row['method']:13s} {row['status']}"
    return (f"{row['mode']:7s} L={row['length']:5d} {causal:6s} {row['method']:13s} "
            f"{row['median_ms']:10.1f} ms  {row['peak_mb']:9.1f} MiB "
            f"(x{row['repeats']}, others' CPU {row['others_cpu']})")


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({column: row.get(column, "") for column in COLUMNS})


def read_csv(path: Path) -> list[dict[str, Any]]:
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        row["causal"] = row["causal"] == "True"
        row["length"] = int(row["length"])
        for column in ("median_ms", "min_ms", "peak_mb"):
            row[column] = float(row[column]) if row[column] else None
    return rows


# ------------------------------------------------------------------------- report


def _lookup(rows: list[dict[str, Any]]) -> dict[tuple[str, bool, str, int], dict[str, Any]]:
    return {(row["method"], row["causal"], row["mode"], row["length"]): row for row in rows}


def _cell(row: dict[str, Any] | None, column: str) -> str:
    if row is None:
        return ""
    if row[column] is None:
        return "skipped" if row["status"].startswith("skipped") else "failed"
    value = row[column]
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def _ratio(numerator: dict[str, Any] | None, denominator: dict[str, Any] | None, column: str) -> float | None:
    if not numerator or not denominator or numerator[column] is None or denominator[column] is None:
        return None
    return numerator[column] / max(denominator[column], 1e-9)


def _speedups(rows, fast: str, slow: str, causal: bool, mode: str, lengths: list[int]) -> dict[int, float]:
    """``slow``'s time over ``fast``'s at every L of ``lengths`` where both were measured."""
    table = _lookup(rows)
    ratios = {length: _ratio(table.get((slow, causal, mode, length)), table.get((fast, causal, mode, length)),
                             "median_ms") for length in lengths}
    return {length: ratio for length, ratio in ratios.items() if ratio is not None}


def _crossover(rows, fast: str, slow: str, causal: bool, mode: str, lengths: list[int]) -> str:
    """Smallest L from which ``fast`` stays faster than ``slow`` at every measured longer L.

    "not measured" where the pair has no timing at the grid's longest L (a loan that never ran one of the
    methods): "never in the grid" would claim ``fast`` lost there. A gap at a shorter L is passed over, not
    read as a loss.
    """
    speedups = _speedups(rows, fast, slow, causal, mode, lengths)
    if not lengths or max(lengths) not in speedups:
        return "not measured"
    answer = None
    for length in sorted(speedups, reverse=True):
        if speedups[length] <= 1.0:
            break
        answer = length
    return f"L = {answer}" if answer is not None else "never in the grid"


def _growth_exponent(rows, method: str, causal: bool, mode: str, lengths: list[int]) -> float | None:
    """Least-squares slope of log(peak MB) against log(L)."""
    table = _lookup(rows)
    points = [(math.log(length), math.log(table[(method, causal, mode, length)]["peak_mb"]))
              for length in lengths
              if (method, causal, mode, length) in table
              and (table[(method, causal, mode, length)]["peak_mb"] or 0) > 0]
    if len(points) < 2:
        return None
    mean_x = statistics.fmean(x for x, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)


def markdown(rows: list[dict[str, Any]]) -> str:
    table = _lookup(rows)
    lengths = sorted({row["length"] for row in rows})
    first = rows[0]
    # In the order run: rows are appended, and an --update rewrites rows in place after them.
    commands = sorted(dict.fromkeys(row["command"] for row in rows), key=lambda command: "--update" in command)
    commits = sorted({row["commit"][:12] + ("-dirty" if row["commit"].endswith("-dirty") else "") for row in rows})
    parts = [
        f"Shapes B={first['batch']}, H={first['heads']}, E={first['head_dim']}, {first['dtype']}; "
        f"device: {first['machine']} ({first['device']}, {first['threads']} threads); torch {first['torch']}; "
        f"commit {', '.join(commits)}; seed {first['seed']}.",
        "Commands: " + "; then ".join(f"`{command}`" for command in commands) + ".",
    ]
    for causal in (False, True):
        methods = [m for m in METHODS if any(r["method"] == m and r["causal"] == causal for r in rows)]
        if not methods:
            continue
        title = "causal (masked)" if causal else "non-causal"
        for column, unit in (("median_ms", "median time, ms"), ("peak_mb", "peak memory above the inputs, MiB")):
            header = ["L"] + [f"{m} {mode}" for m in methods for mode in ("fwd", "fwd+bwd")]
            body = [
                [str(length)]
                + [_cell(table.get((m, causal, mode, length)), column) for m in methods for mode in MODES]
                for length in lengths
            ]
            parts += [f"**{title}: {unit}**", markdown_table(header, body)]
    parts.append("**Crossovers** (smallest L from which the first method stays faster at every longer L measured; "
                 "not measured: the pair has no timing at the longest L)")
    crossover_rows = []
    for fast, slow, causal in (("prob", "sdpa", False), ("prob", "sdpa", True), ("logsparse", "sdpa", True),
                               ("logsparse", "sdpa_logmask", True)):
        crossover_rows.append(
            [f"{fast} vs {slow}", "causal" if causal else "non-causal"]
            + [_crossover(rows, fast, slow, causal, mode, lengths) for mode in MODES]
        )
    parts.append(markdown_table(["pair", "masking", "forward", "forward+backward"], crossover_rows))
    parts.append("**Targets** (forward+backward unless stated)")
    parts.append(_targets(rows, lengths))
    return "\n\n".join(parts) + "\n"


def _times(ratio: float | None, digits: int) -> str:
    return "not measured" if ratio is None else f"{ratio:.{digits}f}x"


def _targets(rows: list[dict[str, Any]], lengths: list[int]) -> str:
    table = _lookup(rows)

    def ratio(slow: str, fast: str, causal: bool, length: int, column: str = "median_ms", mode: str = "train"):
        return _ratio(table.get((slow, causal, mode, length)), table.get((fast, causal, mode, length)), column)

    def verdict(value: float | None, goal: float, higher_is_better: bool = True) -> str:
        if value is None:
            return "not measured"
        met = value >= goal if higher_is_better else value <= goal
        return "met" if met else "MISSED"

    body = []
    for causal in (False, True):
        name = "causal" if causal else "non-causal"
        at_1536 = ratio("sdpa", "prob", causal, 1536)
        # Faster from 1536 on: at 1536 and at every longer L measured, not at 1536 alone.
        slowest = min((value for length, value in _speedups(rows, "prob", "sdpa", causal, "train", lengths).items()
                       if length >= 1536), default=None)
        body.append([f"ProbSparse faster than SDPA from L=1536 ({name})", "> 1x",
                     "-" if at_1536 is None else f"{at_1536:.1f}x at 1536; crossover "
                     + _crossover(rows, "prob", "sdpa", causal, "train", lengths),
                     verdict(None if at_1536 is None else slowest, 1.0 + 1e-9)])
        at_6144 = ratio("sdpa", "prob", causal, 6144)
        body.append([f"ProbSparse vs SDPA at L=6144 ({name})", ">= 10x",
                     "-" if at_6144 is None else f"{at_6144:.1f}x", verdict(at_6144, 10.0)])
        upper = [length for length in lengths if length >= 768]
        exponent = _growth_exponent(rows, "prob", causal, "train", upper)
        whole = _growth_exponent(rows, "prob", causal, "train", lengths)
        body.append([f"ProbSparse peak memory growth ({name})", "<= L^1.2",
                     "-" if exponent is None else f"L^{exponent:.2f} over L>=768 (L^{whole:.2f} over the grid)",
                     verdict(exponent, 1.2, higher_is_better=False)])
    speed = ratio("sdpa_logmask", "logsparse", True, 1536)
    speed_forward = ratio("sdpa_logmask", "logsparse", True, 1536, mode="forward")
    body.append(["LogSparse vs SDPA with the same boolean mask at L=1536", ">= 3x",
                 "-" if speed is None else f"{speed:.1f}x (forward only: {_times(speed_forward, 1)})",
                 verdict(speed, 3.0)])
    memory = ratio("naive_logmask", "logsparse", True, 1536, column="peak_mb")
    memory_forward = ratio("naive_logmask", "logsparse", True, 1536, column="peak_mb", mode="forward")
    naive = table.get(("naive_logmask", True, "train", 1536))
    first = rows[0]
    element = 2 if first["dtype"] in ("float16", "bfloat16") else 4
    # The gradients of q, k, v and the output exist whatever the kernel does.
    floor = 4 * int(first["batch"]) * 1536 * int(first["heads"]) * int(first["head_dim"]) * element / 2**20
    ceiling = ("" if not naive or naive["peak_mb"] is None
               else f"; the floor of {floor:.0f} MB caps it at {naive['peak_mb'] / floor:.0f}x")
    body.append(["LogSparse peak memory vs naive dense-masked at L=1536", ">= 20x less",
                 "-" if memory is None else f"{memory:.0f}x less{ceiling} (forward only: {_times(memory_forward, 0)})",
                 verdict(memory, 20.0)])
    return markdown_table(["target", "goal", "measured", "verdict"], body)


# ------------------------------------------------------------------------- entry point


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    parser.add_argument("--lengths", type=int, nargs="+",
                        help=f"default {' '.join(map(str, LENGTHS))}; with --update, the CSV's lengths")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--causal", default="both", choices=("both", "yes", "no"))
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats at least (budget permitting)")
    parser.add_argument("--min-time", type=float, default=1.0,
                        help="keep repeating short cases until this many seconds are timed (at most 200 repeats)")
    parser.add_argument("--time-budget", type=float, default=30.0,
                        help="stop repeating a case once it has run this many seconds (at least one repeat)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds before a case's subprocess is killed")
    parser.add_argument("--max-dense-gb", type=float, default=8.0,
                        help="skip the naive dense cases whose [B, H, L, L] tensors would need more than this")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--busy-threshold", type=float, default=0.2,
                        help="fraction of the cores other processes may use before a case waits or is rerun")
    parser.add_argument("--quiet-wait", type=float, default=120.0,
                        help="seconds to wait for other processes to go quiet before each case")
    parser.add_argument("--retries", type=int, default=2,
                        help="reruns of a case disturbed by other processes (the least disturbed run is kept)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, help="CSV path (default benchmarks/results/attention_<device>.csv)")
    parser.add_argument("--markdown", type=Path, metavar="CSV", help="only print the tables for an existing CSV")
    parser.add_argument("--update", type=Path, metavar="CSV",
                        help="re-measure the failed rows of an existing CSV and those disturbed by other processes "
                             "(a new measurement replaces a disturbed row only if other processes disturbed it less)")
    parser.add_argument("--redo", nargs="+", default=[], choices=METHODS, metavar="METHOD",
                        help="with --update: also re-measure every row of these methods (after changing them); "
                             "--lengths, --modes and --causal narrow the rows re-measured")
    parser.add_argument("--compare", nargs=2, choices=METHODS, metavar=("FAST", "SLOW"),
                        help="only time FAST against SLOW, alternating them in one process per length "
                             "(robust to a machine whose speed drifts); prints a table, writes no CSV")
    parser.add_argument("--readme", type=Path, nargs="?", const=README, metavar="README",
                        help="with --markdown: rewrite the tables' block of this README (default "
                             "benchmarks/README.md) instead of printing")
    add_merge_argument(parser)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.merge and not args.output:
        parser.error("--merge needs --output, the results file to merge into")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        print(json.dumps(run_worker(json.loads(args.worker))))
        return
    if args.markdown:
        emit_tables("attention-tables", markdown(read_csv(args.markdown)), args.readme, args.markdown)
        return
    if args.merge:
        before = csv_rows(args.output) if args.output.exists() else []
        # One row a case: the kernel, masking, mode, length, dtype and shape (a file holds one device's rows).
        case = ("method", "causal", "mode", "length", "dtype", "batch", "heads", "head_dim")
        rows = upsert(before, csv_rows(args.merge), lambda row: tuple(row[column] for column in case),
                      failed=lambda row: row["status"] != "ok")
        write_csv(rows, args.output)
        print(f"merged {args.merge} into {args.output}: {len(before)} rows before, {len(rows)} now", file=sys.stderr)
        return
    if args.compare:
        args.lengths = args.lengths or list(LENGTHS)
        print(compare(args))
        return
    if args.update:
        output = args.update
        rows = read_csv(output)
        # The file's own lengths unless narrowed: LENGTHS would leave out a GPU file's 2048 and 16384.
        args.lengths = args.lengths or sorted({row["length"] for row in rows})
        first = rows[0]
        args.batch, args.heads, args.head_dim = int(first["batch"]), int(first["heads"]), int(first["head_dim"])
        args.dtype, args.device, args.seed = first["dtype"], first["device"], int(first["seed"])
        args.threads = int(first["threads"])
        position = {(r["mode"], r["length"], r["causal"], r["method"]): i for i, r in enumerate(rows)}
        causal = {"both": (True, False), "yes": (True,), "no": (False,)}[args.causal]
        cases = [
            key for key, i in position.items()
            if (_disturbed(rows[i], args.busy_threshold)
                or (key[3] in args.redo and not rows[i]["status"].startswith("skipped")))
            and key[0] in args.modes and int(key[1]) in args.lengths and key[2] in causal  # the grid filters narrow it
        ]
        print(f"re-measuring {len(cases)} disturbed or failed rows of {output}", file=sys.stderr)

        def replace(row: dict[str, Any]) -> None:
            index = position[(row["mode"], row["length"], row["causal"], row["method"])]
            # A disturbed row gives way to a less disturbed measurement only (a busier rerun, or one that failed,
            # would lose the better figure); a failed row to any; a --redo row, which timed the old code, always.
            if row["method"] in args.redo or _steadier(row, rows[index]):
                rows[index] = row
                write_csv(rows, output)
            else:
                print(f"  kept the earlier row (others' CPU {rows[index]['others_cpu']})", file=sys.stderr)

        measure(args, cases, replace)
    else:
        args.lengths = args.lengths or list(LENGTHS)
        output = args.output or RESULTS / f"attention_{args.device.split(':')[0]}.csv"
        rows = []

        def append(row: dict[str, Any]) -> None:
            rows.append(row)
            write_csv(rows, output)

        measure(args, grid_cases(args), append)
    print(markdown(read_csv(output)))
    print(f"wrote {os.path.relpath(output, Path.cwd())}", file=sys.stderr)


if __name__ == "__main__":
    main()
