"""Distributed data parallel: the samplers' arithmetic, and a 2-process CPU (gloo) run against one process.

The DDP run is a subprocess (tests/scripts/ddp_fit.py): Lightning's launcher starts the
second process by running that script again, which a pytest process cannot be.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import lightning as L
import numpy as np
import pandas as pd
import pytest
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities.exceptions import SIGTERMException
from torch.utils.data import DistributedSampler

from forecast.data import WindowDataModule
from forecast.data.sampling import EpochShuffleSampler, eval_sampler
from forecast.errors import ConfigError
from forecast.models import DataSpec, build_model
from forecast.module import ForecastModule
from forecast.training import SigtermCheckpoint, TrainingConfig, build_trainer, lightning_warnings

SCRIPT = Path(__file__).resolve().parent / "scripts" / "ddp_fit.py"
# 293 hourly rows at 24/12/6 with the 70/10/20 split: 176 train windows (11 steps of 16,
# so one process with batch 16 and two with batch 8 see the same windows per step),
# 25 val and 53 test windows: odd, so the default DistributedSampler would pad one.
ROWS, N_TEST = 293, 53
PER_PROCESS_BATCH = 8


# ------------------------------------------------------------------------- samplers


def test_epoch_order_depends_on_seed_and_epoch_only():
    def order(seed: int, epoch: int) -> list[int]:
        sampler = EpochShuffleSampler(range(50), seed=seed)
        sampler.set_epoch(epoch)
        return list(sampler)

    assert order(0, 3) == order(0, 3)
    assert sorted(order(0, 3)) == list(range(50))
    assert order(0, 3) != order(0, 4) and order(0, 3) != order(1, 3)
    # A sampler that ran epochs 0..2 before gives epoch 3 the order a fresh one gives it.
    sampler = EpochShuffleSampler(range(50), seed=0)
    for epoch in range(4):
        sampler.set_epoch(epoch)
        served = list(sampler)
    assert served == order(0, 3)


@pytest.mark.parametrize("n_windows", [48, 49, 51])
def test_each_ddp_step_sees_the_windows_of_the_single_process_step(n_windows):
    replicas, batch = 3, 4
    single = EpochShuffleSampler(range(n_windows), seed=7)
    shards = [EpochShuffleSampler(range(n_windows), seed=7, num_replicas=replicas, rank=r) for r in range(replicas)]
    for sampler in (single, *shards):
        sampler.set_epoch(2)
    order = list(single)
    served = [list(shard) for shard in shards]
    assert len({len(s) for s in served}) == 1, "every process steps the same number of times"
    for step in range(n_windows // (replicas * batch)):  # full steps: no padding involved
        union = sorted(i for s in served for i in s[step * batch:(step + 1) * batch])
        assert union == sorted(order[step * replicas * batch:(step + 1) * replicas * batch])
    assert sorted(set(i for s in served for i in s)) == list(range(n_windows))
    # Same rule as torch's DistributedSampler: nothing of its sharding is rewritten here.
    reference = DistributedSampler(range(n_windows), num_replicas=replicas, rank=1, shuffle=True, seed=7)
    reference.set_epoch(2)
    assert list(reference) == served[1]


@pytest.mark.parametrize("n_windows", [7, 8, 53])
def test_eval_shards_cover_every_window_exactly_once(n_windows):
    dataset = range(n_windows)
    assert eval_sampler(dataset, 1, 0, split="test") is None  # one process: the loader's own order
    shards = [list(eval_sampler(dataset, 3, rank, split="test")) for rank in range(3)]
    served = sorted(i for shard in shards for i in shard)
    assert served == list(range(n_windows)), "no window twice (no padding), none left out"
    # The default DistributedSampler pads: the bug this avoids.
    padded = [list(DistributedSampler(dataset, num_replicas=3, rank=r, shuffle=False)) for r in range(3)]
    assert sum(map(len, padded)) == n_windows + (-n_windows % 3)


def test_calibration_after_training_reads_every_validation_window_on_every_process():
    """It read the process's share: under DDP rank 0 kept none of the correction and rank 1 all of it, and the
    saved model held rank 0's, fitted on half the windows."""
    from types import SimpleNamespace

    from forecast.training import TrainingConfig, calibrate_on_validation

    t = np.arange(300)
    frame = pd.DataFrame({"date": pd.date_range("2022-01-01", periods=300, freq="h"), "OT": np.sin(t / 7.0) + t / 50})
    datamodule = WindowDataModule(frame, seq_len=12, label_len=6, pred_len=4, batch_size=4, features="S")
    datamodule.setup()
    n_val = len(datamodule.dataset("val"))
    for rank in (0, 1):
        datamodule.trainer = SimpleNamespace(distributed_sampler_kwargs={"num_replicas": 2, "rank": rank})
        assert sum(len(batch["x"]) for batch in datamodule.val_dataloader()) in (n_val // 2, (n_val + 1) // 2)
        model = build_model("dlinear", DataSpec.from_fitted(datamodule.fitted), revin=True)
        fit, read = model.fit_correction_weight, []

        def counted(batches, *args, fit=fit, read=read, **kwargs):
            batches = list(batches)
            read.append(sum(len(batch["x"]) for batch in batches))
            return fit(batches, *args, **kwargs)

        model.fit_correction_weight = counted
        calibrate_on_validation(model, datamodule, TrainingConfig(calibrate_correction=True))
        assert read == [n_val]


def test_eval_refuses_more_processes_than_windows():
    with pytest.raises(ConfigError, match="fewer than the 4 processes"):
        eval_sampler(range(3), 4, 0, split="test")


class StateShapes(Callback):
    def on_test_start(self, trainer, pl_module) -> None:
        self.shapes = {name: tuple(state.shape) for accumulators in (pl_module.test_errors, pl_module.test_quantiles)
                       for accumulator in accumulators.values()
                       for name, state in accumulator.metric_state.items() if name != "n_windows"}


def test_test_metric_states_are_shaped_before_the_first_batch():
    """Summing states across processes needs [P, C] states even on a process that saw no batch yet."""
    t = np.arange(120)
    frame = pd.DataFrame({"date": pd.date_range("2022-01-01", periods=120, freq="h"), "a": np.sin(t / 4.0),
                          "OT": np.cos(t / 6.0)})
    datamodule = WindowDataModule(frame, seq_len=12, label_len=6, pred_len=5, features="MS")
    datamodule.setup()
    shapes = StateShapes()
    module = ForecastModule(build_model("naive", DataSpec.from_fitted(datamodule.fitted)))
    trainer = L.Trainer(callbacks=[shapes], logger=False, enable_progress_bar=False, enable_model_summary=False)
    with lightning_warnings():  # the call's warnings the library leaves out too
        trainer.test(module, datamodule=datamodule, verbose=False)
    assert shapes.shapes and all(shape[-2:] == (5, 1) for shape in shapes.shapes.values()), shapes.shapes


# ------------------------------------------------------------------ a real DDP run


def load_script():
    spec = importlib.util.spec_from_file_location("ddp_fit", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """The same config trained by 2 DDP processes (batch 8 each, a subprocess) and by 1 process (batch 16, here)."""
    root = tmp_path_factory.mktemp("ddp")
    rng = np.random.default_rng(0)
    t = np.arange(ROWS)
    csv = root / "toy.csv"
    pd.DataFrame({"date": pd.date_range("2022-01-01", periods=ROWS, freq="h"), "row": t.astype(float),
                  "a": np.sin(t / 5.0) + 0.1 * rng.standard_normal(ROWS),
                  "OT": np.cos(t / 7.0) + 5}).to_csv(csv, index=False)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    ddp = subprocess.Popen(
        [sys.executable, str(SCRIPT), str(csv), str(root / "ddp"), "--devices", "2",
         "--batch-size", str(PER_PROCESS_BATCH)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=root,
    )
    try:
        single = load_script().train_and_report(str(csv), root / "single", 1, 2 * PER_PROCESS_BATCH)
    finally:
        output, _ = ddp.communicate(timeout=600)
    assert ddp.returncode == 0, f"the DDP run failed:\n{output[-4000:]}"
    reports = [json.loads(path.read_text()) for path in sorted((root / "ddp").glob("rank*.json"))]
    return {"ddp": reports, "single": [single], "root": root}


def test_ddp_ran_on_two_processes(runs):
    assert [report["world_size"] for report in runs["ddp"]] == [2, 2]
    assert [report["world_size"] for report in runs["single"]] == [1]


def test_every_test_window_is_scored_exactly_once_under_ddp(runs):
    assert all(report["n_test"] == N_TEST for report in runs["ddp"]) and N_TEST % 2 == 1
    scored = [window for report in runs["ddp"] for window in report["test_windows"]]
    assert sorted(scored) == list(range(N_TEST))
    assert sorted(len(report["test_windows"]) for report in runs["ddp"]) == [N_TEST // 2, N_TEST // 2 + 1]
    for report in runs["ddp"]:
        assert report["metrics"]["test_windows"] == N_TEST


def test_ddp_test_metrics_match_the_single_process_run(runs):
    single = runs["single"][0]["metrics"]
    for report in runs["ddp"]:
        assert report["metrics"].keys() == single.keys()
        for name, value in single.items():
            assert report["metrics"][name] == pytest.approx(value, rel=1e-5), name


def test_ddp_predictions_carry_their_windows_and_timestamps(runs):
    single = runs["single"][0]
    expected_forecasts = np.asarray(single["predict_forecasts"])  # [N, P, C_out]
    windows = [w for report in runs["ddp"] for w in report["predict_windows"]]
    assert sorted(windows) == list(range(N_TEST)), "each process predicts its own share, together all windows"
    assert single["predict_windows"] == list(range(N_TEST))
    for report in runs["ddp"]:
        mine = report["predict_windows"]
        assert report["predict_timestamps"] == [single["predict_timestamps"][w] for w in mine]
        np.testing.assert_allclose(np.asarray(report["predict_forecasts"]), expected_forecasts[mine],
                                   rtol=1e-4, atol=1e-4)


def test_forecaster_fits_and_evaluates_under_ddp(runs):
    single = runs["single"][0]["forecaster_report"]
    for report in runs["ddp"]:
        assert report["forecaster_report"].keys() == single.keys()
        for name, (value, n_windows) in single.items():
            assert n_windows == N_TEST
            assert report["forecaster_report"][name][1] == N_TEST
            assert report["forecaster_report"][name][0] == pytest.approx(value, rel=1e-5), name
    saved = runs["root"] / "ddp" / "forecaster"
    assert sorted(p.name for p in saved.iterdir()) == [".fit.lock", ".save.lock", "checkpoints", "config.json",
                                                        "lightning_logs", "model.pt", "scaler.json"]
    state = torch.load(saved / "model.pt", weights_only=True)
    assert all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point())


def test_the_history_under_ddp_is_the_training_loss_over_every_processs_windows(runs):
    """Each process logged and kept the loss over its own share of the windows: the two histories differed."""
    single = runs["single"][0]["history_train_loss"]
    for report in runs["ddp"]:
        assert report["history_train_loss"] == pytest.approx(single, rel=1e-4)


def test_strategies_that_fit_in_processes_they_spawn_are_refused():
    """ddp_spawn and ddp_notebook trained in child processes: the fit returned no history and no best epoch, kept
    the last epoch's weights, and evaluate() failed with an AssertionError."""
    for strategy in ("ddp_spawn", "ddp_notebook"):
        with pytest.raises(ConfigError, match=rf"strategy='{strategy}' trains in processes it starts .* Fix: "
                                              r"strategy='ddp' from a script"):
            build_trainer(TrainingConfig(accelerator="cpu", devices=2, strategy=strategy), None)


def test_a_sigterm_under_ddp_saves_no_checkpoint(tmp_path):
    """Saving is collective and Lightning stops the processes at different steps: the interrupted process waited in
    save_checkpoint's barrier for one that never came (4 of 5 SIGTERMed 2-process fits hung)."""

    class Trainer:
        training, sanity_checking, global_step, world_size = True, False, 5, 2

        def save_checkpoint(self, *args, **kwargs):
            raise AssertionError("a collective call from one process")

    SigtermCheckpoint(tmp_path / "last.ckpt").on_exception(Trainer(), None, SIGTERMException())
    saved = []
    Trainer.world_size, Trainer.save_checkpoint = 1, lambda self, path, **kwargs: saved.append(path)
    SigtermCheckpoint(tmp_path / "last.ckpt").on_exception(Trainer(), None, SIGTERMException())
    assert saved == [tmp_path / "last.ckpt"]
