"""The adapter's line: its XPUB socket, sealing on multicast, binding afresh after a revocation.

:class:`LineSocket` is the runner's part of the line (the packets themselves are
the core's): it makes and binds the socket (``epgm://`` buffers and rate,
CURVE for ``tcp://``), seals each packet on a secured multicast line
(:mod:`adapter.line_seal`), counts the bytes, and binds a fresh socket when a
revoked key was connected (ZAP is asked at connection time only, so every peer
must reconnect); until the address is free again packets go nowhere and
subscribers fill from the other lines.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

import zmq

from feedha import transport
from feedha.adapter.access import LINE
from feedha.adapter.config import AdapterConfig
from feedha.adapter.core.seal_view import SealView
from feedha.adapter.line_seal import LineSeal
from feedha.adapter.zap import DataPlaneGuard

logger = logging.getLogger(__name__)

__all__ = ["LineSocket", "NativeSend", "SealedSocket", "ServedSocket"]

NativeSend = Callable[[int, bytes, bytes], None]
"""``send_packet(socket, topic, packet)`` of the pump's extension: a send that keeps the GIL."""

_SNDMORE: Final = int(zmq.SNDMORE)
# How often a served socket reads what its peers sent (subscriptions) and sweeps them. Every
# turn of a busy loop cost a failed non-blocking receive (~4 us, ~7 us with CURVE's monitor):
# a tenth of the loop's CPU at one frame a turn. A peer's subscription or cut-off waits 1 ms at most.
SERVE_INTERVAL_S: Final = 0.001


class ServedSocket:
    """A socket subscribers connect to: made, bound, served each turn, bound afresh after a revocation.

    The line and the delayed line are both one (:class:`LineSocket`,
    :class:`adapter.delayed_line.DelayedLineSocket`): an ``XPUB`` whose
    subscriptions name its peers, CURVE and ZAP for ``where``, and a rebind that
    waits for the address while packets go nowhere.

    Args:
        endpoint: where it binds.
        where: its name for access and ZAP (``line``, ``delayed``).
        config: the adapter's configuration (channel, send high-water mark).
        guard: CURVE for the socket.
    """

    def __init__(self, endpoint: str, where: str, config: AdapterConfig, guard: DataPlaneGuard) -> None:
        self._endpoint = endpoint
        self._where = where
        self._sndhwm = config.sndhwm
        self._topic = config.channel.encode()
        self._guard = guard
        self._socket: zmq.Socket[bytes] | None = None
        self._native_send: NativeSend | None = None
        self._bound = False
        self._next_serve = 0.0
        self.bytes_sent = 0

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"<{name} [{self._endpoint}, bound={self._bound}, bytes={self.bytes_sent}]>"

    @property
    def where(self) -> str:
        """Its name for access and ZAP (``line``, ``delayed`` ...)."""
        return self._where

    def open(self) -> None:
        """Make the socket and bind it.

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
        transport.configure_socket(sock, self._endpoint)  # epgm://: buffers, ZMQ_RATE
        self._guard.secure(sock, self._where)
        return sock

    def send_natively(self, send: NativeSend | None) -> None:
        """Send packets with ``send`` (the pump extension's, which keeps the GIL; ``None``: pyzmq's).

        pyzmq lets the GIL go and takes it back around each of its two sends a packet, which a
        send on this socket never needs (it never waits): the extension's costs a third less.
        """
        self._native_send = send

    def _send(self, packet: bytes) -> None:
        sock = self._socket
        if sock is not None and self._bound:
            self.bytes_sent += len(packet)
            native = self._native_send
            if native is not None:
                native(sock.underlying, self._topic, packet)
                return
            # Two sends with int flags: send_multipart builds the flags with IntFlag arithmetic per frame.
            sock.send(self._topic, _SNDMORE)
            sock.send(packet)

    def serve(self, now: float) -> None:
        """Read what the peers sent (subscriptions name them); cut off who lost access.

        Call every turn: it does the work at most every :data:`SERVE_INTERVAL_S`
        (a fresh socket at once).
        """
        if self._socket is not None and now >= self._next_serve:
            self._next_serve = now + SERVE_INTERVAL_S
            self._guard.serve(self._where, self._socket, now=now)

    def rebind(self, where: str) -> None:
        """Bind a fresh socket if ``where`` is this one's: every peer reconnects and ZAP checks it again."""
        if where != self._where:
            return
        if self._socket is not None:
            self._socket.close(linger=0)
        self._socket, self._bound, self._next_serve = self._make(), False, 0.0
        self.retry_bind()

    def retry_bind(self) -> None:
        """Bind again if a rebind is pending (the old socket may hold the address a moment)."""
        if self._socket is not None and not self._bound:
            self._bound = transport.bind_again(self._socket, self._endpoint)

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close(linger=0)
            self._guard.books[self._where].detach()
            self._socket = None


class SealedSocket(ServedSocket):
    """A served socket that seals its packets on a secured multicast endpoint (line, conflated line).

    Args:
        endpoint: where it binds.
        where: its name for access and ZAP.
        config: the adapter's configuration.
        guard: CURVE for the socket (the core requires sealing when it is on and the endpoint is
            multicast: :class:`~adapter.core.seal_view.SealView`).
    """

    def __init__(self, endpoint: str, where: str, config: AdapterConfig, guard: DataPlaneGuard) -> None:
        super().__init__(endpoint, where, config, guard)
        self.multicast = transport.is_multicast(endpoint)
        self.seal = LineSeal(where)  # plain until the core's SealView says otherwise (use_seal)

    def send(self, packet: bytes) -> None:
        """Publish one packet (sealed on a secured multicast line; nowhere while not bound)."""
        if self.seal.active:
            sealed = self.seal.seal(packet)
            if sealed is None:  # a sealed line whose first key has not come yet
                return
            packet = sealed
        self._send(packet)

    def use_seal(self, view: SealView) -> None:
        """Seal (or hold back) packets as the core's ``view`` says from now on."""
        self.seal.use(view)

    def raw_socket(self) -> zmq.Socket[bytes] | None:
        """The socket packets go out on as they are, for another sender (the source pump).

        ``None`` while packets must be sealed first (a secured multicast line, even before its
        first key) or while the socket is not bound (a rebind waiting for its address).
        """
        if self.seal.active or not self._bound:
            return None
        return self._socket

    def sent_by_others(self, size: int) -> None:
        """``size`` bytes went out on :meth:`raw_socket` (the line's byte count)."""
        self.bytes_sent += size


class LineSocket(SealedSocket):
    """One adapter's line.

    Args:
        config: the adapter's configuration (endpoint, channel, send high-water mark).
        guard: CURVE for the socket.
    """

    def __init__(self, config: AdapterConfig, guard: DataPlaneGuard) -> None:
        super().__init__(config.line_endpoint, LINE, config, guard)

    def status(self) -> dict[str, Any]:
        """The sealing fields of the adapter's status (none unless the line is sealed)."""
        return self.seal.status()
