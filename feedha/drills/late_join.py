"""``feedha drill late-join``: late joiners, a failover and a session boundary, with real processes.

A feed source, an adapter group (an active and two backups, each with a
journal and a replay service) and a *reference* subscriber that is there
from the first message run on loopback. While the source streams for
``--seconds``, clients join late: one before the failover, one after it, one
after the session boundary. Each joiner asks a replay service for the
channel's image (every symbol's state at msg_seq N) and takes the lines from
N + 1. The active is killed (SIGKILL) at ``--kill-at``, and the operator
ends the trading session at ``--session-end-at`` of the run (the
``session_end`` command to whoever is active then).

Every client keeps every symbol's state and records a digest of it after
each msg_seq (:mod:`feedha.drills.state_client`). The drill then checks:

* ``state_mismatches``: msg_seqs at which a joiner's state differs from the
  reference's (must be 0: the image plus the stream from N + 1 is the state);
* ``lost``: source messages the reference never got, plus msg_seqs a joiner
  skipped after its image (0);
* ``conflicts``: copies of one msg_seq that named different messages, in any
  client (0);
* ``rollover_msg_seqs``: how many distinct msg_seqs the session rolled at,
  over every client and every adapter's journal (1: every line rolled at one).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from array import array
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, Any

from feedha.cluster import adapter_argv, control
from feedha.drills.accounting import GroupAccount, settle
from feedha.drills.group import CHANNEL, DrillOptions, Placement, place_local, show_progress, start_source
from feedha.procs import JsonProcess, ProcessError, python_argv

START_WAIT_S = 240.0
DRAIN_S = 60.0  # the most the clients may take to catch up once the source stopped
JOINS = (0.3, 0.6, 0.85)  # when the joiners come, as fractions of the run


@dataclass(kw_only=True)
class LateJoinOptions:
    seconds: float = 20.0
    rate: float = 2000.0
    symbols: int = 200
    kill: str = "active"  # active | none
    kill_at: float = 0.5
    session_end_at: float = 0.7
    seed: int = 7


@dataclass
class _Run:
    options: LateJoinOptions
    placement: Placement
    log: IO[str]
    workdir: Path
    adapters: dict[int, JsonProcess] = field(default_factory=dict)
    clients: dict[str, JsonProcess] = field(default_factory=dict)
    source: JsonProcess | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    account: GroupAccount | None = None  # what the adapters booked of what the source sent

    def journal(self, number: int) -> Path:
        return self.workdir / f"journal-{number}"


def options_from(args: argparse.Namespace) -> LateJoinOptions:
    """The drill's options from its arguments.

    Raises:
        ValueError: a bad value, naming the options.
    """
    if args.seconds <= 0 or args.rate <= 0 or not 0 < args.kill_at < 1 or not 0 < args.session_end_at < 1:
        raise ValueError("need --seconds > 0, --rate > 0, 0 < --kill-at, --session-end-at < 1")
    return LateJoinOptions(
        seconds=args.seconds,
        rate=args.rate,
        symbols=args.symbols,
        seed=args.seed,
        kill=args.kill,
        kill_at=args.kill_at,
        session_end_at=args.session_end_at,
    )


def run_late_join(options: LateJoinOptions, log: IO[str]) -> dict[str, Any]:
    """Run the drill and return its summary (tears down what it built, always)."""
    placement = place_local(DrillOptions(backups=2, rate=options.rate, seconds=options.seconds))
    run = _Run(options, placement, log, Path(tempfile.mkdtemp(prefix="feedha-late-join-")))
    try:
        _start(run)
        _drive(run)
        return _report(run)
    finally:
        for proc in [*run.adapters.values(), *run.clients.values(), run.source]:
            if proc is not None:
                proc.kill()
        shutil.rmtree(run.workdir, ignore_errors=True)


def _start(run: _Run) -> None:
    group, placement = run.placement.group, run.placement
    for plan in group.adapters:
        args = adapter_argv(group, plan.adapter, active=plan.adapter == 1)
        args += ["--journal", str(run.journal(plan.adapter)), "--replay", placement.replay[plan.adapter]]
        args += ["--checkpoint-interval", "1"]
        name = f"{CHANNEL}/adapter-{plan.adapter}"
        run.adapters[plan.adapter] = JsonProcess(name, python_argv("feedha.adapter", args), log=run.log)
    for proc in run.adapters.values():
        proc.wait_event("ready", 20)
    run.adapters[1].wait_for(lambda e: e.get("event") == "role" and e.get("new") == "active", 10)
    _client(run, "reference", image=False).wait_event("ready", 20)
    options = run.options
    source = DrillOptions(
        backups=2, rate=options.rate, seconds=options.seconds, symbols=options.symbols, seed=options.seed
    )
    run.source = start_source(source, placement, run.log)


def _client(run: _Run, name: str, *, image: bool) -> JsonProcess:
    placement = run.placement
    args = ["--channel", f"{CHANNEL}=1", "--out", str(run.workdir / f"{name}.digests")]
    for line in placement.client_lines:
        args += ["--line", line]
    for endpoint in placement.replay.values():
        args += ["--replay", endpoint]
    if image:
        args.append("--image")
    proc = JsonProcess(name, python_argv("feedha.drills.state_client", args), log=run.log)
    run.clients[name] = proc
    return proc


def _active(run: _Run) -> int | None:
    for number, proc in run.adapters.items():
        if proc.alive:
            try:
                if control(run.placement.group.adapter(number).control, "status", timeout=2.0).get(
                    "role"
                ) == ("active"):
                    return number
            except TimeoutError:
                continue
    return None


def _drive(run: _Run) -> None:
    options, reference = run.options, run.clients["reference"]
    assert run.source is not None
    reference.wait_for(lambda e: e.get("event") == "progress" and e.get("delivered", 0) > 0, START_WAIT_S)
    started = time.monotonic()
    steps: list[tuple[float, str]] = [(at, f"join-{i + 1}") for i, at in enumerate(JOINS)]
    if options.kill == "active":
        steps.append((options.kill_at, "kill"))
    steps.append((options.session_end_at, "session_end"))
    steps.sort()
    while run.source.alive or steps:
        elapsed = (time.monotonic() - started) / options.seconds
        while steps and (elapsed >= steps[0][0] or not run.source.alive):
            _step(run, steps.pop(0)[1])
        show_progress(f"late-join: {elapsed * options.seconds:5.1f}s  {[e['step'] for e in run.events]}")
        time.sleep(0.05)
    sent = int(run.source.wait_for(lambda e: "sent" in e, 30)["sent"])
    run.events.append({"step": "source_done", "sent": sent})
    run.account = settle(partial(_live_controls, run), sent)  # feedha.drills.accounting
    _drain(run)
    for proc in run.clients.values():
        proc.stop()
    show_progress("")


def _live_controls(run: _Run) -> dict[int, str]:
    group = run.placement.group
    return {number: group.adapter(number).control for number, proc in run.adapters.items() if proc.alive}


def _step(run: _Run, step: str) -> None:
    event: dict[str, Any] = {"step": step, "at": round(time.time(), 3)}
    if step.startswith("join-"):
        proc = _client(run, step, image=True)
        event["image_msg_seq"] = proc.wait_event("ready", 30).get("image_msg_seq")
    elif step == "kill":
        active = _active(run)
        if active is None:
            raise ProcessError("no active adapter to kill")
        run.adapters[active].kill()
        event["adapter"] = active
    elif step == "session_end":
        deadline = time.monotonic() + 10
        while True:
            active = _active(run)
            reply: dict[str, Any] = {}
            if active is not None:
                endpoint = run.placement.group.adapter(active).control
                reply = control(endpoint, "session_end", reason="late-join drill")
            if reply.get("ok") or time.monotonic() > deadline:
                break
            time.sleep(0.1)  # no active yet (an election): ask again
        event.update(adapter=active, reply=reply)
    run.events.append(event)


def _drain(run: _Run) -> None:
    # Wait until every client has reached the newest msg_seq any adapter numbered.
    deadline = time.monotonic() + DRAIN_S
    while time.monotonic() < deadline:
        newest = max((_next_msg_seq(run, n) for n in run.adapters if run.adapters[n].alive), default=1) - 1
        lasts = [int((c.last("progress") or {}).get("last_msg_seq", 0)) for c in run.clients.values()]
        if lasts and min(lasts) >= newest > 0:
            return
        time.sleep(0.2)


def _next_msg_seq(run: _Run, number: int) -> int:
    try:
        status = control(run.placement.group.adapter(number).control, "status", timeout=2.0)
    except TimeoutError:
        return 0
    value = status.get("next_msg_seq")
    return value if isinstance(value, int) else 0


def _digests(path: Path) -> dict[int, int]:
    values = array("Q")
    values.frombytes(path.read_bytes())
    return {values[i]: values[i + 1] for i in range(0, len(values), 2)}


def _journal_boundaries(path: Path) -> set[int]:
    from feedha.adapter.journal import JournalReader

    if not path.exists():
        return set()
    return {r.msg_seq for r in JournalReader(path).read() if r.is_session_boundary}


def _report(run: _Run) -> dict[str, Any]:
    summaries = {name: proc.wait_event("summary", 30) for name, proc in run.clients.items()}
    reference = _digests(run.workdir / "reference.digests")
    sent = next(e["sent"] for e in run.events if e["step"] == "source_done")
    ref = summaries["reference"]
    lost = max(0, sent - int(ref["delivered"])) + int(ref["holes"])
    mismatches, joiners = 0, []
    for name, summary in summaries.items():
        if name == "reference":
            continue
        mine = _digests(run.workdir / f"{name}.digests")
        compared = [seq for seq in mine if seq in reference]
        bad = [seq for seq in compared if mine[seq] != reference[seq]]
        mismatches += len(bad)
        lost += int(summary["holes"])
        joiners.append({"name": name, "image_msg_seq": summary["image_msg_seq"],
                        "image_symbols": summary["image_symbols"], "compared": len(compared),
                        "mismatched": bad[:10], "last_msg_seq": summary["last_msg_seq"]})  # fmt: skip
    rollovers: set[int] = set()
    for summary in summaries.values():
        rollovers |= {s["msg_seq"] for s in summary["sessions"]}
    for number in run.adapters:
        rollovers |= _journal_boundaries(run.journal(number))
    return {
        "drill": "late-join",
        "seconds": run.options.seconds,
        "rate": run.options.rate,
        "sent": sent,
        "joiners": len(joiners),
        "state_mismatches": mismatches,
        "lost": lost,
        **(run.account.summary() if run.account is not None else {"unaccounted": sent}),
        "conflicts": sum(int(s["arbiter"]["conflicts"]) for s in summaries.values()),
        # The subscriber there from the start: a joiner fills what came before it by design.
        "line_holes": int(ref["arbiter"].get("line_holes", 0)),
        "rollover_msg_seqs": len(rollovers),
        "rolled_at": sorted(rollovers),
        "sessions_seen": {name: s["sessions"] for name, s in summaries.items()},
        "joiner_details": joiners,
        "steps": run.events,
    }


def summary_ok(result: dict[str, Any]) -> bool:
    """Whether the drill passed: what the issue asks it to show."""
    return bool(
        result["joiners"] >= 2
        and result["state_mismatches"] == 0
        and result["lost"] == 0
        and result["unaccounted"] == 0
        and result["conflicts"] == 0
        and result["rollover_msg_seqs"] == 1
    )


def dumps(result: dict[str, Any]) -> str:
    return json.dumps(result)
