"""The pipeline harness every feedha benchmark shares.

The pipeline: the plain source (``plain_source``) → one or more
adapter groups (an active and ``backups``; real ``feedha adapter``
processes) → one or more bench clients (:mod:`bench.client`:
``client_lib.Subscriber`` joined to every line of its channel, so it
arbitrates), all on loopback. Every run starts fresh processes and is
bounded in time; :func:`run_pipeline` returns what the source sent and what
each client delivered, and, asked to, each process's CPU per message over
the steady part of the run (:mod:`bench.cpu`).
"""

from __future__ import annotations

import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from feedha.bench.client import SYMBOLS

STREAM: Final = "A-Z"
CEILING_COUNT: Final = 300_000
QUICK_CEILING_COUNT: Final = 100_000
# How the plain source batches (no option sets it): a message goes out as soon as it is due.
SOURCE_BATCHING: Final = (
    "as due: each message sent when due, several per frame (<= 64) only when several are due"
)
HEARTBEAT_TIMEOUT_S: Final = 2.0

__all__ = [
    "CEILING_COUNT",
    "HEARTBEAT_TIMEOUT_S",
    "QUICK_CEILING_COUNT",
    "SOURCE_BATCHING",
    "STREAM",
    "SYMBOLS",
    "PipelineOptions",
    "PipelineResult",
    "ceiling",
    "mean_source_bytes",
    "open_log",
    "run_pipeline",
]


@dataclass(kw_only=True)
class PipelineOptions:
    """One pipeline run.

    Attributes:
        rate: source messages/s per channel (0: unpaced).
        seconds: how long each source streams.
        channels: adapter groups in parallel, each with its own source process.
        backups: backups per group besides the active.
        subscribers: bench clients per channel.
        symbols: symbols each source generates.
        keep_symbols: clients decode and keep only this many symbols (0: keep all, no decode).
        latency: clients decode and time every delivery.
        heartbeat_timeout: the adapters' ``--heartbeat-timeout``: longer than the
            default so a scheduling stall on a shared 2-core machine does not
            start a failover in the middle of a throughput or latency run
            (``bench failover`` keeps the default; runs report ``failovers``).
        count: if set, each source sends this many messages unpaced (``rate`` and
            ``seconds`` are then only a time bound).
        pregenerate: sources generate their messages before the clock starts
            (``feedha source --pregenerate``): on a 2-core machine a live
            generator (~5 µs of Python per message) would take the CPU the
            adapters and the client need, and the bare ceiling's sender
            generates nothing either. Such a capacity run's source also runs
            niced (``feedha.procs.SOURCE_NICE``), as the drills' does. A latency
            run's source pregenerates with ``--due-stamps`` (event times are the
            scheduled send times, as a live source's) and runs at normal priority.
        secure: the data plane as deployed with keys: every adapter's line and
            sync bus are CURVE servers (``--curve-key``, ``--sync-key``), the
            client's key is admitted with ``--grant-keys`` and the client
            connects with its key pair (no admin server in the loop).
        journal: every adapter journals what it publishes (``--journal`` in a
            temporary directory, ``--fsync batch``, its replay service on), as
            production runs.
        journal_root: with ``journal``, keep the journals here instead (tests read them).
        measure_cpu: measure each process's CPU (the source, the active, each backup,
            the client) over the steady part of the run (:func:`bench.cpu.steady_window`);
            one channel, one client; with ``count`` (unpaced) from the first delivery to
            the last instead (:class:`bench.cpu.RunWindow`, memory growth too).
    """

    rate: float
    seconds: float
    channels: int = 1
    backups: int = 1
    subscribers: int = 1
    symbols: int = SYMBOLS
    keep_symbols: int = 0
    latency: bool = False
    heartbeat_timeout: float = HEARTBEAT_TIMEOUT_S
    count: int | None = None  # unpaced: send this many as fast as the source can, then stop
    pregenerate: bool = True
    secure: bool = False
    journal: bool = False
    journal_root: Path | None = None
    measure_cpu: bool = False
    capture: Path | None = (
        None  # a capture played by the source (``--file``); adapters --format capture_format
    )
    capture_format: str = "fix44"  # fix44, or itch50 (a BinaryFILE capture sent as MoldUDP64 packets)

    def __post_init__(self) -> None:
        paced = self.rate > 0 or self.count is not None
        if self.measure_cpu and (self.channels != 1 or self.subscribers != 1 or not paced):
            raise ValueError(
                "measure_cpu needs one channel, one subscriber and a paced or counted source: "
                f"channels={self.channels}, subscribers={self.subscribers}, rate={self.rate}"
            )


@dataclass
class PipelineResult:
    """What the sources sent and the clients delivered (one summary per client)."""

    options: PipelineOptions
    sent: list[int]  # per channel
    source_elapsed_s: list[float]
    source_end_wall: list[float]
    clients: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # (channel index, summary)
    roles: list[dict[str, Any]] = field(default_factory=list)  # adapters' role changes (a failover = trouble)
    cpu: dict[str, Any] | None = None  # with measure_cpu: bench.cpu.steady_window's result
    source_summaries: list[dict[str, Any]] = field(default_factory=list)  # each source's summary line

    @property
    def lost(self) -> int:
        """Messages lost, over every client: missing below the last delivered
        ``source_seq``, or declared lost by the arbiter (which also sees a lost
        tail, through the lines' heartbeats), whichever is more."""
        total = 0
        for _ch, s in self.clients:
            unique = s["delivered"] - s["duplicates"]
            total += max(0, s["last_source_seq"] - unique, s["arbiter_lost"])
        return total

    @property
    def undelivered(self) -> int:
        """Sent but not yet delivered when the drain deadline passed (slowness, not loss)."""
        return sum(max(0, self.sent[ch] - s["last_source_seq"]) for ch, s in self.clients)

    @property
    def duplicates(self) -> int:
        return sum(s["duplicates"] + s["out_of_order"] for _ch, s in self.clients)

    @property
    def failovers(self) -> int:
        """Promotions after the start (a backup taking over mid-run: worth knowing beside any figure)."""
        return sum(1 for e in self.roles if e["new"] == "active" and (e["term"] or 0) > 1)

    def total_rate(self) -> float:
        """All clients' deliveries over the span from the first to the last delivery anywhere."""
        firsts = [s["first_wall"] for _ch, s in self.clients if s["delivered"]]
        lasts = [s["last_wall"] for _ch, s in self.clients if s["delivered"]]
        span = max(lasts, default=0.0) - min(firsts, default=0.0)
        total = sum(s["delivered"] for _ch, s in self.clients)
        return total / span if span > 0 else 0.0

    def client_rate(self, summary: dict[str, Any], *, kept: bool = False) -> float:
        """A client's delivered msg/s from its first to its last delivery."""
        span = summary["last_wall"] - summary["first_wall"]
        count = summary["kept"] if kept else summary["delivered"]
        return count / span if span > 0 and count > 1 else 0.0

    def drain_s(self) -> float:
        """How much longer than the source's send window the slowest client took (first to last delivery)."""
        return max(
            (s["last_wall"] - s["first_wall"] - self.options.seconds for _ch, s in self.clients),
            default=0.0,
        )

    def source_rate(self) -> float:
        """What the sources achieved, msg/s per channel (mean over their send window)."""
        return sum(self.sent) / len(self.sent) / self.options.seconds if self.sent else 0.0


def run_pipeline(options: PipelineOptions, log: IO[str]) -> PipelineResult:
    """Start the groups, clients and sources; stream; collect; stop everything.

    Raises:
        feedha.procs.ProcessError: a component did not start or report in time.
    """
    from feedha.procs import JsonProcess

    procs: list[JsonProcess] = []
    keys = tempfile.TemporaryDirectory(prefix="feedha-bench-keys-") if options.secure else None
    journals = (
        tempfile.TemporaryDirectory(prefix="feedha-bench-journals-")
        if options.journal and options.journal_root is None
        else None
    )
    journal_root = options.journal_root if journals is None else Path(journals.name)
    try:
        groups, adapters = _start_groups(options, journal_root, keys, log, procs)
        clients = _start_clients(options, groups, keys, log)
        procs += [proc for _ch, proc in clients]
        for _ch, proc in clients:
            proc.wait_event("ready", 30)
        sources = [_start_source(options, group, keys, log) for group in groups]
        procs += sources
        window = _run_window(options, adapters[0], sources[0], clients[0][1])
        paced_cpu = options.measure_cpu and window is None
        cpu = _measure_cpu(options, adapters[0], sources[0], clients[0][1]) if paced_cpu else None
        summaries = []
        for proc in sources:
            summary = proc.wait_for(lambda e: "sent" in e, options.seconds + 60)
            summaries.append((summary, time.time()))
        result = PipelineResult(
            options,
            sent=[int(s["sent"]) for s, _t in summaries],
            source_elapsed_s=[float(s["elapsed_s"]) for s, _t in summaries],
            source_end_wall=[t for _s, t in summaries],
            cpu=cpu,
            source_summaries=[s for s, _t in summaries],
        )
        result.clients += _client_summaries(options, clients, result.sent, window)
        result.cpu = result.cpu if window is None else window.result
        result.roles += [
            _role(e) for members in adapters for proc in members for e in proc.events if _is_role(e)
        ]
        return result
    finally:
        for proc in procs:
            proc.kill()
        if keys is not None:
            keys.cleanup()
        if journals is not None:
            journals.cleanup()


@dataclass
class _SecureGroup:
    """One secured group's key files, made on first use: each adapter's, the sync key, the client's."""

    root: Path
    group: Any  # feedha.cluster.GroupPlan

    def _keys(self, name: str) -> Any:
        from feedha.adapter.zap import load_keys, write_keys

        path = self.root / f"{self.group.channel}-{name}.key"
        return load_keys(path) if path.exists() else write_keys(path)

    def adapter_argv(self, number: int) -> list[str]:
        client = self._keys("client")
        self._keys("sync")
        grants = self.root / f"{self.group.channel}-grants.txt"
        grants.write_text(client.public.decode() + "\n", encoding="ascii")
        self._keys(f"adapter-{number}")
        self._keys("source")
        return [
            *("--curve-key", str(self.root / f"{self.group.channel}-adapter-{number}.key")),
            *("--sync-key", str(self.root / f"{self.group.channel}-sync.key")),
            *("--source-key", str(self.root / f"{self.group.channel}-source.key.pub")),
            *("--grant-keys", str(grants)),
        ]

    def source_argv(self) -> list[str]:
        """The source's key pair, admitting the group's adapters (the source link is CURVE too)."""
        argv = ["--curve-key", str(self.root / f"{self.group.channel}-source.key")]
        for plan in self.group.adapters:
            self._keys(f"adapter-{plan.adapter}")
            argv += ["--allow-key", str(self.root / f"{self.group.channel}-adapter-{plan.adapter}.key.pub")]
        return argv

    def client_argv(self) -> list[str]:
        argv = ["--curve-key", str(self.root / f"{self.group.channel}-client.key")]
        for plan in self.group.adapters:
            key = self._keys(f"adapter-{plan.adapter}").public.decode()
            argv.append(f"--server-key={key}")  # joined: a Z85 key may begin with "-"
        return argv


def _start_groups(
    options: PipelineOptions, journal_root: Path | None, keys: Any, log: IO[str], procs: list[Any]
) -> tuple[list[Any], list[list[Any]]]:
    # Every channel's adapter group, started and ready (its first adapter the active); each
    # process is added to `procs` as it starts, for the caller to stop whatever happens.
    from feedha.cluster import GroupPlan, plan_group, start_adapter
    from feedha.ports import free_ports
    from feedha.procs import JsonProcess

    groups: list[GroupPlan] = []
    adapters: list[list[JsonProcess]] = []
    for ch in range(options.channels):
        endpoint = f"tcp://127.0.0.1:{free_ports(1)[0]}"
        group = plan_group(
            channel=f"BENCH{ch + 1}",
            channel_number=ch + 1,
            source_endpoint=endpoint,
            source_stream=STREAM,
            source_stream_number=1,
            size=options.backups + 1,
            journal_root=journal_root if options.journal else None,
        )
        groups.append(group)
        secured = _SecureGroup(Path(keys.name), group) if keys is not None else None
        members = [
            start_adapter(
                group,
                plan.adapter,
                active=plan.adapter == 1,
                log=log,
                extra=[
                    *(secured.adapter_argv(plan.adapter) if secured is not None else ()),
                    *(("--fsync", "batch") if options.journal else ()),
                    *(("--format", options.capture_format) if options.capture is not None else ()),
                ],
            )
            for plan in group.adapters
        ]
        procs += members
        adapters.append(members)
    for members in adapters:
        for proc in members:
            proc.wait_event("ready", 30)
        members[0].wait_for(lambda e: e.get("event") == "role" and e.get("new") == "active", 30)
    return groups, adapters


def _client_summaries(
    options: PipelineOptions, clients: list[tuple[int, Any]], sent: list[int], window: Any = None
) -> list[tuple[int, Any]]:
    # Let the clients drain (bounded), close an unpaced run's CPU window, then ask for the summaries.
    drain_deadline = time.monotonic() + max(15.0, options.seconds)
    for ch, proc in clients:
        try:
            proc.wait_for(_delivered_at_least(sent[ch]), max(0.1, drain_deadline - time.monotonic()))
        except Exception:  # noqa: BLE001 - a short delivery is reported as lost below
            pass
    if window is not None:
        window.close(_delivered(clients[0][1]))
    for _ch, proc in clients:
        proc.popen.send_signal(signal.SIGTERM)
    return [(ch, proc.wait_event("summary", 20)) for ch, proc in clients]


def _is_role(event: dict[str, Any]) -> bool:
    return event.get("event") == "role"


def _role(event: dict[str, Any]) -> dict[str, Any]:
    # A role change as the result keeps it.
    return {key: event.get(key) for key in ("adapter", "new", "term", "reason")}


def _start_clients(
    options: PipelineOptions, groups: list[Any], keys: Any, log: IO[str]
) -> list[tuple[int, Any]]:
    from feedha.procs import JsonProcess

    clients: list[tuple[int, Any]] = []
    for ch, group in enumerate(groups):
        args = ["--channel", group.channel, "--channel-number", str(group.channel_number)]
        for line in group.lines:
            args += ["--line", line]
        if keys is not None:
            args += _SecureGroup(Path(keys.name), group).client_argv()
        args += ["--symbols", str(options.symbols)]
        if options.keep_symbols:
            args += ["--keep-symbols", str(options.keep_symbols)]
        if options.latency:
            args.append("--latency")
        for index in range(options.subscribers):
            proc = JsonProcess.python(f"client-{ch}-{index}", "feedha.bench.client", args, log=log)
            clients.append((ch, proc))
    return clients


def _start_source(options: PipelineOptions, group: Any, keys: Any, log: IO[str]) -> Any:
    from feedha.procs import SOURCE_NICE, JsonProcess

    pacing = ["--rate", str(options.rate), "--seconds", str(options.seconds)]
    if options.count is not None:
        pacing = ["--rate", "0", "--count", str(options.count), "--seconds", str(options.seconds)]
    made_ahead = options.pregenerate and options.capture is None
    source_args = [
        *("--endpoint", f"{STREAM}={group.source_endpoint}", "--streams", STREAM),
        *pacing,
        *("--symbols", str(options.symbols), "--seed", "7"),
        *("--wait-subscribers", str(options.backups + 1), "--linger-ms", "10000"),
        *(("--pregenerate",) if made_ahead else ()),
        *(("--due-stamps",) if made_ahead and options.latency else ()),
    ]
    if options.capture is not None:  # a capture is read before the clock starts, as pregenerated
        source_args += ["--file", str(options.capture), "--format", options.capture_format]
    if keys is not None:
        source_args += _SecureGroup(Path(keys.name), group).source_argv()
    # A capacity run's source (pregenerated) is a simulator sending each message when due: at
    # full priority it would wake ~100k times a second at 250k msg/s and take the CPU of the
    # system under test (adapters missed heartbeats and failed over). Niced, as the drills run
    # it, it yields; late wake-ups then carry more messages a frame, as a loaded feed's do.
    nice = SOURCE_NICE if options.pregenerate and not options.latency else 0
    return JsonProcess.python("source", "feedha.plain_source", source_args, log=log, nice=nice)


def _measure_cpu(options: PipelineOptions, adapters: list[Any], source: Any, client: Any) -> dict[str, Any]:
    # Roles as bench.cpu.compare reads them: the active is the group's first adapter.
    from feedha.bench.cpu import steady_window

    pids = {"source": source.popen.pid, "active": adapters[0].popen.pid, "client": client.popen.pid}
    pids |= {f"backup-{n}": proc.popen.pid for n, proc in enumerate(adapters[1:], start=1)}
    return steady_window(
        pids,
        rate=options.rate,
        seconds=options.seconds,
        flowing=lambda: (client.last("progress") or {}).get("delivered", 0) > 0,
    )


def _run_window(options: PipelineOptions, adapters: list[Any], source: Any, client: Any) -> Any:
    # An unpaced run's CPU window, opened at the first delivery (None: a paced run, or no CPU asked).
    if not options.measure_cpu or options.count is None:
        return None
    from feedha.bench.cpu import RunWindow

    pids = {"source": source.popen.pid, "active": adapters[0].popen.pid, "client": client.popen.pid}
    pids |= {f"backup-{n}": proc.popen.pid for n, proc in enumerate(adapters[1:], start=1)}
    window = RunWindow(pids)
    window.open(lambda: _delivered(client))
    return window


def _delivered(client: Any) -> int:
    return int((client.last("progress") or {}).get("delivered", 0))


def _delivered_at_least(count: int) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e.get("event") == "progress" and e.get("delivered", 0) >= count


def mean_source_bytes(*, sample: int = 2000) -> float:
    """The mean size of the pipeline's source messages (``STREAM``, ``SYMBOLS``, seed 7), bytes."""
    from feedha.plain_source import SymbolModel

    model = SymbolModel(streams=(STREAM,), symbol_count=SYMBOLS, seed=7, epoch_ns=time.time_ns())
    sizes = [len(message.data) for message in model.generate_messages(sample)]
    return round(sum(sizes) / len(sizes), 1)


def open_log(name: str) -> IO[str]:
    """A temp file for the components' stderr (kept, so a failure can be read)."""
    return open(tempfile.mkstemp(prefix=f"feedha-bench-{name}-", suffix=".log")[1], "w")  # noqa: SIM115


def ceiling(*, quick: bool, log: IO[str]) -> dict[str, Any]:
    """The bare pyzmq throughput ceiling (one run)."""
    from feedha.bench.ceiling import run_pair

    return run_pair(count=QUICK_CEILING_COUNT if quick else CEILING_COUNT, log=log)
