"""What the machine is, for results rows and benchmarks, and whether its CPU has bf16.

Two 2-core VMs of this project both call themselves "AMD EPYC", yet one multiplies fp32 matrices at
about 190 GFLOP/s and has AVX-512 with bf16, the other about 120 with AVX2 alone (benchmarks/README.md):
a row's training time means little without the family, model and vector extension beside it.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

import torch


def cpu_label(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name with its family, model and widest vector extension where the OS says them, e.g.
    ``AMD EPYC (family 25 model 1, AVX2)``; the processor or architecture name elsewhere."""
    model, details = platform.processor() or platform.machine(), []
    try:
        lines = cpuinfo.read_text().splitlines()
    except OSError:
        lines = []
    fields = {key.strip(): value.strip() for key, value in (line.split(":", 1) for line in lines if ":" in line)}
    model = fields.get("model name", model)
    if "cpu family" in fields and "model" in fields:
        details.append(f"family {fields['cpu family']} model {fields['model']}")
    flags = (fields.get("flags") or fields.get("Features", "")).split()  # x86, ARM
    vector = next((name for flag, name in (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("asimd", "NEON"))
                   if flag in flags), None)
    if vector:
        details.append(vector)
    return f"{model} ({', '.join(details)})" if details else model


def device_description(trainer: Any = None) -> str:
    """The results rows' ``device``: ``cuda:<GPU name>`` where a (Lightning) ``trainer`` trains on CUDA, or
    without one where CUDA is visible; else ``cpu:<cpu_label> x<cores> (<threads> thread(s))``: the torch threads
    the run computed with, as two runs side by side with one thread each take longer than one run with two."""
    if torch.cuda.is_available() and (trainer is None or trainer.accelerator.__class__.__name__
                                      .startswith("CUDA")):
        return f"cuda:{torch.cuda.get_device_name(0)}"
    threads = torch.get_num_threads()
    return f"cpu:{cpu_label()} x{os.cpu_count()} ({threads} thread{'s' if threads != 1 else ''})"


def cpu_has_bf16() -> bool:
    """Whether this CPU runs bf16 matrix products natively (oneDNN's own check: AVX-512 or AMX on x86); True
    where torch cannot say, so that no warning is made up."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return True
