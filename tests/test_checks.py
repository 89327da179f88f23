"""forecast.checks, and every config dataclass refusing wrong types with a ConfigError (never a TypeError)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from forecast.checks import (
    closest_name,
    did_you_mean,
    is_int,
    is_real,
    require_bool,
    require_choice,
    require_int,
    require_ints,
    require_levels,
    require_real,
)
from forecast.data.config import DataConfig
from forecast.errors import ConfigError
from forecast.metrics import interval_coverage, rho_risk
from forecast.models import DataSpec, InformerConfig, LogSparseConfig, SeasonalNaiveConfig
from forecast.training import TrainingConfig

# ----------------------------------------------------------------------- the checks themselves


@pytest.mark.parametrize("value", [0, 7, np.int64(3), np.int8(-2)])
def test_require_int_returns_a_plain_int(value):
    result = require_int("n", value)
    assert result == value and type(result) is int


@pytest.mark.parametrize("value", [True, False, 2.0, "3", None, [1], np.float64(2.0), np.bool_(True)])
def test_require_int_refuses_what_is_not_an_integer(value):
    with pytest.raises(ConfigError, match=re.escape(f"n must be an integer, got n={value!r}")):
        require_int("n", value)


def test_require_int_minimum_optional_and_hint():
    assert require_int("n", 2, 2) == 2
    with pytest.raises(ConfigError, match=re.escape("n must be an integer >= 2, got n=1")):
        require_int("n", 1, 2)
    assert require_int("n", None, 1, optional=True) is None
    with pytest.raises(ConfigError, match=re.escape("n must be an integer >= 1, got n=None")):
        require_int("n", None, 1)
    message = r"n must be None or an integer >= 1 \(None: all of them\), got n=0"
    with pytest.raises(ConfigError, match=message):
        require_int("n", 0, 1, optional=True, hint="None: all of them")


def test_require_bool_accepts_only_true_and_false():
    assert require_bool("flag", True) is True and require_bool("flag", False) is False
    for value in (0, 1, "maybe", None, np.bool_(True)):
        with pytest.raises(ConfigError, match=re.escape(f"flag must be True or False, got flag={value!r}")):
            require_bool("flag", value)
    for value in ("yes", "True", "off"):  # YAML 1.1's booleans, text in YAML 1.2
        with pytest.raises(ConfigError, match=re.escape(f"flag must be True or False (in YAML: true or false, "
                                                        f"unquoted), got flag={value!r}")):
            require_bool("flag", value)


def test_require_choice_lists_the_choices_and_survives_unhashable_values():
    assert require_choice("mode", "b", ("a", "b")) == "b"
    assert require_choice("fill", None, (None, "zero")) is None
    for value in ("c", None, 3, ["a"], {"a": 1}):
        with pytest.raises(ConfigError, match=re.escape(f"mode must be one of ('a', 'b'), got mode={value!r}")):
            require_choice("mode", value, ("a", "b"))


def test_a_typo_is_offered_the_close_choice_and_nothing_else_is():
    """`fill_nan='interpolat'`, `Forecaster('informr')` and `Forecaster('informer', d_modle=64)` listed the
    choices without the one meant."""
    with pytest.raises(ConfigError, match=re.escape("got fill_nan='interpolat'. Did you mean 'interpolate'?")):
        require_choice("fill_nan", "interpolat", ("ffill", "interpolate", "zero"))
    assert did_you_mean("zzz", ("ffill", "interpolate")) == "" and did_you_mean(3, ("3",)) == ""
    from forecast import Forecaster

    with pytest.raises(ConfigError, match=re.escape("unknown model 'informr'; choose one of [") + r".*\]\. Did you "
                                          r"mean 'informer'\?"):
        Forecaster("informr")
    with pytest.raises(ConfigError, match=re.escape("unknown option(s) ['d_modle', 'lerning_rate'] for Forecaster("
                                                    "'informer'). Did you mean 'd_model'? Did you mean "
                                                    "'learning_rate'? Valid options")):
        Forecaster("informer", d_modle=64, lerning_rate=1e-3)


def test_the_names_other_code_of_the_field_uses_are_offered_ours():
    """Informer2020's `--train_epochs`, `--lr`, `--attn` and `--data_path` are no close spelling of ours: an
    unknown `lr` was offered nothing."""
    from forecast import Forecaster
    from forecast.checks import OTHER_NAMES

    for theirs, ours in OTHER_NAMES.items():
        assert closest_name(theirs, (ours, "seed", "loss")) == ours
    assert closest_name("lr", ("seed", "loss")) is None  # only where our name is a choice
    with pytest.raises(ConfigError, match=re.escape("unknown option(s) ['lr', 'train_epochs'] for Forecaster("
                                                    "'informer'). Did you mean 'learning_rate'? Did you mean "
                                                    "'max_epochs'? Valid options")):
        Forecaster("informer", lr=1e-3, train_epochs=3)


BOUNDS = st.one_of(st.none(), st.floats(-10, 10, allow_nan=False))


def _inside(value: float, low: float | None, high: float | None, low_open: bool, high_open: bool) -> bool:
    """Reference: an open bound is the closed bound one representable float further in."""
    lowest = -math.inf if low is None else (np.nextafter(low, math.inf) if low_open else low)
    highest = math.inf if high is None else (np.nextafter(high, -math.inf) if high_open else high)
    return math.isfinite(value) and lowest <= value <= highest


@given(value=st.floats(allow_nan=True, allow_infinity=True) | st.integers(-20, 20) | st.sampled_from([0.0, 1.0, -1.0]),
       low=BOUNDS, high=BOUNDS, low_open=st.booleans(), high_open=st.booleans())
def test_require_real_matches_the_interval(value, low, high, low_open, high_open):
    bounds = dict(low=low, high=high, low_open=low_open, high_open=high_open)
    if _inside(value, **bounds):
        result = require_real("x", value, **bounds)
        assert result == value and type(result) is float
    else:
        with pytest.raises(ConfigError, match=re.escape(f"got x={value!r}")):
            require_real("x", value, **bounds)


@pytest.mark.parametrize(("bounds", "expected"), [
    (dict(low=0, high=1, high_open=True), "a real number in [0, 1)"),
    (dict(low=0, high=1, low_open=True, high_open=True), "a real number in (0, 1)"),
    (dict(low=0, low_open=True), "a finite real number > 0"),
    (dict(low=0), "a finite real number >= 0"),
    (dict(high=2.5), "a finite real number <= 2.5"),
    ({}, "a finite real number"),
])
def test_require_real_says_what_to_pass(bounds, expected):
    with pytest.raises(ConfigError, match=re.escape(f"rate must be {expected}, got rate='fast'")):
        require_real("rate", "fast", **bounds)


@pytest.mark.parametrize("value", [True, False, None, "0.5", float("nan"), float("inf"), -float("inf"), 1j, 10**400])
def test_require_real_refuses_booleans_text_and_non_finite_numbers(value):
    with pytest.raises(ConfigError, match="rate"):
        require_real("rate", value)


def test_predicates_agree_with_the_checks():
    assert is_int(3) and is_int(np.int32(3)) and not is_int(True) and not is_int(3.0)
    assert is_real(0.5) and is_real(2) and is_real(np.float32(0.5))
    assert not is_real(False) and not is_real(float("nan")) and not is_real("1")


def test_require_ints_normalises_to_a_tuple_and_names_the_element():
    assert require_ints("stack", [3, np.int64(2), 1], 1) == (3, 2, 1)
    assert require_ints("seeds", (), 0, allow_empty=True) == ()
    with pytest.raises(ConfigError, match=re.escape("stack[1] must be an integer >= 1, got stack[1]=0")):
        require_ints("stack", [3, 0], 1)
    with pytest.raises(ConfigError, match=re.escape("stack[0] must be an integer >= 1, got stack[0]=True")):
        require_ints("stack", (True,), 1)
    for value in ("3", 3, None, []):
        with pytest.raises(ConfigError, match=re.escape(f"got stack={value!r}")):
            require_ints("stack", value, 1)


def test_a_level_given_in_percent_is_told_as_the_fraction():
    """quantiles=(10, 90) said only 'must be a real number in (0, 1)'; now the message gives the fraction."""
    with pytest.raises(ConfigError, match=r"quantiles\[1\] .*not a percentage: 90 percent is 0\.9"):
        require_levels("quantiles", (0.1, 90))
    with pytest.raises(ConfigError) as error:  # said 'levels are fractions' of a dropout rate too
        require_real("dropout", 10, low=0, high=1, high_open=True)
    assert "pass a fraction, not a percentage: 10 percent is 0.1" in str(error.value)
    assert "level" not in str(error.value)
    with pytest.raises(ConfigError) as error:
        require_levels("quantiles", (0.1, 1.0))
    assert "percent" not in str(error.value)
    for check in (lambda: rho_risk(np.zeros((1, 1, 1)), np.ones((1, 1, 1)), 90),
                  lambda: interval_coverage(np.zeros((2, 1, 1, 1)), np.ones((1, 1, 1)), level=80)):
        with pytest.raises(ConfigError, match=r"percent is 0\.[98]"):
            check()


def test_require_levels_checks_each_level_and_the_container():
    assert require_levels("q", [0.1, 0.9, 0.1]) == (0.1, 0.9, 0.1)  # repeats are the caller's concern
    assert require_levels("q", np.array([0.5])) == (0.5,)
    assert require_levels("q", [], allow_empty=True) == ()
    with pytest.raises(ConfigError, match=re.escape("q[1] must be a real number in (0, 1), got q[1]=1.0")):
        require_levels("q", (0.5, 1.0))
    for value in (0.5, "0.5", None, ()):
        with pytest.raises(ConfigError, match=re.escape(f"got q={value!r}")):
            require_levels("q", value)


# ------------------------------------------------------------ every config refuses wrong types

# Wrong values per kind of field: text, a float or a bool where an int belongs, None where it is not allowed.
WRONG = {
    "int": ("3", 2.0, 4.5, True, None),
    "int_or_none": ("3", 2.0, True),
    "positive_real_or_none": ("0.1", True, float("nan"), 0.0, -1.0),
    "real": ("0.1", True, None, float("nan")),
    "bool": ("yes", 1, 0, None),
    "bool_or_none": ("yes", 1),
    "choice": (3, None, True, ["gelu"]),
    "choice_or_none": (3, True, ["gelu"]),
    "text": (3, None, ""),
    "text_or_none": (3, ""),
    "ints_or_none": ("3", 3, (2, "1"), (2, 1.5), (True,)),
    "dict": ("factor=3", [("factor", 3)], None),
}

INFORMER = dict(d_model=16, n_heads=2, d_ff=32, e_layers=1, d_layers=1, factor=1, dropout=0.0)
FIELDS = {
    InformerConfig: (INFORMER, {
        "d_model": "int", "n_heads": "int", "e_layers": "int", "d_layers": "int", "d_ff": "int", "factor": "int",
        "dropout": "real", "distil": "bool", "attention": "choice", "decoder_attention": "choice_or_none",
        "activation": "choice", "padding_mode": "choice", "stack": "ints_or_none", "attention_options": "dict",
    }),
    LogSparseConfig: ({}, {
        "d_model": "int", "n_heads": "int", "n_layers": "int", "d_ff": "int", "qk_kernel_size": "int",
        "local_window": "int", "sub_len": "int_or_none", "dropout": "real", "min_scale": "real",
        "activation": "choice", "attention": "choice", "decoding": "choice", "head": "choice", "channels": "choice",
        "series_embedding": "bool", "dense_reference": "bool",
    }),
    SeasonalNaiveConfig: ({}, {"season_length": "int_or_none"}),
    DataSpec: (dict(seq_len=8, label_len=4, pred_len=2, c_in=3, c_out=1, n_time_features=4), {
        "seq_len": "int", "label_len": "int", "pred_len": "int", "c_in": "int", "c_out": "int",
        "n_time_features": "int", "time_encoding": "choice", "time_feature_sizes": "ints_or_none",
        "season": "int_or_none",
    }),
    TrainingConfig: ({}, {
        "max_epochs": "int", "patience": "int", "batch_size": "int", "seed": "int", "num_workers": "int",
        "num_nodes": "int", "checkpoint_every_n_steps": "int_or_none", "learning_rate": "real",
        "checkpoint_every_minutes": "positive_real_or_none",
        "weight_decay": "real", "compile_model": "bool", "loss": "choice", "lr_schedule": "choice",
        "strategy": "text", "extra_trainer_options": "dict",
    }),
    DataConfig: (dict(seq_len=8, label_len=4, pred_len=2), {
        "seq_len": "int", "label_len": "int", "pred_len": "int", "batch_size": "int", "num_workers": "int",
        "seed": "int", "eval_batch_size": "int_or_none", "features": "choice", "time_encoding": "choice",
        "predict_split": "choice", "fill_nan": "choice_or_none", "allow_irregular": "bool",
        "allow_duplicates": "bool", "drop_last_train": "bool", "pin_memory": "bool",
        "persistent_workers": "bool_or_none", "date_column": "text_or_none",
    }),
}
CASES = [
    pytest.param(config, field, value, id=f"{config.__name__}.{field}={value!r}")
    for config, (_, fields) in FIELDS.items()
    for field, kind in fields.items()
    for value in WRONG[kind]
]


@pytest.mark.parametrize(("config", "field", "value"), CASES)
def test_configs_refuse_wrong_types_with_a_config_error(config, field, value):
    valid, _ = FIELDS[config]
    with pytest.raises(ConfigError, match=re.escape(field)):
        config(**{**valid, field: value})


@pytest.mark.parametrize("config", list(FIELDS))
def test_the_valid_base_of_each_config_passes(config):
    valid, fields = FIELDS[config]
    built = config(**valid)
    assert set(fields) <= set(vars(built))


def test_informer_config_normalises_stack_and_keeps_valid_values():
    config = InformerConfig(**INFORMER, stack=[3, np.int64(2), 1], attention_options={"seed": 1})
    assert config.stack == (3, 2, 1) and all(type(depth) is int for depth in config.stack)
    assert InformerConfig(**{**INFORMER, "dropout": 0}).dropout == 0
    with pytest.raises(ConfigError, match=re.escape("stack[1] must be an integer >= 1, got stack[1]=0")):
        InformerConfig(**INFORMER, stack=(3, 0))
    with pytest.raises(ConfigError, match=re.escape("dropout must be a real number in [0, 1), got dropout='0.1'")):
        InformerConfig(**{**INFORMER, "dropout": "0.1"})
    with pytest.raises(ConfigError, match=re.escape("d_model must be an integer >= 1, got d_model=16.0")):
        InformerConfig(**{**INFORMER, "d_model": 16.0})


def test_data_spec_normalises_time_feature_sizes():
    sizes = DataSpec(seq_len=8, label_len=4, pred_len=2, c_in=1, c_out=1, n_time_features=2,
                     time_encoding="fixed", time_feature_sizes=[24, np.int64(7)]).time_feature_sizes
    assert sizes == (24, 7) and all(type(size) is int for size in sizes)
