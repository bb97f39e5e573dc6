"""Where the hub's events go: every listener gets each event, in a bounded queue.

Listeners are route watches (``WatchRoutes``), ``feedctl watch`` streams
(``WatchEvents``) and the status page's feed. A listener that falls behind
loses its oldest events (its queue holds :data:`EVENT_QUEUE_SIZE`). A user's
watches count against ``limits.watches_per_user``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Final

from feedha.admin_server.limits import exhausted

__all__ = ["EVENT_QUEUE_SIZE", "Fanout", "HubEvent"]

EVENT_QUEUE_SIZE: Final = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class HubEvent:
    """An event for listeners: registry changes, operator commands, subscriptions, policy reloads."""

    at: float
    kind: str
    channel_name: str = ""  # "" with routes_changed: every channel (policy reload)
    adapter_id: str = ""
    detail: str = ""
    routes_changed: bool = False


class Fanout:
    """The hub's listeners, and each user's count of them.

    Args:
        watches_per_user: the watches one user may have open.
        refused: counts a refusal by its reason (the hub's counters).
    """

    def __init__(self, *, watches_per_user: int, refused: Callable[[str], None]) -> None:
        self._watches_per_user, self._refused = watches_per_user, refused
        self._listeners: set[asyncio.Queue[HubEvent]] = set()
        self._watches: dict[str, int] = {}  # open watch streams per user

    def __repr__(self) -> str:
        return f"<Fanout [listeners={len(self._listeners)}]>"

    @property
    def listeners(self) -> int:
        """Open listeners now."""
        return len(self._listeners)

    def publish(self, event: HubEvent) -> None:
        """Give an event to every listener (a full listener loses its oldest event)."""
        for queue in self._listeners:
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(event)

    @contextlib.asynccontextmanager
    async def listen(self, user: str | None = None) -> AsyncIterator[asyncio.Queue[HubEvent]]:
        """A queue that receives every event published while the context is open.

        Args:
            user: the caller whose watch this is (counted against ``watches_per_user``);
                ``None`` for the server's own listeners.

        Raises:
            ResourceExhaustedError: the user has ``watches_per_user`` watches open already.
        """
        if user is not None:
            open_now, limit = self._watches.get(user, 0), self._watches_per_user
            if open_now >= limit:
                self._refused("TOO_MANY_WATCHES")
                raise exhausted(
                    f"user {user!r} has {open_now} watch streams open; close some first",
                    limit,
                    reason="TOO_MANY_WATCHES",
                )
            self._watches[user] = open_now + 1
        queue: asyncio.Queue[HubEvent] = asyncio.Queue(EVENT_QUEUE_SIZE)
        self._listeners.add(queue)
        try:
            yield queue
        finally:
            self._listeners.discard(queue)
            if user is not None:
                left = self._watches.pop(user, 1) - 1
                if left > 0:
                    self._watches[user] = left
