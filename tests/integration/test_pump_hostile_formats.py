"""The source pump (adapter/_pump.c) against the Python loop on hostile frames of every input format.

A whole adapter process with the pump and one without it (``--no-source-pump``) take the same
seeded stream of mutated frames -- a seeded capture of the format, then bit flips, cuts,
splices, repeats, length and number fields at their boundaries and, for itch50, MoldUDP64
headers whose count, sequence or message-block lengths are set to boundaries -- and their
lines, read with raw taps and decoded from the public wire format
(``tests/integration/probes.py``), must carry the same messages under the same numbers, with
the same quarantine counts and digest, no internal error, and the pump having handed the
bad messages to the Python path. ``tests/unit/adapter/test_fuzz_*.py`` check the same on the
engines and the core without processes.
"""

from __future__ import annotations

import random
import struct
import time
from typing import Any

import pytest
import zmq

from feedha.adapter.formats.itch50.day import make_itch_capture
from feedha.proto import market_pb2, moldudp64
from feedha.proto.wire import MAX_SOURCE_SEQ
from tests.fix44_capture import make_capture
from tests.format_fuzz import fix_field_setter, mutate
from tests.integration.groups import running_group
from tests.integration.probes import CHANNEL, STREAM, decode_line_blocks
from tests.unit.adapter.test_fuzz_itch50 import itch_field

pytest.importorskip("feedha.adapter._pump", reason="the source pump's extension is not built")

MUTATIONS = 60  # per stream
FIX_TAGS = (9, 34, 268, 10, 270, 271, 1023, 346, 279, 269, 55, 36, 52, 60)


def _edits(rng: random.Random) -> list[tuple[Any, ...]]:
    """Seeded mutations in ``tests.format_fuzz.mutations``' shape."""
    edits: list[tuple[Any, ...]] = []
    for _ in range(MUTATIONS):
        at = rng.randrange(1 << 16)
        kind = rng.choice(
            ("flip", "truncate", "extend", "splice", "repeat", "drop", "field", "field", "field")
        )
        if kind == "flip":
            edits.append((kind, at, rng.randrange(1 << 16), rng.randrange(8)))
        elif kind == "truncate":
            edits.append((kind, at, rng.randrange(1 << 16)))
        elif kind == "extend":
            edits.append((kind, at, rng.randbytes(rng.randint(1, 40))))
        elif kind == "splice":
            edits.append((kind, at, *(rng.randrange(1 << 16) for _ in range(3))))
        elif kind in ("repeat", "drop"):
            edits.append((kind, at))
        else:
            edits.append((kind, at, rng.randrange(64), rng.randrange(16)))
    return edits


def _itch_frames(rng: random.Random) -> list[bytes]:
    capture = make_itch_capture(symbols=20, orders=1200, seed=3)
    messages = mutate(list(moldudp64.read_binary_file(capture.data)), _edits(rng), itch_field)
    frames, at = [], 0
    while at < len(messages):
        chunk = messages[at : at + rng.randint(1, 10)]
        sequence, count, lengths = at + 1, len(chunk), [len(m) for m in chunk]
        edit = rng.randrange(60)
        if edit == 0:
            sequence = rng.choice((0, MAX_SOURCE_SEQ + 1, (1 << 64) - 1))
        elif edit == 1:
            count = rng.choice((0, count - 1, count + 1, 0xFFFE, 0xFFFF))
        elif edit == 2:
            lengths[0] = rng.choice((0, 1, lengths[0] + 1, 0xFFFF))
        blocks = b"".join(struct.pack(">H", n & 0xFFFF) + m for n, m in zip(lengths, chunk, strict=True))
        frames.append(struct.pack(">10sQH", b"PUMPFUZZ  ", sequence, count & 0xFFFF) + blocks)
        at += len(chunk)
    return frames


def _fix44_frames(rng: random.Random) -> list[bytes]:
    messages = mutate(
        make_capture(symbols=12, messages=1500, seed=4).messages, _edits(rng), fix_field_setter(FIX_TAGS)
    )
    frames, at = [], 0
    while at < len(messages):
        size = rng.randint(1, 8)
        frames.append(b"".join(messages[at : at + size]))
        at += size
    return frames


def _run(input_format: str, frames: list[bytes], *, pump: bool) -> tuple[dict[int, Any], dict[str, Any]]:
    extra = ["--format", input_format, "--book-depth", "5"] + ([] if pump else ["--no-source-pump"])
    with running_group(channel=CHANNEL, channel_number=1, size=1, rate=3000, seconds=1.0) as group:
        pub: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.XPUB)
        tap: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.SUB)
        try:
            pub.linger, pub.sndhwm, tap.linger, tap.rcvhwm = 0, 0, 0, 0
            pub.setsockopt(zmq.XPUB_VERBOSE, 1)
            pub.bind(group.source_endpoint)
            group.start_adapter(1, active=True, extra=extra)
            tap.subscribe(CHANNEL.encode())
            tap.connect(group.plan.adapter(1).line)
            group.wait_status(1, lambda s: s["role"] == "active", 10)
            assert pub.poll(20_000), "the adapter never subscribed"
            pub.recv()
            # The line's PUB/SUB join: the active's idle heartbeat packet reaching the tap says it is done.
            assert tap.poll(10_000), "no heartbeat on the line"
            tap.recv_multipart()
            line: dict[int, Any] = {}
            for index, frame in enumerate(frames):
                pub.send_multipart([STREAM, frame])
                if index % 20 == 19:
                    _drain(tap, line, 5)
            quiet_until = time.monotonic() + 1.0
            while time.monotonic() < quiet_until:
                if _drain(tap, line, 50):
                    quiet_until = time.monotonic() + 1.0
            return line, group.status(1)
        finally:
            pub.close(linger=0)
            tap.close(linger=0)


def _drain(tap: zmq.Socket[bytes], line: dict[int, Any], timeout_ms: int) -> int:
    got, wait = 0, timeout_ms
    while tap.poll(wait):
        wait = 0
        _topic, packet = tap.recv_multipart()
        for msg_seq, source_seq, payload in decode_line_blocks(packet):
            update = market_pb2.MarketUpdate.FromString(payload)
            update.publish_time_ns = 0
            assert msg_seq not in line, f"msg_seq {msg_seq} twice"
            line[msg_seq] = (source_seq, update.SerializeToString(deterministic=True))
            got += 1
    return got


@pytest.mark.parametrize("input_format", ["itch50", "fix44"])
def test_hostile_frames_take_the_same_path_to_the_line_with_the_pump_and_without(input_format: str) -> None:
    build = _itch_frames if input_format == "itch50" else _fix44_frames
    frames = build(random.Random(17))
    (pumped, pumped_status), (python, python_status) = (
        _run(input_format, frames, pump=pump) for pump in (True, False)
    )
    assert len(pumped) > 1000 and sorted(pumped) == list(range(1, len(pumped) + 1))
    assert pumped == python  # same numbers, same source positions, same messages
    for status in (pumped_status, python_status):
        assert status["internal_errors"] == 0 and status["quarantined"], status["quarantined"]
    assert pumped_status["quarantined"] == python_status["quarantined"]
    assert pumped_status["digest"] == python_status["digest"]
    pump = pumped_status["source_pump"]
    assert pump["runs"] > 0 and pump["handed_back"] > 0, pump
