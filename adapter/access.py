"""Who may connect to this adapter's lines and replay service: the CURVE keys the admin server granted.

Theory of operation
-------------------
With CURVE on (``--curve-key``), ZeroMQ asks the adapter's ZAP handler
(:mod:`adapter.zap`) about every new connection to the line, the replay
service and the sync bus. For the line and the replay service the answer is
this table: a subscriber key is accepted while the admin server's grant for
it lasts (``expires_at_ns``, its owner's token expiry). The admin server
keeps the table current (GRANT, REVOKE, and a full replacement when the link
(re)connects); the adapter also drops expired grants itself, so access ends
on time even while the admin server is down.

ZAP is only asked when a connection is made, so taking access away from a
key that is connected needs more. Each socket keeps a :class:`~adapter.peers.PeerBook`
of its connections by key; the table's :attr:`AccessTable.version` grows
whenever a key loses access (revoked, expired, turned delayed-only), and at
the next turn each book checks its connected keys with :meth:`AccessTable.allows`
and cuts off the connections of the keys that lost access -- those only; every
other subscriber keeps its connection and loses nothing. Where a book cannot
tell connections apart (a libzmq without ``ZMQ_SRCFD``), the table also
remembers which keys were let in on each socket since it was last bound, and
:meth:`AccessTable.revoke` says which sockets must be bound afresh (the
fallback: every peer reconnects and is checked again). Pure: the time is
passed in.

One owner: the table belongs to the adapter core's
:class:`~adapter.core.access_desk.AccessDesk`, on the loop's thread, which
changes it (grants, revocations, replacements, expiry) and records whom ZAP
let in where (the ZAP thread sends that as an event). Every other thread --
the ZAP handler, the sockets' peer books, the replay service -- reads an
:class:`AccessView`: a frozen copy the desk publishes after each change,
handed over in one assignment.

A grant may be *delayed only*: the key then connects to the delayed line and
the replay service, never to the real-time line, and the replay service
answers it delayed ranges only (``is_delayed_only``). A grant may be
*conflated only*: the key then connects to the conflated line only (never the
real-time line, its replays or images); a grant both delayed and conflated
only reaches both of those lines. A key whose grant turns limited while it is
connected where it may no longer be is cut off from there like a revoked one.

A grant names the key's *owner* (the user whose subscriptions carry it):
:meth:`AccessTable.owner_of` is what the replay service budgets by, so all
the keys of one user share one budget. A key without an owner (a permanent
``--grant-keys`` key, a grant from an older admin server) is its own owner.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

__all__ = [
    "CONFLATED",
    "DELAYED",
    "LINE",
    "REPLAY",
    "SNAPSHOT",
    "SYNC",
    "AccessTable",
    "AccessView",
    "Grant",
]

LINE: Final = "line"
DELAYED: Final = "delayed"  # the delayed line
REPLAY: Final = "replay"
SYNC: Final = "sync"
SNAPSHOT: Final = "snapshot"  # the snapshot line: real-time data, admitted like the line
CONFLATED: Final = "conflated"  # the conflated line: real-time states at each interval's end
# Where a limited key may go: delayed-only keys the delayed line and delayed replays,
# conflated-only keys the conflated line; both kinds, both. Never the line or images.
_DELAYED_ONLY: Final = frozenset({DELAYED, REPLAY})
_CONFLATED_ONLY: Final = frozenset({CONFLATED})
# (Z85 key, expires_at_ns[, delayed_only[, conflated_only[, owner]]])
Grant = (
    tuple[str, int] | tuple[str, int, bool] | tuple[str, int, bool, bool] | tuple[str, int, bool, bool, str]
)
MAX_KEYS: Final = 100_000  # grants held at most (a grant flood cannot grow the adapter without bound)


@dataclass(frozen=True, slots=True)
class AccessView:
    """The access table as it stood when published: frozen, read by any thread.

    Attributes:
        grants: each granted key's expiry (ns since the epoch).
        limited: a limited key -> the only places it may go.
        owners: a key -> who holds it, when named.
        permanent: keys admitted as long as the adapter runs (``--grant-keys``).
        version: grows each time a key loses access (the peer books check their peers again).
        full: grants refused because the table was full.
    """

    grants: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    limited: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))
    owners: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    permanent: frozenset[str] = frozenset()
    version: int = 0
    full: int = 0

    def __len__(self) -> int:
        return len(self.grants)

    def allows(self, where: str, key: str, now_ns: int) -> bool:
        """Whether ``key`` may be connected to ``where`` at ``now_ns``."""
        if key in self.permanent:
            return True
        expires = self.grants.get(key)
        if expires is None or expires <= now_ns:
            return False
        places = self.limited.get(key)
        return places is None or where in places

    def is_delayed_only(self, key: str) -> bool:
        """Whether ``key`` may have delayed data only (a key not granted at all: yes, the least)."""
        if key in self.permanent:
            return False
        return key in self.limited or key not in self.grants

    def owner_of(self, key: str) -> str:
        """The budget ``key`` counts against: ``user:OWNER``, or ``key:KEY`` when no owner was named."""
        owner = self.owners.get(key)
        return f"user:{owner}" if owner is not None else f"key:{key}"


class AccessTable:
    """Granted subscriber keys (Z85 text) with their expiry, and which sockets let each one in.

    Changed on one thread only (the core's); other threads read :meth:`view`.
    """

    def __init__(self, *, permanent: Iterable[str] = ()) -> None:
        self._grants: dict[str, int] = {}
        self._limited: dict[str, frozenset[str]] = {}  # a limited key -> the only places it may go
        self._owners: dict[str, str] = {}  # a key -> who holds it (AccessGrant.owner), when named
        self._permanent = frozenset(permanent)  # admitted as long as the adapter runs (--grant-keys)
        self._seen: dict[str, set[str]] = {
            LINE: set(),
            DELAYED: set(),
            REPLAY: set(),
            SNAPSHOT: set(),
            CONFLATED: set(),
        }
        self.granted = self.revoked = self.refused = self.full = 0
        self.version = 0  # grows each time a key loses access: the books check their peers again

    def __repr__(self) -> str:
        return f"<AccessTable [keys={len(self._grants)}, refused={self.refused}, revoked={self.revoked}]>"

    def __len__(self) -> int:
        return len(self._grants)

    def keys(self) -> list[str]:
        """The keys granted now."""
        return list(self._grants)

    def view(self) -> AccessView:
        """A frozen copy of the grants as they stand (for the other threads)."""
        return AccessView(
            grants=MappingProxyType(dict(self._grants)),
            limited=MappingProxyType(dict(self._limited)),
            owners=MappingProxyType(dict(self._owners)),
            permanent=self._permanent,
            version=self.version,
            full=self.full,
        )

    def grant(
        self,
        key: str,
        expires_at_ns: int,
        delayed_only: bool = False,
        conflated_only: bool = False,
        owner: str = "",
    ) -> set[str]:
        """Accept ``key`` until ``expires_at_ns``.

        ``delayed_only``: on the delayed line and for delayed replays only;
        ``conflated_only``: on the conflated line only; both: on either.
        ``owner``: who holds the key ("": the key is its own owner).

        Returns:
            The sockets to bind afresh: those a key connected to may no longer use.
        """
        if key not in self._grants and len(self._grants) >= MAX_KEYS:
            self.full += 1
            return set()
        old = self._grants.get(key)
        self._grants[key] = expires_at_ns
        self.granted += 1
        if owner:
            self._owners[key] = owner
        else:
            self._owners.pop(key, None)
        if old is not None and expires_at_ns < old:
            self.version += 1  # a shorter grant: connected peers are checked against it
        if not delayed_only and not conflated_only:
            self._limited.pop(key, None)
            return set()
        places = (_DELAYED_ONLY if delayed_only else frozenset()) | (
            _CONFLATED_ONLY if conflated_only else frozenset()
        )
        if self._limited.get(key) != places:
            self._limited[key] = places
            self.version += 1
        return {where for where, seen in self._seen.items() if key in seen and where not in places}

    def replace(self, grants: Iterable[Grant]) -> set[str]:
        """Accept exactly ``grants``; returns the sockets to bind afresh for the keys that lost access."""
        wanted = {grant[0]: grant for grant in grants}
        gone = [key for key in self._grants if key not in wanted]
        rebind = self.revoke(gone)
        for grant in wanted.values():
            rebind |= self.grant(*grant)
        return rebind

    def owner_of(self, key: str) -> str:
        """The budget ``key`` counts against (:meth:`AccessView.owner_of`)."""
        owner = self._owners.get(key)
        return f"user:{owner}" if owner is not None else f"key:{key}"

    def is_delayed_only(self, key: str) -> bool:
        """Whether ``key`` may have delayed data only (:meth:`AccessView.is_delayed_only`)."""
        if key in self._permanent:
            return False
        return key in self._limited or key not in self._grants

    def revoke(self, keys: Iterable[str]) -> set[str]:
        """Refuse ``keys`` from now on; returns the sockets (``line``, ``delayed``, ...) that let one in."""
        rebind: set[str] = set()
        for key in keys:
            if self._grants.pop(key, None) is not None:
                self.revoked += 1
                self.version += 1
            self._limited.pop(key, None)
            self._owners.pop(key, None)
            for where, seen in self._seen.items():
                if key in seen and key not in self._permanent:
                    rebind.add(where)
                    seen.discard(key)  # bounded: only keys that hold a grant stay remembered
        return rebind

    def expire(self, now_ns: int) -> set[str]:
        """Revoke every grant that has expired; returns the sockets to bind afresh."""
        return self.revoke([key for key, expires in self._grants.items() if expires <= now_ns])

    def allows(self, where: str, key: str, now_ns: int) -> bool:
        """Whether ``key`` may be connected to ``where`` at ``now_ns`` (a check; nothing counted)."""
        if key in self._permanent:
            return True
        expires = self._grants.get(key)
        if expires is None or expires <= now_ns:
            return False
        places = self._limited.get(key)
        return places is None or where in places

    def admits(self, where: str, key: str, now_ns: int) -> bool:
        """Whether ``key``, let in to ``where`` by ZAP, may be there at ``now_ns`` (remembered if so).

        ``False``: it lost access since (counted as refused): ``where`` holds a key that must go.
        """
        if not self.allows(where, key, now_ns):
            self.refused += 1
            return False
        seen = self._seen.get(where)
        if seen is not None:
            seen.add(key)
        return True

    def rebound(self, where: str) -> None:
        """``where`` was bound afresh: nobody is connected to it yet."""
        self._seen[where] = set()
