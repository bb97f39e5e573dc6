"""The data plane enforces what the admin server decides: real processes, real CURVE, real gRPC.

``feedha up`` runs a secure cluster (one channel, three adapters); tests try
it as an outsider would (plain sockets, no keys), as an entitled subscriber,
and as one whose access is taken away. The sync bus is tried with a forged
peer, with and without the group key.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from feedha.admin_client import AdminClient
from feedha.client import ChannelSpec, Subscriber, SubscriberConfig
from feedha.client.events import Delivery
from feedha.proto.replay import ReplayRequest, encode_request
from tests.integration.groups import running_group
from tests.integration.up import feedha_up

CHANNEL = "EQ-A-Z"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with feedha_up(tmp_path_factory.mktemp("up"), rate=2000, start_s=90) as described:
        yield described


def _feedha_subscribe(cluster: dict[str, Any], user: str, *, count: int) -> subprocess.CompletedProcess[str]:
    """``feedha subscribe --key-file USER --channel CHANNEL --count N --json``, as a user would run it."""
    return subprocess.run(
        [sys.executable, "-m", "feedha", "subscribe", "--key-file", cluster["users"][user]]
        + ["--channel", CHANNEL, "--count", str(count), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _user(cluster: dict[str, Any], name: str) -> dict[str, str]:
    user: dict[str, str] = json.loads(Path(cluster["users"][name]).read_text())
    return user


def test_key_files_are_private_and_outsiders_get_nothing_while_a_subscriber_gets_everything(
    cluster: dict[str, Any],
) -> None:
    for path in cluster["users"].values():
        assert Path(path).stat().st_mode & 0o077 == 0
    (channel,) = cluster["channels"]
    ctx = zmq.Context.instance()
    outsiders = []
    for line in channel["lines"]:
        sock = ctx.socket(zmq.SUB)
        sock.linger = 0
        sock.subscribe(b"")
        sock.connect(line)
        outsiders.append(sock)
    for replay in channel["replay"]:
        sock = ctx.socket(zmq.DEALER)
        sock.linger = 0
        # A DEALER's send blocks while it has no connection to queue on. Once in CI this send
        # blocked until the test's timeout (not reproduced alone: a peer the service refuses
        # keeps its queue and reconnects); an outsider's request must not wait for that.
        sock.sndtimeo = 1000
        outsiders.append(sock)
        sock.connect(replay)
        try:
            sock.send_multipart(
                [b"", encode_request(ReplayRequest(channel=1, request_id=1, first_seq=1, last_seq=10))]
            )
        except zmq.Again:
            pass  # refused before the request went anywhere: the outsider got nothing
    try:
        out = _feedha_subscribe(cluster, "subscriber", count=1000)
        got = sum(1 for sock in outsiders if sock.poll(500))
    finally:
        for sock in outsiders:
            sock.close(linger=0)
    summary = json.loads(out.stdout.splitlines()[-1])
    assert out.returncode == 0 and summary["delivered"] == 1000 and summary["lost"] == 0
    assert got == 0  # not one packet on any line, not one reply from any replay service


def _subscribe(cluster: dict[str, Any], keys: tuple[bytes, bytes]) -> tuple[AdminClient, str, ChannelSpec]:
    user = _user(cluster, "subscriber")

    async def go() -> tuple[AdminClient, str, ChannelSpec]:
        admin = AdminClient(cluster["admin"], user["key_id"], user["secret"])
        await admin.__aenter__()
        subscription = await admin.subscribe(["*"], curve_public_key=keys[0].decode())
        (route,) = subscription.routes
        spec = ChannelSpec(
            route.channel_name,
            route.channel_number,
            tuple(line.line_endpoint for line in route.lines),
            server_keys=tuple(line.curve_server_key for line in route.lines),
        )
        return admin, subscription.subscription_id, spec

    return _LOOP.run_until_complete(go())


_LOOP = asyncio.new_event_loop()


def _silence_after(subscriber: Subscriber, *, within: float) -> float:
    """Seconds until no packet arrives any more on any line (a quiet half second), or within."""
    start = time.monotonic()
    last_packet = start
    while time.monotonic() - start < within:
        if subscriber.poll(0.05):
            last_packet = time.monotonic()
        elif time.monotonic() - last_packet >= 0.5:
            return last_packet - start
    return within


def _rotate_key(cluster: dict[str, Any], user: str) -> None:
    """``feedha admin-server rotate-key`` on the user's key; its key file gets the new secret."""
    path = Path(cluster["users"][user])
    key = json.loads(path.read_text())
    config = Path(cluster["dir"]) / "admin-server.yaml"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "feedha",
            "admin-server",
            "rotate-key",
            key["key_id"],
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    key["secret"] = next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("secret: "))
    path.write_text(json.dumps(key))


@pytest.mark.parametrize("how", ["cancel", "rotate", "policy"])  # policy last: it rewrites the file
def test_a_revoked_subscriber_is_cut_off_within_two_seconds(cluster: dict[str, Any], how: str) -> None:
    keys = zmq.curve_keypair()
    admin, subscription_id, spec = _subscribe(cluster, keys)
    config = SubscriberConfig(curve_public=keys[0].decode(), curve_secret=keys[1].decode())
    policy = Path(cluster["dir"]) / "policy.yaml"
    original = policy.read_text()
    try:
        with Subscriber([spec], config) as subscriber:
            deadline = time.monotonic() + 20
            while not any(isinstance(e, Delivery) for e in subscriber.poll(0.2)):
                assert time.monotonic() < deadline, "the granted subscriber got nothing"
            if how == "cancel":
                _LOOP.run_until_complete(admin.cancel(subscription_id))
            elif how == "rotate":  # the API key behind the subscriber's token is replaced
                _rotate_key(cluster, "subscriber")
            else:  # the policy no longer grants the subscriber's group anything
                policy.write_text(
                    original.replace(
                        'symbols: ["*"]\n    mode: realtime', 'symbols: ["ZZZZ"]\n    mode: realtime'
                    )
                )
                os.utime(policy)
            cut_after = _silence_after(subscriber, within=8.0)
    finally:
        policy.write_text(original)
        _LOOP.run_until_complete(admin.close())
    budget = 2.0 + 0.25 if how == "policy" else 2.0  # + the admin server's policy poll interval
    assert cut_after <= budget, f"still receiving {cut_after:.2f} s after the revocation"


@pytest.mark.slow  # 13 s: in CI's slow stage; the default keeps test_hostile_input's forged packets
@pytest.mark.parametrize("secured", [False, True])
def test_a_forged_sync_bus_peer_changes_nothing_with_the_group_key(tmp_path: Path, secured: bool) -> None:
    from feedha.adapter.core.sync_types import Role
    from feedha.adapter.core.syncbus import Sender, StreamState, encode_sync
    from feedha.adapter.zap import write_keys

    key = tmp_path / "sync.key"
    group_public = write_keys(key).public
    extra = ["--sync-key", str(key), "--insecure"] if secured else []  # the sync key alone, on purpose
    with running_group(channel=CHANNEL, channel_number=1, size=3, rate=1000, seconds=20) as group:
        for number in (1, 2, 3):
            group.start_adapter(number, active=number == 1, extra=extra)
        group.start_source()
        group.wait_status(2, lambda s: s["status"] == "in_sync", 20)
        group.adapters[3].kill()  # its sync endpoint is free: a forger takes it
        rogue = zmq.Context.instance().socket(zmq.PUB)
        rogue.linger = 0
        rogue.bind(group.plan.adapter(3).sync)
        reader = zmq.Context.instance().socket(zmq.SUB)  # and another one listens in, with a key of its own
        reader.linger = 0
        if secured:
            reader.curve_publickey, reader.curve_secretkey = zmq.curve_keypair()
            reader.curve_serverkey = group_public
        reader.subscribe(b"")
        reader.connect(group.plan.adapter(1).sync)
        try:
            forged = encode_sync(
                StreamState(Sender(3, 99, Role.ACTIVE, time.time_ns()), 1, 1, 1, 0, 0, 0), channel=1
            )
            # Secured: three seconds of forgery change nothing. The control (no key): forge until
            # both adapters took the forged term; their subscribers reconnect to the freed endpoint
            # with a backoff, so how soon depends on the machine, not on the rule. CI's run once
            # read both at term 100: they had taken 99 and elected again after it.
            deadline = time.monotonic() + (3 if secured else 30)
            taken = False
            while time.monotonic() < deadline and not taken:
                for _ in range(25):
                    rogue.send(forged)
                    time.sleep(0.01)  # a forger's pace: a hundred forged heartbeats a second
                taken = not secured and all(group.status(n)["term"] >= 99 for n in (1, 2))
            heard = reader.poll(1000)
            statuses = [group.status(n) for n in (1, 2)]
        finally:
            rogue.close(linger=0)
            reader.close(linger=0)
    if secured:
        assert [s["term"] for s in statuses] == [1, 1] and statuses[0]["role"] == "active"
        assert not heard and statuses[0]["access"]["refused"]["sync"] >= 1
    else:  # the control: without the key, the forgery works (the reason for the key)
        # Both took the forged term 99; once the forger goes quiet they may elect again (100).
        assert all(s["term"] >= 99 for s in statuses) and heard, statuses


def test_a_delayed_only_user_is_told_there_is_no_delayed_stream_yet(cluster: dict[str, Any]) -> None:
    out = _feedha_subscribe(cluster, "delayed", count=5)
    assert out.returncode == 1 and out.stdout == ""
    assert "delayed-only" in out.stderr and "destroyed but it is pending" not in out.stderr
