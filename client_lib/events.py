"""What a channel's arbitration reports: its configuration and events (its counters: ``arbiter_stats.py``).

These are the public types of :mod:`client_lib.arbiter` (re-exported by
``client_lib``): :class:`ChannelArbiter` returns the events, subscribers
pass them on, and applications match on them. Plain frozen data, no logic
beyond the lazy protobuf decode of a :class:`Delivery`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from google.protobuf.message import DecodeError

from feedha.client._payload_fields import read_int64_field
from feedha.client.errors import ConfigError, ProtocolError
from feedha.proto import market_pb2
from feedha.proto.wire import FLAG_END_OF_INTERVAL

FILL_TIMEOUT_S: Final = 0.05
LOSS_TIMEOUT_S: Final = 0.5
MAX_BUFFERED: Final = 100_000
CONFLICT_WINDOW: Final = 65_536
_MAX_U16: Final = 0xFFFF


@dataclass(frozen=True, slots=True, kw_only=True)
class ArbiterConfig:
    """Settings of one channel's arbiter.

    Args:
        channel: the channel number packets must carry; ``None`` adopts the
            number of the first well-formed packet.
        fill_timeout: seconds a hole may stay open before retransmission is asked.
        loss_timeout: seconds after which an unfilled hole is declared lost.
        start_seq: first ``msg_seq`` to deliver; ``None`` starts at the first
            packet seen.
        max_buffered: reorder-buffer bound in messages; overflow declares the
            oldest hole lost.
        conflict_window: how many delivered ``msg_seq`` are remembered to check
            late copies for conflicts.
        name: the channel's name, put on the status events ("" when unknown).
        delayed: the channel's delayed stream (its delayed lines): only packets flagged
            delayed are taken, deliveries are :class:`DelayedDelivery`, gaps are asked of
            the replay services as delayed ranges.
        conflated: the channel's conflated stream (its conflated lines): only packets flagged
            conflated are taken, numbered by conf_seq, delivered as :class:`ConflatedDelivery`;
            a hole is never asked of a replay service (the next interval carries fresh states).
    """

    channel: int | None = None
    fill_timeout: float = FILL_TIMEOUT_S
    loss_timeout: float = LOSS_TIMEOUT_S
    start_seq: int | None = None
    max_buffered: int = MAX_BUFFERED
    conflict_window: int = CONFLICT_WINDOW
    name: str = ""
    delayed: bool = False
    conflated: bool = False

    def __post_init__(self) -> None:
        if self.delayed and self.conflated:
            raise ConfigError("conflated", self.conflated, "a stream is delayed or conflated, not both")
        if self.channel is not None and not 0 <= self.channel <= _MAX_U16:
            raise ConfigError("channel", self.channel, "must be a u16 channel number")
        if not self.fill_timeout > 0:
            raise ConfigError("fill_timeout", self.fill_timeout, "must be > 0")
        if not self.loss_timeout >= self.fill_timeout:
            raise ConfigError("loss_timeout", self.loss_timeout, "must be >= fill_timeout")
        if self.start_seq is not None and self.start_seq < 0:
            raise ConfigError("start_seq", self.start_seq, "must be >= 0")
        if self.max_buffered < 1:
            raise ConfigError("max_buffered", self.max_buffered, "must be >= 1")
        if self.conflict_window < 1:
            raise ConfigError("conflict_window", self.conflict_window, "must be >= 1")


_EVENT_TIME_FIELD: Final = market_pb2.MarketUpdate.DESCRIPTOR.fields_by_name["event_time_ns"].number


class Delivery:
    """One message to hand to the application, in ``msg_seq`` order.

    Attributes:
        channel: channel number.
        msg_seq: the message's channel sequence number.
        source_stream: source-stream number from the block header.
        source_seq: source sequence number from the block header.
        line: the line that supplied the first copy.
        term: the term of the packet that carried the first copy.
        send_time_ns: that packet's send time, ns since the Unix epoch.
    """

    # A plain slotted class, not a dataclass: one is built per message on the
    # hot path, and the payload stays a slice of the packet until asked for.
    # The arbiter's fast path skips __init__ (object.__new__ and the stores
    # inline: ~0.15 us less per message); ``_update`` is None until decoded.
    # Every builder stores it (__init__, _live_blocks.py and its C twin):
    # reading an unset slot raises, and catching that cost ~1.4 us a message.
    __slots__ = (
        "channel",
        "msg_seq",
        "source_stream",
        "source_seq",
        "line",
        "term",
        "send_time_ns",
        "_packet",
        "_start",
        "_end",
        "_update",
    )
    channel: int
    msg_seq: int
    source_stream: int
    source_seq: int
    line: int
    term: int
    send_time_ns: int
    _packet: bytes
    _start: int
    _end: int
    _update: market_pb2.MarketUpdate | None
    is_image = False  # an image's symbol (feedha.client.images.ImageDelivery), not a message

    def __init__(
        self,
        channel: int,
        msg_seq: int,
        source_stream: int,
        source_seq: int,
        line: int,
        term: int,
        send_time_ns: int,
        packet: bytes,
        start: int,
        end: int,
    ) -> None:
        self.channel = channel
        self.msg_seq = msg_seq
        self.source_stream = source_stream
        self.source_seq = source_seq
        self.line = line
        self.term = term
        self.send_time_ns = send_time_ns
        self._packet = packet
        self._start = start
        self._end = end
        self._update = None

    @property
    def payload(self) -> bytes:
        """The protobuf-encoded application message."""
        return self._packet[self._start : self._end]

    @property
    def update(self) -> market_pb2.MarketUpdate:
        """The decoded ``MarketUpdate`` (decoded on first access, then cached).

        Raises:
            ProtocolError: the payload is not a valid ``MarketUpdate``.
        """
        update = self._update
        if update is None:
            try:
                update = market_pb2.MarketUpdate.FromString(self.payload)
            except DecodeError as exc:
                raise ProtocolError("payload", f"msg_seq {self.msg_seq}: {exc}") from exc
            self._update = update
        return update

    @property
    def event_time_ns(self) -> int:
        """The time the source stamped on the event (``update.event_time_ns``), ns since the Unix epoch.

        Read from the payload without decoding the rest (a latency probe's one field,
        ~0.24 µs against ~1.2-2.4 for :attr:`update`); from the decoded update once there is one.
        A payload it cannot walk plainly is decoded whole, so a malformed one raises as
        :attr:`update` does; it does not check the fields it skips.

        Raises:
            ProtocolError: the payload is not a valid ``MarketUpdate``.
        """
        update = self._update
        if update is None:
            value = read_int64_field(self._packet, self._start, self._end, _EVENT_TIME_FIELD)
            if value is not None:
                return value
            update = self.update
        return update.event_time_ns

    # A delivery from the delayed stream is a DelayedDelivery (same slots): no per-message cost.
    delayed: bool = False
    conflated: bool = False  # a ConflatedDelivery: msg_seq is the conf_seq

    def __repr__(self) -> str:
        kind = type(self).__name__
        return (
            f"<{kind} [channel={self.channel}, msg_seq={self.msg_seq}, "
            f"source={self.source_stream}:{self.source_seq}, line={self.line}, term={self.term}]>"
        )


class DelayedDelivery(Delivery):
    """A :class:`Delivery` from a channel's delayed stream (``delayed`` is True)."""

    __slots__ = ()
    delayed = True


class ConflatedDelivery(Delivery):
    """A symbol's state at the end of a conflation interval, from a channel's conflated stream.

    ``msg_seq`` is the conflated number (conf_seq, gap-free on the conflated stream);
    :attr:`boundary_msg_seq` the real-time msg_seq the state is at (the interval's end);
    ``update`` a ``MarketUpdate`` with the symbol and its state only, ``publish_time_ns``
    the interval's end.
    """

    __slots__ = ()
    conflated = True

    @property
    def boundary_msg_seq(self) -> int:
        """The real-time msg_seq this state is at: the symbol's state right after it."""
        return self.source_seq

    @property
    def ends_interval(self) -> bool:
        """Whether this is the interval's last state (the last block of its last packet)."""
        packet = self._packet
        return bool(packet[3] & FLAG_END_OF_INTERVAL) and self._end == len(packet)


@dataclass(frozen=True, slots=True)
class StatusEvent:
    """Something about a channel's stream rather than a message in it (EMA's status messages).

    Every status event names its channel by number; the subscribers also fill
    in ``channel_name`` (keyword-only, not compared). A new kind is one more
    subclass: :class:`~feedha.client.FeedClient` hands on every ``StatusEvent``
    to the application's iterator and callbacks without knowing it.
    """

    channel: int
    channel_name: str = field(default="", kw_only=True, compare=False)


@dataclass(frozen=True, slots=True)
class RetransmissionNeeded(StatusEvent):
    """A gap: a hole stayed open for ``fill_timeout``, and a replay service is asked for it.

    ``delayed``: a gap in the delayed stream (ask for a delayed range).
    """

    first_seq: int
    last_seq: int
    delayed: bool = field(default=False, kw_only=True)

    @property
    def count(self) -> int:
        return self.last_seq - self.first_seq + 1


@dataclass(frozen=True, slots=True)
class GapLost(StatusEvent):
    """A hole was given up (``loss_timeout`` or buffer overflow); delivery moved on."""

    first_seq: int
    last_seq: int

    @property
    def count(self) -> int:
        return self.last_seq - self.first_seq + 1


@dataclass(frozen=True, slots=True)
class Recovered(StatusEvent):
    """A gap (a :class:`RetransmissionNeeded`) was filled by retransmission.

    ``recovered`` of its ``first_seq..last_seq`` came back; ``missing`` are
    still in holes (they are retried until ``loss_timeout``, then lost).
    """

    first_seq: int
    last_seq: int
    recovered: int
    missing: int = 0


@dataclass(frozen=True, slots=True)
class Conflict(StatusEvent):
    """Two copies of one ``msg_seq`` named different source messages; the first was kept."""

    msg_seq: int
    line: int
    kept: tuple[int, int]
    rejected: tuple[int, int]


@dataclass(frozen=True, slots=True)
class TermChanged(StatusEvent):
    """The term the channel follows changed; live packets of a lower term are now stale.

    Up at a promotion (failover) that a majority of the lines shows (``line``: the
    line whose packet made the majority) or that a route update carries (``line``
    -1); back down when a term the lines followed loses its majority (a forger's,
    or a lone line's that the routes never confirmed). docs/wire-format.md has the rule.
    """

    old_term: int
    new_term: int
    line: int


@dataclass(frozen=True, slots=True)
class EndOfSession(StatusEvent):
    """The first end-of-session packet seen on the channel."""

    line: int
    next_seq: int


@dataclass(frozen=True, slots=True)
class Stale(StatusEvent):
    """No packet (not even a heartbeat) on any line of the channel for ``silent_s`` seconds."""

    silent_s: float


@dataclass(frozen=True, slots=True)
class Resumed(StatusEvent):
    """Packets flow again on a channel that was :class:`Stale`, after ``silent_s`` seconds."""

    silent_s: float


@dataclass(frozen=True, slots=True)
class Conflated(StatusEvent):
    """``FeedClient(on_slow="conflate")`` fell ``lag_s`` behind on this channel: it left the
    real-time lines (their queues with them) and reads the conflated line until it is current."""

    lag_s: float


@dataclass(frozen=True, slots=True)
class RealTime(StatusEvent):
    """A conflated client (:class:`Conflated`) is current again: real time resumes at ``msg_seq``
    (the msg_seq after the last interval it delivered; the journal fills the seam)."""

    msg_seq: int


@dataclass(frozen=True, slots=True)
class EntitlementChanged(StatusEvent):
    """The admin server narrowed or widened what this client receives on the channel.

    ``symbols`` are the symbols or patterns delivered from now on (empty: none,
    the channel was withdrawn); ``added`` and ``removed`` are the difference;
    ``delayed``: on the channel's delayed stream.
    """

    symbols: tuple[str, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]
    delayed: bool = field(default=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class Purged(StatusEvent):
    """The message at ``msg_seq`` was purged by an operator before the delayed line delivered it.

    It comes in the message's place (a tombstone on the line), so delivery stays in
    ``msg_seq`` order with no gap. ``symbol`` is the purged message's, ``purge_id`` the
    purge's number in the channel, ``reason`` the operator's; ``delayed`` says on which
    stream (a retransmission of the real-time stream honours purges too). A ``fix44``
    message may carry several symbols: ``symbol`` is then empty and ``symbols`` names
    them (a feed client keeps only the ones it subscribed to).
    """

    msg_seq: int
    symbol: str
    purge_id: int
    reason: str
    delayed: bool = field(default=False, kw_only=True)
    symbols: tuple[str, ...] = field(default=(), kw_only=True)

    @classmethod
    def from_tombstone(
        cls, channel: int, msg_seq: int, payload: bytes, *, delayed: bool, channel_name: str = ""
    ) -> Purged:
        """The event of a tombstone block (an undecodable payload gives an empty symbol and reason)."""
        try:
            tombstone = market_pb2.Tombstone.FromString(payload)
        except DecodeError:
            tombstone = market_pb2.Tombstone()
        return cls(
            channel,
            msg_seq,
            tombstone.symbol,
            tombstone.purge_id,
            tombstone.reason,
            delayed=delayed,
            channel_name=channel_name,
            symbols=tuple(tombstone.symbols),
        )


class SessionBoundaryDelivery(Delivery):
    """The end-of-session block of a channel (a packet with flag bit 2), as the arbiter delivers it.

    Subscribers hand it on as :class:`SessionEnded` and :class:`SessionStarted`, in its place.
    """

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class SessionEnded(StatusEvent):
    """The trading session ``session`` ended: ``msg_seq`` is its end-of-session block.

    Delivered in order: every message before it belongs to the session that ended.
    ``reason`` is ``"schedule"`` (its time of day came) or ``"operator"``.
    """

    session: int
    msg_seq: int
    time_ns: int
    reason: str


@dataclass(frozen=True, slots=True)
class SessionStarted(StatusEvent):
    """Session ``session`` began: from ``first_msg_seq`` on, daily fields (volume, high, low,
    VWAP, trade count, notional) count from zero; last, bid and ask carry over."""

    session: int
    first_msg_seq: int
    time_ns: int


@dataclass(frozen=True, slots=True)
class ImageUnavailable(StatusEvent):
    """An initial image was asked for, but no replay service had one: live updates only."""

    reason: str


@dataclass(frozen=True, slots=True)
class ModelRefused(StatusEvent):
    """A route named a message model (or a major version of it) this client cannot decode: not joined.

    ``model`` and ``version`` are as the route named them; ``reason`` says why.
    """

    model: str
    version: str
    reason: str


Event = Delivery | StatusEvent
