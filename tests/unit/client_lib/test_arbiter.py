"""Unit tests of the pure line arbiter: hand-built packets, explicit clock."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.client._claims import GRACE_S
from feedha.client.arbiter import ChannelArbiter
from feedha.client.errors import ConfigError, ProtocolError
from feedha.client.events import (
    ArbiterConfig,
    Conflict,
    Delivery,
    EndOfSession,
    Event,
    GapLost,
    RetransmissionNeeded,
    TermChanged,
)
from feedha.proto import market_pb2
from feedha.proto.wire import FLAG_END_OF_SESSION, FLAG_RETRANSMISSION, encode_packet

CHANNEL = 7


def payload(seq: int) -> bytes:
    return market_pb2.MarketUpdate(
        symbol=f"S{seq % 5}", state=market_pb2.SymbolState(volume=seq)
    ).SerializeToString()


def packet(
    first: int,
    count: int = 1,
    *,
    adapter: int = 1,
    term: int = 1,
    channel: int = CHANNEL,
    flags: int = 0,
    source_offset: int = 1000,
) -> bytes:
    blocks = [(2, source_offset + seq, payload(seq)) for seq in range(first, first + count)]
    return encode_packet(
        channel=channel,
        adapter=adapter,
        term=term,
        first_seq=first,
        blocks=blocks,
        send_time_ns=123_000 + first,
        flags=flags,
    )


def heartbeat(next_seq: int, *, term: int = 1, adapter: int = 1) -> bytes:
    return packet(next_seq, 0, term=term, adapter=adapter)


def seqs(events: list[Event]) -> list[int]:
    return [e.msg_seq for e in events if isinstance(e, Delivery)]


def arbiter(**kwargs: object) -> ChannelArbiter:
    return ChannelArbiter(ArbiterConfig(channel=CHANNEL, **kwargs), lines=3)  # type: ignore[arg-type]


def test_in_order_single_line_delivers_with_header_fields() -> None:
    arb = arbiter()
    events = arb.on_packet(0, packet(10, 3), now=0.0)
    assert seqs(events) == [10, 11, 12]
    first = events[0]
    assert isinstance(first, Delivery)
    assert (first.channel, first.source_stream, first.source_seq, first.line, first.term) == (
        CHANNEL,
        2,
        1010,
        0,
        1,
    )
    assert first.send_time_ns == 123_010
    assert first.payload == payload(10)
    assert first.update.symbol == "S0" and first.update.state.volume == 10
    assert first.update is first.update  # decoded once, cached
    assert arb.next_seq == 13
    assert arb.next_deadline() is None


def test_duplicates_from_two_lines_are_dropped_and_counted() -> None:
    arb = arbiter()
    out = arb.on_packet(0, packet(1, 4), now=0.0)
    out += arb.on_packet(1, packet(1, 4, adapter=2), now=0.001)
    out += arb.on_packet(1, packet(5, 2, adapter=2), now=0.002)
    out += arb.on_packet(0, packet(5, 2), now=0.003)
    assert seqs(out) == [1, 2, 3, 4, 5, 6]
    stats = arb.stats()
    assert stats.delivered == 6 and stats.duplicates == 6 and stats.conflicts == 0
    assert stats.active_line == 1
    assert [(ls.line, ls.adapter, ls.first_copies, ls.duplicates) for ls in stats.lines[:2]] == [
        (0, 1, 4, 2),
        (1, 2, 2, 4),
    ]
    assert stats.lines[2].packets == 0 and stats.packets == 4


def test_interleaved_lines_each_missing_packets() -> None:
    arb = arbiter()
    out: list[Event] = []
    for seq in range(1, 21):
        line = seq % 2  # line 0 carries evens, line 1 odds
        out += arb.on_packet(line, packet(seq), now=seq / 1000)
    assert seqs(out) == list(range(1, 21))
    assert arb.stats().gaps == 0


def test_hole_filled_by_another_line_before_fill_timeout() -> None:
    arb = arbiter()
    out = arb.on_packet(0, packet(1, 2), now=0.0)
    out += arb.on_packet(0, packet(5, 2), now=0.01)  # 3, 4 missing on line 0
    assert seqs(out) == [1, 2]
    assert arb.stats().buffered == 2 and arb.stats().open_gaps == 1
    assert arb.next_deadline() == pytest.approx(0.01 + 0.05)
    assert "next=3, buffered=2, lines=3, gaps=1" in repr(arb)
    out = arb.on_packet(1, packet(1, 6, adapter=2), now=0.02)
    assert seqs(out) == [3, 4, 5, 6]
    stats = arb.stats()
    assert stats.duplicates == 4 and stats.buffered == 0 and stats.open_gaps == 0 and stats.gaps == 1
    assert arb.on_timer(now=1.0) == []
    assert arb.next_deadline() is None


def test_fill_timeout_requests_retransmission_then_loss_timeout_gives_up() -> None:
    arb = arbiter(fill_timeout=0.05, loss_timeout=0.5)
    arb.on_packet(0, packet(1), now=10.0)
    assert seqs(arb.on_packet(0, packet(4, 2), now=10.0)) == []
    assert arb.on_timer(now=10.049) == []
    assert arb.on_timer(now=10.05) == [RetransmissionNeeded(CHANNEL, 2, 3)]
    assert arb.on_timer(now=10.2) == []  # asked once
    assert arb.next_deadline() == pytest.approx(10.5)
    out = arb.on_timer(now=10.5)
    assert out[0] == GapLost(CHANNEL, 2, 3) and out[0].count == 2
    assert seqs(out) == [4, 5]
    # A late copy of a lost message is dropped as late, not delivered.
    assert arb.on_packet(1, packet(2, 2), now=10.6) == []
    stats = arb.stats()
    assert (stats.lost, stats.retransmission_requests, stats.gaps, stats.late) == (2, 1, 1, 2)


def test_retransmitted_packet_fills_hole() -> None:
    arb = arbiter()
    arb.on_packet(0, packet(1), now=0.0)
    arb.on_packet(0, packet(5), now=0.0)
    assert arb.on_timer(now=0.06) == [RetransmissionNeeded(CHANNEL, 2, 4)]
    out = arb.on_packet(3, packet(2, 3, term=0, flags=FLAG_RETRANSMISSION), now=0.07)
    assert seqs(out) == [2, 3, 4, 5]
    # A retransmission's term is no claim; one line has said term 1 twice: not yet believed.
    assert arb.stats().stale == 0 and arb.stats().highest_term is None


def test_line_holes_count_what_only_a_retransmission_carried() -> None:
    arb = arbiter()
    arb.on_packet(0, packet(1), now=0.0)
    arb.on_packet(0, packet(6), now=0.0)  # hole 2..5
    arb.on_timer(now=0.06)
    arb.on_packet(2, packet(2, 4, flags=FLAG_RETRANSMISSION), now=0.07)
    assert arb.stats().line_holes == 4
    arb.on_packet(1, packet(2, 2), now=0.08)  # a slow line carried 2 and 3 after all
    arb.on_packet(1, packet(4, 3), now=0.09)  # ... and 4 and 5 (through the fast path)
    assert arb.stats().line_holes == 0
    arb.on_packet(0, packet(9), now=0.1)  # hole 7..8, nobody's line has it
    arb.on_timer(now=0.2)
    arb.on_packet(2, packet(7, 2, flags=FLAG_RETRANSMISSION), now=0.21)
    arb.on_packet(2, packet(7, 2, flags=FLAG_RETRANSMISSION), now=0.22)  # a second answer
    assert arb.stats().line_holes == 2


def test_partial_fill_splits_hole_and_keeps_its_age() -> None:
    arb = arbiter()
    arb.on_packet(0, packet(1), now=0.0)
    arb.on_packet(0, packet(10), now=0.0)  # hole 2..9
    arb.on_packet(1, packet(5), now=0.01)  # splits into 2..4 and 6..9
    assert arb.stats().open_gaps == 2
    out = arb.on_timer(now=0.05)
    assert out == [RetransmissionNeeded(CHANNEL, 2, 4), RetransmissionNeeded(CHANNEL, 6, 9)]
    out = arb.on_packet(1, packet(2, 3), now=0.1)
    assert seqs(out) == [2, 3, 4, 5]
    out = arb.on_timer(now=0.5)
    assert out[0] == GapLost(CHANNEL, 6, 9) and seqs(out) == [10]


def test_heartbeat_reveals_tail_gap() -> None:
    arb = arbiter()
    arb.on_packet(0, packet(1, 3), now=0.0)
    assert arb.on_packet(0, heartbeat(4), now=0.1) == []
    assert arb.next_deadline() is None
    assert arb.on_packet(1, heartbeat(6, adapter=2), now=0.2) == []  # 4, 5 never seen
    assert arb.stats().open_gaps == 1
    assert arb.on_timer(now=0.26) == [RetransmissionNeeded(CHANNEL, 4, 5)]
    assert seqs(arb.on_packet(0, packet(4, 2), now=0.3)) == [4, 5]
    assert arb.stats().lines[0].heartbeats == 1


def test_timer_due_on_packet_arrival_fires_without_on_timer() -> None:
    arb = arbiter()
    arb.on_packet(0, packet(1), now=0.0)
    arb.on_packet(0, packet(3), now=0.0)
    out = arb.on_packet(0, packet(4), now=1.0)
    assert out[0] == GapLost(CHANNEL, 2, 2) and seqs(out) == [3, 4]


def test_conflict_keeps_first_copy_and_reports() -> None:
    arb = arbiter()
    arb.on_packet(0, packet(1, 2), now=0.0)
    out = arb.on_packet(1, packet(1, 2, source_offset=5000), now=0.0)
    assert out == [
        Conflict(CHANNEL, 1, 1, kept=(2, 1001), rejected=(2, 5001)),
        Conflict(CHANNEL, 2, 1, kept=(2, 1002), rejected=(2, 5002)),
    ]
    # A conflict on a buffered (undelivered) message keeps the first too.
    arb.on_packet(0, packet(5), now=0.0)
    out = arb.on_packet(1, packet(5, source_offset=7000), now=0.0)
    assert out == [Conflict(CHANNEL, 5, 1, kept=(2, 1005), rejected=(2, 7005))]
    assert arb.stats().conflicts == 3 and arb.stats().duplicates == 0


def test_higher_term_copy_replaces_undelivered_older_term_copy() -> None:
    arb = arbiter()
    arb.on_packet(0, packet(1), now=0.0)
    arb.on_packet(0, packet(3, source_offset=9000), now=0.0)  # zombie's buffered copy
    out = arb.on_packet(1, packet(2, 2, term=2, adapter=2), now=0.0)
    # One packet of a higher term is a claim, not yet a fence; its copy still wins.
    assert not any(isinstance(e, TermChanged) for e in out)
    assert isinstance(out[0], Conflict) and out[0].kept == (2, 1003)
    delivered = [e for e in out if isinstance(e, Delivery)]
    assert [(d.msg_seq, d.source_seq, d.term) for d in delivered] == [(2, 1002, 2), (3, 1003, 2)]


def test_stale_term_dropped_after_term_increase() -> None:
    arb = arbiter()
    arb.on_packet(0, packet(1, term=3), now=0.0)
    # Two of three lines vote at least 3: the channel follows 3; line 2's 4 is a claim of one line.
    arb.on_packet(2, heartbeat(2, term=4, adapter=3), now=0.0)
    assert arb.stats().highest_term == 3
    out = arb.on_packet(1, packet(2, term=4, adapter=2), now=0.0)
    assert out[0] == TermChanged(CHANNEL, 3, 4, 1) and seqs(out) == [2]
    # The old active keeps sending msg_seq 3 with term 3 (past the grace for what it sent before
    # the promotion, client_lib._claims.GRACE_S): not delivered.
    assert arb.on_packet(0, packet(3, term=3), now=GRACE_S) == []
    assert arb.on_packet(0, heartbeat(9, term=3), now=GRACE_S) == []  # no phantom gap either
    assert seqs(arb.on_packet(1, packet(3, term=4, adapter=2), now=GRACE_S)) == [3]
    stats = arb.stats()
    assert stats.stale == 2 and stats.highest_term == 4 and stats.open_gaps == 0
    assert stats.lines[0].stale == 2 and stats.lines[1].last_term == 4
    assert "term=4" in repr(arb)


def test_a_forged_packet_read_first_fences_nobody() -> None:
    # The first packet a subscriber reads carries a huge term (forged, or a zombie's from the
    # future): the genuine lines that follow must not all be dropped as stale.
    arb = arbiter()
    out = arb.on_packet(0, packet(1, term=2**32 - 1, adapter=9), now=0.0)
    assert seqs(out) == [1] and arb.stats().highest_term is None  # taken, not believed
    out = arb.on_packet(1, packet(2, term=4, adapter=1), now=0.0)
    assert seqs(out) == [2] and arb.stats().highest_term == 4  # another line backs a term: the lesser
    out = arb.on_packet(2, packet(2, term=4, adapter=2), now=0.0)
    out += arb.on_packet(1, packet(3, term=4, adapter=1), now=0.0)
    out += arb.on_packet(0, packet(4, term=2**32 - 1, adapter=9), now=0.0)  # its claim, contradicted
    out += arb.on_packet(1, packet(5, term=4, adapter=1), now=0.0)
    assert seqs(out) == [3, 4, 5] and not any(isinstance(e, TermChanged) for e in out)
    stats = arb.stats()
    assert stats.stale == 0 and stats.highest_term == 4 and stats.lost == 0


def test_a_far_jump_of_one_packet_opens_no_gap_until_confirmed() -> None:
    arb = arbiter()
    arb.on_packet(0, packet(1, 2), now=0.0)
    assert arb.on_packet(0, heartbeat(2**63), now=0.0) == []  # a heartbeat near the end of u64
    assert arb.on_packet(1, packet(2**40, adapter=2), now=0.0) == []
    stats = arb.stats()
    assert stats.suspect == 2 and stats.open_gaps == 0 and stats.next_seq == 3
    assert seqs(arb.on_packet(0, packet(3), now=0.0)) == [3]
    # Two lines agreeing on a far position: a real gap, opened and then filled or lost as usual.
    arb.on_packet(0, heartbeat(5_000_000), now=0.1)
    arb.on_packet(1, heartbeat(5_000_000, adapter=2), now=0.1)
    assert arb.stats().open_gaps == 1 and arb.stats().suspect == 3


def test_msg_seq_continues_across_terms() -> None:
    arb = arbiter()
    out = arb.on_packet(0, packet(1, 2, term=1), now=0.0)
    out += arb.on_packet(1, packet(3, 2, term=2), now=0.0)
    assert seqs(out) == [1, 2, 3, 4]


@pytest.mark.parametrize(
    "bad",
    [
        b"",
        b"FH",
        b"XX" + packet(1)[2:],  # wrong magic
        packet(1, 3)[:-1],  # truncated block
        packet(1, 3) + b"\x00",  # trailing bytes
        packet(1)[:2] + b"\x09" + packet(1)[3:],  # wrong version
        packet(1, channel=CHANNEL + 1),  # another channel
    ],
)
def test_garbage_is_counted_never_raises(bad: bytes) -> None:
    arb = arbiter()
    assert arb.on_packet(0, packet(1), now=0.0) != []
    assert arb.on_packet(1, bad, now=0.0) == []
    assert seqs(arb.on_packet(0, packet(2), now=0.0)) == [2]
    stats = arb.stats()
    assert stats.garbage == 1 and stats.lines[1].garbage == 1 and stats.delivered == 2


@given(st.binary(max_size=200))
@settings(max_examples=300, deadline=None)
def test_random_bytes_never_raise(data: bytes) -> None:
    arb = arbiter()
    arb.on_packet(0, packet(1), now=0.0)
    arb.on_packet(0, data, now=0.0)
    arb.on_packet(0, b"FH\x01\x00" + data, now=0.0)
    assert arb.stats().garbage + arb.stats().delivered >= 2


def test_on_garbage_counts_bad_frames() -> None:
    arb = arbiter()
    arb.on_garbage(2, reason="frames")
    stats = arb.stats()
    assert stats.garbage_reasons == {"frames": 1} and stats.lines[2].garbage == 1


def test_channel_adopted_from_first_packet_when_not_configured() -> None:
    arb = ChannelArbiter(ArbiterConfig())
    assert arb.channel is None
    arb.on_packet(0, packet(1), now=0.0)
    assert arb.channel == CHANNEL
    assert arb.on_packet(0, packet(2, channel=3), now=0.0) == []
    assert arb.stats().garbage_reasons == {"channel": 1}


def test_start_seq_requests_what_precedes_first_packet() -> None:
    arb = arbiter(start_seq=5)
    assert arb.on_packet(0, packet(8), now=0.0) == []
    assert arb.on_packet(0, packet(3, 2), now=0.0) == []  # before start: late
    assert arb.on_timer(now=0.05) == [RetransmissionNeeded(CHANNEL, 5, 7)]
    assert seqs(arb.on_packet(1, packet(5, 3), now=0.06)) == [5, 6, 7, 8]
    assert arb.stats().late == 2


def test_buffer_overflow_declares_oldest_hole_lost() -> None:
    arb = arbiter(max_buffered=4)
    arb.on_packet(0, packet(1), now=0.0)
    out: list[Event] = []
    for seq in (3, 5, 6, 7):
        out += arb.on_packet(0, packet(seq), now=0.0)
    assert out == [] and arb.stats().buffered == 4
    out = arb.on_packet(0, packet(8), now=0.0)
    assert out[0] == GapLost(CHANNEL, 2, 2) and seqs(out) == [3]
    assert arb.stats().buffered == 4 and arb.stats().next_seq == 4


def test_end_of_session_reported_once() -> None:
    arb = arbiter()
    out = arb.on_packet(0, packet(1, flags=FLAG_END_OF_SESSION), now=0.0)
    assert out[-1] == EndOfSession(CHANNEL, 0, 2)
    assert arb.on_packet(1, packet(1, flags=FLAG_END_OF_SESSION), now=0.0) == []


def test_undecodable_payload_raises_protocol_error_on_access_only() -> None:
    pkt = encode_packet(
        channel=CHANNEL, adapter=1, term=1, first_seq=1, blocks=[(1, 1, b"\xff\xff")], send_time_ns=0
    )
    (delivery,) = arbiter().on_packet(0, pkt, now=0.0)
    assert isinstance(delivery, Delivery) and delivery.payload == b"\xff\xff"
    with pytest.raises(ProtocolError) as info:
        _ = delivery.update
    assert info.value.reason == "payload"


@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [
        ({"channel": 70_000}, "channel"),
        ({"fill_timeout": 0.0}, "fill_timeout"),
        ({"fill_timeout": 0.2, "loss_timeout": 0.1}, "loss_timeout"),
        ({"start_seq": -1}, "start_seq"),
        ({"max_buffered": 0}, "max_buffered"),
        ({"conflict_window": 0}, "conflict_window"),
    ],
)
def test_config_rejects_bad_values(kwargs: dict[str, object], parameter: str) -> None:
    with pytest.raises(ConfigError) as info:
        ArbiterConfig(**kwargs)  # type: ignore[arg-type]
    assert info.value.parameter == parameter and parameter in str(info.value)
    assert isinstance(info.value, ValueError)


def test_repr_shows_state() -> None:
    arb = arbiter()
    assert repr(arb) == "<ChannelArbiter [channel=7, next=None, buffered=0, lines=3, gaps=0, term=None]>"
    arb.on_packet(0, packet(1234), now=0.0)
    assert repr(arb) == "<ChannelArbiter [channel=7, next=1235, buffered=0, lines=3, gaps=0, term=None]>"
    arb.on_packet(1, packet(1234, adapter=2), now=0.0)  # a second line: the term is believed
    assert repr(arb) == "<ChannelArbiter [channel=7, next=1235, buffered=0, lines=3, gaps=0, term=1]>"


@st.composite
def scrambled_lines(draw: st.DrawFn) -> tuple[int, int, list[tuple[int, bytes]]]:
    """Packets and heartbeats for first..last on 1-3 lines, duplicated, reordered, none lost overall."""
    first = draw(st.integers(0, 10**9))
    sizes = draw(st.lists(st.integers(1, 5), min_size=1, max_size=12))
    lines = draw(st.integers(1, 3))
    packets: list[tuple[int, bytes]] = []
    seq = first
    for size in sizes:
        carriers = draw(st.sets(st.integers(0, lines - 1), min_size=1))
        packets += [(line, packet(seq, size, adapter=line)) for line in sorted(carriers)]
        seq += size
        if draw(st.booleans()):  # an idle line announces its next msg_seq
            packets.append((min(carriers), heartbeat(seq, adapter=min(carriers))))
    order = draw(st.permutations(range(len(packets))))
    # The first packet fixes the start: keep one packet of msg_seq `first` in front.
    ordered = [packets[0]] + [packets[i] for i in order if i != 0]
    return first, seq - 1, ordered


@given(scrambled_lines())
@settings(max_examples=200, deadline=None)
def test_property_any_interleaving_delivers_each_seq_once_in_order(
    case: tuple[int, int, list[tuple[int, bytes]]],
) -> None:
    first, last, packets = case
    arb = ChannelArbiter(ArbiterConfig(channel=CHANNEL, loss_timeout=10.0, fill_timeout=5.0))
    delivered: list[int] = []
    for line, pkt in packets:
        events = arb.on_packet(line, pkt, now=0.0)
        assert all(isinstance(e, Delivery) for e in events)
        delivered += seqs(events)
    assert delivered == list(range(first, last + 1))
    stats = arb.stats()
    assert stats.buffered == 0 and stats.open_gaps == 0 and stats.lost == 0 and stats.conflicts == 0
    assert stats.delivered + stats.duplicates == sum(ls.blocks for ls in stats.lines)
    assert arb.next_deadline() is None and arb.on_timer(now=100.0) == []


def test_identical_copy_fast_path_still_reports_conflicts() -> None:
    arb = arbiter()
    original = packet(1, 3)
    arb.on_packet(0, original, now=0.0)
    # Same bytes after the header (another adapter, same blocks): all duplicates.
    assert arb.on_packet(1, packet(1, 3, adapter=2), now=0.0) == []
    assert arb.stats().duplicates == 3 and arb.stats().lines[1].blocks == 3
    # A conflicting packet is never remembered, so its byte-identical copy conflicts too.
    rogue = packet(4, 2, source_offset=0)
    arb.on_packet(0, packet(4, 2), now=0.0)
    assert len(arb.on_packet(1, rogue, now=0.0)) == 2
    assert len(arb.on_packet(2, rogue, now=0.0)) == 2
    assert arb.stats().conflicts == 4
    # A packet partly before the start (late blocks) is not taken for a known copy.
    late = ChannelArbiter(ArbiterConfig(channel=CHANNEL, start_seq=3))
    late.on_packet(0, packet(1, 4), now=0.0)
    late.on_packet(1, packet(1, 4), now=0.0)
    assert late.stats().late == 4 and late.stats().duplicates == 2


@given(scrambled_lines(), st.data())
@settings(max_examples=200, deadline=None)
def test_property_with_loss_every_seq_is_delivered_once_or_reported_lost(
    case: tuple[int, int, list[tuple[int, bytes]]], data: st.DataObject
) -> None:
    first, _last, packets = case
    kept = [packets[0]] + [p for p in packets[1:] if data.draw(st.booleans(), label="keep")]
    arb = ChannelArbiter(ArbiterConfig(channel=CHANNEL))
    events: list[Event] = []
    for line, pkt in kept:
        events += arb.on_packet(line, pkt, now=0.0)
    events += arb.on_timer(now=1.0)  # past loss_timeout: every hole is given up
    delivered = seqs(events)
    assert delivered == sorted(set(delivered))
    lost = [seq for e in events if isinstance(e, GapLost) for seq in range(e.first_seq, e.last_seq + 1)]
    next_seq = arb.stats().next_seq
    assert next_seq is not None
    assert sorted(delivered + lost) == list(range(first, next_seq))
    assert arb.stats().lost == len(lost) and arb.stats().buffered == 0 and arb.next_deadline() is None
