"""``feedha drill book --format itch50``: a generated ITCH day through the group, the active killed midway.

The capture is written by adapter/formats/itch50/day.py field by field from
the specification's layouts (BinaryFILE), played as MoldUDP64 packets at a set
rate; the printed books and stats must equal tests/itch50_reference.py's,
rebuilt independently from the same bytes, with nothing lost and no line hole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from feedha.adapter.formats.itch50.day import make_itch_capture
from tests.book_drill import KEYS, run_book_drill
from tests.itch50_reference import ItchReference

BOOK_TYPES = b"RAFECXDUPQ"  # the types that give a block (the others are counted and skipped)


def _check(result: dict[str, Any], data: bytes, messages: int, symbols: int) -> None:
    assert list(result) == KEYS
    assert (result["lost"], result["line_holes"], result["conflicts"]) == (0, 0, 0), result
    assert (result["unaccounted"], result["source_gaps"]) == (0, 0), result
    assert result["sent"] == messages and result["quarantined"] == 0
    assert result["skipped"] == messages - sum(1 for m in _messages(data) if m[:1] in BOOK_TYPES)
    reference = ItchReference()
    reference.feed_file(data)
    blocks = sum(1 for message in _messages(data) if message[:1] in BOOK_TYPES)
    assert result["delivered"] == blocks
    assert result["books"] == reference.shown() and len(result["books"]) == symbols
    assert result["stats"] == reference.shown_stats()  # exact: VWAP is correctly rounded on both sides


def _messages(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos + 2 <= len(data):
        length = int.from_bytes(data[pos : pos + 2], "big")
        out.append(data[pos + 2 : pos + 2 + length])
        pos += 2 + length
    return out


@pytest.mark.timeout(120)
def test_a_short_itch_drill_gives_the_reference_books_across_a_kill(tmp_path: Path) -> None:
    capture = make_itch_capture(symbols=300, orders=1500, seed=21)
    path = tmp_path / "day.itch"
    path.write_bytes(capture.data)
    code, result = run_book_drill("itch50", path, "--rate", "1500", timeout=110)
    _check(result, capture.data, capture.messages, 300)
    assert code == 0


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_thousands_of_symbols_and_hundreds_of_thousands_of_orders(tmp_path: Path) -> None:
    capture = make_itch_capture(symbols=3000, orders=200_000, seed=4)
    path = tmp_path / "day.itch"
    path.write_bytes(capture.data)
    code, result = run_book_drill("itch50", path, "--rate", "2000", timeout=880)
    _check(result, capture.data, capture.messages, 3000)
    assert code == 0
