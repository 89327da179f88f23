"""Files written whole or not at all: what a crash, a full disk or a concurrent reader must never see half of."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path


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
