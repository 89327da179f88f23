"""`forecast sweep`: one atomic row per run, finished rows skipped, killed runs resumed, nothing lost."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from lightning.pytorch.callbacks import Callback

from forecast.cli import main
from forecast.errors import ConfigError
from forecast.experiment import Experiment
from forecast.recipes import get_recipe
from forecast.results import KEY, read_results, update_rows
from forecast.sweep import SweepSpec, parse_shard, plan_sweep, run_sweep

ROOT = Path(__file__).resolve().parent.parent
ROWS = 240
INFORMER = {"name": "informer", "d_model": 8, "n_heads": 2, "d_ff": 8, "e_layers": 1, "d_layers": 1, "factor": 2}


class Killed(BaseException):
    """Stands for the process being killed: not an Exception, so nothing on the way catches it."""


class KillAtSecondEpoch(Callback):
    """Kills the ``victim``-th training run (counted over the sweep) when its second epoch starts."""

    def __init__(self, victim: int) -> None:
        self.victim, self.fits = victim, 0

    def on_fit_start(self, trainer, pl_module) -> None:
        self.fits += 1

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        if self.fits == self.victim and trainer.current_epoch == 1:
            raise Killed


def write_config(folder: Path, model: dict, csv: Path, max_epochs: int = 2, pred_len: int = 4, features: str = "M",
                 **top) -> Path:
    config = {"model": model,
              "data": {"dataset": str(csv), "features": features, "seq_len": 16, "label_len": 8, "pred_len": pred_len,
                       "batch_size": 32},
              "trainer": {"max_epochs": max_epochs, "learning_rate": 1e-3, "patience": 5}, **top}
    path = folder / f"{model['name']}_{features}_{pred_len}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def toy_configs(tmp_path: Path, monkeypatch, *models: dict) -> Path:
    """configs/toy/<model>_M_4.yaml of ``models`` over a 240-row synthetic toy.csv (returned); cwd = tmp_path."""
    t = np.arange(ROWS)
    csv = tmp_path / "toy.csv"
    pd.DataFrame({"date": pd.date_range("2023-01-01", periods=ROWS, freq="h"), "a": np.sin(t / 4.0),
                  "OT": np.cos(t / 6.0) + 2.0}).to_csv(csv, index=False)
    configs = tmp_path / "configs" / "toy"
    configs.mkdir(parents=True)
    for model in models:
        write_config(configs, model, csv)
    monkeypatch.chdir(tmp_path)
    return csv


def toy_spec(tmp_path: Path) -> SweepSpec:
    return SweepSpec(configs_dir=tmp_path / "configs", results_dir=tmp_path / "results", runs_dir=tmp_path / "runs")


@pytest.fixture
def sweep_dirs(tmp_path, monkeypatch):
    """configs/toy/{naive,informer}_M_4.yaml over a 240-row synthetic toy.csv; cwd = tmp_path."""
    toy_configs(tmp_path, monkeypatch, {"name": "naive"}, INFORMER)
    return toy_spec(tmp_path)


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """``(toy.csv, the spec)`` of configs/toy/naive_M_4.yaml alone."""
    return toy_configs(tmp_path, monkeypatch, {"name": "naive"}), toy_spec(tmp_path)


def test_a_run_whose_data_is_missing_fails_alone_with_its_message_and_no_traceback(sweep_dirs, caplog):
    missing = sweep_dirs.configs_dir / "gone"
    missing.mkdir()
    write_config(missing, {"name": "naive"}, Path("missing.csv"))
    summary = run_sweep(sweep_dirs)
    assert len(summary.ran) == 2 and [run.experiment.dataset for run, _ in summary.failed] == ["missing.csv"]
    (failure,) = [record for record in caplog.records if "failed" in record.getMessage()]
    assert "missing.csv" in failure.getMessage() and not failure.exc_info  # a DataError says it all


def test_every_row_of_a_sweep_records_the_commit_its_process_started_at(toy, monkeypatch):
    """Each run read the commit as it started: after the checkout moved, a later run of the same process recorded
    the new commit, clean, for the code imported at the process's start."""
    import forecast.experiment
    import forecast.sweep

    reads = iter(["0123abcd"])
    later = "4567ef01"  # the checkout moved once the sweep started
    monkeypatch.setattr(forecast.sweep, "git_commit", lambda **_: next(reads, later))
    monkeypatch.setattr(forecast.experiment, "git_commit", lambda **_: next(reads, later))
    _, spec = toy
    summary = run_sweep(spec.updated(seeds=[0, 1]))
    assert len(summary.ran) == 2
    assert read_results(spec.results_dir / "toy.csv")["commit"].tolist() == ["0123abcd-dirty"] * 2


def test_sweep_appends_one_row_per_run_and_a_second_sweep_adds_none(sweep_dirs):
    spec = sweep_dirs.updated(seeds=[0, 1])
    summary = run_sweep(spec)
    assert len(summary.ran) == 4 and not summary.failed and not summary.skipped
    results = spec.results_dir / "toy.csv"
    frame = read_results(results)
    assert sorted(zip(frame.model, frame.seed)) == [("informer", 0), ("informer", 1), ("naive", 0), ("naive", 1)]
    assert not frame.duplicated(KEY).any()
    assert set(frame.epochs[frame.model == "informer"]) == {2} and set(frame.epochs[frame.model == "naive"]) == {0}
    # every row names the command that reproduces that one run
    informer = frame[(frame.model == "informer") & (frame.seed == 1)].iloc[0]
    assert informer.command == "forecast sweep --config configs/toy/informer_M_4.yaml --seeds 1"
    # a results folder other than the default is part of the command that reproduces the row
    elsewhere = plan_sweep(spec.updated(results_dir=spec.results_dir.parent / "other", seeds=[1]))
    assert elsewhere[0].command.endswith("--seeds 1 --results_dir other")
    # ... and so is a runs folder other than the default, where the run's checkpoints are
    elsewhere = plan_sweep(spec.updated(runs_dir=spec.runs_dir.parent / "other_runs", seeds=[1]))
    assert elsewhere[0].command.endswith("--seeds 1 --runs_dir other_runs")
    assert json.loads(informer.options) == {**get_recipe("improved").options_for("informer"),
                                            **{k: v for k, v in INFORMER.items() if k != "name"}}

    before = results.read_bytes()
    again = run_sweep(spec)
    assert not again.ran and len(again.skipped) == 4
    assert results.read_bytes() == before
    assert sorted(p.name for p in results.parent.iterdir()) == [".toy.csv.lock", "toy.csv"]  # no temporary files


def test_a_sweep_run_keeps_the_quantile_levels_its_config_names(sweep_dirs, tmp_path):
    """A run trained by `forecast sweep` saved the default quantile levels whatever the config's `quantiles:`
    said, so Forecaster.load(run).predict() gave other columns than `forecast fit` with the same config. The
    levels are not part of the run's key: its folder and row are those of the config without them."""
    from forecast import Forecaster

    folder = tmp_path / "quantiled"
    folder.mkdir()
    path = write_config(folder, {"name": "seasonal_naive", "season_length": 8}, tmp_path / "toy.csv")
    without = plan_sweep(sweep_dirs.updated(configs=[path]))[0]
    path.write_text(yaml.safe_dump({**yaml.safe_load(path.read_text()), "quantiles": [0.2, 0.8]}))
    (run,) = plan_sweep(sweep_dirs.updated(configs=[path]))
    assert run.run_dir == without.run_dir and run.experiment.key() == without.experiment.key()
    assert len(run_sweep(sweep_dirs.updated(configs=[path])).ran) == 1
    forecaster = Forecaster.load(run.run_dir)
    assert forecaster.quantile_levels == (0.2, 0.8)
    assert [c for c in forecaster.predict(tmp_path / "toy.csv").columns if "_q" in c] == [
        "a_q0.2", "a_q0.8", "OT_q0.2", "OT_q0.8"]


def test_a_mistyped_set_option_is_named_with_the_sweeps_own_flag(sweep_dirs, capsys):
    """`forecast sweep --set trainer.max_epoch=2` named the right option, but spelled it `--trainer.max_epochs`
    and sent the user to `forecast fit --help`, flags sweep does not take: the fix is now a --set."""
    config = str(sweep_dirs.configs_dir / "toy" / "naive_M_4.yaml")
    assert main(["sweep", "--config", config, "--set", "trainer.max_epoch=2", "--dry_run"]) == 2
    error = capsys.readouterr().err
    assert "Did you mean --set trainer.max_epochs=VALUE?" in error and "Valid trainer options: [" in error
    assert "Fix: --set section.key=VALUE" in error and "see `forecast fit --help`" not in error
    assert main(["sweep", "--config", config, "--set", "trainer.max_epochs=many", "--dry_run"]) == 2
    assert "Fix: --set section.key=VALUE" in capsys.readouterr().err


def test_a_killed_sweep_loses_no_finished_row_and_resumes_the_interrupted_run(sweep_dirs):
    spec = sweep_dirs.updated(models=["informer"], seeds=[0, 1])
    with pytest.raises(Killed):
        run_sweep(spec, callbacks=[KillAtSecondEpoch(victim=2)])
    results = spec.results_dir / "toy.csv"
    frame = read_results(results)
    finished = frame.iloc[0].to_dict()
    assert frame.seed.tolist() == [0]  # the run that finished before the kill is recorded
    statuses = {run.experiment.seed: run.status() for run in plan_sweep(spec)}
    assert statuses == {0: "done", 1: "partial"}  # the killed run left its epoch-0 checkpoint
    killed_run = next(run for run in plan_sweep(spec) if run.experiment.seed == 1)
    checkpoint = killed_run.run_dir / "checkpoints" / "last.ckpt"
    assert torch.load(checkpoint, map_location="cpu", weights_only=True)["epoch"] == 0

    summary = run_sweep(spec)
    assert [run.experiment.seed for run in summary.ran] == [1] and len(summary.skipped) == 1
    frame = read_results(results)
    pd.testing.assert_series_equal(frame.iloc[0], pd.Series(finished, name=0))  # the finished row is untouched
    assert frame.seed.tolist() == [0, 1] and frame.epochs.tolist() == [2, 2]
    assert torch.load(checkpoint, map_location="cpu", weights_only=True)["epoch"] == 1  # resumed, not restarted


def test_a_damaged_checkpoint_fails_its_run_and_the_sweep_goes_on(sweep_dirs, capsys):
    """A truncated last.ckpt stopped the whole sweep (and its --dry_run) before any run: the healthy ones never ran."""
    spec = sweep_dirs.updated(models=["informer"], seeds=[0, 1])
    damaged = next(run for run in plan_sweep(spec) if run.experiment.seed == 0)
    (damaged.run_dir / "checkpoints").mkdir(parents=True)
    (damaged.run_dir / "checkpoints" / "last.ckpt").write_bytes(b"PK\x03\x04 torn")
    assert [run.status() for run in plan_sweep(spec)] == ["unreadable", "pending"]
    assert main(["sweep", "--configs_dir", "configs", "--results_dir", "results", "--runs_dir", "runs", "--models",
                 "informer", "--seeds", "0", "1", "--dry_run"]) == 0
    assert "2 runs: 0 done, 0 partial, 1 pending, 1 unreadable" in capsys.readouterr().out
    summary = run_sweep(spec)
    assert [run.experiment.seed for run in summary.ran] == [1]
    [(failed, error)] = summary.failed
    assert failed.experiment.seed == 0 and "last.ckpt cannot be read as a checkpoint" in str(error)


def test_a_results_file_that_holds_no_results_is_named_with_the_fix(sweep_dirs):
    """The sweep's data file in its results folder (or a torn results file) ended in a pandas KeyError or
    ParserError deep in the sweep; the data file was left as it was."""
    spec = sweep_dirs.updated(models=["naive"], seeds=[0])
    spec.results_dir.mkdir(parents=True, exist_ok=True)
    data = (sweep_dirs.configs_dir.parent / "toy.csv").read_text()
    (spec.results_dir / "toy.csv").write_text(data)
    with pytest.raises(ConfigError, match=r"toy.csv is not a results file: it lacks the columns .*Fix: move it out "
                                          r"of .*, or write the results to another folder \(results_dir\)"):
        run_sweep(spec, fail_fast=True)
    assert (spec.results_dir / "toy.csv").read_text() == data


def test_a_results_file_no_row_can_be_added_to_fails_the_run_before_it_trains(sweep_dirs, monkeypatch):
    """A `notes` column added to a results file failed the run after it trained, its row lost, with a raw ValueError
    traceback (and a lock that cannot be taken, with a raw PermissionError: now named, with the fix)."""
    spec = sweep_dirs.updated(models=["naive"], seeds=[0])
    run_sweep(spec)
    results = spec.results_dir / "toy.csv"
    pd.read_csv(results).assign(notes="a note").to_csv(results, index=False)
    import forecast.api

    monkeypatch.setattr(forecast.api.Forecaster, "fit", lambda *args, **kwargs: pytest.fail("trained"))
    with pytest.raises(ConfigError, match=r"toy.csv has columns \['notes'\] that results files do not have, so no "
                                          r"row can be added to it. Fix: remove those columns"):
        run_sweep(sweep_dirs.updated(models=["naive"], seeds=[1]), fail_fast=True)
    results.unlink()
    (spec.results_dir / ".toy.csv.lock").unlink()
    (spec.results_dir / ".toy.csv.lock").mkdir()  # a lock that cannot be opened, as in a read-only folder
    monkeypatch.undo()
    with pytest.raises(ConfigError, match=r"cannot take the lock .*\.toy\.csv\.lock .*Fix: run where .* is writable"):
        run_sweep(sweep_dirs.updated(models=["naive"], seeds=[1]), fail_fast=True)


def test_a_run_another_worker_recorded_first_is_counted_as_skipped_not_written(sweep_dirs, monkeypatch, capsys):
    """Two overlapping sweeps: the one whose row was not added (the other's was there first) printed
    '-> results/toy.csv' and counted the run as ran."""
    spec = sweep_dirs.updated(models=["naive"], seeds=[0])
    run_sweep(spec)
    rows = read_results(spec.results_dir / "toy.csv")
    import forecast.experiment
    import forecast.sweep

    for module in (forecast.experiment, forecast.sweep):  # as the file stood when this sweep began
        monkeypatch.setattr(module, "has_row", lambda path, key: False)
    capsys.readouterr()
    summary = run_sweep(spec)
    assert not summary.ran and len(summary.skipped) == 1
    assert "->" not in capsys.readouterr().out
    pd.testing.assert_frame_equal(read_results(spec.results_dir / "toy.csv"), rows)


def test_sweep_selects_configs_by_filters_and_validates_them(sweep_dirs, tmp_path):
    runs = plan_sweep(sweep_dirs.updated(models=["naive"], seeds=[3, 4]))
    assert [(run.experiment.model, run.experiment.seed) for run in runs] == [("naive", 3), ("naive", 4)]
    with pytest.raises(ConfigError, match=r"selects no run: no config in .* has --horizons \[99\]\. Theirs: --models "
                                          r"\[.*'naive'.*\], --features \[.*\], --horizons \[.*\]\. Fix"):
        plan_sweep(sweep_dirs.updated(horizons=[99]))
    # a misspelt model was listed with the filters, not the models there (nor the one meant)
    with pytest.raises(ConfigError, match=r"has --models \['naiv'\]\. Theirs: .*Did you mean 'naive'\?"):
        plan_sweep(sweep_dirs.updated(models=["naiv"]))
    with pytest.raises(ConfigError, match="no configs for dataset 'ETTh9'"):
        plan_sweep(sweep_dirs.updated(datasets=["ETTh9"]))
    # overrides reach every run; model options change the run key, training options do not
    runs = plan_sweep(sweep_dirs.updated(models=["informer"], overrides=[("model.d_model", 4),
                                                                           ("trainer.max_epochs", 1)]))
    assert runs[0].experiment.model_options["d_model"] == 4 and runs[0].experiment.training.max_epochs == 1
    assert "--set model.d_model=4" in runs[0].command and "--set trainer.max_epochs=1" in runs[0].command
    bad = tmp_path / "configs" / "toy" / "transformer_M_4.yaml"
    bad.write_text(yaml.safe_dump({"model": {"name": "transformer", "factr": 2}, "data": {"dataset": "toy.csv"}}))
    with pytest.raises(ConfigError, match="factr"):
        plan_sweep(sweep_dirs)  # every config is checked before anything runs
    bad.unlink()
    # ... every value a run checks, not only the names: these passed the plan (and --dry_run) and failed the sweep
    # after the runs before them trained
    for data, named in (({"seq_len": 0}, "seq_len"), ({"label_len": 99}, "label_len"), ({}, "quantiles")):
        bad.write_text(yaml.safe_dump({"model": {"name": "transformer"},
                                       "data": {"dataset": "toy.csv", "pred_len": 4, "seq_len": 16, **data},
                                       **({"quantiles": [2.0]} if named == "quantiles" else {})}))
        with pytest.raises(ConfigError, match=rf"transformer_M_4.yaml: .*{named}"):
            plan_sweep(sweep_dirs)


def test_filters_beside_config_files_are_refused_rather_than_ignored(sweep_dirs, capsys):
    """`--config A.yaml B.yaml --models naive` ran both files: the filters select from the configs folder and
    were silently ignored beside the files given."""
    files = [str(sweep_dirs.configs_dir / "toy" / f"{model}_M_4.yaml") for model in ("informer", "naive")]
    with pytest.raises(ConfigError, match=r"--models \(models: in a sweep file\) select"):
        plan_sweep(sweep_dirs.updated(configs=files, models=["naive"]))
    assert main(["sweep", "--config", *files, "--horizons", "8", "--datasets", "toy", "--dry_run"]) == 2
    error = capsys.readouterr().err
    assert "--datasets, --horizons" in error and "Fix: pass only the config files to run" in error
    assert len(plan_sweep(sweep_dirs.updated(configs=files, seeds=[0, 1]))) == 4  # seeds apply to the files given


def test_a_config_run_dir_that_the_sweep_would_ignore_is_refused(sweep_dirs):
    """A config's run_dir (or --set run_dir=...) was accepted and ignored: the sweep trained in
    runs_dir/<run name>, while `forecast test --config` with the same file looked in run_dir and found nothing."""
    config = sweep_dirs.configs_dir / "toy" / "naive_M_4.yaml"
    config.write_text(config.read_text() + "run_dir: runs/mine\n")
    for spec in (sweep_dirs.updated(models=["naive"]),
                 sweep_dirs.updated(models=["informer"], overrides=[("run_dir", "runs/mine")])):
        with pytest.raises(ConfigError, match=r"_M_4.yaml( and the command line)? sets run_dir runs/mine, which a sweep does not use: it "
                                              r"trains each run in .*runs/<run name>.* Fix: remove run_dir"):
            plan_sweep(spec)


def test_sweep_file_and_flags_combine(sweep_dirs, tmp_path, capsys):
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(yaml.safe_dump({
        "configs_dir": "configs", "models": ["naive"], "seeds": [0, 1],
        "results_dir": "results", "runs_dir": "runs", "overrides": {"trainer.max_epochs": 1},
    }))
    spec = SweepSpec.from_file(sweep_file)
    assert spec.models == ("naive",) and spec.overrides == (("trainer.max_epochs", 1),)
    assert main(["sweep", "--sweep", str(sweep_file), "--seeds", "5", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "pending" in out and "1 run: 0 done, 0 partial, 1 pending" in out
    assert main(["sweep", "--sweep", str(sweep_file), "--seeds", "5"]) == 0
    assert "sweep: 1 ran, 0 already done, 0 failed" in capsys.readouterr().out  # was '1 runs' and '3 run'
    assert read_results(tmp_path / "results" / "toy.csv").seed.tolist() == [5]
    assert main(["sweep", "--sweep", str(sweep_file), "--seeds", "5", "--dry-run"]) == 0
    assert "1 run: 1 done" in capsys.readouterr().out
    sweep_file.write_text("modles: [naive]\n")
    with pytest.raises(ConfigError, match=r"unknown sweep option\(s\) \['modles'\]\. Did you mean 'models'\?"):
        SweepSpec.from_file(sweep_file)


def test_a_list_flag_given_twice_adds_to_the_list(sweep_dirs, capsys):
    """`--seeds 0 --seeds 1` (and --config, --models, ... given twice) kept only the last: one run of two."""
    for flags in (["--config", "configs/toy/naive_M_4.yaml", "--config", "configs/toy/informer_M_4.yaml"],
                  ["--configs_dir", "configs", "--models", "naive", "--models", "informer", "--datasets", "toy",
                   "--datasets", "toy", "--features", "M", "--features", "S", "--horizons", "4", "--horizons", "8"]):
        assert main(["sweep", *flags, "--seeds", "0", "--seeds", "1", "--dry_run"]) == 0
        assert "4 runs: 0 done, 0 partial, 4 pending" in capsys.readouterr().out


def run_ids(runs) -> list[tuple[str, int]]:
    return [(run.config_path.name, run.experiment.seed) for run in runs]


def test_shards_split_the_plan_into_disjoint_balanced_shares_that_cover_it(sweep_dirs, tmp_path, capsys):
    spec = sweep_dirs.updated(seeds=[0, 1, 2, 3, 4])
    full = run_ids(plan_sweep(spec))
    assert len(full) == 10
    for count in (1, 2, 3, 4, 10):
        shares = [run_ids(plan_sweep(spec.updated(shard=f"{index}/{count}"))) for index in range(count)]
        assert sorted(run for share in shares for run in share) == sorted(full)  # union: the whole plan, once
        assert sum(len(share) for share in shares) == len(full)  # disjoint
        assert shares == [full[index::count] for index in range(count)]  # deterministic: positions i % N == K
        assert max(map(len, shares)) - min(map(len, shares)) <= 1
    assert plan_sweep(spec.updated(shard=(1, 3)))[0].experiment.seed == full[1][1]
    # From a sweep file and from the command line; --dry-run lists only that worker's runs.
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(yaml.safe_dump({"configs_dir": "configs", "seeds": [0, 1, 2, 3, 4], "shard": "1/3"}))
    assert SweepSpec.from_file(sweep_file).shard == (1, 3)
    assert main(["sweep", "--sweep", str(sweep_file), "--shard", "2/3", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "3 runs: 0 done, 0 partial, 3 pending (shard 2/3)" in out
    listed = [line.split() for line in out.splitlines()[1:-1]]
    assert [(Path(words[1]).name, int(words[2])) for words in listed] == full[2::3]


def test_a_run_named_twice_is_planned_once_so_no_two_shards_train_it(sweep_dirs, caplog):
    """`--seeds 0 0 1`, `--datasets toy toy` or a config copied under another name planned one run twice: a
    sweep trained it twice over, and two shards each took a copy and trained it in the same run folder at once."""
    spec = sweep_dirs.updated(seeds=[0, 0, 1])
    assert run_ids(plan_sweep(spec)) == [("informer_M_4.yaml", 0), ("informer_M_4.yaml", 1),
                                         ("naive_M_4.yaml", 0), ("naive_M_4.yaml", 1)]
    assert "informer_M_4.yaml seed 0 is the same run as" in caplog.text and "planned once" in caplog.text
    copy = sweep_dirs.configs_dir / "toy" / "naive_M_4.yaml"
    (sweep_dirs.configs_dir / "copy").mkdir()
    (sweep_dirs.configs_dir / "copy" / "naive_M_4.yaml").write_text(copy.read_text())
    for spec in (sweep_dirs.updated(datasets=["toy", "toy"], seeds=[0, 1]),
                 sweep_dirs.updated(datasets=["copy", "toy"], seeds=[0, 1])):
        full = plan_sweep(spec)
        assert len(full) == len({run.run_dir for run in full}) == 4
        shares = [plan_sweep(spec.updated(shard=f"{index}/2")) for index in range(2)]
        assert sorted(run.run_dir for share in shares for run in share) == sorted(run.run_dir for run in full)


@pytest.mark.parametrize("shard", ["4/4", "-1/2", "a/b", "0/0", "1", "1/2/3", "", "1/-3", (0,), (0, 1, 2), True])
def test_bad_shards_are_refused_with_the_fix(sweep_dirs, shard):
    with pytest.raises(ConfigError, match="Fix: --shard K/N with 0 <= K < N"):
        sweep_dirs.updated(shard=shard)


def test_a_shard_beyond_the_plan_and_a_bad_shard_in_a_file_are_refused(sweep_dirs, tmp_path, capsys):
    with pytest.raises(ConfigError, match="shard 2/3 gets no run: the sweep has only 2 run"):
        plan_sweep(sweep_dirs.updated(shard="2/3"))
    with pytest.raises(ConfigError, match="1-based --array=1-4"):
        sweep_dirs.updated(shard="4/4")
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text("configs_dir: configs\nshard: 3/3\n")
    with pytest.raises(ConfigError, match="sweep.yaml: shard 3/3: K must be in 0..2"):
        SweepSpec.from_file(sweep_file)
    assert main(["sweep", "--configs-dir", "configs", "--shard", "a/b", "--dry-run"]) == 2
    assert "shard 'a/b' is not K/N" in capsys.readouterr().err


def label(csv: Path) -> str:
    return f"toy@{hashlib.sha256(csv.read_bytes()).hexdigest()[:10]}"


def test_two_csv_files_of_one_name_and_an_edited_file_are_runs_of_their_own(sweep_dirs, tmp_path):
    """A CSV file's rows and run folders name the sha256 of its bytes: the file stem alone took another file of
    that name, or the file after an edit, for a run already done."""
    here = tmp_path / "toy.csv"
    other = tmp_path / "elsewhere" / "toy.csv"
    other.parent.mkdir()
    frame = pd.read_csv(here)
    frame.assign(OT=np.sin(np.arange(ROWS) / 2.0)).to_csv(other, index=False)  # other data, the same name
    spec = sweep_dirs.updated(configs=[sweep_dirs.configs_dir / "toy" / "naive_M_4.yaml",
                                       write_config(other.parent, {"name": "naive"}, other)],
                              runs_dir=tmp_path / "elsewhere_runs")
    summary = run_sweep(spec)
    assert len(summary.ran) == 2 and not summary.skipped
    rows = read_results(spec.results_dir / "toy.csv")  # one results file per stem, its rows told apart
    assert rows.dataset.tolist() == [label(here), label(other)] and rows.mse[0] != rows.mse[1]
    folders = [run.run_dir.name.split("_")[0] for run in summary.ran]
    assert folders == [f"dataset={label(path)}" for path in (here, other)]
    assert all((run.run_dir / "model.pt").is_file() for run in summary.ran)
    # the command reproduces the run in the runs folder it used
    assert rows.command[1] == "forecast sweep --config elsewhere/naive_M_4.yaml --seeds 0 --runs_dir elsewhere_runs"

    frame.iloc[:-24].to_csv(here, index=False)  # the same file, edited: a run of its own
    summary = run_sweep(spec)
    assert [run.config_path.parent.name for run in summary.ran] == ["toy"] and len(summary.skipped) == 1
    assert read_results(spec.results_dir / "toy.csv").dataset.tolist()[-1] == label(here)
    # registered datasets keep their plain names, and the rows and run folders made under them
    registered = Experiment("ETTh1", "naive", 96, 48, 24)
    assert registered.key()["dataset"] == "ETTh1" and registered.run_name().startswith("dataset=ETTh1_model=")


def test_a_row_keyed_by_the_stem_alone_is_kept_but_not_taken_for_the_run(sweep_dirs, caplog):
    """Rows written before CSV runs were keyed by their digest stay readable; which version of the file they
    scored cannot be told, so the run is made again, with a warning that says how to keep the row instead."""
    spec = sweep_dirs.updated(models=["naive"])
    run_sweep(spec)
    results = spec.results_dir / "toy.csv"
    assert update_rows(results, lambda row: not row.update(dataset="toy")) == 1  # the row as it was written then
    with caplog.at_level(logging.WARNING, logger="forecast"):
        summary = run_sweep(spec)
    assert len(summary.ran) == 1
    new = label(sweep_dirs.configs_dir.parent / "toy.csv")
    assert read_results(results).dataset.tolist() == ["toy", new]
    (warning,) = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert "before CSV runs were keyed by the sha256" in warning and f"set that row's dataset to '{new}'" in warning


# ================================================================== the plan

# ------------------------------------------------------------------ shard parsing

def test_zero_workers_is_named_as_such():
    with pytest.raises(ConfigError, match=r"N \(the number of workers\) must be at least 1"):
        parse_shard("0/0")


@pytest.mark.parametrize("shard", [(0.5, 2), ("0", "2"), (0, 2.0)])
def test_a_shard_pair_of_non_integers_is_refused(shard):
    with pytest.raises(ConfigError, match="is not K/N"):
        parse_shard(shard)


@pytest.mark.parametrize("shard", ["0-2", "0:2", "0 2"])
def test_a_shard_written_with_another_separator_is_refused(shard):
    with pytest.raises(ConfigError, match="is not K/N"):
        parse_shard(shard)


# ------------------------------------------------------------------ SweepSpec validation

@pytest.mark.parametrize(("name", "value"), [("seeds", ("a",)), ("seeds", (-1,)), ("horizons", (1.5,)),
                                             ("horizons", (True,))])
def test_seeds_and_horizons_must_be_integers(name, value):
    with pytest.raises(ConfigError, match=name):
        SweepSpec(**{name: value})


@pytest.mark.parametrize("name", ["datasets", "models", "features"])
def test_name_filters_must_be_strings(name):
    with pytest.raises(ConfigError, match=rf"sweep {name}=.*Fix: a list of names"):
        SweepSpec(**{name: (24,)})


# ------------------------------------------------------------------ sweep file

def test_a_sweep_file_may_give_one_value_instead_of_a_list(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text("models: naive\nseeds: 3\ndatasets: toy\n")
    spec = SweepSpec.from_file(path)
    assert spec.models == ("naive",) and spec.seeds == (3,) and spec.datasets == ("toy",)


# ------------------------------------------------------------------ updated(): flags over a file

def test_an_empty_flag_list_leaves_the_files_value():
    spec = SweepSpec(models=("naive",), seeds=(1,))
    assert spec.updated(models=[], seeds=(), datasets=None).models == ("naive",)
    assert spec.updated(models=[], seeds=()).seeds == (1,)


def test_flag_overrides_add_to_the_files_and_win_over_them(toy):
    _, spec = toy
    spec = spec.updated(overrides=[("trainer.max_epochs", 3), ("seed", 5)])  # a sweep file's
    (run,) = plan_sweep(spec.updated(overrides=[("trainer.max_epochs", 7)]))  # then --set
    assert run.experiment.training.max_epochs == 7  # the flag wins
    assert run.experiment.seed == 5  # the file's other override is kept


# ------------------------------------------------------------------ status

def test_a_run_with_a_checkpoint_is_partial(toy):
    _, spec = toy
    (run,) = plan_sweep(spec)
    assert run.status() == "pending"
    (run.run_dir / "checkpoints").mkdir(parents=True)
    torch.save({"state_dict": {}}, run.run_dir / "checkpoints" / "last.ckpt")
    assert run.status() == "partial"


# ------------------------------------------------------------------ selecting configs

def test_a_missing_config_file_is_named(toy, tmp_path):
    _, spec = toy
    with pytest.raises(ConfigError, match=r"config file\(s\) .*nope.yaml.* do not exist"):
        plan_sweep(spec.updated(configs=[tmp_path / "nope.yaml"]))


def test_the_plan_order_does_not_depend_on_the_directory_listing_order(toy, monkeypatch):
    """Shards are positions in the plan: two workers whose file system lists folders or files in another order
    would split another plan, running some runs twice and others never."""
    csv, spec = toy
    for dataset in ("b", "a", "c"):
        folder = spec.configs_dir / dataset
        folder.mkdir()
        write_config(folder, {"name": "naive"}, csv, pred_len=4 + ord(dataset) - ord("a"))
        write_config(folder, {"name": "dlinear"}, csv, pred_len=4 + ord(dataset) - ord("a"))
    plan = [(run.config_path.parent.name, run.config_path.name) for run in plan_sweep(spec)]
    assert plan == sorted(plan)
    real_iterdir, real_glob = Path.iterdir, Path.glob
    monkeypatch.setattr(Path, "iterdir", lambda self: iter(sorted(real_iterdir(self), reverse=True)))
    monkeypatch.setattr(Path, "glob", lambda self, pattern: iter(sorted(real_glob(self, pattern), reverse=True)))
    assert [(run.config_path.parent.name, run.config_path.name) for run in plan_sweep(spec)] == plan


def test_files_not_named_like_a_benchmark_config_are_not_run(toy):
    csv, spec = toy
    other = spec.configs_dir / "toy" / "notes.yaml"
    other.write_text((spec.configs_dir / "toy" / "naive_M_4.yaml").read_text().replace("pred_len: 4", "pred_len: 5"))
    assert [run.config_path.name for run in plan_sweep(spec)] == ["naive_M_4.yaml"]


def test_a_config_whose_name_says_other_features_or_horizon_than_it_holds_is_refused(toy):
    """The filters select by name: naive_S_4.yaml holding features M ran M for --features S."""
    csv, spec = toy
    folder = spec.configs_dir / "toy"
    (folder / "naive_S_4.yaml").write_text((folder / "naive_M_4.yaml").read_text())
    with pytest.raises(ConfigError, match=r"naive_S_4.yaml: its name says \{'features': 'S', 'pred_len': 4\} and it "
                                          r"holds \{'features': 'M', 'pred_len': 4\}.*Fix: rename it naive_M_4.yaml"):
        plan_sweep(spec.updated(features=["S"]))
    (folder / "naive_S_4.yaml").unlink()
    (folder / "naive_M_8.yaml").write_text((folder / "naive_M_4.yaml").read_text())
    with pytest.raises(ConfigError, match=r"naive_M_8.yaml: .*Fix: rename it naive_M_4.yaml"):
        plan_sweep(spec)
    (folder / "naive_M_8.yaml").unlink()
    # --set may change what the file holds: the name is checked against the file
    (run,) = plan_sweep(spec.updated(overrides=[("data.pred_len", 6)]))
    assert run.experiment.pred_len == 6
    # ... or complete it: a file without its dataset, named by --set, is checked by name as it is
    (folder / "naive_M_4.yaml").write_text(yaml.safe_dump({"model": {"name": "naive"},
                                                           "data": {"features": "M", "pred_len": 4}}))
    (run,) = plan_sweep(spec.updated(overrides=[("data.dataset", str(csv))]))
    assert run.experiment.pred_len == 4
    (folder / "naive_M_24.yaml").write_text(yaml.safe_dump({"model": {"name": "naive"}, "data": {}}))  # defaults
    assert len(plan_sweep(spec.updated(overrides=[("data.dataset", str(csv))]))) == 2


def test_the_features_filter_selects(toy):
    csv, spec = toy
    write_config(spec.configs_dir / "toy", {"name": "naive"}, csv, features="S")
    assert [run.config_path.name for run in plan_sweep(spec.updated(features=["S"]))] == ["naive_S_4.yaml"]


def test_without_seeds_each_config_keeps_its_own_seed(toy):
    csv, spec = toy
    write_config(spec.configs_dir / "toy", {"name": "naive"}, csv, seed=7)
    (run,) = plan_sweep(spec)
    assert run.experiment.seed == 7 and "--seeds 7" in run.command


# ------------------------------------------------------------------ fail_fast

def test_fail_fast_stops_at_the_first_failed_run(toy, tmp_path):
    _, spec = toy
    missing = write_config(tmp_path, {"name": "naive"}, tmp_path / "missing.csv")
    spec = spec.updated(configs=[missing])
    assert len(run_sweep(spec).failed) == 1
    with pytest.raises(Exception, match="missing"):
        run_sweep(spec, fail_fast=True)
