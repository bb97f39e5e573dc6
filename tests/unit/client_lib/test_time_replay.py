"""The client's time replay: pages until END, paced by publish times, fails over, refuses clearly."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from feedha.adapter.journal import JournalReader, JournalWriter
from feedha.adapter.replay import ReplayService
from feedha.client import Delivery, ReplayFailed
from feedha.client._time_replay import TimeReplay, replay_window, replay_window_async, to_ns
from feedha.client.replay_console import parse_time
from feedha.proto import market_pb2
from feedha.proto.replay import ReplayRequest, ReplyStatus, decode_status, encode_request

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
S = 1_000 * MS


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class Services:
    """Stands in for a ReplayClient: the first service fails every other request, the second answers."""

    def __init__(self, service: ReplayService, *, now_ns: int, delayed_only: bool = False) -> None:
        self.service, self.now_ns, self.delayed_only = service, now_ns, delayed_only
        self.asked: list[tuple[str, int]] = []

    def services(self, channel: int) -> tuple[str, ...]:
        return ("tcp://a", "tcp://b")

    def request(self, endpoint: str, request: ReplayRequest, *, deadline: float) -> Any:
        self.asked.append((endpoint, request.after_seq))
        if endpoint == "tcp://a" and len(self.asked) % 2:
            return None  # timed out: the next service is asked for the same page
        frames = self.service.answer(
            [b"", encode_request(request)], term=1, send_time_ns=self.now_ns, delayed_only=self.delayed_only
        )
        status: ReplyStatus = decode_status(frames[1])
        return status, frames[2:]


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[JournalWriter]:
    with JournalWriter(tmp_path) as writer:
        for i in range(200):  # one message every 10 ms, symbols S0..S3
            payload = market_pb2.MarketUpdate(symbol=f"S{i % 4}").SerializeToString()
            writer.append(i + 1, T0 + i * 10 * MS, 1, i + 1, payload)
        writer.flush()
        yield writer


def _service(writer: JournalWriter, *, delay_ns: int | None = None) -> ReplayService:
    return ReplayService(
        JournalReader(writer.directory),
        channel=5,
        adapter=1,
        max_packet_bytes=200,
        max_bytes=400,  # a few messages a page: many pages
        bounds=lambda: (1, writer.last_msg_seq),
        delay_ns=delay_ns,
        time_index=writer.time_index.start_for,
    )


def test_a_paced_replay_hands_each_message_out_at_its_time_and_ends_at_the_windows_end(
    journal: JournalWriter,
) -> None:
    clock, services = FakeClock(), Services(_service(journal), now_ns=T0 + 10 * S)
    window = TimeReplay(5, T0 + 500 * MS, T0 + 1500 * MS, 2.0, channel_name="EQ")
    handed: list[tuple[int, float]] = []
    for event in replay_window(services, window, clock=clock, sleep=clock.sleep):  # type: ignore[arg-type]
        assert isinstance(event, Delivery)
        handed.append((event.msg_seq, clock.now - 100.0))
    assert [seq for seq, _ in handed] == list(range(51, 151))  # published at 500..1490 ms
    for seq, at in handed:  # at speed 2, the message published at t comes (t - start) / 2 in
        assert at == pytest.approx(((seq - 1) * 10 - 500) / 1000 / 2)
    assert clock.now - 100.0 == pytest.approx(0.5)  # a 1 s window at speed 2
    assert {endpoint for endpoint, _ in services.asked} == {"tcp://a", "tcp://b"}  # failed over, carried on
    afters = [after for _, after in services.asked]
    assert afters == sorted(afters) and len(set(afters)) > 10  # paged by after_seq


def test_a_full_speed_replay_never_sleeps_and_a_refusal_is_raised(journal: JournalWriter) -> None:
    clock = FakeClock()
    services = Services(_service(journal), now_ns=T0 + 10 * S)
    window = TimeReplay(5, T0, T0 + 100 * MS)
    got = list(replay_window(services, window, clock=clock, sleep=clock.sleep))  # type: ignore[arg-type]
    assert [e.msg_seq for e in got if isinstance(e, Delivery)] == list(range(1, 11))
    assert clock.slept == []
    refused = Services(_service(journal, delay_ns=5 * S), now_ns=T0 + 3 * S, delayed_only=True)
    with pytest.raises(ReplayFailed, match="NOT_ENTITLED.*must end by now - delay") as caught:
        list(replay_window(refused, window, clock=clock, sleep=clock.sleep))  # type: ignore[arg-type]
    assert caught.value.status == "NOT_ENTITLED"


def test_bad_windows_and_times_are_refused_naming_the_value() -> None:
    with pytest.raises(ValueError, match="must be after its start"):
        TimeReplay(5, T0, T0)
    with pytest.raises(ValueError, match="speed must be > 0"):
        TimeReplay(5, T0, T0 + 1, 0.0)
    assert parse_time("now-90s", now=1000.0) == to_ns(910.0)
    assert parse_time("-2m", now=1000.0) == to_ns(880.0)
    assert parse_time("2023-11-14T22:13:20Z") == 1_700_000_000 * S == parse_time("1700000000")
    assert parse_time("2023-11-14T22:13:20") == 1_700_000_000 * S  # no zone: UTC
    with pytest.raises(ValueError, match="TIME='yesterday'"):
        parse_time("yesterday")


class Advancing(Services):
    """Services whose clock moves 100 ms a request: the stream's end is still to come for a while."""

    def request(self, endpoint: str, request: ReplayRequest, *, deadline: float) -> Any:
        self.now_ns += 100 * MS
        return super().request(endpoint, request, deadline=deadline)


def test_a_window_whose_end_is_still_to_come_waits_for_the_stream_however_long(
    journal: JournalWriter,
) -> None:
    clock = FakeClock()
    services = Advancing(_service(journal), now_ns=T0 + 1990 * MS)  # the newest record is 200 (1990 ms)
    window = TimeReplay(5, T0 + 1950 * MS, T0 + 5 * S, stall_s=1.0)  # ends 3 s after the newest record
    got = list(replay_window(services, window, clock=clock, sleep=clock.sleep))  # type: ignore[arg-type]
    assert [e.msg_seq for e in got if isinstance(e, Delivery)] == [196, 197, 198, 199, 200]
    waits = [s for s in clock.slept if s == pytest.approx(0.1)]
    assert len(waits) >= 10  # asked again and again for longer than stall_s: "not yet" is no failure


class Closing(Services):
    """Services that note when the replay closes them."""

    closed = 0

    def close(self) -> None:
        self.closed += 1


def test_the_async_replay_hands_out_what_the_blocking_one_does_at_the_same_times(
    journal: JournalWriter,
) -> None:
    window = TimeReplay(5, T0 + 500 * MS, T0 + 1500 * MS, 2.0, channel_name="EQ")

    def blocking() -> list[tuple[int, float]]:
        clock, services = FakeClock(), Services(_service(journal), now_ns=T0 + 10 * S)
        replay = replay_window(services, window, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
        return [(e.msg_seq, clock.now) for e in replay]

    async def awaited() -> tuple[list[tuple[int, float]], float]:
        clock, services = FakeClock(), Services(_service(journal), now_ns=T0 + 10 * S)

        async def nap(seconds: float) -> None:
            clock.sleep(seconds)
            await asyncio.sleep(0)

        replay = replay_window_async(
            services,  # type: ignore[arg-type]
            window,
            clock=clock,
            sleep=clock.sleep,
            async_sleep=nap,
        )
        return [(e.msg_seq, clock.now) async for e in replay], clock.now

    handed, ended = asyncio.run(awaited())
    assert handed == blocking() and len(handed) == 100
    assert ended - 100.0 == pytest.approx(0.5)  # it too ends when the window's last moment is due


def test_an_abandoned_async_replay_stops_its_page_thread_and_closes_the_client(
    journal: JournalWriter,
) -> None:
    services = Closing(_service(journal), now_ns=T0 + 10 * S)
    window = TimeReplay(5, T0, T0 + 1500 * MS)

    async def first_few() -> list[int]:
        replay = replay_window_async(services, window, close=True)  # type: ignore[arg-type]
        got = []
        async for event in replay:
            got.append(event.msg_seq)
            if len(got) == 3:
                break
        await replay.aclose()  # type: ignore[attr-defined]
        return got

    assert asyncio.run(first_few()) == [1, 2, 3]
    assert services.closed == 1
    assert not [t for t in threading.enumerate() if t.name == "feedha-replay-prefetch"]
