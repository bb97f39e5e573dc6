"""The gRPC servicers for adapters (AdapterRegistry) and operators (AdminControl)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import grpc

from feedha.admin_server import convert, paging
from feedha.admin_server.adapters import AdapterSession
from feedha.admin_server.auth import current_principal
from feedha.admin_server.errors import AdminError, InvalidArgumentError
from feedha.admin_server.fanout import HubEvent
from feedha.admin_server.hub import Hub
from feedha.admin_server.purging import PurgeSpec
from feedha.admin_server.registry import Directive
from feedha.admin_server.status import abort_with
from feedha.proto import admin_pb2, admin_pb2_grpc
from feedha.proto.registry import (
    command_to_proto,
    registration_from_proto,
    result_from_proto,
    status_from_proto,
)
from feedha.transport.tasks import cancel_and_wait

logger = logging.getLogger(__name__)


class AdapterRegistryServicer(admin_pb2_grpc.AdapterRegistryServicer):
    """``feedha.v1.AdapterRegistry``: one bidirectional stream per adapter."""

    def __init__(self, hub: Hub) -> None:
        self._hub = hub

    async def Connect(  # noqa: N802 (gRPC method name)
        self, request_iterator: AsyncIterator[admin_pb2.ConnectRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[admin_pb2.ConnectResponse]:
        """Take the registration, then status reports; send operator commands back."""
        first = await anext(aiter(request_iterator), None)
        if first is None:
            return
        if not first.HasField("registration"):
            await abort_with(
                context,
                InvalidArgumentError(
                    "the first message must be a registration", reason="REGISTRATION_MISSING"
                ),
            )
        try:
            registration = registration_from_proto(first.registration)
        except ValueError as exc:
            await abort_with(context, exc)
        try:
            session = self._hub.adapters.attach(registration, current_principal())
        except AdminError as exc:
            await abort_with(context, exc)
        reader = asyncio.create_task(self._read(request_iterator, session))
        try:
            while True:
                getter = asyncio.create_task(session.commands.get())
                done, _pending = await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    yield admin_pb2.ConnectResponse(command=command_to_proto(getter.result().command))
                    continue
                getter.cancel()
                break
        finally:
            try:
                with contextlib.suppress(grpc.RpcError):
                    await cancel_and_wait(reader)
            finally:
                self._hub.adapters.detach(session)

    async def _read(
        self, request_iterator: AsyncIterator[admin_pb2.ConnectRequest], session: AdapterSession
    ) -> None:
        async for report in request_iterator:
            if report.HasField("status"):
                self._hub.adapters.report(session, status_from_proto(report.status))
            elif report.HasField("result"):
                self._hub.purges.on_result(session, result_from_proto(report.result))
            elif report.HasField("registration"):
                logger.warning("adapter %s sent a second registration; ignored", session.adapter_id)


def _event_to_proto(event: HubEvent) -> admin_pb2.WatchEventsResponse:
    return admin_pb2.WatchEventsResponse(
        event_time=convert.timestamp(event.at),
        kind=convert.event_kind_to_proto(event.kind),
        channel_name=event.channel_name,
        adapter_id=event.adapter_id,
        detail=event.detail,
    )


class AdminControlServicer(admin_pb2_grpc.AdminControlServicer):
    """``feedha.v1.AdminControl``: the operators' API (admin role, checked by the interceptor)."""

    def __init__(self, hub: Hub) -> None:
        self._hub = hub

    async def ListAdapters(  # noqa: N802
        self, request: admin_pb2.ListAdaptersRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.ListAdaptersResponse:
        """The registered adapters, up or down, a page at a time (by channel, then id)."""
        records = self._hub.adapters.registry.records()
        if request.channel_name:
            records = [r for r in records if r.channel_name == request.channel_name]
        try:
            chunk, token = paging.page(
                records,
                key=lambda r: (r.channel_name, r.adapter_id),
                page_size=request.page_size,
                page_token=request.page_token,
                scope=f"adapters:{request.channel_name}",
            )
        except AdminError as exc:
            await abort_with(context, exc)
        return admin_pb2.ListAdaptersResponse(
            adapters=[convert.record_to_proto(r) for r in chunk], next_page_token=token
        )

    async def ListSubscriptions(  # noqa: N802
        self, request: admin_pb2.ListSubscriptionsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.ListSubscriptionsResponse:
        """Every subscription, a page at a time (oldest first)."""
        try:
            chunk, token = paging.page(
                self._hub.store.subscriptions(),
                key=lambda s: (s.created_at, s.subscription_id),
                page_size=request.page_size,
                page_token=request.page_token,
                scope="subscriptions",
            )
        except AdminError as exc:
            await abort_with(context, exc)
        return admin_pb2.ListSubscriptionsResponse(
            subscriptions=[convert.subscription_to_proto(s) for s in chunk], next_page_token=token
        )

    async def Failover(  # noqa: N802
        self, request: admin_pb2.FailoverRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.FailoverResponse:
        """Demote the channel's active and promote a backup, at term + 1."""
        hub, principal = self._hub, current_principal()
        try:
            plan = hub.adapters.registry.plan_failover(
                request.channel_name,
                now=hub.clock(),
                to=request.to_adapter_id or None,
                force=request.force,
                issued_by=principal.user,
            )
        except (AdminError, ValueError) as exc:
            await abort_with(context, exc)
        try:
            sent = hub.adapters.send(principal, "failover", request.channel_name, plan)
        except (AdminError, ValueError) as exc:
            hub.adapters.registry.cancel_failover(request.channel_name)
            await abort_with(context, exc)
        return admin_pb2.FailoverResponse(sent=_sent(sent))

    async def FailAdapter(  # noqa: N802
        self, request: admin_pb2.FailAdapterRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.FailAdapterResponse:
        """Tell an adapter to take itself off line."""
        hub, principal = self._hub, current_principal()
        try:
            plan = hub.adapters.registry.plan_fail(
                request.adapter_id, reason=request.reason, issued_by=principal.user
            )
            sent = hub.adapters.send(principal, "fail", request.adapter_id, plan)
        except (AdminError, ValueError) as exc:
            await abort_with(context, exc)
        return admin_pb2.FailAdapterResponse(sent=_sent(sent))

    async def Throttle(  # noqa: N802
        self, request: admin_pb2.ThrottleRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.ThrottleResponse:
        """Limit an adapter's publishing rate."""
        hub, principal = self._hub, current_principal()
        try:
            plan = hub.adapters.registry.plan_throttle(
                request.adapter_id, request.rate, issued_by=principal.user
            )
            sent = hub.adapters.send(principal, "throttle", request.adapter_id, plan)
        except (AdminError, ValueError) as exc:
            await abort_with(context, exc)
        return admin_pb2.ThrottleResponse(sent=_sent(sent))

    async def EndSession(  # noqa: N802
        self, request: admin_pb2.EndSessionRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.EndSessionResponse:
        """End a channel's trading session now (its active proposes the boundary)."""
        hub, principal = self._hub, current_principal()
        try:
            plan = hub.adapters.registry.plan_session_end(
                request.channel_name, reason=request.reason, issued_by=principal.user
            )
            sent = hub.adapters.send(principal, "session_end", request.channel_name, plan)
        except (AdminError, ValueError) as exc:
            await abort_with(context, exc)
        return admin_pb2.EndSessionResponse(sent=_sent(sent))

    async def Purge(  # noqa: N802
        self, request: admin_pb2.PurgeRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.PurgeResponse:
        """Purge messages pending on a channel's delayed line (the channel's active decides; audited)."""
        spec = PurgeSpec(
            channel=request.channel_name,
            first_msg_seq=request.first_msg_seq,
            last_msg_seq=request.last_msg_seq,
            all_pending=request.all_pending,
            reason=request.reason,
        )
        try:
            outcome = await self._hub.purges.purge(current_principal(), spec)
        except AdminError as exc:
            await abort_with(context, exc)
        return admin_pb2.PurgeResponse(
            purge_id=outcome.purge_id,
            first_msg_seq=outcome.first_msg_seq,
            last_msg_seq=outcome.last_msg_seq,
            count=outcome.count,
            adapter_id=outcome.adapter_id,
            confirmed_adapter_ids=outcome.confirmed,
            unconfirmed_adapter_ids=outcome.unconfirmed,
        )

    async def WatchEvents(  # noqa: N802
        self, request: admin_pb2.WatchEventsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[admin_pb2.WatchEventsResponse]:
        """Stream registry changes, commands, subscriptions and policy reloads as they happen."""
        async with contextlib.AsyncExitStack() as stack:
            try:
                events = await stack.enter_async_context(self._hub.events.listen(current_principal().user))
            except AdminError as exc:  # the user's watch streams are at their quota
                await abort_with(context, exc)
            yield _event_to_proto(HubEvent(at=self._hub.clock(), kind="watching"))
            while True:
                yield _event_to_proto(await events.get())


def _sent(directives: list[Directive]) -> list[admin_pb2.CommandSent]:
    return [
        admin_pb2.CommandSent(adapter_id=d.adapter_id, command=command_to_proto(d.command))
        for d in directives
    ]
