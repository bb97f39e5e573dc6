"""The feed client's public API, written once; :class:`~feedha.client.FeedClient`'s is generated from it.

Theory of operation
-------------------
:class:`~feedha.client.FeedClient` (blocking) and
:class:`~feedha.client.AsyncFeedClient` (asyncio) are one client in two
flavours. What the client does lives in
:class:`~feedha.client._feed_session.FeedSession` (the admin calls as
coroutines, the data side as a poll loop) and
:mod:`feedha.client._time_replay` (a replay written once, driven blocking or
awaited). What the application calls -- every public method, its
parameters, its docstring -- is written once, here, as :class:`AsyncFeedApi`,
the asyncio flavour, which ``AsyncFeedClient`` extends.

The blocking flavour, ``FeedApi`` in ``client_lib/_sync_feed_api.py``, is
generated from this file by ``scripts/gen_sync_client.py``: it drops
``async`` and ``await`` and renames the few asyncio names to their blocking
twins (``AsyncIterator`` is ``Iterator``, ``AsyncSubscriber`` is
``Subscriber``, ``drive_async`` is ``drive``, ``__aenter__`` is
``__enter__``; the table is in the script). The asyncio flavour is the
source because removing ``await`` from a correct coroutine leaves a correct
blocking call, while the reverse cannot be derived. ``scripts/check`` fails
when the generated file is stale, and a unit test compares the two clients'
public methods, signatures and docstrings, so the faces cannot drift.

So the code here may await only what has a blocking twin of the same name:
the session's admin coroutines (through :meth:`AsyncFeedApi._run_admin`),
the subscriber's poll, the drivers of the written-once loops, and the
flavour's primitives. What differs between the flavours is those
primitives, which each client implements in its own module:

- ``_start``: the end of ``__init__`` (``FeedClient`` starts its admin thread
  and logs in; ``AsyncFeedClient`` waits for ``async with`` or :meth:`open`);
- ``_run_admin``: run one of the session's admin coroutines (awaited on the
  caller's loop; on ``FeedClient``'s admin thread, waited for);
- ``_new_wakeup`` and ``_wait_for_routes``: the event a route set sets and
  the wait for it (``asyncio.Event``; ``threading.Event``);
- ``_stop``: the end of :meth:`close` (``FeedClient`` also stops its thread).

Every method that talks to the admin server or reads the lines is a
coroutine (or async iterator) here and blocking in ``FeedClient``; the
lookups (:meth:`~AsyncFeedApi.book`, :meth:`~AsyncFeedApi.book_updates_of`,
:meth:`~AsyncFeedApi.stats`, :meth:`~AsyncFeedApi.on_status`) are plain calls
in both, and :meth:`~AsyncFeedApi.replay` returns its iterator at once in
both (a window the subscription cannot replay is refused by the call).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Final, Self, TypeVar

from feedha.admin_client import Subscription, TlsConfig
from feedha.admin_client.session import RETRY_DEADLINE_S
from feedha.client._drive import drive_async
from feedha.client._feed_core import FeedClientStats, FeedCore, StatusCallback, check_mode
from feedha.client._feed_session import FeedSession, Selected, Wakeup
from feedha.client._replay_plan import is_wanted, plan
from feedha.client._slow import SLOW_AFTER_S, slow_watch
from feedha.client._time_replay import TimeReplay, replay_window_async, to_ns
from feedha.client.books import Book, BookUpdate
from feedha.client.errors import ClosedError
from feedha.client.events import Delivery, Event, StatusEvent
from feedha.client.replay_client import ReplayClient
from feedha.client.subscriber import AsyncSubscriber, ChannelSpec, SubscriberConfig

POLL_INTERVAL_S: Final = 0.1
_T = TypeVar("_T")


class AsyncFeedApi:
    """The feed client's public API (see the module docstring); the clients add the primitives."""

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
        """A client of the admin server at ``admin``, logged in with an API key.

        ``FeedClient`` logs in here; ``AsyncFeedClient`` when it opens (``async with``).

        Args:
            admin: ``host:port`` of the admin server.
            key_id: API key id.
            secret: API key secret.
            config: socket and arbitration settings of the subscriber.
            tls: ``None`` for plaintext, ``True`` or a :class:`TlsConfig` for TLS.
            retry_deadline_s: how long login/subscribe/modify/cancel retry while the
                admin server is unreachable.
            poll_interval_s: the longest a poll waits before applying route changes.
            mode: ``"realtime"`` (every message; conflated-only symbols come conflated), or
                ``"conflated"``: every channel's conflated lines (a :class:`ConflatedDelivery`
                per changed symbol per interval; delayed-only channels stay delayed).
            on_slow: ``"conflate"``: a client more than ``slow_after_s`` behind (a slow reader,
                or one that stopped reading) leaves the real-time lines for the conflated ones
                until it is current again, then resumes real time where the conflated stream
                left it (status events :class:`Conflated` and :class:`RealTime`); memory stays
                bounded and a client back from a long stall starts from current state.
            slow_after_s: how far behind (seconds since a packet was sent) counts as slow.

        Raises:
            ConfigError: an unknown ``mode`` or ``on_slow``.
            AuthenticationFailed: bad key id or secret (the client is closed).
            AdminUnavailable: the admin server stayed unreachable for ``retry_deadline_s``.
        """
        self._target, self._credentials, self._tls = admin, (key_id, secret), tls
        self._session: FeedSession[AsyncSubscriber] = FeedSession(
            config,
            kind=type(self).__name__,
            retry_deadline_s=retry_deadline_s,
            poll_interval_s=poll_interval_s,
            wakeup=self._new_wakeup(),
            make_subscriber=_subscriber,
        )
        self._core = self._session.core  # the metrics collector hooks its latency sink here
        self._core.mode = check_mode(mode)
        self._session.slow = slow_watch(on_slow, slow_after_s, mode=mode)
        self._start()

    def __repr__(self) -> str:
        return self._session.describe()

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __aiter__(self) -> AsyncIterator[Delivery]:
        return self.deliveries()

    async def open(self) -> None:
        """Open the admin channel and log in; idempotent (the constructor or ``with`` calls it).

        Raises:
            ClosedError: the client was closed before it opened.
            AuthenticationFailed: bad key id or secret (the client is closed).
            AdminUnavailable: the admin server stayed unreachable for ``retry_deadline_s``.
        """
        if self._session.opened:
            return
        self._session.check_open()
        key_id, secret = self._credentials
        try:
            await self._run_admin(self._session.open(self._target, key_id, secret, self._tls))
        except BaseException:
            if self._session.opened:  # the channel opened, the login failed
                await self.close()
            raise

    # -- subscription ------------------------------------------------------------------

    async def subscribe(self, symbols: Sequence[str], *, initial_image: bool = False) -> Subscription:
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
            ClosedError: the client is closed (or not opened).
            ValueError: already subscribed (use :meth:`modify`).
            PermissionDenied: some symbols are not entitled (``exc.symbols`` names them).
            AdminClientError: other refusals (``exc.code``).
        """
        self._session.check_open()
        return await self._run_admin(self._session.subscribe(symbols, initial_image=initial_image))

    async def modify(self, symbols: Sequence[str]) -> Subscription:
        """Replace the subscribed symbols; lines and positions of kept channels are kept.

        Args:
            symbols: symbols or fnmatch patterns, all of them (not only the new ones).

        Returns:
            The subscription and its new routes.

        Raises:
            ClosedError: the client is closed (or not opened).
            ValueError: not subscribed.
            PermissionDenied: some symbols are not entitled (the old ones stay in force).
        """
        self._session.check_open()
        return await self._run_admin(self._session.modify(symbols))

    async def cancel(self) -> None:
        """Cancel the subscription and leave every line (a later :meth:`subscribe` starts afresh).

        Raises:
            ClosedError: the client is closed (or not opened).
        """
        self._session.check_open()
        await self._run_admin(self._session.cancel())

    # -- data --------------------------------------------------------------------------

    async def poll(self, timeout: float | None = None) -> list[Delivery]:
        """Wait up to ``timeout`` seconds (``None``: forever) for deliveries of subscribed symbols.

        Route changes are applied first. Status events go to the callbacks
        (:meth:`on_status`) and are counted in :meth:`stats`; :meth:`poll_events`
        returns them too.

        Returns:
            The deliveries so far, in ``msg_seq`` order per channel; empty on timeout.

        Raises:
            ClosedError: the client is closed (or not opened).
            TransportError: ZeroMQ failed.
        """
        return [event for event in await self._poll(timeout, status=False) if isinstance(event, Delivery)]

    async def poll_events(self, timeout: float | None = None) -> list[Delivery | StatusEvent]:
        """As :meth:`poll`, with the status events in their place among the deliveries.

        Returns:
            Deliveries and :class:`~feedha.client.StatusEvent` values (gap, lost, recovered,
            term change, stale, resumed, entitlement change ...) in the order they happened.
        """
        return await self._poll(timeout, status=True)

    async def _poll(self, timeout: float | None, *, status: bool) -> Selected:
        return await drive_async(self._session.poll_steps(timeout, status=status), self._wait)

    async def _wait(self, seconds: float) -> list[Event]:
        # The session's loop may wait: for a route set while no channel is joined, else on the lines.
        subscriber = self._session.subscriber
        if subscriber is None:
            await self._wait_for_routes(seconds)
            return []
        return await subscriber.poll(seconds)

    async def deliveries(self) -> AsyncIterator[Delivery]:
        """Iterate over deliveries of subscribed, entitled symbols until :meth:`close`."""
        async for event in self._iterate(status=False):
            if isinstance(event, Delivery):
                yield event

    def events(self) -> AsyncIterator[Delivery | StatusEvent]:
        """Iterate over deliveries and status events, in order, until :meth:`close`.

        A ``match`` on each event's class tells them apart: :class:`Delivery`,
        :class:`TermChanged` (a failover), :class:`GapLost`, :class:`Stale` ...
        """
        return self._iterate(status=True)

    async def _iterate(self, *, status: bool) -> AsyncIterator[Delivery | StatusEvent]:
        while not self._session.closed:
            try:
                batch = await self._poll(self._session.poll_interval_s, status=status)
            except ClosedError:
                return
            for event in batch:
                yield event

    # -- books (fix44 and itch50 channels) ----------------------------------------------

    async def book_updates(self) -> AsyncIterator[BookUpdate]:
        """Iterate over order-book updates until :meth:`close`.

        Each message yields one :class:`~feedha.client.books.BookUpdate` per subscribed
        symbol it touched (the changes, the trades, and the book after them); an image
        yields each symbol's book first. Channels without books (``feedha-fix``) yield none.
        """
        async for delivery in self.deliveries():
            for update in self._core.book_updates(delivery):
                yield update

    def book_updates_of(self, delivery: Delivery) -> list[BookUpdate]:
        """The book updates of one delivery (from :meth:`events` or :meth:`deliveries`).

        Only the subscribed symbols: a ``fix44`` message may also carry others.
        """
        return self._core.book_updates(delivery)

    def book(self, symbol: str) -> Book | None:
        """The newest book of a subscribed ``symbol`` that the book updates saw (``None``: none yet)."""
        return self._core.book(symbol)

    # -- replay by time ----------------------------------------------------------------

    def replay(
        self,
        channel: int | str,
        start: datetime | float,
        end: datetime | float,
        *,
        speed: float | None = None,
    ) -> AsyncIterator[Delivery | StatusEvent]:
        """Replay the messages a channel published from ``start`` to ``end``, then end.

        The updates come from the channel's replay services (the adapters' journals)
        in msg_seq order, as the live stream carried them: a :class:`Delivery` per
        message of a subscribed symbol, :class:`SessionEnded` / :class:`SessionStarted`
        at a session boundary, :class:`Purged` for a purged message. A window is
        ``start <= publish time < end``. The subscription must route the channel
        (its services and entitlement come from there); a key entitled to delayed
        data only may replay windows that ended at least the delay ago. The replay
        runs beside the live stream, which goes on meanwhile.

        Args:
            channel: the channel's number or name.
            start: the window's start: a ``datetime`` (naive: UTC) or seconds since the epoch.
            end: its end (exclusive), after ``start``.
            speed: times real time (``2.0``: twice as fast); ``None``: as fast as it is read.

        Returns:
            The window's events, to iterate over.

        Raises:
            ClosedError: the client is closed.
            ConfigError: the subscription routes no such channel, or it has no replay service.
            ValueError: ``end`` is not after ``start``, or ``speed`` is not positive.
            ReplayFailed: refused (not entitled), or no service answered (raised while iterating).
        """
        self._session.check_open()
        window = TimeReplay(0, to_ns(start), to_ns(end), speed)
        client, window, wanted = plan(self._session.routes, channel, window, self._core.curve)
        return _replaying(client, window, wanted)

    # -- status, counters, closing -------------------------------------------------------

    def on_status(self, callback: StatusCallback, *kinds: type[StatusEvent]) -> Callable[[], None]:
        """Call ``callback(event)`` for every status event (of ``kinds`` only, when given).

        Callbacks are plain functions; they run where the client polls (:meth:`poll`,
        :meth:`deliveries`, :meth:`events`), in the order the events happened, before
        the poll returns; one that raises is logged and the feed goes on.

        Args:
            callback: called with each :class:`~feedha.client.StatusEvent`.
            kinds: event classes to receive (e.g. ``GapLost, TermChanged``); none: all.

        Returns:
            A function that removes the callback.

        Raises:
            TypeError: ``callback`` is not callable, or a kind is not a ``StatusEvent`` class.
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
        await self._stop()

    # -- the flavour's primitives (each client implements them) ---------------------------

    def _start(self) -> None:
        raise NotImplementedError  # the end of __init__

    async def _run_admin(self, call: Coroutine[Any, Any, _T]) -> _T:
        raise NotImplementedError  # run one of the session's admin coroutines

    def _new_wakeup(self) -> Wakeup:
        raise NotImplementedError  # the event a route set sets

    async def _wait_for_routes(self, seconds: float) -> None:
        raise NotImplementedError  # wait up to ``seconds`` for that event

    async def _stop(self) -> None:
        raise NotImplementedError  # the end of close()


async def _replaying(
    client: ReplayClient, window: TimeReplay, wanted: Callable[[str], bool]
) -> AsyncIterator[Delivery | StatusEvent]:
    async for event in replay_window_async(client, window, close=True):
        if is_wanted(event, wanted):
            yield event


def _subscriber(spec: ChannelSpec, core: FeedCore) -> AsyncSubscriber:
    return AsyncSubscriber([spec], core.config, on_retransmission_needed=core.retransmit)
