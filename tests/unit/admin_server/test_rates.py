"""The broker's request rate per user: a token per call before any work, pattern checks charged after."""

from __future__ import annotations

import pytest

from feedha.admin_server import globs
from feedha.admin_server.errors import RateLimitedError
from feedha.admin_server.rates import STEPS_PER_TOKEN, RequestRates


def test_a_user_gets_its_burst_then_its_rate_and_the_refusal_names_the_limit() -> None:
    rates = RequestRates(rate_per_s=2.0, burst=3)
    for _ in range(3):
        rates.admit("mallory", now=0.0)
    with pytest.raises(RateLimitedError) as refused:
        rates.admit("mallory", now=0.0)
    assert refused.value.reason == "TOO_MANY_REQUESTS" and refused.value.metadata == {
        "limit": "2",
        "burst": "3",
    }
    assert refused.value.retry_after_s == pytest.approx(0.5) and "(limit 2/s, 3 at once)" in str(
        refused.value
    )
    rates.admit("alice", now=0.0)  # another user: a bucket of its own
    rates.admit("mallory", now=0.5)  # one token back after 1 / rate
    assert rates.refused == 1 and repr(rates) == "<RequestRates [users=2, refused=1]>"


def test_pattern_checks_are_charged_after_the_fact_into_debt() -> None:
    rates = RequestRates(rate_per_s=50.0, burst=100)
    rates.charge_steps("mallory", globs.MAX_REQUEST_STEPS, now=0.0)  # one request's whole budget
    debt = globs.MAX_REQUEST_STEPS / STEPS_PER_TOKEN - 100  # 300 tokens charged, 100 held
    with pytest.raises(RateLimitedError) as refused:
        rates.admit("mallory", now=0.0)
    assert refused.value.retry_after_s == pytest.approx((debt + 1) / 50.0)
    rates.admit("mallory", now=(debt + 1) / 50.0 + 1e-6)
    rates.charge_steps("mallory", 0, now=0.0)  # nothing spent: nothing charged
    assert rates.steps_charged == globs.MAX_REQUEST_STEPS


def test_planning_charges_what_the_checks_inside_spent_even_when_they_are_refused() -> None:
    rates = RequestRates(rate_per_s=1.0, burst=1000)
    grants = [f"*{chr(0x41 + i)}*{chr(0x61 + i)}*{chr(0x30 + i % 10)}?" for i in range(26)]
    grants.append("zz-rates-test")  # grants of this test's own: no other test's cached answers
    with pytest.raises(ValueError, match="patterns of this request"):  # a PatternError
        with rates.planning("mallory", now=0.0) as budget:
            for i in range(12):
                globs.is_covered(f"{chr(0x41 + i)}*?", grants)
    assert rates.steps_charged == budget.spent >= globs.MAX_REQUEST_STEPS
