"""One ZeroMQ socket bound and served on a thread of its own (the replay service, the snapshot loop).

A subclass makes its socket (:meth:`SocketThread._make`: type, bounds, CURVE)
and does one turn of its work on it (:meth:`SocketThread._turn`, which waits
for something to do, at most a moment, and returns). This class binds the
socket, runs the turns until :meth:`SocketThread.stop`, and binds afresh on
:meth:`SocketThread.rebind` (every peer reconnects and is checked again: after
a key was revoked), retrying while the old socket still holds the address.
"""

from __future__ import annotations

import logging
import threading
from typing import Final

import zmq

from feedha import transport

__all__ = ["SocketThread"]

logger = logging.getLogger(__name__)

BIND_WAIT_S: Final = 1.0  # how long a bind waits for an old socket to let go of the address
RETRY_S: Final = 0.1  # between two attempts to bind again after a rebind failed


class SocketThread:
    """Owns one bound socket on a daemon thread named ``name``.

    Args:
        endpoint: where the socket binds.
        name: the thread's name (and the logs').
    """

    def __init__(self, endpoint: str, *, name: str) -> None:
        self._endpoint = endpoint
        self._name = name
        self._stop = threading.Event()
        self._rebind = threading.Event()
        self._bound = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Bind and start; returns once bound.

        Raises:
            zmq.ZMQError: the endpoint could not be bound.
        """
        self._thread.start()
        self._bound.wait(5)
        if self._error is not None:
            raise self._error

    def rebind(self) -> None:
        """Bind the socket afresh (every peer reconnects and is checked again); from any thread."""
        self._rebind.set()

    def stop(self) -> None:
        """Stop the thread and close the socket (waits up to 5 s)."""
        self._stop.set()
        self._thread.join(timeout=5)

    def _make(self) -> zmq.Socket[bytes]:
        """A new, unbound socket with its options set (subclasses)."""
        raise NotImplementedError

    def _turn(self, sock: zmq.Socket[bytes]) -> None:
        """Wait a moment for work and do it (subclasses); stop and rebind are seen between turns."""
        raise NotImplementedError

    def _open(self) -> zmq.Socket[bytes]:
        sock = self._make()
        try:  # after a rebind the old socket may hold the address a moment longer
            if not transport.bind_again(sock, self._endpoint, wait_s=BIND_WAIT_S):
                raise zmq.ZMQError(zmq.EADDRINUSE, f"{self._endpoint} still in use after {BIND_WAIT_S} s")
        except zmq.ZMQError:
            sock.close(linger=0)
            raise
        return sock

    def _reopen(self) -> zmq.Socket[bytes] | None:
        # Bound again after a revocation; until that works the service is just quiet.
        while True:
            try:
                return self._open()
            except zmq.ZMQError as exc:
                logger.error("%s: cannot bind %s again (%s); retrying", self._name, self._endpoint, exc)
                if self._stop.wait(RETRY_S):
                    return None

    def _run(self) -> None:
        try:
            sock: zmq.Socket[bytes] | None = self._open()
        except zmq.ZMQError as exc:
            self._error = exc
            return
        finally:
            self._bound.set()
        try:
            while sock is not None and not self._stop.is_set():
                if self._rebind.is_set():
                    self._rebind.clear()
                    sock.close(linger=0)
                    sock = self._reopen()
                    continue
                self._turn(sock)
        finally:
            if sock is not None:
                sock.close(linger=0)
