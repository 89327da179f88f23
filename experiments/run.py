"""Run one experiment (or resume it) and append its results row.

    python experiments/run.py --dataset ETTh1 --model informer --features M \
        --seq-len 48 --label-len 48 --pred-len 24 --seed 0 --recipe paper --model-option factor=3

A run starts from a named recipe (``--recipe``, default ``improved``; ``paper`` is the
papers' settings, see :mod:`forecast.recipes`); model options and training flags given
here override the recipe's.

A run writes checkpoints under ``--runs-dir`` (one folder per run key, gitignored) every
epoch and every 10 minutes of training (``--checkpoint-every-minutes``); starting the same
command again resumes from the last checkpoint, and a run whose row is already in the
results CSV is skipped. A run sent SIGTERM saves the step it stopped
after and exits with status 143. Rows go to
``experiments/results/<dataset>.csv`` (format in docs/design.md). The runner itself is
:func:`forecast.experiment.run_experiment`, shared with ``forecast sweep``.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
from pathlib import Path

from forecast.config import DEFAULT_RUNS_DIR
from forecast.experiment import Experiment, run_experiment
from forecast.recipes import DEFAULT_RECIPE, RECIPES
from forecast.training import SIGTERM_EXIT_STATUS, stopped_by_sigterm

HERE = Path(__file__).resolve().parent


def parse_value(text: str):
    """``3`` -> 3, ``0.5`` -> 0.5, ``true`` -> True, ``[3,2,1]`` -> [3, 2, 1], else the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--features", default="M", choices=["M", "S", "MS"])
    parser.add_argument("--target", default=None, help="default: the dataset's registered target")
    parser.add_argument("--seq-len", type=int, required=True)
    parser.add_argument("--label-len", type=int, required=True)
    parser.add_argument("--pred-len", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--time-encoding", default="timeF")
    parser.add_argument("--recipe", default=DEFAULT_RECIPE, choices=sorted(RECIPES),
                        help="the named recipe the run starts from (default %(default)s)")
    parser.add_argument("--model-option", action="append", default=[], metavar="KEY=VALUE",
                        help="model config field, e.g. factor=3 or d_model=512 (repeatable)")
    # Training flags: None leaves the recipe's setting.
    parser.add_argument("--max-epochs", type=int)
    parser.add_argument("--patience", type=int)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--learning-rate", type=float)
    parser.add_argument("--lr-schedule")
    parser.add_argument("--loss")
    parser.add_argument("--num-workers", type=int)
    parser.add_argument("--precision")
    parser.add_argument("--checkpoint-every-minutes", type=float, default=10.0,
                        help="also checkpoint mid-epoch, so a killed run loses at most this many minutes "
                             "(0: per-epoch checkpoints only)")
    parser.add_argument("--checkpoint-every-n-steps", type=int, default=None,
                        help="also checkpoint every this many optimizer steps")
    parser.add_argument("--results", type=Path, default=None,
                        help="results CSV (default experiments/results/<dataset>.csv)")
    parser.add_argument("--runs-dir", type=Path, default=DEFAULT_RUNS_DIR)
    parser.add_argument("--progress", action="store_true", help="show Lightning's progress bar")
    return parser.parse_args(argv)


def experiment_from_args(args: argparse.Namespace) -> Experiment:
    model_options = dict(option.split("=", 1) for option in args.model_option)
    model_options = {key: parse_value(value) for key, value in sorted(model_options.items())}
    given = dict(max_epochs=args.max_epochs, patience=args.patience, batch_size=args.batch_size,
                 learning_rate=args.learning_rate, lr_schedule=args.lr_schedule, loss=args.loss,
                 num_workers=args.num_workers, precision=args.precision)
    training = {name: value for name, value in given.items() if value is not None}
    training.update(seed=args.seed, checkpoint_every_n_steps=args.checkpoint_every_n_steps,
                    checkpoint_every_minutes=args.checkpoint_every_minutes or None)
    return Experiment.from_recipe(
        args.recipe, args.model, model_options, training,
        dataset=args.dataset, features=args.features, target=args.target,
        seq_len=args.seq_len, label_len=args.label_len, pred_len=args.pred_len,
        time_encoding=args.time_encoding,
    )


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    args = parse_args(argv)
    experiment = experiment_from_args(args)
    results = args.results or HERE / "results" / f"{experiment.label}.csv"
    command = "python " + " ".join(shlex.quote(a) for a in ["experiments/run.py", *(argv or sys.argv[1:])])
    try:
        run_experiment(experiment, results, args.runs_dir, command, progress=args.progress)
    except SystemExit as stop:
        if not stopped_by_sigterm(stop):
            raise
        logging.getLogger("experiments.run").warning("stopped by SIGTERM; the same command resumes the run")
        return SIGTERM_EXIT_STATUS
    return 0


if __name__ == "__main__":
    sys.exit(main())
