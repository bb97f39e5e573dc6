"""Sealed multicast lines across hosts: network namespaces on a bridge, real processes (needs root).

One channel, two adapters each publishing on its own ``epgm://`` line, the
admin server handing out the packet keys. On the segment: ``alice``, an
entitled subscriber (``feedha subscribe``); ``bob``, entitled until the test
revokes him in the policy, who keeps the keys he was given; and ``spy``, who
joins the lines with plain ZeroMQ and no keys, as anyone on the segment can.
Everything is as deployed: the admin server serves TLS, the adapters verify
it and are bound to their ids, lines and sync bus have their keys.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from feedha import netns, transport
from feedha.adapter.zap import write_keys
from feedha.cluster import AdapterPlan, GroupPlan, adapter_argv
from feedha.procs import JsonProcess, python_argv
from tests.integration.certs import Authority

pytestmark = [
    pytest.mark.netns,
    pytest.mark.slow,
    pytest.mark.skipif(
        not (netns.is_available() and transport.has_multicast()),
        reason="needs root, iproute2, nftables and a libzmq with OpenPGM",
    ),
]

HOSTS = ("admin", "source", "adapter-1", "adapter-2", "alice", "bob", "spy")
CHANNEL, STREAM, ADMIN_PORT, SOURCE_PORT = "EQ", "A-Z", 50051, 7000
RATE = 2000
POLICY = """\
version: 1
adapters:
  feed: {channels: [EQ], ids: [1, 2]}
groups:
  feed: {roles: [adapter]}
  traders: {}
  probation: {}
rules:
  - {groups: [traders], symbols: ["*"], mode: realtime}
"""
PROBATION_RULE = '  - {groups: [probation], symbols: ["*"], mode: realtime}\n'


class Site:
    """The segment and the processes on it."""

    def __init__(self, segment: netns.Segment, workdir: Path) -> None:
        self.segment, self.workdir = segment, workdir
        self.log = open(workdir / "components.log", "w")  # noqa: SIM115 - closed in close()
        self.procs: list[JsonProcess] = []
        self.address = {host: segment.address(host) for host in HOSTS}
        self.admin = f"{self.address['admin']}:{ADMIN_PORT}"
        self.authority = Authority(workdir)

    def spawn(self, name: str, host: str, module: str, args: list[str], **kwargs: Any) -> JsonProcess:
        proc = JsonProcess(
            name, self.segment.exec_argv(host, python_argv(module, args)), log=self.log, **kwargs
        )
        self.procs.append(proc)
        return proc

    def admin_cli(self, *args: str) -> dict[str, str]:
        command = [
            sys.executable,
            "-m",
            "feedha",
            "admin-server",
            *args,
            "--config",
            str(self.workdir / "admin.yaml"),
        ]
        out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=60).stdout
        return dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)

    def close(self) -> None:
        for proc in self.procs:
            proc.kill()
        self.log.close()


def _start(site: Site) -> tuple[list[str], dict[str, Path]]:
    workdir = site.workdir
    server = site.authority.issue("admin", "admin", server=True, addresses=[site.address["admin"]])
    (workdir / "policy.yaml").write_text(POLICY + PROBATION_RULE)
    (workdir / "admin.yaml").write_text(
        f"listen: {site.admin}\ndatabase: admin.sqlite\npolicy: policy.yaml\n"
        f"policy_poll_s: 0.2\ntls_cert: {server.cert}\ntls_key: {server.key}\n"
        "secret_hashing: {time_cost: 1, memory_kib: 8192, parallelism: 1}\n"
        "feeds:\n  - name: EQUITIES\n    message_model: feedha.v1.MarketUpdate\n    channels:\n"
        f"      - {{name: {CHANNEL}, number: 1, source_stream: {STREAM}, letters: {STREAM}}}\n"
    )
    users = {}
    for user, flags in (("alice", ["--group", "traders"]), ("bob", ["--group", "probation"])):
        fields = site.admin_cli("add-user", user, *flags)
        users[user] = workdir / f"{user}.json"
        users[user].write_text(json.dumps({"admin": site.admin, **fields}))
    feed = site.admin_cli("add-user", "feed", "--adapter", "--group", "feed")
    admin = site.spawn(
        "admin-server", "admin", "feedha", ["admin-server", "--config", str(workdir / "admin.yaml")]
    )
    deadline = time.monotonic() + 30
    while not any("listening on" in text for text in admin.text):
        assert admin.alive and time.monotonic() < deadline, "the admin server did not start"
        time.sleep(0.05)  # poll interval of a deadline-bounded wait
    source = f"tcp://{site.address['source']}:{SOURCE_PORT}"
    plans, lines = [], []
    for number in (1, 2):
        address = site.address[f"adapter-{number}"]
        group_address = site.segment.plan.multicast_group(number) if site.segment.plan else ""
        line = transport.multicast_endpoint(address, group_address, 7100 + number)
        lines.append(line)
        plans.append(
            AdapterPlan(
                adapter=number,
                line=line,
                sync=f"tcp://{address}:7002",
                control=f"ipc://{workdir}/control-{number}",
                replay=f"tcp://{address}:7004",
                journal=workdir / f"journal-{number}",
            )
        )
    group = GroupPlan(CHANNEL, 1, source, STREAM, 1, tuple(plans))
    write_keys(workdir / "sync.key")
    write_keys(workdir / "source.key")
    for number in (1, 2):
        write_keys(workdir / f"adapter-{number}.key")
        extra = [
            *("--admin", site.admin, "--admin-key-id", feed["key_id"]),
            *("--curve-key", str(workdir / f"adapter-{number}.key"), "--sync-key", str(workdir / "sync.key")),
            *("--source-key", str(workdir / "source.key.pub")),
            *("--admin-tls-ca", str(site.authority.ca)),
            *("--heartbeat-timeout", "1.0", "--log-level", "INFO"),
        ]
        site.spawn(
            f"adapter-{number}",
            f"adapter-{number}",
            "feedha.adapter",
            adapter_argv(group, number, active=number == 1, extra=extra),
            env={"FEEDHA_ADAPTER_SECRET": feed["secret"]},
        )
    for proc in site.procs[1:]:
        proc.wait_event("ready", 30)
    site.spawn(
        "source",
        "source",
        "feedha.plain_source",
        [*("--endpoint", f"{STREAM}={source}", "--streams", STREAM, "--rate", str(RATE), "--seconds", "60")]
        + ["--symbols", "50", "--wait-subscribers", "2"]
        + ["--curve-key", str(workdir / "source.key")]
        + [f"--allow-key={workdir / f'adapter-{number}.key.pub'}" for number in (1, 2)],
    )
    return lines, users


@pytest.mark.timeout(240)
def test_sealed_lines_are_readable_only_with_current_keys(tmp_path: Path) -> None:
    with netns.Segment(list(HOSTS)) as segment:
        site = Site(segment, tmp_path)
        try:
            lines, users = _start(site)
            bob = site.spawn(
                "bob",
                "bob",
                "tests.integration.multicast_peers",
                ["holder", "--admin", site.admin, "--key-file", str(users["bob"])]
                + ["--tls-ca", str(site.authority.ca)]
                + ["--interface", site.address["bob"], "--seconds", "14"],
            )
            bob.wait_event("ready", 40)
            spy = site.spawn(
                "spy",
                "spy",
                "tests.integration.multicast_peers",
                ["spy", *(arg for line in lines for arg in ("--line", line))]
                + ["--interface", site.address["spy"], "--seconds", "4"],
            )
            alice = site.spawn(
                "alice",
                "alice",
                "feedha",
                ["subscribe", "--key-file", str(users["alice"]), "--channel", CHANNEL]
                + ["--count", str(RATE * 8), "--json", "--multicast-interface", site.address["alice"]]
                + ["--tls-ca", str(site.authority.ca)],
            )
            alice.wait_for(lambda e: e.get("event") == "Delivery", 40)
            # bob loses his entitlement: his keys must stop opening packets.
            revoked_at = time.time()
            (tmp_path / "policy.yaml").write_text(POLICY)
            spied = spy.wait_event("summary", 30)
            held = bob.wait_event("summary", 40)
            alice_summary = alice.wait_for(lambda e: e.get("event") == "Summary", 60)
        finally:
            site.close()
    print(spied, held, alice_summary)
    # Anyone on the segment sees sealed packets only, and can read none of them.
    assert spied["packets"] > 0 and set(spied["versions"]) == {"2"}
    assert spied["parsed_as_plain"] == 0 and spied["opened"] == 0
    # The revoked holder's keys stopped working soon after the policy changed; packets went on.
    assert held["opened"] >= 100
    assert held["last_opened"] < revoked_at + 4.0, held
    assert held["refused"] > 0 and held["first_refused"] >= revoked_at, held
    # The entitled subscriber got every message across the key rotation.
    assert alice_summary["delivered"] == RATE * 8 and alice_summary["lost"] == 0, alice_summary
