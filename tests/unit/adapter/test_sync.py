"""The sync rules as a pure state machine: every rule driven with explicit times."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.adapter.core.sequencer import ReportVerdict
from feedha.adapter.core.sync import (
    UNSYNCED_TIMEOUT_FACTOR,
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
    PeerHeard,
    RequestSnapshot,
    Role,
    RoleChanged,
    SendFailed,
    SendHandover,
    SendHealth,
    SendSnapshot,
    SendStreamState,
    SnapshotRequested,
    SourceGapSeen,
    SyncConfig,
    SyncState,
    SyncStatus,
    Tick,
    initial_state,
    next_deadline,
    on_event,
)
from feedha.adapter.errors import ConfigError, SyncProtocolError

CFG = SyncConfig()


def apply(state: SyncState, event, now: float):  # type: ignore[no-untyped-def]
    return on_event(state, event, now=now, config=CFG)


def started_active(now: float = 0.0) -> SyncState:
    state = initial_state(adapter=1, want_active=True, term=0, now=now)
    state, actions = apply(state, Tick(), now + CFG.startup_grace_s)
    assert state.role is Role.ACTIVE
    return state


def synced_backup(adapter: int = 2, *, now: float = 0.0, score: float = 90.0) -> SyncState:
    state = initial_state(adapter=adapter, want_active=False, term=0, now=now)
    state, _ = apply(state, PeerHeard(1, Role.ACTIVE, 1), now + 0.01)
    state, _ = apply(state, ActiveReported(1, 1, ReportVerdict.MATCH, 0), now + 0.02)
    state, _ = apply(state, HealthMeasured(score), now + 0.02)
    assert state.status is SyncStatus.IN_SYNC and state.is_publishing
    return state


# ---- start-up -----------------------------------------------------------------


def test_configured_active_takes_over_after_grace_when_nobody_is_active() -> None:
    state = initial_state(adapter=1, want_active=True, term=0, now=0.0)
    assert not state.is_publishing and state.deciding
    state, actions = apply(state, Tick(), 0.1)
    assert state.deciding  # still listening
    state, actions = apply(state, Tick(), CFG.startup_grace_s)
    assert state.role is Role.ACTIVE and state.term == 1 and state.is_publishing
    assert any(isinstance(a, RoleChanged) and a.new is Role.ACTIVE for a in actions)
    assert any(isinstance(a, SendStreamState) for a in actions)


def test_restarted_old_active_hears_higher_term_and_serves_as_backup() -> None:
    state = initial_state(adapter=1, want_active=True, term=1, now=0.0)
    state, actions = apply(state, PeerHeard(2, Role.ACTIVE, 2), 0.05)
    assert state.role is Role.BACKUP and state.active == 2 and state.term == 2 and not state.deciding
    assert not state.is_in_sync  # its output waits at the gate until numbering and state are verified
    state, _ = apply(state, PeerHeard(2, Role.ACTIVE, 2), 0.9)
    state, _ = apply(state, Tick(), 1.0)
    assert state.role is Role.BACKUP


def test_backup_is_in_sync_only_once_verified() -> None:
    # (What it numbers meanwhile waits at its output gate: adapter/core/gate.py.)
    state = initial_state(adapter=2, want_active=False, term=0, now=0.0)
    state, _ = apply(state, PeerHeard(1, Role.ACTIVE, 1), 0.01)
    assert state.status is SyncStatus.SYNCING and not state.is_in_sync and state.is_publishing
    state, _ = apply(state, ActiveReported(1, 1, ReportVerdict.BEHIND, -3), 0.02)
    assert not state.is_in_sync
    state, _ = apply(state, ArrivalChecked(renumbered=True, digest_matches=True), 0.03)
    assert state.is_in_sync and state.ever_in_sync
    assert state.desyncs == ()  # the first alignment of a joining backup is not a desync


# ---- rules 1-4 ------------------------------------------------------------------


def test_ahead_beyond_tolerance_throttles_until_the_active_leads() -> None:
    state = synced_backup()
    state, _ = apply(state, ActiveReported(1, 1, ReportVerdict.MATCH, CFG.ahead_tolerance + 1), 1.0)
    assert state.throttled and state.is_publishing  # ahead but numbered right: still a line
    state, _ = apply(state, ActiveReported(1, 1, ReportVerdict.MATCH, 3), 1.01)
    assert state.throttled  # within tolerance: keep throttling until the active leads
    state, _ = apply(state, ActiveReported(1, 1, ReportVerdict.BEHIND, -2), 1.02)
    assert not state.throttled


def test_throttle_expires_when_reports_stop() -> None:
    state = synced_backup()
    state, _ = apply(state, ActiveReported(1, 1, ReportVerdict.MATCH, 500), 1.0)
    assert state.throttled
    assert next_deadline(state, CFG, now=1.0) <= 1.0 + 3 * CFG.heartbeat_interval_s
    state, _ = apply(state, Tick(), 1.0 + 4 * CFG.heartbeat_interval_s)
    assert not state.throttled


def test_ahead_under_other_numbering_throttles_until_realigned() -> None:
    state = synced_backup()
    state, _ = apply(state, ActiveReported(1, 1, ReportVerdict.NUMBERING_MISMATCH, 10), 1.0)
    assert state.status is SyncStatus.AHEAD and state.throttled and not state.is_in_sync
    state, _ = apply(state, ArrivalChecked(renumbered=True, digest_matches=True), 1.1)
    assert state.status is SyncStatus.IN_SYNC and state.is_in_sync
    assert len(state.desyncs) == 1  # one episode: the mismatch and the renumbering that ended it


def test_digest_mismatch_asks_for_a_snapshot_once_per_retry_interval() -> None:
    state = synced_backup()
    state, actions = apply(state, ActiveReported(1, 1, ReportVerdict.DIGEST_MISMATCH, 0), 1.0)
    assert RequestSnapshot(1) in actions
    state, actions = apply(state, ActiveReported(1, 1, ReportVerdict.DIGEST_MISMATCH, 0), 1.1)
    assert not any(isinstance(a, RequestSnapshot) for a in actions)
    state, actions = apply(
        state, ActiveReported(1, 1, ReportVerdict.DIGEST_MISMATCH, 0), 1.0 + CFG.snapshot_retry_s
    )
    assert RequestSnapshot(1) in actions


def test_reports_from_a_stale_term_are_ignored() -> None:
    state = synced_backup()
    before = state
    state, actions = apply(state, ActiveReported(1, 0, ReportVerdict.NUMBERING_MISMATCH, 50), 1.0)
    assert state == before and actions == []


def test_active_answers_snapshot_requests_addressed_to_it() -> None:
    state = started_active()
    assert apply(state, SnapshotRequested(requester=2, target=1), 1.0)[1] == [SendSnapshot()]
    assert apply(state, SnapshotRequested(requester=2, target=3), 1.0)[1] == []


def test_source_gap_on_a_backup_is_no_longer_in_sync() -> None:
    state = synced_backup()
    state, _ = apply(state, SourceGapSeen(missing=5), 1.0)
    assert state.status is SyncStatus.SYNCING and not state.is_in_sync


def test_a_source_gap_on_the_active_changes_nothing_by_itself() -> None:
    # Whether a backup has the missing messages is the group's question (adapter.core.gaps),
    # asked by the core; the rules only act on its answer (HandOver).
    active = started_active()
    active, _ = apply(active, PeerHeard(2, Role.BACKUP, 1, 90.0, True), 1.0)
    same, actions = apply(active, SourceGapSeen(missing=5), 1.1)
    assert same == active and actions == []


def test_a_handover_names_the_successor_which_promotes_itself_at_once() -> None:
    active = started_active()
    active, _ = apply(active, PeerHeard(2, Role.BACKUP, 1, 90.0, True), 1.0)
    stepped, actions = apply(active, HandOver(2, "missed 5..9 that backup 2 has"), 1.1)
    assert stepped.role is Role.BACKUP and stepped.status is SyncStatus.SYNCING
    assert stepped.active == 2 and stepped.handover_to == 2 and stepped.term == active.term
    assert actions[1:] == [SendHandover(2, "missed 5..9 that backup 2 has"), SendHealth()]
    target = synced_backup(2)
    target, actions = apply(target, HandoverHeard(1, 1, 2, "x"), 1.2)
    assert target.role is Role.ACTIVE and target.term == 2 and SendStreamState() in actions
    # A third backup waits for the named successor instead of electing, even if it hears
    # the successor speak as a backup before it heard the handover.
    other = synced_backup(3)
    other, _ = apply(other, HandoverHeard(1, 1, 2, "x"), 1.2)
    assert other.active == 2 and other.role is Role.BACKUP
    other, _ = apply(other, PeerHeard(2, Role.BACKUP, 1, 90.0, True), 1.21)
    assert other.active == 2
    other, _ = apply(other, PeerHeard(2, Role.ACTIVE, 2), 1.22)
    assert other.active == 2 and other.term == 2 and other.handover_to is None


def test_a_stale_handover_is_ignored() -> None:
    backup = synced_backup(2)
    assert apply(backup, HandoverHeard(3, 1, 2, "x"), 1.0)[0] == backup  # not our active
    assert apply(backup, HandoverHeard(1, 0, 2, "x"), 1.0)[0] == backup  # an older term


def test_a_backup_with_a_pending_gap_is_not_in_sync_until_it_settles() -> None:
    backup = synced_backup()
    pending, actions = apply(backup, GapPending(), 1.0)
    assert actions == [] and pending.status is SyncStatus.IN_SYNC and not pending.is_in_sync
    common, actions = apply(pending, GapSettled(common=True), 1.1)
    assert actions == [] and common.is_in_sync and common.desyncs == ()
    local, actions = apply(pending, GapSettled(common=False, missing=3), 1.1)
    assert not local.is_in_sync and local.status is SyncStatus.SYNCING
    assert RequestSnapshot(1) in actions


def test_who_stepped_down_takes_the_role_back_when_nobody_else_can() -> None:
    # The operator demoted the active, and the backup it was meant for cannot take over.
    active = started_active()
    active, _ = apply(active, PeerHeard(2, Role.BACKUP, 1, 90.0, False), 1.0)
    demoted, _ = apply(active, OperatorCommand(CommandKind.DEMOTE, "drill"), 1.0)
    assert demoted.role is Role.BACKUP and demoted.is_in_sync
    state = demoted
    now = 1.0
    while state.role is Role.BACKUP and now < 3.0:
        now += CFG.heartbeat_interval_s
        state, _ = apply(state, PeerHeard(2, Role.BACKUP, 1, 90.0, False), now)
        state, _ = apply(state, Tick(), now)
    assert state.role is Role.ACTIVE and state.term == 2
    assert now - 1.0 <= CFG.heartbeat_timeout_s + 2 * CFG.promotion_stagger_s + CFG.heartbeat_interval_s


def test_who_just_stepped_down_ranks_last_in_the_election() -> None:
    backup = synced_backup(2, score=50.0)
    backup, _ = apply(backup, PeerHeard(3, Role.BACKUP, 1, 40.0, True), 1.0)
    backup, _ = apply(backup, PeerHeard(1, Role.BACKUP, 1, 99.0, True), 1.0)  # the active stepped down
    assert backup.peers[1].stepped_down_at == 1.0 and backup.active is None
    backup, actions = apply(backup, Tick(), 1.0 + CFG.heartbeat_interval_s)
    assert backup.role is Role.ACTIVE  # rank 0 despite adapter 1's better health


# ---- rule 5 -----------------------------------------------------------------------


def _with_rival(state: SyncState, score: float, now: float) -> SyncState:
    state, _ = apply(state, PeerHeard(3, Role.BACKUP, 1, score, True), now)
    return state


def _desync(state: SyncState, times: list[float]):  # type: ignore[no-untyped-def]
    actions: list[object] = []
    for t in times:
        state, acts = apply(state, ArrivalChecked(renumbered=True, digest_matches=True), t)
        actions += acts
    return state, actions


def test_repeatedly_unsynchronized_and_least_healthy_fails_itself() -> None:
    state = _with_rival(synced_backup(score=40.0), 80.0, 1.0)
    state, actions = _desync(state, [1.0, 1.1, 1.2])
    assert state.role is Role.FAILED and not state.is_publishing
    assert any(isinstance(a, SendFailed) for a in actions)


def test_repeatedly_unsynchronized_but_healthier_keeps_going() -> None:
    state = _with_rival(synced_backup(score=90.0), 50.0, 1.0)
    state, actions = _desync(state, [1.0, 1.1, 1.2, 1.3])
    assert state.role is Role.BACKUP and not any(isinstance(a, SendFailed) for a in actions)


def test_desyncs_outside_the_window_do_not_count() -> None:
    state = _with_rival(synced_backup(score=10.0), 80.0, 1.0)
    spaced = [1.0, 1.0 + CFG.desync_window_s + 1, 1.0 + 2 * CFG.desync_window_s + 2]
    for t in spaced:
        state = _with_rival(state, 80.0, t)
        state, _ = _desync(state, [t])
    assert state.role is Role.BACKUP


def test_the_last_backup_standing_does_not_fail_itself() -> None:
    state = synced_backup(score=1.0)
    state, _ = _desync(state, [1.0, 1.1, 1.2, 1.3])
    assert state.role is Role.BACKUP


def test_equal_health_fails_the_higher_adapter_number() -> None:
    low = _with_rival(synced_backup(adapter=2, score=50.0), 50.0, 1.0)  # rival is adapter 3
    low, _ = _desync(low, [1.0, 1.1, 1.2])
    assert low.role is Role.BACKUP
    high = synced_backup(adapter=4, score=50.0)
    high = _with_rival(high, 50.0, 1.0)
    high, _ = _desync(high, [1.0, 1.1, 1.2])
    assert high.role is Role.FAILED


# ---- rule 6 and terms -------------------------------------------------------------------


def test_a_heartbeat_the_pump_sent_sets_the_next_and_the_deadline_can_leave_it_out() -> None:
    state = started_active()
    now = CFG.startup_grace_s + 0.003
    assert next_deadline(state, CFG, now=now) == max(now, state.next_heartbeat_at)
    # The source pump sent reports while it ran; the last went at `at`: the next is due an
    # interval later, and the core's turn does not send one before.
    at = now + 0.25
    state, actions = apply(state, HeartbeatSent(at), at + 0.001)
    assert actions == [] and state.next_heartbeat_at == at + CFG.heartbeat_interval_s
    _, actions = apply(state, Tick(), at + 0.002)
    assert SendStreamState() not in actions
    _, actions = apply(state, Tick(), at + CFG.heartbeat_interval_s)
    assert SendStreamState() in actions
    # Not counting the heartbeat (the pump sends it), the next deadline is the health report's.
    assert next_deadline(state, CFG, now=at, heartbeat=False) == max(at, state.next_health_at)
    # Only an active reports: a backup told it sent a heartbeat is a bug, and says so.
    with pytest.raises(SyncProtocolError, match="HeartbeatSent in role=backup"):
        apply(synced_backup(), HeartbeatSent(at), at)


def test_best_backup_promotes_after_the_heartbeat_timeout() -> None:
    state = _with_rival(synced_backup(score=90.0), 50.0, 0.05)
    state, actions = apply(state, Tick(), 0.01 + CFG.heartbeat_timeout_s - 0.001)
    assert state.role is Role.BACKUP
    state = _with_rival(state, 50.0, 0.3)  # the rival is still alive
    state, actions = apply(state, Tick(), 0.01 + CFG.heartbeat_timeout_s + 0.001)
    assert state.role is Role.ACTIVE and state.term == 2
    assert SendStreamState() in actions


def test_a_backup_behind_its_silent_active_s_report_stands_only_once_it_reached_it() -> None:
    state = _with_rival(synced_backup(score=90.0), 50.0, 0.05)
    t = 0.01 + CFG.heartbeat_timeout_s + 0.001
    state = _with_rival(state, 50.0, t - 0.01)
    state, actions = apply(state, Tick(behind_report=True), t)
    assert state.role is Role.BACKUP and SendStreamState() not in actions  # unchecked yet
    state, actions = apply(state, Tick(behind_report=False), t + 0.01)
    assert state.role is Role.ACTIVE and SendStreamState() in actions


def test_second_ranked_backup_waits_and_follows_the_new_active() -> None:
    state = _with_rival(synced_backup(score=50.0), 90.0, 0.05)
    t = 0.01 + CFG.heartbeat_timeout_s + 0.001
    state = _with_rival(state, 90.0, t - 0.01)
    state, _ = apply(state, Tick(), t)
    assert state.role is Role.BACKUP  # rank 1 waits a stagger
    state, _ = apply(state, PeerHeard(3, Role.ACTIVE, 2), t + 0.01)
    assert state.active == 3 and state.term == 2
    state, _ = apply(state, Tick(), t + CFG.promotion_stagger_s + 0.01)
    assert state.role is Role.BACKUP


def test_active_that_hears_a_higher_term_demotes_and_keeps_publishing() -> None:
    state = started_active()
    state, actions = apply(state, PeerHeard(2, Role.ACTIVE, 2), 1.0)
    assert state.role is Role.BACKUP and state.active == 2 and state.term == 2
    assert state.is_publishing  # its numbering is the new active's
    assert RoleChanged(Role.ACTIVE, Role.BACKUP, 2, "adapter 2 is active with term 2") in actions


def test_equal_terms_resolve_to_the_lower_adapter_number() -> None:
    state = replace(started_active(), adapter=3)
    state, _ = apply(state, PeerHeard(2, Role.ACTIVE, state.term), 1.0)
    assert state.role is Role.BACKUP
    state = started_active()  # adapter 1
    state, _ = apply(state, PeerHeard(2, Role.ACTIVE, state.term), 1.0)
    assert state.role is Role.ACTIVE


def test_backup_ignores_an_active_of_an_older_term() -> None:
    state = synced_backup()
    state, _ = apply(state, PeerHeard(3, Role.ACTIVE, 5), 1.0)
    state, _ = apply(state, PeerHeard(1, Role.ACTIVE, 1), 1.1)
    assert state.active == 3 and state.term == 5


def _unsynced_group(*, published: int, peers: dict[int, tuple[Role, int]], now: float) -> SyncState:
    """Adapter 2 of a group of 3, not in sync, its active gone; ``peers``: adapter -> (role, published)."""
    state = initial_state(adapter=2, want_active=False, term=1, now=0.0, group_size=3)
    state, _ = apply(state, Tick(), CFG.startup_grace_s)  # nobody active heard: decided, a backup
    state, _ = apply(state, HealthMeasured(80.0, published), CFG.startup_grace_s)
    for adapter, (role, theirs) in peers.items():
        state, _ = apply(state, PeerHeard(adapter, role, 1, 50.0, False, theirs), now)
    assert state.status is SyncStatus.SYNCING and not state.deciding
    return state


def test_nobody_in_sync_waits_while_a_member_is_silent() -> None:
    # Adapter 3 is heard, adapter 1 (the old active, stopped) is not: it may have
    # published far past both, so neither may renumber the channel.
    state = _unsynced_group(published=900, peers={3: (Role.BACKUP, 800)}, now=5.0)
    for now in (5.0, 5.5, 6.0):
        state, _ = apply(state, PeerHeard(3, Role.BACKUP, 1, 50.0, False, 800), now)
        state, actions = apply(state, Tick(), now)
        assert state.role is Role.BACKUP and not any(isinstance(a, RoleChanged) for a in actions)


def test_nobody_in_sync_lets_the_member_furthest_along_take_over_once_all_are_heard() -> None:
    peers = {1: (Role.BACKUP, 700), 3: (Role.BACKUP, 800)}
    state = _unsynced_group(published=900, peers=peers, now=1.0)
    state, _ = apply(state, Tick(), 1.0 + CFG.heartbeat_timeout_s + 0.01)
    assert state.role is Role.BACKUP  # an unsynced backup waits longer: it may just not hear the active
    later = 1.0 + UNSYNCED_TIMEOUT_FACTOR * CFG.heartbeat_timeout_s + 0.01
    for adapter, (role, published) in peers.items():
        state, _ = apply(state, PeerHeard(adapter, role, 1, 50.0, False, published), later)
    state, actions = apply(state, Tick(), later)
    assert state.role is Role.ACTIVE and state.term == 2
    # The member behind it stands down, however healthy it is.
    behind = _unsynced_group(published=800, peers={1: (Role.BACKUP, 700), 3: (Role.BACKUP, 900)}, now=later)
    behind, _ = apply(behind, HealthMeasured(100.0, 800), later)
    behind, _ = apply(behind, Tick(), later + 1.0)
    assert behind.role is Role.BACKUP


def test_nobody_in_sync_and_the_furthest_member_failed_leaves_it_to_the_operator() -> None:
    peers = {1: (Role.FAILED, 950), 3: (Role.BACKUP, 800)}
    state = _unsynced_group(published=900, peers=peers, now=1.0)
    state, _ = apply(state, Tick(), 3.0)
    state, _ = apply(state, PeerHeard(1, Role.FAILED, 1, 0.0, False, 950), 3.0)
    state, _ = apply(state, PeerHeard(3, Role.BACKUP, 1, 50.0, False, 800), 3.0)
    state, _ = apply(state, Tick(), 3.0)
    assert state.role is Role.BACKUP
    refused, actions = apply(state, OperatorCommand(CommandKind.PROMOTE), 3.1)
    assert refused.role is Role.BACKUP and isinstance(actions[0], CommandRejected)
    assert "force" in actions[0].reason
    forced, _ = apply(state, OperatorCommand(CommandKind.PROMOTE, "operator", force=True), 3.1)
    assert forced.role is Role.ACTIVE and forced.term == 2


def test_a_restarted_configured_active_with_history_does_not_take_over_by_itself() -> None:
    fresh = initial_state(adapter=1, want_active=True, term=0, now=0.0, group_size=2)
    fresh, _ = apply(fresh, Tick(), CFG.startup_grace_s)
    assert fresh.role is Role.ACTIVE  # a cold start: nothing was ever published
    restarted = replace(
        initial_state(adapter=1, want_active=True, term=3, now=0.0, group_size=2), published=500
    )
    restarted, _ = apply(restarted, Tick(), CFG.startup_grace_s)
    assert restarted.role is Role.BACKUP and not restarted.deciding
    # A fresh configured active also yields when a peer has published before.
    joined = initial_state(adapter=1, want_active=True, term=0, now=0.0, group_size=2)
    joined, _ = apply(joined, PeerHeard(2, Role.BACKUP, 3, 90.0, True, 400), 0.1)
    joined, _ = apply(joined, Tick(), CFG.startup_grace_s)
    assert joined.role is Role.BACKUP


# ---- operator commands ---------------------------------------------------------------


def test_operator_promote_demote_fail() -> None:
    backup = synced_backup()
    promoted, actions = apply(backup, OperatorCommand(CommandKind.PROMOTE), 1.0)
    assert promoted.role is Role.ACTIVE and promoted.term == 2
    syncing = replace(backup, status=SyncStatus.SYNCING)
    same, actions = apply(syncing, OperatorCommand(CommandKind.PROMOTE), 1.0)
    assert same.role is Role.BACKUP and isinstance(actions[0], CommandRejected)
    demoted, _ = apply(promoted, OperatorCommand(CommandKind.DEMOTE), 2.0)
    assert demoted.role is Role.BACKUP and demoted.is_publishing
    failed, actions = apply(demoted, OperatorCommand(CommandKind.FAIL), 3.0)
    assert failed.role is Role.FAILED and SendFailed("operator") in actions
    again, actions = apply(failed, OperatorCommand(CommandKind.PROMOTE), 4.0)
    assert again.role is Role.FAILED and isinstance(actions[0], CommandRejected)


def test_failed_adapter_still_reports_health() -> None:
    state, _ = apply(synced_backup(), OperatorCommand(CommandKind.FAIL), 1.0)
    _, actions = apply(state, Tick(), 5.0)
    assert SendHealth() in actions


def test_unhandled_event_raises_protocol_error() -> None:
    with pytest.raises(SyncProtocolError, match="ActiveReported in role=active"):
        apply(started_active(), ActiveReported(2, 1, ReportVerdict.MATCH, 0), 1.0)


def test_config_is_checked() -> None:
    with pytest.raises(ConfigError, match="heartbeat_timeout_s"):
        SyncConfig(heartbeat_interval_s=0.1, heartbeat_timeout_s=0.15)
    with pytest.raises(ConfigError, match="desync_limit"):
        SyncConfig(desync_limit=0)


def test_repr_shows_state() -> None:
    assert repr(started_active()) == (
        "<SyncState [adapter=1, role=active, status=in_sync, term=1, active=1, throttled=False, peers=0]>"
    )


# ---- a whole group over a perfect bus (the pair harness) ------------------------------


class Group:
    """N adapters whose sync messages reach every other adapter at once."""

    def __init__(self, scores: list[float]) -> None:
        self.states = {
            i + 1: initial_state(adapter=i + 1, want_active=i == 0, term=0, now=0.0)
            for i in range(len(scores))
        }
        self.scores = dict(zip(self.states, scores, strict=True))
        self.alive = set(self.states)

    def broadcast(self, sender: int, now: float) -> None:
        st_ = self.states[sender]
        for other in self.alive - {sender}:
            self.states[other], _ = apply(
                self.states[other],
                PeerHeard(sender, st_.role, st_.term, st_.health_score, st_.is_in_sync),
                now,
            )

    def step(self, now: float) -> None:
        for adapter in sorted(self.alive):
            state, _ = apply(self.states[adapter], HealthMeasured(self.scores[adapter]), now)
            state, _ = apply(state, Tick(), now)
            if state.role is Role.BACKUP and state.active is not None and not state.deciding:
                state, _ = apply(state, ActiveReported(state.active, state.term, ReportVerdict.MATCH, 0), now)
            self.states[adapter] = state
        for adapter in sorted(self.alive):
            self.broadcast(adapter, now)

    def actives(self) -> list[int]:
        return [a for a in self.alive if self.states[a].role is Role.ACTIVE]


@settings(max_examples=60, deadline=None)
@given(scores=st.lists(st.floats(0, 100), min_size=2, max_size=5))
def test_killing_the_active_elects_exactly_one_healthiest_backup(scores: list[float]) -> None:
    group = Group(scores)
    now = 0.0
    while now < 1.0:
        group.step(now)
        now += CFG.heartbeat_interval_s
    assert group.actives() == [1]
    group.alive.discard(1)
    while now < 3.0:
        group.step(now)
        now += CFG.heartbeat_interval_s
    actives = group.actives()
    assert len(actives) == 1
    winner = actives[0]
    best = max((group.scores[a], -a) for a in group.alive)
    assert (group.scores[winner], -winner) == best
    assert all(group.states[a].term == 2 for a in group.alive)
    assert all(group.states[a].active == winner for a in group.alive)


def test_a_lasting_mismatch_counts_as_one_desync() -> None:
    state = _with_rival(synced_backup(score=10.0), 90.0, 1.0)
    for i in range(10):  # the active keeps reporting the same digest mismatch until a snapshot lands
        state, _ = apply(state, ActiveReported(1, 1, ReportVerdict.DIGEST_MISMATCH, 0), 1.0 + i * 0.01)
    assert len(state.desyncs) == 1 and state.role is Role.BACKUP
    state, _ = apply(state, ActiveReported(1, 1, ReportVerdict.MATCH, 0), 1.2)
    state, _ = apply(state, ActiveReported(1, 1, ReportVerdict.DIGEST_MISMATCH, 0), 1.3)
    assert len(state.desyncs) == 2


@settings(max_examples=100, deadline=None)
@given(
    changes=st.fixed_dictionaries(
        {},
        optional={
            "term": st.integers(0, 2**32),
            "active": st.none() | st.integers(1, 9),
            "throttled": st.booleans(),
            "reported_at": st.none() | st.floats(0, 1e6),
            "desyncs": st.tuples(st.floats(0, 1e6)),
            "status": st.sampled_from(SyncStatus),
        },
    )
)
def test_evolve_makes_the_state_replace_makes(changes: dict[str, object]) -> None:
    state = synced_backup(score=10.0)
    before = repr(state), replace(state)
    new = state.evolve(**changes)
    assert new == replace(state, **changes)  # type: ignore[arg-type]
    assert (repr(state), state) == before  # the old state is untouched
    assert type(new) is SyncState


def test_evolve_refuses_what_is_not_a_field_and_the_state_stays_frozen() -> None:
    state = synced_backup(score=10.0)
    with pytest.raises(TypeError, match="no field colour"):
        state.evolve(term=2, colour="red")
    with pytest.raises(AttributeError):
        state.evolve(term=2).term = 3  # type: ignore[misc]
