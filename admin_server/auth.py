"""The authentication interceptor: every call but Login carries a bearer token.

The interceptor wraps each RPC's behavior so that, before the servicer runs,
it reads ``authorization: Bearer <token>`` from the call's metadata, verifies
it through the server's :class:`~admin_server.identity.Identity`, checks the role the service
needs (``admin`` for AdminControl, ``adapter`` or ``admin`` for
AdapterRegistry) and stores the :class:`Principal` in a context variable for
the servicer. Failures end the call with UNAUTHENTICATED or
PERMISSION_DENIED, a message that says why, and the structured details of
``status.py`` (reasons ``TOKEN_MISSING``, ``TOKEN_EXPIRED``, ``ROLE_REQUIRED`` ...).
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

import grpc

from feedha.admin_server.errors import AuthenticationError, PermissionDeniedError
from feedha.admin_server.hub import Hub
from feedha.admin_server.policy import Principal
from feedha.admin_server.records import Lease
from feedha.admin_server.status import abort_with
from feedha.admin_server.tokens import TokenClaims

logger = logging.getLogger(__name__)

PUBLIC_METHODS: Final = frozenset({"/feedha.v1.AdminAuth/Login"})
PUBLIC_PREFIXES: Final = ("/grpc.health.v1.", "/grpc.reflection.")
ADMIN_PREFIX: Final = "/feedha.v1.AdminControl/"
REGISTRY_PREFIX: Final = "/feedha.v1.AdapterRegistry/"

_principal: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "feedha_principal", default=None
)


_token: contextvars.ContextVar[TokenClaims | None] = contextvars.ContextVar("feedha_token", default=None)


def current_lease() -> Lease:
    """The data-plane lease the current RPC's token gives (empty when the method needs no token)."""
    claims = _token.get()
    return Lease() if claims is None else Lease(claims.expires_at, claims.key_id, claims.issued_at)


def current_principal() -> Principal:
    """The authenticated caller of the current RPC (set by :class:`AuthInterceptor`).

    Raises:
        AuthenticationError: no principal (the method was not intercepted).
    """
    principal = _principal.get()
    if principal is None:
        raise AuthenticationError("no authenticated caller")
    return principal


def bearer_token(metadata: Any) -> str | None:
    """The token of an ``authorization: Bearer <token>`` metadata entry, if any."""
    for key, value in metadata or ():
        if key == "authorization":
            text = value.decode() if isinstance(value, bytes) else str(value)
            scheme, _space, token = text.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


class AuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Checks tokens and roles before the servicers run.

    Args:
        hub: the server state (token verification, policy).
    """

    def __init__(self, hub: Hub) -> None:
        self._hub = hub

    def __repr__(self) -> str:
        return "<AuthInterceptor>"

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        """Wrap the method's handler with the token and role check."""
        handler = await continuation(handler_call_details)
        method: str = handler_call_details.method
        if handler is None or method in PUBLIC_METHODS or method.startswith(PUBLIC_PREFIXES):
            return handler
        role: str | None = None
        if method.startswith(ADMIN_PREFIX):
            role = "admin"
        elif method.startswith(REGISTRY_PREFIX):
            if not self._hub.config.adapter_auth:
                _principal.set(Principal(user="adapter"))
                return handler
            role = "adapter"
        return _wrap(handler, lambda context: self._check(context, method, role))

    async def _check(self, context: grpc.aio.ServicerContext, method: str, role: str | None) -> None:
        token = bearer_token(context.invocation_metadata())
        if token is None:
            missing = AuthenticationError(
                "missing 'authorization: Bearer <token>'; log in", reason="TOKEN_MISSING"
            )
            await abort_with(context, missing)
            return
        try:
            principal, claims = self._hub.identity.authenticate_token(token)
        except AuthenticationError as exc:
            await abort_with(context, exc)
            return
        allowed = role is None or self._hub.identity.has_role(principal, role)
        if not allowed and role == "adapter":
            allowed = self._hub.identity.has_role(principal, "admin")
        if not allowed:
            logger.warning("user %s denied %s (needs role %s)", principal.user, method, role)
            counters = self._hub.counters
            counters.count(counters.denied, method.rsplit("/", 1)[-1])
            denied = PermissionDeniedError(
                f"user {principal.user!r} lacks the {role} role for {method}",
                reason="ROLE_REQUIRED",
                metadata={"role": str(role), "method": method},
            )
            await abort_with(context, denied)
        _principal.set(principal)
        _token.set(claims)


def _wrap(
    handler: grpc.RpcMethodHandler, check: Callable[[grpc.aio.ServicerContext], Awaitable[None]]
) -> grpc.RpcMethodHandler:
    # Strategy: re-create the handler with the same (de)serializers around a
    # behavior that runs the check first, in the same task as the servicer,
    # so the context variable it sets is visible to the servicer.
    serializers = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        unary = handler.unary_unary

        async def unary_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await check(context)
            return await unary(request, context)

        return grpc.unary_unary_rpc_method_handler(unary_unary, **serializers)
    if handler.unary_stream is not None:
        server_stream = handler.unary_stream

        async def unary_stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            await check(context)
            async for response in server_stream(request, context):
                yield response

        return grpc.unary_stream_rpc_method_handler(unary_stream, **serializers)
    if handler.stream_stream is not None:
        bidi = handler.stream_stream

        async def stream_stream(requests: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            await check(context)
            async for response in bidi(requests, context):
                yield response

        return grpc.stream_stream_rpc_method_handler(stream_stream, **serializers)
    client_stream = handler.stream_unary

    async def stream_unary(requests: Any, context: grpc.aio.ServicerContext) -> Any:
        await check(context)
        return await client_stream(requests, context)

    return grpc.stream_unary_rpc_method_handler(stream_unary, **serializers)
