"""``feedha drill delayed``: the delayed stream and purges, with real processes on this machine.

Starts a feed source, one adapter group (an active and ``--backups N``), each
adapter journaling its line and serving a delayed line ``--delay`` seconds
behind it, and a client on the delayed lines only (it fills holes with delayed
ranges from the adapters' replay services). While the source streams for
``--seconds`` it

* purges ``--purge N`` single messages that are still pending on the delayed
  lines (through the active's control socket, the way ``feedctl purge`` reaches
  it), spread over the run, one of them after the failover;
* kills the ``--kill`` adapter with SIGKILL at ``--kill-at`` of the run;
* once the first purged message is past its delay, tries to purge a message
  already delivered on the delayed line: that must be refused.

It then waits for the delayed stream to arrive and prints what the client got:
``sent``, ``delivered``, ``lost`` (sent, minus delivered, minus purged),
``unaccounted`` (sent but booked by no adapter: :mod:`feedha.drills.accounting`),
``duplicates``, ``conflicts``, ``tombstones`` (``Purged`` events, one per purged
message), ``early`` (deliveries sooner than the delay after their event time; the
first few in ``early_examples``: msg_seq, line, how early, the packet's send time against due),
``late_purge_refused``, and the overshoot of the delay (delivery time minus
event time minus delay) at p50 and p99, in milliseconds.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, Any, Final

from feedha.cluster import adapter_argv, control, plan_group
from feedha.drills.accounting import settle
from feedha.drills.group import (
    CHANNEL,
    STREAM,
    Drill,
    DrillOptions,
    Placement,
    drain_client,
    live_controls,
    show_progress,
    start_adapter_process,
    start_source,
    victim,
)
from feedha.ports import free_ports
from feedha.procs import ProcessError

PURGE_BACK: Final = 20  # a purge names the message published this many before the active's last
LATE_PURGE_SEQ: Final = 1  # long delivered on the delayed line by the time it is tried
PURGE_WITHIN_S: Final = 5.0  # a purge is retried this long (the active may be changing hands)
MARGIN_S: Final = 0.5  # the adapters' purge margin in the drill
# The source, three adapters (each serving two lines) and the client share this machine's
# cores: a 1 s heartbeat timeout keeps a CPU stall from reading as a dead active (as the demo).
HEARTBEAT_TIMEOUT_S: Final = 1.0
START_S: Final = 60.0  # the longest a component may take to start (a loaded machine is slow)


@dataclass(kw_only=True)
class DelayedOptions:
    """The drill's settings (``feedha drill delayed --help``)."""

    delay: float = 5.0
    seconds: float = 20.0
    rate: float = 2000.0
    backups: int = 2
    purges: int = 3
    kill: str = "active"  # active | backup | none
    kill_at: float = 0.5
    symbols: int = 100
    seed: int = 7


@dataclass
class PurgeLog:
    """What the drill purged and how the adapters answered."""

    purged: list[int] = field(default_factory=list)  # msg_seqs accepted
    refusals: list[str] = field(default_factory=list)  # reasons of refused attempts (retried)
    late_refused: bool | None = None  # None: not tried
    late_reply: dict[str, Any] = field(default_factory=dict)


def options_from(args: argparse.Namespace) -> DelayedOptions:
    """The drill's options from its arguments.

    Raises:
        ValueError: a bad value, naming the options.
    """
    if args.delay <= MARGIN_S or args.seconds <= 0 or args.rate <= 0 or args.purge < 0:
        raise ValueError(f"need --delay > {MARGIN_S:g}, --seconds > 0, --rate > 0 and --purge >= 0")
    if args.backups < 1 or not 0 < args.kill_at < 1:
        raise ValueError("need --backups >= 1 and 0 < --kill-at < 1")
    return DelayedOptions(
        delay=args.delay,
        seconds=args.seconds,
        rate=args.rate,
        backups=args.backups,
        purges=args.purge,
        kill=args.kill,
        kill_at=args.kill_at,
        seed=args.seed,
    )


def run_delayed(options: DelayedOptions, log: IO[str]) -> dict[str, Any]:
    """Run the drill and return its summary (tears down what it built, always)."""
    base = DrillOptions(
        backups=options.backups,
        rate=options.rate,
        seconds=options.seconds,
        kill=options.kill,
        kill_at=options.kill_at,
        symbols=options.symbols,
        seed=options.seed,
    )
    root = Path(tempfile.mkdtemp(prefix="feedha-drill-delayed-"))
    placement = _place(options, root)
    drill = Drill(base, placement.group, log, placement)
    try:
        _start(options, drill)
        return _drive(options, drill)
    finally:
        for proc in drill.all():  # whatever was started, even when starting failed half-way
            proc.kill()
        shutil.rmtree(root, ignore_errors=True)


def _place(options: DelayedOptions, root: Path) -> Placement:
    # Every endpoint from one plan (one free_ports call): no two components can pick one port.
    source_endpoint = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    group = plan_group(
        channel=CHANNEL,
        channel_number=1,
        source_endpoint=source_endpoint,
        source_stream=STREAM,
        source_stream_number=1,
        size=options.backups + 1,
        journal_root=root,
        delayed=True,
    )
    replay = {a.adapter: a.replay for a in group.adapters}
    return Placement(source_endpoint, group, group.lines, replay, journal_root=root)


def _start(options: DelayedOptions, drill: Drill) -> None:
    group, placement, base, log = drill.group, drill.placement, drill.options, drill.log
    for plan in group.adapters:
        args = adapter_argv(group, plan.adapter, active=plan.adapter == 1)  # journal, replay, delayed line
        args += ["--delay", f"{options.delay:g}", "--purge-margin", f"{MARGIN_S:g}"]
        args += ["--heartbeat-timeout", f"{HEARTBEAT_TIMEOUT_S:g}"]
        drill.adapter_args[plan.adapter] = args
        drill.adapters[plan.adapter] = start_adapter_process(drill, plan.adapter, args)
    for proc in drill.adapters.values():
        proc.wait_event("ready", START_S)
    drill.adapters[1].wait_for(lambda e: e.get("event") == "role" and e.get("new") == "active", START_S)
    client_args = ["--channel", f"{CHANNEL}=1", "--delayed", f"{options.delay:g}", "--loss-timeout", "2.0"]
    for plan in group.adapters:
        client_args += ["--line", f"{CHANNEL}={plan.delayed}", "--replay", f"{CHANNEL}={plan.replay}"]
    drill.client = placement.spawn("client", "client", "feedha.drills.client", client_args, log)
    drill.source = start_source(base, placement, log)


def _drive(options: DelayedOptions, drill: Drill) -> dict[str, Any]:
    assert drill.source is not None and drill.client is not None
    started = time.monotonic()
    purge_at = [options.seconds * (i + 1) / (options.purges + 1) for i in range(options.purges)]
    if options.purges and options.kill != "none":
        # One purge after the failover: the new active decides it.
        purge_at[-1] = max(purge_at[-1], options.seconds * options.kill_at + 1.5)
        purge_at = sorted(min(t, options.seconds - 0.5) for t in purge_at)
    purges = PurgeLog()
    killed: int | None = None
    while drill.source.alive:
        elapsed = time.monotonic() - started
        if killed is None and options.kill != "none" and elapsed >= options.seconds * options.kill_at:
            killed = victim(drill, options.kill)
            drill.adapters[killed].kill()
            drill.faults.append({"fault": "kill", "adapter": killed, "at_s": round(elapsed, 2)})
        if purge_at and elapsed >= purge_at[0]:
            purge_at.pop(0)
            _purge_one(drill, purges)
        if purges.late_refused is None and purges.purged and elapsed >= options.delay + MARGIN_S + 1.0:
            _purge_late(drill, purges)
        show_progress(f"drill delayed: {elapsed:5.1f}s  purged {len(purges.purged)}  killed {killed or '-'}")
        try:
            drill.source.popen.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            pass
    if purges.late_refused is None and purges.purged:
        _purge_late(drill, purges)
    source = drill.source.wait_for(lambda e: "sent" in e, 30)
    sent = int(source["sent"])
    group = settle(partial(live_controls, drill), sent)  # feedha.drills.accounting
    drain_client(drill.client, sent - len(purges.purged), stall_s=options.delay + 5.0)
    drill.client.stop()
    summary = drill.client.wait_event("summary", 10)["channels"][CHANNEL]
    for proc in drill.adapters.values():
        if proc.alive:
            proc.stop()
    show_progress("")
    return {**_report(options, drill, sent, summary, purges, killed), **group.summary()}


def _active_control(drill: Drill) -> str:
    number = victim(drill, "active")
    return drill.group.adapter(number).control


def _purge_one(drill: Drill, log: PurgeLog) -> None:
    """Purge one message the active published a moment ago (pending on every delayed line)."""
    deadline = time.monotonic() + PURGE_WITHIN_S
    while time.monotonic() < deadline:
        try:
            target = _active_control(drill)
            status: dict[str, Any] = control(target, "status", timeout=3.0)
        except (ProcessError, TimeoutError):
            time.sleep(0.1)  # no active right now (a failover): a moment later
            continue
        msg_seq = int(status["journal_last_msg_seq"] or 0) - PURGE_BACK
        if status.get("role") != "active" or msg_seq < 1:
            time.sleep(0.1)  # between actives, or the stream has barely started: a moment later
            continue
        known = int(status["purges"]["highest_id"])
        try:
            reply: dict[str, Any] = control(
                target, "purge", first=msg_seq, reason="drill: erroneous print", timeout=5.0
            )
        except TimeoutError:
            # The answer may be lost while the purge was taken: ask before purging again.
            log.refusals.append("no answer in time")
            if _taken(drill, known):
                log.purged.append(msg_seq)
                return
            continue
        if reply.get("ok"):
            log.purged.append(int(reply["first_msg_seq"]))
            return
        log.refusals.append(str(reply.get("reason")))


def _taken(drill: Drill, known: int) -> bool:
    """Whether a live adapter of the group now holds a purge beyond ``known``."""
    for plan in drill.group.adapters:
        proc = drill.adapters.get(plan.adapter)
        if proc is None or not proc.alive:
            continue
        try:
            status: dict[str, Any] = control(plan.control, "status", timeout=3.0)
            if int(status["purges"]["highest_id"]) > known:
                return True
        except TimeoutError:
            continue
    return False


def _purge_late(drill: Drill, log: PurgeLog) -> None:
    """Try to purge a message long delivered on the delayed line: it must be refused as such."""
    deadline = time.monotonic() + PURGE_WITHIN_S
    reply: dict[str, Any] = {"error": "no active adapter answered"}
    while time.monotonic() < deadline:
        try:
            target = _active_control(drill)
            reply = control(target, "purge", first=LATE_PURGE_SEQ, reason="drill: too late", timeout=5.0)
        except ProcessError:
            time.sleep(0.1)  # no active right now (a failover): a moment later
            continue
        except TimeoutError as exc:
            reply = {"error": str(exc)}
            continue
        if reply.get("reason") not in ("NOT_ACTIVE", "CATCHING_UP"):
            break
        time.sleep(0.1)
    log.late_reply = reply
    log.late_refused = reply.get("ok") is False and reply.get("reason") == "ALREADY_DELIVERED"


def _report(
    options: DelayedOptions,
    drill: Drill,
    sent: int,
    client: dict[str, Any],
    purges: PurgeLog,
    killed: int | None,
) -> dict[str, Any]:
    arbiter = client["arbiter"]
    tombstones = int(client.get("tombstones", 0))
    promotions = [
        number
        for number, proc in drill.adapters.items()
        for event in proc.events
        if event.get("event") == "role" and event.get("new") == "active" and number != 1
    ]
    return {
        "drill": "delayed",
        "delay_s": options.delay,
        "seconds": options.seconds,
        "rate": options.rate,
        "backups": options.backups,
        "sent": sent,
        "delivered": client["delivered"],
        "lost": sent - int(client["unique"]) - tombstones,
        "duplicates": client["duplicates"],
        "out_of_order": client["out_of_order"],
        "conflicts": arbiter.get("conflicts", 0),
        "line_holes": arbiter.get("line_holes", 0),
        "tombstones": tombstones,
        "purged": purges.purged,
        "purged_seen": sorted(client.get("purged_msg_seqs", [])) == sorted(purges.purged),
        "purge_retries": purges.refusals,
        "early": client.get("early", 0),
        "early_examples": client.get("early_examples", []),
        "late_purge_refused": bool(purges.late_refused),
        "late_purge_reply": purges.late_reply.get("error", purges.late_reply.get("reason")),
        "overshoot_ms_p50": client.get("overshoot_ms_p50", 0.0),
        "overshoot_ms_p99": client.get("overshoot_ms_p99", 0.0),
        "overshoot_ms_max": client.get("overshoot_ms_max", 0.0),
        "killed": options.kill if killed is not None else "none",
        "killed_adapter": killed,
        "promoted_adapter": promotions[-1] if promotions else None,
        "gaps": arbiter.get("gaps", 0),
        "retransmission_requests": arbiter.get("retransmission_requests", 0),
        "faults": drill.faults,
        "roles": {
            str(number): [(e.get("new"), e.get("term")) for e in proc.events if e.get("event") == "role"]
            for number, proc in drill.adapters.items()
        },
        "adapters": _adapter_ends(drill),
        "client_last_msg_seq": client.get("streams", {}),
    }


def _adapter_ends(drill: Drill) -> dict[str, dict[str, Any]]:
    """Each adapter's final counters of both lines (from its ``stopped`` report; a killed one has none)."""
    out = {}
    for number, proc in drill.adapters.items():
        stopped = proc.last("stopped")
        if stopped is not None:
            delayed = stopped.get("delayed", {})
            out[str(number)] = {
                "role": stopped.get("role"),
                "next_msg_seq": stopped.get("next_msg_seq"),
                "delayed_published_msg_seq": delayed.get("published_msg_seq"),
                "delayed_tombstones": delayed.get("tombstones"),
                "delayed_late": delayed.get("late"),
                "purges": stopped.get("purges"),
            }
    return out


def passed(result: dict[str, Any], *, purges: int) -> bool:
    """Whether the summary reads as the issue asks (nothing lost, repeated or conflicting, ...)."""
    return (
        result["lost"] == 0
        and result["unaccounted"] == 0
        and result["duplicates"] == 0
        and result["conflicts"] == 0
        and result["tombstones"] == purges
        and result["early"] == 0
        and (result["late_purge_refused"] or purges == 0)
    )
