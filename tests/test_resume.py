"""Fault tolerance: runs SIGKILLed mid-epoch resume to the weights and metrics of uninterrupted runs.

Each killed run is a subprocess (tests/scripts/killed_run.py) that kills itself with
SIGKILL at the end of a chosen training step; the resumed and the uninterrupted runs
then run here, with the same number of torch threads, so "the same" means bit for bit.
The tiny Informer has dropout (the global RNG), ProbSparse attention (its own sampling
generator) and distilling (BatchNorm), and the data loader shuffles: each is state a
resumed run must restore, or its weights drift from the uninterrupted run's.
A run sent SIGTERM instead saves the step it stopped after, and its command exits with
status 143 (not 0, which a script would take for a finished run).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from lightning.pytorch.callbacks import Callback

import forecast.cli
from forecast import Forecaster
from forecast.cli import INTERRUPTED_EXIT_STATUS
from forecast.cli import main as cli_main
from forecast.data.sampling import EpochShuffleSampler, ResumableDataLoader
from forecast.errors import ConfigError
from forecast.results import COLUMNS, read_results
from forecast.sweep import SweepSpec, plan_sweep, run_sweep
from forecast.training import SIGTERM_EXIT_STATUS, EpochLog, TrainTimer, last_checkpoint

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "scripts" / "killed_run.py"

# 293 hourly rows at 24/12/6, 70/10/20: 176 train windows = 11 steps of 16 per epoch.
ROWS, STEPS_PER_EPOCH = 293, 11
KILL_AT_STEP = 17  # epoch 1, its 6th step
WINDOW = dict(seq_len=24, label_len=12, pred_len=6)
MODEL = dict(d_model=16, n_heads=2, d_ff=16, e_layers=2, d_layers=1, factor=2, dropout=0.1)
TRAINING = dict(max_epochs=2, patience=3, batch_size=16, learning_rate=1e-3)
EVERY_N_STEPS = 4  # the API run also checkpoints mid-epoch: it resumes from step 16


def write_config(path: Path, model: str, csv: Path, model_options: dict) -> Path:
    path.write_text(yaml.safe_dump({
        "model": {"name": model, **model_options},
        "data": {"dataset": str(csv), "features": "M", **WINDOW, "batch_size": TRAINING["batch_size"]},
        "trainer": {k: v for k, v in TRAINING.items() if k != "batch_size"},
        "seed": 0,
    }))
    return path


def script_env() -> dict[str, str]:
    """The environment of a killed-run subprocess: this process's torch thread count, so the runs
    resumed here continue its arithmetic bit for bit."""
    return {**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads()), "MPLBACKEND": "Agg"}


def run_scripts(commands: dict[str, list[str]], cwd: Path) -> dict[str, tuple[str, int]]:
    """Run killed_run.py once per command, all at once; each one's (output, exit status)."""
    processes = {name: subprocess.Popen([sys.executable, str(SCRIPT), *args], cwd=cwd, env=script_env(), text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                 for name, args in commands.items()}
    return {name: (process.communicate(timeout=600)[0], process.returncode) for name, process in processes.items()}


def checkpoint_state(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def assert_same_tensors(actual, expected, where: str = "") -> None:
    """Nested dicts/lists of tensors and numbers, equal bit for bit."""
    if isinstance(expected, torch.Tensor):
        assert torch.equal(actual, expected), f"{where} differs"
    elif isinstance(expected, dict):
        assert actual.keys() == expected.keys(), where
        for key in expected:
            assert_same_tensors(actual[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), where
        for index, (a, e) in enumerate(zip(actual, expected)):
            assert_same_tensors(a, e, f"{where}[{index}]")
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


# ----------------------------------------------------------------------- the loader


def test_resumable_loader_continues_an_epoch_where_its_checkpoint_left_it():
    def loader() -> ResumableDataLoader:
        return ResumableDataLoader(range(23), sampler=EpochShuffleSampler(range(23), seed=5), batch_size=4)

    uninterrupted = loader()
    uninterrupted.sampler.set_epoch(2)
    full = [batch.tolist() for batch in uninterrupted]
    interrupted = loader()
    interrupted.sampler.set_epoch(2)
    served = iter(interrupted)
    first = [next(served).tolist() for _ in range(3)]
    state = interrupted.state_dict()
    assert state == {"epoch": 2, "batches": 3} and first == full[:3]

    resumed = loader()
    resumed.load_state_dict(state)
    resumed.sampler.set_epoch(2)
    assert [batch.tolist() for batch in resumed] == full[3:]
    assert resumed.state_dict() == {"epoch": 2, "batches": len(full)}
    resumed.sampler.set_epoch(3)  # the next epoch is whole again
    assert len(list(resumed)) == len(full)


def test_a_finished_epoch_in_the_state_skips_nothing():
    loader = ResumableDataLoader(range(10), sampler=EpochShuffleSampler(range(10), seed=0), batch_size=4)
    loader.load_state_dict({"epoch": 1, "batches": 3})
    loader.sampler.set_epoch(1)
    assert sum(len(batch) for batch in loader) == 10


# -------------------------------------------------------------- killed, then resumed


# The killed-while-validating run's periodic checkpoints: at every step, by count and by time.
VALIDATING_CHECKPOINTS = {"checkpoint_every_n_steps": 1, "checkpoint_every_minutes": 1e-9}


@pytest.fixture(scope="module")
def killed(tmp_path_factory) -> dict:
    """Start every killed run at once (subprocesses), and return their folders once they died."""
    root = tmp_path_factory.mktemp("resume")
    rng = np.random.default_rng(1)
    t = np.arange(ROWS)
    csv = root / "toy.csv"
    pd.DataFrame({"date": pd.date_range("2022-01-01", periods=ROWS, freq="h"),
                  "a": np.sin(t / 5.0) + 0.1 * rng.standard_normal(ROWS),
                  "b": np.cos(t / 3.0) + 0.1 * rng.standard_normal(ROWS),
                  "OT": np.cos(t / 7.0) + 5 + 0.1 * rng.standard_normal(ROWS)}).to_csv(csv, index=False)
    api_options = {"model": "informer", **WINDOW, **MODEL, **TRAINING, "checkpoint_every_n_steps": EVERY_N_STEPS}
    configs = [write_config(root / "naive.yaml", "naive", csv, {}),
               write_config(root / "informer.yaml", "informer", csv, MODEL)]
    finished_row = {column: 0 for column in COLUMNS} | {"dataset": "toy", "model": "naive", "options": "{}",
                                                          "command": "x"}
    results_csv = root / "append" / "toy.csv"
    results_csv.parent.mkdir()
    kill = ["--kill-at-step", str(KILL_AT_STEP)]
    commands = {
        "api": [*kill, "api", str(csv), str(root / "api"), json.dumps(api_options)],
        "validating": ["--kill-at-step", str(STEPS_PER_EPOCH), "--in-validation", "api", str(csv),
                       str(root / "validating"), json.dumps({**api_options, **VALIDATING_CHECKPOINTS})],
        "sweep": [*kill, "sweep", str(root / "sweep_results"), str(root / "sweep_runs"), *map(str, configs)],
        "append": ["append", str(results_csv), json.dumps(dict(finished_row, seed=1))],
    }
    from forecast.results import append_row

    append_row(results_csv, finished_row)
    outputs = {}
    for name, (output, status) in run_scripts(commands, root).items():
        assert status == -signal.SIGKILL, f"{name} was not killed:\n{output[-4000:]}"
        outputs[name] = output
    return {"root": root, "csv": csv, "api_options": api_options, "configs": configs,
            "append_csv": results_csv, "finished_row": finished_row, "outputs": outputs}


def test_api_run_killed_mid_epoch_resumes_to_the_uninterrupted_weights(killed):
    root, options = killed["root"], dict(killed["api_options"])
    run_dir = root / "api"
    saved = checkpoint_state(last_checkpoint(run_dir))
    # The last checkpoint is the mid-epoch one of step 16: step 17 was lost with the process.
    assert saved["global_step"] == 16 and saved["epoch"] == 1
    assert not (run_dir / "model.pt").exists()

    model = options.pop("model")
    resumed = Forecaster(model, **options).fit(killed["csv"], run_dir=run_dir)
    reference = Forecaster(model, **options).fit(killed["csv"], run_dir=root / "api_reference")

    final, expected = (checkpoint_state(last_checkpoint(path)) for path in (run_dir, root / "api_reference"))
    assert expected["global_step"] == 2 * STEPS_PER_EPOCH
    assert_same_tensors(final["state_dict"], expected["state_dict"], "state_dict")
    assert_same_tensors(final["optimizer_states"], expected["optimizer_states"], "optimizer_states")
    assert_same_tensors(checkpoint_state(run_dir / "model.pt"), checkpoint_state(root / "api_reference" / "model.pt"))
    pd.testing.assert_frame_equal(resumed.evaluate(detail=True), reference.evaluate(detail=True), check_exact=True)
    pd.testing.assert_frame_equal(resumed.predict(), reference.predict(), check_exact=True)


def test_a_run_killed_while_it_validates_redoes_one_step_and_reaches_the_uninterrupted_weights(killed):
    """The epoch's last checkpoint was written a step before its validation (PreValidationCheckpoint), not at
    the last step, which Lightning would resume without validating: the resumed run trains that step,
    validates epoch 0 (its early stopping and best checkpoint see it) and ends as the uninterrupted run. The
    periodic checkpoints (every step, every moment here) wrote the last step's over it, and the resumed run
    never validated epoch 0."""
    root, options = killed["root"], dict(killed["api_options"], **VALIDATING_CHECKPOINTS)
    run_dir = root / "validating"
    saved = checkpoint_state(last_checkpoint(run_dir))
    assert saved["global_step"] == STEPS_PER_EPOCH - 1 and saved["epoch"] == 0
    assert not list((run_dir / "checkpoints").glob("best-*.ckpt"))  # epoch 0 never finished validating

    model = options.pop("model")
    resumed = Forecaster(model, **options).fit(killed["csv"], run_dir=run_dir)
    reference = Forecaster(model, **options).fit(killed["csv"], run_dir=root / "validating_reference")
    final, expected = (checkpoint_state(last_checkpoint(path)) for path in (run_dir, root / "validating_reference"))
    assert final["global_step"] == expected["global_step"] == 2 * STEPS_PER_EPOCH
    assert_same_tensors(final["state_dict"], expected["state_dict"], "state_dict")
    assert_same_tensors(final["optimizer_states"], expected["optimizer_states"], "optimizer_states")
    pd.testing.assert_frame_equal(resumed.history, reference.history.assign(seconds=resumed.history["seconds"]),
                                  check_exact=True)
    pd.testing.assert_frame_equal(resumed.evaluate(), reference.evaluate(), check_exact=True)


@pytest.fixture(scope="module")
def sweep_reference(killed) -> pd.Series:
    """The row of the same sweep run, never interrupted."""
    root = killed["root"]
    assert cli_main(["sweep", "--config", str(killed["configs"][1]), "--results_dir", str(root / "reference_results"),
                     "--runs_dir", str(root / "reference_runs")]) == 0
    return read_results(root / "reference_results" / "toy.csv").iloc[0]


METRIC_COLUMNS = ["mse", "mae", "mse_orig", "mae_orig", "n_test_windows", "epochs", "best_epoch"]


def test_killed_sweep_keeps_finished_rows_and_resumes_where_it_stopped(killed, sweep_reference):
    root = killed["root"]
    results = root / "sweep_results" / "toy.csv"
    # The naive run finished before the informer run was killed: its row is whole and alone.
    rows = read_results(results)
    assert rows["model"].tolist() == ["naive"] and list(rows.columns) == COLUMNS
    assert sorted(p.name for p in results.parent.iterdir()) == [".toy.csv.lock", "toy.csv"]
    spec = SweepSpec(configs=tuple(killed["configs"]), results_dir=root / "sweep_results",
                     runs_dir=root / "sweep_runs")
    assert [run.status() for run in plan_sweep(spec)] == ["done", "partial"]
    summary = run_sweep(spec, fail_fast=True)
    assert [run.experiment.model for run in summary.skipped] == ["naive"]
    assert [run.experiment.model for run in summary.ran] == ["informer"]
    rows = read_results(results)
    assert rows["model"].tolist() == ["naive", "informer"]
    # The resumed sweep run ends where the uninterrupted one ended.
    assert rows.iloc[1][METRIC_COLUMNS].tolist() == sweep_reference[METRIC_COLUMNS].tolist()
    assert run_sweep(spec).skipped and len(read_results(results)) == 2  # nothing left to run


def test_a_process_killed_while_appending_a_row_leaves_the_earlier_rows_intact(killed):
    path = killed["append_csv"]
    rows = read_results(path)
    assert len(rows) == 1 and rows.iloc[0]["seed"] == 0 and list(rows.columns) == COLUMNS
    # The process died between writing the new version in full and renaming it over the old one.
    (leftover,) = (p for p in path.parent.iterdir() if p.name not in (path.name, f".{path.name}.lock"))
    assert leftover.name.startswith(".toy.csv.") and leftover.name.endswith(".tmp")
    assert read_results(leftover)["seed"].tolist() == [0, 1]


# ------------------------------------------------------------------ refusing to resume


def test_a_run_killed_after_it_stopped_early_resumes_to_its_stop_not_past_it(tmp_path):
    """Lightning saved why a run stopped early but resumed its fit anyway: a run killed after stopping (while it
    calibrated or tested) trained on when its command ran again (to epoch 26 of a run that stopped at 3), and
    recorded other weights."""
    t = np.arange(ROWS)
    frame = pd.DataFrame({"date": pd.date_range("2022-01-01", periods=ROWS, freq="h"), "a": np.sin(t / 5.0),
                          "OT": np.cos(t / 7.0) + 0.1 * np.random.default_rng(0).standard_normal(ROWS)})
    options = dict(WINDOW, batch_size=16, max_epochs=30, patience=1, learning_rate=0.05,
                   checkpoint_every_minutes=10.0)  # as the benchmark configs: it writes last.ckpt after the stop
    stopped = Forecaster("dlinear", **options).fit(frame, run_dir=tmp_path / "run")
    assert len(stopped.history) < options["max_epochs"]  # it stopped early
    (tmp_path / "run" / "model.pt").unlink()  # killed before the fit finished: its command runs it again
    state = checkpoint_state(last_checkpoint(tmp_path / "run"))
    # Lightning's key: checkpoints written before the class (or by Lightning's own) resume with it, and the reverse
    assert "EarlyStopping{'monitor': 'val_loss', 'mode': 'min'}" in state["callbacks"]
    resumed = Forecaster("dlinear", **options).fit(frame, run_dir=tmp_path / "run")
    # the last epoch's seconds are its end's again: its checkpoint was written as it validated
    pd.testing.assert_frame_equal(resumed.history.drop(columns="seconds"), stopped.history.drop(columns="seconds"))
    pd.testing.assert_frame_equal(resumed.predict(), stopped.predict(), check_exact=True)


def test_resume_refuses_a_damaged_checkpoint(tmp_path, killed):
    (tmp_path / "checkpoints").mkdir()
    whole = (last_checkpoint(killed["root"] / "api")).read_bytes()
    (tmp_path / "checkpoints" / "last.ckpt").write_bytes(whole[: len(whole) // 2])  # cut short
    with pytest.raises(ConfigError, match="damaged"):
        last_checkpoint(tmp_path)


# ------------------------------------------------------------------ stopped by SIGTERM


@pytest.fixture(scope="module")
def terminated(killed) -> dict:
    """`forecast fit` and `forecast sweep`, each sent SIGTERM at step 17 (at once, subprocesses)."""
    root = killed["root"]
    fit_args = ["fit", "--config", str(killed["configs"][1]), "--run_dir", str(root / "fit_term")]
    sweep_args = ["sweep", "--config", str(killed["configs"][1]), "--results-dir", str(root / "sweep_term_results"),
                  "--runs-dir", str(root / "sweep_term_runs")]
    interrupted_args = ["fit", "--config", str(killed["configs"][1]), "--run_dir", str(root / "fit_int")]
    kill = ["--kill-at-step", str(KILL_AT_STEP), "--signal"]
    stopped = run_scripts({"fit": [*kill, "TERM", "cli", *fit_args], "sweep": [*kill, "TERM", "cli", *sweep_args],
                           "fit_int": [*kill, "INT", "cli", *interrupted_args]}, root)
    return {"root": root, "fit_args": fit_args, "sweep_args": sweep_args, "interrupted_args": interrupted_args,
            "stopped": stopped}


def assert_stopped_at_the_kill_step(terminated: dict, name: str, run_dir: Path) -> None:
    output, status = terminated["stopped"][name]
    # 143 = 128 + SIGTERM: Lightning's stop would exit 0, and a `set -e` script would go on as if it had finished.
    assert status == SIGTERM_EXIT_STATUS == 143, f"{name} exited {status}:\n{output[-4000:]}"
    assert "stopped by SIGTERM" in output
    # SIGKILL loses the steps since the last checkpoint (the end of epoch 0); SIGTERM loses none.
    assert checkpoint_state(last_checkpoint(run_dir))["global_step"] == KILL_AT_STEP, output[-4000:]


def test_forecast_fit_stopped_by_sigterm_exits_143_and_the_same_command_finishes_it(terminated):
    run_dir = terminated["root"] / "fit_term"
    assert_stopped_at_the_kill_step(terminated, "fit", run_dir)
    assert not (run_dir / "model.pt").exists()
    assert cli_main(terminated["fit_args"]) == 0
    assert checkpoint_state(last_checkpoint(run_dir))["global_step"] == 2 * STEPS_PER_EPOCH
    assert (run_dir / "model.pt").is_file()


def test_forecast_fit_interrupted_by_ctrl_c_says_so_exits_130_and_the_same_command_finishes_it(terminated):
    """Lightning answers Ctrl-C with sys.exit(1): the command ended silently with status 1."""
    output, status = terminated["stopped"]["fit_int"]
    assert status == INTERRUPTED_EXIT_STATUS == 130, f"exited {status}:\n{output[-4000:]}"
    assert "forecast: interrupted; the same command resumes from the last checkpoint" in output
    run_dir = terminated["root"] / "fit_int"
    assert checkpoint_state(last_checkpoint(run_dir))["global_step"] < KILL_AT_STEP  # no checkpoint mid-step
    assert cli_main(terminated["interrupted_args"]) == 0 and (run_dir / "model.pt").is_file()


def test_ctrl_c_during_fit_in_python_is_a_keyboard_interrupt_and_ctrl_c_works_after_it(killed):
    class CtrlC(Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            raise KeyboardInterrupt

    handler = signal.getsignal(signal.SIGINT)
    forecaster = Forecaster("dlinear", **WINDOW, max_epochs=1, callbacks=[CtrlC()])
    with pytest.raises(KeyboardInterrupt):  # Lightning's own answer: SystemExit(1), and SIGINT ignored after it
        forecaster.fit(killed["root"] / "toy.csv")
    assert signal.getsignal(signal.SIGINT) is handler


def test_forecast_sweep_stopped_by_sigterm_exits_143_and_resumes_to_the_same_row(terminated, sweep_reference):
    root = terminated["root"]
    (run_dir,) = (root / "sweep_term_runs").iterdir()
    assert_stopped_at_the_kill_step(terminated, "sweep", run_dir)
    assert not (root / "sweep_term_results" / "toy.csv").exists()
    timer_state = checkpoint_state(last_checkpoint(run_dir))["callbacks"]["TrainClock"]
    trained_before_the_stop = timer_state["time_elapsed"]["train"]
    assert cli_main(terminated["sweep_args"]) == 0
    (row,) = read_results(root / "sweep_term_results" / "toy.csv").itertuples(index=False)
    assert [getattr(row, column) for column in METRIC_COLUMNS] == sweep_reference[METRIC_COLUMNS].tolist()
    assert row.train_seconds >= round(trained_before_the_stop, 1) > 0
    (reference_dir,) = (root / "reference_runs").iterdir()
    final, expected = (checkpoint_state(path / "checkpoints" / "last.ckpt") for path in (run_dir, reference_dir))
    assert_same_tensors(final["state_dict"], expected["state_dict"], "state_dict")
    assert_same_tensors(final["optimizer_states"], expected["optimizer_states"], "optimizer_states")


def test_epoch_log_continues_an_epoch_resumed_midway_with_its_loss_and_seconds_before_the_checkpoint():
    """Lightning calls no on_train_epoch_start for the epoch a run resumes in the middle of: the checkpoint's
    running sums carry the steps before it (and a checkpoint without them, from older code, starts afresh)."""
    from types import SimpleNamespace

    now = [5000.0]  # the process's clock, long past zero
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.25)
    trainer = SimpleNamespace(optimizers=[optimizer], callback_metrics={"val_loss": torch.tensor(0.5)},
                              current_epoch=1, is_global_zero=True, sanity_checking=False, world_size=1)
    before = EpochLog(timer=lambda: now[0])
    before.on_train_epoch_start(trainer, None)
    now[0] += 3.0
    before.on_train_batch_end(trainer, None, {"loss": torch.tensor(1.0)}, {"x": torch.zeros(4, 3, 1)}, 0)
    state = before.state_dict()  # the checkpoint, 3 s and 4 windows into epoch 1; then the process dies

    optimizer.param_groups[0]["lr"] = 0.125  # what the epoch's own rate was is the checkpoint's to say
    now[0] += 100.0  # the restart
    for saved, expected in ((state, [1, 1.5, 0.5, 0.25, 10.0]), ({"epochs": []}, [1, 2.0, 0.5, 0.125, 7.0])):
        log = EpochLog(timer=lambda: now[0])
        log.load_state_dict(saved)
        log.on_train_start(trainer, None)
        now[0] += 7.0
        log.on_train_batch_end(trainer, None, {"loss": torch.tensor(2.0)}, {"x": torch.zeros(4, 3, 1)}, 0)
        log.on_validation_end(trainer, None)  # the epoch's validation, before its end as in Lightning
        log.on_train_epoch_end(trainer, None)
        assert log.frame().iloc[0].tolist() == expected
    # resumed at an epoch's end, the next epoch starts afresh
    log = EpochLog(timer=lambda: now[0])
    log.load_state_dict(state)
    log.on_train_start(trainer, None)
    log.on_train_epoch_start(trainer, None)
    log.on_train_batch_end(trainer, None, {"loss": torch.tensor(2.0)}, {"x": torch.zeros(4, 3, 1)}, 0)
    log.on_validation_end(trainer, None)
    log.on_train_epoch_end(trainer, None)
    assert log.frame().iloc[0].tolist() == [1, 2.0, 0.5, 0.125, 0.0]
    # a validation within the epoch before its checkpoint (val_check_interval < 1) is still the epoch's after it
    before.on_validation_end(trainer, None)
    log = EpochLog(timer=lambda: now[0])
    log.load_state_dict(before.state_dict())
    log.on_train_start(trainer, None)
    log.on_train_epoch_end(trainer, None)
    assert log.frame()["val_loss"].tolist() == [0.5]


def test_the_train_timer_keeps_the_time_before_a_mid_epoch_checkpoint(monkeypatch):
    import lightning.pytorch.callbacks.timer as timer_module

    now = [100.0]
    monkeypatch.setattr(timer_module.time, "monotonic", lambda: now[0])
    timer = TrainTimer()
    timer.on_train_start(None, None)
    now[0] += 5.0  # five seconds into an epoch, a checkpoint is written and the process dies
    saved = timer.state_dict()
    assert saved["time_elapsed"]["train"] == 5.0
    resumed = TrainTimer()
    resumed.load_state_dict(saved)
    now[0] += 60.0  # the restart itself is not training time
    resumed.on_train_start(None, None)
    now[0] += 3.0
    resumed.on_train_end(None, None)
    assert resumed.time_elapsed("train") == 8.0 and resumed.state_dict()["time_elapsed"]["train"] == 8.0
    # A checkpoint written by the clock Lightning's Timer replaced resumes its time too.
    legacy = TrainTimer()
    legacy.load_state_dict({"seconds": 5.0})
    legacy.on_train_start(None, None)
    now[0] += 2.0
    assert legacy.time_elapsed("train") == 7.0 and legacy.state_key == "TrainClock"


def test_other_exits_of_a_command_pass_through(monkeypatch):
    def exits(args, extra):
        raise SystemExit(3)

    monkeypatch.setattr(forecast.cli, "_splits", exits)
    with pytest.raises(SystemExit) as stop:
        cli_main(["splits", "toy.csv"])
    assert stop.value.code == 3
