"""Measure what one training step of each long-horizon cell costs, to plan the benchmark.

    FORECAST_DATA_DIR=../shared/datasets python experiments/step_cost.py [--datasets ETTh1 weather] [--models informer]

For every dataset and horizon of ``experiments/long_horizon`` and every trained model
there (the configs' recipes applied), it times ``--steps`` optimizer steps (forward, MSE,
backward, Adam) on a batch of the config's size with the data's sizes, after one warm-up
step, and multiplies the median by the batches of one epoch (cut by ``limit_train_batches``). Random inputs:
the cost of a step does not depend on the values. Prints a Markdown table. Times are
those of this machine with this process's threads (``OMP_NUM_THREADS``); other processes
on the CPU slow them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from forecast.config import load_config
from forecast.data import WindowDataModule
from forecast.models import PARAMETER_FREE, DataSpec, build_model

HERE = Path(__file__).resolve().parent


def step_seconds(model: torch.nn.Module, spec: DataSpec, batch: int, steps: int) -> float:
    """Median seconds of one optimizer step on random inputs of the model's sizes."""
    optimizer = torch.optim.Adam(model.parameters())
    x = torch.randn(batch, spec.seq_len, spec.c_in)
    x_mark = torch.rand(batch, spec.seq_len, spec.n_time_features) - 0.5
    y_mark = torch.rand(batch, spec.label_len + spec.pred_len, spec.n_time_features) - 0.5
    target = torch.randn(batch, spec.pred_len, spec.c_out)
    times = []
    for step in range(steps + 1):
        started = time.perf_counter()
        loss = torch.nn.functional.mse_loss(model(x, x_mark, y_mark), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step:  # the first step warms up
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs-dir", type=Path, default=HERE / "long_horizon")
    parser.add_argument("--datasets", nargs="+")
    parser.add_argument("--models", nargs="+")
    parser.add_argument("--horizons", nargs="+", type=int)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args(argv)
    print("| dataset | horizon | model | train windows | s/step | min/epoch |")
    print("|---|---|---|---|---|---|")
    for folder in sorted(path for path in args.configs_dir.iterdir() if path.is_dir()):
        if args.datasets and folder.name not in args.datasets:
            continue
        for path in sorted(folder.glob("*.yaml"),
                           key=lambda p: (p.stem.rsplit("_", 2)[0], int(p.stem.rsplit("_")[-1]))):
            config = load_config(path)
            name, horizon = path.stem.rsplit("_", 2)[0], config.data["pred_len"]
            if config.model in PARAMETER_FREE or (args.models and name not in args.models) or (
                    args.horizons and horizon not in args.horizons):
                continue
            experiment = config.experiment()
            datamodule = WindowDataModule(config.dataset, **{k: config.data[k] for k in (
                "seq_len", "label_len", "pred_len", "features", "target")})
            datamodule.setup("fit")
            spec = DataSpec.from_fitted(datamodule.fitted)
            model = build_model(experiment.model, spec, **experiment.model_options).train()
            seconds = step_seconds(model, spec, experiment.training.batch_size, args.steps)
            windows = len(datamodule.train_dataset)
            batches = -(-windows // experiment.training.batch_size)
            share = experiment.training.limit_train_batches  # a fraction of the batches, or a count
            batches = batches if share is None else min(batches, share) if isinstance(share, int) else round(
                batches * share)
            epoch = seconds * batches / 60
            print(f"| {folder.name} | {horizon} | {name} | {windows} | {seconds:.3f} | {epoch:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
