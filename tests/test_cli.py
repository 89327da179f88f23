"""The `forecast` console script: YAML configs, overrides, fit / validate / test / predict."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import shlex
import subprocess
import textwrap
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from forecast import Forecaster
from forecast.cli import main, with_command_line_flags
from forecast.config import RunConfig, load_config, read_yaml
from forecast.errors import ConfigError
from forecast.experiment import dataset_label
from forecast.models import ForecastModel
from forecast.recipes import get_recipe
from forecast.training import TrainingConfig, placement

ROWS, SEQ_LEN, LABEL_LEN, PRED_LEN = 300, 32, 16, 8
TINY = {
    "model": {"name": "informer", "d_model": 16, "n_heads": 2, "d_ff": 16, "e_layers": 1, "d_layers": 1,
              "factor": 2},
    "data": {"dataset": "toy.csv", "features": "M", "seq_len": SEQ_LEN, "label_len": LABEL_LEN,
             "pred_len": PRED_LEN, "batch_size": 16},
    "trainer": {"max_epochs": 1, "learning_rate": 1e-3, "patience": 2},
    "seed": 0,
}


def changed(mapping: dict, dotted: str, value) -> dict:
    """A copy of a config mapping with one option set."""
    section, _, key = dotted.rpartition(".")
    result = {name: dict(part) if isinstance(part, dict) else part for name, part in mapping.items()}
    (result.setdefault(section, {}) if section else result)[key] = value
    return result


def write_series(path: Path, rows: int = ROWS) -> pd.DataFrame:
    t = np.arange(rows)
    frame = pd.DataFrame({"date": pd.date_range("2022-03-01", periods=rows, freq="h"),
                          "a": np.sin(t / 5.0), "OT": np.cos(t / 7.0) + 5.0})
    frame.to_csv(path, index=False)
    return frame


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    """A folder holding toy.csv and tiny.yaml; the current directory during the test."""
    write_series(tmp_path / "toy.csv")
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY, sort_keys=False))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def console_script() -> list[str]:
    """The installed `forecast` entry point next to this interpreter, else the module."""
    script = Path(sys.executable).with_name("forecast")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "forecast.cli"]


def run_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*console_script(), *args], cwd=cwd, capture_output=True, text=True, timeout=300)


# ------------------------------------------------------------------ subprocess


def test_fit_then_predict_through_the_console_script(workdir):
    fitted = run_cli(["fit", "--config", "tiny.yaml", "--run_dir", "run", "--trainer.max_epochs", "1"], workdir)
    assert fitted.returncode == 0, fitted.stderr
    assert "best epoch 0 of 1: validation loss" in fitted.stdout
    run_dir = workdir / "run"
    assert (run_dir / "config.json").is_file() and (run_dir / "model.pt").is_file()
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()

    predicted = run_cli(["predict", "--config", "tiny.yaml", "--run_dir", "run", "--output", "future.csv"], workdir)
    assert predicted.returncode == 0, predicted.stderr
    future = pd.read_csv(workdir / "future.csv", index_col="date", parse_dates=["date"])
    series = pd.read_csv(workdir / "toy.csv", parse_dates=["date"])
    expected_index = pd.date_range(series["date"].iloc[-1] + pd.Timedelta(hours=1), periods=PRED_LEN, freq="h")
    assert list(future.columns) == ["a", "OT"]
    np.testing.assert_array_equal(future.index.to_numpy(), expected_index.to_numpy())
    # the CSV holds exactly what the saved forecaster predicts
    in_process = Forecaster.load(run_dir).predict(workdir / "toy.csv")
    np.testing.assert_allclose(future.to_numpy(), in_process.to_numpy(), rtol=1e-6)


# ------------------------------------------------------------------ in process


def test_validate_and_test_score_the_fitted_run_and_fit_resumes(workdir, capsys):
    assert main(["fit", "--config", "tiny.yaml", "--run_dir", "run"]) == 0
    last = workdir / "run" / "checkpoints" / "last.ckpt"
    assert torch.load(last, map_location="cpu", weights_only=True)["epoch"] == 0
    # more epochs in the same run directory: resumes from last.ckpt instead of starting over
    assert main(["fit", "--config", "tiny.yaml", "--run_dir", "run", "--trainer.max_epochs", "2"]) == 0
    assert torch.load(last, map_location="cpu", weights_only=True)["epoch"] == 1
    capsys.readouterr()

    assert main(["validate", "--config", "tiny.yaml", "--run_dir", "run"]) == 0
    out = capsys.readouterr().out
    expected = Forecaster.load(workdir / "run").evaluate(workdir / "toy.csv", windows="val")
    assert f"over {expected.attrs['n_windows']} windows" in out and f"{expected.loc['mse', 'standardized']:.4f}" in out

    assert main(["test", "--config", "tiny.yaml", "--run_dir", "run", "--report", "report.csv"]) == 0
    out = capsys.readouterr().out
    report = pd.read_csv(workdir / "report.csv")
    # 70/10/20 of 300 rows: the test rows [240, 300) plus a 32-row lookback -> 92 - 40 + 1 windows
    assert set(report["n_windows"]) == {53}
    assert "over 53 test windows" in out and "mse" in out
    expected = Forecaster.load(workdir / "run").evaluate(workdir / "toy.csv", detail=True)
    assert list(report.columns) == list(expected.columns)
    np.testing.assert_allclose(report["value"].to_numpy(), expected["value"].to_numpy(), rtol=1e-12)

    # the validation rows [210, 240) plus the lookback -> 62 - 40 + 1 windows, the report beside the run
    assert main(["test", "--config", "tiny.yaml", "--run_dir", "run", "--windows", "val"]) == 0
    assert "over 23 val windows" in capsys.readouterr().out
    assert set(pd.read_csv(workdir / "run" / "val_report.csv")["n_windows"]) == {23}

    # the run folder alone names the same run: the same report without the config
    assert main(["test", "--run_dir", "run", "--input", "toy.csv", "--report", "again.csv"]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(workdir / "again.csv"), report)
    # other data's report goes beside the run's own (which it overwrote), and the data is named
    assert main(["test", "--run_dir", "run", "--windows", "val", "--input", "toy.csv"]) == 0
    assert "on toy.csv over 23 val windows" in capsys.readouterr().out
    assert (workdir / "run" / "val_report_toy.csv").is_file()


def test_a_run_folder_alone_validates_tests_and_predicts_what_it_was_fitted_on(workdir, capsys):
    assert main(["fit", "--model.name", "naive", "--data.dataset", "ETTh1", "--data.pred_len", "4",
                 "--run_dir", "etth1"]) == 0
    (workdir / "precious.txt").write_text("kept")
    (workdir / "future.csv").symlink_to(workdir / "precious.txt")  # written through before: replaced now, whole
    assert main(["predict", "--run_dir", "etth1", "--output", "future.csv"]) == 0
    assert (workdir / "precious.txt").read_text() == "kept" and not (workdir / "future.csv").is_symlink()
    future = pd.read_csv(workdir / "future.csv", index_col=0, parse_dates=True)
    pd.testing.assert_frame_equal(future, Forecaster.load(workdir / "etth1").predict("ETTh1"), check_freq=False,
                                  check_index_type=False)
    capsys.readouterr()
    assert main(["validate", "--run_dir", "etth1"]) == 0
    assert "validation of etth1 on ETTh1 over 2877 windows" in capsys.readouterr().out

    # an option of a config, a folder without a run, a saved run as a config, the data as the output
    assert main(["fit", "--model.name", "naive", "--data.dataset", "toy.csv", "--data.seq_len", "32",
                 "--data.label_len", "16", "--data.pred_len", "8", "--run_dir", "toy"]) == 0
    capsys.readouterr()
    for args, fix in ((["predict", "--run_dir", "toy", "--model.d_model", "8"], "valid options are ['--run_dir', "
                                                                                  "'--output'"),
                      (["test", "--run_dir", "nothing"], "nothing does not exist. Fix: run `forecast fit`"),
                      (["predict", "--run_dir", "toy", "--print_config"], "the config.json of its --run_dir folder"),
                      (["test", "--config", "toy/config.json"], "is what a fitted run saved, not a run config. Fix: "
                                                                 "--run_dir toy"),
                      (["predict", "--run_dir", "toy", "--input", "toy.csv", "--output", "toy.csv"],
                       "is the data this command reads"),
                      (["predict", "--run_dir", "toy", "--output", "toy.csv"], "is the data this command reads"),
                      (["test", "--run_dir", "toy", "--input", "toy.csv", "--report", "toy"], "is a folder"),
                      (["predict", "--run_dir", "toy", "--input", "toy.csv", "--output", "future.parquet"],
                       "--output future.parquet: predict writes CSV. Fix: name a .csv file")):
        assert main(args) == 2
        assert fix in capsys.readouterr().err
    assert len(pd.read_csv(workdir / "toy.csv")) == ROWS  # the input was not overwritten
    assert main(["test", "--run_dir", "runs/dataset=toy_model=naive"]) == 2
    assert "(On the command line" not in capsys.readouterr().err  # 'dataset=' in a folder's name is no fix


def test_output_and_report_never_overwrite_the_registered_dataset_they_read(workdir, capsys, monkeypatch):
    """`predict --run_dir rn --output $FORECAST_DATA_DIR/ETTh1.csv` replaced ETTh1.csv with the forecast: the
    same-file guard looked for a file named 'ETTh1', the dataset's name, and found none."""
    import lzma

    from forecast.datasets import EMBEDDED_DIR

    mirror = workdir / "mirror"
    mirror.mkdir()
    data = mirror / "ETTh1.csv"
    data.write_bytes(lzma.decompress((EMBEDDED_DIR / "ETTh1.csv.xz").read_bytes()))
    monkeypatch.setenv("FORECAST_DATA_DIR", str(mirror))
    assert main(["fit", "--model.name", "naive", "--data.dataset", "ETTh1", "--data.pred_len", "4",
                 "--run_dir", "rn"]) == 0
    capsys.readouterr()
    before = data.read_bytes()
    for args in (["predict", "--run_dir", "rn", "--output", str(data)],
                 ["test", "--run_dir", "rn", "--report", str(data)]):
        assert main(args) == 2
        assert f"{data} is the data this command reads" in capsys.readouterr().err
    assert data.read_bytes() == before


def test_predict_of_other_data_writes_beside_the_runs_own_forecast(workdir, capsys):
    """`predict --run_dir run --input other.csv` wrote over the run's forecast.csv, where `test` writes other
    data's report beside the run's own."""
    assert main(["fit", "--model.name", "naive", "--data.dataset", "toy.csv", "--data.seq_len", "32",
                 "--data.label_len", "16", "--data.pred_len", "8", "--run_dir", "run"]) == 0
    write_series(workdir / "other.csv", rows=200)
    assert main(["predict", "--run_dir", "run"]) == 0
    own = (workdir / "run" / "forecast.csv").read_text()
    assert main(["predict", "--run_dir", "run", "--input", "other.csv"]) == 0
    assert "written to run/forecast_other.csv" in capsys.readouterr().out
    assert (workdir / "run" / "forecast.csv").read_text() == own
    assert (workdir / "run" / "forecast_other.csv").read_text() != own


def test_new_rows_in_a_file_whose_date_column_has_another_name_get_a_fix_the_command_line_can_follow(workdir,
                                                                                                       capsys):
    """`predict --run_dir run --input other.csv` with the date column renamed was told df.rename(columns=...) and
    df.rename_axis(...), Python a command line user does not run, and no flag reads new rows by another column:
    the fix is the file's header."""
    assert main(["fit", "--model.name", "naive", "--data.dataset", "toy.csv", "--data.seq_len", "32",
                 "--data.label_len", "16", "--data.pred_len", "8", "--run_dir", "run"]) == 0
    write_series(workdir / "other.csv", rows=200).rename(columns={"date": "ts"}).to_csv("other.csv", index=False)
    capsys.readouterr()
    assert main(["predict", "--run_dir", "run", "--input", "other.csv"]) != 0
    error = capsys.readouterr().err
    assert "Fix: name the timestamp column 'date' in other.csv: change its header to 'date'" in error
    assert "rename_axis" not in error
    lines = (workdir / "other.csv").read_text().splitlines()
    (workdir / "other.csv").write_text("\n".join([lines[0].replace("ts", "date", 1), *lines[1:]]) + "\n")  # the fix
    assert main(["predict", "--run_dir", "run", "--input", "other.csv"]) == 0


def test_predict_reads_a_run_and_writes_a_forecast_under_home_given_with_a_tilde(workdir, monkeypatch):
    """`predict --run_dir ~/run` looked for a fitted run in a folder named "~" under the working directory, and
    `--output ~/f.csv` wrote into one, where fit keeps the run in the home folder."""
    monkeypatch.setenv("HOME", str(workdir / "home"))
    assert main(["fit", "--model.name", "naive", "--data.dataset", "toy.csv", "--data.seq_len", "32",
                 "--data.label_len", "16", "--data.pred_len", "8", "--run_dir", "~/run"]) == 0
    assert main(["predict", "--run_dir", "~/run", "--output", "~/forecast.csv"]) == 0
    assert (workdir / "home" / "forecast.csv").is_file() and not (workdir / "~").exists()


def test_output_and_report_never_overwrite_the_input_they_read_given_with_a_tilde(workdir, monkeypatch, capsys):
    """`predict --input ~/toy.csv --output ~/toy.csv` replaced the data with the forecast: the output's "~" was
    expanded, the input's (which pandas reads under the home folder) was not, so the same-file guard found none."""
    home = workdir / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    write_series(home / "toy.csv")
    assert main(["fit", "--model.name", "naive", "--data.dataset", "toy.csv", "--data.seq_len", "32",
                 "--data.label_len", "16", "--data.pred_len", "8", "--run_dir", "run"]) == 0
    capsys.readouterr()
    before = (home / "toy.csv").read_bytes()
    for args in (["predict", "--run_dir", "run", "--input", "~/toy.csv", "--output", "~/toy.csv"],
                 ["test", "--run_dir", "run", "--input", "~/toy.csv", "--report", "~/toy.csv"]):
        assert main(args) == 2
        assert f"{home / 'toy.csv'} is the data this command reads" in capsys.readouterr().err
    assert (home / "toy.csv").read_bytes() == before


def test_a_sweep_run_is_the_run_fit_resumes_and_predict_reads(workdir, capsys, caplog):
    """One run-folder scheme: `forecast sweep`, `forecast fit` and `forecast predict` find the same run."""
    config_path = workdir / "configs" / "toy" / "informer_M_8.yaml"
    config_path.parent.mkdir(parents=True)
    config_path.write_text(yaml.safe_dump(TINY, sort_keys=False))
    assert main(["sweep", "--config", str(config_path), "--seeds", "0", "--results-dir", "results"]) == 0
    run_dir = load_config(config_path).resolved_run_dir()
    assert (run_dir / "model.pt").is_file() and (run_dir / "checkpoints" / "last.ckpt").is_file()

    assert main(["predict", "--config", str(config_path), "--output", "future.csv"]) == 0
    np.testing.assert_allclose(pd.read_csv(workdir / "future.csv", index_col="date").to_numpy(),
                               Forecaster.load(run_dir).predict(workdir / "toy.csv").to_numpy(), rtol=1e-6)
    with caplog.at_level(logging.INFO, logger="forecast"):
        assert main(["fit", "--config", str(config_path)]) == 0
    assert f"resuming from {run_dir / 'checkpoints' / 'last.ckpt'}" in caplog.text
    assert sorted(path.name for path in (workdir / "runs").iterdir()) == [run_dir.name]


def test_test_and_predict_by_config_never_take_another_csv_of_the_same_name_for_the_run(workdir, capsys):
    """A config's run folder names its CSV file's stem and the digest of its bytes: the stem alone named the run
    fitted on another toy.csv (or on this one before an edit), and test and predict scored with it."""
    naive = {**TINY, "model": {"name": "naive"}}
    other = workdir / "elsewhere" / "toy.csv"
    other.parent.mkdir()
    write_series(other).assign(OT=np.sin(np.arange(ROWS) / 2.0)).to_csv(other, index=False)
    for name, data in (("here.yaml", "toy.csv"), ("elsewhere.yaml", str(other))):
        (workdir / name).write_text(yaml.safe_dump(changed(naive, "data.dataset", data)))
    assert main(["fit", "--config", "here.yaml"]) == 0
    fitted = load_config("here.yaml").resolved_run_dir()
    capsys.readouterr()
    for command in (["test"], ["predict", "--output", "future.csv"]):
        assert main([*command, "--config", "elsewhere.yaml"]) == 2
        error = capsys.readouterr().err
        assert f"no run of this config is fitted on {other} as it is now" in error and str(fitted) in error
        assert "Fix: `forecast fit` with the same config" in error and "(On the command line" not in error
    assert not (workdir / "future.csv").exists()

    assert main(["fit", "--config", "elsewhere.yaml"]) == 0
    run_dir = load_config("elsewhere.yaml").resolved_run_dir()
    assert run_dir != fitted and sorted(path.name for path in (workdir / "runs").iterdir()) == sorted(
        [fitted.name, run_dir.name])
    assert main(["test", "--config", "elsewhere.yaml", "--report", "report.csv"]) == 0
    expected = Forecaster.load(run_dir).evaluate(other, detail=True)
    np.testing.assert_allclose(pd.read_csv(workdir / "report.csv")["value"], expected["value"], rtol=1e-12)

    write_series(workdir / "toy.csv", ROWS + 24)  # the file grows: the run fitted on it before is named, not used
    assert main(["predict", "--config", "here.yaml"]) == 2
    assert "--run_dir with one of those folders and --input toy.csv to use that run" in capsys.readouterr().err
    assert main(["predict", "--config", "here.yaml", "--run_dir", str(fitted), "--input", "toy.csv",
                 "--output", "future.csv"]) == 0
    assert pd.read_csv(workdir / "future.csv", parse_dates=["date"]).date.iloc[0] == pd.Timestamp("2022-03-14 12:00")
    (workdir / "toy.csv").unlink()
    assert main(["test", "--config", "here.yaml"]) == 2
    assert "toy.csv does not exist, and a run on a CSV file is found by the file's bytes" in capsys.readouterr().err


def test_a_run_folder_alone_reads_the_csv_file_it_was_fitted_on_while_its_bytes_are_the_fits(workdir, capsys):
    """A saved run named its CSV file by the stem alone: `--run_dir` alone needed --input, and `--run_dir` with a
    config scored the file as it is now, however it had changed since the fit. The run records the file's path and
    digest: it reads it while unchanged, and refuses it, naming both digests, once it is edited or gone."""
    assert main(["fit", "--model.name", "naive", "--data.dataset", "toy.csv", "--data.seq_len", "32",
                 "--data.label_len", "16", "--data.pred_len", "8", "--run_dir", "toy"]) == 0
    recorded = json.loads((workdir / "toy" / "config.json").read_text())["data_file"]
    digest = dataset_label("toy.csv").rpartition("@")[2]
    assert recorded == {"path": str((workdir / "toy.csv").resolve()), "sha256": digest}
    loaded = Forecaster.load(workdir / "toy")
    assert main(["test", "--run_dir", "toy", "--report", "report.csv"]) == 0
    expected = loaded.evaluate(workdir / "toy.csv", detail=True)
    np.testing.assert_allclose(pd.read_csv(workdir / "report.csv")["value"], expected["value"], rtol=1e-12)
    assert main(["predict", "--run_dir", "toy", "--output", "future.csv"]) == 0
    np.testing.assert_allclose(pd.read_csv(workdir / "future.csv", index_col="date").to_numpy(),
                               loaded.predict(workdir / "toy.csv").to_numpy(), rtol=1e-12)
    capsys.readouterr()
    assert main(["validate", "--run_dir", "toy"]) == 0
    assert f"on {workdir / 'toy.csv'} over" in capsys.readouterr().out

    write_series(workdir / "toy.csv", ROWS + 24)  # the file is edited after the fit
    by_flags = ["--model.name", "naive", "--data.dataset", "toy.csv", "--data.seq_len", "32", "--data.label_len",
                "16", "--data.pred_len", "8"]
    for args in (["test", "--run_dir", "toy"], ["predict", "--run_dir", "toy", "--output", "changed.csv"],
                 ["predict", *by_flags, "--run_dir", "toy", "--output", "changed.csv"]):
        assert main(args) == 2
        error = capsys.readouterr().err
        assert (f"toy was fitted on {workdir / 'toy.csv'} (sha256 {digest}... then), which has changed since (sha256 "
                f"{dataset_label('toy.csv').rpartition('@')[2]}... now). Fix: --input PATH") in error
        assert "or `forecast fit` again" in error
    assert not (workdir / "changed.csv").exists()
    # other data, the file as it is now included, stays allowed when named
    for args in (["predict", "--run_dir", "toy", "--input", "toy.csv", "--output", "changed.csv"],
                 ["predict", *by_flags, "--run_dir", "toy", "--input", "toy.csv", "--output", "changed.csv"]):
        assert main(args) == 0
    (workdir / "toy.csv").unlink()
    assert main(["validate", "--run_dir", "toy"]) == 2
    assert f"(sha256 {digest}... then), which no longer exists. Fix: --input PATH" in capsys.readouterr().err


def test_a_run_saved_before_runs_recorded_their_csv_file_is_used_as_before(workdir, capsys):
    by_flags = ["--model.name", "naive", "--data.dataset", "toy.csv", "--data.seq_len", "32", "--data.label_len",
                "16", "--data.pred_len", "8", "--run_dir", "old"]
    assert main(["fit", *by_flags]) == 0
    config = json.loads((workdir / "old" / "config.json").read_text())
    del config["data_file"]
    (workdir / "old" / "config.json").write_text(json.dumps(config))
    capsys.readouterr()
    assert main(["validate", "--run_dir", "old"]) == 2
    assert ("was fitted on 'toy', which is not a registered dataset, and records no CSV file (saved before runs kept "
            "theirs, or fitted on a frame). Fix: pass the data with --input") in capsys.readouterr().err
    write_series(workdir / "toy.csv", ROWS + 24)  # unchecked: the run holds no digest to check it against
    assert main(["test", *by_flags]) == 0
    assert main(["test", "--run_dir", "old", "--input", "toy.csv", "--report", "report.csv"]) == 0
    assert "data_file" not in json.loads((workdir / "old" / "config.json").read_text())


def test_a_config_naming_another_model_or_window_than_its_run_dir_holds_is_refused(workdir, capsys):
    """`test --config tiny.yaml --run_dir run --model.d_model 32` (or `--data.pred_len 16`, `--data.features S`)
    scored or forecast with the run as saved, d_model 16 at horizon 8 with every variable, and said nothing:
    the options that name the model and its window were accepted and ignored."""
    assert main(["fit", "--config", "tiny.yaml", "--run_dir", "run"]) == 0
    capsys.readouterr()
    for command in (["test", "--report", "report.csv"], ["predict", "--output", "future.csv"], ["validate"]):
        for override, difference in ((["--model.d_model", "32"], "--model.d_model 16 in the run, 32 in the config"),
                                     (["--data.pred_len", "16"], "--data.pred_len 8 in the run, 16 in the config"),
                                     (["--data.features", "S", "--data.target", "OT"],
                                      "--data.features M in the run, S in the config; --data.target None in the "
                                      "run, OT in the config")):
            assert main([*command, "--config", "tiny.yaml", "--run_dir", "run", *override]) == 2
            error = capsys.readouterr().err
            assert f"run holds another model than the config names: {difference}. Fix:" in error, error
    assert not (workdir / "report.csv").exists() and not (workdir / "future.csv").exists()
    # what only trains (more epochs, another learning rate) leaves the run the config's: a resumed run is that run
    assert main(["test", "--config", "tiny.yaml", "--run_dir", "run", "--trainer.max_epochs", "3",
                 "--trainer.learning_rate", "0.01", "--report", "report.csv"]) == 0


def test_a_config_naming_another_split_than_its_run_dir_was_fitted_with_is_refused(workdir, capsys):
    """`test --config tiny.yaml --data.split '[0.3,0.2,0.5]' --run_dir run` on a run fitted on 0.8/0.1/0.1 scored
    windows the model trained on and wrote the report: the comparison read the Forecaster's config, which holds
    no split."""
    (workdir / "naive.yaml").write_text(yaml.safe_dump({**TINY, "model": {"name": "naive"}}))
    assert main(["fit", "--config", "naive.yaml", "--data.split", "[0.8,0.1,0.1]", "--run_dir", "run"]) == 0
    capsys.readouterr()
    base = ["--config", "naive.yaml", "--run_dir", "run"]
    for command in (["test", "--report", "report.csv"], ["validate"]):
        assert main([*command, *base, "--data.split", "[0.3,0.2,0.5]"]) == 2
        error = capsys.readouterr().err
        assert ("--data.split [0.8, 0.1, 0.1] in the run, [0.3, 0.2, 0.5] in the config. Fix:" in error), error
    assert not (workdir / "report.csv").exists()
    # the run's own split, however written, or none (the run's), is the run's
    assert main(["test", "--report", "report.csv", *base, "--data.split", "[0.80,0.1,0.10]"]) == 0
    assert main(["test", "--report", "report.csv", *base]) == 0


def test_a_config_naming_the_default_split_a_run_was_fitted_with_is_its_run(workdir, capsys):
    """A run fitted without --data.split saves none: `test --config ... --data.split ratio --run_dir run`, the split
    it was fitted with, was refused as "another model" with "--data.split None in the run"."""
    (workdir / "naive.yaml").write_text(yaml.safe_dump({**TINY, "model": {"name": "naive"}}))
    assert main(["fit", "--config", "naive.yaml", "--run_dir", "run"]) == 0
    capsys.readouterr()
    base = ["--config", "naive.yaml", "--run_dir", "run"]
    assert main(["test", "--report", "report.csv", *base, "--data.split", "ratio"]) == 0
    assert main(["validate", *base, "--data.split", "[0.3,0.2,0.5]"]) == 2
    assert "--data.split ratio in the run, [0.3, 0.2, 0.5] in the config. Fix:" in capsys.readouterr().err


def test_a_config_naming_the_protocol_a_registered_files_run_was_fitted_with_is_its_run(workdir, capsys):
    """A CSV path that is byte for byte ETTh1.csv is fitted with the ett_hour split, but a run fitted without
    --data.split was taken to have used ratio: ett_hour was refused as "another model", and ratio accepted (another
    split's test windows scored as the run's)."""
    import lzma

    from forecast.datasets import EMBEDDED_DIR

    (workdir / "ETTh1.csv").write_bytes(lzma.decompress((EMBEDDED_DIR / "ETTh1.csv.xz").read_bytes()))
    config = {"model": {"name": "naive"}, "data": {"dataset": "ETTh1.csv", "features": "S", "seq_len": 8,
                                                   "label_len": 4, "pred_len": 4}, "seed": 0}
    (workdir / "naive.yaml").write_text(yaml.safe_dump(config))
    assert main(["fit", "--config", "naive.yaml", "--run_dir", "run"]) == 0
    capsys.readouterr()
    base = ["--config", "naive.yaml", "--run_dir", "run"]
    assert main(["validate", *base, "--data.split", "ett_hour"]) == 0
    assert main(["validate", *base, "--data.split", "ratio"]) == 2
    assert "--data.split ett_hour in the run, ratio in the config. Fix:" in capsys.readouterr().err


def test_a_config_with_its_run_dir_scores_with_the_configs_loader_and_device_settings(workdir, capsys, monkeypatch):
    """`test --config tiny.yaml --run_dir run --data.eval_batch_size 7 --trainer.accelerator cpu` scored with the
    run's saved loader and device settings: those of the config, which name no other model, were silently
    ignored. They are now what the run is scored with; the model is the run's."""
    import forecast.api

    assert main(["fit", "--config", "tiny.yaml", "--run_dir", "run"]) == 0
    seen = []
    scored = forecast.api.test_windows

    def spy(module, datamodule, config, **options):
        seen.append((datamodule.config.eval_batch_size, config.accelerator, config.devices, config.num_workers))
        return scored(module, datamodule, config, **options)

    monkeypatch.setattr(forecast.api, "test_windows", spy)
    for command in (["test", "--report", "report.csv"], ["validate"]):
        assert main([*command, "--config", "tiny.yaml", "--run_dir", "run", "--data.eval_batch_size", "7",
                     "--trainer.accelerator", "cpu", "--trainer.devices", "1"]) == 0
    assert seen == [(7, "cpu", 1, 0)] * 2
    # the run's saved settings are kept in its folder: the run alone scores with them
    saved = Forecaster.load(workdir / "run")
    assert saved.config["data"].get("eval_batch_size") is None
    # what the command does, in Python: another forecaster's loader settings, never its model
    scored = Forecaster.load(workdir / "run", scored_like=Forecaster("naive", eval_batch_size=5))
    assert scored.config["data"]["eval_batch_size"] == 5
    assert (scored.config["model"], scored.model_options) == (saved.config["model"], saved.model_options)


def test_validate_scores_other_data_with_the_runs_scaler(workdir, capsys):
    assert main(["fit", "--config", "tiny.yaml", "--run_dir", "run"]) == 0
    other = write_series(workdir / "other.csv")
    other["OT"] = other["OT"] * 3 + 1
    other.to_csv(workdir / "other.csv", index=False)
    capsys.readouterr()
    assert main(["validate", "--config", "tiny.yaml", "--run_dir", "run", "--input", "other.csv"]) == 0
    printed = float(re.search(r"\nmse +([0-9.]+)", capsys.readouterr().out).group(1))
    expected = Forecaster.load(workdir / "run").evaluate(workdir / "other.csv", windows="val")
    assert printed == pytest.approx(expected.loc["mse", "standardized"], abs=1e-4)
    own = Forecaster.load(workdir / "run").evaluate(workdir / "toy.csv", windows="val")
    assert printed != pytest.approx(own.loc["mse", "standardized"], abs=1e-3)  # the other data, not the fitted


def test_predict_forecasts_the_quantiles_its_config_names(workdir):
    """`predict --quantiles [0.2, 0.8]` wrote the columns of the levels the run was fitted with (0.05 and 0.95):
    the option was accepted and ignored. The levels are read from the model as it forecasts, so they are the
    config's; without them, the run's own."""
    by_flags = ["--model.name", "seasonal_naive", "--model.season_length", "8", "--data.dataset", "toy.csv",
                "--data.seq_len", "32", "--data.label_len", "16", "--data.pred_len", "8"]
    assert main(["fit", *by_flags, "--quantiles", "[0.05, 0.95]"]) == 0
    for levels, columns in (([], ["a_q0.05", "a_q0.95"]), (["--quantiles", "[0.2, 0.8]"], ["a_q0.2", "a_q0.8"])):
        assert main(["predict", *by_flags, *levels, "--output", "future.csv"]) == 0
        future = pd.read_csv(workdir / "future.csv", index_col="date")
        assert list(future.columns) == ["a", "OT", *columns, *(name.replace("a_", "OT_") for name in columns)]
    assert (future["a_q0.2"] < future["a_q0.8"]).all()
    assert main(["predict", *by_flags, "--quantiles", "[0.2, 1.5]"]) == 2  # checked as fit checks it


def test_a_saved_run_forecasts_and_scores_from_the_sample_paths_its_config_names(workdir):
    """`test --run_dir run --trainer.n_samples 7` scored the run's own 100 paths: the option was accepted and
    ignored. Like the quantile levels, the paths are drawn as the model forecasts, so they are the config's."""
    by_flags = ["--model.name", "seasonal_naive", "--model.season_length", "8", "--data.dataset", "toy.csv",
                "--data.seq_len", "32", "--data.label_len", "16", "--data.pred_len", "8", "--run_dir", "run"]
    assert main(["fit", *by_flags]) == 0
    reports = {}
    for paths in ([], ["--trainer.n_samples", "7"]):
        assert main(["test", *by_flags, *paths, "--report", "report.csv"]) == 0
        report = pd.read_csv(workdir / "report.csv")
        reports[len(paths)] = report.set_index(["scale", "metric", "horizon", "variable"])["value"]
    points = reports[0].index.get_level_values("metric").isin(["mse", "mae"])
    pd.testing.assert_series_equal(reports[0][points], reports[2][points])
    risks = reports[0].index.get_level_values("metric") == "rho_risk_0.9"
    assert risks.any() and not np.allclose(reports[0][risks], reports[2][risks])
    assert main(["predict", *by_flags, "--trainer.n_samples", "7", "--output", "future.csv"]) == 0
    fitted = Forecaster.load(workdir / "run")
    fitted.predictor.n_samples = 7
    seven = fitted.predict(workdir / "toy.csv")
    np.testing.assert_allclose(pd.read_csv(workdir / "future.csv", index_col="date").to_numpy(), seven.to_numpy())


def test_predict_runs_where_the_config_places_the_model(workdir, capsys):
    """`predict --trainer.accelerator cuda` forecast on the CPU (the saved model's device) and said nothing, while
    `test` with the same config scored on the accelerator; now predict places the model as scoring does, and an
    accelerator this machine lacks is refused by name."""
    by_flags = ["--model.name", "dlinear", "--data.dataset", "toy.csv", "--data.seq_len", "32",
                "--data.label_len", "16", "--data.pred_len", "8", "--trainer.max_epochs", "1"]
    assert main(["fit", *by_flags]) == 0
    assert main(["predict", *by_flags, "--trainer.accelerator", "cpu", "--output", "future.csv"]) == 0
    capsys.readouterr()
    if not torch.cuda.is_available():
        assert main(["predict", *by_flags, "--trainer.accelerator", "cuda", "--output", "future.csv"]) == 2
        assert "'accelerator': 'cuda'" in capsys.readouterr().err
    assert placement(TrainingConfig(accelerator="cpu")) == torch.device("cpu")


def test_print_config_shows_overrides_with_yaml_types(workdir, capsys):
    assert main(["fit", "--config", "tiny.yaml", "--model.d_model", "8", "--trainer.max_epochs=3",
                 "--data.split", "[0.6, 0.2, 0.2]", "--seed", "4", "--print_config"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["model"]["d_model"] == 8 and printed["trainer"]["max_epochs"] == 3
    assert printed["data"]["split"] == [0.6, 0.2, 0.2] and printed["seed"] == 4
    assert printed["data"]["target"] is None  # default filled in: a plain CSV has no registered target
    assert not (workdir / "runs").exists()  # printing trains nothing


def test_a_list_option_spread_over_words_gets_the_list_form(workdir, capsys):
    """`--data.split 0.6 0.2 0.2`, as `forecast splits --split` takes it: "unrecognized arguments: 0.2 0.2"."""
    assert main(["fit", "--config", "tiny.yaml", "--data.split", "0.6", "0.2", "0.2", "--print_config"]) == 2
    assert ("unrecognized arguments: 0.2 0.2. Fix: give a list as one value, --data.split '[0.6, 0.2, 0.2]'."
            in capsys.readouterr().err)
    assert main(["fit", "--config", "tiny.yaml", "--data.seq_len", "16", "stray", "--print_config"]) == 2
    assert "give a list" not in capsys.readouterr().err  # not a list option


def test_print_config_flags_are_refused_rather_than_ignored(workdir, capsys):
    """--print_config=skip_default (as jsonargparse's help offers), =skip_null and =bogus printed the same config."""
    for flag in ("skip_default", "bogus"):
        assert main(["fit", "--config", "tiny.yaml", f"--print_config={flag}"]) == 2
        captured = capsys.readouterr()
        assert f"--print_config={flag} takes no flags here" in captured.err and not captured.out
    assert main(["fit", "--config", "tiny.yaml", "--print_config"]) == 0


def test_help_describes_print_config_as_it_is_taken(capsys):
    """`fit --help` offered `--print_config [=flags]` with skip_default and skip_unset, which it then refused."""
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--print_config print the config as given" in out and "(no flags: --print_config alone)" in out
    assert "[=flags]" not in out and "skip_default" not in out


def test_print_config_refuses_what_fit_refuses(workdir, capsys):
    """--print_config showed `attention: foo` and d_model 15 with 2 heads as a config, which fit then refused, and
    a one-element split (`--data.split+ 0.6`), which fit refused only after announcing the run."""
    for override, message in ((["--model.attention", "foo"], "unknown attention attention='foo'; choose one of"),
                              (["--model.d_model", "15"], "d_model=15 must be a positive multiple of n_heads=2"),
                              (["--data.split+", "0.6"], "split=[0.6]: Fix: use a protocol name")):
        assert main(["fit", "--config", "tiny.yaml", *override, "--print_config"]) == 2
        captured = capsys.readouterr()
        assert message in captured.err and not captured.out
        assert main(["fit", "--config", "tiny.yaml", *override]) == 2
        captured = capsys.readouterr()
        assert message in captured.err and "fitting" not in captured.out


@dataclasses.dataclass(frozen=True)
class ScaledLastConfig:
    scale: float = 1.0

    def __post_init__(self):
        if self.scale <= 0:
            raise ConfigError(f"scale={self.scale} must be > 0")


class ScaledLast(ForecastModel):
    def __init__(self, spec, config):
        super().__init__()
        self.spec, self.config = spec, config
        self.weight = torch.nn.Parameter(torch.full((), config.scale))

    def forward(self, x, x_mark, y_mark):
        return self.weight * x[:, -1:, -self.spec.c_out:].expand(-1, self.spec.pred_len, -1)  # [B, P, C_out]


def test_a_model_registered_with_its_config_takes_typed_options_from_the_cli_and_configs(workdir, capsys,
                                                                                         monkeypatch):
    """A model registered at run time took no option from `forecast fit` or a YAML config ("unrecognized arguments:
    --model.hidden 8"); a builder put in place of a built-in one kept the built-in's checks and recipe options."""
    import forecast.models as models

    def builder(spec, **options):
        return ScaledLast(spec, ScaledLastConfig(**options))

    with pytest.raises(ConfigError, match=r"'dlinear' is a built-in model.*Fix: register yours under another name"):
        models.register_model("dlinear", builder, config=ScaledLastConfig)
    monkeypatch.setitem(models.MODELS, "scaled_last", None)  # taken out again after the test, with its config
    monkeypatch.setitem(models._CONFIGS, "scaled_last", None)
    models.register_model("scaled_last", builder, config=ScaledLastConfig)
    flags = ["--model.name", "scaled_last", "--data.dataset", "toy.csv", "--data.seq_len", "32", "--data.label_len",
             "16", "--data.pred_len", "8", "--trainer.max_epochs", "1"]
    assert main(["fit", *flags, "--model.scale", "0.5", "--run_dir", "run"]) == 0
    assert json.loads((workdir / "run" / "config.json").read_text())["model_options"] == {"scale": 0.5}
    capsys.readouterr()
    assert main(["fit", *flags, "--model.scale", "half", "--print_config"]) == 2  # typed as the dataclass says
    assert "model.scale" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=r"unknown option\(s\) \['scael'\] for Forecaster\('scaled_last'\)\. "
                                          r"Did you mean 'scale'\?"):
        Forecaster("scaled_last", scael=2.0)
    monkeypatch.setitem(models.MODELS, "informer", builder)  # in place of the built-in: its own checks, no recipe's
    assert Forecaster("informer", scale=2.0).config["model_options"] == {"scale": 2.0}
    with pytest.raises(ConfigError, match=r"^scale=-1 must be > 0$"):
        Forecaster("informer", scale=-1)


def _install_plugin(site: Path, package: str, module_text: str, target: str) -> None:
    """An installed distribution ``package`` in ``site`` (a folder on sys.path) declaring one forecast.plugins
    entry point, ``target`` in its module."""
    (site / f"{package}.py").write_text(module_text)
    info = site / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[forecast.plugins]\n{package} = {target}\n")


def test_an_installed_plugin_registers_its_models_for_the_command(workdir, tmp_path_factory, monkeypatch, capsys):
    """The command had no way to find a model registered in another package: `--model.name` named only the
    built-in ones unless the user wrote a script calling forecast.cli.main."""
    import forecast.models as models

    site = tmp_path_factory.mktemp("site")
    _install_plugin(site, "lastvalue_plugin", textwrap.dedent("""
        from forecast.models import build_model, register_model

        def register():
            register_model("plugged_naive", lambda spec, **options: build_model("naive", spec, **options))
        """), "lastvalue_plugin:register")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setitem(models.MODELS, "plugged_naive", None)  # taken out again after the test
    monkeypatch.setitem(models._CONFIGS, "plugged_naive", None)
    flags = ["--data.dataset", "toy.csv", "--data.seq_len", "32", "--data.label_len", "16", "--data.pred_len", "8"]
    assert main(["fit", "--model.name", "plugged_naive", *flags, "--run_dir", "run"]) == 0
    assert json.loads((workdir / "run" / "config.json").read_text())["model"] == "plugged_naive"
    capsys.readouterr()
    broken = tmp_path_factory.mktemp("broken")
    _install_plugin(broken, "broken_plugin", "raise ImportError('needs torch_geometric')\n", "broken_plugin")
    monkeypatch.syspath_prepend(str(broken))
    assert main(["fit", "--model.name", "naive", *flags, "--run_dir", "other"]) == 2
    assert ("forecast: error: the plugin 'broken_plugin' (broken_plugin, from the package 'broken_plugin') failed to "
            "load: ImportError: needs torch_geometric. Fix: update or repair that package, or uninstall it (pip "
            "uninstall broken_plugin).") in capsys.readouterr().err
    assert not (workdir / "other").exists()


@pytest.mark.parametrize("where", [
    "trainer:\n  logger: {class_path: planted.Logger}\n",  # a Trainer option typed with classes
    "trainer:\n  logger: planted.Logger\n",
    "data:\n  columns: [{class_path: planted.Logger}]\n",  # any option: jsonargparse imported it, then a traceback
    "--trainer.logger planted.Logger",
    "--trainer.logger.class_path planted.Logger",
    "--trainer '{profiler: {class_path: planted.Logger}}'",
])
def test_a_config_never_imports_code_it_names(workdir, capsys, monkeypatch, where):
    """A class path in a config had jsonargparse import its module as it parsed: a module beside a config received
    from someone else ran under `python -m forecast` (the folder on the import path) before the value was refused."""
    (workdir / "planted.py").write_text("import pathlib\npathlib.Path('imported').touch()\nclass Logger:\n    pass\n")
    monkeypatch.syspath_prepend(str(workdir))
    flags = shlex.split(where) if where.startswith("--") else []
    sweep_flags = ["--set", f"{flags[0][2:]}={flags[1]}"] if flags else []  # the sweep's spelling
    if not flags:
        (workdir / "planted.yaml").write_text(where)
        flags = sweep_flags = ["--config", "planted.yaml"]
    for command in (["fit", "--config", "tiny.yaml", *flags, "--print_config"],
                    ["sweep", "--config", "tiny.yaml", *sweep_flags, "--dry_run"]):
        assert main(command) == 2
        error = capsys.readouterr().err
        assert "names the class 'planted.Logger'" in error and "never imports other code" in error
    assert not (workdir / "imported").exists() and "planted" not in sys.modules


def test_a_logger_given_by_its_class_is_built_and_other_classes_are_refused_before_the_run_is_touched(workdir,
                                                                                                       capsys):
    """`--trainer.logger CSVLogger --trainer.logger.save_dir logs` (which --help lists) reached Lightning as a dict:
    the fit failed at its end with a deep traceback ('dict' object has no attribute 'finalize'), after removing the
    finished run's model.pt."""
    assert main(["fit", "--config", "tiny.yaml", "--run_dir", "run"]) == 0
    assert main(["fit", "--config", "tiny.yaml", "--run_dir", "run", "--trainer.max_epochs", "2", "--trainer.logger",
                 "CSVLogger", "--trainer.logger.save_dir", "logs"]) == 0
    assert list((workdir / "logs").rglob("metrics.csv")) and (workdir / "run" / "model.pt").is_file()
    plugin = "{class_path: lightning.pytorch.plugins.environments.LightningEnvironment}"
    assert main(["fit", "--config", "tiny.yaml", "--run_dir", "run2", "--trainer.plugins", plugin]) == 2
    assert "trainer.plugins names the class" in capsys.readouterr().err and not (workdir / "run2").exists()
    from forecast.training import _built_trainer_option

    with pytest.raises(ConfigError, match="not a class this package builds"):
        _built_trainer_option("logger", {"class_path": "subprocess.Popen", "init_args": {"args": "true"}})


def test_a_number_option_given_in_base_60_is_refused(workdir, capsys):
    """jsonargparse read `1:30` for a number with YAML 1.1's rules: 90 minutes, a seq_len of 750 from `12:30`."""
    for override, where, number in ((["--trainer.checkpoint_every_minutes", "1:30"],
                                     "--trainer.checkpoint_every_minutes", 90),
                                    (["--data.seq_len=12:30"], "--data.seq_len", 750)):
        assert main(["fit", "--config", "tiny.yaml", *override, "--print_config"]) == 2
        assert (f"{where} is '{override[-1].split('=')[-1]}', which YAML 1.1 would read as a number in base 60 "
                f"({number}); the option takes a number. Fix: write the number itself." in capsys.readouterr().err)
    (workdir / "minutes.yaml").write_text("trainer:\n  checkpoint_every_minutes: 1:30\n")
    assert main(["fit", "--config", "tiny.yaml", "--config", "minutes.yaml", "--print_config"]) == 2
    assert "minutes.yaml: trainer.checkpoint_every_minutes is '1:30'" in capsys.readouterr().err
    assert load_config(["tiny.yaml"], ["--data.target", "12:30"]).data["target"] == "12:30"  # text stays text


def test_a_section_given_as_one_word_is_named_with_the_fix(workdir, capsys):
    """`data: toy.csv` (or --data toy.csv) was read by jsonargparse as a config file: "Unable to load config"."""
    (workdir / "word.yaml").write_text("model: {name: naive}\ndata: toy.csv\n")
    assert main(["fit", "--config", "word.yaml"]) == 2
    assert ("word.yaml: section 'data' is 'toy.csv', not a mapping of options. Fix: write data: {dataset: toy.csv}"
            in capsys.readouterr().err)
    assert main(["fit", "--config", "tiny.yaml", "--model=naive"]) == 2
    assert "section 'model' is 'naive', not a mapping of options. Fix: write --model.name naive" in (
        capsys.readouterr().err)
    # a section written inline is a mapping: it was refused with the fix "write --model.name {d_model: 24}"
    assert load_config(["tiny.yaml"], ["--model", "{d_model: 24}"]).model_options["d_model"] == 24


def test_a_section_from_its_own_yaml_file_is_read_as_written(workdir):
    """`--data data.yaml` (the help's --data CONFIG) was refused: "unknown data option(s) ['__path__']"."""
    (workdir / "data.yaml").write_text(f"dataset: toy.csv\nseq_len: {SEQ_LEN}\nlabel_len: {LABEL_LEN}\n"
                                       f"pred_len: {PRED_LEN}\n")
    config = load_config([], ["--model.name", "naive", "--data", "data.yaml"])
    assert config.dataset == "toy.csv" and config.data["seq_len"] == SEQ_LEN and "__path__" not in config.data


@pytest.mark.parametrize(("tokens", "meant"), [(["sweep", "--dryrun"], "--dry_run"),
                                             (["report", "--ouput", "x.md"], "--output"),
                                             (["demo", "--dat", "toy.csv"], "--data")])  # an abbreviation ran
def test_sweep_report_and_demo_offer_the_flag_a_misspelt_one_meant(workdir, capsys, tokens, meant):
    assert main(tokens) == 2
    assert f"unexpected arguments ['{tokens[1]}'" in (err := capsys.readouterr().err)
    assert f"Did you mean '{meant}'?" in err


def test_a_fit_of_no_epoch_says_the_weights_are_the_initial_ones(workdir, capsys):
    """max_epochs=0 printed "fitted ...; the best epoch's weights are saved" for weights never trained."""
    assert main(["fit", "--config", "tiny.yaml", "--run_dir", "untrained", "--trainer.max_epochs", "0"]) == 0
    out = capsys.readouterr().out
    assert "trained no epoch (max_epochs=0): the initial weights are saved in untrained" in out
    assert "best epoch" not in out


def test_row_ends_from_yaml_or_flags_stay_row_ends(workdir):
    """[200, 240, 300] was read as floats and refused as fractions that do not sum to 1."""
    for tokens in (["--data.split", "[200, 240, 300]"], ["--data.split=[200,240,300]"]):
        config = load_config("tiny.yaml", tokens)
        assert config.split == [200, 240, 300] and all(type(end) is int for end in config.split)
    assert load_config("tiny.yaml", ["--data.split", "[0.6, 0.2, 0.2]"]).split == [0.6, 0.2, 0.2]
    assert main(["fit", "--config", "tiny.yaml", "--run_dir", "rows", "--data.split", "[200, 240, 300]"]) == 0
    assert Forecaster.load(workdir / "rows").evaluate("toy.csv", split=[200, 240, 300]).attrs["n_windows"] == (
        ROWS - 240 - PRED_LEN + 1)


def test_a_date_split_from_yaml_trains_and_tests_on_its_borders(workdir, capsys):
    """Dates in a YAML list split the data, and the saved config keeps them as text."""
    assert main(["fit", "--config", "tiny.yaml", "--run_dir", "run", "--data.split", "[2022-03-10, 2022-03-12]"]) == 0
    config = load_config("tiny.yaml", ["--data.split", "[2022-03-10, 2022-03-12]"])
    assert Forecaster.load(workdir / "run").evaluate("toy.csv", split=config.split).attrs["n_windows"] == (
        ROWS - 11 * 24 - PRED_LEN + 1)  # the test block starts on March 12, the 12th day
    assert "2022-03-10" in (workdir / "run" / "config.json").read_text()
    capsys.readouterr()
    assert main(["splits", "toy.csv", "--seq-len", "32", "--label-len", "16", "--pred-len", "8",
                 "--split", "2022-03-10", "2022-03-12"]) == 0
    out = capsys.readouterr().out
    assert "split dates" in out and "2022-03-12 00:00:00" in out


def test_splits_names_the_protocol_a_file_is_too_short_for(workdir, capsys):
    """The message called the protocol asked for 'rows' (the kind of split it resolves to)."""
    assert main(["splits", "toy.csv", "--split", "ett_hour"]) == 2
    err = capsys.readouterr().err
    assert (f"toy.csv: split 'ett_hour' ends its test block at row 14400 but the series has {ROWS} rows. Fix: use "
            "split='ratio' (70/10/20)") in err and "'rows'" not in err


def test_splits_reads_the_data_with_the_options_fit_takes(workdir, capsys):
    """`forecast splits` takes fit's data options (its definitions, without the data. prefix)."""
    frame = write_series(workdir / "gappy.csv")
    frame.loc[5, "a"] = np.nan
    frame.to_csv(workdir / "gappy.csv", index=False)
    assert main(["splits", "gappy.csv"]) == 2
    assert "(On the command line: --fill_nan.)" in capsys.readouterr().err
    assert main(["splits", "gappy.csv", "--fill_nan", "ffill", "--columns", "[OT]",
                 "--split", "0.6", "0.2", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "300 rows x 1 variables" in out and "split fractions" in out
    assert main(["splits", "gappy.csv", "--fill_nan", "ffill", "--fil_nan", "zero"]) == 2
    assert "Did you mean --fill_nan?" in capsys.readouterr().err
    assert main(["splits", "gappy.csv", "--data.fill_nan", "ETTh1"]) == 2  # was read as the data: ETTh1's splits
    assert "without the data. prefix. Fix: --fill_nan" in capsys.readouterr().err
    long = pd.concat([frame.assign(unique_id=name).iloc[:150] for name in ("north", "south")], ignore_index=True)
    long.drop(columns="a").to_csv(workdir / "panel.csv", index=False)
    assert main(["splits", "panel.csv", "--id_column", "unique_id", "--target", "OT",
                 "--seq_len", "32", "--label_len", "16", "--pred_len", "8"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "dataset panel (panel.csv): a panel of 2 series, 300 rows, freq h", first
    with pytest.raises(SystemExit) as stop:
        main(["splits", "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    for option in ("--seq_len", "--date_column", "--id_column", "--fill_nan", "--allow_irregular",
                   "--allow_duplicates", "--freq", "--columns", "--past_covariates", "--split"):
        assert option in out, option
    assert "--batch_size" not in out  # moves no split border


def test_help_of_the_commands_that_train_nothing_never_imports_lightning():
    """`forecast --help`, and that of splits, sweep, report and demo, answer in about a second: Lightning's import
    (several seconds) waits for a command that needs it."""
    code = ("import sys; from forecast.cli import main\n"
            "for command in ([], ['splits'], ['sweep'], ['report'], ['demo']):\n"
            "    try:\n"
            "        main([*command, '--help'])\n"
            "    except SystemExit as stop:\n"
            "        assert stop.code == 0, (command, stop.code)\n"
            "    assert 'lightning' not in sys.modules, command")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_fit_and_sweep_take_progress_alike_and_default_to_interactive_use(workdir, monkeypatch):
    """`--progress true|false` in both; without it, the Python API's rule: on in a terminal, off under CI."""
    import forecast.sweep

    given = []
    monkeypatch.setattr(forecast.sweep, "run_sweep",
                        lambda spec, progress, **_: given.append(progress) or forecast.sweep.SweepSummary())
    for flags in ([], ["--progress", "true"], ["--progress=false"]):
        assert main(["sweep", "--config", "tiny.yaml", *flags]) == 0
    assert given == [None, True, False]
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert load_config("tiny.yaml").forecaster().progress
    assert load_config("tiny.yaml").experiment().forecaster().progress  # the sweep's route with progress=None
    assert not load_config("tiny.yaml", ["--progress", "false"]).forecaster().progress
    monkeypatch.setenv("CI", "true")
    assert not load_config("tiny.yaml").forecaster().progress
    assert not load_config("tiny.yaml").experiment().forecaster().progress


def test_bad_options_fail_with_the_fix_and_no_traceback(workdir, capsys):
    assert main(["fit", "--config", "tiny.yaml", "--model.d_modle", "8"]) == 2
    err = capsys.readouterr().err
    assert "--model.d_modle" in err and "Did you mean --model.d_model?" in err and "'d_model'" in err
    assert "Traceback" not in err
    assert main(["fit", "--trainer.max_epochs", "1"]) == 2
    assert "no config given" in capsys.readouterr().err
    # flags naming the run, one of them misspelt or another code's (Informer2020's): said "no config given"
    assert main(["fit", "--model.name", "dlinear", "--data.path", "toy.csv", "--trainer.train_epochs", "1"]) == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: --data.path toy.csv --trainer.train_epochs 1. Did you mean --data.dataset?" in err
    assert "Did you mean --trainer.max_epochs?" in err and "no config given" not in err
    assert main(["fit", "--model.name", "dlinear", "--data.seq_len", "32"]) == 2
    assert "data.dataset is not given. Fix: name a registered dataset" in capsys.readouterr().err
    # a list option given one bare value: jsonargparse's report of Union subtypes named no fix
    assert main(["fit", "--config", "tiny.yaml", "--quantiles", "0.9"]) == 2
    assert "Fix: give a list, as --quantiles '[0.9]'." in capsys.readouterr().err
    # another model named over a config's: its options were offered a misspelling (--trainer.compile_model)
    assert main(["fit", "--config", "tiny.yaml", "--model.name", "dlinear"]) == 2
    err = capsys.readouterr().err
    assert "'d_model' is an option of informer, logsparse, transformer, not of this model: remove it" in err
    assert "Did you mean" not in err


def test_a_run_named_by_flags_alone_fits_and_predicts(workdir):
    flags = ["--model.name", "dlinear", "--data.dataset", "toy.csv", "--data.seq_len", "32", "--data.label_len", "16",
             "--data.pred_len", "8", "--trainer.max_epochs", "1", "--run_dir", "flags"]
    assert main(["fit", *flags]) == 0
    assert main(["predict", *flags, "--output", "future.csv"]) == 0
    assert len(pd.read_csv(workdir / "future.csv")) == PRED_LEN


def test_a_data_error_names_the_fix_as_the_commands_flag(workdir, capsys):
    """The library's fix names Python parameters (`fill_nan=`, `columns=[...]`); the console says the flag."""
    frame = write_series(workdir / "toy.csv")
    frame.assign(a=frame.a.astype(str).where(frame.index != 9, "x")).to_csv(workdir / "toy.csv", index=False)
    assert main(["fit", "--config", "tiny.yaml"]) == 2
    err = capsys.readouterr().err
    assert "column 'a' is not numeric" in err and "columns=[...]" in err
    assert err.rstrip().endswith("(On the command line: --data.columns, --data.features.)")
    assert with_command_line_flags("Fix: pass fill_nan='ffill'.", "sweep").endswith("(On the command line: "
                                                                                   "--set data.fill_nan.)")
    assert with_command_line_flags("Fix: pass resume=False.", "test") == "Fix: pass resume=False."  # not data
    assert with_command_line_flags("Fix: pass resume=False.", "fit").endswith("(On the command line: --resume false.)")
    # a model option by its section's flag, and the demo's own flag names (the fixes named neither)
    season = "got seq_len=36, season_length=52; lengthen seq_len or set season_length"
    assert with_command_line_flags(season, "fit").endswith("(On the command line: --data.seq_len, "
                                                           "--model.season_length.)")
    assert with_command_line_flags("Fix: limit_train_batches= a positive number.", "demo").endswith(
        "(On the command line: --train_batches.)")
    fix = "Fix: pass future_covariates=<a long table>."  # a fit's column list, but predict's own CSV flag
    assert with_command_line_flags(fix, "fit").endswith("(On the command line: --data.future_covariates.)")
    assert with_command_line_flags(fix, "predict").endswith("(On the command line: --future_covariates.)")
    # a fitted run reads data as its fit did: --data.fill_nan on predict named another, unfitted run
    assert with_command_line_flags("Fix: pass fill_nan='ffill'.", "predict").endswith(
        "(predict reads data as the run's fit did: --data.fill_nan is an option of a new `forecast fit`; or correct "
        "the data.)")
    # what a message reports before its fix is no option to pass: a sweep's filters read `--set data.features`
    reported = "no config matches features=['M']. Fix: select from those."
    assert with_command_line_flags(reported, "sweep") == reported


def test_a_keyword_of_a_call_the_fix_shows_is_not_offered_as_a_flag(workdir, capsys):
    """With the date column renamed, predict's error ended "--data.columns is an option of a new `forecast fit`":
    the hint read `columns=` inside the fix's `df.rename(columns={...})`, a pandas call, as the data option."""
    assert main(["fit", "--model.name", "naive", "--data.dataset", "toy.csv", "--data.seq_len", "32",
                 "--data.label_len", "16", "--data.pred_len", "8", "--run_dir", "run"]) == 0
    pd.read_csv(workdir / "toy.csv").rename(columns={"date": "when"}).to_csv(workdir / "renamed.csv", index=False)
    capsys.readouterr()
    assert main(["predict", "--run_dir", "run", "--input", "renamed.csv"]) == 2
    err = capsys.readouterr().err
    assert "df.rename(columns={'<its name>': 'date'})" in err and "--data.columns" not in err, err
    pivot = "Fix: df.pivot(index='date', columns='id', values=<the target>) (fill_nan=...)."
    assert with_command_line_flags(pivot, "fit").endswith("(On the command line: --data.fill_nan.)")


def test_a_keyword_of_the_packages_own_call_in_a_fix_is_still_offered_as_a_flag(workdir, capsys):
    """Dropping every call's arguments from a fix also dropped those of `fit(..., id_column=...)`: a long table's
    hint lost its `--data.id_column, --data.target`, and `predict(..., future_covariates=...)` its flag."""
    dates = pd.date_range("2021-01-01", periods=100, freq="h")
    pd.concat([pd.DataFrame({"date": dates, "store": store, "OT": np.arange(100.0) + shift})
               for shift, store in enumerate("abc")]).to_csv(workdir / "long.csv", index=False)
    assert main(["fit", "--model.name", "naive", "--data.dataset", "long.csv", "--data.seq_len", "8",
                 "--data.label_len", "4", "--data.pred_len", "2", "--run_dir", "long"]) == 2
    err = capsys.readouterr().err
    assert "fit(..., id_column='store'" in err and err.rstrip().endswith(
        "(On the command line: --data.id_column, --data.target.)"), err
    fix = "Fix: give them in predict(..., future_covariates=...), e.g. future.groupby('id')['promo'].ffill()."
    assert with_command_line_flags(fix, "predict").endswith("(On the command line: --future_covariates.)")


def test_fit_into_a_file_is_refused_and_resume_false_replaces_another_run(workdir, capsys):
    (workdir / "taken").write_text("notes\n")
    assert main(["fit", "--config", "tiny.yaml", "--run_dir", "taken"]) == 2
    assert "run_dir taken is a file. Fix: name a folder" in capsys.readouterr().err
    assert (workdir / "taken").read_text() == "notes\n"
    fit = ["fit", "--config", "tiny.yaml", "--run_dir", "run", "--trainer.limit_train_batches", "2"]
    assert main([*fit, "--trainer.max_epochs", "2"]) == 0
    (workdir / "run" / "model.pt").unlink()  # a run stopped before it finished: its checkpoint is resumed
    assert main([*fit, "--model.d_model", "8"]) == 2
    assert "(On the command line: --resume false.)" in capsys.readouterr().err
    assert main([*fit, "--model.d_model", "8", "--resume", "false"]) == 0
    assert Forecaster.load(workdir / "run").model_options["d_model"] == 8


def test_ctrl_c_during_fit_resume_false_does_not_say_the_same_command_resumes(workdir, capsys, monkeypatch):
    """Repeated, `fit --resume false` replaces the checkpoints the stopped fit left: it was told it would resume."""
    def ctrl_c(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Forecaster, "fit", ctrl_c)
    assert main(["fit", "--config", "tiny.yaml", "--run_dir", "run"]) == 130
    assert "interrupted; the same command resumes from the last checkpoint" in capsys.readouterr().err
    assert main(["fit", "--config", "tiny.yaml", "--run_dir", "run", "--resume", "false"]) == 130
    error = capsys.readouterr().err
    assert "the same command resumes" not in error
    assert "the same command without --resume false resumes from the last checkpoint" in error


def test_predict_without_a_fitted_run_says_how_to_fix_it(workdir, capsys):
    assert main(["predict", "--config", "tiny.yaml"]) == 2
    assert "forecast fit" in capsys.readouterr().err


# ---------------------------------------------------------------- config layer


def test_later_config_files_and_overrides_win(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text(yaml.safe_dump(TINY))
    patch = tmp_path / "patch.yaml"
    patch.write_text("model:\n  factor: 3\ntrainer:\n  max_epochs: 5\n")
    config = load_config([base, patch], ["--trainer.max_epochs", "7", "--model.name", "transformer",
                                         "--model.factor", "4"])
    assert config.model == "transformer"
    assert config.model_options["factor"] == 4 and config.model_options["d_model"] == 16
    assert config.trainer["max_epochs"] == 7 and config.trainer["learning_rate"] == 1e-3


def test_round_trip_through_yaml_keeps_the_config():
    config = RunConfig.from_mapping(TINY)
    again = RunConfig.from_mapping(yaml.safe_load(config.to_yaml()))
    assert again.to_mapping() == config.to_mapping()
    assert again.resolved_run_dir() == config.resolved_run_dir()
    # the folder `forecast sweep` uses; a changed model option or training setting trains elsewhere
    assert config.resolved_run_dir() == Path("runs") / config.experiment().run_name()
    for change in [("model.d_model", 8), ("trainer.max_epochs", 9), ("seed", 1)]:
        assert config.resolved_run_dir() != RunConfig.from_mapping(changed(TINY, *change)).resolved_run_dir()


def test_config_files_read_yaml_1_2_like_the_command_line(workdir, capsys):
    """YAML 1.1 (yaml.safe_load) reads `target: no` as False and `1e-4` as a string."""
    (workdir / "words.yaml").write_text("data:\n  target: no\n  columns: [yes, off]\ntrainer:\n  learning_rate: 1e-4\n"
                                        "  compile_model: false\n")
    config = load_config(["tiny.yaml", "words.yaml"])
    assert config.data["target"] == "no" and config.data["columns"] == ["yes", "off"]
    assert config.trainer["learning_rate"] == 1e-4 and config.trainer["compile_model"] is False
    assert main(["fit", "--config", "tiny.yaml", "--config", "words.yaml", "--print_config"]) == 0
    assert "target: 'no'" in capsys.readouterr().out
    assert read_yaml(workdir / "words.yaml")["data"]["target"] == "no"  # sweep files are read alike


def test_config_files_read_integers_as_yaml_1_2_and_the_command_line_do(workdir):
    """YAML 1.1 read `010` as octal 8 (the command line's --seed 010 is 10) and `12:00` as 720 (base 60)."""
    (workdir / "numbers.yaml").write_text("data:\n  target: 12:00\n  columns: [12:00, 010]\nseed: 010\n")
    config = load_config(["tiny.yaml", "numbers.yaml"])
    assert config.seed == load_config("tiny.yaml", ["--seed", "010"]).seed == 10
    assert config.data["columns"] == load_config("tiny.yaml", ["--data.columns", "[12:00, 010]"]).data["columns"]
    assert config.data["columns"] == ["12:00", 10] and config.data["target"] == "12:00"
    assert read_yaml(workdir / "numbers.yaml")["data"]["columns"] == ["12:00", 10]  # sweep files are read alike
    assert read_yaml(workdir / "numbers.yaml")["seed"] == 10


def test_an_empty_config_file_sets_nothing_and_flags_are_not_blamed_on_the_file(workdir):
    (workdir / "empty.yaml").write_text("")
    (workdir / "comments.yaml").write_text("# nothing set yet\n")
    config = load_config(["tiny.yaml", "empty.yaml"], ["--config", "comments.yaml"])
    assert config.to_mapping() == load_config("tiny.yaml").to_mapping()
    with pytest.raises(ConfigError, match=r"^empty.yaml: model.name=None"):  # jsonargparse: "Unexpected config"
        load_config("empty.yaml")
    with pytest.raises(ConfigError, match=r"^tiny.yaml and the command line: .*--model.factr"):
        load_config("tiny.yaml", ["--model.factr", "2"])


def test_a_config_piped_in_is_read_once_and_a_folder_is_named_as_one(workdir, capsys):
    """`--config <(...)` (a pipe, empty when read again) was refused as 'does not exist', as was a folder."""
    piped = subprocess.run(
        ["bash", "-c", f"{sys.executable} -m forecast fit --config tiny.yaml "
                       "--config <(printf 'trainer:\\n  max_epochs: 7\\n') --print_config"],
        capture_output=True, text=True, timeout=120, cwd=workdir)
    assert piped.returncode == 0, piped.stderr
    assert yaml.safe_load(piped.stdout)["trainer"]["max_epochs"] == 7
    assert main(["fit", "--config", str(workdir), "--print_config"]) == 2
    assert f"config file {workdir} is a folder. Fix: name a YAML file" in capsys.readouterr().err


def test_an_option_is_suggested_only_when_its_name_is_close(capsys):
    """naive has one model option: --model.d_modle was asked 'Did you mean --model.name?' (the shared section)."""
    assert main(["fit", "--data.dataset", "toy.csv", "--model.name", "naive", "--model.d_modle", "3"]) == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: --model.d_modle" in err and "Valid model options: ['name']" in err
    assert "Did you mean" not in err
    assert main(["fit", "--data.dataset", "toy.csv", "--model.name", "naive", "--model.seq_len", "3"]) == 2
    assert "Did you mean --data.seq_len?" in capsys.readouterr().err  # the right key in another section


def test_a_misspelt_key_in_a_config_file_is_not_offered_a_section(workdir, capsys):
    """dlinear's `d_modle:` in a YAML file was asked 'Did you mean --model?', the section's own flag; and the valid
    top-level options listed jsonargparse's list-append flag 'quantiles+'."""
    (workdir / "typo.yaml").write_text("model:\n  name: dlinear\n  d_modle: 16\ndata:\n  dataset: toy.csv\n")
    assert main(["fit", "--config", "typo.yaml", "--print_config"]) == 2
    err = capsys.readouterr().err
    assert "does not accept option 'd_modle'" in err and "Did you mean" not in err
    assert main(["fit", "--config", "tiny.yaml", "--sede", "3"]) == 2
    err = capsys.readouterr().err
    assert "Did you mean --seed?" in err and "'quantiles'," in err and "quantiles+" not in err


def test_overrides_are_parsed_with_each_options_type(workdir):
    config = load_config("tiny.yaml", ["--model.d_model", "64", "--model.stack=[3, 2, 1]", "seed=2", "--data.target",
                                       "no", "--trainer.max-epochs", "3", "--data.split", "null",
                                       "--trainer.limit_val_batches", "2"])
    assert config.model_options["d_model"] == 64 and config.model_options["stack"] == [3, 2, 1]
    assert config.seed == 2 and config.trainer["max_epochs"] == 3 and config.data["split"] is None
    assert config.data["target"] == "no"  # a string option stays a string (YAML 1.1 would read False)
    assert config.trainer["limit_val_batches"] == 2 and isinstance(config.trainer["limit_val_batches"], int)
    # typed as they are parsed, --print_config included: nothing reaches a model
    for tokens, message in [(["--model.d_model", "sixteen"], "model.d_model"),
                            (["--trainer.max_epochs", "1.5"], "trainer.max_epochs"),
                            (["--model.factr", "2"], "Did you mean --model.factor"),
                            (["--trainer.max_epoch", "2"], "Did you mean --trainer.max_epochs"),
                            (["--model.d_model"], "model.d_model"),
                            (["--modle.d_model", "3"], "'modle' is not a section")]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_config("tiny.yaml", tokens)
    assert main(["fit", "--config", "tiny.yaml", "--print_config", "--model.d_model", "sixteen"]) == 2


def test_fit_help_lists_every_option_with_its_type(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["fit", "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    for option in ("--model.d_model", "--model.revin_center {mean,last,learned,persistence}", "--data.dataset",
                   "--data.split",
                   "--trainer.max_epochs", "--trainer.learning_rate", "--trainer.limit_val_batches", "--seed"):
        assert option in out, option
    entries = help_defaults(out)
    assert entries["--model.d_model"].endswith("(type: int, default: 64)")  # Informer's under the improved recipe
    with pytest.raises(SystemExit):
        main(["fit", "--model.name", "dlinear", "--help"])
    out = capsys.readouterr().out
    assert "--model.kernel_size" in out and "--model.d_model D_MODEL" not in out  # the named model's options


def test_help_describes_each_option_in_plain_text(capsys):
    """Each option's description comes from its dataclass's docstring (the trainer's Lightning arguments from
    Lightning's), without docstring markup and without jsonargparse's help of Hashable's subclasses."""
    with pytest.raises(SystemExit):
        main(["fit", "--model.name", "logsparse", "--help"])
    out = capsys.readouterr().out
    entries = help_defaults(out)
    for option, words in [("--model.qk_kernel_size", "the causal convolution's kernel"),
                          ("--model.head", "gaussian"), ("--model.revin_center", "the location revin subtracts"),
                          ("--data.seq_len", "the lookback"),
                          ("--data.split", "three fractions"), ("--data.fill_nan", "interpolate"),
                          ("--trainer.patience", "without a lower validation loss"),
                          ("--trainer.gradient_clip_val", "gradient clipping"), ("--seed", "seeds")]:
        assert words in entries[option].lower() or words in entries[option], (option, entries[option])
    assert "``" not in out and ":class:" not in out and ":func:" not in out
    assert "subclass of Hashable" not in out and "--data.target.help" not in out
    with pytest.raises(SystemExit):
        main(["splits", "--help"])
    entries = help_defaults(capsys.readouterr().out)
    assert "the horizon" in entries["--pred_len"] and "--target.help" not in entries


def help_defaults(out: str) -> dict[str, str]:
    """Each option's entry in --help, joined onto one line, by its flag."""
    entries: dict[str, str] = {}
    current = None
    for line in out.splitlines():
        match = re.match(r"  (--[\w.]+)", line)
        if match:
            current = match.group(1)
            entries[current] = line.strip()
        elif current is not None and line.startswith("   "):
            entries[current] += " " + line.strip()
        else:
            current = None
    return {flag: " ".join(text.split()) for flag, text in entries.items()}


def shown_default(entries: dict[str, str], flag: str) -> str:
    return re.search(r"default: ([^()]*)\)$", entries[flag]).group(1)


def help_of(capsys, *tokens: str) -> dict[str, str]:
    with pytest.raises(SystemExit) as stop:
        main([*tokens, "--help"])
    assert stop.value.code == 0
    return help_defaults(capsys.readouterr().out)


def test_help_shows_the_defaults_of_the_recipe_in_effect(workdir, capsys):
    """--help lists the default a run gets: the recipe's (improved unless the config or --recipe names
    another) over the dataclasses' own, taken from forecast.recipes."""
    improved = help_of(capsys, "fit")
    expected = {"--model.d_model": "64", "--trainer.learning_rate": "0.001", "--trainer.max_epochs": "10",
                "--model.revin": "true", "--model.factor": "5", "--trainer.patience": "3"}
    assert {flag: shown_default(improved, flag).lower() for flag in expected} == expected
    assert "recipe 'improved' sets it (the option's own default: 512)" in improved["--model.d_model"]
    assert "recipe" not in improved["--model.factor"]  # the recipe leaves it: the dataclass's default
    recipe = get_recipe("improved")
    for name, value in {**{f"model.{k}": v for k, v in recipe.options_for("informer").items()},
                        **{f"trainer.{k}": v for k, v in recipe.training.items()}}.items():
        assert shown_default(improved, f"--{name}") == str(value), name
    assert shown_default(help_of(capsys, "fit", "--model.name", "logsparse"), "--model.d_model") == "32"

    paper = {"--model.d_model": "512", "--trainer.learning_rate": "0.0001", "--trainer.max_epochs": "6",
             "--model.revin": "false", "--model.factor": "5", "--trainer.patience": "3"}
    (workdir / "paper.yaml").write_text(yaml.safe_dump({**TINY, "recipe": "paper"}))
    for tokens in (["fit", "--recipe", "paper"], ["validate", "--recipe=paper"], ["test", "--config", "paper.yaml"],
                   ["predict", "--config", "tiny.yaml", "--recipe", "paper"]):
        entries = help_of(capsys, *tokens)
        assert {flag: shown_default(entries, flag).lower() for flag in paper} == paper, tokens
        assert not any("recipe 'paper' sets it" in text for text in entries.values())
    # a later --recipe wins over the file's, as it does for the run
    assert shown_default(help_of(capsys, "fit", "--config", "paper.yaml", "--recipe", "improved"),
                         "--model.d_model") == "64"


def test_the_recipe_defaults_shown_are_no_options_given(workdir):
    """Only the options given are kept (the recipe fills in the rest), and they win over the recipe."""
    config = load_config("tiny.yaml")
    assert config.model_options == {k: v for k, v in TINY["model"].items() if k != "name"}
    assert config.trainer == TINY["trainer"]
    assert config.experiment().model_options["d_model"] == 16  # given, over the recipe's 64
    assert config.experiment().model_options["revin"] is True  # the recipe's
    bare = load_config([], ["--model.name", "informer", "--data.dataset", "toy.csv"])
    assert bare.model_options == {} and bare.trainer == {}
    assert bare.experiment().training.max_epochs == 10 and bare.experiment().model_options["d_model"] == 64
    paper = load_config([], ["--model.name", "informer", "--data.dataset", "toy.csv", "--recipe", "paper"])
    assert paper.model_options == {} and paper.experiment().training.max_epochs == 6


@pytest.mark.parametrize("recipe", [[], ["--recipe", "paper"]])
def test_print_config_fed_back_is_the_same_run(workdir, capsys, recipe):
    """--print_config prints the options given, then what the recipe and the defaults fill in as comments:
    fed back, the same config, run folder and results key (no default turns into an option given)."""
    tokens = ["--config", "tiny.yaml", "--trainer.max_epochs", "2", *recipe]
    assert main(["fit", *tokens, "--print_config"]) == 0
    printed = capsys.readouterr().out
    (workdir / "printed.yaml").write_text(printed)
    original, again = load_config([], tokens), load_config("printed.yaml")
    assert again.to_mapping() == original.to_mapping()
    assert again.resolved_run_dir() == original.resolved_run_dir()
    assert again.experiment().key() == original.experiment().key()
    assert "revin" not in yaml.safe_load(printed)["model"]  # shown as a comment, not given
    if recipe:
        assert "#   revin: false\n" in printed and "#   calibrate_scale: false\n" in printed
    else:
        assert "#   revin: true  # recipe improved\n" in printed
        assert "#   calibrate_scale: true  # recipe improved\n" in printed
    assert "#   max_epochs" not in printed and "  d_model: 16\n" in printed  # given: printed as options
    assert main(["fit", "--config", "printed.yaml", "--print-config"]) == 0
    assert capsys.readouterr().out == printed
    assert main(["validate", *tokens, "--print_config"]) == 0  # every config command prints the same
    assert capsys.readouterr().out == printed
    assert not (workdir / "runs").exists()


@pytest.mark.parametrize(("change", "message"), [
    ({"modle": {}}, "unknown top-level option"),
    ({"model": {"name": "nope"}}, "Fix: name a registered model"),
    ({"data": {**TINY["data"], "seq_lenn": 3}}, "unknown data option"),
    ({"trainer": {"batch_size": 8}}, "loader options"),
    ({"trainer": {"max_epoch": 8}}, r"unknown trainer option\(s\) \['max_epoch'\]. Did you mean 'max_epochs'\?"),
    ({"data": {**TINY["data"], "data_path": "x.csv"}}, r"\['data_path'\]. Did you mean 'dataset'\?"),
    ({"model": {"name": "informr"}}, r"Did you mean 'informer'\?"),
    ({"seed": -1}, "seed=-1"),
    ({"data": {"features": "M"}}, "data.dataset is not given"),
])
def test_invalid_configs_name_the_problem(change, message):
    with pytest.raises(ConfigError, match=message):
        RunConfig.from_mapping({**TINY, **change}, "tiny.yaml")


def test_values_are_checked_by_the_typed_configs():
    with pytest.raises(ConfigError, match="tiny.yaml"):
        RunConfig.from_mapping(changed(TINY, "model.d_model", 15), "tiny.yaml").forecaster()
    with pytest.raises(ConfigError):
        RunConfig.from_mapping(changed(TINY, "data.label_len", 64)).forecaster()


def test_a_key_written_twice_in_yaml_is_refused_naming_both_lines(tmp_path):
    """`name: naive` then `name: dlinear` trained dlinear and said nothing."""
    path = tmp_path / "twice.yaml"
    path.write_text("model:\n  name: naive\n  name: dlinear\ndata: {dataset: toy.csv}\n")
    with pytest.raises(ConfigError, match=r"(?s)twice.yaml is not valid YAML.*key 'name' appears twice \(lines 2 and 3\), "
                                          r"and only the second would be read"):
        load_config(path)


def test_yaml_is_read_safely(tmp_path):
    marker = tmp_path / "executed"
    hostile = tmp_path / "hostile.yaml"
    hostile.write_text(f"model: !!python/object/apply:os.system ['touch {marker}']\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(hostile)
    assert not marker.exists()


def test_documented_example_config_is_valid():
    # the module docstring's example config parses as written
    from forecast import config as module

    example = module.__doc__.split("\n\n")[1]
    assert RunConfig.from_mapping(yaml.safe_load(example)).model == "informer"


def test_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for command in ("fit", "validate", "test", "predict", "sweep", "report", "splits", "demo"):
        assert command in out
    # the module docstring in terminal text: Sphinx roles and double backticks were printed as written
    assert ":meth:" not in out and ":func:" not in out and "``" not in out
    assert "`forecast.experiment.Experiment.run_name`" in out and "`WindowDataModule`" in out


@pytest.mark.parametrize("command", ["fit", "sweep", "report", "splits", "demo"])
def test_help_spells_every_flag_one_way(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    flags = set(re.findall(r"(?<![\w-])--[a-z][\w.-]*", capsys.readouterr().out))
    assert flags and not [flag for flag in flags if "-" in flag[2:]], flags  # --snake_case only


def test_a_dashed_flag_reads_as_its_snake_case_flag(tmp_path, capsys):
    outcomes = []
    for tokens in (["--configs-dir", str(tmp_path), "--dry-run"], ["--configs_dir", str(tmp_path), "--dry_run"]):
        status = main(["sweep", *tokens])
        captured = capsys.readouterr()
        outcomes.append((status, captured.out, captured.err))
    assert outcomes[0] == outcomes[1] and "unrecognized" not in outcomes[0][2]


def test_python_dash_m_forecast_is_the_console_script():
    done = subprocess.run([sys.executable, "-m", "forecast", "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "{fit,validate,test,predict,sweep,report,splits,demo}" in done.stdout


def test_documents_the_package_cites_are_in_the_repository():
    root = Path(__file__).resolve().parent.parent
    cited = set()
    for path in (root / "forecast").rglob("*.py"):
        cited.update(re.findall(r"\b(?:docs/[\w.-]+\.md|[A-Z]+\.md)\b", path.read_text()))
    assert cited >= {"docs/design.md", "docs/pitfalls.md"}
    cited.discard("FILE.md")  # a placeholder in usage lines
    missing = sorted(name for name in cited if not (root / name).exists() and not (root / "docs" / name).exists())
    assert not missing, f"docstrings cite documents the repository lacks: {missing}"


def test_demo_prints_the_splits_and_a_report_of_four_models(workdir, capsys):
    """`make run`'s command, on the small synthetic series so it takes seconds."""
    assert main(["demo", "--data", "toy.csv", "--train-batches", "2"]) == 0
    out = capsys.readouterr().out
    assert "split ratio" in out and "train" in out and "test" in out
    table = out.strip().splitlines()[-5:]
    assert table[0].split() == ["model", "mse", "mae", "mse_orig", "mae_orig", "test_windows", "seconds"]
    # 70/10/20 of 300 rows: the test rows [240, 300) plus a 96-row lookback -> 156 - 120 + 1 windows
    assert [line.split()[0] for line in table[1:]] == ["naive", "seasonal_naive", "dlinear", "informer"]
    assert {line.split()[5] for line in table[1:]} == {"37"}
    assert all(np.isfinite(float(value)) for line in table[1:] for value in line.split()[1:5])


def test_demo_val_batches_caps_validation_only(workdir, monkeypatch, capsys):
    """--val-batches (the offline ETTh1 demo test uses it) reaches every model's Trainer; the test report stays whole."""
    import forecast.api

    given: list[dict] = []

    class Recording(forecast.api.Forecaster):
        def __init__(self, *args, **options):
            given.append(options)
            super().__init__(*args, **options)

    monkeypatch.setattr(forecast.api, "Forecaster", Recording)
    assert main(["demo", "--data", "toy.csv", "--train-batches", "2", "--val-batches", "1"]) == 0
    assert len(given) == 4 and all(options["limit_val_batches"] == 1 for options in given)
    table = capsys.readouterr().out.strip().splitlines()[-4:]
    assert {line.split()[5] for line in table} == {"37"}  # every test window still scored
    given.clear()
    assert main(["demo", "--data", "toy.csv", "--train-batches", "2"]) == 0
    assert all("limit_val_batches" not in options for options in given)  # default: Lightning's, all batches
