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

def faults_of_a_fresh_block():
    block = torch.ones(2**24)  # 64 MiB: glibc maps any block over 32 MiB afresh
    del block
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = torch.ones(2**24)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

print(faults_of_a_fresh_block(), reuse_freed_memory(), faults_of_a_fresh_block())
"""


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")
def test_a_freed_block_is_reused_without_page_faults():
    result = subprocess.run([sys.executable, "-c", PAGE_FAULTS], capture_output=True, text=True, check=True)
    before, applied, after = result.stdout.split()
    pages = 2**26 // 4096
    assert int(before) >= pages // 2  # glibc's default: every page of the new block faults
    assert applied == "True"
    assert int(after) < pages // 100


def test_the_console_command_sets_the_allocator_before_running(monkeypatch):
    calls = []
    monkeypatch.setattr("forecast.allocator.reuse_freed_memory", lambda: calls.append("allocator") or True)
    monkeypatch.setattr(cli, "main", lambda: calls.append("main") or 0)
    assert cli.console() == 0
    assert calls == ["allocator", "main"]
