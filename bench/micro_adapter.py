"""Micro-benchmark of the adapter core: CPU µs per source message, in-process.

``python -m feedha.bench.micro_adapter [--messages N] [--repeat R] [--cases ...]``
prints one JSON object. The input is what the plain source sends at high
rates: frames of ``--frame`` FIX messages (one to three entries, 200
symbols), numbered gap-free. Cases (best of ``--repeat``, µs of thread CPU
per message; the core's actions are collected, not carried out):

* ``active``: ``AdapterCore.on_source`` + ``on_source_drained`` + ``on_tick``
  of an active on the native engine, a frame a turn: conversion runs,
  numbering, packets (the runner's hot path without its sockets).
* ``active_journal``: the same, journaling every message into a real
  ``JournalWriter`` (``--fsync none``, in a temporary directory).
* ``backup_syncing``: a backup that does not publish (it still converts,
  numbers and encodes).
* ``engine_run``: ``ConversionEngine.run`` alone over the frames (the C call);
  ``engine_journal`` also returns the payloads (for the journal),
  ``engine_convert`` converts and numbers without framing blocks.
* ``reference``: ``active`` on the Python reference engine (a tenth of the messages).
* ``fix44``: ``active`` on the ``fix44`` engine (Python; order books) over as many
  ``fix44`` incremental refreshes (:mod:`bench.capture`: 1-3 symbols, 1-6
  entries each), a tenth of the messages.
* ``bare_recv``: the same frames received from a bare PUB→SUB pair over
  loopback (``recv_multipart`` only): the floor under the runner's source
  socket, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

MESSAGES: Final = 200_000
FRAME: Final = 50
REPEAT: Final = 5
SYMBOLS: Final = 200
CASES: Final = (
    "active",
    "active_journal",
    "backup_syncing",
    "engine_run",
    "engine_journal",
    "engine_convert",
    "reference",
    "fix44",
    "bare_recv",
)
EPOCH_NS: Final = 1_790_000_000_000_000_000
TOPIC: Final = b"A-Z"


def make_frames(messages: int, frame: int, *, seed: int = 7) -> list[bytes]:
    """Seeded frames of ``frame`` FIX market-data messages, source_seq 1..messages."""
    from feedha.proto import fix

    rng = random.Random(seed)
    symbols = [f"S{index:03d}" for index in range(SYMBOLS)]
    kinds = (fix.ENTRY_TRADE, fix.ENTRY_TRADE, fix.ENTRY_BID, fix.ENTRY_OFFER)
    frames, parts = [], []
    for seq in range(1, messages + 1):
        entries = [
            fix.SourceEntry(rng.choice(kinds), f"{rng.randint(5000, 15000) / 100:.2f}", rng.randint(1, 900))
            for _ in range(rng.randint(1, 3))
        ]
        parts.append(
            fix.encode_market_data(
                source_seq=seq,
                symbol=rng.choice(symbols),
                event_time_ns=EPOCH_NS + seq * 1000,
                entries=entries,
            )
        )
        if len(parts) == frame:
            frames.append(b"".join(parts))
            parts = []
    if parts:
        frames.append(b"".join(parts))
    return frames


def _core(*, native: bool, publishing: bool, journal: bool, fix44: bool = False) -> Any:
    from feedha.adapter.core import AdapterCore, CoreConfig
    from feedha.adapter.formats.feedha_fix.choice import make_engine
    from feedha.adapter.formats.feedha_fix.table import ConverterTable
    from feedha.adapter.formats.fix44.engine import Fix44Engine

    # Alone in its group: past the start-up grace it is the active (publishing), or a backup
    # that waits for an active (its output held at the gate).
    config = CoreConfig(
        channel_number=1, adapter=1, source_stream_number=1, journal=journal, want_active=publishing
    )
    engine = Fix44Engine() if fix44 else make_engine(ConverterTable.load(), prefer_native=native)
    core = AdapterCore(config, engine, now=0.0)
    core.on_tick(now=config.sync.startup_grace_s, wall_ns=EPOCH_NS)
    return core


def _time_core(
    frames: list[bytes], *, native: bool, publishing: bool, journal: bool, fix44: bool = False
) -> float:
    import tempfile

    from feedha.adapter.core import JournalRecords
    from feedha.adapter.journal import FsyncPolicy, JournalConfig, JournalWriter

    core = _core(native=native, publishing=publishing, journal=journal, fix44=fix44)
    with tempfile.TemporaryDirectory(prefix="feedha-micro-adapter-") as directory:
        writer = JournalWriter(directory, JournalConfig(fsync=FsyncPolicy.NONE)) if journal else None
        try:
            start = time.thread_time()
            for frame in frames:  # as the runner turns at one frame a turn: drained after each
                actions = core.on_source([TOPIC, frame], now=1.0, wall_ns=EPOCH_NS)
                actions += core.on_source_drained(now=1.0, wall_ns=EPOCH_NS)
                actions += core.on_tick(now=1.0, wall_ns=EPOCH_NS)
                if writer is not None:
                    for action in actions:
                        if type(action) is JournalRecords:
                            writer.append_batch(
                                action.first_msg_seq,
                                action.time_ns,
                                action.source_stream,
                                action.source_seqs,
                                action.payloads,
                            )
            return time.thread_time() - start
        finally:
            if writer is not None:
                writer.close()


def _time_engine(frames: list[bytes], *, publish: bool = True, payloads: bool = False) -> float:
    from feedha.adapter.formats.feedha_fix.choice import make_engine
    from feedha.adapter.formats.feedha_fix.table import ConverterTable

    run = make_engine(ConverterTable.load()).run_function()
    expect = 1
    start = time.thread_time()
    for frame in frames:
        # frame, pos, expect_seq, stop_seq, room (an empty packet of any size), max_count, time, stream, ...
        result = run(frame, 0, expect, 0, -(1 << 40), 1 << 30, EPOCH_NS, 1, publish, payloads)
        expect += result[1]
    return time.thread_time() - start


def _time_bare_recv(frames: list[bytes]) -> float:
    import zmq

    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    pub, sub = ctx.socket(zmq.PUB), ctx.socket(zmq.SUB)
    try:
        pub.sndhwm = sub.rcvhwm = 0
        sub.subscribe(b"")
        port = sub.bind_to_random_port("tcp://127.0.0.1")
        pub.connect(f"tcp://127.0.0.1:{port}")
        deadline = time.monotonic() + 5
        while not sub.poll(10):  # slow joiner: a probe until one arrives
            assert time.monotonic() < deadline, "the bare pair did not connect"
            pub.send_multipart([b"probe", b""])
        while sub.poll(50):
            sub.recv_multipart()
        for frame in frames:
            pub.send_multipart([TOPIC, frame])
        start = time.thread_time()
        for _ in frames:
            sub.recv_multipart()
        return time.thread_time() - start
    finally:
        pub.close(linger=0)
        sub.close(linger=0)


def run_case(case: str, frames: list[bytes], messages: int) -> tuple[float, int]:
    """Thread CPU seconds of one case and how many messages it took."""
    timers: dict[str, Callable[[], float]] = {
        "active": lambda: _time_core(frames, native=True, publishing=True, journal=False),
        "active_journal": lambda: _time_core(frames, native=True, publishing=True, journal=True),
        "backup_syncing": lambda: _time_core(frames, native=True, publishing=False, journal=False),
        "engine_run": lambda: _time_engine(frames),
        "engine_journal": lambda: _time_engine(frames, payloads=True),
        "engine_convert": lambda: _time_engine(frames, publish=False),
        "bare_recv": lambda: _time_bare_recv(frames),
    }
    if case == "fix44":
        from feedha.bench.capture import fix44_messages

        count = max(1, messages // 10)
        per_frame = max(1, messages // max(1, len(frames)))
        fix44 = fix44_messages(count)
        frames44 = [b"".join(fix44[i : i + per_frame]) for i in range(0, count, per_frame)]
        return _time_core(frames44, native=False, publishing=True, journal=False, fix44=True), count
    if case == "reference":
        tenth = frames[: max(1, len(frames) // 10)]
        return _time_core(tenth, native=False, publishing=True, journal=False), messages * len(tenth) // len(
            frames
        )
    return timers[case](), messages


def main(argv: Sequence[str]) -> int:
    """Run the cases; print one JSON object with µs per message for each."""
    parser = argparse.ArgumentParser(
        prog="python -m feedha.bench.micro_adapter", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--messages", type=int, default=MESSAGES, help="messages per case (default: %(default)s)"
    )
    parser.add_argument(
        "--frame", type=int, default=FRAME, help="messages per source frame (default: %(default)s)"
    )
    parser.add_argument(
        "--repeat", type=int, default=REPEAT, help="runs per case, best kept (default: %(default)s)"
    )
    parser.add_argument(
        "--cases", nargs="+", choices=CASES, default=list(CASES), help="cases to run (default: all)"
    )
    args = parser.parse_args(argv)
    if args.messages < 1 or args.frame < 1 or args.repeat < 1:
        parser.error("--messages, --frame and --repeat must be >= 1")
    frames = make_frames(args.messages, args.frame)
    result: dict[str, Any] = {"messages": args.messages, "frame": args.frame, "repeat": args.repeat}
    for case in args.cases:
        best = min(run_case(case, frames, args.messages) for _ in range(args.repeat))
        result[f"{case}_us_per_msg"] = round(best[0] / best[1] * 1e6, 3)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
