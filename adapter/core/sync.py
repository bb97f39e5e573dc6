"""The synchronization rules of an adapter group, as a pure state machine.

Theory of operation
-------------------
Every adapter of a channel runs this machine. Its inputs are events (a peer
was heard on the sync bus, the active's position was compared with ours, a
timer fired, an operator command arrived) and ``now``; its output is a new
:class:`SyncState` and a list of actions for the runner to carry out (send
stream state, send health, ask for a snapshot, throttle, log a role change).
It reads no clock and touches no socket, so every rule can be tested with
explicit times.

The rules (from the seed patent; docs/architecture.md, "Where the seed rules live"):

1. *In sync*: the active's (msg_seq, source_seq) matches ours at the same
   source position and so does the conversion-state digest.
2. *Behind*: the runner's :class:`~adapter.core.sequencer.Sequencer` gives the
   reported source message the active's msg_seq when it gets there; a move of
   the counter is reported back here as a desync.
3. *Ahead*: throttle (pause every k messages) until the active leads again;
   if we already sent the reported message under another msg_seq, hold
   output until rule 2 has realigned us.
4. *Conversion state differs*: ask the active for a snapshot and adopt it.
5. *Repeatedly out of sync* (``desync_limit`` within ``desync_window_s``):
   fail ourselves if our health is the lowest of the live backups.
6. *Failover*: when the active's heartbeats stop for ``heartbeat_timeout_s``
   the in-sync backups rank themselves by health; the best promotes itself
   with ``term + 1`` (the others wait ``promotion_stagger_s`` per rank and
   stand down when they hear it). An active that hears an active with a
   higher ``(term, -adapter)`` demotes itself.

A new adapter first listens for ``startup_grace_s``: if it hears an active it
joins as a backup whatever it was configured as, so a restarted old active
never competes with the one that replaced it.

Who may take over when nobody is in sync, and the election itself, are in
:mod:`adapter.core.election`; rules 1-5 (in sync or not, snapshots, gaps,
failing oneself) in :mod:`adapter.core.desync`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final, TypeAlias

from feedha.adapter.core.desync import (
    fail,
    on_active_reported,
    on_arrival_checked,
    on_gap_pending,
    on_gap_settled,
    on_session_missed,
    on_snapshot_adopted,
    on_snapshot_requested,
    on_source_gap,
)
from feedha.adapter.core.election import (
    UNSYNCED_TIMEOUT_FACTOR,
    decide,
    election_base,
    maybe_promote,
    promote,
)
from feedha.adapter.core.sync_types import (
    AHEAD_TOLERANCE,
    DESYNC_LIMIT,
    DESYNC_WINDOW_S,
    HEALTH_INTERVAL_S,
    HEARTBEAT_INTERVAL_S,
    HEARTBEAT_TIMEOUT_S,
    PEER_TIMEOUT_S,
    PROMOTION_STAGGER_S,
    SNAPSHOT_RETRY_S,
    STARTUP_GRACE_S,
    THROTTLE_EVERY,
    THROTTLE_PAUSE_S,
    Action,
    ActiveReported,
    ArrivalChecked,
    CommandKind,
    CommandRejected,
    GapPending,
    GapSettled,
    HandOver,
    HandoverHeard,
    HealthMeasured,
    HeartbeatSent,
    OperatorCommand,
    Peer,
    PeerHeard,
    RequestSnapshot,
    Result,
    Role,
    RoleChanged,
    SendFailed,
    SendHandover,
    SendHealth,
    SendSnapshot,
    SendStreamState,
    SessionMissed,
    SnapshotAdopted,
    SnapshotRequested,
    SourceGapSeen,
    SyncConfig,
    SyncEvent,
    SyncState,
    SyncStatus,
    Tick,
)
from feedha.adapter.errors import SyncProtocolError

__all__ = [
    "AHEAD_TOLERANCE",
    "Action",
    "ActiveReported",
    "ArrivalChecked",
    "CommandKind",
    "CommandRejected",
    "DESYNC_LIMIT",
    "DESYNC_WINDOW_S",
    "GapPending",
    "GapSettled",
    "HANDLERS",
    "HEALTH_INTERVAL_S",
    "HEARTBEAT_INTERVAL_S",
    "HEARTBEAT_TIMEOUT_S",
    "HandOver",
    "HandoverHeard",
    "HealthMeasured",
    "HeartbeatSent",
    "OperatorCommand",
    "PEER_TIMEOUT_S",
    "PROMOTION_STAGGER_S",
    "Peer",
    "PeerHeard",
    "RequestSnapshot",
    "Result",
    "Role",
    "RoleChanged",
    "SNAPSHOT_RETRY_S",
    "STARTUP_GRACE_S",
    "SendFailed",
    "SendHandover",
    "SendHealth",
    "SendSnapshot",
    "SendStreamState",
    "SessionMissed",
    "SnapshotAdopted",
    "SnapshotRequested",
    "SourceGapSeen",
    "SyncConfig",
    "SyncEvent",
    "SyncState",
    "SyncStatus",
    "THROTTLE_EVERY",
    "THROTTLE_PAUSE_S",
    "Tick",
    "UNSYNCED_TIMEOUT_FACTOR",
    "initial_state",
    "next_deadline",
    "on_event",
]


def initial_state(
    *, adapter: int, want_active: bool, term: int, now: float, group_size: int = 0
) -> SyncState:
    """The state of an adapter that has just started and listens before acting."""
    return SyncState(
        group_size=group_size,
        adapter=adapter,
        role=Role.BACKUP,
        status=SyncStatus.SYNCING,
        term=term,
        active=None,
        active_heard_at=None,
        started_at=now,
        deciding=True,
        want_active=want_active,
        next_heartbeat_at=now,
        next_health_at=now,
    )


def on_event(state: SyncState, event: SyncEvent, *, now: float, config: SyncConfig) -> Result:
    """Apply one event: the only way a SyncState changes.

    Args:
        state: the current state.
        event: what happened.
        now: the runner's monotonic clock, in seconds.
        config: timers and limits.

    Returns:
        The new state and the actions to carry out, in order.

    Raises:
        SyncProtocolError: the event cannot happen in the current role.
    """
    handler = HANDLERS.get((state.role, type(event)))
    if handler is None:
        raise SyncProtocolError(f"can't handle {type(event).__name__} in role={state.role.value}")
    return handler(state, event, now, config)


def next_deadline(state: SyncState, config: SyncConfig, *, now: float, heartbeat: bool = True) -> float:
    """The time the runner must next deliver a :class:`Tick` (never before ``now``).

    ``heartbeat=False``: not counting the active's heartbeat, which something else sends
    (the source pump, :class:`HeartbeatSent`).
    """
    deadlines = [state.next_health_at]
    if state.deciding:
        deadlines.append(state.started_at + config.startup_grace_s)
    elif state.role is Role.ACTIVE:
        if heartbeat:
            deadlines.append(state.next_heartbeat_at)
    elif state.role is Role.BACKUP:
        if state.throttled:
            deadlines.append((state.reported_at or now) + 3 * config.heartbeat_interval_s)
        election = election_base(state, config) + config.heartbeat_timeout_s
        # Past the timeout the election is re-evaluated every heartbeat interval
        # (rank staggering), not in a busy loop.
        deadlines.append(election if election > now else now + config.heartbeat_interval_s)
    return max(now, min(deadlines))


# ---- handlers ---------------------------------------------------------------


def _precedence(term: int, adapter: int) -> tuple[int, int]:
    # Higher term wins; at equal terms the lower adapter number wins.
    return (term, -adapter)


def _on_peer_heard(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    assert isinstance(ev, PeerHeard)
    if ev.adapter == state.adapter:
        return state, []
    old = state.peers.get(ev.adapter)
    peer = Peer(
        adapter=ev.adapter,
        role=ev.role,
        term=ev.term,
        last_seen=now,
        score=ev.score if ev.score is not None else (old.score if old else None),
        in_sync=ev.in_sync if ev.in_sync is not None else (old.in_sync if old else False),
        published=ev.published if ev.published is not None else (old.published if old else 0),
        stepped_down_at=(
            now
            if old is not None and old.role is Role.ACTIVE and ev.role is Role.BACKUP
            else (old.stepped_down_at if old else None)
        ),
    )
    state = state.evolve(peers={**state.peers, ev.adapter: peer})
    if state.role is Role.FAILED:
        return state, []
    if ev.role is not Role.ACTIVE:
        if ev.adapter == state.active and ev.adapter != state.handover_to:
            # Our active stepped down or failed: it said so, no need to wait for its silence.
            # (The target of a handover may still speak as a backup before it heard it.)
            state = state.evolve(active=None, active_heard_at=now - config.heartbeat_timeout_s)
        return state, []
    if state.role is Role.ACTIVE and not state.deciding:
        if _precedence(ev.term, ev.adapter) > _precedence(state.term, state.adapter):
            return _demote(
                state, now, ev.adapter, ev.term, f"adapter {ev.adapter} is active with term {ev.term}"
            )
        return state, []
    # A backup (or an adapter still deciding) follows the active of the highest precedence.
    current = (state.term, -(state.active if state.active is not None else 1 << 30))
    if ev.adapter == state.active or _precedence(ev.term, ev.adapter) >= current:
        actions: list[Action] = []
        if state.deciding:
            actions.append(
                RoleChanged(Role.BACKUP, Role.BACKUP, ev.term, f"joined adapter {ev.adapter}'s group")
            )
        state = state.evolve(
            active=ev.adapter,
            term=max(state.term, ev.term),
            active_heard_at=now,
            deciding=False,
            handover_to=None,
        )
        return state, actions
    return state, []


def _demote(state: SyncState, now: float, active: int | None, term: int, reason: str) -> Result:
    # The new active was an in-sync backup, so our numbering is its numbering:
    # we stay in sync, and our output now waits at the gate (gate.py) for the
    # new active's reports to confirm it, like any backup's.
    new = state.evolve(
        role=Role.BACKUP,
        status=SyncStatus.IN_SYNC,
        term=term,
        active=active,
        active_heard_at=now,
        throttled=False,
        demoted_at=now,
        handover_to=None,
    )
    return new, [RoleChanged(Role.ACTIVE, Role.BACKUP, term, reason)]


def _hand_over(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    # The active missed source messages that an in-sync backup numbered (adapter.core.gaps):
    # that backup's line carries them under the channel's msg_seq, so the role goes to it
    # by name -- it promotes itself on hearing it, the others wait for it instead of electing.
    assert isinstance(ev, HandOver)
    new = state.evolve(
        role=Role.BACKUP,
        status=SyncStatus.SYNCING,
        active=ev.target,
        active_heard_at=now,
        throttled=False,
        demoted_at=now,
        handover_to=ev.target,
    )
    return new, [
        RoleChanged(Role.ACTIVE, Role.BACKUP, state.term, ev.reason),
        SendHandover(ev.target, ev.reason),
        SendHealth(),
    ]


def _on_handover_heard(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    assert isinstance(ev, HandoverHeard)
    if ev.adapter != state.active or ev.term != state.term or state.deciding:
        return state, []  # not from our active of this term: stale, or a group we do not follow
    reason = f"handover from adapter {ev.adapter}: {ev.reason}"
    if ev.target == state.adapter:
        return promote(state, now, reason)
    return state.evolve(active=ev.target, active_heard_at=now, handover_to=ev.target), []


def _on_health(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    assert isinstance(ev, HealthMeasured)
    return state.evolve(health_score=ev.score, published=ev.published), []


def _on_tick(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    actions: list[Action] = []
    if state.deciding and now >= state.started_at + config.startup_grace_s:
        state, actions = decide(state, now)
    if now >= state.next_health_at:
        state = state.evolve(next_health_at=now + config.health_interval_s)
        actions.append(SendHealth())
    if state.deciding:
        return state, actions
    if state.role is Role.ACTIVE and now >= state.next_heartbeat_at:
        state = state.evolve(next_heartbeat_at=now + config.heartbeat_interval_s)
        actions.append(SendStreamState())
    elif state.role is Role.BACKUP:
        if state.throttled and (
            state.reported_at is None or now - state.reported_at > 3 * config.heartbeat_interval_s
        ):
            # Throttling waits for the active to lead; with no reports coming
            # (the active may be dead) it would only slow the surviving lines.
            state = state.evolve(throttled=False)
        assert isinstance(ev, Tick)
        state, more = maybe_promote(state, now, config, behind_report=ev.behind_report)
        actions += more
    return state, actions


def _on_heartbeat_sent(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    assert isinstance(ev, HeartbeatSent)
    return state.evolve(next_heartbeat_at=ev.at + config.heartbeat_interval_s), []


def _on_command(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    assert isinstance(ev, OperatorCommand)
    if ev.kind is CommandKind.FAIL:
        return fail(state, ev.reason)
    if ev.kind is CommandKind.PROMOTE:
        if state.role is Role.ACTIVE:
            return state, []
        if not state.is_in_sync and not ev.force:
            why = (
                f"not in sync (status {state.status.value}); promote with force to take over anyway "
                "(messages another adapter published past this one's position would be numbered again)"
            )
            return state, [CommandRejected(ev.kind, why)]
        return promote(state, now, ev.reason)
    if state.role is not Role.ACTIVE:
        return state, [CommandRejected(ev.kind, "not active")]
    new, actions = _demote(state, now, None, state.term, ev.reason)
    return new, actions


def _command_failed(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    assert isinstance(ev, OperatorCommand)
    return state, [CommandRejected(ev.kind, "adapter has failed")]


def _ignore(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    return state, []


_Handler: TypeAlias = Callable[[SyncState, SyncEvent, float, SyncConfig], Result]

HANDLERS: Final[Mapping[tuple[Role, type], _Handler]] = {
    (Role.ACTIVE, PeerHeard): _on_peer_heard,
    (Role.ACTIVE, SnapshotRequested): on_snapshot_requested,
    (Role.ACTIVE, SourceGapSeen): _ignore,
    (Role.ACTIVE, HandOver): _hand_over,
    (Role.ACTIVE, GapPending): _ignore,
    (Role.ACTIVE, GapSettled): _ignore,
    (Role.ACTIVE, HandoverHeard): _ignore,
    (Role.BACKUP, GapPending): on_gap_pending,
    (Role.BACKUP, GapSettled): on_gap_settled,
    (Role.BACKUP, HandoverHeard): _on_handover_heard,
    (Role.FAILED, GapPending): _ignore,
    (Role.FAILED, GapSettled): _ignore,
    (Role.FAILED, HandoverHeard): _ignore,
    (Role.ACTIVE, HealthMeasured): _on_health,
    (Role.ACTIVE, Tick): _on_tick,
    (Role.ACTIVE, HeartbeatSent): _on_heartbeat_sent,
    (Role.ACTIVE, OperatorCommand): _on_command,
    (Role.BACKUP, PeerHeard): _on_peer_heard,
    (Role.BACKUP, ActiveReported): on_active_reported,
    (Role.BACKUP, ArrivalChecked): on_arrival_checked,
    (Role.BACKUP, SnapshotAdopted): on_snapshot_adopted,
    (Role.BACKUP, SnapshotRequested): _ignore,
    (Role.BACKUP, SourceGapSeen): on_source_gap,
    (Role.BACKUP, HealthMeasured): _on_health,
    (Role.BACKUP, Tick): _on_tick,
    (Role.BACKUP, OperatorCommand): _on_command,
    (Role.FAILED, PeerHeard): _on_peer_heard,
    (Role.FAILED, SnapshotRequested): _ignore,
    (Role.FAILED, SourceGapSeen): _ignore,
    (Role.FAILED, HealthMeasured): _on_health,
    (Role.FAILED, Tick): _on_tick,
    (Role.FAILED, OperatorCommand): _command_failed,
    (Role.FAILED, ArrivalChecked): _ignore,
    (Role.FAILED, SnapshotAdopted): _ignore,
    (Role.ACTIVE, SessionMissed): _ignore,
    (Role.BACKUP, SessionMissed): on_session_missed,
    (Role.FAILED, SessionMissed): _ignore,
}
