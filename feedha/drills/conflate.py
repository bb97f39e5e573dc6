"""``feedha drill conflate``: conflated lines across a kill, checked against the real-time stream.

A feed source and an adapter group (an active and a backup, each with a
journal, a replay service and a conflated line every ``--interval`` seconds)
run on loopback. The drill reads both conflated lines and both real-time
lines with raw sockets for the whole run, kills the active (``--kill
active``) at ``--kill-at`` of the stream, and checks:

* ``conflicts``: conf_seqs two conflated lines carried with different blocks (must be 0);
* ``missing``: conf_seqs between the first and the last seen that no line carried
  (must be 0: a failover costs no interval);
* ``state_mismatches``: conflated states that differ from the symbol's state on
  the real-time stream at the interval's boundary msg_seq (must be 0), over
  ``states_checked`` blocks; ``last_state_mismatches``: the same for each
  symbol's last conflated state;
* the stalled subscriber (:mod:`feedha.drills.conflate_client`, ``on_slow="conflate"``):
  it stops reading for a third of the stream, must come back conflated, then in
  real time, end at the channel's last msg_seq, and keep its RSS bounded
  (``client.rss_mb``: before, during and after the stall).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, Any, Final

import zmq

from feedha.cluster import GroupPlan, adapter_argv, plan_group
from feedha.drills.accounting import settle
from feedha.drills.group import CHANNEL, STREAM, DrillOptions, Placement, show_progress, start_source
from feedha.drills.output import output_arguments
from feedha.ports import free_ports
from feedha.procs import JsonProcess, python_argv

DRAIN_S: Final = 3.0  # reading on after the source ended: the last intervals and the client's end
RSS_GROWTH_MB: Final = 64.0  # the stalled client's RSS may grow at most this much


@dataclass(kw_only=True)
class ConflateOptions:
    seconds: float = 20.0
    interval: float = 0.1
    rate: float = 1000.0
    symbols: int = 200
    kill: str = "active"  # active | none
    kill_at: float = 0.5
    seed: int = 7


@dataclass
class _Run:
    options: ConflateOptions
    group: GroupPlan
    log: IO[str]
    workdir: Path
    adapters: dict[int, JsonProcess] = field(default_factory=dict)
    source: JsonProcess | None = None
    client: JsonProcess | None = None
    real_time: dict[int, bytes] = field(default_factory=dict)  # msg_seq -> payload, any line
    conflated: dict[int, dict[int, tuple[int, bytes]]] = field(
        default_factory=dict
    )  # line -> conf_seq -> block


def run_conflate(options: ConflateOptions, log: IO[str]) -> dict[str, Any]:
    """Run the drill and return its summary (tears down what it built, always)."""
    workdir = Path(tempfile.mkdtemp(prefix="feedha-conflate-"))
    group = plan_group(
        channel=CHANNEL,
        channel_number=1,
        source_endpoint=f"tcp://127.0.0.1:{free_ports(1)[0]}",
        source_stream=STREAM,
        source_stream_number=1,
        size=2,
        journal_root=workdir,
        conflate_interval=options.interval,
    )
    run = _Run(options, group, log, workdir)
    try:
        _start(run)
        sent = _stream(run)
        account = settle(partial(_live_controls, run), sent)  # feedha.drills.accounting
        return {**_report(run, sent), **account.summary()}
    finally:
        for proc in [*run.adapters.values(), run.source, run.client]:
            if proc is not None:
                proc.kill()
        shutil.rmtree(workdir, ignore_errors=True)


def _live_controls(run: _Run) -> dict[int, str]:
    return {plan.adapter: plan.control for plan in run.group.adapters if run.adapters[plan.adapter].alive}


def _start(run: _Run) -> None:
    for plan in run.group.adapters:
        args = adapter_argv(run.group, plan.adapter, active=plan.adapter == 1)
        run.adapters[plan.adapter] = JsonProcess(
            f"{CHANNEL}/adapter-{plan.adapter}", python_argv("feedha.adapter", args), log=run.log
        )
    for proc in run.adapters.values():
        proc.wait_event("ready", 20)
    run.adapters[1].wait_for(lambda e: e.get("event") == "role" and e.get("new") == "active", 10)
    seconds = run.options.seconds
    args = ["--channel", CHANNEL, "--read-s", f"{seconds * 0.2:g}", "--stall-s", f"{seconds / 3:g}"]
    args += ["--run-s", f"{seconds + DRAIN_S:g}", "--slow-after", "1"]
    for plan in run.group.adapters:
        args += ["--line", plan.line, "--replay", plan.replay, "--conflated", plan.conflated]
    run.client = JsonProcess("client", python_argv("feedha.drills.conflate_client", args), log=run.log)
    run.client.wait_event("ready", 20)


def _sockets(run: _Run) -> dict[Any, tuple[bool, int]]:
    # Raw SUB sockets on every line: socket -> (conflated, adapter number).
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    out: dict[Any, tuple[bool, int]] = {}
    for plan in run.group.adapters:
        for conflated, endpoint in ((False, plan.line), (True, plan.conflated)):
            sock = context.socket(zmq.SUB)
            sock.linger, sock.rcvhwm = 0, 0
            sock.subscribe(b"")
            sock.connect(endpoint)
            out[sock] = (conflated, plan.adapter)
    return out


def _stream(run: _Run) -> int:
    from feedha.proto import wire

    sockets = _sockets(run)
    poller = zmq.Poller()
    for sock in sockets:
        poller.register(sock, zmq.POLLIN)
    options = run.options
    source = DrillOptions(backups=1, rate=options.rate, seconds=options.seconds, symbols=options.symbols,
                          seed=options.seed)  # fmt: skip
    placement = Placement(run.group.source_endpoint, run.group, run.group.lines, {})
    run.source = start_source(source, placement, run.log)
    began, killed, ended = time.monotonic(), options.kill == "none", None
    try:
        while ended is None or time.monotonic() - ended < DRAIN_S:
            elapsed = time.monotonic() - began
            if not killed and elapsed >= options.seconds * options.kill_at:
                run.adapters[1].kill()
                killed = True
            if ended is None and not run.source.alive:
                ended = time.monotonic()
            for sock, _ in poller.poll(50):
                conflated, number = sockets[sock]
                while True:
                    try:
                        _topic, packet = sock.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    _take(run, conflated, number, wire.decode_packet(packet)[1])
            show_progress(f"conflate: {elapsed:5.1f}s, {len(run.real_time)} real-time messages")
    finally:
        for sock in sockets:
            sock.close(linger=0)
        show_progress("")
    return int(run.source.wait_for(lambda e: "sent" in e, 30)["sent"])


def _take(run: _Run, conflated: bool, number: int, blocks: list[Any]) -> None:
    if not conflated:
        for block in blocks:
            run.real_time.setdefault(block.msg_seq, block.payload)
        return
    line = run.conflated.setdefault(number, {})
    for block in blocks:
        line[block.msg_seq] = (block.source_seq, block.payload)


def _report(run: _Run, sent: int) -> dict[str, Any]:
    assert run.client is not None
    client = run.client.wait_for(lambda e: e.get("event") == "summary", 30)
    lines = list(run.conflated.values())
    union: dict[int, tuple[int, bytes]] = {}
    conflicts = 0
    for blocks in lines:
        for conf_seq, block in blocks.items():
            conflicts += union.setdefault(conf_seq, block) != block
    seqs = sorted(union)
    missing = (seqs[-1] - seqs[0] + 1 - len(seqs)) if seqs else 0
    checked, mismatches, last = _check_states(run, union)
    last_msg_seq = max(run.real_time, default=0)
    rss = client["rss_mb"]
    return {
        "drill": "conflate",
        "seconds": run.options.seconds,
        "interval_s": run.options.interval,
        "rate": run.options.rate,
        "kill": run.options.kill,
        "sent": sent,
        "real_time_messages": len(run.real_time),
        "real_time_holes": (last_msg_seq - min(run.real_time) + 1 - len(run.real_time))
        if run.real_time
        else 0,
        "intervals": len({boundary for boundary, _payload in union.values()}),
        "conf_seqs": len(seqs),
        "conflicts": conflicts,
        "missing": missing,
        "states_checked": checked,
        "state_mismatches": mismatches,
        "last_state_mismatches": last,
        "client": {
            **{k: v for k, v in client.items() if k != "event"},
            "channel_last_msg_seq": last_msg_seq,
            "rss_growth_mb": round(max(rss["stall_peak"], rss["after_peak"]) - rss["before"], 1),
        },
    }


def _check_states(run: _Run, union: dict[int, tuple[int, bytes]]) -> tuple[int, int, int]:
    # Each conflated state against the symbol's last state on the real-time stream at its boundary.
    from feedha.adapter.conversion.codec import from_proto
    from feedha.proto import market_pb2

    history: dict[str, list[tuple[int, Any]]] = {}
    for msg_seq, payload in sorted(run.real_time.items()):
        update = market_pb2.MarketUpdate.FromString(payload)
        if update.symbol:
            history.setdefault(update.symbol, []).append((msg_seq, update.state))
    checked = mismatches = 0
    last: dict[str, bool] = {}
    for _conf_seq, (boundary, payload) in sorted(union.items()):
        update = market_pb2.MarketUpdate.FromString(payload)
        before = [state for seq, state in history.get(update.symbol, ()) if seq <= boundary]
        same = bool(before) and from_proto(before[-1]) == from_proto(update.state)
        checked += 1
        mismatches += not same
        last[update.symbol] = same
    return checked, mismatches, sum(not same for same in last.values())


def summary_ok(result: dict[str, Any]) -> bool:
    """Whether the drill passed: what the issue asks it to show."""
    client = result["client"]
    return bool(
        result["intervals"] > 0
        and result["unaccounted"] == 0
        and result["conflicts"] == 0
        and result["missing"] == 0
        and result["state_mismatches"] == 0
        and result["last_state_mismatches"] == 0
        and client["conflated_events"] >= 1
        and client["real_time_events"] >= 1
        and client["ends_in_real_time"]
        and client["last_real_time_msg_seq"] == client["channel_last_msg_seq"]
        and client["rss_growth_mb"] <= RSS_GROWTH_MB
    )


def add_arguments(sub: Any) -> None:
    """The ``conflate`` sub-command's options."""
    parser = sub.add_parser(
        "conflate",
        help="conflated lines across a kill: identical, gap-free, exact; a stalled on_slow subscriber",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--seconds", type=float, default=20.0, help="how long the source streams (default: 20)"
    )
    parser.add_argument(
        "--interval", type=float, default=0.1, help="the conflation interval, s (default: 0.1)"
    )
    parser.add_argument("--rate", type=float, default=1000.0, help="source messages/s (default: 1000)")
    parser.add_argument("--symbols", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--kill", choices=("active", "none"), default="active")
    parser.add_argument("--kill-at", type=float, default=0.5, help="fraction of the stream (default: 0.5)")
    output_arguments(parser)


def options_from(args: argparse.Namespace) -> ConflateOptions:
    """The drill's options from its arguments.

    Raises:
        ValueError: a bad value, naming the option.
    """
    if args.seconds < 6 or args.rate <= 0:
        raise ValueError("need --seconds >= 6 (the subscriber stalls for a third of it) and --rate > 0")
    if not 0.01 <= args.interval <= args.seconds / 10:
        raise ValueError(f"need 0.01 <= --interval <= --seconds/10, got {args.interval}")
    if not 0 < args.kill_at < 1:
        raise ValueError(f"need 0 < --kill-at < 1, got {args.kill_at}")
    return ConflateOptions(seconds=args.seconds, interval=args.interval, rate=args.rate, symbols=args.symbols,
                           kill=args.kill, kill_at=args.kill_at, seed=args.seed)  # fmt: skip
