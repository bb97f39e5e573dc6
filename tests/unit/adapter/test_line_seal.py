"""A line's sealing does what the core's published SealView says: plain, sealed, or held back."""

from __future__ import annotations

from feedha.adapter.core.output import LineOutput
from feedha.adapter.core.seal_view import SealView
from feedha.adapter.line_seal import LineSeal
from feedha.proto.seal import SealKey, is_sealed

KEY = SealKey(key_id=3, key=bytes(range(32)))
PACKET = LineOutput(channel=1, adapter=1, max_packet_bytes=1400, heartbeat_s=1.0).heartbeat(
    term=1, next_msg_seq=1, now=0.0, send_time_ns=0
)


def test_a_line_follows_the_view_it_was_given() -> None:
    seal = LineSeal("line")
    assert not seal.active and seal.status() == {}  # plain until told otherwise
    seal.use(SealView(required=frozenset({"line"})))
    assert seal.active and seal.seal(PACKET) is None and seal.seal(PACKET) is None
    assert seal.status() == {"sealing": {"key_id": None, "unsent": 2}}  # held back, counted
    seal.use(SealView(key=KEY, required=frozenset({"line"})))
    sealed = seal.seal(PACKET)
    assert sealed is not None and is_sealed(sealed) and seal.status()["sealing"]["key_id"] == 3
    other = LineSeal("conflated")
    other.use(SealView(required=frozenset({"line"})))
    assert not other.active  # not a line that must be sealed: plain
