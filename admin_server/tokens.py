"""Signed, expiring bearer tokens and API-key secrets.

Theory of operation: a token is ``<payload>.<signature>``, both base64url
without padding. The payload is compact JSON ``{"sub", "kid", "iat", "exp"}``
(user, key id, issued-at and expiry in Unix seconds); the signature is
HMAC-SHA256 over the encoded payload with a server-side key. Verification
checks the signature in constant time before it parses anything, then the
expiry against the ``now`` passed in (this module never reads the clock).

API-key secrets are stored only as argon2id hashes (salted, slow); the
plaintext secret is shown once, by ``add-user`` / ``rotate-key``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Final

import argon2

from feedha.admin_server.errors import AuthenticationError, TokenExpiredError, TokenInvalidError

TOKEN_TTL_S: Final = 3600.0
SIGNING_KEY_BYTES: Final = 32
KEY_ID_PREFIX: Final = "fk_"

# argon2id with the RFC 9106 low-memory profile (t=3, m=64 MiB, p=4): ~0.2 s per
# hash here. The server config can choose another cost (tests use a cheap one).
HASH_TIME_COST: Final = 3
HASH_MEMORY_KIB: Final = 65536
HASH_PARALLELISM: Final = 4
_HASHER: Final = argon2.PasswordHasher(
    time_cost=HASH_TIME_COST, memory_cost=HASH_MEMORY_KIB, parallelism=HASH_PARALLELISM
)


def make_hasher(*, time_cost: int, memory_kib: int, parallelism: int) -> argon2.PasswordHasher:
    """An argon2id hasher with the given cost.

    Args:
        time_cost: iterations (>= 1).
        memory_kib: memory in KiB (>= 8 * parallelism).
        parallelism: lanes (>= 1).

    Raises:
        ValueError: a parameter out of range, named.
    """
    if time_cost < 1:
        raise ValueError(f"time_cost must be >= 1, got {time_cost}")
    if parallelism < 1:
        raise ValueError(f"parallelism must be >= 1, got {parallelism}")
    if memory_kib < 8 * parallelism:
        raise ValueError(f"memory_kib must be >= 8 * parallelism, got {memory_kib}")
    return argon2.PasswordHasher(time_cost=time_cost, memory_cost=memory_kib, parallelism=parallelism)


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenClaims:
    """What a verified token says.

    Attributes:
        user: the user name.
        key_id: the API key that logged in.
        issued_at: Unix seconds.
        expires_at: Unix seconds.
    """

    user: str
    key_id: str
    issued_at: float
    expires_at: float


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenSigner:
    """Signs and verifies bearer tokens with one HMAC-SHA256 key.

    Args:
        key: the signing key (at least 16 bytes).
        ttl_s: token lifetime in seconds.

    Raises:
        ValueError: key too short or ttl not positive.
    """

    def __init__(self, key: bytes, *, ttl_s: float = TOKEN_TTL_S) -> None:
        if len(key) < 16:
            raise ValueError(f"signing key must be at least 16 bytes, got {len(key)}")
        if ttl_s <= 0:
            raise ValueError(f"ttl_s must be positive, got {ttl_s!r}")
        self._key = key
        self.ttl_s = ttl_s

    def __repr__(self) -> str:
        return f"<TokenSigner [ttl_s={self.ttl_s}]>"

    def _sign(self, payload: str) -> str:
        return _b64encode(hmac.new(self._key, payload.encode("ascii"), hashlib.sha256).digest())

    def issue(self, *, user: str, key_id: str, now: float) -> tuple[str, TokenClaims]:
        """Issue a token.

        Args:
            user: the user name.
            key_id: the API key id used to log in.
            now: current Unix time in seconds.

        Returns:
            The token text and its claims.
        """
        claims = TokenClaims(user=user, key_id=key_id, issued_at=now, expires_at=now + self.ttl_s)
        body = {"sub": user, "kid": key_id, "iat": round(now, 3), "exp": round(now + self.ttl_s, 3)}
        payload = _b64encode(json.dumps(body, separators=(",", ":"), sort_keys=True).encode())
        return f"{payload}.{self._sign(payload)}", claims

    def verify(self, token: str, *, now: float) -> TokenClaims:
        """Verify a token's signature and expiry.

        Args:
            token: the token text (without ``Bearer``).
            now: current Unix time in seconds.

        Returns:
            The token's claims.

        Raises:
            TokenInvalidError: malformed or forged.
            TokenExpiredError: expired.
        """
        payload, dot, signature = token.partition(".")
        if not dot or not payload or not signature:
            raise TokenInvalidError("malformed token")
        try:
            expected = self._sign(payload)
        except UnicodeEncodeError as exc:
            raise TokenInvalidError("malformed token") from exc
        if not hmac.compare_digest(expected, signature):
            raise TokenInvalidError("invalid token signature")
        try:
            body = json.loads(_b64decode(payload))
            claims = TokenClaims(
                user=str(body["sub"]),
                key_id=str(body["kid"]),
                issued_at=float(body["iat"]),
                expires_at=float(body["exp"]),
            )
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            raise TokenInvalidError("malformed token payload") from exc
        if now >= claims.expires_at:
            raise TokenExpiredError(f"token expired {now - claims.expires_at:.0f} s ago; log in again")
        return claims


def new_signing_key() -> bytes:
    """A fresh random HMAC key."""
    return secrets.token_bytes(SIGNING_KEY_BYTES)


def new_key_id() -> str:
    """A fresh API key id (public, like a user name)."""
    return KEY_ID_PREFIX + secrets.token_hex(8)


def new_secret() -> str:
    """A fresh API key secret (shown once, stored hashed)."""
    return secrets.token_urlsafe(32)


def hash_secret(secret: str, *, hasher: argon2.PasswordHasher | None = None) -> str:
    """Hash a secret with argon2id (random salt, slow on purpose).

    Args:
        secret: the plaintext secret.
        hasher: the hasher (cost) to use; default the strong module default.

    Returns:
        The encoded hash, safe to store.
    """
    return (hasher or _HASHER).hash(secret)


def verify_secret(stored_hash: str, secret: str) -> None:
    """Check a secret against its stored hash.

    Args:
        stored_hash: from :func:`hash_secret`.
        secret: the plaintext secret presented.

    Raises:
        AuthenticationError: the secret does not match.
    """
    # The cost is read from the stored hash, so any configured cost verifies.
    try:
        _HASHER.verify(stored_hash, secret)
    except (argon2.exceptions.VerificationError, argon2.exceptions.InvalidHashError) as exc:
        raise AuthenticationError("invalid API key secret") from exc
