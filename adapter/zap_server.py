"""The adapter's ZAP handler: "may this CURVE key connect here?", waiting a moment for a grant.

Theory of operation
-------------------
libzmq asks a ZAP handler about every CURVE handshake (ZMTP's ZAP protocol,
RFC 27): a request names the socket's domain and the client's public key, and
the answer 200 lets the connection in, 400 refuses it. A refused handshake is
final: libzmq never dials again on its own. That is a problem for a
subscriber that connects the moment its Subscribe returns: its grant travels
from the admin server to each adapter, and may arrive a few milliseconds
after the handshake. So a key that is not granted *yet* is not refused at
once: its request waits (:data:`GRANT_WAIT_S` at most) and is answered as
soon as the grant lands, or refused when the wait is over. Waiting requests
are bounded (:data:`MAX_WAITING`; past it a request is refused at once), and
answering out of order needs a ROUTER, so this replaces pyzmq's REP-based
authenticator.

Each admitted connection is named ``KEY SERIAL`` in its ``User-Id``
(:func:`~adapter.peers.zap_user_id`), which the sockets' peer books read.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import zmq
from zmq.utils import z85

from feedha.adapter.peers import zap_user_id

logger = logging.getLogger(__name__)

__all__ = ["GRANT_WAIT_S", "MAX_WAITING", "ZapServer"]

ZAP_ENDPOINT: Final = "inproc://zeromq.zap.01"
GRANT_WAIT_S: Final = 2.0  # a key not granted yet is answered when its grant lands, or refused after this
MAX_WAITING: Final = 1024  # requests waiting at once; more are refused at once
POLL_MS: Final = 20
BIND_WAIT_S: Final = 2.0
_VERSION: Final = b"1.0"


@dataclass(slots=True)
class _Waiting:
    envelope: list[bytes]
    request_id: bytes
    domain: str
    key: str
    until: float


class ZapServer:
    """A ZAP handler on its own thread; ``decide(domain, key)`` says whether a Z85 key may connect.

    Args:
        context: the ZeroMQ context whose sockets it answers for.
        decide: the answer for a domain and a Z85 key (called on the ZAP thread).
        waits: whether a refused key of a domain may still be granted soon (then it waits).
    """

    def __init__(
        self,
        context: zmq.Context[Any],
        decide: Callable[[str, str], bool],
        *,
        waits: Callable[[str], bool] = lambda _domain: True,
    ) -> None:
        self._context = context
        self._decide = decide
        self._waits = waits
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="zap", daemon=True)
        self._waiting: list[_Waiting] = []
        self._serial = 0
        self._error: zmq.ZMQError | None = None
        self.refused: dict[str, int] = {}
        self.admitted_late = 0  # admitted after waiting for their grant

    def __repr__(self) -> str:
        return (
            f"<ZapServer [waiting={len(self._waiting)}, refused={self.refused}, late={self.admitted_late}]>"
        )

    def start(self) -> None:
        """Bind the ZAP endpoint and answer until :meth:`stop` (before any CURVE socket binds).

        Raises:
            zmq.ZMQError: the endpoint could not be bound. Never go on without a handler:
                libzmq would then let every CURVE key in.
        """
        self._thread.start()
        if not self._ready.wait(5):
            raise zmq.ZMQError(zmq.ETIMEDOUT, "the ZAP handler did not start")
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        sock: zmq.Socket[bytes] = self._context.socket(zmq.ROUTER)
        sock.linger = 0
        try:
            try:
                self._bind(sock)
            except zmq.ZMQError:
                return  # start() raises it
            self._ready.set()
            while not self._stop.is_set():
                if sock.poll(POLL_MS):
                    for _ in range(256):
                        try:
                            frames = sock.recv_multipart(zmq.NOBLOCK)
                        except zmq.Again:
                            break
                        self._on_request(sock, frames)
                self._recheck(sock, time.monotonic())
        finally:
            self._ready.set()
            for waiting in self._waiting:  # stopping: nobody is left waiting for an answer
                self._refuse(sock, waiting.envelope, waiting.request_id, waiting.domain)
            self._waiting = []
            sock.close(linger=0)

    def _bind(self, sock: zmq.Socket[bytes]) -> None:
        # A handler of this context that is stopping may hold the endpoint a moment longer.
        deadline = time.monotonic() + BIND_WAIT_S
        while True:
            try:
                sock.bind(ZAP_ENDPOINT)
                return
            except zmq.ZMQError as exc:
                if exc.errno != zmq.EADDRINUSE or time.monotonic() > deadline:
                    self._error = exc
                    raise
                time.sleep(0.01)

    def _on_request(self, sock: zmq.Socket[bytes], frames: list[bytes]) -> None:
        # [routing id..., b"", version, request id, domain, address, identity, mechanism, credentials...]
        try:
            split = frames.index(b"")
        except ValueError:
            return
        envelope, body = frames[: split + 1], frames[split + 1 :]
        if len(body) < 6 or body[0] != _VERSION:
            if len(body) >= 2:
                self._reply(sock, envelope, body[1], b"400", b"bad request")
            return
        request_id, domain, mechanism = body[1], body[2].decode("utf-8", "replace"), body[5]
        if mechanism != b"CURVE" or len(body) != 7 or len(body[6]) != 32:
            self._refuse(sock, envelope, request_id, domain)
            return
        key = z85.encode(body[6]).decode("ascii")
        if self._decide(domain, key):
            self._admit(sock, envelope, request_id, key)
        elif self._waits(domain) and len(self._waiting) < MAX_WAITING:
            self._waiting.append(_Waiting(envelope, request_id, domain, key, time.monotonic() + GRANT_WAIT_S))
        else:
            self._refuse(sock, envelope, request_id, domain)

    def _recheck(self, sock: zmq.Socket[bytes], now: float) -> None:
        if not self._waiting:
            return
        still = []
        for waiting in self._waiting:
            if self._decide(waiting.domain, waiting.key):
                self.admitted_late += 1
                self._admit(sock, waiting.envelope, waiting.request_id, waiting.key)
            elif now >= waiting.until:
                self._refuse(sock, waiting.envelope, waiting.request_id, waiting.domain)
            else:
                still.append(waiting)
        self._waiting = still

    def _admit(self, sock: zmq.Socket[bytes], envelope: list[bytes], request_id: bytes, key: str) -> None:
        self._serial += 1
        self._reply(sock, envelope, request_id, b"200", b"OK", zap_user_id(key, self._serial).encode())

    def _refuse(self, sock: zmq.Socket[bytes], envelope: list[bytes], request_id: bytes, domain: str) -> None:
        self.refused[domain] = self.refused.get(domain, 0) + 1
        logger.debug("refused a CURVE connection to %s", domain)
        self._reply(sock, envelope, request_id, b"400", b"not granted")

    @staticmethod
    def _reply(
        sock: zmq.Socket[bytes],
        envelope: list[bytes],
        request_id: bytes,
        status: bytes,
        text: bytes,
        user_id: bytes = b"",
    ) -> None:
        try:
            sock.send_multipart([*envelope, _VERSION, request_id, status, text, user_id, b""], zmq.NOBLOCK)
        except zmq.ZMQError:  # the handshake's session went away meanwhile
            pass
