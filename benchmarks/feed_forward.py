"""Feed-forward layout: ``nn.Linear`` on ``[B, L, D]`` against the same weights as a 1x1 ``Conv1d``.

    python benchmarks/feed_forward.py            # this process's threads (OMP_NUM_THREADS)

The original Informer computes its feed-forward as two 1x1 convolutions over the transposed
activations; this package uses ``nn.Linear``. Two measurements, forward + backward, medians of
interleaved repeats (one of each layout per round, so a drifting machine slows both alike):

* the feed-forward alone (D -> d_ff -> GELU -> D) at the paper's size (B 32, D 512, d_ff 2048,
  L 96 and 144) and at the improved recipe's channel-independent size (224 sequences, D 32,
  d_ff 64, L 96 and 768), in fp32 and under bf16 autocast;
* a full optimizer step of the paper-size Informer (ETTh1 ``M`` 96/48/24, batch 32, fp32) with
  its feed-forwards switched between the two layouts.

Prints one line per case: milliseconds of each layout and Linear's speed-up over the conv.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from forecast.layers.blocks import FeedForward
from forecast.models import DataSpec, build_model


def linear_layout(x: torch.Tensor, net: torch.nn.Sequential) -> torch.Tensor:
    first, activation, dropout, second = net
    return second(dropout(activation(first(x))))


def conv_layout(x: torch.Tensor, net: torch.nn.Sequential) -> torch.Tensor:
    first, activation, dropout, second = net
    y = F.conv1d(x.transpose(1, 2), first.weight.unsqueeze(-1), first.bias)  # [B, D, L] -> [B, d_ff, L]
    y = F.conv1d(dropout(activation(y)), second.weight.unsqueeze(-1), second.bias)  # [B, D, L]
    return y.transpose(1, 2)  # [B, D, L] -> [B, L, D]


def interleaved(cases: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
    """Median milliseconds of each case, after two warm-up calls each, timed in alternation."""
    for case in cases.values():
        case(), case()
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, case in cases.items():
            started = time.perf_counter()
            case()
            times[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) * 1000 for name, values in times.items()}


def feed_forward_alone(batch: int, length: int, d_model: int, d_ff: int, bf16: bool, repeats: int) -> dict[str, float]:
    net = FeedForward(d_model, d_ff, dropout=0.0).net
    x = torch.randn(batch, length, d_model, requires_grad=True)

    def step(layout: Callable[[torch.Tensor, torch.nn.Sequential], torch.Tensor]) -> Callable[[], None]:
        def run() -> None:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                out = layout(x, net)
            out.float().sum().backward()
        return run

    return interleaved({"linear": step(linear_layout), "conv": step(conv_layout)}, repeats)


def informer_step(repeats: int) -> dict[str, float]:
    spec = DataSpec(seq_len=96, label_len=48, pred_len=24, c_in=7, c_out=7, n_time_features=4)
    torch.manual_seed(0)
    model = build_model("informer", spec).train()
    optimizer = torch.optim.Adam(model.parameters())
    x, target = torch.randn(32, 96, 7), torch.randn(32, 24, 7)
    x_mark, y_mark = torch.rand(32, 96, 4) - 0.5, torch.rand(32, 72, 4) - 0.5
    original = FeedForward.forward

    def step(layout: Callable[[torch.Tensor, torch.nn.Sequential], torch.Tensor]) -> Callable[[], None]:
        def run() -> None:
            FeedForward.forward = lambda self, inputs: layout(inputs, self.net)
            try:
                loss = F.mse_loss(model(x, x_mark, y_mark), target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            finally:
                FeedForward.forward = original
        return run

    return interleaved({"linear": step(linear_layout), "conv": step(conv_layout)}, repeats)


def main() -> None:
    threads = torch.get_num_threads()
    sizes = [(32, 96, 512, 2048), (32, 144, 512, 2048), (224, 96, 32, 64), (224, 768, 32, 64)]
    for bf16 in (False, True):
        for batch, length, d_model, d_ff in sizes:
            ms = feed_forward_alone(batch, length, d_model, d_ff, bf16, repeats=10)
            print(f"feed-forward B {batch} L {length} D {d_model} d_ff {d_ff} {'bf16' if bf16 else 'fp32'}, "
                  f"{threads} threads: linear {ms['linear']:.1f} ms, conv {ms['conv']:.1f} ms, "
                  f"linear {ms['conv'] / ms['linear']:.2f}x", flush=True)
    ms = informer_step(repeats=6)
    print(f"Informer step (paper size, ETTh1 M 96/48/24, batch 32, fp32), {threads} threads: "
          f"linear {ms['linear']:.0f} ms, conv {ms['conv']:.0f} ms, linear {ms['conv'] / ms['linear']:.2f}x")


if __name__ == "__main__":
    main()
