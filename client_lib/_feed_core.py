"""A feed client's data side that never waits: routes in, channels, filters and events out.

Theory of operation
-------------------
:class:`~feedha.client._feed_session.FeedSession` (the one implementation
behind :class:`FeedClient` and :class:`AsyncFeedClient`) holds the admin
calls and the poll loop; what they decide, none of which waits, is here:

- :meth:`FeedCore.apply_routes` turns a route set into joins of the
  subscriber (new channels, new lines of joined ones: each channel keeps
  one arbiter and its position), the per-channel symbol filters, the replay
  services, and :class:`EntitlementChanged` events when what a channel
  delivers narrowed or widened (not for the first route set, nor a cancel);
  a delayed route (delayed-only symbols) joins the channel's delayed lines as
  a stream of its own (``ChannelSpec(delayed=True)``), with its own filter, so
  a mixed grant gets each symbol on the stream it is entitled to; a
  conflated route (conflated-only symbols), and with ``mode="conflated"``
  every real-time route, joins the channel's conflated lines
  (``ChannelSpec(conflated=True)``: a :class:`ConflatedDelivery` per symbol
  per interval);
  with ``initial_image``, a channel joined for the first time first gets its
  image from a replay service (an :class:`ImageDelivery` per symbol) and is
  joined from the msg_seq after it, so image and live stream meet with no
  seam (:mod:`feedha.client.images`);
- :meth:`FeedCore.select` takes what the subscriber decided and returns what
  the application sees: deliveries of the entitled, subscribed symbols (the
  rest counted as ``filtered``) and, when asked, every status event
  (:class:`StatusEvent`: gap, lost, recovered, term change, stale, resumed,
  entitlement change, and any kind added later); every status event also
  goes to the callbacks registered with :meth:`FeedCore.add_callback`, in order,
  on the thread (or task) that polls.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from feedha import transport
from feedha.admin_client import Route
from feedha.client._subscriber_config import route_term
from feedha.client.arbiter_stats import ArbiterStats
from feedha.client.books import Book, BookKeeper, BookUpdate
from feedha.client.errors import ConfigError, ProtocolError
from feedha.client.events import (
    Delivery,
    EntitlementChanged,
    ImageUnavailable,
    ModelRefused,
    Purged,
    RetransmissionNeeded,
    StatusEvent,
)
from feedha.client.model import model_problem
from feedha.client.replay_client import ReplayClient
from feedha.client.subscriber import ChannelSpec, SubscriberConfig
from feedha.proto import market_pb2
from feedha.proto.blocks import block_wanted, names_wanted

logger = logging.getLogger(__name__)

StatusCallback = Callable[[StatusEvent], Any]


def _update_wanted(symbol_filter: _SymbolFilter, update: market_pb2.MarketUpdate) -> bool:
    # A block may carry several symbols (proto/blocks.py): wanted when one of them is.
    return block_wanted(update, symbol_filter.is_wanted)


MODES = ("realtime", "conflated")  # FeedClient(mode=...)
ON_SLOW_REASON = "on-slow"  # apply_routes' reason when on_slow switches streams


def check_mode(mode: str) -> str:
    """A feed client's ``mode``, checked.

    Raises:
        ConfigError: not one of :data:`MODES`.
    """
    if mode not in MODES:
        raise ConfigError("mode", mode, f"must be one of {', '.join(repr(m) for m in MODES)}")
    return mode


def _kind(route: Route, mode: str) -> str:
    """Which of the channel's streams a route joins: ``""`` (real time), ``delayed``, ``conflated``."""
    if route.delayed:
        return "delayed"
    return "conflated" if route.conflated or mode == "conflated" else ""


def _event_kind(event: Any) -> str:
    return "delayed" if event.delayed else "conflated" if getattr(event, "conflated", False) else ""


def _stream(route: Route, mode: str) -> str:
    """A route's stream: the channel's name, ``NAME/delayed`` or ``NAME/conflated``."""
    kind = _kind(route, mode)
    return f"{route.channel_name}/{kind}" if kind else route.channel_name


@dataclass(frozen=True, slots=True, kw_only=True)
class FeedClientStats:
    """What a feed client has done.

    Attributes:
        subscription_id: the current subscription ("" when none).
        symbols: the subscribed symbols or patterns.
        delivered: messages handed to the application.
        filtered: messages dropped because their symbol is not subscribed/entitled.
        undecodable: messages whose payload could not be decoded (dropped).
        route_updates: route sets applied (subscribe, modify, watch updates).
        watch_connections: route watches opened (one more after each admin-server return).
        resubscriptions: times the subscription was created again after ``NOT_FOUND``.
        lines: line sockets joined, over all channels.
        replay_requests: gaps handed to the lines' replay services (retransmission).
        last_admin_error: the last admin-server error seen by the watch ("" if none).
        channels: per-channel arbitration counters, keyed by channel name.
        status_events: status events seen, by kind (``{"TermChanged": 1, ...}``).
    """

    subscription_id: str
    symbols: tuple[str, ...]
    delivered: int
    filtered: int
    undecodable: int
    route_updates: int
    watch_connections: int
    resubscriptions: int
    lines: int
    replay_requests: int
    last_admin_error: str
    channels: dict[str, ArbiterStats]
    status_events: dict[str, int]


class _SymbolFilter:
    """The symbols of one route: exact names in a set, patterns in one regex, decisions cached."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self.patterns = tuple(patterns)
        self._exact = {p for p in patterns if not any(c in p for c in "*?[")}
        wild = [fnmatch.translate(p) for p in patterns if p not in self._exact]
        self._regex = re.compile("|".join(wild)) if wild else None
        self._cache: dict[str, bool] = {}

    def is_wanted(self, symbol: str) -> bool:
        wanted = self._cache.get(symbol)
        if wanted is None:
            wanted = symbol in self._exact or (
                self._regex is not None and self._regex.fullmatch(symbol) is not None
            )
            if len(self._cache) < 100_000:
                self._cache[symbol] = wanted
        return wanted


class LatencySink(Protocol):
    """Where delivery latencies go (:class:`feedha.client.metrics.LatencyBuckets`)."""

    def observe_ns(self, latency_ns: int) -> None: ...


class Joinable(Protocol):
    """What the core needs of a subscriber (both :class:`Subscriber` and :class:`AsyncSubscriber`)."""

    def join(self, channel: ChannelSpec) -> int: ...

    def close(self) -> None: ...


_S = TypeVar("_S", bound=Joinable)


class FeedCore:
    """Routes, filters, replay, selection, callbacks and counters of one feed client.

    Args:
        config: the subscriber settings (with this session's CURVE key pair).
        curve: the session's ``(public, secret)`` CURVE keys (for the replay services).
    """

    def __init__(self, config: SubscriberConfig, curve: tuple[str, str]) -> None:
        self.config = config
        self._curve = curve
        # (channel number, stream kind: "", "delayed", "conflated") -> its route's symbols
        self.filters: dict[tuple[int, str], _SymbolFilter] = {}
        self.mode = "realtime"  # FeedClient(mode=...): "conflated" joins conflated lines for real time
        self.resume_at: dict[int, int] = {}  # channel -> msg_seq its real-time stream starts at (on_slow)
        self._routes: list[Route] = []
        self._entitled: dict[str, tuple[int, tuple[str, ...]]] | None = None  # key -> (number, symbols)
        self.replay: ReplayClient | None = None
        self._replay_endpoints: dict[int, tuple[str, ...]] = {}
        self._callbacks: list[tuple[StatusCallback, tuple[type[StatusEvent], ...]]] = []
        self.lines = self.replay_requests = 0
        self.delivered = self.filtered = self.undecodable = self.route_updates = 0
        self.books = BookKeeper()  # fix44 channels' books (FeedClient.book)
        self.status_counts: dict[str, int] = {}
        self.latency: LatencySink | None = None  # set by a metrics collector
        self.initial_image = False  # each new channel begins with its image (subscribe(initial_image=True))
        self.images = 0  # images delivered
        self._joined: set[tuple[int, str]] = set()  # (channel number, kind) joined since the last cancel
        self._refused: set[tuple[int, str, str]] = set()  # (channel, model, version) said not decodable

    @property
    def curve(self) -> tuple[str, str]:
        """The session's ``(public, secret)`` CURVE keys."""
        return self._curve

    # -- routes ------------------------------------------------------------------------

    def apply_routes(
        self,
        reason: str,
        routes: Sequence[Route],
        subscriber: _S | None,
        make: Callable[[ChannelSpec], _S],
    ) -> tuple[_S | None, list[StatusEvent]]:
        """Apply a route set; returns the subscriber (made by ``make`` for the first channel) and events."""
        self.route_updates += 1
        events: list[StatusEvent] = []
        live = self._decodable(routes, events)
        if reason == "cancelled":
            self._joined.clear()
        if reason == "cancelled" and subscriber is not None:
            subscriber.close()
            subscriber, self.lines = None, 0
        self._routes = live
        self.filters = {(r.channel_number, _kind(r, self.mode)): _SymbolFilter(r.symbols) for r in live}
        events += self._entitlement_changes(reason, live)
        self._update_replay(live)
        for route in live:
            spec = self._spec(route)
            if spec is None:
                continue  # no adapter registered yet: joined when one is
            stream = (route.channel_number, _kind(route, self.mode))
            # An image is the real-time state: a delayed or conflated stream (whose keys may not
            # have it, and whose numbers are not the journal's) has none.
            if self.initial_image and not stream[1] and stream not in self._joined:
                spec = self._begin_with_image(spec, events)
            if not stream[1] and route.channel_number in self.resume_at:  # back from conflation
                spec = dataclasses.replace(spec, start_seq=self.resume_at.pop(route.channel_number))
            self._joined.add(stream)
            if subscriber is None:
                subscriber, added = make(spec), len(spec.endpoints)
            else:
                added = subscriber.join(spec)
            self.lines += added
            if added:
                what = f"{stream[1]} line(s)" if stream[1] else "line(s)"
                logger.info("joined %d %s of %s (%s)", added, what, route.channel_name, reason)
        return subscriber, events

    def _decodable(self, routes: Sequence[Route], events: list[StatusEvent]) -> list[Route]:
        # A route whose model this client cannot decode is not joined; said once per change.
        live: list[Route] = []
        for route in routes:
            problem = model_problem(route)
            key = (route.channel_number, route.message_model, route.model_version)
            if problem is None:
                live.append(route)
                self._refused.discard(key)
            elif key not in self._refused:
                self._refused.add(key)
                logger.warning("%s: not joined: model %s %s: %s", route.channel_name,
                               route.message_model, route.model_version, problem)  # fmt: skip
                events.append(ModelRefused(route.channel_number, route.message_model, route.model_version,
                                           problem, channel_name=route.channel_name))  # fmt: skip
        return live

    def real_time_channels(self) -> dict[int, str]:
        """The channels whose real-time routes may switch to their conflated lines (on_slow), by name."""
        return {r.channel_number: r.channel_name for r in self._routes if not (r.delayed or r.conflated)}

    def _begin_with_image(self, spec: ChannelSpec, events: list[Any]) -> ChannelSpec:
        # The image first (its deliveries go before anything live of the channel), then the
        # lines from the msg_seq after it: the arbiter fills the holes between from a journal.
        number = spec.number or 0
        image = None if self.replay is None else self.replay.image(number)
        if image is None:
            why = "no replay service on the channel's routes" if self.replay is None else "no service had one"
            events.append(ImageUnavailable(number, why, channel_name=spec.name))
            return spec
        self.images += 1
        events.extend(image.deliveries())
        logger.info("%s: image of %d symbols at msg_seq %d", spec.name, len(image.symbols), image.msg_seq)
        return dataclasses.replace(spec, start_seq=image.msg_seq + 1)

    def _entitlement_changes(self, reason: str, live: list[Route]) -> list[StatusEvent]:
        # Strategy: compare each channel's symbols with the last route set's;
        # the first set (subscribe) is the baseline and a cancel resets it.
        now = {_stream(r, self.mode): (r.channel_number, tuple(r.symbols)) for r in live}
        before, self._entitled = self._entitled, (None if reason == "cancelled" else now)
        if before is None or reason in ("cancelled", ON_SLOW_REASON):
            return []  # a switch of streams (on_slow) changes no entitlement
        events: list[StatusEvent] = []
        for name in sorted(set(before) | set(now)):
            number, old = before.get(name, (now.get(name, (0, ()))[0], ()))
            new = now.get(name, (number, ()))[1]
            if set(old) != set(new):
                added = tuple(s for s in new if s not in old)
                removed = tuple(s for s in old if s not in new)
                channel_name, _, kind = name.partition("/")
                changed = EntitlementChanged(
                    number, new, added, removed, channel_name=channel_name, delayed=kind == "delayed"
                )
                events.append(changed)
        return events

    def _spec(self, route: Route) -> ChannelSpec | None:
        kind = _kind(route, self.mode)
        # mode="conflated" on a real-time route: each adapter's conflated line, not its line.
        by_line = not (kind == "conflated" and not route.conflated)
        named = [
            (line.line_endpoint if by_line else line.conflated_line_endpoint, line.curve_server_key)
            for line in route.lines
        ]
        local = {endpoint: self._local(endpoint) for endpoint, _key in named if endpoint}
        endpoints = tuple(dict.fromkeys(local.values()))
        if not endpoints:
            return None
        keys = {local[endpoint]: key for endpoint, key in named if endpoint}
        server_keys = tuple(keys.get(e, "") for e in endpoints)
        return ChannelSpec(
            route.channel_name,
            route.channel_number,
            endpoints,
            server_keys=server_keys if any(server_keys) else (),
            seal_keys=route.seal_keys,
            delayed=route.delayed,
            conflated=kind == "conflated",
            term=route_term(route),
        )

    def _local(self, endpoint: str) -> str:
        # A multicast line names its adapter's interface: join it on ours.
        interface = self.config.multicast_interface
        if not interface or not transport.is_multicast(endpoint):
            return endpoint
        try:
            return transport.receiving_endpoint(endpoint, interface)
        except ValueError as exc:
            logger.warning("cannot join line %s here: %s", endpoint, exc)
            return endpoint

    def _update_replay(self, routes: list[Route]) -> None:
        # Gaps are filled from the lines' replay services (adapter journals);
        # rebuild the hook only when the set of services changed.
        # A channel's real-time and delayed routes name the same services (the adapters'):
        # one list per channel; each request says which stream it asks for.
        found: dict[int, dict[str, None]] = {}
        for route in routes:
            for line in route.lines:
                if line.replay_endpoint:
                    found.setdefault(route.channel_number, {})[line.replay_endpoint] = None
        wanted = {number: tuple(services) for number, services in found.items()}
        if wanted == self._replay_endpoints:
            return
        if self.replay is not None:
            self.replay.close()
        keys = {line.replay_endpoint: line.curve_server_key for r in routes for line in r.lines}
        self.replay = ReplayClient(wanted, server_keys=keys, curve_keypair=self._curve) if wanted else None
        self._replay_endpoints = wanted

    def retransmit(self, event: RetransmissionNeeded) -> list[bytes] | None:
        """The subscriber's retransmission hook: ask a replay service for the hole."""
        if self.replay is None:
            return None
        self.replay_requests += 1
        return self.replay(event)

    # -- what the application sees ------------------------------------------------------

    def add_callback(
        self, callback: StatusCallback, kinds: tuple[type[StatusEvent], ...]
    ) -> Callable[[], None]:
        """Call ``callback`` with every status event of ``kinds`` (all when empty); returns a remover.

        Raises:
            TypeError: ``callback`` is not callable, or a kind is not a :class:`StatusEvent` subclass.
        """
        if not callable(callback):
            raise TypeError(f"callback must be callable, got {callback!r}")
        for kind in kinds:
            if not (isinstance(kind, type) and issubclass(kind, StatusEvent)):
                raise TypeError(f"kinds must be StatusEvent subclasses, got {kind!r}")
        entry = (callback, kinds)
        self._callbacks.append(entry)

        def remove() -> None:
            if entry in self._callbacks:
                self._callbacks.remove(entry)

        return remove

    def select(self, events: Sequence[Any], *, status: bool) -> list[Delivery | StatusEvent]:
        """What the application sees of the subscriber's events (see the module docstring)."""
        out: list[Delivery | StatusEvent] = []
        delivered = 0
        latency = self.latency
        now_ns = time.time_ns() if latency is not None else 0
        for event in events:
            if isinstance(event, Delivery):
                symbol_filter = self.filters.get((event.channel, _event_kind(event)))
                try:
                    wanted = symbol_filter is not None and _update_wanted(symbol_filter, event.update)
                except ProtocolError:
                    self.undecodable += 1
                    continue
                if wanted:
                    out.append(event)
                    delivered += 1
                    if latency is not None:
                        latency.observe_ns(now_ns - event.send_time_ns)
                else:
                    self.filtered += 1
            elif isinstance(event, Purged) and not self._is_wanted(event):
                self.filtered += 1  # a purge of a symbol this client does not get
            elif isinstance(event, StatusEvent):
                if isinstance(event, Purged) and event.symbols:
                    event = self._wanted_purge(event)
                self._on_status(event)
                if status:
                    out.append(event)
        self.delivered += delivered
        return out

    def book_updates(self, event: Delivery) -> list[BookUpdate]:
        """The book updates of one delivered message or image symbol (``fix44`` channels)."""
        symbol_filter = self.filters.get((event.channel, _event_kind(event)))
        wanted = symbol_filter.is_wanted if symbol_filter is not None else None
        # A conflated state carries the whole book, no changes: kept like an image's.
        is_image = event.is_image or event.conflated
        return self.books.observe(event.msg_seq, event.update, is_image=is_image, wanted=wanted)

    def book(self, symbol: str) -> Book | None:
        """The newest book of ``symbol`` while a route of the subscription carries it (else ``None``)."""
        if not any(symbol_filter.is_wanted(symbol) for symbol_filter in self.filters.values()):
            return None
        return self.books.book(symbol)

    def _is_wanted(self, event: Purged) -> bool:
        # A purged block of several symbols names them all: wanted when one of them is.
        symbol_filter = self.filters.get((event.channel, _event_kind(event)))
        if symbol_filter is None:
            return False
        return names_wanted(event.symbol, event.symbols, symbol_filter.is_wanted)

    def _wanted_purge(self, event: Purged) -> Purged:
        # The event names only the symbols this client subscribed to (as its book updates do).
        symbol_filter = self.filters[(event.channel, _event_kind(event))]
        symbols = tuple(symbol for symbol in event.symbols if symbol_filter.is_wanted(symbol))
        return dataclasses.replace(event, symbols=symbols)

    def _on_status(self, event: StatusEvent) -> None:
        name = type(event).__name__
        self.status_counts[name] = self.status_counts.get(name, 0) + 1
        for callback, kinds in list(self._callbacks):
            if kinds and not isinstance(event, kinds):
                continue
            try:
                callback(event)
            except Exception:  # an application's callback must not stop the feed
                logger.exception("status callback %r failed on %r", callback, event)

    def close(self) -> None:
        """Close the replay client."""
        if self.replay is not None:
            self.replay.close()
            self.replay = None
