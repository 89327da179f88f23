"""Run configs: YAML, top-level values, sections, overrides and what they build (forecast/config.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from forecast.config import RunConfig, describe_config, load_config, load_yaml, read_yaml
from forecast.errors import ConfigError
from forecast.sweep import SweepSpec, plan_sweep

BASE = {"model": {"name": "naive"}, "data": {"dataset": "toy.csv", "seq_len": 16, "label_len": 8, "pred_len": 4}}


def config(**top) -> RunConfig:
    return RunConfig.from_mapping({**BASE, **top}, "c.yaml")


@pytest.fixture
def path(tmp_path) -> Path:
    file = tmp_path / "c.yaml"
    file.write_text(yaml.safe_dump(BASE))
    return file


# ---------------------------------------------------------------- YAML reading

def test_yaml_reads_octal_and_hex_and_refuses_repeated_keys():
    assert load_yaml("a: 0o17\nb: 0x1F\nc: 010\n") == {"a": 15, "b": 31, "c": 10}
    with pytest.raises(yaml.YAMLError, match="appears twice"):
        load_yaml("a: 1\na: 2\n")


def test_an_empty_config_file_sets_nothing(tmp_path, path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing yet\n")
    assert read_yaml(empty) == {}
    both = load_config([empty, path])
    assert both == dataclasses.replace(load_config(path), source=both.source)


# ---------------------------------------------------------------- top-level checks

@pytest.mark.parametrize(("top", "named"), [({"seed": -1}, "seed"), ({"progress": "yes"}, "progress"),
                                            ({"run_dir": 5}, "run_dir"), ({"quantiles": 0.5}, "quantiles"),
                                            ({"recipe": "papr"}, "recipe")])
def test_bad_top_level_values_are_refused_naming_the_option(top, named):
    with pytest.raises(ConfigError, match=rf"c.yaml: .*{named}"):
        config(**top)


def test_a_yaml_1_1_boolean_and_a_misspelt_recipe_are_refused_with_the_fix():
    with pytest.raises(ConfigError, match=r"progress must be True or False \(in YAML: true or false, unquoted\)"):
        config(progress="yes")
    with pytest.raises(ConfigError, match=r"unknown recipe 'papr'.*Did you mean 'paper'\?"):
        config(recipe="papr")


# ---------------------------------------------------------------- data and trainer sections

def test_the_data_section_gets_the_window_defaults_and_a_registered_target():
    data = RunConfig.from_mapping({"model": {"name": "naive"}, "data": {"dataset": "ETTh1"}}).data
    assert (data["seq_len"], data["label_len"], data["pred_len"], data["features"]) == (96, 48, 24, "M")
    assert data["target"] == "OT"


def test_a_loader_option_in_the_trainer_section_is_refused_with_the_fix():
    with pytest.raises(ConfigError, match=r"\['batch_size'\] are loader options. Fix: .*--data.batch_size"):
        config(trainer={"batch_size": 8})


# ---------------------------------------------------------------- views and builders

def test_to_mapping_round_trips_every_top_level_key():
    given = config(seed=3, progress=False, quantiles=[0.1, 0.9], run_dir="runs/x")
    assert RunConfig.from_mapping(given.to_mapping(), "c.yaml") == given


def test_builders_pass_quantiles_and_trainer_arguments_and_leave_the_split_to_fit():
    given = RunConfig.from_mapping({**BASE, "data": {**BASE["data"], "split": [0.6, 0.2, 0.2]},
                                    "trainer": {"gradient_clip_val": 0.5}, "quantiles": [0.2, 0.8]})
    options = given.forecaster_options()
    assert options["quantiles"] == (0.2, 0.8) and "split" not in options and options["gradient_clip_val"] == 0.5
    assert given.experiment().training.extra_trainer_options == {"gradient_clip_val": 0.5}


def test_a_config_run_dir_is_the_run_folder():
    assert config(run_dir="runs/mine").resolved_run_dir("elsewhere") == Path("runs/mine")


# ---------------------------------------------------------------- overrides

def test_overrides_keep_dashes_in_values_and_none_as_none(path):
    loaded = load_config(path, ["--data.dataset=my-data.csv", "--run_dir=runs/a-b"])
    assert loaded.dataset == "my-data.csv" and loaded.run_dir == "runs/a-b"
    assert load_config(path, [("run_dir", None)]).run_dir is None


# ---------------------------------------------------------------- config file names

def test_a_sweep_selects_ms_configs(tmp_path, monkeypatch):
    folder = tmp_path / "configs" / "toy"
    folder.mkdir(parents=True)
    (folder / "naive_MS_4.yaml").write_text(yaml.safe_dump({**BASE, "data": {**BASE["data"], "features": "MS"}}))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "toy.csv").write_text("date,a,OT\n2023-01-01 00:00,1,2\n")
    runs = plan_sweep(SweepSpec(configs_dir=tmp_path / "configs", features=("MS",)))
    assert [run.config_path.name for run in runs] == ["naive_MS_4.yaml"]


# ---------------------------------------------------------------- print_config

def test_print_config_does_not_repeat_given_options_as_comments():
    text = describe_config(config(trainer={"max_epochs": 3}))
    assert "max_epochs: 3" in text and "#   max_epochs" not in text
