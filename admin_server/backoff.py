"""Login backoff: repeated failures slow down the key they aim at and the address they come from.

Theory of operation: a :class:`LoginBackoff` is one table of consecutive
failed logins and the time of the last one, per name. The first
``free_failures`` cost nothing; after that each failure doubles the wait
before the next attempt is even checked, up to ``max_delay_s``. A name idle
for ``forget_after_s`` is forgotten, and the table never holds more than
``MAX_NAMES`` names.

A :class:`LoginThrottle` keeps two such tables, each with its own count: one
per API key id (only ids that exist, so a spray of made-up ids cannot evict
a real key's record) and one per client address without its port
(:func:`peer_address`). A login waits for the larger of the two waits.

- Per key (strict: 3 free failures, up to 30 s): guessing one key's secret is
  slow from anywhere. A good login clears its key's record.
- Per address (loose: 20 free failures, up to 5 s, forgotten after 5 idle
  minutes): one source spraying many keys is slowed down too, but many
  clients can share an address (a NAT, a proxy), so one broken client behind
  it must not lock the others out. It can at worst make them wait 5 s, and
  only after 20 failures in a row; a good login does *not* clear the
  address's record, or an attacker with one valid key could reset it at will.

Secrets are 256 random bits, so the backoff is not what keeps them safe; it
bounds the argon2 work (CPU) a stranger can make the server do and keeps the
audit log readable. Pure: the caller passes ``now``.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from dataclasses import dataclass, field
from typing import Final

FREE_FAILURES: Final = 3
BASE_DELAY_S: Final = 0.5
MAX_DELAY_S: Final = 30.0
FORGET_AFTER_S: Final = 600.0
ADDRESS_FREE_FAILURES: Final = 20
ADDRESS_BASE_DELAY_S: Final = 0.25
ADDRESS_MAX_DELAY_S: Final = 5.0
ADDRESS_FORGET_AFTER_S: Final = 300.0
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


def _address_backoff() -> LoginBackoff:
    return LoginBackoff(
        free_failures=ADDRESS_FREE_FAILURES,
        base_delay_s=ADDRESS_BASE_DELAY_S,
        max_delay_s=ADDRESS_MAX_DELAY_S,
        forget_after_s=ADDRESS_FORGET_AFTER_S,
    )


@dataclass(slots=True, kw_only=True)
class LoginThrottle:
    """Failed logins per key id and per address; a login waits for the larger wait.

    Attributes:
        by_key: the strict table, per existing API key id.
        by_address: the loose table, per client address (see :func:`peer_address`).
    """

    by_key: LoginBackoff = field(default_factory=LoginBackoff)
    by_address: LoginBackoff = field(default_factory=_address_backoff)

    def __repr__(self) -> str:
        return (
            f"<LoginThrottle [keys={len(self.by_key._records)}, addresses={len(self.by_address._records)}]>"
        )

    def retry_after(self, key_id: str, address: str, *, now: float) -> float:
        """Seconds a login for ``key_id`` from ``address`` must still wait (0: check it now)."""
        return max(self.by_key.retry_after(key_id, now=now), self.by_address.retry_after(address, now=now))

    def on_failure(self, key_id: str | None, address: str, *, now: float) -> float:
        """Record a failed login; ``key_id`` is ``None`` when no such key exists.

        Returns:
            The wait now imposed on the next login for that key or from that address.
        """
        by_key = 0.0 if key_id is None else self.by_key.on_failure(key_id, now=now)
        return max(by_key, self.by_address.on_failure(address, now=now))

    def on_success(self, key_id: str) -> None:
        """Clear the key's failures (the address keeps its record: see the module notes)."""
        self.by_key.on_success(key_id)
