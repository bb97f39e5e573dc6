"""The one token bucket (proto.token_bucket): refill, burst, debt, odd clocks, bad costs."""

from __future__ import annotations

import math

import pytest

from feedha.proto.token_bucket import TokenBucket


def test_it_starts_full_and_refills_at_its_rate_up_to_its_burst() -> None:
    bucket = TokenBucket(4.0, 3.0, now=10.0)
    assert bucket.tokens(now=10.0) == 3.0
    assert [bucket.try_take(now=10.0) for _ in range(4)] == [True, True, True, False]  # the burst, then none
    assert bucket.tokens(now=10.0) == 0.0  # a refused try took nothing
    assert bucket.retry_after(now=10.0) == pytest.approx(0.25)
    assert not bucket.has(now=10.2)  # 0.8 of a token
    assert bucket.has(now=10.25)
    assert bucket.tokens(now=100.0) == 3.0  # never more than the burst
    assert bucket.is_full(now=100.0)
    assert bucket.try_take(now=100.0, cost=2.5)
    assert not bucket.try_take(now=100.0, cost=1.0)  # 0.5 left
    assert bucket.retry_after(now=100.0, cost=2.0) == pytest.approx(0.375)


def test_a_charge_goes_into_debt_that_the_refill_pays_off_first() -> None:
    bucket = TokenBucket(10.0, 2.0, now=0.0)
    bucket.take(32, now=0.0)  # an expensive reply: a debt of 30
    assert bucket.tokens(now=0.0) == -30.0
    assert not bucket.has(now=3.0)  # 0 tokens: the debt is paid, nothing more
    assert bucket.retry_after(now=3.0) == pytest.approx(0.1)
    assert bucket.has(now=3.1)
    bucket.take(5, now=3.1, floor=0.0)  # a floor keeps the balance from going below it
    assert bucket.tokens(now=3.1) == 0.0
    assert "rate=10/s" in repr(bucket) and "tokens=0.0/2" in repr(bucket)


def test_a_clock_going_backwards_refills_nothing_and_pays_no_span_twice() -> None:
    bucket = TokenBucket(1.0, 10.0, now=100.0)
    bucket.take(10, now=100.0)
    assert bucket.tokens(now=50.0) == 0.0  # the clock stepped back 50 s: nothing refilled
    assert bucket.tokens(now=99.0) == 0.0  # still before the last time seen
    assert bucket.tokens(now=102.0) == pytest.approx(2.0)  # only the 2 s after 100 count
    assert not bucket.try_take(now=60.0, cost=3.0)
    assert bucket.try_take(now=60.0, cost=2.0)  # what it holds can still be spent
    assert bucket.tokens(now=103.0) == pytest.approx(1.0)


def test_a_huge_elapsed_time_only_fills_the_bucket() -> None:
    bucket = TokenBucket(1e9, 5.0, now=0.0)
    bucket.take(1e300, now=0.0)  # a debt that no finite wait of this clock pays off ...
    assert bucket.tokens(now=1e308) == 5.0  # ... yet elapsed * rate overflows to inf: full, not NaN
    assert bucket.tokens(now=math.inf) == 5.0
    slow = TokenBucket(1e-9, 1.0, now=-1e308)
    slow.take(1e300, now=-1e308)
    assert slow.tokens(now=1e308) == 1.0
    unlimited = TokenBucket(math.inf, math.inf, now=0.0)
    assert all(unlimited.try_take(now=0.0, cost=1e300) for _ in range(3))
    assert unlimited.retry_after(now=0.0) == 0.0


@pytest.mark.parametrize("cost", [0, 0.0, -1, -1e-12, math.nan, math.inf, -math.inf])
def test_a_cost_that_is_not_positive_and_finite_is_refused_naming_it(cost: float) -> None:
    bucket = TokenBucket(1.0, 5.0, now=0.0)
    with pytest.raises(ValueError, match=f"cost must be a positive finite number, got {cost!r}"):
        bucket.try_take(now=0.0, cost=cost)
    with pytest.raises(ValueError, match="cost must be a positive finite number"):
        bucket.take(cost, now=0.0)
    with pytest.raises(ValueError, match="cost must be a positive finite number"):
        bucket.retry_after(now=0.0, cost=cost)
    assert bucket.tokens(now=0.0) == 5.0  # nothing added, nothing taken


@pytest.mark.parametrize(
    ("rate", "burst", "named"),
    [(0, 1, "rate"), (-1, 1, "rate"), (math.nan, 1, "rate"), (1, 0, "burst"), (1, -5, "burst")],
)
def test_a_rate_or_burst_that_is_not_positive_is_refused_naming_it(
    rate: float, burst: float, named: str
) -> None:
    with pytest.raises(ValueError, match=f"token bucket's {named} must be a positive number"):
        TokenBucket(rate, burst, now=0.0)
