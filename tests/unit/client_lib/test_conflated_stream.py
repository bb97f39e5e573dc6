"""A channel's conflated stream in the client: arbitration by conf_seq, conflicts, routes to specs."""

from __future__ import annotations

import pytest

from feedha.adapter.core.conflated_output import ConflatedOutput, ref
from feedha.adapter.core.conflation import Boundary, Interval
from feedha.admin_client.session import Line, Route
from feedha.client import (
    ArbiterConfig,
    ChannelArbiter,
    ConfigError,
    ConflatedDelivery,
    Conflict,
    SubscriberConfig,
)
from feedha.client._feed_core import FeedCore, check_mode
from feedha.proto import market_pb2, wire

CHANNEL = 3


def _payload(symbol: str, volume: int) -> bytes:
    update = market_pb2.MarketUpdate(symbol=symbol)
    update.state.volume = volume
    return update.SerializeToString()


def _interval(
    k: int, boundary: int, first: int, volumes: dict[str, int], *, budget: int = 8192
) -> list[bytes]:
    output = ConflatedOutput(channel=CHANNEL, adapter=1, max_packet_bytes=budget, heartbeat_s=1.0)
    entries = tuple((s, ref(_payload(s, v))) for s, v in sorted(volumes.items()))
    return output.interval(Interval(Boundary(k, boundary, 5, first), entries), term=1, now=0.0)


def test_two_conflated_lines_deliver_each_conf_seq_once_in_order() -> None:
    arbiter = ChannelArbiter(ArbiterConfig(channel=CHANNEL, conflated=True), lines=2)
    first = _interval(1, 100, 1, {"A": 1, "B": 2, "C": 3}, budget=wire.HEADER_SIZE + 60)
    second = _interval(2, 180, 4, {"A": 7})
    assert len(first) > 1  # split over packets; only the last ends the interval
    assert [wire.decode_header(p).is_end_of_interval for p in first] == [False] * (len(first) - 1) + [True]
    events = []
    for packet in [*first[:1], *second, *first[1:]]:  # line 0 out of order ...
        events += arbiter.on_packet(0, packet, now=0.0)
    for packet in [*first, *second]:  # ... line 1 in order: all copies
        events += arbiter.on_packet(1, packet, now=0.0)
    deliveries = [e for e in events if isinstance(e, ConflatedDelivery)]
    assert [(d.msg_seq, d.boundary_msg_seq, d.update.symbol, d.update.state.volume) for d in deliveries] == [
        (1, 100, "A", 1),
        (2, 100, "B", 2),
        (3, 100, "C", 3),
        (4, 180, "A", 7),
    ]
    assert (
        deliveries[0].conflated and not deliveries[0].delayed and "ConflatedDelivery" in repr(deliveries[0])
    )
    stats = arbiter.stats()
    assert (stats.delivered, stats.duplicates, stats.conflicts, stats.lost) == (4, 4, 0, 0)


def test_a_copy_naming_another_boundary_is_a_conflict_and_other_streams_are_garbage() -> None:
    arbiter = ChannelArbiter(ArbiterConfig(channel=CHANNEL, conflated=True), lines=2)
    for packet in _interval(1, 100, 1, {"A": 1}):
        arbiter.on_packet(0, packet, now=0.0)
    events = []
    for packet in _interval(1, 101, 1, {"A": 1}):  # conf_seq 1 again, another boundary
        events += arbiter.on_packet(1, packet, now=0.0)
    assert [type(e) for e in events] == [Conflict]
    real_time = wire.encode_packet(channel=CHANNEL, adapter=1, term=1, first_seq=2, blocks=[(1, 5, b"")],
                                   send_time_ns=0)  # fmt: skip
    assert arbiter.on_packet(0, real_time, now=0.0) == []
    assert arbiter.stats().garbage_reasons == {"conflated": 1}
    with pytest.raises(ConfigError):
        ArbiterConfig(delayed=True, conflated=True)


def _route(*, conflated: bool, delayed: bool = False) -> Route:
    lines = tuple(
        Line(
            adapter_id=f"a{i}",
            line_endpoint=f"tcp://127.0.0.1:70{i}0",
            replay_endpoint="",
            role="active",
            term=1,
            is_up=True,
            conflated_line_endpoint=f"tcp://127.0.0.1:70{i}9",
        )  # fmt: skip
        for i in (1, 2)
    )
    return Route(
        feed="EQ",
        channel_name="EQ",
        channel_number=CHANNEL,
        source_stream="S",
        message_model="m",
        lines=lines,
        symbols=("A*",),
        delayed=delayed,
        conflated=conflated,
    )


def test_mode_conflated_joins_each_adapters_conflated_line() -> None:
    core = FeedCore(SubscriberConfig(), ("", ""))
    spec = core._spec(_route(conflated=False))
    assert spec is not None and not spec.conflated and spec.endpoints[0].endswith("7010")
    core.mode = check_mode("conflated")
    spec = core._spec(_route(conflated=False))
    assert spec is not None and spec.conflated and spec.key == "EQ/conflated"
    assert spec.endpoints == ("tcp://127.0.0.1:7019", "tcp://127.0.0.1:7029")
    delayed = core._spec(_route(conflated=False, delayed=True))  # a delayed-only channel stays delayed
    assert delayed is not None and delayed.delayed and not delayed.conflated
    with pytest.raises(ConfigError, match="mode"):
        check_mode("sampled")


def test_a_conflated_route_joins_its_lines_as_the_conflated_stream_in_either_mode() -> None:
    core = FeedCore(SubscriberConfig(), ("", ""))
    spec = core._spec(_route(conflated=True))
    assert spec is not None and spec.conflated and spec.endpoints[0].endswith("7010")
