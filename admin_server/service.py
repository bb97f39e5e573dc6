"""The gRPC servicers for logins and brokering.

Servicers stay thin: read the request, call the state owners the :class:`~admin_server.hub.Hub` holds,
build the response. Domain errors become statuses with structured details
through :func:`~admin_server.status.abort_with` (``status.py``), here, in
``control.py`` and in ``auth.py``, and nowhere else.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

import grpc
from google.protobuf import duration_pb2, timestamp_pb2

from feedha.admin_server import convert
from feedha.admin_server.auth import current_lease, current_principal
from feedha.admin_server.backoff import peer_address
from feedha.admin_server.broker import Route
from feedha.admin_server.errors import AdminError, AuthenticationError, NotFoundError
from feedha.admin_server.fanout import SharedPlans
from feedha.admin_server.hub import Hub
from feedha.admin_server.policy import Principal
from feedha.admin_server.records import SubscriptionRecord
from feedha.admin_server.status import STATUS_FOR, abort_with, status_for
from feedha.proto import admin_pb2, admin_pb2_grpc

logger = logging.getLogger(__name__)


class AdminAuthServicer(admin_pb2_grpc.AdminAuthServicer):
    """``feedha.v1.AdminAuth``: Login."""

    def __init__(self, hub: Hub) -> None:
        self._hub = hub

    async def Login(  # noqa: N802 (gRPC method name)
        self, request: admin_pb2.LoginRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.LoginResponse:
        """Exchange an API key id and secret for a token."""
        try:
            token, claims, principal = await self._hub.identity.login(
                request.key_id,
                request.secret,
                peer=peer_address(context.peer()),
                time_left_s=context.time_remaining(),
            )
        except AdminError as exc:
            await abort_with(context, exc)
        expire_time, lifetime = timestamp_pb2.Timestamp(), duration_pb2.Duration()
        expire_time.FromNanoseconds(int(claims.expires_at * 1e9))
        lifetime.FromNanoseconds(max(0, int((claims.expires_at - self._hub.clock()) * 1e9)))
        return admin_pb2.LoginResponse(
            token=token,
            expire_time=expire_time,
            lifetime=lifetime,
            user=principal.user,
            is_admin=self._hub.identity.has_role(principal, "admin"),
        )


def routes_to_proto(routes: list[Route]) -> list[admin_pb2.ChannelRoute]:
    """Broker routes -> messages."""
    return [convert.route_to_proto(route) for route in routes]


class StreamBrokerServicer(admin_pb2_grpc.StreamBrokerServicer):
    """``feedha.v1.StreamBroker``: Subscribe, Modify, Cancel, WatchRoutes."""

    def __init__(self, hub: Hub) -> None:
        self._hub = hub
        # What route watches send, planned once per (caller, symbols) for those a change woke.
        self.plans: SharedPlans[tuple[list[Route], list[admin_pb2.ChannelRoute]]] = SharedPlans(hub.events)
        self.records: SharedPlans[SubscriptionRecord] = SharedPlans(hub.events)

    def _watched(
        self, principal: Principal, symbols: tuple[str, ...]
    ) -> tuple[list[Route], list[admin_pb2.ChannelRoute]]:
        def plan() -> tuple[list[Route], list[admin_pb2.ChannelRoute]]:
            routes = self._hub.subscriptions.routes(principal, symbols)
            return routes, routes_to_proto(routes)

        return self.plans.get((principal, symbols), plan)

    async def Subscribe(  # noqa: N802
        self, request: admin_pb2.SubscribeRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.SubscribeResponse:
        """Check entitlements and return the routes for the requested symbols."""
        try:
            record, routes = self._hub.subscriptions.subscribe(
                current_principal(),
                list(request.symbols),
                curve_key=request.curve_public_key,
                lease=current_lease(),
            )
        except (AdminError, ValueError) as exc:
            await abort_with(context, exc)
        return admin_pb2.SubscribeResponse(
            subscription_id=record.subscription_id, routes=routes_to_proto(routes)
        )

    async def Modify(  # noqa: N802
        self, request: admin_pb2.ModifyRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.ModifyResponse:
        """Replace a subscription's symbols."""
        try:
            routes = self._hub.subscriptions.modify(
                current_principal(),
                request.subscription_id,
                list(request.symbols),
                lease=current_lease(),
            )
        except (AdminError, ValueError) as exc:
            await abort_with(context, exc)
        return admin_pb2.ModifyResponse(
            subscription_id=request.subscription_id, routes=routes_to_proto(routes)
        )

    async def Cancel(  # noqa: N802
        self, request: admin_pb2.CancelRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.CancelResponse:
        """Delete a subscription."""
        try:
            self._hub.subscriptions.cancel(current_principal(), request.subscription_id)
        except AdminError as exc:
            await abort_with(context, exc)
        return admin_pb2.CancelResponse()

    async def WatchRoutes(  # noqa: N802
        self, request: admin_pb2.WatchRoutesRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[admin_pb2.WatchRoutesResponse]:
        """Stream the subscription's routes now and after every change of its lines.

        The stream waits on a :class:`~admin_server.fanout.RouteWatch`: marked only by
        the changes of its channels, of its subscription, or of the policy, and
        re-planned once per wake-up however many changes came meanwhile (a client that
        reads slowly gets the latest routes once, not every one in between).
        """
        hub, sub_id = self._hub, request.subscription_id
        try:
            principal = current_principal()
            record = hub.subscriptions.owned_subscription(principal, sub_id)
        except AdminError as exc:
            await abort_with(context, exc)
        async with contextlib.AsyncExitStack() as stack:
            try:
                watch = await stack.enter_async_context(hub.events.watch_routes(principal.user, sub_id))
                routes, messages = self._watched(principal, record.symbols)
            except (AdminError, ValueError) as exc:  # over the user's watch quota; not entitled
                await abort_with(context, exc)
            hub.events.follow(watch, (route.channel.name for route in routes))
            yield admin_pb2.WatchRoutesResponse(
                subscription_id=sub_id, cause=admin_pb2.EVENT_KIND_WATCHING, routes=messages
            )
            while True:
                try:
                    kind, detail = await watch.changed()
                    new_routes, messages = self._watched(principal, self._standing(sub_id).symbols)
                except NotFoundError:
                    return  # cancelled: end the stream cleanly
                except (AdminError, ValueError) as exc:  # replaced, lease ended, no longer entitled
                    await abort_with(context, exc)
                hub.events.follow(watch, (route.channel.name for route in new_routes))
                if new_routes != routes:
                    routes = new_routes
                    yield admin_pb2.WatchRoutesResponse(
                        subscription_id=sub_id,
                        cause=convert.event_kind_to_proto(kind),
                        detail=detail,
                        routes=messages,
                    )

    def _standing(self, subscription_id: str) -> SubscriptionRecord:
        """The watched subscription as it stands (looked up once per change, for its watches).

        Raises:
            NotFoundError: it was cancelled.
            AuthenticationError: ``LEASE_ENDED``: routes carry packet keys, never past the token's life.
        """

        def look_up() -> SubscriptionRecord:
            record = self._hub.store.find_subscription(subscription_id)
            if not self._hub.subscriptions.lease_holds(record):
                raise AuthenticationError("the token expired or its API key changed", reason="LEASE_ENDED")
            return record

        return self.records.get(subscription_id, look_up)


__all__ = [
    "STATUS_FOR",
    "AdminAuthServicer",
    "StreamBrokerServicer",
    "abort_with",
    "routes_to_proto",
    "status_for",
]
