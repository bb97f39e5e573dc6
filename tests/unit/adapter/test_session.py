"""The pure parts of sessions: the schedule, the proposal's verdicts, the daily roll and the digest."""

from __future__ import annotations

import datetime as dt

import pytest

from feedha.adapter.conversion.state import ConversionState, SymbolValues, next_session, session_digest
from feedha.adapter.core.session import (
    PROPOSAL_TIMEOUT_S,
    RECORD_SESSION_BOUNDARY,
    RETRY_S,
    Session,
    SessionKeeper,
    SessionReason,
    SessionSchedule,
    Verdict,
)
from feedha.adapter.formats.feedha_fix._native import NativeConversionState
from feedha.adapter.formats.feedha_fix.state import FeedhaFixState
from feedha.adapter.journal import format as journal_format

UTC = dt.UTC


def _ns(*args: int, tz: dt.tzinfo = UTC) -> int:
    since = dt.datetime(*args, tzinfo=tz) - dt.datetime(1970, 1, 1, tzinfo=UTC)
    return (since.days * 86_400 + since.seconds) * 1_000_000_000 + since.microseconds * 1000


def _utc(ns: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=ns // 1000)


# ---- the schedule -----------------------------------------------------------------------


def test_the_next_end_is_the_first_time_of_day_after_the_start() -> None:
    schedule = SessionSchedule.parse("17:00", "America/New_York")
    # 12:00 UTC on a winter day is 07:00 in New York: today's 17:00 EST, 22:00 UTC.
    assert _utc(schedule.next_end_after(_ns(2024, 1, 15, 12))) == dt.datetime(2024, 1, 15, 22, tzinfo=UTC)
    # At 17:00 exactly the session that starts there ends tomorrow (strictly after).
    start = _ns(2024, 1, 15, 22)
    assert _utc(schedule.next_end_after(start)) == dt.datetime(2024, 1, 16, 22, tzinfo=UTC)
    # Summer time: 17:00 EDT is 21:00 UTC.
    assert _utc(schedule.next_end_after(_ns(2024, 7, 1, 12))) == dt.datetime(2024, 7, 1, 21, tzinfo=UTC)


def test_a_time_skipped_by_daylight_saving_falls_an_hour_later_and_a_repeated_one_the_first_time() -> None:
    skipped = SessionSchedule.parse("02:30", "America/New_York")
    # 2024-03-10 02:30 does not exist in New York: taken with the offset before (EST), 07:30 UTC.
    end = skipped.next_end_after(_ns(2024, 3, 10, 1))
    assert _utc(end) == dt.datetime(2024, 3, 10, 7, 30, tzinfo=UTC)
    repeated = SessionSchedule.parse("01:30", "America/New_York")
    # 2024-11-03 01:30 happens twice: the first time (EDT), 05:30 UTC.
    assert _utc(repeated.next_end_after(_ns(2024, 11, 3, 1))) == dt.datetime(2024, 11, 3, 5, 30, tzinfo=UTC)


def test_seconds_and_utc_and_describe() -> None:
    schedule = SessionSchedule.parse("23:59:30")
    assert schedule.zone == "UTC" and schedule.describe() == "23:59:30 UTC"
    assert _utc(schedule.next_end_after(_ns(2030, 5, 5))) == dt.datetime(2030, 5, 5, 23, 59, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("end", "zone", "says"),
    [
        ("25:00", "UTC", "time of day"),
        ("17", "UTC", "time of day"),
        ("17:00+01:00", "UTC", "time of day"),
        ("", "UTC", "time of day"),
        ("5pm", "UTC", "time of day"),
        ("17:00", "Mars/Olympus_Mons", "unknown time zone"),
        ("17:00", "utc", "unknown time zone"),
        ("17:00", "/etc/passwd", "unknown time zone"),
        ("17:00", "../../etc/passwd", "unknown time zone"),
        ("17:00", "x\x00y", "unknown time zone"),
        ("17:00", "a" * 5000, "unknown time zone"),
        ("17:00", "", "unknown time zone"),
    ],
)
def test_bad_times_and_zones_are_refused_by_name(end: str, zone: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as caught:
        SessionSchedule.parse(end, zone)
    assert len(str(caught.value)) < 200  # a 5,000-character zone is not echoed back whole


# ---- the keeper: what the active does with its proposal ------------------------------------


def _keeper(start_ns: int = 1) -> SessionKeeper:
    keeper = SessionKeeper(SessionSchedule.parse("17:00"))
    keeper.session = Session(1, start_ns=start_ns)
    return keeper


def test_a_proposal_commits_once_every_recent_backup_acknowledged_at_or_before_the_fence() -> None:
    keeper = _keeper()
    proposal = keeper.propose(after=100, time_ns=5, reason=SessionReason.OPERATOR, now=0.0)
    assert (
        keeper.propose(after=999, time_ns=6, reason=SessionReason.SCHEDULE, now=0.1) is proposal
    )  # one at a time
    assert keeper.verdict(recent={2, 3}, at_fence=True, now=0.01) is Verdict.WAIT
    keeper.on_ack(2, session=2, after=100, position=90)
    keeper.on_ack(3, session=2, after=99, position=100)  # an answer to another fence: not counted
    assert keeper.verdict(recent={2, 3}, at_fence=True, now=0.02) is Verdict.WAIT
    keeper.on_ack(3, session=2, after=100, position=100)
    assert keeper.verdict(recent={2, 3}, at_fence=False, now=0.03) is Verdict.WAIT  # not at the fence yet
    assert keeper.verdict(recent={2, 3}, at_fence=True, now=0.03) is Verdict.COMMIT
    assert proposal.boundary().ended == 1 and proposal.boundary().started == 2


def test_a_backup_past_the_fence_moves_it_and_everyone_answers_again() -> None:
    keeper = _keeper()
    keeper.propose(after=100, time_ns=5, reason=SessionReason.OPERATOR, now=0.0)
    keeper.on_ack(2, session=2, after=100, position=130)
    keeper.on_ack(3, session=2, after=100, position=120)
    assert keeper.verdict(recent={2, 3}, at_fence=True, now=0.01) is Verdict.MOVE
    assert keeper.move_fence() == 130
    assert keeper.verdict(recent={2, 3}, at_fence=True, now=0.02) is Verdict.WAIT  # acks were for 100
    keeper.on_ack(2, session=2, after=130, position=130)
    keeper.on_ack(3, session=2, after=130, position=125)
    assert keeper.verdict(recent={2, 3}, at_fence=True, now=0.03) is Verdict.COMMIT


def test_an_unanswered_proposal_is_withdrawn_and_a_scheduled_end_tried_again_later() -> None:
    keeper = _keeper(start_ns=_ns(2024, 1, 15, 12))
    due = keeper.due(wall_ns=_ns(2024, 1, 15, 17, 0, 1), now=0.0)
    assert due == _ns(2024, 1, 15, 17)
    keeper.propose(after=7, time_ns=due, reason=SessionReason.SCHEDULE, now=0.0)
    assert keeper.due(wall_ns=_ns(2024, 1, 15, 18), now=0.0) is None  # one proposal at a time
    late = PROPOSAL_TIMEOUT_S + 0.01
    assert keeper.verdict(recent={2}, at_fence=True, now=late) is Verdict.WITHDRAW
    assert keeper.withdraw(now=late) is not None and keeper.withdrawn == 1
    assert keeper.due(wall_ns=_ns(2024, 1, 15, 18), now=late + RETRY_S / 2) is None
    assert keeper.due(wall_ns=_ns(2024, 1, 15, 18), now=late + RETRY_S) == due


def test_an_inherited_proposal_is_never_withdrawn_only_carried_out() -> None:
    keeper = _keeper()
    keeper.hold(keeper.propose(after=50, time_ns=5, reason=SessionReason.OPERATOR, now=0.0))
    keeper.proposal = None  # as a backup knows it
    inherited = keeper.inherit(now=10.0)
    assert inherited is not None and inherited.inherited and keeper.held is None
    assert keeper.verdict(recent={3}, at_fence=True, now=10.5) is Verdict.WAIT  # 3 has not answered yet
    later = 10.0 + PROPOSAL_TIMEOUT_S + 0.1
    assert keeper.verdict(recent={3}, at_fence=False, now=later) is Verdict.WAIT
    assert keeper.verdict(recent={3}, at_fence=True, now=later) is Verdict.COMMIT


def test_no_schedule_no_start_time_no_due_end() -> None:
    assert SessionKeeper(None).due(wall_ns=1 << 62, now=0.0) is None
    assert _keeper(start_ns=0).due(wall_ns=1 << 62, now=0.0) is None  # the session's start is not known yet


def test_a_backup_acknowledges_once_then_again_only_after_a_while() -> None:
    keeper = _keeper()
    assert keeper.should_ack(session=2, after=10, now=0.0)
    assert not keeper.should_ack(session=2, after=10, now=0.05)
    assert keeper.should_ack(session=2, after=11, now=0.06)  # a moved fence: at once
    assert keeper.should_ack(session=2, after=11, now=0.2)


def test_the_journal_and_the_core_agree_on_the_record_flag() -> None:
    assert RECORD_SESSION_BOUNDARY == journal_format.RECORD_SESSION_BOUNDARY == 0x02


# ---- the state: the daily roll and the digest ------------------------------------------------


@pytest.mark.parametrize("state_type", [FeedhaFixState, NativeConversionState])
def test_rolling_resets_the_daily_fields_and_the_digest_covers_the_session(
    state_type: type[ConversionState],
) -> None:
    state = state_type()
    values = SymbolValues(
        volume=500,
        high=11.0,
        low=9.0,
        last=10.5,
        vwap=10.1,
        trade_count=7,
        bid=10.4,
        ask=10.6,
        notional=5050.0,
    )
    state.set_symbol("AAPL", values)
    state.session = 1
    before = state.digest
    state.roll(2)
    assert state.session == 2
    assert state.get("AAPL") == SymbolValues(last=10.5, bid=10.4, ask=10.6) == next_session(values)
    assert state.digest == state.recompute_digest() != before
    other = state_type()
    other.restore(state.snapshot(), session=3)  # same values, another session: another digest
    assert other.digest != state.digest and other.digest == other.recompute_digest()
    other.session = 2
    assert other.digest == state.digest


def test_session_digest_bounds() -> None:
    assert session_digest(0) == 0
    assert session_digest(1) != session_digest(2) != 0
    with pytest.raises(ValueError, match="session_id"):
        session_digest(-1)
    with pytest.raises(ValueError, match="session_id"):
        FeedhaFixState().roll(1 << 63)
