"""Opening a channel to the admin server and logging in: what every admin client does first.

The adapter's :class:`~admin_client.agent.RegistryAgent`, the subscribers'
:class:`~admin_client.session.AdminClient` and ``feedctl`` all reach the
server the same way: a ``grpc.aio`` channel, plaintext or TLS
(:func:`open_channel`), then ``AdminAuth.Login`` with an API key
(:func:`login`), whose token goes on every later call as
``authorization: Bearer <token>`` (:attr:`BearerToken.metadata`).

Example::

    async with open_channel("127.0.0.1:50051", tls=None) as channel:
        token = await login(channel, key_id, secret)
        stub = admin_pb2_grpc.AdminControlStub(channel)
        reply = await stub.ListAdapters(admin_pb2.ListAdaptersRequest(), metadata=token.metadata)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import grpc

from proto import admin_pb2, admin_pb2_grpc

LOGIN_TIMEOUT_S: Final = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsConfig:
    """TLS settings (PEM bytes): server CA, and a client certificate for mutual TLS."""

    root_certificates: bytes | None = None
    private_key: bytes | None = None
    certificate_chain: bytes | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BearerToken:
    """A login's result: the token to present and the user it names.

    Attributes:
        token: the bearer token (left out of ``repr``).
        user: the user the API key belongs to.
        expires_at: when the token expires, Unix seconds (0: unknown).
    """

    token: str = field(repr=False)
    user: str
    expires_at: float = 0.0

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        """The call metadata that presents the token."""
        return (("authorization", f"Bearer {self.token}"),)


def open_channel(target: str, tls: TlsConfig | bool | None = None) -> grpc.aio.Channel:
    """Open a ``grpc.aio`` channel to the admin server (use it as an async context manager).

    Args:
        target: ``host:port`` of the admin server.
        tls: ``None``/``False`` for plaintext, ``True`` for TLS with the
            system roots, or a :class:`TlsConfig`.

    Returns:
        The channel; it connects lazily, on the first call.
    """
    if tls is None or tls is False:
        return grpc.aio.insecure_channel(target)
    config = tls if isinstance(tls, TlsConfig) else TlsConfig()
    credentials = grpc.ssl_channel_credentials(
        config.root_certificates, config.private_key, config.certificate_chain
    )
    return grpc.aio.secure_channel(target, credentials)


async def login(
    channel: grpc.aio.Channel, key_id: str, secret: str, *, timeout_s: float = LOGIN_TIMEOUT_S
) -> BearerToken:
    """Log in with an API key.

    Args:
        channel: a channel from :func:`open_channel`.
        key_id: the API key id.
        secret: the API key secret.
        timeout_s: the call's deadline.

    Returns:
        The token and its user.

    Raises:
        grpc.aio.AioRpcError: as grpc raised it (``UNAUTHENTICATED`` for a bad
            key, ``UNAVAILABLE`` when the server is unreachable); each caller
            has its own retry and reporting policy
            (:func:`admin_client.errors.error_from_rpc` translates).
    """
    stub = admin_pb2_grpc.AdminAuthStub(channel)  # type: ignore[no-untyped-call]
    reply = await stub.Login(admin_pb2.LoginRequest(key_id=key_id, secret=secret), timeout=timeout_s)
    return BearerToken(token=reply.token, user=reply.user, expires_at=reply.expires_at_ns / 1e9)
