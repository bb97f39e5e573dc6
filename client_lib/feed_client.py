"""FeedClient: subscribe through the admin server, join the lines it hands out, deliver entitled symbols.

Theory of operation
-------------------
Two threads, one owner each:

- the *admin thread* runs an asyncio loop with an :class:`~admin_client.AdminClient`:
  login, subscribe/modify/cancel (called from the user's thread and waited
  on), and one task that watches the subscription's routes
  (``WatchRoutes``). It never touches a socket of the data plane: every
  route set it learns goes on a queue.
- the *data thread* (the caller of :meth:`FeedClient.poll` /
  :meth:`FeedClient.deliveries`) owns the :class:`~client_lib.subscriber.Subscriber`.
  Between polls it applies the queued route sets: a new channel is joined,
  a new line of a joined channel is added to the running subscriber
  (:meth:`Subscriber.join`), so each channel keeps one arbiter and its
  ``msg_seq`` position across line changes, failovers and promotions --
  nothing is lost or repeated. Lines are never dropped: a line that went
  down costs nothing and may come back.

Entitlement: the admin server grants routes only for entitled symbols, and
each route names the symbols (or fnmatch patterns) of the subscription it
carries. The data thread decodes each delivery's symbol and hands over only
those that match its channel's route; the others are counted as
``filtered``. Adapters that run with CURVE enforce the channel grant
themselves: the client makes a session key pair, sends its public key with
the subscription, and the lines and replay services accept that key for as
long as the subscription lives and the client stays logged in -- so the
admin thread logs in again before each token expires.

When the admin server is down, the lines keep flowing; the watch task
retries until the server returns, then the routes come again. If the server
no longer knows the subscription (``NOT_FOUND``, e.g. a wiped database) the
client subscribes again with the same symbols.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import fnmatch
import logging
import queue
import re
import threading
import time
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, TypeVar

import zmq

from feedha import transport
from feedha.admin_client import (
    AdminClient,
    AdminClientError,
    AdminUnavailable,
    PermissionDenied,
    Route,
    Subscription,
    TlsConfig,
)
from feedha.admin_client.session import RETRY_DEADLINE_S
from feedha.client.errors import ClosedError, ProtocolError
from feedha.client.events import ArbiterStats, Delivery, RetransmissionNeeded
from feedha.client.replay_client import ReplayClient
from feedha.client.subscriber import ChannelSpec, Subscriber, SubscriberConfig

logger = logging.getLogger(__name__)

POLL_INTERVAL_S: Final = 0.1
RENEW_AT: Final = 0.7  # log in again when this share of the token's lifetime has passed
WATCH_RETRY_S: Final = 1.0
_CALL_MARGIN_S: Final = 15.0
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True, kw_only=True)
class FeedClientStats:
    """What a :class:`FeedClient` has done.

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


class FeedClient:
    """Log in, subscribe through the admin server, and receive the entitled symbols from every line.

    Example::

        with FeedClient(admin="127.0.0.1:50051", key_id=key_id, secret=secret) as client:
            client.subscribe(["AAPL", "MSFT"])
            for delivery in client.deliveries():
                print(delivery.msg_seq, delivery.update.symbol)

    Args:
        admin: ``host:port`` of the admin server.
        key_id: API key id.
        secret: API key secret.
        config: socket and arbitration settings of the subscriber.
        tls: ``None`` for plaintext, ``True`` or a :class:`TlsConfig` for TLS.
        retry_deadline_s: how long login/subscribe/modify/cancel retry while the
            admin server is unreachable.
        poll_interval_s: the longest the data thread waits before applying route changes.

    Raises:
        AuthenticationFailed: bad key id or secret (the client is closed).
        AdminUnavailable: the admin server stayed unreachable for ``retry_deadline_s``.
    """

    def __init__(
        self,
        admin: str,
        key_id: str,
        secret: str,
        *,
        config: SubscriberConfig | None = None,
        tls: TlsConfig | bool | None = None,
        retry_deadline_s: float = RETRY_DEADLINE_S,
        poll_interval_s: float = POLL_INTERVAL_S,
    ) -> None:
        curve_public, curve_secret = zmq.curve_keypair()  # this session's data-plane identity
        self._curve = (curve_public.decode(), curve_secret.decode())
        self._config = dataclasses.replace(
            config or SubscriberConfig(), curve_public=self._curve[0], curve_secret=self._curve[1]
        )
        self._poll_interval_s = poll_interval_s
        self._retry_deadline_s = retry_deadline_s
        self._updates: queue.SimpleQueue[tuple[str, tuple[Route, ...]]] = queue.SimpleQueue()
        self._subscriber: Subscriber | None = None
        self._filters: dict[int, _SymbolFilter] = {}  # channel number -> its route's symbols
        self._delayed_noted: set[tuple[str, tuple[str, ...]]] = set()  # delayed routes already logged
        self._lines = self._replay_requests = 0
        self._replay: ReplayClient | None = None
        self._replay_endpoints: dict[int, tuple[str, ...]] = {}
        self._subscription_id = ""
        self._symbols: tuple[str, ...] = ()
        self._delivered = self._filtered = self._undecodable = self._route_updates = 0
        self._watch_connections = self._resubscriptions = 0
        self._last_admin_error = ""
        self._watch: asyncio.Task[None] | None = None
        self._renew: asyncio.Task[None] | None = None
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="feedclient-admin", daemon=True)
        self._thread.start()
        try:
            self._admin: AdminClient = self._call(
                self._open_admin(admin, key_id, secret, tls, retry_deadline_s)
            )
            self._call(self._admin.login())
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        state = "closed" if self._closed else "subscribed" if self._subscription_id else "idle"
        return (
            f"<FeedClient [{state}, subscription={self._subscription_id or None}, "
            f"delivered={self._delivered}, filtered={self._filtered}, lines={self._lines}]>"
        )

    def __enter__(self) -> FeedClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- the admin thread -------------------------------------------------------------

    @staticmethod
    async def _open_admin(
        target: str, key_id: str, secret: str, tls: TlsConfig | bool | None, deadline: float
    ) -> AdminClient:
        # Created on the admin loop: a grpc.aio channel belongs to the loop it was made on.
        return await AdminClient(target, key_id, secret, tls=tls, retry_deadline_s=deadline).__aenter__()

    def _call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout=self._retry_deadline_s + _CALL_MARGIN_S)
        except concurrent.futures.TimeoutError as exc:
            future.cancel()
            raise AdminUnavailable("the admin server did not answer in time") from exc

    async def _start_watch(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        self._watch = asyncio.create_task(self._watch_routes(), name="feedclient-watch")
        if self._renew is None:
            self._renew = asyncio.create_task(self._keep_logged_in(), name="feedclient-renew")

    async def _keep_logged_in(self) -> None:
        # The lines accept this client's key until its token expires: log in
        # again well before, so the admin server extends the grant.
        while True:
            left = self._admin.token_expires_at - time.time()
            await asyncio.sleep(max(1.0, left * RENEW_AT))
            try:
                await self._admin.login()
            except AdminClientError as exc:
                self._last_admin_error = str(exc)
                logger.warning("could not log in again to keep the lines: %s", exc)

    async def _watch_routes(self) -> None:
        # Strategy: AdminClient.watch_routes already rides through restarts
        # (UNAVAILABLE is retried); here we handle what it gives up on. A
        # forgotten subscription is created again; anything else (e.g. the
        # policy withdrew an entitlement) is logged and retried slowly, while
        # the lines keep flowing under the last good routes.
        while True:
            try:
                async for update in self._admin.watch_routes(self._subscription_id):
                    if update.initial:
                        self._watch_connections += 1
                    self._updates.put((update.reason, update.routes))
                return  # the subscription was cancelled
            except asyncio.CancelledError:
                raise
            except AdminClientError as exc:
                self._last_admin_error = str(exc)
                if exc.reason == "SUBSCRIPTION_NOT_FOUND":
                    logger.warning(
                        "subscription %s unknown to the admin server; subscribing again",
                        self._subscription_id,
                    )
                    with contextlib.suppress(AdminClientError):
                        subscription = await self._admin.subscribe(
                            self._symbols, curve_public_key=self._curve[0]
                        )
                        self._subscription_id = subscription.subscription_id
                        self._resubscriptions += 1
                        self._updates.put(("resubscribed", subscription.routes))
                        continue
                elif isinstance(exc, PermissionDenied):
                    self._updates.put(("denied", ()))
                logger.warning("route watch failed: %s; retrying in %.1f s", exc, WATCH_RETRY_S)
            except Exception as exc:  # a watch must never die of a surprise: retry
                self._last_admin_error = repr(exc)
                logger.exception("route watch failed; retrying in %.1f s", WATCH_RETRY_S)
            await asyncio.sleep(WATCH_RETRY_S)

    async def _stop_watch(self) -> None:
        for task in (self._watch, self._renew):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._watch = self._renew = None

    # -- subscription (user's thread) -------------------------------------------------

    def subscribe(self, symbols: Sequence[str]) -> Subscription:
        """Subscribe to symbols or fnmatch patterns and start following their routes.

        Returns:
            The subscription and its routes.

        Raises:
            ClosedError: the client is closed.
            ValueError: already subscribed (use :meth:`modify`).
            PermissionDenied: some symbols are not entitled (``exc.symbols`` names them).
            AdminClientError: other refusals (``exc.code``).
        """
        self._check_open()
        if self._subscription_id:
            raise ValueError(f"already subscribed ({self._subscription_id}); use modify()")
        symbols = tuple(symbols)
        subscription = self._call(self._admin.subscribe(symbols, curve_public_key=self._curve[0]))
        self._subscription_id, self._symbols = subscription.subscription_id, symbols
        self._updates.put(("subscribed", subscription.routes))
        self._call(self._start_watch())
        return subscription

    def modify(self, symbols: Sequence[str]) -> Subscription:
        """Replace the subscribed symbols; lines and positions of kept channels are kept.

        Raises:
            ValueError: not subscribed.
            PermissionDenied: some symbols are not entitled (the old ones stay in force).
        """
        self._check_open()
        if not self._subscription_id:
            raise ValueError("not subscribed; use subscribe()")
        symbols = tuple(symbols)
        subscription = self._call(self._admin.modify(self._subscription_id, symbols))
        self._symbols = symbols
        self._updates.put(("modified", subscription.routes))
        return subscription

    def cancel(self) -> None:
        """Cancel the subscription and leave every line (a later :meth:`subscribe` starts afresh)."""
        self._check_open()
        if not self._subscription_id:
            return
        self._call(self._stop_watch())
        self._call(self._admin.cancel(self._subscription_id))
        self._subscription_id, self._symbols = "", ()
        self._updates.put(("cancelled", ()))

    # -- data (the polling thread) ----------------------------------------------------

    def poll(self, timeout: float | None = None) -> list[Delivery]:
        """Wait up to ``timeout`` seconds (``None``: forever) for deliveries of subscribed symbols.

        Route changes are applied first. Gap and term events are counted in
        :meth:`stats` (per channel), not returned.

        Returns:
            The deliveries so far, in ``msg_seq`` order per channel; empty on timeout.

        Raises:
            ClosedError: the client is closed.
            TransportError: ZeroMQ failed.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._check_open()
            self._apply_updates()
            wait = self._poll_interval_s
            if deadline is not None:
                wait = min(wait, max(0.0, deadline - time.monotonic()))
            if self._subscriber is None:  # nothing to read yet: wait for routes instead
                with contextlib.suppress(queue.Empty):
                    self._apply_routes(*self._updates.get(timeout=wait))
                out: list[Delivery] = []
            else:
                out = self._select(self._subscriber.poll(wait))
            if out or (deadline is not None and time.monotonic() >= deadline):
                return out

    def deliveries(self) -> Iterator[Delivery]:
        """Iterate over deliveries of subscribed, entitled symbols until :meth:`close`."""
        while not self._closed:
            try:
                batch = self.poll(self._poll_interval_s)
            except ClosedError:
                return
            yield from batch

    def _select(self, events: list[Any]) -> list[Delivery]:
        out: list[Delivery] = []
        for event in events:
            if not isinstance(event, Delivery):
                continue
            symbol_filter = self._filters.get(event.channel)
            try:
                wanted = symbol_filter is not None and symbol_filter.is_wanted(event.update.symbol)
            except ProtocolError:
                self._undecodable += 1
                continue
            if wanted:
                out.append(event)
            else:
                self._filtered += 1
        self._delivered += len(out)
        return out

    def _apply_updates(self) -> None:
        while True:
            try:
                reason, routes = self._updates.get_nowait()
            except queue.Empty:
                return
            self._apply_routes(reason, routes)

    def _apply_routes(self, reason: str, routes: tuple[Route, ...]) -> None:
        # Delayed routes are not served in real time: their symbols stay filtered.
        live = [r for r in routes if not r.delayed]
        for route in routes:
            if route.delayed and (route.channel_name, route.symbols) not in self._delayed_noted:
                self._delayed_noted.add((route.channel_name, route.symbols))
                logger.warning(
                    "%s: %s entitled delayed only; the delayed stream is not available yet, "
                    "nothing is delivered for them",
                    route.channel_name,
                    ", ".join(route.symbols),
                )
        self._route_updates += 1
        if reason == "cancelled" and self._subscriber is not None:
            self._subscriber.close()
            self._subscriber, self._lines = None, 0
        self._filters = {r.channel_number: _SymbolFilter(r.symbols) for r in live}
        self._update_replay(live)
        for route in live:
            local = {line.line_endpoint: self._local(line.line_endpoint) for line in route.lines}
            endpoints = tuple(
                dict.fromkeys(local[line.line_endpoint] for line in route.lines if line.line_endpoint)
            )
            if not endpoints:
                continue  # no adapter registered yet: joined when one is
            keys = {local[line.line_endpoint]: line.curve_server_key for line in route.lines}
            server_keys = tuple(keys.get(e, "") for e in endpoints)
            spec = ChannelSpec(
                route.channel_name,
                route.channel_number,
                endpoints,
                server_keys=server_keys if any(server_keys) else (),
                seal_keys=route.seal_keys,
            )
            if self._subscriber is None:
                self._subscriber = Subscriber([spec], self._config, on_retransmission_needed=self._retransmit)
                added = len(endpoints)
            else:
                added = self._subscriber.join(spec)
            self._lines += added
            if added:
                logger.info("joined %d line(s) of %s (%s)", added, route.channel_name, reason)

    def _local(self, endpoint: str) -> str:
        # A multicast line names its adapter's interface: join it on ours.
        interface = self._config.multicast_interface
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
        wanted = {
            r.channel_number: services
            for r in routes
            if (
                services := tuple(
                    dict.fromkeys(line.replay_endpoint for line in r.lines if line.replay_endpoint)
                )
            )
        }
        if wanted == self._replay_endpoints:
            return
        if self._replay is not None:
            self._replay.close()
        keys = {line.replay_endpoint: line.curve_server_key for r in routes for line in r.lines}
        self._replay = ReplayClient(wanted, server_keys=keys, curve_keypair=self._curve) if wanted else None
        self._replay_endpoints = wanted

    def _retransmit(self, event: RetransmissionNeeded) -> list[bytes] | None:
        # Called by the subscriber, on the polling thread, with the socket loop paused.
        if self._replay is None:
            return None
        self._replay_requests += 1
        return self._replay(event)

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the FeedClient is closed")

    def stats(self) -> FeedClientStats:
        """A snapshot of the counters."""
        return FeedClientStats(
            subscription_id=self._subscription_id,
            symbols=self._symbols,
            delivered=self._delivered,
            filtered=self._filtered,
            undecodable=self._undecodable,
            route_updates=self._route_updates,
            watch_connections=self._watch_connections,
            resubscriptions=self._resubscriptions,
            lines=self._lines,
            replay_requests=self._replay_requests,
            last_admin_error=self._last_admin_error,
            channels={} if self._subscriber is None else self._subscriber.stats(),
        )

    def close(self) -> None:
        """Stop watching, close the admin channel and every line socket. Idempotent.

        The subscription is left on the server (:meth:`cancel` removes it).
        """
        if self._closed:
            return
        self._closed = True
        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                self._call(self._shutdown())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        if not self._loop.is_running():
            self._loop.close()
        if self._subscriber is not None:
            self._subscriber.close()
            self._subscriber = None
        if self._replay is not None:
            self._replay.close()
            self._replay = None

    async def _shutdown(self) -> None:
        await self._stop_watch()
        admin: AdminClient | None = getattr(self, "_admin", None)
        if admin is not None:
            await admin.close()
        # gRPC leaves a task per finished call that waits for its status; end them
        # here, or the closing loop reports each one as "destroyed but pending".
        leftovers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in leftovers:
            task.cancel()
        await asyncio.gather(*leftovers, return_exceptions=True)
