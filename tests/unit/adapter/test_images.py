"""Images from a journal; snapshot requests and boundary records in replay; the client's assembly."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from feedha.adapter.conversion.codec import encode_session_boundary, encode_update, to_proto
from feedha.adapter.conversion.messages import SourceMessage
from feedha.adapter.conversion.state import SymbolValues
from feedha.adapter.core.recovery import encode_checkpoint_state
from feedha.adapter.core.session import Session
from feedha.adapter.journal.format import RECORD_SESSION_BOUNDARY, Record
from feedha.adapter.replay import ReplayService
from feedha.adapter.snapshot import ImageBuilder, symbol_of
from feedha.client import ImageAssembler, ImageDelivery
from feedha.client._sessions import with_session_events
from feedha.client.arbiter import ChannelArbiter
from feedha.client.events import ArbiterConfig, Delivery, SessionEnded, SessionStarted
from feedha.proto import market_pb2, wire
from feedha.proto.replay import (
    ReplayRequest,
    ReplayStatus,
    decode_request,
    decode_status,
    encode_request,
    snapshot_request,
)

CHANNEL = 4


@dataclass(frozen=True)
class Checkpoint:
    msg_seq: int
    state: bytes


class Journal:
    def __init__(self) -> None:
        self.records: list[Record] = []

    def add(self, symbol: str, values: SymbolValues) -> Record:
        msg_seq = len(self.records) + 1
        message = SourceMessage(symbol=symbol, source_seq=msg_seq, event_time_ns=1, entries=(), extra={})
        payload = encode_update(message, values, publish_time_ns=msg_seq)
        record = Record(msg_seq, msg_seq, 1, msg_seq, payload)
        self.records.append(record)
        return record

    def boundary(self, ended: int) -> None:
        msg_seq = len(self.records) + 1
        payload = encode_session_boundary(
            ended=ended, started=ended + 1, boundary_time_ns=77, reason=2, publish_time_ns=msg_seq
        )
        self.records.append(Record(msg_seq, msg_seq, 1, msg_seq - 1, payload, RECORD_SESSION_BOUNDARY))

    def read(self, from_seq: int = 0, to_seq: int | None = None) -> list[Record]:
        last = to_seq if to_seq is not None else 1 << 62
        return [r for r in self.records if from_seq <= r.msg_seq <= last]

    def bounds(self) -> tuple[int, int]:
        return (self.records[0].msg_seq, self.records[-1].msg_seq) if self.records else (0, 0)


def _values(volume: int, bid: float = 1.0) -> SymbolValues:
    return SymbolValues(
        volume=volume, high=2.0, low=1.0, last=1.5, vwap=1.4, trade_count=volume, bid=bid, ask=3.0
    )


def _image_states(builder: ImageBuilder, *, now: float = 0.0) -> tuple[int, int, dict[str, SymbolValues]]:
    image = builder.newest(now=now)
    assert image is not None
    assembler = ImageAssembler(CHANNEL)
    got = None
    for part in image.parts:
        got = assembler.add(part)
    assert got is not None and got.msg_seq == image.msg_seq
    from feedha.adapter.conversion.codec import from_proto

    return got.msg_seq, got.session, {s: from_proto(state) for s, state in got.symbols.items()}


def test_an_image_is_every_symbols_newest_state_and_a_boundary_starts_daily_fields_again() -> None:
    journal = Journal()
    journal.add("A", _values(5))
    journal.add("B", _values(7))
    journal.add("A", _values(9, bid=2.0))
    builder = ImageBuilder(journal, lambda: None, channel=CHANNEL, adapter=2)
    assert _image_states(builder) == (3, 1, {"A": _values(9, bid=2.0), "B": _values(7)})
    journal.boundary(1)
    journal.add("B", _values(1))
    msg_seq, session, states = _image_states(builder, now=1.0)
    assert (msg_seq, session) == (5, 2)
    assert states["A"] == SymbolValues(last=1.5, bid=2.0, ask=3.0)  # rolled: only last/bid/ask carry over
    assert states["B"] == _values(1)


def test_a_hole_stops_the_image_until_a_newer_checkpoint_covers_it() -> None:
    journal = Journal()
    for volume in range(1, 6):
        journal.add("A", _values(volume))
    del journal.records[2]  # msg_seq 3 is not in this journal
    checkpoint: Checkpoint | None = None
    builder = ImageBuilder(journal, lambda: checkpoint, channel=CHANNEL, adapter=2)
    assert _image_states(builder)[0] == 2  # it waits before the hole
    state = encode_checkpoint_state(
        {"A": _values(40)}, source_stream=1, source_seq=4, next_msg_seq=5, session=Session(3)
    )
    checkpoint = Checkpoint(4, state)
    assert _image_states(builder, now=1.0) == (5, 3, {"A": _values(5)})
    assert builder.rebased == 1


def test_no_image_without_a_start() -> None:
    journal = Journal()
    journal.add("A", _values(1))
    journal.records[0] = journal.records[0]._replace(msg_seq=10)  # the journal starts mid-stream
    assert ImageBuilder(journal, lambda: None, channel=CHANNEL, adapter=2).newest(now=0.0) is None


def test_large_images_are_cut_into_parts_and_requests_page_through_them() -> None:
    journal = Journal()
    for i in range(3000):
        journal.add(f"S{i:05d}", _values(i + 1))
    builder = ImageBuilder(journal, lambda: None, channel=CHANNEL, adapter=2, part_bytes=20_000)
    service = ReplayService(
        journal, channel=CHANNEL, adapter=2, max_packet_bytes=8192, max_bytes=45_000, bounds=journal.bounds,
        images=builder,
    )  # fmt: skip
    assembler, image, requests, msg_seq = ImageAssembler(CHANNEL), None, 0, 0
    while image is None:
        request = encode_request(snapshot_request(CHANNEL, 1, msg_seq=msg_seq, part=assembler.next_part))
        reply = service.answer([b"peer", b"", request], term=1, send_time_ns=1)
        status = decode_status(reply[2])
        assert status.status is ReplayStatus.OK and status.through == 3000
        requests += 1
        for part in reply[3:]:
            image = assembler.add(part)
        msg_seq = status.through
    assert requests >= 3 and len(image.symbols) == 3000
    # A part past the end, an image no longer held: UNAVAILABLE, with a reason.
    for request in (snapshot_request(CHANNEL, 2, part=999), snapshot_request(CHANNEL, 3, msg_seq=7)):
        status = decode_status(service.answer([b"", encode_request(request)], term=1, send_time_ns=1)[1])
        assert status.status is ReplayStatus.UNAVAILABLE and status.message
    no_images = ReplayService(journal, channel=CHANNEL, adapter=2, max_packet_bytes=8192, max_bytes=1 << 20,
                              bounds=journal.bounds)  # fmt: skip
    status = decode_status(
        no_images.answer([b"", encode_request(snapshot_request(CHANNEL, 4))], term=1, send_time_ns=1)[1]
    )
    assert status.status is ReplayStatus.BAD_REQUEST


def test_a_boundary_record_is_retransmitted_alone_with_the_end_of_session_flag() -> None:
    journal = Journal()
    journal.add("A", _values(1))
    journal.add("A", _values(2))
    journal.boundary(1)
    journal.add("A", _values(1))
    service = ReplayService(journal, channel=CHANNEL, adapter=2, max_packet_bytes=8192, max_bytes=1 << 20,
                            bounds=journal.bounds)  # fmt: skip
    reply = service.answer([b"", encode_request(ReplayRequest(CHANNEL, 1, 1, 4))], term=1, send_time_ns=1)
    packets = [wire.decode_packet(p) for p in reply[2:]]
    assert [(h.first_seq, h.count, h.flags) for h, _ in packets] == [
        (1, 2, wire.FLAG_RETRANSMISSION),
        (3, 1, wire.FLAG_RETRANSMISSION | wire.FLAG_END_OF_SESSION),
        (4, 1, wire.FLAG_RETRANSMISSION),
    ]
    # The client hands the block on as two status events in its place.
    arbiter = ChannelArbiter(ArbiterConfig(channel=CHANNEL, start_seq=1))
    events = [e for p in reply[2:] for e in arbiter.on_packet(0, p, now=0.0)]
    assert arbiter.boundaries == 1
    out = with_session_events(events, "EQ")
    assert [type(e) for e in out] == [Delivery, Delivery, SessionEnded, SessionStarted, Delivery]
    ended, started = out[2], out[3]
    assert isinstance(ended, SessionEnded) and isinstance(started, SessionStarted)
    assert (ended.session, ended.msg_seq, ended.reason, ended.time_ns) == (1, 3, "operator", 77)
    assert (started.session, started.first_msg_seq, started.channel_name) == (2, 4, "EQ")


def test_snapshot_requests_round_trip_and_bad_kinds_are_refused() -> None:
    request = snapshot_request(CHANNEL, 9, msg_seq=100, part=2)
    assert decode_request(encode_request(request)) == request and request.is_snapshot
    body = bytearray(encode_request(request))
    body[3] = 9
    with pytest.raises(Exception, match="kind 9"):
        decode_request(bytes(body))


@pytest.mark.parametrize(
    "mangle",
    [
        lambda p: b"\xff" + p,  # not protobuf
        lambda p: market_pb2.ImagePart(
            channel=CHANNEL + 1, msg_seq=5, session=1, parts=1
        ).SerializeToString(),
        lambda p: market_pb2.ImagePart(
            channel=CHANNEL, msg_seq=5, session=1, parts=1, part=3
        ).SerializeToString(),
        lambda p: market_pb2.ImagePart(channel=CHANNEL, msg_seq=0, session=1, parts=1).SerializeToString(),
        lambda p: market_pb2.ImagePart(
            channel=CHANNEL, msg_seq=5, session=1, parts=10**9
        ).SerializeToString(),
    ],
)
def test_the_assembler_refuses_what_does_not_fit(mangle: object) -> None:
    assembler = ImageAssembler(CHANNEL)
    assert assembler.add(mangle(b"")) is None  # type: ignore[operator]
    assert assembler.refused == 1


def test_the_assembler_refuses_an_image_whose_symbols_do_not_add_up_and_takes_parts_in_any_order() -> None:
    def part(index: int, symbols: list[str], count: int) -> bytes:
        entries = [market_pb2.SymbolImage(symbol=s, state=to_proto(_values(1))) for s in symbols]
        return market_pb2.ImagePart(
            channel=CHANNEL,
            adapter=1,
            msg_seq=5,
            session=2,
            part=index,
            parts=2,
            symbol_count=count,
            symbols=entries,
        ).SerializeToString()

    assembler = ImageAssembler(CHANNEL)
    assert assembler.add(part(1, ["B"], 2)) is None
    assert assembler.add(part(1, ["B"], 2)) is None  # a repeat: ignored
    image = assembler.add(part(0, ["A"], 2))
    assert image is not None and sorted(image.symbols) == ["A", "B"] and image.session == 2
    deliveries = list(image.deliveries())
    assert all(isinstance(d, ImageDelivery) and d.is_image and d.msg_seq == 5 for d in deliveries)
    assert [d.update.symbol for d in deliveries] == ["A", "B"] and deliveries[0].update.state.volume == 1
    assert not assembler.add(part(0, ["A"], 1)) and not assembler.add(part(1, ["B", "C"], 1))
    assert assembler.refused == 1  # more symbols than it said


def test_symbol_of_reads_the_symbol_without_decoding() -> None:
    message = SourceMessage(symbol="MSFT", source_seq=1, event_time_ns=1, entries=(), extra={})
    assert symbol_of(encode_update(message, _values(1), publish_time_ns=1)) == b"MSFT"
    assert symbol_of(b"") is None and symbol_of(b"\x10\x01") is None
