"""The replay service: answers "messages first..last of channel C" from the adapter's journal.

The protocol (request and reply frames) is :mod:`proto.replay`, a public
contract documented byte by byte in docs/journal.md and docs/wire-format.md. :class:`ReplayService`
reads the journal through an injected reader; the runner owns the socket.
A session-boundary record goes back as the line carried it: alone in its
packet, with the end-of-session flag. A snapshot request (kind 3) is answered
with parts of the channel's image (:mod:`adapter.snapshot`).

Both range kinds honour purges: a purged message goes out as a tombstone
block in its place. A *delayed range* (kind 2) is served only as far as the
delay has passed -- what the delayed line has had time to send -- and with
``FLAG_DELAYED`` on its packets; a key entitled to delayed data only may ask
for nothing else (``NOT_ENTITLED``) -- but for time ranges that ended at least
the delay ago. A *time range* (kind 4: the messages published in a window,
docs/wire-format.md) is answered a page at a time by
:mod:`adapter.replay_window`, from where the journal's time index says the
window starts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from feedha.adapter.core.purge import PurgeTable, purged_block
from feedha.adapter.core.records import RecordLike
from feedha.adapter.core.session import RECORD_SESSION_BOUNDARY
from feedha.adapter.replay_limits import ReplayLimits, TokenBucket
from feedha.adapter.replay_window import Page, Window, pack_window
from feedha.adapter.snapshot import ImageBuilder
from feedha.proto import wire
from feedha.proto.replay import (
    MAX_PACKETS,
    ReplayProtocolError,
    ReplayRequest,
    ReplayStatus,
    ReplyStatus,
    decode_request,
    encode_status,
)

__all__ = ["JournalSource", "ReplayCounters", "ReplayLimits", "ReplayService", "TokenBucket"]

logger = logging.getLogger(__name__)


class JournalSource(Protocol):
    """Reads a journal by msg_seq (``adapter.journal.JournalReader`` fits)."""

    def read(self, from_seq: int = 0, to_seq: int | None = None) -> Iterable[RecordLike]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayCounters:
    """What the service has answered so far."""

    requests: int = 0
    messages: int = 0
    packets: int = 0
    unavailable: int = 0
    errors: int = 0
    busy: int = 0
    images: int = 0  # snapshot requests answered with parts of an image
    not_entitled: int = 0  # real-time requests from keys entitled to delayed data only
    delayed: int = 0  # delayed-range requests answered
    tombstones: int = 0  # purged messages sent as tombstones
    windows: int = 0  # pages of time ranges answered
    skipped_bytes: int = 0  # journal bytes read and not sent (a window's records before its start)


class ReplayService:
    """Answers replay requests from one adapter's journal (the runner moves the frames).

    Args:
        journal: the journal reader.
        channel: the channel number served.
        adapter: this adapter's number (stamped on the packets).
        max_packet_bytes: packet budget, header included.
        max_bytes: the most packet bytes one reply carries.
        bounds: returns ``(oldest, newest)`` msg_seq the journal holds (0, 0 when empty).
        before_read: called with the request's last msg_seq when a read came up
            short of what the journal's writer holds, so the owner can flush
            records its writer still buffers; the read is then done again.
        images: builds the channel's images for snapshot requests (``None``: refused).
        purges: returns the adapter's purges as the loop last handed them over (frozen); ``None``: none.
        delay_ns: the delayed line's delay (``None``: no delayed stream: delayed ranges are refused).
        time_index: where to start reading for a time (``JournalWriter.time_index.start_for``;
            ``None``: time ranges read the journal from its start).
    """

    def __init__(
        self,
        journal: JournalSource,
        *,
        channel: int,
        adapter: int,
        max_packet_bytes: int,
        max_bytes: int,
        bounds: Callable[[], tuple[int, int]],
        before_read: Callable[[int], None] | None = None,
        images: ImageBuilder | None = None,
        purges: Callable[[], PurgeTable] | None = None,
        delay_ns: int | None = None,
        time_index: Callable[[int], int] | None = None,
    ) -> None:
        if max_bytes < max_packet_bytes:
            raise ValueError(f"max_bytes ({max_bytes}) must hold one packet ({max_packet_bytes})")
        self._journal = journal
        self._channel = channel
        self._adapter = adapter
        self._max_packet_bytes = max_packet_bytes
        self._max_bytes = max_bytes
        self._bounds = bounds
        self._before_read = before_read
        self._images = images
        self._purges = purges
        self._delay_ns = delay_ns
        self._time_index = time_index
        self.counters = ReplayCounters()

    def __repr__(self) -> str:
        c = self.counters
        return (
            f"<ReplayService [channel={self._channel}, requests={c.requests}, messages={c.messages}, "
            f"unavailable={c.unavailable}]>"
        )

    def answer(
        self, frames: Sequence[bytes], *, term: int, send_time_ns: int, delayed_only: bool = False
    ) -> list[bytes]:
        """Answer one request message.

        Args:
            frames: the ZeroMQ message as the ROUTER received it (envelope, then the body).
            term: this adapter's term (stamped on the packets).
            send_time_ns: the send time stamped on the packets, and the clock a delayed
                range is served by (what is past its delay at this time).
            delayed_only: the asking key is entitled to delayed data only.

        Returns:
            The reply message: the envelope, the status frame, the packets.
        """
        c = self.counters
        envelope, body = list(frames[:-1]), frames[-1] if frames else b""
        try:
            request = decode_request(body)
        except ReplayProtocolError as exc:
            self.counters = _bump(c, requests=1, errors=1)
            return envelope + [self._status(ReplayStatus.BAD_REQUEST, None, str(exc))]
        refusal = self._refusal(request, delayed_only, send_time_ns)
        if refusal is not None:
            return envelope + [refusal]
        if request.is_snapshot:
            return envelope + self._answer_snapshot(request, now=send_time_ns / 1e9)
        if request.is_time_range:
            return envelope + self._answer_window(request, now_ns=send_time_ns, term=term)
        try:
            packets, through, short = self._collect(request, term=term, send_time_ns=send_time_ns)
            if short and self._before_read is not None:
                # Flushing costs a wait on the writer's thread, so only when needed.
                self._before_read(request.last_seq)
                packets, through, short = self._collect(request, term=term, send_time_ns=send_time_ns)
        except Exception as exc:  # a damaged journal must not take the adapter down
            logger.warning("replay of %r failed: %s", request, exc)
            self.counters = _bump(self.counters, requests=1, errors=1)
            return envelope + [self._status(ReplayStatus.ERROR, request, f"journal read failed: {exc}")]
        if not packets:
            self.counters = _bump(self.counters, requests=1, unavailable=1)
            return envelope + [self._status(ReplayStatus.UNAVAILABLE, request, self._unavailable(request))]
        messages = sum(wire.decode_header(p).count for p in packets)
        delayed = 1 if request.is_delayed else 0
        self.counters = _bump(
            self.counters, requests=1, messages=messages, packets=len(packets), delayed=delayed
        )
        return (
            envelope
            + [self._status(ReplayStatus.OK, request, "", through=through, count=len(packets))]
            + packets
        )

    def _answer_snapshot(self, request: ReplayRequest, *, now: float) -> list[bytes]:
        # The newest image (or the one asked for, while it is held), from the part asked
        # for, as many parts as fit in one reply.
        c = self.counters
        if self._images is None:
            self.counters = _bump(c, requests=1, errors=1)
            message = "this service serves no images (the adapter has no journal to build them from)"
            return [self._status(ReplayStatus.BAD_REQUEST, request, message)]
        try:
            image = (
                self._images.kept(request.first_seq) if request.first_seq else self._images.newest(now=now)
            )
        except Exception as exc:  # a damaged journal must not take the adapter down
            logger.warning("image for %r failed: %s", request, exc)
            self.counters = _bump(c, requests=1, errors=1)
            return [self._status(ReplayStatus.ERROR, request, f"journal read failed: {exc}")]
        if image is None or request.last_seq >= len(image.parts):
            self.counters = _bump(c, requests=1, unavailable=1)
            if image is None and request.first_seq:
                why = f"the image at msg_seq {request.first_seq} is no longer held: ask for the newest (0)"
            elif image is None:
                why = "no image yet: the journal has no checkpoint, or does not start at msg_seq 1"
            else:
                held = f"the image at msg_seq {image.msg_seq} has {len(image.parts)} parts"
                why = f"{held}; there is no part {request.last_seq}"
            return [self._status(ReplayStatus.UNAVAILABLE, request, why)]
        parts: list[bytes] = []
        total = 0
        for part in image.parts[request.last_seq :]:
            if parts and (total + len(part) > self._max_bytes or len(parts) >= MAX_PACKETS):
                break
            parts.append(part)
            total += len(part)
        self.counters = _bump(c, requests=1, images=1, packets=len(parts))
        status = self._status(ReplayStatus.OK, request, "", through=image.msg_seq, count=len(parts))
        return [status, *parts]

    def _refusal(self, request: ReplayRequest, delayed_only: bool, now_ns: int) -> bytes | None:
        c = self.counters
        if request.channel != self._channel:
            self.counters = _bump(c, requests=1, errors=1)
            message = f"this service serves channel {self._channel}, not {request.channel}"
            return self._status(ReplayStatus.WRONG_CHANNEL, request, message)
        if delayed_only and request.is_time_range:
            return self._window_refusal(request, now_ns)
        if delayed_only and not request.is_delayed:
            self.counters = _bump(c, requests=1, not_entitled=1)
            message = "this key is entitled to delayed data only: ask for a delayed range (kind 2)"
            return self._status(ReplayStatus.NOT_ENTITLED, request, message)
        if request.is_delayed and self._delay_ns is None:
            self.counters = _bump(c, requests=1, unavailable=1)
            return self._status(ReplayStatus.UNAVAILABLE, request, "this adapter serves no delayed stream")
        return None

    def _window_refusal(self, request: ReplayRequest, now_ns: int) -> bytes | None:
        # A key entitled to delayed data only may replay what the delayed stream has
        # carried: a window that ends at least the delay ago.
        if self._delay_ns is not None and request.last_seq <= now_ns - self._delay_ns:
            return None
        self.counters = _bump(self.counters, requests=1, not_entitled=1)
        if self._delay_ns is None:
            message = "this key is entitled to delayed data only, and this adapter serves no delayed stream"
        else:
            horizon = now_ns - self._delay_ns
            message = (
                f"this key is entitled to delayed data only: a window must end by now - delay "
                f"({self._delay_ns / 1e9:g} s), at or before {horizon} ns; it ends at {request.last_seq}"
            )
        return self._status(ReplayStatus.NOT_ENTITLED, request, message)

    def _answer_window(self, request: ReplayRequest, *, now_ns: int, term: int) -> list[bytes]:
        # One page of a time window: from where the time index says it starts, or after
        # what the client has. A page that ran to the end of what was written, short of
        # what the writer holds, is read again after a flush.
        window = Window(
            start_ns=request.first_seq,
            end_ns=request.last_seq,
            after_seq=request.after_seq,
            now_ns=now_ns,
            max_packet_bytes=self._max_packet_bytes,
            max_bytes=self._max_bytes,
        )
        skipped = 0  # what the reads skipped, charged to the asker whether they fail or not
        try:
            page = self._page(window, term=term)
            skipped += page.skipped_bytes
            if not page.complete and not page.cut and self._before_read is not None:
                if page.newest_read < self._bounds()[1]:
                    self._before_read(self._bounds()[1])
                    page = self._page(window, term=term)
                    skipped += page.skipped_bytes
        except Exception as exc:  # a damaged journal must not take the adapter down
            logger.warning("replay of %r failed: %s", request, exc)
            self.counters = _bump(self.counters, requests=1, errors=1, skipped_bytes=skipped)
            return [self._status(ReplayStatus.ERROR, request, f"journal read failed: {exc}")]
        self.counters = _bump(
            self.counters,
            requests=1,
            windows=1,
            messages=page.messages,
            packets=len(page.packets),
            skipped_bytes=skipped,
        )
        status = ReplayStatus.END if page.complete else ReplayStatus.OK
        reply = self._status(status, request, "", through=page.through, count=len(page.packets))
        return [reply, *page.packets]

    def _page(self, window: Window, *, term: int) -> Page:
        start = window.after_seq + 1
        if self._time_index is not None:
            start = max(start, self._time_index(window.start_ns))

        def seal(builder: wire.PacketBuilder, extra: int, time_ns: int) -> bytes:
            return builder.build(
                channel=self._channel,
                adapter=self._adapter,
                term=term,
                send_time_ns=time_ns,
                flags=wire.FLAG_RETRANSMISSION | extra,
            )

        return pack_window(self._journal.read(start), window, seal, self._block)

    def _unavailable(self, request: ReplayRequest) -> str:
        oldest, newest = self._bounds()
        held = f"{oldest}..{newest}" if newest else "nothing"
        first, last, channel = request.first_seq, request.last_seq, self._channel
        if request.is_delayed:
            return (
                f"msg_seq {first}..{last} of channel {channel} is not on the delayed stream: not yet "
                f"past its delay, or not in this journal (it holds {held})"
            )
        return f"msg_seq {first}..{last} of channel {channel} is not in this journal (it holds {held})"

    def busy(self, frames: Sequence[bytes]) -> list[bytes]:
        """The cheap reply to a request over its peer's or the service's budget (BUSY: ask later)."""
        self.counters = _bump(self.counters, requests=1, busy=1)
        message = "over the replay budget: ask again later or ask another line's service"
        return [*frames[:-1], self._status(ReplayStatus.BUSY, None, message)]

    def _collect(
        self, request: ReplayRequest, *, term: int, send_time_ns: int
    ) -> tuple[list[bytes], int, bool]:
        # Strategy: one pass over the journal from first_seq, cutting a packet
        # at a msg_seq hole or when it is full, and the reply at max_bytes.
        # ``through`` is the last msg_seq covered: past the last record read
        # when the read ran to last_seq (holes up to last are then known to be
        # absent), or the last record packed when the reply was cut. ``short``:
        # the read ended before records the writer says it holds.
        packets: list[bytes] = []
        builder = wire.PacketBuilder(self._max_packet_bytes)
        total = 0
        through = request.last_seq
        short = False
        last_packed = request.first_seq - 1
        newest_read = request.first_seq - 1
        flags = wire.FLAG_RETRANSMISSION | (wire.FLAG_DELAYED if request.is_delayed else 0)
        # A delayed range stops at the first message whose delay has not passed.
        due_before = send_time_ns - self._delay_ns if request.is_delayed and self._delay_ns else None

        def seal(extra: int = 0) -> None:
            nonlocal total
            packet = builder.build(
                channel=self._channel,
                adapter=self._adapter,
                term=term,
                send_time_ns=send_time_ns,
                flags=flags | extra,
            )
            packets.append(packet)
            total += len(packet)

        for record in self._journal.read(request.first_seq, request.last_seq):
            if due_before is not None and record.time_ns > due_before:
                through = last_packed
                break
            newest_read = record.msg_seq
            stream, source_seq, payload = self._block(record)
            size = wire.BLOCK_OVERHEAD + len(payload)
            boundary = record.flags & RECORD_SESSION_BOUNDARY
            contiguous = builder.count and record.msg_seq == builder.first_seq + builder.count
            if builder.count and (boundary or not contiguous or not builder.fits(len(payload))):
                seal()
            if total + wire.HEADER_SIZE + size > self._max_bytes or len(packets) >= MAX_PACKETS:
                through = last_packed
                break
            builder.add(record.msg_seq, stream, source_seq, payload)
            last_packed = record.msg_seq
            if boundary:  # the end-of-session block goes alone, flagged, as on the line
                seal(wire.FLAG_END_OF_SESSION)
        else:
            # Ran to last_seq, or to the end of what the journal holds: every
            # msg_seq up to here that is not in the packets is not in this journal.
            _oldest, newest = self._bounds()
            through = request.last_seq if newest >= request.last_seq else max(newest_read, newest)
            short = newest_read < min(newest, request.last_seq)
        if builder.count:
            seal()
        return packets, max(min(through, request.last_seq), request.first_seq - 1), short

    def _block(self, record: RecordLike) -> tuple[int, int, bytes]:
        # A purged message goes out as a tombstone, on either stream: retransmission honours purges.
        tombstone = purged_block(record, None if self._purges is None else self._purges())
        if tombstone is None:
            return record.source_stream, record.source_seq, record.payload
        self.counters = _bump(self.counters, tombstones=1)
        return tombstone

    def _status(
        self,
        status: ReplayStatus,
        request: ReplayRequest | None,
        message: str,
        *,
        through: int = -1,
        count: int = 0,
    ) -> bytes:
        oldest, newest = self._bounds()
        first = 0 if request is None else request.first_seq
        if request is not None and request.is_time_range:
            first = request.after_seq + 1  # a time range: the first msg_seq the reply could hold
        return encode_status(
            ReplyStatus(
                status=status,
                channel=self._channel,
                packet_count=count,
                request_id=0 if request is None else request.request_id,
                first_seq=first,
                through=max(through, first - 1, 0),
                oldest_seq=oldest,
                newest_seq=newest,
                message=message,
            )
        )


def _bump(counters: ReplayCounters, **deltas: int) -> ReplayCounters:
    values = {name: getattr(counters, name) + deltas.get(name, 0) for name in counters.__dataclass_fields__}
    return ReplayCounters(**values)
