"""The admin server with a running adapter group, all real processes: FeedClient, feedctl, restart.

One module-scoped cluster: the admin server (``feedha admin-server``, cheap
argon2 cost from its config so logins take milliseconds), the plain source
on one source stream, and an adapter group of two for channel EQ-A-M
registered with ``--admin``. Subscribers are :class:`client_lib.FeedClient`
in this process. The tests run in file order: the failover test leaves
adapter 2 active, which the restart test does not mind.

Token expiry, forged tokens, a malformed policy file and a non-admin on an
admin RPC are covered by ``test_admin_server.py`` and ``test_admin_processes.py``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

from feedha.client import AuthenticationFailed, Delivery, FeedClient, PermissionDenied, SubscriberConfig
from feedha.cluster import GroupPlan, plan_group, start_adapter
from feedha.ports import free_ports
from feedha.procs import JsonProcess
from tests.integration.test_admin_server import add_user
from tests.integration.waiting import wait_until

BIN = Path(sys.executable).parent
CHANNEL = "EQ-A-M"
WAIT = 60.0  # deadline of each wait: generous, for a loaded 2-core machine
# Fast enough for a short crash test, slow enough that a loaded machine does not fail over by itself.
FAST = ["--heartbeat-timeout", "1.0", "--desync-window", "30"]
CONFIG = """\
policy: policy.yaml
database: admin.sqlite
policy_poll_s: 0.1
secret_hashing: {time_cost: 1, memory_kib: 8, parallelism: 1}
feeds:
  - name: EQUITIES
    channels:
      - {name: EQ-A-M, number: 1, source_stream: A-M, letters: A-M}
"""
POLICY = """\
groups:
  operators: {roles: [admin]}
  adapters: {roles: [adapter]}
  traders: {}
  everything: {}
rules:
  - groups: [traders]
    symbols: ["A*", "B*"]
    mode: realtime
  - groups: [everything]
    symbols: ["*"]
    mode: realtime
adapters:
  feed: {channels: [EQ-A-M], ids: [1, 2, 3]}
"""


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=60, env=env, check=False)


class AdminProcess:
    """``feedha admin-server`` as a child; ``port=0`` picks a port, a restart passes the old one."""

    def __init__(self, workdir: Path, port: int, log: IO[str]) -> None:
        argv = [str(BIN / "feedha"), "admin-server", "--config", str(workdir / "admin.yaml")]
        self.process = subprocess.Popen(
            [*argv, "--port", str(port)], stdout=subprocess.PIPE, stderr=log, text=True
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # printed once it serves
        match = re.fullmatch(r"listening on (\S+):(\d+)\n", line)
        if match is None:
            self.kill()
            raise AssertionError(f"admin server did not start: {line!r}")
        self.port = int(match.group(2))
        self.target = f"127.0.0.1:{self.port}"

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        if self.process.stdout is not None:
            self.process.stdout.close()


@dataclass
class Cluster:
    workdir: Path
    log: IO[str]
    admin: AdminProcess
    group: GroupPlan
    keys: dict[str, tuple[str, str]]
    adapters: dict[int, JsonProcess] = field(default_factory=dict)
    source: JsonProcess | None = None

    def feedctl(self, *args: str, user: str = "ops") -> Any:
        key_id, secret = self.keys[user]
        env = {**os.environ, "FEEDHA_KEY_ID": key_id, "FEEDHA_SECRET": secret}
        done = run(str(BIN / "feedctl"), "--admin-server", self.admin.target, "--json", *args, env=env)
        assert done.returncode == 0, f"feedctl {' '.join(args)}: rc={done.returncode} {done.stderr}"
        return json.loads(done.stdout) if done.stdout.strip() else None

    def adapters_by_id(self) -> dict[str, dict[str, Any]]:
        return {row["adapter"]: row for row in self.feedctl("adapters")}

    def client(self, user: str) -> FeedClient:
        # A loaded 2-core machine can stall a process for a while: be generous before declaring loss.
        config = SubscriberConfig(fill_timeout=0.5, loss_timeout=5.0)
        return FeedClient(self.admin.target, *self.keys[user], config=config, retry_deadline_s=20)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("admin-cluster")
    (workdir / "admin.yaml").write_text(CONFIG)
    (workdir / "policy.yaml").write_text(POLICY)
    database = workdir / "admin.sqlite"  # in this process: the add-user command has its own tests
    keys = {
        "ops": add_user(database, "ops", groups=("operators",)),
        "feed": add_user(database, "feed", roles=("adapter",)),
        "alice": add_user(database, "alice", groups=("traders",)),
        "carol": add_user(database, "carol", groups=("everything",)),
    }
    source_endpoint = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    group = plan_group(
        channel=CHANNEL,
        channel_number=1,
        source_endpoint=source_endpoint,
        source_stream="A-M",
        source_stream_number=1,
        size=3,  # adapter 3 joins later (test_a_new_line_is_joined_...)
        journal_root=workdir / "journals",  # so each line also has a replay service
    )
    with open(workdir / "processes.log", "w") as log:
        c = Cluster(workdir, log, AdminProcess(workdir, 0, log), group, keys)
        try:
            admin_args = ["--admin", c.admin.target, "--admin-key-id", keys["feed"][0]]
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("FEEDHA_ADAPTER_SECRET", keys["feed"][1])
                for number in (1, 2):  # one at a time: the active first, so the backup hears it
                    proc = start_adapter(group, number, active=number == 1, extra=FAST + admin_args, log=log)
                    c.adapters[number] = proc
                    proc.wait_event("ready", WAIT)
                    if number == 1:
                        proc.wait_for(lambda e: e.get("event") == "role" and e.get("new") == "active", 10)
            c.source = JsonProcess.python(
                "source",
                "feedha.plain_source",
                [
                    *("--endpoint", f"A-M={source_endpoint}", "--streams", "A-M"),
                    *("--rate", "1000", "--seconds", "600", "--symbols", "26"),
                    *("--wait-subscribers", "2", "--wait-timeout", "30"),
                ],
                log=log,
            )
            yield c
        finally:
            for proc in [*c.adapters.values(), *([c.source] if c.source else [])]:
                proc.kill()
            c.admin.kill()


def collect(client: FeedClient, into: list[Delivery], until: Callable[[], bool], timeout: float) -> None:
    """Poll the client into ``into`` until ``until()`` holds (checked between polls)."""
    deadline = time.monotonic() + timeout
    while not until():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached in {timeout:.0f} s; {client!r} {client.stats()}")
        into.extend(client.poll(0.1))


def assert_gap_free(deliveries: list[Delivery]) -> None:
    """Every msg_seq and source_seq once and in order, from the first received to the last."""
    msg_seqs = [d.msg_seq for d in deliveries]
    source_seqs = [d.source_seq for d in deliveries]
    assert msg_seqs == list(range(msg_seqs[0], msg_seqs[0] + len(msg_seqs))), "msg_seq lost/repeated"
    assert source_seqs == list(range(source_seqs[0], source_seqs[0] + len(source_seqs))), "source_seq"


def test_feedctl_adapters_lists_the_running_group(cluster: Cluster) -> None:
    def group_ready() -> dict[str, dict[str, Any]] | None:
        rows = cluster.adapters_by_id()
        ok = len(rows) == 2 and all(
            r["up"] and r["sync"] == "in_sync" and r["msg_seq"] > 1 for r in rows.values()
        )
        return rows if ok else None

    rows = wait_until(group_ready, 60, "both adapters up, in sync and publishing")
    assert set(cluster.group.lines[:2]) == {r["line"] for r in rows.values()}
    assert {r["channel"] for r in rows.values()} == {CHANNEL}
    # Adapter 1 started first as the active; on a badly loaded machine the
    # backup may have taken over already, so check the shape, not the names.
    assert sorted(r["role"] for r in rows.values()) == ["active", "backup"]
    assert rows["EQ-A-M.1"]["term"] == rows["EQ-A-M.2"]["term"] >= 1


def test_user_receives_only_entitled_symbols(cluster: Cluster) -> None:
    with cluster.client("alice") as client:
        with pytest.raises(PermissionDenied) as denied:
            client.subscribe(["A*", "CAA", "MAA"])
        assert denied.value.symbols == ("CAA", "MAA") and "not entitled to: CAA, MAA" in str(denied.value)
        # Entitled to A* and B* only, alice would read all of A-M on the channel's lines: refused.
        with pytest.raises(PermissionDenied) as exposed:
            client.subscribe(["A*", "BAA"])
        assert (
            exposed.value.reason == "CHANNEL_NOT_ENTITLED" and exposed.value.metadata["exposes"] == "[A-M]*"
        )
    with cluster.client("carol") as client:  # entitled to everything, asking for two symbols' worth
        subscription = client.subscribe(["A*", "BAA"])
        (route,) = subscription.routes
        assert (route.channel_name, route.symbols, route.delayed) == (CHANNEL, ("A*", "BAA"), False)
        assert {line.replay_endpoint for line in route.lines} == set(cluster.group.replays[:2])
        got: list[Delivery] = []
        collect(client, got, lambda: len(got) >= 100, WAIT)
        stats = client.stats()
    symbols = {d.update.symbol for d in got}
    assert symbols == {"AAA", "BAA"}, symbols  # 26 symbols: AAA, BAA, ..., MAA on this stream
    assert stats.filtered > stats.delivered  # C..M were on the lines, and dropped
    assert stats.lines == 2 and stats.channels[CHANNEL].lost == 0
    # Nothing missing: delivered + filtered cover every msg_seq from the first to the last.
    seqs = [d.msg_seq for d in got]
    assert seqs == sorted(set(seqs))
    assert stats.delivered + stats.filtered >= seqs[-1] - seqs[0] + 1
    assert repr(client).startswith("<FeedClient [closed")


def test_bad_credentials_are_refused(cluster: Cluster) -> None:
    key_id, _secret = cluster.keys["alice"]
    with pytest.raises(AuthenticationFailed, match="invalid API key secret") as info:
        FeedClient(cluster.admin.target, key_id, "wrong-secret")
    assert info.value.code == "UNAUTHENTICATED"
    with pytest.raises(AuthenticationFailed, match="unknown API key id 'fk_nobody'"):
        FeedClient(cluster.admin.target, "fk_nobody", "whatever")
    with FeedClient(cluster.admin.target, *cluster.keys["alice"]) as client:  # clears the login backoff
        assert client.stats().subscription_id == ""


def test_feedctl_failover_loses_nothing_at_a_feed_client(cluster: Cluster) -> None:
    def with_a_backup_in_sync() -> dict[str, dict[str, Any]] | None:
        # Run first in the module, the group may not have reported its backups in sync yet.
        found = cluster.adapters_by_id()
        in_sync = any(r["role"] == "backup" and r["sync"] == "in_sync" for r in found.values())
        return found if in_sync else None

    before = wait_until(with_a_backup_in_sync, WAIT, "a backup in sync")
    active = next(k for k, r in before.items() if r["role"] == "active")
    backup = next(k for k, r in before.items() if r["role"] == "backup" and r["sync"] == "in_sync")
    with cluster.client("carol") as client:
        client.subscribe(["*"])
        got: list[Delivery] = []
        collect(client, got, lambda: len(got) >= 300, WAIT)
        feedctl = subprocess.Popen(
            [str(BIN / "feedctl"), "--admin-server", cluster.admin.target, "--json", "failover", CHANNEL],
            env={
                **os.environ,
                "FEEDHA_KEY_ID": cluster.keys["ops"][0],
                "FEEDHA_SECRET": cluster.keys["ops"][1],
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        collect(client, got, lambda: feedctl.poll() is not None, 60)  # keep reading while it runs
        out, err = feedctl.communicate()
        assert feedctl.returncode == 0, err
        sent = {(r["adapter"], r["command"]) for r in json.loads(out)}
        assert sent == {(active, "demote"), (backup, "promote")}

        def switched() -> dict[str, dict[str, Any]] | None:
            rows = cluster.adapters_by_id()
            return rows if rows[backup]["role"] == "active" and rows[active]["role"] != "active" else None

        after: dict[str, dict[str, Any]] = {}

        def switched_while_reading() -> bool:
            after.update(switched() or {})
            return bool(after)

        collect(client, got, switched_while_reading, WAIT)
        new_term = after[backup]["term"]
        assert new_term > before[backup]["term"]
        collect(
            client, got, lambda: any(d.term == new_term for d in got[-50:]) and len(got) > 300 + 500, WAIT
        )
        stats = client.stats()
    assert_gap_free(got)
    assert stats.filtered == 0 and stats.channels[CHANNEL].lost == 0
    assert stats.channels[CHANNEL].highest_term == new_term


def test_admin_server_restart_mid_stream_loses_nothing(cluster: Cluster) -> None:
    with cluster.client("carol") as client:
        subscription = client.subscribe(["*"])
        got: list[Delivery] = []
        collect(client, got, lambda: len(got) >= 300, WAIT)
        assert client.stats().watch_connections == 1
        port = cluster.admin.port
        cluster.admin.kill()
        down_from = len(got)
        collect(client, got, lambda: len(got) >= down_from + 1000, 30)  # lines keep flowing
        cluster.admin = AdminProcess(cluster.workdir, port, cluster.log)
        collect(client, got, lambda: client.stats().watch_connections >= 2, WAIT)
        subscriptions = cluster.feedctl("subscriptions")
        assert {
            "subscription": subscription.subscription_id,
            "user": "carol",
            "symbols": ["*"],
        } in subscriptions
        wait_until(
            lambda: all(r["up"] for r in cluster.adapters_by_id().values()), WAIT, "adapters registered again"
        )
        resumed_from = len(got)
        collect(client, got, lambda: len(got) >= resumed_from + 300, WAIT)
        stats = client.stats()
    assert_gap_free(got)
    assert stats.subscription_id == subscription.subscription_id and stats.resubscriptions == 0
    assert stats.channels[CHANNEL].lost == 0 and stats.delivered == len(got)


def test_a_new_line_is_joined_and_the_active_crashing_loses_nothing(cluster: Cluster) -> None:
    with cluster.client("carol") as client:
        client.subscribe(["*"])
        got: list[Delivery] = []
        collect(client, got, lambda: len(got) >= 300, WAIT)
        assert client.stats().lines == 2
        admin_args = ["--admin", cluster.admin.target, "--admin-key-id", cluster.keys["feed"][0]]
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("FEEDHA_ADAPTER_SECRET", cluster.keys["feed"][1])
            cluster.adapters[3] = start_adapter(
                cluster.group, 3, active=False, extra=FAST + admin_args, log=cluster.log
            )
        # The route watch brings the new line; the running subscriber joins it.
        collect(client, got, lambda: client.stats().lines == 3, WAIT)
        line3 = 2  # its line index in the channel's arbiter

        def line3_in_use() -> bool:
            lines = client.stats().channels[CHANNEL].lines
            return len(lines) > line3 and lines[line3].blocks > 200

        collect(client, got, line3_in_use, WAIT)

        def third_in_sync() -> dict[str, dict[str, Any]] | None:
            rows = cluster.adapters_by_id()
            return rows if rows["EQ-A-M.3"]["sync"] == "in_sync" else None

        rows = wait_until(third_in_sync, WAIT, "adapter 3 in sync")
        active = next(k for k, r in rows.items() if r["role"] == "active" and r["up"])
        cluster.adapters[int(active.rpartition(".")[2])].kill()  # a crash: no goodbye to anyone
        crashed_at = len(got)

        def promoted() -> bool:
            rows = cluster.adapters_by_id()
            return any(r["role"] == "active" and r["up"] for k, r in rows.items() if k != active)

        collect(client, got, promoted, WAIT)
        collect(client, got, lambda: len(got) >= crashed_at + 1500, WAIT)
        stats = client.stats()
    assert_gap_free(got)
    assert stats.channels[CHANNEL].lost == 0 and stats.route_updates >= 3


def test_a_late_feed_client_starts_from_an_image_and_sees_feedctl_end_the_session(cluster: Cluster) -> None:
    from feedha.client import ImageDelivery, SessionEnded, SessionStarted
    from feedha.proto import market_pb2

    key_id, secret = cluster.keys["carol"]  # entitled to everything, but no operator
    env = {**os.environ, "FEEDHA_KEY_ID": key_id, "FEEDHA_SECRET": secret}
    refused = run(
        str(BIN / "feedctl"), "--admin-server", cluster.admin.target, "session", "end", CHANNEL, env=env
    )
    assert refused.returncode == 1 and "PERMISSION_DENIED" in refused.stderr, refused.stderr
    with cluster.client("carol") as client:
        client.subscribe(["*"], initial_image=True)
        events: list[Any] = []

        def poll_until(done: Callable[[], bool], what: str) -> None:
            deadline = time.monotonic() + WAIT
            while not done():
                assert time.monotonic() < deadline, f"{what}: {client.stats()}"
                events.extend(client.poll_events(0.1))

        poll_until(
            lambda: sum(isinstance(e, Delivery) and not e.is_image for e in events) >= 200, "live data"
        )
        sent = cluster.feedctl("session", "end", CHANNEL, "--reason", "integration test")
        assert [row["command"] for row in sent] == ["session_end"]
        poll_until(lambda: any(isinstance(e, SessionStarted) for e in events), "the session to end")
        poll_until(
            lambda: (
                len(events) > events.index(next(e for e in events if isinstance(e, SessionStarted))) + 200
            ),
            "more",
        )
    image = [e for e in events if isinstance(e, ImageDelivery)]
    assert image and events[: len(image)] == image  # the image first
    (at,) = {d.msg_seq for d in image}
    assert {d.update.symbol for d in image} <= {chr(65 + i) + "AA" for i in range(26)}
    ended = next(e for e in events if isinstance(e, SessionEnded))
    started = next(e for e in events if isinstance(e, SessionStarted))
    assert events.index(started) == events.index(ended) + 1 and started.first_msg_seq == ended.msg_seq + 1
    assert ended.reason == "operator" and started.session == ended.session + 1
    live = [e.msg_seq for e in events if isinstance(e, Delivery) and not e.is_image]
    # No seam and no hole: the image at N, then N + 1, ... with the boundary's msg_seq between.
    assert sorted([*live, ended.msg_seq]) == list(range(at + 1, at + 2 + len(live)))
    first_after: dict[str, market_pb2.MarketUpdate] = {}
    for event in events:
        if isinstance(event, Delivery) and not event.is_image and event.msg_seq > ended.msg_seq:
            first_after.setdefault(event.update.symbol, event.update)
    for update in first_after.values():  # daily fields from zero again
        trades = [e for e in update.entries if e.type == market_pb2.ENTRY_TYPE_TRADE]
        assert (update.state.trade_count, update.state.volume) == (len(trades), sum(e.size for e in trades))
