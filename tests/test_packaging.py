"""What the package promises about itself: its sdist holds what its tests need, and its dependency ranges admit
the tested set."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent


def test_the_sdist_holds_the_suite_its_support_files_and_the_documents_its_readme_names(tmp_path):
    """Without a MANIFEST.in it held the test files but not conftest.py, the pinned numerics, the test scripts,
    constraints.txt, the Makefile or docs/."""
    # From a copy of the tracked files: setuptools also packs what an earlier build's *.egg-info lists.
    listed = subprocess.run(["git", "ls-files", "-z", "--", "pyproject.toml", "tests", "forecast"], cwd=ROOT,
                            capture_output=True)
    if listed.returncode != 0 or b"pyproject.toml" not in listed.stdout:
        pytest.skip("not this package's git checkout (an unpacked sdist): nothing to compare the sdist with")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    source = tmp_path / "source"
    for name in filter(None, listed.stdout.decode().split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    build = f"from setuptools import build_meta; build_meta.build_sdist({str(tmp_path)!r})"
    subprocess.run([sys.executable, "-c", build], cwd=source, check=True, capture_output=True)
    (sdist,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    needed = {"tests/conftest.py", "tests/data/pinned_numerics.json", "constraints.txt", "Makefile", "README.md",
              *(str(path.relative_to(ROOT)) for path in (ROOT / "tests" / "scripts").glob("*.py")),
              *(str(path.relative_to(ROOT)) for path in (ROOT / "docs").glob("*.md"))}
    assert needed <= names, sorted(needed - names)


def test_the_dependency_ranges_admit_the_tested_set():
    """constraints.txt pins what the suite runs on; pyproject's ranges must allow it (and raising a floor there
    is how a feature of a newer release is claimed)."""
    declared = [Requirement(text) for text in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
                ["dependencies"]]
    pinned = dict(line.split("==") for line in (ROOT / "constraints.txt").read_text().splitlines()
                  if "==" in line and not line.startswith("#"))
    pinned = {name.lower().replace("_", "-"): version for name, version in pinned.items()}
    for requirement in declared:
        version = pinned[requirement.name.lower().replace("_", "-")]
        assert requirement.specifier.contains(version, prereleases=True), (requirement, version)
