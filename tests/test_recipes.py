"""Recipes: what a model starts from, and a run's identity holding everything that changes it."""

from __future__ import annotations

import dataclasses
import datetime
import json

import pandas as pd
import pytest

from forecast import Forecaster
from forecast.config import RunConfig
from forecast.data.splits import DateSplit, FractionSplit, RowSplit
from forecast.errors import ConfigError
from forecast.experiment import Experiment
from forecast.recipes import DEFAULT_RECIPE, RECIPES, RESULT_SETTINGS, get_recipe, training_differences
from forecast.results import KEY
from forecast.training import TrainingConfig


def experiment(recipe: str = "improved", model: str = "informer", model_options=None, **training) -> Experiment:
    return Experiment.from_recipe(recipe, model, model_options or {}, training, dataset="ETTh1", seq_len=96,
                                  label_len=48, pred_len=96)


def test_every_recipe_holds_valid_training_settings_and_model_options():
    from forecast.models import build_model, model_options
    from forecast.models.base import DataSpec

    spec = DataSpec(seq_len=32, label_len=16, pred_len=8, c_in=3, c_out=3, n_time_features=4)
    for recipe in RECIPES.values():
        TrainingConfig(**recipe.training)
        for model, options in recipe.model_options.items():
            assert set(options) <= set(model_options(model)), (recipe.name, model)
            build_model(model, spec, **options)


def test_forecaster_defaults_are_the_improved_recipe_and_given_options_win():
    improved = get_recipe("improved")
    fc = Forecaster("informer")
    assert DEFAULT_RECIPE == "improved" and fc.model_options == improved.options_for("informer")
    assert fc.model_options["revin"] is True
    assert fc.training.learning_rate == improved.training["learning_rate"]
    assert fc.training.max_epochs == improved.training["max_epochs"]
    assert fc.config["recipe"] == "improved"
    assert Forecaster("logsparse").model_options == improved.options_for("logsparse")
    assert Forecaster("transformer").model_options == improved.options_for("transformer")
    mine = Forecaster("informer", d_model=8, n_heads=2, max_epochs=2, learning_rate=0.5)
    assert mine.model_options["d_model"] == 8 and mine.model_options["revin"] is True
    assert (mine.training.max_epochs, mine.training.learning_rate) == (2, 0.5)


@pytest.mark.parametrize("model", ["informer", "transformer", "logsparse"])
def test_a_revin_center_without_revin_is_refused_unless_the_recipe_chose_it(model):
    """Forecaster('informer', revin=False, revin_center='last') trained without RevIN, ignoring the centre."""
    for options in ({"revin": False, "revin_center": "last"}, {"recipe": "paper", "revin_center": "last"}):
        with pytest.raises(ConfigError, match=r"revin_center='last' does nothing here: reversible instance "
                                              r"normalization is off \(revin=False\)\. Fix: pass revin=True"):
            Forecaster(model, **options)
    # Turning RevIN off keeps working where the recipe centres it, also with that centre spelled out (a CLI
    # config carries every option), and a centre that is the config's own default does nothing either way.
    assert Forecaster(model, revin=False).model_options["revin"] is False
    Forecaster(model, revin=False, revin_center="persistence")
    Forecaster(model, recipe="paper", revin_center="mean")
    assert Forecaster(model, recipe="paper", revin=True, revin_center="last").model_options["revin_center"] == "last"


@pytest.mark.parametrize(("model", "options", "idle"), [
    ("transformer", {"factor": 3}, "factor=3 does nothing here: no attention is ProbSparse"),
    ("informer", {"attention": "full", "decoder_attention": "full", "factor": 3}, "factor=3 does nothing here"),
    ("informer", {"e_layers": 4, "stack": (2, 1)}, r"e_layers=4 does nothing here: stack=\(2, 1\) sets each"),
    ("logsparse", {"min_scale": 0.1}, r"min_scale=0.1 does nothing here: the point head has no scale"),
    ("logsparse", {"channels": "joint", "series_embedding": False}, "series_embedding=False does nothing here"),
])
def test_an_option_the_others_leave_idle_is_refused(model, options, idle):
    """Each was accepted and ignored; the same option where it acts, or at its default, stays accepted."""
    with pytest.raises(ConfigError, match=idle + r".*Fix: .*, or leave \w+ out\."):
        Forecaster(model, **options)
    Forecaster("informer", factor=3)
    Forecaster("logsparse", head="gaussian", min_scale=0.1)
    Forecaster("logsparse", channels="joint", series_embedding=True)  # the default: a config file spells it out


def test_a_refusal_of_an_option_the_recipe_set_says_it_came_from_the_recipe():
    """Forecaster('logsparse', decoding='autoregressive') was refused for linear_skip, which the user never wrote
    (the improved recipe sets it), and d_model=30 for n_heads=4 alike."""
    with pytest.raises(ConfigError, match=r"linear_skip=False \(linear_skip=True came from recipe 'improved': "
                                          r"pass it to Forecaster\(\.\.\.\) to override it, or recipe='paper'\)"):
        Forecaster("logsparse", decoding="autoregressive")
    with pytest.raises(ConfigError, match=r"n_heads=4 came from recipe 'improved'"):
        Forecaster("informer", d_model=30)
    with pytest.raises(ConfigError) as given:  # written by the user: nothing to add
        Forecaster("logsparse", decoding="autoregressive", linear_skip=True)
    assert "recipe" not in str(given.value)
    Forecaster("logsparse", decoding="autoregressive", recipe="paper")


def test_the_paper_recipe_is_the_models_and_training_defaults():
    fc = Forecaster("informer", recipe="paper")
    assert fc.model_options == {} and fc.training == TrainingConfig(extra_trainer_options={})
    logsparse = Forecaster("logsparse", recipe="paper")
    assert logsparse.model_options == {} and logsparse.training.learning_rate == 1e-4


def test_an_unknown_recipe_names_the_known_ones():
    with pytest.raises(ConfigError, match="paper"):
        Forecaster("informer", recipe="fast")
    with pytest.raises(ConfigError, match="improved"):
        RunConfig.from_mapping({"model": {"name": "naive"}, "data": {"dataset": "ETTh1"}, "recipe": 3})


def test_two_recipes_of_one_model_at_one_window_never_collide():
    paper, improved = experiment("paper"), experiment("improved")
    assert paper.key() != improved.key() and paper.run_name() != improved.run_name()
    assert improved.key()["recipe"] == "improved"
    assert json.loads(improved.key()["options"]) == get_recipe("improved").options_for("informer")
    assert set(KEY) == set(improved.key())


@pytest.mark.parametrize("setting, value", [("max_epochs", 1), ("learning_rate", 0.5), ("lr_schedule", "cosine"),
                                            ("patience", 1), ("batch_size", 8), ("loss", "mae"),
                                            ("precision", "bf16-mixed"), ("limit_train_batches", 3),
                                            ("weight_decay", 0.1), ("calibrate_scale", False),
                                            ("correction_significance", 0.01), ("devices", 2), ("num_nodes", 2),
                                            ("strategy", "ddp"), ("compile_model", True)])
def test_a_changed_training_setting_is_a_different_run(setting, value):
    """A smoke run (one epoch, a few batches) never marks the real run done, whatever it changes."""
    real, changed = experiment(), experiment(**{setting: value})
    assert changed.key() != real.key() and changed.run_name() != real.run_name()
    assert json.loads(changed.key()["training"]).get(setting) != json.loads(real.key()["training"]).get(setting)


def test_hardware_and_checkpoint_settings_are_the_same_run():
    real = experiment()
    for setting, value in (("num_workers", 2), ("accelerator", "cpu"), ("checkpoint_every_minutes", 5.0)):
        assert experiment(**{setting: value}).key() == real.key()


@pytest.mark.parametrize("argument, value", [("gradient_clip_val", 1.0), ("accumulate_grad_batches", 4),
                                             ("max_steps", 100)])
def test_a_trainer_argument_that_changes_learning_is_a_different_run(argument, value):
    real = experiment()
    changed = experiment(extra_trainer_options={argument: value})
    assert changed.key() != real.key() and changed.run_name() != real.run_name()
    assert json.loads(changed.key()["training"])["trainer"] == {argument: value}


def test_trainer_arguments_that_only_log_or_show_are_the_same_run():
    quiet = {"enable_progress_bar": False, "log_every_n_steps": 5, "logger": False, "enable_model_summary": False}
    assert experiment(extra_trainer_options=quiet).key() == experiment().key()


def test_another_target_or_time_encoding_is_a_different_run_and_the_registered_target_is_the_default():
    def window(**fields):
        return Experiment.from_recipe("improved", "informer", {}, {}, dataset="ETTh1", seq_len=96, label_len=48,
                                      pred_len=96, **fields)

    default = window()
    assert window(target="OT").key() == default.key()  # ETTh1's registered target, named
    for changed in (window(target="HUFL"), window(time_encoding="fixed")):
        assert changed.key() != default.key() and changed.run_name() != default.run_name()
    assert json.loads(window(target="HUFL", time_encoding="fixed").key()["data"]) == {
        "target": "HUFL", "time_encoding": "fixed"}
    csv_run = Experiment("data/sales.csv", "dlinear", 96, 48, 24, target="y")  # a file has no registered target
    assert json.loads(csv_run.key()["data"]) == {"target": "y"}


def test_one_split_written_two_ways_is_one_run_and_canonical_splits_keep_their_keys():
    """A date split given as '2023-01-18' and as '2023-01-18 00:00:00' (the same instants) named two runs."""
    def split_run(split):
        return Experiment.from_recipe("improved", "informer", {}, {}, dataset="ETTh1", seq_len=96, label_len=48,
                                      pred_len=96, data_options={"split": split})

    forms = {
        ("2023-01-18", "2023-02-01 06:00:00"): [["2023-01-18 00:00:00", "2023-02-01 06:00"],
                                                 (datetime.date(2023, 1, 18), datetime.datetime(2023, 2, 1, 6)),
                                                 DateSplit(pd.Timestamp("2023-01-18"), "2023-02-01T06:00:00.000")],
        ("2023-01-18 00:00:00+00:00", "2023-02-01 00:00:00+00:00"): [["2023-01-18T01:00+01:00", "2023-02-01T00:00Z"]],
        (8640, 11520, 14400): [RowSplit(8640, 11520, 14400)],
        (0.6, 0.2, 0.2): [FractionSplit(0.6, 0.2, 0.2)],
        "ett_hour": [],
    }
    for canonical, others in forms.items():
        written = list(canonical) if isinstance(canonical, tuple) else canonical
        run = split_run(written)
        # The form a run's key already held: its results rows and run folder keep their names.
        assert run.key()["data"] == json.dumps({"split": written})
        for other in others:
            assert split_run(other).key() == run.key() and split_run(other).run_name() == run.run_name(), other
    assert split_run(["2023-01-18", "2023-02-02"]).run_name() != split_run(["2023-01-18", "2023-02-01"]).run_name()


def test_a_smoke_run_row_never_marks_the_real_run_done(tmp_path):
    from forecast.results import COLUMNS, append_row, has_row

    real, smoke = experiment(), experiment(max_epochs=1, limit_train_batches=2)
    results = tmp_path / "ETTh1.csv"
    append_row(results, {**dict.fromkeys(COLUMNS, ""), **smoke.key(), "mse": 1.0, "mae": 1.0})
    assert has_row(results, smoke.key()) and not has_row(results, real.key())


def test_training_differences_list_every_result_setting_against_the_defaults():
    assert training_differences(TrainingConfig()) == {}
    assert set(RESULT_SETTINGS) <= {field.name for field in dataclasses.fields(TrainingConfig)}
    assert training_differences(TrainingConfig(max_epochs=1, num_workers=3)) == {"max_epochs": 1}


def test_parameter_free_models_are_one_run_under_any_training():
    assert experiment("paper", "naive").key()["training"] == experiment("paper", "naive", max_epochs=1).key()[
        "training"] == "{}"


def test_a_run_config_pins_its_recipe_and_builds_the_same_run_as_the_runner():
    mapping = {"model": {"name": "informer", "d_model": 8, "n_heads": 2}, "data": {"dataset": "ETTh1", "seq_len": 96,
               "label_len": 48, "pred_len": 96}, "trainer": {"max_epochs": 2}}
    improved = RunConfig.from_mapping(mapping)
    paper = RunConfig.from_mapping({**mapping, "recipe": "paper"})
    assert improved.recipe == "improved" and improved.to_mapping()["recipe"] == "improved"
    assert improved.experiment().key() == experiment(model_options={"d_model": 8, "n_heads": 2},
                                                     max_epochs=2).key()
    assert paper.experiment().key()["options"] == json.dumps({"d_model": 8, "n_heads": 2})
    assert improved.resolved_run_dir() != paper.resolved_run_dir()
    assert improved.forecaster().model_options["revin"] is True
    assert "revin" not in paper.forecaster().model_options


def test_a_forecaster_in_the_improved_recipe_calibrates_its_gaussian_scale():
    import numpy as np
    import pandas as pd

    t = np.arange(300)
    frame = pd.DataFrame({"date": pd.date_range("2022-01-01", periods=300, freq="h"),
                          "OT": np.sin(t / 5.0) + np.random.default_rng(0).normal(0, 0.5, 300)})
    options = dict(seq_len=24, label_len=12, pred_len=6, features="S", head="gaussian", d_model=8, n_heads=2,
                   n_layers=1, d_ff=8, max_epochs=1, limit_train_batches=2)
    improved = Forecaster("logsparse", **options).fit(frame)
    paper = Forecaster("logsparse", recipe="paper", **options).fit(frame)
    assert float(improved.model.scale_factor) != 1.0 and float(paper.model.scale_factor) == 1.0


def test_a_forecaster_in_the_improved_recipe_fits_its_correction_weight_on_validation():
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"date": pd.date_range("2022-01-01", periods=300, freq="h"),
                          "OT": rng.normal(0, 1, 300).cumsum()})  # a random walk: the last value is hard to beat
    options = dict(seq_len=24, label_len=12, pred_len=6, features="S", d_model=8, n_heads=2, d_ff=8, max_epochs=1,
                   limit_train_batches=2)
    improved = Forecaster("informer", **options).fit(frame)
    paper = Forecaster("informer", recipe="paper", revin=True, **options).fit(frame)
    weight = float(improved.model.revin.correction_weight)
    assert 0.0 <= weight < 1.0 and float(paper.model.revin.correction_weight) == 1.0


def test_a_tested_correction_takes_a_level_between_zero_and_one_half():
    from forecast.errors import ConfigError

    assert TrainingConfig(calibrate_correction=True, correction_significance=0.05).correction_significance == 0.05
    # Turning the fit off under a recipe that tests it needs nothing else: there is nothing to test.
    assert TrainingConfig(correction_significance=0.05).calibrate_correction is False
    for level in (0.0, 0.5, 1.0, float("nan")):
        with pytest.raises(ConfigError, match="correction_significance"):
            TrainingConfig(calibrate_correction=True, correction_significance=level)


def test_calibration_skips_a_model_without_a_fitted_scale_instead_of_failing_after_training():
    from forecast.models import DataSpec, build_model
    from forecast.training import calibrate_on_validation

    class NoWindows:  # calibration must not even ask for the windows of a model it skips
        def val_dataloader(self):
            raise AssertionError("calibration read windows for a model it cannot calibrate")

    spec = DataSpec(seq_len=12, label_len=6, pred_len=3, c_in=1, c_out=1, n_time_features=4)
    config = TrainingConfig(calibrate_scale=True, calibrate_correction=True)
    for model in (build_model("logsparse", spec, head="gaussian", decoding="autoregressive", d_model=8, n_heads=2),
                  build_model("seasonal_naive", spec, season_length=4),
                  build_model("dlinear", spec)):
        assert calibrate_on_validation(model, NoWindows(), config) is None


@pytest.mark.parametrize("pred_len, prefix_steps", [(4, None), (12, 10)])
def test_the_recipe_tests_the_correction_on_the_prefix_windows_where_the_validation_windows_are_one_stretch(
        pred_len, prefix_steps, caplog):
    """200 rows, 20 of them validation ones: 17 windows of 4 steps are tested themselves; 9 windows of 12 steps
    are one stretch, so the recipe tests the longest prefix the period holds twice (10 steps, 11 windows)."""
    import numpy as np
    import pandas as pd
    import torch

    from forecast.data import WindowDataModule
    from forecast.models import DataSpec, build_model
    from forecast.models.base import kept_share
    from forecast.training import calibrate_on_validation

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"date": pd.date_range("2021-01-01", periods=200, freq="h"),
                          **{name: rng.normal(size=200).cumsum() for name in ("a", "b", "OT")}})
    dm = WindowDataModule(frame, seq_len=12, label_len=6, pred_len=pred_len, batch_size=4, target="OT")
    dm.setup()
    model = build_model("dlinear", DataSpec.from_fitted(dm.fitted), revin=True, revin_center="mean").eval()
    with torch.no_grad():  # the network forecasts the last value, a correction to the mean that a random walk pays
        for part in (model.seasonal, model.trend):
            for linear in part.maps:
                linear.weight.zero_()[:, -1] = 1.0
                linear.bias.zero_()
    config = TrainingConfig(calibrate_correction=True, correction_significance=0.05)
    cross, square, _ = model.correction_terms(dm.val_dataloader())
    prefix = dm.val_prefix_dataloader()
    assert (prefix is None) == (prefix_steps is None)
    tested = None if prefix is None else (*model.correction_terms(prefix)[:2], prefix_steps)
    expected, test = kept_share(cross, square, pred_len, 0.05, tested=tested)
    assert test is not None  # a test was made, on the windows or on the prefix
    with caplog.at_level("INFO", logger="forecast"):
        calibrate_on_validation(model, dm, config)
    assert model.correction_kept == pytest.approx(expected)
    assert "too few to test" not in caplog.text
