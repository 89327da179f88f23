"""Our Informer against the original Informer2020 code, training step for training step.

    python benchmarks/reference.py --informer2020 PATH      # a clone of zhouhaoyi/Informer2020 (any branch)
    python benchmarks/reference.py --markdown benchmarks/results/reference_cpu.csv --readme benchmarks/README.md

The original code is never vendored: its ``models/`` and ``utils/`` are extracted from the
given git repository at the pinned commit (:data:`COMMIT`, ``git archive``) into a temporary
directory and imported from there; without ``--informer2020`` the script clones the repository
into ``~/.cache/forecast/Informer2020`` (network needed).

Both models are the paper's ETTh1 setting as ``main_informer.py`` builds it (``M``, 96/48/24,
d_model 512, 8 heads, e_layers 2, d_layers 1, d_ff 2048, dropout 0.05, factor 5, timeF,
distil and, for the original, mix), built from the same seed. Each round feeds both the same
ETTh1 training batch of 32 windows (the original's decoder input built as its ``exp_informer``
does) and times one full optimizer step of each (forward, MSE, backward, Adam), alternating
which goes first; rows hold the median, minimum and maximum over the rounds, per thread count
and precision (fp32, bf16 autocast), with ``others_cpu``, the allocator (``--allocator``, as in
train.py; the two models share it), the command, commit and machine.
"""

from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    RESULTS,
    CpuLoad,
    add_allocator_argument,
    allocator_of,
    add_table_arguments,
    by_default,
    command_line,
    commit,
    commits_of,
    csv_rows,
    emit_tables,
    machine,
    markdown_table,
    use_allocator,
    write_rows,
)

from forecast.data import WindowDataModule  # noqa: E402
from forecast.models import DataSpec, build_model  # noqa: E402
from forecast.module import adam  # noqa: E402

COMMIT = "29f2a739226a509202a092b464163da81fa74960"  # zhouhaoyi/Informer2020, the state measured in issue 21
URL = "https://github.com/zhouhaoyi/Informer2020"
CACHE = Path.home() / ".cache" / "forecast" / "Informer2020"
COLUMNS = ["threads", "precision", "ours_ms", "ours_min_ms", "ours_max_ms", "reference_ms", "reference_min_ms",
           "reference_max_ms", "speedup", "rounds", "others_cpu", "torch", "machine", "allocator", "commit",
           "reference_commit", "command"]
WINDOW = dict(seq_len=96, label_len=48, pred_len=24)


def reference_sources(repository: Path | None) -> Path:
    """A temporary directory holding the original ``models/`` and ``utils/`` at :data:`COMMIT`."""
    if repository is None:
        repository = CACHE
        if not repository.exists():
            subprocess.run(["git", "clone", "--quiet", URL, str(repository)], check=True)
    archive = subprocess.run(["git", "-C", str(repository), "archive", COMMIT, "models", "utils"],
                             capture_output=True, check=True).stdout
    target = Path(tempfile.mkdtemp(prefix="informer2020-"))
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return target


def build_pair(sources: Path) -> tuple[torch.nn.Module, torch.nn.Module]:
    """(ours, the original) at the paper's setting, each built from seed 0."""
    sys.path.insert(0, str(sources))
    from models.model import Informer as Reference  # the original code, at COMMIT

    spec = DataSpec(**WINDOW, c_in=7, c_out=7, n_time_features=4)
    torch.manual_seed(0)
    ours = build_model("informer", spec)
    torch.manual_seed(0)
    reference = Reference(7, 7, 7, WINDOW["seq_len"], WINDOW["label_len"], WINDOW["pred_len"], factor=5,
                          d_model=512, n_heads=8, e_layers=2, d_layers=1, d_ff=2048, dropout=0.05, attn="prob",
                          embed="timeF", freq="h", activation="gelu", distil=True, mix=True,
                          device=torch.device("cpu"))
    return ours.train(), reference.train()


def batches(count: int) -> list[dict[str, torch.Tensor]]:
    datamodule = WindowDataModule("ETTh1", **WINDOW, batch_size=32, seed=0)
    loader = iter(datamodule.train_dataloader())
    return [next(loader) for _ in range(count)]


def stepper(model: torch.nn.Module, reference: bool, precision: str) -> Callable[[dict[str, torch.Tensor]], None]:
    # Each with its own training's optimizer: the original's plain Adam, ours the recipe's (fused).
    parameters = list(model.parameters())
    optimizer = torch.optim.Adam(parameters, lr=1e-4) if reference else adam(parameters, 1e-4)
    label_len, pred_len = WINDOW["label_len"], WINDOW["pred_len"]

    def step(batch: dict[str, torch.Tensor]) -> None:
        x, y, x_mark, y_mark = batch["x"], batch["y"], batch["x_mark"], batch["y_mark"]
        with torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16" else nullcontext():
            if reference:  # exp_informer._process_one_batch: the label part, then zeros
                decoder_input = torch.cat([y[:, :label_len], torch.zeros_like(y[:, -pred_len:])], dim=1)
                out = model(x, x_mark, decoder_input, y_mark)
            else:
                out = model(x, x_mark, y_mark)
        loss = F.mse_loss(out.float(), y[:, -pred_len:])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step


def measure(sources: Path, threads: int, precision: str, rounds: int, allocator: str = "reuse") -> dict[str, Any]:
    """One row (``allocator``: what the process runs with, :func:`_common.use_allocator`; both models share it)."""
    torch.set_num_threads(threads)
    ours, reference = build_pair(sources)
    steps = {"ours": stepper(ours, False, precision), "reference": stepper(reference, True, precision)}
    data = batches(rounds + 2)
    for batch in data[:2]:  # warm-up
        for step in steps.values():
            step(batch)
    times: dict[str, list[float]] = {name: [] for name in steps}
    load = CpuLoad()
    with load:
        for index, batch in enumerate(data[2:]):
            order = list(steps) if index % 2 == 0 else list(reversed(steps))
            for name in order:
                started = time.perf_counter()
                steps[name](batch)
                times[name].append(time.perf_counter() - started)
    row: dict[str, Any] = {"threads": threads, "precision": precision, "rounds": rounds}
    for name, values in times.items():
        row[f"{name}_ms"] = statistics.median(values) * 1000
        row[f"{name}_min_ms"], row[f"{name}_max_ms"] = min(values) * 1000, max(values) * 1000
    row["speedup"] = row["reference_ms"] / row["ours_ms"]
    row.update(others_cpu=load.share, torch=torch.__version__, machine=machine(), allocator=allocator, commit=commit(),
               reference_commit=COMMIT, command=command_line())
    return row


def markdown(rows: list[dict[str, Any]]) -> str:
    header = ["threads", "precision", "allocator", "ours ms/step (min-max)", "original ms/step (min-max)",
              "ours faster by", "rounds", "others_cpu"]

    def span(row: dict[str, Any], name: str) -> str:
        return (f"{float(row[f'{name}_ms']):,.0f} ({float(row[f'{name}_min_ms']):,.0f}-"
                f"{float(row[f'{name}_max_ms']):,.0f})")

    # A table per machine: the ratio is the comparison, and it is read within one machine's run.
    tables = []
    for machine_name in dict.fromkeys(row["machine"] for row in rows):
        run = [row for row in rows if row["machine"] == machine_name]
        body = [[str(row["threads"]), row["precision"], allocator_of(row), span(row, "ours"),
                 span(row, "reference"), f"{float(row['speedup']):.3f}x", str(row["rounds"]),
                 f"{float(row['others_cpu']):.2f}" if row["others_cpu"] not in ("", None) else "–"] for row in run]
        meta = run[0]
        caption = (f"ETTh1 `M` 96/48/24, batch 32, the paper's size; the original at "
                   f"{str(meta.get('reference_commit'))[:8]}; {machine_name}; torch {meta.get('torch', '')}; commit "
                   f"{commits_of(run)}. Command: `{meta.get('command', '')}`.")
        tables.append(f"{caption}\n\n{markdown_table(header, body)}\n")
    return "\n".join(tables)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--informer2020", type=Path, help="a git clone of zhouhaoyi/Informer2020 (bare or not)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--precisions", nargs="+", choices=["fp32", "bf16"],
                        help="default: fp32 and bf16 (fp32 alone on a CPU that emulates bf16)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--output", type=Path, default=RESULTS / "reference_cpu.csv")
    add_allocator_argument(parser)
    add_table_arguments(parser)
    args = parser.parse_args(argv)
    if args.markdown is not None:
        emit_tables("reference-tables", markdown(csv_rows(args.markdown)), args.readme)
        return 0
    allocator = use_allocator(args.allocator)
    sources = reference_sources(args.informer2020)
    precisions = args.precisions or by_default("cpu", "precisions")
    rows = []
    for threads in args.threads:
        for precision in precisions:
            rows.append(measure(sources, threads, precision, args.rounds, allocator))
            print(f"{threads} threads {precision}: ours {rows[-1]['ours_ms']:.0f} ms, original "
                  f"{rows[-1]['reference_ms']:.0f} ms ({rows[-1]['speedup']:.2f}x)", flush=True)
    write_rows(rows, args.output, COLUMNS)
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
