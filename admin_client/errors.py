"""The admin client's exceptions: one base, split by what the caller can do about it.

The server's gRPC status codes become these at the package's boundary
(:func:`error_from_rpc`): ``UNAUTHENTICATED`` is :class:`AuthenticationFailed`
(log in again or fix the key), ``PERMISSION_DENIED`` is
:class:`PermissionDenied` (with the unentitled symbols), ``UNAVAILABLE`` is
:class:`AdminUnavailable` (retry later); every other code is the base class
with ``code`` set.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc


class AdminClientError(Exception):
    """Base class of the admin client's errors.

    Attributes:
        code: the gRPC status code name (e.g. ``"NOT_FOUND"``), when from the server.
    """

    def __init__(self, message: str, *, code: str = "") -> None:
        self.code = code
        super().__init__(message)


class AuthenticationFailed(AdminClientError):
    """Login refused (bad key id or secret) or the token was rejected."""


class PermissionDenied(AdminClientError):
    """Not entitled (``symbols`` names the unentitled symbols) or not an admin."""

    def __init__(self, message: str, *, code: str = "PERMISSION_DENIED", symbols: Sequence[str] = ()) -> None:
        self.symbols = tuple(symbols)
        super().__init__(message, code=code)


class AdminUnavailable(AdminClientError):
    """The server stayed unreachable for the whole retry deadline."""


def error_from_rpc(exc: grpc.aio.AioRpcError) -> AdminClientError:
    """The admin client's error for a failed gRPC call (raise it ``from exc``).

    Args:
        exc: what grpc raised.

    Returns:
        The matching :class:`AdminClientError` subclass, with ``code`` set.
    """
    code, details = exc.code(), exc.details() or ""
    if code is grpc.StatusCode.UNAUTHENTICATED:
        return AuthenticationFailed(details, code=code.name)
    if code is grpc.StatusCode.PERMISSION_DENIED:
        _head, found, tail = details.partition("not entitled to: ")
        symbols = [s.strip() for s in tail.split(",") if s.strip()] if found else []
        return PermissionDenied(details, code=code.name, symbols=symbols)
    if code is grpc.StatusCode.UNAVAILABLE:
        return AdminUnavailable(details, code=code.name)
    return AdminClientError(f"{code.name}: {details}", code=code.name)
