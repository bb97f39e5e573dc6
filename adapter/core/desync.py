"""Rules 1-5 of the sync rules: in sync or not, the active's snapshot, source gaps, failing oneself.

The handlers of :mod:`adapter.core.sync`'s state machine for what a backup
learns of its own standing: the active's reports compared with its position
(rules 1-3), a digest that differs (rule 4: ask for the active's snapshot),
gaps and missed sessions, and repeated desyncs with the worst health (rule 5:
fail itself). Pure: state, event and ``now`` in; new state and actions out.
"""

from __future__ import annotations

from feedha.adapter.core.sequencer import ReportVerdict
from feedha.adapter.core.sync_types import (
    ActiveReported,
    ArrivalChecked,
    GapSettled,
    RequestSnapshot,
    Result,
    Role,
    RoleChanged,
    SendFailed,
    SendSnapshot,
    SnapshotRequested,
    SourceGapSeen,
    SyncConfig,
    SyncEvent,
    SyncState,
    SyncStatus,
)

__all__ = [
    "fail",
    "on_active_reported",
    "on_arrival_checked",
    "on_gap_pending",
    "on_gap_settled",
    "on_session_missed",
    "on_snapshot_adopted",
    "on_snapshot_requested",
    "on_source_gap",
]


def on_active_reported(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    """The active reported its position: compared with ours (rules 1-3), throttling a backup ahead."""
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


def on_arrival_checked(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    """We reached a position the active reported: renumbered (rule 2) or a digest that differs (rule 4)."""
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
        return fail(state, reason)
    return state, []


def fail(state: SyncState, reason: str) -> Result:
    """Fail this adapter, saying why (rule 5, or an operator)."""
    new = state.evolve(role=Role.FAILED, status=SyncStatus.FAILED, throttled=False)
    return new, [RoleChanged(state.role, Role.FAILED, state.term, reason), SendFailed(reason)]


def on_snapshot_adopted(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    """A snapshot of the active was adopted: none is asked for any more."""
    return state.evolve(snapshot_requested_at=None), []


def on_snapshot_requested(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    """A backup asked for a snapshot: the active sends it when it is the one asked."""
    assert isinstance(ev, SnapshotRequested)
    if ev.target == state.adapter and not state.deciding:
        return state, [SendSnapshot()]
    return state, []


def on_source_gap(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    """We missed source messages the active has: out of sync, and its state is asked for."""
    # A backup that missed source messages must not invent numbering for what
    # follows: hold output until the active's reports realign it. Its state lacks
    # what it missed, so it asks for the active's at once (the pipeline publishes
    # nothing until a snapshot that covers the gap is adopted).
    state = state.evolve(status=SyncStatus.SYNCING)
    state, actions = _ask_snapshot(state, now, config)
    state, more = _mismatched(state, now, config, "source_gap")
    return state, actions + more


def on_gap_pending(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    """We missed source messages and the group is asked whether it has them."""
    # We missed source messages and do not know yet whether the active has them
    # (adapter.core.gaps): not in sync until it says, but no desync and no snapshot yet.
    return state.evolve(gap_pending=True), []


def on_gap_settled(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    """The group answered about a gap: a common gap changes nothing, our own is a desync."""
    assert isinstance(ev, GapSettled)
    state = state.evolve(gap_pending=False)
    if ev.common:
        return state, []
    return on_source_gap(state, SourceGapSeen(ev.missing), now, config)


def on_session_missed(state: SyncState, ev: SyncEvent, now: float, config: SyncConfig) -> Result:
    """The group rolled into a session where we could not: repaired like a digest mismatch."""
    # The group rolled into a session where we could not (we were down, or past the
    # boundary): our state is the wrong session's. Repair it like a digest mismatch.
    state = state.evolve(status=SyncStatus.SYNCING)
    state, actions = _ask_snapshot(state, now, config)
    state, more = _mismatched(state, now, config, "session")
    return state, actions + more
