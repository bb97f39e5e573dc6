"""Channel scale-out benchmark: 1, 2, 4 and 8 adapter groups in parallel, on loopback or on netns hosts.

``feedha bench channels [--hosts local|netns] [--quick] [--json]``

One plain source (pregenerated, paced; a feed) publishes one source stream
per channel (A-Z cut into as many letter ranges); each channel has its own
adapter group (an active and a backup) and its own arbitrating client
(``feedha.client.Subscriber`` joined to both lines). The source offers
:data:`TOTAL_OFFERED` msg/s *in total* over the streams, more than this
machine's two cores deliver with any number of channels, so every case runs
saturated and the figure shows how the total delivered rate changes as the
same work is cut into more channels: where the curve bends. With ``--hosts
netns`` every process runs on its own host of a segment of network
namespaces joined by a bridge (:mod:`feedha.netns`; needs root), so the
lines, the sync buses and the source streams cross veth links instead of
loopback; the hosts still share this machine's cores.

The measurement window opens once every client has delivered (every stream
is flowing) and closes when the source finishes; over it each channel's
delivered msg/s and each process's CPU (``psutil``: user + system seconds)
are taken: its share of one core, and microseconds of CPU per delivered
message of its channel (the source: per message of all channels). Then the
backlog is drained and the clients report what they lost (nothing may be).
``docs/scale-out.md`` turns the per-message CPU of each role into a sizing
table.

Ceiling, in the same run: the bare pyzmq PUB→SUB pair (100-byte messages), the
faster of one run before and one after the cases.
"""

from __future__ import annotations

import signal
import string
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Final

from feedha.bench.common import Figure, figure
from feedha.bench.pipeline import HEARTBEAT_TIMEOUT_S, SOURCE_BATCHING, SYMBOLS, ceiling, open_log

CHANNELS: Final = (1, 2, 4, 8)
QUICK_CHANNELS: Final = (1, 4)
TOTAL_OFFERED: Final = 400_000.0  # msg/s over all channels: above what 2 cores deliver with any split
SECONDS: Final = 5.0
QUICK_SECONDS: Final = 3.0
SOURCE_HOST: Final = "src"
START_S: Final = 60.0
DRAIN_S: Final = 60.0
DRAIN_STALL_S: Final = 5.0
# Fixed ports on the namespace hosts (each host has its own port space); stream N is on 7000 + N.
SOURCE_PORT, LINE_PORT, SYNC_PORT = 7000, 7001, 7002
ROLES: Final = ("source", "active", "backup", "client")


@dataclass
class _Channel:
    """One channel: its source stream, its group, where its processes run, and those processes."""

    number: int
    letters: str  # its source stream: the symbols whose initial is in this range
    group: Any  # feedha.cluster.GroupPlan
    hosts: dict[str, str]  # role -> netns host name ("" on loopback)
    procs: dict[str, Any] = field(default_factory=dict)  # role -> JsonProcess


def stream_letters(count: int) -> list[str]:
    """A-Z cut into ``count`` contiguous ranges as even as can be, e.g. 2 -> ``["A-M", "N-Z"]``."""
    if not 1 <= count <= 26:
        raise ValueError(f"channels must be 1..26: {count}")
    letters, spans, start = string.ascii_uppercase, [], 0
    for index in range(count):
        size = 26 // count + (1 if index < 26 % count else 0)
        spans.append(f"{letters[start]}-{letters[start + size - 1]}")
        start += size
    return spans


def _host_names(number: int) -> dict[str, str]:
    return {"active": f"ad-{number}-1", "backup": f"ad-{number}-2", "client": f"cli-{number}"}


def _plan(count: int, segment: Any) -> tuple[list[_Channel], str]:
    # Every channel's group and the source's host ("" on loopback); on netns each
    # process gets a host of the segment, with fixed ports.
    from feedha.cluster import AdapterPlan, GroupPlan, plan_group
    from feedha.ports import free_ports

    plan = segment.create() if segment is not None else None
    source_address = plan.host(SOURCE_HOST).address if plan is not None else "127.0.0.1"
    channels = []
    for number, letters in enumerate(stream_letters(count), start=1):
        port = SOURCE_PORT + number if plan is not None else free_ports(1)[0]
        source = f"tcp://{source_address}:{port}"
        name = f"BENCH{number}"
        if plan is None:
            group = plan_group(channel=name, channel_number=number, source_endpoint=source,
                               source_stream=letters, source_stream_number=number, size=2)  # fmt: skip
            channels.append(_Channel(number, letters, group, dict.fromkeys(ROLES, "")))
            continue
        hosts = _host_names(number)
        adapters = []
        for index, role in ((1, "active"), (2, "backup")):
            address = plan.host(hosts[role]).address
            control = f"ipc:///tmp/{segment.tag}-control-{number}-{index}"
            line, sync = f"tcp://{address}:{LINE_PORT}", f"tcp://{address}:{SYNC_PORT}"
            adapters.append(AdapterPlan(adapter=index, line=line, sync=sync, control=control))
        group = GroupPlan(name, number, source, letters, number, tuple(adapters))
        channels.append(_Channel(number, letters, group, hosts))
    return channels, SOURCE_HOST if plan is not None else ""


def _spawn(
    name: str, module: str, args: Sequence[str], host: str, segment: Any, log: IO[str], *, nice: int = 0
) -> Any:
    from feedha.procs import JsonProcess, python_argv

    if segment is not None:  # plain sockets between the namespaces' hosts, on purpose
        args = [*args, "--insecure"]
    argv = python_argv(module, args, nice=nice)
    if segment is not None:
        argv = segment.exec_argv(host, argv)
    return JsonProcess(name, argv, log=log)


def _start_groups(channels: list[_Channel], segment: Any, log: IO[str]) -> None:
    from feedha.cluster import adapter_argv

    for channel in channels:
        for index, role in ((1, "active"), (2, "backup")):
            extra = ["--heartbeat-timeout", str(HEARTBEAT_TIMEOUT_S)]
            args = adapter_argv(channel.group, index, active=index == 1, extra=extra)
            name = f"{channel.group.channel}/{role}"
            channel.procs[role] = _spawn(name, "feedha.adapter", args, channel.hosts[role], segment, log)
    for channel in channels:
        channel.procs["active"].wait_event("ready", START_S)
        channel.procs["backup"].wait_event("ready", START_S)
        channel.procs["active"].wait_for(_became_active, START_S)
    for channel in channels:
        group = channel.group
        args = ["--channel", group.channel, "--channel-number", str(group.channel_number)]
        for line in group.lines:
            args += ["--line", line]
        args += ["--symbols", str(SYMBOLS)]
        name, host = f"{group.channel}/client", channel.hosts["client"]
        channel.procs["client"] = _spawn(name, "feedha.bench.client", args, host, segment, log)
    for channel in channels:
        channel.procs["client"].wait_event("ready", START_S)


def _became_active(event: dict[str, Any]) -> bool:
    return event.get("event") == "role" and event.get("new") == "active"


def _start_source(channels: list[_Channel], host: str, segment: Any, log: IO[str], *, seconds: float) -> Any:
    # One source for every channel, a stream each: every stream starts at once.
    args = ["--streams", ",".join(c.letters for c in channels)]
    for channel in channels:
        args += ["--endpoint", f"{channel.letters}={channel.group.source_endpoint}"]
    args += [*("--rate", f"{TOTAL_OFFERED:g}", "--seconds", f"{seconds:g}", "--symbols", str(SYMBOLS)),
             *("--seed", "7", "--wait-subscribers", "2", "--linger-ms", "10000"),
             "--pregenerate"]  # fmt: skip
    # Niced, as in every capacity run (bench.pipeline): the simulator yields to the system under test.
    from feedha.procs import SOURCE_NICE

    return _spawn("source", "feedha.plain_source", args, host, segment, log, nice=SOURCE_NICE)


def _delivered(proc: Any) -> int:
    return int((proc.last("progress") or {}).get("delivered", 0))


def _cpu_seconds(proc: Any) -> float:
    import psutil

    try:
        times = psutil.Process(proc.popen.pid).cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)


@dataclass
class _Sample:
    at: float
    cpu: dict[tuple[int, str], float]  # (channel, role) -> CPU seconds; the source is (0, "source")
    delivered: dict[int, int]


def _sample(channels: list[_Channel], source: Any) -> _Sample:
    cpu = {(c.number, role): _cpu_seconds(proc) for c in channels for role, proc in c.procs.items()}
    cpu[(0, "source")] = _cpu_seconds(source)
    delivered = {c.number: _delivered(c.procs["client"]) for c in channels}
    return _Sample(at=time.monotonic(), cpu=cpu, delivered=delivered)


def _wait_until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"bench channels: {what} did not happen within {timeout:.0f} s")
        time.sleep(0.02)  # polling the processes' last events, bounded by the deadline


def run_case(count: int, *, hosts: str, seconds: float, log: IO[str]) -> dict[str, Any]:
    """Run ``count`` channels at once (see module doc) and return what was measured.

    Raises:
        TimeoutError: a component did not start or send in time.
        feedha.procs.ProcessError: a component exited early.
    """
    from feedha import netns

    segment = None
    if hosts == "netns":
        if not netns.is_available():
            raise RuntimeError("--hosts netns needs root, iproute2 (ip) and nftables (nft)")
        names = [SOURCE_HOST, *(h for n in range(1, count + 1) for h in _host_names(n).values())]
        segment = netns.Segment(names)
    channels: list[_Channel] = []
    source = None
    try:
        channels, source_host = _plan(count, segment)
        _start_groups(channels, segment, log)
        source = _start_source(channels, source_host, segment, log, seconds=seconds)
        clients = [c.procs["client"] for c in channels]
        _wait_until(lambda: all(_delivered(p) > 0 for p in clients), START_S + seconds, "every delivery")
        first = _sample(channels, source)
        summary = source.wait_for(lambda e: "sent" in e, START_S + seconds)
        last = _sample(channels, source)
        sent = {c.number: int(summary["streams"][c.letters]["sent"]) for c in channels}
        _drain(channels, sent)
        summaries = _client_summaries(channels)
        return _measure(channels, first, last, sent, summaries, hosts=hosts, seconds=seconds)
    finally:
        for proc in [*(p for c in channels for p in c.procs.values()), *([source] if source else [])]:
            proc.kill()
        if segment is not None:
            segment.destroy()


def _drain(channels: list[_Channel], sent: dict[int, int]) -> None:
    # Until every client has delivered what its source sent, or delivery stalled
    # for DRAIN_STALL_S (what is missing then is reported), at most DRAIN_S.
    deadline = time.monotonic() + DRAIN_S
    seen, changed_at = -1, time.monotonic()
    while time.monotonic() < deadline:
        counts = [_delivered(c.procs["client"]) for c in channels]
        if all(n >= sent[c.number] for n, c in zip(counts, channels, strict=True)):
            return
        if sum(counts) != seen:
            seen, changed_at = sum(counts), time.monotonic()
        elif time.monotonic() - changed_at > DRAIN_STALL_S:
            return
        time.sleep(0.05)  # polling the clients' progress events, bounded by the deadline


def _sent(proc: Any) -> bool:
    return any("sent" in event for event in proc.events)


def _client_summaries(channels: list[_Channel]) -> dict[int, dict[str, Any]]:
    for channel in channels:
        channel.procs["client"].popen.send_signal(signal.SIGTERM)
    return {c.number: c.procs["client"].wait_event("summary", 30) for c in channels}


def _measure(
    channels: list[_Channel],
    first: _Sample,
    last: _Sample,
    sent: dict[int, int],
    summaries: dict[int, dict[str, Any]],
    *,
    hosts: str,
    seconds: float,
) -> dict[str, Any]:
    window = max(last.at - first.at, 1e-9)
    per_channel = {n: (last.delivered[n] - first.delivered[n]) / window for n in last.delivered}
    processes = []
    for (number, role), cpu in sorted(last.cpu.items()):
        used = cpu - first.cpu.get((number, role), 0.0)
        # The source serves every channel: its cost is per message of them all.
        delivered = sum(last.delivered[n] - first.delivered[n] for n in last.delivered if number in (0, n))
        processes.append(
            {
                "channel": number,
                "role": role,
                "cpu_percent": round(100 * used / window, 1),
                "us_per_msg": round(1e6 * used / delivered, 2) if delivered else None,
            }
        )
    lost = undelivered = 0
    for number, summary in summaries.items():
        unique = summary["delivered"] - summary["duplicates"]
        lost += max(0, summary["last_source_seq"] - unique, summary["arbiter_lost"])
        undelivered += max(0, sent[number] - summary["last_source_seq"])
    failovers = sum(
        1
        for c in channels
        for p in (c.procs["active"], c.procs["backup"])
        for e in p.events
        if e.get("event") == "role" and e.get("new") == "active" and (e.get("term") or 0) > 1
    )
    return {
        "channels": len(channels),
        "hosts": hosts,
        "total_rate": sum(per_channel.values()),
        "per_channel_rate": [round(per_channel[n], 1) for n in sorted(per_channel)],
        "window_s": round(window, 2),
        "processes": processes,
        "by_role": _by_role(processes),
        "sent": sum(sent.values()),
        "lost": lost,
        "undelivered": undelivered,
        "duplicates": sum(s["duplicates"] + s["out_of_order"] for s in summaries.values()),
        "failovers": failovers,
        "offered_total": TOTAL_OFFERED,
        "streams": [c.letters for c in channels],
        "seconds": seconds,
    }


def _by_role(processes: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    # Per role: the mean CPU share of one core and the mean µs of CPU per delivered message.
    out: dict[str, dict[str, float | None]] = {}
    for role in ROLES:
        rows = [p for p in processes if p["role"] == role]
        costs = [p["us_per_msg"] for p in rows if p["us_per_msg"] is not None]
        out[role] = {
            "cpu_percent": round(sum(p["cpu_percent"] for p in rows) / len(rows), 1) if rows else None,
            "us_per_msg": round(sum(costs) / len(costs), 2) if costs else None,
        }
    return out


def run(*, quick: bool = False, hosts: str = "local") -> list[Figure]:
    """Measure total and per-channel delivered msg/s, and per-process CPU, for each number of channels.

    Args:
        quick: fewer channel counts (1 and 4), shorter runs.
        hosts: ``local`` (loopback) or ``netns`` (a network namespace per process; root).

    Returns:
        One ``channels`` figure per channel count.
    """
    if hosts not in ("local", "netns"):
        raise ValueError(f"hosts must be local or netns: {hosts!r}")
    seconds = QUICK_SECONDS if quick else SECONDS
    figures: list[Figure] = []
    with open_log("channels") as log:
        bare = [ceiling(quick=quick, log=log)]
        cases = [
            run_case(count, hosts=hosts, seconds=seconds, log=log)
            for count in (QUICK_CHANNELS if quick else CHANNELS)
        ]
        bare.append(ceiling(quick=quick, log=log))
    top = max(b["rate"] for b in bare)
    for case in cases:
        params = {key: value for key, value in case.items() if key != "total_rate"}
        params |= {
            "adapters": "active + 1 backup per channel",
            "source_batching": SOURCE_BATCHING,
            "ceiling_runs": [round(b["rate"], 1) for b in bare],
            "quick": quick,
            "log": log.name,
        }
        figures.append(
            figure(name="channels", value=case["total_rate"], unit="msg/s", ceiling=top, params=params)
        )
    return figures
