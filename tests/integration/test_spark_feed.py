"""The Spark feed job as a real process: SUB on 127.0.0.1, SIGTERM and SIGKILL restarts from its checkpoint.

Shows every ``source_seq`` of every source stream arrives at least once and,
after dropping duplicates, exactly once, in order and gap-free across
restarts, and that a re-sent ``(stream, source_seq)`` carries identical bytes.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from feedha.proto import fix

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
STREAMS = ("A-M", "N-Z")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Receiver:
    """A SUB socket on a thread, keeping every message body by (stream, source_seq)."""

    def __init__(self, endpoints: list[str]) -> None:
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.SUB)
        self.socket.setsockopt(zmq.RCVHWM, 0)
        self.socket.setsockopt(zmq.LINGER, 0)
        for endpoint in endpoints:
            self.socket.connect(endpoint)
        self.socket.setsockopt(zmq.SUBSCRIBE, b"")
        self.order: dict[str, list[int]] = {name: [] for name in STREAMS}
        self.bodies: dict[tuple[str, int], bytes] = {}
        self.mismatched: list[tuple[str, int]] = []
        self.malformed = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.socket.poll(100):
                continue
            topic, payload = self.socket.recv_multipart()
            bodies, malformed = fix.split_messages(payload)
            with self._lock:
                self.malformed += malformed
                for body in bodies:
                    seq = int(dict(fix.parse_fields(body))[fix.TAG_SEQ])
                    key = (topic.decode(), seq)
                    if self.bodies.setdefault(key, body) != body:
                        self.mismatched.append(key)
                    self.order[key[0]].append(seq)

    def highest(self) -> dict[str, int]:
        with self._lock:
            return {name: max(seqs, default=0) for name, seqs in self.order.items()}

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.socket.close()
        self.context.term()


@pytest.fixture
def receiver_and_args(tmp_path: Path) -> Iterator[tuple[Receiver, list[str]]]:
    ports = [_free_port() for _ in STREAMS]
    endpoints = [f"tcp://127.0.0.1:{port}" for port in ports]
    receiver = Receiver(endpoints)
    args = [sys.executable, "-m", "feedha.spark_feed.job", "--checkpoint", str(tmp_path / "checkpoint"),
            "--rate", "4000", "--trigger-ms", "500", "--symbols", "120", "--seed", "3",
            "--master", "local[2]",
            "--wait-subscribers", "1", "--wait-timeout", "120", "--quiet"]  # fmt: skip
    for name, endpoint in zip(STREAMS, endpoints, strict=True):
        args += ["--endpoint", f"{name}={endpoint}"]
    try:
        yield receiver, args
    finally:
        receiver.close()


def _run_until(args: list[str], receiver: Receiver, beyond: dict[str, int], how: signal.Signals) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    process = subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 480  # Spark start-up is slow on a loaded 2-core box
        while any(receiver.highest()[name] <= beyond[name] + 3000 for name in STREAMS):
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, f"no progress past {beyond}: {receiver.highest()}"
            time.sleep(0.2)  # polling with a deadline, not synchronization
        process.send_signal(how)
        stdout, stderr = process.communicate(timeout=90)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    if how == signal.SIGTERM:
        assert process.returncode == 0, stderr[-3000:]
    return stdout


@pytest.mark.timeout(1800)
def test_restarts_lose_nothing_and_renumber_nothing(receiver_and_args: tuple[Receiver, list[str]]) -> None:
    receiver, args = receiver_and_args
    reached = {name: 0 for name in STREAMS}
    summaries = []
    for how in (signal.SIGTERM, signal.SIGKILL, signal.SIGTERM):
        stdout = _run_until(args, receiver, reached, how)
        if how == signal.SIGTERM:
            summaries.append(json.loads(stdout.strip().splitlines()[-1]))
        reached = receiver.highest()
    # Let the last frames of the final run arrive (the job lingers on close).
    deadline = time.monotonic() + 10
    last = summaries[-1]["streams"]
    while any(receiver.highest()[n] < last[n]["last_seq"] for n in STREAMS) and time.monotonic() < deadline:
        time.sleep(0.1)
    receiver.close()
    assert receiver.malformed == 0
    assert receiver.mismatched == []  # identical (stream, seq) -> identical bytes
    for name in STREAMS:
        seqs = receiver.order[name]
        first_seen = list(dict.fromkeys(seqs))
        assert first_seen == list(range(1, len(first_seen) + 1)), f"{name}: gap or reorder"
        assert first_seen[-1] >= last[name]["last_seq"]
        assert last[name]["number"] == STREAMS.index(name) + 1
    assert summaries[0]["sent"] > 0 and summaries[-1]["batch_latency_ms"]["count"] > 0
