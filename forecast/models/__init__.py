"""Forecasting models (torch only) and the explicit registry of their names.

Every model is a :class:`~forecast.models.base.ForecastModel`: ``forward(x [B, L, C_in],
x_mark [B, L, F], y_mark [B, label_len + P, F]) -> [B, P, C_out]`` and the optional
capabilities it declares, built from a ``DataSpec`` (sizes from the data) and its own options.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from forecast.checks import did_you_mean
from forecast.errors import ConfigError
from forecast.models.base import DataSpec, ForecastModel, model_inputs
from forecast.models.dlinear import DLinear, DLinearConfig
from forecast.models.informer import Informer, InformerConfig
from forecast.models.logsparse import LogSparseConfig, LogSparseTransformer
from forecast.models.naive import RepeatLast, SeasonalNaive, SeasonalNaiveConfig


def _informer(spec: DataSpec, **options: Any) -> ForecastModel:
    return Informer(spec, InformerConfig(**options))


def _transformer(spec: DataSpec, **options: Any) -> ForecastModel:
    """The paper's Informer-dagger: full attention everywhere and no distilling."""
    return Informer(spec, InformerConfig(attention="full", decoder_attention="full",
                                         distil=False, **options))


def _logsparse(spec: DataSpec, **options: Any) -> ForecastModel:
    return LogSparseTransformer(spec, LogSparseConfig(**options))


def _dlinear(spec: DataSpec, **options: Any) -> ForecastModel:
    return DLinear(spec, DLinearConfig(**options))


def _naive(spec: DataSpec) -> ForecastModel:
    return RepeatLast(spec)


def _seasonal_naive(spec: DataSpec, **options: Any) -> ForecastModel:
    return SeasonalNaive(spec, SeasonalNaiveConfig(**options))


MODELS: dict[str, Callable[..., ForecastModel]] = {
    "informer": _informer,
    "transformer": _transformer,
    "logsparse": _logsparse,
    "naive": _naive,
    "seasonal_naive": _seasonal_naive,
    "dlinear": _dlinear,
}


# Registered models with nothing to train: no training setting or recipe changes what they forecast.
PARAMETER_FREE = frozenset({"naive", "seasonal_naive"})


# The config dataclass each registered model's options fill, and the fields its builder fixes.
_CONFIGS: dict[str, tuple[type | None, frozenset[str]]] = {
    "informer": (InformerConfig, frozenset()),
    "transformer": (InformerConfig, frozenset({"attention", "decoder_attention", "distil"})),
    "logsparse": (LogSparseConfig, frozenset()),
    "naive": (None, frozenset()),
    "seasonal_naive": (SeasonalNaiveConfig, frozenset()),
    "dlinear": (DLinearConfig, frozenset()),
}


def model_config_class(name: str) -> tuple[type | None, frozenset[str]]:
    """The config dataclass whose fields are the registered model ``name``'s options (``None``: it takes
    none, or it was registered at run time and checks its own), and the fields its builder fixes."""
    if name not in MODELS:
        raise ConfigError(f"unknown model {name!r}; choose one of {sorted(MODELS)}.{did_you_mean(name, MODELS)}")
    return _CONFIGS.get(name, (None, frozenset()))


def checks_own_options(name: str) -> bool:
    """Whether the registered model ``name`` was registered at run time: no config dataclass here names its
    options, so its builder checks them (and its refusals are its own to word)."""
    return name not in _CONFIGS


def model_options(name: str) -> tuple[str, ...]:
    """The option names the registered model ``name`` accepts: its config dataclass's fields."""
    if name not in MODELS:
        raise ConfigError(f"unknown model {name!r}; choose one of {sorted(MODELS)}.{did_you_mean(name, MODELS)}")
    config, fixed = _CONFIGS.get(name, (None, frozenset()))
    return tuple(f.name for f in dataclasses.fields(config) if f.name not in fixed) if config else ()


def build_model(name: str, spec: DataSpec, **options: Any) -> ForecastModel:
    """Build the registered model ``name`` for ``spec`` with model-specific ``options``."""
    known = model_options(name)
    if name in _CONFIGS:  # a model registered at run time checks its own options
        fixed = sorted(_CONFIGS[name][1] & options.keys())
        if fixed:
            raise ConfigError(f"model {name!r} fixes {fixed}; use model 'informer' to choose them")
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise ConfigError(f"model {name!r} has no option(s) {unknown}; its options are {list(known) or 'none'}")
    model = MODELS[name](spec, **options)
    if not isinstance(model, ForecastModel):
        raise ConfigError(f"model {name!r} built a {type(model).__name__}, which is not a "
                          "forecast.models.ForecastModel; subclass it (it declares forward and the optional "
                          "loss, sample/quantiles, calibrate_scale and attention_weights)")
    if not isinstance(getattr(model, "spec", None), DataSpec):  # the contract's one required attribute
        raise ConfigError(f"model {name!r} built a {type(model).__name__} without its DataSpec: set self.spec = spec "
                          "in its __init__ (the windows and sizes it was built for).")
    return model


__all__ = [
    "MODELS",
    "PARAMETER_FREE",
    "DLinear",
    "DLinearConfig",
    "DataSpec",
    "ForecastModel",
    "Informer",
    "InformerConfig",
    "LogSparseConfig",
    "LogSparseTransformer",
    "RepeatLast",
    "SeasonalNaive",
    "SeasonalNaiveConfig",
    "build_model",
    "checks_own_options",
    "model_config_class",
    "model_inputs",
    "model_options",
]
