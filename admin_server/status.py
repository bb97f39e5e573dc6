"""Domain errors -> gRPC statuses with structured details (``google.rpc.Status``).

The one place the admin server decides how a refusal looks on the wire, for
``service.py``, ``control.py`` and ``auth.py``. Each status carries, besides
its code and message (for people):

- a ``google.rpc.ErrorInfo``: ``domain`` ``feedha.v1``, the error's ``reason``
  (``SYMBOLS_NOT_ENTITLED``, ``TOKEN_EXPIRED`` ...) and its ``metadata``;
- a ``google.rpc.BadRequest`` with the request fields at fault, when any;
- a ``google.rpc.RetryInfo`` when waiting helps (a throttled login, a user over
  its request rate, an adapter that cannot answer now).

Clients read these (``admin_client.errors``) and never parse the message.
"""

from __future__ import annotations

import logging
from typing import Final, NoReturn

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from feedha.admin_server.errors import (
    AdminError,
    AuthenticationError,
    ConfigError,
    InvalidArgumentError,
    LoginThrottledError,
    NotFoundError,
    NotImplementedYetError,
    PermissionDeniedError,
    PolicyError,
    PreconditionError,
    RateLimitedError,
    ResourceExhaustedError,
    UnavailableError,
)

logger = logging.getLogger(__name__)

DOMAIN: Final = "feedha.v1"
# A status travels in HTTP/2 trailers, which a gRPC client refuses past 16 KiB (8 KiB by
# default is its soft limit): a refusal of 1,000 symbols must not turn into RESOURCE_EXHAUSTED.
# So the message, each metadata value and the field violations are bounded; a list cut
# short says how much is left out (metadata `<key>Omitted`, a last violation `...`).
MAX_MESSAGE: Final = 512
MAX_METADATA_VALUE: Final = 2048
MAX_VIOLATIONS: Final = 16

STATUS_FOR: Final[tuple[tuple[type[Exception], grpc.StatusCode], ...]] = (
    (AuthenticationError, grpc.StatusCode.UNAUTHENTICATED),
    (LoginThrottledError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (ResourceExhaustedError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (UnavailableError, grpc.StatusCode.UNAVAILABLE),
    (PermissionDeniedError, grpc.StatusCode.PERMISSION_DENIED),
    (NotFoundError, grpc.StatusCode.NOT_FOUND),
    (PreconditionError, grpc.StatusCode.FAILED_PRECONDITION),
    (PolicyError, grpc.StatusCode.FAILED_PRECONDITION),
    (ConfigError, grpc.StatusCode.FAILED_PRECONDITION),
    (NotImplementedYetError, grpc.StatusCode.UNIMPLEMENTED),
    (InvalidArgumentError, grpc.StatusCode.INVALID_ARGUMENT),
    (ValueError, grpc.StatusCode.INVALID_ARGUMENT),
)


def status_for(exc: Exception) -> grpc.StatusCode:
    """The status code for a domain error (INTERNAL for anything unexpected)."""
    for kind, code in STATUS_FOR:
        if isinstance(exc, kind):
            return code
    return grpc.StatusCode.INTERNAL


def _reason(exc: Exception, code: grpc.StatusCode) -> str:
    if isinstance(exc, AdminError):
        return exc.reason
    return "INTERNAL" if code is grpc.StatusCode.INTERNAL else code.name


def _bounded_metadata(metadata: dict[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in metadata.items():
        if len(value) <= MAX_METADATA_VALUE:
            out[key] = value
            continue
        # A space-separated list (symbols, adapter ids) keeps whole items; other text is cut.
        items = value.split(" ")
        kept: list[str] = []
        for item in items:
            if sum(len(k) + 1 for k in kept) + len(item) > MAX_METADATA_VALUE:
                break
            kept.append(item)
        out[key] = " ".join(kept) if kept else value[:MAX_METADATA_VALUE]
        out[f"{key}Omitted"] = str(len(items) - len(kept))
    return out


def rich_status(exc: Exception) -> grpc.Status:
    """The status for ``exc``: its code, its message, and the details the module's docstring lists."""
    code = status_for(exc)
    message = "internal error" if code is grpc.StatusCode.INTERNAL else str(exc)
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    metadata = _bounded_metadata(exc.metadata) if isinstance(exc, AdminError) else {}
    details = [error_details_pb2.ErrorInfo(reason=_reason(exc, code), domain=DOMAIN, metadata=metadata)]
    violations = list(exc.violations) if isinstance(exc, AdminError) else []
    if len(violations) > MAX_VIOLATIONS:
        more = len(violations) - MAX_VIOLATIONS + 1
        last = violations[-1]
        violations = [*violations[: MAX_VIOLATIONS - 1], type(last)("...", last.reason, f"{more} more")]
    if violations:
        details.append(
            error_details_pb2.BadRequest(
                field_violations=[
                    error_details_pb2.BadRequest.FieldViolation(
                        field=v.field, description=v.description, reason=v.reason
                    )
                    for v in violations
                ]
            )
        )
    if isinstance(exc, LoginThrottledError | UnavailableError | RateLimitedError):
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(int(exc.retry_after_s * 1e9))
        details.append(error_details_pb2.RetryInfo(retry_delay=delay))
    packed = []
    for detail in details:
        holder = any_pb2.Any()
        holder.Pack(detail)
        packed.append(holder)
    status: grpc.Status = rpc_status.to_status(
        status_pb2.Status(code=code.value[0], message=message, details=packed)
    )
    return status


async def abort_with(context: grpc.aio.ServicerContext, exc: Exception) -> NoReturn:
    """End the call with the status for ``exc`` (logged when unexpected)."""
    status = rich_status(exc)
    if status.code is grpc.StatusCode.INTERNAL:
        logger.exception("internal error", exc_info=exc)
    await context.abort(status.code, status.details, status.trailing_metadata)
    raise AssertionError("unreachable: context.abort raises")  # pragma: no cover
