"""Status events without sockets: liveness, holes missing, entitlement diffs, callbacks, the collector."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from feedha.admin_client import Line, Route
from feedha.client import (
    ArbiterConfig,
    ChannelArbiter,
    Delivery,
    EntitlementChanged,
    GapLost,
    Resumed,
    RetransmissionNeeded,
    Stale,
    StatusEvent,
    SubscriberConfig,
    TermChanged,
)
from feedha.client._feed_core import FeedClientStats, FeedCore, _SymbolFilter
from feedha.client.metrics import FeedClientCollector
from feedha.client.status import ChannelLiveness
from tests.unit.client_lib.test_arbiter import CHANNEL, packet


def test_liveness_goes_stale_once_and_resumes_with_the_silence():
    live = ChannelLiveness(3, "EQ", stale_after=1.0, now=10.0)
    assert live.next_deadline() == 11.0
    assert live.on_packet(now=10.5) == [] and live.on_timer(now=11.4) == []
    (stale,) = live.on_timer(now=11.6)
    assert stale == Stale(3, pytest.approx(1.1)) and stale.channel_name == "EQ"
    assert live.on_timer(now=20.0) == [] and live.next_deadline() is None  # reported once
    (resumed,) = live.on_packet(now=21.5)
    assert isinstance(resumed, Resumed) and resumed.silent_s == pytest.approx(11.0)
    assert live.on_packet(now=21.6) == [] and live.next_deadline() == pytest.approx(22.6)
    assert "stale=False" in repr(live)


def test_status_events_carry_the_channel_name_but_compare_without_it():
    arbiter = ChannelArbiter(
        ArbiterConfig(channel=CHANNEL, name="EQ-A-M", fill_timeout=0.1, loss_timeout=0.2)
    )
    arbiter.on_packet(0, packet(1), now=0.0)
    arbiter.on_packet(0, packet(5), now=0.0)
    assert arbiter.missing(1, 10) == 3 and arbiter.missing(2, 2) == 1 and arbiter.missing(5, 9) == 0
    (request,) = arbiter.on_timer(now=0.15)
    assert request == RetransmissionNeeded(CHANNEL, 2, 4) and request.channel_name == "EQ-A-M"
    events = arbiter.on_timer(now=0.25)
    assert isinstance(events[0], GapLost) and events[0].channel_name == "EQ-A-M"
    assert isinstance(events[0], StatusEvent) and arbiter.missing(1, 10) == 0


def _route(channel: str, number: int, symbols: tuple[str, ...]) -> Route:
    line = Line(
        adapter_id=f"{channel}.1",
        line_endpoint=f"tcp://127.0.0.1:{6000 + number}",
        replay_endpoint="",
        role="active",
        term=1,
        is_up=True,
    )
    return Route(
        feed="EQUITIES",
        channel_name=channel,
        channel_number=number,
        source_stream="A-M",
        message_model="feedha.v1.MarketUpdate",
        lines=(line,),
        symbols=symbols,
        delayed=False,
    )


@dataclass
class _FakeSubscriber:
    joined: list[str] = field(default_factory=list)
    closed: bool = False

    def join(self, channel):
        self.joined.append(channel.name)
        return len(channel.endpoints)

    def close(self):
        self.closed = True


def test_entitlement_changes_are_the_difference_between_route_sets():
    core = FeedCore(SubscriberConfig(), ("", ""))
    made: list[_FakeSubscriber] = []

    def make(spec):
        made.append(_FakeSubscriber([spec.name]))
        return made[-1]

    sub, events = core.apply_routes("subscribed", [_route("EQ-A-M", 1, ("A*", "B*"))], None, make)
    assert events == [] and sub is made[0] and core.lines == 1  # the first set is the baseline
    routes = [_route("EQ-A-M", 1, ("A*",)), _route("EQ-N-Z", 2, ("N*",))]
    sub, events = core.apply_routes("policy", routes, sub, make)
    assert events == [
        EntitlementChanged(1, ("A*",), (), ("B*",)),
        EntitlementChanged(2, ("N*",), ("N*",), ()),
    ]
    assert [e.channel_name for e in events] == ["EQ-A-M", "EQ-N-Z"] and sub.joined == [
        "EQ-A-M",
        "EQ-A-M",
        "EQ-N-Z",
    ]
    _sub, events = core.apply_routes("denied", [], sub, make)
    assert {(e.channel_name, e.removed, e.symbols) for e in events} == {
        ("EQ-A-M", ("A*",), ()),
        ("EQ-N-Z", ("N*",), ()),
    }
    assert core.apply_routes("cancelled", [], sub, make)[1] == [] and sub.closed
    assert core.apply_routes("subscribed", [_route("EQ-A-M", 1, ("C*",))], None, make)[1] == []


def test_callbacks_get_status_events_in_order_by_kind_and_survive_a_raising_one(caplog):
    core = FeedCore(SubscriberConfig(), ("", ""))
    everything, terms = [], []
    core.add_callback(everything.append, ())
    remove = core.add_callback(terms.append, (TermChanged,))

    def broken(event):
        raise RuntimeError("application bug")

    core.add_callback(broken, (Stale,))
    events = [TermChanged(1, 1, 2, 0), Stale(1, 2.0), GapLost(1, 5, 6)]
    with caplog.at_level(logging.ERROR):
        assert core.select(events, status=False) == []  # deliveries only: status events only to callbacks
    assert everything == events and terms == [events[0]] and "application bug" in caplog.text
    remove()
    assert core.select(events, status=True) == events
    assert terms == [events[0]] and core.status_counts == {"TermChanged": 2, "Stale": 2, "GapLost": 2}
    with pytest.raises(TypeError):
        core.add_callback(print, (int,))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        core.add_callback("not callable", ())  # type: ignore[arg-type]


def test_the_collector_reports_counters_and_delivery_latency():
    arbiter = ChannelArbiter(ArbiterConfig(channel=CHANNEL, name="EQ"), lines=1)
    deliveries = [e for e in arbiter.on_packet(0, packet(1, 3), now=0.0) if isinstance(e, Delivery)]

    class _Client:
        def __init__(self):
            self._core = FeedCore(SubscriberConfig(), ("", ""))
            self._core.filters = {(CHANNEL, ""): _SymbolFilter(["*"])}

        def stats(self):
            core = self._core
            return FeedClientStats(
                subscription_id="s",
                symbols=("*",),
                delivered=core.delivered,
                filtered=core.filtered,
                undecodable=0,
                route_updates=1,
                watch_connections=1,
                resubscriptions=0,
                lines=1,
                replay_requests=0,
                last_admin_error="",
                channels={"EQ": arbiter.stats()},
                status_events=dict(core.status_counts),
            )

    client = _Client()
    registry = CollectorRegistry()
    collector = FeedClientCollector(client, registry=registry)  # type: ignore[arg-type]
    assert len(client._core.select([*deliveries, TermChanged(CHANNEL, 1, 2, 0)], status=True)) == 4
    text = generate_latest(registry).decode()
    assert "feedha_client_handed_total 3.0" in text
    assert 'feedha_client_delivered_total{channel="EQ"} 3.0' in text
    assert 'feedha_client_status_events_total{kind="TermChanged"} 1.0' in text
    assert "feedha_client_delivery_latency_seconds_count 3.0" in text
    assert "count=3" in repr(collector)
