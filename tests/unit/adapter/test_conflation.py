"""Conflation intervals: the same on every adapter whatever its lag, bounded, none lost to a failover."""

from __future__ import annotations

import random

from feedha.adapter.core.conflation import Boundary, ConflationBook, Interval, IntervalKeeper

SYMBOLS = ("AAPL", "IBM", "MSFT", "NVDA")


def _stream(count: int, seed: int = 3) -> list[tuple[int, str, int]]:
    rng = random.Random(seed)
    return [(seq, rng.choice(SYMBOLS), seq * 10) for seq in range(1, count + 1)]


def test_a_book_ahead_of_the_boundary_closes_the_same_interval_as_one_exactly_there() -> None:
    stream = _stream(300)
    boundaries = [Boundary(k, 60 * k, 1000 * k, 1) for k in range(1, 5)]
    exact: ConflationBook[int] = ConflationBook()
    ahead: ConflationBook[int] = ConflationBook()
    got_exact: list[Interval[int] | None] = []
    pos = 0
    for boundary in boundaries:  # one book closes right at each boundary
        while pos < len(stream) and stream[pos][0] <= boundary.msg_seq:
            exact.note(*stream[pos])
            pos += 1
        got_exact.append(exact.close(boundary))
    for change in stream:  # the other has numbered everything before it hears a boundary
        ahead.note(*change)
    got_ahead = [ahead.close(boundary) for boundary in boundaries]
    assert got_ahead == got_exact
    first = got_exact[0]
    assert first is not None and [s for s, _ in first.entries] == sorted({s for _, s, _ in stream[:60]})
    for symbol, value in first.entries:  # each symbol's last value at or before the boundary
        assert value == max(v for seq, s, v in stream[:60] if s == symbol)
    assert ahead.close(Boundary(9, 30, 0, 1)) is None  # a boundary already passed cannot be covered


def test_a_book_over_its_bound_covers_nothing_until_it_is_reset() -> None:
    book: ConflationBook[int] = ConflationBook(max_pending=10)
    for change in _stream(11):
        book.note(*change)
    assert book.overflowed and book.close(Boundary(1, 11, 0, 1)) is None
    book.reset(11, _stream(20))
    interval = book.close(Boundary(2, 20, 0, 1))
    assert not book.overflowed and interval is not None
    assert {s for s, _ in interval.entries} == {s for seq, s, _ in _stream(20) if seq > 11}


def _close(keeper: IntervalKeeper, book: ConflationBook[int], boundary: Boundary) -> Interval[int]:
    interval = book.close(boundary)
    assert interval is not None
    keeper.closed(interval)
    return interval


def test_the_active_commits_only_what_live_backups_hold_and_a_promoted_backup_loses_no_interval() -> None:
    stream = _stream(400)
    active, backup = IntervalKeeper(interval_s=0.1), IntervalKeeper(interval_s=0.1)
    active_book: ConflationBook[int] = ConflationBook()
    backup_book: ConflationBook[int] = ConflationBook()
    for change in stream:
        active_book.note(*change)
        backup_book.note(*change)
    active_line: list[Interval[int]] = []
    backup_line: list[Interval[int]] = []
    for step in range(1, 4):  # three intervals; the backup acknowledges each
        boundary = active.tick(now=0.1 * step, wall_ns=step, published_seq=100 * step)
        assert boundary is not None and boundary.k == step
        interval = _close(active, active_book, boundary)
        assert active.commit({"b": 0.1 * step}, now=0.1 * step) == []  # the live backup has not acked
        ack = backup.on_report(active.proposed, committed_k=step - 1)
        active.on_ack("b", ack, now=0.1 * step)
        assert active.commit({"b": 0.1 * step}, now=0.1 * step) == [boundary]
        active_line.append(interval)
        backup.on_report([], committed_k=step)
        for due in backup.due(numbered_seq=100 * step):
            backup_line.append(_close(backup, backup_book, due))
    assert active.tick(now=0.35, wall_ns=0, published_seq=300) is None  # too early
    fourth = active.tick(now=0.45, wall_ns=4, published_seq=390)
    assert fourth is not None and fourth.first_conf_seq == active_line[-1].next_conf_seq
    active_line.append(_close(active, active_book, fourth))
    ack = backup.on_report(active.proposed, committed_k=3)
    active.on_ack("b", ack, now=0.45)
    assert active.commit({"b": 0.45}, now=0.45) == [fourth]  # published; then the active dies
    for boundary in backup.promote():  # the backup never heard interval 4 was committed
        backup_line.append(_close(backup, backup_book, boundary))
    assert backup_line == active_line  # the same intervals, numbers and states: none lost
    fifth = backup.tick(now=0.6, wall_ns=5, published_seq=400)
    assert fifth is not None and (fifth.k, fifth.first_conf_seq) == (5, active_line[-1].next_conf_seq)


def test_a_backup_heard_long_ago_does_not_hold_the_commit_up_and_nothing_new_proposes_nothing() -> None:
    active = IntervalKeeper(interval_s=0.1)
    boundary = active.tick(now=1.0, wall_ns=1, published_seq=5)
    assert boundary is not None
    assert active.commit({"gone": 0.5}, now=1.0) == [boundary]
    assert active.tick(now=1.2, wall_ns=2, published_seq=5) is None  # nothing new since: no interval
