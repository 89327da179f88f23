"""A synthetic long-format panel for the panel path (issue 20): many series of their own lengths,
starts and seasonalities, driven by a promotion calendar known in advance.

    python experiments/make_panel.py --series 300 --seed 0 --output panel.csv [--params params.csv]

The table is in the long format that neuralforecast, Darts and pytorch-forecasting accept, one row
per series and hour: ``unique_id``, ``ds``, ``y``, ``promo`` (0/1, a future covariate: the calendar
is planned ahead) and ``region`` (a static covariate). Series ``i`` is

    y_t = level_i + trend_i * t + amplitude_i * sin(2 pi t / season_i + phase_i) + lift_i * promo_t + noise_t

with ``t`` the hours since the series' own start, ``season_i`` a day (24) or a week (168), a length
drawn from ``[min_length, max_length]`` and a start anywhere in the first ``max_start`` hours of the
panel. Promotions are blocks of 6 to 48 hours that start at random (a share ``promo_rate`` of the
hours on average) and lift the series by ``lift_i > 0``. ``--params`` writes the true parameters, one
row per series, so that what a model learned about the promotion can be checked against them.

    python experiments/make_panel.py --from-wide ETTh1 --output ETTh1_panel.csv

instead writes a registered wide dataset in the long format: each variable becomes a series of its own
(``unique_id`` the column name, ``ds``, ``y``), the panel benchmark's "variables as univariate series".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REGIONS = ("north", "south", "east", "west")
SEASONS = (24, 168)


def _promotions(rng: np.random.Generator, length: int, rate: float) -> np.ndarray:
    """0/1 ``[length]``: blocks of 6 to 48 hours covering about ``rate`` of the hours."""
    promo = np.zeros(length, dtype=np.int8)
    mean_block = 27.0
    starts = np.flatnonzero(rng.random(length) < rate / mean_block)
    for start in starts:
        promo[start:start + int(rng.integers(6, 49))] = 1
    return promo


def make_panel(n_series: int = 300, seed: int = 0, *, min_length: int = 500, max_length: int = 3000,
               max_start: int = 2000, promo_rate: float = 0.1, noise: float = 0.3,
               start: str = "2024-01-01") -> tuple[pd.DataFrame, pd.DataFrame]:
    """The panel (rows sorted by series, then time) and its true parameters, one row per series."""
    if n_series < 1 or not 1 <= min_length <= max_length or max_start < 0 or not 0 <= promo_rate < 1:
        raise ValueError(f"make_panel: n_series={n_series}, min_length={min_length}, max_length={max_length}, "
                         f"max_start={max_start}, promo_rate={promo_rate}; need n_series >= 1, "
                         "1 <= min_length <= max_length, max_start >= 0 and 0 <= promo_rate < 1")
    rng = np.random.default_rng(seed)
    origin = pd.Timestamp(start)
    frames, params = [], []
    for index in range(n_series):
        length = int(rng.integers(min_length, max_length + 1))
        offset = int(rng.integers(0, max_start + 1))
        truth = {
            "unique_id": f"series_{index:04d}",
            "region": REGIONS[int(rng.integers(len(REGIONS)))],
            "start": origin + pd.Timedelta(hours=offset),
            "length": length,
            "season": SEASONS[int(rng.integers(len(SEASONS)))],
            "level": float(rng.normal(10.0, 3.0)),
            "trend": float(rng.normal(0.0, 5e-4)),
            "amplitude": float(rng.uniform(0.5, 2.0)),
            "phase": float(rng.uniform(0.0, 2 * np.pi)),
            "lift": float(rng.uniform(0.5, 3.0)),
        }
        t = np.arange(length)
        promo = _promotions(rng, length, promo_rate)
        y = (truth["level"] + truth["trend"] * t
             + truth["amplitude"] * np.sin(2 * np.pi * t / truth["season"] + truth["phase"])
             + truth["lift"] * promo + noise * rng.standard_normal(length))
        frames.append(pd.DataFrame({
            "unique_id": truth["unique_id"],
            "ds": pd.date_range(truth["start"], periods=length, freq="h"),
            "y": y,
            "promo": promo,
            "region": truth["region"],
        }))
        params.append(truth)
    return pd.concat(frames, ignore_index=True), pd.DataFrame(params)


def wide_to_long(dataset: str) -> pd.DataFrame:
    """A registered wide dataset as a panel: one series per variable, its rows grouped by series in the
    wide table's column order (not sorted by name), each series in the table's (time) order."""
    from forecast import datasets

    frame = datasets.load(dataset)
    date_column = frame.columns[0]
    long = frame.melt(id_vars=date_column, var_name="unique_id", value_name="y")
    return long.rename(columns={date_column: "ds"})[["unique_id", "ds", "y"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--series", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-length", type=int, default=500)
    parser.add_argument("--max-length", type=int, default=3000)
    parser.add_argument("--max-start", type=int, default=2000)
    parser.add_argument("--promo-rate", type=float, default=0.1)
    parser.add_argument("--noise", type=float, default=0.3)
    parser.add_argument("--output", type=Path, required=True, help="the panel's CSV")
    parser.add_argument("--params", type=Path, help="also write the true parameters, one row per series")
    parser.add_argument("--from-wide", metavar="DATASET", help="write this registered dataset in the long format "
                        "instead (each variable a series)")
    args = parser.parse_args(argv)
    if args.from_wide is not None:
        panel = wide_to_long(args.from_wide)
        panel.to_csv(args.output, index=False)
        print(f"wrote {args.output}: {len(panel)} rows, {panel['unique_id'].nunique()} series")
        return 0
    panel, params = make_panel(args.series, args.seed, min_length=args.min_length, max_length=args.max_length,
                               max_start=args.max_start, promo_rate=args.promo_rate, noise=args.noise)
    panel.to_csv(args.output, index=False)
    if args.params is not None:
        params.to_csv(args.params, index=False)
    print(f"wrote {args.output}: {len(panel)} rows, {len(params)} series of {params['length'].min()} to "
          f"{params['length'].max()} hours")
    return 0


if __name__ == "__main__":
    sys.exit(main())
