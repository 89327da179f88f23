"""Roofline of a training step: its FLOPs against the machine's measured GEMM rate.

    python benchmarks/roofline.py                    # -> results/roofline_<device>.csv, prints the table
    python benchmarks/roofline.py --device cuda      # the same on a GPU (benchmarks/device_bench.sh)
    python benchmarks/roofline.py --merge roofline_cuda.csv --output benchmarks/results/roofline_cuda.csv
    python benchmarks/roofline.py --markdown benchmarks/results/roofline_cpu.csv --readme benchmarks/README.md

For each model (Informer and LogSparse at the papers' sizes, LogSparse also at d_model 512, and
both in the improved recipe, on ETTh1-shaped inputs: ``M``, 96/48/24, batch 32; ``--pred-len`` for
another horizon) and precision (fp32, bf16 autocast), in a process whose allocator keeps freed memory
for reuse as the ``forecast`` command's does (``--allocator glibc`` for malloc's defaults):

* **FLOPs** of one training step, forward and backward, counted by
  ``torch.utils.flop_counter.FlopCounterMode`` (matrix products, convolutions and attention;
  element-wise work is not counted, so the share below is of the GEMM work alone);
* **step time**: the median of ``--steps`` optimizer steps (forward, MSE, backward, Adam) on
  random inputs of the data's sizes, after two warm-up steps;
* **GEMM rate**: the median rate of a square ``--gemm-size`` matrix product in the same
  precision, timed in the same process three times before the model's steps and once after each
  (:class:`GemmRate`; rows before 31f55bb timed it seven times just before the steps);
* **share** = FLOPs / step time / GEMM rate: how close the step comes to the rate of the
  machine's best kernel. What is left is element-wise work, copies, small or skinny GEMMs and
  framework overhead.

Every row records the command, commit, machine, torch version, threads, allocator and ``others_cpu``
(the share of the cores other processes used while it ran).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    RESULTS,
    CpuLoad,
    add_allocator_argument,
    allocator_of,
    add_merge_argument,
    add_table_arguments,
    by_default,
    command_line,
    commit,
    commits_of,
    csv_rows,
    emit_tables,
    machine,
    markdown_table,
    timed,
    upsert,
    use_allocator,
    write_rows,
)

from forecast.models import DataSpec, build_model  # noqa: E402
from forecast.module import adam  # noqa: E402
from forecast.recipes import get_recipe  # noqa: E402

COLUMNS = ["model", "size", "precision", "batch", "pred_len", "gflop_per_step", "step_ms", "achieved_gflops",
           "gemm_gflops", "share", "threads", "others_cpu", "device", "torch", "machine", "allocator", "commit",
           "command"]
PRED_LEN = 24
BATCH = 32
# (model, size label, options): the registry defaults are the papers' sizes (LogSparse's paper recipe is
# d_model 64); "d512" is LogSparse at benchmarks/train.py's size, that of issue 21's target.
CASES = [
    ("informer", "paper (d512)", {}),
    ("informer", "improved", get_recipe("improved").options_for("informer")),
    ("logsparse", "d512", {"d_model": 512, "n_heads": 8, "d_ff": 2048}),
    ("logsparse", "paper recipe (d64)", {}),
    ("logsparse", "improved", get_recipe("improved").options_for("logsparse")),
]


def _autocast(precision: str, device: torch.device):
    return torch.autocast(device.type, dtype=torch.bfloat16) if precision == "bf16" else nullcontext()


@contextmanager
def _ieee_convolutions(precision: str, device: torch.device) -> Iterator[None]:
    """fp32 convolutions in IEEE fp32 on CUDA for the duration, as the GEMM rate's products run: cuDNN takes TF32
    for them by default, which credited LogSparse d512 (37% of its FLOPs in convolutions) with a faster unit's work
    against the fp32 rate (rows before this were measured so)."""
    if precision != "fp32" or device.type != "cuda":
        yield
        return
    kept = torch.backends.cudnn.conv.fp32_precision
    torch.backends.cudnn.conv.fp32_precision = "ieee"
    try:
        yield
    finally:
        torch.backends.cudnn.conv.fp32_precision = kept


class GemmRate:
    """The machine's rate on a square ``size`` x ``size`` matrix product in ``precision``, from samples timed
    through the run: on a shared VM one product's time varies by about +-20% minute to minute (91-136 GFLOP/s
    in 25 products on a quiet 2-core host), so a few products timed once before the steps move the share by
    several points; :meth:`sample` between the steps spreads them over the same minutes as the steps."""

    def __init__(self, size: int, precision: str, device: torch.device = torch.device("cpu")) -> None:
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        self.size, self.device = size, device
        self.a, self.b = (torch.randn(size, size, dtype=dtype, device=device) for _ in range(2))
        timed(lambda: self.a @ self.b, device.type)  # warm-up
        self.seconds: list[float] = []

    def sample(self, repeats: int = 1) -> None:
        self.seconds += [timed(lambda: self.a @ self.b, self.device.type)[0] for _ in range(repeats)]

    def gflops(self) -> float:
        """Median GFLOP/s over the samples so far."""
        return 2 * self.size**3 / statistics.median(self.seconds) / 1e9


def data_spec(pred_len: int = PRED_LEN) -> DataSpec:
    """ETTh1's shape (``M``, 7 variables, 4 time features), input 96, label 48, horizon ``pred_len``."""
    return DataSpec(seq_len=96, label_len=48, pred_len=pred_len, c_in=7, c_out=7, n_time_features=4)


def _inputs(spec: DataSpec, batch: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(batch, spec.seq_len, spec.c_in, generator=generator)
    x_mark = torch.rand(batch, spec.seq_len, spec.n_time_features, generator=generator) - 0.5
    y_mark = torch.rand(batch, spec.label_len + spec.pred_len, spec.n_time_features, generator=generator) - 0.5
    target = torch.randn(batch, spec.pred_len, spec.c_out, generator=generator)
    return tuple(tensor.to(device) for tensor in (x, x_mark, y_mark, target))


def measure(name: str, size: str, options: dict[str, Any], precision: str, steps: int, gemm_size: int,
            batch: int = BATCH, device: torch.device = torch.device("cpu"), allocator: str = "reuse",
            pred_len: int = PRED_LEN) -> dict[str, Any]:
    """One row: the step's FLOPs and median time against this precision's GEMM rate (``allocator``: what the
    process runs with, :func:`_common.use_allocator`, for the row)."""
    with _ieee_convolutions(precision, device):
        return _measure(name, size, options, precision, steps, gemm_size, batch, device, allocator, pred_len)


def _measure(name: str, size: str, options: dict[str, Any], precision: str, steps: int, gemm_size: int,
             batch: int, device: torch.device, allocator: str, pred_len: int) -> dict[str, Any]:
    torch.manual_seed(0)
    spec = data_spec(pred_len)
    model = build_model(name, spec, **options).train().to(device)
    optimizer = adam(list(model.parameters()), 1e-4)  # the recipe's
    x, x_mark, y_mark, target = _inputs(spec, batch, device)

    def step() -> None:
        with _autocast(precision, device):
            loss = F.mse_loss(model(x, x_mark, y_mark).float(), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    counter = FlopCounterMode(display=False)
    with counter:
        with _autocast(precision, device):
            loss = F.mse_loss(model(x, x_mark, y_mark).float(), target)
        loss.backward()
    optimizer.zero_grad()
    load = CpuLoad()
    with load:
        gemm = GemmRate(gemm_size, precision, device)
        gemm.sample(repeats=3)
        for _ in range(2):  # warm-up
            timed(step, device.type)
        times = []
        for _ in range(steps):
            times.append(timed(step, device.type)[0])
            gemm.sample()
    rate, seconds = gemm.gflops(), statistics.median(times)
    flops = counter.get_total_flops()
    return {
        "model": name, "size": size, "precision": precision, "batch": batch, "pred_len": pred_len,
        "gflop_per_step": flops / 1e9,
        "step_ms": seconds * 1000, "achieved_gflops": flops / seconds / 1e9, "gemm_gflops": rate,
        "share": flops / seconds / 1e9 / rate, "threads": torch.get_num_threads(),
        "others_cpu": load.share, "device": device.type, "torch": torch.__version__,
        "machine": torch.cuda.get_device_name(device) if device.type == "cuda" else machine(),
        "allocator": allocator, "commit": commit(), "command": command_line(),
    }


def markdown(rows: list[dict[str, Any]]) -> str:
    """The README table of the rows of a results CSV."""
    def number(value: Any, digits: int) -> str:
        return f"{float(value):,.{digits}f}" if value not in ("", None) else "–"

    header = ["model", "size", "precision", "batch", "horizon", "GFLOP / step", "ms / step", "achieved GFLOP/s",
              "GEMM GFLOP/s", "share of GEMM rate", "threads", "allocator", "others_cpu"]
    body = [[row["model"], row["size"], row["precision"], str(row.get("batch") or BATCH),
             str(row.get("pred_len") or PRED_LEN), number(row["gflop_per_step"], 1),
             number(row["step_ms"], 0), number(row["achieved_gflops"], 1), number(row["gemm_gflops"], 1),
             f"{float(row['share']):.0%}", str(row["threads"]), allocator_of(row),
             number(row["others_cpu"], 2)] for row in rows]
    machines = list(dict.fromkeys(row.get("machine", "") for row in rows))
    if len(machines) > 1:  # hosts that differ by 1.6x in GEMM rate: say which row ran where
        header.append("machine")
        for line, row in zip(body, rows):
            line.append(row.get("machine", ""))
    meta = rows[0] if rows else {}
    commits = commits_of(rows)
    commands = "; then ".join(f"`{command}`" for command in dict.fromkeys(row["command"] for row in rows))
    where = "the machine in the last column" if len(machines) > 1 else "".join(machines)
    return (f"ETTh1-shaped inputs (`M`, input 96, label 48); {where}; torch "
            f"{meta.get('torch', '')}; commit {commits}. Commands: {commands}.\n\n"
            + markdown_table(header, body) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--gemm-size", type=int, help="the GEMM rate's square matrices (default 2048; 8192 on a GPU, "
                                                       "which a smaller product leaves part idle)")
    parser.add_argument("--batch", type=int, nargs="+", default=[BATCH],
                        help="windows per step (several: one row each)")
    parser.add_argument("--pred-len", type=int, default=PRED_LEN,
                        help="the horizon (the decoder's length grows with it)")
    parser.add_argument("--sizes", nargs="+", help="only these size labels, e.g. improved (the recipe's size)")
    parser.add_argument("--precisions", nargs="+", choices=["fp32", "bf16"],
                        help="default: fp32 and bf16, but only fp32 on a CPU that emulates bf16")
    parser.add_argument("--models", nargs="+", default=sorted({name for name, _, _ in CASES}))
    parser.add_argument("--device", default="cpu", help="cpu, or cuda on a GPU machine")
    parser.add_argument("--output", type=Path, help="CSV path (default results/roofline_<device>.csv)")
    add_allocator_argument(parser)
    add_table_arguments(parser)
    add_merge_argument(parser)
    args = parser.parse_args(argv)
    if args.markdown is not None:
        emit_tables("roofline-tables", markdown(csv_rows(args.markdown)), args.readme, args.markdown)
        return 0
    if args.merge is not None:
        if args.output is None:
            parser.error("--merge needs --output, the results file to merge into")
        before = csv_rows(args.output) if args.output.exists() else []

        def case(row: dict[str, Any]) -> tuple[str, ...]:  # rows from before the batch and horizon columns: 32, 24
            return (row["model"], row["size"], row["precision"], row.get("batch") or str(BATCH),
                    row.get("pred_len") or str(PRED_LEN), allocator_of(row))

        rows = upsert(before, csv_rows(args.merge), case)
        write_rows(rows, args.output, COLUMNS)
        print(f"merged {args.merge} into {args.output}: {len(before)} rows before, {len(rows)} now")
        return 0
    allocator = use_allocator(args.allocator)
    device = torch.device(args.device)
    gemm_size = args.gemm_size or (8192 if device.type == "cuda" else 2048)
    output = args.output or RESULTS / f"roofline_{device.type}.csv"
    precisions = args.precisions or by_default(device.type, "precisions")
    rows = []
    for name, size, options in CASES:
        if name not in args.models or (args.sizes and size not in args.sizes):
            continue
        for precision in precisions:
            for batch in args.batch:
                rows.append(measure(name, size, options, precision, args.steps, gemm_size, batch, device, allocator,
                                    args.pred_len))
                row = rows[-1]
                print(f"{name} {size} {precision} batch {batch}: {row['step_ms']:.0f} ms, {row['share']:.0%} of "
                      f"{row['gemm_gflops']:.0f} GFLOP/s", flush=True)
        write_rows(rows, output, COLUMNS)  # after each model, so a step cut off by a time limit keeps the rest
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
