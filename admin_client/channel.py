"""Opening a channel to the admin server and logging in: what every admin client does first.

The adapter's :class:`~admin_client.agent.RegistryAgent`, the subscribers'
:class:`~admin_client.session.AdminClient` and ``feedctl`` all reach the
server the same way: a ``grpc.aio`` channel, plaintext or TLS
(:func:`open_channel`; :func:`tls_from_files` reads the PEM files that the
``--tls-ca/--tls-cert/--tls-key`` options of every command line name, and
:func:`add_tls_arguments` declares those options), then ``AdminAuth.Login`` with an API key
(:func:`login`), whose token goes on every later call as
``authorization: Bearer <token>`` (:attr:`BearerToken.metadata`).

Example::

    async with open_channel("127.0.0.1:50051", tls=None) as channel:
        token = await login(channel, key_id, secret)
        stub = admin_pb2_grpc.AdminControlStub(channel)
        reply = await stub.ListAdapters(admin_pb2.ListAdaptersRequest(), metadata=token.metadata)
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import grpc

from feedha.admin_client.errors import AdminClientError
from feedha.proto import admin_pb2, admin_pb2_grpc
from feedha.transport.locality import is_loopback_target

LOGIN_TIMEOUT_S: Final = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsConfig:
    """TLS settings (PEM bytes): server CA, and a client certificate for mutual TLS."""

    root_certificates: bytes | None = None
    private_key: bytes | None = field(default=None, repr=False)
    certificate_chain: bytes | None = None


class PlaintextRefused(AdminClientError):
    """Plaintext gRPC to an admin server off loopback was not asked for explicitly.

    Attributes:
        target: the admin server's address.
    """

    def __init__(self, target: str) -> None:
        self.target = target
        super().__init__(
            f"refusing plaintext gRPC to {target!r}, which is not loopback: API keys and tokens would "
            "cross the network in clear. Give a CA (--tls-ca, tls=...), or pass --insecure (tls=False)"
        )


class TlsFileError(AdminClientError):
    """A TLS file named on the command line or in a config cannot be read.

    Attributes:
        path: the file.
    """

    def __init__(self, message: str, *, path: Path) -> None:
        self.path = path
        super().__init__(message)


def tls_from_files(
    ca: str | Path | None = None,
    cert: str | Path | None = None,
    key: str | Path | None = None,
    *,
    enabled: bool = False,
) -> TlsConfig | None:
    """TLS settings from PEM files: the one place every admin client builds its credentials.

    Args:
        ca: CA bundle that verifies the server (None: the system roots).
        cert: client certificate chain, for servers that require one (mutual TLS).
        key: the client certificate's private key.
        enabled: use TLS even when no file is named (system roots, no client certificate).

    Returns:
        None for plaintext (no file named, not ``enabled``), else the loaded settings.

    Raises:
        ValueError: ``cert`` without ``key`` or ``key`` without ``cert``.
        TlsFileError: a file cannot be read.
    """
    if (cert is None) != (key is None):
        raise ValueError(f"a client certificate needs both cert and key, got cert={cert!r} key={key!r}")
    if not enabled and ca is None and cert is None:
        return None
    return TlsConfig(root_certificates=_read(ca), certificate_chain=_read(cert), private_key=_read(key))


def _read(path: str | Path | None) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise TlsFileError(f"cannot read TLS file {str(path)!r}: {exc.strerror}", path=Path(path)) from exc


def add_tls_arguments(
    parser: argparse._ActionsContainer, *, prefix: str = "tls", what: str = "the admin server"
) -> None:
    """Declare ``--PREFIX-ca``, ``--PREFIX-cert`` and ``--PREFIX-key`` (read by :func:`tls_from_files`).

    Args:
        parser: the parser (or argument group) to add them to.
        prefix: the options' prefix, e.g. ``"tls"`` or ``"admin-tls"``.
        what: the server they reach, for the help text.
    """
    parser.add_argument(
        f"--{prefix}-ca",
        type=Path,
        help=f"PEM CA bundle: connect to {what} with TLS and verify it with this CA",
    )
    parser.add_argument(
        f"--{prefix}-cert",
        type=Path,
        help=f"PEM client certificate for {what} (mutual TLS; with --{prefix}-key)",
    )
    parser.add_argument(f"--{prefix}-key", type=Path, help=f"PEM private key of --{prefix}-cert")


@dataclass(frozen=True, slots=True, kw_only=True)
class BearerToken:
    """A login's result: the token to present and the user it names.

    Attributes:
        token: the bearer token (left out of ``repr``).
        user: the user the API key belongs to.
        expires_at: when the token expires, Unix seconds on the server's clock (0: unknown).
        lifetime_s: how long it lasted when it was issued, in seconds (0: unknown): renew by
            this on the client's own clock, which may differ from the server's.
    """

    token: str = field(repr=False)
    user: str
    expires_at: float = 0.0
    lifetime_s: float = 0.0

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        """The call metadata that presents the token."""
        return (("authorization", f"Bearer {self.token}"),)


def open_channel(target: str, tls: TlsConfig | bool | None = None) -> grpc.aio.Channel:
    """Open a ``grpc.aio`` channel to the admin server (use it as an async context manager).

    Args:
        target: ``host:port`` of the admin server.
        tls: ``True`` for TLS with the system roots, or a :class:`TlsConfig`;
            ``None`` for plaintext to a loopback address only; ``False`` for
            plaintext to any address (what ``--insecure`` asks for).

    Returns:
        The channel; it connects lazily, on the first call.

    Raises:
        PlaintextRefused: ``tls`` is ``None`` and ``target`` is not loopback.
    """
    if tls is None and not is_loopback_target(target):
        raise PlaintextRefused(target)
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
    return BearerToken(
        token=reply.token,
        user=reply.user,
        expires_at=reply.expire_time.ToNanoseconds() / 1e9,
        lifetime_s=reply.lifetime.ToNanoseconds() / 1e9,
    )
