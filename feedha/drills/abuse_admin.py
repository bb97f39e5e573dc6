"""The abuse drill's attacks on the admin server's own limits (issue 58): each with a check that could fail.

* :func:`cancelled_login_burst`: ``count`` logins with good secrets, spread over
  four keys whose hashes have the production cost (64 MiB, ~0.3 s: a stored hash
  keeps its cost, whatever the cluster's), each cancelled by its caller 0-100 ms
  after it is sent, and the key's next login sent at once. The admin server's
  resident memory is sampled every 5 ms from before the burst until the hashes
  it started are done: it must grow by no more than the hashing slots x the
  hash's memory cost (plus :data:`BURST_SLACK_MIB` for the calls themselves). Before, a
  cancelled login let its slot go while its thread hashed on, so a burst ran
  as many hashes at once as the default thread pool had threads.
* :func:`watch_storm`: ``streams`` ``WatchRoutes`` streams of two users, as many
  on each subscription as the server keeps (a newer one takes the oldest's
  place), while both users modify their subscriptions in a loop as fast as
  their request rate lets them. The witness's honest logins and health probes
  run meanwhile (the drill's ``login_p99`` and ``health`` checks).
* :func:`feedha.drills.abuse_sealed.sealed_churn`: Subscribe/Cancel every
  100 ms on a sealed (multicast) channel while a subscriber revoked meanwhile
  tries to open its packets: it must open nothing sealed 2 s after its
  revocation (after the other attacks, on its own: see that module).

:func:`checks` adds the drill's checks of these three to ``failed_checks``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import random
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import grpc
import psutil

from feedha.admin_client.errors import status_details
from feedha.admin_server import tokens
from feedha.admin_server.config import SecretHashing
from feedha.admin_server.limits import Limits
from feedha.admin_server.server import issue_key
from feedha.admin_server.store import Store
from feedha.drills import abuse_sealed
from feedha.drills.abuse_attacks import CALL_TIMEOUT_S, _login_patiently, _reason
from feedha.proto import admin_pb2, admin_pb2_grpc
from feedha.transport.tasks import cancel_and_wait

__all__ = [
    "FINITE",
    "USERS",
    "after_attacks",
    "burst_before_attacks",
    "cancelled_login_burst",
    "checks",
    "watch_storm",
    "work",
]

BURST_KEYS: Final = 4  # the burst's logins go to this many keys (each key's are checked one at a time)
USERS: Final = ("storm-0", "storm-1", "victim", "sealchurn")  # the burst makes keys of its own
FINITE: Final = ("watch_storm",)  # attacks the drill waits for (they end by themselves)
BURST_SLACK_MIB: Final = 8.0  # what a burst of calls holds besides the hashes (gRPC's buffers and tasks)
CANCEL_WITHIN_S: Final = 0.1  # a burst login is cancelled this long after it is sent, at most
STORM_S: Final = 8.0  # the Modify loop runs this long once every watch stream is open


def _sample(pid: int, samples: list[float], stop: threading.Event) -> None:
    proc = psutil.Process(pid)
    while not stop.is_set():
        with contextlib.suppress(psutil.Error):
            samples.append(proc.memory_info().rss / 2**20)
        stop.wait(0.005)


def cancelled_login_burst(
    admin: str,
    keys: Sequence[dict[str, str]],
    *,
    count: int,
    admin_pid: int,
    bound_mib: float,
    metrics: str = "",
) -> dict[str, Any]:
    """``count`` logins with good secrets over ``keys``, each cancelled within 100 ms; the admin's RSS.

    Each key's logins go one after the other: one is sent, cancelled 0-100 ms later, and the
    next is sent at once (before, the cancel let the key's lock go while its hash ran on, so the
    next one hashed beside it). With ``metrics`` (the admin server's ``/metrics`` URL) it also
    reports how many logins the server checked meanwhile, the witness's few included.
    """
    checked_before = _logins_checked(metrics)
    wall = time.time()
    samples: list[float] = []
    stop = threading.Event()
    before = psutil.Process(admin_pid).memory_info().rss / 2**20
    sampler = threading.Thread(target=_sample, args=(admin_pid, samples, stop), name="burst-rss", daemon=True)
    sampler.start()
    rng = random.Random(58)
    delays = [rng.uniform(0.0, CANCEL_WITHIN_S) for _ in range(count)]

    started = time.monotonic()
    try:
        outcomes = asyncio.run(_cancelled_logins(admin, keys, delays))
    finally:
        stop.set()
        sampler.join(5)
    most = max([before, *samples])
    return {
        "logins": count,
        "keys": len(keys),
        "outcomes": dict(outcomes),
        "seconds": round(time.monotonic() - started, 2),
        "rss_mib": {"before": round(before, 1), "max": round(most, 1), "samples": len(samples)},
        "growth_mib": round(most - before, 1),
        "bound_mib": bound_mib,
        "checked_by_server": _logins_checked(metrics) - checked_before,
        "wall_s": [round(wall, 1), round(time.time(), 1)],
    }


async def _outcome(call: Any) -> str:
    try:
        await call
    except asyncio.CancelledError:  # what awaiting a call we cancelled raises
        return "CANCELLED"
    except grpc.aio.AioRpcError as exc:
        return _reason(exc)
    return "OK"


def _logins_checked(metrics: str) -> int:
    # The server's count of logins whose secret it hashed (ok and failed), from its /metrics.
    if not metrics:
        return 0
    with urllib.request.urlopen(metrics, timeout=10) as reply:
        text = reply.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(
            ('feedha_admin_logins_total{result="ok"}', 'feedha_admin_logins_total{result="failed"}')
        ):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


async def _cancelled_logins(
    admin: str, keys: Sequence[dict[str, str]], delays: Sequence[float]
) -> Counter[str]:
    # Login number i is cancelled delays[i] after it is sent; each key's logins one after the other.
    count = len(delays)
    outcomes: Counter[str] = Counter()
    async with grpc.aio.insecure_channel(admin) as channel:
        auth = admin_pb2_grpc.AdminAuthStub(channel)  # type: ignore[no-untyped-call]

        async def pipeline(key: dict[str, str], turns: range) -> None:
            request = admin_pb2.LoginRequest(key_id=key["key_id"], secret=key["secret"])
            for turn in turns:
                call = auth.Login(request, timeout=CALL_TIMEOUT_S)
                await asyncio.sleep(delays[turn])  # the attack's pace
                call.cancel()
                outcomes[await _outcome(call)] += 1

        await asyncio.gather(*(pipeline(key, range(i, count, len(keys))) for i, key in enumerate(keys)))
        # The hashes the server started run on after the cancels; a last login of each key
        # waits for its key's lock, so once they are answered every hash is done.
        await asyncio.gather(*(_login_patiently(channel, key) for key in keys))
    return outcomes


async def _read_watch(call: Any, opened: asyncio.Event, report: dict[str, Any]) -> None:
    # One route watch of the storm: its first answer opens it, the rest are updates.
    try:
        async for _update in call:
            if not opened.is_set():
                opened.set()
                report["opened"] += 1
            else:
                report["updates"] += 1
    except grpc.aio.AioRpcError as exc:
        if exc.code() is not grpc.StatusCode.CANCELLED:
            report["ended"][_reason(exc)] += 1


def watch_storm(admin: str, keys: Sequence[dict[str, str]], *, streams: int) -> dict[str, Any]:
    """``streams`` route watches of ``keys``' subscriptions while each user modifies them for ``STORM_S``."""
    started, wall = time.monotonic(), time.time()
    cap = Limits().watches_per_subscription
    per_user = -(-streams // len(keys))
    report: dict[str, Any] = {
        "streams": 0,
        "opened": 0,
        "updates": 0,
        "ended": Counter(),
        "modifies": Counter(),
    }

    async def user(channel: grpc.aio.Channel, key: dict[str, str], readers: list[asyncio.Task[None]]) -> None:
        md = await _login_patiently(channel, key)
        broker = admin_pb2_grpc.StreamBrokerStub(channel)  # type: ignore[no-untyped-call]
        subscribing = admin_pb2.SubscribeRequest(symbols=["*"])
        made = [
            broker.Subscribe(subscribing, metadata=md, timeout=CALL_TIMEOUT_S)
            for _ in range(-(-per_user // cap))
        ]
        subs = [reply.subscription_id for reply in await asyncio.gather(*made)]
        openings = []
        for index in range(per_user):
            watching = admin_pb2.WatchRoutesRequest(subscription_id=subs[index // cap])
            opened = asyncio.Event()
            readers.append(
                asyncio.create_task(_read_watch(broker.WatchRoutes(watching, metadata=md), opened, report))
            )
            openings.append(opened)
            report["streams"] += 1
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(60):
                await asyncio.gather(*(opened.wait() for opened in openings))
        report["open_s"] = round(time.monotonic() - started, 1)
        report["opened_at"] = round(time.time(), 1)
        await _modify_loop(broker, md, subs, report["modifies"], time.monotonic() + STORM_S)

    async def go() -> None:
        readers: list[asyncio.Task[None]] = []
        async with grpc.aio.insecure_channel(admin) as channel:
            try:
                await asyncio.gather(*(user(channel, key, readers) for key in keys))
            finally:
                for reader in readers:
                    await cancel_and_wait(reader)

    asyncio.run(go())
    return {
        **report,
        "ended": dict(report["ended"]),
        "modifies": dict(report["modifies"]),
        "seconds": round(time.monotonic() - started, 1),
        "wall_s": [round(wall, 1), round(time.time(), 1)],
    }


async def _modify_loop(
    broker: Any, md: Any, subs: Sequence[str], outcomes: Counter[str], until: float
) -> None:
    # As fast as the user's request rate lets: a refusal's RetryInfo says how long to wait.
    turn = 0
    while time.monotonic() < until:
        sub = subs[turn % len(subs)]
        symbols = ["*"] if (turn // len(subs)) % 2 else ["A*", "B*"]
        turn += 1
        try:
            request = admin_pb2.ModifyRequest(subscription_id=sub, symbols=symbols)
            await broker.Modify(request, metadata=md, timeout=CALL_TIMEOUT_S)
            outcomes["OK"] += 1
        except grpc.aio.AioRpcError as exc:
            outcomes[_reason(exc)] += 1
            await asyncio.sleep(min(1.0, status_details(exc).retry_after_s or 0.1))  # the attacker's pace


def checks(attacks: dict[str, Any]) -> dict[str, bool]:
    """The drill's checks of these attacks (each name true when it held; absent attacks are not checked)."""
    found: dict[str, bool] = {}
    burst = attacks.get("cancelled_logins")
    if burst is not None:
        found["cancelled_logins_rss"] = (
            "error" not in burst and burst["growth_mib"] <= burst["bound_mib"] + BURST_SLACK_MIB
        )
    storm = attacks.get("watch_storm")
    if storm is not None:
        found["watch_storm"] = (
            "error" not in storm
            and storm["opened"] >= storm["streams"] > 0
            and storm["modifies"].get("OK", 0) > 0
            and storm["updates"] > 0
        )
    sealed = attacks.get("sealed_churn")
    if sealed is not None:
        found["sealed_revocation"] = (
            "error" not in sealed
            and sealed["reading_at_revocation"]
            and sealed["probes_after_bound"] > 0
            and sealed["opened_after_bound"] == 0
            and sealed["churn"].get("OK", 0) > 0
        )
    return found


def burst_before_attacks(options: Any, cluster: Any) -> dict[str, Any] | None:
    """Attack (a), on its own before the others, so that what it costs the admin server is its own.

    Its keys are made here with the production hashing cost (64 MiB), whatever the cluster's: a
    stored hash keeps the cost it was made with, so each of these logins is a full-size hash,
    long enough (~0.3 s) to be cancelled in the middle.
    """
    if not options.cancelled_logins:
        return None
    hasher = SecretHashing().hasher()
    store = Store(cluster.workdir / "admin.sqlite")
    try:
        keys = []
        for i in range(BURST_KEYS):
            key_id, secret = issue_key(
                store,
                hasher,
                f"burst-{i}",
                groups=frozenset({"traders"}),
                roles=frozenset(),
                by="drill",
                now=time.time(),
            )
            keys.append({"key_id": key_id, "secret": secret})
    finally:
        store.close()
    return cancelled_login_burst(
        cluster.admin,
        keys,
        count=options.cancelled_logins,
        admin_pid=cluster.procs[0].popen.pid,
        bound_mib=Limits().login_hashes * tokens.HASH_MEMORY_KIB / 1024,
        metrics=f"{cluster.http}/metrics",
    )


def work(
    options: Any, cluster: Any, keys: dict[str, dict[str, str]]
) -> dict[str, Callable[[], dict[str, Any]]]:
    """Attack (b), to run with the drill's others (``FINITE`` names those it waits for)."""
    if not options.watch_streams:
        return {}
    storm = [keys["storm-0"], keys["storm-1"]]
    return {
        "watch_storm": functools.partial(watch_storm, cluster.admin, storm, streams=options.watch_streams)
    }


def after_attacks(options: Any, cluster: Any, keys: dict[str, dict[str, str]]) -> dict[str, Any]:
    """Attack (c), on its own after the others: a stand-in's multicast line makes the channel sealed
    for good (every key change then goes to every subscriber of the channel, watches included).
    """
    if not options.seal_churn_every:
        return {}
    try:
        found = abuse_sealed.sealed_churn(
            cluster.admin,
            feed_key=json.loads(Path(cluster.key_files["feed"]).read_text()),
            victim_key=keys["victim"],
            churn_key=keys["sealchurn"],
            workdir=cluster.workdir,
            channel=cluster.groups[0].channel,
            number=cluster.groups[0].channel_number,
            every_s=options.seal_churn_every,
        )
    except Exception as exc:  # noqa: BLE001 - an attack that breaks is reported, it never hangs the drill
        found = {"error": f"{type(exc).__name__}: {exc}"}
    return {"sealed_churn": found}
