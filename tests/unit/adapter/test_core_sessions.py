"""Session boundaries with real adapter cores on a simulated clock: every line rolls at one msg_seq.

The group harness (``group_harness.py``) runs three cores, a source and an
arbitrating client; the operator's ``session_end`` goes to the active as
feedctl's would. Each scenario hits the agreement at a different moment: a
backup ahead of the fence, the active killed right after it proposed or right
after it rolled, a backup stopped, killed or restarted across the boundary,
and the daily schedule.
"""

from __future__ import annotations

import datetime as dt

from feedha.adapter.core.commands import EndSession
from feedha.adapter.core.session import PROPOSAL_TIMEOUT_S, SessionSchedule
from feedha.adapter.core.sync_types import Role
from feedha.adapter.core.syncbus import Health, Sender, encode_sync
from feedha.proto import market_pb2

from .group_harness import CHANNEL, EPOCH_NS, CoreGroup


def _session(group: CoreGroup, number: int) -> int:
    return group.members[number].core.sessions.keeper.session.id


def _boundary_msg_seqs(group: CoreGroup, numbers: list[int] | None = None) -> set[int]:
    """Every msg_seq any line or journal carried an end-of-session block at."""
    found: set[int] = set()
    for number in numbers or list(group.members):
        found |= set(group.boundaries(number)) | set(group.journal_boundaries(number))
    return found


def _settled(group: CoreGroup) -> None:
    group.run(1.0, source=False)
    assert (group.lost, group.duplicates, group.out_of_order) == (0, 0, 0)
    assert group.client.stats().conflicts == 0
    assert group.delivered_source_seqs() == group.source.expected()


def _first_updates_after(group: CoreGroup, number: int, msg_seq: int) -> dict[str, market_pb2.SymbolState]:
    first: dict[str, market_pb2.SymbolState] = {}
    for seq, (_source_seq, payload) in sorted(group.line(number).items()):
        if seq > msg_seq:
            update = market_pb2.MarketUpdate.FromString(payload)
            first.setdefault(update.symbol, update.state)
    return first


def test_an_operator_session_end_rolls_every_line_and_journal_at_one_msg_seq() -> None:
    group = CoreGroup(3, rate=2000)
    group.run(1.5)
    reply = group.command(1, EndSession("end of day"))
    assert reply["ok"] and reply["proposed_session"] == 2
    group.run_until(lambda: all(_session(group, n) == 2 for n in group.members), within=1)
    group.run(0.5)
    boundaries = _boundary_msg_seqs(group)
    assert len(boundaries) == 1
    (msg_seq,) = boundaries
    for number in group.members:
        assert set(group.boundaries(number)) == set(group.journal_boundaries(number)) == {msg_seq}
        ended_started = group.boundaries(number)[msg_seq][1:]
        assert ended_started == (1, 2)
        # The daily fields started again: each symbol's first message after the boundary
        # carries only its own trade (or none).
        for state in _first_updates_after(group, number, msg_seq).values():
            assert state.trade_count <= 1
            assert state.trade_count or (state.volume, state.high, state.low) == (0, 0.0, 0.0)
    digests = {m.core.state.digest for m in group.members.values()}
    assert len(digests) == 1
    assert group.session_ends == {msg_seq: group.boundaries(1)[msg_seq][0]}  # the client got it once
    _settled(group)


def test_a_backup_past_the_fence_moves_it_and_nobody_undoes_a_conversion() -> None:
    group = CoreGroup(3, rate=3000)
    group.run(1.5)
    group.stall(1, 0.05)  # the active falls behind the backups for a moment
    group.run(0.05)
    behind = group.members[1].core.sequencer.last_source_seq
    ahead = max(group.members[n].core.sequencer.last_source_seq for n in (2, 3))
    assert ahead > behind
    reply = group.command(1, EndSession())
    assert reply["after_source_seq"] == behind
    group.run_until(lambda: all(_session(group, n) == 2 for n in group.members), within=1)
    group.run(0.3)
    (msg_seq,) = _boundary_msg_seqs(group)
    fence = group.members[1].core.sessions.keeper.session.after_source_seq
    assert fence >= ahead  # it moved to the backup furthest on
    assert all(group.boundaries(n)[msg_seq][0] == fence for n in group.members)
    assert all(m.status["sessions_missed"] == 0 for m in group.members.values())
    _settled(group)


def test_the_active_killed_right_after_proposing_leaves_the_boundary_to_its_successor() -> None:
    group = CoreGroup(3, rate=2000)
    group.run(1.5)
    reply = group.command(1, EndSession())
    group.kill(1)  # the proposal reached the backups, no acknowledgement reached it
    group.run_until(lambda: bool(group.actives()), within=3)
    (new,) = group.actives()
    group.run_until(lambda: _session(group, 2) == _session(group, 3) == 2, within=2)
    group.run(0.5)
    (msg_seq,) = _boundary_msg_seqs(group, [2, 3])
    assert group.boundaries(new)[msg_seq][0] == reply["after_source_seq"]
    assert group.members[new].core.state.digest == group.members[5 - new].core.state.digest
    _settled(group)


def test_the_active_killed_right_after_rolling_its_successor_rolls_at_the_same_msg_seq() -> None:
    group = CoreGroup(3, rate=2000)
    group.run(1.5)
    group.command(1, EndSession())
    group.run_until(lambda: _session(group, 1) == 2, within=1)
    group.kill(1)  # its boundary went out; the backups may not have seen its next report
    (dead_boundary,) = group.boundaries(1)
    group.run_until(lambda: bool(group.actives()), within=3)
    group.run_until(lambda: _session(group, 2) == _session(group, 3) == 2, within=2)
    group.run(0.5)
    assert _boundary_msg_seqs(group) == {dead_boundary}
    _settled(group)


def test_a_backup_down_across_the_boundary_repairs_by_snapshot_into_the_new_session() -> None:
    group = CoreGroup(3, rate=2000)
    group.run(1.5)
    group.kill(3)
    group.command(1, EndSession())
    group.run_until(lambda: _session(group, 1) == _session(group, 2) == 2, within=1)
    group.run(0.5)
    restarted = group.restart(3)
    assert _session(group, 3) == 1  # its journal ends before the boundary
    group.run_until(lambda: restarted.status["status"] == "in_sync" and _session(group, 3) == 2, within=5)
    group.run(0.5)
    assert restarted.core.state.digest == group.members[1].core.state.digest
    assert restarted.status["snapshots_adopted"] >= 1
    assert _boundary_msg_seqs(group) == set(group.boundaries(1))  # its journal has a hole there, no other
    _settled(group)


def test_a_backup_restarted_after_the_boundary_finds_its_session_in_its_journal() -> None:
    group = CoreGroup(3, rate=2000)
    group.run(1.5)
    group.command(1, EndSession())
    group.run_until(lambda: all(_session(group, n) == 2 for n in group.members), within=1)
    group.run(0.5)
    group.kill(3)
    restarted = group.restart(3)
    assert _session(group, 3) == 2 and restarted.core.sessions.keeper.session.boundary_msg_seq == next(
        iter(group.boundaries(1))
    )
    group.run_until(lambda: restarted.status["status"] == "in_sync", within=3)
    assert restarted.status["sessions_missed"] == 0
    _settled(group)


def test_a_stopped_backup_reads_the_boundary_in_order_when_it_wakes() -> None:
    group = CoreGroup(3, rate=1000)
    group.run(1.5)
    group.stall(3, 0.6)  # longer than the active waits for an answer from a backup it hears
    group.run(0.3)
    group.command(1, EndSession())
    group.run_until(lambda: _session(group, 1) == 2, within=1)
    group.run(1.0)
    assert _session(group, 3) == 2 and group.members[3].status["sessions_missed"] == 0
    assert len(_boundary_msg_seqs(group)) == 1
    _settled(group)


def test_the_daily_schedule_ends_the_session_at_its_time_of_day() -> None:
    wall = dt.datetime.fromtimestamp(EPOCH_NS / 1e9, tz=dt.UTC) + dt.timedelta(seconds=2)
    schedule = SessionSchedule.parse(wall.strftime("%H:%M:%S"), "UTC")
    end_ns = schedule.next_end_after(EPOCH_NS)
    group = CoreGroup(3, rate=1000, schedule=schedule)
    group.run_until(lambda: _session(group, 1) == 2, within=4)
    assert EPOCH_NS + group.now * 1e9 >= end_ns
    group.run(0.5)
    (msg_seq,) = _boundary_msg_seqs(group)
    payload = group.line(1)[msg_seq][1]
    boundary = market_pb2.MarketUpdate.FromString(payload).session_boundary
    assert boundary.boundary_time_ns == end_ns and boundary.reason == market_pb2.SESSION_REASON_SCHEDULE
    assert group.members[2].core.sessions.keeper.session.start_ns == end_ns
    group.run(1.0)
    assert _session(group, 1) == 2  # the next end is tomorrow
    _settled(group)


def test_a_proposal_a_heard_peer_never_answers_is_withdrawn_and_the_stream_goes_on() -> None:
    group = CoreGroup(2, rate=1000)
    group.run(1.5)
    silent = encode_sync(
        Health(Sender(9, 1, Role.BACKUP, EPOCH_NS), 90.0, 1000.0, 1.0, 0, 0.0, 0, False, 0, 0),
        channel=CHANNEL,
    )
    reply = group.command(1, EndSession())
    assert reply["ok"]
    for _ in range(round((PROPOSAL_TIMEOUT_S + 0.2) / 0.001)):
        group.members[1].sync_inbox.append(silent)  # adapter 9 is heard, but never acknowledges
        group.step()
    events = [e.event for e in group.members[1].events]
    assert "session_withdrawn" in events and _session(group, 1) == 1
    assert (
        group.members[1].status["session_fence"] is None
        and not group.members[1].core.pipeline.waiting.deferred
    )
    assert not _boundary_msg_seqs(group)
    _settled(group)


def test_a_backup_refuses_to_end_the_session_and_says_where_to_go() -> None:
    group = CoreGroup(2)
    group.run(1.0)
    reply = group.command(2, EndSession())
    assert not reply["ok"] and "not the active" in reply["error"]
