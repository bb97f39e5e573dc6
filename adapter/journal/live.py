"""The journal writer's live buffers: the batch being filled, its hand-off to the flusher, flush tickets.

Theory of operation
-------------------
:class:`~adapter.journal.writer.JournalWriter` frames records into the *live*
batch through its tail (an ``Appender``: the buffer, the published end, the
fast path's limit and day, the last msg_seq; the source pump appends to the
same tail in C). :class:`LiveBuffers` owns what happens around that: a record
published (:meth:`~LiveBuffers.publish`, which wakes an idle flusher), the
live batch sealed and handed to the flusher with a free buffer taken in its
place (:meth:`~LiveBuffers.new_batch`: waiting only when every buffer is in
flight, the back-pressure when the disk cannot keep up), the fast path's limit
(:meth:`~LiveBuffers.update_limit`), and the flush tickets
(:meth:`~LiveBuffers.flush`, :meth:`~LiveBuffers.write_soon`); a segment
roll starts a batch of its own (:meth:`~LiveBuffers.roll`).

The timeout is driven by the flusher thread, which writes the live buffer at
least every ``flush_interval_s``; the owner does not need to call anything
periodically. An idle flusher sleeps until woken, so each publish looks at
the tail's ``idle`` and wakes it when raised (the flusher thread and its
handshake are :mod:`adapter.journal._flusher`'s). ``flush()`` waits until
every record published before it is written (and synced, per policy).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from feedha.adapter.journal._flusher import Batch, Flusher, OpenSegment
from feedha.adapter.journal.config import FsyncPolicy, JournalConfig
from feedha.adapter.journal.errors import JournalClosedError
from feedha.adapter.journal.format import (
    NS_PER_DAY,
    SEGMENT_HEADER_SIZE,
    SegmentHeader,
    encode_segment_header,
    index_name,
    segment_name,
    utc_day,
)

if TYPE_CHECKING:
    from feedha.adapter.journal._reference import Appender

__all__ = ["LiveBuffers"]

logger = logging.getLogger("feedha.adapter.journal.writer")  # the writer's log, as before


class LiveBuffers:
    """The live batch, the buffer pool and the flusher of one writer (its owner thread's, but ``write_soon``).

    Args:
        directory: the journal directory (the flusher writes there).
        config: the writer's settings.
        tail: the writer's live tail (its ``wake`` is set to the flusher's).
    """

    def __init__(self, directory: Path, config: JournalConfig, tail: Appender) -> None:
        self.config, self.tail = config, tail
        self.flusher = Flusher(
            directory=directory,
            tail=tail,
            sync_each_batch=config.fsync is not FsyncPolicy.NONE,
            sync_on_create=config.fsync is not FsyncPolicy.NONE,
            interval_s=config.flush_interval_s,
        )
        tail.wake = self.flusher.wake
        self.batch: Batch | None = None
        self.base = 0  # segment offset of the live buffer's first byte
        self.serial = 0
        # Buffers are allocated when first needed (see new_batch), not here:
        # zero-filling 1 MiB costs ~0.8 ms of page faults, and while the disk
        # keeps up the free list's LIFO order reuses the same two buffers.
        self.allocated = 0
        self.closed = False

    def publish(self, end: int) -> None:
        """The flusher may now write the live buffer up to ``end``; a sleeping flusher is woken.

        The handshake is in :mod:`adapter.journal._flusher`'s docstring. Every publish goes
        through here, or through the tail's ``append_run``, which does the same in C.
        """
        tail = self.tail
        tail.pos = end
        if tail.idle:
            self.flusher.wake()

    def account(self) -> None:
        """Settle the live segment's size (before the buffer changes hands): fast-path appends leave it."""
        if self.batch is not None:
            self.batch.segment.size = self.base + self.tail.pos

    def update_limit(self, segment: OpenSegment, next_index: int) -> None:
        """The fast path may run while a record stays in this buffer, in the segment's size budget,
        before the next index entry (``next_index``, a segment offset) and within the segment's day."""
        tail, config = self.tail, self.config
        if config.fsync is FsyncPolicy.ALWAYS:
            tail.limit = -1
            return
        tail.limit = min(len(tail.buf), config.segment_bytes - self.base, next_index - self.base)
        tail.day_end_ns = (segment.day + 1) * NS_PER_DAY

    def new_batch(self, segment: OpenSegment, needed: int, base: int | None = None) -> None:
        """Seal the live batch and start a new one for ``segment`` with room for ``needed`` bytes."""
        self.account()
        flusher, config, tail = self.flusher, self.config, self.tail
        with flusher.cond:
            if self.batch is not None:
                self.batch.end = tail.pos
                flusher.sealed.append(self.batch)
                flusher.cond.notify_all()
            if needed > config.buffer_bytes:
                buffer, pooled = bytearray(needed), False
            else:
                if not flusher.free and self.allocated < config.buffers:
                    flusher.free.append(bytearray(config.buffer_bytes))
                    self.allocated += 1
                while not flusher.free and flusher.error is None:
                    flusher.cond.wait()
                self.check_usable()
                buffer, pooled = flusher.free.pop(), True
            self.serial += 1
            self.base = segment.size if base is None else base
            self.batch = Batch(buffer=buffer, segment=segment, serial=self.serial, pooled=pooled)
            tail.buf, tail.pos = buffer, 0
            flusher.live = self.batch
        tail.limit = -1

    def roll(self, directory: Path, previous: OpenSegment | None, msg_seq: int, time_ns: int) -> OpenSegment:
        """Start a segment at ``msg_seq``: a new batch holding its header, named after its UTC day."""
        day = utc_day(time_ns) if previous is None else max(previous.day, utc_day(time_ns))
        name = segment_name(day=day, first_seq=msg_seq)
        segment = OpenSegment(
            path=directory / name,
            index_path=directory / index_name(name),
            first_seq=msg_seq,
            day=day,
            create=True,
            size=SEGMENT_HEADER_SIZE,
        )
        self.new_batch(segment, SEGMENT_HEADER_SIZE, base=0)
        header = encode_segment_header(SegmentHeader(first_seq=msg_seq, first_time_ns=time_ns))
        self.tail.buf[:SEGMENT_HEADER_SIZE] = header
        self.tail.pos = SEGMENT_HEADER_SIZE
        logger.info("journal segment %s started at msg_seq=%d", name, msg_seq)
        return segment

    def check_usable(self) -> None:
        """Raise if the writer is closed or the flusher failed."""
        if self.closed:
            raise JournalClosedError("journal writer is closed")
        if self.flusher.error is not None:
            raise self.flusher.error

    def flush(self, sync: bool | None) -> None:
        """Write every record published so far and wait for it (see ``JournalWriter.flush``)."""
        if self.closed:
            return
        self.account()
        flusher = self.flusher
        with flusher.cond:
            flusher.requested_ticket += 1
            ticket = flusher.requested_ticket
            if sync or (sync is None and self.config.fsync is not FsyncPolicy.NONE):
                flusher.sync_ticket = ticket
            flusher.cond.notify_all()
            while flusher.completed_ticket < ticket and flusher.error is None:
                flusher.cond.wait()
        if flusher.error is not None:
            raise flusher.error

    def write_soon(self, timeout: float) -> bool:
        """From any thread: have what is published written, waiting at most ``timeout``."""
        flusher = self.flusher
        with flusher.cond:
            if self.closed or flusher.error is not None:
                return False
            flusher.requested_ticket += 1
            ticket = flusher.requested_ticket
            flusher.cond.notify_all()
            done = flusher.cond.wait_for(
                lambda: flusher.completed_ticket >= ticket or flusher.error is not None, timeout
            )
            return done and flusher.error is None
