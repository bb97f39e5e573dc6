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
:class:`~feedha.client.AsyncFeedClient`, and so is every public method:
``FeedApi`` (``client_lib/_sync_feed_api.py``) is generated from the asyncio
``AsyncFeedApi`` (``client_lib/_feed_api.py``, whose docstring tells how).
This class adds the blocking primitives: it runs the session's admin
coroutines on its admin thread's loop and waits for them, and answers the
session's poll loop with :meth:`Subscriber.poll` on the caller's thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Coroutine
from typing import Any, Final, TypeVar

from feedha.admin_client import AdminUnavailable
from feedha.client._feed_core import FeedClientStats
from feedha.client._feed_session import Wakeup
from feedha.client._sync_feed_api import FeedApi

logger = logging.getLogger(__name__)

_CALL_MARGIN_S: Final = 15.0
_T = TypeVar("_T")


class FeedClient(FeedApi):
    """Log in, subscribe through the admin server, and receive the entitled symbols from every line.

    The constructor logs in (its arguments: :meth:`__init__`); every method blocks
    the calling thread. :class:`~feedha.client.AsyncFeedClient` has the same methods
    on asyncio.

    Example::

        with FeedClient(admin="127.0.0.1:50051", key_id=key_id, secret=secret) as client:
            client.subscribe(["AAPL", "MSFT"])
            for delivery in client.deliveries():
                print(delivery.msg_seq, delivery.update.symbol)
    """

    def _start(self) -> None:
        # Log in now, on the admin thread's loop, which then keeps the route watch and the renewal.
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="feedclient-admin", daemon=True)
        self._thread.start()
        try:
            self.open()
        except BaseException:
            self.close()
            raise

    def _run_admin(self, call: Coroutine[Any, Any, _T]) -> _T:
        # Run one of the session's admin coroutines on the admin thread's loop and wait for it.
        future = asyncio.run_coroutine_threadsafe(call, self._loop)
        try:
            return future.result(timeout=self._session.retry_deadline_s + _CALL_MARGIN_S)
        except concurrent.futures.TimeoutError as exc:
            future.cancel()
            raise AdminUnavailable("the admin server did not answer in time") from exc

    def _new_wakeup(self) -> Wakeup:
        self._routes_came = threading.Event()  # set on the admin thread, waited for on the caller's
        return self._routes_came

    def _wait_for_routes(self, seconds: float) -> None:
        self._routes_came.wait(seconds)

    def _stop(self) -> None:
        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                self._run_admin(self._shutdown())
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


__all__ = ["FeedClient", "FeedClientStats"]
