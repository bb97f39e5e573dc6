"""Who is connected to one data-plane socket, by CURVE key: cut off one peer, cap the connections of a key.

Theory of operation
-------------------
ZAP is asked once per connection, so a key that loses access while it is
connected must be cut off by other means. Binding the socket afresh (what
adapters did first) cuts off *every* peer: all of them reconnect, and the
packets sent meanwhile are lost on that line for everyone. A
:class:`PeerBook` cuts off the revoked peer alone:

* it learns each connection's key from what the peer sends: a subscriber's
  subscription on a line (an ``XPUB`` with ``XPUB_VERBOSE``), a request on
  the replay service (a ``ROUTER``). libzmq puts on each message the key
  (``User-Id``: ZAP's answer, see :func:`zap_user_id`) and the file
  descriptor it came from (``ZMQ_SRCFD``); the book keeps, per descriptor,
  the socket's inode (so a descriptor number reused by a later connection
  is never mistaken for the earlier one) and the key;
* a number read late may have gone to *any* socket of the process meanwhile
  (a health probe's, the admin link's, the source link's), so the book
  learns a descriptor only when its socket's local address is the one its
  own socket listens on (:class:`Listening`): only a connection that socket
  accepted has it;
* a socket monitor tells it which connections were accepted, so a peer that
  never says anything is known too (and, on a line, cut off after
  :data:`IDLE_GRACE_S`: a subscriber always subscribes at once);
* at each turn of its owner thread (:meth:`PeerBook.serve`), when the access
  table's version moved or a grant may have expired, it asks the table about
  every connected key and cuts off the connections of those that lost
  access: ``shutdown(2)`` on a duplicate of the descriptor, after checking
  that it still names the same socket. libzmq sees that one connection end;
  the peer reconnects, and ZAP refuses it. A socket whose address the book
  cannot read (a transport other than TCP and IPC) is ``blind``: the adapter
  binds it afresh instead.

The book also caps the connections of one key (:data:`MAX_CONNECTIONS_PER_KEY`):
a key that opens more has the newest cut off as soon as it is known, so one
subscriber cannot pile up connections (and the replies queued on them); and
while a key holds its cap, ZAP refuses it another connection
(:meth:`PeerBook.is_full`) -- libzmq does not dial again after a refusal, so a
hoarder's extra sockets go quiet instead of reconnecting and being cut off
over and over.

Why ``User-Id`` carries a serial: a message may be read after its connection
closed and its descriptor number went to a newer connection of the same
socket (one of another socket is never learned, above). ZAP numbers the
connections it admits in order (:func:`zap_user_id`), and a descriptor only
ever goes to a later connection, so the book keeps, per descriptor and
inode, the key of the highest serial it saw. A stale message read *before*
the newer connection said anything may still name it for a moment: the cost
is at most one needless cut-off of that connection (it reconnects), never a
revoked key kept -- every message is checked against the table with its own
key, and a line only sends to a peer after that peer's own subscription,
whose serial wins.

A book belongs to the thread that owns its socket; it only reads the access
table (GIL-atomic dict lookups).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import zmq

from feedha.adapter.access import AccessView
from feedha.transport import readable

logger = logging.getLogger(__name__)

__all__ = ["IDLE_GRACE_S", "MAX_CONNECTIONS_PER_KEY", "Listening", "PeerBook", "split_user_id", "zap_user_id"]

MAX_CONNECTIONS_PER_KEY: Final = 8  # per socket; a subscriber needs one (two while it reconnects)
IDLE_GRACE_S: Final = 5.0  # a line peer that has not subscribed by then is cut off
MAX_IDLE_PEERS: Final = 256  # peers that never spoke kept per socket; the oldest is cut off past it
SWEEP_S: Final = 0.25  # grants expire by the clock: the book checks its peers at least this often
MESSAGES_PER_TURN: Final = 1000  # subscriptions read per turn at most (the rest wait for the next)
MAX_MESSAGES_PER_PEER: Final = 64  # a line subscriber sends its subscription; one that chatters is cut off
# A data-plane socket takes tiny messages only (subscriptions, 28-byte replay requests); libzmq
# applies the limit to the CURVE handshake too, whose INITIATE is ~300 bytes.
MAX_MESSAGE_BYTES: Final = 1024
_GONE: Final = (int(zmq.EVENT_DISCONNECTED), int(zmq.EVENT_CLOSED))
MAX_RETIRED: Final = 64  # monitors of closed sockets kept open before the oldest is closed


def zap_user_id(key: str, serial: int) -> str:
    """The ``User-Id`` ZAP gives a connection: its Z85 key, a space, and the connection's serial."""
    return f"{key} {serial}"


def split_user_id(user_id: str) -> tuple[str, int]:
    """``(key, serial)`` of a :func:`zap_user_id` (a bare key has serial 0)."""
    key, _space, serial = user_id.partition(" ")
    return key, int(serial) if serial.isdigit() else 0


@dataclass(slots=True)
class _Peer:
    inode: int
    since: float
    key: str = ""  # "" until the peer said something
    serial: int = 0
    messages: int = 0


@dataclass(frozen=True, slots=True)
class Listening:
    """Where a bound socket listens: the local address of every connection it accepted.

    ``tcp``: a port, and an address unless the socket listens on all of them;
    ``ipc``: a path (an abstract one starts with NUL, as ``getsockname`` says it).
    """

    port: int = 0
    host: ipaddress.IPv4Address | ipaddress.IPv6Address | None = None
    path: str = ""

    @classmethod
    def parse(cls, endpoint: str) -> Listening | None:
        """From ``ZMQ_LAST_ENDPOINT`` (``tcp://127.0.0.1:5556``, ``tcp://[::]:5556``, ``ipc:///x``).

        Returns:
            ``None`` for another transport, or one not bound yet.
        """
        scheme, _sep, rest = endpoint.partition("://")
        if scheme == "ipc" and rest:
            return cls(path="\0" + rest[1:] if rest.startswith("@") else rest)
        if scheme != "tcp":
            return None
        host, _colon, port = rest.rpartition(":")
        try:
            address = ipaddress.ip_address(host.strip("[]").partition("%")[0])
            number = int(port)
        except ValueError:
            return None
        return cls(port=number, host=None if address.is_unspecified else address) if number > 0 else None

    def accepted(self, descriptor: int) -> bool:
        """Whether ``descriptor`` is a connection with this local address (not the listener; errors: no)."""
        try:
            duplicate = os.dup(descriptor)
        except OSError:
            return False
        try:
            with socket.socket(fileno=duplicate) as sock:
                duplicate = -1  # the socket object closes it
                family, local = sock.family, sock.getsockname()
                if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                    return False  # the listening socket itself: never a peer
        except OSError:
            return False
        finally:
            if duplicate >= 0:
                os.close(duplicate)
        if self.path:
            return family == socket.AF_UNIX and local in (self.path, self.path.encode())
        if family not in (socket.AF_INET, socket.AF_INET6) or local[1] != self.port:
            return False
        if self.host is None:
            return True
        address = ipaddress.ip_address(local[0].partition("%")[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return address == self.host


class PeerBook:
    """The connections of one socket and their keys; cuts off the ones that must go.

    Args:
        name: the socket's name in logs and counters (``line``, ``replay`` ...).
        domain: the access table's name for the socket (``line``, ``delayed``, ``replay``).
        access: the access table as the core last published it (a frozen view, swapped by reference).
        listener: whether peers must speak at once (a line: subscribers subscribe as they connect).
        max_per_key: connections one key may hold on this socket.
    """

    def __init__(
        self,
        name: str,
        domain: str,
        access: Callable[[], AccessView],
        *,
        listener: bool = True,
        max_per_key: int = MAX_CONNECTIONS_PER_KEY,
    ) -> None:
        self.name, self.domain, self._access = name, domain, access
        self._listener = listener
        self._max_per_key = max_per_key
        self._peers: dict[int, _Peer] = {}  # by file descriptor
        self._per_key: dict[str, int] = {}  # connections known per key
        self._full: frozenset[str] = frozenset()  # keys at their cap: a frozen set the ZAP thread reads
        self._monitor: zmq.Socket[bytes] | None = None
        self._sock: zmq.Socket[Any] | None = None
        self._listening: Listening | None = None  # read from the socket at its first connection
        self._listening_read = False
        self._version = -1
        self._next_sweep = 0.0
        self.blind = False  # libzmq says nothing of descriptors: fall back to rebinding
        self.cut = {"revoked": 0, "over_cap": 0, "idle": 0, "noisy": 0}

    @property
    def table(self) -> AccessView:
        """The access table as the core last published it (frozen)."""
        return self._access()

    def __repr__(self) -> str:
        known = sum(1 for peer in self._peers.values() if peer.key)
        return f"<PeerBook {self.name} [peers={len(self._peers)}, known={known}, cut={self.cut}]>"

    # ---- the socket ------------------------------------------------------------------

    def attach(self, sock: zmq.Socket[Any]) -> None:
        """Watch ``sock``'s connections (call before it binds; a new socket forgets the old peers)."""
        self.detach()
        self._peers.clear()
        self._per_key.clear()
        self._full = frozenset()
        self._sock, self._listening, self._listening_read = sock, None, False
        try:
            # Every event: a monitor with a mask, once closed, left libzmq 4.3.4 sending no ZAP
            # request of that context to a later handler (measured); the others are skipped.
            self._monitor = sock.get_monitor_socket()
        except zmq.ZMQError as exc:  # without a monitor only peers that speak are known
            logger.warning("%s: no socket monitor (%s)", self.name, exc)

    def detach(self) -> None:
        """Stop watching (after the socket closed: closing it ends libzmq's side of the monitor)."""
        if self._monitor is not None:
            _retire(self._monitor)
            self._monitor = None
        self._sock = None

    def status(self) -> dict[str, Any]:
        return {"peers": len(self._peers), "cut": dict(self.cut), "blind": self.blind}

    def is_full(self, key: str) -> bool:
        """Whether ``key`` holds its cap of connections here (ZAP then refuses it another; any thread)."""
        return key in self._full

    def _forget(self, descriptor: int) -> _Peer | None:
        peer = self._peers.pop(descriptor, None)
        if peer is not None and peer.key:
            left = self._per_key.get(peer.key, 1) - 1
            if left > 0:
                self._per_key[peer.key] = left
            else:
                self._per_key.pop(peer.key, None)
            if peer.key in self._full and left < self._max_per_key:
                self._full = self._full - {peer.key}
        return peer

    def _remember(self, descriptor: int, peer: _Peer) -> None:
        self._forget(descriptor)
        self._peers[descriptor] = peer
        if peer.key:
            held = self._per_key[peer.key] = self._per_key.get(peer.key, 0) + 1
            if held >= self._max_per_key and peer.key not in self._full:
                self._full = self._full | {peer.key}  # a new frozen set, swapped by reference

    # ---- what peers send ---------------------------------------------------------------

    def on_message(self, frame: zmq.Frame, *, now: float) -> str | None:
        """Learn who sent ``frame``; ``None`` when that peer was just cut off (drop what it sent).

        Returns:
            The sender's key ("" on a socket without CURVE), or ``None``.
        """
        try:
            user_id = frame.get("User-Id")
        except zmq.ZMQError:
            user_id = ""  # no CURVE on this socket: peers are told apart by descriptor only
        key, serial = split_user_id(user_id if isinstance(user_id, str) else "")
        # Whatever else is known of its connection, a message counts only if its own key may be here.
        allowed = not key or self.table.allows(self.domain, key, time.time_ns())
        try:
            descriptor = int(frame.get(zmq.SRCFD))
        except (zmq.ZMQError, TypeError, ValueError):
            self.blind = True
            return key if allowed else None
        inode = self._own(descriptor)
        if inode is None:
            return key if allowed else None  # its connection is gone already
        peer = self._peers.get(descriptor)
        if peer is None or peer.inode != inode:
            peer = _Peer(inode=inode, since=now)
            self._remember(descriptor, peer)
        if serial < peer.serial:
            # Read after its connection ended: the descriptor is a newer peer's now (not cut).
            return key if allowed else None
        peer.messages += 1
        if self._listener and (
            peer.messages > MAX_MESSAGES_PER_PEER or frame.bytes[:1] not in (b"\x00", b"\x01")
        ):
            self._cut(descriptor, "noisy")  # a line's peer only subscribes (and unsubscribes)
            return None
        if peer.key != key:
            self._remember(descriptor, _Peer(inode=inode, since=peer.since, key=key, serial=serial))
            peer = self._peers[descriptor]
            peer.messages = 1
            if self._over_cap(key):
                self._cut(descriptor, "over_cap")
                return None
        if not allowed:
            self._cut(descriptor, "revoked")
            return None
        return key

    def _own(self, descriptor: int) -> int | None:
        """The inode behind ``descriptor`` if it is a connection this book's socket accepted, else None.

        A descriptor that names the same inode as a known peer is that peer; this is for
        learning a new one, whose number may have gone to any socket of the process.
        """
        inode = _inode(descriptor)
        peer = self._peers.get(descriptor)
        if inode is None or (peer is not None and peer.inode == inode):
            return inode
        if not self._listening_read and self._sock is not None:
            # A connection exists, so the socket is bound: where it listens is known now.
            try:
                endpoint = self._sock.get(zmq.LAST_ENDPOINT)
            except zmq.ZMQError:
                return None
            self._listening_read = True
            self._listening = Listening.parse(endpoint.decode() if isinstance(endpoint, bytes) else "")
            if self._listening is None:
                logger.warning(
                    "%s: cannot tell its connections by address (%r): it rebinds", self.name, endpoint
                )
                self.blind = True
        return inode if self._listening is not None and self._listening.accepted(descriptor) else None

    def _over_cap(self, key: str) -> bool:
        return bool(key) and self._per_key.get(key, 0) > self._max_per_key

    # ---- each turn -----------------------------------------------------------------------

    def drain(self, sock: zmq.Socket[Any], *, now: float) -> None:
        """A line's turn: read what its subscribers sent (bounded), then :meth:`serve`.

        An ``XPUB`` keeps every message its peers send until it is read, so the
        owner calls this every turn, whatever else it does.
        """
        for _ in range(MESSAGES_PER_TURN):
            if not readable(sock):  # asked, not tried: a receive that fails costs an exception
                break
            try:
                frame = sock.recv(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                break
            self.on_message(frame, now=now)
        self.serve(now=now)

    def serve(self, *, now: float) -> None:
        """Read the monitor's events; cut off peers that lost access, or stayed silent too long."""
        self._read_monitor(now)
        if self.table.version != self._version or now >= self._next_sweep:
            self._version = self.table.version
            self._next_sweep = now + SWEEP_S
            self._sweep(now)

    def _read_monitor(self, now: float) -> None:
        monitor = self._monitor
        if monitor is None:
            return
        for _ in range(MESSAGES_PER_TURN):
            if not readable(monitor):
                return
            try:
                frames = monitor.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if len(frames) < 2 or len(frames[0]) < 6:
                continue
            event = int.from_bytes(frames[0][:2], "little")
            descriptor = int.from_bytes(frames[0][2:6], "little")
            if event == zmq.EVENT_ACCEPTED:
                inode = self._own(descriptor)
                known = self._peers.get(descriptor)
                if inode is not None and (known is None or known.inode != inode):  # not heard from yet
                    self._remember(descriptor, _Peer(inode=inode, since=now))
                    self._limit_idle()
            elif event in _GONE:  # forget it unless the number already names a newer connection
                peer = self._peers.get(descriptor)
                if peer is not None and _inode(descriptor) != peer.inode:
                    self._forget(descriptor)

    def _sweep(self, now: float) -> None:
        now_ns = time.time_ns()
        for descriptor, peer in list(self._peers.items()):
            if _inode(descriptor) != peer.inode:
                self._forget(descriptor)  # ended, and its descriptor is free or someone else's
            elif peer.key and not self.table.allows(self.domain, peer.key, now_ns):
                self._cut(descriptor, "revoked")
            elif not peer.key and self._listener and now - peer.since > IDLE_GRACE_S:
                self._cut(descriptor, "idle")

    def _limit_idle(self) -> None:
        silent = [(peer.since, fd) for fd, peer in self._peers.items() if not peer.key]
        if len(silent) > MAX_IDLE_PEERS:
            self._cut(min(silent)[1], "idle")

    def _cut(self, descriptor: int, why: str) -> None:
        peer = self._forget(descriptor)
        if peer is None:
            return
        if _shutdown(descriptor, peer.inode):
            self.cut[why] += 1
            logger.info("%s: cut off a connection of key %s (%s)", self.name, peer.key[:8] or "?", why)


_retired: list[zmq.Socket[bytes]] = []  # monitors of closed sockets, oldest first


def _retire(monitor: zmq.Socket[bytes]) -> None:
    # Not closed at once: closing a monitor's socket while libzmq may still hold its other end
    # (a socket closes asynchronously) left libzmq 4.3.4 sending no ZAP request of that context
    # to a later handler (measured). A process retires a few (an adapter has four such
    # sockets, bound afresh only on the fallback): the oldest are long finished with.
    _retired.append(monitor)
    while len(_retired) > MAX_RETIRED:
        _retired.pop(0).close(linger=0)


def _inode(descriptor: int) -> int | None:
    # A descriptor read from a message may be closed by now, or reused by a file: sockets only.
    try:
        info = os.fstat(descriptor)
    except OSError:
        return None
    return info.st_ino if stat.S_ISSOCK(info.st_mode) else None


def _shutdown(descriptor: int, inode: int) -> bool:
    """End the connection behind ``descriptor`` if it is still the socket ``inode`` (libzmq closes it)."""
    try:
        duplicate = os.dup(descriptor)
    except OSError:
        return False
    try:
        if _inode(duplicate) != inode:
            return False  # the number went to another socket (or file) meanwhile: not ours to end
        with socket.socket(fileno=duplicate) as sock:
            duplicate = -1  # the socket object closes it
            sock.shutdown(socket.SHUT_RDWR)
        return True
    except OSError:
        return False
    finally:
        if duplicate >= 0:
            os.close(duplicate)
