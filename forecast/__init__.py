"""forecast: long-sequence time-series forecasting (Informer, LogSparse Transformer).

    from forecast import Forecaster, datasets
    fc = Forecaster("informer", seq_len=96, label_len=48, pred_len=24).fit(datasets.load("ETTh1"))

The public names are imported on first use, so ``import forecast`` stays instant and
torch, Lightning and pandas load only when something needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from forecast._lazy import lazy_attributes
from forecast.errors import ConfigError, DataError, ForecastError

__version__ = "0.1.0"

# public name -> the module defining it (a submodule when the name is the module itself)
_LAZY: dict[str, str] = {
    "Forecaster": "forecast.api",
    "ForecastModule": "forecast.module",
    "WindowDataModule": "forecast.data",
    "DataSpec": "forecast.models",
    "MODELS": "forecast.models",
    "build_model": "forecast.models",
    "TrainingConfig": "forecast.training",
    "allocator": "forecast.allocator",
    "data": "forecast.data",
    "datasets": "forecast.datasets",
    "layers": "forecast.layers",
    "metrics": "forecast.metrics",
    "models": "forecast.models",
    "plotting": "forecast.plotting",
}

# Spelled out (not built from _LAZY) so linters see the TYPE_CHECKING imports as exported;
# tests/test_api.py checks the two lists agree.
__all__ = [
    "ConfigError", "DataError", "ForecastError", "__version__",
    "Forecaster", "ForecastModule", "WindowDataModule", "DataSpec", "MODELS", "build_model",
    "TrainingConfig", "allocator", "data", "datasets", "layers", "metrics", "models", "plotting",
]

if TYPE_CHECKING:
    from forecast import allocator, data, datasets, layers, metrics, models, plotting
    from forecast.api import Forecaster
    from forecast.data import WindowDataModule
    from forecast.models import MODELS, DataSpec, build_model
    from forecast.module import ForecastModule
    from forecast.training import TrainingConfig


__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)
