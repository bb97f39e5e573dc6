"""Throughput benchmark, and the pipeline harness every feedha benchmark shares.

The pipeline: the plain source (``plain_source``) → one or more
adapter groups (an active and ``backups``; real ``feedha adapter``
processes) → one or more bench clients (``python -m feedha.bench.throughput
client``: ``client_lib.Subscriber`` joined to every line of its channel, so
it arbitrates), all on loopback. Every run starts fresh processes and is
bounded in time; :func:`run_pipeline` returns what the source sent and what
each client delivered.

``throughput`` ramps the source rate (short steps, each a fresh pipeline)
and reports the highest step that was *sustained*: 0 lost, every sent
message delivered, and the client done within a small drain allowance after
the source stopped (with unbounded high-water marks, overload shows as a
growing queue, not as loss). Its ceiling is the bare pyzmq PUB→SUB pair
(:mod:`bench.ceiling`) measured in the same run (best of two, one before and
one after the ramp, so a loaded machine lowers the ratio rather than
flattering it).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from feedha.bench.common import Figure, figure

STREAM: Final = "A-Z"
SYMBOLS: Final = 200
RAMP_START: Final = 10_000.0
RAMP_FACTOR: Final = 1.5
STEP_S: Final = 3.0
QUICK_STEP_S: Final = 1.5
RAMP_BUDGET_S: Final = 150.0
QUICK_RAMP_BUDGET_S: Final = 45.0
DRAIN_ALLOWANCE_S: Final = 0.25  # the client may finish this long after the source (queueing, not overload)
CEILING_COUNT: Final = 300_000
QUICK_CEILING_COUNT: Final = 100_000
PROGRESS_S: Final = 0.1
SOURCE_TICK_S: Final = 0.001  # the source sends ~rate/1000 messages per frame, as a batching feed does
HEARTBEAT_TIMEOUT_S: Final = 2.0


# --- the bench client (a child process) ---------------------------------------------------


def _emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def client_parser() -> argparse.ArgumentParser:
    """The options of ``python -m feedha.bench.throughput client``."""
    parser = argparse.ArgumentParser(prog="python -m feedha.bench.throughput client")
    parser.add_argument("--channel", required=True)
    parser.add_argument("--channel-number", type=int, required=True)
    parser.add_argument("--line", action="append", required=True)
    parser.add_argument(
        "--keep-symbols", type=int, default=0, help="decode and keep only the first K symbols"
    )
    parser.add_argument("--symbols", type=int, default=SYMBOLS, help="symbols the source generates")
    parser.add_argument("--latency", action="store_true", help="decode and time event time -> delivery")
    parser.add_argument(
        "--server-key", action="append", default=[], help="per --line, the adapter's CURVE public key (Z85)"
    )
    parser.add_argument("--curve-key", help="this client's CURVE key pair file (with --server-key)")
    return parser


def client_main(argv: Sequence[str]) -> int:
    """``python -m feedha.bench.throughput client``: subscribe, arbitrate, count; summary on SIGTERM.

    Prints ``ready`` once a packet arrived, ``progress`` every 0.1 s, and a
    ``summary`` (delivered, kept, unique/duplicates/out-of-order per the block
    headers, first/last delivery wall time, arbiter counters, latencies) on SIGTERM.
    """
    from feedha.client import ChannelSpec, Delivery, Subscriber, SubscriberConfig
    from feedha.plain_source import symbol_names

    args = client_parser().parse_args(list(argv))
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    keep = frozenset(symbol_names(args.symbols)[: args.keep_symbols]) if args.keep_symbols else None
    spec = ChannelSpec(
        args.channel, args.channel_number, tuple(args.line), server_keys=tuple(args.server_key)
    )
    config = SubscriberConfig()
    if args.curve_key:
        from feedha.adapter.zap import load_keys

        keys = load_keys(Path(args.curve_key))
        config = SubscriberConfig(curve_public=keys.public.decode(), curve_secret=keys.secret.decode())
    delivered = kept = duplicates = out_of_order = 0
    last_source_seq = 0
    first_wall = last_wall = 0.0
    latencies = array("q")
    # Per hop, from the packet's send time (the adapter's publish): source -> adapter publish
    # (the source's batching, hop 1, the adapter) and adapter publish -> delivery (hop 2, the client).
    to_publish, from_publish = array("q"), array("q")
    ready = False
    next_progress = time.monotonic() + PROGRESS_S
    time_ns = time.time_ns
    with Subscriber([spec], config) as subscriber:
        while not stopping:
            events = subscriber.poll(0.05)
            if events:
                now_ns = time_ns()
                for event in events:
                    if type(event) is not Delivery:
                        continue
                    delivered += 1
                    seq = event.source_seq
                    if seq <= last_source_seq:
                        duplicates += seq == last_source_seq
                        out_of_order += seq < last_source_seq
                    else:
                        last_source_seq = seq
                    if keep is not None or args.latency:
                        update = event.update  # decodes the protobuf payload
                        if keep is not None and update.symbol not in keep:
                            continue
                        if args.latency:
                            event_ns, sent_ns = update.event_time_ns, event.send_time_ns
                            latencies.append(now_ns - event_ns)
                            to_publish.append(sent_ns - event_ns)
                            from_publish.append(now_ns - sent_ns)
                    kept += 1
                if not first_wall:
                    first_wall = now_ns / 1e9
                last_wall = now_ns / 1e9
            now = time.monotonic()
            # Ready once the first line (the starting active's) has delivered a
            # packet: its subscription is live, so nothing the source sends from
            # now on can fall into a slow-joiner hole on every line.
            if not ready and subscriber.stats()[args.channel].lines[0].packets > 0:
                ready = True
                _emit("ready")
            if now >= next_progress:
                next_progress = now + PROGRESS_S
                _emit("progress", delivered=delivered, last_wall=last_wall)
        stats = subscriber.stats()[args.channel]
    summary: dict[str, Any] = {
        "delivered": delivered,
        "kept": kept,
        "duplicates": duplicates,
        "out_of_order": out_of_order,
        "last_source_seq": last_source_seq,
        "first_wall": first_wall,
        "last_wall": last_wall,
        "arbiter_lost": stats.lost,
        "arbiter_gaps": stats.gaps,
        "conflicts": stats.conflicts,
    }
    if args.latency:
        from feedha.bench.ceiling import latency_summary

        summary["latency_us"] = latency_summary(latencies)
        summary["hops_us"] = {
            "source_to_publish": latency_summary(to_publish),
            "publish_to_delivery": latency_summary(from_publish),
        }
        # Where the worst ones fell (index in delivery order, µs): a start-up
        # effect and a stall in the middle look different.
        worst = sorted(range(len(latencies)), key=latencies.__getitem__)[-5:]
        summary["worst_latency_us"] = [[index, round(latencies[index] / 1000, 1)] for index in worst]
    _emit("summary", **summary)
    return 0


# --- the harness ----------------------------------------------------------------------------


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
        source_tick_s: the source's ``--tick`` (0: every message on its own, as soon as due).
        count: if set, each source sends this many messages unpaced (``rate`` and
            ``seconds`` are then only a time bound).
        pregenerate: sources generate their messages before the clock starts
            (``feedha source --pregenerate``): on a 2-core machine a live
            generator (~5 µs of Python per message) would take the CPU the
            adapters and the client need, and the bare ceiling's sender
            generates nothing either. Latency runs turn it off (their event
            times must be the scheduled send times).
        secure: the data plane as deployed with keys: every adapter's line and
            sync bus are CURVE servers (``--curve-key``, ``--sync-key``), the
            client's key is admitted with ``--grant-keys`` and the client
            connects with its key pair (no admin server in the loop).
        journal: every adapter journals what it publishes (``--journal`` in a
            temporary directory, ``--fsync batch``, its replay service on), as
            production runs.
        journal_root: with ``journal``, keep the journals here instead (tests read them).
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
    source_tick_s: float = SOURCE_TICK_S
    count: int | None = None  # unpaced: send this many as fast as the source can, then stop
    pregenerate: bool = True
    secure: bool = False
    journal: bool = False
    journal_root: Path | None = None


@dataclass
class PipelineResult:
    """What the sources sent and the clients delivered (one summary per client)."""

    options: PipelineOptions
    sent: list[int]  # per channel
    source_elapsed_s: list[float]
    source_end_wall: list[float]
    clients: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # (channel index, summary)
    roles: list[dict[str, Any]] = field(default_factory=list)  # adapters' role changes (a failover = trouble)

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
    from feedha.cluster import GroupPlan, plan_group, start_adapter
    from feedha.ports import free_ports
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
        clients: list[tuple[int, JsonProcess]] = []
        for ch, group in enumerate(groups):
            args = ["client", "--channel", group.channel, "--channel-number", str(group.channel_number)]
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
                proc = JsonProcess.python(f"client-{ch}-{index}", "feedha.bench.throughput", args, log=log)
                procs.append(proc)
                clients.append((ch, proc))
        for _ch, proc in clients:
            proc.wait_event("ready", 30)
        sources = []
        for group in groups:
            pacing = ["--rate", str(options.rate), "--seconds", str(options.seconds)]
            if options.count is not None:
                pacing = ["--rate", "0", "--count", str(options.count), "--seconds", str(options.seconds)]
            source_args = [
                *("--endpoint", f"{STREAM}={group.source_endpoint}", "--streams", STREAM),
                *pacing,
                *("--symbols", str(options.symbols), "--seed", "7"),
                *("--wait-subscribers", str(options.backups + 1), "--linger-ms", "10000"),
                *(("--tick", str(options.source_tick_s)) if options.source_tick_s else ()),
                *(("--pregenerate",) if options.pregenerate else ()),
            ]
            if keys is not None:
                source_args += _SecureGroup(Path(keys.name), group).source_argv()
            proc = JsonProcess.python("source", "feedha.plain_source", source_args, log=log)
            procs.append(proc)
            sources.append(proc)
        summaries = []
        for proc in sources:
            summary = proc.wait_for(lambda e: "sent" in e, options.seconds + 60)
            summaries.append((summary, time.time()))
        result = PipelineResult(
            options,
            sent=[int(s["sent"]) for s, _t in summaries],
            source_elapsed_s=[float(s["elapsed_s"]) for s, _t in summaries],
            source_end_wall=[t for _s, t in summaries],
        )
        # Let the clients drain (bounded), then ask for their summaries.
        drain_deadline = time.monotonic() + max(15.0, options.seconds)
        for ch, proc in clients:
            wanted = result.sent[ch]
            try:
                proc.wait_for(_delivered_at_least(wanted), max(0.1, drain_deadline - time.monotonic()))
            except Exception:  # noqa: BLE001 - a short delivery is reported as lost below
                pass
        for _ch, proc in clients:
            proc.popen.send_signal(signal.SIGTERM)
        for ch, proc in clients:
            result.clients.append((ch, proc.wait_event("summary", 20)))
        for members in adapters:
            for proc in members:
                result.roles += [
                    {
                        "adapter": e.get("adapter"),
                        "new": e.get("new"),
                        "term": e.get("term"),
                        "reason": e.get("reason"),
                    }
                    for e in proc.events
                    if e.get("event") == "role"
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


def _delivered_at_least(count: int) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e.get("event") == "progress" and e.get("delivered", 0) >= count


def open_log(name: str) -> IO[str]:
    """A temp file for the components' stderr (kept, so a failure can be read)."""
    return open(tempfile.mkstemp(prefix=f"feedha-bench-{name}-", suffix=".log")[1], "w")  # noqa: SIM115


def ceiling(*, quick: bool, log: IO[str]) -> dict[str, Any]:
    """The bare pyzmq throughput ceiling (one run)."""
    from feedha.bench.ceiling import run_pair

    return run_pair(count=QUICK_CEILING_COUNT if quick else CEILING_COUNT, log=log)


# --- the throughput ramp --------------------------------------------------------------------


def _sustained(result: PipelineResult) -> bool:
    s = result.clients[0][1]
    return (
        result.lost == 0
        and result.duplicates == 0
        and s["delivered"] >= result.sent[0]
        and result.drain_s() <= DRAIN_ALLOWANCE_S
    )


@dataclass
class _Ramp:
    """One ramp of the source rate: every step, and the best sustained one."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    best: tuple[float, PipelineResult] | None = None

    def params(self) -> dict[str, Any]:
        best = self.best
        return {
            "failovers": None if best is None else best[1].failovers,
            "offered_rate": None if best is None else best[1].options.rate,
            "lost": 0 if best is None else best[1].lost,
            "steps": self.steps,
        }


@dataclass(frozen=True, kw_only=True)
class Shape:
    """What a ramp's pipelines look like besides the rate.

    Attributes:
        backups: backups per group besides the active.
        secure: CURVE on the lines and the sync bus.
        journal: journals (``--fsync batch``) and replay services on every adapter.
    """

    backups: int = 1
    secure: bool = False
    journal: bool = False

    def describe(self) -> str:
        keys = "CURVE on lines and sync bus" if self.secure else "open data plane"
        journals = "journals with --fsync batch" if self.journal else "no journal"
        return f"active + {self.backups} backup(s), {keys}, {journals}"


def _ramp(shape: Shape, *, step_s: float, budget_s: float, log: IO[str]) -> _Ramp:
    """Raise the rate by RAMP_FACTOR while sustained, then bisect between the last good and first bad step."""
    ramp = _Ramp()
    started = time.monotonic()
    rate = RAMP_START
    failed_at: float | None = None
    while time.monotonic() - started < budget_s:
        options = PipelineOptions(
            rate=rate, seconds=step_s, secure=shape.secure, backups=shape.backups, journal=shape.journal
        )
        result = run_pipeline(options, log)
        ok = _sustained(result)
        summary = result.clients[0][1]
        ramp.steps.append(
            {
                "rate": rate,
                "sent": result.sent[0],
                "source_rate": round(result.source_rate(), 1),
                "delivered": summary["delivered"],
                "delivered_rate": round(result.client_rate(summary), 1),
                "lost": result.lost,
                "undelivered": result.undelivered,
                "drain_s": round(result.drain_s(), 3),
                "sustained": ok,
            }
        )
        if ok:
            if ramp.best is None or result.client_rate(summary) > ramp.best[0]:
                ramp.best = (result.client_rate(summary), result)
            if result.source_rate() < 0.95 * rate:
                break  # the source cannot go faster: the ramp ends here
            rate = rate * RAMP_FACTOR if failed_at is None else (rate + failed_at) / 2
        else:
            failed_at = rate
            if ramp.best is None:
                rate /= RAMP_FACTOR * RAMP_FACTOR
            else:
                previous = ramp.best[1].options.rate
                if failed_at / previous < 1.15:
                    break
                rate = (previous + failed_at) / 2
        if rate < 1000:
            break
    return ramp


def run(*, quick: bool = False, journal: bool = True, backups: int = 2) -> list[Figure]:
    """Ramp the source rate in three shapes, each beside the bare pyzmq ceiling.

    ``throughput``: active + 1 backup, open data plane, no journal (the
    pipeline's own cost); ``throughput_secure``: the same with CURVE on the
    lines and the sync bus; ``throughput_journal``: the production shape,
    journals with ``--fsync batch`` on every adapter and ``backups`` backups
    (``feedha bench throughput --journal --backups 2``, the default). All
    ramps run in the same invocation between the same two ceiling
    measurements, so their ratios compare on this machine, today.

    Args:
        quick: shorter steps and a smaller time budget.
        journal: the third ramp journals (``--no-journal``: it does not).
        backups: backups per group in the third ramp.

    Returns:
        Three figures (msg/s), with their ramps in the parameters.
    """
    step_s = QUICK_STEP_S if quick else STEP_S
    budget = QUICK_RAMP_BUDGET_S if quick else RAMP_BUDGET_S
    shapes = {
        "throughput": Shape(),
        "throughput_secure": Shape(secure=True),
        "throughput_journal": Shape(backups=backups, journal=journal),
    }
    with open_log("throughput") as log:
        ceilings = [ceiling(quick=quick, log=log)]
        ramps = {
            name: _ramp(shape, step_s=step_s, budget_s=budget, log=log) for name, shape in shapes.items()
        }
        ceilings.append(ceiling(quick=quick, log=log))
    top = max(c["rate"] for c in ceilings)
    common = {
        "source": "plain source (plain_source), 1 stream, 200 symbols, seed 7",
        "adapter_heartbeat_timeout_s": HEARTBEAT_TIMEOUT_S,
        "source_tick_s": SOURCE_TICK_S,
        "client": "client_lib.Subscriber joined to every line (arbitrating), no decode",
        "step_s": step_s,
        "ceiling_runs": [round(c["rate"], 1) for c in ceilings],
        "ceiling_payload_bytes": 100,
        "mean_source_message_bytes": _mean_source_bytes(),
        "quick": quick,
        "log": log.name,
    }
    values = {name: ramp.best[0] if ramp.best is not None else 0.0 for name, ramp in ramps.items()}
    plain = values["throughput"]
    return [
        figure(
            name=name,
            value=values[name],
            unit="msg/s",
            ceiling=top,
            params={
                **common,
                "adapters": f"active + {shape.backups} backup(s)",
                "data_plane": "CURVE on lines and sync bus (--curve-key, --sync-key, --grant-keys)"
                if shape.secure
                else "open (no keys)",
                "journal": "--journal, --fsync batch, replay service" if shape.journal else "none",
                "shape": shape.describe(),
                "vs_open": round(values[name] / plain, 3) if plain and name != "throughput" else None,
                **ramps[name].params(),
            },
        )
        for name, shape in shapes.items()
    ]


def _mean_source_bytes() -> float:
    from feedha.plain_source import SymbolModel

    model = SymbolModel(streams=(STREAM,), symbol_count=SYMBOLS, seed=7, epoch_ns=time.time_ns())
    sizes = [len(next(model).data) for _ in range(2000)]
    return round(sum(sizes) / len(sizes), 1)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m feedha.bench.throughput client ...``: the bench client process."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["client"]:
        return client_main(args[1:])
    print(
        "usage: python -m feedha.bench.throughput client --channel NAME --channel-number N --line URL...",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
