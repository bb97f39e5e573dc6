"""The writer's I/O thread: writes group-commit buffers, syncs them, appends index entries.

Theory of operation
-------------------
The owner thread frames records into the *live* batch (a preallocated
buffer bound to one segment) and publishes its end offset after each record
by a single attribute store. It never writes to disk itself. A batch that is
full, or that ends a segment, is *sealed*: put on a queue, and the owner
takes a free buffer (waiting only when every buffer is in flight, which is
the back-pressure when the disk cannot keep up).

The flusher thread wakes when a batch is sealed, when a flush is requested,
or every ``flush_interval_s`` while records come. After a whole interval
with nothing to write it sleeps until woken: it raises ``idle`` first and
then looks at the published end once more, and the owner looks at ``idle``
after each publish and, when raised, wakes it (:meth:`wake`). One of the two
always sees the other's store, so no record waits for a wake-up that never
comes; an idle journal costs no wake-ups (a 2 ms timer cost an idle writer
~4% of a core), and a steady stream never goes idle, so it never pays the
owner's wake-up. Under the lock it takes a snapshot — the
sealed batches, the live batch and its published end, the latest flush
ticket — then, outside the lock, writes every byte not yet written, in
order, syncs according to the policy, and appends the index entries that
now point at written bytes, all in one ``write_out`` call (C: one release
of the GIL for the whole group commit). The
owner only ever writes beyond the published end, and a sealed buffer is not
reused until the flusher returns it, so the flusher reads stable bytes
without holding the lock. ``flush()`` waits for the ticket it took, so it
returns once everything appended before it is written (and synced if asked).

A write error stops the flusher; the owner sees it as
:class:`~adapter.journal.errors.JournalIOError` on its next call.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from feedha.adapter.journal.choice import FRAMING
from feedha.adapter.journal.errors import JournalIOError
from feedha.adapter.journal.format import INDEX_ENTRY, encode_index_header
from feedha.adapter.journal.segment import SparseIndex

if TYPE_CHECKING:
    from feedha.adapter.journal._reference import Appender

logger = logging.getLogger(__name__)

THREAD_NAME: Final = "journal-flusher"  # the flusher thread's name (tests look for leaked ones)

# Upper bounds (seconds) of the synced-write duration buckets (metrics).
SYNC_BUCKETS_S: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


@dataclass(slots=True)
class SyncTimes:
    """Durations of the flusher's synced writes (write and fsync in one call), in buckets.

    Written by the flusher thread only; readers (metrics) copy ``counts``.
    ``counts[i]`` is the number of writes that took at most ``bounds[i]``
    and more than the bound before; the last slot counts the slower ones.
    """

    bounds: tuple[float, ...] = SYNC_BUCKETS_S
    counts: list[int] = field(default_factory=lambda: [0] * (len(SYNC_BUCKETS_S) + 1))
    total_s: float = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, seconds)] += 1
        self.total_s += seconds


@dataclass(slots=True, eq=False)
class OpenSegment:
    """A segment the writer appends to.

    The owner thread sets the first group of fields and appends to ``index``;
    the flusher owns ``fd``, ``written``, ``index_fd`` and ``index_persisted``.
    """

    path: Path
    index_path: Path
    first_seq: int
    day: int
    create: bool  # a new file (O_EXCL), or an existing one we append to after recovery
    size: int  # owner: segment offset of the next record, including buffered bytes
    index: SparseIndex = field(default_factory=SparseIndex)
    fd: int | None = None
    written: int = 0
    index_fd: int | None = None
    index_persisted: int = 0


@dataclass(slots=True, eq=False)
class Batch:
    """One group-commit buffer, bound to one segment.

    Attributes:
        buffer: the bytes; ``buffer[:end]`` is framed data.
        segment: where the bytes go.
        serial: increasing number, so flush tickets can be ordered.
        end: set when sealed; while live the end is the owner's published position.
        written: bytes of ``buffer`` the flusher has written (flusher only).
    """

    buffer: bytearray
    segment: OpenSegment
    serial: int
    end: int = -1
    written: int = 0
    pooled: bool = True


class Flusher:
    """The I/O thread of one writer (see the module docstring)."""

    def __init__(
        self,
        *,
        directory: Path,
        tail: Appender,
        sync_each_batch: bool,
        sync_on_create: bool,
        interval_s: float,
    ) -> None:
        self.cond = threading.Condition()
        self.sealed: deque[Batch] = deque()
        self.free: list[bytearray] = []
        self.live: Batch | None = None
        self.error: JournalIOError | None = None
        self.requested_ticket = 0
        self.completed_ticket = 0
        self.sync_ticket = 0
        self._directory = directory
        self._tail = tail  # the live buffer's published end (pos) and the idle flag
        self.idle = False  # asleep with nothing to write: the owner calls wake() after publishing
        self._sync_each_batch = sync_each_batch
        self._sync_on_create = sync_on_create
        self._interval_s = interval_s
        self._stopping = False
        self._current: OpenSegment | None = None
        self.sync_times = SyncTimes()
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)

    def __repr__(self) -> str:
        return (
            f"<Flusher [sealed={len(self.sealed)}, free={len(self.free)}, "
            f"tickets={self.completed_ticket}/{self.requested_ticket}, error={self.error!r}]>"
        )

    @property
    def idle(self) -> bool:
        """Asleep with nothing to write: the owner calls :meth:`wake` after publishing (the tail's flag)."""
        return self._tail.idle

    @idle.setter
    def idle(self, value: bool) -> None:
        self._tail.idle = value

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def stop(self) -> None:
        """Write what is left, close the files and end the thread (idempotent)."""
        with self.cond:
            self._stopping = True
            self.cond.notify_all()
        if self._thread.is_alive():
            self._thread.join()
        self._close_current()

    def wake(self) -> None:
        """The owner published bytes while the flusher was idle: wake it (owner thread)."""
        with self.cond:
            self.idle = False
            self.cond.notify_all()

    def _asked(self) -> bool:
        # Work that is due now: a sealed batch, a flush ticket, or the stop.
        return bool(self.sealed) or self._stopping or self.requested_ticket > self.completed_ticket

    def _has_unwritten(self) -> bool:
        live = self.live
        return live is not None and self._tail.pos > live.written

    def _sleep(self) -> None:
        """Wait, the lock held, until the owner publishes or work is asked for."""
        self.idle = True  # before looking: see the module docstring
        while self.idle and not (self._asked() or self._has_unwritten()):
            self.cond.wait()
        self.idle = False

    def _run(self) -> None:
        quiet = False  # the last interval brought nothing to write
        while True:
            with self.cond:
                if not self._asked():
                    if quiet:
                        self._sleep()
                        quiet = False
                        continue  # new bytes wait flush_interval_s like any others
                    self.cond.wait(self._interval_s)
                    # Sleep only after a whole quiet interval: a steady stream never goes idle,
                    # so it never pays the owner's wake-up.
                    quiet = not (self._asked() or self._has_unwritten())
                    if quiet:
                        continue
                sealed = list(self.sealed)
                self.sealed.clear()
                live = self.live
                live_end = self._tail.pos if live is not None else 0
                ticket = self.requested_ticket
                sync = self.sync_ticket > self.completed_ticket
                stopping = self._stopping
            if self.error is None:
                try:
                    self._write_all(sealed, live, live_end, sync=sync)
                except OSError as exc:
                    logger.error("journal write failed: %s", exc)
                    self.error = JournalIOError(exc.errno, f"journal write failed: {exc.strerror}")
            with self.cond:
                self.free.extend(batch.buffer for batch in sealed if batch.pooled)
                self.completed_ticket = ticket
                self.cond.notify_all()
            if stopping:
                return

    def _write_all(self, sealed: list[Batch], live: Batch | None, live_end: int, *, sync: bool) -> None:
        # Strategy: gather the new bytes of every batch and hand them, with the
        # fsync and the new index entries, to one write_out call, which releases
        # the GIL once. Separate os.write/os.fsync calls each waited to get the
        # GIL back (up to the 5 ms switch interval while the owner frames), and
        # the owner then stalled on full buffers.
        chunks: list[memoryview] = []
        wrote = False
        work = [(batch, batch.end) for batch in sealed]
        if live is not None:
            work.append((live, live_end))
        for batch, end in work:
            if end <= batch.written:
                continue
            if batch.segment is not self._current:
                self._write_out(chunks, sync=False)  # what belongs to the segment being left
                chunks = []
                self._switch_to(batch.segment)
            chunks.append(memoryview(batch.buffer)[batch.written : end])
            batch.written = end
            wrote = True
        segment = self._current
        if segment is not None and segment.fd is not None:
            self._write_out(chunks, sync=sync or (wrote and self._sync_each_batch))

    def _write_out(self, chunks: list[memoryview], *, sync: bool) -> None:
        segment = self._current
        if segment is None or segment.fd is None or not (chunks or sync):
            return
        written = segment.written + sum(len(chunk) for chunk in chunks)
        # Entries are hints; only those pointing at bytes written by now go out,
        # so a reader never seeks past the end of the segment.
        new = self._new_index_entries(segment, written)
        index_fd = self._index_fd(segment) if new else -1
        started = time.perf_counter()
        FRAMING.write_out(segment.fd, chunks, sync, index_fd, b"".join(new))
        if sync:
            self.sync_times.observe(time.perf_counter() - started)
        segment.written = written
        segment.index_persisted += len(new)

    def _new_index_entries(self, segment: OpenSegment, written: int) -> list[bytes]:
        seqs, offsets = segment.index.seqs, segment.index.offsets
        return [
            INDEX_ENTRY.pack(seqs[i], offsets[i])
            for i in range(segment.index_persisted, len(seqs))
            if offsets[i] < written
        ]

    def _index_fd(self, segment: OpenSegment) -> int:
        if segment.index_fd is None:
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
            flags |= os.O_TRUNC if segment.create else 0
            segment.index_fd = os.open(segment.index_path, flags, 0o644)
            if os.fstat(segment.index_fd).st_size == 0:
                os.write(segment.index_fd, encode_index_header(segment.first_seq))
        return segment.index_fd

    def _switch_to(self, segment: OpenSegment) -> None:
        previous = self._current
        if previous is not None and previous.fd is not None:
            # Always sync a finished segment (once per roll): a checkpoint's
            # position may lie in a later segment and recovery trusts what precedes it.
            os.fsync(previous.fd)
            self._persist_index(previous)
        self._close_current()
        flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC
        flags |= (os.O_CREAT | os.O_EXCL) if segment.create else 0
        segment.fd = os.open(segment.path, flags, 0o644)
        segment.written = os.fstat(segment.fd).st_size
        self._current = segment
        if segment.create and self._sync_on_create:
            self._sync_directory()

    def _persist_index(self, segment: OpenSegment) -> None:
        new = self._new_index_entries(segment, segment.written)
        if new:
            os.write(self._index_fd(segment), b"".join(new))
            segment.index_persisted += len(new)

    def _close_current(self) -> None:
        segment = self._current
        if segment is None:
            return
        for fd in (segment.fd, segment.index_fd):
            if fd is not None:
                os.close(fd)
        segment.fd = segment.index_fd = None
        self._current = None

    def _sync_directory(self) -> None:
        fd = os.open(self._directory, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
