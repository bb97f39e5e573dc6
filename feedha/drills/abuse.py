"""``feedha drill abuse``: what a user with a valid key, or a crowd without one, can do to everyone else.

Starts a secure local cluster the way ``feedha up`` does (an admin server, the
plain source at ``--rate`` msg/s over one channel, an active and two backups
with CURVE on every socket, the source link included) and an honest
subscriber on every line of the channel (:mod:`feedha.drills.abuse_client`). Once
it receives, the attacks run together for ``--attack-seconds``
(:mod:`feedha.drills.abuse_attacks`):

* 5,000 subscriptions from one API key (``--subscriptions``), its CURVE keys
  taken in turn from a pool of 40;
* 200 Subscribe/Cancel cycles (``--churn``) by a key connected to every line;
* 64 concurrent logins with wrong secrets (``--logins``), until the end;
* 200 idle connections (``--idle``) to each health listener;
* 100 replay connections from one granted key that never read (``--replay``);
* 32 keys of one user on every replay service, reading as fast as they are
  answered, while another user asks for gaps (``--replay-keys``,
  :mod:`feedha.drills.abuse_users`);
* 500 route watch streams of two users modifying their subscriptions in a
  loop (``--watch-streams``, :mod:`feedha.drills.abuse_admin`);
* a forger sending packets of high terms on every line, read by an honest
  client-library subscriber (``--forged-terms``, :mod:`feedha.drills.abuse_terms`).

Before them, on its own, a burst of 200 logins cancelled mid-hash
(``--cancelled-logins``), the admin server's memory sampled throughout; after
them, on its own too (it makes the channel sealed for good),
Subscribe/Cancel every 100 ms on a sealed (multicast) channel while a
subscriber revoked meanwhile tries to open its packets
(``--seal-churn-every``).

Meanwhile an honest user logs in every 0.25 s and every health listener is
probed every 0.2 s. Then the source stops, the subscriber drains, and one
summary tells what the honest parties saw -- ``lost`` (msg_seqs no line
delivered), ``line_holes`` (jumps on any one line), login latency, probes
answered -- what the attacks got, what the adapters counted (connections cut
off, rebinds) and the resident memory of the admin server and the adapters
before and at most during the attacks. The drill passes when ``lost`` and
``line_holes`` are 0, the login p99 is under 1 s, every probe was answered,
the adapters never bound a line afresh, and the memory stayed bounded -- and
the admin server's own checks (:func:`feedha.drills.abuse_admin.checks`): the
burst grew its memory by no more than its hashing slots hold, every watch
stream opened and the storm ran, and the revoked subscriber opened nothing
sealed 2 s after its revocation.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, Any, Final

import psutil
import zmq

from feedha.cluster import control
from feedha.drills import abuse_admin as admin_attacks
from feedha.drills import abuse_attacks as attacks
from feedha.drills import abuse_terms as forged_terms
from feedha.drills import abuse_users as replay_users
from feedha.procs import JsonProcess, ProcessError
from feedha.up import Cluster

START_S: Final = 90.0
DRAIN_S: Final = 30.0
LOGIN_P99_S: Final = 1.0
RSS_GROWTH_MIB: Final = 400.0  # the most a process may grow while attacked (bounded, not zero)
CURVE_KEY_POOL: Final = 40
MAX_ATTACK_S: Final = 300.0


@dataclass(kw_only=True)
class AbuseOptions:
    """The drill's settings (``feedha drill abuse --help``)."""

    rate: float = 20_000.0
    attack_seconds: float = 20.0
    subscriptions: int = 5000
    churn: int = 200
    logins: int = 64
    idle: int = 200
    replay: int = 100
    replay_keys: int = replay_users.KEYS
    forged_terms: bool = True
    hashing: str = "fast"
    cancelled_logins: int = 200
    watch_streams: int = 500
    seal_churn_every: float = 0.1


def run_abuse(options: AbuseOptions, log: IO[str]) -> dict[str, Any]:
    """Run the drill and return its summary (tears down what it built, always)."""
    workdir = Path(tempfile.mkdtemp(prefix="feedha-drill-abuse-"))
    args = argparse.Namespace(
        channels=1, source="plain", rate=options.rate, delay=900.0, spark_master="local[*]",
        secret_hashing=options.hashing, conflate_interval=1.0,
    )  # fmt: skip
    cluster = Cluster(args, workdir, log)
    honest: JsonProcess | None = None
    try:
        cluster.start_admin()
        users = ("abuser", "churner", "guessed", *admin_attacks.USERS)  # guessed: the login flood's target
        keys = {name: cluster.add_user(name, groups=("traders",)) for name in users}
        cluster.start_source(cluster.start_groups())
        cluster.wait_registered(START_S)
        described = cluster.describe()
        honest = JsonProcess.python(
            "honest",
            "feedha.drills.abuse_client",
            ["--key-file", described["users"]["subscriber"], "--channel", cluster.groups[0].channel],
            log=log,
        )
        honest.wait_event("ready", START_S)
        return _attack(options, cluster, described, keys, honest)
    finally:
        if honest is not None:
            honest.kill()
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _attack(
    options: AbuseOptions,
    cluster: Cluster,
    described: dict[str, Any],
    keys: dict[str, dict[str, str]],
    honest: JsonProcess,
) -> dict[str, Any]:
    witness = JsonProcess.python(
        "witness",
        "feedha.drills.abuse_client",
        ["--witness", "--key-file", described["users"]["subscriber"]]
        + [f"--health={url}" for url in described["health"]],
        log=cluster.log,
    )
    try:
        witness.wait_event("ready", START_S)
        return _run_attacks(options, cluster, described, keys, honest, witness)
    finally:
        witness.kill()


def _run_attacks(
    options: AbuseOptions,
    cluster: Cluster,
    described: dict[str, Any],
    keys: dict[str, dict[str, str]],
    honest: JsonProcess,
    witness: JsonProcess,
) -> dict[str, Any]:
    admin = described["admin"]
    lines = _lines(admin, keys["churner"], cluster.groups[0].channel)
    memory = MemoryWatch({"admin": cluster.procs[0].popen.pid, **_adapter_pids(cluster)})
    memory.sample()
    replay_keys = zmq.curve_keypair()
    replay_route = _grant(admin, keys["abuser"], replay_keys[0].decode(), cluster.groups[0].channel)
    stop, done = threading.Event(), threading.Event()
    results: dict[str, Any] = {}
    if (burst := admin_attacks.burst_before_attacks(options, cluster)) is not None:
        results["cancelled_logins"] = burst
    work: dict[str, Callable[[], dict[str, Any]]] = {
        "login_flood": partial(
            attacks.login_flood, admin, keys["guessed"]["key_id"], workers=options.logins, stop=stop
        ),
        "replay_flood": partial(
            attacks.replay_flood, *replay_route, replay_keys, count=options.replay, stop=stop
        ),
        "subscription_flood": partial(
            attacks.subscription_flood,
            admin,
            keys["abuser"],
            count=options.subscriptions,
            keys=CURVE_KEY_POOL,
            stop=done,
        ),
        "churn": partial(attacks.churn, admin, keys["churner"], lines, cycles=options.churn, stop=done),
    }
    work.update(_optional_work(options, cluster, described, results, stop))
    work.update(admin_attacks.work(options, cluster, keys))
    threads = [attacks.in_thread(name, job, results) for name, job in work.items()]
    results["_attack_seconds"] = _attack_while(options, threads, memory)
    stop.set()
    done.set()
    results.update(admin_attacks.after_attacks(options, cluster, keys))  # the witness still measures
    witness.stop(timeout=30)
    summary = witness.wait_event("summary", 30)
    results.update(health=summary["health"], admin_login=summary["admin_login"])
    for thread in threads:
        thread.join(timeout=60)
    return _finish(options, cluster, honest, results, memory)


def _optional_work(
    options: AbuseOptions,
    cluster: Cluster,
    described: dict[str, Any],
    results: dict[str, Any],
    stop: threading.Event,
) -> dict[str, Callable[[], dict[str, Any]]]:
    # The attacks an option asks for (--replay-keys, --forged-terms), and idle connections
    # on every health listener.
    admin = described["admin"]
    work: dict[str, Callable[[], dict[str, Any]]] = {}
    if options.replay_keys:  # one user's keys flooding every replay service, another user's gaps
        flooder = cluster.add_user("replayer", groups=("traders",))
        honest_key = json.loads(Path(described["users"]["subscriber"]).read_text())
        channel = cluster.groups[0].channel
        work.update(
            replay_users.jobs(admin, flooder, honest_key, channel, keys=options.replay_keys, stop=stop)
        )
    if options.forged_terms:  # high terms on every line, an honest client-library subscriber on them
        forger = cluster.add_user("forger", groups=("traders",))
        subscriber_keys = described["users"]["subscriber"]
        forgery = forged_terms.Attack(admin, forger, subscriber_keys, cluster.groups[0].channel, cluster.log)
        cluster.procs.append(forgery.client)  # killed with the cluster whatever happens
        results["_forged_terms"] = forgery
    for url in described["health"]:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        work[f"idle {port}"] = partial(
            attacks.idle_connections, host, int(port), count=options.idle, stop=stop
        )
    return work


def _attack_while(options: AbuseOptions, threads: list[threading.Thread], memory: MemoryWatch) -> float:
    # The attacks last --attack-seconds, and at least until the flood and the churn are through
    # (never past MAX_ATTACK_S); memory is sampled meanwhile. Returns the seconds they lasted.
    started = time.monotonic()
    waited = ("subscription_flood", "churn", *admin_attacks.FINITE)
    finite = [thread for thread in threads if thread.name.removeprefix("abuse-") in waited]
    while time.monotonic() - started < options.attack_seconds or any(t.is_alive() for t in finite):
        if time.monotonic() - started > MAX_ATTACK_S:
            break
        memory.sample()
        time.sleep(0.5)
    return round(time.monotonic() - started, 1)


def _finish(
    options: AbuseOptions,
    cluster: Cluster,
    honest: JsonProcess,
    results: dict[str, Any],
    memory: MemoryWatch,
) -> dict[str, Any]:
    memory.sample()
    adapters = _adapter_status(cluster)
    if cluster.source is not None:
        cluster.source.stop(timeout=30)
    last = max((int(s.get("next_msg_seq", 1)) - 1 for s in adapters.values() if s), default=0)
    deadline = time.monotonic() + DRAIN_S
    while time.monotonic() < deadline:
        progress = honest.last("progress") or {}
        if int(progress.get("last_msg_seq", 0)) >= last:
            break
        time.sleep(0.2)
    honest.stop(timeout=10)
    summary = honest.wait_event("summary", 10)
    forgery = results.pop("_forged_terms", None)
    if forgery is not None:
        results.update(forgery.finish(last))
    return _report(options, summary, results, memory, _adapter_status(cluster), last)


def _report(
    options: AbuseOptions,
    honest: dict[str, Any],
    results: dict[str, Any],
    memory: MemoryWatch,
    adapters: dict[str, dict[str, Any]],
    last: int,
) -> dict[str, Any]:
    lost = int(honest["missing"]) + max(0, last - int(honest["last_msg_seq"]))
    access = {name: status.get("access", {}) for name, status in adapters.items()}
    report = {
        "drill": "abuse",
        "rate": options.rate,
        "attack_seconds": results.get("_attack_seconds", options.attack_seconds),
        "hashing": options.hashing,
        "honest": {
            "received_msg_seqs": honest["unique"],
            "first_msg_seq": honest["first_msg_seq"],
            "last_msg_seq": honest["last_msg_seq"],
            "active_last_msg_seq": last,
            "lost": lost,
            "line_holes": honest["line_holes"],
            "lines": [
                {k: line[k] for k in ("endpoint", "packets", "blocks", "holes")} for line in honest["lines"]
            ],
        },
        "admin_login": results.get("admin_login", {}),
        "health": results.get("health", {}),
        "attacks": {
            name: value
            for name, value in results.items()
            if name not in ("admin_login", "health", "_attack_seconds")
        },
        "adapters": {
            name: {
                "rebinds": a.get("rebinds"),
                "granted_keys": a.get("granted_keys"),
                "refused": a.get("refused"),
                "cut": {where: book.get("cut") for where, book in a.get("peers", {}).items()},
            }
            for name, a in access.items()
        },
        "rss_mib": memory.report(),
    }
    report["failed_checks"] = failed_checks(report)
    report["passed"] = not report["failed_checks"]
    return report


def failed_checks(report: dict[str, Any]) -> list[str]:
    """The names of the drill's checks that failed (none: it passed), so a failed run says why."""
    honest, login, health = report["honest"], report["admin_login"], report["health"]
    checks = {
        "honest_lost": honest["lost"] == 0,
        "honest_line_holes": honest["line_holes"] == 0,
        "logins": login.get("logins", 0) > 0 and not login.get("failed"),
        "login_p99": login.get("p99_ms", 1e9) < LOGIN_P99_S * 1000,
        "health": health.get("failed", 1) == 0 and health.get("answered", 0) > 0,
        "rebinds": all(not a["rebinds"] for a in report["adapters"].values()),
        "rss_growth": all(r["max"] - r["before"] <= RSS_GROWTH_MIB for r in report["rss_mib"].values()),
        **replay_users.checks(report.get("attacks", {})),
        **admin_attacks.checks(report.get("attacks", {})),
        **forged_terms.checks(report.get("attacks", {})),
    }
    return [name for name, held in checks.items() if not held]


class MemoryWatch:
    """Resident memory of some processes: at the first sample, and the most seen since."""

    def __init__(self, pids: dict[str, int]) -> None:
        self._procs = {name: psutil.Process(pid) for name, pid in pids.items()}
        self._before: dict[str, float] = {}
        self._max: dict[str, float] = {}

    def sample(self) -> None:
        for name, proc in self._procs.items():
            try:
                rss = proc.memory_info().rss / 2**20
            except psutil.Error:
                continue
            self._before.setdefault(name, rss)
            self._max[name] = max(self._max.get(name, 0.0), rss)

    def report(self) -> dict[str, dict[str, float]]:
        return {
            name: {"before": round(self._before[name], 1), "max": round(self._max[name], 1)}
            for name in self._before
        }


def _adapter_pids(cluster: Cluster) -> dict[str, int]:
    return {proc.name: proc.popen.pid for proc in cluster.adapters}


def _adapter_status(cluster: Cluster) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for group in cluster.groups:
        for plan in group.adapters:
            try:
                out[f"{group.channel}.{plan.adapter}"] = dict(control(plan.control, "status", timeout=5.0))
            except (TimeoutError, zmq.ZMQError):
                out[f"{group.channel}.{plan.adapter}"] = {}
    return out


def _lines(admin: str, key: dict[str, str], channel: str) -> list[tuple[str, str]]:
    """The channel's lines and their CURVE keys, as the admin server hands them out."""
    import asyncio

    from feedha.admin_client import AdminClient

    async def go() -> list[tuple[str, str]]:
        async with AdminClient(admin, key["key_id"], key["secret"]) as client:
            subscription = await client.subscribe(["*"])
            await client.cancel(subscription.subscription_id)
        return [
            (line.line_endpoint, line.curve_server_key)
            for route in subscription.routes
            if route.channel_name == channel
            for line in route.lines
        ]

    return asyncio.run(go())


def _grant(admin: str, key: dict[str, str], curve_key: str, channel: str) -> tuple[str, str]:
    """Subscribe with ``curve_key`` (it is then granted); the active's replay endpoint and its server key."""
    import asyncio

    from feedha.admin_client import AdminClient

    async def go() -> tuple[str, str]:
        async with AdminClient(admin, key["key_id"], key["secret"]) as client:
            subscription = await client.subscribe(["*"], curve_public_key=curve_key)
        lines = [
            line for route in subscription.routes if route.channel_name == channel for line in route.lines
        ]
        line = next((line for line in lines if line.role == "active"), lines[0])
        return line.replay_endpoint, line.curve_server_key

    return asyncio.run(go())


__all__ = ["AbuseOptions", "ProcessError", "run_abuse"]
