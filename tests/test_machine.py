"""Machine facts for results rows and benchmarks (forecast/machine.py)."""

from __future__ import annotations

import os
import platform
from types import SimpleNamespace

import torch

from forecast import machine
from forecast.machine import cpu_has_bf16, cpu_label, device_description

_CPUINFO = ("vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: {model}\nmodel name\t: AMD EPYC\n"
            "flags\t\t: {flags}\n")


def test_the_cpu_label_names_the_family_model_and_vector_extension(tmp_path):
    """Two hosts that both call themselves "AMD EPYC" ran one GEMM 1.6x apart: their labels must differ."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(_CPUINFO.format(model=1, flags="fpu sse2 avx2 fma") * 2)  # one block per core
    assert cpu_label(cpuinfo) == "AMD EPYC (family 25 model 1, AVX2)"
    cpuinfo.write_text(_CPUINFO.format(model=17, flags="fpu avx2 avx512f avx512bw"))
    assert cpu_label(cpuinfo) == "AMD EPYC (family 25 model 17, AVX-512)"
    cpuinfo.write_text("processor\t: 0\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\n")  # ARM: no model name
    assert cpu_label(cpuinfo) == f"{platform.processor() or platform.machine()} (NEON)"
    assert cpu_label(tmp_path / "absent") == (platform.processor() or platform.machine())  # no /proc (macOS)


def test_results_rows_name_the_cpu_its_cores_and_threads_or_the_gpu_a_trainer_uses(monkeypatch):
    monkeypatch.setattr(machine, "cpu_label", lambda: "AMD EPYC (family 25 model 1, AVX2)")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    threads = torch.get_num_threads()
    try:
        for count, named in ((1, "1 thread"), (3, "3 threads")):
            torch.set_num_threads(count)
            assert device_description() == f"cpu:AMD EPYC (family 25 model 1, AVX2) x{os.cpu_count()} ({named})"
    finally:
        torch.set_num_threads(threads)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: "NVIDIA H200")

    class CUDAAccelerator:
        pass

    class CPUAccelerator:
        pass

    assert device_description(SimpleNamespace(accelerator=CUDAAccelerator())) == "cuda:NVIDIA H200"
    assert device_description(SimpleNamespace(accelerator=CPUAccelerator())).startswith("cpu:AMD EPYC")
    assert device_description() == "cuda:NVIDIA H200"


def test_cpu_has_bf16_is_onednns_answer_and_true_where_torch_cannot_say(monkeypatch):
    assert cpu_has_bf16() is bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())

    def unavailable():
        raise RuntimeError("no such operator")

    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", unavailable)
    assert cpu_has_bf16() is True
