"""The sequencer: msg_seq assignment and position comparisons (rules 1-3)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from feedha.adapter.core.sequencer import PositionReport, ReportVerdict, Sequencer, SourceVerdict


def feed(seq: Sequencer, first: int, last: int, digest: int = 0) -> None:
    for source_seq in range(first, last + 1):
        msg_seq = seq.assign(source_seq)
        seq.record(source_seq, msg_seq, digest + source_seq)


def test_numbers_consecutively_from_one() -> None:
    seq = Sequencer()
    numbers = []
    for source_seq in (5, 6, 7):
        msg_seq = seq.assign(source_seq)
        assert seq.record(source_seq, msg_seq, 0) is None
        numbers.append(msg_seq)
    assert numbers == [1, 2, 3]
    assert seq.next_msg_seq == 4 and seq.next_source_seq == 8


def test_check_source_classifies_next_duplicate_gap() -> None:
    seq = Sequencer()
    assert seq.check_source(42) is SourceVerdict.NEXT  # the first message may be anything
    feed(seq, 42, 44)
    assert seq.check_source(45) is SourceVerdict.NEXT
    assert seq.check_source(44) is SourceVerdict.DUPLICATE
    assert seq.check_source(1) is SourceVerdict.DUPLICATE
    assert seq.check_source(47) is SourceVerdict.GAP


def test_report_at_matching_position_is_in_sync() -> None:
    seq = Sequencer()
    feed(seq, 1, 10, digest=100)
    verdict, ahead = seq.compare(PositionReport(source_seq=7, msg_seq=7, digest=107))
    assert (verdict, ahead) == (ReportVerdict.MATCH, 3)


def test_ahead_with_other_numbering_is_a_numbering_mismatch() -> None:
    seq = Sequencer()
    feed(seq, 1, 10)
    verdict, ahead = seq.compare(PositionReport(source_seq=5, msg_seq=1005, digest=5))
    assert verdict is ReportVerdict.NUMBERING_MISMATCH and ahead == 5


def test_same_numbering_other_digest_is_a_digest_mismatch() -> None:
    seq = Sequencer()
    feed(seq, 1, 10)
    assert seq.compare(PositionReport(5, 5, 999))[0] is ReportVerdict.DIGEST_MISMATCH


def test_behind_adopts_the_active_numbering_on_arrival() -> None:
    # Rule 2: the backup's message for the reported source_seq gets the active's msg_seq.
    seq = Sequencer()
    feed(seq, 1, 10)
    verdict, ahead = seq.compare(PositionReport(source_seq=15, msg_seq=515, digest=15))
    assert verdict is ReportVerdict.BEHIND and ahead == -5
    feed(seq, 11, 14)
    assert seq.next_msg_seq == 15
    msg_seq = seq.assign(15)
    assert msg_seq == 515
    check = seq.record(15, msg_seq, 15)
    assert check is not None and check.renumbered and check.digest_matches
    assert seq.assign(16) == 516


def test_arrival_without_renumbering_reports_digest_result() -> None:
    seq = Sequencer()
    feed(seq, 1, 3)
    seq.compare(PositionReport(5, 5, 77))
    feed(seq, 4, 4)
    msg_seq = seq.assign(5)
    check = seq.record(5, msg_seq, 78)
    assert check is not None and not check.renumbered and not check.digest_matches


def test_old_reports_are_unknown_and_gapped_reports_are_dropped() -> None:
    seq = Sequencer(history_size=4)
    feed(seq, 1, 10)
    assert seq.compare(PositionReport(2, 2, 2))[0] is ReportVerdict.UNKNOWN
    seq.compare(PositionReport(12, 12, 12))
    assert seq.has_pending
    msg_seq = seq.assign(20)  # source gap: 11..19 never arrive
    seq.record(20, msg_seq, 20)
    assert not seq.has_pending


def test_restate_digests_rewrites_history() -> None:
    seq = Sequencer()
    feed(seq, 1, 5)
    seq.restate_digests({4: 44, 5: 55})
    assert seq.compare(PositionReport(4, 4, 44))[0] is ReportVerdict.MATCH
    assert seq.last_digest == 55


def test_rejects_bad_start() -> None:
    with pytest.raises(ValueError, match="next_msg_seq"):
        Sequencer(next_msg_seq=0)


def test_repr_shows_state() -> None:
    seq = Sequencer()
    feed(seq, 1, 3)
    assert repr(seq) == "<Sequencer [next_msg_seq=4, last_source_seq=3, pending=0, history=3]>"


@given(
    start=st.integers(1, 1000),
    lag=st.integers(1, 300),
    offset=st.integers(-500, 500),
    length=st.integers(1, 200),
)
def test_a_lagging_backup_always_converges_on_the_active_numbering(
    start: int, lag: int, offset: int, length: int
) -> None:
    """Whatever its own numbering, a backup behind a report numbers the rest like the active."""
    active_msg_seq = max(1, start + offset)
    backup = Sequencer()
    feed(backup, start, start + length)  # its own numbering: 1, 2, ...
    report_at = start + length + lag
    backup.compare(PositionReport(report_at, active_msg_seq, 0))
    feed(backup, start + length + 1, report_at + 5)
    for later in range(report_at, report_at + 6):
        verdict, _ahead = backup.compare(PositionReport(later, active_msg_seq + later - report_at, later))
        assert verdict is ReportVerdict.MATCH


@given(
    steps=st.lists(
        st.tuples(st.integers(1, 40), st.integers(0, 3), st.booleans()),  # run length, source gap, as a run?
        min_size=1,
        max_size=60,
    )
)
def test_history_in_runs_keeps_the_recent_window_and_stays_bounded(
    steps: list[tuple[int, int, bool]],
) -> None:
    """record_run and record keep the same history a dict of every position would, for the last window."""
    from array import array

    size = 16
    seq = Sequencer(history_size=size)
    expected: dict[int, tuple[int, int]] = {}
    source = 0
    for length, gap, as_run in steps:
        source += gap
        first_source, first_msg = source + 1, seq.next_msg_seq
        digests = [(first_source + i) * 7919 % 2**64 for i in range(length)]
        if as_run:
            seq.record_run(first_source, first_msg, array("Q", digests).tobytes())
        else:
            for i, digest in enumerate(digests):
                seq.record(first_source + i, first_msg + i, digest)
        for i, digest in enumerate(digests):
            expected[first_source + i] = (first_msg + i, digest)
        source += length
        assert seq.last_source_seq == source and seq.next_msg_seq == first_msg + length
        assert seq.last_digest == digests[-1]
    recorded = sorted(expected)
    for position in recorded[-size:]:  # the newest window is always there
        assert seq._lookup(position) == expected[position]
    for position in range(1, source + 1):  # anything still held is right; unseen positions are not
        found = seq._lookup(position)
        assert found is None or found == expected[position]
    assert seq._history_len < 2 * size + 40  # bounded by the window, not by the stream


@given(
    offset=st.integers(-50, 50),
    steps=st.lists(
        st.tuples(st.integers(1, 30), st.integers(0, 40), st.booleans()),  # run length, report ahead, report?
        min_size=1,
        max_size=80,
    ),
)
def test_runs_that_stop_where_pending_stop_says_check_every_report_and_number_like_the_active(
    offset: int, steps: list[tuple[int, int, bool]]
) -> None:
    """A backup whose runs go as far as :meth:`pending_stop` lets them, the careful path taking
    only a position it stops before, numbers every reported position as the active did and
    checks each once; the lowest pending position it keeps is always the true one."""
    from array import array

    def digest(source_seq: int) -> int:
        return source_seq * 7919 % 2**64

    def active_msg_seq(source_seq: int) -> int:
        return 1000 + source_seq

    seq = Sequencer(next_msg_seq=1001 + offset)  # the active gave position 1 msg_seq 1001
    seq.record(1, seq.assign(1), digest(1))
    checked: list[tuple[int, bool, bool]] = []
    reported: set[int] = set()
    for length, ahead, report in steps:
        if report:  # the active's report of a position ahead of (or at) the backup's
            at = seq.last_source_seq + ahead
            verdict, _ahead = seq.compare(PositionReport(at, active_msg_seq(at), digest(at)))
            if verdict is ReportVerdict.BEHIND:  # else compared at once
                reported.add(at)
        assert seq._first_pending == min(seq._pending, default=0)
        end = seq.last_source_seq + length
        while seq.last_source_seq < end:
            first, stop = seq.last_source_seq + 1, seq.pending_stop()
            last = end if not stop else min(end, stop - 1)
            if last < first:  # it stops before this one: the careful path
                check = seq.record(first, seq.assign(first), digest(first))
                if check is not None:
                    checked.append((first, check.renumbered, check.digest_matches))
                continue
            digests = array("Q", (digest(s) for s in range(first, last + 1))).tobytes()
            for at, check in seq.record_run(first, seq.next_msg_seq, digests) or []:
                assert not check.renumbered
                checked.append((at, False, check.digest_matches))
            assert seq._first_pending == min(seq._pending, default=0)
    reached = sorted(at for at in reported if at <= seq.last_source_seq)
    assert [at for at, _renumbered, _same in checked] == reached  # each reached report checked once
    assert all(same for _at, _renumbered, same in checked)
    if reached:  # from the first report on, the active's numbering
        for source_seq in range(reached[0], seq.last_source_seq + 1):
            assert seq.msg_seq_at(source_seq) == active_msg_seq(source_seq)
    renumbered = [at for at, renumbered, _same in checked if renumbered]
    assert len(renumbered) <= (offset != 0)  # only the first report moves the counter
