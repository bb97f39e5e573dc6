"""Per-peer login backoff: repeated failures from one peer are slowed down.

Theory of operation: each peer (the gRPC peer address without the port) has
a count of consecutive failed logins and the time of the last one. The first
``free_failures`` cost nothing; after that each failure doubles the wait
before the next attempt is even checked, up to ``max_delay_s``. A success
clears the peer; a peer idle for ``forget_after_s`` is forgotten. Pure: the
caller passes ``now``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

FREE_FAILURES: Final = 3
BASE_DELAY_S: Final = 0.5
MAX_DELAY_S: Final = 30.0
FORGET_AFTER_S: Final = 600.0
MAX_PEERS: Final = 10_000


@dataclass(slots=True)
class _PeerRecord:
    failures: int
    last_failure_at: float


@dataclass(slots=True, kw_only=True)
class LoginBackoff:
    """Tracks failed logins per peer and says how long a peer must wait.

    Attributes:
        free_failures: failures allowed before any delay.
        base_delay_s: the first delay.
        max_delay_s: the delay cap.
        forget_after_s: idle time after which a peer's record is dropped.
    """

    free_failures: int = FREE_FAILURES
    base_delay_s: float = BASE_DELAY_S
    max_delay_s: float = MAX_DELAY_S
    forget_after_s: float = FORGET_AFTER_S
    _peers: dict[str, _PeerRecord] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"<LoginBackoff [peers={len(self._peers)}]>"

    def delay_for(self, failures: int) -> float:
        """The wait imposed after ``failures`` consecutive failures."""
        excess = failures - self.free_failures
        if excess < 0:
            return 0.0
        return min(self.max_delay_s, self.base_delay_s * 2.0**excess)

    def retry_after(self, peer: str, *, now: float) -> float:
        """Seconds the peer must still wait before its next attempt is checked (0 if none)."""
        record = self._peers.get(peer)
        if record is None:
            return 0.0
        if now - record.last_failure_at >= self.forget_after_s:
            del self._peers[peer]
            return 0.0
        return max(0.0, record.last_failure_at + self.delay_for(record.failures) - now)

    def on_failure(self, peer: str, *, now: float) -> float:
        """Record a failed login.

        Returns:
            The wait now imposed on the peer.
        """
        record = self._peers.get(peer)
        if record is None or now - record.last_failure_at >= self.forget_after_s:
            if len(self._peers) >= MAX_PEERS:
                self._forget_idle(now)
            record = self._peers[peer] = _PeerRecord(failures=0, last_failure_at=now)
        record.failures += 1
        record.last_failure_at = now
        return self.delay_for(record.failures)

    def on_success(self, peer: str) -> None:
        """Clear the peer's failures after a good login."""
        self._peers.pop(peer, None)

    def _forget_idle(self, now: float) -> None:
        # Bound memory under a spray of peers: drop the idle ones, then the oldest.
        for peer in [p for p, r in self._peers.items() if now - r.last_failure_at >= self.forget_after_s]:
            del self._peers[peer]
        while len(self._peers) >= MAX_PEERS:
            oldest = min(self._peers, key=lambda p: self._peers[p].last_failure_at)
            del self._peers[oldest]
