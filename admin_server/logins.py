"""Logins: an API key id and secret in, a signed token out, at a cost no caller can multiply.

Theory of operation
-------------------
Checking a secret is argon2id: slow and memory-hard on purpose (64 MiB and a
quarter second by default). Three things keep a crowd of attempts from
costing more than a bounded amount, or from keeping anyone else out:

1. Attempts on one API key are checked one at a time (:class:`KeyLocks`):
   each sees the failures recorded before it, so 64 concurrent wrong
   secrets for one key cost :data:`~admin_server.backoff.FREE_FAILURES`
   hashes, then are refused at once (``LOGIN_THROTTLED``) until the key's
   backoff lapses.
2. Attempts that are not on a key in good standing (an unknown key id, a
   key with failures on record) take a token of their address's bucket
   (:class:`~admin_server.backoff.AddressLimiter`); an empty bucket refuses
   them at once. A key in good standing is never held back by its address:
   a neighbour behind the same NAT cannot lock it out.
3. At most ``login_hashes`` hashes run at once and ``login_queue`` wait
   (:class:`HashGate`); keys in good standing go first and have a slot of
   their own; past the queue a login is refused at once (``LOGINS_BUSY``).
   Memory is bounded by ``login_hashes`` x argon2's memory cost.

Every failed login is audited (collapsed, see ``Store.audit_failed_login``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from feedha.admin_server import tokens
from feedha.admin_server.backoff import LoginThrottle
from feedha.admin_server.errors import AuthenticationError, LoginThrottledError, ResourceExhaustedError
from feedha.admin_server.limits import HashGate, KeyLocks, Limits
from feedha.admin_server.store import ApiKey, Store

if TYPE_CHECKING:
    import argon2

logger = logging.getLogger(__name__)

__all__ = ["LoginDesk"]


class LoginDesk:
    """Checks API keys for the hub (see the module notes).

    Args:
        store: the database (keys, the audit log).
        hasher: argon2id with the configured cost.
        limits: the quotas (``login_hashes``, ``login_queue``).
        clock: wall-clock seconds.
        count: records an outcome (``ok``, ``failed``, ``throttled``, ``busy``) in the hub's counters.
    """

    def __init__(
        self,
        store: Store,
        hasher: argon2.PasswordHasher,
        limits: Limits,
        *,
        clock: Callable[[], float],
        count: Callable[[str], None],
    ) -> None:
        self._store, self._hasher, self._clock, self._count = store, hasher, clock, count
        self.throttle = LoginThrottle()
        reserved = 1 if limits.login_hashes > 1 else 0  # a slot for keys in good standing alone
        self.gate = HashGate(slots=limits.login_hashes, queue=limits.login_queue, reserved=reserved)
        self._locks = KeyLocks()

    def __repr__(self) -> str:
        return f"<LoginDesk [{self.throttle!r}, {self.gate!r}, locked={len(self._locks)}]>"

    async def check(self, key_id: str, secret: str, *, peer: str) -> ApiKey:
        """The API key, once its secret is checked.

        Raises:
            LoginThrottledError: the key failed too often recently, or the address is over its rate.
            ResourceExhaustedError: too many logins are being checked at once (``LOGINS_BUSY``).
            AuthenticationError: unknown key or wrong secret.
        """
        key = self._store.find_key(key_id) if key_id else None
        # Unknown ids need no lock: admit() takes their address's token at once, with no await between.
        lock = contextlib.nullcontext() if key is None else self._locks.hold(key.key_id)
        async with lock:
            known = None if key is None else key.key_id
            standing = self.throttle.in_good_standing(known)
            wait = self.throttle.admit(known, peer, now=self._clock())
            if wait > 0:
                self._audit(key_id, key, peer, "throttled")
                self._count("throttled")
                raise LoginThrottledError(wait)
            try:
                async with self.gate.slot(priority=0 if standing else 1):
                    await self._verify(key_id, key, secret)
            except ResourceExhaustedError:
                self._count("busy")
                raise
            except AuthenticationError:
                self._count("failed")
                now = self._clock()
                delay = self.throttle.on_failure(known, peer, now=now, reserved=not standing)
                self._audit(key_id, key, peer, "unknown key id" if key is None else "wrong secret")
                logger.warning(
                    "failed login for key %r from %s (next delay %.1f s)", key_id[:64], peer, delay
                )
                raise
        assert key is not None
        self.throttle.on_success(key.key_id)
        self._count("ok")
        return key

    async def _verify(self, key_id: str, key: ApiKey | None, secret: str) -> None:
        if key is None:
            # Hash anyway, so an unknown key id costs the same time as a wrong secret.
            await asyncio.to_thread(tokens.hash_secret, secret, hasher=self._hasher)
            raise AuthenticationError(f"unknown API key id {key_id[:64]!r}")
        await asyncio.to_thread(tokens.verify_secret, key.secret_hash, secret)

    def _audit(self, key_id: str, key: ApiKey | None, address: str, reason: str) -> None:
        user = key.user if key is not None else ""
        self._store.audit_failed_login(
            key_id=key_id, user=user, address=address, reason=reason, now=self._clock()
        )
