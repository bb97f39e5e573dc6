"""The adapter's sockets on the sync bus: a PUB every peer reads, a SUB on every peer.

The messages are the core's (:mod:`adapter.core.syncbus` encodes and decodes
them); this is only their transport. Both sockets are bounded (high-water
marks, the largest message a peer may send) and, with ``--sync-key``, CURVE
with the group's key pair: nothing else may speak on the bus.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final

import zmq

from feedha import transport
from feedha.adapter.config import SYNC_HWM, SYNC_MAX_MESSAGE_BYTES, AdapterConfig
from feedha.adapter.core.syncbus import SyncDecodeError, SyncMessage, decode_sync, encode_sync
from feedha.adapter.zap import DataPlaneGuard

__all__ = ["SyncLink"]

MESSAGES_PER_DRAIN: Final = 1000


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
        self.pub.send(encode_sync(message, channel=self._channel))

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
