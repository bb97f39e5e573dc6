"""CURVE keys and the ZAP handler of an adapter's tcp sockets (the shell around :mod:`adapter.access`).

An adapter with ``--curve-key`` serves its line and replay service as a CURVE
server with its own long-term key pair (its public key is registered with
the admin server, which hands it to subscribers with the routes), and its
sync bus with the group's key pair (``--sync-key``: every adapter of the
channel has it; nothing else may speak on the bus). The ZAP handler
(:mod:`adapter.zap_server`) runs on its own thread and asks :class:`Gatekeeper`
about each new connection. Each socket's :class:`~adapter.peers.PeerBook` knows
who is connected, so a revoked key is cut off alone; with ``--source-key``
the source link is CURVE too (the adapter verifies the source).

The access table is not the shell's: the core's
:class:`~adapter.core.access_desk.AccessDesk` owns it and publishes a frozen
:class:`~adapter.access.AccessView` after each change (:meth:`DataPlaneGuard.publish`
swaps the reference). The ZAP thread and the peer books read that view, and
the ZAP thread sends the keys it let in back as events (a bounded queue the
loop drains, :meth:`DataPlaneGuard.events`).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Final

import zmq

from feedha.adapter.access import CONFLATED, DELAYED, LINE, REPLAY, SNAPSHOT, SYNC, AccessView
from feedha.adapter.config import AdapterConfig
from feedha.adapter.curve_keys import CurveKeys, load_keys, read_public_keys, write_keys
from feedha.adapter.peers import MAX_MESSAGE_BYTES, MESSAGES_PER_TURN, PeerBook
from feedha.adapter.zap_server import ZapServer
from feedha.transport import readable

logger = logging.getLogger(__name__)

# Admissions waiting for the loop to read them; past this the oldest are lost, and the loop is
# told so (every blind socket is then bound afresh at the next revocation's pace).
MAX_ADMISSIONS: Final = 65_536

__all__ = [
    "CurveKeys",
    "DataPlaneGuard",
    "Gatekeeper",
    "load_keys",
    "read_public_keys",
    "secure_server",
    "write_keys",
]


def secure_server(sock: zmq.Socket[Any], keys: CurveKeys, domain: str) -> None:
    """Make ``sock`` a CURVE server with ``keys``, checked by ZAP in ``domain`` (before bind)."""
    sock.curve_server = True
    sock.curve_secretkey = keys.secret
    sock.curve_publickey = keys.public
    sock.zap_domain = domain.encode()


class Gatekeeper:
    """The ZAP answers: subscribers by the access view, the sync bus by the group key.

    Args:
        context: the ZeroMQ context whose sockets it guards.
        access: the access table as the core last published it (a frozen view).
        admitted: told each subscriber key let in, and where (an event for the core).
        sync_public: the group's public key (only it may connect to the sync bus), or ``None``.
        books: the sockets' peer books by ZAP domain (a key at its cap there is refused).
    """

    def __init__(
        self,
        context: zmq.Context[Any],
        access: Callable[[], AccessView],
        admitted: Callable[[str, str], None],
        sync_public: bytes | None,
        books: dict[str, PeerBook] | None = None,
    ) -> None:
        self._access, self._admitted = access, admitted
        self.books = books or {}  # by ZAP domain: who is connected where (their caps)
        self._sync_public = None if sync_public is None else sync_public.decode("ascii")
        # A subscriber key may be granted a moment after its handshake: it waits; the sync key cannot.
        self._server = ZapServer(context, self.callback, waits=lambda domain: domain != SYNC)

    def __repr__(self) -> str:
        return f"<Gatekeeper [keys={len(self._access())}, {self._server!r}]>"

    @property
    def refused(self) -> dict[str, int]:
        """Connections refused, by domain."""
        domains = (LINE, DELAYED, REPLAY, SNAPSHOT, SYNC, CONFLATED)
        return {domain: self._server.refused.get(domain, 0) for domain in domains}

    def start(self) -> None:
        self._server.start()

    def stop(self) -> None:
        self._server.stop()

    def callback(self, domain: str, key: str) -> bool:
        """May ``key`` (Z85) connect to ``domain`` now? (on the ZAP thread)."""
        if domain == SYNC:
            return self._sync_public is not None and key == self._sync_public
        book = self.books.get(domain)
        if book is not None and book.is_full(key):
            return False  # it holds its cap of connections here already: it waits, then is refused
        if not self._access().allows(domain, key, time.time_ns()):
            return False
        self._admitted(domain, key)
        return True


class DataPlaneGuard:
    """All of CURVE for one adapter: its keys, the access table, the ZAP thread, who is connected where.

    Args:
        adapter: this adapter's number.
        keys: its own key pair for line and replay (``None``: they are open).
        sync_keys: the group's key pair for the sync bus (``None``: it is open).
        static_grants: subscriber keys admitted as long as the adapter runs (``--grant-keys``).
        source_public: the feed source's public key: the source link is CURVE, the source
            verified by it (``None``: a plain source link).
    """

    def __init__(
        self,
        *,
        adapter: int,
        keys: CurveKeys | None,
        sync_keys: CurveKeys | None,
        static_grants: tuple[str, ...] = (),
        source_public: bytes | None = None,
    ) -> None:
        self.adapter = adapter
        self.keys, self.sync_keys, self.source_public = keys, sync_keys, source_public
        self.permanent = frozenset(static_grants)
        # The access table as the core last published it: replaced whole, never changed (publish).
        self.view = AccessView(permanent=self.permanent)
        self.rebinds = 0
        self._admissions: deque[tuple[str, str]] = deque()  # appended by the ZAP thread only
        self._admissions_lost = False
        self._told_blind: set[str] = set()
        self._gate: Gatekeeper | None = None
        view = self.current
        self.books = {
            LINE: PeerBook(LINE, LINE, view),
            DELAYED: PeerBook(DELAYED, DELAYED, view),
            SNAPSHOT: PeerBook(SNAPSHOT, SNAPSHOT, view),  # real-time data: admitted like the line
            CONFLATED: PeerBook(CONFLATED, CONFLATED, view),
            REPLAY: PeerBook(REPLAY, REPLAY, view, listener=False),
        }

    @classmethod
    def from_config(cls, config: AdapterConfig) -> DataPlaneGuard:
        """The guard of the key files an adapter was started with.

        Raises:
            ConfigError: a key file that cannot be read or is readable by others.
        """
        keys = None if config.curve_key is None else load_keys(config.curve_key)
        source = None if config.source_key is None else read_public_keys(config.source_key)
        return cls(
            adapter=config.adapter,
            keys=keys,
            sync_keys=None if config.sync_key is None else load_keys(config.sync_key),
            static_grants=() if config.grant_keys is None else read_public_keys(config.grant_keys),
            source_public=source[0].encode() if source else None,
        )

    def __repr__(self) -> str:
        curve, sync = self.keys is not None, self.sync_keys is not None
        return f"<DataPlaneGuard [curve={curve}, sync={sync}, keys={len(self.view)}]>"

    @property
    def enabled(self) -> bool:
        return self.keys is not None or self.sync_keys is not None

    @property
    def line_kind(self) -> int:
        """The line's socket type: an ``XPUB``, whose subscribers' subscriptions say who they are."""
        return zmq.XPUB

    def start(self, context: zmq.Context[Any]) -> None:
        """Start the ZAP handler (before any socket binds)."""
        if not self.enabled:
            logger.warning(
                "no --curve-key/--sync-key: line, replay service and sync bus are open to anyone "
                "(allowed on loopback, or with --insecure)"
            )
            return
        self._gate = Gatekeeper(
            context,
            self.current,
            self._admitted,
            None if self.sync_keys is None else self.sync_keys.public,
            books={book.domain: book for book in self.books.values()},
        )
        self._gate.start()

    def stop(self) -> None:
        for book in self.books.values():
            book.detach()
        if self._gate is not None:
            self._gate.stop()

    # ---- sockets ---------------------------------------------------------------------------

    def secure(self, sock: zmq.Socket[Any], where: str) -> None:
        """Set up a line, delayed line, conflated line, snapshot line or replay socket before it binds.

        Every one takes small messages only (``MAXMSGSIZE``); with a key it is a CURVE
        server checked by ZAP, and its :class:`PeerBook` watches its connections.
        """
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
        if sock.type == zmq.XPUB:
            sock.setsockopt(zmq.XPUB_VERBOSE, 1)  # every subscription comes up: it names its sender
        if self.keys is None:
            return
        secure_server(sock, self.keys, where)
        self.books[where].attach(sock)

    def serve(self, where: str, sock: zmq.Socket[Any], *, now: float) -> None:
        """A listener socket's turn (line, delayed line, snapshot line): read its peers, cut off who must go.

        Call every turn of the thread that owns ``sock``, even without CURVE: an
        ``XPUB`` keeps what its peers send until it is read.
        """
        if self.keys is None:
            _discard(sock)
            return
        try:
            self.books[where].drain(sock, now=now)
        except Exception:  # a bug in the bookkeeping must never cost the line a turn
            logger.exception("%s: serving the peers failed", where)

    def secure_sync(self, pub: zmq.Socket[Any], sub: zmq.Socket[Any]) -> None:
        """The sync bus: a CURVE server to the peers, a CURVE client of theirs, both with the group key."""
        if self.sync_keys is None:
            return
        secure_server(pub, self.sync_keys, SYNC)
        sub.curve_secretkey = self.sync_keys.secret
        sub.curve_publickey = self.sync_keys.public
        sub.curve_serverkey = self.sync_keys.public

    def secure_source(self, sub: zmq.Socket[Any]) -> None:
        """The source link: a CURVE client of the feed source, which it verifies by its public key.

        The adapter presents its own key pair (the source admits the adapters' public keys).
        Call before the socket connects.
        """
        if self.source_public is None or self.keys is None:
            return
        sub.curve_serverkey = self.source_public
        sub.curve_publickey = self.keys.public
        sub.curve_secretkey = self.keys.secret

    # ---- the access table's view, and what the threads saw ----------------------------------

    def current(self) -> AccessView:
        """The access table as the core last published it (any thread)."""
        return self.view

    def publish(self, view: AccessView) -> None:
        """The core changed the access table: read ``view`` from now on (one reference swapped)."""
        self.view = view

    def is_delayed_only(self, key: str) -> bool:
        """Whether ``key`` may have delayed data only, by the current view (the replay service)."""
        return self.view.is_delayed_only(key)

    def owner_of(self, key: str) -> str:
        """The budget ``key`` counts against, by the current view (the replay service)."""
        return self.view.owner_of(key)

    def _admitted(self, where: str, key: str) -> None:
        # On the ZAP thread: an event for the core (deque appends and pops are atomic).
        if len(self._admissions) >= MAX_ADMISSIONS:
            self._admissions_lost = True
            return
        self._admissions.append((where, key))

    def events(self) -> tuple[list[tuple[str, str]], set[str], bool]:
        """What the threads saw since last asked (the loop's thread): the keys ZAP let in and where,
        the sockets newly found unable to tell peers apart, and whether admissions were lost."""
        queue = self._admissions
        admitted = [queue.popleft() for _ in range(len(queue))] if queue else []
        lost, self._admissions_lost = self._admissions_lost, False
        if self.keys is None:
            return admitted, set(), lost  # no book watches a socket (every turn of the loop asks)
        blind = {where for where, book in self.books.items() if book.blind} - self._told_blind
        self._told_blind |= blind
        return admitted, blind, lost

    def rebound(self, where: str) -> None:
        """The sockets serving ``where`` were bound afresh (counted)."""
        self.rebinds += 1

    def status(self) -> dict[str, Any]:
        refused = {} if self._gate is None else dict(self._gate.refused)
        return {
            "curve": self.keys is not None,
            "granted_keys": len(self.view),
            "refused": refused,
            "rebinds": self.rebinds,
            "table_full": self.view.full,
            "peers": {where: book.status() for where, book in self.books.items()},
        }


def _discard(sock: zmq.Socket[Any]) -> None:
    # An open line (no CURVE) has nobody to tell apart; what its peers send is just dropped.
    # Asked, not tried: a subscription is rare, and a receive that fails costs an exception.
    for _ in range(MESSAGES_PER_TURN):
        if not readable(sock):
            return
        try:
            sock.recv(zmq.NOBLOCK, copy=False)
        except zmq.Again:
            return
