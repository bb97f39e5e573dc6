"""Readers (tailers): read the journal from any msg_seq while a writer appends.

Theory of operation
-------------------
A cursor finds the segment holding ``from_seq`` (the last whose first
msg_seq is not greater), seeks with the segment's sparse index to the last
entry at or before ``from_seq`` (checking that the record there really has
that msg_seq, and otherwise starting after the header), and decodes forward
with ``os.pread`` in chunks. It stops at the end of the bytes the writer
has written so far; a record that is not yet whole is left for the next
poll, so a reader never returns a half-written record. At the end of a
segment it moves on only when a later segment exists, and re-reads the
current one once first: the writer finishes a segment before it creates the
next, so that second read sees its final bytes.

A record whose CRC fails at the very end of the newest segment is treated
like an incomplete one (the writer may be part way through it); anywhere
else it raises :class:`~adapter.journal.errors.CorruptRecordError`.

Control records (purges, see :mod:`adapter.journal.format`) are not
messages: readers yield messages only, and hand the control records they pass
to a ``controls`` list when given one (those after message ``from_seq - 1`` on).

Readers hold no lock and write nothing, so any number may run in any thread
or process. Each iterator owns one open file; close it (or exhaust it) to
release the file.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from feedha.adapter.journal.errors import CorruptRecordError
from feedha.adapter.journal.format import (
    RECORD_HEADER_SIZE,
    SEGMENT_HEADER_SIZE,
    ControlRecord,
    DecodeStatus,
    Record,
    as_control,
    decode_record,
    decode_records,
    decode_segment_header,
)
from feedha.adapter.journal.segment import SegmentInfo, list_segments, load_index, next_segment
from feedha.adapter.journal.time_index import TimeIndex

logger = logging.getLogger(__name__)

CHUNK_BYTES: Final = 1024 * 1024
POLL_INTERVAL_S: Final = 0.005
_BATCH_RECORDS: Final = 8192


class _Cursor:
    """Position in a journal directory; ``poll()`` returns the records available now."""

    def __init__(
        self,
        directory: Path,
        from_seq: int,
        to_seq: int | None,
        chunk_bytes: int,
        controls: list[ControlRecord] | None = None,
    ) -> None:
        self._directory = directory
        self._controls = controls
        self._next_seq = from_seq
        self._to_seq = to_seq
        self._chunk = chunk_bytes
        self._segment: SegmentInfo | None = None
        self._fd: int | None = None
        self._offset = 0
        self._prev_seq = -1
        self._rechecked = False
        self.done = False

    def __repr__(self) -> str:
        name = None if self._segment is None else self._segment.name
        return (
            f"<Cursor [segment={name}, offset={self._offset}, next_seq={self._next_seq}, done={self.done}]>"
        )

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def poll(self) -> list[Record]:
        out: list[Record] = []
        while not self.done and len(out) < _BATCH_RECORDS:
            if self._fd is None and not self._open():
                break
            if not self._read_some(out) and not self._advance():
                break
        return out

    def _read_some(self, out: list[Record]) -> bool:
        """Decode from the current offset; False once nothing more is available in this segment."""
        assert self._fd is not None and self._segment is not None
        data = os.pread(self._fd, self._chunk, self._offset)
        with_controls = self._controls is not None
        result = decode_records(data, 0, prev_seq=self._prev_seq, with_controls=with_controls)
        if result.status is DecodeStatus.INCOMPLETE and result.end == 0 and len(data) >= RECORD_HEADER_SIZE:
            # Possibly one record larger than the chunk: read exactly that record.
            needed = RECORD_HEADER_SIZE + int.from_bytes(data[4:8], "little")
            if needed > len(data):
                data = os.pread(self._fd, needed, self._offset)
                result = decode_records(data, 0, prev_seq=self._prev_seq, with_controls=with_controls)
        if result.controls:
            self._take_controls(result.controls)
        records = result.records
        if records and self._to_seq is None and records[0].msg_seq >= self._next_seq:
            out.extend(records)  # the common case of a tailer: every record is wanted
            records = []
        for record in records:
            if self._to_seq is not None and record.msg_seq > self._to_seq:
                self.done = True
                break
            if record.msg_seq >= self._next_seq:
                out.append(record)
            if self._to_seq is not None and record.msg_seq >= self._to_seq:
                self.done = True
                break
        self._offset += result.end
        if result.records:
            self._prev_seq = result.records[-1].msg_seq
            self._next_seq = max(self._next_seq, self._prev_seq + 1)
            self._rechecked = False
        if result.is_corrupt and self._has_newer() is not None:
            raise CorruptRecordError(result.status.value, path=str(self._segment.path), offset=self._offset)
        # Progress, not records: a stretch of control records alone moves the offset too.
        return result.end > 0 and not self.done

    def _take_controls(self, found: list[tuple[int, int, Record]]) -> None:
        assert self._controls is not None
        low, high = self._next_seq - 1, self._to_seq
        for _before, flags, record in found:
            if record.msg_seq >= low and (high is None or record.msg_seq <= high):
                self._controls.append(as_control(flags, record))

    def _has_newer(self) -> SegmentInfo | None:
        assert self._segment is not None
        return next_segment(self._directory, self._segment.first_seq)

    def _advance(self) -> bool:
        """At the end of the current segment: move to the next one if the writer has started it."""
        newer = self._has_newer()
        if newer is None:
            return False
        if not self._rechecked:
            self._rechecked = True  # read the current segment once more before leaving it
            return True
        assert self._fd is not None and self._segment is not None
        if os.fstat(self._fd).st_size > self._offset:
            raise CorruptRecordError("torn_segment_tail", path=str(self._segment.path), offset=self._offset)
        self.close()
        self._rechecked = False
        return self._open_segment(newer, seek=False)

    def _open(self) -> bool:
        segments = list_segments(self._directory)
        if not segments:
            return False
        candidates = [info for info in segments if info.first_seq <= self._next_seq]
        return self._open_segment(candidates[-1] if candidates else segments[0], seek=True)

    def _open_segment(self, info: SegmentInfo, *, seek: bool) -> bool:
        try:
            fd = os.open(info.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False  # deleted by retention between listing and opening
        header = os.pread(fd, SEGMENT_HEADER_SIZE, 0)
        if len(header) < SEGMENT_HEADER_SIZE:
            os.close(fd)  # being created: try again on the next poll
            return False
        try:
            decode_segment_header(header)
        except CorruptRecordError as exc:
            os.close(fd)
            raise CorruptRecordError(exc.reason, path=str(info.path), offset=0) from exc
        self._fd, self._segment = fd, info
        self._offset, self._prev_seq = SEGMENT_HEADER_SIZE, max(self._prev_seq, info.first_seq - 1)
        if seek:
            self._seek(fd, info)
        return True

    def _seek(self, fd: int, info: SegmentInfo) -> None:
        index = load_index(dataclasses.replace(info, size=os.fstat(fd).st_size))
        entry = None if index is None else index.floor(self._next_seq)
        if entry is None:
            return
        seq, offset = entry
        try:
            found = decode_record(os.pread(fd, CHUNK_BYTES, offset))
        except CorruptRecordError:
            found = None
        if found is not None and found[0].msg_seq == seq:
            self._offset, self._prev_seq = offset, seq - 1
        else:
            logger.warning(
                "index entry (%d, %d) of %s is stale; scanning from the start", seq, offset, info.name
            )


class Tail:
    """A tailer's place in a journal: each :meth:`poll` returns the message records written since.

    Made by :meth:`JournalReader.tail`; close it (or let the reader's owner do) to release its file.
    """

    def __init__(self, directory: Path, from_seq: int, chunk_bytes: int) -> None:
        self._cursor = _Cursor(directory, from_seq, None, chunk_bytes)
        self.next_seq = from_seq  # the msg_seq the next record read will have at least

    def __repr__(self) -> str:
        return f"<Tail [{self._cursor!r}]>"

    def poll(self) -> tuple[list[Record], bool]:
        """The records written since the last poll (a bounded batch), and whether that is all of them."""
        records = self._cursor.poll()
        if records:
            self.next_seq = records[-1].msg_seq + 1
        return records, len(records) < _BATCH_RECORDS

    def close(self) -> None:
        self._cursor.close()


class JournalReader:
    """Reads records by msg_seq from a journal directory, while a writer may be appending.

    Example::

        reader = JournalReader(path)
        missing = reader.read_range(41, 44)          # retransmission
        for record in reader.follow(from_seq=100):   # a tailer
            ...
    """

    def __init__(self, directory: str | os.PathLike[str], *, chunk_bytes: int = CHUNK_BYTES) -> None:
        """Read the journal in ``directory``.

        Args:
            directory: the journal directory.
            chunk_bytes: bytes read per system call.
        """
        if chunk_bytes < RECORD_HEADER_SIZE:
            raise ValueError(f"chunk_bytes too small: {chunk_bytes!r}")
        self._directory = Path(directory)
        self._chunk = chunk_bytes

    def __repr__(self) -> str:
        return f"<JournalReader [{self._directory}]>"

    def read(
        self, from_seq: int = 0, to_seq: int | None = None, *, controls: list[ControlRecord] | None = None
    ) -> Iterator[Record]:
        """Iterate over the records with ``from_seq <= msg_seq <= to_seq`` written so far.

        Args:
            from_seq: the first msg_seq wanted (gaps are skipped over).
            to_seq: the last msg_seq wanted (``None``: up to the current end).
            controls: a list that receives the control records (purges) passed on the way,
                those whose ``after_seq`` is in ``from_seq - 1 .. to_seq``, in journal order.

        Yields:
            The message records, in msg_seq order; the iteration ends at the current end of the journal.

        Raises:
            CorruptRecordError: a bad record that is not the newest segment's tail.
        """
        cursor = _Cursor(self._directory, from_seq, to_seq, self._chunk, controls)
        try:
            while batch := cursor.poll():
                yield from batch
        finally:
            cursor.close()

    def follow(
        self,
        from_seq: int = 0,
        to_seq: int | None = None,
        *,
        poll_interval_s: float = POLL_INTERVAL_S,
        stop: threading.Event | None = None,
        controls: list[ControlRecord] | None = None,
    ) -> Iterator[Record]:
        """Like :meth:`read`, but at the end wait for new records instead of stopping.

        Args:
            from_seq: the first msg_seq wanted.
            to_seq: stop after this msg_seq (``None``: never).
            poll_interval_s: how long to wait between polls at the end of the journal.
            stop: when set, the iteration ends at the next poll.
            controls: receives the control records passed on the way (see :meth:`read`).

        Yields:
            Records as the writer's flusher writes them, each exactly once, in order.
        """
        cursor = _Cursor(self._directory, from_seq, to_seq, self._chunk, controls)
        try:
            while not cursor.done and not (stop is not None and stop.is_set()):
                batch = cursor.poll()
                if batch:
                    yield from batch
                elif stop is not None:
                    stop.wait(poll_interval_s)
                else:
                    time.sleep(poll_interval_s)
        finally:
            cursor.close()

    def tail(self, from_seq: int = 0) -> Tail:
        """A tailer from ``from_seq`` that polls without blocking (the delayed line's reader)."""
        return Tail(self._directory, from_seq, self._chunk)

    def seek_time(self, time_ns: int, index: TimeIndex | None = None) -> int:
        """The msg_seq of the first message record written at or after ``time_ns`` (after the last: last + 1).

        With the writer's time index, reads at most one index interval (64 KiB) of
        records; without, reads segment headers to find the segment, then that
        segment's records: one segment at most, however long the journal.

        Args:
            time_ns: a wall-clock time, ns since the epoch.
            index: the journal's time index (:attr:`JournalWriter.time_index`), if at hand.
        """
        if index is not None:
            last = index.start_for(time_ns) - 1
            for record in self.read(last + 1):
                if record.time_ns >= time_ns:
                    return record.msg_seq
                last = record.msg_seq
            return last + 1
        segments = list_segments(self._directory)
        start = segments[0].first_seq if segments else 0
        for info in segments:
            try:
                with open(info.path, "rb") as file:
                    header = decode_segment_header(file.read(SEGMENT_HEADER_SIZE))
            except (OSError, CorruptRecordError):
                continue  # deleted meanwhile, or being created: the ones before it decide
            if header.first_time_ns > time_ns:
                break
            start = info.first_seq
        last = start - 1
        for record in self.read(start):
            if record.time_ns >= time_ns:
                return record.msg_seq
            last = record.msg_seq
        return last + 1

    def read_range(self, first: int, last: int) -> list[Record]:
        """The records with ``first <= msg_seq <= last`` (for retransmission).

        Args:
            first: the first msg_seq wanted.
            last: the last msg_seq wanted.

        Returns:
            The records present in the journal, in order (msg_seq gaps and
            records not yet written are simply absent).
        """
        if last < first:
            raise ValueError(f"last ({last}) is before first ({first})")
        return list(self.read(first, last))
