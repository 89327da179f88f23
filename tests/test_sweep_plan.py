"""The sweep's plan: shards, filters, sweep files and flags, run states (forecast/sweep.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from forecast.errors import ConfigError
from forecast.sweep import SweepSpec, parse_shard, plan_sweep, run_sweep

ROWS = 240


def write_config(folder: Path, model: dict, csv: Path, pred_len: int = 4, features: str = "M", **top) -> Path:
    config = {"model": model,
              "data": {"dataset": str(csv), "features": features, "seq_len": 16, "label_len": 8,
                       "pred_len": pred_len},
              "trainer": {"max_epochs": 1}, **top}
    path = folder / f"{model['name']}_{features}_{pred_len}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.fixture
def toy(tmp_path, monkeypatch):
    t = np.arange(ROWS)
    csv = tmp_path / "toy.csv"
    pd.DataFrame({"date": pd.date_range("2023-01-01", periods=ROWS, freq="h"), "a": np.sin(t / 4.0),
                  "OT": np.cos(t / 6.0) + 2.0}).to_csv(csv, index=False)
    configs = tmp_path / "configs" / "toy"
    configs.mkdir(parents=True)
    write_config(configs, {"name": "naive"}, csv)
    monkeypatch.chdir(tmp_path)
    return csv, SweepSpec(configs_dir=tmp_path / "configs", results_dir=tmp_path / "results",
                          runs_dir=tmp_path / "runs")


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
