"""The books a drill's client must end with: the capture converted straight, by one adapter core alone.

A drill plays a capture through a group of adapter processes under load and
faults; :func:`reference_books` converts the same capture in this process by
one :class:`~adapter.core.AdapterCore`, the active of a group of one, with no
socket, no journal, no load and no failover -- frames cut as ``feedha source
--file`` cuts them -- and keeps its line's messages with the client's own
:class:`~client.books.BookKeeper`. What the drill's client printed must equal
it, symbol for symbol (:func:`compare`). It checks the distributed run, not
the conversion rules: those are checked against independent implementations
(tests/itch50_reference.py, tests/fix44_capture.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from feedha.adapter.core import AdapterCore, CoreConfig, Publish
from feedha.adapter.core.sync_types import Role
from feedha.adapter.formats.registry import engine_for_format
from feedha.client.books import BookKeeper
from feedha.drills.client import StateKeeper, book_summary
from feedha.plain_source.capture import read_capture
from feedha.plain_source.itch50_playback import SESSION, read_itch_capture
from feedha.proto import market_pb2, moldudp64, wire

__all__ = ["compare", "reference_books"]

TOPIC: Final = b"A-Z"
FRAME_MESSAGES: Final = 64  # FIX messages per frame (the source's batch)
MISMATCHES_KEPT: Final = 10  # symbols named in a comparison's result


def _frames(input_format: str, data: bytes) -> Iterator[bytes]:
    # The capture as the source sends it: MoldUDP64 packets, or FIX messages back to back.
    if input_format == "itch50":
        messages = read_itch_capture(data).messages
        first, size = 0, moldudp64.HEADER.size
        for index, message in enumerate(messages):
            grown = size + 2 + len(message)
            if grown > moldudp64.MAX_PACKET_BYTES and index > first:
                yield moldudp64.encode_packet(SESSION, first + 1, messages[first:index])
                first, grown = index, moldudp64.HEADER.size + 2 + len(message)
            size = grown
        yield moldudp64.encode_packet(SESSION, first + 1, messages[first:])
        return
    messages = read_capture(data).messages
    for first in range(0, len(messages), FRAME_MESSAGES):
        yield b"".join(messages[first : first + FRAME_MESSAGES])


def reference_books(input_format: str, data: bytes, *, depth: int = 10) -> dict[str, Any]:
    """The ``books`` and ``stats`` a client of the capture ends with (``book_summary``'s shape).

    Raises:
        ValueError: an unknown format, or a capture that holds no message.
    """
    core = AdapterCore(
        CoreConfig(channel_number=1, adapter=1, source_stream_number=1, want_active=True, group_size=1),
        engine_for_format(input_format, book_depth=depth),
        now=0.0,
    )
    now = 0.0
    core.force_role(Role.ACTIVE, now=now)
    books, states = BookKeeper(), StateKeeper()
    for frame in _frames(input_format, data):
        now += 0.001
        for actions in (
            core.on_source([TOPIC, frame], now=now, wall_ns=0),
            core.on_source_drained(now=now, wall_ns=0),
        ):
            _keep(actions, books, states)
    _keep(core.on_tick(now=now + 1.0, wall_ns=0), books, states)
    return book_summary(books, depth, states)


def _keep(actions: list[Any], books: BookKeeper, states: StateKeeper) -> None:
    for action in actions:
        if type(action) is not Publish:
            continue
        _header, blocks = wire.decode_packet(action.packet)
        for block in blocks:
            update = market_pb2.MarketUpdate.FromString(block.payload)
            books.observe(block.msg_seq, update)
            states.observe(update)


def compare(got: Mapping[str, Any], want: Mapping[str, Any]) -> dict[str, Any]:
    """Whether a client's ``books`` and ``stats`` equal the reference's, and the first symbols that differ."""
    out: dict[str, Any] = {}
    for key in ("books", "stats"):
        mine, theirs = got.get(key, {}), want.get(key, {})
        differ = sorted(
            symbol for symbol in set(mine) | set(theirs) if mine.get(symbol) != theirs.get(symbol)
        )
        out[f"{key}_equal"] = not differ
        out[f"{key}_differ"] = differ[:MISMATCHES_KEPT]
    out["symbols"] = len(want.get("books", {}) or want.get("stats", {}))
    return out
