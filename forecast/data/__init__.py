"""Data pipeline: CSV validation, splits, scaling, time features and forecasting windows.

The torch and Lightning parts (``WindowDataset``, ``WindowDataModule``) load on first use,
so reading and validating a CSV (``forecast.datasets.load``) never imports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from forecast._lazy import lazy_attributes
from forecast.data.config import DataConfig
from forecast.data.io import TimeSeries, prepare_series, read_csv
from forecast.data.panel import Panel, PanelSeries, panel_borders, panel_windows, prepare_panel
from forecast.data.splits import SPLIT_PROTOCOLS, DateSplit, FractionSplit, RowSplit, split_borders, window_count
from forecast.data.timefeatures import (
    TIME_ENCODINGS,
    calendar_fields,
    frequency_resolution,
    n_time_features,
    time_feature_sizes,
    time_features,
    timef_feature_names,
)

__all__ = [
    "ITEM_KEYS",
    "SPLIT_PROTOCOLS",
    "TIME_ENCODINGS",
    "DataConfig",
    "DateSplit",
    "FittedState",
    "FractionSplit",
    "FutureBatch",
    "Panel",
    "PanelSeries",
    "RowSplit",
    "TimeSeries",
    "WindowDataModule",
    "WindowDataset",
    "calendar_fields",
    "describe_splits",
    "frequency_resolution",
    "n_time_features",
    "panel_borders",
    "panel_windows",
    "prepare_panel",
    "prepare_series",
    "read_csv",
    "split_borders",
    "time_feature_sizes",
    "time_features",
    "timef_feature_names",
    "window_count",
]

_TORCH_PARTS = {
    "ITEM_KEYS": "forecast.data.dataset",
    "WindowDataset": "forecast.data.dataset",
    "FittedState": "forecast.data.fitted",
    "FutureBatch": "forecast.data.fitted",
    "WindowDataModule": "forecast.data.datamodule",
    "describe_splits": "forecast.data.datamodule",
}

if TYPE_CHECKING:
    from forecast.data.datamodule import WindowDataModule, describe_splits
    from forecast.data.dataset import ITEM_KEYS, WindowDataset
    from forecast.data.fitted import FittedState, FutureBatch

__getattr__, __dir__ = lazy_attributes(__name__, globals(), _TORCH_PARTS)
