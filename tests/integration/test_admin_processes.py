"""The admin server and feedctl as real processes: feedctl lists and fails over, restart keeps state."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from feedha.admin_client import AdminClient, RegistryAgent
from feedha.proto.registry import AdapterRole, CommandKind, SyncStatus
from tests.integration.test_admin_server import POLICY, eventually, fake_adapter

BIN = Path(sys.executable).parent
CONFIG = """\
policy: policy.yaml
database: admin.sqlite
feeds:
  - name: EQUITIES
    channels:
      - {name: EQ-A-M, number: 1, source_stream: A-M, letters: A-M}
      - {name: EQ-N-Z, number: 2, source_stream: N-Z, letters: N-Z}
"""


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=60, env=env, check=False)


def add_user(workdir: Path, *args: str) -> tuple[str, str]:
    done = run(
        str(BIN / "feedha"), "admin-server", "add-user", *args, "--config", str(workdir / "admin.yaml")
    )
    assert done.returncode == 0, done.stderr
    fields = dict(line.split(": ", 1) for line in done.stdout.splitlines())
    return fields["key_id"], fields["secret"]


class ServerProcess:
    def __init__(self, workdir: Path) -> None:
        self.process = subprocess.Popen(
            [str(BIN / "feedha"), "admin-server", "--config", str(workdir / "admin.yaml"), "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # the server prints it once it serves
        match = re.fullmatch(r"listening on (\S+):(\d+)\n", line)
        assert match, f"unexpected first line {line!r}"
        self.target = f"127.0.0.1:{match.group(2)}"

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "admin.yaml").write_text(CONFIG)
    (tmp_path / "policy.yaml").write_text(POLICY)
    yield tmp_path


def _in_sync(server: Any, creds: tuple[str, str], adapter: str) -> bool:
    listed = feedctl(server.target, creds, "adapters")
    return any(r["adapter"] == adapter and r["sync"] == "in_sync" for r in json.loads(listed.stdout))


def feedctl(target: str, creds: tuple[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FEEDHA_KEY_ID": creds[0], "FEEDHA_SECRET": creds[1]}
    return run(str(BIN / "feedctl"), "--admin-server", target, "--json", *args, env=env)


@pytest.mark.slow  # 10 s: in CI's slow stage; the default keeps test_admin_cluster's listing and crash
async def test_feedctl_adapters_failover_and_restart(workdir: Path) -> None:
    ops = add_user(workdir, "ops", "--admin")
    feed = add_user(workdir, "feed", "--adapter")
    alice = add_user(workdir, "alice", "--group", "traders")
    server = ServerProcess(workdir)
    try:
        a, b = fake_adapter("a", AdapterRole.ACTIVE, term=3), fake_adapter("b", AdapterRole.BACKUP, term=3)
        agents = [
            RegistryAgent(
                server.target, f.registration, f.status, f.on_command, credentials=feed, interval_s=0.05
            )
            for f in (a, b)
        ]
        async with agents[0], agents[1]:
            await eventually(lambda: all(agent.is_connected for agent in agents))
            async with AdminClient(server.target, *alice) as client:
                subscription = await client.subscribe(["AAPL", "MSFT"])
            done = await asyncio.to_thread(feedctl, server.target, ops, "adapters")
            assert done.returncode == 0, done.stderr
            rows = {row["adapter"]: row for row in json.loads(done.stdout)}
            assert {k: (r["channel"], r["role"], r["term"], r["sync"], r["up"]) for k, r in rows.items()} == {
                "a": ("EQ-A-M", "active", 3, "in_sync", True),
                "b": ("EQ-A-M", "backup", 3, "in_sync", True),
            }
            # A backup not in sync is refused before anything is sent; --wait asks again until it is.
            b.sync = SyncStatus.SYNCING
            await eventually(lambda: not _in_sync(server, ops, "b"), what="b reported syncing")
            done = await asyncio.to_thread(feedctl, server.target, ops, "failover", "EQ-A-M")
            assert done.returncode == 1 and "NOT_IN_SYNC" in done.stderr and not a.commands
            waiting = await asyncio.create_subprocess_exec(
                str(BIN / "feedctl"), "--admin-server", server.target, "--json", "failover", "EQ-A-M",
                "--wait", "30", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                env={**os.environ, "FEEDHA_KEY_ID": ops[0], "FEEDHA_SECRET": ops[1]},
            )  # fmt: skip
            assert waiting.stderr is not None
            told = await asyncio.wait_for(waiting.stderr.readline(), 30)
            assert b"waiting (NOT_IN_SYNC)" in told and not a.commands
            b.sync = SyncStatus.IN_SYNC
            out, _err = await asyncio.wait_for(waiting.communicate(), 30)
            assert waiting.returncode == 0
            done = subprocess.CompletedProcess([], 0, out.decode(), "")
            assert sorted((r["adapter"], r["command"], r["term"]) for r in json.loads(done.stdout)) == [
                ("a", "demote", 4),
                ("b", "promote", 4),
            ]
            await eventually(lambda: a.commands and b.commands, what="commands")
            assert (a.commands[0].kind, b.commands[0].kind) == (CommandKind.DEMOTE, CommandKind.PROMOTE)
            assert not b.commands[0].force
            # --force reaches the adapter (which would refuse a plain PROMOTE while not in sync).
            done = await asyncio.to_thread(
                feedctl, server.target, ops, "failover", "EQ-A-M", "--to", "a", "--force"
            )
            assert done.returncode == 0, done.stderr
            await eventually(lambda: len(a.commands) == 2, what="forced promote")
            assert (a.commands[1].kind, a.commands[1].force, a.commands[1].term) == (
                CommandKind.PROMOTE,
                True,
                5,
            )
            assert "(forced)" in a.commands[1].reason
            denied = await asyncio.to_thread(feedctl, server.target, alice, "adapters")
            assert denied.returncode == 1 and "PERMISSION_DENIED" in denied.stderr
            purge = await asyncio.to_thread(
                feedctl, server.target, ops, "purge", "EQ-A-M", "0", "--reason", "r"
            )
            assert purge.returncode == 1 and "MSG_SEQ_ZERO" in purge.stderr
            server.kill()
            await eventually(lambda: not any(agent.is_connected for agent in agents), what="agents notice")
        server = ServerProcess(workdir)  # agents are gone: the registry must come from SQLite
        done = await asyncio.to_thread(feedctl, server.target, ops, "adapters")
        assert done.returncode == 0, done.stderr
        rows = {row["adapter"]: row for row in json.loads(done.stdout)}
        assert {k: (r["role"], r["term"], r["up"]) for k, r in rows.items()} == {
            "a": ("active", 5, False),
            "b": ("backup", 5, False),
        }
        done = await asyncio.to_thread(feedctl, server.target, ops, "subscriptions")
        assert [(s["subscription"], s["user"], s["symbols"]) for s in json.loads(done.stdout)] == [
            (subscription.subscription_id, "alice", ["AAPL", "MSFT"])
        ]
    finally:
        server.kill()


def test_plaintext_off_loopback_is_refused(workdir: Path) -> None:
    done = run(
        str(BIN / "feedha"), "admin-server", "--config", str(workdir / "admin.yaml"), "--host", "0.0.0.0"
    )
    assert done.returncode == 2
    assert "refusing plaintext gRPC on non-loopback address '0.0.0.0'" in done.stderr
    assert "--insecure" in done.stderr


def test_adapters_without_login_off_loopback_are_refused_at_start(workdir: Path) -> None:
    tls = ["--tls-cert", str(workdir / "admin.crt"), "--tls-key", str(workdir / "admin.key")]
    base = [str(BIN / "feedha"), "admin-server", "--config", str(workdir / "admin.yaml"), "--host", "0.0.0.0"]
    done = run(*base, *tls, "--no-adapter-auth")  # refused before any file is read or port bound
    assert done.returncode == 2
    assert "refusing adapter_auth: false on non-loopback address '0.0.0.0'" in done.stderr
    assert "--insecure" in done.stderr and "adapter_auth: true" in done.stderr


def test_feedctl_needs_credentials() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEEDHA_")}
    done = run(str(BIN / "feedctl"), "adapters", env=env)
    assert done.returncode == 2 and "credentials needed" in done.stderr


def test_rotate_key_replaces_secret(workdir: Path) -> None:
    key_id, secret = add_user(workdir, "ops", "--admin")
    done = run(
        str(BIN / "feedha"), "admin-server", "rotate-key", key_id, "--config", str(workdir / "admin.yaml")
    )
    assert done.returncode == 0, done.stderr
    new_secret = dict(line.split(": ", 1) for line in done.stdout.splitlines())["secret"]
    assert new_secret != secret
    server = ServerProcess(workdir)
    try:
        assert feedctl(server.target, (key_id, secret), "adapters").returncode == 1
        assert feedctl(server.target, (key_id, new_secret), "adapters").returncode == 0
    finally:
        server.kill()
