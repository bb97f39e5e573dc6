"""The abuse drill's replay attack by one user with many keys, and the gaps an honest user needs meanwhile.

* :func:`replay_keys_flood`: ``keys`` CURVE keys of one user (each granted by a
  subscription of its own, the user's quota of keys), each connected to every
  replay service of the channel, asking for whole pages (1 MiB) as fast as
  they are answered and reading every reply -- the most one user can take;
* :func:`honest_gaps`: another user asking the active's replay service for a
  gap of 100 recent messages every 0.2 s, as a subscriber that lost packets
  does (one that gets no answer in 2 s asks again once, as the client
  library would ask the next service). Every gap must be answered ``OK``
  (:func:`checks`): the replay budgets are per user, so the flood's 32 keys
  share one budget and the service's cap holds back the heavy user, not the
  honest one; and its requests are answered before the heavy user's pages.

Both run on threads of the drill (``drill_abuse_attacks.in_thread``) until
``stop`` is set, and count everything they sent and got.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any, Final

import zmq

from feedha.drills.abuse_attacks import _percentiles
from feedha.proto.replay import ReplayRequest, ReplayStatus, ReplyStatus, decode_status, encode_request

KEYS: Final = 32  # the admin server's default quota of CURVE keys per user
IN_FLIGHT: Final = 2  # requests one flooding connection keeps asked
GAP: Final = 100  # messages in one honest gap
GAP_EVERY_S: Final = 0.2
GAP_WAIT_S: Final = 2.0  # an answer later than this is a gap not served

Service = tuple[str, str]  # a replay service's endpoint and its CURVE server key
Keys = tuple[bytes, bytes]


def jobs(
    admin: str,
    flooder: dict[str, str],
    honest: dict[str, str],
    channel: str,
    *,
    keys: int,
    stop: threading.Event,
) -> dict[str, Callable[[], dict[str, Any]]]:
    """The two jobs, ready to run: ``flooder`` gets ``keys`` keys granted first (subscriptions of its own).

    Args:
        admin: the admin server's address.
        flooder: the API key (``key_id``, ``secret``) of the user whose keys flood.
        honest: the API key of the user who asks for gaps.
        channel: the channel whose replay services are asked.
        keys: how many CURVE keys the flooding user gets.
        stop: ends both jobs.
    """
    flooding = [zmq.curve_keypair() for _ in range(keys)]
    services, _active = _grant(admin, flooder, [public.decode() for public, _secret in flooding], channel)
    asker = zmq.curve_keypair()
    _services, active = _grant(admin, honest, [asker[0].decode()], channel)
    return {
        "replay_keys_flood": partial(replay_keys_flood, services, flooding, stop=stop),
        "replay_honest_gaps": partial(honest_gaps, active, asker, stop=stop),
    }


def checks(attacks: dict[str, Any]) -> dict[str, bool]:
    """The drill's checks of these jobs (none when they did not run)."""
    gaps = attacks.get("replay_honest_gaps")
    if gaps is None:
        return {}
    return {"replay_gaps_served": gaps.get("asked", 0) > 0 and gaps.get("served") == gaps.get("asked")}


def _grant(
    admin: str, key: dict[str, str], curve_keys: list[str], channel: str
) -> tuple[list[Service], Service]:
    """Subscribe once with each of ``curve_keys``; the channel's replay services and the active's."""
    from feedha.admin_client import AdminClient, Route

    async def go() -> tuple[list[Service], Service]:
        async with AdminClient(admin, key["key_id"], key["secret"]) as client:
            routes: tuple[Route, ...] = ()
            for curve_key in curve_keys:
                routes = (await client.subscribe(["*"], curve_public_key=curve_key)).routes
        lines = [
            line
            for route in routes
            if route.channel_name == channel and not route.delayed
            for line in route.lines
        ]
        services = [(line.replay_endpoint, line.curve_server_key) for line in lines if line.replay_endpoint]
        active = next((line for line in lines if line.role == "active"), lines[0])
        return services, (active.replay_endpoint, active.curve_server_key)

    return asyncio.run(go())


def _dealer(ctx: zmq.Context[zmq.Socket[bytes]], service: Service, keys: Keys) -> zmq.Socket[bytes]:
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    sock.curve_publickey, sock.curve_secretkey = keys
    sock.curve_serverkey = service[1].encode()
    sock.connect(service[0])
    return sock


def _request(request_id: int, first: int, last: int) -> bytes:
    return encode_request(ReplayRequest(channel=1, request_id=request_id, first_seq=first, last_seq=last))


def replay_keys_flood(services: list[Service], keys: list[Keys], *, stop: threading.Event) -> dict[str, Any]:
    """Every key on every service asking for whole pages as fast as they come, reading every reply."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    dealers = [_dealer(ctx, service, pair) for pair in keys for service in services]
    poller = zmq.Poller()
    statuses: dict[str, int] = {}
    sent = ok_bytes = 0
    started = time.monotonic()
    try:
        for sock in dealers:
            poller.register(sock, zmq.POLLIN)
            for _ in range(IN_FLIGHT):
                sent += 1
                sock.send_multipart([b"", _request(sent, 1, 10**9)], zmq.NOBLOCK)
        while not stop.is_set():
            for sock, _event in poller.poll(100):
                reply = sock.recv_multipart()
                status = decode_status(reply[1]).status if len(reply) > 1 else None
                name = "unreadable" if status is None else status.name
                statuses[name] = statuses.get(name, 0) + 1
                if status is ReplayStatus.OK:
                    ok_bytes += sum(map(len, reply[2:]))
                sent += 1
                try:
                    sock.send_multipart([b"", _request(sent, 1, 10**9)], zmq.NOBLOCK)
                except zmq.Again:
                    pass
    finally:
        for sock in dealers:
            sock.close(linger=0)
    seconds = time.monotonic() - started
    return {
        "keys": len(keys),
        "connections": len(dealers),
        "requests_sent": sent,
        "replies": statuses,
        "ok_mib": round(ok_bytes / 2**20, 1),
        "ok_mib_per_s": round(ok_bytes / 2**20 / max(seconds, 1e-9), 2),
    }


def honest_gaps(service: Service, keys: Keys, *, stop: threading.Event) -> dict[str, Any]:
    """A gap of :data:`GAP` recent messages asked of ``service`` every :data:`GAP_EVERY_S` until stopped."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    sock = _dealer(ctx, service, keys)
    outcomes: dict[str, int] = {}
    took: list[float] = []
    asked = retried = 0
    refusals: list[str] = []  # the first few answers other than OK, for the report
    try:
        oldest, newest = _bounds(sock)  # what the journal holds: the gaps are asked inside it
        while not stop.is_set():
            asked += 1
            first = max(oldest, newest - 10 * GAP)
            began = time.monotonic()
            for attempt in range(2):  # a request, and once more after no answer in time
                retried += attempt
                status = _ask(sock, asked, first)
                if status is not None:
                    break
                sock.close(linger=0)  # a reply after its time is not an answer: a fresh connection
                sock = _dealer(ctx, service, keys)
            else:
                outcomes["timed_out"] = outcomes.get("timed_out", 0) + 1
                continue
            outcomes[status.status.name] = outcomes.get(status.status.name, 0) + 1
            newest = max(newest, status.newest_seq)
            if status.status is ReplayStatus.OK:
                took.append(time.monotonic() - began)
            elif len(refusals) < 5:
                refusals.append(f"{status.status.name} {first}..{first + GAP - 1}: {status.message}")
            stop.wait(GAP_EVERY_S)
    finally:
        sock.close(linger=0)
    served = outcomes.get("OK", 0)
    return {
        "asked": asked,
        "served": served,
        "retried": retried,
        "outcomes": outcomes,
        "refusals": refusals,
        **_percentiles(took),
    }


def _ask(sock: zmq.Socket[bytes], request_id: int, first: int) -> ReplyStatus | None:
    """The answer to a gap of :data:`GAP` from ``first`` (``None``: none within :data:`GAP_WAIT_S`)."""
    sock.send_multipart([b"", _request(request_id, first, first + GAP - 1)])
    deadline = time.monotonic() + GAP_WAIT_S
    while (left := deadline - time.monotonic()) > 0 and sock.poll(max(1, round(left * 1000))):
        status = decode_status(sock.recv_multipart()[1])
        if status.request_id == request_id:  # not a late answer to an earlier request
            return status
    return None


def _bounds(sock: zmq.Socket[bytes]) -> tuple[int, int]:
    """The oldest and newest msg_seq the service's journal holds (asked with a request for msg_seq 1)."""
    for _ in range(10):  # its handshake may take a moment on a busy machine
        sock.send_multipart([b"", _request(0, 1, 1)])
        if sock.poll(round(GAP_WAIT_S * 1000)):
            status = decode_status(sock.recv_multipart()[1])
            if status.newest_seq > GAP:
                return max(1, status.oldest_seq), status.newest_seq
        time.sleep(0.5)  # pacing the asking, not a synchronization
    return 1, 10 * GAP
