"""``ChannelArbiter`` -- its fast path included -- against a model that states the rules of arbitration.

The model (``arbiter_model.Model``) arbitrates one packet and one block at a
time by the rules its docstring lists. Random streams of packets from one to
three lines -- packets cut at different boundaries per line, identical or
differing payloads, drops, duplicates, reorders, heartbeats, conflicts, a
promotion with a zombie active, retransmissions (some filling what every line
dropped), tombstones, garbage, forged far jumps and genuine ones, the delayed
stream and misrouted real-time packets, end of session, timers -- must give
the same events (field by field), deadlines, ``missing`` counts, stats
(``line_holes`` included) and ``repr`` from both.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.client._claims import MAX_JUMP
from feedha.client._delivery_stream import DeliveryStream
from feedha.client.arbiter import ChannelArbiter
from feedha.client.events import ArbiterConfig, Delivery, Event, RetransmissionNeeded
from feedha.proto import market_pb2
from feedha.proto.wire import (
    FLAG_DELAYED,
    FLAG_END_OF_SESSION,
    FLAG_RETRANSMISSION,
    HEADER_SIZE,
    TOMBSTONE_STREAM,
    encode_packet,
)
from tests.unit.client_lib.arbiter_model import Model, delivery_key

CHANNEL = 5
JUMP = 2 * MAX_JUMP  # how far a genuine jump moves the stream
Step = tuple[str, int, bytes, float]  # ("packet" | "timer" | "frames", line, packet, now)


@dataclass
class Plan:
    """One scenario's stream and troubles."""

    rng: random.Random
    lines: int
    first: int
    last: int
    identity: dict[int, tuple[int, int]]
    flags: int  # FLAG_DELAYED on a delayed stream
    same_payloads: bool
    promote_at: int | None
    jump_at: int | None
    conflict_rate: float
    drop_rate: float
    zombie_drifts: bool  # the demoted active numbers its own way after the promotion
    replays: list[bytes] = field(default_factory=list)  # retransmissions of dropped packets

    def wire(self, seq: int) -> int:
        """The msg_seq on the wire (the stream jumps by JUMP at ``jump_at``)."""
        return seq + JUMP if self.jump_at is not None and seq >= self.jump_at else seq


def _plan(rng: random.Random, lines: int) -> tuple[ArbiterConfig, Plan]:
    first = rng.choice([0, 1, 7, 65_530, 10**6])
    count = rng.randint(1, 200)
    last = first + count - 1
    identity = {}
    for seq in range(first, last + 1):  # one source stream usually, sometimes two; a few tombstones
        stream = TOMBSTONE_STREAM if rng.random() < 0.02 else 1 + (rng.random() < 0.1)
        identity[seq] = (stream, 10_000 + seq)
    delayed = rng.random() < 0.2
    plan = Plan(
        rng=rng,
        lines=lines,
        first=first,
        last=last,
        identity=identity,
        flags=FLAG_DELAYED if delayed else 0,
        same_payloads=rng.random() < 0.5,
        promote_at=rng.choice([None, first + count // 2]) if lines > 1 else None,
        jump_at=rng.choice([None, None, None, first + count // 3]),
        conflict_rate=rng.choice([0.0, 0.0, 0.02]),
        drop_rate=rng.choice([0.0, 0.05, 0.2, 0.5]),
        zombie_drifts=rng.random() < 0.5,
    )
    config = ArbiterConfig(
        channel=rng.choice([CHANNEL, None]),
        name="EQ",
        fill_timeout=0.05,
        loss_timeout=rng.choice([0.05, 0.5]),
        start_seq=rng.choice([None, None, first, first + rng.randint(0, 20)]),
        max_buffered=rng.choice([100_000, 4, 50]),
        conflict_window=rng.choice([65_536, 1, 7, 64]),
        delayed=delayed,
    )
    return config, plan


def _cut(plan: Plan, most: int) -> list[tuple[int, int]]:
    """Split first..last into runs of 1..most msg_seq (never across the jump)."""
    runs, seq = [], plan.first
    while seq <= plan.last:
        end = plan.last if plan.jump_at is None or seq >= plan.jump_at else plan.jump_at - 1
        size = min(plan.rng.randint(1, most), end - seq + 1)
        runs.append((seq, size))
        seq += size
    return runs


def _payload(plan: Plan, seq: int, line: int) -> bytes:
    if plan.identity[seq][0] == TOMBSTONE_STREAM:
        reason = "" if plan.same_payloads else f"line {line}"
        return market_pb2.Tombstone(symbol="S1", purge_id=seq, reason=reason).SerializeToString()
    payload = b"m%d" % seq if plan.same_payloads else b"m%d/%d" % (seq, line)
    return payload * plan.rng.choice([1, 1, 3])


def _encode(
    plan: Plan, line: int, start: int, blocks: list[tuple[int, int, bytes]], term: int, flags: int
) -> bytes:
    return encode_packet(
        channel=CHANNEL,
        adapter=line + 1,
        term=term,
        first_seq=plan.wire(start),
        blocks=blocks,
        send_time_ns=(1_000 + start) * (1 if plan.same_payloads else line + 1),
        flags=plan.flags | flags,
    )


def _line_packets(plan: Plan, line: int) -> list[bytes]:
    """What one line sends: its cut of the stream, with its own troubles."""
    rng = plan.rng
    packets: list[bytes] = []
    for start, size in _cut(plan, rng.choice([1, 4, 9, 30])):
        term = 1
        if plan.promote_at is not None and start + size > plan.promote_at:
            term = 2 if line == 1 else 1  # line 1 is promoted; line 0 goes on as a zombie
        blocks = []
        for seq in range(start, start + size):
            stream, source_seq = plan.identity[seq]
            if line and rng.random() < plan.conflict_rate:
                source_seq += 1
            if line == 0 and plan.zombie_drifts and plan.promote_at is not None and seq >= plan.promote_at:
                source_seq += 1_000
            blocks.append((stream, source_seq, _payload(plan, seq, line)))
        end_flag = FLAG_END_OF_SESSION if start + size > plan.last and rng.random() < 0.5 else 0
        packet = _encode(plan, line, start, blocks, term, end_flag)
        if rng.random() < plan.drop_rate:
            if rng.random() < 0.3:  # a replay service sends it later
                plan.replays.append(packet[:3] + bytes([packet[3] | FLAG_RETRANSMISSION]) + packet[4:])
            continue
        packets.append(packet)
        packets += _troubles(plan, packet, line, start + size, term)
    for i in range(len(packets) - 1):  # local reorders
        if rng.random() < 0.1:
            packets[i], packets[i + 1] = packets[i + 1], packets[i]
    return packets


def _troubles(plan: Plan, packet: bytes, line: int, after: int, term: int) -> list[bytes]:
    """What may follow a packet on its line: itself again, garbage, a heartbeat, a far jump."""
    rng = plan.rng
    out = []
    if rng.random() < 0.05:
        out.append(packet)  # duplicated on the line
    if rng.random() < 0.05:
        out.append(_garble(rng, packet))
    if rng.random() < 0.03:  # the other stream's packet (a misrouted line)
        out.append(packet[:3] + bytes([packet[3] ^ FLAG_DELAYED]) + packet[4:])
    if rng.random() < 0.1:  # idle: a heartbeat with the next msg_seq
        out.append(_encode(plan, line, after, [], term, 0) if after <= plan.last else packet[:0])
    if rng.random() < 0.02:  # a forged far jump, sometimes repeated enough to be believed
        far = plan.wire(plan.last) + MAX_JUMP + rng.randint(1, 50)
        forged = packet[:12] + far.to_bytes(8, "big") + packet[20:]
        out += [forged] * rng.randint(1, 4)
    return [p for p in out if p]


def _garble(rng: random.Random, packet: bytes) -> bytes:
    kind = rng.randrange(7)
    if kind == 0:
        return packet[: rng.randrange(HEADER_SIZE)]  # truncated header
    if kind == 1:
        return b"XX" + packet[2:]  # magic
    if kind == 2:
        return packet + b"\x00" * rng.randint(1, 3)  # trailing bytes
    if kind == 3 and len(packet) > HEADER_SIZE + 1:
        return packet[: rng.randrange(HEADER_SIZE + 1, len(packet))]  # a block runs past the end
    if kind == 4 and len(packet) > HEADER_SIZE + 2:
        return packet[:HEADER_SIZE] + bytes([0, rng.randrange(10)]) + packet[HEADER_SIZE + 2 :]  # length < 10
    if kind == 5:
        return packet[:4] + (CHANNEL + 1).to_bytes(2, "big") + packet[6:]  # another channel
    return packet[:2] + b"\x09" + packet[3:]  # version


def scenario(rng: random.Random, *, lines: int = 2) -> tuple[ArbiterConfig, list[Step]]:
    """A random stream of packets from ``lines`` lines (and a replay line), with every kind of trouble."""
    config, plan = _plan(rng, lines)
    per_line = [_line_packets(plan, line) for line in range(lines)]
    steps: list[Step] = []
    now = 0.0
    cursors = [0] * lines
    while any(cursors[line] < len(per_line[line]) for line in range(lines)):
        line = rng.choice([i for i in range(lines) if cursors[i] < len(per_line[i])])
        burst = rng.randint(1, 3)
        for packet in per_line[line][cursors[line] : cursors[line] + burst]:
            now += rng.choice([0.0, 0.0, 0.001, 0.01, 0.03, 0.2])
            steps.append(("packet", line, packet, now))
            if len(packet) >= HEADER_SIZE and rng.random() < 0.02:  # a journal replay of it
                steps.append(
                    ("packet", lines, packet[:3] + bytes([packet[3] | FLAG_RETRANSMISSION]) + packet[4:], now)
                )
            if plan.replays and rng.random() < 0.1:  # the replay service fills what every line dropped
                steps.append(("packet", lines, plan.replays.pop(0), now))
            if rng.random() < 0.01:
                steps.append(("frames", line, b"", now))  # a message of one frame, not two
            if rng.random() < 0.1:
                now += rng.choice([0.02, 0.06, 0.6])
                steps.append(("timer", 0, b"", now))
        cursors[line] += burst
    steps += [("packet", lines, replay, now) for replay in plan.replays]
    steps.append(("timer", 0, b"", now + 1.0))
    return config, steps


def run_both(config: ArbiterConfig, steps: list[Step], *, lines: int = 2) -> list[Event]:
    """Feed ``steps`` to an arbiter and the model; everything they say must agree. Returns the events."""
    arbiter = ChannelArbiter(config, lines=lines)
    model = Model(config, lines=lines)
    events: list[Event] = []
    for number, (kind, line, packet, now) in enumerate(steps):
        if kind == "packet":
            got, want = arbiter.on_packet(line, packet, now=now), model.on_packet(line, packet, now)
        elif kind == "timer":
            got, want = arbiter.on_timer(now=now), model.on_timer(now)
        else:
            arbiter.on_garbage(line, reason="frames")
            model.on_garbage(line, "frames")
            got, want = [], []
        where = f"step {number}: {kind} on line {line} at {now}"
        assert [delivery_key(e) for e in got] == want, where
        assert arbiter.next_deadline() == model.next_deadline(), where
        assert (arbiter.next_seq, arbiter.channel) == (model.next, model.channel), where
        for event in got:
            if isinstance(event, RetransmissionNeeded):
                assert arbiter.missing(event.first_seq, event.last_seq) == model.missing(
                    event.first_seq, event.last_seq
                )
        events += got
    assert arbiter.stats() == model.stats()
    assert repr(arbiter) == model.describe()
    return events


@given(st.integers(0, 2**32))
@settings(max_examples=300, deadline=None)
def test_property_the_arbiter_follows_the_rules_on_two_lines(seed: int) -> None:
    config, steps = scenario(random.Random(seed))
    run_both(config, steps)


@given(st.integers(0, 2**32), st.sampled_from([1, 3]))
@settings(max_examples=100, deadline=None)
def test_property_the_arbiter_follows_the_rules_on_one_and_three_lines(seed: int, lines: int) -> None:
    config, steps = scenario(random.Random(seed), lines=lines)
    run_both(config, steps, lines=lines)


@pytest.mark.parametrize("seed", range(40))
def test_fixed_seeds_follow_the_rules(seed: int) -> None:
    # The same check on fixed seeds, so every run covers these cases.
    config, steps = scenario(random.Random(seed), lines=1 + seed % 3)
    run_both(config, steps, lines=1 + seed % 3)


def _packet(first: int, count: int, *, line: int = 0, flags: int = 0, term: int = 1) -> bytes:
    blocks = [(1, 500 + seq, b"m%d" % seq) for seq in range(first, first + count)]
    return encode_packet(
        channel=CHANNEL,
        adapter=line + 1,
        term=term,
        first_seq=first,
        blocks=blocks,
        send_time_ns=0,
        flags=flags,
    )


def test_clean_two_lines_take_the_fast_path_and_follow_the_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    # Active and backup cut the same stream differently, nothing lost:
    # nearly every packet takes the fast path.

    taken = []
    take_live = DeliveryStream.take_live

    def counting(self: DeliveryStream, *args: object) -> list[Event] | None:
        out = take_live(self, *args)  # type: ignore[arg-type]
        taken.append(out is not None)
        return out

    monkeypatch.setattr(DeliveryStream, "take_live", counting)
    rng = random.Random(3)
    streams = []
    for adapter, most in ((1, 60), (2, 45)):
        packets, seq = [], 1
        while seq <= 3000:
            size = min(rng.randint(1, most), 3001 - seq)
            blocks = [(1, 500 + s, b"x" * rng.randint(20, 200)) for s in range(seq, seq + size)]
            packets.append(
                encode_packet(
                    channel=CHANNEL, adapter=adapter, term=1, first_seq=seq, blocks=blocks, send_time_ns=0
                )
            )
            seq += size
        streams.append(packets)
    steps: list[Step] = [
        ("packet", line, packets[i], i / 1000)
        for i in range(max(map(len, streams)))
        for line, packets in enumerate(streams)
        if i < len(packets)
    ]
    delivered = run_both(ArbiterConfig(channel=CHANNEL), steps)
    assert [e.msg_seq for e in delivered if isinstance(e, Delivery)] == list(range(1, 3001))
    assert sum(taken) >= len(steps) - 2  # the first packet of the channel takes the general path


def test_fast_path_delivery_behaves_like_a_constructed_one() -> None:
    packet = encode_packet(
        channel=CHANNEL, adapter=1, term=1, first_seq=1, blocks=[(1, 1, b"a"), (1, 2, b"")], send_time_ns=9
    )
    arbiter = ChannelArbiter(ArbiterConfig(channel=CHANNEL))
    arbiter.on_packet(0, _packet(1, 0), now=0.0)
    events = arbiter.on_packet(0, packet, now=0.0)
    assert [type(e) for e in events] == [Delivery, Delivery]
    built = Delivery(CHANNEL, 1, 1, 1, 0, 1, 9, packet, HEADER_SIZE + 12, HEADER_SIZE + 13)
    for got in (events[0], built):
        assert (got.channel, got.msg_seq, got.source_stream, got.source_seq, got.line, got.term) == (
            *(CHANNEL, 1, 1, 1, 0, 1),
        )
        assert got.payload == b"a" and repr(got) == repr(built)
    assert events[1].payload == b"" and events[1].update.symbol == ""
    assert events[1].update is events[1].update


@pytest.mark.parametrize("first", [1, 3])  # delivered in order, or a copy below the delivery point
def test_short_block_length_that_still_fills_the_packet_is_garbage(first: int) -> None:
    # Block 0 claims 4 bytes (below the 10 its own header needs), and block 1
    # starts right after them, so the walk ends exactly at the packet's end.
    good = encode_packet(
        channel=CHANNEL,
        adapter=1,
        term=1,
        first_seq=first,
        blocks=[(1, 7, b"x"), (1, 8, b"y")],
        send_time_ns=0,
    )
    bad = good[:HEADER_SIZE] + b"\x00\x04" + b"\x00\x01\x00\x00" + good[HEADER_SIZE + 13 :]
    steps: list[Step] = [("packet", 0, _packet(1, 0), 0.0)]
    if first > 1:
        steps.append(("packet", 0, _packet(1, 4), 0.0))
    steps.append(("packet", 1, bad, 0.0))
    run_both(ArbiterConfig(channel=CHANNEL), steps)
    arbiter = ChannelArbiter(ArbiterConfig(channel=CHANNEL), lines=2)
    for _kind, line, packet, now in steps:
        arbiter.on_packet(line, packet, now=now)
    assert arbiter.stats().garbage_reasons == {"length": 1}


def test_line_holes_clear_only_when_a_line_carries_the_msg_seq_in_a_packet_believed_and_well_formed() -> None:
    arbiter = ChannelArbiter(ArbiterConfig(channel=CHANNEL), lines=2)
    steps: list[Step] = [("packet", 0, _packet(1, 10), 0.0), ("packet", 0, _packet(21, 5), 0.0)]
    replay = _packet(11, 10, line=2, flags=FLAG_RETRANSMISSION)  # both lines lost 11..20: a journal has them
    steps.append(("packet", 2, replay, 0.01))
    for _kind, line, packet, now in steps:
        arbiter.on_packet(line, packet, now=now)
    assert arbiter.stats().line_holes == 10
    body = _packet(11, 10, line=1)
    mangled = body[:HEADER_SIZE] + b"\x00\x04" + body[HEADER_SIZE + 2 :]  # a block too short: garbage
    cut_short = _packet(11, 10, line=1)[:-1]  # one byte short: its last block runs past the end
    for packet in (mangled, cut_short):
        arbiter.on_packet(1, packet, now=0.02)
        assert arbiter.stats().line_holes == 10  # a malformed packet carries nothing
    arbiter.on_packet(1, _packet(11, 5, line=1), now=0.03)  # the fast path: copies below the delivery point
    assert arbiter.stats().line_holes == 5
    # The journal's packet was all first copies: the line's copy of it (here with the end-of-session
    # flag, so it takes the general path) is a known copy, and carries 16..20 too.
    known = replay[:3] + bytes([FLAG_END_OF_SESSION]) + replay[4:]
    arbiter.on_packet(1, known, now=0.04)
    stats = arbiter.stats()
    assert stats.line_holes == 0 and stats.duplicates == 5 + 10 and stats.garbage == 2
    model = Model(ArbiterConfig(channel=CHANNEL), lines=2)
    for line, packet, now in [
        *((s[1], s[2], s[3]) for s in steps),
        (1, mangled, 0.02),
        (1, cut_short, 0.02),
    ]:
        model.on_packet(line, packet, now)
    model.on_packet(1, _packet(11, 5, line=1), 0.03)
    model.on_packet(1, known, 0.04)
    assert model.stats() == stats
