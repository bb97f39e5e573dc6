"""Helpers for itch50 tests: play BinaryFILE messages through an engine as MoldUDP64 packets."""

from __future__ import annotations

from typing import Any

from feedha.adapter.conversion.itch50_engine import Itch50Engine
from feedha.adapter.errors import ConversionError
from feedha.proto import moldudp64


def packets(data: bytes, *, per_packet: int = 20, session: str = "TEST") -> list[bytes]:
    """The MoldUDP64 packets of a BinaryFILE capture, ``per_packet`` messages each, numbered from 1."""
    messages = list(moldudp64.read_binary_file(data))
    return [
        moldudp64.encode_packet(session, start + 1, messages[start : start + per_packet])
        for start in range(0, len(messages), per_packet)
    ]


def convert(engine: Itch50Engine, packet: bytes, blocks: list[bytes] | None = None) -> dict[str, int]:
    """Convert one packet as the core would (runs, and the careful path one message at a time).

    ``blocks``, when given, receives each run's wire blocks and digests.
    """
    reasons: dict[str, int] = {}
    frame = engine.source_frame(packet)
    pos = 0
    while pos < len(frame):
        pos, _count, stop, run_blocks, _first, digests, _payloads = engine.run(
            frame, pos, 0, 0, 1 << 20, 1 << 20, 1, 1, True, False
        )
        if blocks is not None:
            blocks += [run_blocks, digests]
        if stop == 1:
            body, pos = engine.next_message(frame, pos)
            try:
                if body is None:
                    raise ConversionError("malformed", "no record")
                engine.state.apply(engine.parse(body))
            except ConversionError as exc:
                reasons[exc.reason] = reasons.get(exc.reason, 0) + 1
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
