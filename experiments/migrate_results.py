"""Give results rows written before recipes existed their ``recipe`` and ``training`` columns.

    python experiments/migrate_results.py [DIR...]   # rewrites DIR/*.csv in place (default experiments/results)

Every such row was trained with the papers' settings (the only ones there were), so its
recipe is ``paper``; its training settings come from re-reading the command it records
(``experiments/run.py ...`` or ``forecast sweep --config ... [--set key=value]``) under
that recipe. The options the command gives must equal the row's ``options``, or the
script stops: a row is never re-keyed on a guess.
"""

from __future__ import annotations

import csv
import importlib.util
import shlex
import sys
from pathlib import Path

from forecast.config import load_config
from forecast.results import COLUMNS, locked

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _run_script():
    spec = importlib.util.spec_from_file_location("run", HERE / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def experiment_of(command: str):
    """The Experiment a recorded command ran, under the paper recipe."""
    words = shlex.split(command)
    if words[:2] == ["python", "experiments/run.py"]:
        run = _run_script()
        return run.experiment_from_args(run.parse_args(["--recipe", "paper", *words[2:]]))
    if words[:2] == ["forecast", "sweep"]:
        config = words[words.index("--config") + 1]
        seed = int(words[words.index("--seeds") + 1])
        overrides = [words[i + 1] for i, word in enumerate(words) if word == "--set"]  # key=value
        return load_config(ROOT / config, [*overrides, "recipe=paper"]).with_seed(seed).experiment()
    raise ValueError(f"cannot read the command {command!r}")


def migrate(path: Path) -> int:
    """Fill ``recipe``/``training`` of the rows of ``path`` that lack them; returns how many."""
    with locked(path):
        with path.open(newline="") as handle:  # closed before the same file is rewritten below
            rows = list(csv.DictReader(handle))
        changed = 0
        for row in rows:
            if row.get("recipe"):
                continue
            experiment = experiment_of(row["command"])
            key = experiment.key()
            if key["options"] != row["options"] or key["model"] != row["model"]:
                raise ValueError(f"{path}: the command {row['command']!r} gives options {key['options']}, "
                                 f"the row has {row['options']}")
            row["recipe"], row["training"] = key["recipe"], key["training"]
            changed += 1
        with path.open("w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=COLUMNS, restval="", lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
    return changed


def main(argv: list[str] | None = None) -> int:
    directories = [Path(d) for d in (sys.argv[1:] if argv is None else argv)] or [HERE / "results"]
    for directory in directories:
        for path in sorted(directory.glob("*.csv")):
            print(f"{path}: {migrate(path)} rows migrated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
