"""The broker's per-user request rate and per-request pattern limits over real gRPC (grpc.aio, port 0).

The server's clock is frozen (injected) so that no token comes back while a test runs, however
slowly the machine runs it; the test moves it on to show one does.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from feedha.admin_client.errors import status_details
from feedha.admin_server.broker import MAX_PATTERNS
from feedha.admin_server.config import ServerConfig
from feedha.admin_server.globs import MAX_REQUEST_STEPS
from feedha.admin_server.limits import Limits
from feedha.admin_server.server import AdminServer
from feedha.proto import admin_pb2, admin_pb2_grpc
from tests.integration.test_admin_server import CHANNELS, add_user, login

# quants hold grants that are costly to compare a pattern with (as an operator's policy may).
QUANT_GRANTS = ", ".join(f'"*{chr(0x41 + i)}*{chr(0x61 + i)}*{chr(0x30 + i % 10)}?"' for i in range(26))
POLICY = f"""\
groups:
  traders: {{}}
  quants: {{}}
rules:
  - {{groups: [traders], symbols: ["[A-M]*"], mode: realtime}}
  - {{groups: [quants], symbols: [{QUANT_GRANTS}], mode: realtime}}
"""


class FrozenClock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[tuple[AdminServer, FrozenClock, dict[str, tuple[str, str]]]]:
    db, policy = tmp_path / "admin.sqlite", tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    keys = {
        "alice": add_user(db, "alice", groups=("traders",)),
        "bob": add_user(db, "bob", groups=("traders",)),
        "quinn": add_user(db, "quinn", groups=("quants",)),
    }
    clock = FrozenClock()
    limits = Limits(requests_per_s=1.0, request_burst=5)
    server = AdminServer(
        ServerConfig(port=0, database=db, policy=policy, channels=CHANNELS, limits=limits), clock=clock
    )
    await server.start()
    try:
        yield server, clock, keys
    finally:
        await server.stop(grace=None)


async def _code(call: Any) -> str:
    try:
        await call
    except grpc.aio.AioRpcError as exc:
        return f"{exc.code().name}:{status_details(exc).reason}"
    return "OK"


async def test_subscribe_modify_and_cancel_share_one_rate_and_refused_calls_cost_too(site: Any) -> None:
    server, clock, keys = site
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        broker = admin_pb2_grpc.StreamBrokerStub(channel)
        alice, bob = await login(channel, *keys["alice"]), await login(channel, *keys["bob"])
        made = await broker.Subscribe(admin_pb2.SubscribeRequest(symbols=["AAPL"]), metadata=alice)
        own = made.subscription_id
        outcomes = [
            await _code(broker.Subscribe(admin_pb2.SubscribeRequest(symbols=["TSLA"]), metadata=alice)),
            await _code(
                broker.Modify(admin_pb2.ModifyRequest(subscription_id="nope", symbols=["A"]), metadata=alice)
            ),
            await _code(broker.Cancel(admin_pb2.CancelRequest(subscription_id="nope"), metadata=alice)),
            await _code(
                broker.Modify(admin_pb2.ModifyRequest(subscription_id=own, symbols=["AMZN"]), metadata=alice)
            ),
        ]
        assert outcomes == [
            "PERMISSION_DENIED:SYMBOLS_NOT_ENTITLED",
            "NOT_FOUND:SUBSCRIPTION_NOT_FOUND",
            "NOT_FOUND:SUBSCRIPTION_NOT_FOUND",
            "OK",
        ]
        with pytest.raises(grpc.aio.AioRpcError) as refused:  # five calls, three of them refused: no more
            await broker.Cancel(admin_pb2.CancelRequest(subscription_id=own), metadata=alice)
        details = status_details(refused.value)
        assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert details.reason == "TOO_MANY_REQUESTS" and details.metadata["limit"] == "1"
        assert details.retry_after_s == pytest.approx(1.0, abs=0.01)
        assert (
            await _code(broker.Subscribe(admin_pb2.SubscribeRequest(symbols=["MSFT"]), metadata=bob)) == "OK"
        )
        clock.now += 1.0  # a token back
        assert (
            await _code(broker.Cancel(admin_pb2.CancelRequest(subscription_id=own), metadata=alice)) == "OK"
        )
    assert server.hub.counters.refused == {"TOO_MANY_REQUESTS": 1}


async def test_too_many_patterns_in_one_request_is_refused_and_names_the_limit(site: Any) -> None:
    server, _clock, keys = site
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        broker = admin_pb2_grpc.StreamBrokerStub(channel)
        alice = await login(channel, *keys["alice"])
        patterns = [f"{letter}*" for letter in "ABCDEFGHIJKLMABCD"[: MAX_PATTERNS + 1]]
        patterns = list(dict.fromkeys(patterns)) + [f"{letter}?" for letter in "ABCD"]
        assert len(patterns) > MAX_PATTERNS
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await broker.Subscribe(admin_pb2.SubscribeRequest(symbols=patterns), metadata=alice)
    details = status_details(refused.value)
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert details.reason == "TOO_MANY_PATTERNS" and details.metadata == {"limit": str(MAX_PATTERNS)}
    assert [(v.field, v.reason) for v in details.violations] == [("symbols", "TOO_MANY_PATTERNS")]


async def test_patterns_too_costly_to_check_are_refused_and_charged_to_the_user(site: Any) -> None:
    server, clock, keys = site
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        broker = admin_pb2_grpc.StreamBrokerStub(channel)
        quinn = await login(channel, *keys["quinn"])
        heavy = [f"{chr(0x41 + i)}*?" for i in range(12)]  # ~7,000 moves each against quinn's grants
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await broker.Subscribe(admin_pb2.SubscribeRequest(symbols=heavy), metadata=quinn)
        details = status_details(refused.value)
        assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert details.reason == "PATTERNS_TOO_COMPLEX"
        assert details.metadata["limit"] == str(MAX_REQUEST_STEPS)
        # The moves it made were charged: quinn's bucket is in debt, well past its burst of 5.
        clock.now += 10.0
        outcome = await _code(broker.Subscribe(admin_pb2.SubscribeRequest(symbols=["AAPL"]), metadata=quinn))
        assert outcome == "RESOURCE_EXHAUSTED:TOO_MANY_REQUESTS"
    assert server.hub.subscriptions.rates.steps_charged >= MAX_REQUEST_STEPS
