"""``feedha drill``: failover drills with real processes on this machine.

``feedha drill failover`` starts a feed source, one adapter group (an active
and ``--backups N``) and an arbitrating client, each as its own process on
loopback; streams at ``--rate`` for ``--seconds``; kills the chosen adapter
with SIGKILL at ``--kill-at`` of the run; and reports what the client got:
``sent``, ``delivered``, ``lost``, ``duplicates``, ``out_of_order``,
``conflicts``, ``promoted``, ``term`` and ``max_switch_gap_ms`` (the longest
pause between two deliveries around the kill), ``unaccounted`` (messages the
source sent that no adapter booked: :mod:`feedha.drills.accounting`) and
``source_gaps``; ``lost`` counts what the channel numbered and the client never
got.

``--hosts netns`` runs every component on its own host of a segment of
network namespaces joined by a bridge (:mod:`feedha.netns`; needs root), and
``--transport epgm`` makes the lines multicast (needs pyzmq with OpenPGM).
Faults besides ``--kill``: ``--cut HOST`` cuts a host's link at ``--kill-at``;
``--partition A,B`` drops the sync bus between two adapters from ``--kill-at``
to ``--heal-at``; ``--loss PCT`` drops that share of ``--loss-on``'s outgoing
packets for the whole run; ``--restart HOST`` kills a host's adapter and
starts it again. HOST is ``active``, ``backup`` or an adapter number. The
summary then also has ``gaps`` (holes the client saw), ``gaps_recovered``,
``retransmission_requests`` and ``actives_at_end``.

``--source spark`` runs the Spark feed (``--spark-master local[N]``,
``spark://...``, or ``local-cluster``: a standalone master and two workers of
this machine, the job submitted with spark-submit); with ``local-cluster``,
``--kill worker`` SIGKILLs a worker and its executor mid-task instead of an
adapter (:mod:`feedha.drills.spark`).
"""

from __future__ import annotations

import shutil
import subprocess
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
from feedha.drills.accounting import GroupAccount, settle
from feedha.drills.spark import kill_spark_worker
from feedha.ports import free_ports
from feedha.procs import SOURCE_NICE, JsonProcess, ProcessError, python_argv

CHANNEL = "EQ-A-Z"
STREAM = "A-Z"
SWITCH_WINDOW_S = (-0.2, 3.0)  # around the kill: where a pause counts as the switch gap
DRAIN_STALL_S = 5.0  # delivery stalled this long after the source ended: the rest is lost
DRAIN_MAX_S = 180.0  # the longest a backlog may take to arrive
SOURCE_START_S = 240.0  # how long a source may take to publish its first message (Spark start-up)
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


def _place_netns(options: DrillOptions) -> Placement:
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


def run_failover(options: DrillOptions, log: IO[str]) -> dict[str, Any]:
    """Run the failover drill and return its summary (tears down what it built, always)."""
    placement = _place_netns(options) if options.hosts == "netns" else place_local(options)
    drill: Drill | None = None
    try:
        drill = start_drill(options, log, placement)
        return _drive(drill)
    finally:
        if drill is not None:
            for proc in drill.all():
                proc.kill()  # also reaps the ones that ended by themselves
        if placement.segment is not None:
            placement.segment.destroy()
        if placement.journal_root is not None:
            shutil.rmtree(placement.journal_root, ignore_errors=True)


def _drive(drill: Drill) -> dict[str, Any]:
    options = drill.options
    assert drill.source is not None and drill.client is not None
    # The clock starts with the first delivery: a Spark source spends seconds
    # starting its session before it publishes anything.
    drill.client.wait_for(
        lambda e: e.get("event") == "progress" and e.get("delivered", 0) > 0, SOURCE_START_S
    )
    started = time.monotonic()
    kill_after = options.seconds * options.kill_at
    heal_after = options.seconds * options.heal_at
    killed: int | None = None
    kill_wall: float | None = None
    injected = healed = False
    while drill.source.alive:
        elapsed = time.monotonic() - started
        if options.source == "spark" and elapsed >= options.seconds:
            # The Spark job runs until told; SIGTERM stops it gracefully (a local cluster after it).
            drill.source.stop(timeout=120)
            break
        if not injected and elapsed >= kill_after:
            injected = True
            killed, kill_wall = _inject(drill)
        if injected and not healed and options.partition is not None and elapsed >= heal_after:
            healed = True
            _heal_partition(drill)
        progress = drill.client.last("progress") or {}
        show_progress(
            f"drill: {elapsed:5.1f}s  delivered {progress.get('delivered', 0):>9,}  killed {killed or '-'}"
        )
        try:
            drill.source.popen.wait(timeout=0.05)  # returns as soon as the source ends
        except subprocess.TimeoutExpired:
            pass
    source_summary = drill.source.wait_for(lambda e: "sent" in e, 30)
    group = settle(partial(live_controls, drill), *sent_of(source_summary))
    drain_client(drill.client, group.numbered)
    drill.client.stop()
    summary = drill.client.wait_event("summary", 10)["channels"][CHANNEL]
    drill.roles_at_end = roles_now(drill)
    for proc in drill.adapters.values():
        if proc.alive:
            proc.stop()
    show_progress("")
    return _report(drill, group, summary, killed, kill_wall)


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


def _inject(drill: Drill) -> tuple[int | None, float | None]:
    """Apply the drill's fault(s) at ``--kill-at``; returns (adapter hit, wall time)."""
    options, segment = drill.options, drill.placement.segment
    hit: int | None = None
    if options.kill == "worker":
        drill.faults.append(kill_spark_worker(drill.source))
    elif options.kill != "none":
        hit = victim(drill, options.kill)
        drill.adapters[hit].kill()
        drill.faults.append({"fault": "kill", "adapter": hit})
    if options.cut is not None:
        assert segment is not None
        hit = victim(drill, options.cut)
        segment.cut(adapter_host(hit))
        drill.faults.append({"fault": "cut", "adapter": hit})
    if options.partition is not None:
        assert segment is not None
        a, b = (victim(drill, which) for which in options.partition)
        segment.partition(adapter_host(a), adapter_host(b), [SYNC_PORT])
        drill.partitioned = (a, b)
        drill.faults.append({"fault": "partition", "adapters": [a, b]})
    if options.restart is not None:
        hit = victim(drill, options.restart)
        drill.adapters[hit].kill()
        args = [a for a in drill.adapter_args[hit] if a != "--active"]
        drill.adapters[hit] = start_adapter_process(drill, hit, args)
        drill.faults.append({"fault": "restart", "adapter": hit})
    return hit, time.time()


def _heal_partition(drill: Drill) -> None:
    assert drill.placement.segment is not None and drill.partitioned is not None
    a, b = drill.partitioned
    drill.placement.segment.heal_partition(adapter_host(a), adapter_host(b))
    drill.faults.append({"fault": "heal_partition", "adapters": [a, b]})


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


def _report(
    drill: Drill,
    group: GroupAccount,
    client: dict[str, Any],
    killed: int | None,
    kill_wall: float | None,
) -> dict[str, Any]:
    sent = group.sent
    lost = max(0, group.numbered - int(client["unique"]))
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
        "spark_master": drill.options.spark_master if drill.options.source == "spark" else None,
        "spark_cluster": drill.source.last("spark_cluster") if drill.source is not None else None,
        "backups": drill.options.backups,
        "rate": drill.options.rate,
        "seconds": drill.options.seconds,
        "killed": drill.options.kill if killed is not None or drill.options.kill == "worker" else "none",
        "killed_adapter": killed if drill.options.kill != "none" else None,
        "sent": sent,
        "delivered": client["delivered"],
        "lost": lost,
        **group.summary(),
        "duplicates": client["duplicates"],
        "out_of_order": client["out_of_order"],
        "conflicts": arbiter.get("conflicts", 0),
        "line_holes": arbiter.get("line_holes", 0),
        "gaps_lost": arbiter.get("lost", 0),
        "promoted": bool(promotions),
        "promoted_adapter": promotions[-1][0] if promotions else None,
        "term": max(terms, default=0),
        "max_switch_gap_ms": round(switch_gap, 1),
        "hosts": drill.options.hosts,
        "transport": drill.options.transport,
        "faults": drill.faults,
        "gaps": arbiter.get("gaps", 0),
        "gaps_recovered": _gaps_recovered(arbiter),
        "retransmission_requests": arbiter.get("retransmission_requests", 0),
        "actives_at_end": sum(1 for role in drill.roles_at_end.values() if role == "active"),
        "roles_at_end": {str(n): role for n, role in drill.roles_at_end.items()},
        "adapters": _adapter_counters(drill),
        "client_streams": client.get("streams", {}),
    }


_COUNTERS = ("role", "term", "next_msg_seq", "last_source_seq", "numbered", "published", "source_gaps",
             "duplicates", "dropped_packets", "snapshots_adopted")  # fmt: skip


def _adapter_counters(drill: Drill) -> dict[str, dict[str, Any]]:
    """Each adapter's final counters (from its ``stopped`` report; a killed one has none)."""
    out = {}
    for number, proc in drill.adapters.items():
        stopped = proc.last("stopped")
        if stopped is not None:
            out[str(number)] = {key: stopped.get(key) for key in _COUNTERS}
    return out


def _gaps_recovered(arbiter: dict[str, Any]) -> int:
    """Holes the client saw that were filled (by another line or a retransmission).

    The arbiter counts holes (``gaps``) but lost *messages* (``lost``); a lost
    message ends at most one hole, so ``gaps - open - lost`` is a lower bound.
    """
    closed = int(arbiter.get("gaps", 0)) - int(arbiter.get("open_gaps", 0))
    return max(0, closed - int(arbiter.get("lost", 0)))
