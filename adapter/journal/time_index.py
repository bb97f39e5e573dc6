"""The journal's time index: event time -> msg_seq, so a reader finds a window of the day by time.

Theory of operation
-------------------
Every record carries the time the adapter published it (``time_ns``, the
*event time*). The index is sparse, like the msg_seq -> offset index beside
each segment: it holds ``(time_ns, msg_seq)`` for the first record of every
segment and for every record that gets a sparse offset-index entry (one at
least every 64 KiB of records). The writer adds an entry on its slow path,
where it adds the offset entry, so the fast path pays nothing; recovery
rebuilds the index from the segment headers and the offset indexes, reading
one 36-byte record header per entry (one small read per 64 KiB of journal,
not a scan of the records).

A lookup returns a msg_seq to *start reading at*: every record before it
has an event time before the time asked for, so a reader that starts there
and skips the records before the time misses none. The times kept are a
running maximum (an entry's time is never below an earlier entry's), so the
lookup is a bisection even if the clock stepped back; a record stamped
before a step back may then sit after a later-stamped one, and a window's
edge is exact only as far as the adapter's clock was monotonic.

Thread-safety: one writer thread adds entries; any thread looks up (a lock
guards the two lists; it is taken once per 64 KiB written and once per lookup).
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
from pathlib import Path

from feedha.adapter.journal.errors import CorruptRecordError
from feedha.adapter.journal.format import (
    RECORD_HEADER,
    RECORD_HEADER_SIZE,
    SEGMENT_HEADER_SIZE,
    decode_segment_header,
)
from feedha.adapter.journal.segment import SegmentInfo, SparseIndex, list_segments, load_index

__all__ = ["TimeIndex", "rebuild_time_index"]

logger = logging.getLogger(__name__)


class TimeIndex:
    """Sparse ``(time_ns, msg_seq)`` entries in msg_seq order, times made non-decreasing."""

    __slots__ = ("_times", "_seqs", "_lock")

    def __init__(self) -> None:
        self._times: list[int] = []
        self._seqs: list[int] = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        with self._lock:
            first = (self._times[0], self._seqs[0]) if self._seqs else None
            return f"<TimeIndex [entries={len(self._seqs)}, first={first}]>"

    def __len__(self) -> int:
        return len(self._seqs)

    def add(self, msg_seq: int, time_ns: int) -> None:
        """Note that record ``msg_seq`` was published at ``time_ns`` (an older msg_seq is ignored)."""
        with self._lock:
            if self._seqs and msg_seq <= self._seqs[-1]:
                return
            self._seqs.append(msg_seq)
            self._times.append(max(time_ns, self._times[-1]) if self._times else time_ns)

    def start_for(self, time_ns: int) -> int:
        """A msg_seq to read from so as to find every record published at or after ``time_ns``.

        Every record before the msg_seq returned was published before ``time_ns``;
        0 when the index knows of none (read from the journal's start).
        """
        with self._lock:
            i = bisect.bisect_left(self._times, time_ns)
            return self._seqs[i - 1] if i else 0

    def drop_before(self, msg_seq: int) -> None:
        """Forget entries before ``msg_seq`` (retention deleted their segments), keeping a floor entry."""
        with self._lock:
            i = bisect.bisect_right(self._seqs, msg_seq) - 1
            if i > 0:
                del self._seqs[:i]
                del self._times[:i]

    def entries(self) -> list[tuple[int, int]]:
        """The entries as ``(time_ns, msg_seq)`` pairs (a copy)."""
        with self._lock:
            return list(zip(self._times, self._seqs, strict=True))


def rebuild_time_index(
    directory: str | os.PathLike[str],
    *,
    tail: SegmentInfo | None = None,
    tail_index: SparseIndex | None = None,
) -> TimeIndex:
    """Build the time index of a recovered journal from its segment headers and offset indexes.

    Args:
        directory: the journal directory (recovered: its offset indexes are valid or rebuilt).
        tail: the newest segment, whose offset index may be newer in memory than on disk.
        tail_index: that in-memory index (``None``: read the side file like the others).

    Returns:
        The index; a segment that cannot be read contributes what could be read of it.
    """
    index = TimeIndex()
    for info in list_segments(Path(directory)):
        sparse = tail_index if tail is not None and info.path == tail.path and tail_index else None
        try:
            _add_segment(index, info, sparse or load_index(info))
        except (OSError, CorruptRecordError) as exc:  # deleted meanwhile, or damaged: the rest still counts
            logger.warning("time index: segment %s skipped: %s", info.name, exc)
    return index


def _add_segment(index: TimeIndex, info: SegmentInfo, sparse: SparseIndex | None) -> None:
    with open(info.path, "rb") as file:
        fd = file.fileno()
        header = decode_segment_header(os.pread(fd, SEGMENT_HEADER_SIZE, 0))
        index.add(header.first_seq, header.first_time_ns)
        for msg_seq, offset in [] if sparse is None else sparse.entries():
            raw = os.pread(fd, RECORD_HEADER_SIZE, offset)
            if len(raw) < RECORD_HEADER_SIZE:
                return  # past the end: a stale entry of a cut tail
            fields = RECORD_HEADER.unpack(raw)
            if fields[2] != msg_seq:  # the entry is only a hint: check it points at its record
                continue
            index.add(msg_seq, fields[3])
