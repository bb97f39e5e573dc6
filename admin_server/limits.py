"""The admin server's quotas: what one user (or a crowd of strangers) may cost the others.

Theory of operation
-------------------
Every resource a caller can make the server hold or compute has a bound here,
and a request past it is refused with ``RESOURCE_EXHAUSTED``, its ``reason``
and the ``limit`` in the error's metadata (docs/security.md has the table):

* subscriptions per user, and distinct data-plane (CURVE) keys per user: a
  user's subscriptions are kept, reconciled and granted to the adapters, so
  their number must not grow without bound, and made-up keys must not push
  real ones out of an adapter's table;
* watch streams (``WatchRoutes``, ``feedctl watch``) per user, and route
  watches per subscription (a newer one replaces the oldest): each is woken
  by changes, and one Modify must wake a bounded number;
* logins hashing at once (argon2id takes ``memory_kib`` each): a
  :class:`HashGate` lets :attr:`Limits.login_hashes` hash, queues
  :attr:`Limits.login_queue` more and refuses the rest at once. Logins for a
  key in good standing go first, and one of the slots is theirs alone, so a
  flood of wrong secrets never makes an honest login wait behind it;
* refusals of throttled logins held before they go out: a :class:`Tarpit`
  holds :data:`TARPIT_SLOTS` at most, each for the wait it announces
  (between :data:`TARPIT_LEAST_S` and :data:`TARPIT_MOST_S`), so a crowd
  retrying as fast as it is refused comes back once a hold, not once a call;
* Subscribe, Modify and Cancel calls per user, refused ones included:
  :attr:`Limits.requests_per_s` sustained and :attr:`Limits.request_burst` at
  once (:mod:`admin_server.rates`);
* subscriptions live as long as the login that made them: past the token's
  expiry plus :attr:`Limits.subscription_grace_s` without a new login, they are
  deleted;
* the audit log keeps :attr:`Limits.audit_max_rows` rows and
  :attr:`Limits.audit_max_age_s` seconds at most.

:class:`Limits` is pure configuration; :class:`HashGate`, :class:`KeyLocks` and
:class:`Tarpit` are the asyncio pieces the hub uses for logins.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, fields
from typing import Any, Final

from feedha.admin_server.errors import ConfigError, ResourceExhaustedError

__all__ = ["HashGate", "KeyLocks", "Limits", "Tarpit", "exhausted", "parse_limits"]

SUBSCRIPTIONS_PER_USER: Final = 256
CURVE_KEYS_PER_USER: Final = 32
WATCHES_PER_USER: Final = 320  # a client watches each of its subscriptions, and operators watch events
WATCHES_PER_SUBSCRIPTION: Final = 4  # a client watches its subscription once (a reconnect leaves one behind)
LOGIN_HASHES: Final = 2  # argon2id at 64 MiB each by default: 128 MiB at most; one is for good keys
LOGIN_QUEUE: Final = 32
REQUESTS_PER_S: Final = 50.0  # Subscribe, Modify and Cancel calls per user, sustained ...
REQUEST_BURST: Final = 100  # ... and at once
SUBSCRIPTION_GRACE_S: Final = 300.0
# A throttled login's refusal is held this long at least and at most (never past the call's
# deadline), TARPIT_SLOTS at once: a crowd of 64 callers retrying a refusal the moment it came
# cost the admin server ~0.9 ms of CPU a call in gRPC's own machinery, ~500 calls a second.
TARPIT_LEAST_S: Final = 1.0
TARPIT_MOST_S: Final = 5.0
TARPIT_SLOTS: Final = 256
AUDIT_MAX_ROWS: Final = 1_000_000
AUDIT_MAX_AGE_S: Final = 90 * 86400.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The quotas (the config file's ``limits:`` section; names as here).

    Attributes:
        subscriptions_per_user: subscriptions one user may hold.
        curve_keys_per_user: distinct CURVE public keys one user's subscriptions may carry.
        watches_per_user: route and event watch streams one user may have open.
        watches_per_subscription: route watches one subscription may have open (a newer one
            takes the place of the oldest).
        login_hashes: logins checking their secret (argon2id) at once.
        login_queue: logins waiting for a hashing slot; more are refused at once.
        requests_per_s: Subscribe, Modify and Cancel calls one user may make a second, refused
            ones included (and pattern checks, see :mod:`admin_server.rates`).
        request_burst: such calls one user may make at once.
        subscription_grace_s: a subscription outlives its owner's last token by this much.
        audit_max_rows: rows the audit log keeps (the oldest go first).
        audit_max_age_s: how long an audit row is kept.
    """

    subscriptions_per_user: int = SUBSCRIPTIONS_PER_USER
    curve_keys_per_user: int = CURVE_KEYS_PER_USER
    watches_per_user: int = WATCHES_PER_USER
    watches_per_subscription: int = WATCHES_PER_SUBSCRIPTION
    login_hashes: int = LOGIN_HASHES
    login_queue: int = LOGIN_QUEUE
    requests_per_s: float = REQUESTS_PER_S
    request_burst: int = REQUEST_BURST
    subscription_grace_s: float = SUBSCRIPTION_GRACE_S
    audit_max_rows: int = AUDIT_MAX_ROWS
    audit_max_age_s: float = AUDIT_MAX_AGE_S

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            least = 0 if item.name in ("login_queue", "subscription_grace_s") else 1
            if not isinstance(value, int | float) or isinstance(value, bool) or not value >= least:
                raise ConfigError(f"limits.{item.name} must be a number >= {least}, got {value!r}")


def parse_limits(raw: Any) -> Limits:
    """The ``limits:`` section of the config file.

    Raises:
        ConfigError: not a mapping, an unknown name, or a value out of range.
    """
    if not isinstance(raw, Mapping):
        raise ConfigError(f"limits must be a mapping, got {raw!r}")
    known = {item.name: item.type for item in fields(Limits)}
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise ConfigError(f"limits: unknown keys {unknown}; known: {sorted(known)}")
    try:
        values = {name: float(value) if name.endswith("_s") else int(value) for name, value in raw.items()}
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"limits: {exc}") from exc
    return Limits(**values)  # type: ignore[arg-type]  # each value's type follows its name


def exhausted(what: str, limit: int | float, *, reason: str, **facts: str) -> ResourceExhaustedError:
    """A ``RESOURCE_EXHAUSTED`` refusal that names the limit (in its message and its metadata)."""
    return ResourceExhaustedError(
        f"{what} (limit {limit:g})", reason=reason, metadata={"limit": f"{limit:g}", **facts}
    )


class HashGate:
    """At most ``slots`` secret checks at once, ``queue`` more waiting, priority first; the rest refused.

    ``reserved`` of the slots are for priority 0 (keys in good standing): the
    others (unknown key ids, keys with failures) never take them, so an honest
    login never waits behind a crowd of wrong ones, only behind other honest ones.

    Args:
        slots: checks running at once.
        queue: checks waiting at most.
        reserved: slots only priority 0 may take (less than ``slots``).
    """

    def __init__(self, *, slots: int, queue: int, reserved: int = 0) -> None:
        if not 0 <= reserved < slots:
            raise ValueError(f"reserved must be in 0..slots-1, got {reserved} of {slots}")
        self.slots, self.queue, self.reserved = slots, queue, reserved
        self._running = [0, 0]  # by class: priority 0, the rest
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []  # (priority, order, wake-up)
        self._order = itertools.count()
        self.refused = 0

    def __repr__(self) -> str:
        return f"<HashGate [running={sum(self._running)}/{self.slots}, waiting={len(self._waiting)}]>"

    @property
    def waiting(self) -> int:
        """Checks waiting for a slot now."""
        return len(self._waiting)

    @property
    def running(self) -> int:
        """Slots taken now."""
        return sum(self._running)

    def _may_run(self, priority: int) -> bool:
        if sum(self._running) >= self.slots:
            return False
        return priority == 0 or self._running[1] < self.slots - self.reserved

    @contextlib.asynccontextmanager
    async def slot(self, *, priority: int) -> AsyncIterator[None]:
        """Hold a hashing slot (``priority`` 0 goes before 1, and may use the reserved slots).

        Raises:
            ResourceExhaustedError: no slot for it now and the queue is full.
        """
        kind = 0 if priority == 0 else 1
        if self._may_run(priority) and not any(waiting[0] <= priority for waiting in self._waiting):
            self._running[kind] += 1  # nobody before it: it runs now, even with a queue of others
        else:
            if len(self._waiting) >= self.queue:
                self.refused += 1
                raise exhausted(
                    "too many logins are being checked at once; retry in a moment",
                    self.slots + self.queue,
                    reason="LOGINS_BUSY",
                )
            wake: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            entry = (priority, next(self._order), wake)
            heapq.heappush(self._waiting, entry)
            self._wake()
            try:
                await wake  # _wake counted the slot for it
            except asyncio.CancelledError:
                if wake.done() and not wake.cancelled():
                    self._release(kind)  # given a slot, then cancelled: let it go
                else:  # _wake may have dropped it already (its wake-up was cancelled before this ran)
                    with contextlib.suppress(ValueError):
                        self._waiting.remove(entry)
                        heapq.heapify(self._waiting)
                raise
        try:
            yield
        finally:
            self._release(kind)

    def _release(self, kind: int) -> None:
        self._running[kind] -= 1
        self._wake()

    def _wake(self) -> None:
        # Waiters in priority order, each as soon as a slot it may take is free.
        while self._waiting:
            priority, _order, wake = self._waiting[0]
            if wake.done():
                heapq.heappop(self._waiting)  # cancelled while waiting
                continue
            if not self._may_run(priority):
                return
            heapq.heappop(self._waiting)
            self._running[0 if priority == 0 else 1] += 1
            wake.set_result(None)


class KeyLocks:
    """One asyncio lock per name, made on demand and dropped when nobody holds or waits for it.

    Logins for one API key take its lock, so concurrent attempts are checked one
    after the other and each sees the failures recorded before it (backoff is
    checked, then the failure recorded, under the lock).
    """

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    def __len__(self) -> int:
        return len(self._locks)

    @contextlib.asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(name, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[name] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[name]
            if users <= 1:
                del self._locks[name]
            else:
                self._locks[name] = (lock, users - 1)


class Tarpit:
    """Holds refusals a while before they go out, at most ``slots`` at once.

    A refused call costs the server what any call costs (about 0.9 ms of CPU
    on this project's 2-core machine, nearly all of it gRPC's own), however
    little the refusal itself takes; a crowd that retries the moment it is
    refused makes that its rate. Held for the wait the refusal announces
    (``least_s`` at least, ``most_s`` at most), each of its callers comes
    back once a hold. Past ``slots`` held refusals the rest go out at once:
    memory stays bounded, and the crowd costs no more than without the pit.

    Args:
        slots: refusals held at once.
        least_s: the shortest hold.
        most_s: the longest hold.
    """

    def __init__(
        self, *, slots: int = TARPIT_SLOTS, least_s: float = TARPIT_LEAST_S, most_s: float = TARPIT_MOST_S
    ) -> None:
        self.slots, self.least_s, self.most_s = slots, least_s, most_s
        self.held = 0  # refusals held now
        self.overflow = 0  # refusals sent at once because every slot was taken

    def __repr__(self) -> str:
        return f"<Tarpit [held={self.held}/{self.slots}, overflow={self.overflow}]>"

    async def hold(self, wait_s: float, *, time_left_s: float | None = None) -> None:
        """Wait ``wait_s`` clamped to the hold's bounds and to ``time_left_s`` (the call's deadline)."""
        seconds = min(max(wait_s, self.least_s), self.most_s)
        if time_left_s is not None:
            seconds = min(seconds, time_left_s - _DEADLINE_MARGIN_S)
        if seconds <= 0:
            return
        if self.held >= self.slots:
            self.overflow += 1
            return
        self.held += 1
        try:
            await asyncio.sleep(seconds)
        finally:
            self.held -= 1


_DEADLINE_MARGIN_S: Final = 0.1  # a held refusal still reaches its caller before the deadline
