"""The books an overload drill compares its client with: one core's conversion of the capture.

feedha/drills/reference.py converts a capture with one adapter core alone and keeps its line's
messages as the drill's client does; on itch50 and fix44 captures its books and stats must equal
the independent references (tests/itch50_reference.py, tests/fix44_capture.py), and a drill's
result is compared with it symbol by symbol.
"""

from __future__ import annotations

import math

from feedha.adapter.formats.itch50.day import make_itch_capture
from feedha.drills.reference import compare, reference_books
from feedha.plain_source.feedha_fix_capture import make_feedha_fix_capture
from tests.fix44_capture import Reference, make_capture
from tests.itch50_reference import ItchReference


def test_an_itch50_capture_s_reference_equals_the_independent_one() -> None:
    capture = make_itch_capture(symbols=60, orders=1500, seed=9)
    got = reference_books("itch50", capture.data)
    independent = ItchReference()
    independent.feed_file(capture.data)
    assert got["books"] == independent.shown() and len(got["books"]) == 60
    assert got["stats"] == independent.shown_stats()


def test_a_fix44_capture_s_reference_equals_the_independent_one() -> None:
    capture = make_capture(symbols=30, messages=600, seed=4)
    data = b"".join(capture.messages)
    got = reference_books("fix44", data)
    independent = Reference()
    independent.feed(data)
    assert got["books"] == independent.shown()
    for symbol, stats in independent.shown_stats().items():
        for name, value in stats.items():
            mine = got["stats"][symbol][name]
            assert (mine is None) == (value is None) and (
                value is None or math.isclose(mine, value, rel_tol=1e-9)
            )


def test_a_feedha_fix_capture_gives_each_symbol_s_last_state_and_comparisons_name_what_differs() -> None:
    capture = make_feedha_fix_capture(messages=3000, symbols=40, seed=2)
    assert capture.data == make_feedha_fix_capture(messages=3000, symbols=40, seed=2).data  # seeded
    got = reference_books("feedha-fix", capture.data)
    assert got["books"] == {} and len(got["stats"]) == 40
    assert all(state["volume"] >= 0 and state["trade_count"] >= 0 for state in got["stats"].values())
    verdict = compare(got, got)
    assert verdict["books_equal"] and verdict["stats_equal"] and verdict["symbols"] == 40
    changed = {**got["stats"], "AAAA": {"volume": -1}}
    verdict = compare({"books": {}, "stats": changed}, got)
    assert not verdict["stats_equal"] and verdict["stats_differ"] == ["AAAA"]
