"""Login backoff per key id and per address, peer strings, and the bounded failed-login audit."""

from __future__ import annotations

import pytest

from feedha.admin_server.backoff import (
    ADDRESS_FREE_FAILURES,
    ADDRESS_MAX_DELAY_S,
    FREE_FAILURES,
    LoginThrottle,
    peer_address,
)
from feedha.admin_server.store import MAX_LOGIN_AUDIT_ROWS, Store


@pytest.mark.parametrize(
    ("peer", "address"),
    [
        ("ipv4:1.2.3.4:5678", "1.2.3.4"),
        ("ipv4:127.0.0.1:1", "127.0.0.1"),
        ("ipv6:[::1]:5678", "::1"),
        ("ipv6:%5B::1%5D:5678", "::1"),  # how recent gRPC spells it
        ("ipv6:[::ffff:10.0.0.7]:40000", "10.0.0.7"),
        ("ipv6:[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:443", "2001:db8:1:2::/64"),
        ("ipv6:[fe80::1%eth0]:443", "fe80::1"),
        ("unix:/run/feedha/admin.sock", "unix:/run/feedha/admin.sock"),
        ("unix:", "unix:"),
        ("ipv4:garbage", "ipv4:garbage"),
    ],
)
def test_peer_address_drops_the_port(peer: str, address: str) -> None:
    assert peer_address(peer) == address


def test_a_guessed_key_is_slowed_down_from_any_address() -> None:
    throttle = LoginThrottle()
    for i in range(FREE_FAILURES - 1):
        assert throttle.on_failure("fk_1", f"10.0.0.{i}", now=0.0) == 0.0
    assert throttle.on_failure("fk_1", "10.0.0.99", now=0.0) > 0  # a new address does not help
    assert throttle.retry_after("fk_1", "10.9.9.9", now=0.0) > 0
    assert throttle.retry_after("fk_2", "10.0.0.99", now=0.0) == 0.0  # the address itself is not limited yet
    throttle.on_success("fk_1")
    assert throttle.retry_after("fk_1", "10.0.0.99", now=0.0) == 0.0


def test_one_address_is_limited_loosely_and_never_locks_everybody_out() -> None:
    throttle = LoginThrottle()
    for _ in range(ADDRESS_FREE_FAILURES - 1):
        throttle.on_failure(None, "192.0.2.1", now=0.0)  # made-up key ids: no per-key record
    assert throttle.retry_after("fk_ok", "192.0.2.1", now=0.0) == 0.0  # a broken client alone: nobody waits
    delays = [throttle.on_failure(None, "192.0.2.1", now=float(t)) for t in range(100)]
    assert max(delays) == ADDRESS_MAX_DELAY_S  # at worst the others behind that NAT wait 5 s
    assert throttle.retry_after("fk_ok", "192.0.2.1", now=99.0) == ADDRESS_MAX_DELAY_S
    assert throttle.retry_after("fk_ok", "192.0.2.2", now=99.0) == 0.0
    throttle.on_success("fk_ok")  # a good login does not reset the address (an attacker could)
    assert throttle.retry_after("fk_other", "192.0.2.1", now=100.0) > 0
    assert throttle.retry_after("fk_other", "192.0.2.1", now=99.0 + 301.0) == 0.0  # forgotten when idle
    assert repr(throttle) == "<LoginThrottle [keys=0, addresses=0]>"


def test_a_login_waits_for_the_larger_of_the_two_waits() -> None:
    throttle = LoginThrottle()
    for _ in range(FREE_FAILURES + 3):
        throttle.on_failure("fk_1", "198.51.100.1", now=0.0)
    key_wait = throttle.by_key.retry_after("fk_1", now=0.0)
    assert key_wait > throttle.by_address.retry_after("198.51.100.1", now=0.0)
    assert throttle.retry_after("fk_1", "198.51.100.1", now=0.0) == key_wait


def test_failed_logins_are_audited_with_repeats_collapsed() -> None:
    store = Store(":memory:")
    for i in range(50):  # 50 failures in one second: one row
        store.audit_failed_login(
            key_id="fk_1", user="alice", address="1.2.3.4", reason="wrong secret", now=i / 100
        )
    store.audit_failed_login(key_id="fk_1", user="alice", address="5.6.7.8", reason="wrong secret", now=0.6)
    store.audit_failed_login(key_id="fk_1", user="alice", address="1.2.3.4", reason="wrong secret", now=1.5)
    store.audit_failed_login(key_id="x\n" * 100, user="", address="1.2.3.4", reason="unknown key id", now=1.6)
    rows = [(e.user, e.action, e.target, e.detail, e.count) for e in reversed(store.audit_log())]
    assert rows == [
        ("alice", "login-failed", "fk_1", "from 1.2.3.4: wrong secret", 50),
        ("alice", "login-failed", "fk_1", "from 5.6.7.8: wrong secret", 1),
        ("alice", "login-failed", "fk_1", "from 1.2.3.4: wrong secret", 1),  # the next second
        ("", "login-failed", "x?" * 32, "from 1.2.3.4: unknown key id", 1),  # one line, cut
    ]


def test_a_flood_of_distinct_failures_is_bounded_per_second() -> None:
    store = Store(":memory:")
    for i in range(1000):
        store.audit_failed_login(
            key_id=f"fk_{i}", user="", address=f"10.0.{i // 250}.{i % 250}", reason="r", now=5.0
        )
    entries = store.audit_log(limit=10_000)
    assert len(entries) == MAX_LOGIN_AUDIT_ROWS + 1
    assert sum(e.count for e in entries) == 1000
    assert entries[0].target == "*" and entries[0].count == 1000 - MAX_LOGIN_AUDIT_ROWS
