"""Subscribers: the ZeroMQ shell around one :class:`ChannelArbiter` per channel.

Theory of operation
-------------------
Each line of each joined channel gets its own SUB socket, subscribed to the
channel name (frames are ``[topic, packet]``), with ``RCVHWM`` set on purpose
(default :data:`RCVHWM` packets: past it ZeroMQ drops silently, and a drop is a
gap the arbiter repairs from a replay service; an application that stops
reading never grows this process without bound), a cap on the size of a
frame (``MAXMSGSIZE``: a larger one drops that connection) and ``linger`` 0. One poll loop
waits on every socket and on the earliest arbiter deadline, drains each ready
socket without blocking (up to ``batch`` messages, so one busy line cannot
starve the others), feeds the packets to the channel's arbiter and fires its
timers when due. All decisions happen in the arbiter; this module only moves
bytes and reads the clock (``time.monotonic``).

:class:`Subscriber` is the blocking API (``for event in sub``, ``poll``);
:class:`AsyncSubscriber` is the same over ``zmq.asyncio``. Both hand the
events back in the order the arbiters decided them. A state update is never
split by an ``await``: the async shell awaits only the poller, then decides
and returns synchronously, so cancellation cannot lose events.

A ``on_retransmission_needed`` hook, if given, is called (synchronously) with
each ``RetransmissionNeeded``; packets it returns are fed to the channel's
arbiter on a dedicated line (index = number of lines of the channel).
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import logging
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, Protocol

import zmq
import zmq.asyncio

from feedha.client._sessions import with_session_events
from feedha.client.arbiter import ChannelArbiter
from feedha.client.errors import ClosedError, ConfigError, TransportError
from feedha.client.events import (
    CONFLICT_WINDOW,
    FILL_TIMEOUT_S,
    LOSS_TIMEOUT_S,
    MAX_BUFFERED,
    ArbiterConfig,
    ArbiterStats,
    Delivery,
    Event,
    Recovered,
    RetransmissionNeeded,
)
from feedha.client.status import STALE_AFTER_S, ChannelLiveness
from feedha.proto.registry import is_curve_key
from feedha.proto.seal import Opener, SealError, SealKey
from feedha.transport import recv_frames

logger = logging.getLogger(__name__)

REDIAL_S: Final = 1.0  # a CURVE line silent this long is dialled again (libzmq gives up after a refusal)
RCVHWM: Final = 20_000  # packets per line (~1-2 million messages, seconds at full rate)
MAX_PACKET_FRAME_BYTES: Final = 1024 * 1024  # a packet is at most 64 KiB; far more is hostile
# Packets drained from one socket per wake-up. Small on purpose: a full
# packet carries ~50-80 messages, and every Delivery of a wake-up stays alive
# until the caller has the list; 8 packets per line keep that set under the
# garbage collector's first threshold (700) and in cache. 512 cost twice the
# CPU per message (bench/micro_client.py, queued backlog).
BATCH: Final = 8

RetransmissionHook = Callable[[RetransmissionNeeded], Iterable[bytes] | None]


@dataclass(frozen=True, slots=True)
class ChannelSpec:
    """One channel to join and the endpoints of its lines.

    Args:
        name: the channel name (the ZeroMQ topic).
        number: the channel number packets carry; ``None`` adopts the first one seen.
        endpoints: one endpoint per line, e.g. ``"tcp://10.0.0.1:5601"``.
        start_seq: first ``msg_seq`` to deliver (resume); ``None`` starts at the first packet.
        server_keys: per endpoint, the Z85 CURVE public key of its adapter ("": a plain line);
            empty: every line is plain. CURVE lines need the subscriber's key pair
            (:attr:`SubscriberConfig.curve_public`/``curve_secret``).
        seal_keys: the channel's packet keys (multicast lines, newest last); when given,
            every packet must be sealed with one of them (or a key given earlier) and any
            other packet is counted as garbage.
        delayed: the endpoints are the channel's *delayed* lines: the channel's delayed stream,
            arbitrated apart from its real-time stream (its own ``key``, ``"NAME/delayed"``),
            delivered as :class:`DelayedDelivery`, its gaps asked as delayed ranges.
    """

    name: str
    number: int | None
    endpoints: tuple[str, ...]
    start_seq: int | None = None
    server_keys: tuple[str, ...] = ()
    seal_keys: tuple[SealKey, ...] = ()
    delayed: bool = False

    @property
    def key(self) -> str:
        """The stream's name in a subscriber and its stats: the channel's, ``NAME/delayed`` if delayed."""
        return f"{self.name}/delayed" if self.delayed else self.name

    def __post_init__(self) -> None:
        if not self.name or any(ch.isspace() for ch in self.name):
            raise ConfigError("name", self.name, "channel name must be non-empty without whitespace")
        object.__setattr__(self, "endpoints", tuple(self.endpoints))
        if not self.endpoints:
            raise ConfigError("endpoints", self.endpoints, f"channel {self.name} needs at least one line")
        for endpoint in self.endpoints:
            if not isinstance(endpoint, str) or "://" not in endpoint:
                raise ConfigError("endpoints", endpoint, "expected transport://address")
        if len(set(self.endpoints)) != len(self.endpoints):
            raise ConfigError("endpoints", self.endpoints, "the same line is listed twice")
        object.__setattr__(self, "server_keys", tuple(self.server_keys))
        if self.server_keys and len(self.server_keys) != len(self.endpoints):
            raise ConfigError("server_keys", len(self.server_keys), "need one key (or '') per endpoint")
        for key in self.server_keys:
            if key and not is_curve_key(key):
                raise ConfigError("server_keys", key[:48], "not a Z85 CURVE public key (40 characters)")
        object.__setattr__(self, "seal_keys", tuple(self.seal_keys))
        if not all(isinstance(key, SealKey) for key in self.seal_keys):
            raise ConfigError("seal_keys", len(self.seal_keys), "expected proto.seal.SealKey values")

    def server_key(self, endpoint: str) -> str:
        """The CURVE key to connect to ``endpoint`` with ("": a plain line)."""
        if not self.server_keys:
            return ""
        return self.server_keys[self.endpoints.index(endpoint)]


class _LineLike(Protocol):
    @property
    def line_endpoint(self) -> str: ...


class _RouteLike(Protocol):
    @property
    def channel_name(self) -> str: ...
    @property
    def channel_number(self) -> int: ...
    @property
    def lines(self) -> Sequence[_LineLike]: ...


def channel_specs_from_routes(
    routes: Iterable[_RouteLike], *, start_seq: int | None = None
) -> list[ChannelSpec]:
    """Build :class:`ChannelSpec` from the routes the admin server hands out.

    Args:
        routes: objects with ``channel_name``, ``channel_number`` and ``lines``
            (each with ``line_endpoint``), e.g. ``client_lib.AdminClient`` routes.
        start_seq: first ``msg_seq`` to deliver on every channel (resume).

    Raises:
        ConfigError: a route without lines or with a bad endpoint.
    """
    specs = []
    for route in routes:
        keys = tuple(getattr(line, "curve_server_key", "") for line in route.lines)
        endpoints = tuple(line.line_endpoint for line in route.lines)
        specs.append(
            ChannelSpec(
                route.channel_name,
                route.channel_number,
                endpoints,
                start_seq=start_seq,
                server_keys=keys if any(keys) else (),
                seal_keys=tuple(getattr(route, "seal_keys", ())),
            )
        )
    return specs


@dataclass(frozen=True, slots=True)
class LineSpec:
    """One line, as the admin server hands it out; lines of one channel are grouped.

    Args:
        endpoint: where the line's PUB socket is.
        channel: the channel name (topic).
        channel_number: the channel number packets carry (``None``: adopt).
    """

    endpoint: str
    channel: str
    channel_number: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriberConfig:
    """Socket and arbitration settings shared by every channel of a subscriber.

    Args:
        rcvhwm: ZeroMQ receive high-water mark in messages (0 = unbounded).
        rcvbuf: kernel receive buffer in bytes (0 = OS default; raise it for multicast).
        batch: most messages drained from one socket per wake-up.
        fill_timeout: see :class:`ArbiterConfig`.
        loss_timeout: see :class:`ArbiterConfig`.
        max_buffered: see :class:`ArbiterConfig`.
        conflict_window: see :class:`ArbiterConfig`.
        curve_public: this subscriber's Z85 CURVE public key, for lines that need CURVE.
        curve_secret: its secret key (never shown in ``repr``).
        stale_after: seconds without a packet on any line of a channel (heartbeats
            included) before a :class:`Stale` event; the next packet brings :class:`Resumed`.
        multicast_interface: the IPv4 address of this host's interface that receives
            multicast lines. A multicast line handed out by the admin server names
            its adapter's interface; :class:`~client_lib.FeedClient` joins the same
            group and port on this one ("": use the endpoints as given).
    """

    rcvhwm: int = RCVHWM
    rcvbuf: int = 0
    batch: int = BATCH
    fill_timeout: float = FILL_TIMEOUT_S
    loss_timeout: float = LOSS_TIMEOUT_S
    max_buffered: int = MAX_BUFFERED
    conflict_window: int = CONFLICT_WINDOW
    curve_public: str = ""
    curve_secret: str = field(default="", repr=False)
    multicast_interface: str = ""
    stale_after: float = STALE_AFTER_S

    def __post_init__(self) -> None:
        if self.multicast_interface:
            try:
                ipaddress.IPv4Address(self.multicast_interface)
            except ValueError:
                raise ConfigError(
                    "multicast_interface", self.multicast_interface, "expected an IPv4 address"
                ) from None
        if bool(self.curve_public) != bool(self.curve_secret):
            raise ConfigError("curve_secret", "...", "give both curve_public and curve_secret, or neither")
        for name in ("curve_public", "curve_secret"):
            if getattr(self, name) and not is_curve_key(getattr(self, name)):
                raise ConfigError(name, "...", "not a Z85 CURVE key (40 characters)")
        for name in ("rcvhwm", "rcvbuf"):
            if getattr(self, name) < 0:
                raise ConfigError(name, getattr(self, name), "must be >= 0")
        if self.batch < 1:
            raise ConfigError("batch", self.batch, "must be >= 1")
        if not self.stale_after > 0:
            raise ConfigError("stale_after", self.stale_after, "must be > 0")
        # Let ArbiterConfig check the arbitration values, naming the parameter.
        self.arbiter_config(channel=None, start_seq=None)

    def arbiter_config(self, *, channel: int | None, start_seq: int | None, name: str = "") -> ArbiterConfig:
        """The :class:`ArbiterConfig` for one channel."""
        return ArbiterConfig(
            name=name,
            channel=channel,
            start_seq=start_seq,
            fill_timeout=self.fill_timeout,
            loss_timeout=self.loss_timeout,
            max_buffered=self.max_buffered,
            conflict_window=self.conflict_window,
        )


Channels = Mapping[str, Sequence[str]] | Sequence[ChannelSpec | LineSpec]


def normalize_channels(channels: Channels) -> list[ChannelSpec]:
    """Turn any accepted form of ``channels`` into a list of :class:`ChannelSpec`.

    Raises:
        ConfigError: no channel, a channel named twice, or a bad spec.
    """
    if isinstance(channels, Mapping):
        specs = [ChannelSpec(name, None, tuple(endpoints)) for name, endpoints in channels.items()]
    else:
        specs = []
        grouped: dict[str, list[LineSpec]] = {}
        for item in channels:
            if isinstance(item, ChannelSpec):
                specs.append(item)
            elif isinstance(item, LineSpec):
                grouped.setdefault(item.channel, []).append(item)
            else:
                raise ConfigError("channels", item, "expected ChannelSpec or LineSpec")
        for name, lines in grouped.items():
            numbers = {line.channel_number for line in lines}
            if len(numbers) != 1:
                raise ConfigError("channels", sorted(map(str, numbers)), f"lines of {name} disagree")
            specs.append(ChannelSpec(name, numbers.pop(), tuple(line.endpoint for line in lines)))
    if not specs:
        raise ConfigError("channels", channels, "join at least one channel")
    names = [spec.key for spec in specs]
    if len(set(names)) != len(names):
        raise ConfigError("channels", names, "a channel is listed twice")
    return specs


class _Engine:
    """What both shells share: routes from socket index to arbiter, timers, the hook."""

    def __init__(self, specs: list[ChannelSpec], config: SubscriberConfig, hook: RetransmissionHook | None):
        self.specs = specs
        self.hook = hook
        self.arbiters = {spec.key: _arbiter(spec, config) for spec in specs}
        now = time.monotonic()
        self.liveness = {
            spec.key: ChannelLiveness(spec.number or 0, spec.name, stale_after=config.stale_after, now=now)
            for spec in specs
        }
        self.server_keys = {e: spec.server_key(e) for spec in specs for e in spec.endpoints}
        # Sealed channels (multicast lines): stream key -> the keys that open their packets.
        self.openers: dict[str, Opener] = {}
        for spec in specs:
            self._add_seal_keys(spec)
        # One route per socket: (arbiter, line index, topic, endpoint, liveness).
        self.routes = [
            (self.arbiters[spec.key], line, spec.name.encode(), endpoint, self.liveness[spec.key])
            for spec in specs
            for line, endpoint in enumerate(spec.endpoints)
        ]
        self.route_keys = [spec.key for spec in specs for _endpoint in spec.endpoints]
        self._heard = [0.0] * len(self.routes)  # when each route last brought anything
        self._next_redial = 0.0
        self._boundaries: dict[ChannelArbiter, int] = {}  # end-of-session blocks handed on, per arbiter

    def join(self, spec: ChannelSpec, config: SubscriberConfig) -> list[int]:
        """Add a channel, or the new lines of a joined one; returns the new route indices.

        A joined channel keeps its arbiter (and so its ``msg_seq`` position);
        its new lines take the next line numbers.
        """
        current = next((s for s in self.specs if s.key == spec.key), None)
        if current is None:
            self.specs.append(spec)
            self.arbiters[spec.key] = _arbiter(spec, config)
            self.liveness[spec.key] = ChannelLiveness(
                spec.number or 0, spec.name, stale_after=config.stale_after, now=time.monotonic()
            )
            new, first_line = list(spec.endpoints), 0
        else:
            if spec.number is not None and current.number not in (None, spec.number):
                raise ConfigError("number", spec.number, f"channel {spec.name} is number {current.number}")
            new = [e for e in spec.endpoints if e not in current.endpoints]
            first_line = len(current.endpoints)
            keys = tuple(current.server_key(e) for e in current.endpoints) + tuple(
                spec.server_key(e) for e in new
            )
            self.specs[self.specs.index(current)] = ChannelSpec(
                current.name,
                current.number,
                current.endpoints + tuple(new),
                current.start_seq,
                server_keys=keys if any(keys) else (),
                delayed=current.delayed,
            )
        self.server_keys.update((e, spec.server_key(e)) for e in new)
        self._add_seal_keys(spec)
        arbiter, topic, start = self.arbiters[spec.key], spec.name.encode(), len(self.routes)
        live = self.liveness[spec.key]
        self.routes.extend((arbiter, first_line + i, topic, endpoint, live) for i, endpoint in enumerate(new))
        self.route_keys.extend(spec.key for _endpoint in new)
        self._heard.extend([0.0] * len(new))
        return list(range(start, len(self.routes)))

    def _add_seal_keys(self, spec: ChannelSpec) -> None:
        if spec.seal_keys:
            opener = self.openers.setdefault(spec.key, Opener())
            for key in spec.seal_keys:
                opener.add(key)

    def on_frames(self, index: int, frames: list[bytes], now: float, out: list[Event]) -> None:
        self._heard[index] = now
        arbiter, line, topic, _endpoint, live = self.routes[index]
        if len(frames) != 2:
            arbiter.on_garbage(line, reason="frames")
        elif frames[0] == topic:  # SUB filters by prefix: "EQ1" also matches "EQ10"
            if live.stale:
                out.extend(live.on_packet(now=now))
            else:
                live.heard_at = now
            packet = frames[1]
            opener = self.openers.get(self.route_keys[index]) if self.openers else None
            if opener is not None:
                try:
                    packet = opener.open(packet)
                except SealError as exc:  # forged, tampered, plain, or sealed with a key we lack
                    arbiter.on_garbage(line, reason=f"seal-{exc.reason}")
                    return
            self._emit(arbiter, arbiter.on_packet(line, packet, now=now), now, out)

    def on_timers(self, now: float) -> list[Event]:
        out: list[Event] = []
        for name, arbiter in self.arbiters.items():
            deadline = arbiter.next_deadline()
            if deadline is not None and deadline <= now:
                self._emit(arbiter, arbiter.on_timer(now=now), now, out)
            live = self.liveness[name]
            if not live.stale and now - live.heard_at >= live.stale_after:
                live.channel = arbiter.channel or live.channel
                out.extend(live.on_timer(now=now))
        return out

    def due_redials(self, now: float) -> list[int]:
        """CURVE routes silent for :data:`REDIAL_S` that must be dialled again (see :func:`redial`).

        libzmq does not reconnect after its peer refused the CURVE key (the
        grant may arrive a moment after the subscription, or come back after a
        revocation): a CURVE line that has brought nothing, not even a
        heartbeat, for a while is dialled afresh.
        """
        if now < self._next_redial:
            return []
        self._next_redial = now + REDIAL_S
        due = []
        for index, (_arbiter, _line, _topic, endpoint, _live) in enumerate(self.routes):
            if self.server_keys.get(endpoint) and now - self._heard[index] >= REDIAL_S:
                self._heard[index] = now  # the next redial, if still silent, one interval later
                due.append(index)
        return due

    def wait_ms(self, now: float, until: float | None) -> int | None:
        """Milliseconds to wait for sockets: to ``until`` or the earliest arbiter or redial deadline."""
        deadlines = [d for d in (a.next_deadline() for a in self.arbiters.values()) if d is not None]
        deadlines += [d for d in (live.next_deadline() for live in self.liveness.values()) if d is not None]
        if until is not None:
            deadlines.append(until)
        if any(self.server_keys.values()):
            deadlines.append(self._next_redial)
        if not deadlines:
            return None
        return max(0, math.ceil((min(deadlines) - now) * 1000))

    def _emit(self, arbiter: ChannelArbiter, events: list[Event], now: float, out: list[Event]) -> None:
        if self.hook is not None:
            index = 0
            while index < len(events):  # bounded: each hole is asked for once
                event = events[index]
                index += 1
                if isinstance(event, RetransmissionNeeded):
                    events.extend(self._recover(arbiter, event, now))
        if arbiter.boundaries != self._boundaries.get(arbiter, 0):  # rare: look only then
            self._boundaries[arbiter] = arbiter.boundaries
            events = with_session_events(events, arbiter.name)
        out.extend(events)

    def _recover(self, arbiter: ChannelArbiter, event: RetransmissionNeeded, now: float) -> list[Event]:
        assert self.hook is not None
        try:
            packets = self.hook(event)
        except Exception:
            # A failing recovery hook must not stop the feed: the gap times out.
            logger.exception("on_retransmission_needed failed for %s", event)
            return []
        spec = next(s for s in self.specs if self.arbiters[s.key] is arbiter)
        out: list[Event] = []
        taken = 0
        for packet in packets or ():
            out.extend(arbiter.on_packet(line=len(spec.endpoints), packet=packet, now=now))
            taken += 1
        missing = arbiter.missing(event.first_seq, event.last_seq)
        if taken and missing < event.count:
            recovered = Recovered(
                event.channel,
                event.first_seq,
                event.last_seq,
                recovered=event.count - missing,
                missing=missing,
                channel_name=spec.name,
            )
            out.append(recovered)
        return out

    def stats(self) -> dict[str, ArbiterStats]:
        return {name: arbiter.stats() for name, arbiter in self.arbiters.items()}

    def describe(self, kind: str, closed: bool) -> str:
        delivered = sum(a.stats().delivered for a in self.arbiters.values())
        names = ",".join(self.arbiters)
        return (
            f"<{kind} [channels={names}, lines={len(self.routes)}, delivered={delivered}, closed={closed}]>"
        )


def _arbiter(spec: ChannelSpec, config: SubscriberConfig) -> ChannelArbiter:
    arbiter_config = config.arbiter_config(channel=spec.number, start_seq=spec.start_seq, name=spec.name)
    if spec.delayed:
        arbiter_config = dataclasses.replace(arbiter_config, delayed=True)
    return ChannelArbiter(arbiter_config, lines=len(spec.endpoints))


def redial(socket: zmq.Socket[Any], endpoint: str) -> None:
    """Disconnect and connect again (a fresh CURVE handshake)."""
    with contextlib.suppress(zmq.ZMQError):  # not connected any more: connect again anyway
        socket.disconnect(endpoint)
    socket.connect(endpoint)


def _connect_line(socket: zmq.Socket[Any], engine: _Engine, index: int, config: SubscriberConfig) -> None:
    """Configure and connect ``socket`` as the line of route ``index``."""
    _arbiter, _line, topic, endpoint, _live = engine.routes[index]
    server_key = engine.server_keys.get(endpoint, "")
    socket.setsockopt(zmq.LINGER, 0)
    if server_key:
        if not config.curve_public:
            raise ConfigError(
                "curve_public", "", f"the line {endpoint} needs CURVE: give the subscriber a key pair"
            )
        socket.curve_serverkey = server_key.encode()
        socket.curve_publickey = config.curve_public.encode()
        socket.curve_secretkey = config.curve_secret.encode()
    socket.setsockopt(zmq.RCVHWM, config.rcvhwm)
    socket.setsockopt(zmq.MAXMSGSIZE, MAX_PACKET_FRAME_BYTES)
    if endpoint.startswith(("epgm://", "pgm://")):
        # PGM sizes its receive window from ZMQ_RATE x ZMQ_RECOVERY_IVL: same options as the sender.
        from feedha.transport import configure_socket

        try:
            configure_socket(socket, endpoint)
        except ValueError as exc:
            raise ConfigError("endpoint", endpoint, str(exc)) from exc
    if config.rcvbuf:
        socket.setsockopt(zmq.RCVBUF, config.rcvbuf)
    socket.setsockopt(zmq.SUBSCRIBE, topic)
    try:
        socket.connect(endpoint)
    except zmq.ZMQError as exc:
        raise ConfigError("endpoint", endpoint, str(exc)) from exc


class Subscriber:
    """Blocking subscriber: joins every line of each channel and arbitrates.

    Args:
        channels: ``{name: [endpoint, ...]}`` (channel numbers adopted from the
            packets), or a sequence of :class:`ChannelSpec` / :class:`LineSpec`.
        config: socket and arbitration settings.
        on_retransmission_needed: optional gap-recovery hook; returns packets
            (e.g. from an adapter's replay service) or ``None``.
        context: a ZeroMQ context to use; by default one is created and owned.

    Raises:
        ConfigError: bad channels, endpoints or settings.
        TransportError: ZeroMQ refused to create a socket.
    """

    def __init__(
        self,
        channels: Channels,
        config: SubscriberConfig | None = None,
        *,
        on_retransmission_needed: RetransmissionHook | None = None,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
    ) -> None:
        self._config = config or SubscriberConfig()
        self._engine = _Engine(normalize_channels(channels), self._config, on_retransmission_needed)
        self._owns_context = context is None
        self._context: zmq.Context[zmq.Socket[bytes]] = context or zmq.Context()
        self._sockets: list[zmq.Socket[bytes]] = []
        self._index: dict[zmq.Socket[bytes], int] = {}
        self._poller = zmq.Poller()
        self._pending: deque[Event] = deque()
        self._closed = False
        try:
            self._add_lines(range(len(self._engine.routes)))
        except zmq.ZMQError as exc:
            self.close()
            raise TransportError(str(exc)) from exc
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return self._engine.describe("Subscriber", self._closed)

    def __enter__(self) -> Subscriber:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        while not self._pending:
            if self._closed:
                raise StopIteration
            self._pending.extend(self.poll())
        return self._pending.popleft()

    def deliveries(self) -> Iterator[Delivery]:
        """Iterate over deliveries only (gap and term events are still counted in ``stats``)."""
        for event in self:
            if isinstance(event, Delivery):
                yield event

    def poll(self, timeout: float | None = None) -> list[Event]:
        """Wait up to ``timeout`` seconds (``None``: forever) for events.

        Returns:
            The events decided so far, as soon as there is at least one;
            an empty list if the timeout passed first.

        Raises:
            ClosedError: the subscriber is closed.
            TransportError: ZeroMQ failed while receiving.
        """
        if self._closed:
            raise ClosedError("poll() on a closed Subscriber")
        if self._pending:
            events = list(self._pending)
            self._pending.clear()
            return events
        until = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        try:
            while True:
                now = time.monotonic()
                for index in self._engine.due_redials(now):
                    redial(self._sockets[index], self._engine.routes[index][3])
                events = self._engine.on_timers(now)
                if events:
                    return events
                ready = self._poller.poll(self._engine.wait_ms(now, until))
                now = time.monotonic()
                for socket, _mask in ready:
                    self._drain(socket, now, events)
                if events or (until is not None and now >= until):
                    return events
        except zmq.ZMQError as exc:
            raise TransportError(str(exc)) from exc

    def join(self, channel: ChannelSpec) -> int:
        """Join a channel, or more lines of a joined channel, while running.

        A channel already joined keeps its arbiter, so delivery goes on from
        its ``msg_seq`` position without loss or repetition: the new lines
        are just more copies to arbitrate. Endpoints already joined are
        skipped. Call it from the thread that polls.

        Args:
            channel: the channel and its lines (all of them or only new ones).

        Returns:
            How many lines (sockets) were added.

        Raises:
            ClosedError: the subscriber is closed.
            ConfigError: the channel number disagrees, or a bad endpoint.
            TransportError: ZeroMQ refused to create a socket.
        """
        if self._closed:
            raise ClosedError("join() on a closed Subscriber")
        indices = self._engine.join(channel, self._config)
        try:
            self._add_lines(indices)
        except zmq.ZMQError as exc:
            raise TransportError(str(exc)) from exc
        return len(indices)

    def _add_lines(self, indices: Iterable[int]) -> None:
        for index in indices:
            socket = self._context.socket(zmq.SUB)
            self._sockets.append(socket)  # first: close() reaches it whatever fails next
            _connect_line(socket, self._engine, index, self._config)
            self._index[socket] = index
            self._poller.register(socket, zmq.POLLIN)

    def _drain(self, socket: zmq.Socket[bytes], now: float, out: list[Event]) -> None:
        index = self._index[socket]
        on_frames = self._engine.on_frames
        for _ in range(self._config.batch):
            try:
                frames = recv_frames(socket)
            except zmq.Again:
                return
            on_frames(index, frames, now, out)

    def stats(self) -> dict[str, ArbiterStats]:
        """Per-channel arbitration counters, keyed by channel name (``NAME/delayed``: its delayed stream)."""
        return self._engine.stats()

    def close(self) -> None:
        """Close every socket (and the context if owned). Idempotent."""
        self._closed = True
        for socket in self._sockets:
            socket.close(linger=0)
        self._sockets.clear()
        self._index.clear()
        if self._owns_context and not self._context.closed:
            self._context.term()


class AsyncSubscriber:
    """The asyncio subscriber (``zmq.asyncio``); same arguments as :class:`Subscriber`.

    Use as ``async with AsyncSubscriber(...) as sub: async for event in sub: ...``.
    Closing is synchronous, so it completes even when the task is cancelled.
    """

    def __init__(
        self,
        channels: Channels,
        config: SubscriberConfig | None = None,
        *,
        on_retransmission_needed: RetransmissionHook | None = None,
        context: zmq.asyncio.Context | None = None,
    ) -> None:
        self._config = config or SubscriberConfig()
        self._engine = _Engine(normalize_channels(channels), self._config, on_retransmission_needed)
        self._owns_context = context is None
        self._context = context or zmq.asyncio.Context()
        self._sockets: list[zmq.asyncio.Socket] = []
        # Non-blocking reads go through plain shadows of the async sockets:
        # a Future per message would cost more than the arbitration itself.
        self._shadows: dict[zmq.asyncio.Socket, tuple[int, zmq.Socket[bytes]]] = {}
        self._poller = zmq.asyncio.Poller()
        self._pending: deque[Event] = deque()
        self._closed = False
        try:
            self._add_lines(range(len(self._engine.routes)))
        except zmq.ZMQError as exc:
            self.close()
            raise TransportError(str(exc)) from exc
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return self._engine.describe("AsyncSubscriber", self._closed)

    async def __aenter__(self) -> AsyncSubscriber:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __aiter__(self) -> AsyncSubscriber:
        return self

    async def __anext__(self) -> Event:
        while not self._pending:
            if self._closed:
                raise StopAsyncIteration
            self._pending.extend(await self.poll())
        return self._pending.popleft()

    async def deliveries(self) -> AsyncIterator[Delivery]:
        """Iterate over deliveries only."""
        async for event in self:
            if isinstance(event, Delivery):
                yield event

    async def poll(self, timeout: float | None = None) -> list[Event]:
        """Wait up to ``timeout`` seconds (``None``: forever) for events; see :meth:`Subscriber.poll`.

        Raises:
            ClosedError: the subscriber is closed.
            TransportError: ZeroMQ failed while receiving.
        """
        if self._closed:
            raise ClosedError("poll() on a closed AsyncSubscriber")
        if self._pending:
            events = list(self._pending)
            self._pending.clear()
            return events
        until = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        try:
            while True:
                now = time.monotonic()
                for index in self._engine.due_redials(now):
                    redial(self._sockets[index], self._engine.routes[index][3])
                events = self._engine.on_timers(now)
                if events:
                    return events
                wait = self._engine.wait_ms(now, until)
                ready = await self._poller.poll(-1 if wait is None else wait)
                # From here to the return nothing awaits: decisions are never split.
                now = time.monotonic()
                for socket, _mask in ready:
                    self._drain(socket, now, events)
                if events or (until is not None and now >= until):
                    return events
        except zmq.ZMQError as exc:
            raise TransportError(str(exc)) from exc

    def join(self, channel: ChannelSpec) -> int:
        """Join a channel, or more lines of a joined channel, while running (see :meth:`Subscriber.join`).

        Returns:
            How many lines (sockets) were added.

        Raises:
            ClosedError: the subscriber is closed.
            ConfigError: the channel number disagrees, or a bad endpoint.
            TransportError: ZeroMQ refused to create a socket.
        """
        if self._closed:
            raise ClosedError("join() on a closed AsyncSubscriber")
        indices = self._engine.join(channel, self._config)
        try:
            self._add_lines(indices)
        except zmq.ZMQError as exc:
            raise TransportError(str(exc)) from exc
        return len(indices)

    def _add_lines(self, indices: Iterable[int]) -> None:
        for index in indices:
            socket = self._context.socket(zmq.SUB)
            self._sockets.append(socket)  # first: close() reaches it whatever fails next
            _connect_line(socket, self._engine, index, self._config)
            self._shadows[socket] = (index, zmq.Socket.shadow(socket.underlying))
            self._poller.register(socket, zmq.POLLIN)

    def _drain(self, socket: zmq.asyncio.Socket, now: float, out: list[Event]) -> None:
        entry = self._shadows.get(socket)
        if entry is None:  # closed while the poll was pending
            return
        index, shadow = entry
        on_frames = self._engine.on_frames
        for _ in range(self._config.batch):
            try:
                frames = recv_frames(shadow)
            except zmq.Again:
                return
            on_frames(index, frames, now, out)

    def stats(self) -> dict[str, ArbiterStats]:
        """Per-channel arbitration counters, keyed by channel name (``NAME/delayed``: its delayed stream)."""
        return self._engine.stats()

    def close(self) -> None:
        """Close every socket (and the context if owned). Idempotent and synchronous."""
        self._closed = True
        self._shadows.clear()
        for socket in self._sockets:
            socket.close(linger=0)
        self._sockets.clear()
        if self._owns_context and not self._context.closed:
            self._context.term()

    async def aclose(self) -> None:
        """Async alias of :meth:`close`."""
        self.close()
