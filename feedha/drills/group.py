"""A drill's channel and adapter group: its options, where its processes run, starting and watching them.

Every drill of :mod:`feedha.drills` runs a feed source, one adapter group (an
active and its backups) and a client, each a process of its own: on loopback
(:func:`place_local`) or each on a host of a segment of network namespaces
(:func:`place_netns`). :func:`start_drill` starts them in order and returns
when data flows; the rest are what a drill asks of the running group (who is
active, which adapters are alive, what the source sent, whether the client
has caught up).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, Any, Final

from feedha import netns, transport
from feedha.cluster import AdapterPlan, GroupPlan, adapter_argv, control, plan_group
from feedha.ports import free_ports
from feedha.procs import SOURCE_NICE, JsonProcess, ProcessError, python_argv

CHANNEL = "EQ-A-Z"
STREAM = "A-Z"
DRAIN_STALL_S = 5.0  # delivery stalled this long after the source ended: the rest is lost
DRAIN_MAX_S = 180.0  # the longest a backlog may take to arrive
START_S = 60.0  # how long an adapter or the client may take to be ready (a loaded machine)


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
    spark_master: str = "local[*]"  # with source "spark": local[N], spark://..., or local-cluster
    heartbeat_timeout: float | None = None
    extra_adapter_args: list[str] = field(default_factory=list)
    hosts: str = "local"  # local | netns
    transport: str = "tcp"  # tcp | epgm
    cut: str | None = None
    partition: tuple[str, str] | None = None
    heal_at: float = 0.8
    loss: float = 0.0
    loss_on: str = "active"  # active | lines | client
    restart: str | None = None
    journal: bool = True  # every adapter journals its line (issue 5); --no-journal to measure without
    extra_source_args: list[str] = field(default_factory=list)
    extra_client_args: list[str] = field(default_factory=list)


# Fixed ports on the namespace hosts: each host has its own port space.
SOURCE_PORT, LINE_PORT, SYNC_PORT, REPLAY_PORT = 7000, 7001, 7002, 7004
MULTICAST_PORT_BASE = 7100  # line N's multicast port is 7100 + N


@dataclass
class Placement:
    """Where the drill's components run and the endpoints they use."""

    source_endpoint: str
    group: GroupPlan
    client_lines: tuple[str, ...]  # the lines as the client names them (epgm: its own interface)
    replay: dict[int, str]
    segment: netns.Segment | None = None
    journal_root: Path | None = None

    def spawn(
        self, name: str, host: str, module: str, args: Sequence[str], log: IO[str], *, nice: int = 0
    ) -> JsonProcess:
        """Start ``python -m module args`` on ``host`` (its namespace, or here)."""
        if self.segment is not None and module in _SECURE_BY_DEFAULT:
            args = [*args, "--insecure"]  # plain sockets between the namespaces' hosts, on purpose
        argv = python_argv(module, args, nice=nice)
        if self.segment is not None:
            argv = self.segment.exec_argv(host, argv)
        return JsonProcess(name, argv, log=log)


# Components that refuse to run without keys off loopback (docs/security.md, "Default posture").
_SECURE_BY_DEFAULT: Final = ("feedha.adapter", "feedha.plain_source", "feedha.spark_feed.job")


def adapter_host(number: int) -> str:
    """The host (namespace) name of adapter ``number``."""
    return f"adapter-{number}"


def place_local(options: DrillOptions) -> Placement:
    if options.transport != "tcp":
        raise ProcessError("--transport epgm needs --hosts netns (multicast does not run on loopback)")
    source_endpoint = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    group = plan_group(
        channel=CHANNEL,
        channel_number=1,
        source_endpoint=source_endpoint,
        source_stream=STREAM,
        source_stream_number=1,
        size=options.backups + 1,
    )
    ports = free_ports(len(group.adapters))
    replay = {a.adapter: f"tcp://127.0.0.1:{port}" for a, port in zip(group.adapters, ports, strict=True)}
    return Placement(source_endpoint, group, group.lines, replay)


def place_netns(options: DrillOptions) -> Placement:
    if not netns.is_available():
        raise ProcessError("--hosts netns needs root, iproute2 (ip) and nftables (nft); run scripts/setup")
    size = options.backups + 1
    segment = netns.Segment(["source", *(adapter_host(n) for n in range(1, size + 1)), "client"])
    plan = segment.create()
    try:
        source_endpoint = f"tcp://{plan.host('source').address}:{SOURCE_PORT}"
        client_address = plan.host("client").address
        adapters, client_lines, replay = [], [], {}
        for number in range(1, size + 1):
            address = plan.host(adapter_host(number)).address
            if options.transport == "epgm":
                group_address = plan.multicast_group(number)
                # A port per line too: PGM binds its port on INADDR_ANY, so a receiver
                # gets every group joined on its host at that port (measured: each line
                # then carried all three lines' packets, interleaved into garbage).
                port = MULTICAST_PORT_BASE + number
                line = transport.multicast_endpoint(address, group_address, port)
                client_lines.append(transport.multicast_endpoint(client_address, group_address, port))
            else:
                line = f"tcp://{address}:{LINE_PORT}"
                client_lines.append(line)
            # The control socket is local by design (no authentication): a path-named ipc://
            # socket, which every namespace of this machine shares (they share the filesystem).
            sync, ctl = f"tcp://{address}:{SYNC_PORT}", f"ipc:///tmp/{segment.tag}-control-{number}"
            adapters.append(AdapterPlan(adapter=number, line=line, sync=sync, control=ctl))
            replay[number] = f"tcp://{address}:{REPLAY_PORT}"
        group = GroupPlan(CHANNEL, 1, source_endpoint, STREAM, 1, tuple(adapters))
        return Placement(source_endpoint, group, tuple(client_lines), replay, segment)
    except BaseException:
        segment.destroy()
        raise


@dataclass
class Drill:
    """The processes of one running drill."""

    options: DrillOptions
    group: GroupPlan
    log: IO[str]
    placement: Placement
    adapters: dict[int, JsonProcess] = field(default_factory=dict)
    adapter_args: dict[int, list[str]] = field(default_factory=dict)
    faults: list[dict[str, Any]] = field(default_factory=list)
    partitioned: tuple[int, int] | None = None
    roles_at_end: dict[int, str] = field(default_factory=dict)
    source: JsonProcess | None = None
    client: JsonProcess | None = None

    def all(self) -> list[JsonProcess]:
        procs = list(self.adapters.values())
        return procs + [p for p in (self.source, self.client) if p is not None]


def show_progress(text: str) -> None:
    if sys.stderr.isatty():
        print(f"\r\033[K{text}", end="", file=sys.stderr, flush=True)


def start_drill(options: DrillOptions, log: IO[str], placement: Placement) -> Drill:
    """Start adapters, then the client, then the source; return when data flows.

    Raises:
        ProcessError: a component did not start; what had started is killed first.
    """
    drill = Drill(options, placement.group, log, placement)
    try:
        _start_components(drill, options, placement, log)
    except BaseException:
        for proc in drill.all():  # the caller has no drill to stop: nothing may outlive the failure
            proc.kill()
        raise
    return drill


def _start_components(drill: Drill, options: DrillOptions, placement: Placement, log: IO[str]) -> None:
    group = placement.group
    extra = list(options.extra_adapter_args)
    if options.heartbeat_timeout is not None:
        extra += ["--heartbeat-timeout", str(options.heartbeat_timeout)]
    for plan in group.adapters:
        args = adapter_argv(group, plan.adapter, active=plan.adapter == 1, extra=extra)
        if options.journal:
            if placement.journal_root is None:
                placement.journal_root = Path(tempfile.mkdtemp(prefix="feedha-drill-journal-"))
            journal = placement.journal_root / f"adapter-{plan.adapter}"
            args += ["--journal", str(journal), "--replay", placement.replay[plan.adapter]]
        drill.adapter_args[plan.adapter] = args
        drill.adapters[plan.adapter] = start_adapter_process(drill, plan.adapter, args)
    for proc in drill.adapters.values():
        proc.wait_event("ready", START_S)
    drill.adapters[1].wait_for(lambda e: e.get("event") == "role" and e.get("new") == "active", START_S)
    if options.loss > 0:
        _set_loss(drill)
    client_args = ["--channel", f"{CHANNEL}=1"]
    for line in placement.client_lines:
        client_args += ["--line", f"{CHANNEL}={line}"]
    if options.journal:  # the client fills the gaps no line covers from the adapters' journals
        for number in drill.adapters:
            client_args += ["--replay", f"{CHANNEL}={placement.replay[number]}"]
    client_args += options.extra_client_args
    drill.client = placement.spawn("client", "client", "feedha.drills.client", client_args, log)
    drill.client.wait_event("ready", START_S)
    drill.source = start_source(options, placement, log)


def start_adapter_process(drill: Drill, number: int, args: Sequence[str]) -> JsonProcess:
    name = f"{drill.group.channel}/adapter-{number}"
    return drill.placement.spawn(name, adapter_host(number), "feedha.adapter", args, drill.log)


def _set_loss(drill: Drill) -> None:
    segment = drill.placement.segment
    if segment is None:
        raise ProcessError("--loss needs --hosts netns")
    options = drill.options
    if options.loss_on == "client":
        hosts = ["client"]
    elif options.loss_on == "lines":
        hosts = [adapter_host(n) for n in drill.adapters]
    else:
        hosts = [adapter_host(1)]  # the first active
    for host in hosts:
        means = segment.set_loss(host, options.loss)
        drill.faults.append({"fault": "loss", "host": host, "percent": options.loss, "means": means})


def start_source(options: DrillOptions, placement: Placement, log: IO[str]) -> JsonProcess:
    endpoint = placement.source_endpoint
    common = [
        "--endpoint",
        f"{STREAM}={endpoint}",
        "--streams",
        STREAM,
        "--rate",
        f"{options.rate:g}",
        "--symbols",
        str(options.symbols),
        "--seed",
        str(options.seed),
        "--wait-subscribers",
        str(options.backups + 1),
    ]
    if options.source == "spark":
        checkpoint = tempfile.mkdtemp(prefix="feedha-drill-spark-")
        return placement.spawn(
            "source",
            "source",
            "feedha.spark_feed.job",
            [*common, "--checkpoint", checkpoint, "--master", options.spark_master],
            log,
            nice=SOURCE_NICE,
        )
    common += ["--seconds", f"{options.seconds:g}", *options.extra_source_args]
    return placement.spawn("source", "source", "feedha.plain_source", common, log)


def sent_of(source: dict[str, Any]) -> tuple[int, int]:
    """What a source's summary says it sent: distinct messages (Spark's replayed batches are
    repeats), and the positions they span (its last ``source_seq`` on the drill's stream)."""
    streams = source.get("streams") or {}
    replayed = sum(int(stream.get("replayed", 0)) for stream in streams.values())
    sent = int(source["sent"]) - replayed
    return sent, int(streams.get(STREAM, {}).get("last_seq", sent))


def live_controls(drill: Drill) -> dict[int, str]:
    """The control endpoints of the drill's adapters that are alive now, by number."""
    return {
        plan.adapter: plan.control
        for plan in drill.group.adapters
        if (proc := drill.adapters.get(plan.adapter)) is not None and proc.alive
    }


def roles_now(drill: Drill) -> dict[int, str]:
    """Each live adapter's role as its control socket reports it ("unreachable" if it cannot).

    An adapter on a host the drill has cut off is reported as such, with the role it believes.
    """
    roles: dict[int, str] = {}
    for plan in drill.group.adapters:
        proc = drill.adapters.get(plan.adapter)
        if proc is None or not proc.alive:
            continue
        try:
            roles[plan.adapter] = str(control(plan.control, "status", timeout=2.0).get("role"))
        except TimeoutError:
            roles[plan.adapter] = "unreachable"
        segment = drill.placement.segment
        if segment is not None and adapter_host(plan.adapter) in segment.cut_hosts:
            # Its control socket is local (ipc://), so it still answers: with what it
            # believes, which a host cut off from everyone cannot correct.
            roles[plan.adapter] = f"cut off (believes {roles[plan.adapter]})"
    return roles


def _progress_beyond(event: dict[str, Any], *, delivered: int) -> bool:
    return event.get("event") == "progress" and int(event.get("delivered", 0)) > delivered


def drain_client(client: JsonProcess, sent: int, *, stall_s: float = DRAIN_STALL_S) -> None:
    """Wait until the client has delivered ``sent`` messages or stopped making progress.

    A group driven above what this machine sustains has a backlog when the
    source stops; it still arrives, later. What has not arrived once delivery
    has stalled for ``stall_s`` (or after DRAIN_MAX_S) is reported lost.
    """
    deadline = time.monotonic() + DRAIN_MAX_S
    seen, changed_at = -1, time.monotonic()
    while time.monotonic() < deadline:
        delivered = int((client.last("progress") or {}).get("delivered", 0))
        if delivered >= sent:
            return
        if delivered != seen:
            seen, changed_at = delivered, time.monotonic()
        elif time.monotonic() - changed_at > stall_s:
            return
        try:
            client.wait_for(partial(_progress_beyond, delivered=delivered), 1.0)
        except ProcessError:
            pass  # no progress within the second: looked at again above


def victim(drill: Drill, which: str) -> int:
    """Resolve ``active``, ``backup`` or an adapter number to an adapter number."""
    if which.isdigit():
        number = int(which)
        if number not in drill.adapters:
            raise ProcessError(f"no adapter {number} (adapters: {sorted(drill.adapters)})")
        return number
    if which == "active":
        latest: tuple[int, int] | None = None  # (time_ns, adapter) of the newest promotion
        for number, proc in drill.adapters.items():
            role = proc.last("role")
            if role is not None and role.get("new") == "active" and proc.alive:
                latest = max(latest or (0, 0), (int(role["time_ns"]), number))
        if latest is None:
            raise ProcessError("no active adapter to kill")
        return latest[1]
    active = victim(drill, "active")
    return max(n for n in drill.adapters if n != active)  # "backup": the last backup
