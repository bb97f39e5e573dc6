"""Helpers for itch50 tests: play BinaryFILE messages through an engine as MoldUDP64 packets."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any

from feedha.adapter.errors import ConversionError
from feedha.adapter.formats.itch50.engine import Itch50Engine
from feedha.proto import moldudp64, wire


def packets(data: bytes, *, per_packet: int = 20, session: str = "TEST") -> list[bytes]:
    """The MoldUDP64 packets of a BinaryFILE capture, ``per_packet`` messages each, numbered from 1."""
    messages = list(moldudp64.read_binary_file(data))
    return [
        moldudp64.encode_packet(session, start + 1, messages[start : start + per_packet])
        for start in range(0, len(messages), per_packet)
    ]


@dataclass
class Played:
    """What a play published: every message's wire block and the digest after it, in order."""

    blocks: bytearray = field(default_factory=bytearray)
    digests: bytearray = field(default_factory=bytearray)
    from_runs: int = field(default=0, compare=False)  # messages the engine's runs converted


def convert(engine: Itch50Engine, packet: bytes, played: Played | None = None) -> dict[str, int]:
    """Convert one packet as the core would: runs, and the careful path one message at a time.

    ``played``, when given, receives every converted message's block and digest (the run's and
    the careful path's alike, so engines that stop their runs at other places compare equal).
    """
    reasons: dict[str, int] = {}
    frame = engine.source_frame(packet)
    pos = 0
    while pos < len(frame):
        pos, count, stop, run_blocks, _first, digests, _payloads = engine.run(
            frame, pos, 0, 0, 1 << 20, 1 << 20, 1, 1, True, False
        )
        if played is not None:
            played.from_runs += count
            played.blocks += run_blocks
            played.digests += digests
        if stop == 1:
            body, pos = engine.next_message(frame, pos)
            try:
                if body is None:
                    raise ConversionError("malformed", "no record")
                msg = engine.parse(body)
                staged = engine.state.stage(msg)
                payload = engine.encode_staged(msg, staged, 1)
                engine.state.commit(staged)
            except ConversionError as exc:
                reasons[exc.reason] = reasons.get(exc.reason, 0) + 1
                continue
            if played is not None:
                played.blocks += wire.encode_block(1, msg.source_seq, payload)
                played.digests += array("Q", [engine.state.digest]).tobytes()
    return reasons


def shown(engine: Itch50Engine) -> tuple[dict[str, Any], dict[str, Any]]:
    """The engine's books and stats as the drill prints them."""
    books, stats = {}, {}
    for symbol, values in engine.state.snapshot().items():
        book = values.book
        assert book is not None
        books[symbol] = {
            "bids": [[p, s] for p, s, _o in book.bids[: engine.depth]],
            "asks": [[p, s] for p, s, _o in book.asks[: engine.depth]],
        }
        stats[symbol] = {
            name: getattr(book, name) for name in ("volume", "last", "high", "low", "open", "close", "vwap")
        }
    return books, stats
