"""The bare model of the pipeline's shape: source PUB → N relays → one client reading every line.

A pipeline run has a source, ``N`` adapters (the active and its backups), each
of which subscribes to the source and publishes its own line, and a client
joined to all ``N`` lines that keeps the first copy of every message. This
module runs the same process tree with nothing but ZeroMQ and a loop in each
process (``python -m feedha.bench.shape source|relay|client``):

* ``source``: one PUB. It sends the messages that are due as soon as they are
  due, paced by the same deadline schedule as the plain source
  (:class:`feedha.plain_source.PacingSchedule`: message *k* is due at
  ``start + k / rate``) and batched by the same rule: what is due when the
  sender wakes goes out at once, in frames of at most
  :data:`feedha.plain_source.MAX_BATCH` messages; nothing waits for a tick or
  a fill level. Unpaced (rate 0) every frame is full, as the plain source's
  are unpaced. Each ZeroMQ message is ``[topic, frame]`` (two frames, as the
  source streams and the lines are); a frame is a header (kind, first
  sequence number, count) and ``count`` messages of ``--size`` bytes (the
  plain source's mean FIX message size by default), each starting with its
  u64 sequence number and its scheduled send time (ns since the epoch).
* ``relay`` (one per adapter): a SUB on the source and a PUB of its own; it
  forwards every message unchanged as soon as it has it. With ``--journal``
  it also keeps a bare journal (:class:`_BareJournal`): every data frame
  appended to one file, written and synced by a thread of its own once per
  group commit, on the adapters' ``--fsync batch`` interval. With ``--hold
  SECONDS`` it forwards in releases instead (:func:`_forward_held`): what it
  receives waits, and everything that waits goes out, in order, once every
  ``SECONDS``.
* ``client``: one SUB per line, read with a poller (at most
  :data:`DRAIN_PER_LINE` messages per line per wake-up, as the subscriber
  drains); it keeps the first copy of every sequence number, message by
  message (a frame whose messages were all delivered already is skipped
  whole), and counts duplicates and gaps. No protobuf, no decoding beyond the
  16-byte stamp.

What the comparison means: the model does every step of the pipeline's data
path that ZeroMQ and the process tree impose (two hops, ``N`` lines, one
arbitration) and none of what feedha adds (FIX parsing, conversion,
sequencing, packets, the sync bus, journals). The pipeline's figure over the
model's (``ratio_shape``) is therefore the share of the bare shape's
throughput feedha keeps, or for latency how many times the bare shape's
latency it takes. A pipeline whose adapters journal also writes and syncs
every message once per adapter, which no ZeroMQ step does; the journaling model
(``ShapeOptions(journal=True)``) pays that too, with nothing of feedha's
journal format (no record headers, checksums or index), so the pipeline's
figure over it says what feedha's journal costs beyond the disk's own work.
The model's source messages have the pipeline's source messages' size and
batching; its lines carry the same frames again, where the pipeline's
adapters re-pack into line packets of up to 8 KiB.

A backup's line is not a relay's, by design: its output waits at its output
gate until the active's next heartbeat report confirms the numbering, so it
goes out once a heartbeat interval, in a lump, and the backup's process works
in lumps on that beat. The *held model* (``ShapeOptions(hold=...)``, on the
adapters' heartbeat interval) makes its backups' relays (every relay but the
first) do the same with nothing else of the gate: they forward everything
they received, in order, once every ``hold`` seconds. What the lumps cost a
shape on a small machine is then measured beside the pipeline: the
pipeline's figure over the held model (``ratio_shape_held``) is what feedha
adds to the shape its sync rules require.

:func:`feedha.bench.shape_run.run_shape` runs one measurement (the orchestrator's side).
"""

from __future__ import annotations

import argparse
import math
import os
import struct
import sys
import threading
import time
from array import array
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from feedha.adapter.journal.config import FLUSH_INTERVAL_S
from feedha.bench.ceiling import armed_publisher, emit, relay_sockets
from feedha.plain_source.config import MAX_BATCH
from feedha.plain_source.pacing import MAX_CATCHUP_S, PacingSchedule
from feedha.runtime import settle_heap

TOPIC: Final = b"SHAPE"
HEADER: Final = struct.Struct(">cQH")  # kind (b"D" data, b"W" warm-up, b"E" end), first seq, count
STAMP: Final = struct.Struct(">Qq")  # a message's seq and scheduled send time (ns)
DEFAULT_SIZE: Final = 183  # the plain source's mean FIX message, bytes (bench throughput measures it)
END_MARKERS: Final = 5
DRAIN_PER_LINE: Final = 8  # messages per line per wake-up, as the subscriber drains
PROGRESS_S: Final = 0.1
SLEEP_SLICE_S: Final = 0.05  # longest sleep of the source between checks
MAX_WAITING_FRAMES: Final = 4096  # a bare journal's queue (~48 MiB of full frames) before the relay waits
MAX_HOLD_S: Final = 1.0  # the longest hold the held model takes (the heartbeat interval is 10 ms)
MAX_HELD_FRAMES: Final = 65_536  # a holding relay's bound: it releases early rather than hold more


# --- the children ---------------------------------------------------------------------------


def _frames(first: int, count: int, batch: int, epoch_ns: int, step_ns: float, pad: bytes) -> list[bytes]:
    # Messages first..first+count-1 as frames of at most `batch`, message `seq` stamped
    # epoch_ns + seq * step_ns (its scheduled send time; unpaced: step 0, the time of sending).
    pack, frames = STAMP.pack, []
    for start in range(first, first + count, batch):
        size = min(batch, first + count - start)
        body = b"".join(
            [pack(seq, epoch_ns + int(seq * step_ns)) + pad for seq in range(start, start + size)]
        )
        frames.append(HEADER.pack(b"D", start, size) + body)
    return frames


def _source(args: argparse.Namespace) -> int:
    warmup = HEADER.pack(b"W", 0, 0)
    ctx, sock = armed_publisher(
        args.wait, linger_ms=10_000, warmup=lambda sock: sock.send_multipart((TOPIC, warmup))
    )
    sent, elapsed = _send_loop(sock, args)
    for _ in range(END_MARKERS):
        sock.send_multipart((TOPIC, HEADER.pack(b"E", 0, 0)))
    emit("done", sent=sent, elapsed_s=elapsed)
    sock.close()
    ctx.term()
    return 0


def _send_loop(sock: Any, args: argparse.Namespace) -> tuple[int, float]:
    # The plain source's loop without the market model: what is due goes out now, in frames of
    # at most `batch`; when nothing is due, sleep until the next message is.
    import zmq

    count, rate, batch = args.count, args.rate, args.batch
    pad = b"\x00" * (args.size - STAMP.size)
    send, more = sock.send, zmq.SNDMORE
    monotonic, sleep, time_ns = time.monotonic, time.sleep, time.time_ns
    epoch_ns = time_ns()  # read before `start`: a stamp is never later than its message's due time
    start = monotonic()
    step_ns = 1e9 / rate if rate > 0 else 0.0
    schedule = PacingSchedule(rate=rate, max_burst=max(batch, int(rate * MAX_CATCHUP_S)), start=start)
    end = start + args.seconds
    sent = 0
    while sent < count:
        now = monotonic()
        if now >= end:
            break
        due = min(schedule.due(now), count - sent)
        if due <= 0:
            sleep(min(schedule.wait_s(now), SLEEP_SLICE_S))
            continue
        epoch = epoch_ns if rate > 0 else time_ns()
        for frame in _frames(sent + 1, due, batch, epoch, step_ns, pad):
            send(TOPIC, more)
            send(frame)
        sent += due
        schedule.take(due)
    return sent, monotonic() - start


class _BareJournal:
    """A relay's journal with nothing but the disk's own work, for the journaling model.

    Every data frame is appended to one file as it came (no record headers,
    checksums or index). As an adapter's writer does with ``--fsync batch``,
    the relay's loop only queues the frame (a deque append, no lock) and a
    thread of its own writes and syncs what waits once per group commit, every
    :data:`~adapter.journal.config.FLUSH_INTERVAL_S`. Bounded as the writer is:
    with :data:`MAX_WAITING_FRAMES` waiting, :meth:`append` waits for the disk.
    """

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._waiting: deque[bytes] = deque()
        self._written = threading.Event()
        self._closing = threading.Event()
        self.synced = 0  # bytes written and synced
        self._thread = threading.Thread(target=self._run, name="bare-journal", daemon=True)
        self._thread.start()

    def append(self, frame: bytes) -> None:
        waiting = self._waiting
        while len(waiting) >= MAX_WAITING_FRAMES:  # back-pressure: the disk is behind
            self._written.clear()
            self._written.wait(FLUSH_INTERVAL_S)
        waiting.append(frame)

    def close(self) -> None:
        """Write and sync what waits, then stop the thread and close the file."""
        self._closing.set()
        self._thread.join()
        os.close(self._fd)

    def _run(self) -> None:
        waiting, popleft = self._waiting, self._waiting.popleft
        while True:
            closing = self._closing.wait(FLUSH_INTERVAL_S)
            data = b"".join([popleft() for _ in range(len(waiting))])
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            if data:
                os.fdatasync(self._fd)
                self.synced += len(data)
                self._written.set()
            if closing and not waiting:
                return


def _relay(args: argparse.Namespace) -> int:
    ctx, sub, pub = relay_sockets(args.endpoint, args.timeout, linger_ms=10_000)
    journal = None if args.journal is None else _BareJournal(args.journal)
    settle_heap()  # as the adapters do: like for like
    if args.hold > 0:
        forwarded, releases = _forward_held(sub, pub, args.hold, args.timeout)
    else:
        forwarded, releases = _forward_each(sub, pub, None if journal is None else journal.append), 0
    if journal is not None:
        journal.close()
    emit(
        "done",
        forwarded=forwarded,
        journaled=None if journal is None else journal.synced,
        releases=releases,
    )
    sub.close()
    pub.close()
    ctx.term()
    return 0


def _forward_each(sub: Any, pub: Any, append: Callable[[bytes], None] | None) -> int:
    """A relay of the bare model: forward every message as it comes (journaled first with
    ``append``); ends after the end markers, or when the SUB's receive times out (the source
    died). Returns the messages forwarded."""
    import zmq

    recv, send, more = sub.recv, pub.send, zmq.SNDMORE
    ends = forwarded = 0
    while ends < END_MARKERS:
        try:
            topic = recv()
            frame = recv()
        except zmq.Again:
            break  # the source died
        if append is not None and frame[:1] == b"D":
            append(frame)  # journaled, then sent: as the active's pump does
        send(topic, more)
        send(frame)
        forwarded += 1
        ends += frame[:1] == b"E"
    return forwarded


def _forward_held(sub: Any, pub: Any, hold_s: float, timeout_s: float) -> tuple[int, int]:
    """A backup's relay in the held model: forward in releases, once every ``hold_s``.

    What arrives waits; at each release everything that waits goes out in order, as a
    backup's output gate lets its output out at each heartbeat report of the active. The
    releases keep a fixed beat (a late one does not move the next), as the reports do. At
    most :data:`MAX_HELD_FRAMES` wait: past that a release comes early. It ends after the
    end markers, or after ``timeout_s`` without a message (the source died).

    Returns:
        ``(forwarded, releases)``: messages sent, and releases that sent any.
    """
    import zmq

    poller = zmq.Poller()
    poller.register(sub, zmq.POLLIN)
    recv, send, more, nowait = sub.recv, pub.send, zmq.SNDMORE, zmq.NOBLOCK
    held: list[tuple[bytes, bytes]] = []
    ends = forwarded = releases = 0

    def release() -> None:
        nonlocal forwarded, releases
        if held:
            for topic, frame in held:
                send(topic, more)
                send(frame)
            forwarded, releases = forwarded + len(held), releases + 1
            held.clear()

    now = time.monotonic()
    due, heard = now + hold_s, now
    while ends < END_MARKERS:
        now = time.monotonic()
        if now >= due or len(held) >= MAX_HELD_FRAMES:
            release()
            while due <= now:
                due += hold_s
            continue
        if now - heard > timeout_s:
            break  # the source died
        if not poller.poll(max(1, math.ceil((due - now) * 1e3))):
            continue
        heard = now
        while len(held) < MAX_HELD_FRAMES:
            try:
                topic = recv(nowait)
            except zmq.Again:
                break
            frame = recv()  # a message's parts arrive together
            held.append((topic, frame))
            ends += frame[:1] == b"E"
    release()
    return forwarded, releases


def check_hold(hold: float, journal: bool) -> None:
    """Refuse a hold the held model does not take (both :class:`ShapeOptions` and the relay's CLI).

    Raises:
        ValueError: ``hold`` is outside 0..:data:`MAX_HOLD_S` (or NaN), or given with a journal.
    """
    if not 0 <= hold <= MAX_HOLD_S:
        raise ValueError(f"hold must be in 0..{MAX_HOLD_S} s, got {hold}")
    if hold and journal:
        raise ValueError("the held model does not journal: hold and journal are exclusive")


@dataclass(slots=True)
class _Arbiter:
    """The client's state: the highest sequence number delivered, and what was counted."""

    size: int
    latency: bool
    last: int = 0
    delivered: int = 0
    duplicates: int = 0
    gaps: int = 0

    def on_frame(self, frame: bytes, now_ns: int, record: Any) -> None:
        # Keep the first copy of each seq; a frame that holds only copies is dropped whole.
        _kind, first, count = HEADER.unpack_from(frame)
        if first + count - 1 <= self.last:
            self.duplicates += count
            return
        unpack, last, latency = STAMP.unpack_from, self.last, self.latency
        for offset in range(HEADER.size, HEADER.size + count * self.size, self.size):
            seq, stamp = unpack(frame, offset)
            if seq <= last:
                self.duplicates += 1
                continue
            self.gaps += seq - last - 1
            last = seq
            self.delivered += 1
            if latency:
                record(now_ns - stamp)
        self.last = last


def _client(args: argparse.Namespace) -> int:
    import zmq

    from feedha.transport import recv_frames

    ctx = zmq.Context()
    poller = zmq.Poller()
    lines = _line_sockets(ctx, poller, args.endpoint)
    index = {sock: i for i, sock in enumerate(lines)}
    settle_heap()  # as the pipeline's client does: like for like
    heard, ended = [False] * len(lines), [False] * len(lines)
    arbiter = _Arbiter(size=args.size, latency=args.latency)
    latencies = array("q")
    ready = False
    first_ns = last_ns = 0
    next_progress = time.monotonic() + PROGRESS_S
    silent_since = time.monotonic()
    time_ns = time.time_ns
    while not all(ended):
        events = poller.poll(int(PROGRESS_S * 1000))
        now = time.monotonic()
        if events:
            silent_since = now
        elif now - silent_since > args.timeout:
            break  # a line went quiet for good: report what arrived
        for sock, _event in events:
            line = index[sock]
            for _ in range(DRAIN_PER_LINE):
                try:
                    frame = recv_frames(sock)[1]
                except zmq.Again:
                    break
                heard[line] = True
                kind = frame[:1]
                if kind == b"D":
                    now_ns = time_ns()
                    before = arbiter.delivered
                    arbiter.on_frame(frame, now_ns, latencies.append)
                    if arbiter.delivered > before:
                        first_ns = first_ns or now_ns
                        last_ns = now_ns
                elif kind == b"E":
                    ended[line] = True
        if not ready and all(heard):
            ready = True
            emit("ready")
        if now >= next_progress:
            next_progress = now + PROGRESS_S
            emit("progress", delivered=arbiter.delivered)
    emit("result", **_client_result(arbiter, first_ns, last_ns, latencies if args.latency else None))
    for sock in lines:
        sock.close()
    ctx.term()
    return 0


def _line_sockets(ctx: Any, poller: Any, endpoints: Sequence[str]) -> list[Any]:
    # One SUB a line, unbounded, registered with the poller.
    import zmq

    lines = []
    for endpoint in endpoints:
        sock = ctx.socket(zmq.SUB)
        sock.rcvhwm, sock.linger = 0, 0
        sock.subscribe(TOPIC)
        sock.connect(endpoint)
        poller.register(sock, zmq.POLLIN)
        lines.append(sock)
    return lines


def _client_result(
    arbiter: _Arbiter, first_ns: int, last_ns: int, latencies: array[int] | None
) -> dict[str, Any]:
    # What the client reports: its counts, first and last delivery, and its latencies if kept.
    result: dict[str, Any] = {
        "delivered": arbiter.delivered,
        "duplicates": arbiter.duplicates,
        "gaps": arbiter.gaps,
        "last_seq": arbiter.last,
        "first_ns": first_ns,
        "last_ns": last_ns,
    }
    if latencies is not None:
        from feedha.bench.ceiling import latency_summary

        result["latency_us"] = latency_summary(latencies)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m feedha.bench.shape source|relay|client``: the child processes of :func:`run_shape`."""
    parser = argparse.ArgumentParser(prog="python -m feedha.bench.shape", description=__doc__)
    parser.add_argument("role", choices=("source", "relay", "client"))
    parser.add_argument("--endpoint", action="append", default=[], help="relay: the source; client: a line")
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--rate", type=float, default=0.0)
    parser.add_argument("--seconds", type=float, default=600.0, help="source: longest send window")
    parser.add_argument("--batch", type=int, default=MAX_BATCH)
    parser.add_argument("--size", type=int, default=DEFAULT_SIZE)
    parser.add_argument("--wait", type=float, default=60.0, help="source: longest wait to start")
    parser.add_argument("--timeout", type=float, default=10.0, help="relay, client: silence that ends it")
    parser.add_argument("--latency", action="store_true")
    parser.add_argument("--journal", metavar="FILE", help="relay: keep a bare journal in FILE")
    parser.add_argument(
        "--hold", type=float, default=0.0, metavar="SECONDS",
        help="relay: forward in releases, once every SECONDS (a backup's line; 0: at once)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.size < STAMP.size:
        parser.error(f"--size must be >= {STAMP.size}")
    if args.role == "relay":
        if len(args.endpoint) != 1:
            parser.error("relay: exactly one --endpoint (the source)")
        args.endpoint = args.endpoint[0]
        try:
            check_hold(args.hold, args.journal is not None)
        except ValueError as exc:
            parser.error(f"--hold: {exc}")
    if args.role == "client" and not args.endpoint:
        parser.error("client: one --endpoint per line")
    return {"source": _source, "relay": _relay, "client": _client}[args.role](args)


if __name__ == "__main__":
    sys.exit(main())
