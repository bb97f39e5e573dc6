"""Micro-benchmark of fix44 against feedha-fix, like for like: CPU µs per source message, in-process.

``python -m feedha.bench.micro_fix44 [--messages N] [--repeat R] [--cases ...]``
prints one JSON object. Every case is ``ConversionEngine.run`` over frames of
``--frame`` messages (publishing, no journal: the engine's whole work for a
message -- parse, apply, digest, encode, frame), best of ``--repeat``, µs of
thread CPU per message:

* ``feedha_fix_one`` / ``fix44_one``: the same shape in both formats: one
  entry (a bid or an offer at a new or known price, price-keyed), one symbol
  of 200, per message; feedha-fix on the C fast path where built.
* ``feedha_fix_mix``: feedha-fix as :mod:`bench.micro_adapter` sends it (1-3
  entries, 200 symbols).
* ``fix44_mix``: the fix44 capture of :mod:`bench.capture` (1-3 symbols a
  message, 2-4 entries, price-keyed books ~15 prices a side, some trades).
* ``fix44_deep``: one symbol with 1000 prices a side, one Change a message
  (what a message costs when its book is large).
* ``fix44_careful_10`` / ``fix44_careful_1000`` / ``fix44_careful_4000``: one symbol with
  that many prices a side, one Change a message, each carrying an MDEntryID of non-ASCII text
  (the C run stops at it; the Python path converts the message):
  what a venue that sends every message down the careful path costs at each depth.
* ``fix44_book_full``: one symbol with a side full (``book.MAX_PRICES`` prices), then a New
  at a new price a message: each is quarantined (``book_full``) by the Python path.
* ``fix44_one_top`` / ``fix44_mix_top``: ``fix44_one`` and ``fix44_mix`` at book
  depth 1 (``--book-depth 1``): a block shows the top of each book, as a
  feedha-fix block does, so the two formats encode and hash the same shape.
* ``bare_recv``: the raw baseline, measured in the same run as every
  benchmark here: the feedha-fix frames received from a bare PUB→SUB pair
  over loopback (``recv_multipart`` only), µs per message.

``ratio_one`` and ``ratio_mix`` are fix44 over feedha-fix for the same shape
and for each format's realistic mix, at the default depth (10 levels a side
shown); ``ratio_one_top`` and ``ratio_mix_top`` the same at depth 1, like for
like (docs/performance.md). ``ratio_careful_4000`` is the careful path at 4,000 prices a
side over the same at 10 (1.0: the depth of a book costs the careful path nothing), and
``ratio_book_full`` a refused New on a full side over a careful Change at depth 10.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

MESSAGES: Final = 20_000
FRAME: Final = 50
REPEAT: Final = 3
CAREFUL: Final = {"fix44_careful_10": 10, "fix44_careful_1000": 1_000, "fix44_careful_4000": 4_000}
CASES: Final = (
    "feedha_fix_one",
    "fix44_one",
    "fix44_one_top",
    "feedha_fix_mix",
    "fix44_mix",
    "fix44_mix_top",
    "fix44_deep",
    *CAREFUL,
    "fix44_book_full",
    "bare_recv",
)
TOP: Final = 1  # the book depth of the *_top cases: the top of book, as feedha-fix keeps
_HEAD: Final = ((49, "VENUE"), (56, "FEEDHA"), (52, "20260105-14:30:00.000"))


def _frames(messages: list[bytes], frame: int) -> list[bytes]:
    return [b"".join(messages[i : i + frame]) for i in range(0, len(messages), frame)]


def one_entry_messages(count: int, *, fix44: bool, seed: int = 7) -> list[bytes]:
    """``count`` messages of one bid/offer entry for one of 200 symbols, in either format."""
    from feedha.proto import fix

    rng = random.Random(seed)
    out = []
    for seq in range(1, count + 1):
        symbol, side = f"S{rng.randrange(200):03d}", rng.choice("01")
        price = f"{rng.randint(9990, 10010) / 100:.2f}"  # ~20 prices a side: New, then Changes
        size = rng.randint(1, 500)
        if fix44:
            body: list[tuple[int, Any]] = [(35, "X"), *_HEAD, (34, seq), (268, 1)]
            body += [(279, 0), (269, side), (55, symbol), (270, price), (271, size)]
            out.append(fix.encode_message(body))
        else:
            kind = fix.ENTRY_BID if side == "0" else fix.ENTRY_OFFER
            out.append(
                fix.encode_market_data(
                    source_seq=seq,
                    symbol=symbol,
                    event_time_ns=1_790_000_000_000_000_000 + seq,
                    entries=[fix.SourceEntry(kind, price, size)],
                )
            )
    return out


def deep_book_messages(
    count: int, *, prices: int = 1000, seed: int = 7, extra: tuple[tuple[int, Any], ...] = ()
) -> tuple[list[bytes], int]:
    """A book of ``prices`` prices a side (the first messages), then ``count`` one-level Changes.

    ``extra``: fields every Change carries after its entry (a value the C run does not read sends
    each to the careful path).
    """
    from feedha.proto import fix

    rng = random.Random(seed)
    out: list[bytes] = []

    def message(entries: list[list[tuple[int, Any]]]) -> bytes:
        body: list[tuple[int, Any]] = [(35, "X"), *_HEAD, (34, len(out) + 1), (268, len(entries))]
        for entry in entries:
            body += entry
        return fix.encode_message(body)

    for side, sign in (("0", -1), ("1", 1)):
        for start in range(0, prices, 50):
            out.append(
                message(
                    [[(279, 0), (269, side), (55, "D"), (270, f"{(10_000 + sign * (k + 1)) / 100:.2f}"),
                      (271, 5)] for k in range(start, min(prices, start + 50))]
                )
            )  # fmt: skip
    warm = len(out)
    for _ in range(count):
        side, sign = rng.choice((("0", -1), ("1", 1)))
        price = f"{(10_000 + sign * rng.randint(1, prices)) / 100:.2f}"
        entry = [(279, 1), (269, side), (55, "D"), (270, price), (271, rng.randint(1, 9)), *extra]
        out.append(message([entry]))
    return out, warm


# An MDEntryID of non-ASCII text: valid UTF-8 the parser takes, past the C run's printable ASCII (a
# stop; an unknown tag no longer is one: the C run skips it as the parser does).
UNKNOWN_TAG: Final = ((278, "\u00e9"),)


def book_full_messages(count: int) -> tuple[list[bytes], int]:
    """A book whose bid side is full (``MAX_PRICES`` prices), then ``count`` News at new prices (each
    quarantined, ``book_full``) -- new best bids and new worst bids in turn."""
    from feedha.adapter.conversion.book import MAX_PRICES
    from feedha.proto import fix

    out: list[bytes] = []
    for start in range(0, MAX_PRICES, 50):
        body: list[tuple[int, Any]] = [(35, "X"), *_HEAD, (34, len(out) + 1), (268, 50)]
        for k in range(start, start + 50):
            body += [(279, 0), (269, "0"), (55, "F"), (270, f"{100_000 + k}"), (271, 5)]
        out.append(fix.encode_message(body))
    warm = len(out)
    for k in range(count):
        price = 100_000 + MAX_PRICES + k if k % 2 else 100_000 - 1 - k
        body = [(35, "X"), *_HEAD, (34, len(out) + 1), (268, 1)]
        out.append(fix.encode_message(body + [(279, 0), (269, "0"), (55, "F"), (270, price), (271, 5)]))
    return out, warm


def _time_run(engine: Any, frames: list[bytes], *, start_seq: int = 1) -> tuple[float, int, int]:
    """Thread CPU seconds of ``engine.run`` over ``frames``, the messages it passed (converted, or
    quarantined by the careful path), and how many of them the careful path took (a fix44 run's
    stop: the Python loop converts that one message, or refuses it)."""
    from feedha.adapter.conversion._reference import LoopEngine
    from feedha.adapter.formats.fix44.engine import Fix44Engine
    from feedha.proto import fix

    run = engine.run_function()
    careful = isinstance(engine, Fix44Engine)
    expect, converted, slow = start_seq, 0, 0
    started = time.thread_time()
    for frame in frames:
        pos = 0
        while pos < len(frame):
            result = run(frame, pos, expect, 0, -(1 << 40), 1 << 30, 1, 1, True, False)
            pos, expect, converted = result[0], expect + result[1], converted + result[1]
            if result[1] == 0 and careful:  # a new symbol, a W, ...: the Python loop takes it
                result = LoopEngine.run(engine, frame, pos, expect, 0, -(1 << 40), 1, 1, 1, True, False)
                pos, expect, converted, slow = result[0], expect + result[1], converted + result[1], slow + 1
            if result[1] == 0:  # refused by the careful path (book_full), or feedha-fix's: skipped
                _body, pos = fix.next_message(frame, pos)
                expect, converted = expect + 1, converted + 1
    return time.thread_time() - started, converted, slow


def _engine(fix44: bool, *, python_fix44: bool = False, depth: int = 10) -> Any:
    from feedha.adapter.formats.fix44.engine import Fix44Engine
    from feedha.adapter.formats.registry import engine_for_format

    if fix44 and python_fix44:  # the fix44 engine without its C run (the figures before it)
        return Fix44Engine(depth=depth, prefer_native=False)
    return engine_for_format("fix44" if fix44 else "feedha-fix", book_depth=depth)


def run_case(case: str, messages: int, frame: int, *, python_fix44: bool = False) -> tuple[float, int, int]:
    """Thread CPU seconds of one case, how many messages it took and how many the careful path took."""
    from feedha.bench.capture import fix44_messages
    from feedha.bench.micro_adapter import _time_bare_recv, make_frames

    if case == "fix44_deep" or case in CAREFUL or case == "fix44_book_full":
        if case == "fix44_book_full":
            deep, warm = book_full_messages(messages)
        elif case in CAREFUL:
            deep, warm = deep_book_messages(messages, prices=CAREFUL[case], extra=UNKNOWN_TAG)
        else:
            deep, warm = deep_book_messages(messages)
        engine = _engine(True, python_fix44=python_fix44)
        _time_run(engine, _frames(deep[:warm], frame))
        return _time_run(engine, _frames(deep[warm:], frame), start_seq=warm + 1)

    def one(fix44: bool, depth: int = 10) -> tuple[float, int, int]:
        engine = _engine(fix44, python_fix44=python_fix44, depth=depth)
        return _time_run(engine, _frames(one_entry_messages(messages, fix44=fix44), frame))

    def mix(depth: int) -> tuple[float, int, int]:
        engine = _engine(True, python_fix44=python_fix44, depth=depth)
        return _time_run(engine, _frames(fix44_messages(messages), frame))

    timers: dict[str, Callable[[], tuple[float, int, int]]] = {
        "feedha_fix_one": lambda: one(False),
        "fix44_one": lambda: one(True),
        "fix44_one_top": lambda: one(True, TOP),
        "feedha_fix_mix": lambda: _time_run(_engine(False), make_frames(messages, frame)),
        "fix44_mix": lambda: mix(10),
        "fix44_mix_top": lambda: mix(TOP),
        "bare_recv": lambda: (_time_bare_recv(make_frames(messages, frame)), messages, 0),
    }  # fmt: skip
    return timers[case]()


def main(argv: Sequence[str]) -> int:
    """Run the cases; print one JSON object with µs per message for each and the ratios."""
    parser = argparse.ArgumentParser(
        prog="python -m feedha.bench.micro_fix44", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--messages", type=int, default=MESSAGES, help="messages per case (default: %(default)s)"
    )
    parser.add_argument("--frame", type=int, default=FRAME, help="messages per frame (default: %(default)s)")
    parser.add_argument(
        "--repeat", type=int, default=REPEAT, help="runs per case, best kept (default: %(default)s)"
    )
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES), help="cases (default: all)")
    parser.add_argument(
        "--python-fix44", action="store_true", help="the fix44 engine without its C run (the Python loop)"
    )
    args = parser.parse_args(argv)
    if args.messages < 1 or args.frame < 1 or args.repeat < 1:
        parser.error("--messages, --frame and --repeat must be >= 1")
    result: dict[str, Any] = {"messages": args.messages, "frame": args.frame, "repeat": args.repeat}
    from feedha.adapter.formats.feedha_fix.choice import make_engine
    from feedha.adapter.formats.feedha_fix.table import ConverterTable

    result["feedha_fix_native"] = make_engine(ConverterTable.load()).is_native
    result["fix44_native"] = _engine(True, python_fix44=args.python_fix44).is_native
    for case in args.cases:
        seconds, count, slow = min(
            run_case(case, args.messages, args.frame, python_fix44=args.python_fix44)
            for _ in range(args.repeat)
        )
        result[f"{case}_us_per_msg"] = round(seconds / max(count, 1) * 1e6, 3)
        if case.startswith("fix44") and result["fix44_native"]:
            result[f"{case}_c_share"] = round(1 - slow / max(count, 1), 4)  # converted by the C run
    for name, fix44, plain in (
        ("ratio_careful_4000", "fix44_careful_4000", "fix44_careful_10"),  # 1.0: depth costs nothing
        ("ratio_book_full", "fix44_book_full", "fix44_careful_10"),
        ("ratio_one", "fix44_one", "feedha_fix_one"),
        ("ratio_mix", "fix44_mix", "feedha_fix_mix"),
        ("ratio_one_top", "fix44_one_top", "feedha_fix_one"),
        ("ratio_mix_top", "fix44_mix_top", "feedha_fix_mix"),
    ):
        if f"{fix44}_us_per_msg" in result and result.get(f"{plain}_us_per_msg"):
            result[name] = round(result[f"{fix44}_us_per_msg"] / result[f"{plain}_us_per_msg"], 1)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
