"""Train/val/test borders as the long-sequence forecasting literature draws them.

Each split *owns* a block of rows (the rows its forecasts land on). Val and test windows
start ``seq_len`` rows before their block, so their first lookback reaches into the
previous split and their first forecast step is the block's first row. A split of
``rows`` rows (lookback included) holds ``rows - seq_len - pred_len + 1`` windows.

* ETT hourly (``'ett_hour'``): 12/4/4 months of 30 days: owned rows [0, 8640),
  [8640, 11520), [11520, 14400); the rest of the file is unused, as in the field.
* ETT 15-minute (``'ett_minute'``): the same months, x4.
* Otherwise (``'ratio'``): ``n_train = int(T * 0.7)``, ``n_test = int(T * 0.2)``,
  ``n_val = T - n_train - n_test``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Union

from forecast.checks import is_int, is_real
from forecast.errors import ConfigError, SeriesTooShortError

SPLIT_NAMES: tuple[str, str, str] = ("train", "val", "test")


@dataclass(frozen=True)
class RowSplit:
    """Explicit owned-row ends: train [0, train_end), val [train_end, val_end), test [val_end, test_end)."""

    train_end: int
    val_end: int
    test_end: int

    def __post_init__(self) -> None:
        ends = (self.train_end, self.val_end, self.test_end)
        if not all(is_int(e) for e in ends) or not 0 < self.train_end < self.val_end < self.test_end:
            raise ConfigError(
                f"row split {ends!r}: Fix: give three increasing positive integers "
                "(train_end, val_end, test_end), each split owning the rows up to its end."
            )

    def owned_ends(self, n_rows: int, *, source: str = "<DataFrame>", name: str = "custom") -> tuple[int, int, int]:
        if self.test_end > n_rows:
            raise SeriesTooShortError(
                f"{source}: split {name!r} ends its test block at row {self.test_end} but the "
                f"series has {n_rows} rows. Fix: use split='ratio' (70/10/20), row ends within "
                "the series, or the full file."
            )
        return self.train_end, self.val_end, self.test_end


@dataclass(frozen=True)
class FractionSplit:
    """Fractions of rows; val gets the remainder ``T - int(T*train) - int(T*test)`` as in the field."""

    train: float = 0.7
    val: float = 0.1
    test: float = 0.2

    def __post_init__(self) -> None:
        parts = (self.train, self.val, self.test)
        valid = all(is_real(p) and 0 < p < 1 for p in parts)
        if not valid or not math.isclose(sum(parts), 1.0, abs_tol=1e-9):
            raise ConfigError(
                f"fraction split {parts!r}: Fix: give three fractions in (0, 1) that sum to 1, "
                "e.g. (0.7, 0.1, 0.2)."
            )

    def owned_ends(self, n_rows: int, *, source: str = "<DataFrame>", name: str = "ratio") -> tuple[int, int, int]:
        n_train = int(n_rows * self.train)
        n_test = int(n_rows * self.test)
        n_val = n_rows - n_train - n_test
        return n_train, n_train + n_val, n_rows


Split = Union[RowSplit, FractionSplit]
SplitLike = Union[str, RowSplit, FractionSplit, Sequence[float]]

_HOURS_PER_MONTH = 30 * 24
SPLIT_PROTOCOLS: dict[str, Split] = {
    "ett_hour": RowSplit(12 * _HOURS_PER_MONTH, 16 * _HOURS_PER_MONTH, 20 * _HOURS_PER_MONTH),
    "ett_minute": RowSplit(12 * _HOURS_PER_MONTH * 4, 16 * _HOURS_PER_MONTH * 4, 20 * _HOURS_PER_MONTH * 4),
    "ratio": FractionSplit(0.7, 0.1, 0.2),
}


def resolve_split(spec: SplitLike) -> tuple[str, Split]:
    """(name, split) from a protocol name, a split object, 3 fractions or 3 integer row ends."""
    if isinstance(spec, str):
        if spec not in SPLIT_PROTOCOLS:
            raise ConfigError(
                f"split={spec!r}: Fix: use one of {tuple(SPLIT_PROTOCOLS)}, three fractions "
                "(0.7, 0.1, 0.2), three row ends (train_end, val_end, test_end), or a "
                "RowSplit/FractionSplit."
            )
        return spec, SPLIT_PROTOCOLS[spec]
    if isinstance(spec, (RowSplit, FractionSplit)):
        return ("rows" if isinstance(spec, RowSplit) else "fractions"), spec
    if isinstance(spec, Sequence) and len(spec) == 3:
        if all(is_int(v) for v in spec):
            return "rows", RowSplit(*(int(v) for v in spec))
        return "fractions", FractionSplit(*spec)
    raise ConfigError(
        f"split={spec!r}: Fix: use a protocol name {tuple(SPLIT_PROTOCOLS)}, three fractions, "
        "three integer row ends, or a RowSplit/FractionSplit."
    )


def window_count(rows: int, seq_len: int, pred_len: int) -> int:
    """Windows in a block of ``rows`` rows (never negative)."""
    return max(rows - seq_len - pred_len + 1, 0)


def split_borders(
    n_rows: int,
    seq_len: int,
    pred_len: int,
    split: SplitLike = "ratio",
    *,
    source: str = "<DataFrame>",
) -> dict[str, tuple[int, int]]:
    """Row ranges ``[start, end)`` of train/val/test, lookback included.

    Raises ``SeriesTooShortError`` naming the first split that cannot hold one window.
    """
    name, spec = resolve_split(split)
    train_end, val_end, test_end = spec.owned_ends(n_rows, source=source, name=name)
    borders = {
        "train": (0, train_end),
        "val": (train_end - seq_len, val_end),
        "test": (val_end - seq_len, test_end),
    }
    needed = seq_len + pred_len
    for split_name, (start, end) in borders.items():
        if end - start < needed:
            lookback = "" if split_name == "train" else f", including the {seq_len}-row lookback"
            raise SeriesTooShortError(
                f"{source}: the {split_name} split has {end - start} rows (rows {start} to "
                f"{end - 1} of {n_rows}{lookback}) but one window needs seq_len + pred_len = "
                f"{needed} rows. Fix: shorten seq_len/pred_len, use a longer series, or give a "
                f"split with more {split_name} rows (split=...)."
            )
    return borders
