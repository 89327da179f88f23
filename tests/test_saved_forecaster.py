"""A saved forecaster: what its config.json holds, and what loading and resuming it refuse (forecast/predictor.py)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
import pytest
import torch

from forecast import Forecaster
from forecast.data.splits import FractionSplit
from forecast.errors import ConfigError, DataError, MissingDateColumnError
from forecast.predictor import _last_rows, jsonable

WINDOW = dict(seq_len=32, label_len=16, pred_len=8)


def make_frame(rows: int = 240, freq: str = "h") -> pd.DataFrame:
    rng = np.random.default_rng(0)
    t = np.arange(rows)
    return pd.DataFrame({"date": pd.date_range("2021-01-01", periods=rows, freq=freq),
                         "a": np.sin(2 * np.pi * t / 24) + 0.05 * rng.standard_normal(rows),
                         "OT": 10 + np.cos(2 * np.pi * t / 12) + 0.05 * rng.standard_normal(rows)})


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return make_frame()


@pytest.fixture(scope="module")
def naive(frame) -> Forecaster:
    return Forecaster("naive", **WINDOW).fit(frame)


def edit_config(directory, edit) -> None:
    path = directory / "config.json"
    config = json.loads(path.read_text())
    edit(config)
    path.write_text(json.dumps(config))


# ------------------------------------------------------------------ JSON form

def test_a_mapping_with_keys_json_would_turn_into_text_is_refused():
    with pytest.raises(ConfigError, match=r"option x=.*only string keys can be saved"):
        jsonable({1: 2.0}, "x")


def test_a_split_given_as_an_object_is_saved_and_reused_by_a_loaded_forecaster(frame, tmp_path):
    fc = Forecaster("naive", **WINDOW).fit(frame, split=FractionSplit(0.6, 0.2, 0.2))
    loaded = Forecaster.load(fc.save(tmp_path / "model"))
    pd.testing.assert_frame_equal(loaded.evaluate(frame), fc.evaluate(frame))


# ------------------------------------------------------------------ load checks

def test_a_config_naming_other_files_is_refused(naive, tmp_path):
    directory = naive.save(tmp_path / "model")
    edit_config(directory, lambda config: config["files"].update({"notes.txt": "0" * 64}))
    with pytest.raises(ConfigError, match=r"files .* is not the sha256 of scaler.json and model.pt"):
        Forecaster.load(directory)


def test_a_config_whose_keys_were_reordered_still_loads(naive, frame, tmp_path):
    directory = naive.save(tmp_path / "model")
    path = directory / "config.json"
    path.write_text(json.dumps(json.loads(path.read_text()), sort_keys=True, indent=1))  # e.g. jq -S
    pd.testing.assert_frame_equal(Forecaster.load(directory).predict(frame), naive.predict(frame))


def test_a_run_saved_before_the_digest_is_still_checked_for_its_windows(naive, frame, tmp_path):
    directory = naive.save(tmp_path / "model")
    edit_config(directory, lambda config: (config.pop("digest"), config["data"].pop("time_encoding", None)))
    assert len(Forecaster.load(directory).predict(frame)) == WINDOW["pred_len"]  # an older run: no time_encoding
    edit_config(directory, lambda config: config["data"].update(label_len=8))
    with pytest.raises(ConfigError, match=r"data.label_len 8, fitted.spec.label_len 16"):
        Forecaster.load(directory)


def test_an_edited_recipe_is_refused_on_load(naive, tmp_path):
    directory = naive.save(tmp_path / "model")
    assert json.loads((directory / "config.json").read_text())["recipe"] == "improved"
    edit_config(directory, lambda config: config.update(recipe="paper"))
    with pytest.raises(ConfigError, match=r"its model, recipe, model_options, data are not those"):
        Forecaster.load(directory)


def test_the_quantile_levels_and_sample_paths_set_on_a_fitted_model_are_saved_with_it(frame, tmp_path):
    """The setters changed the module only: the saved config kept the old levels and 100 paths, so the loaded
    model forecast other columns from other draws, and Forecaster.quantile_levels kept reporting the old levels."""
    fc = Forecaster("seasonal_naive", **WINDOW).fit(frame)
    fc.predictor.quantile_levels = np.array([0.05, 0.5, 0.95], dtype=np.float32)  # as levels read from an array
    fc.predictor.n_samples = np.int64(40)  # as a count read from an array arrives
    assert fc.quantile_levels == pytest.approx((0.05, 0.5, 0.95))
    assert {type(level) for level in fc.quantile_levels} == {float}
    loaded = Forecaster.load(fc.save(tmp_path / "model"))  # numpy's numbers failed to save as JSON
    assert loaded.quantile_levels == fc.quantile_levels and loaded.predictor.n_samples == 40
    pd.testing.assert_frame_equal(loaded.predict(frame), fc.predict(frame), check_exact=True)


def test_levels_set_on_a_point_model_are_refused_as_the_option_is(naive):
    """They were taken, saved, and made the saved model unloadable ("the file was edited or damaged")."""
    with pytest.raises(ConfigError, match=r"quantiles=\[0.05, 0.95\] .* 'naive' with these options forecasts points"):
        naive.predictor.quantile_levels = (0.05, 0.95)
    assert naive.quantile_levels == (0.1, 0.5, 0.9)


def test_a_fit_that_fails_changes_nothing(frame):
    """Its reading options were kept before it trained: the corrected fit failed again with the typo's error, and a
    fitted forecaster read every later frame with them (evaluate raised MissingDateColumnError)."""
    fresh = Forecaster("naive", **WINDOW)
    with pytest.raises(DataError, match="load"):
        fresh.fit(frame, target="load")
    assert fresh.fit(frame).is_fitted
    fitted = Forecaster("naive", **WINDOW).fit(frame)
    before = fitted.evaluate(frame)
    with pytest.raises(DataError, match="when"):
        fitted.fit(frame, date_column="when")
    pd.testing.assert_frame_equal(fitted.evaluate(frame), before)


def test_new_rows_whose_date_column_has_another_name_are_told_to_rename_it(naive, frame):
    """The fit's advice, "pass date_column=...", was given for predict and evaluate, which take no such argument."""
    for renamed in (frame.rename(columns={"date": "ts"}), frame.set_index("date").rename_axis("ts")):
        with pytest.raises(MissingDateColumnError, match=r"fitted with its timestamps in 'date'.*rename") as error:
            naive.predict(renamed)
        assert "date_column=" not in str(error.value)
    indexed = Forecaster("naive", **WINDOW).fit(frame.set_index("date").rename_axis(None))  # an unnamed index
    with pytest.raises(MissingDateColumnError, match=r"timestamps in a DatetimeIndex.*set_index") as error:
        indexed.predict(frame.reset_index(drop=True).drop(columns="date"))
    assert "date_column=" not in str(error.value)
    as_text = frame.set_index("date").rename_axis(None)
    as_text.index = as_text.index.astype(str)  # its own fix, which offers no option, stands
    with pytest.raises(MissingDateColumnError, match=r"pd.to_datetime\(df.index\)"):
        indexed.predict(as_text)


def replace_weights(directory, state) -> None:
    """Write ``state`` as the run's model.pt and record its sha256, as a save would have."""
    torch.save(state, directory / "model.pt")
    digest = hashlib.sha256((directory / "model.pt").read_bytes()).hexdigest()
    edit_config(directory, lambda config: config["files"].update({"model.pt": digest}))


@pytest.mark.parametrize(("state", "message"), [
    ({"weight": [1.0, 2.0]}, r"model.pt is not a state_dict of tensors"),
    ({"projection.weight": torch.zeros(2, 2)},
     r"(?s)model.pt does not fit the model in config.json: .*projection.weight"),
])
def test_weights_that_are_not_the_models_are_refused_on_load(naive, tmp_path, state, message):
    directory = naive.save(tmp_path / "model")
    replace_weights(directory, state)
    with pytest.raises(ConfigError, match=message):
        Forecaster.load(directory)


def test_a_data_file_record_that_is_not_a_path_and_digest_is_refused_on_load(naive, tmp_path):
    directory = naive.save(tmp_path / "model")
    edit_config(directory, lambda config: config.update(data_file={"path": "ETTh1.csv"}))
    with pytest.raises(ConfigError, match=r"config.json: data_file .* is not a path and a sha256"):
        Forecaster.load(directory)
    edit_config(directory, lambda config: config.update(data_file=None))  # a run saved before it was kept
    assert Forecaster.load(directory).predictor.data_file is None


# ------------------------------------------------------------------ resume

def test_resuming_on_the_same_values_at_another_frequency_is_refused(frame, tmp_path):
    run_dir = tmp_path / "run"
    options = dict(**WINDOW, max_epochs=1)
    Forecaster("dlinear", **options).fit(frame, run_dir=run_dir)
    daily = frame.assign(date=pd.date_range("2021-01-01", periods=len(frame), freq="D"))
    with pytest.raises(ConfigError, match="fitted on other data"):
        Forecaster("dlinear", **options).fit(daily, run_dir=run_dir)


def test_a_run_saved_before_the_fit_kept_its_date_reading_resumes_and_trains_again(frame, tmp_path):
    """A run folder written before ``prepare_options`` held ``date_format`` and ``time_zone`` was refused as
    "fitted on other data" when the same fit resumed it, although nothing differed: missing, they read as
    the data read alike, as a checkpoint's own state already did."""
    run_dir = tmp_path / "run"
    options = dict(**WINDOW, max_epochs=1)
    Forecaster("dlinear", **options).fit(frame, run_dir=run_dir)

    def older(state):
        if isinstance(state, dict):
            for key in ("date_format", "time_zone"):
                if isinstance(state.get("prepare_options"), dict):
                    state["prepare_options"].pop(key, None)
            for value in state.values():
                older(value)

    edit_config(run_dir, older)
    assert "time_zone" not in json.loads((run_dir / "config.json").read_text())["fitted"]["prepare_options"]
    for checkpoint in (run_dir / "checkpoints").glob("*.ckpt"):
        state = torch.load(checkpoint, weights_only=False)
        older(state)
        torch.save(state, checkpoint)
    resumed = Forecaster("dlinear", **dict(options, max_epochs=2)).fit(frame, run_dir=run_dir)  # the checkpoint
    assert len(resumed.history) == 2
    edit_config(run_dir, older)
    for checkpoint in (run_dir / "checkpoints").glob("*.ckpt"):
        checkpoint.unlink()
    Forecaster("dlinear", **options).fit(frame, run_dir=run_dir)  # a finished run without checkpoints
    daily = frame.assign(date=pd.date_range("2021-01-01", periods=len(frame), freq="D"))
    edit_config(run_dir, older)
    with pytest.raises(ConfigError, match="fitted on other data"):  # other data is still another run
        Forecaster("dlinear", **options).fit(daily, run_dir=run_dir)


# ------------------------------------------------------------------ windows and history

def test_negative_windows_count_from_the_end_and_no_further(naive):
    n = len(naive.predictor.datamodule.dataset("test"))
    assert naive.plot(window=-n) is not None  # the first window, counted from the end
    with pytest.raises(ConfigError, match=rf"window={-n - 1} is out of range"):
        naive.plot(window=-n - 1)
    with pytest.raises(ConfigError, match=rf"window={n} is out of range"):
        naive.plot(window=n)


def test_no_history_rows_is_none_of_them():
    assert list(range(10))[_last_rows(10, 0)] == []
    assert list(range(10))[_last_rows(10, 3)] == [7, 8, 9]
    assert list(range(3))[_last_rows(3, 10)] == [0, 1, 2]
