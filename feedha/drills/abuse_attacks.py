"""The abuse drill's attacks: what one user with a valid key (or a crowd without one) throws at a cluster.

Each attack runs on a thread of its own (the gRPC ones each with an asyncio
loop of their own) until its work is done or the drill's ``stop`` is set, and
returns a plain dict of what happened: how many calls, by status code and by
refusal reason, and latencies. None of them trusts the server to count.

* :func:`subscription_flood`: ``count`` Subscribe calls from one API key, the
  CURVE keys taken in turn from a pool (so the quota of keys is hit too);
* :func:`churn`: a key connected to every line while its subscription is made
  and cancelled ``cycles`` times (each cancel revokes it on the adapters);
* :func:`login_flood`: ``workers`` concurrent logins with wrong secrets, half
  for a real key id and half for made-up ones, until stopped;
* :func:`idle_connections`: ``count`` TCP connections to a port that never
  send a byte, opened again as the server closes them;
* :func:`replay_flood`: ``count`` connections to a replay service with one
  granted key, asking for large ranges and never reading the answers;
* :class:`Prober` and :class:`HonestLogins`: what an honest user sees
  meanwhile (health probes, logins timed).
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any, Final

import grpc
import zmq

from feedha.admin_client.errors import status_details
from feedha.proto import admin_pb2, admin_pb2_grpc
from feedha.proto.replay import ReplayRequest, encode_request

CALL_TIMEOUT_S: Final = 10.0


def _reason(exc: grpc.aio.AioRpcError) -> str:
    found = status_details(exc)
    return f"{exc.code().name}:{found.reason or '-'}"


def _percentiles(samples: Sequence[float]) -> dict[str, float]:
    if not samples:
        return {"p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)

    return {"p50_ms": pick(0.5), "p99_ms": pick(0.99), "max_ms": round(ordered[-1] * 1000, 1)}


async def _login(channel: grpc.aio.Channel, key: dict[str, str]) -> tuple[tuple[str, str], ...]:
    stub = admin_pb2_grpc.AdminAuthStub(channel)  # type: ignore[no-untyped-call]
    reply = await stub.Login(
        admin_pb2.LoginRequest(key_id=key["key_id"], secret=key["secret"]), timeout=CALL_TIMEOUT_S
    )
    return (("authorization", f"Bearer {reply.token}"),)


async def _login_patiently(channel: grpc.aio.Channel, key: dict[str, str]) -> tuple[tuple[str, str], ...]:
    # An attacker's own login may be throttled for a moment (its address is busy failing): it waits.
    for _ in range(20):
        try:
            return await _login(channel, key)
        except grpc.aio.AioRpcError as exc:
            if exc.code() is not grpc.StatusCode.RESOURCE_EXHAUSTED:
                raise
            await asyncio.sleep(0.5)
    return await _login(channel, key)


def subscription_flood(
    admin: str, key: dict[str, str], *, count: int, keys: int, workers: int = 8, stop: threading.Event
) -> dict[str, Any]:
    """``count`` Subscribe calls from one API key, ``workers`` at once, ``keys`` CURVE keys in turn."""

    async def go() -> dict[str, Any]:
        pool = [zmq.curve_keypair()[0].decode() for _ in range(keys)]
        outcomes: dict[str, int] = {}
        took: list[float] = []
        numbers = iter(range(count))
        async with grpc.aio.insecure_channel(admin) as channel:
            md = await _login_patiently(channel, key)
            broker = admin_pb2_grpc.StreamBrokerStub(channel)  # type: ignore[no-untyped-call]

            async def worker() -> None:
                for i in numbers:
                    if stop.is_set():
                        return
                    request = admin_pb2.SubscribeRequest(symbols=["*"], curve_public_key=pool[i % keys])
                    began = time.monotonic()
                    try:
                        await broker.Subscribe(request, metadata=md, timeout=CALL_TIMEOUT_S)
                        outcome = "OK"
                    except grpc.aio.AioRpcError as exc:
                        outcome = _reason(exc)
                    took.append(time.monotonic() - began)
                    outcomes[outcome] = outcomes.get(outcome, 0) + 1

            started = time.monotonic()
            await asyncio.gather(*(worker() for _ in range(workers)))
            elapsed = time.monotonic() - started
        return {
            "attempted": sum(outcomes.values()),
            "outcomes": outcomes,
            "seconds": round(elapsed, 2),
            **_percentiles(took),
        }

    return asyncio.run(go())


def churn(
    admin: str, key: dict[str, str], lines: Sequence[tuple[str, str]], *, cycles: int, stop: threading.Event
) -> dict[str, Any]:
    """A key on every line while its subscription is made and cancelled ``cycles`` times."""
    public, secret = zmq.curve_keypair()
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    subs = []
    for endpoint, server_key in lines:
        sock = ctx.socket(zmq.SUB)
        sock.linger = 0
        sock.curve_publickey, sock.curve_secretkey, sock.curve_serverkey = public, secret, server_key.encode()
        sock.setsockopt(zmq.RECONNECT_IVL, 50)
        sock.subscribe(b"")
        sock.connect(endpoint)
        subs.append(sock)
    received = 0

    def drain() -> None:
        nonlocal received
        for sock in subs:
            while True:
                try:
                    sock.recv_multipart(zmq.NOBLOCK)
                    received += 1
                except zmq.Again:
                    break

    async def go() -> dict[str, Any]:
        outcomes: dict[str, int] = {}
        async with grpc.aio.insecure_channel(admin) as channel:
            md = await _login_patiently(channel, key)
            broker = admin_pb2_grpc.StreamBrokerStub(channel)  # type: ignore[no-untyped-call]
            for _ in range(cycles):
                if stop.is_set():
                    break
                try:
                    reply = await broker.Subscribe(
                        admin_pb2.SubscribeRequest(symbols=["*"], curve_public_key=public.decode()),
                        metadata=md,
                        timeout=CALL_TIMEOUT_S,
                    )
                    await asyncio.sleep(0.05)  # connected (or reconnecting) while it is granted
                    drain()
                    await broker.Cancel(
                        admin_pb2.CancelRequest(subscription_id=reply.subscription_id),
                        metadata=md,
                        timeout=CALL_TIMEOUT_S,
                    )
                    outcomes["OK"] = outcomes.get("OK", 0) + 1
                except grpc.aio.AioRpcError as exc:
                    outcomes[_reason(exc)] = outcomes.get(_reason(exc), 0) + 1
                await asyncio.sleep(0.02)
                drain()
        return {"cycles": sum(outcomes.values()), "outcomes": outcomes, "packets_while_granted": received}

    try:
        return asyncio.run(go())
    finally:
        for sock in subs:
            sock.close(linger=0)


def login_flood(admin: str, key_id: str, *, workers: int, stop: threading.Event) -> dict[str, Any]:
    """``workers`` concurrent wrong logins (half for ``key_id``, half made-up ids) until stopped."""

    async def go() -> dict[str, Any]:
        outcomes: dict[str, int] = {}
        async with grpc.aio.insecure_channel(admin) as channel:
            auth = admin_pb2_grpc.AdminAuthStub(channel)  # type: ignore[no-untyped-call]

            async def worker(index: int) -> None:
                while not stop.is_set():
                    target = key_id if index % 2 == 0 else f"fk_{secrets.token_hex(8)}"
                    request = admin_pb2.LoginRequest(key_id=target, secret=secrets.token_urlsafe(32))
                    try:
                        await auth.Login(request, timeout=CALL_TIMEOUT_S)
                        outcome = "OK"
                    except grpc.aio.AioRpcError as exc:
                        outcome = _reason(exc)
                    outcomes[outcome] = outcomes.get(outcome, 0) + 1

            await asyncio.gather(*(worker(i) for i in range(workers)))
        return {"workers": workers, "attempts": sum(outcomes.values()), "outcomes": outcomes}

    return asyncio.run(go())


class HonestLogins:
    """An honest user logging in every ``every_s`` seconds: latencies and failures, readable any time."""

    def __init__(self, admin: str, key: dict[str, str], *, every_s: float) -> None:
        self.admin, self.key, self.every_s = admin, key, every_s
        self.took: list[float] = []
        self.failed: dict[str, int] = {}
        self.started = time.time()
        self.slow: list[tuple[float, float]] = []  # (wall-clock second it began, ms) of logins over 0.5 s

    def report(self) -> dict[str, Any]:
        return {
            "logins": len(self.took),
            "failed": dict(self.failed),
            **_percentiles(self.took),
            "slow": [[round(at, 1), round(ms)] for at, ms in self.slow[:50]],
        }

    def run(self, stop: threading.Event) -> dict[str, Any]:
        async def go() -> None:
            async with grpc.aio.insecure_channel(self.admin) as channel:
                while not stop.is_set():
                    began, wall = time.monotonic(), time.time()
                    try:
                        await _login(channel, self.key)
                        self.took.append(time.monotonic() - began)
                        if self.took[-1] > 0.5:  # when, so that a slow login can be put beside an attack
                            self.slow.append((wall, self.took[-1] * 1000))
                    except grpc.aio.AioRpcError as exc:
                        self.failed[_reason(exc)] = self.failed.get(_reason(exc), 0) + 1
                    await asyncio.sleep(self.every_s)

        asyncio.run(go())
        return self.report()


def idle_connections(host: str, port: int, *, count: int, stop: threading.Event) -> dict[str, Any]:
    """``count`` connections that never send a byte, opened again whenever the server closes one.

    The server's answer to a connection that sends nothing is a ``408`` or a ``503`` and a close
    (or a close alone, when it gives the slot to a newer connection): any byte or the end of the
    stream means the server is done with it, so it is closed and another takes its place.
    """
    held: list[socket.socket] = []
    opened = closed_by_server = 0
    while not stop.is_set():
        alive = []
        for sock in held:
            try:
                sock.recv(4096, socket.MSG_DONTWAIT)  # an answer or the end: the server let go
            except BlockingIOError:
                alive.append(sock)
                continue
            except OSError:
                pass
            closed_by_server += 1
            sock.close()
        held = alive
        while len(held) < count and not stop.is_set():
            try:
                held.append(socket.create_connection((host, port), timeout=1.0))
                opened += 1
            except OSError:
                break
        stop.wait(0.1)
    for sock in held:
        sock.close()
    return {"port": port, "held": count, "opened": opened, "closed_by_server": closed_by_server}


class Prober:
    """Probes ``/healthz`` on each URL every ``every_s`` seconds until stopped; counts answers and time."""

    def __init__(self, urls: Sequence[str], *, every_s: float = 0.2, timeout_s: float = 2.0) -> None:
        self.urls = list(urls)
        self.every_s, self.timeout_s = every_s, timeout_s
        self.answered = self.failed = 0
        self.took: list[float] = []
        self.failures: list[str] = []

    def run(self, stop: threading.Event) -> dict[str, Any]:
        while not stop.is_set():
            for url in self.urls:
                began = time.monotonic()
                try:
                    with urllib.request.urlopen(f"{url}/healthz", timeout=self.timeout_s) as reply:
                        reply.read()
                    self.answered += 1
                    self.took.append(time.monotonic() - began)
                except Exception as exc:  # noqa: BLE001 - any failure of a probe is a failed probe
                    self.failed += 1
                    if len(self.failures) < 10:
                        self.failures.append(f"{url}: {exc}")
            stop.wait(self.every_s)
        return self.report()

    def report(self) -> dict[str, Any]:
        return {
            "endpoints": len(self.urls),
            "probes": self.answered + self.failed,
            "answered": self.answered,
            "failed": self.failed,
            "failures": self.failures,
            **_percentiles(self.took),
        }


def replay_flood(
    endpoint: str, server_key: str, keys: tuple[bytes, bytes], *, count: int, stop: threading.Event
) -> dict[str, Any]:
    """``count`` CURVE connections with one key asking for large ranges and never reading the answers."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    dealers = []
    for _ in range(count):
        sock = ctx.socket(zmq.DEALER)
        sock.linger = 0
        sock.rcvhwm = 1  # it never reads: what is queued stays in the adapter's send queue
        sock.sndhwm = 10
        sock.curve_publickey, sock.curve_secretkey = keys
        sock.curve_serverkey = server_key.encode()
        sock.connect(endpoint)
        dealers.append(sock)
    sent = 0
    request_id = 0
    while not stop.is_set():
        for sock in dealers:
            request_id += 1
            request = encode_request(
                ReplayRequest(channel=1, request_id=request_id, first_seq=1, last_seq=10**9)
            )
            try:
                sock.send_multipart([b"", request], zmq.NOBLOCK)
                sent += 1
            except zmq.Again:
                pass
        stop.wait(0.1)
    for sock in dealers:
        sock.close(linger=0)
    return {"connections": count, "requests_sent": sent}


def in_thread(name: str, work: Callable[[], dict[str, Any]], results: dict[str, Any]) -> threading.Thread:
    """Run ``work`` on a daemon thread; its result (or its error) lands in ``results[name]``."""

    def run() -> None:
        try:
            results[name] = work()
        except Exception as exc:  # an attack that breaks is reported, it never hangs the drill
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}

    thread = threading.Thread(target=run, name=f"abuse-{name}", daemon=True)
    thread.start()
    return thread
