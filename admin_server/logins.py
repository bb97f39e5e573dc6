"""Logins: an API key id and secret in, a signed token out, at a cost no caller can multiply.

Theory of operation
-------------------
Checking a secret is argon2id: slow and memory-hard on purpose (64 MiB and a
quarter second by default). Four things keep a crowd of attempts from
costing more than a bounded amount, or from keeping anyone else out:

1. Attempts on one API key are checked one at a time (:class:`KeyLocks`):
   each sees the failures recorded before it, so 64 concurrent wrong
   secrets for one key cost :data:`~admin_server.backoff.FREE_FAILURES`
   hashes, then are refused at once (``LOGIN_THROTTLED``) until the key's
   backoff lapses.
2. An existing key is held to its own backoff alone; an unknown key id takes
   a token of its address's bucket, which failures empty
   (:class:`~admin_server.backoff.TokenBuckets`); an empty bucket refuses
   unknown key ids at once. A neighbour behind the same NAT who makes the
   address fail cannot keep anyone's key out.
3. At most ``login_hashes`` hashes run at once and ``login_queue`` wait
   (:class:`HashGate`); keys in good standing go first and have a slot of
   their own; past the queue a login is refused at once (``LOGINS_BUSY``).
   The hashes run on an executor of ``login_hashes`` threads of the desk's
   own, so they never take the threads the access passes run on
   (``asyncio.to_thread``), and even a bug in the gate could not run more.
   Memory is bounded by ``login_hashes`` x argon2's memory cost.
4. **A hash, once started, runs to its end inside its slot, whatever the
   caller does.** A caller cancelled while it waits (for its key's lock or a
   slot) just leaves. Once its slot is granted, the slot and the key's lock
   pass to a task of the desk's (:meth:`LoginDesk._finish`) that waits for
   the hash, records the outcome -- a wrong secret is a failure on record
   even if nobody waits for the answer any more -- and only then lets them
   go. (Before, cancelling a Login mid-hash released both while the thread
   kept hashing, and recorded nothing: a loop of cancelled logins ran as
   many 64 MiB hashes at once as the default thread pool had threads, and
   guessed without ever reaching the key's backoff.) A key whose caller left
   a hash also loses its good standing (its priority and the kept slot)
   until a login of it is checked with its caller waiting: a loop of
   cancelled logins of good keys cannot keep the honest ones queuing.

5. **A throttled login's refusal is held before it goes out**
   (:class:`~admin_server.limits.Tarpit`): for the wait it announces, 1 s
   at least and 5 s at most, never past the call's deadline, outside the
   key's lock, 256 at once at most (the rest are answered at once). A
   refused call costs the server what any gRPC call costs, ~0.9 ms of CPU,
   however little the refusal takes: 64 callers retrying the moment they
   were refused made ~500 calls a second, half a core, and an honest login
   queued behind them. Held, each comes back once a hold.

Every failed login is audited (collapsed, see ``Store.audit_failed_login``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from feedha.admin_server import tokens
from feedha.admin_server.backoff import LoginThrottle
from feedha.admin_server.errors import AuthenticationError, LoginThrottledError, ResourceExhaustedError
from feedha.admin_server.limits import HashGate, KeyLocks, Limits, Tarpit
from feedha.admin_server.records import ApiKey
from feedha.admin_server.store import Store

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
        self.tarpit = Tarpit()
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=limits.login_hashes, thread_name_prefix="login-hash"
        )
        self._finishing: set[asyncio.Future[ApiKey]] = set()
        self.abandoned = 0  # logins whose caller left while their hash ran (it ran on, and counted)

    def __repr__(self) -> str:
        return (
            f"<LoginDesk [{self.throttle!r}, {self.gate!r}, {self.tarpit!r}, locked={len(self._locks)}, "
            f"abandoned={self.abandoned}]>"
        )

    async def check(self, key_id: str, secret: str, *, peer: str, time_left_s: float | None = None) -> ApiKey:
        """The API key, once its secret is checked.

        Args:
            key_id: the API key id.
            secret: its secret.
            peer: the client address without port.
            time_left_s: seconds to the call's deadline (``None``: none); a throttled refusal
                is held in the tarpit at most until just before it.

        Raises:
            LoginThrottledError: the key failed too often recently, or the address is over its
                rate (after the tarpit's hold).
            ResourceExhaustedError: too many logins are being checked at once (``LOGINS_BUSY``).
            AuthenticationError: unknown key or wrong secret.
        """
        try:
            return await self._check(key_id, secret, peer=peer)
        except LoginThrottledError as exc:  # the key's lock is released already: holding it blocks nobody
            await self.tarpit.hold(exc.retry_after_s, time_left_s=time_left_s)
            raise

    async def _check(self, key_id: str, secret: str, *, peer: str) -> ApiKey:
        key = self._store.find_key(key_id) if key_id else None
        known = None if key is None else key.key_id
        async with contextlib.AsyncExitStack() as held:
            if known is not None:
                # Unknown ids need no lock: admit() takes their token at once, with no await between.
                await held.enter_async_context(self._locks.hold(known))
            standing = self.throttle.in_good_standing(known)
            wait = self.throttle.admit(known, peer, now=self._clock())
            if wait > 0:
                self._audit(key_id, key, peer, "throttled")
                self._count("throttled")
                raise LoginThrottledError(wait)
            try:
                await held.enter_async_context(self.gate.slot(priority=0 if standing else 1))
            except ResourceExhaustedError:
                self._count("busy")
                raise
            # From here the hash is started and the slot and the lock are the finishing task's.
            hashing = asyncio.get_running_loop().run_in_executor(
                self._executor, _verify, self._hasher, key_id, key, secret
            )
            caller = _Caller()
            finishing = asyncio.ensure_future(
                self._finish(held.pop_all(), hashing, key_id, key, peer, caller)
            )
        self._finishing.add(finishing)
        finishing.add_done_callback(self._settled)
        try:
            return await asyncio.shield(finishing)
        except asyncio.CancelledError:
            if not finishing.done():
                self.abandoned += 1
                caller.gone = True
                if key is not None:
                    self.throttle.on_abandoned(key.key_id)
            raise

    async def _finish(
        self,
        held: contextlib.AsyncExitStack,
        hashing: asyncio.Future[None],
        key_id: str,
        key: ApiKey | None,
        peer: str,
        caller: _Caller,
    ) -> ApiKey:
        # Holds the slot and the key's lock until the hash is over and its outcome is on record.
        async with held:
            try:
                await _to_the_end(hashing)
            except AuthenticationError:
                known = None if key is None else key.key_id
                self._count("failed")
                delay = self.throttle.on_failure(known, peer, now=self._clock(), reserved=known is None)
                self._audit(key_id, key, peer, "unknown key id" if key is None else "wrong secret")
                logger.warning(
                    "failed login for key %r from %s (next delay %.1f s)", key_id[:64], peer, delay
                )
                raise
        assert key is not None
        if not caller.gone:  # a good secret nobody waited for does not give the standing back
            self.throttle.on_success(key.key_id)
        self._count("ok")
        return key

    def _settled(self, finishing: asyncio.Future[ApiKey]) -> None:
        # Its caller may be gone (shield() then no longer looks): the outcome is on record already.
        self._finishing.discard(finishing)
        if not finishing.cancelled():
            finishing.exception()

    async def wait_idle(self) -> None:
        """Wait until every started hash has finished and its outcome is recorded (before closing)."""
        while self._finishing:
            await asyncio.gather(*self._finishing, return_exceptions=True)

    def close(self) -> None:
        """Let the hashing threads go once they are done (no new hash may start after this)."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _audit(self, key_id: str, key: ApiKey | None, address: str, reason: str) -> None:
        user = key.user if key is not None else ""
        self._store.audit_failed_login(
            key_id=key_id, user=user, address=address, reason=reason, now=self._clock()
        )


class _Caller:
    """Whether the caller of a login left while its hash ran (set by ``check``, read by ``_finish``)."""

    __slots__ = ("gone",)

    def __init__(self) -> None:
        self.gone = False


def _verify(hasher: argon2.PasswordHasher, key_id: str, key: ApiKey | None, secret: str) -> None:
    # On a login-hash thread.
    if key is None:
        # Hash anyway, so an unknown key id costs the same time as a wrong secret.
        tokens.hash_secret(secret, hasher=hasher)
        raise AuthenticationError(f"unknown API key id {key_id[:64]!r}")
    tokens.verify_secret(key.secret_hash, secret)


async def _to_the_end(hashing: asyncio.Future[None]) -> None:
    """Wait for the hash, and still until it ends if this task is cancelled (then re-raise that)."""
    try:
        await asyncio.shield(hashing)
    except asyncio.CancelledError:
        # Only the server's shutdown cancels a finishing task: the thread runs on regardless, so
        # the slot stays taken until it is done (its outcome is not recorded then).
        await asyncio.wait([hashing])
        raise
