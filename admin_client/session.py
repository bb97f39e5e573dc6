"""A standalone asyncio client of the admin server: login, subscribe, modify, cancel, watch routes.

It logs in with an API key, attaches the bearer token to every call, logs in
again when the token expires (or its key was rotated and the caller holds
the new secret), and retries while the server is unreachable (until
``retry_deadline_s``), so a subscriber rides through an admin-server
restart. It returns plain dataclasses (:class:`Route`, :class:`Line`) and
needs only grpc and the generated ``proto.admin_pb2``; its errors are in
``admin_client.errors``.

Example::

    async with AdminClient("127.0.0.1:50051", key_id, secret) as admin:
        subscription = await admin.subscribe(["AAPL", "MSFT"])
        for route in subscription.routes:
            print(route.channel_name, [line.line_endpoint for line in route.lines])
        async for update in admin.watch_routes(subscription.subscription_id):
            ...
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeVar

import grpc

from feedha.admin_client.channel import BearerToken, TlsConfig, login, open_channel
from feedha.admin_client.errors import AuthenticationFailed, error_from_rpc
from feedha.proto import admin_pb2, admin_pb2_grpc
from feedha.proto.errors import ProtoError
from feedha.proto.registry import role_from_proto, seal_key_from_proto
from feedha.proto.seal import SealKey

logger = logging.getLogger(__name__)

RETRY_DEADLINE_S: Final = 30.0
CALL_TIMEOUT_S: Final = 10.0
RETRY_INITIAL_S: Final = 0.1
RETRY_MAX_S: Final = 2.0
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True, kw_only=True)
class Line:
    """One adapter's copy of a channel's output stream."""

    adapter_id: str
    line_endpoint: str
    replay_endpoint: str
    role: str  # "active", "backup", "failed", "unspecified"
    term: int
    is_up: bool
    curve_server_key: str = ""  # Z85 CURVE key to connect to its line and replay with ("": plain)
    conflated_line_endpoint: str = ""  # the adapter's conflated line ("": it serves none)


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """What to join for one channel: its lines and the entitled symbols on it."""

    feed: str
    channel_name: str
    channel_number: int
    source_stream: str
    message_model: str
    lines: tuple[Line, ...]
    symbols: tuple[str, ...]
    delayed: bool
    seal_keys: tuple[SealKey, ...] = ()  # multicast lines: the keys their packets are sealed with
    model_version: str = ""  # message_model's "MAJOR.MINOR" ("": a server from before versions, i.e. 1.0)
    model_descriptor_set: bytes = field(default=b"", repr=False)  # a serialized FileDescriptorSet
    conflated: bool = False  # conflated-only: ``lines`` are the adapters' conflated lines


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscription:
    """A subscription id and its routes."""

    subscription_id: str
    routes: tuple[Route, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteUpdate:
    """The routes of a watched subscription after a change (the first one is the current state).

    Attributes:
        subscription_id: the subscription.
        reason: for people: ``"current"`` for the first update of a watch, else
            what changed and where (``"changed EQ-A-M.2"``).
        routes: the routes now.
        initial: the first update of a watch (the routes as they are, not a change).
        cause: what changed, by the API's ``EventKind`` name in lower case
            (``"registered"``, ``"down"``, ``"policy"`` ...; ``"watching"`` when ``initial``).
    """

    subscription_id: str
    reason: str
    routes: tuple[Route, ...]
    initial: bool = False
    cause: str = ""


def _route_update(message: admin_pb2.WatchRoutesResponse) -> RouteUpdate:
    try:
        cause = admin_pb2.EventKind.Name(message.cause).removeprefix("EVENT_KIND_").lower()
    except ValueError:  # a kind this schema lacks (a newer server)
        cause = "unspecified"
    initial = message.cause == admin_pb2.EVENT_KIND_WATCHING
    return RouteUpdate(
        subscription_id=message.subscription_id,
        reason="current" if initial else f"{cause} {message.detail}".strip(),
        routes=tuple(_route(r) for r in message.routes),
        initial=initial,
        cause=cause,
    )


def _route(msg: admin_pb2.ChannelRoute) -> Route:
    return Route(
        feed=msg.feed,
        channel_name=msg.channel_name,
        channel_number=msg.channel_number,
        source_stream=msg.source_stream,
        message_model=msg.message_model,
        lines=tuple(
            Line(
                adapter_id=line.adapter_id,
                line_endpoint=line.line_endpoint,
                replay_endpoint=line.replay_endpoint,
                role=role_from_proto(line.role).value,
                term=line.term,
                is_up=line.is_up,
                curve_server_key=line.curve_server_key,
                conflated_line_endpoint=line.conflated_line_endpoint,
            )
            for line in msg.lines
        ),
        symbols=tuple(msg.symbols),
        delayed=msg.delayed,
        model_version=msg.model_version,
        model_descriptor_set=msg.model_descriptor_set,
        seal_keys=tuple(_seal_keys(msg)),
        conflated=msg.conflated,
    )


def _seal_keys(msg: admin_pb2.ChannelRoute) -> Iterator[SealKey]:
    for key in msg.seal_keys:
        try:
            yield seal_key_from_proto(key)
        except ProtoError as exc:  # a server bug or a newer key size: that line stays unreadable
            logger.warning("route %s: ignoring a seal key: %s", msg.channel_name, exc)


class AdminClient:
    """An asyncio client of the admin server.

    Args:
        target: ``host:port`` of the admin server.
        key_id: API key id.
        secret: API key secret.
        tls: ``None``/``False`` for plaintext, ``True`` for TLS with the system
            roots, or a :class:`TlsConfig`.
        retry_deadline_s: how long a call keeps retrying while the server is unreachable.
        call_timeout_s: per-attempt deadline of unary calls.
    """

    def __init__(
        self,
        target: str,
        key_id: str,
        secret: str,
        *,
        tls: TlsConfig | bool | None = None,
        retry_deadline_s: float = RETRY_DEADLINE_S,
        call_timeout_s: float = CALL_TIMEOUT_S,
    ) -> None:
        self.target = target
        self._key_id = key_id
        self._secret = secret
        self._tls = tls
        self.retry_deadline_s = retry_deadline_s
        self.call_timeout_s = call_timeout_s
        self._channel: grpc.aio.Channel | None = None
        self._token: BearerToken | None = None
        self._expires_at = 0.0
        self.user: str | None = None
        self.logins = 0

    def __repr__(self) -> str:
        state = "logged-in" if self._token is not None else "open" if self._channel else "closed"
        return f"<AdminClient {self.target} [{state}, user={self.user}, logins={self.logins}]>"

    def _open(self) -> grpc.aio.Channel:
        if self._channel is None:
            self._channel = open_channel(self.target, self._tls)
        return self._channel

    async def close(self) -> None:
        """Close the channel."""
        channel, self._channel = self._channel, None
        if channel is not None:
            await channel.close()

    async def __aenter__(self) -> AdminClient:
        self._open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def login(self) -> None:
        """Log in now (done lazily by every call otherwise).

        Raises:
            AuthenticationFailed: bad key id or secret.
            AdminUnavailable: server unreachable for the retry deadline.
        """

        async def attempt() -> None:
            token = await login(self._open(), self._key_id, self._secret, timeout_s=self.call_timeout_s)
            self._token, self.user = token, token.user
            # The expiry on this machine's clock: the lifetime the server gave, from now
            # (a skewed clock would read the server's timestamp wrongly).
            self._expires_at = time.time() + token.lifetime_s if token.lifetime_s else token.expires_at
            self.logins += 1

        await self._retry(attempt)

    @property
    def token_expires_at(self) -> float:
        """When the current token expires, by this machine's clock (Unix seconds; 0 before a login)."""
        return 0.0 if self._token is None else self._expires_at

    def _metadata(self) -> tuple[tuple[str, str], ...]:
        return self._token.metadata if self._token is not None else ()

    async def _retry(self, attempt: Callable[[], Awaitable[_T]]) -> _T:
        # Strategy: UNAVAILABLE (server down or restarting) is retried with
        # capped backoff until the deadline; everything else is final.
        deadline = time.monotonic() + self.retry_deadline_s
        delay = RETRY_INITIAL_S
        while True:
            try:
                return await attempt()
            except grpc.aio.AioRpcError as exc:
                if exc.code() is not grpc.StatusCode.UNAVAILABLE or time.monotonic() + delay > deadline:
                    raise error_from_rpc(exc) from exc
            await asyncio.sleep(delay)
            delay = min(RETRY_MAX_S, delay * 2)

    async def _call(self, invoke: Callable[[admin_pb2_grpc.StreamBrokerStub], Awaitable[_T]]) -> _T:
        # Log in when there is no token; on UNAUTHENTICATED with a token (expired,
        # key rotated), log in once more and repeat the call.
        for relogin in (False, True):
            if self._token is None or relogin:
                await self.login()
            stub = admin_pb2_grpc.StreamBrokerStub(self._open())  # type: ignore[no-untyped-call]
            try:
                return await self._retry(lambda stub=stub: invoke(stub))  # type: ignore[misc]
            except AuthenticationFailed:
                if relogin:
                    raise
                logger.info("admin client: token rejected, logging in again")
        raise AssertionError("unreachable")  # pragma: no cover

    async def subscribe(self, symbols: Sequence[str], *, curve_public_key: str = "") -> Subscription:
        """Subscribe to symbols or fnmatch patterns.

        Args:
            symbols: symbols or patterns.
            curve_public_key: this subscriber's Z85 CURVE public key: lines that need CURVE
                accept it while the subscription lives and this client stays logged in.

        Returns:
            The subscription id and one route per channel (and delivery mode).

        Raises:
            PermissionDenied: some symbols are not entitled (``exc.symbols``).
            AdminClientError: other failures (``exc.code``).
        """
        request = admin_pb2.SubscribeRequest(symbols=list(symbols), curve_public_key=curve_public_key)
        reply: admin_pb2.SubscribeResponse = await self._call(
            lambda stub: stub.Subscribe(request, metadata=self._metadata(), timeout=self.call_timeout_s)
        )
        return Subscription(
            subscription_id=reply.subscription_id, routes=tuple(_route(r) for r in reply.routes)
        )

    async def modify(self, subscription_id: str, symbols: Sequence[str]) -> Subscription:
        """Replace a subscription's symbols; returns the new routes."""
        request = admin_pb2.ModifyRequest(subscription_id=subscription_id, symbols=list(symbols))
        reply: admin_pb2.ModifyResponse = await self._call(
            lambda stub: stub.Modify(request, metadata=self._metadata(), timeout=self.call_timeout_s)
        )
        return Subscription(
            subscription_id=reply.subscription_id, routes=tuple(_route(r) for r in reply.routes)
        )

    async def cancel(self, subscription_id: str) -> None:
        """Cancel a subscription."""
        request = admin_pb2.CancelRequest(subscription_id=subscription_id)
        await self._call(
            lambda stub: stub.Cancel(request, metadata=self._metadata(), timeout=self.call_timeout_s)
        )

    async def watch_routes(self, subscription_id: str) -> AsyncIterator[RouteUpdate]:
        """Yield the subscription's routes now and after each change; reconnect across server restarts.

        The iteration ends when the subscription is cancelled. After a
        reconnect the first update repeats the current routes.

        Raises:
            AdminClientError: a final error (not found, permission denied, ...).
        """
        delay = RETRY_INITIAL_S
        relogged = False
        while True:
            if self._token is None:
                await self.login()
            stub = admin_pb2_grpc.StreamBrokerStub(self._open())  # type: ignore[no-untyped-call]
            call = stub.WatchRoutes(
                admin_pb2.WatchRoutesRequest(subscription_id=subscription_id), metadata=self._metadata()
            )
            try:
                async for update in call:
                    delay, relogged = RETRY_INITIAL_S, False
                    yield _route_update(update)
                return
            except grpc.aio.AioRpcError as exc:
                code = exc.code()
                if code is grpc.StatusCode.UNAUTHENTICATED and not relogged:
                    self._token, relogged = None, True
                    continue
                if code is not grpc.StatusCode.UNAVAILABLE:
                    raise error_from_rpc(exc) from exc
                logger.info("admin client: route watch lost (%s); retrying in %.1f s", exc.details(), delay)
            finally:
                call.cancel()
            await asyncio.sleep(delay)
            delay = min(RETRY_MAX_S, delay * 2)
