"""Write the notebooks from the cell sources below, outputs cleared.

    python notebooks/make_notebooks.py           # (re)write quickstart, attention, compare, panel
    python notebooks/make_notebooks.py --check   # exit 1 if a committed notebook differs

The notebooks are generated so that their diffs stay reviewable and no stale output is
ever committed; the test suite executes each one (tests/test_notebooks.py). They use
the public API only. The notebooks that train read ``FORECAST_NOTEBOOK_QUICK`` in their
parameters cell: ``1`` (what the tests set) trains tiny models for a few batches, so a
run takes seconds; unset, the settings are a sensible first try on a laptop CPU (a few
minutes).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

PARAMETERS = '''\
# Parameters. The test suite sets FORECAST_NOTEBOOK_QUICK=1 for a run of a few seconds.
import os

QUICK = os.environ.get("FORECAST_NOTEBOOK_QUICK") == "1"
EPOCHS = 1 if QUICK else 6
# Trainer options: in QUICK mode a couple of batches per epoch instead of all of them.
LIMITS = dict(limit_train_batches=4, limit_val_batches=2) if QUICK else {}
SIZES = dict(d_model=16, n_heads=2, d_ff=32) if QUICK else dict(d_model=64, n_heads=4, d_ff=128)'''

QUICKSTART = [
    new_markdown_cell(
        "# Quickstart: forecast ETTh1 with Informer\n\n"
        "Load a benchmark dataset, fit a small Informer, score it on every test window, forecast the real "
        "future after the last row and plot it. The same model through the command line is "
        "`forecast fit --config experiments/configs/ETTh1/informer_M_24.yaml`."
    ),
    new_code_cell(PARAMETERS),
    new_code_cell(
        "import pandas as pd\n\n"
        "from forecast import Forecaster, datasets\n"
        "from forecast.plotting import plot_horizon_errors\n\n"
        "df = datasets.load(\"ETTh1\")  # shipped with the package; 'date' parsed, checksum verified\n"
        "df.tail()"
    ),
    new_markdown_cell(
        "ETTh1 is hourly. As a registered dataset it gets its canonical split (12/4/4 months); the scaler "
        "is fitted on the training rows only. `features=\"M\"`: all seven variables in and out, the "
        "target `OT` last."
    ),
    new_code_cell(
        "fc = Forecaster(\"informer\", seq_len=96, label_len=48, pred_len=24, features=\"M\",\n"
        "                max_epochs=EPOCHS, seed=0, learning_rate=1e-3, e_layers=2, d_layers=1, **SIZES, **LIMITS)\n"
        "fc.fit(df)  # early stopping on validation loss; the best epoch's weights are kept\n"
        "fc"
    ),
    new_markdown_cell(
        "`evaluate` scores every test window (none dropped) on the standardized scale, the field's "
        "convention, and in original units. A trained model earns its keep only if it beats copying the "
        "past: `seasonal_naive` repeats yesterday's 24 hours, scored on the same windows."
    ),
    new_code_cell(
        "baseline = Forecaster(\"seasonal_naive\", seq_len=96, label_len=48, pred_len=24).fit(df)\n"
        "informer_scores = fc.evaluate()\n"
        "scores = pd.concat({\"informer\": informer_scores, \"seasonal_naive\": baseline.evaluate()}, axis=1)\n"
        "print(f\"{informer_scores.attrs['n_windows']} test windows\")\n"
        "scores.loc[[\"mse\", \"mae\"]]"
    ),
    new_markdown_cell("The error by horizon step, from the long reports (`detail=True`):"),
    new_code_cell(
        "plot_horizon_errors({\"informer\": fc.evaluate(detail=True), \"seasonal_naive\": baseline.evaluate(detail=True)},\n"
        "                    title=\"Error by horizon step (original units)\")"
    ),
    new_markdown_cell(
        "`predict` forecasts the 24 hours **after the last row**: timestamps continue the series' "
        "frequency, values are in original units."
    ),
    new_code_cell(
        "future = fc.predict(df)\n"
        "assert len(future) == 24 and future.index[0] == df[\"date\"].iloc[-1] + pd.Timedelta(hours=1)\n"
        "future.head()"
    ),
    new_code_cell("fc.plot(df, columns=[\"OT\"], history=96)"),
    new_markdown_cell("A test window against the truth:"),
    new_code_cell("fc.plot(window=0, columns=[\"OT\", \"HUFL\"])"),
    new_markdown_cell("Save and load: a directory with the config, the scaler and the weights."),
    new_code_cell(
        "import tempfile\n\n"
        "with tempfile.TemporaryDirectory() as directory:\n"
        "    fc.save(directory)\n"
        "    loaded = Forecaster.load(directory)\n"
        "    pd.testing.assert_frame_equal(loaded.predict(df), future)\n"
        "print(\"the loaded forecaster gives the same forecast\")"
    ),
]

ATTENTION = [
    new_markdown_cell(
        "# Attention patterns: ProbSparse and LogSparse\n\n"
        "Informer's **ProbSparse** self-attention gives exact attention to the top-u queries only, ranked by "
        "a sparsity measure M (max minus mean of each query's scores against a sample of keys); the other "
        "queries get the mean of the values. The **LogSparse** Transformer lets each step attend to "
        "itself and to steps 1, 2, 4, 8, ... back, so memory grows as O(L log L)."
    ),
    new_code_cell(PARAMETERS),
    new_code_cell(
        "from forecast import Forecaster, datasets\n"
        "from forecast.plotting import plot_attention, plot_logsparse_pattern, plot_probsparse\n\n"
        "df = datasets.load(\"ETTh1\")\n"
        "informer = Forecaster(\"informer\", seq_len=96, label_len=48, pred_len=24, max_epochs=EPOCHS, seed=0,\n"
        "                      learning_rate=1e-3, attention=\"prob\", factor=5, **SIZES, **LIMITS).fit(df)"
    ),
    new_markdown_cell(
        "The encoder's attention for the first test window, one entry per encoder layer. Top: the "
        "sparsity M of every query in every head, the selected queries as dots. Bottom: the attention "
        "that head 0 effectively used (selected rows exact, lazy rows uniform)."
    ),
    new_code_cell(
        "weights = informer.attention_weights(window=0)\n"
        "print([type(layer).__name__ for layer in weights])\n"
        "plot_probsparse(weights[0], head=0)"
    ),
    new_markdown_cell("The deeper layer reads the distilled (halved) sequence:"),
    new_code_cell("plot_probsparse(weights[-1], head=0)"),
    new_markdown_cell(
        "The LogSparse pattern for 96 steps, and the keys each query reads against full causal attention. "
        "`local_window` adds a dense band of recent steps; `sub_len` restarts the pattern in sub-sequences."
    ),
    new_code_cell("plot_logsparse_pattern(96)"),
    new_code_cell("plot_logsparse_pattern(96, local_window=4, sub_len=32)"),
    new_markdown_cell(
        "A trained LogSparse Transformer: its first layer's attention for the first test window "
        "(tokens are the 96 lookback steps then the 24 forecast steps; one sequence per variable)."
    ),
    new_code_cell(
        "logsparse = Forecaster(\"logsparse\", seq_len=96, label_len=48, pred_len=24, max_epochs=EPOCHS, seed=0,\n"
        "                       learning_rate=1e-3, n_layers=2, **SIZES, **LIMITS).fit(df)\n"
        "layers = logsparse.attention_weights(window=0)\n"
        "plot_attention(layers[0], head=0, title=\"LogSparse attention, layer 1, head 0\")"
    ),
]

COMPARE = [
    new_markdown_cell(
        "# Our results against the papers\n\n"
        "Reads the committed results (`experiments/results/*.csv`, one row per run, written by "
        "`forecast sweep`) and the published numbers (`experiments/published.csv`), and plots them side by "
        "side. The tables in `experiments/README.md` come from the same files (`forecast report`). Nothing is "
        "trained here, so there are no parameters."
    ),
    new_code_cell(
        "from pathlib import Path\n\n"
        "import pandas as pd\n"
        "from IPython.display import Markdown\n\n"
        "from forecast.plotting import plot_model_comparison\n"
        "from forecast.report import configured_settings, read_published, read_results_dir, summary_tables\n\n"
        "# experiments/ of the repository this notebook sits in\n"
        "EXPERIMENTS = next(p / \"experiments\" for p in [Path.cwd(), *Path.cwd().parents]\n"
        "                   if (p / \"experiments\" / \"published.csv\").is_file())\n"
        "results = read_results_dir(EXPERIMENTS / \"results\")\n"
        "published = read_published(EXPERIMENTS / \"published.csv\")\n"
        "settings = configured_settings(EXPERIMENTS / \"configs\")\n"
        "print(f\"{len(results)} runs, {len(published)} published figures, {len(settings)} configured settings\")\n"
        "results[[\"dataset\", \"model\", \"features\", \"seq_len\", \"label_len\", \"pred_len\", \"seed\",\n"
        "         \"mse\", \"mae\"]].head()"
    ),
    new_markdown_cell(
        "ETTh1, multivariate: our runs at the configured settings (mean over seeds, the error bars are the "
        "spread) next to the Informer paper's figures. Settings not run yet have no bar."
    ),
    new_code_cell(
        "DATASET, FEATURES = \"ETTh1\", \"M\"\n"
        "keys = [\"dataset\", \"model\", \"features\", \"seq_len\", \"label_len\", \"pred_len\", \"options\"]\n"
        "ours = results.merge(settings[keys], on=keys)  # only the runs at a configured setting\n"
        "ours = ours[(ours.dataset == DATASET) & (ours.features == FEATURES)].assign(label=lambda f: f.model)\n"
        "paper = published[(published.dataset == DATASET) & (published.features == FEATURES)]\n"
        "paper = paper.assign(label=paper.published_as + \" (paper)\")\n"
        "columns = [\"label\", \"pred_len\", \"mse\", \"mae\"]\n"
        "both = pd.concat([ours[columns], paper[columns]], ignore_index=True).dropna(subset=[\"mse\"])\n"
        "plot_model_comparison(both, label=\"label\", group=\"pred_len\",\n"
        "                      title=f\"{DATASET} {FEATURES}: ours against the Informer paper (standardized scale)\")"
    ),
    new_markdown_cell("The same comparison as a table for every dataset (\"not run\" marks what is still to do):"),
    new_code_cell("Markdown(summary_tables(results, settings, published))"),
]

PANEL = [
    new_markdown_cell(
        "# A store panel with a promotion calendar\n\n"
        "Many series in one long table, the format neuralforecast, Darts and pytorch-forecasting accept: one row "
        "per store and day, with the sales to forecast, a promotion flag planned ahead (a *future covariate*: "
        "its values are known for the days we forecast) and the store's region (a *static covariate*). "
        "Stores open on different days, so the series have their own lengths. From CSV to plot, public API only."
    ),
    new_code_cell(PARAMETERS),
    new_code_cell(
        "import tempfile\n"
        "from pathlib import Path\n\n"
        "import numpy as np\n"
        "import pandas as pd\n\n"
        "from forecast import Forecaster\n\n"
        "# A small synthetic chain: weekly rhythm, a level per store, +30% sales on promotion days.\n"
        "rng = np.random.default_rng(0)\n"
        "rows = []\n"
        "for store in range(12):\n"
        "    days = pd.date_range(pd.Timestamp(\"2023-01-01\") + pd.Timedelta(days=int(rng.integers(0, 120))),\n"
        "                         \"2024-12-31\", freq=\"D\")\n"
        "    promo = (rng.random(len(days)) < 0.15).astype(int)\n"
        "    level = rng.uniform(50, 400)\n"
        "    weekly = 1 + 0.25 * np.sin(2 * np.pi * days.day_of_week / 7)\n"
        "    sales = level * weekly * (1 + 0.3 * promo) * rng.lognormal(0, 0.05, len(days))\n"
        "    rows.append(pd.DataFrame({\"store\": f\"store_{store:02d}\", \"date\": days, \"sales\": sales.round(1),\n"
        "                              \"promo\": promo, \"region\": [\"north\", \"south\", \"west\"][store % 3]}))\n"
        "csv = Path(tempfile.mkdtemp()) / \"stores.csv\"\n"
        "pd.concat(rows).to_csv(csv, index=False)\n"
        "pd.read_csv(csv).groupby(\"store\").agg(first=(\"date\", \"min\"), days=(\"date\", \"size\"),\n"
        "                                      mean_sales=(\"sales\", \"mean\"), region=(\"region\", \"first\")).head()"
    ),
    new_markdown_cell(
        "`id_column` makes the table a panel. Each store is split 70/10/20 by its own rows and scaled by its own "
        "training rows; windows never cross two stores, and training shuffles them across stores. The LogSparse "
        "Transformer with its Gaussian head sees the promotion flag, the calendar, a store embedding and a region "
        "embedding at every step, the forecast days included."
    ),
    new_code_cell(
        "ROLES = dict(id_column=\"store\", date_column=\"date\", target=\"sales\",\n"
        "             future_covariates=[\"promo\"], static_covariates=[\"region\"])\n"
        "WINDOW = dict(seq_len=56, label_len=28, pred_len=28)  # eight weeks in, four weeks out\n"
        "fc = Forecaster(\"logsparse\", **WINDOW, head=\"gaussian\", max_epochs=EPOCHS, seed=0,\n"
        "                **SIZES, **LIMITS).fit(csv, **ROLES)\n"
        "fc.datamodule.split_sizes"
    ),
    new_markdown_cell(
        "Scored on every test window of every store, beside copying last week (`seasonal_naive`) and "
        "DLinear (which adds a linear promotion term and a level per store and region), on the same windows:"
    ),
    new_code_cell(
        "baselines = {name: Forecaster(name, **WINDOW, max_epochs=EPOCHS, seed=0, **LIMITS).fit(csv, **ROLES)\n"
        "             for name in (\"seasonal_naive\", \"dlinear\")}\n"
        "scores = pd.concat({\"logsparse\": fc.evaluate(), **{name: b.evaluate() for name, b in baselines.items()}}, axis=1)\n"
        "scores.loc[[\"mse\", \"mae\", \"rho_risk_0.5\", \"rho_risk_0.9\"]]"
    ),
    new_markdown_cell("The same test windows, one row per store:"),
    new_code_cell("fc.evaluate(by_series=True).round(3)"),
    new_markdown_cell(
        "Forecasting the four weeks after each store's last day needs the promotion calendar of those weeks. "
        "A store missing from the calendar, or a missing day, is refused by name rather than guessed."
    ),
    new_code_cell(
        "sales = pd.read_csv(csv)\n"
        "ends = pd.to_datetime(sales.groupby(\"store\")[\"date\"].max())\n"
        "def calendar(promo_days):\n"
        "    return pd.concat([pd.DataFrame({\"store\": store, \"date\": pd.date_range(end + pd.Timedelta(days=1), periods=28),\n"
        "                                    \"promo\": [int(day in promo_days) for day in range(28)]})\n"
        "                      for store, end in ends.items()])\n"
        "planned = calendar(promo_days={3, 4, 10, 11, 17, 18})\n"
        "forecast = fc.predict(csv, future_covariates=planned)\n"
        "no_promo = fc.predict(csv, future_covariates=calendar(promo_days=set()))\n"
        "keys = [\"store\", \"date\"]  # matched by store and day, not by row order\n"
        "days = forecast[[*keys, \"sales\"]].merge(no_promo[[*keys, \"sales\"]], on=keys, suffixes=(\"\", \"_none\"))\n"
        "days = days.merge(planned, on=keys)\n"
        "lift = (days[\"sales\"] / days[\"sales_none\"] - 1).groupby(days[\"promo\"]).mean()\n"
        "print(f\"forecast sales on planned promotion days vs without: {lift.get(1, float('nan')):+.1%}; \"\n"
        "      f\"other days: {lift.get(0, float('nan')):+.1%}\")\n"
        "forecast.head()"
    ),
    new_code_cell("fc.plot(csv, series=\"store_03\", future_covariates=planned, history=56)"),
]

NOTEBOOKS = {"quickstart.ipynb": QUICKSTART, "attention.ipynb": ATTENTION, "compare.ipynb": COMPARE,
             "panel.ipynb": PANEL}


def build(cells: list) -> nbformat.NotebookNode:
    notebook = new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.metadata["language_info"] = {"name": "python"}
    for index, cell in enumerate(notebook.cells):
        cell["id"] = f"cell-{index:02d}"  # stable ids: regenerating changes nothing
    return notebook


def render(cells: list) -> str:
    return nbformat.writes(build(cells)) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the committed notebooks")
    args = parser.parse_args(argv)
    stale = []
    for name, cells in NOTEBOOKS.items():
        path, text = HERE / name, render(cells)
        nbformat.validate(build(cells))
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    for name in stale:
        print(f"out of date: notebooks/{name}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
