"""The admin server's exception hierarchy.

Every domain error derives from :class:`AdminError`; ``service.py`` and
``auth.py`` turn them into gRPC status codes, nothing else does.
"""

from __future__ import annotations

from collections.abc import Sequence


class AdminError(Exception):
    """Base class of every admin-server error."""


class ConfigError(AdminError, ValueError):
    """The server configuration file or arguments are invalid."""


class PolicyError(AdminError, ValueError):
    """The authorization policy file is invalid.

    Attributes:
        line: 1-based line of the offending node, or ``None`` when unknown.
        reason: what is wrong, without the location.
        source: file name (or ``"<string>"``).
    """

    def __init__(self, reason: str, *, line: int | None = None, source: str = "<string>") -> None:
        self.reason = reason
        self.line = line
        self.source = source
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {reason}")


class AuthenticationError(AdminError):
    """Credentials or token rejected (maps to UNAUTHENTICATED)."""


class TokenExpiredError(AuthenticationError):
    """The token's expiry has passed."""


class TokenInvalidError(AuthenticationError):
    """The token is malformed or its signature does not verify."""


class LoginThrottledError(AdminError):
    """Too many failed logins from one peer; retry after ``retry_after_s``."""

    def __init__(self, retry_after_s: float) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(f"too many failed logins from this peer; retry in {retry_after_s:.1f} s")


class PermissionDeniedError(AdminError):
    """The caller is not entitled (maps to PERMISSION_DENIED).

    Attributes:
        symbols: the unentitled symbols or patterns, when that is the reason.
    """

    def __init__(self, message: str, *, symbols: Sequence[str] = ()) -> None:
        self.symbols = tuple(symbols)
        super().__init__(message)


class PatternError(AdminError, ValueError):
    """A requested symbol pattern is refused: too long or too complex to check against the grants."""


class NotFoundError(AdminError, LookupError):
    """An adapter, channel, key or subscription does not exist."""


class PreconditionError(AdminError):
    """The request cannot be done in the current state (FAILED_PRECONDITION)."""
