"""The core's side of data-plane access, for tests that run a guard without a core.

The adapter core's :class:`~adapter.core.access_desk.AccessDesk` owns the access
table; a :class:`~adapter.zap.DataPlaneGuard` only reads the views it publishes
and reports what its threads saw. :class:`AccessOwner` does for a test what the
runner does between the two.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from feedha.adapter.core import actions as act
from feedha.adapter.core.access_desk import AccessChange, AccessDesk
from feedha.adapter.zap import DataPlaneGuard


class AccessOwner:
    """An access desk publishing to ``guard``, as the runner carries it out."""

    def __init__(self, guard: DataPlaneGuard) -> None:
        self.guard, self.desk = guard, AccessDesk()
        guard.publish(self.desk.start(guard.permanent, secured=guard.keys is not None))

    def change(
        self, grants: Iterable[tuple[Any, ...]], *, revoke: bool = False, replace: bool = False
    ) -> frozenset[str]:
        """Grant (or revoke) ``grants`` now; returns the sockets the desk will bind afresh."""
        now = time.monotonic()
        self.events(now)
        change = AccessChange(tuple(grants), revoke=revoke, replace=replace)  # type: ignore[arg-type]
        self._carry_out(self.desk.on_change(change, now=now) + self.desk.publish())
        return self.desk.rebinds_wanted

    def events(self, now: float | None = None) -> None:
        """Hand the desk what the guard's threads saw."""
        admitted, blind, lost = self.guard.events()
        now = time.monotonic() if now is None else now
        self.desk.on_events(admitted, blind, lost=lost, now=now, wall_ns=time.time_ns())

    def tick(self, now: float | None = None) -> list[str]:
        """The desk's timers; returns the sockets it bound afresh (the guard counts them)."""
        now = time.monotonic() if now is None else now
        self.events(now)
        return self._carry_out(self.desk.on_tick(now=now, wall_ns=time.time_ns()))

    def _carry_out(self, actions: list[act.Action]) -> list[str]:
        rebound = []
        for action in actions:
            if isinstance(action, act.PublishAccess):
                self.guard.publish(action.view)
            elif isinstance(action, act.Rebind):
                self.guard.rebound(action.where)
                rebound.append(action.where)
        return rebound
