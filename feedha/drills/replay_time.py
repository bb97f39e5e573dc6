"""``feedha drill replay-time``: replay a window of the stream by time, paced and at full speed.

A feed source and an adapter group (an active and a backup, each with a
journal and a replay service) run on loopback while a subscriber on the
active's line keeps every message it is delivered (the *live copies*). The
source streams for ``--seconds``; then the window from ``--from`` to ``--to``
seconds into the stream (the first message's publish time is second 0) is
replayed from the active's replay service twice: at speed 1 and as fast as
the drill reads. The drill checks, for each replay:

* ``exact``: the msg_seqs replayed are exactly those the journal holds with a
  publish time in the window, in order (no message missing, extra or repeated);
* ``content_mismatches``: replayed messages whose bytes differ from the live
  copy (must be 0; a missing live copy counts too);
* the paced replay's duration against the window's length (``paced_error_pct``,
  within 5 %, the start-up included), the start-up (``start_ms``: the first
  page's wait), and how late each message was handed out against its due time
  on the replay's clock (``late_ms_p99``, ``late_ms_max``).

A message's time is the publish time its adapter journaled (docs/journal.md):
the window is read from the serving adapter's journal, like the replay.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from feedha.cluster import adapter_argv
from feedha.drills.accounting import settle
from feedha.drills.group import CHANNEL, DrillOptions, Placement, place_local, show_progress, start_source
from feedha.drills.output import output_arguments
from feedha.procs import JsonProcess, python_argv

DRAIN_S = 30.0  # the most the live subscriber may take to catch up once the source stopped
PACE_TOLERANCE_PCT = 5.0


@dataclass(kw_only=True)
class ReplayTimeOptions:
    seconds: float = 20.0
    rate: float = 1000.0
    symbols: int = 200
    window_from: float = 5.0
    window_to: float = 15.0
    seed: int = 7


@dataclass
class _Run:
    options: ReplayTimeOptions
    placement: Placement
    log: IO[str]
    workdir: Path
    adapters: dict[int, JsonProcess] = field(default_factory=dict)
    source: JsonProcess | None = None
    live: dict[int, bytes] = field(default_factory=dict)  # msg_seq -> payload, as the line delivered it

    def journal(self, number: int) -> Path:
        return self.workdir / f"journal-{number}"


def run_replay_time(options: ReplayTimeOptions, log: IO[str]) -> dict[str, Any]:
    """Run the drill and return its summary (tears down what it built, always)."""
    if not 0 <= options.window_from < options.window_to <= options.seconds:
        raise ValueError(f"the window {options.window_from}..{options.window_to} s must lie in the stream")
    placement = place_local(DrillOptions(backups=1, rate=options.rate, seconds=options.seconds))
    run = _Run(options, placement, log, Path(tempfile.mkdtemp(prefix="feedha-replay-time-")))
    try:
        _start(run)
        sent = _stream(run)
        group = run.placement.group
        live = {n: group.adapter(n).control for n, proc in run.adapters.items() if proc.alive}
        account = settle(lambda: live, sent)  # feedha.drills.accounting
        return {**_report(run, sent), **account.summary()}
    finally:
        for proc in [*run.adapters.values(), run.source]:
            if proc is not None:
                proc.kill()
        shutil.rmtree(run.workdir, ignore_errors=True)


def _start(run: _Run) -> None:
    group, placement = run.placement.group, run.placement
    for plan in group.adapters:
        args = adapter_argv(group, plan.adapter, active=plan.adapter == 1)
        args += ["--journal", str(run.journal(plan.adapter)), "--replay", placement.replay[plan.adapter]]
        name = f"{CHANNEL}/adapter-{plan.adapter}"
        run.adapters[plan.adapter] = JsonProcess(name, python_argv("feedha.adapter", args), log=run.log)
    for proc in run.adapters.values():
        proc.wait_event("ready", 20)
    run.adapters[1].wait_for(lambda e: e.get("event") == "role" and e.get("new") == "active", 10)


def _stream(run: _Run) -> int:
    # The live subscriber on the active's line (holes filled from its replay service) while
    # the source streams; returns how many messages the source sent.
    from feedha.client import ChannelSpec, Delivery, ReplayClient, Subscriber

    options, placement = run.options, run.placement
    spec = ChannelSpec(CHANNEL, 1, (placement.client_lines[0],))
    hook = ReplayClient({1: [placement.replay[1]]})
    with Subscriber([spec], on_retransmission_needed=hook) as subscriber:
        source = DrillOptions(
            backups=1, rate=options.rate, seconds=options.seconds, symbols=options.symbols, seed=options.seed
        )
        run.source = start_source(source, placement, run.log)
        began = time.monotonic()
        while run.source.alive:
            for event in subscriber.poll(0.1):
                if isinstance(event, Delivery):
                    run.live[event.msg_seq] = event.payload
            show_progress(f"replay-time: streaming {time.monotonic() - began:5.1f}s, {len(run.live)} live")
        sent = int(run.source.wait_for(lambda e: "sent" in e, 30)["sent"])
        deadline = time.monotonic() + DRAIN_S
        while len(run.live) < sent and time.monotonic() < deadline:
            for event in subscriber.poll(0.1):
                if isinstance(event, Delivery):
                    run.live[event.msg_seq] = event.payload
    hook.close()
    show_progress("")
    return sent


def _expected(run: _Run) -> tuple[int, int, list[int]]:
    # The window in ns and the msg_seqs the active's journal holds in it.
    from feedha.adapter.journal import JournalReader

    records = [(r.msg_seq, r.time_ns) for r in JournalReader(run.journal(1)).read()]
    zero = records[0][1] if records else 0
    start = zero + round(run.options.window_from * 1e9)
    end = zero + round(run.options.window_to * 1e9)
    return start, end, [seq for seq, t in records if start <= t < end]


def _replay(run: _Run, start: int, end: int, speed: float | None) -> dict[str, Any]:
    from feedha.client import Delivery, ReplayClient
    from feedha.client._time_replay import TimeReplay, replay_window

    client = ReplayClient({1: [run.placement.replay[1]]}, timeout=2.0, budget=2.0)
    got: list[tuple[int, bytes]] = []
    late: list[float] = []  # paced: how long after its due time each message was handed out
    began = time.monotonic()
    try:
        for event in replay_window(client, TimeReplay(1, start, end, speed, channel_name=CHANNEL)):
            if isinstance(event, Delivery):
                got.append((event.msg_seq, event.payload))
                if speed is not None:
                    due = (event.send_time_ns - start) / 1e9 / speed
                    late.append(time.monotonic() - began - due)
    finally:
        client.close()
    seconds = time.monotonic() - began
    out: dict[str, Any] = {"speed": speed, "seconds": round(seconds, 3), "got": got}
    if late:
        # The replay's clock starts when its first page is in: that wait is the start-up
        # (start_ms); each message's lateness is counted from there.
        late.sort()
        start_up = late[0]
        out["start_ms"] = round(start_up * 1000, 2)
        out["late_ms_p99"] = round((late[int(len(late) * 0.99)] - start_up) * 1000, 2)
        out["late_ms_max"] = round((late[-1] - start_up) * 1000, 2)
    return out


def _check(run: _Run, replay: dict[str, Any], expected: list[int]) -> dict[str, Any]:
    got: list[tuple[int, bytes]] = replay.pop("got")
    seqs = [seq for seq, _ in got]
    mismatched = [seq for seq, payload in got if run.live.get(seq) != payload]
    extra = sorted(set(seqs) - set(expected))
    missing = sorted(set(expected) - set(seqs))
    return {
        **replay,
        "messages": len(seqs),
        "exact": seqs == expected,
        "missing": len(missing),
        "extra": len(extra),
        "first_differences": (missing + extra)[:10],
        "content_mismatches": len(mismatched),
        "msg_per_s": round(len(seqs) / replay["seconds"]) if replay["seconds"] else None,
    }


def _report(run: _Run, sent: int) -> dict[str, Any]:
    start, end, expected = _expected(run)
    options = run.options
    paced = _check(run, _replay(run, start, end, 1.0), expected)
    full = _check(run, _replay(run, start, end, None), expected)
    window_s = (end - start) / 1e9
    return {
        "drill": "replay-time",
        "seconds": options.seconds,
        "rate": options.rate,
        "sent": sent,
        "live_copies": len(run.live),
        "window_s": [options.window_from, options.window_to],
        "window_messages": len(expected),
        "paced": paced,
        "full_speed": full,
        "paced_error_pct": round(abs(paced["seconds"] - window_s) / window_s * 100, 2),
    }


def summary_ok(result: dict[str, Any]) -> bool:
    """Whether the drill passed: what the issue asks it to show."""
    replays = (result["paced"], result["full_speed"])
    return bool(
        result["window_messages"] > 0
        and result["unaccounted"] == 0
        and all(r["exact"] and r["content_mismatches"] == 0 for r in replays)
        and result["paced_error_pct"] <= PACE_TOLERANCE_PCT
    )


def add_arguments(sub: Any) -> None:
    """The ``replay-time`` sub-command's options."""
    parser = sub.add_parser(
        "replay-time",
        help="replay a window of the stream by time, at speed 1 and full speed: exact, identical, on time",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--seconds", type=float, default=20.0, help="how long the source streams (default: 20)"
    )
    parser.add_argument("--rate", type=float, default=1000.0, help="source messages/s (default: 1000)")
    parser.add_argument("--symbols", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--from", dest="window_from", type=float, default=5.0, help="window start, s (default: 5)"
    )
    parser.add_argument(
        "--to", dest="window_to", type=float, default=15.0, help="window end, s (default: 15)"
    )
    output_arguments(parser)


def options_from(args: argparse.Namespace) -> ReplayTimeOptions:
    """The drill's options from its arguments.

    Raises:
        ValueError: a bad value, naming the option.
    """
    if args.seconds <= 0 or args.rate <= 0:
        raise ValueError("need --seconds > 0 and --rate > 0")
    if not 0 <= args.window_from < args.window_to <= args.seconds:
        raise ValueError(f"need 0 <= --from < --to <= --seconds, got {args.window_from}..{args.window_to}")
    return ReplayTimeOptions(
        seconds=args.seconds,
        rate=args.rate,
        symbols=args.symbols,
        seed=args.seed,
        window_from=args.window_from,
        window_to=args.window_to,
    )
