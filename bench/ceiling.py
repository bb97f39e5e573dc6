"""The ceiling every feedha benchmark divides by: a bare pyzmq PUB→SUB pair on loopback.

One publisher process and one or more subscriber processes (``python -m
feedha.bench.ceiling pub|sub``), 100-byte payloads, one single-frame ZeroMQ message
each, ``SNDHWM``/``RCVHWM`` 0 (unbounded, so nothing is dropped), no
batching, no decoding beyond the 16-byte stamp. Each payload starts with
``b"D"``, a u64 sequence number and the send time (``time.time_ns()``; when
paced, the scheduled send time), so the same pair measures throughput
(unpaced) and one-way latency (paced).

Protocol between the orchestrator and the children (JSON lines on stdout):

* ``pub`` binds, prints ``{"event": "ready", "endpoint": ...}`` and sends a
  warm-up message (``b"W"``) every 2 ms until it gets ``SIGUSR1``; then it
  sends ``--count`` messages (at ``--rate``, 0 = as fast as it can), a few
  end markers (``b"E"``), and prints ``{"event": "done", ...}``.
* ``sub`` connects, prints ``ready`` when the first warm-up arrives (the
  subscription is in place: no slow-joiner loss), counts data messages until
  an end marker, then prints ``{"event": "result", ...}``.
* ``relay`` (two hops, :func:`run_pair` with ``hops=2``) connects a SUB to the
  publisher, binds a PUB, prints ``ready`` with its endpoint and forwards every
  message as it is (``recv`` then ``send``, no decoding) until the end
  markers have passed: the bare two-hop path a feed adapter sits on, to
  compare the pipeline with the same number of hops.
"""

from __future__ import annotations

import argparse
import json
import signal
import struct
import sys
import time
from array import array
from collections.abc import Callable, Sequence
from typing import IO, Any, Final

SIZE: Final = 100
STAMP: Final = struct.Struct(">cQq")  # b"D", seq, send time ns
WARMUP_S: Final = 0.002
END_MARKERS: Final = 5


def emit(event: str, **fields: Any) -> None:
    """One JSON event line on stdout (a child's report to the orchestrator)."""
    print(json.dumps({"event": event, **fields}), flush=True)


def armed_publisher(wait_s: float, *, linger_ms: int, warmup: Callable[[Any], None]) -> tuple[Any, Any]:
    """A PUB bound on loopback, ``ready`` emitted, warmed up until SIGUSR1 (or ``wait_s``).

    The orchestrator starts every subscriber, waits until each has seen a
    warm-up message (no slow joiner), then signals the publisher to begin.

    Returns:
        ``(context, socket)``; the caller closes both.
    """
    import zmq

    started = False

    def on_start(*_: object) -> None:
        nonlocal started
        started = True

    signal.signal(signal.SIGUSR1, on_start)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUB)
    sock.sndhwm, sock.linger = 0, linger_ms
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    emit("ready", endpoint=f"tcp://127.0.0.1:{port}")
    deadline = time.monotonic() + wait_s
    while not started and time.monotonic() < deadline:
        warmup(sock)
        time.sleep(WARMUP_S)
    return ctx, sock


def relay_sockets(endpoint: str, timeout_s: float, *, linger_ms: int) -> tuple[Any, Any, Any]:
    """A relay's SUB (connected to ``endpoint``) and PUB (bound on loopback, ``ready`` emitted).

    Returns:
        ``(context, sub, pub)``; the caller closes them.
    """
    import zmq

    ctx = zmq.Context()
    sub, pub = ctx.socket(zmq.SUB), ctx.socket(zmq.PUB)
    sub.rcvhwm = pub.sndhwm = 0
    sub.linger, pub.linger = 0, linger_ms
    sub.subscribe(b"")
    sub.connect(endpoint)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    emit("ready", endpoint=f"tcp://127.0.0.1:{port}")
    sub.rcvtimeo = int(timeout_s * 1000)
    return ctx, sub, pub


def _pub(args: argparse.Namespace) -> int:
    ctx, sock = armed_publisher(args.wait, linger_ms=5000, warmup=lambda sock: sock.send(b"W"))
    pad = b"\x00" * (args.size - STAMP.size)
    pack = STAMP.pack
    send = sock.send
    time_ns = time.time_ns
    count, rate = args.count, args.rate
    start = time.monotonic()
    if rate <= 0:
        for seq in range(count):
            send(pack(b"D", seq, time_ns()) + pad)
    else:
        # Deadline pacing: message k is due at start + k / rate and stamped with
        # that scheduled time (as the plain source stamps its event time), so a
        # late wake-up of the sender counts in the latency, as it does in feedha's.
        seq = 0
        monotonic = time.monotonic
        start_ns = time_ns()
        step_ns = 1e9 / rate
        while seq < count:
            due = min(count, int((monotonic() - start) * rate) + 1)
            if due <= seq:
                time.sleep(max(0.0, (seq / rate) - (monotonic() - start)))
                continue
            while seq < due:
                send(pack(b"D", seq, start_ns + int(seq * step_ns)) + pad)
                seq += 1
    elapsed = time.monotonic() - start
    for _ in range(END_MARKERS):
        send(b"E")
    emit("done", sent=count, elapsed_s=elapsed)
    sock.close()
    ctx.term()
    return 0


def _sub(args: argparse.Namespace) -> int:
    import zmq

    ctx = zmq.Context()
    sock = ctx.socket(zmq.SUB)
    sock.rcvhwm = 0
    sock.linger = 0
    sock.subscribe(b"")
    sock.connect(args.endpoint)
    recv = sock.recv
    first = recv()
    while first[:1] != b"W" and first[:1] != b"D":
        first = recv()
    emit("ready")
    unpack = STAMP.unpack_from
    time_ns = time.time_ns
    latencies = array("q")
    record = latencies.append
    received = 0
    first_ns = last_ns = 0
    sock.rcvtimeo = int(args.timeout * 1000)  # cheaper than a poll per message
    message = first
    while True:
        kind = message[:1]
        if kind == b"D":
            now = time_ns()
            if not received:
                first_ns = now
            last_ns = now
            received += 1
            if args.latency:
                record(now - unpack(message)[2])
        elif kind == b"E":
            break
        try:
            message = recv()
        except zmq.Again:
            break  # the publisher died: report what we have
    result: dict[str, Any] = {"received": received, "first_ns": first_ns, "last_ns": last_ns}
    if args.latency:
        result["latency_us"] = latency_summary(latencies)
    emit("result", **result)
    sock.close()
    ctx.term()
    return 0


def _relay(args: argparse.Namespace) -> int:
    import zmq

    ctx, sub, pub = relay_sockets(args.endpoint, args.timeout, linger_ms=5000)
    recv, send = sub.recv, pub.send
    ends = forwarded = 0
    while ends < END_MARKERS:
        try:
            message = recv()
        except zmq.Again:
            break  # the publisher died
        send(message)
        forwarded += 1
        ends += message[:1] == b"E"
    emit("done", forwarded=forwarded)
    sub.close()
    pub.close()
    ctx.term()
    return 0


def latency_summary(latencies_ns: Sequence[int]) -> dict[str, float]:
    """p50/p99/p99.9/max (µs) of one-way latencies, through an HdrHistogram (3 significant digits).

    Args:
        latencies_ns: the measured latencies in ns (negative values, from clock steps, count as 0).

    Returns:
        ``{"count", "p50", "p99", "p99.9", "max", "mean"}``, in microseconds.
    """
    from hdrh.histogram import HdrHistogram

    histogram = HdrHistogram(1, 60_000_000_000, 3)
    for value in latencies_ns:
        histogram.record_value(max(1, value))
    if not latencies_ns:
        return {"count": 0, "p50": 0.0, "p99": 0.0, "p99.9": 0.0, "max": 0.0, "mean": 0.0}
    return {
        "count": len(latencies_ns),
        "p50": round(histogram.get_value_at_percentile(50) / 1000, 1),
        "p99": round(histogram.get_value_at_percentile(99) / 1000, 1),
        "p99.9": round(histogram.get_value_at_percentile(99.9) / 1000, 1),
        "max": round(histogram.get_max_value() / 1000, 1),
        "mean": round(histogram.get_mean_value() / 1000, 1),
    }


def run_pair(
    *,
    count: int,
    rate: float = 0.0,
    subscribers: int = 1,
    latency: bool = False,
    size: int = SIZE,
    log: IO[str] | None = None,
    timeout: float = 60.0,
    hops: int = 1,
) -> dict[str, Any]:
    """Run one bare PUB→SUB measurement in child processes.

    Args:
        count: data messages to send.
        rate: messages/s (0: unpaced, for throughput).
        subscribers: SUB processes (each receives every message).
        latency: record one-way latencies at the subscribers.
        size: payload bytes (>= 17).
        log: where the children's stderr goes.
        timeout: seconds before giving up.
        hops: 1 (PUB→SUB) or 2 (PUB→relay→SUB, the relay forwarding as it is).

    Returns:
        ``sent``, ``received`` (per subscriber), ``rate`` (msg/s per subscriber,
        first to last receive), ``lost`` (total) and, with ``latency``,
        ``latency_us`` of the first subscriber.
    """
    from feedha.procs import JsonProcess

    common = ["--size", str(size)]
    pub = JsonProcess.python(
        "ceiling-pub",
        "feedha.bench.ceiling",
        ["pub", "--count", str(count), "--rate", str(rate), "--wait", str(timeout), *common],
        log=log,
    )
    subs: list[JsonProcess] = []
    relays: list[JsonProcess] = []
    try:
        endpoint = pub.wait_event("ready", 20)["endpoint"]
        if hops == 2:
            relays.append(
                JsonProcess.python(
                    "ceiling-relay", "feedha.bench.ceiling", ["relay", "--endpoint", endpoint], log=log
                )
            )
            endpoint = relays[0].wait_event("ready", 20)["endpoint"]
        elif hops != 1:
            raise ValueError(f"hops must be 1 or 2, got {hops}")
        _start_subscribers(subs, subscribers, endpoint, latency=latency, common=common, log=log)
        for sub in subs:
            sub.wait_event("ready", 20)
        pub.popen.send_signal(signal.SIGUSR1)
        done = pub.wait_event("done", timeout)
        results = [sub.wait_event("result", timeout) for sub in subs]
    finally:
        for proc in [pub, *relays, *subs]:
            proc.kill()
    return _pair_result(done, results, latency=latency)


def _start_subscribers(
    subs: list[Any], count: int, endpoint: str, *, latency: bool, common: list[str], log: IO[str] | None
) -> None:
    # `count` SUB processes on `endpoint`, each added to `subs` as it starts; the first records
    # latencies when asked.
    from feedha.procs import JsonProcess

    for index in range(count):
        extra = ["--latency"] if latency and index == 0 else []
        subs.append(
            JsonProcess.python(
                f"ceiling-sub-{index}",
                "feedha.bench.ceiling",
                ["sub", "--endpoint", endpoint, *extra, *common],
                log=log,
            )
        )


def _pair_result(done: dict[str, Any], results: list[dict[str, Any]], *, latency: bool) -> dict[str, Any]:
    # What run_pair returns, from the publisher's and the subscribers' reports.
    rates = [
        r["received"] / max((r["last_ns"] - r["first_ns"]) / 1e9, 1e-9) if r["received"] > 1 else 0.0
        for r in results
    ]
    out: dict[str, Any] = {
        "sent": done["sent"],
        "send_s": done["elapsed_s"],
        "received": [r["received"] for r in results],
        "rate": sum(rates) / len(rates),
        "min_rate": min(rates),
        "lost": sum(done["sent"] - r["received"] for r in results),
    }
    if latency:
        out["latency_us"] = results[0]["latency_us"]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m feedha.bench.ceiling pub|sub|relay``: the child processes of :func:`run_pair`."""
    parser = argparse.ArgumentParser(prog="python -m feedha.bench.ceiling", description=__doc__)
    parser.add_argument("role", choices=("pub", "sub", "relay"))
    parser.add_argument("--endpoint", help="sub, relay: the publisher's endpoint")
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--rate", type=float, default=0.0)
    parser.add_argument("--size", type=int, default=SIZE)
    parser.add_argument("--wait", type=float, default=60.0, help="pub: longest wait for the start signal")
    parser.add_argument("--timeout", type=float, default=10.0, help="sub, relay: silence that ends the run")
    parser.add_argument("--latency", action="store_true")
    args = parser.parse_args(argv)
    if args.size < STAMP.size:
        parser.error(f"--size must be >= {STAMP.size}")
    return {"pub": _pub, "sub": _sub, "relay": _relay}[args.role](args)


if __name__ == "__main__":
    sys.exit(main())
