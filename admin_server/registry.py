"""The adapter registry: which adapters serve which channel, in which role and term, how healthy.

Theory of operation: adapters report to the server over a stream; the I/O
shell turns each report into one call here (:meth:`Registry.on_register`,
:meth:`Registry.on_status`, :meth:`Registry.on_disconnect`) and gets back the
events to publish; nothing here awaits, reads the clock or touches sockets.
A record whose stream ended is marked down, never deleted, so operators
still see it and subscribers keep its line (it may come back).

Operator commands are planned here too (:meth:`Registry.plan_failover` ...):
they return :class:`Directive` values, which the shell delivers to the
adapters' streams. The registry does not change roles itself: it records
what the adapters report after they obey, since only they know whether they
did (an adapter that sees a higher term demotes itself).

The types both ends of the adapter's stream share (registration, status,
command, and their enums) are the contract in ``proto.registry``; this module
holds only the server's view of them.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Final

from feedha.admin_server.errors import (
    FieldViolation,
    InvalidArgumentError,
    NotFoundError,
    PreconditionError,
)
from feedha.proto.registry import (
    AdapterRegistration,
    AdapterRole,
    AdapterStatus,
    Command,
    CommandKind,
    SyncStatus,
)


class EventKind(enum.Enum):
    """What happened in the registry."""

    REGISTERED = "registered"
    CHANGED = "changed"  # role, term or sync status changed
    DOWN = "down"


@dataclass(frozen=True, slots=True, kw_only=True)
class AdapterRecord:
    """What the registry knows about one adapter."""

    registration: AdapterRegistration
    status: AdapterStatus
    is_up: bool
    updated_at: float

    @property
    def adapter_id(self) -> str:
        """The adapter id."""
        return self.registration.adapter_id

    @property
    def channel_name(self) -> str:
        """The adapter's channel."""
        return self.registration.channel_name


@dataclass(frozen=True, slots=True, kw_only=True)
class Directive:
    """A command addressed to an adapter (the shell delivers it)."""

    adapter_id: str
    command: Command


@dataclass(frozen=True, slots=True, kw_only=True)
class RegistryEvent:
    """A change the shell publishes: to route watchers when ``routes_changed``, always to operators."""

    kind: EventKind
    channel_name: str
    adapter_id: str
    detail: str
    routes_changed: bool


# Rank backups for promotion: in-sync first, then the healthiest, then the least lag.
# How long a planned failover holds off the next one for its channel unless an
# adapter reports the new term sooner (a refused PROMOTE never does).
HANDOVER_WINDOW_S: Final = 5.0

_SYNC_RANK: Final[dict[SyncStatus, int]] = {
    SyncStatus.IN_SYNC: 3,
    SyncStatus.SYNCING: 2,
    SyncStatus.BEHIND: 1,
    SyncStatus.AHEAD: 1,
    SyncStatus.UNSPECIFIED: 1,
    SyncStatus.FAILED: 0,
}


class Registry:
    """All adapters, by id. Pure: every method takes ``now`` where it records time."""

    def __init__(self, records: Iterable[AdapterRecord] = ()) -> None:
        # Records restored from the database are down until their adapter reconnects.
        self._records: dict[str, AdapterRecord] = {r.adapter_id: replace(r, is_up=False) for r in records}
        # channel -> (the term a planned failover moves to, until when it holds off another)
        self._handovers: dict[str, tuple[int, float]] = {}

    def __repr__(self) -> str:
        up = sum(r.is_up for r in self._records.values())
        return f"<Registry [adapters={len(self._records)}, up={up}, channels={len(self.channel_names())}]>"

    def get(self, adapter_id: str) -> AdapterRecord:
        """The record of one adapter.

        Raises:
            NotFoundError: unknown adapter id.
        """
        try:
            return self._records[adapter_id]
        except KeyError:
            raise NotFoundError(
                f"unknown adapter {adapter_id!r}",
                reason="ADAPTER_NOT_FOUND",
                metadata={"adapterId": adapter_id},
            ) from None

    def records(self) -> list[AdapterRecord]:
        """Every record, sorted by channel then adapter id."""
        return sorted(self._records.values(), key=lambda r: (r.channel_name, r.adapter_id))

    def channel_names(self) -> list[str]:
        """Channels with at least one registered adapter."""
        return sorted({r.channel_name for r in self._records.values()})

    def lines(self, channel_name: str) -> list[AdapterRecord]:
        """A channel's adapters: active first (highest term), then the others by id."""
        members = [r for r in self._records.values() if r.channel_name == channel_name]
        return sorted(
            members,
            key=lambda r: (
                r.status.role is not AdapterRole.ACTIVE or not r.is_up,
                -r.status.term,
                r.adapter_id,
            ),
        )

    def active(self, channel_name: str) -> AdapterRecord | None:
        """The up adapter reporting ACTIVE with the highest term, if any."""
        actives = [r for r in self.lines(channel_name) if r.is_up and r.status.role is AdapterRole.ACTIVE]
        return actives[0] if actives else None

    def on_register(self, registration: AdapterRegistration, *, now: float) -> list[RegistryEvent]:
        """An adapter connected and declared itself (again, after a reconnect)."""
        old = self._records.get(registration.adapter_id)
        status = AdapterStatus(role=registration.role, term=registration.term)
        if old is not None and old.registration == registration:
            status = replace(old.status, role=registration.role, term=registration.term)
        self._records[registration.adapter_id] = AdapterRecord(
            registration=registration, status=status, is_up=True, updated_at=now
        )
        detail = f"{registration.role.value} term={registration.term} line={registration.line_endpoint}"
        return [self._event(EventKind.REGISTERED, registration.adapter_id, detail, routes_changed=True)]

    def on_status(self, adapter_id: str, status: AdapterStatus, *, now: float) -> list[RegistryEvent]:
        """An adapter reported its state and health.

        Raises:
            NotFoundError: the adapter never registered.
        """
        old = self.get(adapter_id)
        self._records[adapter_id] = replace(old, status=status, is_up=True, updated_at=now)
        handover = self._handovers.get(old.channel_name)
        if handover is not None and status.term >= handover[0]:
            del self._handovers[old.channel_name]
        routing = (old.status.role, old.status.term, old.is_up) != (status.role, status.term, True)
        if not routing and old.status.sync_status is status.sync_status:
            return []
        detail = f"{status.role.value} term={status.term} sync={status.sync_status.value}"
        return [self._event(EventKind.CHANGED, adapter_id, detail, routes_changed=routing)]

    def on_disconnect(self, adapter_id: str, *, now: float) -> list[RegistryEvent]:
        """An adapter's stream ended: mark it down (kept, not deleted)."""
        old = self._records.get(adapter_id)
        if old is None or not old.is_up:
            return []
        self._records[adapter_id] = replace(old, is_up=False, updated_at=now)
        return [self._event(EventKind.DOWN, adapter_id, "stream ended", routes_changed=True)]

    def plan_failover(
        self,
        channel_name: str,
        *,
        now: float,
        to: str | None = None,
        force: bool = False,
        issued_by: str = "",
    ) -> list[Directive]:
        """Plan a hand failover: demote the active, promote ``to`` (or the best backup), both at term + 1.

        The plan is made from what the adapters last reported, so a second
        failover planned before any of them reports the first one's term would
        repeat the first (the same target, the same term: nothing happens). It
        is refused instead, for :data:`HANDOVER_WINDOW_S` at most.

        Args:
            channel_name: the channel.
            now: the registry's clock (the one ``on_status`` gets).
            to: adapter id to promote; ``None`` picks the in-sync backup with the best health.
            force: the target takes over even if it is not reported in sync. Without it, a
                target not in sync is refused here, before the active is demoted (the adapter
                would refuse the plain PROMOTE itself, and the channel would have gone without
                an active until an election).
            issued_by: the operator, for the record.

        Returns:
            The DEMOTE (when there is an active) and PROMOTE directives.

        Raises:
            NotFoundError: unknown channel or adapter.
            PreconditionError: the target is down, already active, not in sync (without
                ``force``), or no backup is up; or the channel's previous failover is not
                reported done yet.
        """
        members = self._members_free_to_fail_over(channel_name, now=now)
        reported = max(r.status.term for r in members)
        active = self.active(channel_name)
        target = self._pick_target(channel_name, members, active, to)
        if not force and target.status.sync_status is not SyncStatus.IN_SYNC:
            raise _not_in_sync(channel_name, target, named=to is not None)
        new_term = reported + 1
        self._handovers[channel_name] = (new_term, now + HANDOVER_WINDOW_S)
        reason = f"operator failover to {target.adapter_id}" + (" (forced)" if force else "")
        directives = []
        if active is not None:
            demote = Command(kind=CommandKind.DEMOTE, term=new_term, reason=reason, issued_by=issued_by)
            directives.append(Directive(adapter_id=active.adapter_id, command=demote))
        promote = Command(
            kind=CommandKind.PROMOTE, term=new_term, reason=reason, issued_by=issued_by, force=force
        )
        directives.append(Directive(adapter_id=target.adapter_id, command=promote))
        return directives

    def _members_free_to_fail_over(self, channel_name: str, *, now: float) -> list[AdapterRecord]:
        # The channel's adapters, refusing an unknown channel and one whose last failover is pending.
        members = self.lines(channel_name)
        if not members:
            raise NotFoundError(
                f"no adapters registered for channel {channel_name!r}",
                reason="CHANNEL_NOT_FOUND",
                metadata={"channel": channel_name},
            )
        reported = max(r.status.term for r in members)
        pending, until = self._handovers.get(channel_name, (0, 0.0))
        if pending > reported and now < until:
            raise PreconditionError(
                f"the failover of {channel_name!r} to term {pending} is not reported done yet; "
                f"try again in a moment (at most {until - now:.1f} s)",
                reason="FAILOVER_IN_PROGRESS",
                metadata={"channel": channel_name, "term": str(pending)},
            )
        return members

    def cancel_failover(self, channel_name: str) -> None:
        """Forget a planned failover that could not be sent (the next one is planned at once)."""
        self._handovers.pop(channel_name, None)

    def _pick_target(
        self, channel_name: str, members: list[AdapterRecord], active: AdapterRecord | None, to: str | None
    ) -> AdapterRecord:
        if to is not None:
            target = self.get(to)
            if target.channel_name != channel_name:
                raise PreconditionError(
                    f"adapter {to!r} serves {target.channel_name!r}, not {channel_name!r}",
                    reason="ADAPTER_OF_ANOTHER_CHANNEL",
                )
            if not target.is_up:
                raise PreconditionError(f"adapter {to!r} is down", reason="ADAPTER_DOWN")
            if active is not None and target.adapter_id == active.adapter_id:
                raise PreconditionError(f"adapter {to!r} is already the active", reason="ALREADY_ACTIVE")
            return target
        candidates = [
            r
            for r in members
            if r.is_up
            and r is not active
            and r.status.role is not AdapterRole.FAILED
            and r.status.sync_status is not SyncStatus.FAILED
        ]
        if not candidates:
            raise PreconditionError(
                f"channel {channel_name!r} has no up backup to promote", reason="NO_BACKUP_AVAILABLE"
            )
        return max(
            candidates,
            key=lambda r: (_SYNC_RANK[r.status.sync_status], r.status.health_score, -abs(r.status.lag)),
        )

    def plan_fail(self, adapter_id: str, *, reason: str = "", issued_by: str = "") -> list[Directive]:
        """Plan taking an adapter off line.

        Raises:
            NotFoundError: unknown adapter.
            PreconditionError: the adapter is down.
        """
        return [
            self._command_up(
                adapter_id,
                Command(kind=CommandKind.FAIL, reason=reason or "operator fail", issued_by=issued_by),
            )
        ]

    def plan_throttle(self, adapter_id: str, rate: float, *, issued_by: str = "") -> list[Directive]:
        """Plan limiting an adapter's publishing rate (0 removes the limit).

        Raises:
            InvalidArgumentError: a negative, infinite or NaN rate (a ``ValueError``).
            NotFoundError: unknown adapter.
            PreconditionError: the adapter is down.
        """
        if not rate >= 0 or math.isinf(rate):  # NaN fails the first test
            message = f"rate must be a finite number >= 0, got {rate!r}"
            raise InvalidArgumentError(message, violations=[FieldViolation("rate", "RATE_NEGATIVE", message)])
        command = Command(
            kind=CommandKind.THROTTLE, rate=rate, reason="operator throttle", issued_by=issued_by
        )
        return [self._command_up(adapter_id, command)]

    def plan_session_end(
        self, channel_name: str, *, reason: str = "", issued_by: str = ""
    ) -> list[Directive]:
        """Plan ending a channel's trading session: the command goes to its active.

        Raises:
            NotFoundError: no adapter registered for the channel.
            PreconditionError: the channel has no active adapter up.
        """
        if not self.lines(channel_name):
            raise NotFoundError(
                f"no adapters registered for channel {channel_name!r}",
                reason="CHANNEL_NOT_FOUND",
                metadata={"channel": channel_name},
            )
        active = self.active(channel_name)
        if active is None:
            raise PreconditionError(f"channel {channel_name!r} has no active adapter up", reason="NO_ACTIVE")
        why = (reason or "operator").strip()[:200]
        command = Command(kind=CommandKind.SESSION_END, reason=why, issued_by=issued_by)
        return [Directive(adapter_id=active.adapter_id, command=command)]

    def _command_up(self, adapter_id: str, command: Command) -> Directive:
        record = self.get(adapter_id)
        if not record.is_up:
            raise PreconditionError(f"adapter {adapter_id!r} is down", reason="ADAPTER_DOWN")
        return Directive(adapter_id=adapter_id, command=command)

    def _event(self, kind: EventKind, adapter_id: str, detail: str, *, routes_changed: bool) -> RegistryEvent:
        channel = self._records[adapter_id].channel_name
        return RegistryEvent(
            kind=kind,
            channel_name=channel,
            adapter_id=adapter_id,
            detail=detail,
            routes_changed=routes_changed,
        )


def _not_in_sync(channel_name: str, target: AdapterRecord, *, named: bool) -> PreconditionError:
    # A hand failover refused: its target (named by the operator, or the best backup) is not in sync.
    refused = "is" if named else "(the best backup) is"
    return PreconditionError(
        f"adapter {target.adapter_id!r} {refused} not in sync "
        f"({target.status.sync_status.value}), so it would refuse to take over; wait for it "
        "to be in sync, or force the failover (messages the active published past the "
        "target's position would be numbered again)",
        reason="NOT_IN_SYNC",
        metadata={"channel": channel_name, "adapter": target.adapter_id},
    )
