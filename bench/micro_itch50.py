"""Micro-benchmark of the itch50 engine: CPU µs per ITCH message, in-process, on ordinary and hostile days.

``python -m feedha.bench.micro_itch50 [--messages N] [--repeat R] [--cases ...]``
prints one JSON object. Each case plays a BinaryFILE capture through
``Itch50Engine`` as MoldUDP64 packets of 20 messages, as the adapter core does
(the C run where built, the careful path for what it stops at; publishing, no
journal), best of ``--repeat``, µs of thread CPU per message:

* ``mix``: the throughput ramp's ITCH day (:func:`bench.itch50.write_itch_capture`'s
  capture: 2,000 stocks, adds, executions, cancels, deletes, replaces, trades).
* ``flood``: ``--messages`` adds of one stock whose order references all shared
  one slot of the order table under its hash before SipHash (an unkeyed,
  invertible splitmix64 finalizer: :func:`old_hash_flood`); there each add
  walked the whole run of the others.
* ``best_run``: ``--messages`` adds of one stock's bids, each at a new best price
  (where the levels were a sorted array, each shifted the whole side).

A hostile case costing about what ``mix`` does is what "cannot be flooded" means.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import time
from collections.abc import Sequence
from typing import Final

MESSAGES: Final = 20_000
REPEAT: Final = 3
PER_PACKET: Final = 20
CASES: Final = ("mix", "flood", "best_run")
_LENGTH: Final = struct.Struct(">H")
_ADD: Final = struct.Struct(">cHH6sQcI8sI")  # ITCH 5.0 "A": 36 bytes


def old_hash_flood(count: int) -> list[int]:
    """References the order table's old hash sent to slot ``i << 32``: one home at every size to 2**32.

    :func:`feedha.adapter.formats.itch50.poison.colliding_refs` at slot 0 (the drill's flood is the
    same set at slot 5).
    """
    from feedha.adapter.formats.itch50.poison import colliding_refs

    return colliding_refs(count, slot=0)


def _add(ref: int, stock: bytes, price: int) -> bytes:
    return _ADD.pack(b"A", 1, 0, (10**9).to_bytes(6, "big"), ref, b"B", 100, stock, price)


def _capture(messages: list[bytes]) -> bytes:
    return b"".join(_LENGTH.pack(len(message)) + message for message in messages)


def capture_of(case: str, messages: int) -> tuple[bytes, int]:
    """A case's BinaryFILE capture and how many messages it holds."""
    if case == "mix":
        from feedha.adapter.formats.itch50.day import make_itch_capture

        from .itch50 import ITCH_CAPTURE_ORDERS

        day = make_itch_capture(symbols=2_000, orders=ITCH_CAPTURE_ORDERS, seed=7, book_only=True)
        return day.data, day.messages
    if case == "flood":
        return _capture([_add(ref, b"FLOOD   ", 1_000_000) for ref in old_hash_flood(messages)]), messages
    return _capture([_add(ref, b"BEST    ", 10_000 + ref) for ref in range(1, messages + 1)]), messages


def play(data: bytes) -> tuple[float, int]:
    """Thread CPU seconds to play ``data`` through a fresh engine, and the messages it converted."""
    from feedha.adapter.errors import ConversionError
    from feedha.adapter.formats.itch50.engine import Itch50Engine
    from feedha.proto import moldudp64

    records = list(moldudp64.read_binary_file(data))
    packets = [
        moldudp64.encode_packet("BENCH", start + 1, records[start : start + PER_PACKET])
        for start in range(0, len(records), PER_PACKET)
    ]
    engine = Itch50Engine(depth=10)
    converted = 0
    started = time.thread_time()
    for packet in packets:
        frame, pos = engine.source_frame(packet), 0
        while pos < len(frame):
            pos, count, stop, *_ = engine.run(frame, pos, 0, 0, 1 << 20, 1 << 20, 1, 1, True, False)
            converted += count
            if stop != 1:
                continue
            body, pos = engine.next_message(frame, pos)
            try:  # the careful path: stage, encode, commit (as the core does)
                msg = engine.parse(body or b"")
                staged = engine.state.stage(msg)
                engine.encode_staged(msg, staged, 1)
                engine.state.commit(staged)
                converted += 1
            except ConversionError:
                pass
    return time.thread_time() - started, converted


def main(argv: Sequence[str]) -> int:
    """Run the cases; print one JSON object with µs per message for each."""
    parser = argparse.ArgumentParser(
        prog="python -m feedha.bench.micro_itch50", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--messages", type=int, default=MESSAGES, help="messages of flood and best_run (default: %(default)s)"
    )
    parser.add_argument(
        "--repeat", type=int, default=REPEAT, help="runs per case, best kept (default: %(default)s)"
    )
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES), help="cases (default: all)")
    args = parser.parse_args(argv)
    if args.messages < 1 or args.repeat < 1:
        parser.error("--messages and --repeat must be >= 1")
    from feedha.adapter.formats.itch50.engine import Itch50Engine

    result: dict[str, object] = {"messages": args.messages, "repeat": args.repeat}
    result["native"] = Itch50Engine().is_native
    for case in args.cases:
        data, count = capture_of(case, args.messages)
        seconds, converted = min(play(data) for _ in range(args.repeat))
        result[f"{case}_us_per_msg"] = round(seconds / max(count, 1) * 1e6, 3)
        result[f"{case}_converted"] = converted
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
