"""The admin API's v1 conventions on a real server: paging, timestamps and durations, enum kinds, and
refusals that carry google.rpc details (ErrorInfo, BadRequest, RetryInfo) a client reads without parsing."""
# ruff: noqa: F811

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from feedha.admin_client import AdminClient, PermissionDenied, error_from_rpc
from feedha.proto import admin_pb2, admin_pb2_grpc
from feedha.proto.registry import AdapterRegistration, AdapterRole

# `env` is test_admin_server's fixture: the tests' `env` arguments are it, not redefinitions.
from tests.integration.test_admin_server import Env, env, login  # noqa: F401

pytestmark = pytest.mark.timeout(60)


def _details(exc: grpc.aio.AioRpcError) -> dict[str, Any]:
    """The status details as the wire has them (ErrorInfo and BadRequest), decoded by hand."""
    (raw,) = [value for key, value in exc.trailing_metadata() if key == "grpc-status-details-bin"]
    status = status_pb2.Status.FromString(raw)
    assert status.code == exc.code().value[0] and status.message == exc.details()
    found: dict[str, Any] = {}
    for detail in status.details:
        for kind in (error_details_pb2.ErrorInfo, error_details_pb2.BadRequest, error_details_pb2.RetryInfo):
            if detail.Is(kind.DESCRIPTOR):
                message = kind()
                detail.Unpack(message)
                found[kind.__name__] = message
    return found


def _register(env: Env, *ids: tuple[str, str]) -> None:
    hub = env.server.hub
    assert hub is not None
    for channel, adapter_id in ids:
        registration = AdapterRegistration(
            feed="EQUITIES",
            channel_name=channel,
            channel_number=1 if channel == "EQ-A-M" else 2,
            adapter_id=adapter_id,
            line_endpoint=f"tcp://127.0.0.1:7000/{adapter_id}",
            role=AdapterRole.BACKUP,
        )
        hub.adapters.registry.on_register(registration, now=time.time())


async def test_list_adapters_pages_through_every_adapter_once(env: Env) -> None:
    ids = [("EQ-N-Z", "z1"), ("EQ-A-M", "a3"), ("EQ-A-M", "a1"), ("EQ-N-Z", "z2"), ("EQ-A-M", "a2")]
    _register(env, *ids)
    async with grpc.aio.insecure_channel(env.target) as channel:
        md = await login(channel, *env.keys["ops"])
        control = admin_pb2_grpc.AdminControlStub(channel)
        seen, token, pages = [], "", 0
        while True:
            reply = await control.ListAdapters(
                admin_pb2.ListAdaptersRequest(page_size=2, page_token=token), metadata=md
            )
            seen += [(a.registration.channel_name, a.registration.adapter_id) for a in reply.adapters]
            pages, token = pages + 1, reply.next_page_token
            if not token:
                break
        assert seen == sorted(ids) and pages == 3
        one = await control.ListAdapters(admin_pb2.ListAdaptersRequest(channel_name="EQ-N-Z"), metadata=md)
        assert [a.registration.adapter_id for a in one.adapters] == ["z1", "z2"] and not one.next_page_token
        assert abs(one.adapters[0].update_time.ToNanoseconds() / 1e9 - time.time()) < 60
        first = await control.ListAdapters(admin_pb2.ListAdaptersRequest(page_size=1), metadata=md)
        for request, reason in (
            (
                admin_pb2.ListAdaptersRequest(page_token=first.next_page_token, channel_name="EQ-A-M"),
                "MISMATCH",
            ),
            (admin_pb2.ListAdaptersRequest(page_token="bm90IGEgdG9rZW4"), "INVALID"),
            (admin_pb2.ListAdaptersRequest(page_size=-1), "NEGATIVE"),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await control.ListAdapters(request, metadata=md)
            assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
            (violation,) = _details(caught.value)["BadRequest"].field_violations
            assert violation.reason.endswith(reason) and violation.field in ("page_token", "page_size")


async def test_list_subscriptions_pages_oldest_first_with_timestamps(env: Env) -> None:
    async with AdminClient(env.target, *env.keys["alice"]) as alice:
        made = [(await alice.subscribe([symbol])).subscription_id for symbol in ("AAPL", "MSFT", "IBM", "A*")]
    async with grpc.aio.insecure_channel(env.target) as channel:
        md = await login(channel, *env.keys["ops"])
        control = admin_pb2_grpc.AdminControlStub(channel)
        first = await control.ListSubscriptions(admin_pb2.ListSubscriptionsRequest(page_size=3), metadata=md)
        rest = await control.ListSubscriptions(
            admin_pb2.ListSubscriptionsRequest(page_size=3, page_token=first.next_page_token), metadata=md
        )
    found = [*first.subscriptions, *rest.subscriptions]
    assert [s.subscription_id for s in found] == made and not rest.next_page_token
    assert all(s.create_time.ToNanoseconds() <= s.update_time.ToNanoseconds() for s in found)
    assert abs(found[0].create_time.ToNanoseconds() / 1e9 - time.time()) < 60


async def test_login_gives_an_expiry_time_and_a_lifetime(env: Env) -> None:
    async with grpc.aio.insecure_channel(env.target) as channel:
        reply = await admin_pb2_grpc.AdminAuthStub(channel).Login(
            admin_pb2.LoginRequest(key_id=env.keys["alice"][0], secret=env.keys["alice"][1])
        )
    assert math.isclose(reply.lifetime.ToNanoseconds() / 1e9, 3600, abs_tol=5)
    assert math.isclose(reply.expire_time.ToNanoseconds() / 1e9, time.time() + 3600, abs_tol=60)
    env.clock.offset = 10_000.0  # a server whose clock runs ahead: the client renews by the lifetime
    async with AdminClient(env.target, *env.keys["alice"]) as client:
        await client.login()
        assert math.isclose(client.token_expires_at, time.time() + 3600, abs_tol=60)


async def test_unentitled_symbols_are_named_in_the_details(env: Env) -> None:
    async with grpc.aio.insecure_channel(env.target) as channel:
        md = await login(channel, *env.keys["alice"])
        broker = admin_pb2_grpc.StreamBrokerStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await broker.Subscribe(
                admin_pb2.SubscribeRequest(symbols=["AAPL", "ZZZ", "N*", "ZZZ"]), metadata=md
            )
    assert caught.value.code() is grpc.StatusCode.PERMISSION_DENIED
    details = _details(caught.value)
    info = details["ErrorInfo"]
    assert (info.reason, info.domain, info.metadata["symbols"]) == (
        "SYMBOLS_NOT_ENTITLED",
        "feedha.v1",
        "ZZZ N*",
    )
    violations = [(v.field, v.reason) for v in details["BadRequest"].field_violations]
    assert violations == [(f"symbols[{i}]", "SYMBOL_NOT_ENTITLED") for i in (1, 2, 3)]
    async with AdminClient(env.target, *env.keys["alice"]) as client:
        with pytest.raises(PermissionDenied) as denied:
            await client.subscribe(["ZZZ"])
    assert denied.value.symbols == ("ZZZ",) and denied.value.reason == "SYMBOLS_NOT_ENTITLED"


@pytest.mark.parametrize(
    ("who", "call", "code", "reason", "field"),
    [
        ("alice", ("broker", "Subscribe", admin_pb2.SubscribeRequest(symbols=["A B"])), "INVALID_ARGUMENT",
         "INVALID_ARGUMENT", "symbols[0]"),
        ("alice", ("broker", "Subscribe", admin_pb2.SubscribeRequest(symbols=["AAPL"], curve_public_key="x")),
         "INVALID_ARGUMENT", "INVALID_ARGUMENT", "curve_public_key"),
        ("dora", ("broker", "Subscribe", admin_pb2.SubscribeRequest(symbols=["AAPL", "ÄÖ"])), "NOT_FOUND",
         "SYMBOLS_NOT_ROUTED", "symbols[1]"),
        ("alice", ("broker", "Modify", admin_pb2.ModifyRequest(subscription_id="nope", symbols=["AAPL"])),
         "NOT_FOUND", "SUBSCRIPTION_NOT_FOUND", None),
        ("alice", ("control", "ListAdapters", admin_pb2.ListAdaptersRequest()), "PERMISSION_DENIED",
         "ROLE_REQUIRED", None),
        ("ops", ("control", "Throttle", admin_pb2.ThrottleRequest(adapter_id="a", rate=float("nan"))),
         "INVALID_ARGUMENT", "INVALID_ARGUMENT", "rate"),
        ("ops", ("control", "Failover", admin_pb2.FailoverRequest(channel_name="EQ-X")), "NOT_FOUND",
         "CHANNEL_NOT_FOUND", None),
        ("ops", ("control", "Purge", admin_pb2.PurgeRequest(channel_name="EQ-A-M", first_msg_seq=0,
                                                            reason="r")),
         "INVALID_ARGUMENT", "MSG_SEQ_ZERO", "first_msg_seq"),
    ],
)  # fmt: skip
async def test_refusals_carry_a_reason_and_the_field_at_fault(
    env: Env, who: str, call: tuple[str, str, Any], code: str, reason: str, field: str | None
) -> None:
    stub_name, method, request = call
    async with grpc.aio.insecure_channel(env.target) as channel:
        md = await login(channel, *env.keys[who])
        stubs = {
            "broker": admin_pb2_grpc.StreamBrokerStub(channel),
            "control": admin_pb2_grpc.AdminControlStub(channel),
        }
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await getattr(stubs[stub_name], method)(request, metadata=md)
    error = error_from_rpc(caught.value)
    assert (error.code, error.reason) == (code, reason)
    assert [v.field for v in error.violations] == ([field] if field else [])


async def test_a_throttled_login_says_when_to_retry(env: Env) -> None:
    key_id, _secret = env.keys["alice"]
    async with grpc.aio.insecure_channel(env.target) as channel:
        auth = admin_pb2_grpc.AdminAuthStub(channel)
        for _attempt in range(6):
            try:
                await auth.Login(admin_pb2.LoginRequest(key_id=key_id, secret="wrong"))
            except grpc.aio.AioRpcError as exc:
                last = exc
    error = error_from_rpc(last)
    assert (error.code, error.reason) == ("RESOURCE_EXHAUSTED", "LOGIN_THROTTLED")
    assert error.retry_after_s is not None and 0 < error.retry_after_s <= 60


async def test_watch_events_are_typed(env: Env) -> None:
    async with grpc.aio.insecure_channel(env.target) as channel:
        md = await login(channel, *env.keys["ops"])
        events = admin_pb2_grpc.AdminControlStub(channel).WatchEvents(
            admin_pb2.WatchEventsRequest(), metadata=md
        )
        first = await asyncio.wait_for(events.read(), 10)
        assert first.kind == admin_pb2.EVENT_KIND_WATCHING
        async with AdminClient(env.target, *env.keys["alice"]) as alice:
            await alice.subscribe(["AAPL"])
        second = await asyncio.wait_for(events.read(), 10)
        events.cancel()
    assert second.kind == admin_pb2.EVENT_KIND_SUBSCRIBE and "alice" in second.detail
    assert second.event_time.ToNanoseconds() >= first.event_time.ToNanoseconds() > 0


async def test_a_refusal_of_a_thousand_symbols_still_arrives_whole(env: Env) -> None:
    # Trailers past 16 KiB are refused by the client (RESOURCE_EXHAUSTED): the server bounds them.
    symbols = [f"Z{n:063d}" for n in range(1000)]  # the most a request may hold, each as long as allowed
    async with AdminClient(env.target, *env.keys["alice"]) as client:
        with pytest.raises(PermissionDenied) as denied:
            await client.subscribe(symbols)
    error = denied.value
    assert error.reason == "SYMBOLS_NOT_ENTITLED" and len(str(error)) <= 512
    assert error.symbols == tuple(symbols[: len(error.symbols)]) and len(error.symbols) >= 30
    assert len(error.symbols) + error.symbols_omitted == 1000
    assert len(error.violations) == 16 and error.violations[-1].description == "985 more"
