"""The experiment runner and results files: complete rows, atomic appends, resumable runs."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from forecast.errors import ConfigError
from forecast.models import DataSpec
from forecast.recipes import get_recipe
from forecast.results import COLUMNS, KEY, OPTIONAL_NUMBERS, append_row, has_row, read_results
from forecast.training import TrainingConfig

ROOT = Path(__file__).resolve().parent.parent


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "experiments" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)  # dataclasses look their module up while the script runs
    spec.loader.exec_module(module)
    return module


def row(**overrides):
    base = {column: "" if column in OPTIONAL_NUMBERS else 0 for column in COLUMNS}
    base.update(dataset="toy", model="naive", features="M", recipe="paper", options="{}", training="{}", command="x",
                data="{}")
    base.update(overrides)
    return base


def test_append_row_keeps_earlier_rows_and_leaves_no_temp_files(tmp_path):
    path = tmp_path / "results" / "toy.csv"
    append_row(path, row(seed=0, mse=0.5))
    append_row(path, row(seed=1, mse=0.25))
    frame = read_results(path)
    assert list(frame.columns) == COLUMNS
    assert frame["mse"].tolist() == [0.5, 0.25]
    assert sorted(p.name for p in path.parent.iterdir()) == [".toy.csv.lock", "toy.csv"]  # and its lock
    key = {k: v for k, v in row(seed=1).items()}
    assert has_row(path, key) and not has_row(path, row(seed=2))


def test_a_run_differing_in_any_key_column_is_not_done(tmp_path):
    """A sweep skips a cell whose row it finds: a key that left a column out (the recipe) would take another
    recipe's run for this one."""
    path = tmp_path / "toy.csv"
    recorded = row(seed=0)
    append_row(path, recorded)
    assert has_row(path, recorded)
    other = {"dataset": "other", "model": "dlinear", "features": "S", "seq_len": 1, "label_len": 1, "pred_len": 1,
             "seed": 1, "recipe": "improved", "options": '{"d_model": 8}', "training": '{"max_epochs": 1}',
             "data": '{"target": "a"}'}
    assert set(other) == set(KEY)
    for column, value in other.items():
        assert not has_row(path, {**recorded, column: value}), column


def test_a_blank_data_cell_is_a_run_without_data_options(tmp_path):
    """Rows written while the column was new could leave it blank: they are runs without data options."""
    path = tmp_path / "toy.csv"
    append_row(path, row(seed=0))
    text = path.read_text().splitlines()
    data = COLUMNS.index("data")
    cells = text[1].split(",")
    assert cells[data] == "{}"
    text[1] = ",".join([*cells[:data], "", *cells[data + 1:]])
    path.write_text("\n".join(text) + "\n")
    assert has_row(path, row(seed=0))
    # The fill scripts find its run folder from the cells as written (blank), as the sweep named it ({}).
    from forecast.experiment import row_key, run_name

    as_written = {column: str(value) for column, value in row(seed=0).items()}
    assert run_name(row_key({**as_written, "data": ""})) == run_name(row_key(as_written))
    older = {column: value for column, value in as_written.items() if column != "data"}  # a file without the column
    assert run_name(row_key(older)) == run_name(row_key(as_written))


def test_rows_written_before_data_options_were_keyed_stay_done_and_apart_from_a_panels(tmp_path):
    path = tmp_path / "toy.csv"
    older = COLUMNS[: COLUMNS.index("data")]
    path.write_text(",".join(older) + "\n" + ",".join(str(row(seed=0)[c]) for c in older) + "\n")
    assert read_results(path)["data"].tolist() == ["{}"]
    assert has_row(path, row(seed=0))  # no data options: the same run as before the column
    panel = row(seed=0, data='{"future_covariates": ["promo"], "id_column": "store"}')
    assert not has_row(path, panel)
    append_row(path, panel)
    assert has_row(path, panel) and read_results(path)["data"].tolist() == ["{}", panel["data"]]


def test_append_row_carries_rows_of_the_older_format_over_to_every_column(tmp_path):
    path = tmp_path / "toy.csv"
    older = COLUMNS[: COLUMNS.index("rho_risk_0.5")]
    path.write_text(",".join(older) + "\n" + ",".join(str(row(seed=0, mse=0.5)[c]) for c in older) + "\n")
    append_row(path, row(seed=1, mse=0.25, **{"rho_risk_0.9": 0.125}))
    frame = read_results(path)
    assert list(frame.columns) == COLUMNS and frame["mse"].tolist() == [0.5, 0.25]
    np.testing.assert_array_equal(frame["rho_risk_0.9"], [np.nan, 0.125])
    (tmp_path / "alien.csv").write_text("dataset,surprise\ntoy,1\n")
    with pytest.raises(ConfigError, match=r"has columns \['surprise'\] that results files do not have"):
        append_row(tmp_path / "alien.csv", row(seed=2))


def test_an_append_after_a_last_row_without_its_newline_keeps_both_rows_and_the_files_mode(tmp_path):
    """An editor's last row without its newline had the next row joined onto it: a torn file every later sweep
    refused. And every append left the file owner-only (mkstemp's 0600), locking out a shared results folder."""
    path = tmp_path / "toy.csv"
    umask = os.umask(0o022)
    try:
        append_row(path, row(seed=0, mse=0.5))
        assert path.stat().st_mode & 0o777 == 0o644
        path.write_text(path.read_text().rstrip("\n"))
        path.chmod(0o664)
        append_row(path, row(seed=1, mse=0.25))
    finally:
        os.umask(umask)
    assert read_results(path)["mse"].tolist() == [0.5, 0.25] and path.stat().st_mode & 0o777 == 0o664


def test_merge_results_adds_only_runs_the_target_lacks_and_keeps_blank_cells_blank(tmp_path, capsys):
    here, elsewhere, gpu = tmp_path / "results", tmp_path / "other", tmp_path / "gpu"
    append_row(here / "toy.csv", row(seed=0, mse=0.5))
    append_row(elsewhere / "toy.csv", row(seed=0, mse=0.75))  # the same run: kept as it is here
    append_row(elsewhere / "toy.csv", row(seed=1, mse=0.25, train_seconds=""))
    append_row(gpu / "toy.csv", row(seed=2, mse=0.125, options='{"factor": 3}',
                                    **{"rho_risk_0.5": 0.5, "coverage_0.8": 0.8}))
    append_row(gpu / "other.csv", row(dataset="other", seed=0, mse=1.0))
    script = load_script("merge_results")
    assert script.main([str(elsewhere), str(gpu), "--into", str(here)]) == 0
    # Options name the row: two option sets can share a window.
    added = capsys.readouterr().out.splitlines()
    assert added == ["added toy naive M 0/0/0 seed 1 options {}", "added other naive M 0/0/0 seed 0 options {}",
                     'added toy naive M 0/0/0 seed 2 options {"factor": 3}']
    merged = read_results(here / "toy.csv")
    assert merged["seed"].tolist() == [0, 1, 2] and merged["mse"].tolist() == [0.5, 0.25, 0.125]
    assert merged["train_seconds"].tolist()[1] == "" and np.isnan(merged["rho_risk_0.5"].iloc[1])
    assert merged["coverage_0.8"].iloc[2] == 0.8 and read_results(here / "other.csv")["mse"].tolist() == [1.0]
    assert script.main([str(elsewhere), "--into", str(here)]) == 0 and len(read_results(here / "toy.csv")) == 3


def test_merge_results_script_refuses_a_csv_file_that_holds_no_results_in_one_line(tmp_path, capsys):
    """A data file in a merged folder ended merge_results.py in a raw ValueError traceback from
    forecast/results.py; it is now one line naming the file and the fix, before any row is merged."""
    source, here = tmp_path / "other", tmp_path / "results"
    append_row(source / "a.csv", row(seed=1))
    (source / "toy_data.csv").write_text("date,a,OT\n2022-01-01,1.0,2.0\n")
    script = load_script("merge_results")
    assert script.main([str(source), "--into", str(here)]) == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "Traceback" not in error
    assert re.search(r"toy_data.csv is not a results file: .*Fix: move it out of", error)
    assert not (here / "a.csv").exists()  # refused before anything touched the target


def test_merge_results_script_names_the_file_whose_rows_lack_val_loss(tmp_path, capsys):
    """Rows written before val_loss was recorded failed in _check_complete with a bare ValueError ('results row
    lacks ['val_loss']') naming neither the file nor the fix."""
    source = tmp_path / "old"
    source.mkdir()
    pd.DataFrame([row()])[[c for c in COLUMNS if c != "val_loss"]].to_csv(source / "toy.csv", index=False)
    script = load_script("merge_results")
    assert script.main([str(source), "--into", str(tmp_path / "results")]) == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and str(source / "toy.csv") in error
    assert "['val_loss']" in error and "Fix: " in error
    assert not (tmp_path / "results" / "toy.csv").exists()


def test_append_row_rejects_incomplete_rows(tmp_path):
    with pytest.raises(ValueError, match="lacks"):
        append_row(tmp_path / "r.csv", {"dataset": "toy"})
    assert not (tmp_path / "r.csv").exists()


def toy_csv(tmp_path: Path) -> Path:
    """300 hourly rows of two smooth variables, ``a`` and the target ``OT``."""
    t = np.arange(300)
    path = tmp_path / "toy.csv"
    pd.DataFrame({"date": pd.date_range("2022-01-01", periods=300, freq="h"),
                  "a": np.sin(t / 5.0), "OT": np.cos(t / 7.0) + 5}).to_csv(path, index=False)
    return path


def test_a_sweep_run_writes_a_complete_row_and_skips_finished_runs(tmp_path):
    from forecast.cli import main

    csv = toy_csv(tmp_path)
    data = {"dataset": str(csv), "features": "MS", "seq_len": 24, "label_len": 12, "pred_len": 6}
    informer, seasonal = tmp_path / "informer.yaml", tmp_path / "seasonal.yaml"
    informer.write_text(yaml.safe_dump({"model": {"name": "informer", "d_model": 16, "n_heads": 2, "d_ff": 16},
                                        "data": {**data, "batch_size": 16}, "trainer": {"max_epochs": 2}}))
    seasonal.write_text(yaml.safe_dump({"model": {"name": "seasonal_naive", "season_length": 12}, "data": data}))
    folders = ["--results_dir", str(tmp_path / "results"), "--runs_dir", str(tmp_path / "runs")]
    results = tmp_path / "results" / "toy.csv"
    assert main(["sweep", "--config", str(informer), "--seeds", "3", *folders]) == 0
    frame = read_results(results)
    assert len(frame) == 1
    first = frame.iloc[0]
    # 70/10/20 of 300 rows: test owns rows [240, 300) plus a 24-row lookback -> 84 - 30 + 1
    assert first.n_test_windows == 55
    improved = {**get_recipe("improved").options_for("informer"), "d_ff": 16, "d_model": 16, "n_heads": 2}
    assert first.epochs == 2 and first.seed == 3 and first.options == json.dumps(improved, sort_keys=True)
    assert first.recipe == "improved" and json.loads(first.training) == {
        **get_recipe("improved").training, "max_epochs": 2, "batch_size": 16}
    assert 0 < float(first.val_loss) < 10  # the best epoch's validation loss, what settings are chosen on
    assert 0.0 <= first.correction_kept <= 1.0  # the improved recipe fits it on the validation windows
    assert np.isfinite([first.mse, first.mae, first.mse_orig, first.mae_orig]).all()
    assert first.command.startswith(f"forecast sweep --config {informer} --seeds 3 --results_dir ")
    assert list((tmp_path / "runs").glob("*/checkpoints/last.ckpt"))
    # Its curves go to a CSV log whatever is installed (Lightning's default is TensorBoard's when it can be).
    (log,) = (tmp_path / "runs").glob("*/lightning_logs/version_0/metrics.csv")
    assert pd.read_csv(log)["val_loss"].notna().sum() == 2
    assert np.isfinite(first["rho_risk_0.5"]) and np.isnan(first["coverage_0.8"])  # a point: no interval
    assert main(["sweep", "--config", str(informer), "--seeds", "3", *folders]) == 0  # finished: skipped
    assert len(read_results(results)) == 1
    assert main(["sweep", "--config", str(seasonal), *folders]) == 0
    probabilistic = read_results(results).iloc[1]
    assert probabilistic.model == "seasonal_naive" and probabilistic.epochs == 0
    assert np.isnan(probabilistic.correction_kept)  # no network, no correction to weigh
    values = [float(probabilistic[c]) for c in ("rho_risk_0.5", "rho_risk_0.9", "rho_risk_0.5_orig", "coverage_0.8")]
    assert np.isfinite(values).all() and 0 <= values[-1] <= 1


@pytest.mark.parametrize(("commits", "recorded"), [(["0123abcd", "0123abcd"], "0123abcd"),
                                                    (["0123abcd", "4567ef01"], "0123abcd-dirty")])
def test_a_row_records_the_commit_its_run_started_at(tmp_path, monkeypatch, commits, recorded):
    """The commit was read as the row was written: a run during which the checkout moved to another commit
    recorded that one, clean, as the code it ran."""
    import forecast.experiment
    from forecast.experiment import Experiment, run_experiment

    read = iter(commits)
    monkeypatch.setattr(forecast.experiment, "git_commit", lambda **_: next(read))
    csv = toy_csv(tmp_path)
    experiment = Experiment(model="naive", dataset=str(csv), seq_len=24, label_len=12, pred_len=6)
    row = run_experiment(experiment, tmp_path / "results" / "toy.csv", tmp_path / "runs", command="x")
    assert row["commit"] == recorded and read_results(tmp_path / "results" / "toy.csv")["commit"].tolist() == [recorded]


def test_the_sample_paths_are_in_the_key_of_a_parameter_free_model_too():
    """seasonal_naive's rho-risks come from its sample paths: a run with 400 of them is not the one with 100."""
    from forecast.experiment import Experiment
    from forecast.training import TrainingConfig

    window = dict(dataset="ETTh1", seq_len=48, label_len=24, pred_len=24)
    default = Experiment(model="seasonal_naive", **window)
    more = Experiment(model="seasonal_naive", training=TrainingConfig(n_samples=400), **window)
    assert default.key()["training"] == "{}" and json.loads(more.key()["training"]) == {"n_samples": 400}
    assert default.run_name() != more.run_name()
    trained_alike = Experiment(model="seasonal_naive", training=TrainingConfig(max_epochs=3), **window)
    assert trained_alike.key() == default.key()  # it trains nothing: its training settings name nothing


def test_a_run_differing_only_after_training_refits_a_finished_one_and_scores_as_training_it_would(tmp_path):
    from forecast import Forecaster
    from forecast.cli import main
    from forecast.experiment import row_key, run_name

    csv = toy_csv(tmp_path)
    config = tmp_path / "logsparse.yaml"
    config.write_text(yaml.safe_dump({  # a Gaussian head: its scale is fitted after training, unless told not to
        "model": {"name": "logsparse", "head": "gaussian", "d_model": 16, "n_heads": 2, "d_ff": 16, "n_layers": 1},
        "data": {"dataset": str(csv), "features": "MS", "seq_len": 24, "label_len": 12, "pred_len": 6,
                 "batch_size": 16},
        "trainer": {"max_epochs": 2}}))
    unscaled = ["--set", "trainer.calibrate_scale=false", "--set", "trainer.correction_significance=0.01"]

    def sweep(folder: str, *extra: str) -> pd.DataFrame:
        assert main(["sweep", "--config", str(config), "--results_dir", str(tmp_path / folder / "results"),
                     "--runs_dir", str(tmp_path / folder / "runs"), *extra]) == 0
        return read_results(tmp_path / folder / "results" / "toy.csv")

    sweep("here")
    first, refitted = sweep("here", *unscaled).to_dict("records")
    trained = {name: value for name, value in json.loads(first["training"]).items() if name != "calibrate_scale"}
    assert json.loads(refitted["training"]) == {**trained, "correction_significance": 0.01}  # False: the default
    first_run, refitted_run = (tmp_path / "here" / "runs" / run_name(row_key(row)) for row in (first, refitted))
    assert not (refitted_run / "checkpoints").exists()  # nothing trained a second time
    # ... but the re-fitted forecaster is saved under its own run name, so predict and test find it there
    assert json.loads((refitted_run / "config.json").read_text())["training"]["calibrate_scale"] is False
    for run, row in ((refitted_run, refitted), (first_run, first)):
        report = Forecaster.load(run).evaluate(csv, windows="test")
        assert report.loc["mse", "standardized"] == pytest.approx(row["mse"], rel=1e-6)
    for column in ("epochs", "best_epoch", "train_seconds", "device", "val_loss"):
        assert refitted[column] == first[column]
    (fresh,) = sweep("elsewhere", *unscaled).to_dict("records")  # the same run, trained
    assert fresh["training"] == refitted["training"] and fresh["epochs"] == refitted["epochs"]
    columns = ("mse", "mae", "mse_orig", "correction_kept", "coverage_0.8", "rho_risk_0.9")
    for column in columns:  # from the weights as training left them, not the first run's scaled ones
        assert refitted[column] == pytest.approx(fresh[column], rel=1e-9, abs=1e-12)
    assert first["coverage_0.8"] != refitted["coverage_0.8"]


def test_a_run_differing_only_in_its_sample_paths_is_rescored_with_them(tmp_path):
    """n_samples is applied after training: the finished run's weights, re-scored from 7 paths as a run trained
    with n_samples=7 scores, and saved so that a load draws 7."""
    from forecast import Forecaster
    from forecast.cli import main
    from forecast.experiment import row_key, run_name

    csv = toy_csv(tmp_path)
    config = tmp_path / "sampled.yaml"
    config.write_text(yaml.safe_dump({  # autoregressive decoding: its quantiles come from sample paths
        "model": {"name": "logsparse", "head": "gaussian", "decoding": "autoregressive", "linear_skip": False,
                  "d_model": 16, "n_heads": 2, "d_ff": 16, "n_layers": 1},
        "data": {"dataset": str(csv), "features": "S", "seq_len": 24, "label_len": 12, "pred_len": 4,
                 "batch_size": 16},
        "trainer": {"max_epochs": 1, "limit_train_batches": 2}}))

    def sweep(folder: str, *extra: str) -> list[dict]:
        assert main(["sweep", "--config", str(config), "--results_dir", str(tmp_path / folder / "results"),
                     "--runs_dir", str(tmp_path / folder / "runs"), *extra]) == 0
        return read_results(tmp_path / folder / "results" / "toy.csv").to_dict("records")

    (first,) = sweep("here")
    seven = ["--set", "trainer.n_samples=7"]
    resampled = sweep("here", *seven)[-1]
    assert json.loads(resampled["training"]) == {**json.loads(first["training"]), "n_samples": 7}
    resampled_run = tmp_path / "here" / "runs" / run_name(row_key(resampled))
    assert not (resampled_run / "checkpoints").exists()  # nothing trained a second time
    assert Forecaster.load(resampled_run).predictor.module.hparams.n_samples == 7
    (fresh,) = sweep("elsewhere", *seven)  # the same run, trained
    for column in ("mse", "rho_risk_0.5", "rho_risk_0.9", "coverage_0.8"):
        assert resampled[column] == pytest.approx(fresh[column], rel=1e-9, abs=1e-12)
    assert resampled["rho_risk_0.9"] != first["rho_risk_0.9"]  # 7 paths, not 100


# ------------------------------------------------------------- configs and report

STANDARD_HORIZONS = {
    "ETTh1": (24, 48, 168, 336, 720), "ETTh2": (24, 48, 168, 336, 720), "ETTm1": (24, 48, 96, 288, 672),
    "ETTm2": (96, 192, 336, 720), "weather": (96, 192, 336, 720), "exchange_rate": (96, 192, 336, 720),
    "electricity": (96, 192, 336, 720), "traffic": (96, 192, 336, 720), "national_illness": (24, 36, 48, 60),
}
CONFIG_MODELS = ("informer", "logsparse", "transformer", "naive")
CONFIGS = ROOT / "experiments" / "configs"
LONG_HORIZON = ROOT / "experiments" / "long_horizon"


def registry_spec(config) -> DataSpec:
    """The model sizes of a config's registered dataset, from the registry alone (no data read)."""
    from forecast import datasets
    from forecast.data import n_time_features

    info = datasets.get(config.dataset)
    n_variables = info.n_cols - 1  # all columns but the date
    features = config.data["features"]
    return DataSpec(seq_len=config.data["seq_len"], label_len=config.data["label_len"],
                    pred_len=config.data["pred_len"], c_in=1 if features == "S" else n_variables,
                    c_out=n_variables if features == "M" else 1,
                    n_time_features=n_time_features(info.freq, config.data["time_encoding"]))


def test_every_registered_dataset_and_standard_horizon_has_a_config_per_model():
    from forecast import datasets

    assert set(STANDARD_HORIZONS) == set(datasets.names())
    expected = {f"{dataset}/{model}_{features}_{horizon}.yaml"
                for dataset, horizons in STANDARD_HORIZONS.items() for horizon in horizons
                for features in (("M", "S") if dataset in ("ETTh1", "ETTh2", "ETTm1") else ("M",))
                for model in CONFIG_MODELS}
    found = {path.relative_to(CONFIGS).as_posix() for path in CONFIGS.glob("*/*.yaml")}
    assert found == expected


def test_the_long_horizon_benchmark_has_every_cell_and_model():
    cells = {(d, h) for d in ("ETTh1", "ETTh2", "ETTm1", "ETTm2", "weather", "exchange_rate") for h in (96, 192, 336, 720)}
    cells |= {("national_illness", h) for h in (24, 36, 48, 60)}
    found = {path.relative_to(LONG_HORIZON).as_posix() for path in LONG_HORIZON.glob("*/*.yaml")}
    expected = {f"{d}/{m}_M_{h}.yaml" for d, h in cells for m in ("naive", "dlinear", "informer", "logsparse")}
    # a day of 10-minute weather (144) and a year of weekly ILI (52) are longer than the input
    expected |= {f"{d}/seasonal_naive_M_{h}.yaml" for d, h in cells if d not in ("weather", "national_illness")}
    expected |= {f"{d}/{m}_M_{h}.yaml" for d, h in cells for m in ("informer-paper", "logsparse-paper")}
    assert len(cells) == 28 and found == expected
    import torch

    from forecast.config import load_config
    from forecast.models import build_model

    for path in LONG_HORIZON.glob("*/*.yaml"):
        config = load_config(path)
        window = (36, 18) if config.dataset == "national_illness" else (96, 48)
        assert (config.data["seq_len"], config.data["label_len"], config.data["features"]) == (*window, "M")
        trained = config.model in ("dlinear", "informer", "logsparse")
        assert config.recipe == ("paper" if "paper" in path.stem or not trained else "improved"), path
        experiment = config.experiment()
        with torch.device("meta"):  # every option checked against the data's sizes, nothing allocated
            build_model(experiment.model, registry_spec(config), **experiment.model_options)


def test_configs_are_what_the_generator_writes():
    assert load_script("make_configs").main(["--check"]) == 0, "run python experiments/make_configs.py"


def test_the_generator_replaces_its_own_configs_and_keeps_hand_written_ones(tmp_path, capsys):
    """make_configs.py --out DIR deleted every YAML file under DIR/configs that it did not generate: a project's
    own configs beside the generated ones were lost. It removes its own stale files only (they carry its header)."""
    make_configs = load_script("make_configs")
    mine = tmp_path / "configs" / "mine" / "naive_M_8.yaml"
    stale = tmp_path / "configs" / "ETTh1" / "informer_M_9.yaml"
    for path in (mine, stale):
        path.parent.mkdir(parents=True, exist_ok=True)
    mine.write_text("model: {name: naive}\ndata: {dataset: mine.csv}\n")
    stale.write_text(make_configs.render("informer", next(make_configs.settings()), {"model": {"name": "informer"}}))
    assert make_configs.main(["--out", str(tmp_path)]) == 0
    assert mine.read_text() == "model: {name: naive}\ndata: {dataset: mine.csv}\n" and not stale.exists()
    assert f"kept {Path('configs') / 'mine' / 'naive_M_8.yaml'} (not written by this script)" in capsys.readouterr().out


def test_every_config_parses_and_builds_its_model_on_the_data_sizes():
    """Electricity and traffic are not on this machine: their sizes come from the registry."""
    import torch

    from forecast.config import load_config
    from forecast.models import build_model

    for path in sorted(CONFIGS.glob("*/*.yaml")):
        config = load_config(path)
        model, features, horizon = path.stem.split("_")
        assert (config.dataset, config.model, config.data["features"], config.data["pred_len"]) == (
            path.parent.name, model, features, int(horizon)), path
        experiment = config.experiment()  # what a sweep would run
        assert experiment.seq_len == config.data["seq_len"] and experiment.training.batch_size == 32
        with torch.device("meta"):  # construction checks every option and size, allocating nothing
            built = build_model(config.model, registry_spec(config), **config.model_options)
        assert sum(p.numel() for p in built.parameters()) > 0 or config.model == "naive"


def test_registry_sizes_agree_with_the_data_and_configs_forecast_on_it():
    """On the smallest benchmark: the data module's sizes equal the registry's, and each model runs."""
    import torch

    from forecast import datasets
    from forecast.config import load_config
    from forecast.data import WindowDataModule
    from forecast.data.timefeatures import seasonal_period
    from forecast.errors import DatasetUnavailableError
    from forecast.models import DataSpec, build_model

    try:
        datasets.locate("national_illness", download=False)
    except DatasetUnavailableError:
        pytest.skip("national_illness is not available locally (set FORECAST_DATA_DIR)")
    for model in CONFIG_MODELS:
        config = load_config(CONFIGS / "national_illness" / f"{model}_M_24.yaml")
        options = {k: v for k, v in config.data.items() if k != "dataset"}
        datamodule = WindowDataModule(config.dataset, **options)
        datamodule.setup()
        spec = DataSpec.from_fitted(datamodule.fitted)
        # the sizes the registry tells; the cycle and persistence come from the data itself
        assert dataclasses.replace(spec, season=None, persistence=None) == registry_spec(config)
        assert spec.season == seasonal_period(datasets.get(config.dataset).freq)
        batch = next(iter(datamodule.test_dataloader()))
        with torch.no_grad():
            forecast = build_model(config.model, registry_spec(config), **config.model_options).eval()(
                batch["x"][:2], batch["x_mark"][:2], batch["y_mark"][:2])
        assert forecast.shape == (2, 24, 7) and torch.isfinite(forecast).all()


def test_configs_share_keys_and_run_folders_with_the_runners_rows():
    """The ETTh1 configs name the runs the retired experiments/run.py made, so their committed rows are found."""
    from forecast.config import load_config

    legacy = load_script("migrate_results").legacy_runner_experiment
    paper = ["--model-option", "d_model=512", "--model-option", "n_heads=8", "--model-option", "e_layers=2",
             "--model-option", "d_layers=1", "--model-option", "d_ff=2048", "--model-option", "dropout=0.05",
             "--max-epochs", "6", "--patience", "3", "--batch-size", "32", "--learning-rate", "1e-4"]
    cases = [("informer_M_24", ["--model", "informer", "--features", "M", "--seq-len", "48", "--label-len", "48",
                                "--model-option", "factor=3"]),
             ("informer_S_24", ["--model", "informer", "--features", "S", "--seq-len", "720", "--label-len", "168",
                                "--model-option", "factor=5"]),
             ("transformer_M_24", ["--model", "transformer", "--features", "M", "--seq-len", "48",
                                   "--label-len", "48"])]
    for name, args in cases:
        script = legacy(["--dataset", "ETTh1", "--recipe", "paper", "--pred-len", "24", *args, *paper])
        configured = load_config(CONFIGS / "ETTh1" / f"{name}.yaml").experiment()
        assert configured.key() == script.key() and configured.run_name() == script.run_name()
        assert configured.training == script.training


def test_a_registered_dataset_named_by_an_alias_or_in_another_case_is_one_run():
    """--data.dataset etth1 trained in runs/dataset=etth1_... and wrote results/etth1.csv: `ETTh1` found neither."""
    from forecast.config import load_config

    canonical = load_config(CONFIGS / "national_illness" / "informer_M_24.yaml").experiment()
    for spelling in ("NATIONAL_ILLNESS", "ili"):
        other = load_config(CONFIGS / "national_illness" / "informer_M_24.yaml",
                            ["--data.dataset", spelling]).experiment()
        assert other.key() == canonical.key() and other.run_name() == canonical.run_name()
        assert other.results_path("results") == canonical.results_path("results")
    assert canonical.results_path("results") == Path("results/national_illness.csv")


def test_data_options_at_their_defaults_or_that_only_load_windows_name_the_same_run():
    """--data.pin_memory false, --data.allow_irregular false or --data.eval_batch_size 7 made another run folder: fit
    trained the same run again, and test could not find the run fit had made."""
    from forecast.config import load_config

    config = CONFIGS / "national_illness" / "informer_M_24.yaml"
    canonical = load_config(config).experiment()
    for given in (["--data.pin_memory", "false"], ["--data.allow_irregular", "false"], ["--data.eval_batch_size", "7"],
                  ["--data.predict_split", "val"], ["--data.persistent_workers", "true"]):
        same = load_config(config, given).experiment()
        assert same.key() == canonical.key() and same.run_name() == canonical.run_name(), given
    for given in (["--data.drop_last_train", "true"], ["--data.fill_nan", "ffill"]):  # what is learned from changes
        assert load_config(config, given).experiment().key() != canonical.key(), given


def test_published_numbers_are_well_formed():
    from forecast import datasets
    from forecast.models import MODELS
    from forecast.report import read_published

    published = read_published(ROOT / "experiments" / "published.csv")
    reference_only = {"patchtst", "itransformer"}  # published models this package does not implement
    assert set(published.dataset) <= set(datasets.names()) and set(published.model) <= set(MODELS) | reference_only
    assert published.mse.notna().all() and (published.mse > 0).all() and (published.mae.dropna() > 0).all()
    assert published.source.str.len().gt(20).all()
    # the Informer paper's three ETT tables, both feature modes, three models, five horizons each
    papers = published[published.seq_len.isna()]  # figures at the papers' own windows
    informer_tables = papers[papers.dataset.isin(["ETTh1", "ETTh2", "ETTm1"])]
    assert len(informer_tables) == 3 * 2 * 3 * 5
    for row in published.itertuples():  # every published figure sits next to a configured setting
        name = f"{'naive' if row.model in reference_only else row.model}_{row.features}_{row.pred_len}.yaml"
        assert (CONFIGS / row.dataset / name).is_file() or (LONG_HORIZON / row.dataset / name).is_file(), name


def test_report_marks_configured_settings_without_rows_as_not_run(tmp_path):
    from forecast.report import render_report

    configs = tmp_path / "configs" / "toy"
    configs.mkdir(parents=True)
    window = {"dataset": "toy", "features": "M", "seq_len": 24, "label_len": 12}
    for model, options in (("naive", {}), ("informer", {"d_model": 16, "n_heads": 2})):
        for horizon in (6, 12):
            (configs / f"{model}_M_{horizon}.yaml").write_text(yaml.safe_dump(
                {"model": {"name": model, **options}, "data": {**window, "pred_len": horizon}, "recipe": "paper"}))
    results = tmp_path / "results"
    for seed, mse, device, seconds in ((0, 0.5, "cpu:x86_64x2", 60), (1, 0.7, "cuda:NVIDIA H200", 30)):
        append_row(results / "toy.csv", row(dataset="toy", model="informer", features="M", seq_len=24,
                                            label_len=12, pred_len=6, seed=seed, mse=mse, mae=0.25, device=device,
                                            train_seconds=seconds,
                                            options='{"d_model": 16, "n_heads": 2}', n_test_windows=55))
    # a run at another window is reported in detail but not in the configured setting's cell
    append_row(results / "toy.csv", row(dataset="toy", model="naive", features="M", seq_len=96, label_len=48,
                                        pred_len=6, mse=9.0, mae=9.0, options="{}", n_test_windows=50,
                                        mse_orig=64999374848.0, mae_orig=94238.06))
    for seed, coverage in ((0, 0.75), (1, 0.85)):
        append_row(results / "toy.csv", row(dataset="toy", model="seasonal_naive", features="M", seq_len=96,
                                            label_len=48, pred_len=6, seed=seed, mse=1.0, mae=1.0, options="{}",
                                            train_seconds=60 if seed == 0 else "",  # a row written untimed
                                            n_test_windows=50, **{"rho_risk_0.5_orig": 0.25 * (seed + 1),
                                                                  "rho_risk_0.9_orig": 0.125, "coverage_0.8": coverage}))
    # informer at two windows other than the configured 24/12: one with a re-run reference, one without
    for seq_len, label_len, mse in ((96, 48, 0.4), (48, 24, 0.3)):
        append_row(results / "toy.csv", row(dataset="toy", model="informer", features="M", seq_len=seq_len,
                                            label_len=label_len, pred_len=6, mse=mse, mae=0.25, n_test_windows=50,
                                            options='{"d_model": 16, "n_heads": 2}'))
    published = tmp_path / "published.csv"
    published.write_text("dataset,features,pred_len,model,published_as,mse,mae,source,seq_len,label_len\n"
                         "toy,M,6,informer,Informer,0.577,0.549,a paper,,\n"
                         "toy,M,24,informer,Informer,0.931,,a paper,,\n"
                         "toy,M,6,informer,Re-run,0.521,0.523,a re-run at 96/48,96,48\n")
    report = render_report(results, tmp_path / "configs", published)
    for missing, flag in ((tmp_path / "resluts", "--results_dir"), (tmp_path / "cofnigs", "--configs_dir")):
        folders = [results, tmp_path / "configs"]
        folders[flag == "--configs_dir"] = missing  # a mistyped folder: was an empty report
        with pytest.raises(ConfigError, match=f"{missing.name} does not exist. Fix: pass {flag}"):
            render_report(*folders, published)
    lines = {line.split(" | ")[0].strip("| "): line for line in report.splitlines() if line.startswith("| ")}
    assert lines["6"] == ("| 6 | 24/12 | 0.600 ± 0.141 / 0.250 ± 0.000 (2) | 0.577 / 0.549 | **not run** |")
    assert lines["12"] == "| 12 | 24/12 | **not run** | – | **not run** |"
    assert lines["24"] == "| 24 | – | – | 0.931 / – | – |"  # published only: no config at that horizon
    assert "#### toy `M` 96/48/6" in report and "| naive | paper | `{}` | `{}` | 1 | 50 | 9.000 |" in report
    # a point forecast has no rho-risks or coverage; counts in original units keep four significant digits
    assert "| 9.000 | 6.5e+10 | 9.424e+04 | – | – |" in report
    assert "| 0.375 / 0.125 | 0.800 |" in report  # seasonal_naive: means over its two seeds
    assert "| 1.0 (1 of 2 timed) |" in report  # its training minutes: the one timed seed's, and it says so
    assert "Published: a paper." in report  # the re-run is cited at its own window only
    # each figure sits beside the runs at the window it was measured with, and nowhere else
    detail = {title.split("\n")[0]: body for title, body in
              (part.split("\n", 1) for part in report.split("#### ")[1:])}
    assert "0.577 / 0.549 (Informer)" in detail["toy `M` 24/12/6"]
    # seeds trained on two devices: both named, each with its own mean training time
    assert "| 1.0, 0.5 | cpu:x86_64x2, cuda:NVIDIA H200 |" in detail["toy `M` 24/12/6"]
    assert "0.521 / 0.523 (Re-run)" in detail["toy `M` 96/48/6"] and "0.577" not in detail["toy `M` 96/48/6"]
    assert "0.521" not in detail["toy `M` 48/24/6"] and "0.577" not in detail["toy `M` 48/24/6"]


def test_report_summary_cites_a_figure_published_at_the_configured_window_only(tmp_path):
    """ETTm2's LogTrans figures, measured at the configs' own 96/48 (not the paper's window, which they state),
    had no column in the summary: the configured LogSparse had nothing to compare against."""
    from forecast.report import render_report

    configs = tmp_path / "configs" / "toy"
    configs.mkdir(parents=True)
    (configs / "logsparse_M_6.yaml").write_text(yaml.safe_dump(
        {"model": {"name": "logsparse"}, "data": {"dataset": "toy", "features": "M", "seq_len": 96, "label_len": 48,
                                                  "pred_len": 6}}))
    results = tmp_path / "results"
    append_row(results / "toy.csv", row(model="logsparse", seq_len=96, label_len=48, pred_len=6, mse=0.5, mae=0.4,
                                        recipe="improved", n_test_windows=50))
    published = tmp_path / "published.csv"
    published.write_text("dataset,features,pred_len,model,published_as,mse,mae,source,seq_len,label_len\n"
                         "toy,M,6,logsparse,LogTrans,0.768,0.642,a re-run at 96/48,96,48\n")
    report = render_report(results, tmp_path / "configs", published)
    assert "| horizon | window | logsparse | LogTrans (paper) |" in report
    assert "| 6 | 96/48 |" in report and "| 0.768 / 0.642 |" in report


def test_report_refuses_a_csv_file_in_the_results_folder_that_holds_no_results(tmp_path):
    """A data file among the results (or --results_dir naming the data folder) ended the report in pandas'
    IntCastingNaNError on seq_len; it is now refused, naming the file and the fix."""
    from forecast.report import render_report

    (tmp_path / "configs").mkdir()
    append_row(tmp_path / "results" / "toy.csv", row(seq_len=24, label_len=12, pred_len=6))
    (tmp_path / "results" / "toy_data.csv").write_text("date,a,OT\n2022-01-01,1.0,2.0\n")
    with pytest.raises(ConfigError, match=r"toy_data.csv is not a results file: it lacks the columns \['dataset', "
                                          r"'model', .*\] of one. Fix: move it out of"):
        render_report(tmp_path / "results", tmp_path / "configs")


def test_report_of_a_project_without_published_figures(tmp_path, monkeypatch, capsys):
    """A project's own runs have no published figures: `forecast report` refused to render without
    published.csv (its default); it now renders our numbers alone and says how to add figures. A --published
    file that is named but missing is still refused."""
    from forecast.cli import main
    from forecast.report import render_report

    configs = tmp_path / "configs" / "toy"
    configs.mkdir(parents=True)
    (configs / "naive_M_6.yaml").write_text(yaml.safe_dump(
        {"model": {"name": "naive"}, "data": {"dataset": "toy", "seq_len": 24, "label_len": 12, "pred_len": 6},
         "recipe": "paper"}))
    append_row(tmp_path / "results" / "toy.csv", row(seq_len=24, label_len=12, pred_len=6, mse=0.5, mae=0.25,
                                                     n_test_windows=55))
    monkeypatch.chdir(tmp_path)
    assert main(["report"]) == 0  # the defaults: results/, configs/ and no published.csv
    printed = capsys.readouterr().out
    assert "| 6 | 24/12 | 0.500 / 0.250 (1) |" in printed
    assert "No published figures" in printed and "--published" in printed
    assert render_report("results", "configs") == printed.removesuffix("\n")
    assert main(["report", "--published", "papers.csv"]) == 2
    assert "published numbers file papers.csv does not exist. Fix: pass --published PATH" in capsys.readouterr().err
    # a file for a folder, another CSV for the published figures, a README without markers: each named
    assert main(["report", "--results_dir", "results/toy.csv"]) == 2
    assert "results folder results/toy.csv is a file, not a folder" in capsys.readouterr().err
    assert main(["report", "--published", "results/toy.csv"]) == 2
    assert "results/toy.csv lacks the column(s) ['published_as', 'source'] of a published numbers file" in (
        capsys.readouterr().err)
    (tmp_path / "notes.md").write_text("no markers\n")
    assert main(["report", "--readme", "notes.md"]) == 2
    assert "notes.md: the markers" in capsys.readouterr().err
    (tmp_path / "published.csv").write_text("dataset,features,pred_len,model,published_as,mse,mae,source\n"
                                            "toy,M,6,naive,Repeat,0.577,0.549,a paper\n")
    assert main(["report"]) == 0  # published.csv in the folder, the default, is still read
    assert "| 6 | 24/12 | 0.500 / 0.250 (1) | 0.577 / 0.549 |" in capsys.readouterr().out


@pytest.mark.parametrize("flag", ["--readme", "--output"])
def test_report_leaves_its_file_whole_when_writing_it_fails(tmp_path, monkeypatch, flag):
    """`forecast report --readme FILE` (or --output FILE) wrote the file in place: a crash or a full disk
    mid-write left it truncated, the README's text around the tables lost. It is now written to a temporary
    file beside it, renamed over it once whole."""
    from forecast.cli import main

    (tmp_path / "configs").mkdir()
    append_row(tmp_path / "results" / "toy.csv", row(seq_len=24, label_len=12, pred_len=6))
    target = tmp_path / "README.md"
    original = "# Results\n\n<!-- results:begin -->\nold\n<!-- results:end -->\n\nmore text\n"
    target.write_text(original)
    real = Path.write_text

    def full_disk(path, text, *args, **kwargs):  # half the text reaches the disk, then it is full
        real(path, text[:len(text) // 2], *args, **kwargs)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full_disk)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OSError, match="No space left"):
        main(["report", flag, str(target)])
    assert target.read_text() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "configs", "results"]  # no temporary file
    monkeypatch.setattr(Path, "write_text", real)
    target.chmod(0o644)
    assert main(["report", flag, str(target)]) == 0
    assert "| naive |" in target.read_text() and target.stat().st_mode & 0o777 == 0o644  # its own permissions


def test_report_output_into_a_new_folder_or_onto_a_folder(tmp_path, monkeypatch, capsys):
    """`forecast report --output reports/results.md` failed with a FileNotFoundError traceback when reports/ did
    not exist (predict's and test's --output create their folder); a folder named as the file was an
    IsADirectoryError. The folder is now created, and a folder as --output is refused with the fix."""
    from forecast.cli import main

    (tmp_path / "configs").mkdir()
    append_row(tmp_path / "results" / "toy.csv", row(seq_len=24, label_len=12, pred_len=6))
    monkeypatch.chdir(tmp_path)
    assert main(["report", "--output", "reports/new/results.md"]) == 0
    assert "| naive |" in (tmp_path / "reports" / "new" / "results.md").read_text()
    assert main(["report", "--output", "reports"]) == 2
    assert "--output reports is a folder. Fix: name a file" in capsys.readouterr().err


def test_detail_tables_without_published_figures_have_no_published_column(tmp_path):
    """Without published figures (no published.csv) every detail table still ended in an empty "published MSE /
    MAE" column; it is left out, and every row has the header's cells."""
    from forecast.report import render_report

    (tmp_path / "configs").mkdir()
    append_row(tmp_path / "results" / "toy.csv", row(seq_len=24, label_len=12, pred_len=6))
    detail = render_report(tmp_path / "results", tmp_path / "configs").split("### Every setting run")[1]
    table = [line for line in detail.splitlines() if line.startswith("|")]
    assert len(table) == 3 and "published" not in detail
    assert {line.count("|") for line in table} == {table[0].count("|")}
    published = tmp_path / "published.csv"
    published.write_text("dataset,features,pred_len,model,published_as,mse,mae,source\n")
    assert "| published MSE / MAE |" in render_report(tmp_path / "results", tmp_path / "configs", published)


def test_committed_report_lists_every_dataset_and_the_tables_script_rewrites_only_its_block(tmp_path):
    from forecast import datasets

    readme = tmp_path / "README.md"
    original = (ROOT / "experiments" / "README.md").read_text()
    readme.write_text(original)
    main_readme = tmp_path / "MAIN.md"
    main_original = (ROOT / "README.md").read_text()
    main_readme.write_text(main_original)
    assert load_script("tables").main(["--readme", str(readme), "--main-readme", str(main_readme)]) == 0
    text = readme.read_text()

    def outside(document: str, *blocks: str) -> str:
        """The document with the content of each ``<!-- block:begin/end -->`` pair left out."""
        for block in blocks:
            head, _, rest = document.partition(f"<!-- {block}:begin -->")
            document = head + rest.partition(f"<!-- {block}:end -->")[2]
        return document

    assert outside(text, "results", "panel") == outside(original, "results", "panel")
    assert outside(main_readme.read_text(), "headline") == outside(main_original, "headline")
    # the committed tables are up to date with the committed results
    assert text == original and main_readme.read_text() == main_original
    for name in datasets.names():
        assert f"### {name}, multivariate (`M`)" in text
    electricity = text.split("### electricity, multivariate (`M`)")[1].split("###")[0]
    assert electricity.count("**not run**") == 4 * len(CONFIG_MODELS)


def test_rows_written_before_recipes_migrate_from_their_commands(tmp_path):
    """Their recipe is the paper's; their training settings come from the command they record."""
    older = [c for c in COLUMNS if c not in ("recipe", "training", "val_loss")]
    runner = row(model="informer", options='{"d_model": 16, "revin": true}', command=(
        "python experiments/run.py --dataset ETTh1 --model informer --features M --seq-len 96 --label-len 48 "
        "--pred-len 96 --model-option d_model=16 --model-option revin=true --learning-rate 1e-3 --max-epochs 10"))
    swept = row(model="naive", command="forecast sweep --config experiments/configs/ETTm2/naive_M_96.yaml --seeds 0")
    path = tmp_path / "ETTh1.csv"
    pd.DataFrame([runner, swept])[older].to_csv(path, index=False)
    from forecast.report import read_results_dir

    # Unmigrated, a report dropped its rows (their keys read as NaN) and a sweep failed with a KeyError.
    for read in (lambda: has_row(path, runner), lambda: read_results_dir(tmp_path)):
        with pytest.raises(ConfigError, match=r"has no \['recipe', 'training'\] columns: .*migrate_results"):
            read()
    assert load_script("migrate_results").main([str(tmp_path)]) == 0
    frame = read_results(path)
    assert list(frame.columns) == COLUMNS and list(frame.recipe) == ["paper", "paper"]
    assert json.loads(frame.training[0]) == {"learning_rate": 0.001, "max_epochs": 10} and frame.training[1] == "{}"
    mismatched = row(model="informer", options='{"d_model": 99}', command=runner["command"])
    pd.DataFrame([mismatched])[older].to_csv(path, index=False)
    with pytest.raises(ValueError, match="gives options"):
        load_script("migrate_results").main([str(tmp_path)])


def test_rows_written_before_the_correction_column_take_it_from_their_saved_models(tmp_path):
    """The weight a run's saved model forecast with fills its row; rows without a saved weight stay blank."""
    import torch

    from forecast.experiment import run_name

    kept = row(model="informer", pred_len=96, seed=0, options='{"revin": true}', training='{"max_epochs": 10}')
    plain = row(model="dlinear", pred_len=96, seed=0)  # saved, but no RevIN: no weight
    unsaved = row(model="informer", pred_len=96, seed=1)  # its folder is gone
    path = tmp_path / "results" / "toy.csv"
    path.parent.mkdir()
    pd.DataFrame([kept, plain, unsaved])[[c for c in COLUMNS if c != "correction_kept"]].to_csv(path, index=False)
    for saved, state in ((kept, {"model.revin.correction_weight": torch.tensor(0.25), "model.w": torch.ones(2)}),
                         (plain, {"model.linear.weight": torch.ones(2)})):
        folder = tmp_path / "runs" / run_name({name: saved[name] for name in KEY})
        folder.mkdir(parents=True)
        torch.save(state, folder / "model.pt")
    before = pd.read_csv(path, keep_default_na=False)
    script = load_script("fill_correction_kept")
    assert script.main([str(tmp_path / "runs"), "--results-dir", str(path.parent)]) == 0
    frame = read_results(path)
    assert list(frame.columns) == COLUMNS and frame.correction_kept[0] == 0.25
    assert frame.correction_kept[1:].isna().all()
    after = pd.read_csv(path, keep_default_na=False).drop(columns="correction_kept")
    assert after.astype(str).equals(before.astype(str))  # nothing else changed


def test_rows_tested_before_point_rho_risks_take_them_from_testing_their_saved_models_again(tmp_path, capsys):
    """A row without rho-risks gets the ones its saved model tests at, once the re-test gives the row's MSE;
    a folder holding another model is refused and the file left as it was."""
    from forecast.cli import main

    csv = toy_csv(tmp_path)
    config = tmp_path / "dlinear.yaml"
    config.write_text(yaml.safe_dump({
        "model": {"name": "dlinear"}, "trainer": {"max_epochs": 1},
        "data": {"dataset": str(csv), "features": "MS", "seq_len": 24, "label_len": 12, "pred_len": 6}}))
    folders = ["--results_dir", str(tmp_path / "results"), "--runs_dir", str(tmp_path / "runs")]
    assert main(["sweep", "--config", str(config), *folders]) == 0
    path = tmp_path / "results" / "toy.csv"
    recorded = read_results(path).iloc[0]
    older = pd.read_csv(path, keep_default_na=False)
    older[["rho_risk_0.5", "rho_risk_0.9", "rho_risk_0.5_orig", "rho_risk_0.9_orig"]] = ""
    older.to_csv(path, index=False)
    script = load_script("fill_rho_risks")
    arguments = [str(tmp_path / "runs"), "--datasets", "toy", "--results-dir", str(path.parent),
                 "--data-dir", str(tmp_path)]
    wrong = older.assign(mse=older.mse.astype(float) * 1.01)
    wrong.to_csv(path, index=False)
    with pytest.raises(ValueError, match="holds another model"):
        script.main(arguments)
    assert pd.read_csv(path, keep_default_na=False).astype(str).equals(wrong.astype(str))
    older.to_csv(path, index=False)
    assert script.main(arguments) == 0
    filled = read_results(path).iloc[0]
    for column in ("rho_risk_0.5", "rho_risk_0.9", "rho_risk_0.5_orig", "rho_risk_0.9_orig"):
        assert filled[column] == pytest.approx(recorded[column], rel=1e-6)
    assert np.isnan(filled["coverage_0.8"])  # a point forecast has no interval
    assert script.main(arguments) == 0 and "0 rows filled" in capsys.readouterr().out  # nothing left blank


def test_calibration_variants_fit_no_worse_than_what_they_contain_on_the_windows_they_fit(tmp_path, capsys):
    """Each least-squares refit has the trained model (and the skip alone) among its choices, so on the windows it
    was fitted on it scores no worse; the tested shares stay in [0, 1]; the report names every variant."""
    from forecast import Forecaster
    from forecast.cli import main

    csv = toy_csv(tmp_path)
    config = tmp_path / "informer.yaml"
    config.write_text(yaml.safe_dump({
        "model": {"name": "informer", "d_model": 16, "n_heads": 2, "d_ff": 16},  # the recipe's RevIN and skip
        "data": {"dataset": str(csv), "features": "M", "seq_len": 24, "label_len": 12, "pred_len": 6,
                 "batch_size": 16}, "trainer": {"max_epochs": 1}}))
    assert main(["sweep", "--config", str(config), "--results_dir", str(tmp_path / "results"),
                 "--runs_dir", str(tmp_path / "runs")]) == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    script = load_script("calibration_variants")
    forecaster = Forecaster.load(run_dir)
    model = forecaster.model.eval()
    windows = forecaster.windows_of(str(csv), windows="val")
    windows.setup("test")
    parts = script.parts(model, windows.test_dataloader())
    assert parts["skip"].abs().sum() > 0  # a trained skip forecasts something
    scores = {variant: script.mse(script.fitted(variant, parts)[0](parts), parts)
              for variant in script.VARIANTS + script.SKIP_VARIANTS}
    assert scores["none"] == pytest.approx(script.mse(parts["center"] + parts["correction"], parts))
    assert scores["w"] <= scores["none"] * (1 + 1e-9)
    assert scores["a,w"] <= min(scores["none"], scores["skip"], scores["w"]) * (1 + 1e-9)
    inputs = torch.cat([batch["x"][:, -1:, -parts["y"].shape[2]:] for batch in windows.test_dataloader()])
    assert scores["last"] == pytest.approx(script.mse(inputs.double().expand_as(parts["y"]), parts))  # naive's
    for variant in ("w tested", "a,w tested", "c,w tested"):
        shares = script.fitted(variant, parts)[1]
        assert ((shares >= 0) & (shares <= 1)).all()
    # The tested centre: targets that are the last value keep none of the centre or the correction; targets
    # that are the centre keep the whole centre and none of the correction.
    last = parts["mean"] + parts["offset"]
    for target, expected_shares, expected in ((last, [0.0, 0.0], last), (parts["center"], [1.0, 0.0], parts["center"])):
        windows = {**parts, "y": target}
        forecast, shares = script.fitted("c,w tested", windows)
        assert shares == pytest.approx(expected_shares, abs=1e-6)
        torch.testing.assert_close(forecast(windows), expected)
    script.main([str(run_dir), str(csv)])
    printed = capsys.readouterr().out.splitlines()
    named = [re.search(r" P=6 (.+?) +later validation half", line) for line in printed]
    assert [match[1] for match in named if match] == [*script.VARIANTS, *script.SKIP_VARIANTS]


# Trained one epoch past its early stop: resumed after it stopped, before its row (fixed at StopKeptEarlyStopping).
# Its best epoch, whose weights it was tested with, is the uninterrupted run's: only its epochs and seconds differ.
TRAINED_PAST_THEIR_STOP = {("ETTm1", "informer", "improved", 96, 0)}


def test_every_committed_run_stopped_where_its_early_stopping_stops_it():
    """An uninterrupted run trains to ``patience`` epochs past its best, or to ``max_epochs``: a row that trained
    on was resumed from a checkpoint written after it stopped, and may hold another run's weights."""
    patience, max_epochs = TrainingConfig().patience, TrainingConfig().max_epochs
    rows = pd.concat([read_results(path) for path in (ROOT / "experiments" / "results").glob("*.csv")])
    past = set()
    for row in rows[rows["epochs"] > 0].itertuples():
        training = json.loads(row.training) if str(row.training).startswith("{") else {}
        stop = min(int(row.best_epoch) + training.get("patience", patience) + 1, training.get("max_epochs", max_epochs))
        if int(row.epochs) != stop:
            past.add((row.dataset, row.model, row.recipe, int(row.pred_len), int(row.seed)))
    assert past == TRAINED_PAST_THEIR_STOP


def test_committed_long_horizon_tables_are_what_the_script_writes(tmp_path):
    import shutil

    readme, main_readme = tmp_path / "README.md", tmp_path / "MAIN.md"
    shutil.copy(ROOT / "experiments" / "README.md", readme)
    shutil.copy(ROOT / "README.md", main_readme)
    script = load_script("long_horizon")
    assert script.main(["--readme", str(readme), "--main-readme", str(main_readme)]) == 0
    assert readme.read_text() == (ROOT / "experiments" / "README.md").read_text(), "python experiments/long_horizon.py"
    assert main_readme.read_text() == (ROOT / "README.md").read_text(), "python experiments/long_horizon.py"


def long_horizon_cells(*extra: dict) -> pd.DataFrame:
    """Two toy cells of the long-horizon table (ETTh1 96, exchange_rate 96), and ``extra`` rows."""
    return pd.DataFrame([
        {"dataset": "ETTh1", "pred_len": 96, "entry": "informer", "mse": 0.4},
        {"dataset": "ETTh1", "pred_len": 96, "entry": "naive", "mse": 1.2},
        {"dataset": "ETTh1", "pred_len": 96, "entry": "dlinear", "mse": 0.38},
        {"dataset": "ETTh1", "pred_len": 96, "entry": "Informer (published)", "mse": 0.8},
        {"dataset": "exchange_rate", "pred_len": 96, "entry": "informer", "mse": 0.09},
        {"dataset": "exchange_rate", "pred_len": 96, "entry": "naive", "mse": 0.081},
        {"dataset": "exchange_rate", "pred_len": 96, "entry": "Informer (published)", "mse": 0.9},
        *extra,
    ])


def test_long_horizon_targets_count_wins_over_naive_and_gains_over_the_published_runs():
    script = load_script("long_horizon")
    cells = long_horizon_cells()
    lines = "\n".join(script.targets(cells))
    assert "`informer` beats `naive` in 1 of 2 cells run; loses in exchange_rate 96 (+11%)." in lines
    assert "70% lower MSE on average over 2 cells" in lines  # 1 - (0.4/0.8 + 0.09/0.9) / 2
    assert "`dlinear` beats `informer` in 1 of 1 cells; there `informer`'s MSE is 5% above `dlinear`'s" in lines
    assert "`logsparse`: not run yet." in lines
    assert "Reproduction" not in lines  # no paper-size rows


def test_long_horizon_targets_compare_the_paper_sizes_with_the_published_re_runs():
    script = load_script("long_horizon")
    cells = long_horizon_cells({"dataset": "ETTh1", "pred_len": 96, "entry": "informer-paper", "mse": 0.72},
                               {"dataset": "exchange_rate", "pred_len": 96, "entry": "informer-paper", "mse": 1.08})
    lines = script.targets(cells)
    # 0.72 / 0.8 = 0.9 and 1.08 / 0.9 = 1.2; summed, 1.8 / 1.7
    assert lines[-1] == ("- Reproduction: `informer-paper` against the published Informer: +5% MSE on average over "
                         "2 cells, the mean of the per-cell ratios (from -10% to +20%; lower in 1; +6% by the ratio "
                         "of the summed MSEs).")


def test_long_horizon_summary_ranks_every_entry_over_the_cells_it_has_ties_sharing_the_best_rank():
    script = load_script("long_horizon")
    cells = long_horizon_cells(
        {"dataset": "exchange_rate", "pred_len": 96, "entry": "seasonal_naive", "mse": 0.081},
        {"dataset": "exchange_rate", "pred_len": 192, "entry": "informer", "mse": float("nan")},  # not run: no rank
    )
    lines = script.summary(cells)
    table = [line for line in lines if line.startswith("| ") and "entry" not in line]
    # ETTh1 96: dlinear 1, informer 2, published 3, naive 4; exchange_rate 96: naive and seasonal_naive 1 (a tie),
    # informer 3, published 4
    assert table == ["| dlinear | 1 | 1.00 |", "| seasonal_naive | 1 | 1.00 |", "| informer | 2 | 2.50 |",
                     "| naive | 2 | 2.50 |", "| Informer (published) | 2 | 3.50 |"]
    assert lines[lines.index(table[-1]) + 2:] == script.targets(cells)


def test_long_horizon_cells_tied_at_the_shown_precision_name_every_winner():
    """ETTh1 96 named only "DLinear (published)" where iTransformer had the same 0.386, and 192 went to our 0.43681
    over a published 0.437: a difference below the published figures' precision."""
    script = load_script("long_horizon")
    cells = pd.DataFrame([
        {"dataset": "ETTh1", "pred_len": 96, "entry": "DLinear (published)", "mse": 0.386, "mae": 0.4, "seeds": None},
        {"dataset": "ETTh1", "pred_len": 96, "entry": "iTransformer (published)", "mse": 0.386, "mae": 0.4,
         "seeds": None},
        {"dataset": "ETTh1", "pred_len": 96, "entry": "informer", "mse": 0.388, "mae": 0.4, "seeds": 3},
        {"dataset": "ETTh1", "pred_len": 192, "entry": "logsparse", "mse": 0.43681, "mae": 0.4, "seeds": 3},
        {"dataset": "ETTh1", "pred_len": 192, "entry": "DLinear (published)", "mse": 0.437, "mae": 0.4, "seeds": None},
    ])
    rows = [line for line in script.render(cells, ("ETTh1",), summaries=False).splitlines() if line.startswith("| ETTh1")]
    assert rows[0].endswith("| DLinear (published) = iTransformer (published) |")
    assert rows[0].count("**") == 4 and rows[1].count("**") == 4  # both tied cells bold
    assert rows[1].endswith("| logsparse = DLinear (published) |")
    ranks = [line for line in script.summary(cells) if line.startswith("| ") and "entry" not in line]
    assert "| logsparse | 1 | 1.00 |" in ranks and "| DLinear (published) | 2 | 1.00 |" in ranks


def test_merging_rows_written_before_recipes_asks_for_their_key_columns(tmp_path):
    from forecast.results import merge_results

    source = tmp_path / "old"
    source.mkdir()
    older = [c for c in COLUMNS if c not in ("recipe", "training", "val_loss")]
    pd.DataFrame([row()])[older].to_csv(source / "toy.csv", index=False)
    with pytest.raises(ValueError, match=r"has no \['recipe', 'training'\] columns.*Fix: give its rows those"):
        merge_results([source], tmp_path / "results")


def test_git_commit_is_dirty_for_modified_code_but_not_for_the_outputs_it_is_told_of(tmp_path, monkeypatch):
    import subprocess

    import forecast
    from forecast.training import git_commit

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "pkg").mkdir()
    (tmp_path / "results").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("x = 1\n")
    (tmp_path / "results" / "rows.csv").write_text("a\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init")
    monkeypatch.setattr(forecast, "__file__", str(tmp_path / "pkg" / "__init__.py"))
    clean = git_commit()
    assert len(clean) == 12 and not clean.endswith("-dirty")
    (tmp_path / "results" / "rows.csv").write_text("a\n1\n")
    assert git_commit(outputs=[tmp_path / "results"]) == clean
    assert git_commit() == clean + "-dirty"
    (tmp_path / "pkg" / "__init__.py").write_text("x = 2\n")
    assert git_commit(outputs=[tmp_path / "results"]) == clean + "-dirty"
    assert git_commit(outputs=[tmp_path.parent / "results elsewhere"]) == clean + "-dirty"  # not "unknown"
    # A copied tree without .git (a lent GPU machine's) is stamped with the commit it was copied from.
    monkeypatch.setenv("FORECAST_COMMIT", "0123456789ab")
    assert git_commit() == clean + "-dirty"  # git, where there is a checkout
    monkeypatch.setattr(forecast, "__file__", str(tmp_path / "copied" / "pkg" / "__init__.py"))
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    (tmp_path / "copied" / "pkg").mkdir(parents=True)
    assert git_commit() == "0123456789ab"
    monkeypatch.delenv("FORECAST_COMMIT")
    assert git_commit() == "unknown"
    # An installed package inside another project's checkout (myproject/.venv/lib/python3.x/site-packages/pkg) is
    # not that project's commit.
    monkeypatch.delenv("GIT_CEILING_DIRECTORIES")
    installed = tmp_path / ".venv" / "lib" / "site-packages" / "pkg"
    installed.mkdir(parents=True)
    monkeypatch.setattr(forecast, "__file__", str(installed / "__init__.py"))
    assert git_commit() == "unknown"
    # A checkout whose path holds a space (git's answers were split on it), and one vendored in a subfolder.
    spaced = tmp_path / "with space" / "pkg"
    spaced.mkdir(parents=True)
    (spaced / "__init__.py").write_text("x = 3\n")
    git("add", "with space")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "vendored")
    monkeypatch.setattr(forecast, "__file__", str(spaced / "__init__.py"))
    assert len(git_commit()) == 12


def test_the_synthetic_panel_has_series_of_their_own_and_the_promotion_lift_it_says(tmp_path):
    script = load_script("make_panel")
    panel, params = script.make_panel(n_series=40, seed=3, min_length=300, max_length=900, max_start=500)
    again, _ = script.make_panel(n_series=40, seed=3, min_length=300, max_length=900, max_start=500)
    pd.testing.assert_frame_equal(panel, again)  # a seed makes the same panel
    assert list(panel.columns) == ["unique_id", "ds", "y", "promo", "region"]
    assert params["unique_id"].is_unique and len(params) == 40
    assert params["length"].nunique() > 30 and params["start"].nunique() > 30 and set(params["season"]) == {24, 168}
    for truth in params.itertuples():
        rows = panel[panel["unique_id"] == truth.unique_id]
        assert len(rows) == truth.length and rows["ds"].iloc[0] == truth.start
        assert (rows["ds"].diff().dropna() == pd.Timedelta(hours=1)).all()  # regular hourly, in order
        assert rows["region"].nunique() == 1  # static
        # Least squares on the generating regressors recovers the lift (noise 0.3, hundreds of hours).
        t = np.arange(truth.length)
        design = np.column_stack([np.ones_like(t), t, np.sin(2 * np.pi * t / truth.season),
                                  np.cos(2 * np.pi * t / truth.season), rows["promo"].to_numpy()])
        coefficients, *_ = np.linalg.lstsq(design, rows["y"].to_numpy(), rcond=None)
        if rows["promo"].sum() >= 24:  # a short series may see no promotion at all
            assert coefficients[-1] == pytest.approx(truth.lift, abs=0.15)
    promoted = panel.groupby("unique_id")["promo"].sum()
    assert (promoted >= 24).mean() > 0.6 and 0.05 < panel["promo"].mean() < 0.2
    assert script.main(["--series", "3", "--output", str(tmp_path / "p.csv"), "--params", str(tmp_path / "t.csv")]) == 0
    assert pd.read_csv(tmp_path / "p.csv")["unique_id"].nunique() == 3 and len(pd.read_csv(tmp_path / "t.csv")) == 3


def test_from_wide_writes_each_column_as_a_series_of_its_own_in_the_long_format(tmp_path, monkeypatch):
    from forecast import datasets
    from forecast.data import prepare_panel

    script = load_script("make_panel")
    dates = pd.date_range("2016-07-01", periods=20, freq="h")
    columns = ["MT_320", "MT_001", "OT"]  # not in alphabetical order, as ETTh1's and electricity's are not
    values = np.random.default_rng(0).integers(-400, 400, size=(20, 3)) / 8  # exact in a CSV round trip
    wide = pd.DataFrame(values, columns=columns).assign(date=dates.strftime("%Y-%m-%d %H:%M:%S"))
    wide[["date", *columns]].to_csv(tmp_path / "electricity.csv", index=False)
    # A registered name resolves to this tiny file (the real one is checksummed: verify=False).
    real_load = datasets.load
    monkeypatch.setattr(datasets, "load", lambda name: real_load(name, path=tmp_path / "electricity.csv", verify=False))
    output = tmp_path / "electricity_panel.csv"
    assert script.main(["--from-wide", "electricity", "--output", str(output)]) == 0
    long = pd.read_csv(output, parse_dates=["ds"])
    assert list(long.columns) == ["unique_id", "ds", "y"]
    assert len(long) == 20 * 3 and not long.duplicated(["unique_id", "ds"]).any()  # one row per (id, date)
    # Grouped by series in the wide table's column order (kept: the series order of ETTh1_panel), each in time order.
    assert list(long["unique_id"].unique()) == columns
    assert list(long["unique_id"]) == [column for column in columns for _ in dates]
    for column in columns:
        rows = long[long["unique_id"] == column]
        assert list(rows["ds"]) == list(dates)  # the dates as they were, in order
        assert rows["y"].tolist() == wide[column].tolist()  # the wide cells, exactly
    panel = prepare_panel(output, id_column="unique_id", date_column="ds", target="y")
    assert [series.id for series in panel.series] == columns and panel.freq == pd.tseries.frequencies.to_offset("h")
    for series, column in zip(panel.series, columns):
        assert series.dates.equals(dates) and np.array_equal(series.target, wide[column].to_numpy())


SHELL_SCRIPTS = sorted(path.relative_to(ROOT) for folder in ("experiments", "benchmarks")
                       for path in (ROOT / folder).glob("*.sh"))


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=str)
def test_the_repository_shell_scripts_parse(script):
    """The device scripts run where no one watches (a lent GPU's one call): a syntax error must show up here."""
    done = subprocess.run(["bash", "-n", str(ROOT / script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_device_grids_default_sweeps_name_configured_models_and_datasets():
    """A lent GPU's one call runs device_grid.sh's default sweeps unwatched: a misspelt model or dataset there
    plans no run and wastes the loan, so every sweep must parse as `forecast sweep`'s options and every pair it
    names must have the grid's configs."""
    from forecast.cli import build_parser

    script = (ROOT / "experiments" / "device_grid.sh").read_text()
    block = re.search(r"^  sweeps=\(\n(.*?)^  \)", script, re.S | re.M)[1]
    specs = re.findall(r'^\s*"([^"]+)"', block, re.M)
    assert len(specs) >= 3
    for spec in specs:
        options = build_parser().parse_args(["sweep", *spec.split()])  # the sweep's own parser: SystemExit if wrong
        for dataset in options.datasets:
            for model in options.models:
                configs = list((ROOT / "experiments" / "long_horizon" / dataset).glob(f"{model}_M_*.yaml"))
                assert len(configs) == 4, (spec, dataset, model)


def test_background_sweep_starts_a_worker_from_a_worktree_pinned_at_the_commit(tmp_path):
    """experiments/background_sweep.sh: the worktree at HEAD, the worker detached with its pid and log, runs
    in GRID_DIR/runs (here a dry run, which plans and trains nothing)."""
    if not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout")
    grid = tmp_path / "grid"
    (tmp_path / "no-data").mkdir()
    environment = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GRID_DIR": str(grid), "PYTHON": sys.executable,
                   "FORECAST_DATA_DIR": str(tmp_path / "no-data")}
    head = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    tree = grid / f"wt-{head}"
    try:
        started = subprocess.run(["bash", "experiments/background_sweep.sh", "A", "--datasets", "ETTh1", "--models",
                                  "naive", "--horizons", "96", "--seeds", "0", "--dry_run"],
                                 cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120)
        assert started.returncode == 0, started.stderr
        assert f"code at {head} ({tree})" in started.stdout
        pid = int((grid / "A.pid").read_text())
        for _ in range(1200):  # the worker imports torch: up to a minute on a loaded machine
            if not Path(f"/proc/{pid}").exists():
                break
            time.sleep(0.1)
        log = (grid / "A.log").read_text()
        assert "experiments/long_horizon/ETTh1/naive_M_96.yaml" in log and "1 run:" in log
        assert (tree / "forecast" / "__init__.py").is_file()
        missing = subprocess.run(["bash", "experiments/background_sweep.sh"], cwd=ROOT, env=environment,
                                 capture_output=True, text=True, timeout=60)
        assert missing.returncode == 2 and "usage:" in missing.stderr
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)
        subprocess.run(["git", "worktree", "prune"], cwd=ROOT, capture_output=True)


def test_background_sweep_resumes_a_worker_at_its_commit_with_the_data_it_was_given(tmp_path):
    """The same command moved a worker's partial runs onto the code of a newer HEAD; a relative
    FORECAST_DATA_DIR, as the usage line gives it, named nothing from the worktree the worker runs in (every
    dataset missing, ETTh1 and ETTh2 read from the package's embedded copies instead); and a worktree whose
    folder was lost with GRID_DIR could not be added again ("a missing but already registered worktree")."""
    if not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout")
    previous = subprocess.run(["git", "rev-parse", "--short=7", "HEAD~1"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    grid, data = tmp_path / "grid", tmp_path / "data"
    data.mkdir()
    fake_python = tmp_path / "bin" / "python"  # writes what the worker would run with into its log
    fake_python.parent.mkdir()
    fake_python.write_text('#!/bin/sh\necho "data=$FORECAST_DATA_DIR cwd=$PWD"\n')
    fake_python.chmod(0o755)
    environment = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GRID_DIR": str(grid), "PYTHON": str(fake_python),
                   "FORECAST_DATA_DIR": os.path.relpath(data, ROOT)}
    tree = grid / f"wt-{previous}"

    def start(*options: str, **extra: str) -> str:
        started = subprocess.run(["bash", "experiments/background_sweep.sh", "A", "--dry_run", *options], cwd=ROOT,
                                 env={**environment, **extra}, capture_output=True, text=True, timeout=120)
        assert started.returncode == 0, started.stderr
        pid = int((grid / "A.pid").read_text())
        for _ in range(600):
            if not Path(f"/proc/{pid}").exists():
                break
            time.sleep(0.1)
        return started.stdout

    try:
        assert f"code at {previous} ({tree})" in start(COMMIT=previous)
        assert (grid / "A.log").read_text().splitlines()[-1] == f"data={data} cwd={tree}"
        assert f"resuming at its commit {previous}" in start()  # not HEAD: the commit its runs started at
        subprocess.run(["rm", "-rf", str(tree)], check=True)  # GRID_DIR lost, the checkout kept
        assert f"code at {previous} ({tree})" in start()
        head = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        another = subprocess.run(["bash", "experiments/background_sweep.sh", "A", "--dry_run", "--seeds", "1"],
                                 cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120)
        # another sweep under the same name: its partial runs, in the shared run folders, would resume on HEAD
        assert another.returncode == 2 and f"worker A was started at {previous}" in another.stderr
        assert f"Fix: COMMIT={previous} to go on at its commit, COMMIT=HEAD" in another.stderr
        (grid / "A.commit").write_text(f"{previous}\n")  # a record written before the options were: one line
        assert f"resuming at its commit {previous}" in start("--seeds", "1")
        (grid / "A.commit").write_text("")  # an empty record is none
        assert f"code at {head} " in start()
        subprocess.run(["git", "worktree", "remove", "--force", str(grid / f"wt-{head}")], cwd=ROOT,
                       capture_output=True)
        missing = subprocess.run(["bash", "experiments/background_sweep.sh", "A"], cwd=ROOT, capture_output=True,
                                 env={**environment, "FORECAST_DATA_DIR": str(tmp_path / "nowhere")}, text=True)
        assert missing.returncode == 2 and f"FORECAST_DATA_DIR={tmp_path / 'nowhere'} is not a folder" in missing.stderr
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)
        subprocess.run(["git", "worktree", "prune"], cwd=ROOT, capture_output=True)


def test_exchange_rate_floor_cuts_the_data_modules_windows_and_fits_its_families_exactly(tmp_path, capsys):
    """The windows are the data module's, scaled; a ridge map penalized without bound forecasts the last value;
    the level regression recovers a per-variable linear reversion exactly; the table marks one chosen member."""
    from forecast.data import WindowDataModule

    script = load_script("exchange_rate_floor")
    data = WindowDataModule(str(toy_csv(tmp_path)), 24, 12, 6, features="M")
    x, y = script.split_windows(data, "val")
    dataset = data.dataset("val")
    assert x.shape[0] == len(dataset)
    for index in (0, len(dataset) - 1):
        torch.testing.assert_close(x[index].float(), dataset[index]["x"])
        torch.testing.assert_close(y[index].float(), dataset[index]["y"][12:])
    torch.testing.assert_close(script.ridge(x, y, 1e12)(x), script.naive(6)(x), atol=1e-6, rtol=0)

    generator = torch.Generator().manual_seed(0)
    x = torch.randn(64, 24, 3, generator=generator, dtype=torch.float64)
    slopes = torch.tensor([0.5, -0.3, 0.1], dtype=torch.float64)  # [C], each variable its own
    change = (slopes * x[:, -1] - 0.2 * x.mean(1) + 0.1)[:, None].expand(-1, 6, -1)  # [N, P, C]
    y = x[:, -1:] + change * torch.linspace(0.5, 1, 6, dtype=torch.float64)[:, None]  # the step scales it
    torch.testing.assert_close(script.level(x, y)(x), y)
    assert script.mse(script.naive(6), (x, y)) > 0

    script.main(["--dataset", str(toy_csv(tmp_path)), "--horizons", "6", "--mixes", "0.5", "0.9"])
    printed = capsys.readouterr().out
    assert printed.count("(chosen)") == 2  # centre and ridge: naive and level have one member each


def test_a_setting_summarized_over_seeds_counts_each_seed_once_over_one_set_of_windows(tmp_path):
    """A seed recorded twice weighed twice in the mean (the seed count said one), and seeds scored on different
    test windows were averaged (the table showed the fewest windows)."""
    from forecast.errors import DataError
    from forecast.report import summarize

    for seed, mse in ((0, 0.5), (1, 0.7)):
        append_row(tmp_path / "toy.csv", row(seed=seed, mse=mse, n_test_windows=10))
    rows = read_results(tmp_path / "toy.csv")
    summary = summarize(rows)
    assert summary["seeds"].tolist() == [2] and summary["mse"].tolist() == [pytest.approx(0.6)]
    with pytest.raises(DataError, match="toy naive 0/0/0 seed 0: 2 rows of one run.*Fix: keep one"):
        summarize(pd.concat([rows, rows.iloc[:1].assign(command="y")]))
    with pytest.raises(DataError, match="different numbers of test windows"):
        summarize(rows.assign(n_test_windows=[10, 12]))


def test_long_horizon_intro_names_the_training_configured_beyond_the_recipe_and_where():
    """ETTm1, ETTm2 and weather train on a quarter of their windows each epoch: the table's text gave the recipe's
    training as every cell's."""
    script = load_script("long_horizon")
    quarter = json.dumps({**get_recipe("improved").training, "limit_train_batches": 0.25})
    cells = pd.DataFrame([
        {"dataset": "ETTh1", "pred_len": 96, "entry": "informer", "mse": 0.39, "mae": 0.4, "seeds": 3,
         "training": json.dumps(dict(get_recipe("improved").training))},
        {"dataset": "ETTm1", "pred_len": 96, "entry": "informer", "mse": 0.33, "mae": 0.4, "seeds": 1,
         "training": quarter},
        {"dataset": "ETTm1", "pred_len": 96, "entry": "DLinear (published)", "mse": 0.34, "mae": 0.4, "seeds": None,
         "training": None},
        {"dataset": "national_illness", "pred_len": 24, "entry": "dlinear", "mse": 2.8, "mae": 1.1, "seeds": 1,
         "training": json.dumps({**get_recipe("improved").training, "learning_rate": 0.1})},
        {"dataset": "ETTh2", "pred_len": 96, "entry": "informer", "mse": 0.3, "mae": 0.3, "seeds": 1,
         "training": json.dumps({**get_recipe("improved").training, "learning_rate": 0.1})},
    ])
    text = script.render(cells, ("ETTh1", "ETTh2", "ETTm1", "national_illness"), summaries=False)
    # one setting for one model here and another there: never "on both, for both"
    assert '; on ETTh2 also {"learning_rate": 0.1} for `informer`' in text
    assert ('; on ETTm1 also {"limit_train_batches": 0.25} for `informer` (a share of the training windows each '
            'epoch') in text
    # DLinear's setting too, and for whom: its ILI learning rate was missing from the text (only ours were read)
    assert '; on national_illness also {"learning_rate": 0.1} for `dlinear`' in text
    assert "ETTh1 also" not in text


def test_a_published_figure_is_cited_beside_a_row_measured_at_its_very_window():
    """Input 96 with label 0 and with label 48 are two windows: a figure measured at one was cited at the other."""
    from forecast.report import _cited

    published = pd.DataFrame([
        {"dataset": "ETTh1", "features": "M", "model": "informer", "pred_len": 96, "seq_len": 96, "label_len": 0,
         "mse": 0.9, "mae": 0.7},
        {"dataset": "ETTh1", "features": "M", "model": "informer", "pred_len": 96, "seq_len": 96, "label_len": 48,
         "mse": 0.8, "mae": 0.6},
        {"dataset": "ETTh1", "features": "M", "model": "informer", "pred_len": 96, "seq_len": float("nan"),
         "label_len": float("nan"), "mse": 0.7, "mae": 0.5},
    ])
    assert _cited(published, "ETTh1", "M", "informer", 96, 96, 48, configured=False).mse == 0.8
    assert _cited(published, "ETTh1", "M", "informer", 96, 96, 0, configured=False).mse == 0.9
    assert _cited(published, "ETTh1", "M", "informer", 96, 336, 48, configured=False) is None
    assert _cited(published, "ETTh1", "M", "informer", 96, 336, 48, configured=True).mse == 0.7  # the paper's own


def test_a_summary_cell_shows_the_configured_run_not_another_recipe_or_data_options_row():
    """Rows of the same model and window under another recipe or with data options (a split) sit in one results
    file: the cell matched neither the data options (a split's row was shown) nor, had it dropped it, the recipe."""
    from forecast.report import PUBLISHED_COLUMNS, PUBLISHED_WINDOW, summary_tables

    def result(**changed):
        return {**row(model="informer", seq_len=96, label_len=48, pred_len=24, recipe="improved", mse=0.9, mae=0.5,
                      mse_orig=1.0, mae_orig=1.0, n_test_windows=10, epochs=1, train_seconds=60, device="cpu"),
                **{column: float("nan") for column in OPTIONAL_NUMBERS}, **changed}

    results = pd.DataFrame([result(), result(recipe="paper", mse=0.5), result(data='{"split": [0.6, 0.2, 0.2]}',
                                                                              mse=0.4)])
    settings = pd.DataFrame([{"dataset": "toy", "model": "informer", "features": "M", "seq_len": 96, "label_len": 48,
                              "pred_len": 24, "recipe": "improved", "options": "{}", "training": "{}", "data": "{}",
                              "config": "toy/informer_M_24.yaml"}])
    table = summary_tables(results, settings, pd.DataFrame(columns=[*PUBLISHED_COLUMNS, *PUBLISHED_WINDOW]))
    assert "| 24 | 96/48 | 0.900 / 0.500 (1) |" in table


def test_device_unpack_reads_a_files_folder_named_relative_to_where_it_is_run(tmp_path):
    """It moved into the checkout before reading FILES_AT and RUNS_DIR, so the device tool's folder named from
    anywhere else was "no results.tar.gz", and a relative RUNS_DIR was made inside the checkout."""
    packed = tmp_path / "pack" / "results"
    packed.mkdir(parents=True)  # what device_grid.sh returns, with no rows in it
    (tmp_path / "files").mkdir()
    subprocess.run(["tar", "-czf", str(tmp_path / "files" / "results.tar.gz"), "-C", str(packed.parent), "results"],
                   check=True)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')  # named from here
    (tmp_path / "bin" / "python").chmod(0o755)
    unpacked = subprocess.run(["bash", str(ROOT / "experiments" / "device_unpack.sh"), "files", "runs"],
                              cwd=tmp_path, env={**os.environ, "PYTHON": "bin/python"}, capture_output=True,
                              text=True, timeout=300)
    assert unpacked.returncode == 0, unpacked.stderr
    assert f"0 saved forecasters in {tmp_path / 'runs'}" in unpacked.stdout


def test_device_unpack_keeps_the_whole_runs_of_an_archive_cut_short(tmp_path):
    """The ninth loan's device tool left out runs.tar's last parts (past its 64 MiB together): tar stopped at the
    cut with an error, and the script exited before merging any row. Now the rows merge first, the runs before
    the cut are kept, and the one tar was writing at the cut is dropped, not kept half-written."""
    pack = tmp_path / "pack"
    (pack / "results").mkdir(parents=True)
    for name, size in (("run-a", 1000), ("run-b", 400_000)):  # smallest first, as device_grid.sh packs them
        (pack / "runs" / name).mkdir(parents=True)
        (pack / "runs" / name / "model.pt").write_bytes(os.urandom(size))
        for saved in ("config.json", "scaler.json"):  # a saved forecaster's three files, as device_grid.sh packs
            (pack / "runs" / name / saved).write_text("{}")
    files = tmp_path / "files"
    files.mkdir()
    subprocess.run(["tar", "-czf", str(files / "results.tar.gz"), "-C", str(pack), "results"], check=True)
    subprocess.run(f"tar -cf - -C {pack} runs/run-a runs/run-b | split -b 100k -d - {files}/runs.tar.part-",
                   shell=True, check=True)
    parts = sorted(files.glob("runs.tar.part-*"))
    assert len(parts) == 4
    parts[-1].unlink()  # what the device tool left out
    unpacked = subprocess.run(["bash", str(ROOT / "experiments" / "device_unpack.sh"), str(files), str(tmp_path / "r")],
                              env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True,
                              timeout=300)
    assert unpacked.returncode == 0, unpacked.stderr
    assert "runs/run-b left out" in unpacked.stderr
    assert sorted(path.name for path in (tmp_path / "r").iterdir()) == ["run-a"]
    assert (tmp_path / "r" / "run-a" / "model.pt").stat().st_size == 1000


def _cut_runs_archive(tmp_path, cut_at):
    """device_grid.sh's results.tar.gz and runs.tar of five runs, run-a to run-e, in parts of 17 KiB (each run's
    config.json, scaler.json then model.pt: 15 KiB a run, as tar's readdir order may put them); ``cut_at(parts)``
    names the parts the device tool left out. Returns device_unpack.sh's result and the runs folder."""
    pack = tmp_path / "pack"
    (pack / "results").mkdir(parents=True)
    names = [f"run-{letter}" for letter in "abcde"]
    for name in names:
        (pack / "runs" / name).mkdir(parents=True)
        (pack / "runs" / name / "model.pt").write_bytes(os.urandom(12_800))  # 15 KiB a run with the 3 headers
        for saved in ("config.json", "scaler.json"):
            (pack / "runs" / name / saved).write_text("{}")
    files = tmp_path / "files"
    files.mkdir()
    subprocess.run(["tar", "-czf", str(files / "results.tar.gz"), "-C", str(pack), "results"], check=True)
    members = " ".join(f"runs/{name}/{saved}" for name in names for saved in ("config.json", "scaler.json", "model.pt"))
    subprocess.run(f"tar -cf - -C {pack} {members} | split -b 17k -d - {files}/runs.tar.part-", shell=True,
                   check=True)
    for part in cut_at(sorted(files.glob("runs.tar.part-*"))):
        part.unlink()
    unpacked = subprocess.run(["bash", str(ROOT / "experiments" / "device_unpack.sh"), str(files), str(tmp_path / "r")],
                              env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True,
                              timeout=300)
    return unpacked, tmp_path / "r"


def test_device_unpack_drops_a_run_cut_where_a_file_starts(tmp_path):
    """Cut exactly at a member's header (split's parts are 512-byte aligned, as tar's members), tar exits 0: the
    run it was packing came back without its model.pt and was kept as a saved forecaster."""
    # the first 17 KiB part holds run-a and run-b's config.json and scaler.json: the cut is where its model.pt starts
    unpacked, runs = _cut_runs_archive(tmp_path, lambda parts: parts[1:])
    assert unpacked.returncode == 0, unpacked.stderr
    assert "run-b lacks files" in unpacked.stderr
    assert sorted(path.name for path in runs.iterdir()) == ["run-a"]


def test_device_unpack_reads_no_part_past_one_left_out(tmp_path):
    """A middle part left out (the last, smaller one still fitting the device tool's 64 MiB): cat joined the parts
    either side of the gap, so run-c's model.pt, begun before it, was completed with a later run's bytes, and tar
    found the next header in step and exited 0: run-c was kept, its weights garbage."""
    unpacked, runs = _cut_runs_archive(tmp_path, lambda parts: parts[2:3])
    assert unpacked.returncode == 0, unpacked.stderr
    assert sorted(path.name for path in runs.iterdir()) == ["run-a", "run-b"]


def test_device_unpack_drops_the_cut_run_of_a_folder_named_with_letters_tar_escapes(tmp_path):
    """tar -v escapes a name's non-ASCII letters in the C locale (a run of a user's données.csv) and its
    backslashes: the listing's last name was no folder, so the run tar was writing at the cut was kept, its
    config.json and scaler.json whole and its model.pt cut short."""
    pack = tmp_path / "pack"
    (pack / "results").mkdir(parents=True)
    run = pack / "runs" / "dataset=donn\u00e9es\\x@1_model=dlinear-0123456789"
    run.mkdir(parents=True)
    for saved in ("config.json", "scaler.json"):
        (run / saved).write_text("{}")
    (run / "model.pt").write_bytes(os.urandom(40_000))
    files = tmp_path / "files"
    files.mkdir()
    subprocess.run(["tar", "-czf", str(files / "results.tar.gz"), "-C", str(pack), "results"], check=True)
    members = " ".join(f"'runs/{run.name}/{saved}'" for saved in ("config.json", "scaler.json", "model.pt"))
    subprocess.run(f"tar -cf - -C {pack} {members} | split -b 20k -d - {files}/runs.tar.part-", shell=True,
                   check=True)
    sorted(files.glob("runs.tar.part-*"))[-1].unlink()  # the cut: inside model.pt
    unpacked = subprocess.run(["bash", str(ROOT / "experiments" / "device_unpack.sh"), str(files), str(tmp_path / "r")],
                              env={**os.environ, "PYTHON": sys.executable, "LC_ALL": "C"}, capture_output=True,
                              text=True, timeout=300)
    assert unpacked.returncode == 0, unpacked.stderr
    assert list((tmp_path / "r").iterdir()) == []
