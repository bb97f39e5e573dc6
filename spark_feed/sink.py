"""Driver-side sink: Arrow batch -> FIX payloads -> one ZeroMQ PUB socket per source stream.

Theory of operation
-------------------
``foreachBatch`` hands the driver a micro-batch, which arrives here as
:class:`Encoded` chunks: finished FIX messages back to back in one buffer,
sorted by ``(stream, source_seq)``. The synthetic source makes them with
:class:`spark_feed.encoder.FixEncoder`; the replay source's rows come as one
Arrow table (``DataFrame.toArrow()``) whose messages lack their ``10=``
checksum trailer, added in one vectorized pass over the Arrow buffers
(:func:`finish_messages`). :meth:`Publisher.publish_batch` cuts each stream's
run into frames of up to ``frame_messages`` messages and sends
``[stream_name, payload]`` on that stream's socket. A frame is a zero-copy
slice of one contiguous buffer, so packing hundreds of messages per frame
costs nothing extra.

Delivery is at least once: a batch Spark replays after a crash is published
again with the same ``source_seq`` values (and the same bytes); adapters drop
what they already have. Nothing is dropped on the way out: each stream is an
XPUB with ``XPUB_NODROP`` and a bounded queue (``SNDHWM`` frames per
subscriber), so a send to a subscriber that lags waits for it
(:class:`~transport.backpressure.BackpressureSender`): the job slows down to
its slowest adapter and its summary reports the rate it achieved and the time
it waited. Only a subscriber that reads nothing for ``max_stall_s`` is sent
past (it misses a stretch, a gap its adapter counts and its group repairs).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

from feedha.proto import fix
from feedha.spark_feed.config import SNDHWM
from feedha.spark_feed.encoder import trailers
from feedha.spark_feed.model import StreamSpec
from feedha.spark_feed.schema import COL_EVENT_NS, COL_MESSAGE, COL_SEQ, COL_STREAM
from feedha.transport.backpressure import DEFAULT_MAX_STALL_S

logger = logging.getLogger(__name__)

FRAME_MESSAGES: Final = 500
LINGER_MS: Final = 2_000
_TRAILER: Final = fix.TRAILER_SIZE  # 10=NNN<SOH>

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]


class FrameTransport(Protocol):
    """Where frames go: one per source stream (a ZeroMQ PUB in production, a list in tests)."""

    def send(self, frames: Sequence[bytes | memoryview]) -> None:
        """Send one multipart message."""


def finish_messages(offsets: I64, data: U8) -> tuple[I64, U8]:
    """Append ``10=NNN<SOH>`` (byte sum mod 256) to every message of a packed buffer.

    Args:
        offsets: n+1 start offsets into ``data`` (Arrow binary layout).
        data: the messages back to back, each without its trailer.

    Returns:
        ``(offsets, data)`` of the finished messages, still back to back.
    """
    count = len(offsets) - 1
    if count <= 0:
        return np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.uint8)
    starts = offsets[:-1] - offsets[0]
    lengths = np.diff(offsets)
    body = data[offsets[0] : offsets[-1]]
    sums = np.add.reduceat(body.astype(np.uint32), starts) if len(body) else np.zeros(count, np.uint32)
    sums = np.where(lengths > 0, sums, 0) % 256
    shift = np.arange(count, dtype=np.int64) * _TRAILER
    out_offsets = np.empty(count + 1, dtype=np.int64)
    out_offsets[:-1] = starts + shift
    out_offsets[-1] = len(body) + count * _TRAILER
    out = np.empty(int(out_offsets[-1]), dtype=np.uint8)
    out[np.arange(len(body), dtype=np.int64) + np.repeat(shift, lengths)] = body
    trailer = trailers(sums)
    ends = out_offsets[1:] - _TRAILER
    out[(ends[:, None] + np.arange(_TRAILER)).ravel()] = trailer.ravel()
    return out_offsets, out


def frame_ranges(streams: npt.NDArray[np.int32], frame_messages: int) -> Iterator[tuple[int, int, int]]:
    """Cut rows sorted by stream into ``(stream, first_row, end_row)`` frames.

    Args:
        streams: each row's stream number, sorted ascending.
        frame_messages: most messages per frame.

    Yields:
        One ``(stream, first, end)`` per frame, rows ``first <= i < end``.
    """
    if len(streams) == 0:
        return
    change = np.flatnonzero(np.diff(streams)) + 1
    bounds = [0, *change.tolist(), len(streams)]
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        for first in range(start, end, frame_messages):
            yield int(streams[start]), first, min(first + frame_messages, end)


@dataclass(slots=True)
class StreamCounters:
    """What one source stream has published."""

    number: int
    last_seq: int = 0
    sent: int = 0
    replayed: int = 0


@dataclass(slots=True, kw_only=True)
class BatchReport:
    """What publishing one batch did.

    Attributes:
        rows: messages sent.
        dropped: rows without a stream (replay source: bad rows).
        frames: ZeroMQ messages sent.
        newest_event_ns: the newest event time in the batch (0 if empty).
        oldest_event_ns: the oldest event time in the batch (0 if empty).
        last_seq: per stream number, the last ``source_seq`` in the batch.
        counts: per stream number, the rows in the batch.
    """

    rows: int = 0
    dropped: int = 0
    frames: int = 0
    newest_event_ns: int = 0
    oldest_event_ns: int = 0
    last_seq: dict[int, int] = field(default_factory=dict)
    counts: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Encoded:
    """Finished messages of one chunk, sorted by ``(stream, source_seq)``, back to back.

    Attributes:
        streams: each message's stream number (ascending).
        seqs: each message's ``source_seq`` (ascending within a stream).
        event_ns: each message's event time.
        offsets: n + 1 offsets into ``data``.
        data: the finished messages (with their ``10=`` trailers) back to back.
    """

    streams: npt.NDArray[np.int32]
    seqs: I64
    event_ns: I64
    offsets: I64
    data: U8

    def __len__(self) -> int:
        return len(self.seqs)


def empty_chunk() -> Encoded:
    """A chunk of no messages."""
    none = np.zeros(0, dtype=np.int64)
    return Encoded(np.zeros(0, np.int32), none, none, np.zeros(1, np.int64), np.zeros(0, np.uint8))


def encoded_from_table(table: pa.Table) -> tuple[Encoded, int]:
    """Sort a batch of ``schema.OUTPUT_COLUMNS`` rows and finish its messages (the replay source's path).

    Returns:
        The chunk, and how many rows were dropped for having no stream (stream 0).
    """
    if not table.num_rows:
        return empty_chunk(), 0
    valid = pc.greater(table[COL_STREAM], 0)
    dropped = table.num_rows - pc.sum(valid).as_py()
    table = table.filter(valid).sort_by([(COL_STREAM, "ascending"), (COL_SEQ, "ascending")])
    if not table.num_rows:
        return empty_chunk(), dropped
    messages = table[COL_MESSAGE].combine_chunks()
    if isinstance(messages, pa.BinaryArray):  # 32-bit offsets; widen for numpy math
        messages = messages.cast(pa.large_binary())
    _validity, offsets_buf, data_buf = messages.buffers()
    first = messages.offset
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[first : first + len(messages) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    out_offsets, out = finish_messages(offsets, data)
    chunk = Encoded(
        streams=table[COL_STREAM].to_numpy().astype(np.int32),
        seqs=table[COL_SEQ].to_numpy().astype(np.int64),
        event_ns=table[COL_EVENT_NS].to_numpy().astype(np.int64),
        offsets=out_offsets,
        data=out,
    )
    return chunk, dropped


class Publisher:
    """Publishes finished batches, one transport per source stream, in ``source_seq`` order.

    Args:
        streams: the source streams.
        transports: per stream number, where its frames go.
        frame_messages: most FIX messages per ZeroMQ frame.
        max_rate: messages/s ceiling (publisher-side pacing), 0 for none.
    """

    def __init__(
        self,
        streams: Sequence[StreamSpec],
        transports: dict[int, FrameTransport],
        *,
        frame_messages: int = FRAME_MESSAGES,
        max_rate: float = 0.0,
    ) -> None:
        if frame_messages < 1:
            raise ValueError(f"frame_messages must be >= 1: {frame_messages}")
        self._names = {s.number: s.name.encode() for s in streams}
        self._transports = transports
        self._frame_messages = frame_messages
        self._max_rate = max_rate
        self.counters = {s.number: StreamCounters(number=s.number) for s in streams}
        self.batches = 0
        self.dropped = 0

    def counters_total(self) -> int:
        """Messages sent on all streams so far."""
        return sum(c.sent for c in self.counters.values())

    def publish_table(self, table: pa.Table) -> BatchReport:
        """Publish one micro-batch of ``schema.OUTPUT_COLUMNS`` rows, any row order (the replay source)."""
        chunk, dropped = encoded_from_table(table)
        report = self.publish_batch([chunk])
        report.dropped = dropped
        self.dropped += dropped
        return report

    def publish_batch(self, chunks: Iterable[Encoded]) -> BatchReport:
        """Publish one micro-batch, chunk by chunk (each chunk's frames go out before the next is made).

        Args:
            chunks: the batch's chunks; within one, rows sorted by (stream, source_seq); a
                stream's rows of a later chunk follow those of an earlier one.

        Returns:
            What was sent.
        """
        report = BatchReport()
        started = time.monotonic()
        for chunk in chunks:
            if len(chunk):
                self._send(chunk, report, started)
        self.batches += 1
        return report

    def _send(self, chunk: Encoded, report: BatchReport, started: float) -> None:
        seqs, out_offsets = chunk.seqs, chunk.offsets
        newest, oldest = int(chunk.event_ns.max()), int(chunk.event_ns.min())
        report.newest_event_ns = max(report.newest_event_ns, newest)
        report.oldest_event_ns = oldest if not report.oldest_event_ns else min(report.oldest_event_ns, oldest)
        view = chunk.data.data
        for number, first, end in frame_ranges(chunk.streams, self._frame_messages):
            self._pace(started, report.rows)
            payload = view[int(out_offsets[first]) : int(out_offsets[end])]
            self._transports[number].send([self._names[number], payload])
            report.frames += 1
            report.rows += end - first
            self._count(number, seqs[first:end])
            report.last_seq[number] = int(seqs[end - 1])
            report.counts[number] = report.counts.get(number, 0) + end - first

    def _count(self, number: int, seqs: npt.NDArray[np.int64]) -> None:
        counters = self.counters[number]
        first = int(seqs[0])
        if first <= counters.last_seq:
            counters.replayed += int(np.count_nonzero(seqs <= counters.last_seq))
        elif counters.last_seq and first != counters.last_seq + 1:
            logger.warning("stream %d: source_seq jumps from %d to %d", number, counters.last_seq, first)
        counters.last_seq = max(counters.last_seq, int(seqs[-1]))
        counters.sent += len(seqs)

    def _pace(self, started: float, sent: int) -> None:
        # Publisher-side pacing: hold the average at max_rate within a batch.
        if self._max_rate <= 0:
            return
        due = started + sent / self._max_rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    def __repr__(self) -> str:
        seqs = ", ".join(f"{self._names[n].decode()}={c.last_seq}" for n, c in self.counters.items())
        return f"<Publisher [batches={self.batches}, {seqs}, dropped={self.dropped}]>"


# What a subscriber may send (subscriptions); libzmq applies it to the CURVE handshake too (~300 bytes).
SUBSCRIBER_MESSAGE_BYTES: Final = 1024


def secure_source(context: object, curve_key: str, allowed: Sequence[str]) -> tuple[Any, Any]:
    """The source's CURVE key pair and a started ZAP handler admitting the keys in the ``allowed`` files.

    Stop the handler (its ``stop()``) when the sockets are closed.

    Raises:
        ValueError: a key file that cannot be read, or is readable by others.
    """
    import zmq

    from feedha.adapter.curve_keys import AllowedKeys, load_keys, read_key_list

    assert isinstance(context, zmq.Context)
    keys = load_keys(Path(curve_key))
    gate = AllowedKeys(context, read_key_list(Path(path) for path in allowed), domain="source")
    gate.start()
    return keys, gate


class ZmqTransport:
    """A bound ZeroMQ XPUB socket for one source stream, whose sends wait for slow subscribers.

    Args:
        context: the ``zmq.Context``.
        endpoint: where to bind, e.g. ``tcp://127.0.0.1:5601``.
        sndhwm: frames queued per subscriber before a send waits for it (at least 1).
        xpub: count subscriptions (``--wait-subscribers``); the socket is an XPUB either way.
        curve: the source's key pair and the ZAP handler admitting the adapters' keys
            (:func:`secure_source`): the socket is a CURVE server (``None``: plain).
        max_stall_s: the longest a send waits for a subscriber that reads nothing.
    """

    def __init__(
        self,
        context: object,
        endpoint: str,
        *,
        sndhwm: int = SNDHWM,
        xpub: bool = False,
        curve: tuple[Any, Any] | None = None,
        max_stall_s: float = DEFAULT_MAX_STALL_S,
    ) -> None:
        import zmq

        from feedha.transport.backpressure import BackpressureSender

        assert isinstance(context, zmq.Context)
        if sndhwm < 1:
            raise ValueError(f"sndhwm must be >= 1 (every queue is bounded), got {sndhwm}")
        self.endpoint = endpoint
        self.subscribers = 0
        self._socket = context.socket(zmq.XPUB)
        # Without VERBOSE an XPUB passes up only the first subscription to a
        # topic, and every adapter of a channel subscribes to the same one.
        self._socket.setsockopt(zmq.XPUB_VERBOSE, 1)
        self._socket.setsockopt(zmq.SNDHWM, sndhwm)
        self._socket.setsockopt(zmq.LINGER, LINGER_MS)
        self._socket.setsockopt(zmq.MAXMSGSIZE, SUBSCRIBER_MESSAGE_BYTES)  # subscribers only subscribe
        if curve is not None:
            keys, gate = curve
            gate.secure(self._socket, keys)
        self._socket.bind(endpoint)
        self._xpub = xpub
        self.sender = BackpressureSender(self._socket, max_stall_s=max_stall_s)

    def send(self, frames: Sequence[bytes | memoryview]) -> None:
        """Send one multipart message (zero-copy for views), waiting while a subscriber lags."""
        self.sender.send(frames)

    def poll_subscriptions(self, timeout_ms: int) -> int:
        """Read pending XPUB (un)subscriptions and return the current subscriber count."""
        import zmq

        if self._xpub:
            while self._socket.poll(timeout_ms, zmq.POLLIN):
                event = self._socket.recv()
                self.subscribers += 1 if event[:1] == b"\x01" else -1
                timeout_ms = 0
        return self.subscribers

    def close(self) -> None:
        """Close the socket (lingering up to ``LINGER_MS`` to flush)."""
        self._socket.close()

    def __repr__(self) -> str:
        return f"<ZmqTransport [{self.endpoint}, subscribers={self.subscribers}, {self.sender!r}]>"
