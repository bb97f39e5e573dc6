"""The journal writer: frames records into group-commit buffers that a flusher thread writes.

Theory of operation
-------------------
``JournalWriter(directory, config)`` first runs recovery (see
:mod:`adapter.journal.recovery`), then starts its flusher thread (see
:mod:`adapter.journal._flusher`). ``append`` checks that msg_seq increases,
frames the record straight into the live buffer (one C call that writes
the header and payload and the CRC32C, see :mod:`adapter.journal.choice`)
and returns: it makes no system call. ``append_batch`` and ``append_many``
frame a whole batch per C call. Everything that is not the common case — a full
buffer, a segment to roll (size or UTC day), an index entry due, the first
record, ``fsync=always``, a closed writer — is folded into one comparison
against the tail's ``limit`` and handled by ``_append_slow``.

The live buffers, their hand-off to the flusher and the flush tickets are
:mod:`adapter.journal.live`'s; ``close()`` flushes and stops the thread.

Thread-safety: a writer belongs to one thread (one writer per directory,
one thread calling its methods), but for ``write_soon``, which any thread may
call to have the buffered records written for it to read. Readers in any
thread or process may read the directory at the same time.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from feedha.adapter.journal._flusher import OpenSegment, SyncTimes
from feedha.adapter.journal.checkpoint import Checkpoint, CheckpointStore
from feedha.adapter.journal.choice import FRAMING
from feedha.adapter.journal.config import FsyncPolicy, JournalConfig
from feedha.adapter.journal.errors import SequenceError
from feedha.adapter.journal.format import (
    CONTROL_FLAGS,
    MAX_PAYLOAD_BYTES,
    NS_PER_DAY,
    RECORD_HEADER_SIZE,
    SEGMENT_HEADER_SIZE,
)
from feedha.adapter.journal.live import LiveBuffers
from feedha.adapter.journal.recovery import Recovery, RecoveryReport, recover
from feedha.adapter.journal.retention import apply_retention
from feedha.adapter.journal.segment import SparseIndex, list_segments
from feedha.adapter.journal.time_index import TimeIndex, rebuild_time_index

if TYPE_CHECKING:
    from feedha.adapter.journal._reference import Appender

logger = logging.getLogger(__name__)


class JournalWriter:
    """Appends records to a journal directory (one writer per directory).

    Example::

        with JournalWriter(path, JournalConfig()) as journal:
            journal.append(msg_seq, time_ns, source_stream, source_seq, payload)
            journal.write_checkpoint(msg_seq, state)
    """

    def __init__(self, directory: str | os.PathLike[str], config: JournalConfig | None = None) -> None:
        """Open (creating if needed) and recover a journal, then start the flusher thread.

        Args:
            directory: the journal directory.
            config: settings; defaults to ``JournalConfig()``.
        """
        self._config = config or JournalConfig()
        self._directory = Path(directory)
        self._directory.mkdir(parents=True, exist_ok=True)
        recovery = recover(self._directory, index_interval_bytes=self._config.index_interval_bytes)
        self.recovery_report: RecoveryReport = recovery.report
        self._checkpoints = CheckpointStore(self._directory)
        self._generation = recovery.last_generation
        self.time_index: TimeIndex = rebuild_time_index(
            self._directory, tail=recovery.tail, tail_index=recovery.tail_index
        )
        self._segment = _reopened_tail(recovery)
        # The live buffer, its published end, the fast path's limit (-1 forces the first append
        # through the slow path) and day, and the last msg_seq: shared with the source pump,
        # which appends through the C extension's Appender (FRAMING.Appender).
        self._tail = FRAMING.Appender(self.append_batch)
        self._tail.buf = bytearray(0)
        self._tail.last_seq = recovery.last_seq
        self._next_index = 0
        self._live = LiveBuffers(self._directory, self._config, self._tail)
        self._flusher = self._live.flusher
        self._flusher.start()

    def __repr__(self) -> str:
        state = "closed" if self._live.closed else "open"
        segment = None if self._segment is None else self._segment.path.name
        return f"<JournalWriter [{state}, last_msg_seq={self._tail.last_seq}, segment={segment}]>"

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def directory(self) -> Path:
        """The journal directory."""
        return self._directory

    @property
    def config(self) -> JournalConfig:
        """The settings."""
        return self._config

    @property
    def sync_times(self) -> SyncTimes:
        """How long synced group commits took (write and fsync), in buckets (for metrics)."""
        return self._flusher.sync_times

    @property
    def last_msg_seq(self) -> int:
        """msg_seq of the last record appended or recovered (-1: empty journal)."""
        return self._tail.last_seq

    @property
    def appender(self) -> Appender:
        """The live tail the source pump appends to (``_native.c``'s ``Appender``, or its reference)."""
        return self._tail

    def append(
        self, msg_seq: int, time_ns: int, source_stream: int, source_seq: int, payload: bytes, flags: int = 0
    ) -> None:
        """Append one record; it is written within ``flush_interval_s`` (or when the buffer fills).

        Args:
            msg_seq: the record's msg_seq; must exceed every earlier one (gaps are allowed).
            time_ns: publish time, ns since the Unix epoch (UTC); picks the segment's day.
            source_stream: source stream number (0..65535).
            source_seq: sequence number on the source stream (0..2**64-1).
            payload: the protobuf-encoded application message.
            flags: record flags (``format.RECORD_SESSION_BOUNDARY``; 0..65535).

        Raises:
            SequenceError: ``msg_seq`` does not exceed the last one.
            ValueError: a field is out of range or the payload is too large.
            TypeError: the payload is not bytes.
            JournalClosedError: the writer is closed.
            JournalIOError: an earlier write failed.
        """
        tail = self._tail
        if msg_seq <= tail.last_seq:
            raise SequenceError(last=tail.last_seq, got=msg_seq)
        pos = tail.pos
        if flags or pos + RECORD_HEADER_SIZE + len(payload) > tail.limit or time_ns >= tail.day_end_ns:
            self._append_slow(msg_seq, time_ns, source_stream, source_seq, payload, flags)
            return
        end = FRAMING.frame_one_into(tail.buf, pos, msg_seq, time_ns, source_stream, source_seq, payload)
        tail.last_seq = msg_seq
        self._live.publish(end)

    def append_batch(
        self,
        first_msg_seq: int,
        time_ns: int,
        source_stream: int,
        source_seqs: Sequence[int],
        payloads: Sequence[bytes],
    ) -> None:
        """Append records ``first_msg_seq``, ``first_msg_seq + 1``, ... sharing one publish time.

        The same as :meth:`append` for each record (segment rolls by size or
        day, index entries, group commit, errors), in one C call for the
        records that fit in the live buffer: the adapter's path for the
        blocks of one line packet.

        Args:
            first_msg_seq: msg_seq of the first record; must exceed the last one.
            time_ns: publish time of every record, ns since the Unix epoch (UTC).
            source_stream: source stream number (0..65535).
            source_seqs: each record's source_seq (a sequence of ints such as a ``range``, or an
                ``array.array('q')``).
            payloads: each record's payload, as many as ``source_seqs``.

        Raises:
            SequenceError: ``first_msg_seq`` does not exceed the last one (nothing appended).
            ValueError: the lengths differ (nothing appended), or a field is out
                of range or a payload too large: the records before it are
                appended, the rest are not.
            TypeError: a payload is not bytes (same rule).
            JournalClosedError: the writer is closed.
            JournalIOError: an earlier write failed.
        """
        count = len(payloads)
        if len(source_seqs) != count:
            raise ValueError(f"source_seqs and payloads differ in length: {len(source_seqs)} != {count}")
        if not count:
            return
        if first_msg_seq <= self._tail.last_seq:
            raise SequenceError(last=self._tail.last_seq, got=first_msg_seq)
        self._frame_batch(first_msg_seq, time_ns, source_stream, source_seqs, payloads)

    def _frame_batch(
        self, first_msg_seq: int, time_ns: int, source_stream: int, source_seqs: Sequence[int],
        payloads: Sequence[bytes],
    ) -> None:  # fmt: skip
        # Strategy: frame_into frames records until one would cross the tail's limit (the
        # end of the buffer, the segment's size budget or the next index entry);
        # that record goes through the slow path, then the C call resumes. After
        # a bad record the run is redone one record at a time, so the records
        # before it are appended and the error is raised for the bad one.
        tail, count = self._tail, len(payloads)
        i, step = 0, count
        while i < count:
            if time_ns < tail.day_end_ns:
                stop = min(i + step, count)
                try:
                    pos, done = FRAMING.frame_into(tail.buf, tail.pos, tail.limit, first_msg_seq, time_ns,
                                                   source_stream, source_seqs, payloads, i, stop)  # fmt: skip
                except (TypeError, ValueError):
                    if step == 1:
                        raise
                    step = 1
                    continue
                if done > i:
                    tail.last_seq = first_msg_seq + done - 1
                    self._live.publish(pos)  # once per call
                    i = done
                if i == stop:
                    continue
            # Record i did not fit, or starts a new UTC day.
            self._append_slow(first_msg_seq + i, time_ns, source_stream, source_seqs[i], payloads[i])
            i += 1

    def append_many(
        self, records: Iterable[tuple[int, int, int, int, bytes] | tuple[int, int, int, int, bytes, int]]
    ) -> None:
        """Append several records in one call: the batch framing path.

        Cheaper per record than :meth:`append` (one C call frames every record
        that fits in the live buffer). Each item is ``(msg_seq, time_ns,
        source_stream, source_seq, payload)``, the arguments of :meth:`append`,
        or a :class:`~adapter.journal.format.Record`. For consecutive msg_seqs
        with one publish time, :meth:`append_batch` is cheaper still.

        Args:
            records: the records, in msg_seq order.

        Raises:
            SequenceError: a msg_seq does not exceed the one before it; the
                records before it are appended, the rest are not.
            ValueError: a field is out of range (same rule).
            TypeError: an item is not such a tuple or a payload is not bytes (same rule).
            JournalClosedError: the writer is closed.
            JournalIOError: an earlier write failed.
        """
        items = records if isinstance(records, list | tuple) else list(records)
        count = len(items)
        # Strategy: as append_batch; frame_tuples_into also stops (without an
        # error) at a msg_seq that does not increase and at a new UTC day.
        i, step, tail = 0, count, self._tail
        while i < count:
            stop = min(i + step, count)
            try:
                pos, done, last = FRAMING.frame_tuples_into(
                    tail.buf, tail.pos, tail.limit, items, tail.last_seq, tail.day_end_ns, i, stop
                )
            except (TypeError, ValueError):
                if step == 1:
                    raise
                step = 1
                continue
            if done > i:
                tail.last_seq = last
                self._live.publish(pos)  # once per call
                i = done
            if i == stop:
                continue
            # Record i did not fit, starts a new UTC day, or does not increase msg_seq.
            msg_seq, time_ns, source_stream, source_seq, payload, *rest = items[i]
            if msg_seq <= tail.last_seq:
                raise SequenceError(last=tail.last_seq, got=msg_seq)
            self._append_slow(msg_seq, time_ns, source_stream, source_seq, payload, *rest)
            i += 1

    def _append_slow(
        self, msg_seq: int, time_ns: int, source_stream: int, source_seq: int, payload: bytes, flags: int = 0
    ) -> None:
        self._live.check_usable()
        self._live.account()
        if not isinstance(payload, bytes | bytearray | memoryview):
            raise TypeError(f"payload must be bytes, not {type(payload).__name__}")
        length = len(payload)
        if length > MAX_PAYLOAD_BYTES:
            raise ValueError(f"payload too large: {length} bytes > {MAX_PAYLOAD_BYTES}")
        if (
            not 0 <= msg_seq < 2**64
            or not 0 <= time_ns < 2**64
            or not 0 <= source_stream < 2**16
            or not 0 <= source_seq < 2**64
            or not 0 <= flags < 2**16
        ):
            raise ValueError(
                "record field out of range: "
                f"{msg_seq=}, {time_ns=}, {source_stream=}, {source_seq=}, {flags=}"
            )
        size = RECORD_HEADER_SIZE + length
        segment = self._segment
        if (
            segment is None
            or time_ns >= (segment.day + 1) * NS_PER_DAY
            or (segment.size + size > self._config.segment_bytes and segment.size > SEGMENT_HEADER_SIZE)
        ):
            segment = self._roll(msg_seq, time_ns)
        elif self._live.batch is None or self._live.batch.segment is not segment:
            self._live.new_batch(segment, size)
        if self._tail.pos + size > len(self._tail.buf):
            self._live.new_batch(segment, size)
        offset = self._live.base + self._tail.pos
        if offset >= self._next_index or not segment.index.seqs:
            segment.index.add(msg_seq, offset)
            self.time_index.add(msg_seq, time_ns)
            self._next_index = offset + self._config.index_interval_bytes
        end = FRAMING.frame_one_into(
            self._tail.buf, self._tail.pos, msg_seq, time_ns, source_stream, source_seq, payload, flags
        )
        segment.size += size
        self._tail.last_seq = msg_seq
        self._live.publish(end)
        self._live.update_limit(segment, self._next_index)
        if self._config.fsync is FsyncPolicy.ALWAYS:
            self.flush()

    def append_control(self, flags: int, time_ns: int, payload: bytes) -> None:
        """Append a control record (a purge): not a message, it takes no msg_seq of its own.

        Its msg_seq field is the last message record's (0 in an empty journal), it
        goes into the current segment whatever its size or day (a segment is never
        started by one, except in a journal with no segment yet, which it starts
        named after the next msg_seq) and it gets no index entry. Readers of
        messages skip it (docs/journal.md, "Control records").

        Args:
            flags: its flag bits; must include one of ``format.CONTROL_FLAGS``.
            time_ns: when it is written, ns since the Unix epoch (UTC).
            payload: what it says (a purge: a serialized ``feedha.v1.PurgeEntry``).

        Raises:
            ValueError: ``flags`` names no control record, or a field is out of range.
            JournalClosedError: the writer is closed.
            JournalIOError: an earlier write failed.
        """
        if not flags & CONTROL_FLAGS or not 0 <= flags < 2**16:
            raise ValueError(f"flags {flags:#06x} are not a control record's (bits {CONTROL_FLAGS:#06x})")
        if len(payload) > MAX_PAYLOAD_BYTES:
            raise ValueError(f"payload too large: {len(payload)} bytes > {MAX_PAYLOAD_BYTES}")
        self._live.check_usable()
        self._live.account()
        after = max(self._tail.last_seq, 0)
        data = FRAMING.frame_records(after, time_ns, 0, (0,), (payload,), flags)
        size = len(data)
        segment = self._segment
        if segment is None:
            segment = self._roll(after + 1, time_ns)
        elif self._live.batch is None or self._live.batch.segment is not segment:
            self._live.new_batch(segment, size)
        if self._tail.pos + size > len(self._tail.buf):
            self._live.new_batch(segment, size)
        self._tail.buf[self._tail.pos : self._tail.pos + size] = data
        self._live.publish(self._tail.pos + size)
        segment.size += size
        self._live.update_limit(segment, self._next_index)
        if self._config.fsync is FsyncPolicy.ALWAYS:
            self.flush()

    def _roll(self, msg_seq: int, time_ns: int) -> OpenSegment:
        self._segment = segment = self._live.roll(self._directory, self._segment, msg_seq, time_ns)
        self._next_index = 0
        return segment

    def flush(self, *, sync: bool | None = None) -> None:
        """Write every record appended so far and wait for it.

        Args:
            sync: also fsync; ``None`` follows the policy (``batch``/``always``: yes).

        Raises:
            JournalIOError: writing failed.
        """
        self._live.flush(sync)

    def write_soon(self, *, timeout: float) -> bool:
        """From any thread: have the flusher write what the owner has appended, waiting at most ``timeout``.

        Unlike :meth:`flush` it reads and changes none of the owner's state, so a
        reader's thread may call it while the owner appends (the replay service
        does, to read records the writer still buffers) and the owner never
        waits for it. The write syncs as any group commit does (per policy).

        Returns:
            Whether it was written in time (``False``: timed out, or the writer is closed or failed).
        """
        return self._live.write_soon(timeout)

    def write_checkpoint(self, msg_seq: int, state: bytes) -> Checkpoint:
        """Flush and sync the journal, then store ``state`` with the journal position.

        Args:
            msg_seq: the msg_seq ``state`` reflects (at most ``last_msg_seq``).
            state: the adapter's opaque state blob.

        Returns:
            The checkpoint written.

        Raises:
            ValueError: ``msg_seq`` is beyond the last record.
        """
        if msg_seq > self._tail.last_seq:
            raise ValueError(f"msg_seq {msg_seq} is beyond the journal's last msg_seq {self._tail.last_seq}")
        self._live.check_usable()
        self.flush(sync=True)
        segment = self._segment
        self._generation += 1
        checkpoint = Checkpoint(
            generation=self._generation,
            msg_seq=msg_seq,
            state=bytes(state),
            segment=None if segment is None else segment.path.name,
            offset=0 if segment is None else segment.size,
            position_seq=self._tail.last_seq,
        )
        self._checkpoints.write(checkpoint)
        return checkpoint

    def latest_checkpoint(self) -> Checkpoint | None:
        """The newest valid checkpoint on disk (``None``: none)."""
        return self._checkpoints.latest()

    def apply_retention(self, *, now_ns: int) -> list[Path]:
        """Delete whole segments beyond the configured age or total size, never the active one.

        Args:
            now_ns: the current time, ns since the Unix epoch.

        Returns:
            The segment files deleted.
        """
        active = None if self._segment is None else self._segment.path.name
        deleted = apply_retention(self._directory, self._config, now_ns=now_ns, keep=active)
        if deleted:
            remaining = list_segments(self._directory)
            if remaining:
                self.time_index.drop_before(remaining[0].first_seq)
        return deleted

    def close(self) -> None:
        """Flush (syncing per policy), stop the flusher and close the files (idempotent)."""
        if self._live.closed:
            return
        try:
            if self._flusher.error is None:
                self.flush()
        finally:
            self._live.closed = True
            self._tail.limit = -1
            self._flusher.stop()


def _reopened_tail(recovery: Recovery) -> OpenSegment | None:
    """The last segment recovery found, to append to (``None``: the next append starts one)."""
    tail = recovery.tail
    if tail is not None and tail.size <= SEGMENT_HEADER_SIZE:
        # A segment with no record (a crash right after it was created) holds nothing; a new
        # segment starts at the next append instead.
        tail.path.unlink(missing_ok=True)
        tail.index_path.unlink(missing_ok=True)
        return None
    if tail is None:
        return None
    index = recovery.tail_index or SparseIndex()
    return OpenSegment(
        path=tail.path,
        index_path=tail.index_path,
        first_seq=tail.first_seq,
        day=tail.day,
        create=False,
        size=tail.size,
        index=index,
        index_persisted=len(index.seqs),
    )
