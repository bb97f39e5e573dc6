"""When data-plane access changes take effect: the admin server's grants, expiries, rebinds.

Who holds which key, and who is connected with it, is the shell's
(:class:`adapter.zap.DataPlaneGuard`: the ZAP thread and the sockets' monitors
read and write it). *When* things happen is decided here, as state of the core:

- a replacement of all grants comes in parts; the keys none of the parts named
  lose access once no part came for :data:`REPLACE_WINDOW_S`;
- grants expire: the guard is asked to drop expired ones every
  :data:`EXPIRY_CHECK_S`;
- a socket whose peers cannot be told apart (ZAP is asked at connection time
  only) must be bound afresh to cut off a revoked key, so every peer
  reconnects; that happens at most once every :data:`REBIND_INTERVAL_S` per
  socket, whatever the churn of revocations.

The desk turns :class:`AccessChange` and :class:`SealChange` inputs into the
shell's actions, and the sockets the guard reports as needing a rebind into
:class:`~adapter.core.actions.Rebind` actions when they fall due.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from feedha.adapter.core import actions as act
from feedha.proto.seal import SealKey

__all__ = [
    "EXPIRY_CHECK_S",
    "REBIND_INTERVAL_S",
    "REPLACE_WINDOW_S",
    "AccessChange",
    "AccessDesk",
    "SealChange",
]

#: how often expired grants are looked for
EXPIRY_CHECK_S: Final = 0.25
#: the least time between two rebinds of one socket: a flood of revocations
#: costs the honest peers one reconnection per interval, not one per revocation.
REBIND_INTERVAL_S: Final = 2.0
#: the parts of one replacement of all grants arrive within this of each other
REPLACE_WINDOW_S: Final = 1.0


@dataclass(frozen=True, slots=True)
class AccessChange:
    """Subscriber keys granted or revoked by the admin server.

    Attributes:
        grants: ``(Z85 key, expires_at_ns, delayed_only, conflated_only, owner)`` each.
        revoke: the keys lose access (otherwise they gain it).
        replace: a part of a replacement of every grant.
    """

    grants: tuple[act.GrantTuple, ...]
    revoke: bool
    replace: bool


@dataclass(frozen=True, slots=True)
class SealChange:
    """The admin server's packet key for this channel's multicast line."""

    key: SealKey


class AccessDesk:
    """The timing of access changes (see the module docstring)."""

    def __init__(self) -> None:
        self._replace_part_at: float | None = None
        self._next_expiry_check = 0.0
        self._rebind_at: dict[str, float] = {}
        self._last_rebind: dict[str, float] = {}

    def __repr__(self) -> str:
        return f"<AccessDesk [replacing={self._replace_part_at is not None}, due={sorted(self._rebind_at)}]>"

    def on_change(self, change: AccessChange | SealChange, *, now: float) -> list[act.Action]:
        """An access or seal change from the admin server: what the shell applies."""
        if isinstance(change, SealChange):
            return [act.UseSealKey(change.key)]
        if change.replace and not change.revoke:
            self._replace_part_at = now
        return [act.ChangeAccess(change.grants, revoke=change.revoke, replace=change.replace)]

    def on_rebind_wanted(self, where: frozenset[str], *, now: float) -> None:
        """The guard found a revoked key connected to ``where`` (sockets that cannot cut off one peer)."""
        for socket_name in where:
            at = max(now, self._last_rebind.get(socket_name, -REBIND_INTERVAL_S) + REBIND_INTERVAL_S)
            self._rebind_at.setdefault(socket_name, at)

    def on_tick(self, *, now: float, wall_ns: int) -> list[act.Action]:
        """Due work: the end of a replacement, the expiry check, rebinds."""
        if now < self._next_expiry_check and not self._rebind_at and self._replace_part_at is None:
            return []  # nothing due (the common turn)
        out: list[act.Action] = []
        if self._replace_part_at is not None and now - self._replace_part_at >= REPLACE_WINDOW_S:
            self._replace_part_at = None
            out.append(act.EndAccessReplace())
        if now >= self._next_expiry_check:
            self._next_expiry_check = now + EXPIRY_CHECK_S
            out.append(act.ExpireAccess(wall_ns))
        for where in sorted(w for w, at in self._rebind_at.items() if at <= now):
            del self._rebind_at[where]
            self._last_rebind[where] = now
            out.append(act.Rebind(where))
        return out

    def next_deadline(self) -> float:
        """When :meth:`on_tick` has work next (``inf``: none)."""
        due = [self._next_expiry_check, *self._rebind_at.values()]
        if self._replace_part_at is not None:
            due.append(self._replace_part_at + REPLACE_WINDOW_S)
        return min(due)
