"""Start a run and SIGKILL (or SIGTERM) this process at a chosen training step (or mid-write), for tests/test_resume.py.

    python tests/scripts/killed_run.py --kill-at-step N api CSV RUN_DIR OPTIONS_JSON
    python tests/scripts/killed_run.py --kill-at-step N cli ARG...        # the forecast command's arguments
    python tests/scripts/killed_run.py --kill-at-step N sweep RESULTS_DIR RUNS_DIR CONFIG...
    python tests/scripts/killed_run.py append CSV ROW_JSON                  # killed inside append_row

The kill is ``os.kill(os.getpid(), SIGKILL)``: no exception, no cleanup, no flush, as
when the machine's out-of-memory killer or a scheduler ends a job. It happens at the end
of training step N, before any checkpoint of that step is written (Lightning runs
checkpoint callbacks after the others), so the run loses the progress since its last
checkpoint. ``--signal TERM`` sends SIGTERM instead: Lightning finishes that step and stops,
as when a scheduler or a session ends a job. Without ``--kill-at-step`` the run is not killed. With
``--in-validation`` (api mode) the kill comes in the first validation batch after step N, the last step
of an epoch.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys


def die(kill_signal: signal.Signals = signal.SIGKILL) -> None:
    os.kill(os.getpid(), kill_signal)


def kill_callback(step: int | None, kill_signal: signal.Signals, in_validation: bool = False) -> list:
    if step is None:
        return []
    from lightning.pytorch.callbacks import Callback

    class KillAtStep(Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            if trainer.global_step == step and not in_validation:
                die(kill_signal)

        def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
            if in_validation and trainer.global_step == step and not trainer.sanity_checking:
                die(kill_signal)

    return [KillAtStep()]


def run_api(args: argparse.Namespace) -> None:
    from forecast import Forecaster

    options = json.loads(args.options)
    model = options.pop("model")
    killer = kill_callback(args.kill_at_step, args.kill_signal, args.in_validation)
    Forecaster(model, **options, callbacks=killer).fit(args.csv, run_dir=args.run_dir)


def kill_every_trainer(args: argparse.Namespace) -> None:
    """Give every Trainer that the recipe builds (for the API, `forecast fit` and the sweep) the kill callback."""
    import forecast.training

    build_trainer = forecast.training.build_trainer

    def with_killer(config, run_dir, callbacks=None, **overrides):
        killer = kill_callback(args.kill_at_step, args.kill_signal)
        return build_trainer(config, run_dir, callbacks=[*(callbacks or []), *killer], **overrides)

    forecast.training.build_trainer = with_killer


def run_cli(args: argparse.Namespace) -> None:
    from forecast.cli import main as cli_main

    kill_every_trainer(args)
    sys.exit(cli_main(args.rest))


def run_sweep(args: argparse.Namespace) -> None:
    from forecast.sweep import SweepSpec
    from forecast.sweep import run_sweep as sweep

    spec = SweepSpec(configs=tuple(args.configs), results_dir=args.results_dir, runs_dir=args.runs_dir)
    sweep(spec, callbacks=kill_callback(args.kill_at_step, args.kill_signal), fail_fast=True)


def run_append(args: argparse.Namespace) -> None:
    import forecast.results

    def replace_then_die(source, target):  # the new file is complete; the process dies before renaming it
        die()

    forecast.results.os.replace = replace_then_die
    forecast.results.append_row(args.csv, json.loads(args.row))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kill-at-step", type=int, default=None)
    parser.add_argument("--signal", choices=["KILL", "TERM", "INT"], default="KILL")
    parser.add_argument("--in-validation", action="store_true",
                        help="kill in the validation after step N (the last step of an epoch), not at the step")
    modes = parser.add_subparsers(dest="mode", required=True)
    api = modes.add_parser("api")
    api.add_argument("csv")
    api.add_argument("run_dir")
    api.add_argument("options")
    api.set_defaults(run=run_api)
    cli = modes.add_parser("cli")  # the rest of the command line is the forecast command's
    cli.set_defaults(run=run_cli)
    sweep = modes.add_parser("sweep")
    sweep.add_argument("results_dir")
    sweep.add_argument("runs_dir")
    sweep.add_argument("configs", nargs="+")
    sweep.set_defaults(run=run_sweep)
    append = modes.add_parser("append")
    append.add_argument("csv")
    append.add_argument("row")
    append.set_defaults(run=run_append)
    args, rest = parser.parse_known_args()
    if rest and args.mode != "cli":
        parser.error(f"unrecognized arguments: {rest}")
    args.rest = rest
    args.kill_signal = signal.Signals[f"SIG{args.signal}"]
    # A suite started in the background (`pytest ... &` in a script) hands its children SIGINT ignored, and Python
    # then installs no KeyboardInterrupt for it: Ctrl-C is what a terminal sends a foreground command.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    args.run(args)


if __name__ == "__main__":
    main()
