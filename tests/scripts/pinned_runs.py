"""Three tiny seeded runs whose metrics and forecasts ``tests/test_numerics.py`` pins.

    python tests/scripts/pinned_runs.py > tests/data/pinned_numerics.json   # re-pin (say why in the commit)

Informer (``M``), the Gaussian LogSparse (``S``) and DLinear, each trained three steps from seed 0
in the improved recipe on a synthetic hourly series, then scored on every test window and
forecast past the series' end.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd

from forecast import Forecaster

WINDOW = dict(seq_len=32, label_len=16, pred_len=8, seed=0, max_epochs=1, learning_rate=1e-3,
              limit_train_batches=3, limit_val_batches=2)
RUNS = {
    "informer": dict(d_model=16, n_heads=2, d_ff=32, e_layers=1, d_layers=1),
    "logsparse": dict(d_model=16, n_heads=2, d_ff=32, n_layers=1, head="gaussian", features="S"),
    "dlinear": {},
}


def series(rows: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    t = np.arange(rows)
    return pd.DataFrame({
        "date": pd.date_range("2021-01-01", periods=rows, freq="h"),
        "a": np.sin(2 * np.pi * t / 24) + 0.05 * rng.standard_normal(rows),
        "b": np.cos(2 * np.pi * t / 12) + 0.05 * rng.standard_normal(rows),
        "OT": 10 + np.sin(2 * np.pi * t / 24 + 1) + 0.1 * rng.standard_normal(rows),
    })


def pinned_runs() -> dict[str, dict[str, object]]:
    """``{model: {"evaluate": {"metric|scale": value}, "predict": [values]}}`` of the three runs."""
    frame, results = series(), {}
    for name, options in RUNS.items():
        forecaster = Forecaster(name, **WINDOW, **options).fit(frame)
        table = forecaster.evaluate()
        results[name] = {
            "evaluate": {f"{metric}|{scale}": float(table.loc[metric, scale]) for metric in table.index
                         for scale in table.columns if np.isfinite(table.loc[metric, scale])},
            "predict": forecaster.predict().to_numpy().ravel().tolist(),
        }
    return results


if __name__ == "__main__":
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    print(json.dumps({"commit": commit, "runs": pinned_runs()}, indent=1))
