"""``feedha demo``: the whole cluster on this machine, then a live failover drill.

Starts, as separate processes on loopback: the stream administration server,
the feed source (the Spark job by default), two channels (``EQ-A-M`` and
``EQ-N-Z``) each with an active and two backups registered with the admin
server, and a subscriber on every line of both channels. It streams for a
while, shows the registry as ``feedctl adapters`` would, kills channel 1's
active with SIGKILL, shows the promotion, and ends with a summary of what the
subscriber received per channel.
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from feedha import extras
from feedha.cluster import GroupPlan, plan_group, start_adapter, start_source
from feedha.ports import free_ports
from feedha.procs import JsonProcess, ProcessError

CHANNELS = (("EQ-A-M", 1, "A-M"), ("EQ-N-Z", 2, "N-Z"))
# Package data: the demo runs from an installed wheel as well as from a clone.
POLICY = importlib.resources.files("feedha") / "demo_policy.yaml"
ADMIN_CONFIG = """\
listen: 127.0.0.1:{port}
database: admin.sqlite
policy: policy.yaml
adapter_auth: false
feeds:
  - name: EQUITIES
    message_model: feedha.v1.MarketUpdate
    channels:
      - {{name: EQ-A-M, number: 1, source_stream: A-M, letters: A-M}}
      - {{name: EQ-N-Z, number: 2, source_stream: N-Z, letters: N-Z}}
"""


def say(text: str) -> None:
    print(text, flush=True)


class Demo:
    """The processes of the demo and the steps that drive them."""

    def __init__(self, args: argparse.Namespace, workdir: Path, log: IO[str]) -> None:
        self.args = args
        self.workdir = workdir
        self.log = log
        self.procs: list[JsonProcess] = []
        self.groups: list[GroupPlan] = []
        self.adapters: dict[tuple[int, int], JsonProcess] = {}
        self.admin_target = ""
        self.ops: tuple[str, str] = ("", "")

    def start_admin(self) -> None:
        port = free_ports(1)[0]
        (self.workdir / "admin-server.yaml").write_text(ADMIN_CONFIG.format(port=port))
        (self.workdir / "policy.yaml").write_bytes(POLICY.read_bytes())
        config = str(self.workdir / "admin-server.yaml")
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "feedha",
                "admin-server",
                "add-user",
                "ops",
                "--admin",
                "--config",
                config,
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        fields = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
        self.ops = (fields["key_id"], fields["secret"])
        admin = JsonProcess(
            "admin-server", [sys.executable, "-m", "feedha", "admin-server", "--config", config], log=self.log
        )
        self.procs.append(admin)
        deadline = time.monotonic() + 30
        while not any("listening on" in t for t in admin.text):
            if time.monotonic() > deadline or not admin.alive:
                raise ProcessError("admin server did not start (see the log)")
            time.sleep(0.05)  # poll interval of a deadline-bounded wait
        self.admin_target = f"127.0.0.1:{port}"
        say(f"  admin server      {self.admin_target}")

    def start_groups(self) -> dict[str, str]:
        endpoints: dict[str, str] = {}
        for channel, number, stream in CHANNELS:
            endpoint = f"tcp://127.0.0.1:{free_ports(1)[0]}"
            endpoints[stream] = endpoint
            group = plan_group(
                channel=channel,
                channel_number=number,
                source_endpoint=endpoint,
                source_stream=stream,
                source_stream_number=number,
                size=self.args.backups + 1,
                journal_root=self.workdir / "journals",
            )
            self.groups.append(group)
            for plan in group.adapters:
                # Spark, six adapters, the admin server and the subscriber share this
                # machine's cores: a 1 s heartbeat timeout keeps a CPU stall from
                # reading as a dead active (the default, 0.4 s, suits dedicated hosts).
                extra = ["--admin", self.admin_target, "--heartbeat-timeout", "1.0"]
                proc = start_adapter(group, plan.adapter, active=plan.adapter == 1, extra=extra, log=self.log)
                self.adapters[(number, plan.adapter)] = proc
                self.procs.append(proc)
        for proc in self.adapters.values():
            proc.wait_event("ready", 30)
        for group in self.groups:
            say(f"  {group.channel:<8}          adapters on {', '.join(group.lines)}")
        return endpoints

    def start_subscriber(self) -> JsonProcess:
        args: list[str] = []
        for group in self.groups:
            args += ["--channel", f"{group.channel}={group.channel_number}"]
            for line in group.lines:
                args += ["--line", f"{group.channel}={line}"]
            for replay in group.replays:
                args += ["--replay", f"{group.channel}={replay}"]
        proc = JsonProcess.python("subscriber", "feedha.drills.client", args, log=self.log)
        self.procs.append(proc)
        proc.wait_event("ready", 30)
        return proc

    def start_source(self, endpoints: dict[str, str]) -> JsonProcess:
        # No --seconds: the demo stops the source itself (SIGTERM) once the run is over,
        # so Spark's start-up time does not eat into it.
        proc = start_source(
            endpoints,
            kind=self.args.source,
            rate=self.args.rate,
            wait_subscribers=self.args.backups + 1,
            workdir=self.workdir,
            log=self.log,
        )
        self.procs.append(proc)
        return proc

    def feedctl_adapters(self) -> list[dict[str, Any]]:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "feedha.admin_server.feedctl",
                "--admin-server",
                self.admin_target,
                "--key-id",
                self.ops[0],
                "--secret",
                self.ops[1],
                "--json",
                "adapters",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        try:
            rows: list[dict[str, Any]] = json.loads(out.stdout)
        except ValueError:
            return []
        return rows

    def show_registry(self, title: str) -> None:
        rows = self.feedctl_adapters()
        say(f"\n{title} (feedctl adapters)")
        header = ("channel", "adapter", "role", "term", "msg_seq", "sync", "health", "up")
        say("  " + " ".join(f"{h:<9}" for h in header))
        for row in rows:
            say("  " + " ".join(f"{row.get(h, '')!s:<9}" for h in header))

    def close(self) -> None:
        for proc in self.procs:
            proc.kill()


def run(args: argparse.Namespace, workdir: Path, log: IO[str]) -> int:
    demo = Demo(args, workdir, log)
    try:
        say("feedha demo: starting the cluster")
        demo.start_admin()
        endpoints = demo.start_groups()
        subscriber = demo.start_subscriber()
        source = demo.start_source(endpoints)
        say(f"  feed source       {args.source}, {args.rate:g} msg/s over {', '.join(endpoints)}")
        if args.source == "spark":
            say("  (waiting for the Spark session to start and publish its first micro-batch)")
        subscriber.wait_for(lambda e: e.get("event") == "progress" and e.get("delivered", 0) > 0, 240)
        half = time.monotonic() + args.seconds / 2
        _watch(subscriber, until=half, source=source)
        demo.show_registry("registry before the drill")
        victim = demo.adapters[(1, 1)]
        say("\nfailover drill: SIGKILL to EQ-A-M's active (adapter 1)")
        victim.kill()
        _watch(subscriber, until=time.monotonic() + args.seconds / 2, source=source)
        source.stop(timeout=60)
        sent = int(source.wait_for(lambda e: "sent" in e, 10)["sent"])
        try:
            subscriber.wait_for(lambda e: e.get("event") == "progress" and e.get("delivered", 0) >= sent, 15)
        except ProcessError:
            pass  # the summary says what is missing
        subscriber.stop()
        summary = subscriber.wait_event("summary", 15)
        demo.show_registry("registry after the drill")
        return _report(summary, source.wait_for(lambda e: "sent" in e, 5), demo)
    finally:
        demo.close()


def _watch(subscriber: JsonProcess, *, until: float, source: JsonProcess) -> None:
    next_line = 0.0
    while time.monotonic() < until and source.alive:
        progress = subscriber.last("progress")
        if progress and time.monotonic() >= next_line:
            next_line = time.monotonic() + 1.0
            parts = [
                f"{name} {c['delivered']:>8,} msgs, last {c['last']}"
                for name, c in progress["channels"].items()
            ]
            say("  " + " | ".join(parts))
        try:
            source.popen.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            pass


def _report(summary: dict[str, Any], source: dict[str, Any], demo: Demo) -> int:
    say("\nsummary")
    ok = True
    promoted = [
        (number, adapter, e["term"])
        for (number, adapter), proc in demo.adapters.items()
        for e in proc.events
        if e.get("event") == "role" and e.get("new") == "active" and adapter != 1
    ]
    for name, channel in summary["channels"].items():
        stream = next(s for c, n, s in CHANNELS if c == name)
        sent = int(source["streams"][stream]["sent"])
        lost = sent - channel["unique"]
        conflicts = channel["arbiter"]["conflicts"]
        ok = ok and lost == 0 and channel["duplicates"] == 0 and conflicts == 0
        say(
            f"  {name}: sent {sent:,}, delivered {channel['delivered']:,}, lost {lost}, "
            f"duplicates {channel['duplicates']}, conflicts {conflicts}, "
            f"longest pause {channel['max_pause_ms']:.0f} ms"
        )
    for number in sorted({n for n, _a, _t in promoted}):
        changes = [(term, adapter) for n, adapter, term in promoted if n == number]
        term, adapter = max(changes)
        say(f"  channel {number}: adapter {adapter} is active with term {term} ({len(changes)} promotion(s))")
    if demo.args.source == "spark":
        say("  (with the Spark source the longest pause is the gap between its micro-batches)")
    say("  result: " + ("no message lost or repeated" if ok else "MESSAGES LOST OR REPEATED"))
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``feedha demo``."""
    parser = argparse.ArgumentParser(prog="feedha demo", description=__doc__)
    parser.add_argument(
        "--source", choices=("spark", "plain"), default="spark", help="feed source (default: spark)"
    )
    parser.add_argument("--rate", type=float, default=2000, help="source messages/s (default: %(default)s)")
    parser.add_argument(
        "--seconds", type=float, default=20, help="how long the feed runs (default: %(default)s)"
    )
    parser.add_argument("--backups", type=int, default=2, help="backups per channel (default: %(default)s)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, databases)")
    args = parser.parse_args(argv)
    if args.source == "spark" and shutil.which("java") is None:
        say("feedha demo: no java on PATH, using the plain-Python source instead of Spark")
        args.source = "plain"
    if args.source == "spark" and extras.missing(["spark"]):
        say(f"feedha demo: Spark is not installed ({extras.install_hint(['spark'])}); using the plain source")
        args.source = "plain"
    workdir = Path(tempfile.mkdtemp(prefix="feedha-demo-"))
    log_path = workdir / "components.log"
    try:
        with open(log_path, "w") as log:
            return run(args, workdir, log)
    except ProcessError as exc:
        say(f"feedha demo: {exc}; component logs: {log_path}")
        return 1
    finally:
        if args.keep:
            say(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
