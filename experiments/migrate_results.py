"""Give results rows written before recipes existed their ``recipe`` and ``training`` columns.

    python experiments/migrate_results.py [DIR...]   # rewrites DIR/*.csv in place (default experiments/results)

Every such row was trained with the papers' settings (the only ones there were), so its
recipe is ``paper``; its training settings come from re-reading the command it records
(``python experiments/run.py ...``, the runner that ``forecast sweep --config`` replaced, or
``forecast sweep --config ... [--set key=value]``) under that recipe. The options the command
gives must equal the row's ``options``, or the script stops: a row is never re-keyed on a guess.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from forecast.config import load_config
from forecast.experiment import Experiment
from forecast.recipes import DEFAULT_RECIPE
from forecast.results import update_rows

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _value(text: str):
    """``3`` -> 3, ``0.5`` -> 0.5, ``true`` -> True, ``[3,2,1]`` -> [3, 2, 1], else the string (as run.py read them)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def legacy_runner_experiment(args: list[str]) -> Experiment:
    """The Experiment of a command of the retired ``experiments/run.py`` (its flags, read here only)."""
    parser = argparse.ArgumentParser(prog="experiments/run.py")
    for flag in ("--dataset", "--model", "--features", "--target", "--time-encoding", "--recipe", "--lr-schedule",
                 "--loss", "--precision", "--results", "--runs-dir"):
        parser.add_argument(flag)
    for flag in ("--seq-len", "--label-len", "--pred-len", "--seed", "--max-epochs", "--patience", "--batch-size",
                 "--num-workers", "--checkpoint-every-n-steps"):
        parser.add_argument(flag, type=int)
    parser.add_argument("--learning-rate", type=float)
    parser.add_argument("--checkpoint-every-minutes", type=float, default=10.0)
    parser.add_argument("--model-option", action="append", default=[])
    parser.add_argument("--progress", action="store_true")
    given = parser.parse_args(args)
    options = dict(option.split("=", 1) for option in given.model_option)
    training = {name: getattr(given, name) for name in ("max_epochs", "patience", "batch_size", "learning_rate",
                                                        "lr_schedule", "loss", "num_workers", "precision")}
    training = {name: value for name, value in training.items() if value is not None}
    training.update(seed=given.seed or 0, checkpoint_every_n_steps=given.checkpoint_every_n_steps,
                    checkpoint_every_minutes=given.checkpoint_every_minutes or None)
    return Experiment.from_recipe(
        given.recipe or DEFAULT_RECIPE, given.model, {key: _value(text) for key, text in sorted(options.items())},
        training,
        dataset=given.dataset, features=given.features or "M", target=given.target, seq_len=given.seq_len,
        label_len=given.label_len, pred_len=given.pred_len, time_encoding=given.time_encoding or "timeF",
    )


def experiment_of(command: str) -> Experiment:
    """The Experiment a recorded command ran, under the paper recipe."""
    words = shlex.split(command)
    if words[:2] == ["python", "experiments/run.py"]:
        return legacy_runner_experiment(["--recipe", "paper", *words[2:]])
    if words[:2] == ["forecast", "sweep"]:
        config = words[words.index("--config") + 1]
        seed = int(words[words.index("--seeds") + 1])
        overrides = [words[i + 1] for i, word in enumerate(words) if word == "--set"]  # key=value
        return load_config(ROOT / config, [*overrides, "recipe=paper"]).with_seed(seed).experiment()
    raise ValueError(f"cannot read the command {command!r}")


def migrate(path: Path) -> int:
    """Fill ``recipe``/``training`` of the rows of ``path`` that lack them; returns how many."""

    def update(row: dict[str, str]) -> bool:
        if row.get("recipe"):
            return False
        key = experiment_of(row["command"]).key()
        if key["options"] != row["options"] or key["model"] != row["model"]:
            raise ValueError(f"{path}: the command {row['command']!r} gives options {key['options']}, "
                             f"the row has {row['options']}")
        row["recipe"], row["training"] = key["recipe"], key["training"]
        return True

    return update_rows(path, update)


def main(argv: list[str] | None = None) -> int:
    directories = [Path(d) for d in (sys.argv[1:] if argv is None else argv)] or [HERE / "results"]
    for directory in directories:
        for path in sorted(directory.glob("*.csv")):
            print(f"{path}: {migrate(path)} rows migrated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
