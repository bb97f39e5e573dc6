"""The send loop sends every message as soon as it is due; frames of several form only under load.

The loop runs on a simulated clock (its ``time`` module replaced) with fake
sockets: a wake-up is exactly as late as the test says, so what is measured
is the loop's decision, never this machine's timing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import zmq

from feedha.plain_source import PlainSource, PublishDelays, SourceConfig, SourceSummary
from feedha.plain_source import source as source_module
from feedha.plain_source.pacing import MAX_DELAY_SAMPLES, PacingSchedule
from feedha.proto.fix import parse_fields, parse_timestamp, split_messages
from feedha.transport.backpressure import BackpressureSender

pytestmark = pytest.mark.timeout(30)

WALL0_NS = 1_800_000_000_000_000_000
EVENT_TIME_TAG = 60


class _FakeSocket:
    def __init__(self, clock: _Clock) -> None:
        self.clock = clock
        self.frames: list[tuple[float, int]] = []  # (when, messages in the frame)

        self._parts: list[bytes] = []
        self.stamps: list[tuple[int, int]] = []  # (sent, event time) of each message, wall ns

    def send_multipart(self, frames: tuple[bytes, bytes]) -> None:
        messages = split_messages(frames[1])[0]
        self.frames.append((self.clock.now, len(messages)))
        for message in messages:
            event = dict(parse_fields(message))[EVENT_TIME_TAG]
            self.stamps.append((self.clock.time_ns(), parse_timestamp(event)))

    def setsockopt(self, option: int, value: int) -> None:
        pass  # BackpressureSender's XPUB_NODROP and SNDTIMEO: this socket never makes a send wait

    def send(self, data: bytes, flags: int = 0, copy: bool = True) -> None:
        self._parts.append(data)
        if not flags & zmq.SNDMORE:
            topic, payload = self._parts
            self._parts = []
            self.send_multipart((topic, payload))


class _Clock:
    """time.monotonic/time_ns/sleep on one simulated timeline; each sleep overshoots by ``late_s``."""

    def __init__(self, late_s: float) -> None:
        self.now = 50.0
        self.late_s = late_s
        self.sleeps = 0

    def monotonic(self) -> float:
        return self.now

    def time_ns(self) -> int:
        return WALL0_NS + round(self.now * 1e9)

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps += 1
        self.now += seconds + self.late_s


def _run(
    monkeypatch: pytest.MonkeyPatch,
    *,
    rate: float,
    count: int,
    late_s: float,
    due: bool = False,
    making_s: Callable[[int], float] = lambda call: 0.0,
) -> tuple[_FakeSocket, SourceSummary, _Clock]:
    # making_s(call): how long the call-th making of messages ahead of the clock takes (from 0).
    clock = _Clock(late_s)
    monkeypatch.setattr(source_module, "time", SimpleNamespace(
        monotonic=clock.monotonic, time_ns=clock.time_ns, sleep=clock.sleep))  # fmt: skip
    config = SourceConfig(
        streams=("A-Z",), symbols=20, seed=3, rate=rate, count=count, pregenerate=due, due_stamps=due
    )
    source = PlainSource(config)
    socket = _FakeSocket(clock)
    source._sockets = [socket]  # type: ignore[list-item]  # no ZeroMQ in unit tests
    source._senders = [BackpressureSender(socket)]  # type: ignore[arg-type]
    source._drain_subscriptions = lambda timeout_ms: None  # type: ignore[method-assign]
    make, calls = source._pregenerate, [0]

    def slow_make(*args: Any) -> Any:
        clock.now += making_s(calls[0])
        calls[0] += 1
        return make(*args)

    source._pregenerate = slow_make  # type: ignore[method-assign]
    summary = SourceSummary(config.streams, {}, source._sent, [0])
    source._send_loop(threading.Event(), summary)
    return socket, summary, clock


def _stamp_lags(socket: _FakeSocket) -> list[int]:
    return [sent - event for sent, event in socket.stamps]


def test_a_message_goes_out_when_due_and_alone_when_the_sender_keeps_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 10k msg/s with exact wake-ups: a 1 ms tick made the first of every ten wait
    # 0.9 ms for the other nine; now each message is its own frame, on time.
    socket, summary, _clock = _run(monkeypatch, rate=10_000, count=500, late_s=0.0)
    assert [n for _at, n in socket.frames] == [1] * 500
    assert summary.frames == 500 and summary.sent == 500
    delays = summary.to_json()
    assert '"publish_latency_us"' in delays
    assert summary.publish_delays is not None
    assert max(summary.publish_delays.newest_ns) <= 1 and min(summary.publish_delays.newest_ns) >= 0


def test_a_pregenerated_run_with_due_stamps_is_stamped_as_a_live_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # Made ahead for an epoch past the making; the clock starts at it, so each message
    # carries the time it is due and goes out then, alone, as in a live run.
    live, _summary, _clock = _run(monkeypatch, rate=10_000, count=300, late_s=0.0)
    made, summary, _clock = _run(monkeypatch, rate=10_000, count=300, late_s=0.0, due=True)
    assert [n for _at, n in made.frames] == [1] * 300 and summary.sent == 300
    assert _stamp_lags(made) == _stamp_lags(live) and set(_stamp_lags(made)) <= {0, 1}  # ns rounding
    assert made.frames[0][0] >= 50.0 + source_module.DUE_LEAD_MIN_S  # it waited for its epoch
    assert summary.pregenerate_s == pytest.approx(source_module.DUE_LEAD_MIN_S, abs=1e-3)
    assert summary.publish_delays is not None and max(summary.publish_delays.newest_ns) <= 1
    # Late wake-ups: stamps stay the due times, never later than the send.
    late, _summary, _clock = _run(monkeypatch, rate=10_000, count=300, late_s=0.00035, due=True)
    assert min(_stamp_lags(late)) >= 0 and max(_stamp_lags(late)) < 450_000


def test_a_making_that_overruns_its_epoch_is_made_again_for_a_later_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The probe (call 0) is quick, the first making (call 1) stalls past its epoch: stamped
    # for it, every message would be late before it was sent. It is made again, for twice the
    # lead, and the run is stamped as a live one.
    made, summary, _clock = _run(
        monkeypatch, rate=10_000, count=300, late_s=0.0, due=True, making_s=lambda call: 5.0 * (call == 1)
    )
    assert summary.sent == 300 and set(_stamp_lags(made)) <= {0, 1}
    assert made.frames[0][0] >= 50.0 + 5.0 + 2 * source_module.DUE_LEAD_MIN_S
    # A machine that stalls every making gives up after DUE_TRIES, saying why.
    with pytest.raises(TimeoutError, match="ahead of its clock"):
        _run(
            monkeypatch, rate=10_000, count=300, late_s=0.0, due=True, making_s=lambda call: 5.0 * (call > 0)
        )


def test_due_stamps_are_only_for_a_paced_pregenerated_run() -> None:
    for bad in ({}, {"pregenerate": True, "rate": 0}, {"pregenerate": True, "epoch_ns": WALL0_NS}):
        with pytest.raises(ValueError, match="due stamps"):
            SourceConfig(**({"rate": 1000.0, "count": 10, "due_stamps": True} | bad))


def test_frames_of_several_form_only_when_the_sender_is_late(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every wake-up 0.35 ms late at 10k msg/s: what fell due meanwhile (3-4) goes in one frame, at once.
    socket, summary, clock = _run(monkeypatch, rate=10_000, count=2_000, late_s=0.00035)
    sizes = [n for _at, n in socket.frames]
    assert sum(sizes) == 2_000 and set(sizes[1:-1]) <= {3, 4}
    assert summary.publish_delays is not None
    newest = summary.publish_delays.newest_ns
    assert min(newest) >= 0 and max(newest) < 100_000  # the newest was due less than one step ago
    assert clock.sleeps == len(socket.frames)  # one sleep per send: nothing waited for a fill level


def test_unpaced_frames_are_full_and_untimed(monkeypatch: pytest.MonkeyPatch) -> None:
    socket, summary, clock = _run(monkeypatch, rate=0, count=200, late_s=0.0)
    assert [n for _at, n in socket.frames] == [64, 64, 64, 8] and clock.sleeps == 0
    assert summary.publish_delays is None and "publish_latency_us" not in summary.to_json()


def test_wait_is_until_the_next_deadline_or_the_end() -> None:
    schedule = PacingSchedule(rate=1000.0, max_burst=10, start=100.0)
    assert schedule.wait_s(100.0) == pytest.approx(0.001)
    assert schedule.wait_s(100.0, end=100.0004) == pytest.approx(0.0004)
    assert schedule.wait_s(100.5) == 0.0


def test_publish_delays_summarize_and_stay_bounded() -> None:
    delays = PublishDelays()
    for k in range(MAX_DELAY_SAMPLES + 10):
        delays.record(sent_ns=10_000 + k, oldest_event_ns=k - 5_000, newest_event_ns=k)
    summary = delays.summary()
    assert summary["sends"] == MAX_DELAY_SAMPLES + 10 and len(delays.newest_ns) == MAX_DELAY_SAMPLES
    assert summary["newest"] == {"p50": 10.0, "p99": 10.0, "p99.9": 10.0, "max": 10.0}
    assert summary["oldest"] == {"p50": 15.0, "p99": 15.0, "p99.9": 15.0, "max": 15.0}
    assert PublishDelays().summary() == {"sends": 0, "newest": {}, "oldest": {}}
