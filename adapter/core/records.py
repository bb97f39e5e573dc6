"""What the adapter's journal readers need of a journal record: one protocol for all of them.

Recovery, the delayed line, images and the replay service read records
through it, so they take ``adapter.journal.Record`` and the tests' in-memory
records alike without importing the journal.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["RecordLike"]


class RecordLike(Protocol):
    """A journaled message (``adapter.journal.Record`` fits)."""

    @property
    def msg_seq(self) -> int: ...
    @property
    def time_ns(self) -> int: ...
    @property
    def source_stream(self) -> int: ...
    @property
    def source_seq(self) -> int: ...
    @property
    def payload(self) -> bytes: ...
    @property
    def flags(self) -> int: ...
