"""Route watches over real gRPC (grpc.aio, port 0): a change re-plans only the watches it concerns,
and a watch that is behind re-plans once and gets the latest routes.

The re-plans are counted where they happen: every call of ``Hub.routes`` is recorded with the
symbols it planned (the watches of one subscription plan its symbols).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from feedha.admin_client.errors import status_details
from feedha.admin_server.config import ServerConfig
from feedha.admin_server.fanout import HubEvent
from feedha.admin_server.limits import Limits
from feedha.admin_server.server import AdminServer
from feedha.proto import admin_pb2, admin_pb2_grpc
from tests.integration.test_admin_server import CHANNELS, POLICY, add_user, eventually, login

WATCHES = 20


class Site:
    def __init__(self, server: AdminServer, keys: dict[str, tuple[str, str]]) -> None:
        self.server, self.keys = server, keys
        self.target = f"127.0.0.1:{server.port}"
        self.planned: list[tuple[str, ...]] = []  # the symbols of every Hub.routes call, in order

    @property
    def hub(self) -> Any:
        assert self.server.hub is not None
        return self.server.hub


@pytest.fixture
async def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Site]:
    db, policy = tmp_path / "admin.sqlite", tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    keys = {name: add_user(db, name, groups=("traders",)) for name in ("alice", "bob")}
    limits = Limits(request_burst=1000)  # the burst test modifies 201 times at once
    server = AdminServer(ServerConfig(port=0, database=db, policy=policy, channels=CHANNELS, limits=limits))
    await server.start()
    site = Site(server, keys)
    real = site.hub.subscriptions.routes

    def counted(principal: Any, symbols: Any) -> Any:
        site.planned.append(tuple(symbols))
        return real(principal, symbols)

    monkeypatch.setattr(site.hub.subscriptions, "routes", counted)
    try:
        yield site
    finally:
        await server.stop(grace=None)


async def _reader(call: Any, got: list[admin_pb2.WatchRoutesResponse]) -> None:
    async for update in call:
        got.append(update)


def _symbols(update: admin_pb2.WatchRoutesResponse) -> list[str]:
    return sorted(symbol for route in update.routes for symbol in route.symbols)


async def test_a_modify_loop_replans_only_the_watches_of_its_subscription(site: Site) -> None:
    hub = site.hub
    async with grpc.aio.insecure_channel(site.target) as channel:
        broker = admin_pb2_grpc.StreamBrokerStub(channel)
        alice, bob = await login(channel, *site.keys["alice"]), await login(channel, *site.keys["bob"])
        cap = site.server.config.limits.watches_per_subscription
        mine = [
            (
                await broker.Subscribe(admin_pb2.SubscribeRequest(symbols=["AAPL"]), metadata=alice)
            ).subscription_id
            for _ in range(WATCHES // cap)
        ]
        theirs = await broker.Subscribe(admin_pb2.SubscribeRequest(symbols=["MSFT"]), metadata=bob)
        calls = [
            broker.WatchRoutes(admin_pb2.WatchRoutesRequest(subscription_id=sub), metadata=alice)
            for sub in mine
            for _ in range(cap)
        ]
        for call in calls:
            assert (await call.read()).cause == admin_pb2.EVENT_KIND_WATCHING
        bobs = broker.WatchRoutes(
            admin_pb2.WatchRoutesRequest(subscription_id=theirs.subscription_id), metadata=bob
        )
        got: list[admin_pb2.WatchRoutesResponse] = []
        reader = asyncio.create_task(_reader(bobs, got))
        await eventually(lambda: len(got) == 1, what="bob's watch open")
        site.planned.clear()
        for i in range(30):  # bob's Modify loop
            symbols = ["MSFT", "AMZN"] if i % 2 == 0 else ["MSFT"]
            request = admin_pb2.ModifyRequest(subscription_id=theirs.subscription_id, symbols=symbols)
            await broker.Modify(request, metadata=bob)
        await eventually(lambda: _symbols(got[-1]) == ["MSFT"], what="bob's watch at his last Modify")
        assert ("AAPL",) not in site.planned  # alice's 20 watches never re-planned for bob's changes
        alices = [watch for sub in mine for watch in hub.events.watches_of(sub)]
        assert len(alices) == WATCHES and all(watch.marks == 0 for watch in alices)
        # A change of alice's channel does concern her watches: each is marked, once.
        hub.events.publish(
            HubEvent(at=time.time(), kind="changed", channel_name="EQ-A-M", routes_changed=True)
        )
        hub.events.publish(
            HubEvent(at=time.time(), kind="changed", channel_name="EQ-N-Z", routes_changed=True)
        )
        await eventually(lambda: all(watch.wakes == 1 for watch in alices), what="alice's watches re-planned")
        assert len(alices) == WATCHES and all(watch.marks == 1 for watch in alices)
        assert site.planned.count(("AAPL",)) == 1  # one plan, shared by the 20 watches the change woke
        for call in calls:
            call.cancel()
        reader.cancel()
    await eventually(lambda: hub.events.listeners == 0, what="every watch closed")


async def test_a_watch_behind_a_burst_of_changes_replans_once_and_gets_the_latest(site: Site) -> None:
    hub = site.hub
    async with grpc.aio.insecure_channel(site.target) as channel:
        broker = admin_pb2_grpc.StreamBrokerStub(channel)
        bob = await login(channel, *site.keys["bob"])
        theirs = await broker.Subscribe(admin_pb2.SubscribeRequest(symbols=["MSFT"]), metadata=bob)
        call = broker.WatchRoutes(
            admin_pb2.WatchRoutesRequest(subscription_id=theirs.subscription_id), metadata=bob
        )
        got: list[admin_pb2.WatchRoutesResponse] = []
        reader = asyncio.create_task(_reader(call, got))
        await eventually(lambda: len(got) == 1, what="the watch open")
        principal = hub.identity.principal("bob")
        site.planned.clear()
        final = ["AMZN", "ADBE", "MSFT"]
        for i in range(200):  # one burst, with no await between: the watch's stream cannot run meanwhile
            hub.subscriptions.modify(
                principal, theirs.subscription_id, ["MSFT", "AMZN"] if i % 2 else ["MSFT"]
            )
        hub.subscriptions.modify(principal, theirs.subscription_id, final)
        await eventually(lambda: _symbols(got[-1]) == sorted(final), what="the latest routes")
        (watch,) = hub.events.watches_of(theirs.subscription_id)
        assert (watch.marks, watch.wakes) == (201, 1)
        assert len(got) == 2 and site.planned.count(tuple(final)) == 2  # the Modify, and one re-plan
        reader.cancel()


async def test_a_subscription_past_its_watch_cap_loses_its_oldest_watch_and_one_modify_wakes_the_cap(
    site: Site,
) -> None:
    hub, cap = site.hub, site.server.config.limits.watches_per_subscription
    async with grpc.aio.insecure_channel(site.target) as channel:
        broker = admin_pb2_grpc.StreamBrokerStub(channel)
        bob = await login(channel, *site.keys["bob"])
        theirs = await broker.Subscribe(admin_pb2.SubscribeRequest(symbols=["MSFT"]), metadata=bob)
        watching = admin_pb2.WatchRoutesRequest(subscription_id=theirs.subscription_id)
        calls = []
        for _ in range(cap + 1):  # each opened, and serving, before the next
            calls.append(broker.WatchRoutes(watching, metadata=bob))
            assert (await calls[-1].read()).cause == admin_pb2.EVENT_KIND_WATCHING
        with pytest.raises(grpc.aio.AioRpcError) as replaced:
            await calls[0].read()
        assert replaced.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert status_details(replaced.value).reason == "TOO_MANY_WATCHES"
        request = admin_pb2.ModifyRequest(subscription_id=theirs.subscription_id, symbols=["MSFT", "AMZN"])
        await broker.Modify(request, metadata=bob)
        for call in calls[1:]:  # the newer ones all get the change
            assert _symbols(await call.read()) == ["AMZN", "MSFT"]
        assert len(hub.events.watches_of(theirs.subscription_id)) == cap
        for call in calls:
            call.cancel()
