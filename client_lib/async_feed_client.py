"""AsyncFeedClient: :class:`~feedha.client.FeedClient`'s API on the caller's asyncio loop.

Theory of operation
-------------------
One loop, no thread: the admin calls are ``grpc.aio`` (an
:class:`~feedha.admin_client.AdminClient` opened on the running loop), the
route watch and the token renewal are tasks on it
(:class:`~feedha.client._watch.RouteWatch`, shared with the blocking client),
and the lines are read by an :class:`~feedha.client.AsyncSubscriber`
(``zmq.asyncio``). Route sets the watch learns are applied between polls by
the shared core (:class:`~feedha.client._feed_core.FeedCore`), so the two
clients join, filter, recover and report exactly alike.

A gap is asked of a replay service synchronously inside a poll (the replay
client is a blocking socket with short timeouts): the loop waits for that
reply, as a blocking client would, which happens only after a loss.

Example::

    async with AsyncFeedClient("127.0.0.1:50051", key_id, secret) as client:
        await client.subscribe(["AAPL", "MSFT"])
        client.on_status(print, GapLost, TermChanged)
        async for delivery in client:
            print(delivery.msg_seq, delivery.update.symbol)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from types import TracebackType
from typing import Any, Final

from feedha.admin_client import AdminClient, Route, Subscription, TlsConfig
from feedha.admin_client.session import RETRY_DEADLINE_S
from feedha.client._feed_core import FeedClientStats, StatusCallback
from feedha.client._watch import RouteWatch
from feedha.client.errors import ClosedError
from feedha.client.events import Delivery, StatusEvent
from feedha.client.subscriber import AsyncSubscriber, ChannelSpec, SubscriberConfig

logger = logging.getLogger(__name__)

POLL_INTERVAL_S: Final = 0.1


class AsyncFeedClient(RouteWatch):
    """Log in, subscribe and receive the entitled symbols from every line, on asyncio.

    Use as ``async with AsyncFeedClient(...) as client:`` (logs in on entry,
    closes on exit); ``async for delivery in client`` iterates deliveries,
    :meth:`events` deliveries and status events.

    Args:
        admin: ``host:port`` of the admin server.
        key_id: API key id.
        secret: API key secret.
        config: socket and arbitration settings of the subscriber.
        tls: ``None`` for plaintext, ``True`` or a :class:`TlsConfig` for TLS.
        retry_deadline_s: how long login/subscribe/modify/cancel retry while the
            admin server is unreachable.
        poll_interval_s: the longest a poll waits before applying route changes.
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
        self._target, self._credentials, self._tls = admin, (key_id, secret), tls
        self._subscriber: AsyncSubscriber | None = None
        self._updates: list[tuple[str, tuple[Route, ...]]] = []
        self._routes_came = asyncio.Event()
        self._opened = self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else "subscribed" if self._subscription_id else "idle"
        return (
            f"<AsyncFeedClient [{state}, subscription={self._subscription_id or None}, "
            f"delivered={self._core.delivered}, filtered={self._core.filtered}, lines={self._core.lines}]>"
        )

    async def __aenter__(self) -> AsyncFeedClient:
        await self.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __aiter__(self) -> AsyncIterator[Delivery]:
        return self.deliveries()

    async def open(self) -> None:
        """Open the admin channel and log in (``async with`` does it).

        Raises:
            AuthenticationFailed: bad key id or secret (the client is closed).
            AdminUnavailable: the admin server stayed unreachable for ``retry_deadline_s``.
        """
        if self._opened:
            return
        self._check_open()
        key_id, secret = self._credentials
        client = AdminClient(
            self._target, key_id, secret, tls=self._tls, retry_deadline_s=self._retry_deadline_s
        )
        self._admin = await client.__aenter__()
        self._opened = True
        try:
            await self._admin.login()
        except BaseException:
            await self.close()
            raise

    def _push(self, reason: str, routes: tuple[Route, ...]) -> None:
        self._updates.append((reason, routes))
        self._routes_came.set()

    # -- subscription ------------------------------------------------------------------

    async def subscribe(self, symbols: Sequence[str], *, initial_image: bool = False) -> Subscription:
        """Subscribe to symbols or fnmatch patterns and start following their routes.

        ``initial_image``: each channel's image first, then live updates (see
        :meth:`FeedClient.subscribe`; the image is fetched on the polling task).

        Raises:
            ClosedError: the client is closed or not opened.
            ValueError: already subscribed (use :meth:`modify`).
            PermissionDenied: some symbols are not entitled (``exc.symbols`` names them).
            AdminClientError: other refusals (``exc.code``).
        """
        self._check_ready()
        if self._subscription_id:
            raise ValueError(f"already subscribed ({self._subscription_id}); use modify()")
        symbols = tuple(symbols)
        subscription = await self._admin.subscribe(symbols, curve_public_key=self._curve[0])
        self._subscription_id, self._symbols = subscription.subscription_id, symbols
        self._core.initial_image = initial_image
        self._push("subscribed", subscription.routes)
        await self._start_watch()
        return subscription

    async def modify(self, symbols: Sequence[str]) -> Subscription:
        """Replace the subscribed symbols; lines and positions of kept channels are kept.

        Raises:
            ValueError: not subscribed.
            PermissionDenied: some symbols are not entitled (the old ones stay in force).
        """
        self._check_ready()
        if not self._subscription_id:
            raise ValueError("not subscribed; use subscribe()")
        symbols = tuple(symbols)
        subscription = await self._admin.modify(self._subscription_id, symbols)
        self._symbols = symbols
        self._push("modified", subscription.routes)
        return subscription

    async def cancel(self) -> None:
        """Cancel the subscription and leave every line."""
        self._check_ready()
        if not self._subscription_id:
            return
        await self._stop_watch()
        await self._admin.cancel(self._subscription_id)
        self._subscription_id, self._symbols = "", ()
        self._push("cancelled", ())

    # -- data --------------------------------------------------------------------------

    async def poll(self, timeout: float | None = None) -> list[Delivery]:
        """Wait up to ``timeout`` seconds (``None``: forever) for deliveries; see :meth:`FeedClient.poll`."""
        return [event for event in await self._poll(timeout, status=False) if isinstance(event, Delivery)]

    async def poll_events(self, timeout: float | None = None) -> list[Delivery | StatusEvent]:
        """As :meth:`poll`, with the status events in their place; see :meth:`FeedClient.poll_events`."""
        return await self._poll(timeout, status=True)

    async def _poll(self, timeout: float | None, *, status: bool) -> list[Delivery | StatusEvent]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._check_ready()
            self._apply_updates()
            wait = self._poll_interval_s
            if deadline is not None:
                wait = min(wait, max(0.0, deadline - time.monotonic()))
            events: list[Any] = self._pending
            self._pending = []
            if events:
                pass
            elif self._subscriber is None:  # nothing to read yet: wait for routes instead
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._routes_came.wait(), wait)
            else:
                events = await self._subscriber.poll(wait)
            out = self._core.select(events, status=status)
            if out or (deadline is not None and time.monotonic() >= deadline):
                return out

    async def deliveries(self) -> AsyncIterator[Delivery]:
        """Deliveries of subscribed, entitled symbols until :meth:`close`."""
        async for event in self._iterate(status=False):
            if isinstance(event, Delivery):
                yield event

    def events(self) -> AsyncIterator[Delivery | StatusEvent]:
        """Deliveries and status events, in order, until :meth:`close` (see :meth:`FeedClient.events`)."""
        return self._iterate(status=True)

    async def _iterate(self, *, status: bool) -> AsyncIterator[Delivery | StatusEvent]:
        while not self._closed:
            try:
                batch = await self._poll(self._poll_interval_s, status=status)
            except ClosedError:
                return
            for event in batch:
                yield event

    def on_status(self, callback: StatusCallback, *kinds: type[StatusEvent]) -> Callable[[], None]:
        """Call ``callback(event)`` for every status event (of ``kinds``); see :meth:`FeedClient.on_status`.

        Callbacks are plain functions, called in the task that polls.
        """
        return self._core.add_callback(callback, kinds)

    def _apply_updates(self) -> None:
        updates, self._updates = self._updates, []
        self._routes_came.clear()
        for reason, routes in updates:
            subscriber, events = self._core.apply_routes(
                reason, routes, self._subscriber, self._make_subscriber
            )
            self._subscriber = subscriber
            self._pending += events

    def _make_subscriber(self, spec: ChannelSpec) -> AsyncSubscriber:
        return AsyncSubscriber([spec], self._config, on_retransmission_needed=self._core.retransmit)

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the AsyncFeedClient is closed")

    def _check_ready(self) -> None:
        self._check_open()
        if not self._opened:
            raise ClosedError("the AsyncFeedClient is not open: use `async with` or await open()")

    def stats(self) -> FeedClientStats:
        """A snapshot of the counters."""
        core = self._core
        return FeedClientStats(
            subscription_id=self._subscription_id,
            symbols=self._symbols,
            delivered=core.delivered,
            filtered=core.filtered,
            undecodable=core.undecodable,
            route_updates=core.route_updates,
            watch_connections=self._watch_connections,
            resubscriptions=self._resubscriptions,
            lines=core.lines,
            replay_requests=core.replay_requests,
            last_admin_error=self._last_admin_error,
            channels={} if self._subscriber is None else self._subscriber.stats(),
            status_events=dict(core.status_counts),
        )

    async def close(self) -> None:
        """Stop watching, close the admin channel and every line socket. Idempotent.

        The subscription is left on the server (:meth:`cancel` removes it).
        """
        if self._closed:
            return
        self._closed = True
        await asyncio.shield(self._shutdown())

    async def _shutdown(self) -> None:
        await self._stop_watch()
        if self._opened:
            await self._admin.close()
        if self._subscriber is not None:
            self._subscriber.close()
            self._subscriber = None
        self._core.close()


__all__ = ["AsyncFeedClient"]
