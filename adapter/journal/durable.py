"""Replace a small file atomically and durably (checkpoints, the term file)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["replace_durably"]


def replace_durably(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` so that a crash leaves either the old file or the new one, whole.

    The bytes go to a temporary name in the same directory and are synced, the
    temporary file is renamed over ``path`` and the directory is synced, so the
    rename itself survives a power loss.
    """
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    directory_fd = os.open(path.parent, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(directory_fd)
    finally:
        os.close(directory_fd)
