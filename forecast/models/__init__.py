"""Forecasting models (torch only) and the explicit registry of their names.

Every model is a :class:`~forecast.models.base.ForecastModel`: ``forward(x [B, L, C_in],
x_mark [B, L, F], y_mark [B, label_len + P, F]) -> [B, P, C_out]`` and the optional
capabilities it declares, built from a ``DataSpec`` (sizes from the data) and its own options.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

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


# The config dataclass each registered model's options fill, the fields its builder fixes, and that builder: the
# entry holds while MODELS[name] is still that builder (a builder put in its place checks its own options).
_CONFIGS: dict[str, tuple[type | None, frozenset[str], Callable[..., ForecastModel]]] = {
    "informer": (InformerConfig, frozenset(), _informer),
    "transformer": (InformerConfig, frozenset({"attention", "decoder_attention", "distil"}), _transformer),
    "logsparse": (LogSparseConfig, frozenset(), _logsparse),
    "naive": (None, frozenset(), _naive),
    "seasonal_naive": (SeasonalNaiveConfig, frozenset(), _seasonal_naive),
    "dlinear": (DLinearConfig, frozenset(), _dlinear),
}
_BUILT_IN = frozenset(_CONFIGS)


def register_model(name: str, builder: Callable[..., ForecastModel], *, config: type | None = None,
                   fixed: Iterable[str] = ()) -> None:
    """Register ``builder(spec, **options) -> ForecastModel`` as model ``name``, beside the built-in ones.

    ``config``: the dataclass whose fields are its options (validated by ``config(**options)`` in the builder); then
    ``Forecaster(name, ...)`` checks option names against it, and ``forecast fit --model.name NAME`` (run from Python,
    after registering: ``forecast.cli.main([...])``, or from the shell through a ``forecast.plugins`` entry point:
    :mod:`forecast.plugins`) and YAML configs take them as ``model.<field>``, typed. Without
    it the builder checks its own options. ``fixed``: config fields the builder sets itself. A built-in name is
    refused (its recipe options and checks are the built-in model's); registering a name again replaces it.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ConfigError(f"register_model({name!r}): a model's name is an identifier (letters, digits, _).")
    if name in _BUILT_IN:
        raise ConfigError(f"register_model({name!r}): {name!r} is a built-in model, whose recipes and checks are its "
                          f"own. Fix: register yours under another name, e.g. 'my_{name}'.")
    if not callable(builder):
        raise ConfigError(f"register_model({name!r}): the builder {builder!r} is not callable; give a function or "
                          "class taking (spec, **options) and returning a ForecastModel.")
    if config is not None and not (isinstance(config, type) and dataclasses.is_dataclass(config)):
        raise ConfigError(f"register_model({name!r}): config={config!r} is not a dataclass; give the dataclass whose "
                          "fields are the model's options, or none.")
    unknown = sorted(set(fixed) - {f.name for f in dataclasses.fields(config)}) if config is not None else list(fixed)
    if unknown:
        raise ConfigError(f"register_model({name!r}): fixed={sorted(fixed)} names {unknown}, not fields of its config.")
    MODELS[name] = builder
    _CONFIGS[name] = (config, frozenset(fixed), builder)


def _entry(name: str) -> tuple[type | None, frozenset[str]] | None:
    """``name``'s config dataclass and fixed fields, while its registered builder is still the one in MODELS."""
    if name not in MODELS:
        raise ConfigError(f"unknown model {name!r}; choose one of {sorted(MODELS)}.{did_you_mean(name, MODELS)}")
    entry = _CONFIGS.get(name)
    return entry[:2] if entry is not None and MODELS[name] is entry[2] else None


def is_built_in(name: str) -> bool:
    """Whether ``name`` is one of the package's own models, as the package built it (recipes name their options)."""
    return name in _BUILT_IN and _entry(name) is not None


def model_config_class(name: str) -> tuple[type | None, frozenset[str]]:
    """The config dataclass whose fields are the registered model ``name``'s options (``None``: it takes
    none, or it was registered at run time and checks its own), and the fields its builder fixes."""
    return _entry(name) or (None, frozenset())


def checks_own_options(name: str) -> bool:
    """Whether the registered model ``name`` checks its own options: put in MODELS at run time without a config
    dataclass (its refusals are its own to word)."""
    return _entry(name) is None


def model_options(name: str) -> tuple[str, ...]:
    """The option names the registered model ``name`` accepts: its config dataclass's fields."""
    config, fixed = model_config_class(name)
    return tuple(f.name for f in dataclasses.fields(config) if f.name not in fixed) if config else ()


def build_model(name: str, spec: DataSpec, **options: Any) -> ForecastModel:
    """Build the registered model ``name`` for ``spec`` with model-specific ``options``."""
    known = model_options(name)
    if not checks_own_options(name):
        fixed = sorted(model_config_class(name)[1] & options.keys())
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
    "is_built_in",
    "model_config_class",
    "model_inputs",
    "model_options",
    "register_model",
]
