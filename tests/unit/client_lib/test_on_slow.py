"""on_slow="conflate": when a feed client leaves real time for the conflated lines, and when it comes back."""

from __future__ import annotations

import pytest

from feedha.adapter.core.conflated_output import ConflatedOutput, ref
from feedha.adapter.core.conflation import Boundary, Interval
from feedha.client import ArbiterConfig, ChannelArbiter, ConfigError, Conflated, ConflatedDelivery, RealTime
from feedha.client._slow import SlowWatch, slow_watch
from feedha.client.events import Delivery
from feedha.proto import market_pb2, wire

NOW = 1_000_000_000_000
CHANNELS = {1: "EQ-A-M", 2: "EQ-N-Z"}


def _delivery(channel: int, age_s: float) -> Delivery:
    packet = wire.encode_packet(channel=channel, adapter=1, term=1, first_seq=1, blocks=[(1, 1, b"")],
                                send_time_ns=NOW - round(age_s * 1e9))  # fmt: skip
    return Delivery(
        channel, 1, 1, 1, 0, 1, NOW - round(age_s * 1e9), packet, wire.HEADER_SIZE + 12, len(packet)
    )


def _interval(channel: int, boundary: int, age_s: float) -> list[ConflatedDelivery]:
    output = ConflatedOutput(channel=channel, adapter=1, max_packet_bytes=8192, heartbeat_s=1.0)
    update = market_pb2.MarketUpdate(symbol="A").SerializeToString()
    entries = (("A", ref(update)), ("B", ref(update)))
    at = Boundary(1, boundary, NOW - round(age_s * 1e9), 1)
    arbiter = ChannelArbiter(ArbiterConfig(channel=channel, conflated=True))
    events = []
    for packet in output.interval(Interval(at, entries), term=1, now=0.0):
        events += arbiter.on_packet(0, packet, now=0.0)
    return [e for e in events if isinstance(e, ConflatedDelivery)]


def test_a_client_behind_the_bound_conflates_and_comes_back_once_every_channel_is_current() -> None:
    watch = SlowWatch(2.0)
    assert watch.observe([_delivery(1, 0.5), _delivery(2, 1.9)], now_ns=NOW, channels=CHANNELS) is None
    switch = watch.observe([_delivery(1, 0.5), _delivery(2, 7.25)], now_ns=NOW, channels=CHANNELS)
    assert switch is not None and switch.conflate
    assert switch.events == (Conflated(2, 7.25, channel_name="EQ-N-Z"),)
    first, last = _interval(1, 500, 0.2)
    assert last.ends_interval and not first.ends_interval
    assert (
        watch.observe([*_interval(1, 500, 0.2)], now_ns=NOW, channels=CHANNELS) is None
    )  # channel 2 not yet
    assert (
        watch.observe([*_interval(2, 90, 1.5)], now_ns=NOW, channels=CHANNELS) is None
    )  # not fresh (> bound/2)
    back = watch.observe([*_interval(2, 95, 0.1)], now_ns=NOW, channels=CHANNELS)
    assert back is not None and not back.conflate and back.resume_at == {1: 501, 2: 96}
    assert back.events == (RealTime(1, 501, channel_name="EQ-A-M"), RealTime(2, 96, channel_name="EQ-N-Z"))
    assert watch.switches == 2 and not watch.conflated


def test_on_slow_is_checked() -> None:
    assert slow_watch(None, 5.0, mode="realtime") is None
    with pytest.raises(ConfigError, match="on_slow"):
        slow_watch("drop", 5.0, mode="realtime")
    with pytest.raises(ConfigError, match="realtime"):
        slow_watch("conflate", 5.0, mode="conflated")
    with pytest.raises(ConfigError, match="slow_after_s"):
        slow_watch("conflate", 0.0, mode="realtime")
