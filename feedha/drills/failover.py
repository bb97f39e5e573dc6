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
import time
from functools import partial
from typing import IO, Any

from feedha.drills.accounting import GroupAccount, settle
from feedha.drills.group import (
    CHANNEL,
    SYNC_PORT,
    Drill,
    DrillOptions,
    adapter_host,
    drain_client,
    live_controls,
    place_local,
    place_netns,
    roles_now,
    sent_of,
    show_progress,
    start_adapter_process,
    start_drill,
    victim,
)
from feedha.drills.spark import kill_spark_worker

SWITCH_WINDOW_S = (-0.2, 3.0)  # around the kill: where a pause counts as the switch gap
SOURCE_START_S = 240.0  # how long a source may take to publish its first message (Spark start-up)


def run_failover(options: DrillOptions, log: IO[str]) -> dict[str, Any]:
    """Run the failover drill and return its summary (tears down what it built, always)."""
    placement = place_netns(options) if options.hosts == "netns" else place_local(options)
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
