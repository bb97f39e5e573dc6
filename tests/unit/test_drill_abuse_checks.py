"""The abuse drill's verdict names each check that did not hold (feedha/drill_abuse.py)."""

from __future__ import annotations

from typing import Any

from feedha.drill_abuse import RSS_GROWTH_MIB, failed_checks


def _report(**changes: Any) -> dict[str, Any]:
    report: dict[str, Any] = {
        "honest": {"lost": 0, "line_holes": 0},
        "admin_login": {"logins": 40, "failed": [], "p99_ms": 120.0},
        "health": {"answered": 300, "failed": 0},
        "adapters": {"EQ/adapter-1": {"rebinds": 0}, "EQ/adapter-2": {"rebinds": 0}},
        "rss_mib": {"admin": {"before": 70.0, "max": 80.0}},
    }
    for path, value in changes.items():
        section, key = path.split("__")
        report[section][key] = value
    return report


def test_a_clean_run_fails_no_check() -> None:
    assert failed_checks(_report()) == []


def test_each_broken_promise_is_named() -> None:
    assert failed_checks(_report(honest__line_holes=1)) == ["honest_line_holes"]
    assert failed_checks(_report(honest__lost=3, admin_login__p99_ms=1500.0)) == ["honest_lost", "login_p99"]
    assert failed_checks(_report(admin_login__logins=0)) == ["logins"]
    assert failed_checks(_report(health__answered=0)) == ["health"]
    assert failed_checks(_report(adapters__x={"rebinds": 2})) == ["rebinds"]
    grown = {"before": 70.0, "max": 70.0 + RSS_GROWTH_MIB + 1}
    assert failed_checks(_report(rss_mib__admin=grown)) == ["rss_growth"]
