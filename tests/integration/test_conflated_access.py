"""Conflated entitlements end to end: ``feedha up`` with conflated lines, real CURVE, real gRPC.

The ``conflated`` user of ``feedha up`` may read conflated data only: its
subscription is routed to the conflated lines, ``FeedClient`` delivers
``ConflatedDelivery`` values, and its key is refused on the real-time line,
the delayed line and the replay service. A real-time user may ask for the
conflated lines too (``FeedClient(mode="conflated")``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from feedha.admin_client import AdminClient
from feedha.client import ConflatedDelivery, FeedClient
from feedha.proto import wire
from tests.integration.up import feedha_up, user_key

CHANNEL = "EQ-A-Z"
WAIT = 30.0

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    extra = ("--conflate-interval", "0.2")
    with feedha_up(tmp_path_factory.mktemp("conflated-up"), rate=1000, extra=extra) as up:
        yield up


def _conflated_deliveries(client: FeedClient, count: int) -> list[ConflatedDelivery]:
    got: list[ConflatedDelivery] = []
    deadline = time.monotonic() + WAIT
    while len(got) < count and time.monotonic() < deadline:
        for delivery in client.poll(0.2):
            assert isinstance(delivery, ConflatedDelivery), delivery
            got.append(delivery)
    return got


def _assert_a_conflated_stream(got: list[ConflatedDelivery]) -> None:
    assert len(got) >= 100, f"only {len(got)} conflated deliveries"
    seqs = [d.msg_seq for d in got]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # conf_seq in order, no gap
    boundaries = [d.boundary_msg_seq for d in got]
    assert boundaries == sorted(boundaries) and len(set(boundaries)) >= 3
    for boundary in set(boundaries):  # one state per symbol per interval
        symbols = [d.update.symbol for d in got if d.boundary_msg_seq == boundary]
        assert len(symbols) == len(set(symbols)) and symbols == sorted(symbols)


@pytest.mark.slow  # 7 s: in CI's slow stage; the default keeps the conflated-only key's refusals
def test_a_conflated_only_user_gets_the_conflated_lines(up: dict[str, Any]) -> None:
    with FeedClient(up["admin"], *user_key(up, "conflated")) as client:
        subscription = client.subscribe(["*"])
        assert [(r.channel_name, r.conflated, r.delayed) for r in subscription.routes] == [
            (CHANNEL, True, False)
        ]
        conflated_lines = set(up["channels"][0]["conflated_lines"])
        endpoints = {line.line_endpoint for r in subscription.routes for line in r.lines}
        assert endpoints and endpoints <= conflated_lines
        assert all(not line.replay_endpoint for r in subscription.routes for line in r.lines)
        got = _conflated_deliveries(client, 300)
        stats = client.stats()
    _assert_a_conflated_stream(got)
    assert (
        list(stats.channels) == [f"{CHANNEL}/conflated"]
        and stats.channels[f"{CHANNEL}/conflated"].conflicts == 0
    )


def test_a_real_time_user_reads_the_conflated_lines_with_mode_conflated(up: dict[str, Any]) -> None:
    with FeedClient(up["admin"], *user_key(up, "subscriber"), mode="conflated") as client:
        subscription = client.subscribe(["*"])
        assert [r.conflated for r in subscription.routes] == [False]
        got = _conflated_deliveries(client, 300)
    _assert_a_conflated_stream(got)


def _server_keys(up: dict[str, Any]) -> dict[str, str]:
    channel, keys = up["channels"][0], {}
    for number in range(1, len(channel["lines"]) + 1):
        text = (Path(up["dir"]) / "keys" / f"{CHANNEL}.{number}.key.pub").read_text()
        key = text.split('public-key = "')[1].split('"')[0]
        for kind in ("lines", "delayed_lines", "conflated_lines", "replay"):
            keys[channel[kind][number - 1]] = key
    return keys


def _curve_sub(endpoint: str, keys: tuple[bytes, bytes], server_key: str) -> zmq.Socket[bytes]:
    sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.SUB)
    sock.linger = 0
    sock.curve_publickey, sock.curve_secretkey = keys
    sock.curve_serverkey = server_key.encode()
    sock.subscribe(b"")
    sock.connect(endpoint)
    return sock


def test_a_conflated_only_key_is_refused_on_every_other_line(up: dict[str, Any]) -> None:
    keys = zmq.curve_keypair()
    loop = asyncio.new_event_loop()
    admin = AdminClient(up["admin"], *user_key(up, "conflated"))
    loop.run_until_complete(admin.__aenter__())
    loop.run_until_complete(admin.subscribe(["*"], curve_public_key=keys[0].decode()))
    server_keys, channel = _server_keys(up), up["channels"][0]
    sockets: list[zmq.Socket[bytes]] = []
    try:
        conflated_line = channel["conflated_lines"][0]
        deadline = time.monotonic() + WAIT
        while True:  # the grant reaches the adapters a moment after the subscription: dial again
            sock = _curve_sub(conflated_line, keys, server_keys[conflated_line])
            sockets.append(sock)
            if sock.poll(1_500):
                break
            assert time.monotonic() < deadline, "the conflated line sent nothing to a conflated-only key"
        assert wire.decode_header(sock.recv_multipart()[1]).is_conflated
        others = [
            _curve_sub(endpoint, keys, server_keys[endpoint])
            for endpoint in (channel["lines"][0], channel["delayed_lines"][0])
        ]
        sockets += others
        for other in others:
            assert not other.poll(2_000), "a conflated-only key received packets of another line"
    finally:
        for sock in sockets:
            sock.close(linger=0)
        loop.run_until_complete(admin.close())
        loop.close()


def test_a_stalled_on_slow_client_comes_back_conflated_then_in_real_time(up: dict[str, Any]) -> None:
    from feedha.client import Conflated, Delivery, RealTime

    seen: list[Any] = []
    client = FeedClient(up["admin"], *user_key(up, "subscriber"), on_slow="conflate", slow_after_s=1.0)
    with client:
        client.subscribe(["*"])
        deadline = time.monotonic() + WAIT
        while sum(type(e) is Delivery for e in seen) < 200 and time.monotonic() < deadline:
            seen += client.poll_events(0.2)
        assert not any(isinstance(e, Conflated) for e in seen)  # a client that keeps up stays in real time
        stalled_at = len(seen)
        time.sleep(3.0)  # the stall under test: the client reads nothing, its lines queue up
        deadline = time.monotonic() + WAIT
        while not any(isinstance(e, RealTime) for e in seen) and time.monotonic() < deadline:
            seen += client.poll_events(0.2)
        after = len(seen)
        deadline = time.monotonic() + WAIT
        while sum(type(e) is Delivery for e in seen[after:]) < 200 and time.monotonic() < deadline:
            seen += client.poll_events(0.2)
        stats = client.stats()
    kinds = [type(e).__name__ for e in seen[stalled_at:]]
    assert "Conflated" in kinds and "RealTime" in kinds, kinds[:20]
    conflated_at, real_time_at = kinds.index("Conflated"), kinds.index("RealTime")
    assert conflated_at < kinds.index("ConflatedDelivery") < real_time_at
    resumed = next(e for e in seen if isinstance(e, RealTime))
    live = [e for e in seen[stalled_at + real_time_at :] if type(e) is Delivery]
    assert len(live) >= 200 and live[0].msg_seq == resumed.msg_seq  # the journal filled the seam
    assert [d.msg_seq for d in live] == list(range(live[0].msg_seq, live[0].msg_seq + len(live)))
    assert stats.status_events.get("Conflated") == 1 and stats.status_events.get("RealTime") == 1
