"""The adapter's subscription to its source stream: one bounded SUB socket.

The frames are the core's to convert; this only receives them, bounded in
memory (a high-water mark, the largest frame a source may send: a larger one
drops the connection) and per turn of the runner's loop (a count and a time
budget, so the sync bus is heard between bursts of source data).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import zmq

from feedha import transport
from feedha.adapter.config import (
    SOURCE_BATCH_FRAMES,
    SOURCE_BUDGET_S,
    SOURCE_MAX_FRAME_BYTES,
    SOURCE_RCVHWM,
    AdapterConfig,
)
from feedha.adapter.zap import DataPlaneGuard

__all__ = ["SourceLink"]


class SourceLink:
    """One adapter's SUB socket on its source stream.

    Args:
        config: the adapter's configuration (the source's endpoint and stream).
        guard: CURVE for the source link (verifies the source by its public key).
    """

    def __init__(self, config: AdapterConfig, guard: DataPlaneGuard) -> None:
        self._guard = guard
        self._endpoint = config.source_endpoint
        self._stream = config.source_stream.encode()
        self.socket: zmq.Socket[bytes] | None = None
        self.drained = False  # the last call of frames() emptied the socket

    def __repr__(self) -> str:
        return f"<SourceLink [{self._endpoint} {self._stream.decode(errors='replace')}]>"

    def open(self) -> zmq.Socket[bytes]:
        """Subscribe to the stream; returns the socket (to poll)."""
        sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.SUB)
        self.socket = sock
        sock.linger = 0
        sock.rcvhwm = SOURCE_RCVHWM
        sock.setsockopt(zmq.MAXMSGSIZE, SOURCE_MAX_FRAME_BYTES)  # a source that sends more is cut off
        self._guard.secure_source(sock)
        sock.subscribe(self._stream)
        sock.connect(self._endpoint)
        return sock

    def frames(self, reads: Callable[[float], bool]) -> Iterator[tuple[list[bytes], float]]:
        """``(parts, now)`` of each message waiting, while ``reads(now)`` and this turn's budget allow.

        Call when the socket polled readable. Below saturation a turn reads one
        frame: the second is asked for with :func:`transport.readable` (cheaper
        than a receive that fails); a turn that found a second frame drains until
        ``zmq.Again``, as a burst's frames each pay for no check. Afterwards
        :attr:`drained` says whether the socket was emptied (not stopped by
        ``reads`` or the budget).
        """
        assert self.socket is not None
        sock, budget_end = self.socket, time.monotonic() + SOURCE_BUDGET_S
        self.drained = False
        for count in range(SOURCE_BATCH_FRAMES):
            now = time.monotonic()
            if (count and now >= budget_end) or not reads(now):
                return
            if count == 1 and not transport.readable(sock):
                self.drained = True
                return
            try:
                yield transport.recv_frames(sock), now
            except zmq.Again:
                self.drained = True
                return

    def close(self) -> None:
        if self.socket is not None:
            self.socket.close(linger=0)
