"""``feedha drill book``: a simplefix-written fix44 capture through the group, the active killed midway.

The printed books and stats must equal a reference rebuilt independently from
the same capture (tests/fix44_capture.py), with nothing lost and no line hole.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tests import fix44_capture
from tests.book_drill import KEYS, run_book_drill
from tests.fix44_capture import Reference, make_capture


def _check(result: dict[str, Any], data: bytes, malformed: int, sent: int) -> None:
    assert list(result) == KEYS
    assert (result["lost"], result["line_holes"], result["conflicts"]) == (0, 0, 0), result
    assert (result["unaccounted"], result["source_gaps"]) == (0, 0), result
    assert result["sent"] == sent and result["quarantined"] == malformed
    reference = Reference()
    reference.feed(data)
    assert result["books"] == reference.shown()
    for symbol, stats in reference.shown_stats().items():
        for name, value in stats.items():
            got = result["stats"][symbol][name]
            assert (got is None) == (value is None), (symbol, name)
            assert value is None or math.isclose(got, value, rel_tol=1e-9), (symbol, name, got, value)


@pytest.mark.timeout(120)
def test_a_short_book_drill_gives_the_reference_books_across_a_kill(tmp_path: Path) -> None:
    capture = make_capture(symbols=120, messages=600, seed=11)
    path = tmp_path / "capture.fix"
    data = b"".join(capture.messages)
    path.write_bytes(data)
    code, result = run_book_drill("fix44", path, "--rate", "600", timeout=110)
    _check(result, data, len(capture.malformed), len(capture.messages))
    assert code == 0


@pytest.mark.timeout(120)
def test_poison_skipped_types_a_reset_and_a_real_gap_are_each_accounted_for(tmp_path: Path) -> None:
    # The capture's heartbeats and its SequenceReset are skipped, its malformed messages and a
    # 268=65535 put in place of a heartbeat are quarantined, and a later heartbeat never goes out:
    # a gap every adapter books. Nothing is unaccounted; the books are those of what was sent.
    capture = make_capture(symbols=120, messages=600, seed=11)  # the seed the short drill above plays
    messages = list(capture.messages)
    beats = [index for index, message in enumerate(messages) if b"\x0135=0\x01" in message]
    poisoned, missing = beats[2], beats[-3]
    entry = [(279, 0), (269, "0"), (55, "S0001"), (270, "100.00"), (271, 5)]
    body = [(262, "req"), (268, 65535), *entry]  # one entry where 65535 are announced
    messages[poisoned] = fix44_capture._message("X", poisoned + 1, body)
    del messages[missing]
    data = b"".join(messages)
    path = tmp_path / "gapped.fix"
    path.write_bytes(data)
    code, result = run_book_drill("fix44", path, "--rate", "600", timeout=110)
    assert (result["unaccounted"], result["lost"], result["source_gaps"]) == (0, 0, 1), result
    assert result["sent"] == len(messages)
    assert result["quarantined"] == len(capture.malformed) + 1
    assert result["skipped"] == len(beats) - 2 + 1  # the SequenceReset is not market data either
    reference = Reference()
    reference.feed(data)
    assert result["books"] == reference.shown()
    assert code == 0


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_logged_capture_of_thousands_of_symbols(tmp_path: Path) -> None:
    capture = make_capture(symbols=3000, messages=20000, seed=2)
    path = tmp_path / "capture.log"
    path.write_bytes(b"".join(b"20260105-14:30:00.000 : " + m + b"\n" for m in capture.messages))
    code, result = run_book_drill("fix44", path, "--rate", "2000", timeout=380)
    _check(result, b"".join(capture.messages), len(capture.malformed), len(capture.messages))
    assert code == 0
