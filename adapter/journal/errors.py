"""The journal's exceptions: one base, split by fault."""

from __future__ import annotations

from feedha.adapter.errors import AdapterError


class JournalError(AdapterError):
    """Base of every error the journal raises on purpose."""


class SequenceError(JournalError, ValueError):
    """An append whose ``msg_seq`` does not follow the last one (it must strictly increase).

    Attributes:
        last: the last ``msg_seq`` in the journal.
        got: the ``msg_seq`` that was offered.
    """

    def __init__(self, *, last: int, got: int) -> None:
        super().__init__(f"msg_seq must increase: last={last}, got={got}")
        self.last = last
        self.got = got


class CorruptRecordError(JournalError):
    """A record, segment header, index or checkpoint that fails validation.

    Attributes:
        reason: short machine-readable cause, e.g. ``"bad_crc"``.
        path: the file, when known.
        offset: byte offset in that file, when known.
    """

    def __init__(self, reason: str, *, path: str | None = None, offset: int | None = None) -> None:
        where = "" if path is None else f" in {path}" + ("" if offset is None else f" at offset {offset}")
        super().__init__(f"corrupt journal data ({reason}){where}")
        self.reason = reason
        self.path = path
        self.offset = offset


class JournalClosedError(JournalError):
    """The writer was used after ``close()``."""


class JournalIOError(JournalError, OSError):
    """Writing or syncing the journal failed (disk full, I/O error); the writer stops accepting data."""
