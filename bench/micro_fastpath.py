"""Micro-benchmark of the adapter's C fast path: CPU µs per message.

``python -m bench.micro_fastpath [--messages N] [--per-frame F] [--repeat R] [--cases ...]``
prints one JSON object. The frames are the plain source's (one stream
``A-Z``, 200 symbols, seed 7, as ``bench throughput`` runs it), ``--per-frame``
messages each, all in sequence. Each case converts every frame with
``FastPath.run`` alone (no runner glue, no sockets) into a fresh conversion
state, with the packaged converter table; best of ``--repeat``, µs of
thread CPU per message:

* ``publish``: an active adapter: convert, apply, digest and encode the wire
  blocks (one unlimited packet per frame).
* ``publish_journal``: the same, and each payload returned as bytes for the
  journal.
* ``convert``: a backup that does not publish: convert, apply and digest only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

MESSAGES: Final = 200_000
PER_FRAME: Final = 50
REPEAT: Final = 3
STREAM: Final = "A-Z"
SYMBOLS: Final = 200
SEED: Final = 7
CASES: Final = ("publish", "publish_journal", "convert")
PUBLISH_TIME_NS: Final = 1_790_000_000_123_456_789


def _frames(messages: int, per_frame: int) -> list[bytes]:
    from spark_feed.plain_source import SymbolModel

    model = SymbolModel(
        streams=(STREAM,), symbol_count=SYMBOLS, seed=SEED, epoch_ns=1_700_000_000_000_000_000, step_ns=6_666
    )
    data = [next(model).data for _ in range(messages)]
    return [b"".join(data[i : i + per_frame]) for i in range(0, messages, per_frame)]


def _case(frames: list[bytes], messages: int, *, publish: bool, payloads: bool) -> Callable[[], float]:
    from adapter.conversion import ConverterTable
    from adapter.fastpath import make_fast_path, new_conversion_state

    table = ConverterTable.load()

    def run() -> float:
        fast = make_fast_path(table, new_conversion_state())
        if fast is None:
            raise SystemExit(
                "the C fast path is not available (build it: python setup.py build_ext --inplace)"
            )
        expect = done = 0
        started = time.thread_time()
        for frame in frames:
            pos, count, stop, _blocks, first, _digests, _payloads = fast.run(
                frame, 0, expect, 0, 1 << 62, 1 << 30, PUBLISH_TIME_NS, 1, publish, payloads
            )
            if stop != 0 or pos != len(frame):
                raise SystemExit(f"the fast path stopped ({stop}) at byte {pos} of a frame")
            expect = first + count
            done += count
        elapsed = time.thread_time() - started
        if done != messages:
            raise SystemExit(f"converted {done} of {messages} messages")
        return elapsed * 1e6 / messages

    return run


def main(argv: Sequence[str]) -> int:
    """Run the cases and print one JSON object (µs of CPU per message)."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.micro_fastpath", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--messages", type=int, default=MESSAGES)
    parser.add_argument("--per-frame", type=int, default=PER_FRAME)
    parser.add_argument("--repeat", type=int, default=REPEAT)
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args(list(argv))
    frames = _frames(args.messages, args.per_frame)
    results: dict[str, Any] = {}
    for name in args.cases.split(","):
        if name not in CASES:
            parser.error(f"unknown case {name!r}")
        case = _case(frames, args.messages, publish=name != "convert", payloads=name == "publish_journal")
        results[name] = round(min(case() for _ in range(args.repeat)), 4)
    print(
        json.dumps(
            {
                "unit": "us_cpu_per_message",
                "results": results,
                "params": {
                    "messages": args.messages,
                    "messages_per_frame": args.per_frame,
                    "mean_message_bytes": round(sum(map(len, frames)) / args.messages, 1),
                    "repeat": args.repeat,
                },
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
