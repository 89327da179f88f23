"""Render experiments/README.md's results tables from experiments/results/*.csv.

    python experiments/tables.py            # rewrites the blocks between the markers

It also rewrites the main README's headline block: the detail tables of the ETTh1
reproduction settings (``forecast.report.HEADLINE_SETTINGS``).

The same as ``forecast report --readme experiments/README.md`` run from the repository
root (see :mod:`forecast.report`): per dataset and feature mode, our mean MSE / MAE over
seeds at each configured setting (``experiments/configs``) next to the published figures
(``experiments/published.csv``), "not run" where a configured setting has no row yet;
then every setting run in detail. Numbers are printed to 3 decimals, rounded half-even,
never in our favour.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from forecast.report import HEADLINE_BEGIN, HEADLINE_END, headline_tables, render_report, update_block

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results-dir", type=Path, default=HERE / "results")
    parser.add_argument("--configs-dir", type=Path, default=HERE / "configs")
    parser.add_argument("--published", type=Path, default=HERE / "published.csv")
    parser.add_argument("--readme", type=Path, default=HERE / "README.md")
    parser.add_argument("--main-readme", type=Path, default=HERE.parent / "README.md")
    args = parser.parse_args(argv)
    body = render_report(args.results_dir, args.configs_dir, args.published)
    args.readme.write_text(update_block(args.readme.read_text(), body))
    headline = headline_tables(args.results_dir, args.published, args.configs_dir)
    args.main_readme.write_text(update_block(args.main_readme.read_text(), headline, HEADLINE_BEGIN, HEADLINE_END))
    return 0


if __name__ == "__main__":
    sys.exit(main())
