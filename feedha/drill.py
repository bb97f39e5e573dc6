"""``feedha drill``: failover drills with real processes on this machine.

``feedha drill failover`` starts a feed source, one adapter group (an active
and ``--backups N``) and an arbitrating client, each as its own process on
loopback; streams at ``--rate`` for ``--seconds``; kills the chosen adapter
with SIGKILL at ``--kill-at`` of the run; and reports what the client got:
``sent``, ``delivered``, ``lost``, ``duplicates``, ``out_of_order``,
``conflicts``, ``promoted``, ``term`` and ``max_switch_gap_ms`` (the longest
pause between two deliveries around the kill).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from feedha.cluster import GroupPlan, plan_group, start_adapter
from feedha.ports import free_ports
from feedha.procs import JsonProcess, ProcessError

CHANNEL = "EQ-A-Z"
STREAM = "A-Z"
SWITCH_WINDOW_S = (-0.2, 3.0)  # around the kill: where a pause counts as the switch gap


@dataclass(kw_only=True)
class DrillOptions:
    backups: int = 2
    rate: float = 20_000.0
    seconds: float = 10.0
    kill: str = "active"
    kill_at: float = 0.5
    symbols: int = 200
    seed: int = 7
    source: str = "plain"
    heartbeat_timeout: float | None = None
    extra_adapter_args: list[str] = field(default_factory=list)


@dataclass
class Drill:
    """The processes of one running drill."""

    options: DrillOptions
    group: GroupPlan
    log: IO[str]
    adapters: dict[int, JsonProcess] = field(default_factory=dict)
    source: JsonProcess | None = None
    client: JsonProcess | None = None

    def all(self) -> list[JsonProcess]:
        procs = list(self.adapters.values())
        return procs + [p for p in (self.source, self.client) if p is not None]


def _progress(text: str) -> None:
    if sys.stderr.isatty():
        print(f"\r\033[K{text}", end="", file=sys.stderr, flush=True)


def start_drill(options: DrillOptions, log: IO[str]) -> Drill:
    """Start adapters, then the client, then the source; return when data flows."""
    source_endpoint = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    group = plan_group(
        channel=CHANNEL,
        channel_number=1,
        source_endpoint=source_endpoint,
        source_stream=STREAM,
        source_stream_number=1,
        size=options.backups + 1,
    )
    drill = Drill(options, group, log)
    extra = list(options.extra_adapter_args)
    if options.heartbeat_timeout is not None:
        extra += ["--heartbeat-timeout", str(options.heartbeat_timeout)]
    for plan in group.adapters:
        drill.adapters[plan.adapter] = start_adapter(
            group, plan.adapter, active=plan.adapter == 1, extra=extra, log=log
        )
    for proc in drill.adapters.values():
        proc.wait_event("ready", 20)
    drill.adapters[1].wait_for(lambda e: e.get("event") == "role" and e.get("new") == "active", 10)
    client_args = ["--channel", f"{CHANNEL}=1"]
    for line in group.lines:
        client_args += ["--line", f"{CHANNEL}={line}"]
    drill.client = JsonProcess.python("client", "feedha.drill_client", client_args, log=log)
    drill.client.wait_event("ready", 20)
    drill.source = _start_source(options, source_endpoint, log)
    return drill


def _start_source(options: DrillOptions, endpoint: str, log: IO[str]) -> JsonProcess:
    common = [
        "--endpoint",
        f"{STREAM}={endpoint}",
        "--streams",
        STREAM,
        "--rate",
        f"{options.rate:g}",
        "--seconds",
        f"{options.seconds:g}",
        "--symbols",
        str(options.symbols),
        "--seed",
        str(options.seed),
        "--wait-subscribers",
        str(options.backups + 1),
    ]
    if options.source == "spark":
        checkpoint = tempfile.mkdtemp(prefix="feedha-drill-spark-")
        return JsonProcess.python("source", "spark_feed.job", [*common, "--checkpoint", checkpoint], log=log)
    return JsonProcess.python("source", "spark_feed.plain_source", common, log=log)


def run_failover(options: DrillOptions, log: IO[str]) -> dict[str, Any]:
    """Run the failover drill and return its summary."""
    drill = start_drill(options, log)
    try:
        return _drive(drill)
    finally:
        for proc in drill.all():
            proc.kill()  # also reaps the ones that ended by themselves


def _drive(drill: Drill) -> dict[str, Any]:
    options = drill.options
    assert drill.source is not None and drill.client is not None
    started = time.monotonic()
    kill_after = options.seconds * options.kill_at
    killed: int | None = None
    kill_wall: float | None = None
    while drill.source.alive:
        elapsed = time.monotonic() - started
        if killed is None and options.kill != "none" and elapsed >= kill_after:
            killed = _victim(drill)
            kill_wall = time.time()
            drill.adapters[killed].kill()
        progress = drill.client.last("progress") or {}
        _progress(
            f"drill: {elapsed:5.1f}s  delivered {progress.get('delivered', 0):>9,}  killed {killed or '-'}"
        )
        try:
            drill.source.popen.wait(timeout=0.05)  # returns as soon as the source ends
        except subprocess.TimeoutExpired:
            pass
    source_summary = drill.source.wait_for(lambda e: "sent" in e, 30)
    sent = int(source_summary["sent"])
    try:
        drill.client.wait_for(lambda e: e.get("event") == "progress" and e.get("delivered", 0) >= sent, 15)
    except ProcessError:
        pass  # the summary below says what is missing
    drill.client.stop()
    summary = drill.client.wait_event("summary", 10)["channels"][CHANNEL]
    for proc in drill.adapters.values():
        if proc.alive:
            proc.stop()
    _progress("")
    return _report(drill, source_summary, summary, killed, kill_wall)


def _victim(drill: Drill) -> int:
    if drill.options.kill == "active":
        latest: tuple[int, int] | None = None  # (time_ns, adapter) of the newest promotion
        for number, proc in drill.adapters.items():
            role = proc.last("role")
            if role is not None and role.get("new") == "active" and proc.alive:
                latest = max(latest or (0, 0), (int(role["time_ns"]), number))
        if latest is None:
            raise ProcessError("no active adapter to kill")
        return latest[1]
    return max(drill.adapters)  # "backup": the last backup


def _report(
    drill: Drill,
    source: dict[str, Any],
    client: dict[str, Any],
    killed: int | None,
    kill_wall: float | None,
) -> dict[str, Any]:
    sent = int(source["sent"])
    lost = sent - int(client["unique"])
    promotions = [
        (number, event)
        for number, proc in drill.adapters.items()
        for event in proc.events
        if event.get("event") == "role" and event.get("new") == "active" and number != 1
    ]
    terms = [
        int(e["term"]) for proc in drill.adapters.values() for e in proc.events if e.get("event") == "role"
    ]
    switch_gap = 0.0
    if kill_wall is not None:
        low, high = kill_wall + SWITCH_WINDOW_S[0], kill_wall + SWITCH_WINDOW_S[1]
        for start, pause_ms in client["gaps"]:
            if start + pause_ms / 1000.0 >= low and start <= high:
                switch_gap = max(switch_gap, pause_ms)
    arbiter = client["arbiter"]
    return {
        "drill": "failover",
        "source": drill.options.source,
        "backups": drill.options.backups,
        "rate": drill.options.rate,
        "seconds": drill.options.seconds,
        "killed": drill.options.kill if killed is not None else "none",
        "killed_adapter": killed,
        "sent": sent,
        "delivered": client["delivered"],
        "lost": lost,
        "duplicates": client["duplicates"],
        "out_of_order": client["out_of_order"],
        "conflicts": arbiter.get("conflicts", 0),
        "gaps_lost": arbiter.get("lost", 0),
        "promoted": bool(promotions),
        "promoted_adapter": promotions[-1][0] if promotions else None,
        "term": max(terms, default=0),
        "max_switch_gap_ms": round(switch_gap, 1),
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="feedha drill", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="drill", required=True)
    fo = sub.add_parser("failover", help="kill an adapter mid-stream and check what the client got")
    fo.add_argument(
        "--backups", type=int, default=2, help="backups besides the active (default: %(default)s)"
    )
    fo.add_argument("--rate", type=float, default=20_000, help="source messages/s (default: %(default)s)")
    fo.add_argument(
        "--seconds", type=float, default=10, help="how long the source streams (default: %(default)s)"
    )
    fo.add_argument("--kill", choices=("active", "backup", "none"), default="active")
    fo.add_argument("--kill-at", type=float, default=0.5, help="fraction of the run at which to kill")
    fo.add_argument("--symbols", type=int, default=200)
    fo.add_argument("--seed", type=int, default=7)
    fo.add_argument(
        "--source", choices=("plain", "spark"), default="plain", help="feed source (default: plain)"
    )
    fo.add_argument("--heartbeat-timeout", type=float, help="adapters' heartbeat timeout in seconds")
    fo.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    fo.add_argument("--log", type=Path, help="file for the components' logs (default: a temp file)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``feedha drill``."""
    args = build_parser().parse_args(argv)
    if args.backups < 1 or args.rate <= 0 or args.seconds <= 0 or not 0 < args.kill_at < 1:
        print(
            "feedha drill: need --backups >= 1, --rate > 0, --seconds > 0, 0 < --kill-at < 1", file=sys.stderr
        )
        return 2
    options = DrillOptions(
        backups=args.backups,
        rate=args.rate,
        seconds=args.seconds,
        kill=args.kill,
        kill_at=args.kill_at,
        symbols=args.symbols,
        seed=args.seed,
        source=args.source,
        heartbeat_timeout=args.heartbeat_timeout,
    )
    log_path = args.log or Path(tempfile.mkstemp(prefix="feedha-drill-", suffix=".log")[1])
    with open(log_path, "w") as log:
        try:
            result = run_failover(options, log)
        except ProcessError as exc:
            print(f"feedha drill: {exc} (component logs: {log_path})", file=sys.stderr)
            return 1
    result["log"] = str(log_path)
    if args.json:
        print(json.dumps(result))
    else:
        width = max(len(k) for k in result)
        for key, value in result.items():
            print(f"{key:<{width}}  {value}")
    ok = (
        result["lost"] == 0
        and result["duplicates"] == 0
        and result["out_of_order"] == 0
        and result["conflicts"] == 0
    )
    return 0 if ok else 1
