"""A feed source and one adapter group as real processes, for integration tests.

Shared by the adapter-group, journal/replay and other cluster tests: endpoints
are planned up front (feedha.cluster), every process is reaped on close, and
waits are polls with deadlines on the adapters' control sockets.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import zmq

from feedha.cluster import GroupPlan, control, plan_group, start_adapter
from feedha.ports import free_ports
from feedha.procs import JsonProcess
from feedha.proto import wire

FAST = ["--heartbeat-timeout", "0.4", "--desync-window", "30", "--allow-fault-injection"]


class Group:
    """A plain test source and one adapter group, torn down by :meth:`close`.

    Args:
        channel: channel name (the line topic).
        channel_number: channel number in packet headers.
        size: adapters in the group, numbered 1..size.
        rate: source messages/s.
        seconds: how long the source runs.
        subscribers: subscriptions the source waits for (default: ``size``).
        symbols: symbols the source trades.
        journal_root: give every adapter a journal and a replay service under it.
        delayed: every adapter serves a delayed line too (needs ``journal_root``).
        conflate_interval: every adapter serves a conflated line with this interval (0: none).
    """

    def __init__(
        self,
        *,
        channel: str,
        channel_number: int,
        size: int,
        rate: float,
        seconds: float,
        subscribers: int | None = None,
        symbols: int = 50,
        journal_root: Path | None = None,
        delayed: bool = False,
        conflate_interval: float = 0.0,
    ) -> None:
        self.source_endpoint = f"tcp://127.0.0.1:{free_ports(1)[0]}"
        self.plan: GroupPlan = plan_group(
            channel=channel,
            channel_number=channel_number,
            source_endpoint=self.source_endpoint,
            source_stream="A-Z",
            source_stream_number=1,
            size=size,
            journal_root=journal_root,
            delayed=delayed,
            conflate_interval=conflate_interval,
        )
        self.rate, self.seconds, self.symbols = rate, seconds, symbols
        self.subscribers = size if subscribers is None else subscribers
        self.adapters: dict[int, JsonProcess] = {}
        self.retired: list[JsonProcess] = []
        self.source: JsonProcess | None = None

    def start_adapter(self, number: int, *, active: bool = False, extra: Sequence[str] = ()) -> JsonProcess:
        old = self.adapters.pop(number, None)
        if old is not None:
            self.retired.append(old)
        proc = start_adapter(self.plan, number, active=active, extra=[*FAST, *extra])
        self.adapters[number] = proc
        proc.wait_event("ready", 20)
        return proc

    def start_source(self, *extra: str) -> JsonProcess:
        args = [
            *("--endpoint", f"A-Z={self.source_endpoint}", "--streams", "A-Z"),
            *("--rate", f"{self.rate:g}", "--seconds", f"{self.seconds:g}", "--symbols", str(self.symbols)),
            *("--wait-subscribers", str(self.subscribers)),
            *extra,
        ]
        self.source = JsonProcess.python("source", "feedha.plain_source", args)
        return self.source

    def sent(self, timeout: float = 30) -> int:
        """What the source sent in all (waits for its summary)."""
        assert self.source is not None
        return int(self.source.wait_for(lambda e: "sent" in e, timeout)["sent"])

    def status(self, number: int) -> dict[str, Any]:
        return control(self.plan.adapter(number).control, "status")

    def wait_status(
        self, number: int, predicate: Callable[[dict[str, Any]], bool], timeout: float
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            status = self.status(number)
            if predicate(status):
                return status
            if time.monotonic() > deadline:
                raise AssertionError(f"adapter {number} never reached the expected state; last: {status}")
            time.sleep(0.05)  # poll interval of a deadline-bounded wait

    def journal(self, number: int) -> Path:
        path = self.plan.adapter(number).journal
        assert path is not None, "the group was planned without journals"
        return path

    def close(self) -> None:
        for proc in [*self.adapters.values(), *self.retired, *([self.source] if self.source else [])]:
            proc.kill()  # also reaps the ones that ended by themselves


class LineTap:
    """Raw SUB sockets on lines: msg_seq -> (source_seq, payload) per line, and the terms seen."""

    def __init__(self, endpoints: dict[int, str]) -> None:
        self.ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        self.sockets: dict[int, zmq.Socket[bytes]] = {}
        self.seen: dict[int, dict[int, tuple[int, bytes]]] = {n: {} for n in endpoints}
        self.terms: dict[int, set[int]] = {n: set() for n in endpoints}
        for number, endpoint in endpoints.items():
            sock = self.ctx.socket(zmq.SUB)
            sock.linger = 0
            sock.rcvhwm = 0
            sock.subscribe(b"")
            sock.connect(endpoint)
            self.sockets[number] = sock

    def pump(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        poller = zmq.Poller()
        for sock in self.sockets.values():
            poller.register(sock, zmq.POLLIN)
        while time.monotonic() < deadline:
            for sock, _ in poller.poll(50):
                number = next(n for n, s in self.sockets.items() if s is sock)
                _topic, packet = sock.recv_multipart()
                header, blocks = wire.decode_packet(packet)
                self.terms[number].add(header.term)
                for block in blocks:
                    self.seen[number][block.msg_seq] = (block.source_seq, block.payload)

    def close(self) -> None:
        for sock in self.sockets.values():
            sock.close(linger=0)


@contextmanager
def running_group(**kwargs: Any) -> Iterator[Group]:
    """A :class:`Group` closed on exit, whatever happens."""
    group = Group(**kwargs)
    try:
        yield group
    finally:
        group.close()
