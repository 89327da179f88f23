"""What a fit learns from a panel beyond a wide table: its series, their scaling and the covariates' codes.

:class:`PanelFit` is the panel part of :class:`~forecast.data.fitted.FittedState`:

* the series ids in fit order (a window's ``series`` is a position in them, the id embedding's row);
* per series, the mean and scale of its input variables (past covariates, then the target) over
  that series' training rows only, so a small store and a large one both train near unit scale;
* the known (future) covariates' mean and scale over every series' training rows together
  (a promotion flag means the same in every store);
* the values of each static covariate, in first-appearance order: a series' code is the position
  of its value, the row of that covariate's embedding.

Numpy and scikit-learn only, like the rest of the data layer's reading and checking.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from forecast.data.panel import Panel, PanelSeries, id_positions
from forecast.data.scaling import as_float32, fit_scaler
from forecast.errors import ConfigError, DataError

__all__ = ["PanelFit"]


def _statistics(values: np.ndarray, columns: Sequence[Hashable], source: str) -> tuple[np.ndarray, np.ndarray]:
    """``(mean [C], scale [C])`` of ``values [T, C]``, scale 1 for a constant column (scikit-learn's rule);
    DataError naming the column when float64 cannot hold them."""
    scaler = fit_scaler(values, columns, source)
    return scaler.mean_.astype(np.float64), scaler.scale_.astype(np.float64)


@dataclass(frozen=True)
class PanelFit:
    """Series ids, per-series input scaling, pooled known-covariate scaling and static codes of a fit.

    ``mean``/``scale``: float64 ``[N_series, C_in]``; ``known_mean``/``known_scale``: ``[K]``;
    ``static_values``: per static covariate, its values in code order.
    """

    id_column: Hashable
    ids: tuple[Hashable, ...]
    mean: np.ndarray
    scale: np.ndarray
    known_columns: tuple[Hashable, ...]
    known_mean: np.ndarray
    known_scale: np.ndarray
    static_columns: tuple[Hashable, ...]
    static_values: tuple[tuple[Any, ...], ...]

    def __post_init__(self) -> None:
        n_series = len(self.ids)
        if self.mean.shape != self.scale.shape or self.mean.ndim != 2 or self.mean.shape[0] != n_series:
            raise ConfigError(f"a panel fit of {n_series} series needs mean and scale of shape [N_series, C_in], got "
                              f"{self.mean.shape} and {self.scale.shape}")
        if self.known_mean.shape != (len(self.known_columns),) or self.known_scale.shape != self.known_mean.shape:
            raise ConfigError(f"a panel fit needs one known-covariate mean and scale per column "
                              f"{list(self.known_columns)!r}")
        if len(self.static_values) != len(self.static_columns):
            raise ConfigError("a panel fit needs the values of every static covariate")

    @classmethod
    def fit(cls, panel: Panel, train_rows: Mapping[Hashable, tuple[int, int]]) -> PanelFit:
        """Statistics over each series' training rows ``[start, end)`` only (``train_rows`` by id)."""
        columns = (*panel.past_covariates, panel.target)
        means, scales, known = [], [], []
        for series in panel.series:
            start, end = train_rows[series.id]
            mean, scale = _statistics(series.inputs[start:end], columns, f"{panel.source}, series {series.id!r}")
            means.append(mean)
            scales.append(scale)
            known.append(series.future[start:end])
        if panel.future_covariates:
            known_mean, known_scale = _statistics(np.concatenate(known), panel.future_covariates,
                                                  f"{panel.source} (every series' training rows)")
        else:
            known_mean, known_scale = np.zeros(0), np.ones(0)
        static_values = tuple(tuple(dict.fromkeys(series.static[column] for series in panel.series))
                              for column in panel.static_covariates)
        return cls(panel.id_column, panel.ids, np.stack(means), np.stack(scales), panel.future_covariates, known_mean,
                   known_scale, panel.static_covariates, static_values)

    # ------------------------------------------------------------------ lookups

    @property
    def static_sizes(self) -> tuple[int, ...]:
        """Codes per static covariate: the size of its embedding table."""
        return tuple(len(values) for values in self.static_values)

    def position(self, series_id: Hashable, source: str) -> int:
        """The fit position of ``series_id``, also where a file writes it as text (:func:`id_positions`); DataError
        naming it when the fit never saw it."""
        try:
            return self.ids.index(series_id)
        except ValueError:
            pass
        position = id_positions([series_id], self.ids)[0]
        if position is not None:
            return position
        raise DataError(
            f"{source}: series {series_id!r} was not in the data the model was fitted on ({len(self.ids)} series, "
            f"e.g. {list(self.ids[:5])!r}); its scaling and id embedding are unknown. Fix: forecast the fitted "
            "series only, or fit again with this series included."
        )

    def static_codes(self, series: PanelSeries, source: str) -> np.ndarray:
        """int64 ``[S]``: the codes of a series' static covariates; DataError for a value the fit never saw."""
        codes = []
        for column, values in zip(self.static_columns, self.static_values):
            value = series.static[column]
            if value not in values:
                raise DataError(f"{source}, series {series.id!r}: static covariate {column!r} is {value!r}, a value "
                                f"the fit never saw ({list(values[:5])!r}). Fix: use the values of the fitted data.")
            codes.append(values.index(value))
        return np.asarray(codes, dtype=np.int64)

    # ------------------------------------------------------------------ scaling

    def scale_inputs(self, position: int, series: PanelSeries, columns: Sequence[Hashable], source: str) -> np.ndarray:
        """A series' input rows ``[T, C_in]`` (``columns``) on its own training scale (float32); DataError naming
        the series, column and row that float32 cannot hold."""
        values = series.inputs  # [T, C_in]
        with np.errstate(over="ignore", invalid="ignore"):
            scaled = (values - self.mean[position]) / self.scale[position]
        return as_float32(scaled, values, columns, f"{source}, series {series.id!r}")

    def scale_known(self, values: np.ndarray, source: str) -> np.ndarray:
        """Known-covariate rows ``[T, K]`` on the pooled training scale (float32); DataError as for the inputs."""
        with np.errstate(over="ignore", invalid="ignore"):
            scaled = (values - self.known_mean) / self.known_scale
        return as_float32(scaled, values, self.known_columns, source)

    # -------------------------------------------------------------- persistence

    def state_dict(self) -> dict[str, Any]:
        """JSON types: ids, statistics and static values (ids and values must be JSON scalars)."""
        return {"id_column": self.id_column, "ids": list(self.ids), "mean": self.mean.tolist(),
                "scale": self.scale.tolist(), "known_columns": list(self.known_columns),
                "known_mean": self.known_mean.tolist(), "known_scale": self.known_scale.tolist(),
                "static_columns": list(self.static_columns),
                "static_values": [list(values) for values in self.static_values]}

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> PanelFit:
        n_inputs = len(state["mean"][0]) if state["mean"] else 0
        return cls(state["id_column"], tuple(state["ids"]),
                   np.asarray(state["mean"], dtype=np.float64).reshape(-1, n_inputs),
                   np.asarray(state["scale"], dtype=np.float64).reshape(-1, n_inputs),
                   tuple(state["known_columns"]), np.asarray(state["known_mean"], dtype=np.float64),
                   np.asarray(state["known_scale"], dtype=np.float64), tuple(state["static_columns"]),
                   tuple(tuple(values) for values in state["static_values"]))
