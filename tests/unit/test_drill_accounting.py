"""A drill's account of its source (feedha/drills/accounting.py): who speaks for the group, what is left."""

from __future__ import annotations

from typing import Any

from feedha.drills.accounting import account


def _status(
    *, numbered: int, next_msg_seq: int, base: int = 0, quarantined: int = 0, skipped: int = 0,
    in_gaps: int = 0, absent: int = 0, session: int = 1,
) -> dict[str, Any]:  # fmt: skip
    ledger = {
        "base": base, "numbered": numbered, "quarantined": quarantined, "skipped": skipped,
        "in_gaps": in_gaps, "declared_absent": absent, "unplaced": 0, "unexplained": 0, "gap_ranges": 0,
        "gaps": [],
    }  # fmt: skip
    return {"next_msg_seq": next_msg_seq, "session": session, "accounting": ledger}


def test_the_survivor_that_booked_most_speaks_and_what_nobody_booked_is_unaccounted() -> None:
    statuses = {
        2: _status(numbered=900, next_msg_seq=901, quarantined=10, skipped=40),  # 950 booked
        3: _status(numbered=800, next_msg_seq=901, quarantined=10, skipped=40, in_gaps=50),  # its own gap
    }
    group = account(statuses, sent=1000)
    assert (group.adapter, group.booked, group.unaccounted, group.numbered) == (2, 950, 50, 900)
    summary = group.summary()
    assert summary["unaccounted"] == 50 and summary["source_gaps"] == 0
    assert summary["accounting"]["covered"] == 1000


def test_positions_the_source_numbered_past_count_against_what_it_covered() -> None:
    # A SequenceReset: 21 messages sent over 25 positions; 4 declared absent.
    group = account({1: _status(numbered=20, next_msg_seq=21, skipped=1, absent=4)}, sent=21, covered=25)
    assert group.unaccounted == 0
    restarted = account({1: _status(numbered=5, next_msg_seq=21, base=20)}, sent=25)  # recovered to 20
    assert restarted.unaccounted == 0
    rolled = account({1: _status(numbered=10, next_msg_seq=13, session=3)}, sent=10)  # two boundaries
    assert rolled.numbered == 10


def test_no_survivor_accounts_for_nothing() -> None:
    group = account({}, sent=10)
    assert (group.adapter, group.unaccounted, group.numbered) == (None, 10, 0)
