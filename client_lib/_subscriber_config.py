"""What a subscriber is told: the channels and lines to join, and its settings.

:class:`ChannelSpec` (one channel and its lines), :class:`LineSpec` (one line,
as the admin server hands it out), :class:`SubscriberConfig` (socket and
arbitration settings) and the functions that build and check them. Values
only: nothing here opens a socket. :mod:`feedha.client.subscriber` re-exports
the public names.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from feedha.client.errors import ConfigError
from feedha.client.events import (
    CONFLICT_WINDOW,
    FILL_TIMEOUT_S,
    LOSS_TIMEOUT_S,
    MAX_BUFFERED,
    ArbiterConfig,
    RetransmissionNeeded,
)
from feedha.client.status import STALE_AFTER_S
from feedha.proto.registry import is_curve_key
from feedha.proto.seal import SealKey

RCVHWM: Final = 20_000  # packets per line (~1-2 million messages, seconds at full rate)
# Packets drained from one socket per wake-up. Small on purpose: a full
# packet carries ~50-80 messages, and every Delivery of a wake-up stays alive
# until the caller has the list; 8 packets per line keep that set under the
# garbage collector's first threshold (700) and in cache. 512 cost twice the
# CPU per message (bench/micro_client.py, queued backlog).
BATCH: Final = 8
_MAX_TERM: Final = 2**32 - 1  # a u32, as the packet header carries it

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
        conflated: the endpoints are the channel's *conflated* lines (``"NAME/conflated"``),
            delivered as :class:`ConflatedDelivery`; its holes are never asked of a replay service.
        term: the term the admin server's routes carry for the channel (:func:`route_term`;
            0: none). The stream follows it from the start, and joining again with a higher
            one confirms that term at once; the lines alone raise the term only when a
            majority of them show it (docs/robustness.md).
    """

    name: str
    number: int | None
    endpoints: tuple[str, ...]
    start_seq: int | None = None
    server_keys: tuple[str, ...] = ()
    seal_keys: tuple[SealKey, ...] = ()
    delayed: bool = False
    conflated: bool = False
    term: int = 0

    @property
    def key(self) -> str:
        """The stream's name in its subscriber and stats: ``NAME``, ``NAME/delayed``, ``NAME/conflated``."""
        return (
            f"{self.name}/delayed"
            if self.delayed
            else f"{self.name}/conflated"
            if self.conflated
            else self.name
        )

    def __post_init__(self) -> None:
        if self.delayed and self.conflated:
            raise ConfigError("conflated", self.conflated, "a stream is delayed or conflated, not both")
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
        if not (isinstance(self.term, int) and 0 <= self.term <= _MAX_TERM):
            raise ConfigError("term", self.term, "must be a u32 term (0: none)")

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


def route_term(route: _RouteLike) -> int:
    """The term a route carries: the highest of its up, active or backup lines' (0: none known).

    Every adapter of a group follows the active's term, so that is the active's term as
    the admin server last heard it; a line that is down or failed may be a zombie's.
    """
    terms = [
        int(getattr(line, "term", 0))
        for line in route.lines
        if getattr(line, "is_up", True) and getattr(line, "role", "active") in ("active", "backup")
    ]
    return max(terms, default=0)


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
                term=route_term(route),
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
