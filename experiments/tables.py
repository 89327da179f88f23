"""Render experiments/README.md's results tables from experiments/results/*.csv.

    python experiments/tables.py            # rewrites the blocks between the markers

It also rewrites the main README's headline block: the detail tables of the ETTh1
reproduction settings (``HEADLINE_SETTINGS``), and the panel benchmark's block (``PANEL_DATASETS``).

The same as ``forecast report --results_dir experiments/results --configs_dir experiments/configs
--published experiments/published.csv --readme experiments/README.md`` (see :mod:`forecast.report`):
per dataset and feature mode, our mean MSE / MAE over seeds at each configured setting
(``experiments/configs``) next to the published figures (``experiments/published.csv``), "not run"
where a configured setting has no row yet; then every setting run in detail. Numbers are printed to
3 decimals, rounded half-even, never in our favour.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from forecast.files import write_text_atomically
from forecast.report import (
    configured_settings,
    detail_tables,
    read_published,
    read_results_dir,
    render_report,
    update_block,
)

HERE = Path(__file__).resolve().parent

# The ETTh1 settings of experiments/reproduce_informer.sh and reproduce_logsparse.sh:
# (features, seq_len, label_len, pred_len).
HEADLINE_SETTINGS = (("M", 48, 48, 24), ("S", 720, 168, 24), ("M", 96, 48, 24))
HEADLINE_BEGIN, HEADLINE_END = "<!-- headline:begin -->", "<!-- headline:end -->"
# The panel benchmark's panels (experiments/panel/, run_panel.sh): their tables in their own section.
PANEL_DATASETS = ("synthetic_panel_300", "synthetic_panel", "ETTh1_panel")
PANEL_BEGIN, PANEL_END = "<!-- panel:begin -->", "<!-- panel:end -->"


def headline_tables(results_dir: str | os.PathLike[str], published: str | os.PathLike[str],
                    configs_dir: str | os.PathLike[str], dataset: str = "ETTh1",
                    settings: Sequence[tuple[str, int, int, int]] = HEADLINE_SETTINGS) -> str:
    """The detail tables of the reproduction settings only: the main README's results table."""
    results = read_results_dir(results_dir)
    wanted = {(dataset, *setting) for setting in settings}
    columns = ["dataset", "features", "seq_len", "label_len", "pred_len"]
    chosen = results[[(d, f, int(s), int(l), int(p)) in wanted
                      for d, f, s, l, p in results[columns].itertuples(index=False)]]
    return detail_tables(chosen, read_published(published), configured_settings(configs_dir))


def panel_tables(results_dir: str | os.PathLike[str], datasets: Sequence[str] = PANEL_DATASETS) -> str:
    """The detail tables of the panel benchmark: every model on the same windows of each panel."""
    results = read_results_dir(results_dir)
    stems = results["dataset"].str.replace(r"@[0-9a-f]{10}$", "", regex=True)  # rows since name the file's digest
    return detail_tables(results[stems.isin(datasets)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results-dir", type=Path, default=HERE / "results")
    parser.add_argument("--configs-dir", type=Path, default=HERE / "configs")
    parser.add_argument("--published", type=Path, default=HERE / "published.csv")
    parser.add_argument("--readme", type=Path, default=HERE / "README.md")
    parser.add_argument("--main-readme", type=Path, default=HERE.parent / "README.md")
    args = parser.parse_args(argv)
    body = render_report(args.results_dir, args.configs_dir, args.published)
    readme = update_block(args.readme.read_text(), body)
    write_text_atomically(args.readme, update_block(readme, panel_tables(args.results_dir), PANEL_BEGIN, PANEL_END))
    headline = headline_tables(args.results_dir, args.published, args.configs_dir)
    main_readme = update_block(args.main_readme.read_text(), headline, HEADLINE_BEGIN, HEADLINE_END)
    write_text_atomically(args.main_readme, main_readme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
