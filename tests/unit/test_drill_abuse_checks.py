"""The abuse drill's verdict names each check that did not hold, and its idle attacker keeps its count."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from feedha.drills.abuse import RSS_GROWTH_MIB, failed_checks
from feedha.drills.abuse_attacks import idle_connections


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


def test_the_idle_attacker_opens_again_what_the_server_answered_and_closed() -> None:
    # A server that answers every connection with a 408 and closes it, as a probe listener does
    # past its header timeout: the attacker must see each answer, close, and open another.
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()
    accepted = 0

    def serve() -> None:
        nonlocal accepted
        deadline = time.monotonic() + 20
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                conn, _peer = server.accept()
            except TimeoutError:
                continue
            accepted += 1
            conn.sendall(b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
            conn.close()

    serving = threading.Thread(target=serve)
    serving.start()
    result: dict[str, Any] = {}
    port = server.getsockname()[1]
    attacker = threading.Thread(
        target=lambda: result.update(idle_connections("127.0.0.1", port, count=3, stop=stop))
    )
    attacker.start()
    try:
        deadline = time.monotonic() + 10
        while accepted < 12 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        attacker.join(10)
        serving.join(10)
        server.close()
    assert accepted >= 12, accepted
    assert result["opened"] >= 12 and result["closed_by_server"] >= result["opened"] - 3, result


def test_an_honest_gap_not_served_during_the_replay_flood_fails_the_drill() -> None:
    served = {"replay_honest_gaps": {"asked": 40, "served": 40}, "replay_keys_flood": {"keys": 32}}
    assert failed_checks({**_report(), "attacks": served}) == []
    busy = {"replay_honest_gaps": {"asked": 40, "served": 37, "outcomes": {"OK": 37, "BUSY": 3}}}
    assert failed_checks({**_report(), "attacks": busy}) == ["replay_gaps_served"]
    none_asked = {"replay_honest_gaps": {"asked": 0, "served": 0}}
    assert failed_checks({**_report(), "attacks": none_asked}) == ["replay_gaps_served"]


def test_the_admin_servers_own_checks_hold_or_are_named() -> None:
    from feedha.drills.abuse_admin import BURST_SLACK_MIB

    burst = {"growth_mib": 14.0, "bound_mib": 16.0}
    storm = {"streams": 500, "opened": 500, "updates": 900, "modifies": {"OK": 300}}
    sealed = {
        "reading_at_revocation": True,
        "probes_after_bound": 90,
        "opened_after_bound": 0,
        "churn": {"OK": 50},
    }
    clean = _report()
    clean["attacks"] = {"cancelled_logins": burst, "watch_storm": storm, "sealed_churn": sealed}
    assert failed_checks(clean) == []
    broken = _report()
    broken["attacks"] = {
        "cancelled_logins": {**burst, "growth_mib": 16.0 + BURST_SLACK_MIB + 1},  # hashes past the slots
        "watch_storm": {**storm, "opened": 320},  # streams refused
        "sealed_churn": {**sealed, "opened_after_bound": 3},  # the revoked one read on
    }
    assert failed_checks(broken) == ["cancelled_logins_rss", "watch_storm", "sealed_revocation"]
    never_read = _report()
    never_read["attacks"] = {"sealed_churn": {**sealed, "reading_at_revocation": False}}  # proves nothing
    assert failed_checks(never_read) == ["sealed_revocation"]
    crashed = _report()
    crashed["attacks"] = {"watch_storm": {"error": "RuntimeError: boom"}}
    assert failed_checks(crashed) == ["watch_storm"]


def test_a_forged_term_that_fenced_or_cost_a_message_fails_the_drill() -> None:
    client = {"missing": 0, "lost": 0, "line_holes": 0, "highest_term": 1, "route_term": 1}
    held = {"forged_terms": {"forged": 300}, "forged_terms_client": client}
    assert failed_checks({**_report(), "attacks": held}) == []
    fenced = {**held, "forged_terms_client": {**client, "highest_term": 2**32 - 1}}
    assert failed_checks({**_report(), "attacks": fenced}) == ["forged_terms_fence"]
    lost = {**held, "forged_terms_client": {**client, "missing": 12}}
    assert failed_checks({**_report(), "attacks": lost}) == ["forged_terms_lost"]
    idle = {**held, "forged_terms": {"forged": 0}}  # a forger that sent nothing proves nothing
    assert failed_checks({**_report(), "attacks": idle}) == ["forged_terms_fence"]
