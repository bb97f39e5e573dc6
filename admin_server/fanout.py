"""Where the hub's events go: every event to each listener, a coalesced mark to the route watches it concerns.

Theory of operation
-------------------
Two kinds of consumers:

* **Listeners** (``feedctl watch``'s ``WatchEvents``, the status page's feed)
  want every event: each has a queue of :data:`EVENT_QUEUE_SIZE`, and one
  that falls behind loses its oldest events.
* **Route watches** (``WatchRoutes``: one per client per subscription, so
  hundreds) want the latest routes of one subscription, nothing else. A
  change can matter only to the watches of the channels it touched (a
  registry change, a channel's packet key: ``channel_name``), of the
  subscription it changed (Modify, Cancel, expiry: ``subscription_id``), or
  to all of them (a policy reload: neither). So a :class:`RouteWatch` is
  indexed by its subscription and by the channels of its routes (its stream
  says which, :meth:`Fanout.follow`), and an event *marks* only the watches
  it concerns: the latest cause kept and a flag set, constant work each.
  The watch's stream wakes, re-plans once and sends the routes if they
  changed, however many events marked it meanwhile: a stream whose client
  reads slowly is behind, finds one mark, and sends the latest routes once,
  never the ones in between. (Before, every Modify and Cancel told every
  watch of every user that routes had changed on every channel, and each
  watch queued every event and re-planned for each, on the event loop.)

The watches woken by one change mostly plan the same thing (one user's
subscriptions of the same symbols, on a channel whose key or lines changed):
:class:`SharedPlans` keeps each plan, and what it turns into, for the
watches woken by the same change (a plan made after the latest change that
concerns routes), so a change costs a plan per distinct (caller, symbols),
not a plan per watch.

A user's watches of both kinds count against ``limits.watches_per_user``,
and a subscription holds at most ``limits.watches_per_subscription`` route
watches (a newer one takes the oldest's place): the streams one Modify wakes
are bounded by that, and its owner's request rate bounds the Modifies.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

from feedha.admin_server.errors import ResourceExhaustedError
from feedha.admin_server.limits import exhausted

__all__ = ["EVENT_QUEUE_SIZE", "MAX_SHARED_PLANS", "Fanout", "HubEvent", "RouteWatch", "SharedPlans"]

EVENT_QUEUE_SIZE: Final = 1000
MAX_SHARED_PLANS: Final = 4096  # plans kept for the watches of one change; past this they start again
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True, kw_only=True)
class HubEvent:
    """An event for listeners: registry changes, operator commands, subscriptions, policy reloads."""

    at: float
    kind: str
    channel_name: str = ""  # "" with routes_changed and no subscription_id: every channel (policy reload)
    adapter_id: str = ""
    detail: str = ""
    routes_changed: bool = False
    subscription_id: str = ""  # with routes_changed: only this subscription's routes changed


class RouteWatch:
    """One route watch's mark: set by the events that concern it, taken by its stream (see the notes).

    Args:
        subscription_id: the subscription watched.
    """

    def __init__(self, subscription_id: str, tally: dict[str, int] | None = None) -> None:
        self.subscription_id = subscription_id
        self._tally = {"marks": 0, "wakes": 0} if tally is None else tally  # the fan-out's totals
        self.channels: frozenset[str] = frozenset()
        self.cause = ("", "")  # the latest marking event's kind and detail
        self.marks = 0  # events that marked it
        self.wakes = 0  # times its stream took the mark (re-planned)
        self.replaced: ResourceExhaustedError | None = (
            None  # a newer watch of the subscription took its place
        )
        self._marked = asyncio.Event()

    def __repr__(self) -> str:
        return (
            f"<RouteWatch [{self.subscription_id}, channels={sorted(self.channels)}, "
            f"marks={self.marks}, wakes={self.wakes}]>"
        )

    def mark(self, kind: str, detail: str) -> None:
        """Note a change that may concern the watch (constant work, whatever its stream is doing)."""
        self.cause = (kind, detail)
        self.marks += 1
        self._tally["marks"] += 1
        self._marked.set()

    def replace(self, why: ResourceExhaustedError) -> None:
        """End the watch: its stream's next :meth:`changed` raises ``why``."""
        self.replaced = why
        self._marked.set()

    async def changed(self) -> tuple[str, str]:
        """Wait for a mark and take it; the latest marking event's kind and detail.

        Raises:
            ResourceExhaustedError: a newer watch of the same subscription took this one's place.
        """
        await self._marked.wait()
        if self.replaced is not None:
            raise self.replaced
        self._marked.clear()
        self.wakes += 1
        self._tally["wakes"] += 1
        return self.cause


class Fanout:
    """The hub's listeners, and each user's count of them.

    Args:
        watches_per_user: the watches one user may have open.
        watches_per_subscription: the route watches one subscription may have open; a newer
            one takes the place of the oldest.
        refused: counts a refusal by its reason (the hub's counters).
    """

    def __init__(
        self, *, watches_per_user: int, watches_per_subscription: int, refused: Callable[[str], None]
    ) -> None:
        self._watches_per_user, self._refused = watches_per_user, refused
        self._per_subscription = watches_per_subscription
        self._listeners: set[asyncio.Queue[HubEvent]] = set()
        self._watches: dict[str, int] = {}  # open watch streams per user
        # Ordered sets (dicts), oldest first: a subscription's oldest watch is the one replaced.
        self._by_subscription: dict[str, dict[RouteWatch, None]] = {}
        self._by_channel: dict[str, dict[RouteWatch, None]] = {}
        self._route_watches = 0
        self.tally = {"marks": 0, "wakes": 0}  # route watches marked by events, and woken to re-plan
        self.generation = 0  # changes that concerned routes, so far

    def __repr__(self) -> str:
        return (
            f"<Fanout [listeners={len(self._listeners)}, route watches={self._route_watches}, "
            f"marks={self.tally['marks']}, wakes={self.tally['wakes']}]>"
        )

    def watches_of(self, subscription_id: str) -> list[RouteWatch]:
        """The route watches of a subscription open now."""
        return list(self._by_subscription.get(subscription_id, ()))

    @property
    def listeners(self) -> int:
        """Open listeners and route watches now."""
        return len(self._listeners) + self._route_watches

    def publish(self, event: HubEvent) -> None:
        """Give an event to every listener (a full one drops its oldest); mark the watches it concerns."""
        for queue in self._listeners:
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(event)
        if not event.routes_changed:
            return
        self.generation += 1
        if event.subscription_id:
            concerned: Iterable[RouteWatch] = self._by_subscription.get(event.subscription_id, ())
        elif event.channel_name:
            concerned = self._by_channel.get(event.channel_name, ())
        else:
            concerned = itertools.chain.from_iterable(self._by_subscription.values())
        for watch in concerned:
            watch.mark(event.kind, event.adapter_id or event.detail)

    def follow(self, watch: RouteWatch, channels: Iterable[str]) -> None:
        """The channels whose changes concern ``watch`` from now on (those of its routes)."""
        now = frozenset(channels)
        for channel in watch.channels - now:
            self._drop(self._by_channel, channel, watch)
        for channel in now - watch.channels:
            self._by_channel.setdefault(channel, {})[watch] = None
        watch.channels = now

    @contextlib.asynccontextmanager
    async def watch_routes(self, user: str, subscription_id: str) -> AsyncIterator[RouteWatch]:
        """A route watch of ``subscription_id``, marked by the events that concern it while open.

        A subscription holds at most ``watches_per_subscription``: a newer watch takes the
        place of its oldest, whose stream ends (``TOO_MANY_WATCHES``; a client that
        reconnected has left it behind). So a change of one subscription wakes a bounded
        number of streams, however many its owner opens.

        Raises:
            ResourceExhaustedError: the user has ``watches_per_user`` watches open already.
        """
        with self._counted(user):
            watch = RouteWatch(subscription_id, self.tally)
            held = self._by_subscription.setdefault(subscription_id, {})
            if len(held) >= self._per_subscription:
                oldest = next(iter(held))
                self._refused("TOO_MANY_WATCHES")
                oldest.replace(
                    exhausted(
                        f"subscription {subscription_id!r} has {len(held)} route watches; a newer one "
                        "took this one's place",
                        self._per_subscription,
                        reason="TOO_MANY_WATCHES",
                        subscription=subscription_id,
                    )
                )
                self.follow(oldest, ())
                del held[oldest]
            held[watch] = None
            self._route_watches += 1
            try:
                yield watch
            finally:
                self._route_watches -= 1
                self.follow(watch, ())
                self._drop(self._by_subscription, subscription_id, watch)

    @staticmethod
    def _drop(index: dict[str, dict[RouteWatch, None]], name: str, watch: RouteWatch) -> None:
        held = index.get(name)
        if held is not None:
            held.pop(watch, None)
            if not held:
                del index[name]

    @contextlib.asynccontextmanager
    async def listen(self, user: str | None = None) -> AsyncIterator[asyncio.Queue[HubEvent]]:
        """A queue that receives every event published while the context is open.

        Args:
            user: the caller whose watch this is (counted against ``watches_per_user``);
                ``None`` for the server's own listeners.

        Raises:
            ResourceExhaustedError: the user has ``watches_per_user`` watches open already.
        """
        with contextlib.nullcontext() if user is None else self._counted(user):
            queue: asyncio.Queue[HubEvent] = asyncio.Queue(EVENT_QUEUE_SIZE)
            self._listeners.add(queue)
            try:
                yield queue
            finally:
                self._listeners.discard(queue)

    @contextlib.contextmanager
    def _counted(self, user: str) -> Iterator[None]:
        # One more watch of the user's while the context is open; refused past the quota.
        open_now, limit = self._watches.get(user, 0), self._watches_per_user
        if open_now >= limit:
            self._refused("TOO_MANY_WATCHES")
            raise exhausted(
                f"user {user!r} has {open_now} watch streams open; close some first",
                limit,
                reason="TOO_MANY_WATCHES",
            )
        self._watches[user] = open_now + 1
        try:
            yield
        finally:
            left = self._watches.pop(user, 1) - 1
            if left > 0:
                self._watches[user] = left


class SharedPlans(Generic[_T]):
    """Plans made since the latest change that concerns routes, shared by the watches it woke.

    Args:
        fanout: whose :attr:`Fanout.generation` says when a plan is stale.
        limit: plans kept at most (past it they start again).
    """

    def __init__(self, fanout: Fanout, *, limit: int = MAX_SHARED_PLANS) -> None:
        self._fanout, self._limit = fanout, limit
        self._plans: dict[Hashable, _T] = {}
        self._generation = -1
        self.made = self.shared = 0

    def __repr__(self) -> str:
        return f"<SharedPlans [kept={len(self._plans)}, made={self.made}, shared={self.shared}]>"

    def get(self, key: Hashable, make: Callable[[], _T]) -> _T:
        """The plan for ``key`` made since the latest change, or a new one from ``make`` (kept).

        An error ``make`` raises is not kept: the next watch tries again.
        """
        if self._generation != self._fanout.generation or len(self._plans) >= self._limit:
            self._plans, self._generation = {}, self._fanout.generation
        if key in self._plans:
            self.shared += 1
            return self._plans[key]
        plan = self._plans[key] = make()
        self.made += 1
        return plan
