"""The admin side both feed clients share: follow a subscription's routes, stay logged in.

:class:`RouteWatch` is a base of :class:`~feedha.client._feed_session.FeedSession`,
whose coroutines :class:`~feedha.client.FeedClient` runs on its admin thread's
loop and :class:`~feedha.client.AsyncFeedClient` on the caller's loop. Each
route set learned goes to ``_push(reason, routes)``; the client applies it
where it polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from typing import Final

import zmq

from feedha.admin_client import AdminClient, AdminClientError, PermissionDenied, Route
from feedha.client._feed_core import FeedCore
from feedha.client.events import StatusEvent
from feedha.client.subscriber import SubscriberConfig
from feedha.transport.tasks import cancel_and_wait

logger = logging.getLogger(__name__)

RENEW_AT: Final = 0.7  # log in again when this share of the token's lifetime has passed
WATCH_RETRY_S: Final = 1.0


class RouteWatch:
    """The route watch and the token renewal (see the module docstring)."""

    _admin: AdminClient
    _curve: tuple[str, str]
    _config: SubscriberConfig
    _core: FeedCore
    _pending: list[StatusEvent]
    _retry_deadline_s: float
    _poll_interval_s: float
    _subscription_id: str
    _symbols: tuple[str, ...]
    _watch: asyncio.Task[None] | None
    _renew: asyncio.Task[None] | None
    _watch_connections: int
    _resubscriptions: int
    _last_admin_error: str

    def _begin(
        self, config: SubscriberConfig | None, *, retry_deadline_s: float, poll_interval_s: float
    ) -> None:
        """The state both clients start with: a fresh CURVE identity, the core, no subscription yet."""
        curve_public, curve_secret = zmq.curve_keypair()  # this session's data-plane identity
        self._curve = (curve_public.decode(), curve_secret.decode())
        self._config = dataclasses.replace(
            config or SubscriberConfig(), curve_public=self._curve[0], curve_secret=self._curve[1]
        )
        self._retry_deadline_s = retry_deadline_s
        self._poll_interval_s = poll_interval_s
        self._core = FeedCore(self._config, self._curve)
        self._pending = []  # events of applied route sets, not yet selected
        self._subscription_id = ""
        self._symbols = ()
        self._watch_connections = self._resubscriptions = 0
        self._last_admin_error = ""
        self._watch = self._renew = None

    def _push(self, reason: str, routes: tuple[Route, ...]) -> None:
        raise NotImplementedError

    async def _start_watch(self) -> None:
        if self._watch is not None:
            await cancel_and_wait(self._watch)
        self._watch = asyncio.create_task(self._watch_routes(), name="feedclient-watch")
        if self._renew is None:
            self._renew = asyncio.create_task(self._keep_logged_in(), name="feedclient-renew")

    async def _keep_logged_in(self) -> None:
        # The lines accept this client's key until its token expires: log in
        # again well before, so the admin server extends the grant.
        while True:
            left = self._admin.token_expires_at - time.time()
            await asyncio.sleep(max(1.0, left * RENEW_AT))
            try:
                await self._admin.login()
            except AdminClientError as exc:
                self._last_admin_error = str(exc)
                logger.warning("could not log in again to keep the lines: %s", exc)

    async def _watch_routes(self) -> None:
        # Strategy: AdminClient.watch_routes already rides through restarts
        # (UNAVAILABLE is retried); here we handle what it gives up on. A
        # forgotten subscription is created again; anything else (e.g. the
        # policy withdrew an entitlement) is logged and retried slowly, while
        # the lines keep flowing under the last good routes.
        while True:
            try:
                async for update in self._admin.watch_routes(self._subscription_id):
                    if update.initial:
                        self._watch_connections += 1
                    self._push(update.reason, update.routes)
                return  # the subscription was cancelled
            except asyncio.CancelledError:
                raise
            except AdminClientError as exc:
                self._last_admin_error = str(exc)
                if exc.reason == "SUBSCRIPTION_NOT_FOUND":
                    logger.warning(
                        "subscription %s unknown to the admin server; subscribing again",
                        self._subscription_id,
                    )
                    with contextlib.suppress(AdminClientError):
                        subscription = await self._admin.subscribe(
                            self._symbols, curve_public_key=self._curve[0]
                        )
                        self._subscription_id = subscription.subscription_id
                        self._resubscriptions += 1
                        self._push("resubscribed", subscription.routes)
                        continue
                elif isinstance(exc, PermissionDenied):
                    self._push("denied", ())
                logger.warning("route watch failed: %s; retrying in %.1f s", exc, WATCH_RETRY_S)
            except Exception as exc:  # a watch must never die of a surprise: retry
                self._last_admin_error = repr(exc)
                logger.exception("route watch failed; retrying in %.1f s", WATCH_RETRY_S)
            await asyncio.sleep(WATCH_RETRY_S)

    async def _stop_watch(self) -> None:
        for task in (self._watch, self._renew):
            if task is not None:
                await cancel_and_wait(task)
        self._watch = self._renew = None
