"""The one token bucket every rate limit of feedha is made of.

Theory of operation
-------------------
A bucket holds at most ``burst`` tokens and gains ``rate`` a second; it starts
full. A caller either *tries* to take a cost (:meth:`TokenBucket.try_take`:
taken when the bucket holds it, else nothing taken) or *charges* it after the
fact (:meth:`TokenBucket.take`: the balance may go below zero, a debt that the
refill pays off before anything else is admitted, down to an optional floor).

The time is passed in (pure), from whatever clock the caller uses. Elapsed
time is never negative: a clock that goes backwards neither refills the
bucket nor moves its time back, so no span of time is paid out twice. A huge
elapsed time (a bucket idle for years, an infinite ``now``) only fills it.
A cost must be a positive, finite number: a zero or negative cost would be a
way to add tokens, and is refused with a :class:`ValueError` naming it.

Users: the replay service's budgets (``adapter.replay_limits``), the
adapter's purge rate (``adapter.core.purging``), and the admin server's
per-name tables (``admin_server.backoff.TokenBuckets``: logins by address,
broker requests by user). It lives in ``proto``, the lowest layer both the
adapter and the admin server may import.
"""

from __future__ import annotations

import math

__all__ = ["TokenBucket", "check_rate"]


def check_rate(rate: float, burst: float) -> None:
    """Refuse a rate or a burst that is not a positive number (infinity: no limit).

    Raises:
        ValueError: naming the bad value.
    """
    for name, value in (("rate", rate), ("burst", burst)):
        if not value > 0:  # NaN too
            raise ValueError(f"a token bucket's {name} must be a positive number, got {value!r}")


def _check_cost(cost: float) -> None:
    if not (math.isfinite(cost) and cost > 0):
        raise ValueError(f"a token bucket's cost must be a positive finite number, got {cost!r}")


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` saved up (see the module notes). Pure.

    Args:
        rate: tokens gained a second (> 0; infinity: no limit).
        burst: tokens held at most, and at the start (> 0).
        now: the time the bucket is made, on the caller's clock.

    Raises:
        ValueError: ``rate`` or ``burst`` is not a positive number.
    """

    __slots__ = ("rate", "burst", "_tokens", "_at")

    def __init__(self, rate: float, burst: float, *, now: float) -> None:
        check_rate(rate, burst)
        self.rate, self.burst = rate, burst
        self._tokens, self._at = float(burst), now

    def __repr__(self) -> str:
        return f"<TokenBucket [rate={self.rate:g}/s, tokens={self._tokens:.1f}/{self.burst:g}]>"

    def tokens(self, *, now: float) -> float:
        """The balance at ``now`` (below 0: a debt), after the refill since the last call."""
        elapsed = now - self._at
        if elapsed > 0:  # a clock that went backwards (or stood still) refills nothing
            self._tokens = min(self.burst, self._tokens + elapsed * self.rate)
            self._at = now
        return self._tokens

    def has(self, *, now: float) -> bool:
        """Whether a whole token is left (a debt from an expensive charge must be paid off first)."""
        return self.tokens(now=now) >= 1.0

    def is_full(self, *, now: float) -> bool:
        """Whether the bucket holds its whole burst (then it is the same as a new one)."""
        return self.tokens(now=now) >= self.burst

    def retry_after(self, *, now: float, cost: float = 1.0) -> float:
        """Seconds until ``cost`` tokens are there (0: they are now)."""
        _check_cost(cost)
        tokens = self.tokens(now=now)
        return 0.0 if tokens >= cost else (cost - tokens) / self.rate

    def try_take(self, *, now: float, cost: float = 1.0) -> bool:
        """Take ``cost`` tokens if the bucket holds them; else take nothing.

        Raises:
            ValueError: ``cost`` is not a positive finite number.
        """
        _check_cost(cost)
        if self.tokens(now=now) < cost:
            return False
        self._tokens -= cost
        return True

    def take(self, amount: float, *, now: float, floor: float = -math.inf) -> None:
        """Spend ``amount`` whatever the balance: it may go negative (a debt), to ``floor`` at the least.

        Args:
            amount: the tokens to spend (> 0).
            now: the time.
            floor: the least the balance is left with (a balance already below it is raised to it).

        Raises:
            ValueError: ``amount`` is not a positive finite number.
        """
        _check_cost(amount)
        self._tokens = max(floor, self.tokens(now=now) - amount)
