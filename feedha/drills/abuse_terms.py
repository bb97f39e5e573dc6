"""The abuse drill's forger of terms, and the honest client-library subscriber it tries to fence.

A forger who holds a channel's packet key (sealed multicast lines: every
entitled subscriber does) or can otherwise publish on the lines puts its own
packets beside the adapters' on every line a subscriber reads.
:class:`ForgedLines` stands in for those lines: per adapter line, a relay (a
SUB of the line with the forger's granted key, a PUB on a loopback port of
its own) passes every genuine packet on, and every ``every_s`` the forger
puts a copy of the newest genuine data packet with a high term on every relay
at once -- 2^32-1, the genuine term + 1 (what a promotion looks like), + 1000
in turn: content the lines do carry, on all lines together, again and again.

The honest party is a subscriber of the client library in a process of its
own (``python -m feedha.drills.abuse_terms --key-file F --channel C --line E
...``): it subscribes with its own CURVE key, joins the relays from the term
its routes carry (``ChannelSpec(term=...)``), fills gaps from the replay
services, and prints ``ready``, ``progress`` every second and a ``summary``
on SIGTERM: the ``msg_seq`` delivered and missing, the arbiter's ``lost``,
``line_holes``, ``stale``, the term it ends on and every term change. The
drill's checks (:func:`checks`): nothing missing or lost, no line hole, and
the subscriber ends on its routes' term (no fence).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

import zmq

from feedha.drills.abuse_client import SeqSet
from feedha.procs import JsonProcess
from feedha.proto import wire

if TYPE_CHECKING:
    from feedha.admin_client import Route

FORGED_TERMS: Final = (2**32 - 1, 1, 1000)  # 2^32-1, then the genuine term + 1, + 1000
EVERY_S: Final = 0.2
RCVHWM: Final = 1_000_000  # the relay must not be where packets are lost
START_S: Final = 90.0
DRAIN_S: Final = 30.0

Line = tuple[str, str]  # an adapter line's endpoint and its CURVE server key ("": plain)


def forged(packet: bytes, term: int) -> bytes:
    """``packet`` with ``term`` and adapter 9 in its header (the blocks as they were)."""
    fields = list(wire.HEADER.unpack_from(packet))
    fields[4], fields[5] = 9, term  # adapter, term
    return wire.HEADER.pack(*fields) + packet[wire.HEADER_SIZE :]


class ForgedLines:
    """Relays of a channel's lines with forged packets of high terms on all of them (module docstring).

    Args:
        lines: the adapters' lines.
        topic: the channel's name (the ZeroMQ topic).
        keys: the forger's granted CURVE key pair (``None``: plain lines).
        every_s: how often a burst of forgeries goes out.
    """

    def __init__(
        self, lines: Sequence[Line], topic: str, keys: tuple[bytes, bytes] | None, *, every_s: float = EVERY_S
    ) -> None:
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        self._topic, self._every_s = topic.encode(), every_s
        self._subs: list[zmq.Socket[bytes]] = []
        self._pubs: list[zmq.Socket[bytes]] = []
        self.endpoints: list[str] = []
        for endpoint, server_key in lines:
            sub = ctx.socket(zmq.SUB)
            sub.linger, sub.rcvhwm = 0, RCVHWM
            if server_key and keys is not None:
                sub.curve_publickey, sub.curve_secretkey = keys
                sub.curve_serverkey = server_key.encode()
            sub.subscribe(self._topic)
            sub.connect(endpoint)
            pub = ctx.socket(zmq.PUB)
            pub.linger, pub.sndhwm = 0, RCVHWM
            self.endpoints.append(f"tcp://127.0.0.1:{pub.bind_to_random_port('tcp://127.0.0.1')}")
            self._subs.append(sub)
            self._pubs.append(pub)
        self.relayed = self.forged = self.bursts = 0
        self.terms: dict[int, int] = {}  # forged term -> packets
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="forger", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> dict[str, Any]:
        """Stop, close every socket, and say what was sent."""
        self._stop.set()
        self._thread.join(timeout=10)
        for sock in self._subs + self._pubs:
            sock.close(linger=0)
        return {
            "lines": len(self._pubs),
            "relayed": self.relayed,
            "forged": self.forged,
            "bursts": self.bursts,
            "terms": {str(term): count for term, count in self.terms.items()},
        }

    def _run(self) -> None:
        poller = zmq.Poller()
        for sub in self._subs:
            poller.register(sub, zmq.POLLIN)
        newest: bytes | None = None
        next_burst = time.monotonic() + self._every_s
        while not self._stop.is_set():
            for sock, _event in poller.poll(20):
                pub = self._pubs[self._subs.index(sock)]
                for _ in range(1000):
                    try:
                        frames = sock.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    pub.send_multipart(frames)
                    self.relayed += 1
                    if len(frames) == 2 and len(frames[1]) > wire.HEADER_SIZE:
                        newest = frames[1]
            if newest is not None and time.monotonic() >= next_burst:
                next_burst += self._every_s
                self._burst(newest)

    def _burst(self, genuine: bytes) -> None:
        # The same forged packet on every line at once: the strongest vote a forger can cast.
        choice = FORGED_TERMS[self.bursts % len(FORGED_TERMS)]
        term = choice if choice > 2**31 else min(2**32 - 1, wire.decode_header(genuine).term + choice)
        packet = forged(genuine, term)
        for pub in self._pubs:
            pub.send_multipart([self._topic, packet])
        self.bursts += 1
        self.forged += len(self._pubs)
        self.terms[term] = self.terms.get(term, 0) + len(self._pubs)


class Attack:
    """The forger and the honest client-library subscriber, from the drill's start to its end.

    Args:
        admin: the admin server's address.
        forger: the API key of the user whose CURVE key reads the lines for the forger.
        honest_key_file: the honest user's key file.
        channel: the channel attacked.
        log: where the honest subscriber's log goes.
    """

    def __init__(self, admin: str, forger: dict[str, str], honest_key_file: str, channel: str, log: IO[str]):
        keys = zmq.curve_keypair()
        lines = _lines(admin, forger, keys[0].decode(), channel)
        self.lines = ForgedLines(lines, channel, keys)
        argv = ["--key-file", honest_key_file, "--channel", channel]
        argv += [arg for endpoint in self.lines.endpoints for arg in ("--line", endpoint)]
        self.lines.start()  # the relays carry the lines (and the forgeries) from now on
        self.client = JsonProcess.python("forged-terms-client", "feedha.drills.abuse_terms", argv, log=log)
        try:
            self.client.wait_event("ready", START_S)
        except BaseException:
            self.client.kill()
            self.lines.stop()
            raise

    def finish(self, last: int) -> dict[str, Any]:
        """Let the honest subscriber reach ``last`` (the adapters' last msg_seq), stop both, report."""
        deadline = time.monotonic() + DRAIN_S
        while time.monotonic() < deadline:
            progress = self.client.last("progress") or {}
            if int(progress.get("last_msg_seq", 0)) >= last:
                break
            time.sleep(0.2)
        forger = self.lines.stop()
        self.client.stop(timeout=10)
        summary = self.client.wait_event("summary", 10)
        summary["missing"] = int(summary["missing"]) + max(0, last - int(summary["last_msg_seq"]))
        return {"forged_terms": forger, "forged_terms_client": summary}


def checks(attacks: dict[str, Any]) -> dict[str, bool]:
    """The drill's checks of the forgery (none when it did not run)."""
    client = attacks.get("forged_terms_client")
    if client is None:
        return {}
    forger = attacks.get("forged_terms", {})
    return {
        "forged_terms_lost": client["missing"] == 0 and client["lost"] == 0 and client["line_holes"] == 0,
        "forged_terms_fence": forger.get("forged", 0) > 0 and client["highest_term"] == client["route_term"],
    }


def _lines(admin: str, key: dict[str, str], curve_key: str, channel: str) -> list[Line]:
    """Subscribe with ``curve_key`` (granted then); the channel's real-time lines."""
    from feedha.admin_client import AdminClient

    async def go() -> list[Line]:
        async with AdminClient(admin, key["key_id"], key["secret"]) as client:
            subscription = await client.subscribe(["*"], curve_public_key=curve_key)
        return [
            (line.line_endpoint, line.curve_server_key)
            for route in subscription.routes
            if route.channel_name == channel and not route.delayed and not route.conflated
            for line in route.lines
        ]

    return asyncio.run(go())


# ---- the honest subscriber's process -------------------------------------------------------------


def _emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


async def _subscribe(key: dict[str, str], channel: str, public: str) -> Route:
    # The admin server's route to the channel's real-time lines for the key's user.
    from feedha.admin_client import AdminClient

    async with AdminClient(key["admin"], key["key_id"], key["secret"]) as client:
        subscription = await client.subscribe(["*"], curve_public_key=public)
    return next(r for r in subscription.routes if r.channel_name == channel and not r.delayed)


def main(argv: Sequence[str] | None = None) -> int:
    """The honest client-library subscriber on the forger's lines (see the module docstring)."""
    from feedha.client import ChannelSpec, Delivery, ReplayClient, Subscriber, TermChanged
    from feedha.client._subscriber_config import route_term

    parser = argparse.ArgumentParser(prog="python -m feedha.drills.abuse_terms", description=__doc__)
    parser.add_argument("--key-file", required=True, help="the API key file (feedha up's users/NAME.json)")
    parser.add_argument("--channel", required=True, help="the channel to subscribe to")
    parser.add_argument("--line", action="append", required=True, help="a line to join (the relays)")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    public, secret = (k.decode() for k in zmq.curve_keypair())
    route = asyncio.run(_subscribe(json.loads(Path(args.key_file).read_text()), args.channel, public))
    services = [line.replay_endpoint for line in route.lines if line.replay_endpoint]
    replay = ReplayClient(
        {route.channel_number: services},
        server_keys={line.replay_endpoint: line.curve_server_key for line in route.lines},
        curve_keypair=(public, secret),
    )
    term = route_term(route)
    spec = ChannelSpec(args.channel, route.channel_number, tuple(args.line), term=term)
    seen, changes = SeqSet(), []
    with Subscriber([spec], on_retransmission_needed=replay) as subscriber:
        ready, next_progress = False, time.monotonic()
        while not stop.is_set():
            for event in subscriber.poll(0.1):
                if isinstance(event, Delivery):
                    seen.add_range(event.msg_seq, 1)
                elif isinstance(event, TermChanged):
                    changes.append([event.old_term, event.new_term, event.line])
            if not ready and seen.highest:
                ready = True
                _emit("ready", route_term=term)
            if time.monotonic() >= next_progress:
                next_progress += 1.0
                _emit("progress", last_msg_seq=seen.highest)
        stats = subscriber.stats()[args.channel]
    replay.close()
    _emit(
        "summary",
        route_term=term,
        highest_term=stats.highest_term,
        term_changes=changes[:50],
        term_changes_count=len(changes),
        first_msg_seq=seen.base,
        last_msg_seq=seen.highest,
        missing=seen.missing(seen.highest),
        lost=stats.lost,
        line_holes=stats.line_holes,
        stale=stats.stale,
        gaps=stats.gaps,
        retransmission_requests=stats.retransmission_requests,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
