"""A source's sends wait for slow subscribers instead of dropping, and go past one that reads nothing.

Real XPUB/SUB pairs on 127.0.0.1 (feedha.transport.backpressure), then the plain source as a
subprocess against a subscriber that reads slowly: every frame arrives, and the summary says
how long the source waited and what rate it achieved.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
import zmq

from feedha.proto.fix import split_messages
from feedha.transport.backpressure import BackpressureSender, SendResult

pytestmark = pytest.mark.timeout(60)

PAYLOAD = b"x" * 100_000  # big frames: the kernel's socket buffers fill after a few dozen


class _Sockets:
    """The test's sockets, each closed at the end (never left to the collector)."""

    def __init__(self) -> None:
        self.context: _Sockets = zmq.Context()
        self.opened: list[zmq.Socket[bytes]] = []

    def socket(self, kind: int) -> zmq.Socket[bytes]:
        sock = self.context.socket(kind)
        sock.linger = 0
        self.opened.append(sock)
        return sock


@pytest.fixture
def context() -> Iterator[_Sockets]:
    sockets = _Sockets()
    try:
        yield sockets
    finally:
        for sock in sockets.opened:
            sock.close(linger=0)
        sockets.context.term()


def _pair(context: _Sockets, subscribers: int) -> tuple[zmq.Socket[bytes], list[zmq.Socket[bytes]]]:
    pub = context.socket(zmq.XPUB)
    pub.sndhwm = 10
    pub.setsockopt(zmq.XPUB_VERBOSE, 1)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    subs = []
    for _ in range(subscribers):
        sub = context.socket(zmq.SUB)
        sub.rcvhwm = 10
        sub.subscribe(b"")
        sub.connect(f"tcp://127.0.0.1:{port}")
        subs.append(sub)
    for _ in subs:
        assert pub.poll(10_000), "a subscription did not arrive"
        pub.recv()
    return pub, subs


def _reader(sub: zmq.Socket[bytes], got: list[int], stop: threading.Event, pause_s: float) -> None:
    while not stop.is_set():
        if sub.poll(50):
            sub.recv_multipart()
            got.append(1)
            time.sleep(pause_s)  # a slow subscriber: the sender must wait for it, not drop


def test_a_slow_subscriber_gets_every_message_and_the_sender_waits(
    context: _Sockets,
) -> None:
    pub, (sub,) = _pair(context, 1)
    sender = BackpressureSender(pub, max_stall_s=5.0)
    got: list[int] = []
    stop = threading.Event()
    thread = threading.Thread(target=_reader, args=(sub, got, stop, 0.002))
    thread.start()
    try:
        results = [sender.send((b"T", PAYLOAD)) for _ in range(300)]
        deadline = time.monotonic() + 30
        while len(got) < 300 and time.monotonic() < deadline:
            time.sleep(0.05)  # a poll with a deadline: the reader takes what is queued
    finally:
        stop.set()
        thread.join()
    assert results == [SendResult.WHOLE] * 300
    assert len(got) == 300  # nothing dropped
    assert sender.blocked_sends > 0 and sender.blocked_s > 0 and sender.stalls == 0
    assert repr(sender).startswith("<BackpressureSender [blocked_s=")


def test_a_subscriber_that_reads_nothing_is_passed_and_the_others_get_everything(
    context: _Sockets,
) -> None:
    pub, (reading, stuck) = _pair(context, 2)
    sender = BackpressureSender(pub, max_stall_s=0.3)
    got: list[int] = []
    stop = threading.Event()
    thread = threading.Thread(target=_reader, args=(reading, got, stop, 0.0))
    thread.start()
    try:
        results = [sender.send((b"T", PAYLOAD)) for _ in range(300)]
        deadline = time.monotonic() + 30
        while len(got) < 300 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join()
    assert len(got) == 300  # the reading subscriber lost nothing
    assert results.count(SendResult.PAST_STALLED) == sender.stalls >= 1
    stuck_got = 0
    while stuck.poll(200):
        stuck.recv_multipart()
        stuck_got += 1
    assert stuck_got < 300  # it missed a stretch (its adapter sees a gap of its own)


def test_a_send_held_back_gives_up_when_told_to_stop(context: _Sockets) -> None:
    pub, (_stuck,) = _pair(context, 1)
    sender = BackpressureSender(pub, max_stall_s=30.0)
    stop = threading.Event()
    results: list[SendResult] = []
    for _ in range(1000):
        result = sender.send((b"T", PAYLOAD), stop=stop)
        results.append(result)
        if sender.blocked_sends:
            stop.set()  # the next wait gives up at its next slice
        if result is SendResult.STOPPED:
            break
    assert results[-1] is SendResult.STOPPED and sender.stalls == 0


def test_the_plain_source_waits_for_a_slow_subscriber_and_reports_its_rate(
    context: _Sockets,
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "feedha.plain_source", "--streams", "A-Z", "--rate", "0", "--count", "100000",
         "--sndhwm", "50", "--max-stall", "30", "--wait-subscribers", "1", "--wait-timeout", "30"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        endpoints = json.loads(proc.stdout.readline())["endpoints"]
        sub = context.socket(zmq.SUB)
        sub.rcvhwm = 50
        sub.subscribe(b"")
        sub.connect(endpoints["A-Z"])
        assert sub.poll(30_000)  # the source started: now read nothing for a while (20 MB, more
        time.sleep(1.5)  # than the socket buffers hold): it must wait for this subscriber, not drop
        received, deadline = 0, time.monotonic() + 45
        while received < 100_000 and time.monotonic() < deadline:
            if sub.poll(100):
                received += len(split_messages(sub.recv_multipart()[1])[0])
        summary = json.loads(proc.communicate(timeout=30)[0].splitlines()[-1])
    finally:
        proc.kill()
    assert received == summary["sent"] == 100_000
    backpressure = summary["backpressure"]
    assert (
        backpressure["blocked_sends"] > 0 and backpressure["blocked_s"] > 0.5 and backpressure["stalls"] == 0
    )
    assert 0 < summary["achieved_rate"] < 100_000 / 1.0  # the wait shows in the rate it reports
