"""Seeded ``feedha-fix`` captures: the plain source's market written to a file, for drills and tests.

:func:`make_feedha_fix_capture` writes what ``feedha source --streams A-Z``
would send -- the random-walk market of :class:`~plain_source.model.SymbolModel`
(quotes and trades of every symbol, ``34=`` numbered from 1, event times one
``step_ns`` apart from a fixed epoch) -- as raw FIX messages back to back, the
layout ``feedha source --file F --format feedha-fix`` plays
(:func:`~adapter.formats.fix_captures.read_capture`). The same arguments write the
same bytes. It stays beside the model it writes (the format's folder may not
import the plain source). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from feedha.plain_source.model import SymbolModel

__all__ = ["FeedhaFixCapture", "make_feedha_fix_capture"]

EPOCH_NS: Final = 1_790_000_000_000_000_000  # the first message's event time
STEP_NS: Final = 50_000  # 20,000 messages a second of event time
CHUNK: Final = 50_000  # messages made at a time


@dataclass(frozen=True, slots=True)
class FeedhaFixCapture:
    """A generated capture: its bytes and what it holds."""

    data: bytes
    messages: int
    symbols: int


def make_feedha_fix_capture(*, messages: int = 10_000, symbols: int = 200, seed: int = 5) -> FeedhaFixCapture:
    """A seeded capture of ``messages`` feedha-fix messages over ``symbols`` symbols (one stream, A-Z).

    Raises:
        ValueError: ``messages`` or ``symbols`` below 1.
    """
    if messages < 1 or symbols < 1:
        raise ValueError(f"need messages >= 1 and symbols >= 1, got {messages} and {symbols}")
    model = SymbolModel(streams=("A-Z",), symbol_count=symbols, seed=seed, epoch_ns=EPOCH_NS, step_ns=STEP_NS)
    parts: list[bytes] = []
    for first in range(0, messages, CHUNK):
        parts += model.generate(min(CHUNK, messages - first))[0]
    return FeedhaFixCapture(b"".join(parts), messages, symbols)
