"""The client side of the admin server's gRPC API, shared by adapters, subscribers and ``feedctl``.

- :class:`RegistryAgent` (``admin_client.agent``) keeps an adapter registered,
  streams its status and hands it operator commands;
- :class:`AdminClient` (``admin_client.session``) is a subscriber's session:
  login, subscribe, modify, cancel, watch routes;
- :func:`open_channel` and :func:`login` (``admin_client.channel``) are the
  first two steps of all of them, and of ``feedctl``;
- :class:`AdminClientError` (``admin_client.errors``) is the base of every
  error raised here.

The registry's contract types (:class:`~proto.registry.AdapterRegistration`,
:class:`~proto.registry.AdapterStatus`, :class:`~proto.registry.Command`, ...)
are in ``proto.registry``. This package imports neither the server
(``admin_server``) nor the adapter nor the client library.
"""

from __future__ import annotations

from feedha.admin_client.agent import CommandHandler, RegistryAgent, StatusSource, reconnect_delay
from feedha.admin_client.channel import (
    BearerToken,
    PlaintextRefused,
    TlsConfig,
    TlsFileError,
    add_tls_arguments,
    login,
    open_channel,
    tls_from_files,
)
from feedha.admin_client.errors import (
    AdminClientError,
    AdminUnavailable,
    AuthenticationFailed,
    PermissionDenied,
    error_from_rpc,
)
from feedha.admin_client.session import AdminClient, Line, Route, RouteUpdate, Subscription
from feedha.transport.locality import is_loopback_target

__all__ = [
    "AdminClient",
    "AdminClientError",
    "AdminUnavailable",
    "AuthenticationFailed",
    "BearerToken",
    "CommandHandler",
    "Line",
    "PermissionDenied",
    "PlaintextRefused",
    "RegistryAgent",
    "Route",
    "RouteUpdate",
    "StatusSource",
    "Subscription",
    "TlsConfig",
    "TlsFileError",
    "add_tls_arguments",
    "error_from_rpc",
    "is_loopback_target",
    "login",
    "open_channel",
    "reconnect_delay",
    "tls_from_files",
]
