"""Write experiments/configs/<dataset>/<model>_<features>_<pred_len>.yaml for every benchmark setting.

    python experiments/make_configs.py            # (re)write every config
    python experiments/make_configs.py --check    # exit 1 if a committed config differs

One config per registered dataset, standard horizon, feature mode and model
(``informer``, ``logsparse`` and the baselines ``transformer`` and ``naive``). Run one
with ``forecast fit --config ...`` or many with ``forecast sweep``. The settings:

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
CONFIGS = HERE / "configs"
MODELS = ("informer", "logsparse", "transformer", "naive")

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


def config(model: str, setting: Setting) -> dict[str, Any]:
    """The YAML mapping of one (model, setting)."""
    return {
        "model": model_section(model, setting),
        "data": {
            "dataset": setting.dataset, "features": setting.features,
            "target": datasets.get(setting.dataset).target, "seq_len": setting.seq_len,
            "label_len": setting.label_len, "pred_len": setting.pred_len, "time_encoding": "timeF",
            "batch_size": BATCH_SIZE,
        },
        "trainer": dict(setting.training),
        "seed": 0,
    }


def relative_path(model: str, setting: Setting) -> Path:
    return Path(setting.dataset) / f"{model}_{setting.features}_{setting.pred_len}.yaml"


def render(model: str, setting: Setting) -> str:
    header = (f"# Generated by experiments/make_configs.py: edit that script, not this file.\n"
              f"# {setting.dataset} {setting.features} horizon {setting.pred_len}: {setting.protocol}.\n"
              f"# forecast fit --config experiments/configs/{relative_path(model, setting).as_posix()}\n")
    return header + yaml.safe_dump(config(model, setting), sort_keys=False)


def expected_files() -> dict[Path, str]:
    """Relative path -> file content of every config."""
    return {relative_path(model, setting): render(model, setting) for setting in settings() for model in MODELS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the files on disk, write nothing")
    parser.add_argument("--out", type=Path, default=CONFIGS, help="configs directory (default experiments/configs)")
    args = parser.parse_args(argv)
    expected = expected_files()
    on_disk = {path.relative_to(args.out) for path in args.out.rglob("*.yaml")} if args.out.exists() else set()
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
        (args.out / path).unlink()
    for path, text in expected.items():
        target = args.out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    print(f"wrote {len(expected)} configs under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
