"""The data plane's access table and its timing: the admin server's grants, expiries, rebinds.

The core owns who may connect where (:class:`AccessDesk`, on the loop's
thread): the :class:`~adapter.access.AccessTable` of granted keys and whom
ZAP let in on each socket, and *when* things happen:

- a replacement of all grants comes in parts; the keys none of the parts named
  lose access once no part came for :data:`REPLACE_WINDOW_S`;
- grants expire: expired ones are dropped every :data:`EXPIRY_CHECK_S`;
- a socket whose peers cannot be told apart (ZAP is asked at connection time
  only) must be bound afresh to cut off a revoked key, so every peer
  reconnects; that happens at most once every :data:`REBIND_INTERVAL_S` per
  socket, whatever the churn of revocations.

The other threads never touch the table: once a turn in which it changed the
desk publishes a frozen :class:`~adapter.access.AccessView` (a
:class:`~adapter.core.actions.PublishAccess` action from its tick; the shell
swaps its reference), which the ZAP handler, the peer books and the replay service read.
They send what they saw back as events (:meth:`AccessDesk.on_events`): the
keys ZAP let in where, and the sockets found unable to tell peers apart.
Socket rebinds come out as :class:`~adapter.core.actions.Rebind` actions when
they fall due.

The desk owns the lines' sealing too (:mod:`~adapter.core.seal_view`): which
lines must carry sealed packets only, and the admin server's key; the line
sockets read the :class:`~adapter.core.seal_view.SealView` it publishes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from feedha.adapter.access import AccessTable, AccessView
from feedha.adapter.core import actions as act
from feedha.adapter.core.seal_view import SealView
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
    """The access table and the timing of its changes (see the module docstring)."""

    def __init__(self) -> None:
        self._table = AccessTable()
        self._view = self._table.view()
        self._secured = False  # grants are enforced (CURVE on): they expire
        self._blind: set[str] = set()  # sockets whose peers cannot be told apart (rebound instead)
        self._kept: set[str] | None = None  # in a replacement of every grant: the keys its parts named
        self._replace_part_at: float | None = None
        self._next_expiry_check = 0.0
        self._rebind_at: dict[str, float] = {}
        self._last_rebind: dict[str, float] = {}
        self._seal = SealView()
        self._changed = False  # the table changed since its view was last published

    def __repr__(self) -> str:
        replacing = self._replace_part_at is not None
        return f"<AccessDesk [{self._table!r}, replacing={replacing}, due={sorted(self._rebind_at)}]>"

    @property
    def view(self) -> AccessView:
        """The access table as last published."""
        return self._view

    @property
    def rebinds_wanted(self) -> frozenset[str]:
        """The sockets waiting to be bound afresh."""
        return frozenset(self._rebind_at)

    @property
    def seal(self) -> SealView:
        """How the lines seal their packets, as last published."""
        return self._seal

    def start(
        self,
        permanent: Iterable[str],
        *,
        secured: bool,
        guarded: bool = False,
        multicast: Iterable[str] = (),
    ) -> AccessView:
        """Begin with ``permanent`` keys (``--grant-keys``) and no grant; returns the first view.

        ``secured``: the data plane is CURVE (grants are enforced, and expire). ``guarded``: any
        CURVE at all (the sync bus's included); then the ``multicast`` lines must carry sealed
        packets only (:attr:`seal`).
        """
        self._table, self._secured = AccessTable(permanent=permanent), secured
        self._seal = SealView(required=frozenset(multicast) if guarded else frozenset())
        self._view = self._table.view()
        return self._view

    def on_change(self, change: AccessChange | SealChange, *, now: float) -> list[act.Action]:
        """An access or seal change from the admin server: the table changes, its new view goes out."""
        if isinstance(change, SealChange):
            self._seal = SealView(key=change.key, required=self._seal.required)
            return [act.PublishSeal(self._seal)]
        table, keys = self._table, [grant[0] for grant in change.grants]
        self._changed = True  # published once this turn's inputs are in (publish)
        if change.revoke:
            self._want(table.revoke(keys), now=now)
            return []
        if change.replace:
            self._replace_part_at = now
            if self._kept is None:
                self._kept = set()
        if self._kept is not None:
            self._kept.update(keys)
        for grant in change.grants:
            self._want(table.grant(*grant), now=now)
        return []

    def on_events(
        self,
        admitted: Iterable[tuple[str, str]],
        blind: Iterable[str],
        *,
        lost: bool = False,
        now: float,
        wall_ns: int,
    ) -> None:
        """What the other threads saw: keys ZAP let in (``(where, key)``), sockets found blind.

        A key let in that has lost access since (its revocation came first) is connected where
        it may not be: that socket is bound afresh, as after the revocation. ``lost``: some
        admissions were lost (a flood of them): who holds the blind sockets is not known, so they
        are bound afresh too.
        """
        self._blind.update(blind)
        table, gone = self._table, set(self._blind) if lost else set()
        for where, key in admitted:
            if not table.admits(where, key, wall_ns):
                gone.add(where)
        self._want(gone, now=now)

    def _want(self, where: Iterable[str], *, now: float) -> None:
        # A revoked key was connected to ``where``: the sockets that cannot cut off one peer are
        # bound afresh, each at most once every REBIND_INTERVAL_S.
        for socket_name in where:
            if socket_name in self._blind:
                at = max(now, self._last_rebind.get(socket_name, -REBIND_INTERVAL_S) + REBIND_INTERVAL_S)
                self._rebind_at.setdefault(socket_name, at)

    def publish(self) -> list[act.Action]:
        """The table's new view, if it changed since the last one (once a turn: a copy of the table).

        A flood of grants costs one copy of the table per turn of the loop, not one per grant.
        """
        if not self._changed:
            return []
        self._changed = False
        self._view = self._table.view()
        return [act.PublishAccess(self._view)]

    def on_tick(self, *, now: float, wall_ns: int) -> list[act.Action]:
        """Due work: the table's new view, the end of a replacement, the expiry check, rebinds."""
        if now < self._next_expiry_check and not self._rebind_at and self._replace_part_at is None:
            return self.publish()  # nothing due (the common turn)
        table, changed = self._table, False
        if self._replace_part_at is not None and now - self._replace_part_at >= REPLACE_WINDOW_S:
            kept, self._kept, self._replace_part_at = self._kept or set(), None, None
            gone = [key for key in table.keys() if key not in kept]
            self._want(table.revoke(gone), now=now)
            changed = bool(gone)
        if now >= self._next_expiry_check:
            self._next_expiry_check = now + EXPIRY_CHECK_S
            if self._secured:
                held = len(table)
                self._want(table.expire(wall_ns), now=now)
                changed = changed or len(table) != held
        self._changed = self._changed or changed
        out = self.publish()
        for where in sorted(w for w, at in self._rebind_at.items() if at <= now):
            del self._rebind_at[where]
            self._last_rebind[where] = now
            table.rebound(where)
            out.append(act.Rebind(where))
        return out

    def next_deadline(self) -> float:
        """When :meth:`on_tick` has work next (``inf``: none)."""
        due = [self._next_expiry_check, *self._rebind_at.values()]
        if self._changed:
            due.append(0.0)  # a view to publish: at once
        if self._replace_part_at is not None:
            due.append(self._replace_part_at + REPLACE_WINDOW_S)
        return min(due)
