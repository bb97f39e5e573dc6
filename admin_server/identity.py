"""Who a caller is: API-key logins, the tokens they get, and the principal and roles behind a token.

Theory of operation: :class:`Identity` owns the token signer and the login
desk (:mod:`admin_server.logins`: backoff, hashing gate, per-key locks). A
login checks the key, issues a token and hands the new lease to
``on_token`` (the subscriptions' owner renews that user's data-plane access
with it). Every call with a token is authenticated here: the signature and
expiry, then the key must still exist, belong to the same user and not have
been rotated since. The principal's groups and roles come from the store's
users; what a role allows comes from the current policy. Nothing here
imports grpc.
"""

from __future__ import annotations

from collections.abc import Callable

from feedha.admin_server import keyfile, tokens
from feedha.admin_server.config import ServerConfig
from feedha.admin_server.counters import HubCounters
from feedha.admin_server.errors import AuthenticationError
from feedha.admin_server.logins import LoginDesk
from feedha.admin_server.policy import PolicyFile, Principal
from feedha.admin_server.records import Lease
from feedha.admin_server.store import Store

__all__ = ["Identity"]


class Identity:
    """Logins, tokens and principals (see the module notes).

    Args:
        config: the server configuration (secret hashing, limits, signing key, token lifetime).
        store: the database (keys and users; logins are audited there).
        policy_file: the policy (roles).
        counters: the server's counters (``logins``).
        on_token: called with a user and the lease of the token just issued to them.
        clock: wall-clock seconds.
    """

    def __init__(
        self,
        config: ServerConfig,
        store: Store,
        policy_file: PolicyFile,
        *,
        counters: HubCounters,
        on_token: Callable[[str, Lease], None],
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self._policy_file = policy_file
        self._on_token = on_token
        self._clock = clock
        self.logins = LoginDesk(
            store,
            config.secret_hashing.hasher(),
            config.limits,
            clock=clock,
            count=lambda result: counters.count(counters.logins, result),
        )
        key = keyfile.load_signing_key(config.signing_key_path, store=store)
        self.signer = tokens.TokenSigner(key, ttl_s=config.token_ttl_s)

    def __repr__(self) -> str:
        return f"<Identity [{self.logins!r}]>"

    def close(self) -> None:
        """Stop the login desk's hashing threads."""
        self.logins.close()

    async def login(
        self, key_id: str, secret: str, *, peer: str, time_left_s: float | None = None
    ) -> tuple[str, tokens.TokenClaims, Principal]:
        """Check an API key and issue a token (see :mod:`admin_server.logins` for the limits).

        Args:
            key_id: the API key id.
            secret: its secret.
            peer: the client address without port (:func:`backoff.peer_address`).
            time_left_s: seconds to the call's deadline, ``None`` when it has none.

        Raises:
            LoginThrottledError: the key failed too often recently, or the address is over its rate.
            ResourceExhaustedError: too many logins are being checked at once.
            AuthenticationError: unknown key or wrong secret.
        """
        key = await self.logins.check(key_id, secret, peer=peer, time_left_s=time_left_s)
        token, claims = self.signer.issue(user=key.user, key_id=key.key_id, now=self._clock())
        # A new token keeps the user's subscriptions on the data plane until it expires.
        self._on_token(key.user, Lease(claims.expires_at, key.key_id, claims.issued_at))
        return token, claims, self.principal(key.user)

    def authenticate(self, token: str) -> Principal:
        """Verify a bearer token and resolve its principal (see :meth:`authenticate_token`)."""
        return self.authenticate_token(token)[0]

    def authenticate_token(self, token: str) -> tuple[Principal, tokens.TokenClaims]:
        """Verify a bearer token; its principal and what it says.

        Raises:
            AuthenticationError: forged, malformed, expired, or its key was rotated or removed.
        """
        claims = self.signer.verify(token, now=self._clock())
        key = self._store.find_key(claims.key_id)
        if key is None or key.user != claims.user:
            raise AuthenticationError(
                "the token's API key no longer exists; log in again", reason="KEY_REVOKED"
            )
        if claims.issued_at < key.rotated_at - 1e-3:
            raise AuthenticationError("the token's API key was rotated; log in again", reason="KEY_ROTATED")
        return self.principal(claims.user), claims

    def principal(self, user: str) -> Principal:
        """The principal for a user name, with its key-store groups and roles."""
        record = self._store.find_user(user)
        if record is None:
            return Principal(user=user)
        return Principal(user=user, groups=record.groups, roles=record.roles)

    def has_role(self, principal: Principal, role: str) -> bool:
        """Whether the current policy gives the principal ``role``."""
        return self._policy_file.policy.has_role(principal, role)
