"""Benchmark registry: entries, resolution order, verified atomic downloads (against a
loopback HTTP server), clear errors when a file cannot be had, the copies shipped inside
the package (ETTh1, ETTh2: offline, no mirror), and the real mirror."""

from __future__ import annotations

import collections
import dataclasses
import fnmatch
import gzip
import hashlib
import lzma
import os
import shutil
import subprocess
import sys
import threading
import tomllib
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecast import datasets
from forecast.datasets import DATA_DIR_ENV, DatasetInfo
from forecast.errors import ChecksumError, ConfigError, DatasetUnavailableError

EXPECTED_NAMES = {
    "ETTh1", "ETTh2", "ETTm1", "ETTm2", "weather", "exchange_rate", "national_illness", "electricity", "traffic",
}
EMBEDDED_NAMES = {"ETTh1", "ETTh2"}  # CC BY-ND 4.0 allows verbatim copies; the others state no licence or are large
EMBEDDED_NOTICES = {"README.md", "LICENSE-ETDataset"}
ROOT = Path(__file__).resolve().parent.parent
TOY_CSV = "date,a,OT\n" + "".join(f"2021-01-01 {h:02d}:00:00,{h},{2 * h}\n" for h in range(24))
TOY_BYTES = TOY_CSV.encode()


def toy_info(url: str | None = None, **changes) -> DatasetInfo:
    info = DatasetInfo(
        name="toy", file_name="toy.csv", url=url, freq="h", target="OT", split="ratio",
        licence="test data", source="this test", citation="none",
        sha256=hashlib.sha256(TOY_BYTES).hexdigest(), n_rows=24, n_cols=3, n_bytes=len(TOY_BYTES),
    )
    return dataclasses.replace(info, **changes)


class LoopbackServer:
    """Serves fixed bodies; a route may announce more bytes than it sends (a cut connection)."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[bytes, int]] = {}
        self.hits: collections.Counter[str] = collections.Counter()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server hook name
                server.hits[self.path] += 1
                if self.path not in server.routes:
                    self.send_error(404)
                    return
                body, announced = server.routes[self.path]
                self.send_response(200)
                self.send_header("Content-Length", str(announced))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def serve(self, path: str, body: bytes, announced: int | None = None) -> str:
        self.routes[path] = (body, len(body) if announced is None else announced)
        return self.url(path)


@pytest.fixture
def server():
    loopback = LoopbackServer()
    loopback.thread.start()
    yield loopback
    loopback.httpd.shutdown()
    loopback.httpd.server_close()


@pytest.fixture
def no_mirror(monkeypatch):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)


@pytest.fixture
def offline(monkeypatch, no_mirror):
    """No mirror and no network: any attempt to download fails the test loudly."""
    attempts: list[str] = []

    def refuse(url, *args, **kwargs):
        attempts.append(str(getattr(url, "full_url", url)))
        raise AssertionError(f"network access attempted: {url}")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    return attempts


# -------------------------------------------------------------------- registry


def test_every_benchmark_is_registered_with_complete_facts():
    assert set(datasets.names()) == EXPECTED_NAMES
    for info in datasets.REGISTRY.values():
        assert info.file_name == f"{info.name}.csv"
        assert info.url and info.url.startswith("https://")
        assert info.sha256 or info.git_blob
        assert info.target == "OT" and info.licence and info.source and info.citation
        assert info.split == {"ETTh1": "ett_hour", "ETTh2": "ett_hour", "ETTm1": "ett_minute", "ETTm2": "ett_minute"}.get(
            info.name, "ratio"
        )
        pd.tseries.frequencies.to_offset(info.freq)
        assert info.n_rows and info.n_cols
        assert (info.embedded is not None) == (info.name in EMBEDDED_NAMES)


def test_lookup_ignores_case_and_knows_aliases():
    assert datasets.get("etth1").name == "ETTh1"
    assert datasets.get("ECL").name == "electricity"
    assert datasets.get("ili").name == "national_illness"
    assert datasets.get(datasets.get("weather")) is datasets.get("weather")
    assert datasets.find("nothing") is None
    with pytest.raises(ConfigError, match="unknown dataset 'nothing'.*ETTh1"):
        datasets.get("nothing")


@pytest.mark.parametrize(
    "changes",
    [{"sha256": "ABC"}, {"sha256": None, "git_blob": None}, {"git_blob": "x" * 40}, {"split": "weekly"},
     {"embedded": "sub/toy.csv.xz"}],
)
def test_bad_registry_entries_are_rejected(changes):
    with pytest.raises(ConfigError):
        toy_info(**changes)


def test_git_blob_verification_matches_git_hash_object(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    path = tmp_path / "toy.csv"
    path.write_bytes(TOY_BYTES)
    blob = subprocess.run(["git", "hash-object", str(path)], capture_output=True, text=True, check=True).stdout.strip()
    datasets.verify_file(path, toy_info(sha256=None, git_blob=blob, n_bytes=None))
    with pytest.raises(ChecksumError, match="git blob id"):
        datasets.verify_file(path, toy_info(sha256=None, git_blob="0" * 40, n_bytes=None))


@pytest.mark.parametrize(("suffix", "compress"), [(".xz", lzma.compress), (".gz", gzip.compress)])
def test_compressed_files_are_verified_on_their_decompressed_bytes(suffix, compress, tmp_path):
    path = tmp_path / f"toy.csv{suffix}"
    path.write_bytes(compress(TOY_BYTES))
    assert path.stat().st_size != len(TOY_BYTES)
    datasets.verify_file(path, toy_info())
    datasets.verify_file(path, toy_info(sha256=None, n_bytes=None, git_blob=hashlib.sha1(
        b"blob %d\0" % len(TOY_BYTES) + TOY_BYTES, usedforsecurity=False).hexdigest()))
    path.write_bytes(compress(TOY_BYTES.replace(b",1,", b",9,")))
    with pytest.raises(ChecksumError, match=rf"toy.csv\{suffix}: .*decompresses to sha256"):
        datasets.verify_file(path, toy_info())
    path.write_bytes(compress(TOY_BYTES)[:-8])
    with pytest.raises(ChecksumError, match="cannot be decompressed"):
        datasets.verify_file(path, toy_info())


def test_default_cache_dir_is_the_checkout_or_the_user_cache(monkeypatch, tmp_path):
    checkout = Path(datasets.__file__).resolve().parent.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "datasets").is_dir():
        assert datasets.default_cache_dir() == checkout / "datasets"
    monkeypatch.setattr(datasets, "__file__", str(tmp_path / "site" / "forecast" / "datasets.py"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert datasets.default_cache_dir() == tmp_path / "xdg" / "forecast" / "datasets"


# ----------------------------------------------------------- resolution order


def test_resolution_order_explicit_mirror_cache_download(server, monkeypatch, tmp_path):
    info = toy_info(server.serve("/toy.csv", TOY_BYTES))
    explicit, mirror, cache = (tmp_path / d for d in ("explicit", "mirror", "cache"))
    for directory in (explicit, mirror, cache):
        directory.mkdir()
    (explicit / "toy.csv").write_bytes(TOY_BYTES)
    (mirror / "toy.csv").write_bytes(TOY_BYTES.replace(b",1,", b",9,"))  # same size, wrong bytes
    (cache / "toy.csv").write_bytes(b"broken")
    monkeypatch.setenv(DATA_DIR_ENV, str(mirror))

    # 1. an explicit path (file or directory) wins; nothing else is looked at
    for path in (explicit / "toy.csv", explicit):
        assert datasets.locate(info, path, cache_dir=cache) == explicit / "toy.csv"
    # 2. then the mirror, which is verified
    with pytest.raises(ChecksumError, match=r"mirror/toy.csv.*sha256.*verify=False"):
        datasets.locate(info, cache_dir=cache)
    assert datasets.locate(info, cache_dir=cache, verify=False) == mirror / "toy.csv"
    # 3. then the cache
    monkeypatch.delenv(DATA_DIR_ENV)
    with pytest.raises(ChecksumError, match="bytes"):
        datasets.locate(info, cache_dir=cache)
    (cache / "toy.csv").unlink()
    # 4. then a download, into the cache, once
    frame = datasets.load(info, cache_dir=cache)
    assert server.hits["/toy.csv"] == 1 and (cache / "toy.csv").read_bytes() == TOY_BYTES
    datasets.load(info, cache_dir=cache)
    assert server.hits["/toy.csv"] == 1
    assert pd.api.types.is_datetime64_any_dtype(frame["date"]) and frame.attrs[datasets.DATASET_ATTR] == "toy"
    assert list(frame.columns) == ["date", "a", "OT"] and len(frame) == 24


def test_missing_explicit_path_says_so(tmp_path):
    with pytest.raises(DatasetUnavailableError, match="no such file"):
        datasets.locate(toy_info(), tmp_path / "nope.csv")


# ------------------------------------------------------------------ downloads


def assert_left_nothing(directory: Path) -> None:
    assert not directory.exists() or list(directory.iterdir()) == []


def test_good_download_is_verified_and_renamed_into_place(server, tmp_path):
    info = toy_info(server.serve("/good.csv", TOY_BYTES))
    target = datasets.download(info, tmp_path / "cache")
    assert target == tmp_path / "cache" / "toy.csv" and target.read_bytes() == TOY_BYTES
    assert [p.name for p in target.parent.iterdir()] == ["toy.csv"]  # no .part left
    umask = os.umask(0o022)  # a shared cache: the umask's permissions, not tempfile's owner-only 0600
    try:
        target.unlink()
        assert datasets.download(info, tmp_path / "cache").stat().st_mode & 0o777 == 0o644
    finally:
        os.umask(umask)


def test_corrupted_download_raises_and_leaves_no_file(server, tmp_path):
    corrupted = TOY_BYTES.replace(b",3,", b",8,")
    info = toy_info(server.serve("/corrupted.csv", corrupted))
    with pytest.raises(ChecksumError, match="does not match the registry: the file has sha256.*nothing was written"):
        datasets.download(info, tmp_path / "cache")
    assert_left_nothing(tmp_path / "cache")


def test_cut_connection_raises_and_leaves_no_file(server, tmp_path):
    info = toy_info(server.serve("/cut.csv", TOY_BYTES[:100], announced=len(TOY_BYTES)))
    with pytest.raises(ChecksumError, match="truncated"):
        datasets.download(info, tmp_path / "cache")
    assert_left_nothing(tmp_path / "cache")


def test_truncated_file_raises_and_leaves_no_file(server, tmp_path):
    for changes in ({}, {"n_bytes": None}):  # caught by size, and by hash alone
        info = toy_info(server.serve("/short.csv", TOY_BYTES[:-20]), **changes)
        with pytest.raises(ChecksumError, match="nothing was written"):
            datasets.load(info, cache_dir=tmp_path / "cache")
        assert_left_nothing(tmp_path / "cache")


def test_unreachable_url_says_where_to_get_and_put_the_file(server, tmp_path, no_mirror):
    info = toy_info(server.url("/missing.csv"))
    with pytest.raises(DatasetUnavailableError) as caught:
        datasets.load(info, cache_dir=tmp_path / "cache")
    message = str(caught.value)
    assert "404" in message and server.url("/missing.csv") in message
    assert DATA_DIR_ENV in message and str(tmp_path / "cache") in message and "path=" in message
    assert_left_nothing(tmp_path / "cache")


@pytest.mark.parametrize("name", ["electricity", "traffic"])
def test_large_benchmarks_without_a_local_copy_explain_how_to_get_them(name, tmp_path, no_mirror):
    with pytest.raises(DatasetUnavailableError) as caught:
        datasets.load(name, cache_dir=tmp_path, download=False)
    message = str(caught.value)
    for text in (f"{name}.csv", "Time-Series-Library", DATA_DIR_ENV, str(tmp_path), "path="):
        assert text in message
    assert isinstance(caught.value, FileNotFoundError)


def test_large_benchmark_downloads_when_its_url_is_reachable(server, tmp_path, no_mirror):
    blob = hashlib.sha1(b"blob %d\0" % len(TOY_BYTES) + TOY_BYTES, usedforsecurity=False).hexdigest()
    info = dataclasses.replace(datasets.get("electricity"), url=server.serve("/ecl.csv", TOY_BYTES), git_blob=blob)
    frame = datasets.load(info, cache_dir=tmp_path)
    assert (tmp_path / "electricity.csv").is_file() and len(frame) == 24


def test_importing_the_registry_first_works():
    code = "import forecast.datasets as d; import forecast.data; print(d.get('ETTh1').split)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "ett_hour"


# ------------------------------------------------------ copies in the package


def embedded_infos() -> list[DatasetInfo]:
    return [info for info in datasets.REGISTRY.values() if info.embedded]


def plain_bytes(name: str) -> bytes:
    """The registered CSV, from the package's own copy."""
    return lzma.decompress(datasets.embedded_path(name).read_bytes())


@pytest.mark.parametrize("name", sorted(EMBEDDED_NAMES))
def test_embedded_copies_decompress_to_exactly_the_registered_files(name):
    info = datasets.get(name)
    path = datasets.embedded_path(name)
    assert path == datasets.EMBEDDED_DIR / f"{name}.csv.xz" and path.is_file()
    content = plain_bytes(name)  # decompressed independently of the module's reader
    assert len(content) == info.n_bytes and hashlib.sha256(content).hexdigest() == info.sha256
    assert path.stat().st_size < info.n_bytes // 4  # stored compressed
    datasets.verify_file(path, info)
    assert datasets.find_by_file(path) is info


def test_embedded_folder_holds_registered_files_and_their_licence_only():
    shipped = {path.name for path in datasets.EMBEDDED_DIR.iterdir()}
    registered = {info.embedded for info in embedded_infos()}
    assert {info.name for info in embedded_infos()} == EMBEDDED_NAMES
    assert shipped == registered | EMBEDDED_NOTICES
    notice = (datasets.EMBEDDED_DIR / "README.md").read_text()
    for text in ("zhouhaoyi/ETDataset", "1d16c8f4f943005d613b5bc962e9eeb06058cf07", "Informer", "AAAI 2021",
                 "unmodified", "CC BY-ND 4.0", "https://creativecommons.org/licenses/by-nd/4.0/", *registered):
        assert text in notice
    licence = (datasets.EMBEDDED_DIR / "LICENSE-ETDataset").read_text()
    assert licence.startswith("Creative Commons Attribution-NoDerivatives 4.0 International")


def test_the_wheel_ships_every_embedded_file():
    """What setuptools puts in the wheel: forecast's package-data patterns must cover the folder."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["forecast"]
    package = Path(datasets.__file__).resolve().parent
    for path in datasets.EMBEDDED_DIR.iterdir():
        relative = path.relative_to(package).as_posix()
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), relative


def test_etth1_loads_offline_from_the_package_and_caches_nothing(offline, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    assert datasets.locate("ETTh1", cache_dir=cache) == datasets.embedded_path("ETTh1")
    frame = datasets.load("ETTh1", cache_dir=cache)
    info = datasets.get("ETTh1")
    assert frame.shape == (info.n_rows, info.n_cols)
    assert list(frame.columns) == ["date", "HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL", "OT"]
    assert frame["date"].iloc[0] == pd.Timestamp("2016-07-01 00:00:00")
    assert frame["date"].iloc[-1] == pd.Timestamp("2018-06-26 19:00:00")
    assert frame.attrs[datasets.DATASET_ATTR] == "ETTh1"
    reference = pd.read_csv(datasets.embedded_path("ETTh1"))  # every value, not only the shape
    np.testing.assert_array_equal(frame.drop(columns="date").to_numpy(), reference.drop(columns="date").to_numpy())
    assert list(cache.iterdir()) == [] and offline == []


def test_a_local_copy_wins_over_the_embedded_one(offline, monkeypatch, tmp_path):
    mirror, cache = tmp_path / "mirror", tmp_path / "cache"
    for directory in (mirror, cache):
        directory.mkdir()
        (directory / "ETTh2.csv").write_bytes(plain_bytes("ETTh2"))
    monkeypatch.setenv(DATA_DIR_ENV, str(mirror))
    assert datasets.locate("ETTh2", cache_dir=cache) == mirror / "ETTh2.csv"
    monkeypatch.delenv(DATA_DIR_ENV)
    assert datasets.locate("ETTh2", cache_dir=cache) == cache / "ETTh2.csv"
    # a broken local copy is an error to fix, not silently replaced by the shipped one
    (cache / "ETTh2.csv").write_bytes(b"broken")
    with pytest.raises(ChecksumError, match=r"cache/ETTh2\.csv.*bytes"):
        datasets.locate("ETTh2", cache_dir=cache)
    (cache / "ETTh2.csv").unlink()
    assert datasets.locate("ETTh2", cache_dir=cache) == datasets.embedded_path("ETTh2")
    assert offline == []


def damaged_copy(damage: str) -> bytes:
    """ETTh1.csv.xz broken one way; recompressed at the fastest preset (only the content matters)."""
    if damage == "not xz":
        return b"date,OT\n2016-07-01 00:00:00,1\n"
    if damage == "truncated":
        original = datasets.embedded_path("ETTh1").read_bytes()
        return original[: len(original) // 2]
    content = plain_bytes("ETTh1")
    if damage == "edited":  # one digit of the first value: same size, other bytes
        content = content.replace(b"2016-07-01 00:00:00,5.827", b"2016-07-01 00:00:00,5.828", 1)
    return lzma.compress(content if damage == "edited" else content[:-100], preset=0)


@pytest.mark.parametrize(("damage", "problem"), [
    ("not xz", "cannot be decompressed"),
    ("truncated", "cannot be decompressed"),
    ("edited", "decompresses to sha256"),
    ("shortened", "decompresses to 2589557 bytes"),
])
def test_a_damaged_embedded_copy_raises_naming_the_file(damage, problem, offline, monkeypatch, tmp_path):
    content = damaged_copy(damage)
    assert content != datasets.embedded_path("ETTh1").read_bytes()
    (tmp_path / "embedded").mkdir()
    (tmp_path / "embedded" / "ETTh1.csv.xz").write_bytes(content)
    monkeypatch.setattr(datasets, "EMBEDDED_DIR", tmp_path / "embedded")
    with pytest.raises(ChecksumError) as caught:
        datasets.load("ETTh1", cache_dir=tmp_path / "cache")
    message = str(caught.value)
    for text in (str(tmp_path / "embedded" / "ETTh1.csv.xz"), problem, "reinstall", DATA_DIR_ENV):
        assert text in message
    assert offline == [] and not (tmp_path / "cache").exists()


def test_a_missing_embedded_copy_falls_back_to_the_download(server, no_mirror, monkeypatch, tmp_path):
    """A build without the data files still works where the network does."""
    info = dataclasses.replace(datasets.get("ETTh1"), url=server.serve("/ETTh1.csv", plain_bytes("ETTh1")))
    monkeypatch.setattr(datasets, "EMBEDDED_DIR", tmp_path / "absent")
    assert datasets.locate(info, cache_dir=tmp_path / "cache") == tmp_path / "cache" / "ETTh1.csv"
    assert server.hits["/ETTh1.csv"] == 1


def test_the_data_module_knows_the_embedded_file_as_etth1(offline):
    """Given the shipped file's path (as by name, tests/test_api.py), ETTh1 gets its ETT protocol."""
    from forecast.data import WindowDataModule

    dm = WindowDataModule(datasets.embedded_path("ETTh1"), 96, 48, 24)
    assert dm.split_protocol == "ett_hour" and dm.split_sizes == {"train": 8521, "val": 2857, "test": 2857}
    assert dm.dataset_info is datasets.get("ETTh1")


def test_make_run_works_offline_on_the_embedded_etth1(offline, tmp_path, monkeypatch, capsys):
    """`make run` (forecast demo, ETTh1) with no mirror and no network. Training and validation
    are capped so it takes about a minute on two CPU cores; the test report is whole."""
    from forecast.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--data", "ETTh1", "--train-batches", "2", "--val-batches", "2"]) == 0
    out = capsys.readouterr().out
    assert "split ett_hour" in out and "unused rows: 14400-17419" in out
    table = out.strip().splitlines()[-5:]
    assert table[0].split() == ["model", "mse", "mae", "mse_orig", "mae_orig", "test_windows", "seconds"]
    rows = {line.split()[0]: line.split()[1:] for line in table[1:]}
    assert list(rows) == ["naive", "seasonal_naive", "dlinear", "informer"]
    assert {row[4] for row in rows.values()} == {"2857"}  # every test window of the ETT protocol
    assert all(np.isfinite(float(value)) for row in rows.values() for value in row[:4])
    # the naive forecast needs no training: its score is the published protocol's (README, ETTh1 96/24)
    assert rows["naive"][:2] == ["1.2220", "0.6706"]
    assert offline == []


# ---------------------------------------------------------------- the mirror

MIRROR = os.environ.get(DATA_DIR_ENV)
needs_mirror = pytest.mark.skipif(
    not MIRROR, reason=f"{DATA_DIR_ENV} is unset: the benchmark CSVs are not available (CI sets it)"
)


@pytest.mark.parametrize("name", [
    *sorted(EMBEDDED_NAMES),  # shipped in the package: never skipped
    *(pytest.param(name, marks=needs_mirror)
      for name in ("ETTm1", "ETTm2", "weather", "exchange_rate", "national_illness")),
])
def test_mirrored_or_embedded_benchmarks_verify_and_load(name, tmp_path):
    info = datasets.get(name)
    frame = datasets.load(name, cache_dir=tmp_path, download=False)
    assert frame.shape == (info.n_rows, info.n_cols)
    assert frame.columns[0] == "date" and frame.columns[-1] == "OT"
    assert pd.api.types.is_datetime64_any_dtype(frame["date"])
    assert frame.attrs[datasets.DATASET_ATTR] == name
    assert list(tmp_path.iterdir()) == []  # found in the mirror or the package, nothing cached


@needs_mirror
def test_exchange_rate_dates_in_slash_format_are_parsed():
    frame = datasets.load("exchange_rate", download=False)
    assert frame["date"].iloc[0] == pd.Timestamp("1990-01-01")
    assert frame["date"].iloc[-1] == pd.Timestamp("2010-10-10")
