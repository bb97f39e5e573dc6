"""One feed client, written once: the admin calls as coroutines, the data side as a poll loop.

Theory of operation
-------------------
:class:`FeedSession` is everything :class:`~feedha.client.FeedClient` and
:class:`~feedha.client.AsyncFeedClient` do; they are facades over it that
differ only in where the coroutines run and how the poll loop waits:

- the admin side is asyncio (``grpc.aio``): :meth:`FeedSession.open` (log in),
  :meth:`~FeedSession.subscribe`, :meth:`~FeedSession.modify`,
  :meth:`~FeedSession.cancel`, :meth:`~FeedSession.stop_admin`, and the route
  watch and token renewal tasks (:class:`~feedha.client._watch.RouteWatch`).
  ``AsyncFeedClient`` awaits them on the caller's loop; ``FeedClient`` runs
  them on a private event loop in a thread of its own and waits for the
  result, so the watch and the renewal go on while the application is not
  polling.
- every route set learned goes into an inbox (a ``deque``: the admin loop
  appends, the polling thread or task takes) and sets a wake-up event
  (``threading.Event`` or ``asyncio.Event``, the facade's choice).
- :meth:`FeedSession.poll_steps` is the data side's poll loop, as a
  generator (:mod:`feedha.client._drive`): it applies the route sets that came
  (:class:`~feedha.client._feed_core.FeedCore`: joins, filters, replay,
  entitlement changes), then yields how long it may wait; the facade waits
  for the wake-up event while no channel is joined, and otherwise polls its
  subscriber (:class:`~feedha.client.Subscriber`, blocking, or
  :class:`~feedha.client.AsyncSubscriber`) and sends the events back; the loop
  selects what the application sees.

So the data of a blocking ``FeedClient`` never crosses a thread: the caller's
thread reads the lines, as the blocking subscriber's measurements favour
(see :mod:`feedha.client.subscriber`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Generator, Sequence
from typing import Any, Generic, Protocol, TypeVar

from feedha.admin_client import AdminClient, Route, Subscription, TlsConfig
from feedha.client._feed_core import ON_SLOW_REASON, FeedClientStats, FeedCore, Joinable
from feedha.client._slow import SlowWatch, Switch
from feedha.client._subscriber_config import ChannelSpec, SubscriberConfig
from feedha.client._watch import RouteWatch
from feedha.client.arbiter_stats import ArbiterStats
from feedha.client.errors import ClosedError, ModelVersionError
from feedha.client.events import Delivery, Event, StatusEvent
from feedha.client.model import check_model

Selected = list[Delivery | StatusEvent]
FeedSteps = Generator[float, list[Event], Selected]  # yields seconds it may wait


class Wakeup(Protocol):
    """What the inbox sets when a route set comes: ``threading.Event`` or ``asyncio.Event``."""

    def set(self) -> None: ...

    def clear(self) -> None: ...


class Polled(Joinable, Protocol):
    """What a session needs of its subscriber besides joining: its counters."""

    def stats(self) -> dict[str, ArbiterStats]: ...


_S = TypeVar("_S", bound=Polled)


class FeedSession(RouteWatch, Generic[_S]):
    """The state and logic of one feed client (see the module docstring).

    Args:
        config: socket and arbitration settings of the subscriber.
        kind: the facade's class name, for ``repr`` and errors.
        retry_deadline_s: how long admin calls retry while the admin server is unreachable.
        poll_interval_s: the longest a poll waits before applying route changes.
        wakeup: set whenever a route set comes.
        make_subscriber: makes the subscriber for the first channel joined.
    """

    def __init__(
        self,
        config: SubscriberConfig | None,
        *,
        kind: str,
        retry_deadline_s: float,
        poll_interval_s: float,
        wakeup: Wakeup,
        make_subscriber: Callable[[ChannelSpec, FeedCore], _S],
    ) -> None:
        self._begin(config, retry_deadline_s=retry_deadline_s, poll_interval_s=poll_interval_s)
        self.kind = kind
        self.subscriber: _S | None = None
        self.opened = self.closed = False
        self._inbox: deque[tuple[str, tuple[Route, ...]]] = deque()  # appended on the admin loop
        self.routes: tuple[Route, ...] = ()  # the newest route set (a time replay finds its services there)
        self._wakeup = wakeup
        self._make_subscriber = make_subscriber
        self.slow: SlowWatch | None = None  # FeedClient(on_slow="conflate")

    @property
    def core(self) -> FeedCore:
        """Routes, filters, selection, callbacks and counters."""
        return self._core

    @property
    def retry_deadline_s(self) -> float:
        """How long admin calls retry while the admin server is unreachable."""
        return self._retry_deadline_s

    @property
    def poll_interval_s(self) -> float:
        """The longest a poll waits before applying route changes."""
        return self._poll_interval_s

    def describe(self) -> str:
        """The facade's ``repr``."""
        state = "closed" if self.closed else "subscribed" if self._subscription_id else "idle"
        core = self._core
        return (
            f"<{self.kind} [{state}, subscription={self._subscription_id or None}, "
            f"delivered={core.delivered}, filtered={core.filtered}, lines={core.lines}]>"
        )

    def check_open(self) -> None:
        """Raise :class:`ClosedError` if closed."""
        if self.closed:
            raise ClosedError(f"the {self.kind} is closed")

    def check_ready(self) -> None:
        """Raise :class:`ClosedError` if closed or not opened yet."""
        self.check_open()
        if not self.opened:
            raise ClosedError(f"the {self.kind} is not open: use `async with` or await open()")

    # -- the admin side (coroutines on the admin loop) -------------------------------

    async def open(self, target: str, key_id: str, secret: str, tls: TlsConfig | bool | None) -> None:
        """Open the admin channel on the running loop and log in.

        Raises:
            AuthenticationFailed: bad key id or secret.
            AdminUnavailable: the admin server stayed unreachable for the retry deadline.
        """
        self.check_open()
        # A grpc.aio channel belongs to the loop it was made on: this one.
        client = AdminClient(target, key_id, secret, tls=tls, retry_deadline_s=self._retry_deadline_s)
        self._admin = await client.__aenter__()
        self.opened = True
        await self._admin.login()

    async def subscribe(self, symbols: Sequence[str], *, initial_image: bool) -> Subscription:
        """Subscribe and start following the routes (see ``FeedClient.subscribe``)."""
        self.check_ready()
        if self._subscription_id:
            raise ValueError(f"already subscribed ({self._subscription_id}); use modify()")
        symbols = tuple(symbols)
        subscription = await self._admin.subscribe(symbols, curve_public_key=self._curve[0])
        try:
            check_model(subscription.routes)
        except ModelVersionError:
            await self._admin.cancel(subscription.subscription_id)  # nothing of it is joined
            raise
        self._subscription_id, self._symbols = subscription.subscription_id, symbols
        self._core.initial_image = initial_image
        self._push("subscribed", subscription.routes)
        await self._start_watch()
        return subscription

    async def modify(self, symbols: Sequence[str]) -> Subscription:
        """Replace the subscribed symbols (see ``FeedClient.modify``)."""
        self.check_ready()
        if not self._subscription_id:
            raise ValueError("not subscribed; use subscribe()")
        symbols = tuple(symbols)
        subscription = await self._admin.modify(self._subscription_id, symbols)
        check_model(subscription.routes)  # the joined lines stay; a watch update joins what it can
        self._symbols = symbols
        self._push("modified", subscription.routes)
        return subscription

    async def cancel(self) -> None:
        """Cancel the subscription and leave every line (see ``FeedClient.cancel``)."""
        self.check_ready()
        if not self._subscription_id:
            return
        await self._stop_watch()
        await self._admin.cancel(self._subscription_id)
        self._subscription_id, self._symbols = "", ()
        self._push("cancelled", ())

    async def stop_admin(self) -> None:
        """Stop the watch and the renewal and close the admin channel."""
        await self._stop_watch()
        if self.opened:
            await self._admin.close()

    def _push(self, reason: str, routes: tuple[Route, ...]) -> None:
        self.routes = () if reason == "cancelled" else routes  # the newest (read by replay, any thread)
        self._inbox.append((reason, routes))  # deque.append is atomic: the admin loop may be another thread
        self._wakeup.set()

    # -- the data side (the polling thread or task) ------------------------------------

    def poll_steps(self, timeout: float | None, *, status: bool) -> FeedSteps:
        """The poll loop (see the module docstring); returns what the application sees.

        Raises:
            ClosedError: closed (or, for ``AsyncFeedClient``, not opened).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.check_ready()
            self._apply_updates()
            wait = self._poll_interval_s
            if deadline is not None:
                wait = min(wait, max(0.0, deadline - time.monotonic()))
            events: list[Any] = self._pending
            self._pending = []
            if not events:
                events = yield wait
            out = self._core.select(events, status=status)
            if self.slow is not None and (events or self.slow.conflated):
                out += self._on_slow(self.slow, out, status=status)
            if out or (deadline is not None and time.monotonic() >= deadline):
                return out

    def _on_slow(self, slow: SlowWatch, out: Selected, *, status: bool) -> Selected:
        # Behind by more than the bound: the conflated lines; current again: real time.
        switch = slow.observe(out, now_ns=time.time_ns(), channels=self._core.real_time_channels())
        if switch is None:
            return []
        self._switch(switch)
        return self._core.select(list(switch.events), status=status)

    def _switch(self, switch: Switch) -> None:
        core = self._core
        core.mode = "conflated" if switch.conflate else "realtime"
        core.resume_at = dict(switch.resume_at)
        if self.subscriber is not None:  # its sockets' queues (the backlog) go with them
            self.subscriber.close()
            self.subscriber, core.lines = None, 0
        self.subscriber, events = core.apply_routes(ON_SLOW_REASON, self.routes, None, self._make)
        self._pending += events

    def _apply_updates(self) -> None:
        self._wakeup.clear()  # first: a route set that comes from now on wakes the next wait
        inbox = self._inbox
        while inbox:
            reason, routes = inbox.popleft()
            subscriber, events = self._core.apply_routes(reason, routes, self.subscriber, self._make)
            self.subscriber = subscriber
            self._pending += events

    def _make(self, spec: ChannelSpec) -> _S:
        return self._make_subscriber(spec, self._core)

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
            channels={} if self.subscriber is None else self.subscriber.stats(),
            status_events=dict(core.status_counts),
        )

    def close_lines(self) -> None:
        """Close the subscriber and the replay client (the polling side's part of closing)."""
        if self.subscriber is not None:
            self.subscriber.close()
            self.subscriber = None
        self._core.close()
