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

Who may take over when nobody is in sync
----------------------------------------
An adapter is *in sync* once the active's reports confirmed its numbering.
One that is not -- just restarted on its journal, or it missed source
messages -- cannot know what numbers the channel gave meanwhile: an adapter
that is merely stopped (SIGSTOP, a long pause) may have published far past
it. Promoting it would reuse ``msg_seq``s that subscribers already hold for
other messages. So when no in-sync backup is left:

* only when *every* member of the group is heard (``group_size``) may anyone
  stand, since a silent member may hold newer numbering;
* then only the member furthest along the channel's numbering (the highest
  ``msg_seq`` its line carried, from its health reports; after a restart,
  its journal's last) stands, best health first among equals. If that
  member cannot (it failed itself), nobody promotes by itself: an operator
  decides (``promote`` with ``force``);
* a configured active takes the role at start-up without an election only
  when the whole group is new (nothing was ever published).

The channel may stay without an active while a member is silent; it never
gets two numberings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final, NamedTuple, TypeAlias

from feedha.adapter.core.sequencer import ReportVerdict
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

UNSYNCED_TIMEOUT_FACTOR: Final = 3  # silence, in heartbeat timeouts, before an unsynced backup stands
_STEPPED_DOWN_SCORE: Final = -1.0  # below any health score: who just stepped down ranks last

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
        election = _election_base(state, config) + config.heartbeat_timeout_s
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


def _on_active_reported(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    assert isinstance(ev, ActiveReported)
    if ev.adapter != state.active or ev.term != state.term:
        return state, []
    throttled = state.throttled
    if ev.ahead_by <= 0:
        throttled = False
    elif ev.ahead_by > config.ahead_tolerance:
        throttled = True
    state = state.evolve(reported_at=now, throttled=throttled)
    verdict = ev.verdict
    if verdict is ReportVerdict.MATCH:
        return _matched(state), []
    if verdict is ReportVerdict.NUMBERING_MISMATCH:
        state = state.evolve(status=SyncStatus.AHEAD, throttled=True)
        return _mismatched(state, now, config, verdict.value)
    if verdict is ReportVerdict.DIGEST_MISMATCH:
        state, actions = _ask_snapshot(state, now, config)
        state, more = _mismatched(state, now, config, verdict.value)
        return state, actions + more
    return state, []


def _on_arrival_checked(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    assert isinstance(ev, ArrivalChecked)
    if ev.renumbered:
        # Rule 2 moved our counter: one episode of desync, over as soon as it happened.
        state, actions = _mismatched(state, now, config, "renumbered")
    else:
        actions = []
    if ev.digest_matches:
        return _matched(state), actions
    state, more = _ask_snapshot(state, now, config)
    state, more2 = _mismatched(state, now, config, "digest_mismatch")
    return state, actions + more + more2


def _matched(state: SyncState) -> SyncState:
    return state.evolve(
        status=SyncStatus.IN_SYNC,
        ever_in_sync=True,
        mismatch_since=None,
        snapshot_requested_at=None,
    )


def _mismatched(state: SyncState, now: float, config: SyncConfig, why: str) -> Result:
    # Only the start of an episode counts toward rule 5: the reports that keep
    # showing the same mismatch until a snapshot lands are one desync, not many.
    if state.mismatch_since is not None:
        return state, []
    state = state.evolve(mismatch_since=now)
    return _record_desync(state, now, config, why)


def _ask_snapshot(state: SyncState, now: float, config: SyncConfig) -> Result:
    asked = state.snapshot_requested_at
    if state.active is None or (asked is not None and now - asked < config.snapshot_retry_s):
        return state, []
    return state.evolve(snapshot_requested_at=now), [RequestSnapshot(state.active)]


def _record_desync(state: SyncState, now: float, config: SyncConfig, why: str) -> Result:
    if not state.ever_in_sync or state.role is not Role.BACKUP:
        return state, []  # the first alignment of a joining backup is not a desync
    desyncs = tuple(t for t in state.desyncs if now - t <= config.desync_window_s) + (now,)
    state = state.evolve(desyncs=desyncs)
    if len(desyncs) < config.desync_limit:
        return state, []
    rivals = [
        p
        for p in state.peers.values()
        if p.role is Role.BACKUP and p.score is not None and now - p.last_seen <= config.peer_timeout_s
    ]
    if not rivals:
        return state, []  # the only backup left: failing it would leave no redundancy at all
    mine = (state.health_score, -state.adapter)
    if all((p.score, -p.adapter) > mine for p in rivals if p.score is not None):
        reason = (
            f"unsynchronized {len(desyncs)} times in {config.desync_window_s:g}s ({why}) "
            f"with the lowest health ({state.health_score:.1f})"
        )
        return _fail(state, reason)
    return state, []


def _fail(state: SyncState, reason: str) -> Result:
    new = state.evolve(role=Role.FAILED, status=SyncStatus.FAILED, throttled=False)
    return new, [RoleChanged(state.role, Role.FAILED, state.term, reason), SendFailed(reason)]


def _on_snapshot_adopted(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    return state.evolve(snapshot_requested_at=None), []


def _on_snapshot_requested(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    assert isinstance(ev, SnapshotRequested)
    if ev.target == state.adapter and not state.deciding:
        return state, [SendSnapshot()]
    return state, []


def _on_source_gap(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    # A backup that missed source messages must not invent numbering for what
    # follows: hold output until the active's reports realign it. Its state lacks
    # what it missed, so it asks for the active's at once (the pipeline publishes
    # nothing until a snapshot that covers the gap is adopted).
    state = state.evolve(status=SyncStatus.SYNCING)
    state, actions = _ask_snapshot(state, now, config)
    state, more = _mismatched(state, now, config, "source_gap")
    return state, actions + more


def _on_gap_pending(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    # We missed source messages and do not know yet whether the active has them
    # (adapter.core.gaps): not in sync until it says, but no desync and no snapshot yet.
    return state.evolve(gap_pending=True), []


def _on_gap_settled(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    assert isinstance(ev, GapSettled)
    state = state.evolve(gap_pending=False)
    if ev.common:
        return state, []
    return _on_source_gap(state, SourceGapSeen(ev.missing), now, config)


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
        return _promote(state, now, reason)
    return state.evolve(active=ev.target, active_heard_at=now, handover_to=ev.target), []


def _on_session_missed(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    # The group rolled into a session where we could not (we were down, or past the
    # boundary): our state is the wrong session's. Repair it like a digest mismatch.
    state = state.evolve(status=SyncStatus.SYNCING)
    state, actions = _ask_snapshot(state, now, config)
    state, more = _mismatched(state, now, config, "session")
    return state, actions + more


def _on_health(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    assert isinstance(ev, HealthMeasured)
    return state.evolve(health_score=ev.score, published=ev.published), []


def _on_tick(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    actions: list[Action] = []
    if state.deciding and now >= state.started_at + config.startup_grace_s:
        state, actions = _decide(state, now)
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
        state, more = _maybe_promote(state, now, config, behind_report=ev.behind_report)
        actions += more
    return state, actions


def _on_heartbeat_sent(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    assert isinstance(ev, HeartbeatSent)
    return state.evolve(next_heartbeat_at=ev.at + config.heartbeat_interval_s), []


def _decide(state: SyncState, now: float) -> Result:
    # Nobody active was heard during the grace period. A configured active takes
    # the role only in a group that never published anything (a cold start):
    # otherwise a restarted active would renumber what a stalled peer published.
    fresh = state.published == 0 and all(p.published == 0 for p in state.peers.values())
    if state.want_active and fresh:
        term = max([state.term, *(p.term for p in state.peers.values())]) + 1
        new = state.evolve(
            deciding=False,
            role=Role.ACTIVE,
            status=SyncStatus.IN_SYNC,
            term=term,
            active=state.adapter,
        )
        return new, [
            RoleChanged(Role.BACKUP, Role.ACTIVE, term, "configured active, no active heard"),
            SendStreamState(),
        ]
    return state.evolve(deciding=False), []


def _election_base(state: SyncState, config: SyncConfig) -> float:
    if state.active is not None and state.active_heard_at is not None:
        return state.active_heard_at
    base = state.started_at + config.startup_grace_s
    return max(base, state.active_heard_at or base)


class _Candidate(NamedTuple):
    score: float
    adapter: int
    in_sync: bool
    published: int


def _candidates(state: SyncState, now: float, config: SyncConfig) -> tuple[list[int], bool]:
    """The adapters that may promote themselves, best first, and whether they are in sync.

    In-sync backups stand first, by health. If none is in sync, see the module
    docstring: only the member furthest along the channel's numbering stands,
    and only while every member of the group is heard.
    """
    heard = [p for p in state.peers.values() if now - p.last_seen <= config.peer_timeout_s]
    # An adapter that just stepped down stands last, in its own eyes and everyone's (its
    # successor should have spoken by now): the channel is never left without an active
    # for longer than one election, and the old active takes the role back only if
    # nobody else can.
    recent = 2 * config.heartbeat_timeout_s
    live = [
        _Candidate(
            _STEPPED_DOWN_SCORE
            if p.stepped_down_at is not None and now - p.stepped_down_at < recent
            else (p.score if p.score is not None else 0.0),
            p.adapter,
            p.in_sync,
            p.published,
        )
        for p in heard
        if p.role is Role.BACKUP
    ]
    demoted = state.demoted_at
    score = _STEPPED_DOWN_SCORE if demoted is not None and now - demoted < recent else state.health_score
    live.append(_Candidate(score, state.adapter, state.is_in_sync, state.published))
    standing = [c for c in live if c.in_sync]
    if not standing:
        if not state.group_size or len(heard) < state.group_size - 1:
            return [], False  # a silent member may have published past everyone heard
        furthest = max([state.published, *(p.published for p in heard)])
        standing = [c for c in live if c.published == furthest]
    standing.sort(key=lambda c: (-c.score, c.adapter))
    return [c.adapter for c in standing], any(c.in_sync for c in standing)


def _maybe_promote(state: SyncState, now: float, config: SyncConfig, *, behind_report: bool) -> Result:
    silent_since = _election_base(state, config)
    if state.active is not None and now - silent_since <= config.heartbeat_timeout_s:
        return state, []
    if behind_report:
        # What we hold covers positions the silent active's line carried, and its report there
        # is not checked yet: promoted now, we would publish our numbering of them unchecked
        # (and, if the active numbered past messages it missed, under msg_seqs it gave others).
        # We stand once we reached it; a backup ranked after us stands after its stagger.
        return state, []
    ranked, in_sync = _candidates(state, now, config)
    if state.adapter not in ranked:
        return state, []
    # Without an in-sync candidate the silence must last longer: an adapter
    # that has not synchronized yet may simply not have heard the active
    # (it just started, or its machine stalled), and promoting it would only
    # make the live active step down.
    timeout = config.heartbeat_timeout_s * (1 if in_sync else UNSYNCED_TIMEOUT_FACTOR)
    rank = ranked.index(state.adapter)
    if now < silent_since + timeout + rank * config.promotion_stagger_s:
        return state, []
    return _promote(state, now, "active silent" if state.active is not None else "no active")


def _promote(state: SyncState, now: float, reason: str) -> Result:
    term = max([state.term, *(p.term for p in state.peers.values())]) + 1
    new = state.evolve(
        role=Role.ACTIVE,
        status=SyncStatus.IN_SYNC,
        term=term,
        active=state.adapter,
        active_heard_at=now,
        throttled=False,
        next_heartbeat_at=now,
        gap_pending=False,
        handover_to=None,
    )
    return new, [RoleChanged(Role.BACKUP, Role.ACTIVE, term, reason), SendStreamState()]


def _on_command(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    assert isinstance(ev, OperatorCommand)
    if ev.kind is CommandKind.FAIL:
        return _fail(state, ev.reason)
    if ev.kind is CommandKind.PROMOTE:
        if state.role is Role.ACTIVE:
            return state, []
        if not state.is_in_sync and not ev.force:
            why = (
                f"not in sync (status {state.status.value}); promote with force to take over anyway "
                "(messages another adapter published past this one's position would be numbered again)"
            )
            return state, [CommandRejected(ev.kind, why)]
        return _promote(state, now, ev.reason)
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
    (Role.ACTIVE, SnapshotRequested): _on_snapshot_requested,
    (Role.ACTIVE, SourceGapSeen): _ignore,
    (Role.ACTIVE, HandOver): _hand_over,
    (Role.ACTIVE, GapPending): _ignore,
    (Role.ACTIVE, GapSettled): _ignore,
    (Role.ACTIVE, HandoverHeard): _ignore,
    (Role.BACKUP, GapPending): _on_gap_pending,
    (Role.BACKUP, GapSettled): _on_gap_settled,
    (Role.BACKUP, HandoverHeard): _on_handover_heard,
    (Role.FAILED, GapPending): _ignore,
    (Role.FAILED, GapSettled): _ignore,
    (Role.FAILED, HandoverHeard): _ignore,
    (Role.ACTIVE, HealthMeasured): _on_health,
    (Role.ACTIVE, Tick): _on_tick,
    (Role.ACTIVE, HeartbeatSent): _on_heartbeat_sent,
    (Role.ACTIVE, OperatorCommand): _on_command,
    (Role.BACKUP, PeerHeard): _on_peer_heard,
    (Role.BACKUP, ActiveReported): _on_active_reported,
    (Role.BACKUP, ArrivalChecked): _on_arrival_checked,
    (Role.BACKUP, SnapshotAdopted): _on_snapshot_adopted,
    (Role.BACKUP, SnapshotRequested): _ignore,
    (Role.BACKUP, SourceGapSeen): _on_source_gap,
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
    (Role.BACKUP, SessionMissed): _on_session_missed,
    (Role.FAILED, SessionMissed): _ignore,
}
