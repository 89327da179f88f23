"""forecast.allocator: freed memory kept for reuse, so a fresh large tensor costs no page faults."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from forecast import cli

# In a process of its own: the test process's allocator stays as it is.
PAGE_FAULTS = """
import resource, torch
from forecast.allocator import reuse_freed_memory

def faults_of_each_allocation(rounds):
    faults = []
    for _ in range(rounds):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        block = torch.ones(2**24)  # 64 MiB: glibc maps any block over 32 MiB afresh
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        del block
    return faults

print(*faults_of_each_allocation(3), reuse_freed_memory(), *faults_of_each_allocation(16))
"""


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")
def test_a_freed_block_is_reused_without_page_faults():
    result = subprocess.run([sys.executable, "-c", PAGE_FAULTS], capture_output=True, text=True, check=True)
    *default, applied = result.stdout.split()[:4]
    reused = [int(faults) for faults in result.stdout.split()[4:]]
    pages = 2**26 // 4096
    assert all(int(faults) >= pages // 2 for faults in default)  # glibc's default: every page faults, every time
    assert applied == "True"
    # The heap grows until a freed block fits the next aligned request (glibc's memalign needs a little more
    # than the block), then serves it from memory already faulted in: within nine rounds here.
    assert len(reused) == 16 and max(reused[-4:]) < pages // 100


def test_the_console_command_sets_the_allocator_before_running(monkeypatch):
    calls = []
    monkeypatch.setattr("forecast.allocator.reuse_freed_memory", lambda: calls.append("allocator") or True)
    monkeypatch.setattr(cli, "main", lambda: calls.append("main") or 0)
    assert cli.console() == 0
    assert calls == ["allocator", "main"]
