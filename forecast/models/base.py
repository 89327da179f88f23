"""What every model gets from the data, so sizes are never typed by hand."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from torch import Tensor

from forecast.checks import require_choice, require_int, require_ints
from forecast.errors import ConfigError


@dataclass(frozen=True)
class DataSpec:
    """Window lengths and sizes a model is built for, read off a WindowDataModule."""

    seq_len: int
    label_len: int
    pred_len: int
    c_in: int
    c_out: int
    n_time_features: int
    time_encoding: str = "timeF"
    time_feature_sizes: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        # F = 0 is valid: yearly data has no calendar features.
        for name, minimum in (("seq_len", 1), ("label_len", 0), ("pred_len", 1), ("c_in", 1),
                              ("c_out", 1), ("n_time_features", 0)):
            require_int(name, getattr(self, name), minimum)
        if self.label_len > self.seq_len:
            raise ConfigError(
                f"label_len must lie in [0, seq_len={self.seq_len}], got {self.label_len}: "
                "the decoder's start token is the last label_len steps of the input window"
            )
        if self.c_out > self.c_in:
            raise ConfigError(f"c_out={self.c_out} cannot exceed c_in={self.c_in}")
        require_choice("time_encoding", self.time_encoding, ("timeF", "fixed", "learned"))
        if self.time_feature_sizes is not None:
            sizes = require_ints("time_feature_sizes", self.time_feature_sizes, 1, allow_empty=True)
            object.__setattr__(self, "time_feature_sizes", sizes)
        if self.time_encoding != "timeF" and (
            self.time_feature_sizes is None or len(self.time_feature_sizes) != self.n_time_features
        ):
            raise ConfigError(
                f"time_encoding={self.time_encoding!r} needs time_feature_sizes with one "
                f"cardinality per calendar field ({self.n_time_features}); "
                "take them from WindowDataModule.time_feature_sizes"
            )

    @classmethod
    def from_datamodule(cls, dm) -> DataSpec:
        """Read the sizes off a set-up ``WindowDataModule``."""
        sizes = dm.time_feature_sizes
        return cls(
            seq_len=dm.seq_len, label_len=dm.label_len, pred_len=dm.pred_len,
            c_in=dm.c_in, c_out=dm.c_out, n_time_features=dm.n_time_features,
            time_encoding=dm.time_encoding,
            time_feature_sizes=tuple(sizes) if sizes is not None else None,
        )


@runtime_checkable
class ScaleCalibrated(Protocol):
    """A probabilistic model whose predictive scale can be fitted on held-out windows after training.

    ``calibrate_scale(batches, coverage)`` sets the model's scale so that its central
    ``coverage`` interval covers that share of the windows in ``batches`` (dicts with
    ``x``, ``y``, ``x_mark``, ``y_mark``) and returns the factor it applied. It raises
    ConfigError when the configuration has no scale to fit (a point head).
    """

    probabilistic: bool

    def calibrate_scale(self, batches: Iterable[Mapping[str, Tensor]], coverage: float = 0.8) -> float: ...
