"""Who may connect to this adapter's line and replay service: the CURVE keys the admin server granted.

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
key that is connected needs more: the table remembers which keys were let in
on each socket since it was last bound, and :meth:`AccessTable.revoke` says
which sockets must be bound afresh (every peer reconnects, and the revoked
key is refused). Pure: the time is passed in; the ZAP thread reads the table
(plain dict lookups, atomic under the GIL).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

__all__ = ["LINE", "REPLAY", "SYNC", "AccessTable"]

LINE: Final = "line"
REPLAY: Final = "replay"
SYNC: Final = "sync"
MAX_KEYS: Final = 100_000  # grants held at most (a grant flood cannot grow the adapter without bound)


class AccessTable:
    """Granted subscriber keys (Z85 text) with their expiry, and which sockets let each one in."""

    def __init__(self, *, permanent: Iterable[str] = ()) -> None:
        self._grants: dict[str, int] = {}
        self._permanent = frozenset(permanent)  # admitted as long as the adapter runs (--grant-keys)
        self._seen: dict[str, set[str]] = {LINE: set(), REPLAY: set()}
        self.granted = self.revoked = self.refused = 0

    def __repr__(self) -> str:
        return f"<AccessTable [keys={len(self._grants)}, refused={self.refused}, revoked={self.revoked}]>"

    def __len__(self) -> int:
        return len(self._grants)

    def grant(self, key: str, expires_at_ns: int) -> None:
        """Accept ``key`` until ``expires_at_ns``."""
        if key not in self._grants and len(self._grants) >= MAX_KEYS:
            return
        self._grants[key] = expires_at_ns
        self.granted += 1

    def replace(self, grants: Iterable[tuple[str, int]]) -> set[str]:
        """Accept exactly ``grants``; returns the sockets to bind afresh for the keys that lost access."""
        wanted = dict(grants)
        gone = [key for key in self._grants if key not in wanted]
        rebind = self.revoke(gone)
        for key, expires in wanted.items():
            self.grant(key, expires)
        return rebind

    def revoke(self, keys: Iterable[str]) -> set[str]:
        """Refuse ``keys`` from now on; returns the sockets (``line``, ``replay``) that let one of them in."""
        rebind: set[str] = set()
        for key in keys:
            if self._grants.pop(key, None) is not None:
                self.revoked += 1
            rebind.update(where for where, seen in self._seen.items() if key in seen)
        return rebind

    def expire(self, now_ns: int) -> set[str]:
        """Revoke every grant that has expired; returns the sockets to bind afresh."""
        return self.revoke([key for key, expires in self._grants.items() if expires <= now_ns])

    def admits(self, where: str, key: str, now_ns: int) -> bool:
        """The ZAP answer for ``key`` connecting to ``where`` at ``now_ns`` (remembers whom it let in)."""
        expires = self._grants.get(key)
        if key in self._permanent:
            expires = now_ns + 1
        if expires is None or expires <= now_ns:
            self.refused += 1
            return False
        seen = self._seen.get(where)
        if seen is not None:
            seen.add(key)
        return True

    def rebound(self, where: str) -> None:
        """``where`` was bound afresh: nobody is connected to it yet."""
        self._seen[where] = set()
