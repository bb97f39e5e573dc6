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

What the client does is written once, in
:class:`~feedha.client._feed_session.FeedSession`, shared with
:class:`~feedha.client.AsyncFeedClient`: this class runs the session's admin
coroutines on its admin thread's loop and answers the session's poll loop
with :meth:`Subscriber.poll` on the caller's thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Callable, Coroutine, Iterator, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Final, TypeVar

from feedha.admin_client import AdminUnavailable, Subscription, TlsConfig
from feedha.admin_client.session import RETRY_DEADLINE_S
from feedha.client._drive import drive
from feedha.client._feed_core import FeedClientStats, FeedCore, StatusCallback, check_mode
from feedha.client._feed_session import FeedSession, Selected
from feedha.client._slow import SLOW_AFTER_S, slow_watch
from feedha.client._time_replay import TimeReplay, plan, replay_window, to_ns, wanted_only
from feedha.client.books import Book, BookUpdate
from feedha.client.errors import ClosedError
from feedha.client.events import Delivery, Event, StatusEvent
from feedha.client.replay_client import ReplayClient
from feedha.client.subscriber import ChannelSpec, Subscriber, SubscriberConfig

logger = logging.getLogger(__name__)

POLL_INTERVAL_S: Final = 0.1
_CALL_MARGIN_S: Final = 15.0
_T = TypeVar("_T")


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
        mode: ``"realtime"`` (every message; conflated-only symbols come conflated), or
            ``"conflated"``: every channel's conflated lines (a :class:`ConflatedDelivery` per
            changed symbol per interval; delayed-only channels stay delayed).
        on_slow: ``"conflate"``: a client more than ``slow_after_s`` behind (a slow reader,
            or one that stopped reading) leaves the real-time lines for the conflated ones
            until it is current again, then resumes real time where the conflated stream
            left it (status events :class:`Conflated` and :class:`RealTime`); memory stays
            bounded and a client back from a long stall starts from current state.
        slow_after_s: how far behind (seconds since a packet was sent) counts as slow.

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
        mode: str = "realtime",
        on_slow: str | None = None,
        slow_after_s: float = SLOW_AFTER_S,
    ) -> None:
        self._routes_came = threading.Event()
        self._session: FeedSession[Subscriber] = FeedSession(
            config,
            kind="FeedClient",
            retry_deadline_s=retry_deadline_s,
            poll_interval_s=poll_interval_s,
            wakeup=self._routes_came,
            make_subscriber=_subscriber,
        )
        self._core = self._session.core  # the metrics collector hooks its latency sink here
        self._core.mode = check_mode(mode)
        self._session.slow = slow_watch(on_slow, slow_after_s, mode=mode)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="feedclient-admin", daemon=True)
        self._thread.start()
        try:
            self._call(self._session.open(admin, key_id, secret, tls))
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return self._session.describe()

    def __enter__(self) -> FeedClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        # Run one of the session's admin coroutines on the admin thread's loop and wait for it.
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout=self._session.retry_deadline_s + _CALL_MARGIN_S)
        except concurrent.futures.TimeoutError as exc:
            future.cancel()
            raise AdminUnavailable("the admin server did not answer in time") from exc

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
        self._session.check_open()
        return self._call(self._session.subscribe(symbols, initial_image=initial_image))

    def modify(self, symbols: Sequence[str]) -> Subscription:
        """Replace the subscribed symbols; lines and positions of kept channels are kept.

        Raises:
            ValueError: not subscribed.
            PermissionDenied: some symbols are not entitled (the old ones stay in force).
        """
        self._session.check_open()
        return self._call(self._session.modify(symbols))

    def cancel(self) -> None:
        """Cancel the subscription and leave every line (a later :meth:`subscribe` starts afresh)."""
        self._session.check_open()
        self._call(self._session.cancel())

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

    def _poll(self, timeout: float | None, *, status: bool) -> Selected:
        return drive(self._session.poll_steps(timeout, status=status), self._wait)

    def _wait(self, seconds: float) -> list[Event]:
        # The session's loop may wait: for a route set while no channel is joined, else on the lines.
        subscriber = self._session.subscriber
        if subscriber is None:
            self._routes_came.wait(seconds)
            return []
        return subscriber.poll(seconds)

    def deliveries(self) -> Iterator[Delivery]:
        """Iterate over deliveries of subscribed, entitled symbols until :meth:`close`."""
        for event in self._iterate(status=False):
            if isinstance(event, Delivery):
                yield event

    def book_updates(self) -> Iterator[BookUpdate]:
        """Iterate over order-book updates (``fix44`` channels) until :meth:`close`.

        Each message yields one :class:`~feedha.client.books.BookUpdate` per subscribed
        symbol it touched (the changes, the trades, and the book after them); an image
        yields each symbol's book first.
        """
        for delivery in self.deliveries():
            yield from self._core.book_updates(delivery)

    def book_updates_of(self, delivery: Delivery) -> list[BookUpdate]:
        """The book updates of one delivery (from :meth:`events` or :meth:`deliveries`).

        Only the subscribed symbols: a ``fix44`` message may also carry others.
        """
        return self._core.book_updates(delivery)

    def book(self, symbol: str) -> Book | None:
        """The newest book of a subscribed ``symbol`` that the book updates saw (``None``: none yet)."""
        return self._core.book(symbol)

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
        while not self._session.closed:
            try:
                batch = self._poll(self._session.poll_interval_s, status=status)
            except ClosedError:
                return
            yield from batch

    def replay(
        self,
        channel: int | str,
        start: datetime | float,
        end: datetime | float,
        *,
        speed: float | None = None,
    ) -> Iterator[Delivery | StatusEvent]:
        """Replay the messages a channel published from ``start`` to ``end``, then end.

        The updates come from the channel's replay services (the adapters' journals)
        in msg_seq order, as the live stream carried them: a :class:`Delivery` per
        message of a subscribed symbol, :class:`SessionEnded` / :class:`SessionStarted`
        at a session boundary, :class:`Purged` for a purged message. A window is
        ``start <= publish time < end``. The subscription must route the channel
        (its services and entitlement come from there); a key entitled to delayed
        data only may replay windows that ended at least the delay ago.

        Args:
            channel: the channel's number or name.
            start: the window's start: a ``datetime`` (naive: UTC) or seconds since the epoch.
            end: its end (exclusive), after ``start``.
            speed: times real time (``2.0``: twice as fast); ``None``: as fast as it is read.

        Raises:
            ConfigError: the subscription routes no such channel, or it has no replay service.
            ValueError: ``end`` is not after ``start``, or ``speed`` is not positive.
            ReplayFailed: refused (not entitled), or no service answered (raised while iterating).
        """
        self._session.check_open()
        window = TimeReplay(0, to_ns(start), to_ns(end), speed)
        client, window, wanted = plan(self._session.routes, channel, window, self._core.curve)
        return _replaying(client, window, wanted)

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
        return self._session.core.add_callback(callback, kinds)

    def stats(self) -> FeedClientStats:
        """A snapshot of the counters."""
        return self._session.stats()

    def close(self) -> None:
        """Stop watching, close the admin channel and every line socket. Idempotent.

        The subscription is left on the server (:meth:`cancel` removes it).
        """
        if self._session.closed:
            return
        self._session.closed = True
        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                self._call(self._shutdown())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        if not self._loop.is_running():
            self._loop.close()
        self._session.close_lines()

    async def _shutdown(self) -> None:
        await self._session.stop_admin()
        # gRPC leaves a task per finished call that waits for its status; end them
        # here, or the closing loop reports each one as "destroyed but pending".
        leftovers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in leftovers:
            task.cancel()
        await asyncio.gather(*leftovers, return_exceptions=True)


def _replaying(
    client: ReplayClient, window: TimeReplay, wanted: Callable[[str], bool]
) -> Iterator[Delivery | StatusEvent]:
    try:
        yield from wanted_only(replay_window(client, window), wanted)
    finally:
        client.close()


def _subscriber(spec: ChannelSpec, core: FeedCore) -> Subscriber:
    return Subscriber([spec], core.config, on_retransmission_needed=core.retransmit)


__all__ = ["FeedClient", "FeedClientStats"]
