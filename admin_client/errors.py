"""The admin client's exceptions: one base, split by what the caller can do about it.

The server's gRPC statuses become these at the package's boundary
(:func:`error_from_rpc`): ``UNAUTHENTICATED`` is :class:`AuthenticationFailed`
(log in again or fix the key), ``PERMISSION_DENIED`` is
:class:`PermissionDenied` (with the unentitled symbols), ``UNAVAILABLE`` is
:class:`AdminUnavailable` (retry later); every other code is the base class
with ``code`` set.

What the error means comes from the status's structured details
(``google.rpc.ErrorInfo``, ``BadRequest``, ``RetryInfo``; see
``proto/admin.proto``), never from its message: ``reason`` (e.g.
``SYMBOLS_NOT_ENTITLED``, ``TOKEN_EXPIRED``, ``SUBSCRIPTION_NOT_FOUND``),
``metadata``, ``violations`` and ``retry_after_s``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import grpc
from google.rpc import error_details_pb2, status_pb2

logger = logging.getLogger(__name__)

DOMAIN: Final = "feedha.v1"
_DETAILS_KEY: Final = "grpc-status-details-bin"


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """A request field the server refused: ``field`` (e.g. ``symbols[2]``), ``reason``, ``description``."""

    field: str
    reason: str
    description: str


class AdminClientError(Exception):
    """Base class of the admin client's errors.

    Attributes:
        code: the gRPC status code name (e.g. ``"NOT_FOUND"``), when from the server.
        reason: the server's machine-readable cause (``ErrorInfo.reason``), "" when it gave none.
        metadata: the facts the server attached (``ErrorInfo.metadata``).
        violations: the request fields at fault (``BadRequest``).
        retry_after_s: how long the server asks to wait before retrying (``RetryInfo``), if it did.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "",
        reason: str = "",
        metadata: Mapping[str, str] | None = None,
        violations: Sequence[FieldViolation] = (),
        retry_after_s: float | None = None,
    ) -> None:
        self.code = code
        self.reason = reason
        self.metadata: dict[str, str] = dict(metadata or {})
        self.violations = tuple(violations)
        self.retry_after_s = retry_after_s
        super().__init__(message)


class AuthenticationFailed(AdminClientError):
    """Login refused (bad key id or secret) or the token was rejected (``reason`` says which)."""


class PermissionDenied(AdminClientError):
    """Not entitled (``symbols`` names the symbols), or not allowed (``reason``, e.g. ROLE_REQUIRED)."""

    @property
    def symbols(self) -> tuple[str, ...]:
        """The unentitled symbols or patterns (empty when that is not the reason).

        A long list is cut to its first 2 KiB; :attr:`symbols_omitted` counts the rest.
        """
        return tuple(self.metadata.get("symbols", "").split())

    @property
    def symbols_omitted(self) -> int:
        """How many unentitled symbols the server left out of :attr:`symbols` (0: none)."""
        text = self.metadata.get("symbolsOmitted", "0")
        return int(text) if text.isdigit() else 0


class AdminUnavailable(AdminClientError):
    """The server stayed unreachable for the whole retry deadline."""


@dataclass(frozen=True, slots=True)
class StatusDetails:
    """What a status's ``grpc-status-details-bin`` trailer holds, decoded."""

    reason: str = ""
    metadata: Mapping[str, str] | None = None
    violations: tuple[FieldViolation, ...] = ()
    retry_after_s: float | None = None


def status_details(exc: grpc.RpcError | Any) -> StatusDetails:
    """Decode the ``google.rpc.Status`` details a failed call carries (empty when it has none).

    Args:
        exc: what grpc raised (anything with ``trailing_metadata()``).
    """
    trailers = exc.trailing_metadata() if callable(getattr(exc, "trailing_metadata", None)) else None
    raw = next((value for key, value in trailers or () if key == _DETAILS_KEY), None)
    if raw is None:
        return StatusDetails()
    try:
        status = status_pb2.Status.FromString(raw)
    except Exception:  # noqa: BLE001 - a broken trailer is no details, not a crash
        logger.warning("admin client: undecodable status details from the server")
        return StatusDetails()
    reason, metadata, violations, retry = "", {}, [], None
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            if info.domain == DOMAIN or not reason:
                reason, metadata = info.reason, dict(info.metadata)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            violations += [FieldViolation(v.field, v.reason, v.description) for v in bad.field_violations]
        elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info_retry = error_details_pb2.RetryInfo()
            detail.Unpack(info_retry)
            retry = info_retry.retry_delay.ToNanoseconds() / 1e9
    return StatusDetails(reason, metadata, tuple(violations), retry)


def error_from_rpc(exc: grpc.aio.AioRpcError) -> AdminClientError:
    """The admin client's error for a failed gRPC call (raise it ``from exc``).

    Args:
        exc: what grpc raised.

    Returns:
        The matching :class:`AdminClientError` subclass, with ``code`` and the
        status's details set.
    """
    code, message = exc.code(), exc.details() or ""
    found = status_details(exc)
    fields: dict[str, Any] = {
        "code": code.name,
        "reason": found.reason,
        "metadata": found.metadata,
        "violations": found.violations,
        "retry_after_s": found.retry_after_s,
    }
    if code is grpc.StatusCode.UNAUTHENTICATED:
        return AuthenticationFailed(message, **fields)
    if code is grpc.StatusCode.PERMISSION_DENIED:
        return PermissionDenied(message, **fields)
    if code is grpc.StatusCode.UNAVAILABLE:
        return AdminUnavailable(message, **fields)
    return AdminClientError(f"{code.name}: {message}", **fields)
