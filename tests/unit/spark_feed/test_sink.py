"""Tests of the driver-side sink without sockets: checksum trailers, framing, publishing order."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from feedha.proto import fix
from feedha.spark_feed import model
from feedha.spark_feed.sink import Publisher, finish_messages, frame_ranges


def _unfinished(message: bytes) -> bytes:
    return message[: -len(b"10=000\x01")]


def _message(seq: int, symbol: str = "AAPL") -> bytes:
    entries = [fix.SourceEntry(fix.ENTRY_BID, "10.00", 100), fix.SourceEntry(fix.ENTRY_OFFER, "10.01", 200)]
    return fix.encode_market_data(source_seq=seq, symbol=symbol, event_time_ns=1_700_000_000_123_456_789,
                                  entries=entries)  # fmt: skip


def _packed(messages: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    array = pa.array(messages, type=pa.large_binary())
    _v, offsets, data = array.buffers()
    return np.frombuffer(offsets, dtype=np.int64).copy(), np.frombuffer(data, dtype=np.uint8).copy()


def test_finish_messages_matches_encode_message() -> None:
    expected = [_message(seq, symbol) for seq, symbol in [(1, "A"), (22, "MSFT"), (333, "ZZZZ")]]
    offsets, data = _packed([_unfinished(m) for m in expected])
    out_offsets, out = finish_messages(offsets, data)
    assert out.tobytes() == b"".join(expected)
    assert [out[a:b].tobytes() for a, b in zip(out_offsets[:-1], out_offsets[1:], strict=True)] == expected


def test_finish_messages_with_offset_slice_and_empty() -> None:
    expected = [_message(seq) for seq in range(1, 6)]
    offsets, data = _packed([_unfinished(m) for m in expected])
    _o, out = finish_messages(offsets[2:], data)
    assert out.tobytes() == b"".join(expected[2:])
    empty_offsets, empty = finish_messages(np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.uint8))
    assert len(empty) == 0 and list(empty_offsets) == [0]


def test_frame_ranges_cut_per_stream() -> None:
    streams = np.array([1, 1, 1, 1, 1, 2, 2, 3], dtype=np.int32)
    assert list(frame_ranges(streams, 2)) == [(1, 0, 2), (1, 2, 4), (1, 4, 5), (2, 5, 7), (3, 7, 8)]


class ListTransport:
    def __init__(self) -> None:
        self.sent: list[list[bytes]] = []

    def send(self, frames: Sequence[bytes | memoryview]) -> None:
        self.sent.append([bytes(f) for f in frames])


def test_publisher_sorts_frames_and_counts_replays() -> None:
    streams = model.parse_streams("A-M,N-Z")
    transports = {1: ListTransport(), 2: ListTransport()}
    publisher = Publisher(streams, dict(transports), frame_messages=2)  # type: ignore[arg-type]
    rows = [(2, 1, "NVDA"), (1, 2, "AAPL"), (1, 1, "AAPL"), (0, 9, "1BAD"), (1, 3, "IBM")]
    table = pa.table({
        "stream": pa.array([r[0] for r in rows], pa.int32()),
        "source_seq": pa.array([r[1] for r in rows], pa.int64()),
        "event_ns": pa.array([1_000 * r[1] for r in rows], pa.int64()),
        "message": pa.array([_unfinished(_message(r[1], r[2])) for r in rows], pa.binary()),
    })  # fmt: skip
    report = publisher.publish_table(table)
    assert (report.rows, report.dropped, report.frames) == (4, 1, 3)
    assert report.last_seq == {1: 3, 2: 1}
    got = {}
    for number, transport in transports.items():
        seqs = []
        for topic, payload in transport.sent:
            assert topic == streams[number - 1].name.encode()
            bodies, malformed = fix.split_messages(payload)
            assert malformed == 0
            seqs += [int(dict(fix.parse_fields(b))[fix.TAG_SEQ]) for b in bodies]
        got[number] = seqs
    assert got == {1: [1, 2, 3], 2: [1]}
    publisher.publish_table(table)  # a replayed batch: same numbers again
    assert publisher.counters[1].replayed == 3
    assert repr(publisher) == "<Publisher [batches=2, A-M=3, N-Z=1, dropped=2]>"
