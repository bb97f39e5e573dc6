"""The admin server with TLS and client certificates; adapter keys bound to their adapters (real processes).

A CA, a server certificate and client certificates are made here with
``cryptography``; the server requires client certificates (``tls_client_ca``).
``feedctl`` works with a client certificate and is refused without one; an
adapter process registers over TLS with ``--admin-tls-*``; and a valid
adapter key used for another channel or another adapter id (route poisoning)
is refused, audited, and never shows up in a subscriber's routes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

from feedha.admin_client import AdminClient, tls_from_files
from feedha.cluster import GroupPlan, plan_group, start_adapter
from feedha.ports import free_ports
from feedha.procs import JsonProcess
from tests.integration.certs import Authority, Pair
from tests.integration.test_admin_server import add_user
from tests.integration.waiting import wait_until

WAIT = 60.0  # generous: a loaded 2-core machine
CONFIG = """\
policy: policy.yaml
database: admin.sqlite
secret_hashing: {{time_cost: 1, memory_kib: 8, parallelism: 1}}
tls_cert: {server.cert}
tls_key: {server.key}
tls_client_ca: {ca}
feeds:
  - name: EQUITIES
    channels:
      - {{name: EQ-A-M, number: 1, source_stream: A-M, letters: A-M}}
      - {{name: EQ-N-Z, number: 2, source_stream: N-Z, letters: N-Z}}
"""
POLICY = """\
groups:
  traders: {}
rules:
  - groups: [traders]
    symbols: ["*"]
    mode: realtime
adapters:
  feed-a: {channels: [EQ-A-M], ids: [1]}
  feed-n: {channels: [EQ-N-Z], ids: [1, 2, 3]}
"""


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )


@dataclass
class Cluster:
    workdir: Path
    log: IO[str]
    ca: Path
    client: Pair
    stranger: Pair  # a client certificate from another CA
    target: str = ""
    keys: dict[str, tuple[str, str]] = field(default_factory=dict)
    procs: list[JsonProcess] = field(default_factory=list)

    def feedctl(self, *args: str, tls: tuple[str, ...] | None = None) -> subprocess.CompletedProcess[str]:
        key_id, secret = self.keys["ops"]
        env = {**os.environ, "FEEDHA_KEY_ID": key_id, "FEEDHA_SECRET": secret}
        if tls is None:
            tls = (
                "--tls-ca",
                str(self.ca),
                "--tls-cert",
                str(self.client.cert),
                "--tls-key",
                str(self.client.key),
            )
        return run(
            "-m", "feedha.admin_server.feedctl", "--admin-server", self.target, *tls, "--json", *args, env=env
        )

    def adapters(self) -> dict[str, dict[str, Any]]:
        done = self.feedctl("adapters")
        assert done.returncode == 0, done.stderr
        return {row["adapter"]: row for row in json.loads(done.stdout)}

    def refusals(self) -> list[tuple[str, str, str]]:
        with sqlite3.connect(self.workdir / "admin.sqlite", timeout=10) as db:
            rows = db.execute("SELECT user, target, detail FROM audit WHERE action = 'register-refused'")
            return [(str(u), str(t), str(d)) for u, t, d in rows]

    def adapter(self, user: str, group: GroupPlan, number: int, *, tls: bool = True) -> JsonProcess:
        key_id, secret = self.keys[user]
        extra = ["--admin", self.target, "--admin-key-id", key_id]
        if tls:
            extra += ["--admin-tls-ca", str(self.ca)]
            extra += ["--admin-tls-cert", str(self.client.cert), "--admin-tls-key", str(self.client.key)]
        env = {"FEEDHA_ADAPTER_SECRET": secret}
        proc = start_adapter(group, number, active=True, extra=extra, log=self.log, env=env)
        self.procs.append(proc)
        return proc


def _group(channel: str, number: int) -> GroupPlan:
    source = f"tcp://127.0.0.1:{free_ports(1)[0]}"  # nothing publishes: these tests are about the registry
    letters = channel.removeprefix("EQ-")
    return plan_group(
        channel=channel,
        channel_number=number,
        source_endpoint=source,
        source_stream=letters,
        source_stream_number=number,
        size=3,
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("admin-tls")
    authority = Authority(workdir)
    server = authority.issue("server", "feedha-admin", server=True)
    client = authority.issue("client", "ops", server=False)
    stranger = Authority(workdir, "another CA").issue("stranger", "ops", server=False)
    (workdir / "admin.yaml").write_text(CONFIG.format(server=server, ca=authority.ca))
    (workdir / "policy.yaml").write_text(POLICY)
    with open(workdir / "processes.log", "w") as log:
        c = Cluster(workdir, log, authority.ca, client, stranger)
        database = workdir / "admin.sqlite"  # in this process: the add-user command has its own tests
        c.keys["ops"] = add_user(database, "ops", roles=("admin",))
        c.keys["carol"] = add_user(database, "carol", groups=("traders",))
        c.keys["feed-a"] = add_user(database, "feed-a", roles=("adapter",))
        c.keys["feed-n"] = add_user(database, "feed-n", roles=("adapter",))
        command = [sys.executable, "-m", "feedha", "admin-server", "--config", str(workdir / "admin.yaml")]
        admin = JsonProcess("admin-server", [*command, "--port", "0"], log=log)
        c.procs.append(admin)
        try:
            line = wait_until(
                lambda: next((t for t in admin.text if "listening on" in t), None), WAIT, "the server"
            )
            match = re.search(r"listening on \S+:(\d+)", line)
            assert match, line
            c.target = f"127.0.0.1:{match.group(1)}"
            yield c
        finally:
            for proc in reversed(c.procs):
                proc.kill()


def test_feedctl_needs_a_client_certificate_the_server_trusts(cluster: Cluster) -> None:
    done = cluster.feedctl("adapters")
    assert done.returncode == 0, done.stderr
    assert isinstance(json.loads(done.stdout), list)
    ca = ("--tls-ca", str(cluster.ca))
    stranger = ("--tls-cert", str(cluster.stranger.cert), "--tls-key", str(cluster.stranger.key))
    for tls in [ca, (*ca, *stranger), ()]:  # no certificate, an untrusted one, plaintext
        refused = cluster.feedctl("adapters", tls=tls)
        assert refused.returncode == 2, (tls, refused.stdout, refused.stderr)
        assert "UNAVAILABLE" in refused.stderr and not refused.stdout
    half = cluster.feedctl("adapters", tls=(*ca, "--tls-cert", str(cluster.client.cert)))
    assert half.returncode == 2 and "both cert and key" in half.stderr


def test_adapter_registers_over_tls_and_a_key_registers_only_its_adapters(cluster: Cluster) -> None:
    eq_a, eq_n = _group("EQ-A-M", 1), _group("EQ-N-Z", 2)
    honest = cluster.adapter("feed-a", eq_a, 1)
    honest.wait_event("ready", WAIT)
    wait_until(lambda: cluster.adapters().get("EQ-A-M.1", {}).get("up"), WAIT, "EQ-A-M.1 registered over TLS")
    tls = tls_from_files(cluster.ca, cluster.client.cert, cluster.client.key)
    carol = cluster.keys["carol"]
    seen: list[set[str]] = []

    async def subscriber() -> None:
        async with AdminClient(cluster.target, *carol, tls=tls) as client:
            subscription = await client.subscribe(["*"])
            seen.append({line.adapter_id for route in subscription.routes for line in route.lines})
            updates = client.watch_routes(subscription.subscription_id)

            async def watch() -> None:
                async for update in updates:
                    seen.append({line.adapter_id for route in update.routes for line in route.lines})

            watcher = asyncio.create_task(watch())
            try:
                # feed-a's valid key, used for another channel and for an adapter id it is not bound to:
                poisoners = [cluster.adapter("feed-a", eq_n, 1), cluster.adapter("feed-a", eq_a, 2)]
                await asyncio.to_thread(
                    wait_until,
                    lambda: len({t for _u, t, _d in cluster.refusals()}) == 2,
                    WAIT,
                    "both refusals",
                )
                await asyncio.sleep(2.0)  # the poisoners keep retrying; the routes must stay clean
                assert all(p.alive for p in poisoners)
            finally:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
                await updates.aclose()  # type: ignore[attr-defined]

    asyncio.run(subscriber())
    refusals = cluster.refusals()
    assert {(user, target) for user, target, _detail in refusals} == {
        ("feed-a", "EQ-N-Z.1"),
        ("feed-a", "EQ-A-M.2"),
    }
    assert all("not bound" in detail for _u, _t, detail in refusals)
    assert seen and all(ids == {"EQ-A-M.1"} for ids in seen), seen
    assert set(cluster.adapters()) == {"EQ-A-M.1"}
    # The same key on its own adapter works; feed-n registers EQ-N-Z's.
    cluster.adapter("feed-n", eq_n, 2)
    wait_until(lambda: cluster.adapters().get("EQ-N-Z.2", {}).get("up"), WAIT, "EQ-N-Z.2 registered")


def test_feedha_subscribe_logs_in_with_a_client_certificate(cluster: Cluster) -> None:
    key_id, secret = cluster.keys["carol"]
    key_file = cluster.workdir / "carol.json"
    key_file.write_text(json.dumps({"admin": cluster.target, "key_id": key_id, "secret": secret}))
    tls = [
        "--tls-ca",
        str(cluster.ca),
        "--tls-cert",
        str(cluster.client.cert),
        "--tls-key",
        str(cluster.client.key),
    ]
    argv = ["-m", "feedha", "subscribe", "--key-file", str(key_file), "--channel", "EQ-A-M"]
    done = run(*argv, "--seconds", "1", "--json", *tls)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    assert (summary["event"], summary["channel"]) == ("Summary", "EQ-A-M")
    half = run(*argv, "--seconds", "1", *tls[:4])
    assert half.returncode == 2 and "both cert and key" in half.stderr
