"""Registry of the benchmark datasets of the long-sequence forecasting literature.

``load(name)`` finds a dataset's CSV in this order and returns it as a DataFrame with a
parsed ``date`` column:

1. an explicit ``path`` (the file, or a directory holding it);
2. the local mirror directory named by the environment variable ``FORECAST_DATA_DIR``;
3. the download cache: ``cache_dir`` if given, else ``datasets/`` of a source checkout,
   else ``$XDG_CACHE_HOME/forecast/datasets`` (``~/.cache/forecast/datasets``);
4. the copy shipped inside the package (``forecast/embedded/``), for the datasets whose
   licence allows redistribution and that are small (ETTh1, ETTh2), so that the demo
   and their tests run offline; a local copy above still wins;
5. a download from the registered URL into that cache.

Files are verified against the registered sha256 (or, where only that is known, the git
blob id); a compressed copy (``.xz``, ``.gz``) is verified on its decompressed bytes, the
registered CSV. Downloads go to a temporary ``.part`` file beside the target, are
verified, and only then renamed into place, so a broken or partial download never lands
in the cache. ``datasets/README.md`` is the human catalogue of the same facts.
"""

from __future__ import annotations

import gzip
import functools
import hashlib
import http.client
import logging
import lzma
import os
import re
import shutil
import urllib.error
import urllib.request
import uuid
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import BinaryIO, Literal

import pandas as pd

from forecast.data.io import Origin, parse_dates, read_csv
from forecast.errors import ChecksumError, ConfigError, DatasetUnavailableError, MissingDateColumnError

logger = logging.getLogger(__name__)

DATA_DIR_ENV = "FORECAST_DATA_DIR"
DATASET_ATTR = "forecast.dataset"  # DataFrame.attrs key naming the registered dataset
SplitProtocol = Literal["ett_hour", "ett_minute", "ratio"]
_SPLIT_PROTOCOLS = ("ett_hour", "ett_minute", "ratio")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX40 = re.compile(r"[0-9a-f]{40}")
_CHUNK = 1 << 20
# The package's own copies of redistributable datasets (see its README.md for the licences).
EMBEDDED_DIR = Path(__file__).resolve().parent / "embedded"
# Compressed copies are read through these, so that checks see the registered CSV bytes.
_DECOMPRESSORS: Mapping[str, Callable[..., BinaryIO]] = MappingProxyType({".xz": lzma.open, ".gz": gzip.open})
_DECOMPRESSION_ERRORS = (lzma.LZMAError, gzip.BadGzipFile, zlib.error, EOFError)


@dataclass(frozen=True)
class DatasetInfo:
    """One registered dataset: where its file comes from, how to check it, how to split it.

    ``n_rows`` counts data rows (header excluded); ``n_cols`` includes the date column.
    ``sha256`` verifies the file; where it is unknown, ``git_blob`` (the id
    ``git hash-object`` gives) does. ``has_duplicate_timestamps``/``has_gaps`` record
    quirks of the published file that the data module accepts for this dataset.
    ``embedded`` names the compressed copy in ``EMBEDDED_DIR`` that the package ships,
    for datasets whose licence allows it; the checksums are those of the CSV inside.
    """

    name: str
    file_name: str
    url: str | None
    freq: str
    target: str
    split: SplitProtocol
    licence: str
    source: str
    citation: str
    sha256: str | None = None
    git_blob: str | None = None
    n_rows: int | None = None
    n_cols: int | None = None
    n_bytes: int | None = None
    has_duplicate_timestamps: bool = False
    has_gaps: bool = False
    aliases: tuple[str, ...] = ()
    obtain: str = ""
    embedded: str | None = None

    def __post_init__(self) -> None:
        if self.sha256 is None and self.git_blob is None:
            raise ConfigError(f"dataset {self.name!r}: Fix: register a sha256 or a git blob id.")
        if self.sha256 is not None and not _HEX64.fullmatch(self.sha256):
            raise ConfigError(f"dataset {self.name!r}: sha256 must be 64 lowercase hex digits.")
        if self.git_blob is not None and not _HEX40.fullmatch(self.git_blob):
            raise ConfigError(f"dataset {self.name!r}: git_blob must be 40 lowercase hex digits.")
        if self.split not in _SPLIT_PROTOCOLS:
            raise ConfigError(f"dataset {self.name!r}: split must be one of {_SPLIT_PROTOCOLS}.")
        if self.embedded is not None and Path(self.embedded).name != self.embedded:
            raise ConfigError(f"dataset {self.name!r}: embedded must be a file name in {EMBEDDED_DIR}, not a path.")

    def where_to_get(self) -> str:
        """Human instructions: where the file comes from."""
        parts = [f"URL: {self.url}"] if self.url else []
        if self.obtain:
            parts.append(self.obtain)
        return " ".join(parts) if parts else self.source


_ETT_SOURCE = "zhouhaoyi/ETDataset (ETT-small), Zhou et al., Informer, AAAI 2021"
_ETT_CITATION = (
    "Zhou et al., Informer: Beyond Efficient Transformer for Long Sequence Time-Series "
    "Forecasting, AAAI 2021"
)
_ETT_URL = "https://raw.githubusercontent.com/zhouhaoyi/ETDataset/1d16c8f4f943005d613b5bc962e9eeb06058cf07/ETT-small/{}"
_AUTOFORMER_CITATION = (
    "Wu et al., Autoformer: Decomposition Transformers with Auto-Correlation for Long-Term "
    "Series Forecasting, NeurIPS 2021"
)
_TSLIB_OBTAIN = (
    "The Time-Series-Library dataset folder (thuml/Time-Series-Library README: Google Drive, "
    "Baidu or Hugging Face 'thuml/Time-Series-Library') has the CSV with a date column; "
    "laiguokun/multivariate-time-series-data has the raw, headerless LSTNet version."
)
_NEMOTS = "https://raw.githubusercontent.com/Xieyyyy/NEMoTS/0f58be8b0f77af83112592831b93efa728d0e929/dataset/{}"
_SSCF = (
    "https://raw.githubusercontent.com/junwoopark92/Self-Supervised-Contrastive-Forecsating/"
    "f394705adbf5217811276f5e59576c6e7ea7586c/dataset/{}"
)


def _ett(
    name: str, sha256: str, n_rows: int, n_bytes: int, split: SplitProtocol, freq: str, *, embedded: bool = False
) -> DatasetInfo:
    return DatasetInfo(
        name=name, file_name=f"{name}.csv", url=_ETT_URL.format(f"{name}.csv"), freq=freq,
        target="OT", split=split, licence="CC BY-ND 4.0", source=_ETT_SOURCE,
        citation=_ETT_CITATION, sha256=sha256, n_rows=n_rows, n_cols=8, n_bytes=n_bytes,
        embedded=f"{name}.csv.xz" if embedded else None,
    )


# ETTh1 and ETTh2 ship with the package (CC BY-ND 4.0 allows verbatim copies; about 0.3 MB
# each as .xz). ETTm1/ETTm2 are four times larger; the other datasets state no licence.
_ENTRIES = (
    _ett("ETTh1", "f18de3ad269cef59bb07b5438d79bb3042d3be49bdeecf01c1cd6d29695ee066", 17420, 2589657, "ett_hour", "h",
         embedded=True),
    _ett("ETTh2", "a3dc2c597b9218c7ce1cd55eb77b283fd459a1d09d753063f944967dd6b9218b", 17420, 2417960, "ett_hour", "h",
         embedded=True),
    _ett("ETTm1", "6ce1759b1a18e3328421d5d75fadcb316c449fcd7cec32820c8dafda71986c9e", 69680, 10360719, "ett_minute", "15min"),
    _ett("ETTm2", "db973ca252c6410a30d0469b13d696cf919648d0f3fd588c60f03fdbdbadd1fd", 69680, 9677236, "ett_minute", "15min"),
    DatasetInfo(
        name="weather", file_name="weather.csv", url=_NEMOTS.format("weather/weather.csv"),
        freq="10min", target="OT", split="ratio",
        licence="none stated by the data provider",
        source="Max Planck Institute for Biogeochemistry weather station (Jena), 2020, as prepared by the Autoformer authors",
        citation=_AUTOFORMER_CITATION,
        sha256="9b2b19b13e342d9c9b9c51620d42b4be232df7fba30e7f5c4968b7c79ab138ad",
        n_rows=52696, n_cols=22, n_bytes=7182728,
        has_duplicate_timestamps=True, has_gaps=True,
        obtain="The same file (LF line endings) is in the Time-Series-Library dataset folder (CRLF there).",
    ),
    DatasetInfo(
        name="exchange_rate", file_name="exchange_rate.csv",
        url=_SSCF.format("exchange_rate/exchange_rate.csv"), freq="D", target="OT", split="ratio",
        licence="none stated",
        source="laiguokun/multivariate-time-series-data (Lai et al., LSTNet); dated CSV by the Autoformer authors",
        citation="Lai et al., Modeling Long- and Short-Term Temporal Patterns with Deep Neural Networks, SIGIR 2018",
        sha256="d55e7aa2641009814a18ba3279431b13f6d413b0eab195b9ff21988d8cf94e97",
        n_rows=7588, n_cols=9, n_bytes=630212, aliases=("exchange",),
    ),
    DatasetInfo(
        name="national_illness", file_name="national_illness.csv",
        url=_SSCF.format("illness/national_illness.csv"), freq="W-TUE", target="OT", split="ratio",
        licence="none stated (US CDC FluView/ILINet data)",
        source="US CDC ILINet weekly influenza-like-illness figures, as prepared by the Autoformer authors",
        citation=_AUTOFORMER_CITATION,
        sha256="8594cecb98c6f2f9dc014eca11c4d5d1e38ad5ce6ed0592d4abe65b146fce395",
        n_rows=966, n_cols=8, n_bytes=66653, aliases=("illness", "ili"),
    ),
    DatasetInfo(
        name="electricity", file_name="electricity.csv", url=_NEMOTS.format("electricity/electricity.csv"),
        freq="h", target="OT", split="ratio",
        licence="none stated for the CSV (raw data: UCI ElectricityLoadDiagrams20112014)",
        source="UCI ElectricityLoadDiagrams20112014 via LSTNet; dated CSV by the Autoformer authors",
        citation=_AUTOFORMER_CITATION,
        git_blob="45c680ea6a68c7f37257702d2647f5040eebddf7", n_rows=26304, n_cols=322,
        aliases=("ecl",), obtain=_TSLIB_OBTAIN,
    ),
    DatasetInfo(
        name="traffic", file_name="traffic.csv", url=_NEMOTS.format("traffic/traffic.csv"),
        freq="h", target="OT", split="ratio",
        licence="none stated (California PeMS data via LSTNet)",
        source="California Department of Transportation PeMS road occupancy via LSTNet; dated CSV by the Autoformer authors",
        citation=_AUTOFORMER_CITATION,
        git_blob="e7ac3218634fe29a3f6f3733234847a8d39d41f7", n_rows=17544, n_cols=863,
        obtain=_TSLIB_OBTAIN,
    ),
)

REGISTRY: Mapping[str, DatasetInfo] = MappingProxyType({info.name: info for info in _ENTRIES})
_LOOKUP: Mapping[str, DatasetInfo] = MappingProxyType(
    {key.lower(): info for info in _ENTRIES for key in (info.name, *info.aliases)}
)


def names() -> tuple[str, ...]:
    """Registered dataset names."""
    return tuple(REGISTRY)


def find(name: str) -> DatasetInfo | None:
    """The entry for a name or alias (any case), or ``None``."""
    return _LOOKUP.get(name.lower()) if isinstance(name, str) else None


def get(name: str | DatasetInfo) -> DatasetInfo:
    """The entry for a name or alias (any case); an entry is returned as it is."""
    if isinstance(name, DatasetInfo):
        return name
    info = find(name)
    if info is None:
        raise ConfigError(f"unknown dataset {name!r}. Fix: use one of {names()} or give a CSV path.")
    return info


def find_by_file(path: str | os.PathLike[str]) -> DatasetInfo | None:
    """The entry whose file name (or embedded copy's name) is ``path``'s name, or ``None``."""
    file_name = Path(path).name
    return next((info for info in REGISTRY.values() if file_name in (info.file_name, info.embedded)), None)


def embedded_path(info: DatasetInfo | str) -> Path | None:
    """Where the package's own copy of a dataset is, or ``None`` when it ships none."""
    info = get(info)
    return EMBEDDED_DIR / info.embedded if info.embedded else None


def default_cache_dir() -> Path:
    """``datasets/`` of a source checkout, else the user cache directory."""
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "datasets").is_dir():
        return checkout / "datasets"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "forecast" / "datasets"


def _git_blob_hasher(size: int) -> hashlib._Hash:
    hasher = hashlib.sha1(usedforsecurity=False)
    hasher.update(b"blob %d\0" % size)
    return hasher


def is_compressed(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is read through a decompressor (its suffix is ``.xz`` or ``.gz``)."""
    return Path(path).suffix in _DECOMPRESSORS


def open_decompressed(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for reading its content: ``.xz``/``.gz`` files decompressed on the fly.

    The registry's checksums are those of the plain CSV, so a compressed copy is checked on
    what it decompresses to, never on its compressed bytes (which depend on the compressor).
    """
    opener = _DECOMPRESSORS.get(Path(path).suffix)
    return opener(path, "rb") if opener is not None else Path(path).open("rb")


def _content_size(path: Path) -> int:
    """The number of bytes ``path`` holds once decompressed (its size if it is not compressed)."""
    if not is_compressed(path):
        return path.stat().st_size
    size = 0
    with open_decompressed(path) as handle:
        while chunk := handle.read(_CHUNK):
            size += len(chunk)
    return size


def _content_digest(path: Path, hasher: hashlib._Hash) -> tuple[int, str]:
    """The size of ``path``'s decompressed content and ``hasher``'s digest of it, in one read."""
    size = 0
    with open_decompressed(path) as handle:
        while chunk := handle.read(_CHUNK):
            size += len(chunk)
            hasher.update(chunk)
    return size, hasher.hexdigest()


def _checksum_problem(path: Path, info: DatasetInfo) -> str | None:
    """What differs between ``path``'s (decompressed) content and the registered file, or ``None``."""
    holds = "decompresses to" if is_compressed(path) else "has"
    try:
        if info.sha256 is not None:
            kind, expected = "sha256", info.sha256
            size, actual = _content_digest(path, hashlib.sha256())
        else:
            # A git blob id hashes a header holding the size, so the size is counted first.
            kind, expected = "git blob id", info.git_blob
            size = _content_size(path)
            actual = _content_digest(path, _git_blob_hasher(size))[1]
    except _DECOMPRESSION_ERRORS as error:
        return f"cannot be decompressed ({type(error).__name__}: {error})"
    if info.n_bytes is not None and size != info.n_bytes:
        return f"{holds} {size} bytes, the registered file has {info.n_bytes}"
    return None if actual == expected else f"{holds} {kind} {actual}, the registered file has {expected}"


def verify_file(path: str | os.PathLike[str], info: DatasetInfo, *, fix: str | None = None) -> None:
    """Raise ``ChecksumError`` unless ``path`` holds (or decompresses to) the registered bytes of ``info``.

    ``fix`` replaces the default advice (fetch the file again) where another one fits.
    """
    problem = _checksum_problem(Path(path), info)
    if problem:
        fix = fix or (
            f"delete it and fetch the file again ({info.where_to_get()}), or pass verify=False to use "
            "a modified copy on purpose."
        )
        raise ChecksumError(
            f"{path}: this is not the registered {info.file_name} of dataset {info.name!r}: it "
            f"{problem}. Fix: {fix}"
        )


def _embedded_fix(info: DatasetInfo) -> str:
    """The advice for a damaged shipped copy: it cannot be re-fetched, only reinstalled or bypassed."""
    return (
        "the copy shipped inside the package is damaged; reinstall the package "
        f"(pip install --force-reinstall lstf-forecast), or put a verified {info.file_name} in "
        f"{DATA_DIR_ENV} or the cache directory, which are searched first ({info.where_to_get()})."
    )


def download(
    info: DatasetInfo | str, directory: str | os.PathLike[str], *, timeout: float = 60.0, verify: bool = True
) -> Path:
    """Download ``info``'s file into ``directory`` atomically and return its path.

    The bytes go to a temporary ``.part`` file in ``directory``; only a complete file
    whose checksum matches is renamed to its final name. Truncated or corrupted
    downloads raise ``ChecksumError``; unreachable URLs ``DatasetUnavailableError``.
    """
    info = get(info)
    if not info.url:
        raise DatasetUnavailableError(_unavailable_message(info, Path(directory), "no download URL is registered"))
    directory = Path(directory)
    target = directory / info.file_name
    try:
        directory.mkdir(parents=True, exist_ok=True)
        # opened here, not by tempfile: the dataset gets the umask's permissions, not owner-only ones (a shared cache)
        part = directory / f".{info.file_name}.{os.getpid()}.{uuid.uuid4().hex}.part"
        handle = part.open("xb")
    except OSError as error:
        raise DatasetUnavailableError(
            f"cannot write to the cache directory {directory} ({error}). Fix: pass cache_dir= a "
            "writable directory."
        ) from error
    failure = None
    try:
        with handle, urllib.request.urlopen(info.url, timeout=timeout) as response:
            logger.info("Downloading %s from %s", info.file_name, info.url)
            shutil.copyfileobj(response, handle, _CHUNK)
            announced = response.headers.get("Content-Length")
        received = part.stat().st_size
        if announced is not None and announced.isdigit() and received != int(announced):
            failure = f"the connection was cut: {received} of {announced} bytes arrived (truncated)"
        elif verify:
            problem = _checksum_problem(part, info)
            failure = f"the file {problem}" if problem else None
        if failure is None:
            os.replace(part, target)
    except http.client.IncompleteRead as error:
        failure = f"the connection was cut after {len(error.partial)} bytes (truncated)"
    except (urllib.error.URLError, OSError) as error:
        raise DatasetUnavailableError(_unavailable_message(info, directory, f"download failed: {error}")) from error
    finally:
        part.unlink(missing_ok=True)
    if failure is not None:
        raise ChecksumError(
            f"download of {info.file_name} from {info.url} does not match the registry: {failure}; "
            f"nothing was written to {directory}. Fix: retry; if the source changed, get the file "
            "elsewhere and check it against datasets/README.md."
        )
    return target


_download = download  # `locate` and `load` take a keyword of the same name


def _unavailable_message(info: DatasetInfo, cache_dir: Path, reason: str) -> str:
    mirror = os.environ.get(DATA_DIR_ENV)
    mirror_text = f"{DATA_DIR_ENV}={mirror}" if mirror else f"a directory named by {DATA_DIR_ENV} (unset now)"
    return (
        f"dataset {info.name!r} ({info.file_name}) is not available: {reason}. "
        f"Get it from: {info.where_to_get()} "
        f"Then put {info.file_name} in {mirror_text}, or in the cache directory {cache_dir}, "
        f"or pass path=<the file> to forecast.datasets.load."
    )


def locate(
    name: str | DatasetInfo,
    path: str | os.PathLike[str] | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    download: bool = True,  # noqa: A002 - the public keyword reads best this way
    verify: bool = True,
    timeout: float = 60.0,
) -> Path:
    """The verified local file of a dataset, resolved in the module's documented order."""
    info = get(name)
    candidates: list[tuple[str, Path]] = []
    if path is not None:
        explicit = Path(path)
        explicit = explicit / info.file_name if explicit.is_dir() else explicit
        if not explicit.is_file():
            raise DatasetUnavailableError(
                f"{explicit}: no such file for dataset {info.name!r}. Fix: pass the path of "
                f"{info.file_name} (or its directory), or path=None to search the mirror and cache."
            )
        candidates.append(("explicit path", explicit))
    mirror = os.environ.get(DATA_DIR_ENV)
    if mirror:
        candidates.append((DATA_DIR_ENV, Path(mirror) / info.file_name))
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    candidates.append(("download cache", cache / info.file_name))
    embedded = embedded_path(info)
    if embedded is not None:
        candidates.append(("embedded copy", embedded))
    for where, candidate in candidates:
        if candidate.is_file():
            if verify:
                verify_file(candidate, info, fix=_embedded_fix(info) if candidate == embedded else None)
            logger.debug("Dataset %s found in the %s: %s", info.name, where, candidate)
            return candidate
    if not download:
        raise DatasetUnavailableError(_unavailable_message(info, cache, "no local copy and download=False"))
    return _download(info, cache, timeout=timeout, verify=verify)


def load(
    name: str | DatasetInfo,
    path: str | os.PathLike[str] | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    download: bool = True,  # noqa: A002
    verify: bool = True,
    timeout: float = 60.0,
) -> pd.DataFrame:
    """A registered dataset as a DataFrame with a parsed ``date`` column.

    The frame's ``attrs[DATASET_ATTR]`` holds the dataset name, so a data module given
    the frame applies the dataset's split protocol. An embedded ``.xz`` copy is read as it
    is (pandas decompresses it), so nothing is written to the cache.
    """
    info = get(name)
    file = locate(info, path, cache_dir=cache_dir, download=download, verify=verify, timeout=timeout)
    frame = read_csv(file)
    if "date" not in frame.columns:
        raise MissingDateColumnError(
            f"{file}: has no 'date' column, so it is not the registered {info.file_name}. "
            "Fix: fetch the file again."
        )
    frame["date"] = parse_dates(frame["date"], column="date", origin=Origin.of_file(file))
    frame.attrs[DATASET_ATTR] = info.name
    return frame


def file_digest(path: Path) -> str:
    """The first 10 hex digits of the sha256 of the bytes of file ``path``: what results keys and run folders name
    a CSV file by (:func:`forecast.experiment.dataset_label`), and what a saved run records of the file it was
    fitted on (:class:`forecast.predictor.DataFile`)."""
    stat = path.stat()
    return _file_digest(path.resolve(), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=32)
def _file_digest(path: Path, size: int, mtime_ns: int) -> str:
    """Keyed by size and modification time too: a file is read once per version, not at every key lookup, and
    an edited file is read again."""
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()[:10]
