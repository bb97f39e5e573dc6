"""The adapter's sockets on the sync bus: a PUB every peer reads, a SUB on every peer.

The messages are the core's (:mod:`adapter.core.syncbus` encodes and decodes
them); this is only their transport. Both sockets are bounded (high-water
marks, the largest message a peer may send) and, with ``--sync-key``, CURVE
with the group's key pair: nothing else may speak on the bus.

:meth:`SyncLink.keepalive` repeats one message from a thread while the loop
is busy with one long turn (an active folding its whole state for a
checkpoint): the loop sends nothing meanwhile but what it carries out under
the same lock, so the socket is never used by two threads at once.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Final

import zmq

from feedha import transport
from feedha.adapter.config import SYNC_HWM, SYNC_MAX_MESSAGE_BYTES, AdapterConfig
from feedha.adapter.core.syncbus import SyncDecodeError, SyncMessage, decode_sync, encode_sync
from feedha.adapter.zap import DataPlaneGuard

__all__ = ["SyncLink"]

MESSAGES_PER_DRAIN: Final = 1000
KEEPALIVE_AT_MOST_S: Final = 5.0  # a turn longer than this is a hung loop: the group may elect


class SyncLink:
    """One adapter's end of its group's sync bus.

    Args:
        config: the adapter's configuration (its endpoint, its peers', the channel).
        guard: CURVE for the bus.
    """

    def __init__(self, config: AdapterConfig, guard: DataPlaneGuard) -> None:
        self._config = config
        self._guard = guard
        self._channel = config.channel_number
        self.pub: zmq.Socket[bytes] | None = None
        self.sub: zmq.Socket[bytes] | None = None
        self._sending = threading.Lock()  # the loop's sends and a keepalive's never overlap
        self.keepalives = 0  # messages a keepalive repeated

    def __repr__(self) -> str:
        return f"<SyncLink [{self._config.sync_endpoint}, peers={len(self._config.peers)}]>"

    def open(self) -> zmq.Socket[bytes]:
        """Bind the PUB, connect the SUB to every peer; returns the SUB (to poll).

        Raises:
            zmq.ZMQError: the endpoint cannot be bound.
        """
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        pub, sub = self.pub, self.sub = ctx.socket(zmq.PUB), ctx.socket(zmq.SUB)
        pub.linger = sub.linger = 0
        pub.sndhwm = sub.rcvhwm = SYNC_HWM
        sub.setsockopt(zmq.MAXMSGSIZE, SYNC_MAX_MESSAGE_BYTES)  # a peer that sends more is cut off
        self._guard.secure_sync(pub, sub)
        pub.bind(self._config.sync_endpoint)
        sub.subscribe(b"")
        for peer in self._config.peers:
            sub.connect(peer)
        return sub

    def publisher(self) -> zmq.Socket[bytes]:
        """The PUB every peer reads (the source pump sends the active's heartbeat reports on it)."""
        assert self.pub is not None
        return self.pub

    def send(self, message: SyncMessage) -> None:
        """Publish one message to every peer."""
        assert self.pub is not None
        data = encode_sync(message, channel=self._channel)
        with self._sending:
            self.pub.send(data)

    @contextlib.contextmanager
    def keepalive(
        self, message: SyncMessage, *, every_s: float, at_most_s: float = KEEPALIVE_AT_MOST_S
    ) -> Iterator[None]:
        """Repeat ``message`` every ``every_s`` from a thread while the block runs (``at_most_s`` at most).

        The loop thread runs one long turn inside the block and sends only through :meth:`send`;
        the source pump (the other sender on this socket) does not run meanwhile.
        """
        assert self.pub is not None
        data = encode_sync(message, channel=self._channel)
        done = threading.Event()
        thread = threading.Thread(
            target=self._repeat, args=(data, done, every_s, at_most_s), name="sync-keepalive", daemon=True
        )
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()

    def _repeat(self, data: bytes, done: threading.Event, every_s: float, at_most_s: float) -> None:
        # The first repeat one interval in: a turn shorter than that costs nothing.
        end = time.monotonic() + at_most_s
        pub = self.pub
        assert pub is not None
        while not done.wait(every_s) and time.monotonic() < end:
            with self._sending:
                pub.send(data)
                self.keepalives += 1

    def drain(self, on_garbage: Callable[[], None]) -> Iterator[SyncMessage]:
        """The messages waiting now, decoded (at most :data:`MESSAGES_PER_DRAIN`; garbage counted)."""
        assert self.sub is not None
        sub, channel = self.sub, self._channel
        for _ in range(MESSAGES_PER_DRAIN):
            # Asked, not tried: a backup drains after every source frame and mostly finds nothing.
            if not transport.readable(sub):
                return
            try:
                data = sub.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                yield decode_sync(data, channel=channel)
            except SyncDecodeError:
                on_garbage()

    def close(self) -> None:
        for sock in (self.pub, self.sub):
            if sock is not None:
                sock.close(linger=0)
