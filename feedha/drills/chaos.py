"""``feedha drill chaos``: a seeded schedule of faults against one channel under load.

One channel -- an active and two backups, journals and replay services on --
fed by the plain source at ``--rate`` with poison messages mixed in
(``--poison-every``), read by an arbitrating client that fills gaps from the
journals. For ``--minutes`` a seeded schedule (:func:`plan_faults`) injects,
one after the other:

* ``kill``: SIGKILL an adapter, start it again on its journal a few seconds later;
* ``stop``: SIGSTOP an adapter for up to three seconds, then SIGCONT;
* ``restart``: SIGKILL and start again at once;
* ``stalled_subscriber``: a subscriber joins a line and never reads;
* ``replay_flood``: eight peers flood a replay service with large requests;
* ``bad_control``: a burst of malformed and out-of-range control commands;
* ``busy`` (only with ``--busy``, which starts the adapters with
  ``--allow-fault-injection``): an adapter's loop spends up to three seconds in one
  turn holding the interpreter, after numbering a conversion turn, after sending it,
  or in a timer turn (the ``busy`` control command, :mod:`feedha.adapter.core.busy`);

at most one adapter down or stopped at a time (the schedule skips a process
fault that would leave fewer than two adapters working). The poison rotates
through every kind of :data:`feedha.plain_source.frames.POISON_KINDS` (a
``source_seq`` jump in place of a message, a 200,000-byte message, ...).
The summary has ``sent``, ``delivered``, ``lost``, ``unaccounted`` (sent but
booked by no adapter: :mod:`feedha.drills.accounting`), ``duplicates``,
``conflicts``, ``line_holes`` (msg_seqs no line carried, delivered only by
retransmission), ``faults`` (count by kind, every poison kind named),
``adapters_alive`` and ``max_rss_mib`` per adapter (sampled every second).
With ``--no-journal`` the adapters keep no journal and the client has nothing
to fill a line hole from: a line hole is a loss.

With ``--format fix44`` or ``--format itch50`` the source plays a capture of that
format written for the run, with the format's own poison and floods
(:mod:`feedha.drills.chaos_formats`); the summary adds ``honest_rate``, each flood's CPU
per message against the traffic before the floods.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import IO, Any, Final

import psutil
import zmq

from feedha.adapter.formats.registry import DEFAULT_FORMAT
from feedha.cluster import control
from feedha.drills.accounting import settle
from feedha.drills.chaos_captures import ChaosCapture
from feedha.drills.chaos_formats import (
    CAPTURE_FORMATS,
    drill_options_for,
    format_capture,
    format_ok,
    format_summary,
    sampler_for,
)
from feedha.drills.chaos_plan import PROCESS_FAULTS, Fault, plan_faults
from feedha.drills.group import (
    CHANNEL,
    Drill,
    DrillOptions,
    drain_client,
    live_controls,
    place_local,
    roles_now,
    sent_of,
    show_progress,
    start_adapter_process,
    start_drill,
)
from feedha.plain_source.frames import poison_kind_counts
from feedha.procs import JsonProcess
from feedha.proto.replay import ReplayRequest, encode_request

BUSY_PLACES: Final = ("convert", "report", "tick")
SETTLE_S: Final = 3.0  # an adapter started again counts as working this long after its start
POISON_EVERY: Final = 997
BAD_COMMANDS: Final = (
    {"cmd": "throttle"},
    {"cmd": "throttle", "rate": 1e-300},
    {"cmd": "drop", "every": 0},
    {"cmd": "penalty", "value": "high"},
    {"cmd": "reboot"},
    {"cmd": "fail", "reason": "x" * 5000},
)


@dataclass(kw_only=True)
class ChaosOptions:
    minutes: float = 2.0
    seed: int = 1
    rate: float = 5000.0
    poison_every: int = POISON_EVERY
    journal: bool = True  # without: nothing fills a hole of the lines, a line hole is a loss
    input_format: str = DEFAULT_FORMAT  # fix44 | itch50: a capture of the format's poison and floods
    busy: bool = False  # busy turns among the faults (the adapters accept fault injection)


@dataclass
class _Chaos:
    """The running chaos: the drill's processes, what is broken now, what was done."""

    drill: Drill
    started: float
    counts: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    heal: list[tuple[float, Callable[[], None]]] = field(default_factory=list)
    stopped: set[int] = field(default_factory=set)
    started_at: dict[int, float] = field(default_factory=dict)
    max_rss: dict[int, float] = field(default_factory=dict)
    halt: threading.Event = field(default_factory=threading.Event)
    retired: list[tuple[int, JsonProcess]] = field(default_factory=list)  # adapters started again since

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def working(self) -> list[int]:
        now = self.elapsed()
        return [
            number
            for number, proc in self.drill.adapters.items()
            if proc.alive
            and number not in self.stopped
            and now - self.started_at.get(number, -1e9) >= SETTLE_S
        ]


def run_chaos(options: ChaosOptions, log: IO[str]) -> dict[str, Any]:
    """Run the chaos drill and return its summary (tears down what it built, always)."""
    seconds = options.minutes * 60
    capture = format_capture(
        options.input_format,
        rate=options.rate,
        seconds=seconds,
        seed=options.seed,
        poison_every=options.poison_every,
    )
    drill_options = DrillOptions(
        backups=2,
        rate=options.rate,
        seconds=seconds,
        kill="none",
        journal=options.journal,
        extra_source_args=["--poison-every", str(options.poison_every)] if options.poison_every else [],
    )
    if capture is not None:
        drill_options = drill_options_for(drill_options, capture)
    if options.busy:  # the busy control command is a drill's: refused unless asked for
        extra = [*drill_options.extra_adapter_args, "--allow-fault-injection"]
        drill_options = dataclasses.replace(drill_options, extra_adapter_args=extra)
    placement = place_local(drill_options)
    drill: Drill | None = None
    chaos: _Chaos | None = None
    try:
        drill = start_drill(drill_options, log, placement)
        assert drill.client is not None
        drill.client.wait_for(lambda e: e.get("event") == "progress" and e.get("delivered", 0) > 0, 30)
        running = chaos = _Chaos(drill, time.monotonic())
        with sampler_for(lambda: _cost_targets(running)) as sampler:
            _drive(running, plan_faults(options.seed, seconds, busy=options.busy))
        summary = _summary(running, options, capture)
        if capture is not None:
            summary.update(format_summary(capture, sampler))
        return summary
    finally:
        if chaos is not None:
            chaos.halt.set()
        if drill is not None:
            for number in list(drill.adapters):
                _signal(drill, number, signal.SIGCONT)
            for proc in drill.all():
                proc.kill()
        if placement.journal_root is not None:
            shutil.rmtree(placement.journal_root, ignore_errors=True)
        if capture is not None:
            capture.path.unlink(missing_ok=True)


def _drive(chaos: _Chaos, plan: list[Fault]) -> None:
    drill = chaos.drill
    assert drill.source is not None
    pending = list(plan)
    next_sample = 0.0
    while drill.source.alive:
        now = chaos.elapsed()
        for due in [h for h in chaos.heal if h[0] <= now]:
            chaos.heal.remove(due)
            due[1]()
        if pending and pending[0].at <= now:
            _inject(chaos, pending.pop(0))
        if now >= next_sample:
            next_sample = now + 1.0
            _sample_rss(chaos)
            delivered = (drill.client.last("progress") or {}).get("delivered", 0) if drill.client else 0
            show_progress(
                f"chaos: {now:5.0f}s  delivered {delivered:>9,}  faults {sum(chaos.counts.values())}"
            )
        try:
            drill.source.popen.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            pass
    for _at, action in sorted(chaos.heal, key=lambda h: h[0]):
        action()  # heal what is still broken, so the backlog can arrive
    chaos.heal.clear()


def _inject(chaos: _Chaos, fault: Fault) -> None:
    drill, working = chaos.drill, chaos.working()
    if fault.kind in PROCESS_FAULTS and len(working) < len(drill.adapters):
        chaos.skipped[fault.kind] += 1  # another adapter is still down or settling
        return
    if fault.kind == "replay_flood" and not drill.options.journal:
        chaos.skipped[fault.kind] += 1  # no journal, no replay service to flood
        return
    target = working[int(fault.pick * len(working)) % len(working)] if working else 1
    chaos.counts[fault.kind] += 1
    later = chaos.elapsed() + fault.duration
    drill.faults.append(
        {"fault": fault.kind, "adapter": target, "at_s": round(chaos.elapsed(), 1), "time_ns": time.time_ns()}
    )
    if fault.kind == "kill":
        drill.adapters[target].kill()
        chaos.heal.append((later, lambda: _start_again(chaos, target)))
    elif fault.kind == "restart":
        drill.adapters[target].kill()
        _start_again(chaos, target)
    elif fault.kind == "stop":
        _signal(drill, target, signal.SIGSTOP)
        chaos.stopped.add(target)
        chaos.heal.append((later, lambda: _resume(chaos, target)))
    elif fault.kind == "busy":
        _busy(chaos, target, fault)
        chaos.heal.append((later, lambda: _resume(chaos, target, signum=None)))
    elif fault.kind == "stalled_subscriber":
        sock = _stalled_subscriber(drill.group.adapter(target).line)
        chaos.heal.append((later, lambda: sock.close(linger=0)))
    elif fault.kind == "replay_flood":
        endpoint = drill.placement.replay[target]
        stop = threading.Event()
        thread = threading.Thread(target=_flood, args=(endpoint, stop, chaos.halt), daemon=True)
        thread.start()
        chaos.heal.append((later, stop.set))
    else:
        _bad_commands(drill.group.adapter(target).control)


def _start_again(chaos: _Chaos, number: int) -> None:
    drill = chaos.drill
    drill.adapters[number].kill()  # reaps it
    chaos.retired.append((number, drill.adapters[number]))
    args = [a for a in drill.adapter_args[number] if a != "--active"]  # it rejoins as a backup
    drill.adapters[number] = start_adapter_process(drill, number, args)
    chaos.started_at[number] = chaos.elapsed()
    chaos.stopped.discard(number)


def _busy(chaos: _Chaos, number: int, fault: Fault) -> None:
    # One busy turn of fault.duration at a place the draw picks; the adapter counts as down
    # until it is over (and settled), as a stopped one does.
    where = BUSY_PLACES[int(fault.pick * 1000) % len(BUSY_PLACES)]
    try:
        reply = control(chaos.drill.group.adapter(number).control, "busy", timeout=2.0,
                        ms=max(1, round(fault.duration * 1000)), where=where)  # fmt: skip
    except TimeoutError:
        return  # it did not answer: nothing was armed
    if reply.get("ok"):
        chaos.stopped.add(number)


def _resume(chaos: _Chaos, number: int, *, signum: int | None = signal.SIGCONT) -> None:
    if signum is not None:
        _signal(chaos.drill, number, signum)
    chaos.stopped.discard(number)
    chaos.started_at[number] = chaos.elapsed()  # give it time to hear the new term and catch up


def _signal(drill: Drill, number: int, signum: int) -> None:
    proc = drill.adapters.get(number)
    if proc is not None and proc.alive:
        os.kill(proc.popen.pid, signum)


def _stalled_subscriber(endpoint: str) -> zmq.Socket[bytes]:
    sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.SUB)
    sock.linger = 0
    sock.rcvhwm = 10
    sock.setsockopt(zmq.RCVBUF, 4096)
    sock.subscribe(b"")
    sock.connect(endpoint)  # and never reads
    return sock


def _flood(endpoint: str, stop: threading.Event, halt: threading.Event) -> None:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    socks = [ctx.socket(zmq.DEALER) for _ in range(8)]
    request = encode_request(ReplayRequest(channel=1, request_id=7, first_seq=1, last_seq=50_000))
    try:
        for sock in socks:
            sock.linger = 0
            sock.rcvhwm = sock.sndhwm = 100
            sock.connect(endpoint)
        while not stop.is_set() and not halt.is_set():
            for sock in socks:
                try:
                    sock.send_multipart([b"", request], zmq.NOBLOCK)
                except zmq.Again:
                    pass
                while sock.poll(0):
                    sock.recv_multipart()
            time.sleep(0.001)  # bounded offer: about a thousand requests a second per peer
    finally:
        for sock in socks:
            sock.close(linger=0)


def _bad_commands(endpoint: str) -> None:
    for request in BAD_COMMANDS:
        fields = {k: v for k, v in request.items() if k != "cmd"}
        try:
            control(endpoint, str(request["cmd"]), timeout=2.0, **fields)
        except TimeoutError:
            pass  # a stopped or restarting adapter does not answer: fine


def _cost_targets(chaos: _Chaos) -> list[tuple[int, str]]:
    """The adapters whose CPU per message is sampled now: working ones (not stopped, settled)."""
    drill = chaos.drill
    return [(drill.adapters[n].popen.pid, drill.group.adapter(n).control) for n in chaos.working()]


def _sample_rss(chaos: _Chaos) -> None:
    for number, proc in chaos.drill.adapters.items():
        try:
            rss = psutil.Process(proc.popen.pid).memory_info().rss / 2**20
        except psutil.Error:
            continue
        chaos.max_rss[number] = max(chaos.max_rss.get(number, 0.0), rss)


TIMELINE_EVENTS: Final = frozenset({"ready", "recovered", "role"})


def _write_timeline(chaos: _Chaos, log: IO[str]) -> None:
    """Faults and every adapter's role changes, in time order, into the drill's log (for post-mortems)."""
    rows: list[tuple[int, str]] = [
        (int(f["time_ns"]), f"fault {f['fault']} on adapter {f['adapter']}")
        for f in chaos.drill.faults
        if "time_ns" in f
    ]
    procs = [*chaos.retired, *chaos.drill.adapters.items()]
    for number, proc in procs:
        for event in list(proc.events):
            if event.get("event") in TIMELINE_EVENTS and "time_ns" in event:
                fields = {k: v for k, v in event.items() if k not in ("event", "adapter", "time_ns")}
                rows.append(
                    (int(event["time_ns"]), f"adapter {number} {event['event']} {json.dumps(fields)}")
                )
    log.write("---- chaos timeline (wall clock, ns) ----\n")
    log.writelines(f"{when} {text}\n" for when, text in sorted(rows))
    log.flush()


def _summary(chaos: _Chaos, options: ChaosOptions, capture: ChaosCapture | None = None) -> dict[str, Any]:
    drill = chaos.drill
    assert drill.source is not None and drill.client is not None
    source = drill.source.wait_for(lambda e: "sent" in e, 30)
    sent = int(source["sent"])
    poisoned = sent // options.poison_every if options.poison_every else 0
    if capture is not None:  # what the capture holds that gives no block: its poison, what is skipped
        poisoned = sent - capture.expected
    group = settle(partial(live_controls, drill), *sent_of(source))  # feedha.drills.accounting
    drain_client(drill.client, group.numbered)
    drill.client.stop()
    client = drill.client.wait_event("summary", 10)["channels"][CHANNEL]
    _write_timeline(chaos, drill.log)
    roles = roles_now(drill)
    show_progress("")
    faults = dict(chaos.counts)
    if capture is not None:
        faults["poison"] = capture.poison.total()
        faults.update((f"poison_{kind}", n) for kind, n in sorted(capture.poison.items()))
    elif poisoned:
        faults["poison"] = poisoned
        faults.update((f"poison_{kind}", n) for kind, n in poison_kind_counts(poisoned).items() if n)
    return {
        "drill": "chaos",
        "minutes": options.minutes,
        "seed": options.seed,
        "rate": options.rate,
        "sent": sent,
        "poisoned": poisoned,
        "delivered": client["delivered"],
        "lost": max(0, group.numbered - int(client["unique"])),
        **group.summary(),
        "duplicates": client["duplicates"],
        "out_of_order": client["out_of_order"],
        "conflicts": client["arbiter"].get("conflicts", 0),
        "line_holes": client["arbiter"].get("line_holes", 0),
        "journal": options.journal,
        "faults": faults,
        "faults_skipped": dict(chaos.skipped),
        "adapters_alive": sum(1 for proc in drill.adapters.values() if proc.alive),
        "roles_at_end": {str(n): role for n, role in roles.items()},
        "max_rss_mib": {str(n): round(rss, 1) for n, rss in sorted(chaos.max_rss.items())},
        "max_pause_ms": round(float(client.get("max_pause_ms", 0.0)), 1),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``feedha drill chaos`` options."""
    parser.add_argument(
        "--minutes", type=float, default=2.0, help="how long the drill runs (default: %(default)s)"
    )
    parser.add_argument(
        "--seed", type=int, default=1, help="seed of the fault schedule (default: %(default)s)"
    )
    parser.add_argument("--rate", type=float, default=5000, help="source messages/s (default: %(default)s)")
    parser.add_argument(
        "--poison-every",
        type=int,
        default=POISON_EVERY,
        metavar="K",
        help="every K-th source message is poison (default: %(default)s; 0: none)",
    )
    parser.add_argument(
        "--no-journal",
        dest="journal",
        action="store_false",
        help="adapters without journals: nothing fills a hole of the lines by retransmission, so a "
        "line hole is a loss (replay floods are skipped)",
    )
    parser.add_argument(
        "--format",
        dest="input_format",
        choices=(DEFAULT_FORMAT, *CAPTURE_FORMATS),
        default=DEFAULT_FORMAT,
        help="the source's input format: feedha-fix (the plain source, default), or a capture of "
        "fix44 or itch50 written for the run with the format's poison every K messages and two "
        "floods, whose per-message cost is reported before and during (honest_rate)",
    )
    parser.add_argument(
        "--busy",
        action="store_true",
        help="busy turns among the faults: an adapter's loop held for 0.5-3 s in one turn (the "
        "adapters run with --allow-fault-injection; without --busy a seed's schedule is unchanged)",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")


def main(args: argparse.Namespace, log: IO[str]) -> int:
    """Run ``feedha drill chaos`` with parsed ``args``; exit 0 when nothing was lost or repeated."""
    if args.minutes <= 0 or args.rate <= 0 or args.poison_every < 0:
        print("feedha drill chaos: need --minutes > 0, --rate > 0, --poison-every >= 0", file=sys.stderr)
        return 2
    options = ChaosOptions(
        minutes=args.minutes,
        seed=args.seed,
        rate=args.rate,
        poison_every=args.poison_every,
        journal=args.journal,
        input_format=args.input_format,
        busy=args.busy,
    )
    result = run_chaos(options, log)
    result["log"] = log.name
    if args.json:
        print(json.dumps(result))
    else:
        width = max(len(k) for k in result)
        for key, value in result.items():
            print(f"{key:<{width}}  {value}")
    ok = (
        result["lost"] == 0
        and result["unaccounted"] == 0
        and result["duplicates"] == 0
        and result["conflicts"] == 0
        and result["line_holes"] == 0
        and format_ok(result)
    )
    return 0 if ok and result["adapters_alive"] == len(result["max_rss_mib"]) else 1
