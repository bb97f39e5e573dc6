"""The loops written once and driven two ways: ``_drive`` and ``FeedSession.poll_steps``, without sockets."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Generator
from typing import Any

import pytest

from feedha.admin_client import Line, Route
from feedha.client import ArbiterConfig, ChannelArbiter, ChannelSpec, ClosedError, Delivery, TermChanged
from feedha.client._drive import drive, drive_async
from feedha.client._feed_core import FeedCore
from feedha.client._feed_session import FeedSession
from feedha.client.arbiter_stats import ArbiterStats
from feedha.client.events import Event
from tests.unit.client_lib.test_arbiter import CHANNEL, packet


def _adds(ended: list[str]) -> Generator[int, int, int]:
    # Asks for two numbers and returns their sum; notes how it ended.
    try:
        first = yield 1
        second = yield 2
        ended.append("returned")
        return first + second
    finally:
        ended.append("closed")


def test_drive_and_drive_async_answer_the_same_waits() -> None:
    ended: list[str] = []
    assert drive(_adds(ended), lambda n: n * 10) == 30

    async def wait(n: int) -> int:
        await asyncio.sleep(0)
        return n * 10

    assert asyncio.run(drive_async(_adds(ended), wait)) == 30
    assert ended == ["returned", "closed"] * 2


def test_a_wait_that_fails_or_is_cancelled_ends_the_loop_where_it_waited() -> None:
    ended: list[str] = []

    def fail(n: int) -> int:
        raise OSError("the wait failed")

    with pytest.raises(OSError):
        drive(_adds(ended), fail)
    assert ended == ["closed"]  # at once, not when the generator is collected

    async def cancelled() -> None:
        never = asyncio.Event()

        async def wait(n: int) -> int:
            await never.wait()
            return n

        task = asyncio.create_task(drive_async(_adds(ended), wait))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled())
    assert ended == ["closed", "closed"]


def _route(symbols: tuple[str, ...]) -> Route:
    line = Line(
        adapter_id="EQ.1",
        line_endpoint="tcp://127.0.0.1:6001",
        replay_endpoint="",
        role="active",
        term=1,
        is_up=True,
    )
    return Route(
        feed="EQUITIES",
        channel_name="EQ",
        channel_number=CHANNEL,
        source_stream="A-M",
        message_model="feedha.v1.MarketUpdate",
        lines=(line,),
        symbols=symbols,
        delayed=False,
    )


class _ScriptedLines:
    """A subscriber whose polls return scripted batches of events."""

    def __init__(self, spec: ChannelSpec, batches: list[list[Event]]) -> None:
        self.joined = [spec]
        self.batches = deque(batches)
        self.waits: list[float] = []
        self.closed = False

    def join(self, channel: ChannelSpec) -> int:
        self.joined.append(channel)
        return len(channel.endpoints)

    def poll(self, timeout: float) -> list[Event]:
        self.waits.append(timeout)
        return self.batches.popleft() if self.batches else []

    def stats(self) -> dict[str, ArbiterStats]:
        return {}

    def close(self) -> None:
        self.closed = True


def _session(batches: list[list[Event]], wakeup: Any) -> FeedSession[_ScriptedLines]:
    def make(spec: ChannelSpec, core: FeedCore) -> _ScriptedLines:
        return _ScriptedLines(spec, batches)

    session = FeedSession(
        None,
        kind="FeedClient",
        retry_deadline_s=1.0,
        poll_interval_s=0.05,
        wakeup=wakeup,
        make_subscriber=make,
    )
    session.opened = True  # no admin server here: route sets are pushed by hand
    return session


@pytest.mark.parametrize("on_asyncio", [False, True])
def test_the_feed_poll_loop_applies_route_sets_then_hands_over_what_the_routes_let_through(
    on_asyncio: bool,
) -> None:
    deliveries = ChannelArbiter(ArbiterConfig(channel=CHANNEL)).on_packet(0, packet(1, 4), now=0.0)  # S1..S4
    term = TermChanged(CHANNEL, 1, 2, 0)
    wakeup: Any = asyncio.Event() if on_asyncio else threading.Event()
    session = _session([[*deliveries, term]], wakeup)

    def wait(seconds: float) -> list[Event]:
        return [] if session.subscriber is None else session.subscriber.poll(seconds)

    async def wait_async(seconds: float) -> list[Event]:
        return wait(seconds)

    def poll(timeout: float, *, status: bool) -> list[Any]:
        steps = session.poll_steps(timeout, status=status)
        return asyncio.run(drive_async(steps, wait_async)) if on_asyncio else drive(steps, wait)

    assert poll(0.0, status=True) == []  # no route yet: nothing joined, the deadline passed
    session._push("subscribed", (_route(("S1", "S3")),))
    assert wakeup.is_set()
    got = poll(1.0, status=True)
    assert [e.msg_seq for e in got if isinstance(e, Delivery)] == [1, 3] and got[-1] == term
    assert session.subscriber is not None and [s.name for s in session.subscriber.joined] == ["EQ"]
    assert session.subscriber.waits and max(session.subscriber.waits) <= 0.05  # the poll interval
    stats = session.stats()
    assert (stats.delivered, stats.filtered, stats.lines, stats.status_events) == (
        2,
        2,
        1,
        {"TermChanged": 1},
    )
    assert not wakeup.is_set()  # taken: the next wait for routes waits
    session.closed = True
    with pytest.raises(ClosedError, match="the FeedClient is closed"):
        poll(0.0, status=False)
    session.close_lines()
    assert session.subscriber is None
    assert "closed" in session.describe()
