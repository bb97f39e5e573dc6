"""Multicast packet keys converge under churn: a real grpc.aio server (port 0), a registered adapter
with an ``epgm://`` line (the server only hands out its keys: no multicast is needed), subscribers
watching their routes, and a user who subscribes and cancels every 100 ms throughout.

The bound itself (a revocation carried out within ``2 x SWITCH_S`` of the pass that sees it) is
shown with explicit times in ``tests/unit/admin_server/test_sealing.py``; here the point is that
the keys switch at all while the churn goes on (they never did: each loss of entitlement pushed
the switch back), and that the revoked subscriber holds none of the keys used after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from feedha.admin_client import AdminClient, AdminClientError, RegistryAgent
from feedha.admin_server.config import ServerConfig
from feedha.admin_server.server import AdminServer
from feedha.proto.registry import (
    AdapterRegistration,
    AdapterRole,
    AdapterStatus,
    Command,
    CommandKind,
    SyncStatus,
)
from feedha.transport.tasks import cancel_and_wait
from tests.integration.test_admin_server import CHANNELS, add_user, eventually

POLICY = """\
groups:
  adapters: {{roles: [adapter]}}
  traders: {{}}
  probation: {{}}
rules:
  - {{groups: [traders], symbols: ["[A-M]*"], mode: realtime}}
{probation}adapters:
  feed: {{channels: [EQ-A-M], ids: [a]}}
"""
PROBATION = '  - {groups: [probation], symbols: ["[A-M]*"], mode: realtime}\n'
CHURN_EVERY_S = 0.1
MAX_CHURN = 400  # cycles: the loop is bounded whatever happens


@dataclass
class SealingAdapter:
    """An adapter that only records which key it is told to seal with, and when."""

    sealed_with: list[tuple[float, int]] = field(default_factory=list)

    def status(self) -> AdapterStatus:
        return AdapterStatus(
            role=AdapterRole.ACTIVE, term=1, next_msg_seq=1, sync_status=SyncStatus.IN_SYNC, health_score=99.0
        )

    async def on_command(self, command: Command) -> None:
        if command.kind is CommandKind.SEAL and command.seal_key is not None:
            self.sealed_with.append((time.monotonic(), command.seal_key.key_id))


@dataclass
class Holder:
    """The keys a subscriber was handed, by its Subscribe and its route watch."""

    keys: set[int] = field(default_factory=set)
    ended: bool = False

    async def watch(self, client: AdminClient, subscription_id: str) -> None:
        try:
            async for update in client.watch_routes(subscription_id):
                self.keys.update(key.key_id for route in update.routes for key in route.seal_keys)
        except AdminClientError:
            pass  # revoked: the server ends the watch
        self.ended = True


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[tuple[AdminServer, Path, dict[str, tuple[str, str]]]]:
    db, policy = tmp_path / "admin.sqlite", tmp_path / "policy.yaml"
    policy.write_text(POLICY.format(probation=PROBATION))
    keys = {
        "alice": add_user(db, "alice", groups=("traders",)),
        "churner": add_user(db, "churner", groups=("traders",)),
        "mallory": add_user(db, "mallory", groups=("probation",)),
        "feed": add_user(db, "feed", roles=("adapter",)),
    }
    config = ServerConfig(port=0, database=db, policy=policy, channels=CHANNELS, policy_poll_s=0.05)
    server = AdminServer(config)
    await server.start()
    try:
        yield server, policy, keys
    finally:
        await server.stop(grace=None)


async def _churn(client: AdminClient, cycles: list[int], stop: asyncio.Event) -> None:
    for _ in range(MAX_CHURN):
        if stop.is_set():
            return
        subscription = await client.subscribe(["AAPL"])
        await asyncio.sleep(CHURN_EVERY_S / 2)  # the churn's own pace (a load loop, not a wait)
        await client.cancel(subscription.subscription_id)
        cycles[0] += 1
        await asyncio.sleep(CHURN_EVERY_S / 2)


async def test_a_revoked_multicast_subscriber_holds_no_key_in_use_while_others_churn(
    site: tuple[AdminServer, Path, dict[str, tuple[str, str]]],
) -> None:
    server, policy, keys = site
    hub, target = server.hub, f"127.0.0.1:{server.port}"
    assert hub is not None
    adapter = SealingAdapter()
    registration = AdapterRegistration(
        feed="EQUITIES",
        channel_name="EQ-A-M",
        channel_number=1,
        adapter_id="a",
        line_endpoint="epgm://127.0.0.1;239.192.1.1:7101",
        replay_endpoint="tcp://127.0.0.1:7100",
        role=AdapterRole.ACTIVE,
        term=1,
    )
    agent = RegistryAgent(
        target, registration, adapter.status, adapter.on_command, credentials=keys["feed"], interval_s=0.05
    )
    alice, mallory, cycles, stop = Holder(), Holder(), [0], asyncio.Event()
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(agent)
        clients = {
            name: await stack.enter_async_context(AdminClient(target, *keys[name]))
            for name in ("alice", "mallory", "churner")
        }
        await eventually(lambda: bool(adapter.sealed_with), what="the adapter told its first key")
        tasks = []
        for holder, name in ((alice, "alice"), (mallory, "mallory")):
            subscription = await clients[name].subscribe(["AAPL"])
            holder.keys.update(k.key_id for r in subscription.routes for k in r.seal_keys)
            tasks.append(asyncio.create_task(holder.watch(clients[name], subscription.subscription_id)))
        tasks.append(asyncio.create_task(_churn(clients["churner"], cycles, stop)))
        try:
            await eventually(lambda: cycles[0] >= 5, what="the churn under way")
            await eventually(
                lambda: adapter.sealed_with[-1][1] in mallory.keys, what="mallory holding the key in use"
            )
            policy.write_text(POLICY.format(probation=""))  # mallory's entitlement ends
            await eventually(lambda: mallory.ended, what="mallory's watch ended by the server")
            # The churn goes on, and still the adapter soon seals with a key mallory was never given.
            await eventually(
                lambda: adapter.sealed_with[-1][1] not in mallory.keys,
                timeout=20.0,
                what="a key mallory lacks in use",
            )
            churned = cycles[0]
            switched = len(adapter.sealed_with)
            await eventually(lambda: len(adapter.sealed_with) >= switched + 2, what="two more switches")
            assert cycles[0] > churned  # the switches came while the churn ran
            stop.set()
            await tasks[-1]
            # Alice, entitled throughout, was handed every key the adapter sealed with.
            await eventually(
                lambda: {key_id for _at, key_id in adapter.sealed_with} <= alice.keys,
                what="alice holding every key used",
            )
        finally:
            stop.set()
            for task in tasks:
                await cancel_and_wait(task)
    # Once the revocation was carried out, no key used after it ever reached mallory; alice had each.
    first = next(i for i, (_at, key_id) in enumerate(adapter.sealed_with) if key_id not in mallory.keys)
    assert all(key_id not in mallory.keys for _at, key_id in adapter.sealed_with[first:])
    assert hub.seals.rings["EQ-A-M"].rotations >= 3
