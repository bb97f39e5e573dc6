"""The admin server's exception hierarchy.

Every domain error derives from :class:`AdminError`; ``status.py`` turns them
into gRPC statuses (for ``service.py``, ``control.py`` and ``auth.py``),
nothing else does. Each error carries what a client needs without reading its
message: a ``reason`` (UPPER_SNAKE_CASE, the ``google.rpc.ErrorInfo`` reason),
``metadata`` (the ErrorInfo's facts) and ``violations`` (the request fields at
fault, a ``google.rpc.BadRequest``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """A request field at fault: ``symbols[2]``, ``page_token`` ..."""

    field: str
    reason: str
    description: str


class AdminError(Exception):
    """Base class of every admin-server error.

    Args:
        message: for people (the status message).
        reason: the machine-readable cause; the class's default when None.
        metadata: facts for the client, e.g. ``{"role": "admin"}``.
        violations: the request fields at fault.

    Attributes:
        reason: the cause, e.g. ``SUBSCRIPTION_NOT_FOUND``.
        metadata: the facts.
        violations: the fields.
    """

    reason: str = "ADMIN_ERROR"

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        metadata: Mapping[str, str] | None = None,
        violations: Sequence[FieldViolation] = (),
    ) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason
        self.metadata: dict[str, str] = dict(metadata or {})
        self.violations = tuple(violations)


class ConfigError(AdminError, ValueError):
    """The server configuration file or arguments are invalid."""

    reason = "CONFIG_INVALID"


class PolicyError(AdminError, ValueError):
    """The authorization policy file is invalid.

    Attributes:
        line: 1-based line of the offending node, or ``None`` when unknown.
        problem: what is wrong, without the location.
        source: file name (or ``"<string>"``).
    """

    reason = "POLICY_INVALID"

    def __init__(self, problem: str, *, line: int | None = None, source: str = "<string>") -> None:
        self.problem = problem
        self.line = line
        self.source = source
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {problem}")


class AuthenticationError(AdminError):
    """Credentials or token rejected (maps to UNAUTHENTICATED)."""

    reason = "CREDENTIALS_INVALID"


class TokenExpiredError(AuthenticationError):
    """The token's expiry has passed."""

    reason = "TOKEN_EXPIRED"


class TokenInvalidError(AuthenticationError):
    """The token is malformed or its signature does not verify."""

    reason = "TOKEN_INVALID"


class LoginThrottledError(AdminError):
    """Too many failed logins from one peer; retry after ``retry_after_s``."""

    reason = "LOGIN_THROTTLED"

    def __init__(self, retry_after_s: float) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(f"too many failed logins from this peer; retry in {retry_after_s:.1f} s")


class PermissionDeniedError(AdminError):
    """The caller is not entitled (maps to PERMISSION_DENIED).

    With ``symbols``, the reason is ``SYMBOLS_NOT_ENTITLED`` and the metadata's
    ``symbols`` names them, separated by spaces (a symbol never holds one).

    Attributes:
        symbols: the unentitled symbols or patterns, when that is the reason.
    """

    reason = "PERMISSION_DENIED"

    def __init__(
        self,
        message: str,
        *,
        symbols: Sequence[str] = (),
        reason: str | None = None,
        metadata: Mapping[str, str] | None = None,
        violations: Sequence[FieldViolation] = (),
    ) -> None:
        self.symbols = tuple(symbols)
        if symbols:
            reason = reason or "SYMBOLS_NOT_ENTITLED"
            metadata = {**(metadata or {}), "symbols": " ".join(self.symbols)}
        super().__init__(message, reason=reason, metadata=metadata, violations=violations)


class InvalidArgumentError(AdminError, ValueError):
    """A request field holds a value the server refuses (INVALID_ARGUMENT, with the field named)."""

    reason = "INVALID_ARGUMENT"


class PatternError(InvalidArgumentError):
    """A requested symbol pattern is refused: too long or too complex to check against the grants."""

    reason = "PATTERN_REFUSED"


class NotFoundError(AdminError, LookupError):
    """An adapter, channel, key or subscription does not exist."""

    reason = "NOT_FOUND"


class PreconditionError(AdminError):
    """The request cannot be done in the current state (FAILED_PRECONDITION)."""

    reason = "FAILED_PRECONDITION"


class UnavailableError(AdminError):
    """The target cannot answer now; retrying later helps (UNAVAILABLE, with a RetryInfo).

    Attributes:
        retry_after_s: how long to wait before trying again.
    """

    reason = "UNAVAILABLE"

    def __init__(
        self,
        message: str,
        *,
        retry_after_s: float = 1.0,
        reason: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(message, reason=reason, metadata=metadata)


class ResourceExhaustedError(AdminError):
    """Too many of something: requests, purges, pending calls (RESOURCE_EXHAUSTED)."""

    reason = "RESOURCE_EXHAUSTED"


class RateLimitedError(ResourceExhaustedError):
    """Over a rate: retrying after ``retry_after_s`` helps (RESOURCE_EXHAUSTED, with a RetryInfo).

    Attributes:
        retry_after_s: how long to wait before trying again.
    """

    def __init__(
        self,
        message: str,
        *,
        retry_after_s: float,
        reason: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(message, reason=reason, metadata=metadata)


class NotImplementedYetError(AdminError):
    """A call the API declares but the server does not do yet (UNIMPLEMENTED)."""

    reason = "NOT_IMPLEMENTED"
