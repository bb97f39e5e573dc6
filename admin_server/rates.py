"""The broker's request rate: what one user's Subscribe, Modify and Cancel calls may cost the others.

Theory of operation
-------------------
Each call takes a token of its user's bucket (``limits.requests_per_s``
sustained, ``limits.request_burst`` at once) *before* any work, so a call
refused for any reason -- not entitled, a bad pattern, over a quota, an
unknown subscription -- has cost its token all the same: refusals are no
free way to make the server plan. An empty bucket refuses the call at once
(``RESOURCE_EXHAUSTED``, ``TOO_MANY_REQUESTS``, the limit named, a
``RetryInfo`` saying when a token is back).

Planning a call's routes checks its patterns against the user's grants
(:mod:`admin_server.globs`), which can take up to
:data:`~admin_server.globs.MAX_REQUEST_STEPS` NFA moves (~0.1 s) on the event
loop. Those moves are charged after the fact, a token per whole
:data:`STEPS_PER_TOKEN`, the bucket going into debt if need be: a call that
spends the whole step budget costs 300 tokens, six seconds of the default
rate, so complex patterns cannot keep the loop busy at the rate either.
Symbols and simple patterns cost a few moves, or none once cached. Pure but
for the step budget's context variable: times are passed in.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Final

from feedha.admin_server import globs
from feedha.admin_server.backoff import TokenBuckets
from feedha.admin_server.errors import RateLimitedError

__all__ = ["STEPS_PER_TOKEN", "RequestRates"]

STEPS_PER_TOKEN: Final = 200  # pattern-check moves charged as one request (a whole step budget: 300)


class RequestRates:
    """Each user's bucket of broker requests (see the module notes).

    Args:
        rate_per_s: tokens a user gets back a second.
        burst: tokens a user holds at most (and starts with).
    """

    def __init__(self, *, rate_per_s: float, burst: float) -> None:
        self._buckets = TokenBuckets(rate_per_s=rate_per_s, burst=burst)
        self.refused = 0
        self.steps_charged = 0

    def __repr__(self) -> str:
        return f"<RequestRates [users={len(self._buckets)}, refused={self.refused}]>"

    def admit(self, user: str, *, now: float) -> None:
        """Take the user's token for one call.

        Raises:
            RateLimitedError: the bucket is empty (``TOO_MANY_REQUESTS``; nothing taken).
        """
        wait = self._buckets.take(user, now=now)
        if wait > 0:
            self.refused += 1
            rate = self._buckets.rate_per_s
            raise RateLimitedError(
                f"user {user!r} is over its rate of Subscribe, Modify and Cancel calls; retry in "
                f"{wait:.2f} s (limit {rate:g}/s, {self._buckets.burst:g} at once)",
                retry_after_s=wait,
                reason="TOO_MANY_REQUESTS",
                metadata={"limit": f"{rate:g}", "burst": f"{self._buckets.burst:g}"},
            )

    def charge_steps(self, user: str, steps: int, *, now: float) -> None:
        """Charge pattern-check moves to the user's bucket, a token per whole :data:`STEPS_PER_TOKEN`.

        The bucket may go into debt. Fewer moves than a token's worth are free: a request of
        symbols and simple patterns costs its one token, whatever it had to check.
        """
        tokens = steps // STEPS_PER_TOKEN
        if tokens > 0:
            self.steps_charged += steps
            self._buckets.charge(user, now=now, amount=tokens, floor=float("-inf"))

    @contextlib.contextmanager
    def planning(self, user: str, *, now: float) -> Iterator[globs.StepBudget]:
        """Plan inside: the pattern checks share one step budget, charged to ``user`` on the way out."""
        with globs.step_budget() as budget:
            try:
                yield budget
            finally:
                self.charge_steps(user, budget.spent, now=now)
