"""benchmarks/train.py at a tiny size: every kind runs, rows are complete and sane, tables render."""

from __future__ import annotations

import csv
import importlib.util
import math
import os
import platform
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from torch.utils.data import default_collate

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
TINY = ["--seq-len", "32", "--label-len", "16", "--pred-len", "8", "--batch", "4", "--d-model", "16", "--heads", "2",
        "--d-ff", "32", "--quiet-wait", "0", "--in-process", "--allocator", "glibc"]


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCHMARKS))  # the script imports its sibling _common
    spec = importlib.util.spec_from_file_location("benchmark_train", BENCHMARKS / "train.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["benchmark_train"] = module  # dataclasses look their module up while the script runs
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCHMARKS))
        del sys.modules["benchmark_train"]


@pytest.fixture(scope="module")
def series(tmp_path_factory) -> Path:
    """An hourly CSV with three variables (target OT last), 300 rows: 70/10/20 split."""
    rng = np.random.default_rng(0)
    steps = np.arange(300)
    frame = pd.DataFrame({"date": pd.date_range("2021-01-01", periods=len(steps), freq="h")})
    for phase, column in enumerate(("a", "b", "OT")):
        frame[column] = np.sin(2 * np.pi * steps / 24 + phase) + 0.1 * rng.standard_normal(len(steps))
    path = tmp_path_factory.mktemp("data") / "tiny.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def results(bench, series, tmp_path_factory) -> Path:
    """One throughput run (every kind, fp32 + bf16, both models), then the accuracy run, into one CSV."""
    output = tmp_path_factory.mktemp("results") / "train_cpu.csv"
    common = ["--data", str(series), *TINY, "--output", str(output)]
    bench.main([*common, "--variants", "fp32", "bf16", "--warmup", "1", "--steps", "2", "--min-steps", "2",
                "--infer-repeats", "2", "--loader-epochs", "1", "--loader-variants", "workers=0", "batched-gather",
                "--profile-steps", "1", "--profile-top", "4", "--profile-precisions", "fp32", "bf16",
                "--infer-variants", "fp32", "bf16"])
    bench.main([*common, "--accuracy", "--accuracy-steps", "2", "--accuracy-reduced", "logsparse",
                "--reduced-d-model", "8", "--reduced-heads", "2", "--reduced-d-ff", "16"])
    return output


def _finite_positive(value) -> bool:
    return value is not None and math.isfinite(value) and value > 0


def test_the_csv_has_every_column_and_every_group(bench, results):
    with results.open(newline="") as handle:
        reader = csv.DictReader(handle)
        assert tuple(reader.fieldnames) == bench.COLUMNS
        raw = list(reader)
    rows = bench.read_rows(results)
    assert all(row["status"] == "ok" for row in rows), [row["status"] for row in rows if row["status"] != "ok"]
    groups = {(row["kind"], row["model"]) for row in rows}
    assert groups == {("loader", "-")} | {(kind, model) for kind in ("profile", "train", "infer", "accuracy")
                                          for model in ("informer", "logsparse")}
    for row in raw:
        for column in ("command", "commit", "machine", "torch", "threads", "seed", "device", "others_cpu"):
            assert row[column] != "", (column, row["kind"], row["variant"])
        assert row["command"].startswith("python benchmarks/train.py")


def test_throughput_rows_are_sane(bench, results):
    rows = bench.read_rows(results)
    train = [row for row in rows if row["kind"] == "train"]
    assert {(row["model"], row["variant"]) for row in train} == {
        (model, variant) for model in ("informer", "logsparse") for variant in ("fp32", "bf16")}
    for row in [*train, *(row for row in rows if row["kind"] in ("infer", "loader"))]:
        assert _finite_positive(row["median_ms"]) and _finite_positive(row["windows_per_s"])
        assert row["min_ms"] <= row["median_ms"]
        assert 0.0 <= row["others_cpu"] <= 1.0
        assert _finite_positive(row["speedup"])
    for row in train:
        assert row["repeats"] >= 2 and math.isfinite(row["loss"])
        # windows/s is the batch over the median step
        assert row["windows_per_s"] == pytest.approx(row["batch"] / (row["median_ms"] / 1e3), rel=0.01)
        baseline = next(r for r in train if r["model"] == row["model"] and r["variant"] == "fp32")
        assert row["speedup"] == pytest.approx(baseline["median_ms"] / row["median_ms"], rel=0.01)
    assert {row["batch"] for row in rows if row["kind"] == "infer"} == {1, 4}
    profile = [row for row in rows if row["kind"] == "profile"]
    assert {(row["model"], row["precision"]) for row in profile} == {
        (model, precision) for model in ("informer", "logsparse") for precision in ("fp32", "bf16")}
    for row in profile:
        assert 0.0 < row["share"] <= 1.0 and row["op"]


def test_accuracy_scores_every_test_window(bench, results, series):
    from forecast.data import WindowDataModule

    test_windows = len(WindowDataModule(str(series), 32, 16, 8).test_dataset)
    accuracy = [row for row in bench.read_rows(results) if row["kind"] == "accuracy"]
    for model in ("informer", "logsparse"):
        runs = {row["variant"]: row for row in accuracy if row["model"] == model}
        assert set(runs) == {"train fp32 seed 0, eval fp32", "train fp32 seed 0, eval bf16",
                             "train fp32 seed 1, eval fp32", "train bf16 seed 0, eval fp32",
                             "train bf16 seed 0, eval bf16"}
        for row in runs.values():
            assert row["n_windows"] == test_windows and row["train_steps"] == 2
            assert _finite_positive(row["mse"]) and _finite_positive(row["mae"])
        # bf16 inference of the same weights changes the error by rounding only
        fp32, bf16 = runs["train fp32 seed 0, eval fp32"], runs["train fp32 seed 0, eval bf16"]
        assert bf16["mse"] == pytest.approx(fp32["mse"], rel=0.05)
        assert runs["train fp32 seed 0, eval fp32"]["d_model"] == (16 if model == "informer" else 8)


def test_markdown_renders_every_section(bench, results, capsys):
    bench.main(["--markdown", str(results)])
    text = capsys.readouterr().out
    for title in ("**Profile, informer, fp32**", "**Data loader alone**", "**Training, informer**",
                  "**Training, logsparse**", "**Inference latency**", "**bf16 accuracy on"):
        assert title in text
    assert "| bf16 | ok |" in text
    assert text.count("| informer | 16/2/32 |") == 5


def _train_row(bench, kind: str, variant: str, batch: int = 32, status: str = "ok", ms: float = 10.0,
               **columns) -> dict:
    """A results row of train.py (numbers as read_rows parses them)."""
    row = dict.fromkeys(bench.COLUMNS, None)
    row.update(kind=kind, model="informer", variant=variant, data="ETTh1", precision="fp32", compile=False,
               num_workers=0, batch=batch, seq_len=96, label_len=48, pred_len=24, d_model=512, n_heads=8, d_ff=2048,
               status=status, median_ms=ms if status == "ok" else None, min_ms=ms if status == "ok" else None,
               windows_per_s=batch / ms * 1e3 if status == "ok" else None, repeats=5, others_cpu=0.0,
               device="cuda", machine="GPU", threads=16, torch="2", allocator="reuse", commit="0" * 12, seed=0,
               command="python benchmarks/train.py")
    return {**row, **columns}


def test_the_header_gives_the_training_batch_not_the_first_inference_rows(bench):
    """A CUDA file begins with an inference row of batch 1; its header said "batch 1" over rows of batch 32."""
    rows = [_train_row(bench, "infer", "fp32", batch=1), _train_row(bench, "infer", "fp32"),
            _train_row(bench, "train", "fp32")]
    assert ", pred_len 24, batch 32; d_model 512" in bench.markdown(rows)


def test_batched_gather_serves_the_collated_batch(bench, series):
    setting = bench.Setting(data=str(series), seq_len=32, label_len=16, pred_len=8, batch=4)
    windows = bench._datamodule(setting, bench.Variant("spec")).train_dataset
    gathered = bench.BatchedWindows(windows).__getitems__([5, 0, len(windows) - 1, 17])
    expected = default_collate([windows[index] for index in (5, 0, len(windows) - 1, 17)])
    assert gathered.keys() == expected.keys()
    for key in expected:
        torch.testing.assert_close(gathered[key], expected[key], rtol=0, atol=0)


def test_a_rerun_cut_off_keeps_the_rows_it_did_not_reach(bench, results, series, tmp_path, monkeypatch):
    """A group's rows replace the file's earlier ones only once it has run (device_bench.sh re-runs the
    training groups last, under a time limit)."""
    output = tmp_path / "train_cpu.csv"
    output.write_text(results.read_text())
    before = bench.read_rows(output)
    measured = bench.run_group

    def cut_off_at_logsparse(group):
        if group.get("model") == "logsparse":
            raise KeyboardInterrupt  # what the time limit's signal does to the run
        return measured(group)

    monkeypatch.setattr(bench, "run_group", cut_off_at_logsparse)
    with pytest.raises(KeyboardInterrupt):
        bench.main(["--data", str(series), *TINY, "--output", str(output), "--kinds", "train", "--variants", "fp32",
                    "--warmup", "1", "--steps", "2", "--min-steps", "2"])
    after = bench.read_rows(output)

    def group(rows, kind, model):
        return [(row["variant"], row["median_ms"]) for row in rows if row["kind"] == kind and row["model"] == model]

    assert group(after, "train", "logsparse") == group(before, "train", "logsparse") != []
    assert group(after, "infer", "informer") == group(before, "infer", "informer") != []
    # fp32 measured again, bf16 (not asked for) kept
    assert [variant for variant, _ in group(after, "train", "informer")] == ["fp32", "bf16"]
    assert group(after, "train", "informer")[1] == group(before, "train", "informer")[1]


def _rerun(bench, monkeypatch, output: Path, result: dict, *arguments: str) -> list[dict]:
    """``train.py *arguments`` on ``output`` with every group's process answering ``result``."""
    monkeypatch.setattr(bench, "_subprocess", lambda group, timeout: result)
    bench.main(["--output", str(output), "--quiet-wait", "0", *arguments])
    return bench.read_rows(output)


def test_a_failed_group_keeps_the_earlier_rows_and_stands_only_where_there_were_none(bench, tmp_path, monkeypatch):
    """A timed-out rerun of LogSparse's compiled step replaced its four ok training rows by one timeout row."""
    output = tmp_path / "train_cpu.csv"
    output.write_text((BENCHMARKS / "results" / "train_cpu.csv").read_text())
    before = bench.read_rows(output)
    timeout = {"status": "timeout after 1s"}
    after = _rerun(bench, monkeypatch, output, timeout, "--models", "logsparse", "--kinds", "train",
                   "--variants", "compile", "--timeout", "1")

    def cases(rows):
        return [(row["kind"], row["model"], row["variant"], row["status"], row["median_ms"]) for row in rows]

    assert cases(after) == cases(before)
    after = _rerun(bench, monkeypatch, output, timeout, "--models", "logsparse", "--kinds", "train",
                   "--variants", "compile", "loop-adam", "--timeout", "1")
    assert cases(after) == cases(before) + [("train", "logsparse", "loop-adam", "timeout after 1s", None)]


def test_a_partial_rerun_replaces_only_the_variants_it_measured(bench, tmp_path, monkeypatch):
    """--variants bf16 dropped the fp32 baseline row its speed-up is taken against."""
    output = tmp_path / "train_cuda.csv"
    rows = [_train_row(bench, "train", "fp32", ms=20.0), _train_row(bench, "train", "bf16", ms=40.0),
            _train_row(bench, "train", "compile", ms=10.0)]
    bench.write_rows(rows, output, bench.COLUMNS)
    faster = {"status": "ok", "threads": 16, "torch": "2", "machine": "GPU", "allocator": "reuse",
              "rows": [_train_row(bench, "train", "bf16", ms=10.0)]}
    after = _rerun(bench, monkeypatch, output, faster, "--models", "informer", "--kinds", "train",
                   "--variants", "bf16")
    assert [(row["variant"], row["median_ms"]) for row in after] == [("fp32", 20.0), ("bf16", 10.0),
                                                                      ("compile", 10.0)]
    assert after[1]["speedup"] == 2.0  # against the fp32 row kept


def test_a_failing_variant_becomes_a_row(bench):
    def broken():
        raise RuntimeError("no kernel")

    results = bench._interleave({"ok": lambda: None, "broken": broken}, "cpu", {"ok": 1, "broken": 1}, repeats=2,
                                min_repeats=1, budget=10.0)
    assert results["broken"]["status"].startswith("error: RuntimeError: no kernel")
    assert len(results["ok"]["times"]) == 2


def test_the_measured_waste_fixes_stay_in_place():
    """Hot-path layouts and dropouts the training benchmark's profile found wasteful (benchmarks/README.md)."""
    from forecast.layers.blocks import DistillingLayer
    from forecast.layers.embedding import DataEmbedding
    from forecast.models import DataSpec, build_model

    torch.manual_seed(0)
    x, x_mark = torch.randn(3, 10, 4), torch.randn(3, 10, 2)  # [B, L, C], [B, L, F]
    for time_encoding, sizes, marks in (("timeF", None, x_mark), ("fixed", [24, 7], torch.randint(0, 7, (3, 10, 2)))):
        embedding = DataEmbedding(4, 8, 2, time_encoding=time_encoding, time_feature_sizes=sizes)
        assert embedding(x, marks.float()).is_contiguous()  # a transposed sum made each projection copy it
    assert DistillingLayer(8)(torch.randn(3, 10, 8)).is_contiguous()
    spec = DataSpec(seq_len=8, label_len=4, pred_len=2, c_in=3, c_out=3, n_time_features=2)
    model = build_model("logsparse", spec, d_model=8, n_heads=2, n_layers=2, d_ff=16, dropout=0.1)
    for block in model.blocks:  # the attention branch is dropped once, by the block
        assert block.dropout.p == 0.1 and block.attention.dropout.p == 0.0


@pytest.mark.parametrize("script, block, csv_name", [("attention", "attention-tables", "attention_cpu.csv"),
                                                      ("train", "train-tables", "train_cpu.csv"),
                                                      ("roofline", "roofline-tables", "roofline_cpu.csv"),
                                                      ("reference", "reference-tables", "reference_cpu.csv"),
                                                      ("train", "train-tables-cuda", "train_cuda.csv"),
                                                      ("attention", "attention-tables-cuda-bf16",
                                                       "attention_cuda_bf16.csv"),
                                                      ("attention", "attention-tables-cuda", "attention_cuda.csv"),
                                                      ("roofline", "roofline-tables-cuda", "roofline_cuda.csv")])
def test_benchmark_readme_tables_are_generated_from_the_committed_csvs(script, block, csv_name, tmp_path):
    """Every figure in benchmarks/README.md's tables comes from the committed results."""
    readme = tmp_path / "README.md"
    committed = (BENCHMARKS / "README.md").read_text()
    readme.write_text(committed)
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location(f"benchmark_{script}_readme", BENCHMARKS / f"{script}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up while the script runs
        spec.loader.exec_module(module)
        module.main(["--markdown", str(BENCHMARKS / "results" / csv_name), "--readme", str(readme)])
    finally:
        sys.path.remove(str(BENCHMARKS))
        sys.modules.pop(f"benchmark_{script}_readme", None)
    assert f"<!-- {block}:begin -->" in committed
    assert readme.read_text() == committed


def _script(name: str):
    """benchmarks/<name>.py as a module (it imports its sibling _common)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location(f"benchmark_{name}", BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


def _roofline():
    return _script("roofline")


def test_the_roofline_counts_a_steps_flops_and_its_share_of_the_gemm_rate():
    module = _roofline()
    name, size, options = module.CASES[1]  # the improved Informer, the cheapest
    row = module.measure(name, size, options, "fp32", steps=1, gemm_size=64)
    assert set(row) == set(module.COLUMNS)
    assert row["gflop_per_step"] > 0 and row["step_ms"] > 0 and row["gemm_gflops"] > 0
    assert row["share"] == pytest.approx(row["achieved_gflops"] / row["gemm_gflops"])
    assert row["achieved_gflops"] == pytest.approx(row["gflop_per_step"] / row["step_ms"] * 1000)


def test_the_roofline_times_cuda_fp32_convolutions_in_ieee_fp32_as_its_gemm_rate_and_restores():
    """cuDNN's default TF32 convolutions were timed against an IEEE fp32 GEMM rate."""
    module = _roofline()
    kept = torch.backends.cudnn.conv.fp32_precision
    with module._ieee_convolutions("fp32", torch.device("cuda")):
        assert torch.backends.cudnn.conv.fp32_precision == "ieee"
    assert torch.backends.cudnn.conv.fp32_precision == kept
    for precision, device in (("bf16", "cuda"), ("fp32", "cpu")):
        with module._ieee_convolutions(precision, torch.device(device)):
            assert torch.backends.cudnn.conv.fp32_precision == kept


def test_the_torch_dropout_variant_draws_every_mask_with_f_dropout_and_restores(bench):
    import forecast.layers.attention.probsparse as probsparse
    import forecast.layers.dropout as cheap

    x, original = torch.ones(1000), cheap.apply_dropout
    with bench._torch_dropout():
        assert probsparse.apply_dropout is not original
        torch.manual_seed(0)
        patched = cheap.Dropout(0.3).train()(x)
    torch.manual_seed(0)
    assert torch.equal(patched, torch.nn.functional.dropout(x, 0.3, True))
    assert probsparse.apply_dropout is cheap.apply_dropout is original
    torch.manual_seed(0)
    assert not torch.equal(cheap.Dropout(0.3).train()(x), patched)  # the cheap masks again


def test_the_uniform_dropout_variant_draws_one_uniform_per_element_and_restores(bench):
    import forecast.layers.dropout as cheap

    x, threshold = torch.ones(1000), cheap.GAP_DRAWS_BELOW
    with bench._uniform_dropout():
        torch.manual_seed(0)
        uniform = cheap.apply_dropout(x, 0.05, True)
    torch.manual_seed(0)
    assert torch.equal(uniform, x * torch.rand(1000).lt_(0.95).mul_(1 / 0.95))
    assert cheap.GAP_DRAWS_BELOW == threshold
    torch.manual_seed(0)
    assert not torch.equal(cheap.apply_dropout(x, 0.05, True), uniform)  # the gaps' draw again


def test_the_unfused_dropout_variant_scales_in_a_pass_of_its_own_and_restores(bench):
    import forecast.layers.blocks as blocks
    import forecast.layers.dropout as cheap

    class Values(torch.nn.Module):  # the residuals and the feed-forward alone
        def forward(self, queries, keys, values, need_weights=False):
            return values

    torch.manual_seed(0)
    block = blocks.EncoderLayer(Values(), 16, 32, 0.05).train()
    x = torch.randn(2, 8, 16)
    fused_functions = blocks.activation_dropout_linear, blocks.add_dropout
    scaled = []
    original_apply = cheap.apply_dropout
    with bench._unfused_dropout():
        assert (blocks.activation_dropout_linear, blocks.add_dropout) != fused_functions
        cheap.apply_dropout = lambda y, p, training: scaled.append(y.shape) or original_apply(y, p, training)
        try:
            torch.manual_seed(1)
            unfused = block(x)[0]
        finally:
            cheap.apply_dropout = original_apply
    assert scaled == [(2, 8, 16), (2, 8, 32), (2, 8, 16)]  # the attention's branch, the activations, the block's
    assert (blocks.activation_dropout_linear, blocks.add_dropout) == fused_functions
    torch.manual_seed(1)
    torch.testing.assert_close(block(x)[0], unfused)  # the same masks, float rounding apart


def test_the_improved_recipe_times_its_own_model_against_sdpa_attention(bench, series, tmp_path):
    output = tmp_path / "attention.csv"
    bench.main(["--data", str(series), *TINY, "--output", str(output), "--models", "informer", "--kinds", "train",
                "--variants", "fp32", "sdpa-dropout", "--recipe", "improved", "--warmup", "1", "--steps", "2",
                "--min-steps", "2"])
    rows = bench.read_rows(output)
    assert {row["variant"] for row in rows} == {"fp32", "sdpa-dropout"}
    assert all(row["status"] == "ok" and math.isfinite(row["loss"]) for row in rows)
    # the recipe's size, not the --d-model 16 of the flags
    assert {(row["d_model"], row["n_heads"], row["d_ff"]) for row in rows} == {(64, 4, 128)}


@pytest.mark.parametrize("native", [True, False])
def test_bf16_is_measured_by_default_only_where_it_runs_natively_and_always_when_named(bench, monkeypatch, capsys,
                                                                                      native):
    import forecast.machine

    monkeypatch.setattr(forecast.machine, "cpu_has_bf16", lambda: native)
    setting = bench.Setting()
    parse = bench.parse_args
    groups = {group["kind"]: group for group in bench.plan(parse(["--models", "informer"]), setting)}
    fp32_only = not native
    assert ("bf16" in groups["train"]["variants"]) is native
    assert all(bench.TRAIN_VARIANTS[name].precision == "fp32" for name in groups["train"]["variants"]) is fp32_only
    assert groups["train"]["variants"][0] == "fp32"
    assert groups["profile"]["precisions"] == (["fp32", "bf16"] if native else ["fp32"])
    assert groups["infer"]["variants"] == (["fp32", "bf16"] if native else ["fp32"])
    assert ("emulates bf16" in capsys.readouterr().out) is fp32_only
    named = parse(["--models", "informer", "--variants", "bf16", "--infer-variants", "bf16",
                   "--profile-precisions", "bf16"])
    groups = {group["kind"]: group for group in bench.plan(named, setting)}
    assert groups["train"]["variants"] == ["bf16"] and groups["infer"]["variants"] == ["bf16"]
    assert groups["profile"]["precisions"] == ["bf16"]
    # on a GPU bf16 is always native
    cuda = {group["kind"]: group for group in bench.plan(parse(["--models", "informer"]), bench.Setting(device="cuda"))}
    assert "bf16" in cuda["train"]["variants"]


def test_the_machine_label_is_the_cpu_label_with_cores_and_os(bench, tmp_path):
    from _common import machine  # the fixture put benchmarks/ on the path

    from forecast.machine import cpu_label

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("cpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2\n")
    assert machine(cpuinfo) == f"{cpu_label(cpuinfo)}, {os.cpu_count()} cores, {platform.system()}"
    assert machine(cpuinfo).startswith("AMD EPYC (family 25 model 1, AVX2), ")


def test_the_roofline_table_names_each_rows_machine_when_rows_come_from_several():
    module = _roofline()
    row = {"model": "informer", "size": "paper (d512)", "precision": "fp32", "batch": "32", "pred_len": "24",
           "gflop_per_step": "159.2", "step_ms": "1000", "achieved_gflops": "159.2", "gemm_gflops": "190",
           "share": "0.84", "threads": "2", "allocator": "reuse", "others_cpu": "0.01", "torch": "2.13.0+cpu",
           "commit": "0" * 40, "command": "python benchmarks/roofline.py", "machine": "AMD EPYC, 2 cores, Linux"}
    one = module.markdown([row, dict(row)])
    assert "AMD EPYC, 2 cores, Linux; torch" in one and "| machine |" not in one
    other = dict(row, machine="AMD EPYC (family 25 model 1, AVX2), 2 cores, Linux")
    both = module.markdown([row, other])
    assert "the machine in the last column" in both and "| machine |" in both
    assert both.rstrip().splitlines()[-1].endswith("| AMD EPYC (family 25 model 1, AVX2), 2 cores, Linux |")


# ------------------------------------------------------------------------- benchmarks/attention.py


@pytest.fixture(scope="module")
def attention():
    return _script("attention")


def _in_a_worker(code: str) -> str:
    """Run ``code`` in a fresh Python with benchmarks/ importable, as the attention driver runs its workers."""
    import subprocess

    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(BENCHMARKS), str(ROOT)]))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=environment,
                          check=True, timeout=300)
    return done.stdout.strip().splitlines()[-1]


def test_a_cpu_workers_peak_memory_is_its_own_not_the_drivers():
    """A child's ru_maxrss starts at its parent's RSS: a worker's 64 MiB read as nothing under a large driver."""
    ballast = b"x" * (384 << 20)  # a driver far larger than the worker, as one that has imported Lightning
    before, after = map(float, _in_a_worker(
        "import attention; before = attention._peak_mb('cpu'); block = b'x' * (64 << 20); "
        "print(before, attention._peak_mb('cpu'))").split())
    assert len(ballast) and after < 300  # the worker's own peak: Python and a 64 MiB block
    assert after - before == pytest.approx(64, abs=8)


def test_the_attention_baseline_imports_the_kernels_modules_as_the_measured_workers_do():
    """forecast.layers.attention brings torch._dynamo (37 MiB) in: a baseline without it inflated every peak."""
    spec = {"batch": 1, "heads": 1, "head_dim": 4, "length": 8, "mode": "forward", "dtype": "float32",
            "device": "cpu", "seed": 0, "threads": 1, "kind": "baseline", "method": "sdpa", "causal": False}
    loaded = _in_a_worker(
        f"import sys, attention; attention.run_worker({spec!r}); "
        "print(all(name in sys.modules for name in ('forecast.layers.attention', 'torch._dynamo')))")
    assert loaded == "True"


@pytest.mark.parametrize("kind, mapped", [("baseline", True), ("memory", True), ("time", False), ("paired", False)])
def test_only_the_memory_workers_map_every_block_afresh(attention, monkeypatch, kind, mapped):
    """MALLOC_MMAP_THRESHOLD_ keeps RSS to live memory but slows the kernels: --compare's timings ran with it."""
    seen = {}

    def run(command, env, **options):
        seen.update(env)
        return attention.subprocess.CompletedProcess(command, 0, stdout='{"peak_mb": 1.0}\n', stderr="")

    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.setattr(attention.subprocess, "run", run)
    assert attention._subprocess({"kind": kind}, timeout=1)["status"] == "ok"
    assert ("MALLOC_MMAP_THRESHOLD_" in seen) is mapped


def _timing(method: str, length: int, ms: float, causal: bool = False, mode: str = "train") -> dict:
    """A results row of attention.py as read_csv returns it."""
    return {"method": method, "causal": causal, "mode": mode, "length": length, "median_ms": ms, "min_ms": ms,
            "peak_mb": 1.0, "status": "ok", "dtype": "float32", "batch": "4", "heads": "8", "head_dim": "64"}


def test_a_crossover_passes_over_gaps_and_says_when_the_pair_was_not_measured(attention):
    rows = [_timing("sdpa", length, ms) for length, ms in ((96, 1.0), (192, 2.0), (384, 8.0))]
    rows += [_timing("prob", 96, 0.5), _timing("prob", 384, 4.0)]  # no prob row at 192: a gap, not a loss
    lengths = [96, 192, 384]
    assert attention._crossover(rows, "prob", "sdpa", False, "train", lengths) == "L = 96"
    assert attention._crossover(rows, "logsparse", "sdpa_logmask", True, "train", lengths) == "not measured"
    shorter = [row for row in rows if not (row["method"] == "prob" and row["length"] == 384)]
    assert attention._crossover(shorter, "prob", "sdpa", False, "train", lengths) == "not measured"
    slower = [*rows[:3], _timing("prob", 96, 0.5), _timing("prob", 384, 9.0)]
    assert attention._crossover(slower, "prob", "sdpa", False, "train", lengths) == "never in the grid"


@pytest.mark.parametrize("prob_at_3072, verdict", [(5.0, "met"), (20.0, "MISSED")])
def test_probsparse_is_faster_from_1536_only_if_it_stays_faster_at_every_longer_length(attention, prob_at_3072,
                                                                                        verdict):
    rows = [_timing("sdpa", 1536, 4.0), _timing("sdpa", 3072, 16.0), _timing("prob", 1536, 2.0),
            _timing("prob", 3072, prob_at_3072)]
    target = next(line for line in attention._targets(rows, [1536, 3072]).splitlines()
                  if "faster than SDPA from L=1536 (non-causal)" in line)
    assert target.startswith("| ProbSparse faster") and target.endswith(f"| {verdict} |")


def _attention_row(method: str, length: int, status: str = "ok", others: float | str = 0.0, ms: float = 1.0,
                   **columns) -> dict:
    """A complete results row of attention.py (a GPU loan's: cuda, L = 2048 and 16384)."""
    return {"method": method, "causal": False, "mode": "train", "batch": 4, "heads": 8, "head_dim": 64,
            "length": length, "dtype": "float32", "status": status, "median_ms": ms if status == "ok" else "",
            "min_ms": ms if status == "ok" else "", "repeats": 3, "peak_mb": 1.0, "baseline_mb": 2.0,
            "others_cpu": others, "device": "cuda", "machine": "GPU", "threads": 16, "torch": "2", "commit": "0" * 12,
            "seed": 0, "command": "python benchmarks/attention.py", **columns}


def test_update_keeps_a_row_unless_the_new_one_is_less_disturbed_and_reads_the_files_lengths(attention, tmp_path,
                                                                                            monkeypatch):
    output = tmp_path / "attention_cuda.csv"
    attention.write_csv([_attention_row("sdpa", 2048, others=0.5, ms=1.0),
                         _attention_row("prob", 16384, others=0.6, ms=2.0),
                         _attention_row("prob", 2048, status="timeout after 900s")], output)
    again = {("sdpa", 2048): _attention_row("sdpa", 2048, others=0.7, ms=9.0),  # busier: the old row stays
             ("prob", 16384): _attention_row("prob", 16384, others=0.1, ms=3.0),  # steadier: replaces it
             ("prob", 2048): _attention_row("prob", 2048, others=0.9, ms=4.0)}  # the old one failed: replaces it
    cases = []

    def measure(args, todo, on_row):
        cases.extend(todo)
        for mode, length, causal, method in todo:
            on_row({**again[(method, length)], "length": length, "causal": causal})

    monkeypatch.setattr(attention, "measure", measure)
    attention.main(["--update", str(output), "--quiet-wait", "0"])
    assert sorted((method, length) for _, length, _, method in cases) == sorted(again)  # not LENGTHS: 2048, 16384
    times = {(row["method"], row["length"]): row["median_ms"] for row in attention.read_csv(output)}
    assert times == {("sdpa", 2048): 1.0, ("prob", 16384): 3.0, ("prob", 2048): 4.0}


def test_merge_upserts_a_loans_attention_rows_into_the_results_file(attention, tmp_path):
    """A loan's file holds only its rows: "copy them to results/" lost every earlier loan's."""
    results, loan = tmp_path / "attention_cuda.csv", tmp_path / "loan.csv"
    attention.write_csv([_attention_row("sdpa", 2048, ms=1.0), _attention_row("prob", 2048, ms=2.0)], results)
    attention.write_csv([_attention_row("prob", 2048, ms=3.0),  # measured again: replaces it
                         _attention_row("sdpa", 2048, status="timeout after 60s"),  # keeps the earlier figure
                         _attention_row("prob", 16384, ms=4.0)], loan)  # new: appended
    attention.main(["--merge", str(loan), "--output", str(results)])
    rows = attention.read_csv(results)
    assert [(row["method"], row["length"], row["status"], row["median_ms"]) for row in rows] == [
        ("sdpa", 2048, "ok", 1.0), ("prob", 2048, "ok", 3.0), ("prob", 16384, "ok", 4.0)]


def test_merge_upserts_a_loans_training_rows_by_kind_model_and_variant(bench, tmp_path):
    results, loan = tmp_path / "train_cuda.csv", tmp_path / "loan.csv"
    bench.write_rows([_train_row(bench, "train", "fp32", ms=20.0), _train_row(bench, "train", "bf16", ms=40.0)],
                     results, bench.COLUMNS)
    bench.write_rows([_train_row(bench, "train", "bf16", ms=10.0),
                      _train_row(bench, "train", "fp32", status="timeout after 60s"),
                      _train_row(bench, "train", "compile", ms=40.0)], loan, bench.COLUMNS)
    bench.main(["--merge", str(loan), "--output", str(results)])
    rows = bench.read_rows(results)
    assert [(row["variant"], row["median_ms"], row["speedup"]) for row in rows] == [
        ("fp32", 20.0, 1.0), ("bf16", 10.0, 2.0), ("compile", 40.0, 0.5)]


def test_merge_upserts_a_loans_roofline_rows(tmp_path):
    module = _roofline()
    results, loan = tmp_path / "roofline_cuda.csv", tmp_path / "loan.csv"

    def row(model, precision, step_ms):
        return {"model": model, "size": "d512", "precision": precision, "batch": 32, "pred_len": 24,
                "step_ms": step_ms, "allocator": "reuse"}

    module.write_rows([row("informer", "fp32", 13), row("informer", "bf16", 14)], results, module.COLUMNS)
    module.write_rows([row("informer", "bf16", 12), row("logsparse", "fp32", 58)], loan, module.COLUMNS)
    assert module.main(["--merge", str(loan), "--output", str(results)]) == 0
    assert [(r["model"], r["precision"], r["step_ms"]) for r in module.csv_rows(results)] == [
        ("informer", "fp32", "13"), ("informer", "bf16", "12"), ("logsparse", "fp32", "58")]
