"""What a fit learns from a panel beyond a wide table: its series, their scaling and the covariates' codes.

:class:`PanelFit` is the panel part of :class:`~forecast.data.fitted.FittedState`:

* the series ids in fit order (a window's ``series`` is a position in them, the id embedding's row);
* per series, the mean and scale of its input variables (past covariates, then the target) over
  that series' training rows only, so a small store and a large one both train near unit scale;
* the known (future) covariates' mean and scale over every series' training rows together
  (a promotion flag means the same in every store);
* the values of each static covariate, in first-appearance order: a series' code is the position
  of its value, the row of that covariate's embedding; and each series' codes, so that a run is not resumed
  on data where a series' static covariates changed (its codes learned for another value).

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

__all__ = ["PanelFit", "comparable", "static_changes"]

# The state_dict key of each series' static codes; a state saved before they were kept lacks it.
SERIES_CODES = "series_codes"


def _statistics(values: np.ndarray, columns: Sequence[Hashable], source: str) -> tuple[np.ndarray, np.ndarray]:
    """``(mean [C], scale [C])`` of ``values [T, C]``, scale 1 for a constant column (scikit-learn's rule);
    DataError naming the column when float64 cannot hold them."""
    scaler = fit_scaler(values, columns, source)
    return scaler.mean_.astype(np.float64), scaler.scale_.astype(np.float64)


@dataclass(frozen=True)
class PanelFit:
    """Series ids, per-series input scaling, pooled known-covariate scaling and static codes of a fit.

    ``mean``/``scale``: float64 ``[N_series, C_in]``; ``known_mean``/``known_scale``: ``[K]``;
    ``static_values``: per static covariate, its values in code order; ``series_codes``: per series (fit order),
    its code of each static covariate (``None``: a state saved before they were kept).
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
    series_codes: tuple[tuple[int, ...], ...] | None = None

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
        if self.series_codes is not None and (len(self.series_codes) != n_series or any(
                len(codes) != len(self.static_columns) for codes in self.series_codes)):
            raise ConfigError(f"a panel fit of {n_series} series needs each series' code of every static covariate "
                              f"{list(self.static_columns)!r}")

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
        codes = [{value: code for code, value in enumerate(values)} for values in static_values]
        series_codes = tuple(tuple(code[series.static[column]] for column, code in zip(panel.static_covariates, codes))
                             for series in panel.series)
        return cls(panel.id_column, panel.ids, np.stack(means), np.stack(scales), panel.future_covariates, known_mean,
                   known_scale, panel.static_covariates, static_values, series_codes)

    # ------------------------------------------------------------------ lookups

    @property
    def static_sizes(self) -> tuple[int, ...]:
        """Codes per static covariate: the size of its embedding table."""
        return tuple(len(values) for values in self.static_values)

    def positions(self, series_ids: Sequence[Hashable], source: str) -> list[int]:
        """The fit position of each of ``series_ids``, also where a file writes one as text (:func:`id_positions`,
        one pass over the fit's ids however many are asked for); DataError naming the first the fit never saw."""
        found = id_positions(series_ids, self.ids)
        for series_id, position in zip(series_ids, found):
            if position is None:
                raise DataError(
                    f"{source}: series {series_id!r} was not in the data the model was fitted on ({len(self.ids)} "
                    f"series, e.g. {list(self.ids[:5])!r}); its scaling and id embedding are unknown. Fix: forecast "
                    "the fitted series only, or fit again with this series included."
                )
        return found

    def static_codes(self, panel_series: Sequence[PanelSeries], source: str) -> np.ndarray:
        """int64 ``[N, S]``: the codes of each series' static covariates (one lookup table per covariate, however
        many series and values); DataError for a value the fit never saw."""
        codes = np.zeros((len(panel_series), len(self.static_columns)), dtype=np.int64)
        for index, (column, values) in enumerate(zip(self.static_columns, self.static_values)):
            code_of = {value: code for code, value in enumerate(values)}  # values are unique (fit)
            for row, series in enumerate(panel_series):
                value = series.static[column]
                if value not in code_of:
                    raise DataError(f"{source}, series {series.id!r}: static covariate {column!r} is {value!r}, a "
                                    f"value the fit never saw ({list(values[:5])!r}). Fix: use the values of the "
                                    "fitted data.")
                codes[row, index] = code_of[value]
        return codes

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
        """JSON types: ids, statistics, static values and codes (ids and values must be JSON scalars); a state
        loaded without codes is written without them, as it was saved."""
        state = {"id_column": self.id_column, "ids": list(self.ids), "mean": self.mean.tolist(),
                 "scale": self.scale.tolist(), "known_columns": list(self.known_columns),
                 "known_mean": self.known_mean.tolist(), "known_scale": self.known_scale.tolist(),
                 "static_columns": list(self.static_columns),
                 "static_values": [list(values) for values in self.static_values]}
        if self.series_codes is not None:
            state[SERIES_CODES] = [list(codes) for codes in self.series_codes]
        return state

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> PanelFit:
        n_inputs = len(state["mean"][0]) if state["mean"] else 0
        return cls(state["id_column"], tuple(state["ids"]),
                   np.asarray(state["mean"], dtype=np.float64).reshape(-1, n_inputs),
                   np.asarray(state["scale"], dtype=np.float64).reshape(-1, n_inputs),
                   tuple(state["known_columns"]), np.asarray(state["known_mean"], dtype=np.float64),
                   np.asarray(state["known_scale"], dtype=np.float64), tuple(state["static_columns"]),
                   tuple(tuple(values) for values in state["static_values"]),
                   tuple(tuple(codes) for codes in state[SERIES_CODES]) if SERIES_CODES in state else None)


def comparable(state: Mapping[str, Any], saved: Mapping[str, Any]) -> Mapping[str, Any]:
    """``state`` (a mapping holding a panel's :meth:`PanelFit.state_dict` under ``panel``, or a wide table's) to
    compare with ``saved``, another: without each series' static codes where ``saved``'s panel was written before
    they were kept, so that such a run or checkpoint still resumes on its data."""
    panel, saved_panel = state.get("panel"), saved.get("panel") if isinstance(saved, Mapping) else None
    if not isinstance(panel, Mapping) or not isinstance(saved_panel, Mapping) or SERIES_CODES in saved_panel:
        return state
    return {**state, "panel": {key: value for key, value in panel.items() if key != SERIES_CODES}}


def _statics_by_series(state: Mapping[str, Any]) -> dict[Hashable, tuple[Any, ...]]:
    """Each series' static covariate values, by id, in a :meth:`PanelFit.state_dict`."""
    values = state["static_values"]
    return {series_id: tuple(values[column][code] for column, code in enumerate(codes))
            for series_id, codes in zip(state["ids"], state[SERIES_CODES])}


def static_changes(saved: Mapping[str, Any], state: Mapping[str, Any]) -> str:
    """The static covariates a series of both panel states (mappings holding a :meth:`PanelFit.state_dict` under
    ``panel``, as :func:`comparable` takes them) holds another value of in ``state`` than in ``saved``, for a
    refusal to resume on that data: "series 'c': static covariate 'region' was 'n', is 's' now"; ``""`` when none
    does, or a state lacks the codes."""
    try:
        then, now = saved["panel"], state["panel"]
        if then["static_columns"] != now["static_columns"]:
            return ""
        before = _statics_by_series(then)
        changed = [f"series {series_id!r}: static covariate {column!r} was {old!r}, is {new!r} now"
                   for series_id, values in _statics_by_series(now).items() if series_id in before
                   for column, old, new in zip(now["static_columns"], before[series_id], values) if old != new]
    except (KeyError, TypeError, IndexError, AttributeError):  # a wide table, a state saved without codes, or edited
        return ""
    more = f" (and {len(changed) - 3} more)" if len(changed) > 3 else ""
    return "; ".join(changed[:3]) + more
