"""The replay service's socket and thread: retransmission requests answered off the adapter's loop.

Theory of operation
-------------------
Answering a replay request reads the journal and builds packets: tens of
milliseconds for a big reply. On the adapter's loop that would delay its
heartbeats, and a flood of requests could make backups think the active
died. So the service runs on its own thread with its own ROUTER socket:

* the socket is bounded both ways (``RCVHWM``/``SNDHWM``) and refuses
  requests larger than a request can be (``MAXMSGSIZE``): a peer that floods
  or never reads fills its own queue, not the adapter's memory;
* every payer and the service as a whole have token buckets for requests
  and bytes (:class:`~adapter.replay.ReplayLimits`); a request over the
  limit is answered ``BUSY`` at once, at almost no cost. A reply is charged
  its bytes and the journal bytes skipped to make it;
* a light payer's request is answered as it is read; a heavy payer's waits,
  and one of those is answered a turn: a page of 1 MiB costs tens of
  milliseconds (more on a busy machine), so a few heavy users' pages must not
  stand between another user's gap and its answer. The heavy ones wait one per
  payer (a reply is charged when it is made: a payer with a request waiting
  is answered ``BUSY``, so it never has more than one reply beyond its
  budget), at most :data:`HEAVY_WAITING` payers;
* records the journal writer still holds in its group-commit buffer are
  invisible to readers: when a read comes up short of what the writer holds,
  the thread has the writer's flusher thread write them (:class:`FlushGate`,
  at most once per :data:`FLUSH_EVERY_S`) and waits a few milliseconds for
  it. The adapter's loop takes no part: a crowd asking at the live end of
  the stream costs the loop nothing;
* with CURVE, each request comes with the key that sent it (ZAP's User-Id)
  and the connection it came on (:class:`~adapter.peers.PeerBook`): a key
  entitled to delayed data only is answered delayed ranges only, a key that
  lost access is cut off (its request unanswered), a key may hold
  :data:`~adapter.peers.MAX_CONNECTIONS_PER_KEY` connections (the newest
  beyond is cut off), and the budgets count per user (``owner_of``: every
  key of a user and every connection of those keys share one budget).
  Without CURVE each connection pays for itself.

The adapter's term is read from a callable (a plain attribute read).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Final, NamedTuple

import zmq

from feedha.adapter.access import REPLAY
from feedha.adapter.peers import PeerBook
from feedha.adapter.replay import ReplayLimits, ReplayService
from feedha.adapter.socket_thread import SocketThread

logger = logging.getLogger(__name__)

__all__ = ["FlushGate", "ReplayServer"]

POLL_MS: Final = 100
QUEUE_MESSAGES: Final = 1000  # RCVHWM of the ROUTER: requests (28 bytes each) waiting to be served
# SNDHWM: replies queued per peer. A reply is up to REPLAY_MAX_BYTES (1 MiB), so a peer
# that asks and never reads holds at most this many MiB of the adapter; more replies for
# it are dropped by the ROUTER (it asked again anyway, or it is not reading). Measured:
# 8 peers flooding for 15 s without reading grew the adapter by 42 MiB with 1000, 10 with 8.
REPLIES_QUEUED_PER_PEER: Final = 8
# A request is 28 bytes, but libzmq applies MAXMSGSIZE to the CURVE handshake too, whose
# INITIATE command is ~300 bytes: at 256 every CURVE client was dropped before it could ask.
MAX_REQUEST_BYTES: Final = 1024  # a frame larger than this drops the peer
FLUSH_WAIT_S: Final = 0.02
READ_PER_TURN: Final = 64  # requests read (and admitted or refused) before any is answered
HEAVY_WAITING: Final = 64  # admitted requests of heavy payers waiting for their turn
# The writer's flusher writes its buffer every 2 ms anyway; a write asked for sooner splits
# a group commit (one more write, and fsync with --journal-fsync batch). Asked at most this
# often, however many requests come at the live end.
FLUSH_EVERY_S: Final = 0.01


class _Admitted(NamedTuple):
    """A request admitted and not yet answered."""

    payer: bytes
    key: str
    frames: list[bytes]


class FlushGate:
    """The replay thread's way to the records the journal writer still buffers.

    Args:
        write: has the writer's flusher thread write its buffer, waiting at most the
            given seconds; whether it did (``JournalWriter.write_soon``).
        every_s: the least time between two writes asked for.
        wait_s: how long one ask waits.
    """

    def __init__(
        self, write: Callable[[float], bool], *, every_s: float = FLUSH_EVERY_S, wait_s: float = FLUSH_WAIT_S
    ) -> None:
        self._write = write
        self._every_s, self._wait_s = every_s, wait_s
        self._asked_at: float | None = None
        self.asked = self.coalesced = 0

    def __repr__(self) -> str:
        return f"<FlushGate [asked={self.asked}, coalesced={self.coalesced}]>"

    def ask(self, *, now: float) -> bool:
        """From the replay thread: have the buffer written now, unless that was asked for just before.

        Returns:
            Whether a write was asked for and done in time (``False``: coalesced, or timed out).
        """
        if self._asked_at is not None and now - self._asked_at < self._every_s:
            self.coalesced += 1
            return False
        self._asked_at = now
        self.asked += 1
        return self._write(self._wait_s)


class ReplayServer(SocketThread):
    """Serves replay requests from the journal on a thread of its own.

    Args:
        endpoint: where the ROUTER socket binds.
        service: answers one request from the journal.
        term: the adapter's current term (read on the thread; must be quick).
        limits: per-payer and total request and byte rates.
        secure: makes the socket a CURVE server before it binds (``None``: an open socket).
        delayed_only: whether a CURVE key (Z85) may have delayed data only (``None``: no CURVE,
            nobody is told apart).
        peers: who is connected, by key (``None``: nobody is told apart).
        owner_of: the budget a CURVE key (Z85) counts against (``AccessTable.owner_of``;
            ``None``: each key its own).
    """

    def __init__(
        self,
        endpoint: str,
        service: ReplayService,
        term: Callable[[], int],
        limits: ReplayLimits,
        *,
        secure: Callable[[zmq.Socket[bytes], str], None] | None = None,
        delayed_only: Callable[[str], bool] | None = None,
        peers: PeerBook | None = None,
        owner_of: Callable[[str], str] | None = None,
    ) -> None:
        super().__init__(endpoint, name="replay-server")
        self._delayed_only = delayed_only
        self._owner_of = owner_of
        self._peers = peers
        self._service = service
        self._term = term
        self._limits = limits
        self._secure = secure
        self.requests = self.refused = self.cut_off = 0
        self._heavy: deque[_Admitted] = deque()  # admitted, waiting: one answered per turn
        self._waiting: set[bytes] = set()  # the payers of those (one request each)

    def __repr__(self) -> str:
        return (
            f"<ReplayServer [endpoint={self._endpoint}, requests={self.requests}, refused={self.refused}, "
            f"cut_off={self.cut_off}]>"
        )

    def _make(self) -> zmq.Socket[bytes]:
        sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
        sock.linger = 0
        sock.rcvhwm, sock.sndhwm = QUEUE_MESSAGES, REPLIES_QUEUED_PER_PEER
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_REQUEST_BYTES)
        if self._secure is not None:
            self._secure(sock, REPLAY)
        return sock

    def _turn(self, sock: zmq.Socket[bytes]) -> None:
        if sock.poll(0 if self._heavy else POLL_MS):
            self._read(sock)
        if self._heavy:
            admitted = self._heavy.popleft()
            self._waiting.discard(admitted.payer)
            self._answer(sock, admitted)
        if self._peers is not None:
            self._peers.serve(now=time.monotonic())

    def _read(self, sock: zmq.Socket[bytes]) -> None:
        # Read what came (bounded): refuse at once what is over a budget, answer the light
        # payers' requests (each charged before the next is weighed), queue the heavy payers'.
        for _ in range(READ_PER_TURN):
            try:
                received = sock.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                break
            self.requests += 1
            now = time.monotonic()
            key = self._sender(received[-1], now)
            if key is None:
                self.cut_off += 1  # its key lost access, or holds too many connections: no answer
                continue
            frames = [frame.bytes for frame in received]
            payer = self._payer(key, frames)
            is_light = self._limits.is_light(payer, now=now)  # before admit() spends its allowance
            may_wait = len(self._heavy) < HEAVY_WAITING and payer not in self._waiting
            if not ((is_light or may_wait) and self._limits.admit(payer, now=now)):
                self.refused += 1
                self._send(sock, self._service.busy(frames))
            elif is_light:
                self._answer(sock, _Admitted(payer, key, frames))
            else:
                self._heavy.append(_Admitted(payer, key, frames))
                self._waiting.add(payer)

    def _answer(self, sock: zmq.Socket[bytes], admitted: _Admitted) -> None:
        try:
            skipped = self._service.counters.skipped_bytes
            reply = self._service.answer(
                admitted.frames,
                term=self._term(),
                send_time_ns=time.time_ns(),
                delayed_only=self._is_delayed_only(admitted.key),
            )
            cost = sum(map(len, reply)) + self._service.counters.skipped_bytes - skipped
            self._limits.charge(admitted.payer, cost, now=time.monotonic())
        except Exception:  # a bug must cost one request, never the service
            logger.exception("replay request failed")
            return
        self._send(sock, reply)

    def _send(self, sock: zmq.Socket[bytes], reply: list[bytes]) -> None:
        try:
            sock.send_multipart(reply, zmq.NOBLOCK)
        except zmq.Again:
            self.refused += 1  # the peer does not read its replies: its queue is full, drop this one
        except zmq.ZMQError:
            logger.exception("replay: sending a reply failed")

    def _payer(self, key: str, frames: list[bytes]) -> bytes:
        # One budget per user (all its keys and connections), per key without an owner,
        # per connection (ROUTER identity) without CURVE.
        if not key:
            return b"connection:" + (frames[0] if frames else b"")
        if self._owner_of is None:
            return f"key:{key}".encode()
        return self._owner_of(key).encode()

    def _sender(self, frame: zmq.Frame, now: float) -> str | None:
        # The key that sent the request ("" without CURVE), or None: cut off, no answer.
        if self._peers is None:
            return ""
        try:
            return self._peers.on_message(frame, now=now)
        except Exception:  # a bug in the bookkeeping costs one request, never the service
            logger.exception("replay: telling the peer apart failed")
            return None

    def _is_delayed_only(self, key: str) -> bool:
        # ZAP put the CURVE key that sent the request on its frames (the book read it).
        if self._delayed_only is None:
            return False
        return self._delayed_only(key)  # "" (no key known): the least
