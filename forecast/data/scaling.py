"""Standardizing on training rows, checked against what float64 and float32 can hold, and persistence.

Torch-free: the fitted state (:mod:`forecast.data.fitted`) scales windows with these, and the
panel fit (:mod:`forecast.data.panel_state`) fits one scaling per series with them.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
from sklearn.preprocessing import StandardScaler

from forecast.errors import DataError

__all__ = ["as_float32", "fit_scaler", "persistence", "persistence_sums", "standardize"]

# A standardized train column has mean 0 and standard deviation 1 (0 if constant); one far
# from that was lost to float64 overflow or to rounding next to a huge offset.
_STANDARDIZED_TOLERANCE = 0.5


def fit_scaler(values: np.ndarray, columns: Sequence[Hashable], source: str) -> StandardScaler:
    """A ``StandardScaler`` fitted on train rows ``values [T_train, C]``, checked to standardize them.

    DataError naming the column when float64 cannot: squares overflow for magnitudes
    beyond ~1e154, and a huge constant (1e40) leaves rounding residue of ~1e24.
    """
    with np.errstate(over="ignore", invalid="ignore"):  # reported below, by column
        scaler = StandardScaler().fit(values)
        _refit_offset_columns(scaler, values, columns, source)
        standardized = scaler.transform(values)  # [T_train, C]
        mean, spread = standardized.mean(axis=0), standardized.std(axis=0)  # [C]
    usable = (np.isfinite(scaler.mean_) & np.isfinite(scaler.scale_) & np.isfinite(standardized).all(axis=0)
              & (np.abs(mean) <= _STANDARDIZED_TOLERANCE)
              & ((np.abs(spread - 1) <= _STANDARDIZED_TOLERANCE) | (spread <= _STANDARDIZED_TOLERANCE)))
    if not usable.all():
        column = int(np.flatnonzero(~usable)[0])
        largest = float(np.max(np.abs(values[:, column])))
        raise DataError(
            f"{source}: column {columns[column]!r} cannot be standardized in float64 (its train rows reach "
            f"|{largest:.3g}|; standardized they have mean {mean[column]:.3g} and standard deviation "
            f"{spread[column]:.3g} instead of 0 and 1). Fix: rescale the column (e.g. divide it by a power of "
            "ten) or subtract its typical level before passing it."
        )
    return scaler


def _refit_offset_columns(scaler: StandardScaler, values: np.ndarray, columns: Sequence[Hashable],
                          source: str) -> None:
    """Refit, on values less their first row, the columns that vary but ``scaler`` took as constant (scale 1).

    StandardScaler counts a column as constant where its variance is within rounding of its mean's
    magnitude: a meter reading 1e11 that moves by 0.01 kept scale 1 (its standardized errors 1e4 times too
    small). The variance does not depend on the offset; less one of its own values, the column's is measured.
    DataError naming the column where even that leaves it at 0: values below ~1e-154, whose squares underflow.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        taken_constant = (np.ptp(values, axis=0) > 0) & _constant_mask(scaler)  # [C]
    if not taken_constant.any():
        return
    offset = values[0, taken_constant]  # [C']
    refit = StandardScaler().fit(values[:, taken_constant] - offset)
    underflowed = _constant_mask(refit)  # [C']
    if underflowed.any():
        column = int(np.flatnonzero(taken_constant)[np.flatnonzero(underflowed)[0]])
        raise DataError(
            f"{source}: column {columns[column]!r} varies by less than float64 can measure (its train rows reach "
            f"|{float(np.max(np.abs(values[:, column]))):.3g}|: their squares underflow). Fix: rescale the column "
            "(e.g. multiply it by a power of ten) before passing it."
        )
    scaler.mean_[taken_constant] = refit.mean_ + offset
    scaler.var_[taken_constant] = refit.var_
    scaler.scale_[taken_constant] = refit.scale_


def _constant_mask(scaler: StandardScaler) -> np.ndarray:
    """The columns a fitted ``scaler`` took as constant: scale 1 where the standard deviation is not 1."""
    with np.errstate(invalid="ignore"):
        return (scaler.scale_ == 1.0) & (np.sqrt(scaler.var_) != 1.0)  # [C]


def standardize(scaler: StandardScaler, values: np.ndarray, columns: Sequence[Hashable], source: str,
                first_row: int = 0) -> np.ndarray:
    """``values [T, C]`` standardized as float32; DataError naming the cell that float32 cannot hold."""
    with np.errstate(over="ignore", invalid="ignore"):
        return as_float32(scaler.transform(values), values, columns, source, first_row)


def as_float32(scaled: np.ndarray, values: np.ndarray, columns: Sequence[Hashable], source: str,
               first_row: int = 0) -> np.ndarray:
    """Standardized ``scaled [T, C]`` as float32; DataError naming the first cell of ``values`` that float32
    cannot hold standardized."""
    with np.errstate(over="ignore", invalid="ignore"):
        narrowed = np.asarray(scaled).astype(np.float32)  # [T, C]
    bad = np.argwhere(~np.isfinite(narrowed))
    if bad.size:
        row, column = (int(i) for i in bad[0])
        raise DataError(
            f"{source}: column {columns[column]!r}, row {first_row + row} is {values[row, column]:.3g}, which "
            f"is {len(bad)} value(s) too far from the train rows to standardize in float32 (beyond 3.4e38 "
            "standard deviations). Fix: clean or rescale those values."
        )
    return narrowed


# The cells (windows x variables) of one chunk of persistence_sums: 8 MiB a float64 temporary.
_CHUNK_ELEMENTS = 2**20


def persistence_sums(values: np.ndarray, seq_len: int, pred_len: int) -> tuple[np.ndarray, np.ndarray]:
    """``(sum of offset * (future - mean), sum of offset**2)``, float64 ``[C]`` each, over every window of
    one block ``values [T, C]``: the two sums behind :func:`persistence`, added over the series of a panel."""
    values = np.asarray(values, dtype=np.float64)  # [T, C]
    windows = values.shape[0] - seq_len - pred_len + 1
    if windows < 1:
        return np.zeros(values.shape[1]), np.zeros(values.shape[1])
    sums = np.zeros((values.shape[0] + 1, values.shape[1]))  # [T + 1, C]: the prefix sums, 0 first
    np.cumsum(values, axis=0, out=sums[1:])
    cross, square = np.zeros(values.shape[1]), np.zeros(values.shape[1])
    # Windows in chunks of at most _CHUNK_ELEMENTS cells: the temporaries below would otherwise be six times the
    # block (a wide table of 300 variables). The benchmark datasets' blocks but electricity's and traffic's fit
    # in one chunk.
    step = max(1, _CHUNK_ELEMENTS // values.shape[1])
    for first in range(0, windows, step):
        starts = np.arange(first, min(first + step, windows))  # [N']
        mean = (sums[starts + seq_len] - sums[starts]) / seq_len  # [N', C]
        offset = values[starts + seq_len - 1] - mean  # [N', C]: the last input's offset from the mean
        future = (sums[starts + seq_len + pred_len] - sums[starts + seq_len]) / pred_len  # [N', C], mean over P
        cross += (offset * (future - mean)).sum(axis=0)
        square += (offset * offset).sum(axis=0)
    return cross, square


def persistence(blocks: np.ndarray | Sequence[np.ndarray], seq_len: int, pred_len: int) -> tuple[float, ...]:
    """Per variable, how much of a window's last offset from its mean persists over the horizon.

    The least-squares weight ``w`` in ``future - mean = w * (last - mean)`` over every window of
    ``blocks`` (one ``[T, C]`` array, or several, e.g. the series of a panel, whose windows never
    cross from one to the next; ``mean`` of the ``seq_len`` inputs, ``last`` the last of them,
    ``future`` each of the next ``pred_len`` values), clipped to ``[0, 1]``: near 1 for a random
    walk, whose last value is its best forecast; near 0 for noise around a level, whose window
    mean is. Scale-free within a block; 0.5 without a window. The ``persistence`` RevIN centre
    starts from it (:mod:`forecast.layers.normalization`).
    """
    blocks = [blocks] if isinstance(blocks, np.ndarray) else list(blocks)
    numerator, denominator = (sum(parts) for parts in zip(*(persistence_sums(b, seq_len, pred_len) for b in blocks)))
    weight = np.divide(numerator, denominator, out=np.full(len(numerator), 0.5), where=denominator > 0)
    return tuple(float(w) for w in np.clip(weight, 0.0, 1.0))
