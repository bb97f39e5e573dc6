"""The replay service's budgets: token buckets per peer and for the whole service.

A request is admitted when its peer and the service both have a request
token and are not in byte debt; the reply's size is charged afterwards.
Pure: the time is passed in.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

__all__ = ["ReplayLimits", "TokenBucket"]


# A gap a client fills is small; a resume pages through 1 MiB replies. A reply
# costs the service ~60 ms of Python per MiB (measured), so the total keeps it
# near half a core; one peer gets half the total. Bursts are a quarter second.
PEER_REQUESTS_PER_S: Final = 100.0
PEER_BYTES_PER_S: Final = 4 * 1024 * 1024
TOTAL_REQUESTS_PER_S: Final = 400.0
TOTAL_BYTES_PER_S: Final = 8 * 1024 * 1024
BURST_S: Final = 0.25
MAX_PEERS: Final = 4096  # peers remembered (least recently seen forgotten first)


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` saved up. Pure: the time is passed in."""

    __slots__ = ("rate", "burst", "_tokens", "_at")

    def __init__(self, rate: float, burst: float, *, now: float) -> None:
        self.rate, self.burst = rate, burst
        self._tokens, self._at = burst, now

    def __repr__(self) -> str:
        return f"<TokenBucket [rate={self.rate:g}/s, tokens={self._tokens:.1f}/{self.burst:g}]>"

    def _refill(self, now: float) -> None:
        self._tokens = min(self.burst, self._tokens + max(0.0, now - self._at) * self.rate)
        self._at = now

    def has(self, *, now: float) -> bool:
        """Whether anything is left (a debt from an expensive reply must be paid off first)."""
        self._refill(now)
        return self._tokens >= 1.0

    def take(self, amount: float, *, now: float) -> None:
        """Spend ``amount`` (the balance may go negative: a debt)."""
        self._refill(now)
        self._tokens -= amount


class ReplayLimits:
    """Request and reply-byte budgets per peer and for the whole service.

    A request is admitted when its peer and the service both have a request
    token and are not in byte debt; the reply's size is charged afterwards, so
    a peer that asked for a lot waits until its budget refills.
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
        self._peers: OrderedDict[bytes, tuple[TokenBucket, TokenBucket]] = OrderedDict()

    def __repr__(self) -> str:
        return f"<ReplayLimits [peers={len(self._peers)}]>"

    def _buckets(self, peer: bytes, now: float) -> tuple[TokenBucket, TokenBucket]:
        buckets = self._peers.get(peer)
        if buckets is None:
            requests, size = self._peer_rates
            buckets = self._peers[peer] = (
                TokenBucket(requests, requests * BURST_S, now=now),
                TokenBucket(size, size * BURST_S, now=now),
            )
            if len(self._peers) > MAX_PEERS:
                self._peers.popitem(last=False)
        self._peers.move_to_end(peer)
        return buckets

    def admit(self, peer: bytes, *, now: float) -> bool:
        """Whether ``peer`` may have a request answered now (takes a request token if so)."""
        buckets = (*self._buckets(peer, now), *self._total)
        if not all(bucket.has(now=now) for bucket in buckets):
            return False
        buckets[0].take(1, now=now)
        buckets[2].take(1, now=now)
        return True

    def charge(self, peer: bytes, size: int, *, now: float) -> None:
        """Charge a reply of ``size`` bytes to ``peer`` and to the service."""
        self._buckets(peer, now)[1].take(size, now=now)
        self._total[1].take(size, now=now)
