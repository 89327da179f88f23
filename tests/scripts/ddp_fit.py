"""Train, test and predict a tiny Informer through the package's recipe, on one process or with DDP.

    python tests/scripts/ddp_fit.py DATA.csv OUT_DIR --devices 2 --batch-size 8

With ``--devices 2`` Lightning's DDP launcher starts a second process that runs this
script again (CPU, gloo). First the recipe the runner uses (WindowDataModule,
ForecastModule, ``build_trainer``): fit, test, predict; then the same through
``Forecaster.fit(run_dir=OUT_DIR/forecaster)`` and ``evaluate()``. Every process writes
``OUT_DIR/rank<r>.json``: its test metrics, the test windows it scored (read back from
the ``row`` column, which holds the row number), the windows, timestamps and forecasts
it predicted, and the Forecaster's report. Used by tests/test_ddp.py.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import Callback

from forecast import Forecaster
from forecast.data import WindowDataModule
from forecast.models import DataSpec, build_model
from forecast.module import ForecastModule
from forecast.training import TrainingConfig, build_trainer, lightning_warnings

WINDOW = dict(seq_len=24, label_len=12, pred_len=6)
TINY_INFORMER = dict(d_model=16, n_heads=2, d_ff=16, e_layers=1, d_layers=1, factor=2, dropout=0.0, distil=False)


class ScoredWindows(Callback):
    """Which test windows this process scored: the ``row`` variable of each window's first step."""

    def __init__(self, datamodule: WindowDataModule) -> None:
        column = datamodule.input_columns.index("row")
        self.mean, self.scale = datamodule.fitted.scaler.mean_[column], datamodule.fitted.scaler.scale_[column]
        self.column, self.first_row = column, datamodule.borders["test"][0]
        self.windows: list[int] = []

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        rows = batch["x"][:, 0, self.column].double().numpy() * self.scale + self.mean  # [B]
        self.windows += [int(round(row)) - self.first_row for row in rows]


def train_and_report(data: str, out: Path, devices: int, batch_size: int, max_epochs: int = 2) -> dict:
    """Run the recipe and the Forecaster on ``devices`` processes; write and return this process's report."""
    config = TrainingConfig(max_epochs=max_epochs, patience=5, batch_size=batch_size, learning_rate=1e-3,
                            seed=0, accelerator="cpu", devices=devices, strategy="ddp" if devices > 1 else "auto")
    L.seed_everything(config.seed, verbose=False)
    datamodule = WindowDataModule(data, **WINDOW, batch_size=config.batch_size, seed=config.seed)
    datamodule.setup()
    model = build_model("informer", DataSpec.from_fitted(datamodule.fitted), **TINY_INFORMER)
    module = ForecastModule(model, learning_rate=config.learning_rate)
    scored = ScoredWindows(datamodule)
    trainer = build_trainer(config, None, callbacks=[scored], enable_progress_bar=False,
                            enable_model_summary=False, logger=False)
    with lightning_warnings(num_workers=config.num_workers):  # the calls' warnings the library leaves out too
        trainer.fit(module, datamodule=datamodule)
        metrics = trainer.test(module, datamodule=datamodule, verbose=False)[0]
        predictions = trainer.predict(module, datamodule=datamodule)
    windows = torch.cat([batch["window"] for batch in predictions]).tolist()
    stamps = np.concatenate([batch["timestamps"] for batch in predictions])  # [N_rank, P]
    forecasts = torch.cat([batch["forecast"] for batch in predictions])  # [N_rank, P, C_out]

    forecaster = Forecaster("informer", **WINDOW, max_epochs=max_epochs, seed=config.seed,
                            batch_size=config.batch_size, learning_rate=config.learning_rate, patience=5,
                            accelerator="cpu", devices=devices, strategy=config.strategy, **TINY_INFORMER)
    forecaster.fit(data, run_dir=out / "forecaster")
    evaluation = forecaster.evaluate(detail=True)
    overall = evaluation[(evaluation["horizon"] == "all") & (evaluation["variable"] == "all")]

    report = {
        "world_size": trainer.world_size,
        "metrics": {name: float(value) for name, value in metrics.items()},
        "test_windows": scored.windows,
        "predict_windows": windows,
        "predict_timestamps": stamps.astype("datetime64[s]").astype(str).tolist(),
        "predict_forecasts": forecasts.tolist(),
        "n_test": len(datamodule.test_dataset),
        "forecaster_report": {f"{row.scale}/{row.metric}": [float(row.value), int(row.n_windows)]
                              for row in overall.itertuples()},
        "history_train_loss": forecaster.history["train_loss"].tolist(),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank{trainer.global_rank}.json").write_text(json.dumps(report))
    return report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("out", type=Path)
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-epochs", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)  # two processes on the test machine's cores
    train_and_report(args.data, args.out, args.devices, args.batch_size, args.max_epochs)


if __name__ == "__main__":
    main()
