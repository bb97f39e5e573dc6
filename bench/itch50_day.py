"""``feedha bench itch50_day --messages N``: an ITCH 5.0 day played as fast as possible through a channel.

What it measures
----------------
A seeded TotalView-ITCH 5.0 capture of ``N`` messages (:func:`make_day_capture`:
2,000 stocks, of which 8 take 40 % of the orders; adds, executions, cancels,
deletes, replaces, trades and crosses, only messages that give a block) is
played by ``feedha source --format itch50`` as MoldUDP64 packets, unpaced
(the source goes as fast as its slowest subscriber takes it), through an
active and two backups, every adapter journaling with ``--fsync batch``, to
one arbitrating client (:func:`bench.pipeline.run_pipeline`, as ``bench
throughput`` runs its itch50 ramp). The figure is the client's delivered
msg/s, first delivery to last. Beside it, in the same run:

- ``ratio_shape``: that rate over the bare model of the same shape
  (:mod:`bench.shape`: a source, three relays, a client keeping the first
  copy; messages of the capture's mean size) sending the same count
  unpaced; ``ratio_shape_journal`` over the model whose relays journal too.
  (``bench throughput`` compares paced ramps; an unpaced day is compared
  with the model's unpaced run.)
- ``cpu``: every process's CPU per message from the first delivery to the
  last (:class:`bench.cpu.RunWindow`).
- ``itch_book_msgs_per_s``: the ``itch-book`` package (a C++ ITCH 5.0 parser
  and book engine, a bench-only dependency) parsing the same capture and
  applying every message to its books, best of three, in this process; and
  ``active_over_itch_book``, the active's CPU per message over itch-book's
  time per message.
- ``bytes_per_live_order``: the itch50 state's memory per live order at the
  day's end count of live orders (``bench itch50_orders``'s measure: a fresh
  process naming the day's stocks and adding that many orders through the
  state, RSS growth over the count); the stocks' share is apart too
  (``stock_bytes``, ``bytes_per_live_order_without_stocks``): at a few live
  orders a stock it is most of the figure. The adapters expose no memory
  figure of their own; the active's RSS growth over the run per live order
  is in the parameters too (``active_rss_growth_per_live_order``), an upper
  bound that also holds the ring of recent source frames (at most 64 MiB),
  the journal's and the sockets' buffers.

It checks, after the clock: nothing lost (the client's count, and the
active's journal holds every message; the backups' journals are counted as
they stand when the run stops, which may be short of the end: a backup
journals what the active's reports release) and the books: every symbol's book rebuilt from
the active's journal by the client's own :class:`~client.books.BookKeeper`
equals itch-book's final book of that symbol (price, size and order count of
the shown levels). A difference is reported (``books_equal``, the first
symbols that differ) and makes the run fail as a lost message does.

Not in ``bench all``: a million messages take minutes (the capture is
generated in Python, about 40 us a message on a loaded 2-core machine); run it
alone. ``--quick`` plays :data:`QUICK_MESSAGES`.
"""

from __future__ import annotations

import random
import struct
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from feedha.adapter.formats.itch50.day import DAY_END_NS, DAY_START_NS, make_itch_capture
from feedha.bench.common import Figure, figure
from feedha.bench.pipeline import PipelineOptions, PipelineResult, open_log, run_pipeline
from feedha.bench.shape_run import ShapeOptions, run_shape
from feedha.proto import moldudp64

__all__ = [
    "DEFAULT_MESSAGES",
    "QUICK_MESSAGES",
    "DayCapture",
    "itch_book_books",
    "itch_book_rate",
    "journal_books",
    "make_day_capture",
    "run",
    "shown_books",
]

DEFAULT_MESSAGES: Final = 1_000_000
QUICK_MESSAGES: Final = 50_000
MAX_MESSAGES: Final = 20_000_000  # a capture is read whole by the source (at most 1 GiB)
SYMBOLS: Final = 2_000
BUSY_SYMBOLS: Final = 8  # the first 8 stocks also take BUSY_SHARE of the orders: 5 % of the day each
BUSY_SHARE: Final = 0.4
SEED: Final = 7
DEPTH: Final = 10  # the adapters' default --book-depth, and itch-book's depth table
MESSAGES_PER_ORDER: Final = 2.1  # a book-only day has ~2.22 messages an order: a little over, cut to N
# The busy stream's order numbers, moved apart from the others' (itch-book takes up to 2**36).
BUSY_REF_OFFSET: Final = 1 << 32
MIN_RATE: Final = 2_000.0  # msg/s the time bound assumes at worst
ITCH_BOOK_RUNS: Final = 3
_REF: Final = struct.Struct(">Q")
_LEN: Final = struct.Struct(">H")


@dataclass(frozen=True, slots=True)
class DayCapture:
    """A generated day: BinaryFILE bytes, how many messages, the stocks and the busy ones."""

    data: bytes
    messages: int
    symbols: int
    busy: tuple[str, ...]


def make_day_capture(messages: int, *, seed: int = SEED, symbols: int = SYMBOLS) -> DayCapture:
    """A seeded day of ``messages`` ITCH messages, a few stocks much busier than the rest (pure).

    Two days of the itch50 format's generator (:func:`make_itch_capture`, book-only) are
    interleaved at random: one over ``symbols`` stocks, and one over the first
    :data:`BUSY_SYMBOLS` of them (the same names, stock locates and, with the same seed, the
    same mid prices) with :data:`BUSY_SHARE` of the orders, its order numbers moved by
    :data:`BUSY_REF_OFFSET`. The directory comes first; timestamps are then laid out again in
    order over the day, and the day is cut at ``messages`` (every message still names a live
    order: a prefix of a valid day is valid).

    Raises:
        ValueError: ``messages`` below the directory's size or above :data:`MAX_MESSAGES`.
    """
    if not symbols + 1 <= messages <= MAX_MESSAGES:
        raise ValueError(f"messages must be in {symbols + 1}..{MAX_MESSAGES}, got {messages}")
    orders = int((messages - symbols) / MESSAGES_PER_ORDER) + 1
    busy_orders = int(orders * BUSY_SHARE)
    many = make_itch_capture(symbols=symbols, orders=orders - busy_orders, seed=seed, book_only=True)
    few = make_itch_capture(symbols=BUSY_SYMBOLS, orders=max(busy_orders, 1), seed=seed, book_only=True)
    directory, rest = _split_directory(list(moldudp64.read_binary_file(many.data)))
    busy = [_moved_refs(msg) for msg in _split_directory(list(moldudp64.read_binary_file(few.data)))[1]]
    day = [*directory, *_interleave(rest, busy, random.Random(seed))][:messages]
    span = DAY_END_NS - DAY_START_NS
    data = b"".join(
        _LEN.pack(len(msg)) + msg[:5] + (DAY_START_NS + span * i // len(day)).to_bytes(6, "big") + msg[11:]
        for i, msg in enumerate(day)
    )
    names = tuple(msg[11:19].decode().rstrip() for msg in directory[:BUSY_SYMBOLS])
    return DayCapture(data, len(day), symbols, names)


def _split_directory(messages: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    # The stock directory (R, first in a generated day) and the messages after it.
    count = next((i for i, msg in enumerate(messages) if msg[:1] != b"R"), len(messages))
    return messages[:count], messages[count:]


def _moved_refs(msg: bytes) -> bytes:
    # The message with its order reference numbers moved by BUSY_REF_OFFSET.
    kind = msg[:1]
    if kind not in b"AFECXDU":
        return msg
    out = bytearray(msg)
    for at in (11, 19) if kind == b"U" else (11,):
        _REF.pack_into(out, at, _REF.unpack_from(out, at)[0] + BUSY_REF_OFFSET)
    return bytes(out)


def _interleave(first: list[bytes], second: list[bytes], rng: random.Random) -> list[bytes]:
    # Both lists' messages in their own order, mixed at random in proportion to what is left.
    out: list[bytes] = []
    i = j = 0
    while i < len(first) or j < len(second):
        left_first, left_second = len(first) - i, len(second) - j
        if rng.random() * (left_first + left_second) < left_first:
            out.append(first[i])
            i += 1
        else:
            out.append(second[j])
            j += 1
    return out


# ---- itch-book: the third-party engine, its rate and its books -------------------------------


def itch_book_rate(data: bytes, *, runs: int = ITCH_BOOK_RUNS) -> dict[str, Any]:
    """itch-book parsing ``data`` and applying every message to its books: best of ``runs``, this process.

    Returns:
        ``msgs_per_s``, ``us_per_msg``, ``runs_s`` (each run's seconds) and ``stats`` (itch-book's
        counters after the last run: messages, adds, live orders, crossed books ...).
    """
    from itch_book._core import Session

    times, stats = [], {}
    for _ in range(runs):
        session = Session(tables=[], depth=0, symbols=[])  # books only: no table rows kept
        started = time.perf_counter()
        session.feed(data)
        times.append(time.perf_counter() - started)
        stats = session.stats()
    best = min(times)
    messages = int(stats["messages"])
    return {
        "msgs_per_s": round(messages / best, 1),
        "us_per_msg": round(1e6 * best / messages, 4),
        "runs_s": [round(t, 4) for t in times],
        "stats": stats,
    }


def itch_book_books(data: bytes, *, depth: int = DEPTH) -> dict[str, dict[str, list[list[float]]]]:
    """itch-book's final book of every stock with a live order: ``[price, size, orders]`` best first.

    Each stock's last row of itch-book's ``depth`` table (a row whenever its top ``depth``
    levels change); a stock whose book is empty at the end is left out.
    """
    from itch_book._core import Session

    session = Session(tables=[], depth=depth, symbols=[])
    session.feed(data)
    names = {int(row[0]): str(row[1]).strip() for row in session.take_symbols()}
    table = session.take_depth()
    last: dict[int, int] = {}
    for row, locate in enumerate(table["locate"].tolist()):
        last[locate] = row
    books = {}
    for locate, row in last.items():
        book = {side: _levels(table, side[:3], row, depth) for side in ("bids", "asks")}
        if book["bids"] or book["asks"]:
            books[names.get(locate, str(locate))] = book
    return books


def _levels(table: dict[str, Any], side: str, row: int, depth: int) -> list[list[float]]:
    # One side of a depth row: [price, size, orders] of each level shown (a price of 0: none).
    out: list[list[float]] = []
    for k in range(depth):
        price = int(table[f"{side}_px_{k:02d}"][row])
        if price:
            out.append(
                [
                    price / 10_000,
                    float(table[f"{side}_sz_{k:02d}"][row]),
                    int(table[f"{side}_ct_{k:02d}"][row]),
                ]
            )
    return out


def journal_books(directory: Path, *, depth: int = DEPTH) -> tuple[int, dict[str, Any]]:
    """The books a client ends with, rebuilt from a journal: its message count and every non-empty book.

    Every journaled message goes through the client's :class:`~client.books.BookKeeper`, as a
    subscriber's deliveries do; books as :func:`itch_book_books` gives them.
    """
    from feedha.adapter.journal.reader import JournalReader
    from feedha.client.books import BookKeeper
    from feedha.proto import market_pb2

    keeper, count = BookKeeper(), 0
    for record in JournalReader(directory).read():
        if record.flags:
            continue  # a session boundary, not a message
        count += 1
        keeper.observe(record.msg_seq, market_pb2.MarketUpdate.FromString(record.payload))
    return count, shown_books(keeper.books.items(), depth=depth)


def shown_books(
    books: Iterable[tuple[str, Any]], *, depth: int = DEPTH
) -> dict[str, dict[str, list[list[float]]]]:
    """Each non-empty book's best ``depth`` levels a side as :func:`itch_book_books` gives them.

    Args:
        books: ``(symbol, book)`` pairs, a book with ``bids`` and ``asks`` lists of
            ``(price, size, orders)``, best first (the client's books, the engine's ``BookValues``).
    """
    shown = {}
    for symbol, book in books:
        sides = {
            "bids": [[price, size, orders] for price, size, orders in book.bids[:depth]],
            "asks": [[price, size, orders] for price, size, orders in book.asks[:depth]],
        }
        if sides["bids"] or sides["asks"]:
            shown[symbol] = sides
    return shown


def _journaled(directory: Path) -> int:
    # The messages a journal holds (session boundaries left out), nothing decoded.
    from feedha.adapter.journal.reader import JournalReader

    return sum(1 for record in JournalReader(directory).read() if not record.flags)


def differ(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """The symbols whose books differ (sorted)."""
    return sorted(symbol for symbol in set(got) | set(want) if got.get(symbol) != want.get(symbol))


# ---- the run -----------------------------------------------------------------------------------


def run(*, quick: bool = False, messages: int | None = None) -> list[Figure]:
    """Play a day of ``messages`` (default :data:`DEFAULT_MESSAGES`; quick: :data:`QUICK_MESSAGES`).

    Returns:
        One figure, ``itch50_day`` (msg/s), the rest in its parameters (the module docstring).
    """
    count = messages or (QUICK_MESSAGES if quick else DEFAULT_MESSAGES)
    made = time.monotonic()
    capture = make_day_capture(count)
    made_s = time.monotonic() - made
    mean_bytes = (len(capture.data) - 2 * capture.messages) / capture.messages
    itch_book = itch_book_rate(capture.data)
    with (
        tempfile.TemporaryDirectory(prefix="feedha-bench-itch50-day-") as work,
        open_log("itch50_day") as log,
    ):
        path = Path(work) / "day.itch"
        path.write_bytes(capture.data)
        result = _play(path, capture.messages, Path(work) / "journals", log)
        checks = _checks(capture, result, Path(work) / "journals")
        models = _models(capture.messages, mean_bytes, log)
    live = int(itch_book["stats"]["live_orders"])
    return [_figure(capture, result, itch_book, models, checks, params={
        "capture_s": round(made_s, 1), "mean_message_bytes": round(mean_bytes, 1), "log": log.name,
        "quick": quick, **_memory(result, live, capture.symbols)})]  # fmt: skip


def _play(path: Path, messages: int, journals: Path, log: IO[str]) -> PipelineResult:
    # The day through an active and two backups with journals, unpaced, CPU from first to last delivery.
    bound = 60.0 + messages / MIN_RATE
    options = PipelineOptions(
        rate=0, seconds=bound, count=messages, backups=2, journal=True, journal_root=journals,
        measure_cpu=True, capture=path, capture_format="itch50",
    )  # fmt: skip
    return run_pipeline(options, log)


def _checks(capture: DayCapture, result: PipelineResult, journals: Path) -> dict[str, Any]:
    # Nothing lost (the client's count, the active's journal) and the active's books equal to itch-book's.
    want = itch_book_books(capture.data)
    directories = sorted(journals.iterdir())
    journaled, books = journal_books(directories[0])
    summary = result.clients[0][1]
    wrong = differ(books, want)
    return {
        "sent": result.sent[0],
        "delivered": summary["delivered"],
        "lost": result.lost + (capture.messages - result.sent[0]) + max(0, capture.messages - journaled),
        "duplicates": result.duplicates,
        "active_journaled": journaled,
        # A backup journals what the active's reports release; the run stops once the client has
        # everything, so a backup's journal may end short of it (not a loss: informative).
        "backups_journaled_at_stop": [_journaled(d) for d in directories[1:]],
        "failovers": result.failovers,
        "books_compared": len(want),
        "books_equal": not wrong,
        "books_differ": wrong[:10],
    }


def _models(messages: int, mean_bytes: float, log: IO[str]) -> dict[str, float]:
    # The bare model of the shape (3 relays), unpaced, the same count; open and journaling.
    size = max(round(mean_bytes), 16)
    return {
        name: run_shape(
            ShapeOptions(relays=3, count=messages, size=size, nice_source=True, journal=journal), log
        )["rate"]
        for name, journal in (("open", False), ("journal", True))
    }


def _memory(result: PipelineResult, live: int, stocks: int) -> dict[str, Any]:
    # The state's bytes per live order at the day's live count over its stocks, and the active's RSS growth.
    from feedha.bench.itch50 import measure_in_child

    state = measure_in_child(max(live, 1), ["--stocks", str(stocks)])
    growth = (result.cpu or {}).get("rss_growth", {}).get("active")
    return {
        "live_orders": live,
        "bytes_per_live_order": round(state["bytes_per_order"], 1),
        "bytes_per_live_order_without_stocks": round(state["order_bytes_per_order"], 1),
        "stock_bytes": state["stock_bytes"],
        "active_rss_growth_bytes": growth,
        "active_rss_growth_per_live_order": None if growth is None or not live else round(growth / live, 1),
    }


def _figure(
    capture: DayCapture,
    result: PipelineResult,
    itch_book: dict[str, Any],
    models: dict[str, float],
    checks: dict[str, Any],
    *,
    params: dict[str, Any],
) -> Figure:
    summary = result.clients[0][1]
    rate = result.client_rate(summary)
    cpu = result.cpu or {}
    active = (cpu.get("processes", {}).get("active") or {}).get("us_per_msg")
    book_us = itch_book["us_per_msg"]
    return figure(
        name="itch50_day",
        value=rate,
        unit="msg/s",
        ceiling=None,
        ceiling_shape=models["open"] or None,
        params={
            "messages": capture.messages,
            "symbols": capture.symbols,
            "busy_symbols": list(capture.busy),
            "busy_share": BUSY_SHARE,
            "seed": SEED,
            "adapters": "active + 2 backups, journals with --fsync batch, unpaced source",
            **checks,
            "ceiling_shape_journal": round(models["journal"], 1),
            "ratio_shape_journal": round(rate / models["journal"], 3) if models["journal"] else None,
            "cpu": cpu,
            "active_us_per_msg": active,
            "itch_book_msgs_per_s": itch_book["msgs_per_s"],
            "itch_book_us_per_msg": book_us,
            "itch_book_runs_s": itch_book["runs_s"],
            "itch_book_stats": itch_book["stats"],
            "active_over_itch_book": round(active / book_us, 1) if active and book_us else None,
            **params,
        },
    )
