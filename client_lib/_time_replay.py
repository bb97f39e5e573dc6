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

What is handed out is what the live stream carried: a :class:`Delivery` per
message, :class:`SessionEnded` and :class:`SessionStarted` for an
end-of-session block, :class:`Purged` for a purged message.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from feedha.admin_client import Route
from feedha.client._feed_core import _SymbolFilter
from feedha.client._sessions import boundary_events
from feedha.client.errors import ConfigError, ProtocolError, ReplayFailed
from feedha.client.events import Delivery, Event, Purged, SessionBoundaryDelivery, StatusEvent
from feedha.client.replay_client import ReplayClient
from feedha.proto import wire
from feedha.proto.replay import ReplayStatus, ReplyStatus, time_request

__all__ = ["ReplayFailed", "TimeReplay", "plan", "replay_window", "to_ns", "wanted_only"]

logger = logging.getLogger(__name__)

STALL_S: Final = 10.0  # no page from any service for this long: the replay fails
RETRY_S: Final = 0.02  # every service refused (busy, failed): wait this long before asking again
NOT_YET_S: Final = 0.1  # the window's end is still to come and the journal has nothing newer yet
_FATAL: Final = (ReplayStatus.NOT_ENTITLED, ReplayStatus.BAD_REQUEST)
PAGE_TIMEOUT_S: Final = 2.0  # one page (up to 1 MiB) from one service
PREFETCH: Final = 2  # pages a paced replay holds ahead of the one it hands out


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


def replay_window(
    client: ReplayClient,
    replay: TimeReplay,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Delivery | StatusEvent]:
    """Hand out the window's messages in msg_seq order, page by page (see the module docstring).

    Raises:
        ReplayFailed: a service refused the request, or none answered for ``stall_s``.
    """
    pages = _pages(client, replay, clock=clock, sleep=sleep)
    if replay.speed is None:
        for _status, packets in pages:
            for packet in packets:
                yield from _events(packet, replay)
        return
    # Paced: pages are fetched ahead on a thread (PREFETCH pages at most), so a page's
    # round trip never makes the messages due meanwhile late; the replay's clock starts
    # when the first page is in.
    with _Prefetch(pages) as ahead:
        began = None
        for _status, packets in ahead:
            began = clock() if began is None else began
            for packet in packets:
                events = _events(packet, replay)
                if events:
                    sent = wire.decode_header(packet).send_time_ns
                    _wait_until(began + (sent - replay.start_ns) / 1e9 / replay.speed, clock, sleep)
                yield from events
        if began is not None:
            _wait_until(began + (replay.end_ns - replay.start_ns) / 1e9 / replay.speed, clock, sleep)


def _pages(
    client: ReplayClient,
    replay: TimeReplay,
    *,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> Iterator[tuple[ReplyStatus, list[bytes]]]:
    after = 0
    while True:
        status, packets = _next_page(client, replay, after, clock=clock, sleep=sleep)
        yield status, packets
        after = max(after, status.through)
        if status.status is ReplayStatus.END:
            return


class _Prefetch:
    """Runs a page iterator on a thread, at most :data:`PREFETCH` pages ahead of the reader."""

    def __init__(self, pages: Iterator[tuple[ReplyStatus, list[bytes]]]) -> None:
        self._pages = pages
        self._queue: queue.Queue[tuple[ReplyStatus, list[bytes]] | BaseException | None] = queue.Queue(
            PREFETCH
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="feedha-replay-prefetch", daemon=True)

    def __enter__(self) -> Iterator[tuple[ReplyStatus, list[bytes]]]:
        self._thread.start()
        return self._read()

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=STALL_S + PAGE_TIMEOUT_S)

    def _run(self) -> None:
        try:
            for page in self._pages:
                if not self._put(page):
                    return
            self._put(None)
        except BaseException as exc:  # handed to the reader, raised there
            self._put(exc)

    def _put(self, item: tuple[ReplyStatus, list[bytes]] | BaseException | None) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _read(self) -> Iterator[tuple[ReplyStatus, list[bytes]]]:
        while True:
            item = self._queue.get()
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
) -> tuple[ReplyStatus, list[bytes]]:
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


def plan(
    routes: Sequence[Route], channel: int | str, replay: TimeReplay, curve: tuple[str, str]
) -> tuple[ReplayClient, TimeReplay, Callable[[str], bool]]:
    """A replay client of the channel's replay services, the replay, and the route's symbol filter.

    Raises:
        ConfigError: no route of the subscription carries ``channel``, or it names no replay service.
    """
    found = [r for r in routes if channel in (r.channel_number, r.channel_name)]
    if not found:
        known = ", ".join(sorted({f"{r.channel_name} ({r.channel_number})" for r in routes})) or "none"
        raise ConfigError("channel", channel, f"no route of the subscription carries it (routes: {known})")
    route = found[0]
    services = tuple(
        dict.fromkeys(line.replay_endpoint for r in found for line in r.lines if line.replay_endpoint)
    )
    if not services:
        raise ConfigError(
            "channel", channel, "its lines name no replay service (the adapters keep no journal)"
        )
    keys = {line.replay_endpoint: line.curve_server_key for r in found for line in r.lines}
    client = ReplayClient(
        {route.channel_number: services},
        timeout=PAGE_TIMEOUT_S,
        budget=PAGE_TIMEOUT_S,
        server_keys=keys,
        curve_keypair=curve if any(keys.values()) else None,
    )
    named = TimeReplay(
        route.channel_number,
        replay.start_ns,
        replay.end_ns,
        replay.speed,
        channel_name=route.channel_name,
        stall_s=replay.stall_s,
    )
    return client, named, _SymbolFilter(route.symbols).is_wanted


def wanted_only(
    events: Iterator[Delivery | StatusEvent], wanted: Callable[[str], bool]
) -> Iterator[Delivery | StatusEvent]:
    """The events of the symbols ``wanted`` (the subscription's), as the live stream hands them out."""
    for event in events:
        if isinstance(event, Delivery):
            try:
                if wanted(event.update.symbol):
                    yield event
            except ProtocolError:
                logger.info("replay: msg_seq %d does not decode: skipped", event.msg_seq)
        elif isinstance(event, Purged):
            if wanted(event.symbol):
                yield event
        else:
            yield event
