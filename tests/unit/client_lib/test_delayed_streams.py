"""The client's delayed streams: arbitration of delayed lines, tombstones as Purged events, filters."""

from __future__ import annotations

from feedha.admin_client import Line, Route
from feedha.client._feed_core import FeedCore
from feedha.client.arbiter import ChannelArbiter
from feedha.client.events import (
    ArbiterConfig,
    DelayedDelivery,
    Delivery,
    Purged,
    RetransmissionNeeded,
)
from feedha.client.subscriber import ChannelSpec, SubscriberConfig, normalize_channels
from feedha.proto import market_pb2
from feedha.proto.wire import FLAG_DELAYED, FLAG_RETRANSMISSION, TOMBSTONE_STREAM, encode_packet

CHANNEL = 7


def update(seq: int, symbol: str = "") -> bytes:
    return market_pb2.MarketUpdate(symbol=symbol or f"S{seq % 3}").SerializeToString()


def tombstone(symbol: str, purge_id: int = 1) -> bytes:
    return market_pb2.Tombstone(symbol=symbol, purge_id=purge_id, reason="busted").SerializeToString()


def packet(
    first: int, blocks: list[tuple[int, int, bytes]], *, flags: int = FLAG_DELAYED, term: int = 1
) -> bytes:
    return encode_packet(
        channel=CHANNEL, adapter=1, term=term, first_seq=first, blocks=blocks, send_time_ns=5, flags=flags
    )


def plain(first: int, count: int, *, flags: int = FLAG_DELAYED) -> bytes:
    return packet(first, [(1, 100 + s, update(s)) for s in range(first, first + count)], flags=flags)


def delayed_arbiter(**config: object) -> ChannelArbiter:
    return ChannelArbiter(ArbiterConfig(channel=CHANNEL, delayed=True, name="EQ", **config))  # type: ignore[arg-type]


def test_a_delayed_arbiter_takes_delayed_packets_only_and_delivers_delayed_deliveries() -> None:
    arbiter = delayed_arbiter()
    events = arbiter.on_packet(0, plain(1, 3), now=0.0)
    assert [type(e) for e in events] == [DelayedDelivery] * 3 and all(e.delayed for e in events)  # type: ignore[union-attr]
    assert arbiter.on_packet(1, plain(4, 1, flags=0), now=0.0) == []  # a real-time packet: garbage
    assert arbiter.stats().garbage_reasons == {"delayed": 1}
    live = ChannelArbiter(ArbiterConfig(channel=CHANNEL))
    assert live.on_packet(0, plain(1, 1), now=0.0) == [] and live.stats().garbage_reasons == {"delayed": 1}
    (delivery,) = live.on_packet(0, plain(1, 1, flags=0), now=0.0)
    assert type(delivery) is Delivery and not delivery.delayed


def test_tombstones_come_as_purged_events_in_their_msg_seq_s_place() -> None:
    arbiter = delayed_arbiter()
    first = packet(1, [(1, 101, update(1)), (TOMBSTONE_STREAM, 102, tombstone("IBM")), (1, 103, update(3))])
    events = arbiter.on_packet(0, first, now=0.0)
    assert [type(e).__name__ for e in events] == ["DelayedDelivery", "Purged", "DelayedDelivery"]
    purged = events[1]
    assert purged == Purged(CHANNEL, 2, "IBM", 1, "busted", delayed=True)
    assert purged.channel_name == "EQ"
    # the same packet from another line: duplicates, no second Purged
    assert arbiter.on_packet(1, first, now=0.0) == []
    # a copy with the message where the others have a tombstone: a conflict, the tombstone kept
    other = packet(2, [(1, 102, update(2))])
    (conflict,) = arbiter.on_packet(2, other, now=0.0)
    assert conflict.kept == (TOMBSTONE_STREAM, 102)  # type: ignore[attr-defined]
    stats = arbiter.stats()
    assert (stats.delivered, stats.purged, stats.conflicts) == (2, 1, 1)


def test_a_tombstone_filling_a_hole_from_a_retransmission_is_purged_too() -> None:
    arbiter = delayed_arbiter(fill_timeout=0.01, loss_timeout=1.0)
    arbiter.on_packet(0, plain(1, 1), now=0.0)
    assert arbiter.on_packet(0, plain(3, 1), now=0.0) == []  # 2 is missing: 3 waits
    (gap,) = arbiter.on_timer(now=0.02)
    assert isinstance(gap, RetransmissionNeeded) and gap.delayed and (gap.first_seq, gap.last_seq) == (2, 2)
    retransmitted = packet(
        2, [(TOMBSTONE_STREAM, 102, tombstone("MSFT"))], flags=FLAG_DELAYED | FLAG_RETRANSMISSION
    )
    events = arbiter.on_packet(9, retransmitted, now=0.03)
    assert [type(e).__name__ for e in events] == ["Purged", "DelayedDelivery"]


def test_a_garbled_tombstone_still_keeps_its_place() -> None:
    events = delayed_arbiter().on_packet(0, packet(1, [(TOMBSTONE_STREAM, 5, b"\xff\xff")]), now=0.0)
    assert events == [Purged(CHANNEL, 1, "", 0, "", delayed=True)]


def test_a_channel_s_two_streams_are_apart_in_a_subscriber() -> None:
    specs = normalize_channels(
        [ChannelSpec("EQ", CHANNEL, ("tcp://a:1",)), ChannelSpec("EQ", CHANNEL, ("tcp://a:2",), delayed=True)]
    )
    assert [spec.key for spec in specs] == ["EQ", "EQ/delayed"]


def route(symbols: tuple[str, ...], *, delayed: bool) -> Route:
    endpoint = "tcp://127.0.0.1:2" if delayed else "tcp://127.0.0.1:1"
    line = Line(
        adapter_id="EQ.1",
        line_endpoint=endpoint,
        replay_endpoint="tcp://127.0.0.1:3",
        role="active",
        term=1,
        is_up=True,
    )
    return Route(
        feed="F",
        channel_name="EQ",
        channel_number=CHANNEL,
        source_stream="A-Z",
        message_model="feedha.v1.MarketUpdate",
        lines=(line,),
        symbols=symbols,
        delayed=delayed,
    )


class Joins:
    def __init__(self, spec: ChannelSpec) -> None:
        self.specs = [spec]

    def join(self, spec: ChannelSpec) -> int:
        self.specs.append(spec)
        return len(spec.endpoints)

    def close(self) -> None:
        pass


def test_a_mixed_grant_gets_each_symbol_on_the_stream_it_is_entitled_to() -> None:
    core = FeedCore(SubscriberConfig(), ("", ""))
    joins, _events = core.apply_routes(
        "subscribed", [route(("AAPL",), delayed=False), route(("IBM",), delayed=True)], None, Joins
    )
    assert joins is not None
    assert [(s.endpoints, s.delayed, s.term) for s in joins.specs] == [
        (("tcp://127.0.0.1:1",), False, 1),  # each stream starts from the term its route carries
        (("tcp://127.0.0.1:2",), True, 1),
    ]
    live = ChannelArbiter(ArbiterConfig(channel=CHANNEL))
    late = delayed_arbiter()

    def deliver(arbiter: ChannelArbiter, symbol: str, flags: int) -> list[object]:
        return arbiter.on_packet(0, packet(1, [(1, 1, update(1, symbol))], flags=flags), now=0.0)

    out = core.select(
        deliver(live, "AAPL", 0) + deliver(ChannelArbiter(ArbiterConfig(channel=CHANNEL)), "IBM", 0),
        status=True,
    )
    assert [e.update.symbol for e in out] == ["AAPL"]  # type: ignore[union-attr]  # IBM: delayed only
    out = core.select(
        deliver(late, "IBM", FLAG_DELAYED) + deliver(delayed_arbiter(), "AAPL", FLAG_DELAYED), status=True
    )
    assert [(e.update.symbol, e.delayed) for e in out] == [("IBM", True)]  # type: ignore[union-attr]
    purges = [
        Purged(CHANNEL, 9, "IBM", 1, "r", delayed=True),
        Purged(CHANNEL, 10, "MSFT", 1, "r", delayed=True),
    ]
    assert core.select(purges, status=True) == purges[:1]  # a purge of a symbol not subscribed is filtered
    assert core.replay is not None
    core.close()
