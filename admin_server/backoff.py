"""Login backoff: failures lock out the key they aim at; an address is only rate-limited by its failures.

Theory of operation: a :class:`LoginBackoff` is one table of consecutive
failed logins and the time of the last one, per API key id (only ids that
exist, so a spray of made-up ids cannot evict a real key's record). The first
``free_failures`` cost nothing; after that each failure doubles the wait
before the next attempt on that key is even checked, up to ``max_delay_s``,
from any address: guessing one key's secret is slow from anywhere. A good
login clears its key's record. The hub checks a key's backoff and records
its failures under a per-key lock (:class:`~admin_server.limits.KeyLocks`),
so concurrent attempts cannot all pass the check before the first failure
is recorded.

An address is never locked out: many clients share one (a NAT, a proxy,
a host), and one broken or hostile client there must not keep the others
from logging in. So a :class:`TokenBuckets` only *rate-limits* addresses, and only
by failures: every failed login from an address takes a token from its
bucket (:data:`ADDRESS_BURST` tokens, :data:`ADDRESS_RATE_PER_S` a second),
and when it is empty the attempts that have no budget of their own -- an
unknown key id, which can only fail -- are refused at once
(``LOGIN_THROTTLED``), at no hashing cost. An existing key id has a budget
of its own (its backoff above) and is checked against that alone, whatever
its address did: a neighbour behind the same NAT who made the address fail
cannot keep a key in good standing out, nor spend the free failures of a key
that has one or two on record. What the per-key budgets add up to across
many key ids is bounded by the hashing gate
(:class:`~admin_server.limits.HashGate`): a fixed number of hashes at once,
one of them kept for keys with no failure on record.

Secrets are 256 random bits, so the backoff is not what keeps them safe; it
bounds the argon2 work (CPU and memory) a stranger can make the server do,
with the hashing gate (:class:`~admin_server.limits.HashGate`), and keeps the
audit log readable. Pure: the caller passes ``now``.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from dataclasses import dataclass, field
from typing import Final

from feedha.proto.token_bucket import TokenBucket, check_rate

FREE_FAILURES: Final = 3
BASE_DELAY_S: Final = 0.5
MAX_DELAY_S: Final = 30.0
FORGET_AFTER_S: Final = 600.0
ADDRESS_BURST: Final = 10.0  # costly attempts an address may make at once ...
ADDRESS_RATE_PER_S: Final = 0.2  # ... and a second, sustained (one every 5 s)
MAX_NAMES: Final = 10_000
IPV6_PREFIX: Final = 64  # one host usually owns a whole /64: key IPv6 clients by it
_MAX_PEER_TEXT: Final = 128


def peer_address(peer: str) -> str:
    """The client address of a gRPC peer string, without the port.

    ``ipv4:1.2.3.4:5678`` -> ``1.2.3.4``; ``ipv6:[::1]:5678`` (or its
    URL-encoded form ``ipv6:%5B::1%5D:5678``) -> ``::1``, a global IPv6
    address -> its /64 (``2001:db8:1:2::/64``), an IPv4-mapped one -> the
    IPv4 address; ``unix:PATH`` -> ``unix:PATH`` (local callers share it);
    anything else is kept as it is (cut to 128 characters).

    Args:
        peer: what ``grpc.aio.ServicerContext.peer()`` returns.

    Returns:
        The address to key per-address limits by.
    """
    kind, _colon, rest = peer.partition(":")
    if kind == "ipv4":
        return _ip_text(rest.rpartition(":")[0]) or peer[:_MAX_PEER_TEXT]
    if kind == "ipv6":
        rest = urllib.parse.unquote(rest)
        host = rest[1:].partition("]")[0] if rest.startswith("[") else rest
        return _ip_text(host) or peer[:_MAX_PEER_TEXT]
    return peer[:_MAX_PEER_TEXT]


def _ip_text(host: str) -> str:
    try:
        address = ipaddress.ip_address(host.partition("%")[0])  # drop an IPv6 zone id
    except ValueError:
        return ""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        if not (address.is_loopback or address.is_link_local):
            return str(ipaddress.IPv6Network(f"{address}/{IPV6_PREFIX}", strict=False))
    return str(address)


@dataclass(slots=True)
class _Record:
    failures: int
    last_failure_at: float


@dataclass(slots=True, kw_only=True)
class LoginBackoff:
    """Tracks failed logins per name (a key id or an address) and says how long it must wait.

    Attributes:
        free_failures: failures allowed before any delay.
        base_delay_s: the first delay.
        max_delay_s: the delay cap.
        forget_after_s: idle time after which a name's record is dropped.
    """

    free_failures: int = FREE_FAILURES
    base_delay_s: float = BASE_DELAY_S
    max_delay_s: float = MAX_DELAY_S
    forget_after_s: float = FORGET_AFTER_S
    _records: dict[str, _Record] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"<LoginBackoff [names={len(self._records)}]>"

    def delay_for(self, failures: int) -> float:
        """The wait imposed after ``failures`` consecutive failures."""
        excess = failures - self.free_failures
        if excess < 0:
            return 0.0
        return min(self.max_delay_s, self.base_delay_s * 2.0 ** min(excess, 64))

    def failures(self, name: str) -> int:
        """The consecutive failures on record for ``name``."""
        record = self._records.get(name)
        return 0 if record is None else record.failures

    def retry_after(self, name: str, *, now: float) -> float:
        """Seconds ``name`` must still wait before its next attempt is checked (0 if none)."""
        record = self._records.get(name)
        if record is None:
            return 0.0
        if now - record.last_failure_at >= self.forget_after_s:
            del self._records[name]
            return 0.0
        return max(0.0, record.last_failure_at + self.delay_for(record.failures) - now)

    def on_failure(self, name: str, *, now: float) -> float:
        """Record a failed login.

        Returns:
            The wait now imposed on ``name``.
        """
        record = self._records.get(name)
        if record is None or now - record.last_failure_at >= self.forget_after_s:
            if len(self._records) >= MAX_NAMES:
                self._forget_idle(now)
            record = self._records[name] = _Record(failures=0, last_failure_at=now)
        record.failures += 1
        record.last_failure_at = now
        return self.delay_for(record.failures)

    def on_success(self, name: str) -> None:
        """Clear ``name``'s failures after a good login."""
        self._records.pop(name, None)

    def _forget_idle(self, now: float) -> None:
        # Bound memory under a spray of names: drop the idle ones, then the oldest.
        for name in [n for n, r in self._records.items() if now - r.last_failure_at >= self.forget_after_s]:
            del self._records[name]
        while len(self._records) >= MAX_NAMES:
            oldest = min(self._records, key=lambda n: self._records[n].last_failure_at)
            del self._records[oldest]


@dataclass(slots=True, kw_only=True)
class TokenBuckets:
    """A token bucket per name: a client address for logins (see the module notes), a user elsewhere.

    Each is a :class:`~proto.token_bucket.TokenBucket`; the table holds
    :data:`MAX_NAMES` at most (a name whose bucket is full is the same as a
    forgotten one, and goes first).

    Attributes:
        rate_per_s: tokens added a second.
        burst: tokens a name holds at most (and starts with).
    """

    rate_per_s: float = ADDRESS_RATE_PER_S
    burst: float = ADDRESS_BURST
    _buckets: dict[str, TokenBucket] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_rate(self.rate_per_s, self.burst)

    def __repr__(self) -> str:
        return f"<TokenBuckets [names={len(self._buckets)}]>"

    def __len__(self) -> int:
        return len(self._buckets)

    def retry_after(self, name: str, *, now: float) -> float:
        """Seconds until ``name`` has a token again (0: it has one now)."""
        bucket = self._buckets.get(name) or TokenBucket(self.rate_per_s, self.burst, now=now)
        return bucket.retry_after(now=now)

    def take(self, name: str, *, now: float) -> float:
        """Take a token if there is one (returns 0); else the wait, and nothing taken."""
        bucket = self._bucket(name, now)
        return 0.0 if bucket.try_take(now=now) else bucket.retry_after(now=now)

    def charge(self, name: str, *, now: float, amount: float = 1.0, floor: float = 0.0) -> None:
        """Take ``amount`` tokens, or what is left down to ``floor`` (below 0: a debt that refills first).

        Args:
            name: whose bucket.
            now: seconds.
            amount: the tokens to take (a failure that was not reserved: one).
            floor: the least the bucket may be left with.

        Raises:
            ValueError: ``amount`` is not a positive finite number.
        """
        self._bucket(name, now).take(amount, now=now, floor=floor)

    def _bucket(self, name: str, now: float) -> TokenBucket:
        bucket = self._buckets.get(name)
        if bucket is not None:
            return bucket
        if len(self._buckets) >= MAX_NAMES:
            # Bound memory: a name whose bucket refilled is the same as a forgotten one.
            for known in [n for n, b in self._buckets.items() if b.is_full(now=now)]:
                del self._buckets[known]
            while len(self._buckets) >= MAX_NAMES:
                del self._buckets[next(iter(self._buckets))]
        bucket = self._buckets[name] = TokenBucket(self.rate_per_s, self.burst, now=now)
        return bucket


@dataclass(slots=True, kw_only=True)
class LoginThrottle:
    """Failed logins lock out per key id; unknown key ids are rate-limited by their address's failures.

    Attributes:
        by_key: the backoff per existing API key id.
        by_address: the rate limit per client address (see :func:`peer_address`).
    """

    by_key: LoginBackoff = field(default_factory=LoginBackoff)
    by_address: TokenBuckets = field(default_factory=TokenBuckets)
    _abandoned: dict[str, None] = field(default_factory=dict)  # keys whose caller left a hash, oldest first

    def __repr__(self) -> str:
        return (
            f"<LoginThrottle [keys={len(self.by_key._records)}, addresses={len(self.by_address)}, "
            f"abandoned={len(self._abandoned)}]>"
        )

    def in_good_standing(self, key_id: str | None) -> bool:
        """Whether ``key_id`` exists (``None``: it does not), has no failure on record, and its
        caller waited for its last hash (see :meth:`on_abandoned`)."""
        return key_id is not None and self.by_key.failures(key_id) == 0 and key_id not in self._abandoned

    def on_abandoned(self, key_id: str) -> None:
        """A caller left while its key's secret was being hashed: the key loses its standing.

        The hash runs to its end all the same (a wrong secret counts as a failure); what the
        key loses is its place ahead of the others and the slot kept for keys in good
        standing, until a login of it is checked with its caller waiting
        (:meth:`on_success`). So a loop of cancelled logins of a good key cannot keep the
        honest ones waiting.
        """
        self._abandoned.pop(key_id, None)
        self._abandoned[key_id] = None
        while len(self._abandoned) > MAX_NAMES:
            del self._abandoned[next(iter(self._abandoned))]

    def admit(self, key_id: str | None, address: str, *, now: float) -> float:
        """Whether an attempt may be checked now: 0, or the seconds to wait.

        An existing key is held to its own backoff only; an unknown key id (which can
        only fail) takes its address's token now (:meth:`on_failure` then charges
        nothing more), or is refused while the address is over its failures.

        Args:
            key_id: the API key id, ``None`` when no such key exists.
            address: the client address without port.
            now: seconds.
        """
        if key_id is not None:
            return self.by_key.retry_after(key_id, now=now)
        return self.by_address.take(address, now=now)

    def retry_after(self, key_id: str, address: str, *, now: float) -> float:
        """Seconds a login for ``key_id`` from ``address`` must wait if it is not in good standing."""
        return max(self.by_key.retry_after(key_id, now=now), self.by_address.retry_after(address, now=now))

    def on_failure(self, key_id: str | None, address: str, *, now: float, reserved: bool = False) -> float:
        """Record a failed login; ``key_id`` is ``None`` when no such key exists.

        Args:
            key_id: the key, or ``None``.
            address: the client address.
            now: seconds.
            reserved: :meth:`admit` already took the address's token for this attempt (an
                unknown key id).

        Returns:
            The wait now imposed on the next login for that key.
        """
        if not reserved:
            self.by_address.charge(address, now=now)
        return 0.0 if key_id is None else self.by_key.on_failure(key_id, now=now)

    def on_success(self, key_id: str) -> None:
        """Clear the key's failures and its abandoned hashes (the address's bucket refills by itself)."""
        self.by_key.on_success(key_id)
        self._abandoned.pop(key_id, None)
