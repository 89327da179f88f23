"""Benchmark training throughput, inference latency and bf16 accuracy of Informer and LogSparse.

The default setting is the paper's ETTh1 one: features M, seq_len 96, label_len 48,
pred_len 24, batch 32, d_model 512, 8 heads, d_ff 2048; Informer with e_layers 2,
d_layers 1 and factor 5, the LogSparse Transformer at its default depth (3 layers).
Measurement kinds (``--kinds``):

* ``loader``: the train DataLoader alone, whole epochs, in windows/s, per loader
  variant (worker processes, persistent workers, and a batched gather that serves a
  whole batch per fetch). Loading keeps the model busy when this is far above the
  training rate.
* ``profile``: torch.profiler over a few fp32 (and bf16) training steps; the top
  operators by self CPU time.
* ``train``: full optimizer steps (batch from the real data pipeline, forward, loss,
  backward, Adam step, zero_grad) in windows/s, for every variant of
  :data:`TRAIN_VARIANTS`: the fp32 eager baseline, bf16 autocast, torch.compile, both,
  Adam's per-tensor loop (the recipe's is fused) and DataLoader workers. The variants of a model are built from the same
  seed in one process and interleaved step by step after their warm-up, so that a
  machine whose speed drifts slows them alike; the speed-up column divides the
  baseline's median step time by the variant's.
* ``infer``: eval-mode forward latency under ``torch.inference_mode`` for one window
  and a batch, median ms, per precision (interleaved too).
* ``accuracy`` (``--accuracy``, slower, run on its own): each model trained for one
  epoch (or ``--accuracy-steps``) in fp32 and in bf16 autocast from the same seed, plus
  fp32 from a second seed as the yardstick of run-to-run noise, each scored on every
  test window; the first fp32 model is also scored under bf16 inference, which
  isolates the numerics from the training trajectory. The models named by
  ``--accuracy-reduced`` (default LogSparse, whose paper-size epoch takes over an hour
  on two cores) train at the reduced size ``--reduced-*``.

Every group (one kind of one model) runs in a fresh subprocess (``--in-process`` runs
them in this one, for tests). Before each the script waits for the CPU to go quiet;
every row records ``others_cpu``, the share of the cores other processes used while it
was measured, with the command, commit, seed, machine, torch version and threads.

Usage::

    FORECAST_DATA_DIR=../shared/datasets python benchmarks/train.py            # throughput -> results/train_cpu.csv
    FORECAST_DATA_DIR=../shared/datasets python benchmarks/train.py --accuracy # bf16 accuracy rows, same CSV
    python benchmarks/train.py --markdown benchmarks/results/train_cpu.csv     # the README tables
    python benchmarks/train.py --device cuda                                   # bf16 autocast on CUDA
    python benchmarks/train.py --merge train_cuda.csv --output benchmarks/results/train_cuda.csv  # a loan's rows in

A new run replaces the rows of the (kind, model, variant) cases it measures and keeps the others; a failed
or timed-out case keeps its earlier ok rows (the failure is written only where the case has none).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.utils.data import DataLoader, default_collate

from _common import (
    README,
    REPO,
    RESULTS,
    CpuLoad,
    add_allocator_argument,
    add_merge_argument,
    allocator_of,
    by_default,
    command_line,
    commit,
    emit_tables,
    machine,
    markdown_table,
    short_commit,
    timed,
    use_allocator,
    wait_for_quiet,
    write_rows,
)

if TYPE_CHECKING:
    from forecast.data import WindowDataModule, WindowDataset

MODELS = ("informer", "logsparse")
KINDS = ("loader", "profile", "train", "infer")
BASELINE = "fp32"
COLUMNS = (
    "kind", "model", "variant", "data", "precision", "compile", "num_workers", "batch", "seq_len", "label_len",
    "pred_len",
    "d_model", "n_heads", "d_ff", "status", "windows_per_s", "median_ms", "min_ms", "repeats", "warmup_s",
    "speedup", "loss", "op", "share", "calls", "eval_precision", "train_steps", "mse", "mae", "n_windows",
    "others_cpu", "device", "machine", "threads", "torch", "allocator", "commit", "seed", "command",
)
NUMERIC = ("windows_per_s", "median_ms", "min_ms", "warmup_s", "speedup", "loss", "share", "calls", "mse", "mae",
           "others_cpu")


# ------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Variant:
    """One way to run the same model: precision, compilation, optimizer and data loading."""

    name: str
    precision: str = "fp32"  # "fp32" or "bf16" (autocast)
    compile: bool = False
    num_workers: int = 0
    persistent_workers: bool = False
    loop_adam: bool = False  # Adam's per-tensor loop instead of the recipe's fused kernel
    torch_dropout: bool = False  # masks from F.dropout (bernoulli_) instead of forecast.layers.dropout's
    uniform_dropout: bool = False  # forecast.layers.dropout's masks one uniform per element, not by their gaps
    unfused_dropout: bool = False  # dropout scaling its input in a pass of its own (before the feed-forward and
    # residuals folded it into the next weight or add)
    torch_softmax: bool = False  # LogSparse's softmax over offsets by torch.softmax instead of offset_softmax
    sdpa_dropout: bool = False  # attention with dropout through SDPA's math path instead of the explicit product
    batched_fetch: bool = False  # loader only: one gather per batch instead of per-window items
    pin_memory: bool = False
    model_options: tuple[tuple[str, Any], ...] = ()  # overrides: a different model, not an optimization


TRAIN_VARIANTS = {
    variant.name: variant
    for variant in (
        Variant("fp32"),
        Variant("bf16", precision="bf16"),
        Variant("compile", compile=True),
        Variant("bf16+compile", precision="bf16", compile=True),
        Variant("loop-adam", loop_adam=True),
        # Informer with exact SDPA attention in place of ProbSparse (the paper's Informer-dagger
        # keeps distilling off too): whether the sparse attention pays at this length.
        Variant("full-attention", model_options=(("attention", "full"),)),
        # Dropout's masks come from a serial random number generator on CPU; this prices them,
        # and torch-dropout prices them as F.dropout draws them (bernoulli_, twice torch.rand's time).
        Variant("no-dropout", model_options=(("dropout", 0.0),)),
        Variant("torch-dropout", torch_dropout=True),
        # forecast.layers.dropout's masks one float32 uniform per element at every rate (as before it drew the
        # gaps between drops at rates under GAP_DRAWS_BELOW).
        Variant("uniform-dropout", uniform_dropout=True),
        # the same masks, scaled in a pass of their own (as before the feed-forward folded the scale into its second
        # layer's weight and the residuals added the dropped branch in their own pass).
        Variant("unfused-dropout", unfused_dropout=True),
        # LogSparse's softmax over its ~log2 L offsets as torch.softmax computes it (row by row on the CPU).
        Variant("torch-softmax", torch_softmax=True),
        # Attention with dropout on the CPU through SDPA (its math path) instead of the explicit product.
        Variant("sdpa-dropout", sdpa_dropout=True),
        Variant("workers=1", num_workers=1, persistent_workers=True),
        Variant("workers=2", num_workers=2, persistent_workers=True),
    )
}
DEFAULT_TRAIN_VARIANTS = {
    "informer": ("fp32", "bf16", "compile", "bf16+compile", "loop-adam", "workers=1", "workers=2", "full-attention",
                 "no-dropout", "torch-dropout", "uniform-dropout", "unfused-dropout", "sdpa-dropout"),
    # A LogSparse step takes seconds at this size: loading (measured by the loader rows) is
    # negligible beside it, so only the numerics variants are timed.
    "logsparse": ("fp32", "bf16", "compile", "bf16+compile", "torch-softmax"),
}
LOADER_VARIANTS = {
    variant.name: variant
    for variant in (
        Variant("workers=0"),
        Variant("batched-gather", batched_fetch=True),
        Variant("workers=1", num_workers=1),
        Variant("workers=1-persistent", num_workers=1, persistent_workers=True),
        Variant("workers=2", num_workers=2),
        Variant("workers=2-persistent", num_workers=2, persistent_workers=True),
        Variant("pinned", pin_memory=True),  # page-locked batches: useful for CUDA only
    )
}
DEFAULT_LOADER_VARIANTS = ("workers=0", "batched-gather", "workers=1", "workers=1-persistent", "workers=2",
                           "workers=2-persistent")
INFER_VARIANTS = {name: TRAIN_VARIANTS[name] for name in ("fp32", "bf16", "compile", "bf16+compile")}


@dataclass(frozen=True)
class Setting:
    """Data, window and model size shared by every group of a run (JSON-serializable)."""

    data: str = "ETTh1"
    features: str = "M"
    target: str = "OT"
    seq_len: int = 96
    label_len: int = 48
    pred_len: int = 24
    batch: int = 32
    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    device: str = "cpu"
    threads: int = 0
    seed: int = 0
    recipe: str = "paper"
    allocator: str = "reuse"

    def model_options(self, model: str, size: tuple[int, int, int] | None = None) -> dict[str, Any]:
        """``build_model`` options: the paper's architecture at ``size`` (d_model, heads, d_ff), or with
        ``recipe="improved"`` that recipe's model (its own size)."""
        if self.recipe != "paper":
            from forecast.recipes import get_recipe

            return get_recipe(self.recipe).options_for(model)
        d_model, n_heads, d_ff = size or (self.d_model, self.n_heads, self.d_ff)
        if model == "informer":
            return dict(d_model=d_model, n_heads=n_heads, e_layers=2, d_layers=1, d_ff=d_ff, factor=5)
        if model == "logsparse":
            return dict(d_model=d_model, n_heads=n_heads, d_ff=d_ff)  # default depth: 3 layers
        raise ValueError(f"unknown model {model!r}; choose from {MODELS}")


# ------------------------------------------------------------------------- worker side


def _autocast(device: str, precision: str) -> AbstractContextManager:
    if precision == "fp32":
        return nullcontext()
    return torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16)


def _datamodule(setting: Setting, variant: Variant, *, drop_last: bool = True,
                seed: int | None = None) -> WindowDataModule:
    from forecast.data import WindowDataModule

    datamodule = WindowDataModule(
        setting.data, setting.seq_len, setting.label_len, setting.pred_len, features=setting.features,
        target=setting.target, batch_size=setting.batch, num_workers=variant.num_workers,
        persistent_workers=variant.persistent_workers if variant.num_workers else None,
        pin_memory=variant.pin_memory, drop_last_train=drop_last, seed=setting.seed if seed is None else seed,
    )
    datamodule.setup()
    return datamodule


class BatchedWindows:
    """A train split that serves whole batches: ``__getitems__`` gathers every window at once.

    ``DataLoader`` hands a batch's indices to ``__getitems__`` when the dataset has it;
    one advanced-indexing gather per tensor then replaces 32 item dicts and the
    collate's stacks. Pair with :func:`_already_collated`.
    """

    def __init__(self, windows: WindowDataset) -> None:
        self.windows = windows
        self.x_steps = torch.arange(windows.seq_len)  # [L]
        self.y_steps = torch.arange(windows.label_len + windows.pred_len) + windows.seq_len - windows.label_len
        self.truth_steps = torch.arange(windows.pred_len) + windows.seq_len

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, index: int):
        return self.windows[index]

    def __getitems__(self, indices: Sequence[int]) -> dict[str, Any]:
        positions = torch.as_tensor(indices)  # [B]
        starts = self.windows.starts[positions].unsqueeze(-1)  # [B, 1]
        x_rows, y_rows = starts + self.x_steps, starts + self.y_steps  # [B, L], [B, label_len+P]
        values, marks, known = self.windows.values, self.windows.marks, self.windows.known
        series = self.windows.series[positions]  # [B]
        return {"x": values[x_rows], "y": values[y_rows], "x_mark": marks[x_rows], "y_mark": marks[y_rows],
                "x_known": known[x_rows], "y_known": known[y_rows], "series": series,
                "static": self.windows.static[series], "truth": self.windows.truth[starts + self.truth_steps]}


def _already_collated(batch: dict[str, Any]) -> dict[str, Any]:
    return batch


def _train_loader(setting: Setting, variant: Variant, datamodule: WindowDataModule | None = None) -> DataLoader:
    """The train DataLoader of ``variant`` (full batches only unless ``datamodule`` says otherwise)."""
    if datamodule is None:
        datamodule = _datamodule(setting, variant)
    if not variant.batched_fetch:
        return datamodule.train_dataloader()
    from forecast.data.sampling import EpochShuffleSampler

    dataset = datamodule.train_dataset
    sampler = EpochShuffleSampler(dataset, seed=setting.seed)
    return DataLoader(BatchedWindows(dataset), batch_size=setting.batch, sampler=sampler, drop_last=True,
                      collate_fn=_already_collated, pin_memory=variant.pin_memory)


class Batches:
    """Endless batches from a loader, epoch after epoch (``set_epoch`` on the sampler)."""

    def __init__(self, loader: DataLoader) -> None:
        self.loader = loader
        self.epoch = 0
        self._iterator: Iterator[Any] | None = None

    def next_batch(self) -> dict[str, Any]:
        while True:
            if self._iterator is None:
                sampler = getattr(self.loader, "sampler", None)
                if hasattr(sampler, "set_epoch"):
                    sampler.set_epoch(self.epoch)
                self._iterator = iter(self.loader)
            try:
                return next(self._iterator)
            except StopIteration:
                self._iterator = None
                self.epoch += 1


def _build_model(setting: Setting, model_name: str, spec, seed: int, size: tuple[int, int, int] | None = None,
                 overrides: tuple[tuple[str, Any], ...] = ()) -> nn.Module:
    from forecast.models import build_model

    torch.manual_seed(seed)
    options = {**setting.model_options(model_name, size), **dict(overrides)}
    return build_model(model_name, spec, **options).to(setting.device)


class Trainer:
    """One variant's model, optimizer and batches; :meth:`step` is one full optimizer step."""

    def __init__(self, setting: Setting, model_name: str, variant: Variant, seed: int,
                 size: tuple[int, int, int] | None = None, drop_last: bool = True) -> None:
        from forecast.models import DataSpec
        from forecast.module import adam

        self.setting, self.variant = setting, variant
        datamodule = _datamodule(setting, variant, drop_last=drop_last, seed=seed)
        self.batches = Batches(_train_loader(setting, variant, datamodule))
        self.spec = DataSpec.from_fitted(datamodule.fitted)
        self.model = _build_model(setting, model_name, self.spec, seed, size, variant.model_options)
        self.model.train()
        parameters = list(self.model.parameters())
        self.optimizer = (torch.optim.Adam(parameters, lr=1e-4, fused=False) if variant.loop_adam
                          else adam(parameters, 1e-4))  # the recipe's (forecast.module.adam)
        self.forward = torch.compile(self.model) if variant.compile else self.model

    def loss(self, batch: dict[str, Any]):
        with _autocast(self.setting.device, self.variant.precision):
            prediction = self.forward(batch["x"], batch["x_mark"], batch["y_mark"])  # [B, P, C_out]
            target = batch["y"][:, -self.spec.pred_len:, batch["y"].shape[2] - self.spec.c_out:]  # [B, P, C_out]
            return torch.nn.functional.mse_loss(prediction.float(), target)

    def step(self) -> float:
        """Next batch, forward, loss, backward, Adam step, zero_grad; returns the loss."""
        device = self.setting.device
        batch = {key: value.to(device, non_blocking=True) for key, value in self.batches.next_batch().items()}
        with (_unfused_dropout() if self.variant.unfused_dropout or self.variant.torch_dropout else nullcontext(),
              _torch_dropout() if self.variant.torch_dropout else nullcontext(),
              _uniform_dropout() if self.variant.uniform_dropout else nullcontext(),
              _torch_softmax() if self.variant.torch_softmax else nullcontext(),
              _sdpa_dropout() if self.variant.sdpa_dropout else nullcontext()):
            loss = self.loss(batch)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())  # waits for the device


@contextmanager
def _swapped(name: str, original: Any, replacement: Any) -> Iterator[None]:
    """Every module that holds ``original`` under ``name`` (its own module, and the kernels that
    imported it by name) holds ``replacement`` meanwhile."""
    # A module's own namespace, not getattr: that would run modules' __getattr__ hooks (PEP 562), which warn
    # or import (jsonargparse's deprecated submodules).
    users = [module for module in list(sys.modules.values())
             if getattr(module, "__dict__", {}).get(name) is original]
    for module in users:
        setattr(module, name, replacement)
    try:
        yield
    finally:
        for module in users:
            setattr(module, name, original)


def _torch_dropout() -> AbstractContextManager[None]:
    """Every forecast dropout drawn by ``F.dropout`` meanwhile: the masks as they were before
    :mod:`forecast.layers.dropout`, to price them against it in one process."""
    import forecast.layers.dropout as cheap

    def torch_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
        return torch.nn.functional.dropout(x, p, training)

    return _swapped("apply_dropout", cheap.apply_dropout, torch_dropout)


@contextmanager
def _unfused_dropout() -> Iterator[None]:
    """Every forecast dropout a pass of its own meanwhile: the feed-forward's activations and the residuals' branches
    scaled by ``apply_dropout`` before the next layer or add, as before they were fused, to price it in one process."""
    import forecast.layers.dropout as cheap

    def activation_dropout_linear(x, activation, p, training, linear):
        return linear(cheap.apply_dropout(activation(x), p, training))

    def add_dropout(x, y, p, training):
        return x + cheap.apply_dropout(y, p, training)

    with (_swapped("activation_dropout_linear", cheap.activation_dropout_linear, activation_dropout_linear),
          _swapped("add_dropout", cheap.add_dropout, add_dropout)):
        yield


def _uniform_dropout() -> AbstractContextManager[None]:
    """Every forecast dropout mask drawn one uniform per element meanwhile (no rate draws the gaps between
    drops), to price the gaps' draw against it in one process."""
    import forecast.layers.dropout as cheap

    return _swapped("GAP_DRAWS_BELOW", cheap.GAP_DRAWS_BELOW, 0.0)


def _torch_softmax() -> AbstractContextManager[None]:
    """LogSparse's softmax over offsets by ``torch.softmax`` meanwhile, as it was before
    :func:`forecast.layers.attention.autograd.offset_softmax`, to price it against it in one process."""
    from forecast.layers.attention import autograd

    def torch_softmax(scores: torch.Tensor) -> torch.Tensor:
        return torch.softmax(scores.to(torch.promote_types(scores.dtype, torch.float32)), dim=-1)

    return _swapped("offset_softmax", autograd.offset_softmax, torch_softmax)


def _sdpa_dropout() -> AbstractContextManager[None]:
    """Attention with dropout through ``scaled_dot_product_attention`` meanwhile, as it was before
    :func:`forecast.layers.attention.reference.head_attention`, to price it against it in one process."""
    from forecast.layers.attention import reference

    def sdpa(queries, keys, values, mask=None, *, causal=False, dropout=0.0):
        return torch.nn.functional.scaled_dot_product_attention(queries, keys, values, attn_mask=mask,
                                                                dropout_p=dropout, is_causal=causal)

    return _swapped("head_attention", reference.head_attention, sdpa)


def _error(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"error: {type(error).__name__}: {text[:160]}"


def _interleave(cases: dict[str, Callable[[], Any]], device: str, warmups: dict[str, int], repeats: int,
                min_repeats: int, budget: float) -> dict[str, dict[str, Any]]:
    """Warm every case up (``warmups[name]`` calls), then time them in alternation, one call each per round.

    Rounds stop when every case has ``repeats`` timings, or once ``budget`` seconds
    of rounds have passed and every case has ``min_repeats``. A case that raises is
    reported with its error and leaves the rounds.
    """
    results: dict[str, dict[str, Any]] = {}
    live: dict[str, Callable[[], Any]] = {}
    for name, call in cases.items():
        begin = time.perf_counter()
        try:
            for _ in range(warmups[name]):
                timed(call, device)
        except Exception as error:  # compile or kernel failures become a row, not a crash
            results[name] = {"status": _error(error)}
            continue
        results[name] = {"status": "ok", "warmup_s": time.perf_counter() - begin, "times": [], "load": CpuLoad()}
        live[name] = call
    started = time.perf_counter()
    while live:
        counts = [len(results[name]["times"]) for name in live]
        if min(counts) >= repeats or (time.perf_counter() - started > budget and min(counts) >= min_repeats):
            break
        for name, call in list(live.items()):
            try:
                with results[name]["load"]:
                    seconds, value = timed(call, device)
            except Exception as error:
                results[name] = {"status": _error(error)}
                del live[name]
                continue
            results[name]["times"].append(seconds)
            results[name]["last"] = value
    return results


def _summary(result: dict[str, Any], windows: int) -> dict[str, Any]:
    if result["status"] != "ok":
        return {"status": result["status"]}
    times = result["times"]
    median = statistics.median(times)
    share = result["load"].share
    return {
        "status": "ok", "median_ms": round(median * 1e3, 2), "min_ms": round(min(times) * 1e3, 2),
        "repeats": len(times), "windows_per_s": round(windows / median, 2), "warmup_s": round(result["warmup_s"], 2),
        "others_cpu": "" if share is None else round(share, 2),
    }


def _variant_columns(variant: Variant) -> dict[str, Any]:
    return {"variant": variant.name, "precision": variant.precision, "compile": variant.compile,
            "num_workers": variant.num_workers}


def measure_loader(setting: Setting, variants: Sequence[str], epochs: int) -> list[dict[str, Any]]:
    """Windows/s of the train DataLoader alone over ``epochs`` whole epochs, per loader variant.

    ``warmup_s`` is the wait for the first batch (worker start-up); ``median_ms`` the
    median wait per batch.
    """
    rows = []
    for name in variants:
        variant = LOADER_VARIANTS[name]
        loader = _train_loader(setting, variant)
        load, waits, windows = CpuLoad(), [], 0
        first: float | None = None
        with load:
            begin = time.perf_counter()
            for epoch in range(epochs):
                loader.sampler.set_epoch(epoch)
                previous = time.perf_counter()
                for batch in loader:
                    now = time.perf_counter()
                    waits.append(now - previous)
                    first = now - begin if first is None else first
                    windows += batch["x"].shape[0]
                    previous = now
            total = time.perf_counter() - begin
        del loader  # stops persistent workers
        rows.append({
            "kind": "loader", "model": "-", **_variant_columns(variant), "status": "ok",
            "windows_per_s": round(windows / total, 1), "median_ms": round(statistics.median(waits) * 1e3, 3),
            "min_ms": round(min(waits) * 1e3, 3), "repeats": len(waits), "warmup_s": round(first or 0.0, 3),
            "others_cpu": "" if load.share is None else round(load.share, 2),
        })
    return rows


def _warmups(variants: dict[str, Variant], warmup: int, compile_warmup: int) -> dict[str, int]:
    return {key: compile_warmup if variant.compile else warmup for key, variant in variants.items()}


def measure_training(setting: Setting, model: str, variants: Sequence[str], warmup: int, compile_warmup: int,
                     steps: int, min_steps: int, budget: float) -> list[dict[str, Any]]:
    """Training windows/s of every variant of ``model``, interleaved step by step."""
    trainers, rows = {}, {}
    for name in variants:
        variant = TRAIN_VARIANTS[name]
        try:
            trainers[name] = Trainer(setting, model, variant, setting.seed)
        except Exception as error:
            rows[name] = {"status": _error(error)}
    warmups = _warmups({name: TRAIN_VARIANTS[name] for name in trainers}, warmup, compile_warmup)
    results = _interleave({name: trainer.step for name, trainer in trainers.items()}, setting.device,
                          warmups, steps, min_steps, budget)
    out = []
    for name in variants:
        summary = rows.get(name) or _summary(results[name], setting.batch)
        if "last" in results.get(name, {}):
            summary["loss"] = round(results[name]["last"], 5)
        out.append({"kind": "train", "model": model, **_variant_columns(TRAIN_VARIANTS[name]), **summary})
    return out


def _first_windows(setting: Setting, count: int) -> dict[str, Any]:
    test = _datamodule(setting, Variant("infer")).test_dataset
    batch = default_collate([test[index] for index in range(count)])
    return {key: value.to(setting.device) for key, value in batch.items()}


def measure_inference(setting: Setting, model_name: str, variants: Sequence[str], batches: Sequence[int],
                      warmup: int, compile_warmup: int, repeats: int, min_repeats: int,
                      budget: float) -> list[dict[str, Any]]:
    """Eval-mode forward latency under ``torch.inference_mode``, per variant and batch size, interleaved."""
    from forecast.models import DataSpec

    spec = DataSpec.from_fitted(_datamodule(setting, Variant("spec")).fitted)
    model = _build_model(setting, model_name, spec, setting.seed).eval()
    compiled = None
    inputs = {size: _first_windows(setting, size) for size in batches}
    cases = {}
    for name in variants:
        variant = INFER_VARIANTS[name]
        if variant.compile and compiled is None:
            compiled = torch.compile(model)
        forward = compiled if variant.compile else model
        for size in batches:
            def call(forward=forward, batch=inputs[size], precision=variant.precision):
                with torch.inference_mode(), _autocast(setting.device, precision):
                    return forward(batch["x"], batch["x_mark"], batch["y_mark"])

            cases[f"{name}|{size}"] = call
    warmups = _warmups({key: INFER_VARIANTS[key.split("|")[0]] for key in cases}, warmup, compile_warmup)
    results = _interleave(cases, setting.device, warmups, repeats, min_repeats, budget)
    rows = []
    for key, result in results.items():
        name, size = key.split("|")
        rows.append({"kind": "infer", "model": model_name, **_variant_columns(INFER_VARIANTS[name]),
                     **_summary(result, int(size)), "batch": int(size)})
    return rows


def _self_time(event: Any, device: str) -> float:
    """An operator's own time in microseconds: on the CPU, or on the GPU for CUDA runs."""
    return event.self_device_time_total if device.startswith("cuda") else event.self_cpu_time_total


def profile_training(setting: Setting, model: str, precisions: Sequence[str], steps: int,
                     top: int) -> list[dict[str, Any]]:
    """Top ``top`` operators by self time (CPU; GPU on CUDA) over ``steps`` training steps, per precision."""
    from torch.profiler import ProfilerActivity, profile

    rows = []
    for precision in precisions:
        variant = TRAIN_VARIANTS["bf16" if precision == "bf16" else "fp32"]
        trainer = Trainer(setting, model, variant, setting.seed)
        trainer.step()  # warm-up: allocations, one-time initialisation
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if setting.device.startswith("cuda") else [])
        load = CpuLoad()
        with load, profile(activities=activities) as profiler:
            for _ in range(steps):
                trainer.step()
        events = [event for event in profiler.key_averages() if _self_time(event, setting.device) > 0]
        total = sum(_self_time(event, setting.device) for event in events)
        for event in sorted(events, key=lambda event: -_self_time(event, setting.device))[:top]:
            rows.append({
                "kind": "profile", "model": model, **_variant_columns(variant), "status": "ok", "op": event.key,
                "median_ms": round(_self_time(event, setting.device) / 1e3 / steps, 2),  # self ms per step
                "share": round(_self_time(event, setting.device) / total, 4), "calls": round(event.count / steps, 1),
                "repeats": steps, "others_cpu": "" if load.share is None else round(load.share, 2),
            })
        del trainer
    return rows


def evaluate(setting: Setting, model: nn.Module, precision: str) -> dict[str, Any]:
    """MSE and MAE (standardized scale) over every test window, in ``precision``."""
    from forecast.metrics import mae, mse

    datamodule = _datamodule(setting, Variant("eval"))
    predictions, targets = [], []
    model.eval()
    with torch.inference_mode(), _autocast(setting.device, precision):
        for batch in datamodule.test_dataloader():
            batch = {key: value.to(setting.device) for key, value in batch.items()}
            prediction = model(batch["x"], batch["x_mark"], batch["y_mark"]).float()  # [B, P, C_out]
            predictions.append(prediction.cpu())
            targets.append(batch["y"][:, -prediction.shape[1]:, batch["y"].shape[2] - prediction.shape[2]:].cpu())
    model.train()
    prediction, target = torch.cat(predictions), torch.cat(targets)  # [N, P, C_out]
    return {"mse": round(mse(prediction, target), 6), "mae": round(mae(prediction, target), 6),
            "n_windows": prediction.shape[0]}


def measure_accuracy(setting: Setting, model: str, size: tuple[int, int, int] | None, seeds: Sequence[int],
                     steps: int | None) -> list[dict[str, Any]]:
    """Train fp32 (every seed) and bf16 (the first seed); score on every test window.

    The first seed's models are scored in fp32 and in bf16 inference, the other seeds' in fp32.

    Each run sees the batches of one epoch in its seed's order (``steps`` of them when
    given) with the same global RNG seed for dropout, so fp32 and bf16 at the same seed
    differ only by their numerics (and the divergence those cause over training).
    """
    runs = [("fp32", seed) for seed in seeds] + [("bf16", seeds[0])]
    rows = []
    for precision, seed in runs:
        variant = TRAIN_VARIANTS["bf16" if precision == "bf16" else "fp32"]
        trainer = Trainer(setting, model, variant, seed, size=size, drop_last=False)
        count = steps or len(trainer.batches.loader)
        load = CpuLoad()
        with load:
            torch.manual_seed(seed)
            begin = time.perf_counter()
            losses = [trainer.step() for _ in range(count)]
            train_seconds = time.perf_counter() - begin
        d_model, n_heads, d_ff = size or (setting.d_model, setting.n_heads, setting.d_ff)
        common = {"kind": "accuracy", "model": model, "precision": precision, "compile": False, "num_workers": 0,
                  "d_model": d_model, "n_heads": n_heads, "d_ff": d_ff, "train_steps": count, "seed": seed,
                  "loss": round(statistics.fmean(losses[-min(20, count):]), 5),
                  "median_ms": round(train_seconds / count * 1e3, 1),
                  "others_cpu": "" if load.share is None else round(load.share, 2), "status": "ok"}
        evaluations = ("fp32", "bf16") if seed == seeds[0] else ("fp32",)
        for eval_precision in evaluations:
            rows.append({**common, "variant": f"train {precision} seed {seed}, eval {eval_precision}",
                         "eval_precision": eval_precision, **evaluate(setting, trainer.model, eval_precision)})
    return rows


def run_group(group: dict[str, Any]) -> dict[str, Any]:
    """Run one group (a kind for a model) in this process; rows plus the torch facts."""
    setting = Setting(**group["setting"])
    allocator = use_allocator(setting.allocator)  # first: the process's allocator, before any tensor
    if setting.threads:
        torch.set_num_threads(setting.threads)
    kind, model = group["kind"], group.get("model", "-")
    if kind == "loader":
        rows = measure_loader(setting, group["variants"], group["epochs"])
    elif kind == "profile":
        rows = profile_training(setting, model, group["precisions"], group["steps"], group["top"])
    elif kind == "train":
        rows = measure_training(setting, model, group["variants"], group["warmup"], group["compile_warmup"],
                                group["steps"], group["min_steps"], group["budget"])
    elif kind == "infer":
        rows = measure_inference(setting, model, group["variants"], group["batches"], group["warmup"],
                                 group["compile_warmup"], group["repeats"], group["min_repeats"], group["budget"])
    elif kind == "accuracy":
        size = tuple(group["size"]) if group.get("size") else None
        rows = measure_accuracy(setting, model, size, group["seeds"], group.get("steps"))
    else:
        raise ValueError(f"unknown kind {kind!r}")
    device_name = torch.cuda.get_device_name() if setting.device.startswith("cuda") else machine()
    return {"rows": rows, "threads": torch.get_num_threads(), "torch": torch.__version__, "machine": device_name,
            "allocator": allocator}


# ------------------------------------------------------------------------- driver side


def _subprocess(group: dict[str, Any], timeout: float) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(group)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"status": f"timeout after {timeout:.0f}s"}
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"status": f"error (exit {done.returncode}): {tail[:200]}"}
    return {"status": "ok", **json.loads(done.stdout.strip().splitlines()[-1])}


def plan(args: argparse.Namespace, setting: Setting) -> list[dict[str, Any]]:
    """The groups a run measures, in order."""
    base = {"setting": asdict(setting)}
    if args.accuracy:
        groups = []
        for model in args.models:
            reduced = model in args.accuracy_reduced
            size = (args.reduced_d_model, args.reduced_heads, args.reduced_d_ff) if reduced else None
            groups.append({**base, "kind": "accuracy", "model": model, "size": size, "seeds": args.accuracy_seeds,
                           "steps": args.accuracy_steps})
        return groups
    groups = []
    if "loader" in args.kinds:
        variants = args.loader_variants or [*DEFAULT_LOADER_VARIANTS, *(["pinned"] if setting.device != "cpu" else [])]
        groups.append({**base, "kind": "loader", "variants": list(variants), "epochs": args.loader_epochs})
    if "profile" in args.kinds:
        profile_precisions = args.profile_precisions or by_default(setting.device, "--profile-precisions")
    if "infer" in args.kinds:
        infer_variants = args.infer_variants or by_default(setting.device, "--infer-variants")
    for model in args.models:
        if "profile" in args.kinds:
            groups.append({**base, "kind": "profile", "model": model, "precisions": profile_precisions,
                           "steps": args.profile_steps, "top": args.profile_top})
        if "train" in args.kinds:
            variants = args.variants or by_default(setting.device, f"{model} --variants",
                                                   DEFAULT_TRAIN_VARIANTS[model],
                                                   lambda name: TRAIN_VARIANTS[name].precision)
            groups.append({**base, "kind": "train", "model": model, "variants": list(variants),
                           "warmup": args.warmup, "compile_warmup": args.compile_warmup, "steps": args.steps,
                           "min_steps": args.min_steps, "budget": args.train_budget})
        if "infer" in args.kinds:
            groups.append({**base, "kind": "infer", "model": model, "variants": infer_variants,
                           "batches": [1, setting.batch], "warmup": args.warmup,
                           "compile_warmup": args.compile_warmup, "repeats": args.infer_repeats,
                           "min_repeats": args.min_steps, "budget": args.infer_budget})
    return groups


def add_speedups(rows: list[dict[str, Any]]) -> None:
    """``speedup`` of train/infer/loader rows against their group's baseline (fp32 eager; workers=0).

    Time ratios (baseline over row) for train and infer, rate ratios for the loader.
    """
    baseline_variant = {"train": BASELINE, "infer": BASELINE, "loader": "workers=0"}
    baselines = {(row["kind"], row["model"], row.get("batch")): row for row in rows
                 if row["status"] == "ok" and row["variant"] == baseline_variant.get(row["kind"])}
    for row in rows:
        base = baselines.get((row["kind"], row["model"], row.get("batch")))
        if base is None or row["status"] != "ok" or row["kind"] not in baseline_variant:
            continue
        if row["kind"] == "loader":
            row["speedup"] = round(float(row["windows_per_s"]) / float(base["windows_per_s"]), 3)
        else:
            row["speedup"] = round(float(base["median_ms"]) / float(row["median_ms"]), 3)


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a results CSV, numbers parsed."""
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        for column in COLUMNS:
            row.setdefault(column, "")  # files written before a column existed
        for column in NUMERIC:
            row[column] = float(row[column]) if row.get(column) not in (None, "") else None
        for column in ("batch", "repeats", "num_workers", "train_steps", "n_windows", "threads", "d_model",
                       "n_heads", "d_ff"):
            row[column] = int(float(row[column])) if row.get(column) not in (None, "") else None
    return rows


def _case(row: dict[str, Any]) -> tuple[str, str, str]:
    return row["kind"], row["model"], row["variant"]


def merge_rows(previous: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``previous`` with ``new`` in: the rows of each (kind, model, variant) measured again replace that case's
    earlier rows, in place (a profile's operators go as a whole), and the cases not measured are kept.

    A failed row (a variant's error, or a group's timeout: variant ``-``) stands only where its case (its group)
    has no ok row: a timed-out rerun must not erase good measurements.
    """
    ok_cases = {_case(row) for row in previous if row["status"] == "ok"}
    ok_groups = {(kind, model) for kind, model, _ in ok_cases}

    def stands(row: dict[str, Any]) -> bool:
        if row["status"] == "ok":
            return True
        return (row["kind"], row["model"]) not in ok_groups if row["variant"] == "-" else _case(row) not in ok_cases

    kept = [row for row in new if stands(row)]
    replaced = {_case(row) for row in kept}
    remeasured = {(row["kind"], row["model"]) for row in kept if row["status"] == "ok"}  # its old timeout row goes
    merged: list[dict[str, Any]] = []
    placed: set[tuple[str, str, str]] = set()
    for row in previous:
        case = _case(row)
        if case in replaced:
            if case not in placed:  # where the case was, so the tables keep their order
                merged += [new_row for new_row in kept if _case(new_row) == case]
                placed.add(case)
        elif not (row["variant"] == "-" and (row["kind"], row["model"]) in remeasured):
            merged.append(row)
    return merged + [row for row in kept if _case(row) not in placed]


def _failed_group(group: dict[str, Any], status: str) -> list[dict[str, Any]]:
    """The rows of a group whose process failed: one per variant (or profile precision) it was to measure."""
    variants = group.get("variants") or group.get("precisions") or ["-"]
    return [{"kind": group["kind"], "model": group.get("model", "-"), "variant": variant, "status": status}
            for variant in variants]


def measure(args: argparse.Namespace, setting: Setting, output: Path) -> list[dict[str, Any]]:
    """Run every planned group, writing the CSV after each; returns all rows. A group's rows replace the
    file's earlier rows of the cases it measured once it has run, so a run cut off keeps the rest of the file,
    and a failure keeps the earlier ok rows (:func:`merge_rows`)."""
    groups = plan(args, setting)
    previous = read_rows(output) if output.exists() else []
    rows = previous
    common = {
        "data": setting.data, "device": setting.device, "commit": commit(), "seed": setting.seed,
        "command": command_line(args.argv), "batch": setting.batch, "seq_len": setting.seq_len,
        "label_len": setting.label_len, "pred_len": setting.pred_len, "d_model": setting.d_model,
        "n_heads": setting.n_heads, "d_ff": setting.d_ff,
    }
    new: list[dict[str, Any]] = []
    for group in groups:
        model = group.get("model", "-")
        wait_for_quiet(args.busy_threshold, args.quiet_wait)
        started = time.perf_counter()
        result = {"status": "ok", **run_group(group)} if args.in_process else _subprocess(group, args.timeout)
        if result["status"] != "ok":
            group_rows = _failed_group(group, result["status"])
            facts: dict[str, Any] = {}
        else:
            group_rows = result["rows"]
            facts = {name: result[name] for name in ("threads", "torch", "machine", "allocator")}
        size = {}
        if setting.recipe != "paper" and model != "-":  # the recipe's own size, not the size flags
            options = setting.model_options(model)
            size = {name: options[name] for name in ("d_model", "n_heads", "d_ff") if name in options}
        group_rows = [{**common, **size, **facts, **row} for row in group_rows]
        new += group_rows
        rows = merge_rows(previous, new)
        add_speedups(rows)
        write_rows(rows, output, COLUMNS)
        for row in group_rows:
            print(_progress(row), file=sys.stderr, flush=True)
        print(f"  ({group['kind']} {model}: {time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
    return rows


def _progress(row: dict[str, Any]) -> str:
    head = f"{row['kind']:8s} {row['model']:9s} {str(row.get('variant', '')):26s}"
    if row["status"] != "ok":
        return f"{head} {row['status']}"
    if row["kind"] == "profile":
        return f"{head} {row['op'][:40]:40s} {row['median_ms']:9.1f} ms/step {100 * row['share']:5.1f}%"
    if row["kind"] == "accuracy":
        return (f"{head} mse {row['mse']:.4f} mae {row['mae']:.4f} "
                f"({row['n_windows']} windows, {row['train_steps']} steps)")
    batch = f" batch {row['batch']}" if row["kind"] == "infer" else ""
    return (f"{head}{batch} {row['median_ms']:10.2f} ms  {row['windows_per_s']:10.1f} windows/s "
            f"(x{row['repeats']}, others' CPU {row['others_cpu']})")


# ------------------------------------------------------------------------- report


def _number(value: float | None, digits: int = 1) -> str:
    if value is None:
        return ""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def _times(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"


def _share(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def _cell_status(row: dict[str, Any]) -> str:
    return "ok" if row["status"] == "ok" else row["status"].replace("|", "/")


def _header(rows: list[dict[str, Any]]) -> list[str]:
    first = next((row for row in rows if row.get("torch")), rows[0])
    # In the order run (rows are appended), the accuracy runs last as before.
    commands = sorted(dict.fromkeys(row["command"] for row in rows if row.get("command")),
                      key=lambda command: "--accuracy" in command)
    commits = sorted({short_commit(row["commit"]) for row in rows if row.get("commit")})
    threads = sorted({str(row["threads"]) for row in rows if row.get("threads")})
    allocators = sorted({allocator_of(row) for row in rows if row.get("torch")})
    # The run's batch: inference rows carry their own (1 and the batch), and a CUDA file's first row is one.
    batch = next((row["batch"] for row in rows if row["kind"] != "infer" and row.get("batch")), first["batch"])
    return [
        f"{first['data']}, seq_len {first['seq_len']}, label_len {first['label_len']}, pred_len {first['pred_len']}, "
        f"batch {batch}; d_model {first['d_model']}, {first['n_heads']} heads, d_ff {first['d_ff']} "
        "(Informer: e_layers 2, d_layers 1, factor 5; LogSparse: 3 layers). "
        f"Device: {first.get('machine')} ({first['device']}, {'/'.join(threads) or '?'} threads); "
        f"torch {first.get('torch')}; allocator {'/'.join(allocators)}; commit {', '.join(commits)}; "
        f"seed {first['seed']}.",
        "Commands: " + "; then ".join(f"`{command}`" for command in commands) + ".",
    ]


def _profile_section(rows: list[dict[str, Any]]) -> list[str]:
    parts = []
    for model in MODELS:
        for precision in ("fp32", "bf16"):
            ops = [row for row in rows if row["kind"] == "profile" and row["model"] == model
                   and row["precision"] == precision and row["status"] == "ok"]
            if not ops:
                continue
            body = [[f"`{row['op']}`", _number(row["median_ms"]), f"{100 * row['share']:.1f}%", _number(row["calls"])]
                    for row in ops]
            steps = ops[0]["repeats"]
            clock = "GPU" if ops[0]["device"].startswith("cuda") else "CPU"
            parts += [f"**Profile, {model}, {precision}**: top operators by self {clock} time over {steps} training "
                      f"step{'' if steps == 1 else 's'} (others' CPU {_share(ops[0]['others_cpu'])})",
                      markdown_table(["operator", "self ms / step", "share", "calls / step"], body)]
    return parts


def _loader_section(rows: list[dict[str, Any]]) -> list[str]:
    loader = [row for row in rows if row["kind"] == "loader"]
    if not loader:
        return []
    body = [[row["variant"], _cell_status(row), _number(row["windows_per_s"]),
             _number(None if row["warmup_s"] is None else row["warmup_s"] * 1e3),
             "" if row["median_ms"] is None else f"{row['median_ms']:.3f}", _times(row["speedup"]),
             _share(row["others_cpu"])] for row in loader]
    parts = ["**Data loader alone** (train split, whole epochs, batch "
             f"{loader[0]['batch']}; first batch = worker start-up)",
             markdown_table(["variant", "status", "windows/s", "first batch ms", "median ms / batch", "vs workers=0",
                             "others' CPU"], body)]
    fastest = max((row["windows_per_s"] or 0 for row in loader), default=0)
    training = [row["windows_per_s"] for row in rows if row["kind"] == "train" and row["status"] == "ok"
                and row["windows_per_s"]]
    if fastest and training:
        parts.append(f"The fastest loader delivers {fastest:,.0f} windows/s, {fastest / max(training):,.0f}x the "
                     f"fastest training rate measured ({max(training):,.1f} windows/s): loading keeps the model busy "
                     "with no worker process.")
    return parts


def _train_section(rows: list[dict[str, Any]]) -> list[str]:
    parts = []
    for model in MODELS:
        train = [row for row in rows if row["kind"] == "train" and row["model"] == model]
        if not train:
            continue
        body = [[row["variant"], _cell_status(row), _number(row["median_ms"]), _number(row["windows_per_s"]),
                 _times(row["speedup"]), _number(row["warmup_s"]), str(row["repeats"] or ""),
                 _share(row["others_cpu"])] for row in train]
        parts += [f"**Training, {model}**: full optimizer steps, median over interleaved steps",
                  markdown_table(["variant", "status", "ms / step", "windows/s", "speed-up vs fp32 eager",
                                  "warm-up s", "steps", "others' CPU"], body)]
    other_models = [f"{name} ({', '.join(f'{key}={value}' for key, value in variant.model_options)})"
                    for name, variant in TRAIN_VARIANTS.items()
                    if variant.model_options and any(row["kind"] == "train" and row["variant"] == name for row in rows)]
    if other_models:
        parts.append("Variants that change the model, to price one of its parts rather than to speed it up: "
                     + "; ".join(other_models) + ".")
    return parts


def _infer_section(rows: list[dict[str, Any]]) -> list[str]:
    infer = [row for row in rows if row["kind"] == "infer"]
    if not infer:
        return []
    batches = sorted({row["batch"] for row in infer})
    table = {(row["model"], row["variant"], row["batch"]): row for row in infer}
    body = []
    for model in MODELS:
        for variant in INFER_VARIANTS:
            cells = [table.get((model, variant, batch)) for batch in batches]
            if not any(cells):
                continue
            line = [model, variant]
            for cell in cells:
                if cell is None or cell["status"] != "ok":
                    line += [cell and _cell_status(cell) or "", ""]
                else:
                    line += [_number(cell["median_ms"]), _times(cell["speedup"])]
            line.append(_share(max((cell["others_cpu"] or 0.0 for cell in cells if cell), default=None)))
            body.append(line)
    header = ["model", "variant"]
    for batch in batches:
        header += [f"batch {batch} ms", "speed-up"]
    return ["**Inference latency**: eval mode, `torch.inference_mode`, median ms per forward",
            markdown_table(header + ["others' CPU"], body)]


def _delta(value: float, reference: float) -> str:
    return f"{value - reference:+.4f} ({100 * (value / reference - 1):+.1f}%)"


def _accuracy_section(rows: list[dict[str, Any]]) -> list[str]:
    accuracy = [row for row in rows if row["kind"] == "accuracy"]
    if not accuracy:
        return []
    body = []
    for model in MODELS:
        runs = [row for row in accuracy if row["model"] == model and row["status"] == "ok"]
        if not runs:
            continue
        reference = runs[0]  # fp32 training, fp32 evaluation, first seed
        for row in runs:
            same = row is reference
            body.append([
                model, f"{row['d_model']}/{row['n_heads']}/{row['d_ff']}", row["variant"], str(row["train_steps"]),
                _number(row["median_ms"]), f"{row['mse']:.4f}", f"{row['mae']:.4f}",
                "" if same else _delta(row["mse"], reference["mse"]),
                "" if same else _delta(row["mae"], reference["mae"]),
                str(row["n_windows"]), _share(row["others_cpu"]),
            ])
    return [f"**bf16 accuracy on {accuracy[0]['data']}** (standardized MSE/MAE over every test window; deltas "
            "against the first row of each model; the second fp32 seed is the run-to-run noise to compare the "
            "bf16 delta with)",
            markdown_table(["model", "d_model/heads/d_ff", "run", "steps", "ms / step", "MSE", "MAE", "ΔMSE", "ΔMAE",
                            "test windows", "others' CPU"], body)]


def markdown(rows: list[dict[str, Any]]) -> str:
    """The README tables for the rows of a results CSV."""
    if not rows:
        return "No rows.\n"
    parts = _header(rows)
    for section in (_profile_section, _loader_section, _train_section, _infer_section, _accuracy_section):
        parts += section(rows)
    return "\n\n".join(parts) + "\n"


# ------------------------------------------------------------------------- entry point


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda (bf16 autocast on it)")
    parser.add_argument("--data", default="ETTh1", help="registered dataset name or CSV path")
    parser.add_argument("--features", default="M")
    parser.add_argument("--target", default="OT")
    parser.add_argument("--seq-len", type=int, default=96)
    parser.add_argument("--label-len", type=int, default=48)
    parser.add_argument("--pred-len", type=int, default=24)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--d-ff", type=int, default=2048)
    add_allocator_argument(parser)
    parser.add_argument("--recipe", default="paper", choices=("paper", "improved"),
                        help="the models' options: the paper's architecture at --d-model/--heads/--d-ff, or the "
                             "improved recipe's model (its own size; the size flags are ignored)")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    parser.add_argument("--variants", nargs="+", choices=list(TRAIN_VARIANTS),
                        help="training variants for every model (default: per model, see DEFAULT_TRAIN_VARIANTS; "
                             "without the bf16 ones on a CPU that emulates bf16)")
    parser.add_argument("--loader-variants", nargs="+", choices=list(LOADER_VARIANTS),
                        help="default: DEFAULT_LOADER_VARIANTS, plus pinned memory on CUDA")
    parser.add_argument("--infer-variants", nargs="+", choices=list(INFER_VARIANTS),
                        help="default: fp32 and bf16 (fp32 alone on a CPU that emulates bf16)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps per eager variant")
    parser.add_argument("--compile-warmup", type=int, default=2,
                        help="untimed steps per compiled variant: compilation, and for Informer a "
                             "recompilation on the second call")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per training variant at most")
    parser.add_argument("--min-steps", type=int, default=2, help="timed steps per variant at least")
    parser.add_argument("--train-budget", type=float, default=60.0,
                        help="seconds of interleaved timed rounds per model after which --min-steps suffice")
    parser.add_argument("--infer-repeats", type=int, default=20)
    parser.add_argument("--infer-budget", type=float, default=30.0)
    parser.add_argument("--loader-epochs", type=int, default=2)
    parser.add_argument("--profile-steps", type=int, default=1)
    parser.add_argument("--profile-top", type=int, default=10)
    parser.add_argument("--profile-precisions", nargs="+", choices=("fp32", "bf16"),
                        help="default: fp32 and bf16 (fp32 alone on a CPU that emulates bf16)")
    parser.add_argument("--accuracy", action="store_true",
                        help="run the bf16 accuracy experiment (only it) instead of the throughput kinds")
    parser.add_argument("--accuracy-seeds", type=int, nargs="+", default=[0, 1],
                        help="fp32 runs at every seed, bf16 at the first")
    parser.add_argument("--accuracy-steps", type=int, help="training steps per run (default: one epoch)")
    parser.add_argument("--accuracy-reduced", nargs="*", default=["logsparse"], choices=MODELS,
                        help="models trained at the reduced size in the accuracy experiment")
    parser.add_argument("--reduced-d-model", type=int, default=64)
    parser.add_argument("--reduced-heads", type=int, default=4)
    parser.add_argument("--reduced-d-ff", type=int, default=256)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--busy-threshold", type=float, default=0.2,
                        help="fraction of the cores other processes may use before a group waits")
    parser.add_argument("--quiet-wait", type=float, default=60.0,
                        help="seconds to wait for other processes to go quiet before each group")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds before a group's subprocess is killed")
    parser.add_argument("--in-process", action="store_true", help="run the groups in this process (tests)")
    parser.add_argument("--output", type=Path, help="CSV path (default benchmarks/results/train_<device>.csv)")
    parser.add_argument("--markdown", type=Path, metavar="CSV", help="only print the tables for an existing CSV")
    parser.add_argument("--readme", type=Path, nargs="?", const=README, metavar="README",
                        help="with --markdown: rewrite the tables' block of this README (default "
                             "benchmarks/README.md) instead of printing")
    add_merge_argument(parser)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.merge and not args.output:
        parser.error("--merge needs --output, the results file to merge into")
    args.argv = [str(Path(__file__).resolve()), *(sys.argv[1:] if argv is None else argv)]
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        print(json.dumps(run_group(json.loads(args.worker))))
        return
    if args.markdown:
        emit_tables("train-tables", markdown(read_rows(args.markdown)), args.readme, args.markdown)
        return
    if args.merge:  # as a run's rows go in: by (kind, model, variant), failures only where no ok row
        rows = merge_rows(read_rows(args.output) if args.output.exists() else [], read_rows(args.merge))
        add_speedups(rows)
        write_rows(rows, args.output, COLUMNS)
        print(f"merged {args.merge} into {args.output}: {len(rows)} rows", file=sys.stderr)
        return
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"--device {args.device}: no CUDA device is visible to torch {torch.__version__}")
    setting = Setting(
        data=args.data, features=args.features, target=args.target, seq_len=args.seq_len, label_len=args.label_len,
        pred_len=args.pred_len, batch=args.batch, d_model=args.d_model, n_heads=args.heads, d_ff=args.d_ff,
        device=args.device, threads=args.threads, seed=args.seed, recipe=args.recipe, allocator=args.allocator,
    )
    output = args.output or RESULTS / f"train_{args.device.split(':')[0]}.csv"
    measure(args, setting, output)
    print(markdown(read_rows(output)), end="")  # as written: a failed group's rows have no numeric columns yet
    print(f"wrote {os.path.relpath(output, Path.cwd())}", file=sys.stderr)


if __name__ == "__main__":
    main()
