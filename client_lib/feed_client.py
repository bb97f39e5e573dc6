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
import logging
import queue
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from types import TracebackType
from typing import Any, Final, TypeVar

from feedha.admin_client import (
    AdminClient,
    AdminUnavailable,
    Route,
    Subscription,
    TlsConfig,
)
from feedha.admin_client.session import RETRY_DEADLINE_S
from feedha.client._feed_core import FeedClientStats, StatusCallback
from feedha.client._watch import RouteWatch
from feedha.client.errors import ClosedError
from feedha.client.events import Delivery, StatusEvent
from feedha.client.subscriber import ChannelSpec, Subscriber, SubscriberConfig

logger = logging.getLogger(__name__)

POLL_INTERVAL_S: Final = 0.1
_CALL_MARGIN_S: Final = 15.0
_T = TypeVar("_T")


class FeedClient(RouteWatch):
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
        self._begin(config, retry_deadline_s=retry_deadline_s, poll_interval_s=poll_interval_s)
        self._updates: queue.SimpleQueue[tuple[str, tuple[Route, ...]]] = queue.SimpleQueue()
        self._subscriber: Subscriber | None = None
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
            f"delivered={self._core.delivered}, filtered={self._core.filtered}, lines={self._core.lines}]>"
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

    def _push(self, reason: str, routes: tuple[Route, ...]) -> None:
        self._updates.put((reason, routes))  # thread-safe: the admin thread puts, the poller takes

    # -- subscription (user's thread) -------------------------------------------------

    def subscribe(self, symbols: Sequence[str], *, initial_image: bool = False) -> Subscription:
        """Subscribe to symbols or fnmatch patterns and start following their routes.

        Args:
            symbols: symbols or fnmatch patterns.
            initial_image: deliver each channel's image first -- an
                :class:`~feedha.client.images.ImageDelivery` per entitled symbol with its
                state at the image's msg_seq N -- then the live updates from N + 1, with
                no seam (holes between are filled from a journal). When no replay service
                has an image, an :class:`~feedha.client.ImageUnavailable` event says so and
                the live updates come alone.

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
        self._core.initial_image = initial_image
        self._push("subscribed", subscription.routes)
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
        self._push("modified", subscription.routes)
        return subscription

    def cancel(self) -> None:
        """Cancel the subscription and leave every line (a later :meth:`subscribe` starts afresh)."""
        self._check_open()
        if not self._subscription_id:
            return
        self._call(self._stop_watch())
        self._call(self._admin.cancel(self._subscription_id))
        self._subscription_id, self._symbols = "", ()
        self._push("cancelled", ())

    # -- data (the polling thread) ----------------------------------------------------

    def poll(self, timeout: float | None = None) -> list[Delivery]:
        """Wait up to ``timeout`` seconds (``None``: forever) for deliveries of subscribed symbols.

        Route changes are applied first. Status events go to the callbacks
        (:meth:`on_status`) and are counted in :meth:`stats`; :meth:`poll_events`
        returns them too.

        Returns:
            The deliveries so far, in ``msg_seq`` order per channel; empty on timeout.

        Raises:
            ClosedError: the client is closed.
            TransportError: ZeroMQ failed.
        """
        return [event for event in self._poll(timeout, status=False) if isinstance(event, Delivery)]

    def poll_events(self, timeout: float | None = None) -> list[Delivery | StatusEvent]:
        """As :meth:`poll`, with the status events in their place among the deliveries.

        Returns:
            Deliveries and :class:`~feedha.client.StatusEvent` values (gap, lost, recovered,
            term change, stale, resumed, entitlement change ...) in the order they happened.
        """
        return self._poll(timeout, status=True)

    def _poll(self, timeout: float | None, *, status: bool) -> list[Delivery | StatusEvent]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._check_open()
            self._apply_updates()
            wait = self._poll_interval_s
            if deadline is not None:
                wait = min(wait, max(0.0, deadline - time.monotonic()))
            events: list[Any] = self._pending
            self._pending = []
            if self._subscriber is None:  # nothing to read yet: wait for routes instead
                with contextlib.suppress(queue.Empty):
                    self._apply_routes(*self._updates.get(timeout=0 if events else wait))
                events += self._pending
                self._pending = []
            else:
                events += self._subscriber.poll(0 if events else wait)
            out = self._core.select(events, status=status)
            if out or (deadline is not None and time.monotonic() >= deadline):
                return out

    def deliveries(self) -> Iterator[Delivery]:
        """Iterate over deliveries of subscribed, entitled symbols until :meth:`close`."""
        for event in self._iterate(status=False):
            if isinstance(event, Delivery):
                yield event

    def events(self) -> Iterator[Delivery | StatusEvent]:
        """Iterate over deliveries and status events, in order, until :meth:`close`.

        Example::

            for event in client.events():
                match event:
                    case Delivery():
                        handle(event.update)
                    case TermChanged(new_term=term):
                        print("failover, term", term)
                    case GapLost() | Stale():
                        print("data quality:", event)
        """
        return self._iterate(status=True)

    def _iterate(self, *, status: bool) -> Iterator[Delivery | StatusEvent]:
        while not self._closed:
            try:
                batch = self._poll(self._poll_interval_s, status=status)
            except ClosedError:
                return
            yield from batch

    def on_status(self, callback: StatusCallback, *kinds: type[StatusEvent]) -> Callable[[], None]:
        """Call ``callback(event)`` for every status event (of ``kinds`` only, when given).

        Callbacks run on the thread that polls (:meth:`poll`, :meth:`deliveries`,
        :meth:`events`), in the order the events happened, before the poll
        returns; one that raises is logged and the feed goes on.

        Args:
            callback: called with each :class:`~feedha.client.StatusEvent`.
            kinds: event classes to receive (e.g. ``GapLost, TermChanged``); none: all.

        Returns:
            A function that removes the callback.

        Raises:
            TypeError: ``callback`` is not callable, or a kind is not a ``StatusEvent`` class.
        """
        return self._core.add_callback(callback, kinds)

    def _apply_updates(self) -> None:
        while True:
            try:
                reason, routes = self._updates.get_nowait()
            except queue.Empty:
                return
            self._apply_routes(reason, routes)

    def _apply_routes(self, reason: str, routes: tuple[Route, ...]) -> None:
        subscriber, events = self._core.apply_routes(reason, routes, self._subscriber, self._make_subscriber)
        self._subscriber = subscriber
        self._pending += events

    def _make_subscriber(self, spec: ChannelSpec) -> Subscriber:
        return Subscriber([spec], self._config, on_retransmission_needed=self._core.retransmit)

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the FeedClient is closed")

    def stats(self) -> FeedClientStats:
        """A snapshot of the counters."""
        return FeedClientStats(
            subscription_id=self._subscription_id,
            symbols=self._symbols,
            delivered=self._core.delivered,
            filtered=self._core.filtered,
            undecodable=self._core.undecodable,
            route_updates=self._core.route_updates,
            watch_connections=self._watch_connections,
            resubscriptions=self._resubscriptions,
            lines=self._core.lines,
            replay_requests=self._core.replay_requests,
            last_admin_error=self._last_admin_error,
            channels={} if self._subscriber is None else self._subscriber.stats(),
            status_events=dict(self._core.status_counts),
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
        self._core.close()

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


__all__ = ["FeedClient", "FeedClientStats"]
