"""The delayed stream and purges in a secure cluster: real processes, real CURVE, real gRPC.

``feedha up --delay 3`` runs one channel of three adapters, each serving a
delayed line from its journal, with an admin server. The tests subscribe as
the users a deployment has -- a delayed-only user, a mixed one, an operator --
and attack the feature as an outsider would: a delayed-only key on the
real-time line and asking the replay service for real time, purges from a
non-operator, of msg_seq 0, of a billion messages, of what was delivered, and
a flood of them.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import zmq

from feedha.admin_client import AdminClient
from feedha.admin_client.channel import login
from feedha.client import DelayedDelivery, Delivery, FeedClient, Purged
from feedha.proto import admin_pb2, admin_pb2_grpc, wire
from feedha.proto.replay import (
    KIND_DELAYED_RANGE,
    KIND_RANGE,
    ReplayRequest,
    ReplayStatus,
    decode_status,
    encode_request,
)
from tests.integration.up import feedctl, feedha_up, user_key
from tests.integration.waiting import wait_until

DELAY_S = 3.0
CHANNEL = "EQ-A-Z"
WAIT = 30.0

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with feedha_up(tmp_path_factory.mktemp("delayed-up"), rate=1000, extra=("--delay", f"{DELAY_S:g}")) as up:
        yield up


def _active_next_msg_seq(up: dict[str, Any]) -> int:
    adapters = json.loads(feedctl(up, "operator", "adapters", "--json").stdout)
    return max(int(a["msg_seq"]) for a in adapters if a["role"] == "active" and a["up"])


@pytest.mark.slow  # 11 s: in CI's slow stage; the default keeps the delayed-only key's test
def test_a_delayed_only_user_gets_the_delayed_stream_and_nothing_early(up: dict[str, Any]) -> None:
    with FeedClient(up["admin"], *user_key(up, "delayed")) as client:
        subscription = client.subscribe(["*"])
        assert [(r.channel_name, r.delayed) for r in subscription.routes] == [(CHANNEL, True)]
        delayed_lines = set(up["channels"][0]["delayed_lines"])
        assert {line.line_endpoint for r in subscription.routes for line in r.lines} <= delayed_lines
        got: list[tuple[int, int]] = []  # (msg_seq, arrival - event time, ns)
        deadline = time.monotonic() + WAIT
        while len(got) < 2000 and time.monotonic() < deadline:
            for delivery in client.poll(0.2):
                assert isinstance(delivery, DelayedDelivery) and delivery.delayed
                got.append((delivery.msg_seq, time.time_ns() - delivery.update.event_time_ns))
        stats = client.stats()
    assert len(got) >= 2000, f"only {len(got)} delayed deliveries"
    seqs = [seq for seq, _age in got]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # in order, no gap, no repeat
    early = [age for _seq, age in got if age < DELAY_S * 1e9]
    assert early == []  # nothing before its delay has passed
    assert list(stats.channels) == [f"{CHANNEL}/delayed"] and stats.channels[f"{CHANNEL}/delayed"].lost == 0


def test_a_mixed_user_gets_real_time_only_where_it_may_read_the_whole_channel(up: dict[str, Any]) -> None:
    # Real-time A-M, delayed the rest: EQ-A-Z's real-time line would show it N-Z in real
    # time, so both go on the delayed route (with two channels, A-M would be real time).
    with FeedClient(up["admin"], *user_key(up, "mixed")) as client:
        subscription = client.subscribe(["A*", "N*"])
        assert [(r.channel_name, r.delayed, r.symbols) for r in subscription.routes] == [
            (CHANNEL, True, ("A*", "N*"))
        ]
        kinds: dict[tuple[str, bool], int] = {}
        deadline = time.monotonic() + WAIT
        while not (kinds.get(("A", True)) and kinds.get(("N", True))) and time.monotonic() < deadline:
            for delivery in client.poll(0.2):
                key = (delivery.update.symbol[0], delivery.delayed)
                kinds[key] = kinds.get(key, 0) + 1
    assert set(kinds) == {("A", True), ("N", True)}, kinds  # never anything in real time


async def _delayed_subscription(up: dict[str, Any], keys: tuple[bytes, bytes]) -> AdminClient:
    admin = AdminClient(up["admin"], *user_key(up, "delayed"))
    await admin.__aenter__()
    await admin.subscribe(["*"], curve_public_key=keys[0].decode())
    return admin


def _curve_socket(kind: int, endpoint: str, keys: tuple[bytes, bytes], server_key: str) -> zmq.Socket[bytes]:
    sock: zmq.Socket[bytes] = zmq.Context.instance().socket(kind)
    sock.linger = 0
    sock.curve_publickey, sock.curve_secretkey = keys
    sock.curve_serverkey = server_key.encode()
    if kind == zmq.SUB:
        sock.subscribe(b"")
    sock.connect(endpoint)
    return sock


def _redial_until_a_packet(make: Callable[[], zmq.Socket[bytes]], what: str) -> zmq.Socket[bytes]:
    """A socket that received something. The grant reaches the adapters a moment after the
    subscription, and libzmq never retries a CURVE handshake the server refused: dial again."""
    deadline = time.monotonic() + WAIT
    while True:
        sock = make()
        if sock.poll(1_500):
            return sock
        sock.close(linger=0)
        assert time.monotonic() < deadline, what


def _server_key(up: dict[str, Any]) -> dict[str, str]:
    """Each adapter's CURVE public key, by its line, delayed line and replay endpoints."""
    channel = up["channels"][0]
    keys = {}
    for number, line in enumerate(channel["lines"], start=1):
        public = Path(up["dir"]) / "keys" / f"{CHANNEL}.{number}.key.pub"
        text = public.read_text()
        key = text.split('public-key = "')[1].split('"')[0]
        keys[line] = keys[channel["delayed_lines"][number - 1]] = keys[channel["replay"][number - 1]] = key
    return keys


def test_a_delayed_only_key_reaches_the_delayed_line_and_delayed_replays_only(up: dict[str, Any]) -> None:
    keys = zmq.curve_keypair()
    loop = asyncio.new_event_loop()
    admin = loop.run_until_complete(_delayed_subscription(up, keys))
    server_keys = _server_key(up)
    channel = up["channels"][0]
    sockets = []
    try:
        delayed_line = channel["delayed_lines"][0]
        delayed = _redial_until_a_packet(
            lambda: _curve_socket(zmq.SUB, delayed_line, keys, server_keys[delayed_line]),
            "the delayed line sent nothing to a delayed-only key",
        )
        sockets.append(delayed)
        # The adapter holds the key's grant now: the other two are checked against it.
        realtime = _curve_socket(zmq.SUB, channel["lines"][0], keys, server_keys[channel["lines"][0]])
        replay = _curve_socket(zmq.DEALER, channel["replay"][0], keys, server_keys[channel["replay"][0]])
        sockets += [realtime, replay]
        header = wire.decode_header(delayed.recv_multipart()[1])
        assert header.is_delayed
        assert not realtime.poll(2_000), "a delayed-only key received real-time packets"
        replies = {}
        for kind in (KIND_RANGE, KIND_DELAYED_RANGE):
            replay.send_multipart([b"", encode_request(ReplayRequest(1, kind, 1, 5, kind))])
            assert replay.poll(5_000)
            frames = replay.recv_multipart()
            replies[kind] = (decode_status(frames[1]), frames[2:])
        assert replies[KIND_RANGE][0].status is ReplayStatus.NOT_ENTITLED and replies[KIND_RANGE][1] == []
        status, packets = replies[KIND_DELAYED_RANGE]
        assert status.status is ReplayStatus.OK and all(wire.decode_header(p).is_delayed for p in packets)
    finally:
        for sock in sockets:
            sock.close(linger=0)
        loop.run_until_complete(admin.close())
        loop.close()


@pytest.mark.slow  # 9 s: in CI's slow stage; the default keeps the refused and bounded purges
def test_an_operator_purges_pending_messages_and_every_layer_honours_it(up: dict[str, Any]) -> None:
    with FeedClient(up["admin"], *user_key(up, "delayed")) as client:
        client.subscribe(["*"])
        client.poll(1.0)
        # The source may not be streaming yet: feedha up starts it after the adapters.
        wait_until(
            lambda: _active_next_msg_seq(up) > 250, WAIT, "the active to publish 250 messages", interval=0.2
        )
        first = _active_next_msg_seq(up) - 200  # published ~0.2-0.7 s ago: pending for ~2 s more
        done = feedctl(
            up,
            "operator",
            "--json",
            "purge",
            CHANNEL,
            str(first),
            "--to",
            str(first + 1),
            "--reason",
            "bad print",
        )
        assert done.returncode == 0, done.stderr
        reply = json.loads(done.stdout)
        assert (int(reply["first_msg_seq"]), int(reply["last_msg_seq"]), int(reply["count"])) == (
            first,
            first + 1,
            2,
        )
        assert len(reply["confirmed_adapter_ids"]) == 2 and reply["unconfirmed_adapter_ids"] == []
        purged: list[Purged] = []
        deadline = time.monotonic() + WAIT
        around: list[int] = []
        while len(purged) < 2 and time.monotonic() < deadline:
            for event in client.poll_events(0.2):
                if isinstance(event, Purged):
                    purged.append(event)
                elif isinstance(event, Delivery) and first - 3 <= event.msg_seq <= first + 4:
                    around.append(event.msg_seq)
    assert [(p.msg_seq, p.reason, p.purge_id, p.delayed) for p in purged] == [
        (first, "bad print", int(reply["purge_id"]), True),
        (first + 1, "bad print", int(reply["purge_id"]), True),
    ]
    assert first not in around and first + 1 not in around and first - 1 in around
    journals = sorted((Path(up["dir"]) / "journals").iterdir())
    assert len(journals) == 3
    for journal in journals:  # the purge record is in every adapter's journal
        dump = subprocess.run(
            [sys.executable, "-m", "feedha", "journal", "dump", str(journal), "--from", str(first - 1)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert f"-- purge {reply['purge_id']}: msg_seq {first}..{first + 1} by operator" in dump.stdout, (
            journal
        )
    late = feedctl(up, "operator", "purge", CHANNEL, "5", "--reason", "too late")
    assert late.returncode == 1 and "FAILED_PRECONDITION (ALREADY_DELIVERED)" in late.stderr
    assert "already delivered on the delayed line" in late.stderr


async def _attack(up: dict[str, Any]) -> dict[str, Any]:
    """Purges no operator should get through: each refused, with its reason."""
    found: dict[str, Any] = {}
    async with grpc.aio.insecure_channel(up["admin"]) as channel:
        operator = (await login(channel, *user_key(up, "operator"))).metadata
        trader = (await login(channel, *user_key(up, "subscriber"))).metadata
        stub = admin_pb2_grpc.AdminControlStub(channel)  # type: ignore[no-untyped-call]

        async def purge(metadata: Any, **fields: Any) -> grpc.StatusCode:
            fields.setdefault("channel_name", CHANNEL)
            request = admin_pb2.PurgeRequest(reason=fields.pop("reason", "x"), **fields)
            try:
                await stub.Purge(request, metadata=metadata, timeout=20)
            except grpc.aio.AioRpcError as exc:
                found.setdefault("details", []).append(exc.details())
                return exc.code()
            return grpc.StatusCode.OK

        found["non_operator"] = await purge(trader, first_msg_seq=10**6)
        found["zero"] = await purge(operator, first_msg_seq=0, last_msg_seq=5)
        found["billion"] = await purge(operator, first_msg_seq=1, last_msg_seq=10**9)
        found["no_reason"] = await purge(operator, first_msg_seq=5, reason="")
        found["unknown_channel"] = await purge(operator, first_msg_seq=5, channel_name="NOPE")
        pending = _active_next_msg_seq(up) - 100
        flood = [purge(operator, first_msg_seq=pending + i, reason="flood") for i in range(40)]
        found["flood"] = await asyncio.gather(*flood)
    return found


def test_purges_from_outsiders_or_out_of_bounds_or_in_a_flood_are_refused_bounded_and_counted(
    up: dict[str, Any],
) -> None:
    found = asyncio.run(_attack(up))
    assert found["non_operator"] is grpc.StatusCode.PERMISSION_DENIED
    assert found["zero"] is grpc.StatusCode.INVALID_ARGUMENT
    assert found["billion"] is grpc.StatusCode.FAILED_PRECONDITION
    assert any("runs past the last message published" in d for d in found["details"])
    assert found["no_reason"] is grpc.StatusCode.INVALID_ARGUMENT
    assert found["unknown_channel"] is grpc.StatusCode.NOT_FOUND
    flood = found["flood"]
    accepted = flood.count(grpc.StatusCode.OK)
    refused = flood.count(grpc.StatusCode.RESOURCE_EXHAUSTED)
    assert accepted >= 1 and refused >= 1 and accepted + refused == len(flood), flood
    metrics = urllib.request.urlopen(up["metrics"][0], timeout=10).read().decode()
    assert 'feedha_admin_denied_total{method="Purge"}' in metrics
    assert 'feedha_admin_purges_total{result="accepted"}' in metrics
    assert 'feedha_admin_purges_total{result="TOO_MANY' in metrics
    with sqlite3.connect(Path(up["dir"]) / "admin.sqlite") as db:  # every purge is audited
        rows = db.execute("SELECT user, detail FROM audit WHERE action = 'purge'").fetchall()
    assert any(user == "operator" and detail.startswith("refused") for user, detail in rows)
    assert any(user == "operator" and detail.startswith("purge ") for user, detail in rows)


@pytest.mark.slow  # 8 s: in CI's slow stage; the default keeps the delayed-only key's replays
def test_replay_by_time_through_the_feed_client_and_its_entitlements(up: dict[str, Any]) -> None:
    from feedha.client import ReplayFailed, SessionEnded

    with FeedClient(up["admin"], *user_key(up, "subscriber")) as client:
        client.subscribe(["*"])
        first = 0
        deadline = time.monotonic() + WAIT  # the journals hold at least the delay and 3 s more
        while time.monotonic() < deadline and (not first or time.time_ns() - first < (DELAY_S + 3) * 1e9):
            first = first or next((d.update.publish_time_ns for d in client.poll(0.2)), 0)
        now = time.time()
        window = (now - 2.0, now - 1.0)
        got = [e for e in client.replay(CHANNEL, *window) if isinstance(e, Delivery)]
    assert len(got) > 300  # 1,000 msg/s
    seqs = [d.msg_seq for d in got]
    assert seqs == sorted(set(seqs)) and all(d.update.symbol for d in got)
    assert all(window[0] * 1e9 <= d.send_time_ns < window[1] * 1e9 for d in got)  # stamped with publish times
    argv = [
        sys.executable,
        "-m",
        "feedha",
        "replay",
        CHANNEL,
        "--key-file",
        up["users"]["subscriber"],
        "--json",
    ]
    argv += ["--from", f"{window[0]:.9f}", "--to", f"{window[1]:.9f}", "--speed", "4"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    printed = [json.loads(line) for line in done.stdout.splitlines()]
    assert [p["msg_seq"] for p in printed if p["event"] == "Delivery"] == seqs  # the same window, paced
    assert printed[-1]["event"] == "Summary" and printed[-1]["delivered"] == len(seqs)
    with FeedClient(up["admin"], *user_key(up, "delayed")) as client:
        client.subscribe(["*"])
        old = (now - DELAY_S - 2.0, now - DELAY_S - 1.0)  # ended more than the delay ago: allowed
        events = list(client.replay(CHANNEL, *old))
        assert len([e for e in events if isinstance(e, Delivery)]) > 300
        assert not [e for e in events if isinstance(e, SessionEnded)]
        with pytest.raises(ReplayFailed, match="NOT_ENTITLED.*delayed data only") as refused:
            list(client.replay(CHANNEL, now - 1.0, time.time()))  # the last delay seconds
    assert refused.value.status == "NOT_ENTITLED"
