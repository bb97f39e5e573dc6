"""The delayed line's scheduler and the replay service's delayed ranges: pure, on explicit clocks."""

from __future__ import annotations

from feedha.adapter.core.delayed import DelayedLine
from feedha.adapter.core.purge import PurgeBook, PurgeEntry
from feedha.adapter.journal.format import RECORD_SESSION_BOUNDARY, Record
from feedha.adapter.replay import ReplayService
from feedha.proto import market_pb2, wire
from feedha.proto.replay import (
    KIND_DELAYED_RANGE,
    ReplayRequest,
    ReplayStatus,
    decode_status,
    encode_request,
)

S = 1_000_000_000  # ns per second
T0 = 1_790_000_000 * S
DELAY = 5 * S


def line(**overrides: int) -> DelayedLine:
    options = {"delay_ns": DELAY, "margin_ns": S, "max_packet_bytes": 8192}
    options.update(overrides)
    return DelayedLine(channel=1, adapter=2, heartbeat_s=0.1, **options)


def record(seq: int, at_s: float, symbol: str = "AAPL") -> Record:
    payload = market_pb2.MarketUpdate(symbol=symbol, event_time_ns=int(T0 + at_s * S)).SerializeToString()
    return Record(seq, int(T0 + at_s * S), 1, 1000 + seq, payload)


def blocks(packets: list[bytes]) -> list[tuple[int, int]]:
    out = []
    for packet in packets:
        header, found = wire.decode_packet(packet)
        assert header.is_delayed and not header.is_retransmission
        out += [(b.msg_seq, b.source_stream) for b in found]
    return out


def test_each_record_goes_out_once_its_delay_has_passed_spaced_as_it_was_published() -> None:
    delayed, book = line(), PurgeBook()
    delayed.feed([record(1, 0.0), record(2, 0.0), record(3, 0.5), record(4, 2.0)], caught_up=True)
    at = lambda s: dict(now=s, wall_ns=int(T0 + s * S), term=3, book=book, may_publish=True)  # noqa: E731
    assert delayed.publish(**at(4.99)) == []  # nothing due, nothing sent: nothing to announce yet
    assert blocks(delayed.publish(**at(5.0))) == [(1, 1), (2, 1)]
    assert blocks(delayed.publish(**at(5.2))) == []  # a heartbeat at most: no blocks
    assert blocks(delayed.publish(**at(5.5))) == [(3, 1)]
    assert blocks(delayed.publish(**at(7.0))) == [(4, 1)]
    assert delayed.published_seq == 4 and delayed.counters.published == 4 and delayed.counters.late == 0


def test_a_purged_record_goes_out_as_a_tombstone_in_its_place() -> None:
    delayed, book = line(), PurgeBook()
    book.add(PurgeEntry(purge_id=1, first_msg_seq=2, last_msg_seq=3, time_ns=0, reason="busted trade"))
    delayed.feed([record(seq, 0.0, symbol=f"S{seq}") for seq in range(1, 5)], caught_up=True)
    packets = delayed.publish(now=6.0, wall_ns=T0 + 6 * S, term=3, book=book, may_publish=True)
    assert blocks(packets) == [(1, 1), (2, 0), (3, 0), (4, 1)]  # gap-free: msg_seq kept
    _header, found = wire.decode_packet(packets[0])
    tombstone = market_pb2.Tombstone.FromString(found[1].payload)
    assert (tombstone.symbol, tombstone.purge_id, tombstone.reason) == ("S2", 1, "busted trade")
    assert found[1].source_seq == 1002 and delayed.counters.tombstones == 2


def test_heartbeats_announce_the_msg_seq_after_the_last_one_sent() -> None:
    delayed, book = line(), PurgeBook()
    delayed.feed([record(7, 0.0), record(8, 3.0)], caught_up=True)
    # Record 7 is read but not due: announcing it now would open a false gap for subscribers
    # of lines that are further behind (a restarted adapter starts where its journal is due).
    assert delayed.publish(now=1.0, wall_ns=T0 + S, term=1, book=book, may_publish=True) == []
    sent = delayed.publish(now=5.0, wall_ns=T0 + 5 * S, term=1, book=book, may_publish=True)
    assert blocks(sent) == [(7, 1)]
    (heartbeat,) = delayed.publish(now=5.2, wall_ns=T0 + 5 * S, term=1, book=book, may_publish=True)
    header, found = wire.decode_packet(heartbeat)
    assert header.is_heartbeat and header.is_delayed and header.first_seq == 8 and not found
    idle = delayed.publish(now=5.25, wall_ns=T0 + 5 * S, term=1, book=book, may_publish=True)
    assert idle == []  # idle for less than the heartbeat interval


def test_a_backup_lacking_the_group_s_purges_holds_its_delayed_line() -> None:
    delayed, book = line(), PurgeBook()
    delayed.feed([record(1, 0.0)], caught_up=True)
    assert delayed.publish(now=6.0, wall_ns=T0 + 6 * S, term=1, book=book, may_publish=False) == []
    assert delayed.counters.held == 1 and delayed.published_seq == 0
    assert blocks(delayed.publish(now=6.1, wall_ns=T0 + 6 * S, term=1, book=book, may_publish=True)) == [
        (1, 1)
    ]


def test_the_frontier_is_what_went_out_or_is_due_within_the_margin_and_unknown_while_the_tailer_lags() -> (
    None
):
    delayed = line()
    delayed.feed([record(1, 0.0), record(2, 1.0), record(3, 3.0)], caught_up=False)
    # now + margin = 5.5 s after T0: record 1 is due at 5, record 2 at 6, record 3 at 8
    assert delayed.frontier(wall_ns=T0 + int(4.5 * S)) == 1
    assert delayed.frontier(wall_ns=T0 + 5 * S) == 2
    # nothing read beyond the horizon and not caught up: the tailer may lag
    assert delayed.frontier(wall_ns=T0 + 7 * S + 1) is None
    delayed.feed([], caught_up=True)
    assert delayed.frontier(wall_ns=T0 + 7 * S + 1) == 3


def test_the_read_ahead_is_bounded_and_stops_past_the_horizon() -> None:
    delayed = line(max_buffered=3)
    assert delayed.wants(wall_ns=T0) and delayed.read_from() == 1
    delayed.feed([record(1, 0.0), record(2, 0.0)], caught_up=False)
    assert delayed.wants(wall_ns=T0 + 4 * S + 1) and delayed.read_from() == 3
    assert not delayed.wants(wall_ns=T0)  # record 2 is due beyond now + margin: enough read
    delayed.feed([record(3, 0.0)], caught_up=False)
    assert not delayed.wants(wall_ns=T0 + 10 * S)  # full
    delayed.start_at(10)
    delayed.feed([record(4, 0.0)], caught_up=True)  # below the start: ignored
    assert delayed.read_seq == 3


def test_records_published_late_are_counted() -> None:
    delayed, book = line(), PurgeBook()
    delayed.feed([record(1, 0.0)], caught_up=True)
    delayed.publish(now=9.0, wall_ns=T0 + 9 * S, term=1, book=book, may_publish=True)
    assert delayed.counters.late == 1 and delayed.counters.max_late_ms == 4000.0


def boundary(seq: int, at_s: float) -> Record:
    """An end-of-session record (flag bit 1): its own msg_seq, the session's last source_seq."""
    update = market_pb2.MarketUpdate(event_time_ns=int(T0 + at_s * S))
    update.session_boundary.ended = 1
    update.session_boundary.started = 2
    return Record(
        seq, int(T0 + at_s * S), 1, 1000 + seq - 1, update.SerializeToString(), RECORD_SESSION_BOUNDARY
    )


def test_an_end_of_session_record_goes_alone_flagged_and_is_never_a_tombstone() -> None:
    delayed, book = line(), PurgeBook()
    book.add(PurgeEntry(purge_id=1, first_msg_seq=2, last_msg_seq=4, time_ns=0, reason="r"))  # spans it
    delayed.feed(
        [record(1, 0.0), record(2, 0.0), boundary(3, 0.0), record(4, 0.0), record(5, 0.0)], caught_up=True
    )
    packets = delayed.publish(now=6.0, wall_ns=T0 + 6 * S, term=3, book=book, may_publish=True)
    headers = [wire.decode_header(p) for p in packets]
    assert [(h.first_seq, h.count, h.is_end_of_session, h.is_delayed) for h in headers] == [
        (1, 2, False, True),
        (3, 1, True, True),  # alone, flagged, as the line carried it
        (4, 2, False, True),
    ]
    assert blocks(packets) == [(1, 1), (2, 0), (3, 1), (4, 0), (5, 1)]  # the purge took 2 and 4 only
    assert delayed.counters.tombstones == 2


# ---- the replay service's delayed ranges ----------------------------------------------------------


class Journal:
    def __init__(self, records: list[Record]) -> None:
        self.records = records

    def read(self, from_seq: int = 0, to_seq: int | None = None) -> list[Record]:
        return [r for r in self.records if r.msg_seq >= from_seq and (to_seq is None or r.msg_seq <= to_seq)]

    def bounds(self) -> tuple[int, int]:
        return self.records[0].msg_seq, self.records[-1].msg_seq


def service(book: PurgeBook, *, delay_ns: int | None = DELAY) -> ReplayService:
    journal = Journal([record(seq, float(seq)) for seq in range(1, 11)])  # record n published at T0 + n s
    return ReplayService(
        journal,
        channel=1,
        adapter=2,
        max_packet_bytes=8192,
        max_bytes=1 << 20,
        bounds=journal.bounds,
        purges=book.table,
        delay_ns=delay_ns,
    )


def ask(svc: ReplayService, first: int, last: int, *, kind: int = 1, at_s: float = 100.0, delayed_only=False):
    request = encode_request(ReplayRequest(1, 9, first, last, kind))
    reply = svc.answer(
        [b"peer", b"", request], term=3, send_time_ns=int(T0 + at_s * S), delayed_only=delayed_only
    )
    return decode_status(reply[2]), reply[3:]


def test_a_delayed_range_stops_before_what_is_not_yet_past_its_delay() -> None:
    svc = service(PurgeBook())
    status, packets = ask(svc, 1, 10, kind=KIND_DELAYED_RANGE, at_s=8.5)  # records 1..3 are past 5 s
    assert status.status is ReplayStatus.OK and status.through == 3
    assert [(h.is_delayed, h.is_retransmission) for h in (wire.decode_header(p) for p in packets)] == [
        (True, True)
    ]
    assert [b.msg_seq for p in packets for b in wire.decode_packet(p)[1]] == [1, 2, 3]
    status, packets = ask(svc, 5, 10, kind=KIND_DELAYED_RANGE, at_s=8.5)
    assert status.status is ReplayStatus.UNAVAILABLE and "not yet" in status.message and packets == []


def test_both_kinds_honour_purges_with_tombstones() -> None:
    book = PurgeBook()
    book.add(PurgeEntry(purge_id=1, first_msg_seq=4, last_msg_seq=5, time_ns=0, reason="r"))
    svc = service(book)
    for kind in (1, KIND_DELAYED_RANGE):
        status, packets = ask(svc, 3, 6, kind=kind)
        streams = [(b.msg_seq, b.source_stream) for p in packets for b in wire.decode_packet(p)[1]]
        assert status.status is ReplayStatus.OK and streams == [(3, 1), (4, 0), (5, 0), (6, 1)]
    assert svc.counters.tombstones == 4


def test_a_range_across_a_session_end_sends_it_alone_flagged_and_never_purged() -> None:
    book = PurgeBook()
    book.add(PurgeEntry(purge_id=1, first_msg_seq=4, last_msg_seq=6, time_ns=0, reason="r"))
    journal = Journal([*(record(seq, float(seq)) for seq in range(1, 5)), boundary(5, 5.0), record(6, 6.0)])
    svc = ReplayService(
        journal,
        channel=1,
        adapter=2,
        max_packet_bytes=8192,
        max_bytes=1 << 20,
        bounds=journal.bounds,
        purges=book.table,
        delay_ns=DELAY,
    )
    for kind in (1, KIND_DELAYED_RANGE):
        status, packets = ask(svc, 3, 6, kind=kind)
        headers = [wire.decode_header(p) for p in packets]
        assert status.status is ReplayStatus.OK
        assert [(h.first_seq, h.count, h.is_end_of_session) for h in headers] == [
            (3, 2, False),
            (5, 1, True),
            (6, 1, False),
        ]
        streams = [(b.msg_seq, b.source_stream) for p in packets for b in wire.decode_packet(p)[1]]
        assert streams == [(3, 1), (4, 0), (5, 1), (6, 0)]


def test_a_delayed_only_key_gets_no_real_time_and_an_adapter_without_a_delay_no_delayed_range() -> None:
    svc = service(PurgeBook())
    status, packets = ask(svc, 1, 2, delayed_only=True)
    assert status.status is ReplayStatus.NOT_ENTITLED and packets == [] and svc.counters.not_entitled == 1
    status, _packets = ask(svc, 1, 2, kind=KIND_DELAYED_RANGE, delayed_only=True)
    assert status.status is ReplayStatus.OK
    status, _packets = ask(service(PurgeBook(), delay_ns=None), 1, 2, kind=KIND_DELAYED_RANGE)
    assert status.status is ReplayStatus.UNAVAILABLE and "no delayed stream" in status.message
