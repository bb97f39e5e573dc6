"""The abuse drill's sealed-churn attack: a revoked multicast subscriber while others subscribe and cancel.

A multicast channel's packet keys while a user subscribes and cancels every
``every_s``, and a subscriber that the operator revokes (its API key
rotated) keeps every key it was given and tries to open every packet.
Multicast does not run on loopback, so the sealed line is a stand-in adapter
in this process: it registers an ``epgm://`` line of the drill's channel
(under the cluster's adapter key, bound to it in the policy), seals a probe
packet every 20 ms with the key the admin server last told it to use
(``proto.seal``, as the adapters do), and the revoked subscriber opens what
it can. The subscriber is revoked while it reads (it opened the last probes),
and must open nothing sealed :data:`~admin_server.sealing.REVOKED_WITHIN_S`
after its revocation (before, the churn kept the keys from ever switching).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import grpc

from feedha.admin_client import AdminClient, AdminClientError, RegistryAgent
from feedha.admin_server import tokens
from feedha.admin_server.sealing import REVOKED_WITHIN_S
from feedha.admin_server.store import Store
from feedha.drills.abuse_attacks import CALL_TIMEOUT_S, _login_patiently, _reason
from feedha.proto import admin_pb2, admin_pb2_grpc
from feedha.proto.registry import (
    AdapterRegistration,
    AdapterRole,
    AdapterStatus,
    Command,
    CommandKind,
    SyncStatus,
)
from feedha.proto.seal import Opener, Sealer, SealError
from feedha.proto.wire import encode_packet
from feedha.transport.tasks import cancel_and_wait

__all__ = ["STAND_IN_NUMBER", "sealed_churn"]

STAND_IN_NUMBER: Final = 9  # the stand-in adapter's number in the channel (the cluster's are 1-3)
PROBE_EVERY_S: Final = 0.02
BEFORE_REVOKING_S: Final = 1.0  # the churn runs this long before the revocation
AFTER_REVOKING_S: Final = 4.0  # and this long after it
MAX_CHURNING: Final = 20  # Subscribe/Cancel cycles in flight at once (the churn keeps its pace)


class _StandIn:
    """A multicast adapter of the drill's channel in this process: it seals with what it is told."""

    def __init__(self, channel: str, number: int) -> None:
        self.registration = AdapterRegistration(
            feed="EQUITIES",
            channel_name=channel,
            channel_number=number,
            adapter_id=f"{channel}.{STAND_IN_NUMBER}",
            line_endpoint=f"epgm://127.0.0.1;239.192.0.{STAND_IN_NUMBER}:7199",  # never bound: see above
            replay_endpoint="",
            role=AdapterRole.BACKUP,
            term=1,
        )
        self.sealer: Sealer | None = None
        self.switches: list[tuple[float, int]] = []  # (monotonic time, key id) of each SEAL

    def status(self) -> AdapterStatus:
        return AdapterStatus(
            role=AdapterRole.BACKUP, term=1, next_msg_seq=1, sync_status=SyncStatus.IN_SYNC, health_score=50.0
        )

    async def on_command(self, command: Command) -> None:
        if command.kind is CommandKind.SEAL and command.seal_key is not None:
            self.sealer = Sealer(command.seal_key)
            self.switches.append((time.monotonic(), command.seal_key.key_id))


class _Revoked:
    """A subscriber that keeps every key it is ever given, and tries each packet with all of them."""

    def __init__(self) -> None:
        self.opener = Opener(keep=100_000)
        self.probes: list[tuple[float, bool]] = []  # (monotonic time, opened)
        self.watching = asyncio.Event()  # its route watch delivered the routes once

    def hold(self, routes: Sequence[Any]) -> None:
        for route in routes:
            for key in route.seal_keys:
                if key.key_id not in self.opener.key_ids():
                    self.opener.add(key)

    async def watch(self, client: AdminClient, subscription_id: str) -> None:
        with contextlib.suppress(AdminClientError):  # the server ends the watch once it sees the revocation
            async for update in client.watch_routes(subscription_id):
                self.hold(update.routes)
                self.watching.set()

    def is_reading(self, last: int = 5) -> bool:
        """Whether it opened each of the ``last`` probes."""
        return len(self.probes) >= last and all(opened for _at, opened in self.probes[-last:])

    def listen(self, packet: bytes) -> None:
        try:
            self.opener.open(packet)
            opened = True
        except SealError:
            opened = False
        self.probes.append((time.monotonic(), opened))


def sealed_churn(
    admin: str,
    *,
    feed_key: dict[str, str],
    victim_key: dict[str, str],
    churn_key: dict[str, str],
    workdir: Path,
    channel: str,
    number: int,
    every_s: float = 0.1,
) -> dict[str, Any]:
    """Churn every ``every_s`` on a sealed channel; a subscriber revoked meanwhile (see the module notes)."""
    # The cluster binds the feed user to adapters 1-3 of each channel: bind the stand-in too.
    policy = workdir / "policy.yaml"
    policy.write_text(policy.read_text().replace("ids: [1, 2, 3]", f"ids: [1, 2, 3, {STAND_IN_NUMBER}]"))
    stand_in, victim = _StandIn(channel, number), _Revoked()
    churn: Counter[str] = Counter()
    revoked_at: list[float] = []

    async def go() -> None:
        agent = RegistryAgent(
            admin,
            stand_in.registration,
            stand_in.status,
            stand_in.on_command,
            credentials=(feed_key["key_id"], feed_key["secret"]),
            interval_s=0.5,
        )
        async with agent, AdminClient(admin, victim_key["key_id"], victim_key["secret"]) as client:
            async with asyncio.timeout(60):
                while stand_in.sealer is None:
                    await asyncio.sleep(0.05)  # poll interval of a deadline-bounded wait
            subscription = await client.subscribe(["*"])
            victim.hold(subscription.routes)
            tasks = [asyncio.create_task(victim.watch(client, subscription.subscription_id))]
            try:
                async with asyncio.timeout(60):
                    await victim.watching.wait()
                tasks.append(asyncio.create_task(_probe(stand_in, victim, number)))
                tasks.append(asyncio.create_task(_churn(admin, churn_key, every_s, churn)))
                await asyncio.sleep(BEFORE_REVOKING_S)  # the attack's schedule, not a synchronization
                async with asyncio.timeout(60):  # revoked while it reads: what it reads on after counts
                    while not victim.is_reading():
                        await asyncio.sleep(PROBE_EVERY_S)  # poll interval of a deadline-bounded wait
                revoked_at.append(_revoke(workdir / "admin.sqlite", victim_key["key_id"]))
                await asyncio.sleep(AFTER_REVOKING_S)
            finally:
                for task in tasks:
                    await cancel_and_wait(task)

    asyncio.run(go())
    return _sealed_report(stand_in, victim, revoked_at[0] if revoked_at else time.monotonic(), churn)


async def _probe(stand_in: _StandIn, victim: _Revoked, number: int) -> None:
    seq = 0
    while True:
        seq += 1
        packet = encode_packet(
            channel=number,
            adapter=STAND_IN_NUMBER,
            term=1,
            first_seq=seq,
            blocks=[(1, seq, b"probe")],
            send_time_ns=time.time_ns(),
        )
        assert stand_in.sealer is not None
        victim.listen(stand_in.sealer.seal(packet))
        await asyncio.sleep(PROBE_EVERY_S)


async def _churn(admin: str, key: dict[str, str], every_s: float, outcomes: Counter[str]) -> None:
    # A cycle starts every every_s whatever the calls' latency (at most MAX_CHURNING in flight).
    async with grpc.aio.insecure_channel(admin) as channel:
        md = await _login_patiently(channel, key)
        broker = admin_pb2_grpc.StreamBrokerStub(channel)  # type: ignore[no-untyped-call]
        slots = asyncio.Semaphore(MAX_CHURNING)

        async def cycle() -> None:
            async with slots:
                try:
                    reply = await broker.Subscribe(
                        admin_pb2.SubscribeRequest(symbols=["*"]), metadata=md, timeout=CALL_TIMEOUT_S
                    )
                    await asyncio.sleep(every_s / 2)
                    await broker.Cancel(
                        admin_pb2.CancelRequest(subscription_id=reply.subscription_id),
                        metadata=md,
                        timeout=CALL_TIMEOUT_S,
                    )
                    outcomes["OK"] += 1
                except grpc.aio.AioRpcError as exc:
                    outcomes[_reason(exc)] += 1

        cycles: set[asyncio.Task[None]] = set()
        try:
            while True:
                if len(cycles) < MAX_CHURNING:
                    task = asyncio.create_task(cycle())
                    cycles.add(task)
                    task.add_done_callback(cycles.discard)
                await asyncio.sleep(every_s)
        finally:
            for task in list(cycles):
                await cancel_and_wait(task)


def _revoke(database: Path, key_id: str) -> float:
    """Rotate the key as ``feedha admin-server rotate-key`` does; the moment it took effect."""
    hasher = tokens.make_hasher(time_cost=1, memory_kib=8, parallelism=1)
    store = Store(database)
    try:
        store.replace_secret(
            key_id, secret_hash=tokens.hash_secret(secrets.token_urlsafe(32), hasher=hasher), now=time.time()
        )
    finally:
        store.close()
    return time.monotonic()


def _sealed_report(
    stand_in: _StandIn, victim: _Revoked, revoked_at: float, churn: Counter[str]
) -> dict[str, Any]:
    after = [(at - revoked_at, opened) for at, opened in victim.probes if at >= revoked_at]
    opened_after = [since for since, opened in after if opened]
    before = [opened for at, opened in victim.probes if at < revoked_at]
    return {
        "probes": len(victim.probes),
        "reading_at_revocation": bool(before) and before[-1],
        "opened_before_revocation": sum(opened for at, opened in victim.probes if at < revoked_at),
        "probes_after_revocation": len(after),
        "opened_after_revocation": len(opened_after),
        "last_opened_after_s": round(max(opened_after, default=0.0), 3),
        "opened_after_bound": sum(since >= REVOKED_WITHIN_S for since in opened_after),
        "probes_after_bound": sum(since >= REVOKED_WITHIN_S for since, _opened in after),
        "bound_s": REVOKED_WITHIN_S,
        "key_switches_after_revocation": sum(at >= revoked_at for at, _key in stand_in.switches),
        "keys_held": len(victim.opener.key_ids()),
        "churn": dict(churn),
        "revoked_at": round(time.time() - (time.monotonic() - revoked_at), 1),  # wall clock
    }
