"""The delayed line's shell: its PUB socket and the journal tailer that feeds the core's delayed line.

The decisions -- what is due, tombstones for purges, heartbeats, whether this
backup may send yet -- are :mod:`adapter.core.delayed`'s, inside the core. Each
turn of the runner's loop :meth:`DelayedLineSocket.feed` reads journal records
while the core asks for them (a bounded batch per read, a few reads per turn,
so a tailer catching up never starves the line or the sync bus), and the core's
``PublishDelayed`` actions come back to :meth:`DelayedLineSocket.send`.
The socket is an ``XPUB`` served like the line (:meth:`~adapter.zap.DataPlaneGuard.serve`):
a key that loses access is cut off alone, nobody else reconnects.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final

import zmq

from feedha import transport
from feedha.adapter.access import DELAYED
from feedha.adapter.config import AdapterConfig
from feedha.adapter.core.records import RecordLike
from feedha.adapter.persistence import JournalKeeper
from feedha.adapter.zap import DataPlaneGuard

logger = logging.getLogger(__name__)

__all__ = ["DelayedLineSocket"]

READS_PER_TURN: Final = 4  # journal reads (each up to 8,192 records) per turn of the loop
_SNDMORE: Final = int(zmq.SNDMORE)


class DelayedLineSocket:
    """The delayed line of one adapter: bound, fed from the journal, rebound after a revocation.

    Args:
        config: the adapter's configuration (``delayed_line_endpoint`` set).
        guard: CURVE for the socket (delayed-only keys are admitted here).
        journal: the adapter's journal (the tailer reads it).
    """

    def __init__(self, config: AdapterConfig, guard: DataPlaneGuard, journal: JournalKeeper) -> None:
        if config.delayed_line_endpoint is None:
            raise ValueError("DelayedLineSocket needs config.delayed_line_endpoint")
        self._endpoint = config.delayed_line_endpoint
        self._sndhwm = config.sndhwm
        self._topic = config.channel.encode()
        self._guard = guard
        self._journal = journal
        self._socket: zmq.Socket[bytes] | None = None
        self._bound = False
        self.bytes_sent = 0

    def __repr__(self) -> str:
        return f"<DelayedLineSocket [{self._endpoint}, bound={self._bound}, bytes={self.bytes_sent}]>"

    def open(self) -> None:
        """Make the socket and bind it (before the loop starts).

        Raises:
            zmq.ZMQError: the endpoint cannot be bound.
        """
        self._socket = self._make()
        self._socket.bind(self._endpoint)
        self._bound = True

    def _make(self) -> zmq.Socket[bytes]:
        sock: zmq.Socket[bytes] = zmq.Context.instance().socket(self._guard.line_kind)
        sock.linger = 0
        sock.sndhwm = self._sndhwm
        self._guard.secure(sock, DELAYED)
        return sock

    def feed(
        self,
        wants: Callable[..., int | None],
        take: Callable[..., None],
        *,
        wall_ns: int,
    ) -> None:
        """Read journal records while the core's delayed line wants them.

        Args:
            wants: ``wants(wall_ns=...)``: the msg_seq to read from now, or ``None``.
            take: ``take(records, caught_up=...)``: hands what was read to the core.
            wall_ns: the wall clock.
        """
        if self._socket is not None:
            self._guard.serve(DELAYED, self._socket, now=time.monotonic())
        for _ in range(READS_PER_TURN):
            start = wants(wall_ns=wall_ns)
            if start is None:
                return
            records: list[RecordLike]
            records, caught_up = self._journal.read_delayed(start)  # type: ignore[assignment]
            take(records, caught_up=caught_up)
            if caught_up:
                return

    def send(self, packet: bytes) -> None:
        """Publish one delayed packet (nowhere while the socket waits to be bound again)."""
        if self._socket is not None and self._bound:
            self._socket.send(self._topic, _SNDMORE)
            self._socket.send(packet)
            self.bytes_sent += len(packet)

    def rebind(self, where: str = DELAYED) -> None:
        """Bind afresh if ``where`` is the delayed line: every peer reconnects, ZAP checks it again."""
        if where != DELAYED:
            return
        if self._socket is not None:
            self._socket.close(linger=0)  # first the socket, then its monitor (secure() detaches it)
        logger.info("binding the delayed line afresh: a revoked key was connected to it")
        self._socket, self._bound = self._make(), False
        self.retry_bind()

    def retry_bind(self) -> None:
        """Bind again if a rebind is pending (the old socket may hold the address a moment)."""
        if self._socket is not None and not self._bound:
            self._bound = transport.bind_again(self._socket, self._endpoint)

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close(linger=0)
            self._guard.books[DELAYED].detach()
            self._socket = None
