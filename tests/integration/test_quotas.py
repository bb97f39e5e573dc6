"""The admin server's quotas over real gRPC: each refusal is RESOURCE_EXHAUSTED and names its limit.

One in-process server per test (port 0, an injected clock), small limits so
the tests reach them quickly: subscriptions and CURVE keys per user, watch
streams per user, logins hashing at once, subscriptions that end with their
login, the audit log's retention, and the health listener under idle
connections.
"""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import zmq

from feedha.admin_server import tokens
from feedha.admin_server.config import ServerConfig
from feedha.admin_server.limits import Limits
from feedha.admin_server.server import AdminServer
from feedha.proto import admin_pb2, admin_pb2_grpc
from tests.integration.test_admin_server import CHANNELS, POLICY, Clock, add_user, eventually

LIMITS = Limits(
    subscriptions_per_user=5,
    curve_keys_per_user=2,
    watches_per_user=3,
    login_hashes=1,
    login_queue=2,
    subscription_grace_s=60.0,
    audit_max_rows=50,
    audit_max_age_s=3600.0,
)


class Env:
    def __init__(self, server: AdminServer, clock: Clock, keys: dict[str, tuple[str, str]]) -> None:
        self.server, self.clock, self.keys = server, clock, keys
        self.target = f"127.0.0.1:{server.port}"

    @property
    def hub(self) -> Any:
        assert self.server.hub is not None
        return self.server.hub


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    db, policy = tmp_path / "admin.sqlite", tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    keys = {
        "alice": add_user(db, "alice", groups=("traders",)),
        "ops": add_user(db, "ops", groups=("operators",)),
    }
    clock = Clock()
    config = ServerConfig(
        port=0, database=db, policy=policy, channels=CHANNELS, limits=LIMITS, health_address=("127.0.0.1", 0)
    )
    server = AdminServer(config, clock=clock)
    await server.start()
    try:
        yield Env(server, clock, keys)
    finally:
        await server.stop(grace=None)


async def _token(channel: grpc.aio.Channel, key: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    reply = await admin_pb2_grpc.AdminAuthStub(channel).Login(
        admin_pb2.LoginRequest(key_id=key[0], secret=key[1])
    )
    return (("authorization", f"Bearer {reply.token}"),)


def _limit(exc: grpc.aio.AioRpcError) -> tuple[str, str]:
    from feedha.admin_client.errors import status_details

    found = status_details(exc)
    return found.reason, found.metadata.get("limit", "")


async def test_subscriptions_and_curve_keys_per_user_are_capped_and_the_limit_named(env: Env) -> None:
    curve = [zmq.curve_keypair()[0].decode() for _ in range(3)]
    async with grpc.aio.insecure_channel(env.target) as channel:
        md = await _token(channel, env.keys["alice"])
        broker = admin_pb2_grpc.StreamBrokerStub(channel)

        async def subscribe(key: str = "") -> admin_pb2.SubscribeResponse:
            return await broker.Subscribe(
                admin_pb2.SubscribeRequest(symbols=["AAPL"], curve_public_key=key), metadata=md
            )

        made = [await subscribe(curve[0]), await subscribe(curve[1])]
        with pytest.raises(grpc.aio.AioRpcError) as third_key:
            await subscribe(curve[2])  # a third key: made-up keys cannot flood the adapters' tables
        assert third_key.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert _limit(third_key.value) == ("TOO_MANY_CURVE_KEYS", "2")
        made += [await subscribe(curve[0]), await subscribe(), await subscribe()]  # a known key, or none
        with pytest.raises(grpc.aio.AioRpcError) as sixth:
            await subscribe()
        assert sixth.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert _limit(sixth.value) == ("TOO_MANY_SUBSCRIPTIONS", "5")
        assert "(limit 5)" in (sixth.value.details() or "")
        await broker.Cancel(admin_pb2.CancelRequest(subscription_id=made[0].subscription_id), metadata=md)
        await subscribe()  # room again
    assert env.hub.counters.refused == {"TOO_MANY_CURVE_KEYS": 1, "TOO_MANY_SUBSCRIPTIONS": 1}


async def test_watch_streams_per_user_are_capped(env: Env) -> None:
    async with grpc.aio.insecure_channel(env.target) as channel:
        md = await _token(channel, env.keys["alice"])
        broker = admin_pb2_grpc.StreamBrokerStub(channel)
        sub = await broker.Subscribe(admin_pb2.SubscribeRequest(symbols=["AAPL"]), metadata=md)
        request = admin_pb2.WatchRoutesRequest(subscription_id=sub.subscription_id)
        watches = [broker.WatchRoutes(request, metadata=md) for _ in range(LIMITS.watches_per_user)]
        for watch in watches:
            await watch.read()  # each one open and serving
        extra = broker.WatchRoutes(request, metadata=md)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await extra.read()
        assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert _limit(refused.value) == ("TOO_MANY_WATCHES", "3")
        watches[0].cancel()
        await eventually(lambda: env.hub.events.listeners < LIMITS.watches_per_user, what="a watch closed")
        again = broker.WatchRoutes(request, metadata=md)
        assert (await again.read()).subscription_id == sub.subscription_id  # room again
        for watch in (*watches, again):
            watch.cancel()


async def test_logins_hash_one_at_a_time_queue_a_few_and_refuse_the_rest_at_once(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub = env.hub
    release = threading.Event()
    real_hash = tokens.hash_secret

    def slow_hash(secret: str, **kwargs: Any) -> str:  # a hash that lasts until the test lets it go
        release.wait(10)
        return real_hash(secret, **kwargs)

    monkeypatch.setattr(tokens, "hash_secret", slow_hash)
    async with grpc.aio.insecure_channel(env.target) as channel:
        auth = admin_pb2_grpc.AdminAuthStub(channel)
        calls = [
            asyncio.ensure_future(auth.Login(admin_pb2.LoginRequest(key_id=f"fk_nobody{i}", secret="x")))
            for i in range(6)
        ]
        await eventually(
            lambda: hub.identity.logins.gate.waiting == LIMITS.login_queue, what="the queue full"
        )
        await eventually(lambda: sum(call.done() for call in calls) >= 3, what="the rest refused")
        release.set()
        results = await asyncio.gather(*calls, return_exceptions=True)
    codes = [(r.code(), _limit(r)) for r in results if isinstance(r, grpc.aio.AioRpcError)]
    busy = [code for code in codes if code[1][0] == "LOGINS_BUSY"]
    assert len(busy) == 6 - LIMITS.login_hashes - LIMITS.login_queue  # refused at once, the limit named
    assert {code[0] for code in busy} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
    assert {code[1][1] for code in busy} == {str(LIMITS.login_hashes + LIMITS.login_queue)}
    assert codes.count((grpc.StatusCode.UNAUTHENTICATED, ("CREDENTIALS_INVALID", ""))) == 3  # checked in turn
    assert hub.counters.logins["busy"] == 3 and hub.identity.logins.gate.refused == 3


async def test_concurrent_wrong_secrets_for_one_key_cost_three_hashes_and_its_neighbour_logs_in(
    env: Env,
) -> None:
    hub = env.hub
    async with grpc.aio.insecure_channel(env.target) as channel:
        auth = admin_pb2_grpc.AdminAuthStub(channel)
        wrong = admin_pb2.LoginRequest(key_id=env.keys["alice"][0], secret="wrong")
        results = await asyncio.gather(*(auth.Login(wrong) for _ in range(64)), return_exceptions=True)
        codes = [r.code() for r in results if isinstance(r, grpc.aio.AioRpcError)]
        # Checked one at a time: three hashes, then the key is locked out (one more per lapse of its
        # backoff, 0.5 s then doubling, should the 64 calls take that long on a loaded machine).
        hashed = codes.count(grpc.StatusCode.UNAUTHENTICATED)
        assert 3 <= hashed <= 6 and codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED) == 64 - hashed
        began = time.monotonic()
        await auth.Login(admin_pb2.LoginRequest(key_id=env.keys["ops"][0], secret=env.keys["ops"][1]))
        assert time.monotonic() - began < 1.0  # the same address, a key in good standing: at once
    assert hub.counters.logins["failed"] == hashed


async def test_subscriptions_end_with_their_login_and_the_audit_log_is_pruned(env: Env) -> None:
    hub = env.hub
    async with grpc.aio.insecure_channel(env.target) as channel:
        md = await _token(channel, env.keys["alice"])
        broker = admin_pb2_grpc.StreamBrokerStub(channel)
        sub = await broker.Subscribe(admin_pb2.SubscribeRequest(symbols=["AAPL"]), metadata=md)
    for i in range(200):
        hub.store.audit(user="x", action="test", target=str(i), detail="y" * 10_000, now=env.clock())
    hub.subscriptions.tidy()
    assert [s.subscription_id for s in hub.store.subscriptions()] == [sub.subscription_id]  # its token holds
    log = hub.store.audit_log(limit=1000)
    assert len(log) == LIMITS.audit_max_rows and all(len(e.detail) <= 512 for e in log)
    env.clock.offset = 3600.0 + LIMITS.subscription_grace_s + 1  # the token expired, the grace passed
    hub.subscriptions.tidy()
    assert hub.store.subscriptions() == [] and hub.counters.expired_subscriptions == 1
    env.clock.offset += LIMITS.audit_max_age_s + 1
    hub.subscriptions.tidy()
    assert hub.store.audit_log(limit=1000) == []


async def test_the_health_listener_answers_behind_a_crowd_of_idle_connections(env: Env) -> None:
    health = env.server.health
    assert health is not None
    crowd = health.limits.max_connections + 50
    idle = [
        (await asyncio.open_connection("127.0.0.1", health.port))[1] for _ in range(crowd)
    ]  # never a byte
    await asyncio.sleep(0.2)  # idle for longer than any real client takes to send its request
    try:
        url = f"http://127.0.0.1:{health.port}/healthz"

        def probe() -> bytes:
            with urllib.request.urlopen(url, timeout=2) as reply:
                body: bytes = reply.read()
                return body

        for _ in range(5):
            assert (await asyncio.get_running_loop().run_in_executor(None, probe)).startswith(b"ok")
        counters = health.counters  # past the cap each was evicted, refused or timed out: none held a probe
        assert (
            counters.evicted + counters.refused + counters.timeouts >= crowd - health.limits.max_connections
        )
    finally:
        for writer in idle:
            writer.close()


async def test_a_new_connection_takes_the_slot_of_the_oldest_idle_one_of_the_busiest_address() -> None:
    from feedha.transport.http import HttpLimits, HttpServer, Request, Response, text

    async def ok(_request: Request) -> Response:
        return text(200, "ok\n")

    server = HttpServer({"/healthz": ok}, limits=HttpLimits(max_connections=8, header_timeout_s=60.0))
    port = await server.start()
    idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(8)]
    try:
        await asyncio.sleep(0.2)  # older than IDLE_MIN_S: they may give their slots up
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 200") and server.counters.evicted == 1
        closed = [r for r, _w in idle if await _closed_by_peer(r)]
        assert len(closed) == 1  # exactly the one evicted
    finally:
        for _r, w in idle:
            w.close()
        await server.stop()


async def _closed_by_peer(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), 0.2) == b""
    except TimeoutError:
        return False
