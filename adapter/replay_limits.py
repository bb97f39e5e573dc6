"""The replay service's budgets: token buckets per payer and for the whole service.

Theory of operation
-------------------
Every request is charged to a *payer*: the user who holds the CURVE key that
asked (all the keys of one user, and all their connections, share one
budget: :meth:`~adapter.access.AccessTable.owner_of`), the key itself when
its grant names no user, or the connection on a socket without CURVE. A
payer and the service each have a bucket of requests and one of bytes.

A request is admitted when its payer has a request token and is not in
byte debt, and either the service is not in debt, or the payer is *light*:
it keeps within a small allowance besides its budget (:data:`LIGHT_REQUESTS_PER_S`,
:data:`LIGHT_BYTES_PER_S`, charged like the budget). The service's cap keeps
replies near half a core; applied to every payer, a few users asking for
everything kept it empty and every other user's request was ``BUSY``.
Applied to the heavy payers only, it throttles them, and another user's
small requests (gaps to fill) are answered whatever the heavy ones do. A
payer that asks for a lot turns heavy with one big reply, and stays heavy
until its allowance has paid that off; what light payers take past the cap
is at most their allowance each.

The bytes charged after a reply are what it cost to make: the reply's
bytes, and the journal's bytes read and skipped to build it (a time window's
records before its start, :class:`~adapter.replay.ReplayCounters` ``skipped_bytes``),
so a request that makes the service read much and send little pays for the
reading. Pure: the time is passed in.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

from feedha.proto.token_bucket import TokenBucket

__all__ = ["ReplayLimits", "TokenBucket"]


# A gap a client fills is small; a resume pages through 1 MiB replies. A reply
# costs the service ~60 ms of Python per MiB (measured), so the total keeps it
# near half a core; one payer gets half the total. Bursts are a quarter second.
PEER_REQUESTS_PER_S: Final = 100.0
PEER_BYTES_PER_S: Final = 4 * 1024 * 1024
TOTAL_REQUESTS_PER_S: Final = 400.0
TOTAL_BYTES_PER_S: Final = 8 * 1024 * 1024
BURST_S: Final = 0.25
# A light payer's allowance (a burst of one second's worth): an honest subscriber asks for a
# few gaps of a few kB; one asking for more is throttled with the others when the service is busy.
LIGHT_REQUESTS_PER_S: Final = 10.0
LIGHT_BYTES_PER_S: Final = 256 * 1024
MAX_PEERS: Final = 4096  # payers remembered (least recently seen forgotten first)


class ReplayLimits:
    """Request and byte budgets per payer and for the whole service (see the module docstring).

    Args:
        peer_requests_per_s: one payer's requests a second.
        peer_bytes_per_s: one payer's bytes a second (replies, and what was read to make them).
        total_requests_per_s: the service's requests a second (for heavy payers).
        total_bytes_per_s: the service's bytes a second (for heavy payers).
    """

    def __init__(
        self,
        *,
        peer_requests_per_s: float = PEER_REQUESTS_PER_S,
        peer_bytes_per_s: float = PEER_BYTES_PER_S,
        total_requests_per_s: float = TOTAL_REQUESTS_PER_S,
        total_bytes_per_s: float = TOTAL_BYTES_PER_S,
    ) -> None:
        self._peer_rates = (peer_requests_per_s, peer_bytes_per_s)
        self._total = (
            TokenBucket(total_requests_per_s, total_requests_per_s * BURST_S, now=0.0),
            TokenBucket(total_bytes_per_s, total_bytes_per_s * BURST_S, now=0.0),
        )
        self._peers: OrderedDict[bytes, _Payer] = OrderedDict()
        self.light_admitted = 0  # requests admitted past the service's cap (a light payer's)

    def __repr__(self) -> str:
        return f"<ReplayLimits [payers={len(self._peers)}, light_admitted={self.light_admitted}]>"

    def _payer(self, payer: bytes, now: float) -> _Payer:
        buckets = self._peers.get(payer)
        if buckets is None:
            buckets = self._peers[payer] = _Payer(*self._peer_rates, now=now)
            if len(self._peers) > MAX_PEERS:
                self._peers.popitem(last=False)
        self._peers.move_to_end(payer)
        return buckets

    def admit(self, payer: bytes, *, now: float) -> bool:
        """Whether ``payer`` may have a request answered now (takes a request token if so)."""
        buckets = self._payer(payer, now)
        if not (buckets.requests.has(now=now) and buckets.size.has(now=now)):
            return False
        total_requests, total_bytes = self._total
        if not (total_requests.has(now=now) and total_bytes.has(now=now)):
            if not (buckets.light_requests.has(now=now) and buckets.light_size.has(now=now)):
                return False
            self.light_admitted += 1
        for bucket in (buckets.requests, buckets.light_requests, total_requests):
            bucket.take(1, now=now)
        return True

    def is_light(self, payer: bytes, *, now: float) -> bool:
        """Whether ``payer`` keeps within its light allowance (its requests go first)."""
        buckets = self._payer(payer, now)
        return buckets.light_requests.has(now=now) and buckets.light_size.has(now=now)

    def charge(self, payer: bytes, size: int, *, now: float) -> None:
        """Charge ``size`` bytes (a reply, and what was read to make it) to ``payer`` and to the service."""
        buckets = self._payer(payer, now)
        if size <= 0:
            return  # nothing to pay (an empty reply of nothing read)
        for bucket in (buckets.size, buckets.light_size, self._total[1]):
            bucket.take(size, now=now)


class _Payer:
    """One payer's budget (requests, bytes) and its light allowance (requests, bytes)."""

    __slots__ = ("requests", "size", "light_requests", "light_size")

    def __init__(self, requests_per_s: float, bytes_per_s: float, *, now: float) -> None:
        self.requests = TokenBucket(requests_per_s, requests_per_s * BURST_S, now=now)
        self.size = TokenBucket(bytes_per_s, bytes_per_s * BURST_S, now=now)
        self.light_requests = TokenBucket(LIGHT_REQUESTS_PER_S, LIGHT_REQUESTS_PER_S, now=now)
        self.light_size = TokenBucket(LIGHT_BYTES_PER_S, LIGHT_BYTES_PER_S, now=now)
