"""An admin server and a fix44 adapter group that plays a simplefix capture: books for the feed clients.

``feedha admin-server`` on port 0 (cheap argon2 cost), two journaling
adapters of channel BK (``--format fix44``) registered with it, and, once a
test calls :meth:`BookCluster.play`, ``feedha source --file`` playing a
capture written by :func:`tests.fix44_capture.make_capture` at a set rate.
A test that wants the whole stream live subscribes first and plays then;
one that needs it played calls :meth:`BookCluster.played`, which also waits
for the adapters to settle on their last msg_seq.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from feedha.client.books import Book
from feedha.cluster import GroupPlan, control, plan_group, start_adapter
from feedha.ports import free_ports
from feedha.procs import JsonProcess
from tests.fix44_capture import Capture, Reference
from tests.integration.test_admin_cluster import AdminProcess
from tests.integration.test_admin_server import add_user

CHANNEL, NUMBER, DEPTH = "BK", 7, 10
WAIT = 60.0
CONFIG = """\
policy: policy.yaml
database: admin.sqlite
policy_poll_s: 0.1
secret_hashing: {time_cost: 1, memory_kib: 8, parallelism: 1}
feeds:
  - name: BOOKS
    channels:
      - {name: BK, number: 7, source_stream: A-Z, letters: A-Z}
"""
POLICY = """\
groups:
  adapters: {roles: [adapter]}
  traders: {}
rules:
  - groups: [traders]
    symbols: ["*"]
    mode: realtime
adapters:
  feed: {channels: [BK], ids: [1, 2]}
"""
ADAPTER = ["--heartbeat-timeout", "1.0", "--desync-window", "30", "--format", "fix44"]


@dataclass
class BookCluster:
    """The running cluster (see the module docstring)."""

    workdir: Path
    log: IO[str]
    admin: AdminProcess
    group: GroupPlan
    keys: dict[str, tuple[str, str]]
    capture: Capture
    rate: float
    source_endpoint: str
    adapters: dict[int, JsonProcess] = field(default_factory=dict)
    source: JsonProcess | None = None
    last_msg_seq: int = 0
    played_at: float = 0.0  # time.time() when the capture began to play

    @property
    def trader(self) -> tuple[str, str, str]:
        """The admin server's address and the trader's key id and secret."""
        return (self.admin.target, *self.keys["trader"])

    def play(self) -> None:
        """Start playing the capture (once)."""
        if self.source is not None:
            return
        path = self.workdir / "capture.fix"
        path.write_bytes(b"".join(self.capture.messages))
        seconds = 4 * len(self.capture.messages) / self.rate + 60  # only guards: the capture ends it
        args = [*("--endpoint", f"A-Z={self.source_endpoint}", "--streams", "A-Z")]
        args += [*("--file", str(path), "--format", "fix44", "--rate", f"{self.rate:g}")]
        args += [*("--seconds", f"{seconds:g}", "--wait-subscribers", "2", "--wait-timeout", "30")]
        self.played_at = time.time()
        self.source = JsonProcess.python("source", "feedha.plain_source", args, log=self.log)

    def played(self) -> int:
        """Play (if no test did yet), wait until the adapters numbered all of it; the last msg_seq."""
        self.play()
        assert self.source is not None
        self.source.wait_for(lambda e: "sent" in e, WAIT)
        if not self.last_msg_seq:
            self.last_msg_seq = self._settled()
        return self.last_msg_seq

    def _settled(self) -> int:
        # Both adapters at the same msg_seq twice in a row, a poll interval apart.
        deadline, last = time.monotonic() + WAIT, (-1, -2)
        while time.monotonic() < deadline:
            seqs = tuple(
                int(control(self.group.adapter(n).control, "status")["next_msg_seq"]) - 1 for n in (1, 2)
            )
            if seqs == last and seqs[0] == seqs[1] and seqs[0] > 0:
                return seqs[0]
            last = seqs
            time.sleep(0.3)  # poll interval of a deadline-bounded wait
        raise AssertionError(f"the adapters never settled on one msg_seq; last {last}")

    def reference(self, messages: int | None = None) -> Reference:
        """The books of the first ``messages`` capture messages (all: ``None``), rebuilt without feedha."""
        reference = Reference(DEPTH)
        reference.feed(b"".join(self.capture.messages[:messages]))
        return reference


def shown(book: Book) -> dict[str, list[list[float]]]:
    """A client's book as :meth:`Reference.shown` shows one: ``[price, size]`` levels, best first."""
    return {
        "bids": [[price, size] for price, size, _orders in book.bids],
        "asks": [[price, size] for price, size, _orders in book.asks],
    }


@contextmanager
def book_cluster(workdir: Path, capture: Capture, *, rate: float) -> Iterator[BookCluster]:
    """Start the admin server and the adapters (not the source); tear everything down after."""
    (workdir / "admin.yaml").write_text(CONFIG)
    (workdir / "policy.yaml").write_text(POLICY)
    database = workdir / "admin.sqlite"
    keys = {
        "feed": add_user(database, "feed", roles=("adapter",)),
        "trader": add_user(database, "trader", groups=("traders",)),
    }
    source_endpoint = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    group = plan_group(
        channel=CHANNEL,
        channel_number=NUMBER,
        source_endpoint=source_endpoint,
        source_stream="A-Z",
        source_stream_number=1,
        size=2,
        journal_root=workdir / "journals",  # a replay service per line: images, gaps, replays by time
    )
    with open(workdir / "processes.log", "w") as log:
        cluster = BookCluster(
            workdir, log, AdminProcess(workdir, 0, log), group, keys, capture, rate, source_endpoint
        )
        try:
            _start_adapters(cluster)
            yield cluster
        finally:
            for proc in [*cluster.adapters.values(), *([cluster.source] if cluster.source else [])]:
                proc.kill()
            cluster.admin.kill()


def _start_adapters(cluster: BookCluster) -> None:
    admin = ["--admin", cluster.admin.target, "--admin-key-id", cluster.keys["feed"][0]]
    env: dict[str, Any] = {**os.environ, "FEEDHA_ADAPTER_SECRET": cluster.keys["feed"][1]}
    extra = [*ADAPTER, "--book-depth", str(DEPTH), *admin]
    for number in (1, 2):  # one at a time: the active first, so the backup hears it
        proc = start_adapter(cluster.group, number, active=number == 1, extra=extra, log=cluster.log, env=env)
        cluster.adapters[number] = proc
        proc.wait_event("ready", WAIT)
        if number == 1:
            proc.wait_for(lambda e: e.get("event") == "role" and e.get("new") == "active", 10)
