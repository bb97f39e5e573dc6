"""AsyncFeedClient: :class:`~feedha.client.FeedClient`'s API on the caller's asyncio loop.

Theory of operation
-------------------
One loop, no thread: the admin calls are ``grpc.aio`` (an
:class:`~feedha.admin_client.AdminClient` opened on the running loop), the
route watch and the token renewal are tasks on it, and the lines are read by
an :class:`~feedha.client.AsyncSubscriber` (``zmq.asyncio``). What the client
does is written once, in :class:`~feedha.client._feed_session.FeedSession`,
shared with the blocking :class:`~feedha.client.FeedClient`: this class awaits
the session's admin coroutines and answers the session's poll loop with
:meth:`AsyncSubscriber.poll`, so the two clients join, filter, recover and
report exactly alike.

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
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from types import TracebackType
from typing import Final

from feedha.admin_client import Subscription, TlsConfig
from feedha.admin_client.session import RETRY_DEADLINE_S
from feedha.client._drive import drive_async
from feedha.client._feed_core import FeedClientStats, FeedCore, StatusCallback, check_mode
from feedha.client._feed_session import FeedSession, Selected
from feedha.client._slow import SLOW_AFTER_S, slow_watch
from feedha.client.errors import ClosedError
from feedha.client.events import Delivery, Event, StatusEvent
from feedha.client.subscriber import AsyncSubscriber, ChannelSpec, SubscriberConfig
from feedha.transport.tasks import wait_at_most

logger = logging.getLogger(__name__)

POLL_INTERVAL_S: Final = 0.1


class AsyncFeedClient:
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
        mode: ``"realtime"``, or ``"conflated"`` for every channel's conflated lines (see
            :class:`~feedha.client.FeedClient`).
        on_slow: ``"conflate"``: conflate a client that falls behind (see
            :class:`~feedha.client.FeedClient`).
        slow_after_s: how far behind (seconds since a packet was sent) counts as slow.
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
        mode: str = "realtime",
        on_slow: str | None = None,
        slow_after_s: float = SLOW_AFTER_S,
    ) -> None:
        self._target, self._credentials, self._tls = admin, (key_id, secret), tls
        self._routes_came = asyncio.Event()
        self._session: FeedSession[AsyncSubscriber] = FeedSession(
            config,
            kind="AsyncFeedClient",
            retry_deadline_s=retry_deadline_s,
            poll_interval_s=poll_interval_s,
            wakeup=self._routes_came,
            make_subscriber=_subscriber,
        )
        self._core = self._session.core  # the metrics collector hooks its latency sink here
        self._core.mode = check_mode(mode)
        self._session.slow = slow_watch(on_slow, slow_after_s, mode=mode)

    def __repr__(self) -> str:
        return self._session.describe()

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
        if self._session.opened:
            return
        key_id, secret = self._credentials
        try:
            await self._session.open(self._target, key_id, secret, self._tls)
        except BaseException:
            if self._session.opened:  # the channel opened, the login failed
                await self.close()
            raise

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
        return await self._session.subscribe(symbols, initial_image=initial_image)

    async def modify(self, symbols: Sequence[str]) -> Subscription:
        """Replace the subscribed symbols; lines and positions of kept channels are kept.

        Raises:
            ValueError: not subscribed.
            PermissionDenied: some symbols are not entitled (the old ones stay in force).
        """
        return await self._session.modify(symbols)

    async def cancel(self) -> None:
        """Cancel the subscription and leave every line."""
        await self._session.cancel()

    # -- data --------------------------------------------------------------------------

    async def poll(self, timeout: float | None = None) -> list[Delivery]:
        """Wait up to ``timeout`` seconds (``None``: forever) for deliveries; see :meth:`FeedClient.poll`."""
        return [event for event in await self._poll(timeout, status=False) if isinstance(event, Delivery)]

    async def poll_events(self, timeout: float | None = None) -> list[Delivery | StatusEvent]:
        """As :meth:`poll`, with the status events in their place; see :meth:`FeedClient.poll_events`."""
        return await self._poll(timeout, status=True)

    async def _poll(self, timeout: float | None, *, status: bool) -> Selected:
        return await drive_async(self._session.poll_steps(timeout, status=status), self._wait)

    async def _wait(self, seconds: float) -> list[Event]:
        # The session's loop may wait: for a route set while no channel is joined, else on the lines.
        subscriber = self._session.subscriber
        if subscriber is None:
            await wait_at_most(self._routes_came.wait(), seconds)
            return []
        return await subscriber.poll(seconds)

    async def deliveries(self) -> AsyncIterator[Delivery]:
        """Deliveries of subscribed, entitled symbols until :meth:`close`."""
        async for event in self._iterate(status=False):
            if isinstance(event, Delivery):
                yield event

    def events(self) -> AsyncIterator[Delivery | StatusEvent]:
        """Deliveries and status events, in order, until :meth:`close` (see :meth:`FeedClient.events`)."""
        return self._iterate(status=True)

    async def _iterate(self, *, status: bool) -> AsyncIterator[Delivery | StatusEvent]:
        while not self._session.closed:
            try:
                batch = await self._poll(self._session.poll_interval_s, status=status)
            except ClosedError:
                return
            for event in batch:
                yield event

    def on_status(self, callback: StatusCallback, *kinds: type[StatusEvent]) -> Callable[[], None]:
        """Call ``callback(event)`` for every status event (of ``kinds``); see :meth:`FeedClient.on_status`.

        Callbacks are plain functions, called in the task that polls.
        """
        return self._session.core.add_callback(callback, kinds)

    def stats(self) -> FeedClientStats:
        """A snapshot of the counters."""
        return self._session.stats()

    async def close(self) -> None:
        """Stop watching, close the admin channel and every line socket. Idempotent.

        The subscription is left on the server (:meth:`cancel` removes it).
        """
        if self._session.closed:
            return
        self._session.closed = True
        await asyncio.shield(self._shutdown())

    async def _shutdown(self) -> None:
        await self._session.stop_admin()
        self._session.close_lines()


def _subscriber(spec: ChannelSpec, core: FeedCore) -> AsyncSubscriber:
    return AsyncSubscriber([spec], core.config, on_retransmission_needed=core.retransmit)


__all__ = ["AsyncFeedClient"]
