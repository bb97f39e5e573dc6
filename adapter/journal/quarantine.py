"""The quarantine file: source messages an adapter skipped, kept for an operator to look at.

Every adapter of a channel skips the same messages the same way (that keeps
their numbering identical), and each keeps what it skipped here: one JSON
object per line --

``{"time_ns": ..., "reason": "oversize", "source_seq": 1021, "detail": "...",
"size": 70051, "data": "<base64>"}``

-- ``source_seq`` is ``null`` when the bytes had no readable one, ``data``
holds at most the first 4 KiB of the message (``size`` is its whole length).
The file is bounded: past ``max_bytes`` it is renamed to ``<name>.1`` (the
previous ``.1`` is dropped) and a new one is started, so a flood of poison
costs at most twice ``max_bytes`` of disk. ``feedha journal quarantine``
prints it.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

logger = logging.getLogger(__name__)

__all__ = ["QUARANTINE_FILE", "QuarantineFile", "read_quarantine"]

QUARANTINE_FILE: Final = "quarantine.jsonl"
MAX_BYTES: Final = 64 * 1024 * 1024


class QuarantineFile:
    """Appends quarantined messages to ``path`` (created 0600), rolling it at ``max_bytes``.

    Args:
        path: the file.
        max_bytes: roll to ``<path>.1`` past this size.
    """

    def __init__(self, path: Path, *, max_bytes: int = MAX_BYTES) -> None:
        if max_bytes < 4096:
            raise ValueError(f"max_bytes must be >= 4096, got {max_bytes}")
        self.path = path
        self._max_bytes = max_bytes
        self._file = self._open()
        self.written = 0

    def __repr__(self) -> str:
        return f"<QuarantineFile [path={self.path}, written={self.written}]>"

    def _open(self) -> Any:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        return os.fdopen(fd, "a", encoding="utf-8")

    def write(
        self, *, time_ns: int, reason: str, source_seq: int | None, detail: str, data: bytes, size: int
    ) -> None:
        """Append one entry (a write error is logged, never raised: the data path goes on).

        Args:
            time_ns: when it was skipped, ns since the epoch.
            reason: why (``oversize``, ``source_seq_jump``, ...).
            source_seq: its source_seq, ``None`` when it had no readable one.
            detail: what exactly was wrong (cut to 500 characters).
            data: the bytes kept (the caller cuts them).
            size: the length of the whole message.
        """
        record = {
            "time_ns": time_ns,
            "reason": reason,
            "source_seq": source_seq,
            "detail": detail[:500],
            "size": size,
            "data": base64.b64encode(data).decode(),
        }
        try:
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()
            self.written += 1
            if self._file.tell() >= self._max_bytes:
                self._roll()
        except OSError as exc:
            logger.warning("quarantine file %s: %s", self.path, exc)

    def _roll(self) -> None:
        self._file.close()
        os.replace(self.path, self.path.with_name(self.path.name + ".1"))
        self._file = self._open()

    def close(self) -> None:
        self._file.close()


def read_quarantine(path: Path) -> Iterator[dict[str, Any]]:
    """The entries of a quarantine file, older roll first; a damaged line is skipped.

    Yields:
        Each entry as written, with ``data`` decoded to bytes.
    """
    for part in (path.with_name(path.name + ".1"), path):
        if not part.exists():
            continue
        with part.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                try:
                    entry = json.loads(line)
                    entry["data"] = base64.b64decode(entry["data"])
                except (ValueError, KeyError, TypeError):
                    continue
                yield entry
