"""Replay budgets per user over real CURVE sockets: 32 keys of one user cannot starve another user.

A replay service as the adapter runs it (a journal on disk, its own thread, a
CURVE ROUTER checked by ZAP against the access table, production budgets)
is asked for 1 MiB pages as fast as they come by 32 keys that the admin
server granted to one user, every key reading its replies. Meanwhile another
user asks for a small gap every 50 ms. Each of the honest user's gaps is
answered, and the 32 keys together get no more than one user's budget.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import zmq

from feedha.adapter.access import REPLAY
from feedha.adapter.curve_keys import CurveKeys
from feedha.adapter.journal import JournalConfig, JournalReader, JournalWriter
from feedha.adapter.replay import ReplayLimits, ReplayService
from feedha.adapter.replay_limits import BURST_S, PEER_BYTES_PER_S
from feedha.adapter.replay_server import ReplayServer
from feedha.adapter.zap import DataPlaneGuard
from feedha.ports import free_ports
from feedha.proto.replay import ReplayRequest, ReplayStatus, decode_status, encode_request
from tests.access_owner import AccessOwner

FAR = 2**62
CHANNEL = 3
RECORDS = 20_000  # 200 bytes each: ~4 MiB of journal
ATTACK_S = 3.0
HONEST_EVERY_S = 0.05


def _dealer(ctx: zmq.Context[zmq.Socket[bytes]], keys: tuple[bytes, bytes], server: bytes, endpoint: str):  # type: ignore[no-untyped-def]
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    sock.curve_publickey, sock.curve_secretkey = keys
    sock.curve_serverkey = server
    sock.connect(endpoint)
    return sock


def _request(request_id: int, first: int, last: int) -> bytes:
    return encode_request(
        ReplayRequest(channel=CHANNEL, request_id=request_id, first_seq=first, last_seq=last)
    )


class Flood:
    """32 keys asking for whole pages as fast as they are answered, each reading its replies."""

    def __init__(self, dealers: list[zmq.Socket[bytes]]) -> None:
        self.dealers = dealers
        self.ok_bytes = self.ok = self.busy = self.sent = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        poller = zmq.Poller()
        for dealer in self.dealers:
            poller.register(dealer, zmq.POLLIN)
            for _ in range(4):  # a few requests in flight per key
                self._ask(dealer)
        while not self.stop.is_set():
            for sock, _event in poller.poll(50):
                reply = sock.recv_multipart()
                status = decode_status(reply[1])
                if status.status is ReplayStatus.OK:
                    self.ok += 1
                    self.ok_bytes += sum(map(len, reply[2:]))
                else:
                    self.busy += status.status is ReplayStatus.BUSY
                self._ask(sock)

    def _ask(self, dealer: zmq.Socket[bytes]) -> None:
        self.sent += 1
        dealer.send_multipart([b"", _request(self.sent, 1, RECORDS)])


def test_thirty_two_keys_of_one_user_get_one_budget_and_another_user_s_gaps_are_answered(
    tmp_path: Path,
) -> None:
    with JournalWriter(tmp_path, JournalConfig()) as writer:
        for seq in range(1, RECORDS + 1):
            writer.append(seq, 1_700_000_000_000_000_000 + seq, 1, seq, bytes(200))
        writer.flush()
        service = ReplayService(
            JournalReader(tmp_path),
            channel=CHANNEL,
            adapter=1,
            max_packet_bytes=1400,
            max_bytes=1 << 20,
            bounds=lambda: (1, RECORDS),
        )
        server_keys = CurveKeys(*zmq.curve_keypair())
        guard = DataPlaneGuard(adapter=1, keys=server_keys, sync_keys=None)
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        guard.start(ctx)
        endpoint = f"tcp://127.0.0.1:{free_ports(1)[0]}"
        replay = ReplayServer(
            endpoint,
            service,
            lambda: 1,
            ReplayLimits(),  # the production budgets
            secure=guard.secure,
            delayed_only=guard.is_delayed_only,
            peers=guard.books[REPLAY],
            owner_of=guard.owner_of,
        )
        abuser = [zmq.curve_keypair() for _ in range(32)]
        honest = zmq.curve_keypair()
        grants = [(public.decode(), FAR, False, False, "abuser") for public, _secret in abuser]
        AccessOwner(guard).change([*grants, (honest[0].decode(), FAR, False, False, "honest")])
        replay.start()
        flood = Flood([_dealer(ctx, keys, server_keys.public, endpoint) for keys in abuser])
        asker = _dealer(ctx, honest, server_keys.public, endpoint)
        statuses: list[ReplayStatus | None] = []
        began, before = time.monotonic(), 0
        try:
            assert _gap(asker, 0, wait_s=10.0) is ReplayStatus.OK  # connected before the flood
            flood.thread.start()
            _wait_until(lambda: flood.ok + flood.busy >= 32, "the flood's keys connected and answered")
            began, before = time.monotonic(), flood.ok_bytes
            while time.monotonic() - began < ATTACK_S:
                statuses.append(_gap(asker, len(statuses) + 1))
                time.sleep(HONEST_EVERY_S)  # the honest user's pace, not a synchronization
        finally:
            flood.stop.set()
            flood.thread.join(timeout=10)
            elapsed = time.monotonic() - began
            # The server goes first, its peers after: libzmq 4.3 aborts the process when
            # a connection drops while its engine is halfway through sending a multipart
            # message on a pipe that is already closing, which closing both ends at
            # once in one process does (docs/robustness.md, "Known limits").
            replay.stop()
            guard.stop()
            for sock in [*flood.dealers, asker]:
                sock.close(linger=0)
    assert statuses and all(s is ReplayStatus.OK for s in statuses), statuses
    assert flood.busy > 100 and flood.ok > 0, vars(flood)  # the flood was real, and refused
    # One user's budget, whatever its 32 keys do: the rate, the burst, one reply's overdraft.
    allowed = PEER_BYTES_PER_S * (elapsed + BURST_S) + (1 << 20)
    assert flood.ok_bytes - before <= allowed, (flood.ok_bytes - before, allowed)


def _gap(asker: zmq.Socket[bytes], request_id: int, *, wait_s: float = 5.0) -> ReplayStatus | None:
    # A gap of 50 messages; None when no reply came in time.
    asker.send_multipart([b"", _request(request_id, 5000 + request_id, 5049 + request_id)])
    if not asker.poll(round(wait_s * 1000)):
        return None
    return decode_status(asker.recv_multipart()[1]).status


def _wait_until(condition: Callable[[], bool], what: str, *, within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)
