"""The admin server in process: a real grpc.aio server on 127.0.0.1 port 0, real clients."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest

from feedha.admin_client import (
    AdminClient,
    AuthenticationFailed,
    PermissionDenied,
    RegistryAgent,
    error_from_rpc,
)
from feedha.admin_server import tokens
from feedha.admin_server.config import ChannelConfig, ServerConfig
from feedha.admin_server.fanout import HubEvent
from feedha.admin_server.server import AdminServer, issue_key
from feedha.admin_server.store import Store
from feedha.proto import admin_pb2, admin_pb2_grpc
from feedha.proto.model import MARKET_MODEL
from feedha.proto.registry import (
    AdapterRegistration,
    AdapterRole,
    AdapterStatus,
    Command,
    CommandKind,
    SyncStatus,
    registration_to_proto,
)

POLICY = """\
groups:
  operators: {roles: [admin]}
  adapters: {roles: [adapter]}
  traders: {}
rules:
  - groups: [traders]
    symbols: ["[A-M]*", "NVDA"]
    mode: realtime
  - users: [dora]
    symbols: ["*"]
    mode: delayed
adapters:
  feed: {channels: [EQ-A-M], ids: [a, b]}
"""
CHANNELS = (
    ChannelConfig(
        feed="EQUITIES", name="EQ-A-M", number=1, source_stream="A-M", first_letter="A", last_letter="M"
    ),
    ChannelConfig(
        feed="EQUITIES", name="EQ-N-Z", number=2, source_stream="N-Z", first_letter="N", last_letter="Z"
    ),
)


async def eventually(
    predicate: Callable[[], bool], *, timeout: float = 10.0, what: str = "condition"
) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


# Logins verify with the cost stored in the hash: a cheap one keeps these
# tests about the protocol, not about argon2 on a loaded machine.
CHEAP_HASHER = tokens.make_hasher(time_cost=1, memory_kib=8, parallelism=1)


@dataclass
class Clock:
    offset: float = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@dataclass
class Env:
    server: AdminServer
    target: str
    clock: Clock
    policy: Path
    keys: dict[str, tuple[str, str]] = field(default_factory=dict)


def add_user(
    db: Path, name: str, *, groups: tuple[str, ...] = (), roles: tuple[str, ...] = ()
) -> tuple[str, str]:
    store = Store(db)
    try:
        return issue_key(
            store,
            CHEAP_HASHER,
            name,
            groups=frozenset(groups),
            roles=frozenset(roles),
            by="test",
            now=time.time(),
        )
    finally:
        store.close()


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    db, policy = tmp_path / "admin.sqlite", tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    keys = {
        "alice": add_user(db, "alice", groups=("traders",)),
        "dora": add_user(db, "dora"),
        "ops": add_user(db, "ops", groups=("operators",)),
        "feed": add_user(db, "feed", roles=("adapter",)),
    }
    clock = Clock()
    config = ServerConfig(port=0, database=db, policy=policy, channels=CHANNELS, policy_poll_s=0.05)
    server = AdminServer(config, clock=clock)
    await server.start()
    try:
        yield Env(server=server, target=f"127.0.0.1:{server.port}", clock=clock, policy=policy, keys=keys)
    finally:
        await server.stop(grace=None)


async def login(channel: grpc.aio.Channel, key_id: str, secret: str) -> tuple[tuple[str, str], ...]:
    reply = await admin_pb2_grpc.AdminAuthStub(channel).Login(
        admin_pb2.LoginRequest(key_id=key_id, secret=secret)
    )
    return (("authorization", f"Bearer {reply.token}"),)


async def test_login_and_subscribe_entitled_symbols(env: Env) -> None:
    async with AdminClient(env.target, *env.keys["alice"]) as admin:
        subscription = await admin.subscribe(["AAPL", "MSFT"])
        assert [(r.channel_name, r.channel_number, r.symbols, r.delayed) for r in subscription.routes] == [
            ("EQ-A-M", 1, ("AAPL", "MSFT"), False),
        ]
        # NVDA alone is granted on EQ-N-Z, whose line carries every N-Z symbol: refused, the channel named.
        with pytest.raises(PermissionDenied) as exposed:
            await admin.subscribe(["NVDA"])
        assert exposed.value.reason == "CHANNEL_NOT_ENTITLED"
        assert exposed.value.metadata["channel"] == "EQ-N-Z" and exposed.value.metadata["exposes"] == "[N-Z]*"
        route = subscription.routes[0]
        assert (route.message_model, route.model_version) == ("feedha.v1.MarketUpdate", MARKET_MODEL.version)
        assert route.model_descriptor_set == MARKET_MODEL.descriptor_set()
        with pytest.raises(PermissionDenied) as info:
            await admin.subscribe(["AAPL", "TSLA", "ZZ*"])
        assert info.value.symbols == ("TSLA", "ZZ*")
        assert "not entitled to: TSLA, ZZ*" in str(info.value)
        modified = await admin.modify(subscription.subscription_id, ["AMZN"])
        assert [r.symbols for r in modified.routes] == [("AMZN",)]
        await admin.cancel(subscription.subscription_id)
        with pytest.raises(Exception, match="NOT_FOUND"):
            await admin.cancel(subscription.subscription_id)
    async with AdminClient(env.target, *env.keys["dora"]) as admin:
        subscription = await admin.subscribe(["TSLA"])
        assert [(r.channel_name, r.delayed) for r in subscription.routes] == [("EQ-N-Z", True)]


async def test_bad_credentials_and_tokens(env: Env) -> None:
    key_id, secret = env.keys["alice"]
    async with grpc.aio.insecure_channel(env.target) as channel:
        auth = admin_pb2_grpc.AdminAuthStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await auth.Login(admin_pb2.LoginRequest(key_id=key_id, secret="wrong"))
        assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert error_from_rpc(info.value).reason == "CREDENTIALS_INVALID"
        assert "invalid API key secret" in info.value.details()
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await auth.Login(admin_pb2.LoginRequest(key_id="fk_nobody", secret=secret))
        assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert "unknown API key id 'fk_nobody'" in info.value.details()
        broker = admin_pb2_grpc.StreamBrokerStub(channel)
        request = admin_pb2.SubscribeRequest(symbols=["AAPL"])
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await broker.Subscribe(request)
        assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED and "missing" in info.value.details()
        assert error_from_rpc(info.value).reason == "TOKEN_MISSING"
        metadata = await login(channel, key_id, secret)
        token = metadata[0][1].removeprefix("Bearer ")
        forged = token.split(".")[0] + ".AAAA"
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await broker.Subscribe(request, metadata=(("authorization", f"Bearer {forged}"),))
        assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED and "signature" in info.value.details()
        assert error_from_rpc(info.value).reason == "TOKEN_INVALID"
        await broker.Subscribe(request, metadata=metadata)
        env.clock.offset = 2 * env.server.config.token_ttl_s
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await broker.Subscribe(request, metadata=metadata)
        assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED and "expired" in info.value.details()


async def test_client_logs_in_again_after_expiry(env: Env) -> None:
    async with AdminClient(env.target, *env.keys["alice"]) as admin:
        await admin.subscribe(["AAPL"])
        assert admin.logins == 1
        env.clock.offset = 2 * env.server.config.token_ttl_s
        await admin.subscribe(["AAPL"])
        assert admin.logins == 2
    async with AdminClient(env.target, env.keys["alice"][0], "wrong") as admin:
        with pytest.raises(AuthenticationFailed, match="invalid API key secret"):
            await admin.subscribe(["AAPL"])


async def test_repeated_login_failures_are_slowed_down(env: Env) -> None:
    key_id, secret = env.keys["alice"]
    async with grpc.aio.insecure_channel(env.target) as channel:
        auth = admin_pb2_grpc.AdminAuthStub(channel)
        codes = []
        for _ in range(5):
            try:
                await auth.Login(admin_pb2.LoginRequest(key_id=key_id, secret="wrong"))
            except grpc.aio.AioRpcError as exc:
                codes.append(exc.code())
        assert codes[:3] == [grpc.StatusCode.UNAUTHENTICATED] * 3
        assert grpc.StatusCode.RESOURCE_EXHAUSTED in codes[3:]
        with pytest.raises(grpc.aio.AioRpcError) as info:  # even the right secret waits its turn
            await auth.Login(admin_pb2.LoginRequest(key_id=key_id, secret=secret))
        assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED and "retry in" in info.value.details()
        env.clock.offset = 60.0
        await auth.Login(admin_pb2.LoginRequest(key_id=key_id, secret=secret))


async def test_non_admin_is_denied_admin_rpcs(env: Env) -> None:
    async with grpc.aio.insecure_channel(env.target) as channel:
        control = admin_pb2_grpc.AdminControlStub(channel)
        metadata = await login(channel, *env.keys["alice"])
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await control.ListAdapters(admin_pb2.ListAdaptersRequest(), metadata=metadata)
        assert info.value.code() is grpc.StatusCode.PERMISSION_DENIED
        assert "lacks the admin role" in info.value.details()
        admin_md = await login(channel, *env.keys["ops"])
        await control.ListAdapters(admin_pb2.ListAdaptersRequest(), metadata=admin_md)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await control.Purge(
                admin_pb2.PurgeRequest(channel_name="EQ-A-M", first_msg_seq=1, reason="r"), metadata=admin_md
            )
        # The channel's active decides a purge: none is connected here.
        assert (
            info.value.code() is grpc.StatusCode.UNAVAILABLE and "no active adapter" in info.value.details()
        )


async def test_malformed_policy_is_rejected_and_old_policy_keeps_working(env: Env) -> None:
    async with AdminClient(env.target, *env.keys["alice"]) as admin:
        await admin.subscribe(["AAPL"])
        hub = env.server.hub
        assert hub is not None
        generation = hub.policy_file.generation
        env.policy.write_text(POLICY.replace("mode: realtime", "mode: instant"))
        await eventually(lambda: hub.policy_file.rejections == 1, what="rejection")
        error = hub.policy_file.last_error
        assert error is not None and error.line == 8 and "'instant'" in error.problem
        assert hub.policy_file.generation == generation
        await admin.subscribe(["AAPL"])  # old policy still in force
        env.policy.write_text(POLICY.replace('"[A-M]*", ', ""))
        await eventually(lambda: hub.policy_file.generation > generation, what="reload")
        with pytest.raises(PermissionDenied):
            await admin.subscribe(["AAPL"])


@dataclass
class FakeAdapter:
    registration: AdapterRegistration
    role: AdapterRole
    term: int
    commands: list[Command] = field(default_factory=list)
    sync: SyncStatus = SyncStatus.IN_SYNC

    def status(self) -> AdapterStatus:
        return AdapterStatus(
            role=self.role, term=self.term, next_msg_seq=42, sync_status=self.sync, health_score=90.0
        )

    async def on_command(self, command: Command) -> None:
        self.commands.append(command)
        if command.kind is CommandKind.PROMOTE:
            self.role, self.term = AdapterRole.ACTIVE, command.term
        elif command.kind is CommandKind.DEMOTE:
            self.role, self.term = AdapterRole.BACKUP, command.term


def fake_adapter(adapter_id: str, role: AdapterRole, term: int = 1) -> FakeAdapter:
    registration = AdapterRegistration(
        feed="EQUITIES",
        channel_name="EQ-A-M",
        channel_number=1,
        adapter_id=adapter_id,
        line_endpoint=f"tcp://127.0.0.1:7000/{adapter_id}",
        replay_endpoint=f"tcp://127.0.0.1:7100/{adapter_id}",
        role=role,
        term=term,
    )
    return FakeAdapter(registration=registration, role=role, term=term)


async def test_agents_register_failover_and_routes_follow(env: Env) -> None:
    a, b = fake_adapter("a", AdapterRole.ACTIVE), fake_adapter("b", AdapterRole.BACKUP)
    creds = env.keys["feed"]
    agents = [
        RegistryAgent(env.target, f.registration, f.status, f.on_command, credentials=creds, interval_s=0.05)
        for f in (a, b)
    ]
    hub = env.server.hub
    assert hub is not None
    async with agents[0], agents[1], AdminClient(env.target, *env.keys["alice"]) as client:
        await eventually(
            lambda: (
                all(r.is_up for r in hub.adapters.registry.records())
                and len(hub.adapters.registry.records()) == 2
            )
        )
        subscription = await client.subscribe(["AAPL"])
        (route,) = subscription.routes
        assert [(line.adapter_id, line.role, line.term) for line in route.lines] == [
            ("a", "active", 1),
            ("b", "backup", 1),
        ]
        updates = client.watch_routes(subscription.subscription_id)
        first = await anext(updates)
        assert first.reason == "current" and first.initial and first.cause == "watching"
        async with grpc.aio.insecure_channel(env.target) as channel:
            control = admin_pb2_grpc.AdminControlStub(channel)
            md = await login(channel, *env.keys["ops"])
            reply = await control.Failover(admin_pb2.FailoverRequest(channel_name="EQ-A-M"), metadata=md)
            assert {(s.adapter_id, s.command.kind, s.command.term) for s in reply.sent} == {
                ("a", admin_pb2.COMMAND_KIND_DEMOTE, 2),
                ("b", admin_pb2.COMMAND_KIND_PROMOTE, 2),
            }
            await eventually(lambda: a.commands and b.commands, what="commands delivered")
            assert [c.kind for c in a.commands] == [CommandKind.DEMOTE]
            assert [(c.kind, c.term, c.issued_by) for c in b.commands] == [(CommandKind.PROMOTE, 2, "ops")]

            async def promoted() -> None:
                async for update in updates:
                    lines = update.routes[0].lines
                    if lines[0].adapter_id == "b" and lines[0].role == "active" and lines[0].term == 2:
                        return

            await asyncio.wait_for(promoted(), 10)
            await control.Throttle(admin_pb2.ThrottleRequest(adapter_id="a", rate=100.0), metadata=md)
            await eventually(lambda: len(a.commands) == 2, what="throttle")
            assert a.commands[-1].rate == 100.0
            assert [e.action for e in hub.store.audit_log()][:3] == ["throttle", "failover", "failover"]
        await updates.aclose()
    await eventually(
        lambda: not any(r.is_up for r in hub.adapters.registry.records()), what="adapters marked down"
    )
    assert len(hub.adapters.registry.records()) == 2


async def test_agent_reconnects_when_server_returns(tmp_path: Path) -> None:
    db, policy = tmp_path / "admin.sqlite", tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    creds = add_user(db, "feed", roles=("adapter",))
    first = AdminServer(ServerConfig(port=0, database=db, policy=policy, channels=CHANNELS))
    port = await first.start()
    a = fake_adapter("a", AdapterRole.ACTIVE)
    agent = RegistryAgent(
        f"127.0.0.1:{port}",
        a.registration,
        a.status,
        a.on_command,
        credentials=creds,
        interval_s=0.05,
        reconnect_initial_s=0.05,
        reconnect_max_s=0.2,
    )
    async with agent:
        await eventually(lambda: agent.connections == 1 and agent.is_connected)
        await first.stop(grace=None)
        await eventually(lambda: not agent.is_connected, what="agent notices")
        second = AdminServer(ServerConfig(port=port, database=db, policy=policy, channels=CHANNELS))
        await second.start()
        try:
            await eventually(lambda: agent.connections == 2 and agent.is_connected, what="reconnect")
            assert second.hub is not None
            await eventually(lambda: second.hub.adapters.registry.get("a").is_up)  # type: ignore[union-attr]
        finally:
            await second.stop(grace=None)
    assert "connections=2" in repr(agent)


async def _register(target: str, creds: tuple[str, str], registration: AdapterRegistration) -> Any:
    """Open a registry stream and send the registration; returns (channel, call) while it lives."""
    channel = grpc.aio.insecure_channel(target)
    md = await login(channel, *creds)
    stub = admin_pb2_grpc.AdapterRegistryStub(channel)  # type: ignore[no-untyped-call]
    call = stub.Connect(metadata=md)
    await call.write(admin_pb2.ConnectRequest(registration=registration_to_proto(registration)))
    return channel, call


async def _refusal(call: Any) -> grpc.StatusCode:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await asyncio.wait_for(call.read(), 10)
    return caught.value.code()


async def test_registrations_are_bound_to_the_callers_adapters(env: Env) -> None:
    hub = env.server.hub
    assert hub is not None
    env.keys["other"] = add_user(env.policy.parent / "admin.sqlite", "other", roles=("adapter",))
    env.keys["boss"] = add_user(env.policy.parent / "admin.sqlite", "boss", roles=("adapter", "admin"))
    env.policy.write_text(POLICY + "  other: {channels: [EQ-A-M], ids: [a]}\n")
    await eventually(lambda: "other" in hub.policy_file.policy.adapters, what="reload")
    wrong_channel = dataclasses.replace(
        fake_adapter("a", AdapterRole.ACTIVE).registration, channel_name="EQ-N-Z"
    )
    for creds, registration in [
        (env.keys["feed"], wrong_channel),  # bound id, other channel
        (env.keys["feed"], fake_adapter("c", AdapterRole.ACTIVE).registration),  # unbound id
        (env.keys["boss"], fake_adapter("a", AdapterRole.ACTIVE).registration),  # roles, no binding
    ]:
        channel, call = await _register(env.target, creds, registration)
        async with channel:
            assert await _refusal(call) is grpc.StatusCode.PERMISSION_DENIED
    assert hub.adapters.registry.records() == []
    refused = [e for e in hub.store.audit_log() if e.action == "register-refused"]
    assert sorted((e.user, e.target) for e in refused) == [("boss", "a"), ("feed", "a"), ("feed", "c")]
    assert "EQ-N-Z" in next(e.detail for e in refused if e.user == "feed" and e.target == "a")
    # A live registration of "a" is kept against another bound user; its own user may take it over.
    first_channel, first = await _register(
        env.target, env.keys["feed"], fake_adapter("a", AdapterRole.ACTIVE).registration
    )
    async with first_channel:
        await eventually(
            lambda: bool(hub.adapters.registry.records()) and hub.adapters.registry.get("a").is_up
        )
        channel, call = await _register(
            env.target, env.keys["other"], fake_adapter("a", AdapterRole.ACTIVE).registration
        )
        async with channel:
            assert await _refusal(call) is grpc.StatusCode.FAILED_PRECONDITION
        assert hub.adapters.registry.get("a").registration.line_endpoint == "tcp://127.0.0.1:7000/a"
        replaced = dataclasses.replace(
            fake_adapter("a", AdapterRole.ACTIVE).registration, line_endpoint="tcp://127.0.0.1:7001"
        )
        channel, call = await _register(env.target, env.keys["feed"], replaced)
        async with channel:
            await eventually(
                lambda: hub.adapters.registry.get("a").registration.line_endpoint == "tcp://127.0.0.1:7001"
            )
            call.cancel()
    first.cancel()
    await eventually(lambda: not hub.adapters.registry.get("a").is_up, what="a down")
    channel, call = await _register(
        env.target, env.keys["other"], fake_adapter("a", AdapterRole.ACTIVE).registration
    )
    async with channel:
        await eventually(lambda: hub.adapters.registry.get("a").is_up, what="the other user takes a free id")
        call.cancel()


async def test_without_adapter_auth_adapters_register_without_a_key(tmp_path: Path) -> None:
    db, policy = tmp_path / "admin.sqlite", tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    config = ServerConfig(port=0, database=db, policy=policy, channels=CHANNELS, adapter_auth=False)
    async with AdminServer(config) as server:
        assert server.hub is not None
        hub = server.hub
        c = fake_adapter("c", AdapterRole.ACTIVE)  # bound to nobody: no user to bind without adapter_auth
        agent = RegistryAgent(
            f"127.0.0.1:{server.port}", c.registration, c.status, c.on_command, interval_s=0.05
        )
        async with agent:
            await eventually(
                lambda: bool(hub.adapters.registry.records()) and hub.adapters.registry.get("c").is_up
            )


async def test_route_updates_stop_once_the_api_key_behind_the_subscription_is_rotated(env: Env) -> None:
    # Route updates carry packet keys: a subscription whose key was rotated (or whose token
    # expired) must not be handed the keys that the rotation made to shut it out.
    async with grpc.aio.insecure_channel(env.target) as channel:
        md = await login(channel, *env.keys["alice"])
        broker = admin_pb2_grpc.StreamBrokerStub(channel)
        reply = await broker.Subscribe(admin_pb2.SubscribeRequest(symbols=["AAPL"]), metadata=md)
        watch = broker.WatchRoutes(
            admin_pb2.WatchRoutesRequest(subscription_id=reply.subscription_id), metadata=md
        )
        first = await watch.read()
        assert first.cause == admin_pb2.EVENT_KIND_WATCHING
        hub = env.server.hub
        assert hub is not None
        hub.store.replace_secret(env.keys["alice"][0], secret_hash="rotated", now=time.time() + 1)
        hub.events.publish(HubEvent(at=time.time(), kind="seal", channel_name="EQ-A-M", routes_changed=True))
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await asyncio.wait_for(watch.read(), 10)
        assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert error_from_rpc(info.value).reason == "LEASE_ENDED"
