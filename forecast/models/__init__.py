"""Forecasting models (torch only) and the explicit registry of their names.

Every model: ``forward(x [B, L, C_in], x_mark [B, L, F], y_mark [B, label_len + P, F])
-> [B, P, C_out]``, built from a ``DataSpec`` (sizes from the data) and its own options.
"""

from __future__ import annotations

from typing import Any, Callable

from torch import nn

from forecast.errors import ConfigError
from forecast.models.base import DataSpec
from forecast.models.informer import Informer, InformerConfig
from forecast.models.logsparse import LogSparseConfig, LogSparseTransformer
from forecast.models.naive import RepeatLast, SeasonalNaive, SeasonalNaiveConfig


def _informer(spec: DataSpec, **options: Any) -> nn.Module:
    return Informer(spec, InformerConfig(**options))


def _transformer(spec: DataSpec, **options: Any) -> nn.Module:
    """The paper's Informer-dagger: full attention everywhere and no distilling."""
    fixed = {"attention", "decoder_attention", "distil"} & options.keys()
    if fixed:
        raise ConfigError(
            f"model 'transformer' fixes {sorted(fixed)}; use model 'informer' to choose them"
        )
    return Informer(spec, InformerConfig(attention="full", decoder_attention="full",
                                         distil=False, **options))


def _logsparse(spec: DataSpec, **options: Any) -> nn.Module:
    return LogSparseTransformer(spec, LogSparseConfig(**options))


def _naive(spec: DataSpec, **options: Any) -> nn.Module:
    if options:
        raise ConfigError(f"model 'naive' takes no options, got {sorted(options)}")
    return RepeatLast(spec)


def _seasonal_naive(spec: DataSpec, **options: Any) -> nn.Module:
    return SeasonalNaive(spec, SeasonalNaiveConfig(**options))


MODELS: dict[str, Callable[..., nn.Module]] = {
    "informer": _informer,
    "transformer": _transformer,
    "logsparse": _logsparse,
    "naive": _naive,
    "seasonal_naive": _seasonal_naive,
}


def build_model(name: str, spec: DataSpec, **options: Any) -> nn.Module:
    """Build the registered model ``name`` for ``spec`` with model-specific ``options``."""
    if name not in MODELS:
        raise ConfigError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
    try:
        return MODELS[name](spec, **options)
    except TypeError as error:  # an option the model's config does not have
        raise ConfigError(f"model {name!r}: {error}") from error


__all__ = [
    "MODELS",
    "DataSpec",
    "Informer",
    "InformerConfig",
    "LogSparseConfig",
    "LogSparseTransformer",
    "RepeatLast",
    "SeasonalNaive",
    "SeasonalNaiveConfig",
    "build_model",
]
