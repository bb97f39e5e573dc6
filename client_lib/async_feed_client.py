"""AsyncFeedClient: :class:`~feedha.client.FeedClient`'s API on the caller's asyncio loop.

Theory of operation
-------------------
One loop, no thread: the admin calls are ``grpc.aio`` (an
:class:`~feedha.admin_client.AdminClient` opened on the running loop), the
route watch and the token renewal are tasks on it, and the lines are read by
an :class:`~feedha.client.AsyncSubscriber` (``zmq.asyncio``). What the client
does is written once, in :class:`~feedha.client._feed_session.FeedSession`,
shared with the blocking :class:`~feedha.client.FeedClient`, and so is every
public method: they are ``AsyncFeedApi``'s (``client_lib/_feed_api.py``),
from which ``FeedClient``'s are generated. This class adds the asyncio
primitives: it awaits the session's admin coroutines and answers the
session's poll loop with :meth:`AsyncSubscriber.poll`, so the two clients
join, filter, recover and report exactly alike.

A gap is asked of a replay service synchronously inside a poll (the replay
client is a blocking socket with short timeouts): the loop waits for that
reply, as a blocking client would, which happens only after a loss. A
replay by time (:meth:`~AsyncFeedApi.replay`) fetches its pages on a thread
instead, since it reads many.

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
from collections.abc import Coroutine
from typing import Any, TypeVar

from feedha.client._feed_api import AsyncFeedApi
from feedha.client._feed_session import Wakeup
from feedha.transport.tasks import wait_at_most

logger = logging.getLogger(__name__)

_T = TypeVar("_T")


class AsyncFeedClient(AsyncFeedApi):
    """Log in, subscribe and receive the entitled symbols from every line, on asyncio.

    Use as ``async with AsyncFeedClient(...) as client:`` (logs in on entry,
    closes on exit; its arguments: :meth:`__init__`); ``async for delivery in
    client`` iterates deliveries, :meth:`events` deliveries and status events.
    The methods are :class:`~feedha.client.FeedClient`'s: those that talk to the
    admin server or read the lines are awaited (or iterated with ``async for``).
    """

    def _start(self) -> None:
        pass  # nothing runs before `async with` (or open()): the loop is the caller's

    async def _run_admin(self, call: Coroutine[Any, Any, _T]) -> _T:
        return await call  # the admin channel is a grpc.aio channel on the caller's loop

    def _new_wakeup(self) -> Wakeup:
        self._routes_came = asyncio.Event()
        return self._routes_came

    async def _wait_for_routes(self, seconds: float) -> None:
        await wait_at_most(self._routes_came.wait(), seconds)

    async def _stop(self) -> None:
        await asyncio.shield(self._shutdown())

    async def _shutdown(self) -> None:
        await self._session.stop_admin()
        self._session.close_lines()


__all__ = ["AsyncFeedClient"]
