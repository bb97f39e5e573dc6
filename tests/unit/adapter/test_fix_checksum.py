"""FIX's CheckSum in the two C engines (``_fix_checksum.h``), on messages of every length.

The checksum is the sum of a message's bytes before ``10=``, modulo 256 (FIX 4.4, volume 2,
"CheckSum"); the expected value is computed here with ``sum()``, not by ``proto.fix``. A run
must convert a message whose declared checksum is right and stop (the careful path, which
quarantines it) at one whose checksum is wrong, whatever the message's length: the C sum
works in rounds of 128 eight-byte words, so lengths around and beyond 1 KiB and 2 KiB, and
bytes up to 0x7E, are where a lane that carried into the next one would show.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from feedha.adapter.conversion.engine import Stop
from feedha.adapter.formats.feedha_fix.choice import make_engine
from feedha.adapter.formats.feedha_fix.table import ConverterTable
from feedha.adapter.formats.fix44.engine import Fix44Engine
from feedha.adapter.formats.fix44.native import fix44_native

needs_fix44 = pytest.mark.skipif(fix44_native() is None, reason="_orders is not built")

# Around a round's end (1,024 bytes), where 7-bit bytes could carry out of a lane (~2,080
# bytes of "~") and a few rounds on.
LENGTHS = (1, 7, 8, 9, 100, 1015, 1024, 1033, 2047, 2100, 2300, 4096, 5003)
FILLERS = (b"~", b"A", b"0123456789abcdef~}|{", b" ")


def _framed(body: bytes, checksum_offset: int = 0) -> bytes:
    """``8=FIX.4.4 | 9=len | body | 10=sum``, written out by hand (``body`` ends in SOH)."""
    head = b"8=FIX.4.4\x019=%d\x01" % len(body)
    declared = (sum(head + body) + checksum_offset) % 256
    return head + body + b"10=%03d\x01" % declared


def _sender(length: int, filler: bytes) -> bytes:
    return (filler * (length // len(filler) + 1))[:length]


def _feedha_fix(sender: bytes, seq: int) -> bytes:
    return (
        b"35=X\x0149=" + sender + b"\x0134=%d\x0152=20260921-14:13:20.000000000\x0155=AAPL\x01"
        b"60=20260921-14:13:20.000000000\x01268=1\x01279=0\x01269=2\x01270=101.25\x01271=100\x01" % seq
    )


def _fix44(sender: bytes, seq: int) -> bytes:
    return (
        b"35=X\x0149=" + sender + b"\x0156=FEEDHA\x0134=%d\x0152=20260105-14:30:00.000\x01"
        b"268=1\x01279=0\x01269=0\x0155=AAA\x01270=%d\x01271=5\x01" % (seq, 100 + seq)
    )


def _run_one(run: Callable[..., Any], message: bytes, seq: int) -> tuple[int, int]:
    # frame, pos, expect, stop_seq, room, max_count, time, stream, publish, payloads
    result = run(message, 0, seq, 0, 1 << 20, 1 << 20, 1, 1, True, False)
    return result[1], result[2]


@pytest.mark.parametrize("kind", ["feedha-fix", pytest.param("fix44", marks=needs_fix44)])
def test_a_run_takes_a_right_checksum_and_stops_at_a_wrong_one_at_any_length(kind: str) -> None:
    if kind == "fix44":
        engine = Fix44Engine(depth=4, prefer_native=True)
        body_of = _fix44
    else:
        engine = make_engine(ConverterTable.load(), prefer_native=True)
        body_of = _feedha_fix
    assert engine.is_native
    run = engine.run_function()
    seq = 0
    for length in LENGTHS:
        for filler in FILLERS:
            body = body_of(_sender(length, filler), seq + 1)
            for offset in (1, 255, 128):  # wrong by one either way, and by half
                count, stop = _run_one(run, _framed(body, offset), seq + 1)
                assert (count, stop) == (0, Stop.SLOW), (length, filler, offset)
            count, stop = _run_one(run, _framed(body), seq + 1)
            assert (count, stop) == (1, Stop.END), (length, filler)
            seq += 1
