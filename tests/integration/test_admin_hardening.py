"""The admin server as a real process: private files, the signing key file, glob containment,
delayed-only routes without real-time endpoints, login backoff per address and audited failures."""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from feedha.admin_client import RegistryAgent
from feedha.admin_server import keyfile, tokens
from feedha.admin_server.backoff import ADDRESS_BURST, ADDRESS_RATE_PER_S
from feedha.admin_server.store import Store
from feedha.proto import admin_pb2, admin_pb2_grpc
from feedha.proto.registry import AdapterRole
from tests.integration.test_admin_processes import BIN, ServerProcess, add_user, run
from tests.integration.test_admin_server import eventually, fake_adapter

CONFIG = """\
policy: policy.yaml
database: admin.sqlite
secret_hashing: {time_cost: 1, memory_kib: 8, parallelism: 1}
feeds:
  - name: EQUITIES
    channels:
      - {name: EQ-A-M, number: 1, source_stream: A-M, letters: A-M}
      - {name: EQ-N-Z, number: 2, source_stream: N-Z, letters: N-Z}
"""
POLICY = """\
groups:
  traders: {}
  narrow: {}
  delayed: {}
rules:
  - groups: [traders]
    symbols: ["*"]
    mode: realtime
  - groups: [narrow]
    symbols: ["A?"]
    mode: realtime
  - groups: [delayed]
    symbols: ["*"]
    mode: delayed
adapters:
  feed: {channels: [EQ-A-M], ids: [a, b]}
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "admin.yaml").write_text(CONFIG)
    (tmp_path / "policy.yaml").write_text(POLICY)
    old = os.umask(0o022)  # the usual umask: the server must not rely on a strict one
    try:
        yield tmp_path
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def login(channel: grpc.aio.Channel, key_id: str, secret: str) -> tuple[tuple[str, str], ...]:
    reply = await admin_pb2_grpc.AdminAuthStub(channel).Login(
        admin_pb2.LoginRequest(key_id=key_id, secret=secret)
    )
    return (("authorization", f"Bearer {reply.token}"),)


def test_files_are_private_the_key_moves_out_of_the_database_and_a_loose_key_is_refused(
    workdir: Path,
) -> None:
    alice = add_user(workdir, "alice", "--group", "traders")
    db = workdir / "admin.sqlite"
    store = Store(db)  # a database from before the key file: the key inside it
    old_key = store.set_meta_if_absent(keyfile.LEGACY_SIGNING_KEY_META, tokens.new_signing_key())
    store.close()
    old_token, _ = tokens.TokenSigner(old_key).issue(user="alice", key_id=alice[0], now=time.time())
    server = ServerProcess(workdir)
    try:
        key_file = workdir / "admin.sqlite.signing-key"
        files = [db, workdir / "admin.sqlite-wal", workdir / "admin.sqlite-shm", key_file]
        assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}
        assert bytes.fromhex(key_file.read_text()) == old_key

        async def subscribe_with_old_token() -> admin_pb2.SubscribeResponse:
            async with grpc.aio.insecure_channel(server.target) as channel:
                metadata = (("authorization", f"Bearer {old_token}"),)
                request = admin_pb2.SubscribeRequest(symbols=["AAPL"])
                reply: admin_pb2.SubscribeResponse = await admin_pb2_grpc.StreamBrokerStub(channel).Subscribe(
                    request, metadata=metadata
                )
                return reply

        assert asyncio.run(subscribe_with_old_token()).subscription_id  # issued before the move: still good
    finally:
        server.kill()
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as readonly:
        assert readonly.execute("SELECT key FROM meta WHERE key = 'token_signing_key'").fetchall() == []
    key_file.chmod(0o644)
    done = run(str(BIN / "feedha"), "admin-server", "--config", str(workdir / "admin.yaml"), "--port", "0")
    assert done.returncode == 2
    assert f"signing key file {key_file} is accessible by group or others (mode 0644)" in done.stderr
    assert f"chmod 600 {key_file}" in done.stderr


async def test_delayed_only_routes_carry_no_real_time_endpoint_and_a_question_mark_grant_admits_no_star(
    workdir: Path,
) -> None:
    feed = add_user(workdir, "feed", "--adapter")
    keys = {name: add_user(workdir, name, "--group", name) for name in ("traders", "narrow", "delayed")}
    server = ServerProcess(workdir)
    a, b = fake_adapter("a", AdapterRole.ACTIVE), fake_adapter("b", AdapterRole.BACKUP)
    agent_a = RegistryAgent(
        server.target, a.registration, a.status, a.on_command, credentials=feed, interval_s=0.05
    )
    agent_b = RegistryAgent(
        server.target, b.registration, b.status, b.on_command, credentials=feed, interval_s=0.05
    )
    endpoints = re.compile(r"tcp://127\.0\.0\.1:7[01]00/")
    try:
        async with agent_a, grpc.aio.insecure_channel(server.target) as channel:
            await eventually(lambda: agent_a.is_connected, what="adapter a registered")
            broker = admin_pb2_grpc.StreamBrokerStub(channel)
            md = {name: await login(channel, *creds) for name, creds in keys.items()}
            trader = await broker.Subscribe(
                admin_pb2.SubscribeRequest(symbols=["AAPL"]), metadata=md["traders"]
            )
            assert [line.adapter_id for line in trader.routes[0].lines] == ["a"]  # the endpoints are there

            delayed = await broker.Subscribe(
                admin_pb2.SubscribeRequest(symbols=["AAPL", "A*", "N*"]), metadata=md["delayed"]
            )
            assert [(r.channel_name, r.delayed, len(r.lines)) for r in delayed.routes] == [
                ("EQ-A-M", True, 0),
                ("EQ-N-Z", True, 0),
            ]
            assert not endpoints.search(str(delayed))
            watches = {
                name: broker.WatchRoutes(
                    admin_pb2.WatchRoutesRequest(subscription_id=reply.subscription_id), metadata=md[name]
                )
                for name, reply in (("traders", trader), ("delayed", delayed))
            }
            seen: dict[str, list[admin_pb2.WatchRoutesResponse]] = {"traders": [], "delayed": []}

            async def follow(name: str) -> None:
                async for update in watches[name]:
                    seen[name].append(update)

            tasks = [asyncio.create_task(follow(name)) for name in watches]
            await eventually(lambda: all(seen.values()), what="current routes")
            async with agent_b:  # a new line on the channel: the trader hears of it, the delayed user not
                await eventually(
                    lambda: any(len(u.routes[0].lines) == 2 for u in seen["traders"]), what="trader update"
                )
                await asyncio.sleep(0.3)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            assert endpoints.search(str(seen["traders"][-1]))
            assert seen["delayed"] and all(
                not route.lines for update in seen["delayed"] for route in update.routes
            )
            assert not endpoints.search("".join(str(update) for update in seen["delayed"]))

            with pytest.raises(grpc.aio.AioRpcError) as denied:
                await broker.Subscribe(admin_pb2.SubscribeRequest(symbols=["A*"]), metadata=md["narrow"])
            assert denied.value.code() is grpc.StatusCode.PERMISSION_DENIED
            assert "not entitled to: A*" in (denied.value.details() or "")
            # Entitled to A? only, it would read all of EQ-A-M on the line: refused, the channel named.
            with pytest.raises(grpc.aio.AioRpcError) as exposed:
                await broker.Subscribe(
                    admin_pb2.SubscribeRequest(symbols=["A?", "AB"]), metadata=md["narrow"]
                )
            assert exposed.value.code() is grpc.StatusCode.PERMISSION_DENIED
            assert "channel EQ-A-M carries [A-M]*" in (exposed.value.details() or "")
    finally:
        server.kill()


FREE = int(ADDRESS_BURST)


async def test_failed_logins_are_throttled_per_address_and_audited(workdir: Path) -> None:
    alice = add_user(workdir, "alice", "--group", "traders")
    server = ServerProcess(workdir)
    try:
        async with grpc.aio.insecure_channel(server.target) as channel:
            auth = admin_pb2_grpc.AdminAuthStub(channel)
            codes, retry_in = [], 0.0

            async def attempt(i: int) -> None:  # a broken client: a fresh made-up key id each time
                nonlocal retry_in
                try:
                    request = admin_pb2.LoginRequest(key_id=f"fk_bogus{i}", secret="x")
                    await auth.Login(request, timeout=2.0)  # a refusal is held in the tarpit until then
                except grpc.aio.AioRpcError as exc:
                    codes.append(exc.code())
                    if match := re.search(r"retry in ([\d.]+) s", exc.details() or ""):
                        retry_in = float(match.group(1))

            for i in range(FREE):
                await attempt(i)
            # Then five at once (one after another, each held refusal would outlast the address's
            # next token: the tarpit holds a refusal for the wait it announces).
            await asyncio.gather(*(attempt(FREE + i) for i in range(5)))
            assert codes[:FREE] == [grpc.StatusCode.UNAUTHENTICATED] * FREE
            assert codes[FREE:] == [grpc.StatusCode.RESOURCE_EXHAUSTED] * 5  # rate-limited per address
            assert 0 < retry_in <= 1.0 / ADDRESS_RATE_PER_S + 0.1
            # Its neighbour behind the same address logs in at once: a key in good standing is never held.
            await auth.Login(admin_pb2.LoginRequest(key_id=alice[0], secret=alice[1]))
            for _ in range(3):
                with pytest.raises(grpc.aio.AioRpcError):
                    await auth.Login(admin_pb2.LoginRequest(key_id=alice[0], secret="wrong"))
    finally:
        server.kill()
    with sqlite3.connect(f"file:{workdir / 'admin.sqlite'}?mode=ro", uri=True) as readonly:
        rows = readonly.execute(
            "SELECT user, target, detail, count FROM audit WHERE action = 'login-failed' ORDER BY id"
        ).fetchall()
    bogus = [row for row in rows if row[1].startswith("fk_bogus")]
    assert len(bogus) == FREE + 5  # one row per key id and address (no repeats to collapse)
    assert {row[2] for row in bogus} == {"from 127.0.0.1: unknown key id", "from 127.0.0.1: throttled"}
    mine = [row for row in rows if row[1] == alice[0]]
    assert mine and mine[0][:3] == ("alice", alice[0], "from 127.0.0.1: wrong secret")
    assert sum(row[3] for row in mine) == 3  # collapsed into counted rows
