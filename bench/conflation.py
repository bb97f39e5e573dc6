"""Conflation benchmark: the interval book's cost per message, beside a bare dict of latest values.

Only the pure part of conflated lines exists so far (``adapter/core/conflation.py``,
docs/architecture.md "Conflated lines"): this measures what it will add per
message on the adapter -- :meth:`ConflationBook.note` for every message and
:meth:`ConflationBook.close` at every boundary -- over ``MESSAGES`` messages of
``SYMBOLS`` symbols with a boundary every ``PER_INTERVAL`` messages (100 ms at
100k msg/s). Not counted: finding a message's symbol and state (the
conversion engine has them) and encoding the interval's blocks.

Ceiling, same run: the plainest conflation -- ``latest[symbol] = value`` per
message and ``sorted(latest.items())`` plus a clear at each boundary -- which
cannot close an interval at an earlier msg_seq than it has reached (what a
backup ahead of the active's boundary needs).
"""

from __future__ import annotations

import random
from typing import Any, Final

from feedha.adapter.core.conflation import Boundary, ConflationBook
from feedha.bench.common import Figure, best_time, figure

MESSAGES: Final = 1_000_000
QUICK_MESSAGES: Final = 100_000
SYMBOLS: Final = 5_000
PER_INTERVAL: Final = 10_000
REPEATS: Final = 3


def _stream(count: int) -> list[tuple[int, str, int]]:
    rng = random.Random(7)
    names = [f"S{i:04d}" for i in range(SYMBOLS)]
    return [(seq, rng.choice(names), seq) for seq in range(1, count + 1)]


def _book(stream: list[tuple[int, str, int]]) -> int:
    book: ConflationBook[int] = ConflationBook()
    note, close = book.note, book.close
    entries = 0
    for msg_seq, symbol, value in stream:
        note(msg_seq, symbol, value)
        if msg_seq % PER_INTERVAL == 0:
            interval = close(Boundary(msg_seq // PER_INTERVAL, msg_seq, 0, 1))
            entries += 0 if interval is None else len(interval.entries)
    return entries


def _ceiling(stream: list[tuple[int, str, int]]) -> int:
    latest: dict[str, int] = {}
    entries = 0
    for msg_seq, symbol, value in stream:
        latest[symbol] = value
        if msg_seq % PER_INTERVAL == 0:
            entries += len(sorted(latest.items()))
            latest.clear()
    return entries


def run(*, quick: bool = False) -> list[Figure]:
    """The book's msg/s (note every message, close every interval) beside the bare dict's."""
    count = QUICK_MESSAGES if quick else MESSAGES
    stream = _stream(count)
    entries = _book(stream)
    assert entries == _ceiling(stream), "the book and the bare dict disagree on the intervals"
    book_s = best_time(lambda: _book(stream), repeats=REPEATS)
    bare_s = best_time(lambda: _ceiling(stream), repeats=REPEATS)
    params: dict[str, Any] = {
        "messages": count,
        "symbols": SYMBOLS,
        "messages_per_interval": PER_INTERVAL,
        "interval_entries": entries,
        "ns_per_message": round(book_s / count * 1e9, 1),
        "ceiling_ns_per_message": round(bare_s / count * 1e9, 1),
        "counts": "note() per message and close() per boundary; not the symbol lookup or the encoding",
    }
    return [
        figure(
            name="conflation_book", value=count / book_s, unit="msg/s", ceiling=count / bare_s, params=params
        )
    ]
