"""Files written whole or not at all: what a crash, a full disk or a concurrent reader must never see half of; and
the file locks that keep two writers apart."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from forecast.errors import ConfigError


def write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """``write(temporary)``, then the temporary file renamed to ``path``: a reader sees the old file or the new
    one, never half of one. A temporary file of its own: under DDP every process writes the (same) config.

    ``write`` creates the temporary file (a new file's permissions, as the umask gives them: never mkstemp's
    owner-only ones); a file replaced keeps its own permissions."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        write(temporary)
        if path.exists():
            shutil.copymode(path, temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_text_atomically(path: Path, text: str) -> None:
    """``path`` holds ``text``, replaced whole (:func:`write_atomically`)."""
    write_atomically(path, lambda temporary: temporary.write_text(text))


@contextmanager
def held(lock_file: Path, timeout: float, refusal: str) -> Iterator[None]:
    """Hold ``lock_file`` (a filelock; the kernel releases the lock of a process that dies), waiting at most
    ``timeout`` seconds for another holder, else ConfigError ``refusal`` (which says why, and the fix)."""
    lock = FileLock(lock_file, timeout=timeout)
    try:
        lock_file.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except Timeout:
        raise ConfigError(refusal) from None
    except OSError as error:  # a read-only folder, a lock file that is a link
        raise ConfigError(f"cannot take the lock {lock_file} ({error.strerror or error}). Fix: run where "
                          f"{lock_file.parent} is writable, or name another folder.") from None
    try:
        yield
    finally:
        lock.release()
