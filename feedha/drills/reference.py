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
from feedha.adapter.formats.capture_registry import capture_named
from feedha.adapter.formats.registry import engine_for_format
from feedha.client.books import BookKeeper
from feedha.drills.client import StateKeeper, book_summary
from feedha.plain_source.config import MAX_BATCH
from feedha.proto import market_pb2, wire

__all__ = ["compare", "reference_books"]

TOPIC: Final = b"A-Z"
MISMATCHES_KEPT: Final = 10  # symbols named in a comparison's result


def _frames(input_format: str, data: bytes) -> Iterator[bytes]:
    # The capture as the source sends it unpaced: a batch of messages due at a time, each
    # batch cut into frames by the format (FIX: back to back; itch50: MoldUDP64 packets).
    face = capture_named(input_format)
    messages = face.read(data).messages
    for first in range(0, len(messages), MAX_BATCH):
        yield from face.frames(messages, first, min(len(messages), first + MAX_BATCH))


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
