"""Conflation benchmark: what conflated lines cost per message, the book alone and on the adapter.

Two figures (docs/architecture.md "Conflated lines"):

* ``conflation_book``: :meth:`ConflationBook.note` for every message and
  :meth:`ConflationBook.close` at every boundary, over ``MESSAGES`` messages of
  ``SYMBOLS`` symbols with a boundary every ``PER_INTERVAL`` messages (100 ms at
  100k msg/s). Ceiling, same run: the plainest conflation -- ``latest[symbol] =
  value`` per message and ``sorted(latest.items())`` plus a clear at each
  boundary -- which cannot close an interval at an earlier msg_seq than it has
  reached (what a backup ahead of the active's boundary needs).
* ``conflation_adapter``: an active adapter core (native engine, no journal)
  with a conflated line every 0.1 s of its clock, the clock moving
  ``FRAME_S`` a frame of ``FRAME`` messages (``SYMBOLS_ADAPTER`` symbols):
  :meth:`AdapterCore.on_source` and ``on_tick`` per frame, thread CPU per
  message -- what the wired path adds: reading each published packet's
  blocks for their symbols, the book, proposing and committing, and encoding
  every interval's states. Ceiling, same run: the same core without a
  conflated line. ``params.bare_recv_ns_per_message`` is the raw ZeroMQ floor
  under the runner's source socket for the same frames (``micro_adapter``'s
  ``bare_recv``), for scale.
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
ADAPTER_MESSAGES: Final = 200_000
QUICK_ADAPTER_MESSAGES: Final = 40_000
FRAME: Final = 50  # messages a source frame
FRAME_S: Final = 0.0005  # the core's clock per frame: 100k msg/s
INTERVAL_S: Final = 0.1
SYMBOLS_ADAPTER: Final = 200
EPOCH_NS: Final = 1_790_000_000_000_000_000


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


def _adapter(frames: list[bytes], conflate_s: float | None) -> tuple[float, dict[str, Any]]:
    """Thread CPU seconds of an active core over ``frames`` (and its conflated line's counters)."""
    import time

    from feedha.adapter.core import AdapterCore, CoreConfig
    from feedha.adapter.formats.feedha_fix.choice import make_engine
    from feedha.adapter.formats.feedha_fix.table import ConverterTable

    config = CoreConfig(
        channel_number=1, adapter=1, source_stream_number=1, want_active=True, conflate_interval_s=conflate_s
    )
    core = AdapterCore(config, make_engine(ConverterTable.load()), now=0.0)
    now = config.sync.startup_grace_s
    core.on_tick(now=now, wall_ns=EPOCH_NS)  # alone in its group: the active from here
    start = time.thread_time()
    for frame in frames:
        now += FRAME_S
        wall_ns = EPOCH_NS + round(now * 1e9)
        core.on_source([b"A-Z", frame], now=now, wall_ns=wall_ns)
        core.on_tick(now=now, wall_ns=wall_ns)
    spent = time.thread_time() - start
    return spent, core.conflated.status()


def _adapter_figure(quick: bool) -> Figure:
    from feedha.bench.micro_adapter import _time_bare_recv, make_frames

    count = QUICK_ADAPTER_MESSAGES if quick else ADAPTER_MESSAGES
    frames = make_frames(count, FRAME)
    with_s, status = min((_adapter(frames, INTERVAL_S) for _ in range(REPEATS)), key=lambda r: r[0])
    without_s = min(_adapter(frames, None)[0] for _ in range(REPEATS))
    bare_s = min(_time_bare_recv(frames) for _ in range(REPEATS))
    params: dict[str, Any] = {
        "messages": count,
        "frame": FRAME,
        "symbols": SYMBOLS_ADAPTER,
        "interval_s": INTERVAL_S,
        "intervals": status["intervals"],
        "conflated_blocks_per_interval": round(status["next_conf_seq"] / max(1, status["intervals"]), 1),
        "ns_per_message": round(with_s / count * 1e9, 1),
        "ceiling_ns_per_message": round(without_s / count * 1e9, 1),
        "added_ns_per_message": round((with_s - without_s) / count * 1e9, 1),
        "bare_recv_ns_per_message": round(bare_s / count * 1e9, 1),
        "counts": "on_source + on_tick per frame of an active core, thread CPU; ceiling: no conflated line",
    }
    return figure(
        name="conflation_adapter",
        value=count / with_s,
        unit="msg/s",
        ceiling=count / without_s,
        params=params,
    )


def run(*, quick: bool = False) -> list[Figure]:
    """The book's msg/s beside the bare dict's; an active core's with a conflated line beside without."""
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
        ),
        _adapter_figure(quick),
    ]
