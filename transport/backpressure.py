"""A feed source's sends that never drop silently: back-pressure from its subscribers, bounded in time.

Theory of operation
-------------------
A PUB socket drops a message for every subscriber whose queue is at its
high-water mark, and says nothing. A feed source we run ourselves (the plain
source, the Spark job) can do better: wait. Its streams are XPUB sockets with
``ZMQ_XPUB_NODROP``, so a send that finds a subscriber's queue full fails with
``EAGAIN`` instead of dropping (libzmq checks every matching queue before it
queues anything). :class:`BackpressureSender` then waits, in slices
(``ZMQ_SNDTIMEO``), until the queue has room: the source slows to the pace of
its slowest subscriber, and reports the time it spent waiting and the rate
it achieved instead of losing messages.

A subscriber that reads nothing at all (stopped, hung, cut off without the
connection closing) would stop the whole stream that way, for everybody. So
the wait is bounded: a send blocked for ``max_stall_s`` goes out *past* the
stuck subscriber -- sent once with ``XPUB_NODROP`` off, so only the full
queue drops it and every other subscriber gets it. libzmq then leaves that
queue out of every later send until its reader has read from it again, so
what the stuck subscriber misses is one stretch of the stream: a gap of its
own, which its adapter counts and its group repairs (docs/architecture.md,
"Source gaps"). The sender counts the episodes (:attr:`BackpressureSender.stalls`);
how many messages each cost is known only on the receiving side, which names
the range.

A queue of a subscriber that is gone drops with its connection: a killed
adapter stops nobody.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable, Sequence
from typing import Final

import zmq

__all__ = ["DEFAULT_MAX_STALL_S", "BackpressureSender", "SendResult"]

# How long one send waits for a subscriber whose queue is full. libzmq reopens a full queue only once
# its reader took half of it: the queues on both ends must be small (a few dozen frames) for a
# slow but live subscriber to make room well within this.
DEFAULT_MAX_STALL_S: Final = 10.0
WAIT_SLICE_MS: Final = 50  # a blocked send looks at the stop event and the stall limit this often
_DONTWAIT: Final = int(zmq.DONTWAIT)
_SNDMORE: Final = int(zmq.SNDMORE)


class SendResult(enum.Enum):
    """What became of one send."""

    WHOLE = "whole"  # every subscriber's queue took it
    PAST_STALLED = "past_stalled"  # sent past a subscriber that read nothing for max_stall_s
    STOPPED = "stopped"  # not sent: the stop event was set while it waited


class BackpressureSender:
    """Sends on one XPUB socket without dropping, waiting for its slowest subscriber (bounded).

    Args:
        socket: the stream's XPUB socket (``XPUB_NODROP`` and ``SNDTIMEO`` are set here).
        max_stall_s: the longest one send waits for a full queue before it goes past it.
        clock: the monotonic clock (tests pass their own).

    Raises:
        ValueError: ``max_stall_s`` not positive.
    """

    def __init__(
        self,
        socket: zmq.Socket[bytes],
        *,
        max_stall_s: float = DEFAULT_MAX_STALL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not max_stall_s > 0:
            raise ValueError(f"max_stall_s must be > 0, got {max_stall_s!r}")
        self._socket = socket
        self._max_stall_s = max_stall_s
        self._clock = clock
        socket.setsockopt(zmq.XPUB_NODROP, 1)
        socket.setsockopt(zmq.SNDTIMEO, WAIT_SLICE_MS)
        self.blocked_s = 0.0  # time spent waiting for room
        self.longest_block_s = 0.0
        self.blocked_sends = 0  # sends that had to wait
        self.stalls = 0  # episodes of a subscriber reading nothing for max_stall_s (sent past it)

    def __repr__(self) -> str:
        return (
            f"<BackpressureSender [blocked_s={self.blocked_s:.3f}, blocked_sends={self.blocked_sends}, "
            f"stalls={self.stalls}]>"
        )

    def send(self, parts: Sequence[bytes | memoryview], *, stop: threading.Event | None = None) -> SendResult:
        """Send one multipart message, waiting while a subscriber's queue is full (at most ``max_stall_s``).

        Returns:
            How it went out (:class:`SendResult`); ``STOPPED`` only when ``stop`` was set while
            it waited, and then nothing was sent.
        """
        try:
            self._send_parts(parts, _DONTWAIT)
        except zmq.Again:
            return self._wait_and_send(parts, stop)
        return SendResult.WHOLE

    def _send_parts(self, parts: Sequence[bytes | memoryview], flags: int) -> None:
        # Strategy: send() a part at a time with int flags (send_multipart builds its flags with
        # IntFlag arithmetic); bytes are copied (cheaper than a Frame), views are not. Only the
        # first part can fail: libzmq checks the queues before a message's first part, and a
        # queue's fill counts whole messages, so once it is in the rest follows.
        socket, last = self._socket, len(parts) - 1
        for index, part in enumerate(parts):
            more = _SNDMORE if index < last else 0
            socket.send(part, flags | more, copy=not isinstance(part, memoryview))

    def _wait_and_send(self, parts: Sequence[bytes | memoryview], stop: threading.Event | None) -> SendResult:
        # Blocking sends of one slice each, until there is room, the stop event or the stall limit.
        started = self._clock()
        self.blocked_sends += 1
        while True:
            try:
                self._send_parts(parts, 0)  # blocks up to SNDTIMEO (the GIL released meanwhile)
            except zmq.Again:
                waited = self._clock() - started
                if stop is not None and stop.is_set():
                    self._book_wait(waited)
                    return SendResult.STOPPED
                if waited < self._max_stall_s:
                    continue
                self._book_wait(waited)
                self.stalls += 1
                return self._send_past(parts)
            self._book_wait(self._clock() - started)
            return SendResult.WHOLE

    def _send_past(self, parts: Sequence[bytes | memoryview]) -> SendResult:
        # Lossy for this one send: a full queue drops it (and libzmq leaves that queue out of
        # later sends until its reader reads again), every other subscriber gets it.
        socket = self._socket
        socket.setsockopt(zmq.XPUB_NODROP, 0)
        try:
            self._send_parts(parts, _DONTWAIT)
        finally:
            socket.setsockopt(zmq.XPUB_NODROP, 1)
        return SendResult.PAST_STALLED

    def _book_wait(self, waited: float) -> None:
        self.blocked_s += waited
        self.longest_block_s = max(self.longest_block_s, waited)

    def counters(self) -> dict[str, float | int]:
        """The counters, for a summary."""
        return {
            "blocked_s": round(self.blocked_s, 3),
            "longest_block_s": round(self.longest_block_s, 3),
            "blocked_sends": self.blocked_sends,
            "stalls": self.stalls,
        }
