"""Replay a time window of a channel from its lines' replay services, paced or as fast as it is read.

Theory of operation
-------------------
A time-range request (replay protocol kind 4, docs/wire-format.md) asks a
service for the messages published in ``[start, end)`` after the last
msg_seq the client already has; each reply is one page, and the page that
ends the window has status ``END``. The client asks for the next page only
when it has handed out the last one, so it holds one page (at most the
service's reply budget, 1 MiB) and the service holds nothing: the client's
reading is the flow control.

Every adapter of a channel numbers its messages alike, so the next page may
come from any service: a service that fails, is over its budget or does not
hold the window yet is left for the next one, and the replay carries on
from the same msg_seq. A window whose end is still to come is followed as
the stream is written: an empty ``OK`` page means "nothing newer yet", and the
client asks again every :data:`NOT_YET_S` until the window's end has passed.

Pacing: a packet's send time is its messages' publish time. With ``speed``,
the message published at ``t`` is handed out ``(t - start) / speed`` seconds
after the replay began (when its first page came), and the replay ends
``(end - start) / speed`` seconds after it began; a thread fetches up to
:data:`PREFETCH` pages ahead, so a page's round trip does not make the
messages due meanwhile late. Without ``speed``, one page at a time, as fast
as the caller reads.

The replay is written once, as a generator (``_window_steps``) that asks for
the next page, says until when to wait, and hands out events; two drivers
run it: :func:`replay_window` blocks (``FeedClient.replay``, ``feedha
replay``), :func:`replay_window_async` awaits (``AsyncFeedClient.replay``):
its pages always come from the prefetch thread (the replay client's sockets
block) and it waits with ``asyncio.sleep``, so the event loop never blocks.

What is handed out is what the live stream carried: a :class:`Delivery` per
message, :class:`SessionEnded` and :class:`SessionStarted` for an
end-of-session block, :class:`Purged` for a purged message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from feedha.client._sessions import boundary_events
from feedha.client.errors import ProtocolError, ReplayFailed
from feedha.client.events import Delivery, Event, Purged, SessionBoundaryDelivery, StatusEvent
from feedha.client.replay_client import ReplayClient
from feedha.proto import wire
from feedha.proto.replay import ReplayStatus, ReplyStatus, time_request

__all__ = ["ReplayFailed", "TimeReplay", "replay_window", "replay_window_async", "to_ns"]

logger = logging.getLogger(__name__)

STALL_S: Final = 10.0  # no page from any service for this long: the replay fails
RETRY_S: Final = 0.02  # every service refused (busy, failed): wait this long before asking again
NOT_YET_S: Final = 0.1  # the window's end is still to come and the journal has nothing newer yet
_FATAL: Final = (ReplayStatus.NOT_ENTITLED, ReplayStatus.BAD_REQUEST)
PAGE_TIMEOUT_S: Final = 2.0  # one page (up to 1 MiB) from one service
PREFETCH: Final = 2  # pages a paced replay holds ahead of the one it hands out
_READ_TICK_S: Final = 0.1  # how often a reader waiting for a page checks that the prefetch still runs


@dataclass(frozen=True, slots=True)
class TimeReplay:
    """What to replay and how.

    Attributes:
        channel: the channel number.
        start_ns: the window's start (inclusive), ns since the Unix epoch.
        end_ns: its end (exclusive).
        speed: times real time (``None``: as fast as it is read).
        channel_name: names the channel in status events.
        stall_s: how long every service may fail before the replay does.
    """

    channel: int
    start_ns: int
    end_ns: int
    speed: float | None = None
    channel_name: str = ""
    stall_s: float = STALL_S

    def __post_init__(self) -> None:
        if self.end_ns <= self.start_ns:
            raise ValueError(f"the window's end ({self.end_ns}) must be after its start ({self.start_ns})")
        if self.speed is not None and not self.speed > 0:
            raise ValueError(f"speed must be > 0 (None: as fast as read), got {self.speed!r}")


Page = tuple[ReplyStatus, list[bytes]]  # a reply: its status and its packets
# What _window_steps yields: None (send back the next page, or None once there is none),
# a time of the clock to wait for, or events to hand out.
WindowSteps = Generator[float | list[Event] | None, Page | None, None]


def replay_window(
    client: ReplayClient,
    replay: TimeReplay,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    close: bool = False,
) -> Iterator[Delivery | StatusEvent]:
    """Hand out the window's messages in msg_seq order, page by page (see the module docstring).

    Args:
        client: the channel's replay services.
        replay: the window, and how fast.
        clock: monotonic seconds.
        sleep: blocks for seconds.
        close: close ``client`` when the replay ends (or is abandoned).

    Raises:
        ReplayFailed: a service refused the request, or none answered for ``stall_s``.
    """
    pages = _pages(client, replay, clock=clock, sleep=sleep)
    # Paced: pages are fetched ahead on a thread (PREFETCH pages at most), so a page's
    # round trip never makes the messages due meanwhile late.
    fetching = _Prefetch(pages) if replay.speed is not None else contextlib.nullcontext(pages)
    try:
        with fetching as ahead:
            steps = _window_steps(replay, clock)
            step = next(steps)
            while True:
                answer: Page | None = None
                if step is None:
                    answer = next(ahead, None)
                elif isinstance(step, list):
                    yield from step
                else:
                    _wait_until(step, clock, sleep)
                try:
                    step = steps.send(answer)
                except StopIteration:
                    return
    finally:
        if close:
            client.close()


async def replay_window_async(
    client: ReplayClient,
    replay: TimeReplay,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    async_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    close: bool = False,
) -> AsyncIterator[Delivery | StatusEvent]:
    """:func:`replay_window` on asyncio: pages come from a thread, waits are awaited.

    Args:
        client: the channel's replay services.
        replay: the window, and how fast.
        clock: monotonic seconds.
        sleep: blocks the page thread for seconds (between services' refusals).
        async_sleep: waits for seconds on the loop (the pacing).
        close: close ``client`` when the replay ends (or is abandoned).

    Raises:
        ReplayFailed: a service refused the request, or none answered for ``stall_s``.
    """
    fetching = _Prefetch(_pages(client, replay, clock=clock, sleep=sleep))
    try:
        ahead = fetching.__enter__()
        steps = _window_steps(replay, clock)
        step = next(steps)
        while True:
            answer: Page | None = None
            if step is None:
                answer = await asyncio.to_thread(next, ahead, None)
            elif isinstance(step, list):
                for event in step:
                    yield event
            else:
                await async_sleep(max(0.0, step - clock()))
            try:
                step = steps.send(answer)
            except StopIteration:
                return
    finally:
        # The page thread may be in a request: stop it, then close what it used, on a thread
        # (a join blocks) and shielded (a second cancellation must not leave it half done).
        await asyncio.shield(asyncio.to_thread(_finish, fetching, client if close else None))


def _finish(fetching: _Prefetch, client: ReplayClient | None) -> None:
    fetching.__exit__()
    if client is not None:
        client.close()


def _window_steps(replay: TimeReplay, clock: Callable[[], float]) -> WindowSteps:
    # The replay, written once (see WindowSteps): the replay's clock starts when the first page is in.
    began: float | None = None
    while (page := (yield None)) is not None:
        began = clock() if began is None else began
        for packet in page[1]:
            events = _events(packet, replay)
            if not events:
                continue
            if replay.speed is not None:
                sent = wire.decode_header(packet).send_time_ns
                yield began + (sent - replay.start_ns) / 1e9 / replay.speed
            yield events
    if began is not None and replay.speed is not None:
        yield began + (replay.end_ns - replay.start_ns) / 1e9 / replay.speed


def _pages(
    client: ReplayClient,
    replay: TimeReplay,
    *,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> Iterator[Page]:
    after = 0
    while True:
        status, packets = _next_page(client, replay, after, clock=clock, sleep=sleep)
        yield status, packets
        after = max(after, status.through)
        if status.status is ReplayStatus.END:
            return


class _Prefetch:
    """Runs a page iterator on a thread, at most :data:`PREFETCH` pages ahead of the reader."""

    def __init__(self, pages: Iterator[Page]) -> None:
        self._pages = pages
        self._queue: queue.Queue[Page | BaseException | None] = queue.Queue(PREFETCH)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="feedha-replay-prefetch", daemon=True)

    def __enter__(self) -> Iterator[Page]:
        self._thread.start()
        return self._read()

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread.ident is not None:  # started
            self._thread.join(timeout=STALL_S + PAGE_TIMEOUT_S)

    def _run(self) -> None:
        try:
            for page in self._pages:
                if not self._put(page):
                    return
            self._put(None)
        except BaseException as exc:  # handed to the reader, raised there
            self._put(exc)

    def _put(self, item: Page | BaseException | None) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _read(self) -> Iterator[Page]:
        while True:
            try:  # with a time-out: a reader on an executor's thread must end once the prefetch is stopped
                item = self._queue.get(timeout=_READ_TICK_S)
            except queue.Empty:
                if self._stop.is_set():
                    return
                continue
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item


def _next_page(
    client: ReplayClient,
    replay: TimeReplay,
    after: int,
    *,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> Page:
    # Ask each service in turn until one gives a page that moves on (or ends the window).
    # An empty OK page says the window is not over but nothing more is written yet (its end
    # is still to come): wait for the stream, however long, while a service says so.
    request = time_request(replay.channel, 0, replay.start_ns, replay.end_ns, after_seq=after)
    deadline = clock() + replay.stall_s
    while clock() < deadline:
        wait = RETRY_S
        for endpoint in client.services(replay.channel):
            reply = client.request(endpoint, request, deadline=deadline)
            if reply is None:
                continue  # timed out or failed: the next service
            status, packets = reply
            if status.status in _FATAL:
                raise ReplayFailed(f"{endpoint}: {status.status.name}: {status.message}", status.status.name)
            if status.status is ReplayStatus.END or (status.status is ReplayStatus.OK and packets):
                return status, packets
            if status.status is ReplayStatus.OK:
                wait, deadline = NOT_YET_S, clock() + NOT_YET_S + replay.stall_s
                break
            logger.debug("replay service %s: %s %s", endpoint, status.status.name, status.message)
        sleep(wait)
    raise ReplayFailed(f"channel {replay.channel}: no replay service gave the window after msg_seq {after}")


def _events(packet: bytes, replay: TimeReplay) -> list[Event]:
    # One packet's messages as the live stream hands them out.
    try:
        header = wire.decode_header(packet)
        blocks = wire.decode_blocks(packet, header)
    except wire.WireError as exc:
        raise ProtocolError("packet", f"replay packet: {exc}") from exc
    if header.channel != replay.channel:
        raise ProtocolError("packet", f"replay packet of channel {header.channel}, not {replay.channel}")
    out: list[Event] = []
    kind = SessionBoundaryDelivery if header.is_end_of_session else Delivery
    for i, (stream, seq, start, end) in enumerate(blocks):
        msg_seq = header.first_seq + i
        if stream == wire.TOMBSTONE_STREAM:
            out.append(
                Purged.from_tombstone(
                    header.channel,
                    msg_seq,
                    packet[start:end],
                    delayed=False,
                    channel_name=replay.channel_name,
                )
            )
            continue
        delivery = kind(
            header.channel,
            msg_seq,
            stream,
            seq,
            header.adapter,
            header.term,
            header.send_time_ns,
            packet,
            start,
            end,
        )
        if isinstance(delivery, SessionBoundaryDelivery):
            out.extend(boundary_events(delivery, replay.channel_name))
        else:
            out.append(delivery)
    return out


def _wait_until(when: float, clock: Callable[[], float], sleep: Callable[[float], None]) -> None:
    left = when - clock()
    if left > 0:
        sleep(left)


def to_ns(value: datetime | float) -> int:
    """A time as ns since the Unix epoch: a ``datetime`` (naive: UTC) or seconds since the epoch."""
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        delta = aware - datetime(1970, 1, 1, tzinfo=UTC)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000
    return round(float(value) * 1e9)
