"""Write the experiment configs: two trees of ``<dataset>/<name>_<features>_<pred_len>.yaml``.

    python experiments/make_configs.py            # (re)write every config
    python experiments/make_configs.py --check    # exit 1 if a committed config differs

``experiments/configs/``: the papers' settings (``recipe: paper``), one config per
registered dataset, horizon, feature mode and model (``informer``, ``logsparse`` and the
baselines ``transformer`` and ``naive``). Run one with ``forecast fit --config ...`` or
many with ``forecast sweep``. The settings:

* ETTh1, ETTh2, ETTm1 follow the Informer paper's own per-horizon settings, taken from
  the official Informer2020 scripts (``scripts/ETTh1.sh``, ``ETTh2.sh``, ``ETTm1.sh`` at
  commit 990bb14): window lengths, encoder/decoder depth and ProbSparse factor per
  horizon, ``M`` and ``S``, d_model 512, 8 heads, d_ff 2048, dropout 0.05, at most 6
  epochs, patience 3, batch 32, learning rate 1e-4 halved every epoch.
* ETTm2, weather, exchange_rate, electricity, traffic follow the Autoformer protocol
  (input 96, label 48, horizons 96/192/336/720, ``M``, factor 3, at most 10 epochs);
  national_illness uses input 36, label 18, horizons 24/36/48/60.
* ``transformer`` (the paper's Informer-dagger: full attention, no distilling) and
  ``logsparse`` share each setting's window and training; ``transformer`` shares
  Informer's widths and depths, ``logsparse`` writes out its LogSparseConfig sizes.
  ``naive`` repeats the last value (no training).

Model options are written out in full, so a results row's key does not change when a
default does.

``experiments/long_horizon/``: the standard long-horizon benchmark (input 96, label 48,
horizons 96/192/336/720, ``M``, on ETTh1, ETTh2, ETTm1, ETTm2, weather, exchange_rate;
national_illness at input 36, label 18, horizons 24/36/48/60). In every cell: ``naive``,
``seasonal_naive`` (the dataset's daily cycle, weekly for daily data; none for weather and
ILI, whose seasons are longer than the input: see :data:`SEASONS`), ``dlinear``, and ``informer`` and
``logsparse`` in the ``improved`` recipe; ``informer-paper`` (the Informer paper's sizes and training,
``recipe: paper``, factor 3 as in the Autoformer re-runs, in bf16 autocast) in every cell, for a lent GPU;
``logsparse-paper`` (the LogSparse paper's sizes and the same training, in fp32) in every cell.
Improved models take the recipe's options (written in no file), so a config follows the recipe; the parameter-free
baselines pin ``recipe: paper``, their rows shared with ``experiments/configs``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from forecast import datasets

HERE = Path(__file__).resolve().parent
CONFIGS = "configs"
LONG_HORIZON = "long_horizon"
MODELS = ("informer", "logsparse", "transformer", "naive")
LONG_HORIZON_MODELS = ("naive", "seasonal_naive", "dlinear", "informer", "logsparse", "informer-paper",
                       "logsparse-paper")
LONG_HORIZON_DATASETS = ("ETTh1", "ETTh2", "ETTm1", "ETTm2", "weather", "exchange_rate", "national_illness")
# seasonal_naive's season in steps: a day of hourly and 15-minute data, a week of daily data. A day of
# weather (144 ten-minute steps) and a year of ILI (52 weeks) are longer than their inputs (96, 36):
# seasonal_naive has no season to repeat there.
SEASONS = {"ETTh1": 24, "ETTh2": 24, "ETTm1": 96, "ETTm2": 96, "exchange_rate": 7}
# The improved Informer and LogSparse train on a random quarter of the training windows each epoch (a new
# quarter every epoch: the epoch's shuffled order, cut) where a dataset has about four times ETTh1's windows,
# so that an epoch costs what an ETTh1 epoch does on the CPU. Written in the config, so it is part of the run's
# identity and shows in the tables' training column.
CPU_EPOCH_SHARE = {"ETTm1": 0.25, "ETTm2": 0.25, "weather": 0.25}
# The improved recipe's learning rate (1e-3, halved every epoch) where the validation windows chose another:
# national_illness's 581-617 training windows make 19-20 steps an epoch, and at 1e-3 the best epoch was the tenth
# and last in DLinear's four cells, LogSparse's three and Informer's one. Chosen per model by the mean validation
# MSE of the four horizons, seed 0 (experiments/README.md, "national_illness's learning rate"); the DLinear paper
# trains it at 0.05.
LEARNING_RATES = {("national_illness", "dlinear"): 0.1, ("national_illness", "informer"): 0.01,
                  ("national_illness", "logsparse"): 0.01}

INFORMER_WIDTHS = {"d_model": 512, "n_heads": 8, "d_ff": 2048, "dropout": 0.05}
LOGSPARSE_SIZES = {"d_model": 64, "n_heads": 4, "n_layers": 3, "d_ff": 256, "dropout": 0.1,
                   "attention": "logsparse", "qk_kernel_size": 3}
TRAINING = {"max_epochs": 6, "patience": 3, "learning_rate": 1.0e-4, "lr_schedule": "halve", "loss": "mse",
            "checkpoint_every_minutes": 10.0}
AUTOFORMER_TRAINING = {**TRAINING, "max_epochs": 10}
BATCH_SIZE = 32


@dataclass(frozen=True)
class Setting:
    """One benchmark cell: dataset, feature mode, horizon, window and Informer's depth and factor."""

    dataset: str
    features: str
    pred_len: int
    seq_len: int
    label_len: int
    e_layers: int = 2
    d_layers: int = 1
    factor: int = 5
    protocol: str = ""
    training: tuple[tuple[str, Any], ...] = tuple(TRAINING.items())


# Informer2020 scripts: pred_len -> (seq_len, label_len, e_layers, d_layers, factor).
INFORMER_SCRIPTS: dict[tuple[str, str], dict[int, tuple[int, int, int, int, int]]] = {
    ("ETTh1", "M"): {24: (48, 48, 2, 1, 3), 48: (96, 48, 2, 1, 5), 168: (168, 168, 2, 1, 5),
                     336: (168, 168, 2, 1, 5), 720: (336, 336, 2, 1, 5)},
    ("ETTh1", "S"): {24: (720, 168, 2, 1, 5), 48: (720, 168, 2, 1, 5), 168: (720, 336, 2, 1, 5),
                     336: (720, 336, 2, 1, 5), 720: (720, 336, 2, 1, 5)},
    ("ETTh2", "M"): {24: (48, 48, 2, 1, 5), 48: (96, 96, 2, 1, 5), 168: (336, 336, 3, 2, 5),
                     336: (336, 168, 3, 2, 5), 720: (720, 336, 3, 2, 5)},
    ("ETTh2", "S"): {24: (48, 48, 2, 1, 3), 48: (96, 96, 2, 1, 5), 168: (336, 336, 2, 1, 5),
                     336: (336, 168, 3, 2, 5), 720: (336, 336, 3, 2, 5)},
    ("ETTm1", "M"): {24: (672, 96, 2, 1, 5), 48: (96, 48, 2, 1, 5), 96: (384, 384, 2, 1, 5),
                     288: (672, 288, 2, 1, 5), 672: (672, 384, 2, 1, 5)},
    ("ETTm1", "S"): {24: (96, 48, 2, 1, 5), 48: (96, 48, 2, 1, 5), 96: (384, 384, 2, 1, 5),
                     288: (384, 384, 2, 1, 5), 672: (384, 384, 2, 1, 5)},
}
AUTOFORMER_DATASETS = ("ETTm2", "weather", "exchange_rate", "electricity", "traffic")
AUTOFORMER_HORIZONS = (96, 192, 336, 720)
ILLNESS_HORIZONS = (24, 36, 48, 60)


def settings() -> Iterator[Setting]:
    """Every benchmark setting, registry order."""
    for (dataset, features), horizons in INFORMER_SCRIPTS.items():
        for pred_len, (seq_len, label_len, e_layers, d_layers, factor) in horizons.items():
            yield Setting(dataset, features, pred_len, seq_len, label_len, e_layers, d_layers, factor,
                          f"Informer2020 scripts/{dataset}.sh")
    for dataset in AUTOFORMER_DATASETS:
        for pred_len in AUTOFORMER_HORIZONS:
            yield Setting(dataset, "M", pred_len, 96, 48, factor=3, protocol="Autoformer protocol",
                          training=tuple(AUTOFORMER_TRAINING.items()))
    for pred_len in ILLNESS_HORIZONS:
        yield Setting("national_illness", "M", pred_len, 36, 18, factor=3, protocol="Autoformer protocol (ILI)",
                      training=tuple(AUTOFORMER_TRAINING.items()))


def model_section(model: str, setting: Setting) -> dict[str, Any]:
    depth = {"e_layers": setting.e_layers, "d_layers": setting.d_layers}
    if model == "informer":
        return {"name": model, **INFORMER_WIDTHS, **depth, "factor": setting.factor}
    if model == "transformer":
        return {"name": model, **INFORMER_WIDTHS, **depth}
    if model == "logsparse":
        return {"name": model, **LOGSPARSE_SIZES}
    return {"name": model}


def data_section(setting: Setting) -> dict[str, Any]:
    return {
        "dataset": setting.dataset, "features": setting.features,
        "target": datasets.get(setting.dataset).target, "seq_len": setting.seq_len,
        "label_len": setting.label_len, "pred_len": setting.pred_len, "time_encoding": "timeF",
        "batch_size": BATCH_SIZE,
    }


def config(model: str, setting: Setting) -> dict[str, Any]:
    """The YAML mapping of one (model, setting) in the papers' settings."""
    return {
        "model": model_section(model, setting),
        "data": data_section(setting),
        "trainer": dict(setting.training),
        "seed": 0,
        "recipe": "paper",
    }


def long_horizon_settings() -> Iterator[Setting]:
    """The standard long-horizon benchmark's 28 cells."""
    for dataset in LONG_HORIZON_DATASETS:
        if dataset == "national_illness":
            for pred_len in ILLNESS_HORIZONS:
                yield Setting(dataset, "M", pred_len, 36, 18, factor=3, protocol="long-horizon benchmark (ILI)")
        else:
            for pred_len in AUTOFORMER_HORIZONS:
                yield Setting(dataset, "M", pred_len, 96, 48, factor=3, protocol="long-horizon benchmark")


def long_horizon_config(name: str, setting: Setting) -> dict[str, Any] | None:
    """The YAML mapping of one model of the long-horizon benchmark, or None where it has no config."""
    data = data_section(setting)
    if name in ("naive", "seasonal_naive"):
        if name == "seasonal_naive" and setting.dataset not in SEASONS:
            return None
        options = {"season_length": SEASONS[setting.dataset]} if name == "seasonal_naive" else {}
        return {"model": {"name": name, **options}, "data": data, "seed": 0, "recipe": "paper"}
    if name == "informer-paper":
        # In every cell, though a cell costs a CPU hours (ETTh1) to days: these are a lent GPU's runs
        # (experiments/device_grid.sh). bf16 autocast makes a paper-size step 1.6-2.4x faster on a CPU with
        # avx512_bf16, and moved one epoch's test MSE by +0.8% where a second seed moved it by 20%
        # (benchmarks/README.md, "bf16 accuracy"); the mid-epoch checkpoints are for the CPU's long epochs.
        trainer = {**AUTOFORMER_TRAINING, "precision": "bf16-mixed", "checkpoint_every_minutes": 10.0}
        return {"model": model_section("informer", setting), "data": data, "trainer": trainer, "seed": 0,
                "recipe": "paper"}
    if name == "logsparse-paper":
        # The LogSparse paper's size (d_model 64), as configs/ has it, so that the Autoformer protocol's rows
        # (ETTm2, weather, exchange_rate and ILI share this grid's windows) are these cells' too. In fp32: a CPU
        # without bf16 instructions emulates bf16, and ETTh1's cells, hours each, run on the CPU.
        return {"model": model_section("logsparse", setting), "data": data, "trainer": dict(AUTOFORMER_TRAINING),
                "seed": 0, "recipe": "paper"}
    trainer: dict[str, Any] = {"checkpoint_every_minutes": 10.0}
    if name in ("informer", "logsparse") and setting.dataset in CPU_EPOCH_SHARE:
        trainer["limit_train_batches"] = CPU_EPOCH_SHARE[setting.dataset]
    if (setting.dataset, name) in LEARNING_RATES:
        trainer["learning_rate"] = LEARNING_RATES[setting.dataset, name]
    return {"model": {"name": name}, "data": data, "trainer": trainer, "seed": 0, "recipe": "improved"}


def relative_path(name: str, setting: Setting, tree: str = CONFIGS) -> Path:
    return Path(tree) / setting.dataset / f"{name}_{setting.features}_{setting.pred_len}.yaml"


GENERATED = "# Generated by experiments/make_configs.py"  # how every file this script writes begins


def render(name: str, setting: Setting, mapping: dict[str, Any], tree: str = CONFIGS) -> str:
    header = (f"{GENERATED}: edit that script, not this file.\n"
              f"# {setting.dataset} {setting.features} horizon {setting.pred_len}: {setting.protocol}.\n"
              f"# forecast fit --config experiments/{relative_path(name, setting, tree).as_posix()}\n")
    return header + yaml.safe_dump(mapping, sort_keys=False)


def expected_files() -> dict[Path, str]:
    """Path relative to experiments/ -> file content of every config of both trees."""
    files = {relative_path(model, setting): render(model, setting, config(model, setting))
             for setting in settings() for model in MODELS}
    for setting in long_horizon_settings():
        for name in LONG_HORIZON_MODELS:
            mapping = long_horizon_config(name, setting)
            if mapping is not None:
                files[relative_path(name, setting, LONG_HORIZON)] = render(name, setting, mapping, LONG_HORIZON)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the files on disk, write nothing")
    parser.add_argument("--out", type=Path, default=HERE,
                        help="where the configs/ and long_horizon/ trees go (default experiments/)")
    args = parser.parse_args(argv)
    expected = expected_files()
    on_disk = {path.relative_to(args.out) for tree in (CONFIGS, LONG_HORIZON) if (args.out / tree).exists()
               for path in (args.out / tree).rglob("*.yaml")}
    if args.check:
        stale = sorted(str(path) for path, text in expected.items()
                       if not (args.out / path).is_file() or (args.out / path).read_text() != text)
        extra = sorted(str(path) for path in on_disk - expected.keys())
        for path in stale:
            print(f"out of date: {path}")
        for path in extra:
            print(f"not generated: {path}")
        return 1 if stale or extra else 0
    for path in sorted(on_disk - expected.keys()):
        # Only this script's own stale files go: --out may hold a project's configs beside the generated ones.
        if (args.out / path).read_text().startswith(GENERATED):
            (args.out / path).unlink()
        else:
            print(f"kept {path} (not written by this script)")
    for path, text in expected.items():
        target = args.out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    print(f"wrote {len(expected)} configs under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
