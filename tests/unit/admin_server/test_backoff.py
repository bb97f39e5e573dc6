"""Login lockout per key id, the rate limit per address, peer strings, and the bounded failed-login audit."""

from __future__ import annotations

import pytest

from feedha.admin_server.backoff import (
    ADDRESS_BURST,
    ADDRESS_RATE_PER_S,
    FREE_FAILURES,
    MAX_NAMES,
    LoginThrottle,
    TokenBuckets,
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


def test_a_guessed_key_is_locked_out_from_any_address() -> None:
    throttle = LoginThrottle()
    for i in range(FREE_FAILURES - 1):
        assert throttle.on_failure("fk_1", f"10.0.0.{i}", now=0.0) == 0.0
    assert throttle.on_failure("fk_1", "10.0.0.99", now=0.0) > 0  # a new address does not help
    assert throttle.admit("fk_1", "10.9.9.9", now=0.0) > 0
    assert throttle.admit("fk_2", "10.0.0.99", now=0.0) == 0.0  # another key is not held back
    throttle.on_success("fk_1")
    assert throttle.admit("fk_1", "10.0.0.99", now=0.0) == 0.0


def test_an_address_is_rate_limited_by_failures_and_never_spends_a_keys_own_budget() -> None:
    throttle = LoginThrottle()
    burst = int(ADDRESS_BURST)
    waits = [throttle.admit(None, "192.0.2.1", now=0.0) for _ in range(burst + 5)]  # made-up key ids
    assert waits[:burst] == [0.0] * burst and all(w > 0 for w in waits[burst:])
    # The neighbour behind the same NAT logs in with its good key at once...
    assert throttle.admit("fk_ok", "192.0.2.1", now=0.0) == 0.0
    # ... and a key with failures of its own has its own budget still, whatever the address did.
    for failures in range(1, FREE_FAILURES):
        throttle.on_failure("fk_typo", "192.0.2.1", now=0.0)
        assert throttle.admit("fk_typo", "192.0.2.1", now=0.0) == 0.0, failures
        assert not throttle.in_good_standing("fk_typo")  # it queues behind good keys, though
    throttle.on_failure("fk_typo", "192.0.2.1", now=0.0)
    assert throttle.admit("fk_typo", "192.0.2.9", now=0.0) > 0  # its own budget spent: from anywhere
    assert throttle.admit(None, "192.0.2.2", now=0.0) == 0.0  # another address: its own bucket
    # The bucket refills at its rate: one token after 1 / rate seconds.
    assert throttle.admit(None, "192.0.2.1", now=1.0 / ADDRESS_RATE_PER_S) == 0.0
    assert repr(throttle) == "<LoginThrottle [keys=1, addresses=2, abandoned=0]>"


def test_failures_of_existing_keys_empty_the_address_for_unknown_ids() -> None:
    throttle = LoginThrottle()
    for i in range(int(ADDRESS_BURST)):  # wrong secrets for many real keys, from one address
        assert throttle.admit(f"fk_{i}", "198.51.100.7", now=0.0) == 0.0
        throttle.on_failure(f"fk_{i}", "198.51.100.7", now=0.0)
    assert throttle.admit(None, "198.51.100.7", now=0.0) > 0  # made-up ids from there: refused at once
    assert throttle.admit("fk_0", "198.51.100.7", now=0.0) == 0.0  # each key: still its own budget


def test_reserved_attempts_are_not_charged_twice_and_the_table_is_bounded() -> None:
    limiter = TokenBuckets(burst=2, rate_per_s=1.0)
    assert limiter.take("a", now=0.0) == 0.0
    assert limiter.retry_after("a", now=0.0) == 0.0
    limiter.charge("a", now=0.0)
    assert limiter.retry_after("a", now=0.0) == pytest.approx(1.0)
    assert limiter.take("a", now=0.0) == pytest.approx(1.0)  # nothing taken when empty
    throttle = LoginThrottle()
    throttle.admit(None, "b", now=0.0)
    throttle.on_failure(None, "b", now=0.0, reserved=True)
    assert throttle.by_address.retry_after("b", now=0.0) == 0.0  # one token gone, not two
    for i in range(MAX_NAMES + 10):
        limiter.charge(f"10.{i // 65536}.{i // 256 % 256}.{i % 256}", now=0.0)
    assert len(limiter) <= MAX_NAMES


def test_failed_logins_are_audited_with_repeats_collapsed() -> None:
    store = Store(":memory:")
    for i in range(50):  # 50 failures in one window: one row
        store.audit_failed_login(
            key_id="fk_1", user="alice", address="1.2.3.4", reason="wrong secret", now=i / 100
        )
    store.audit_failed_login(key_id="fk_1", user="alice", address="5.6.7.8", reason="wrong secret", now=0.6)
    store.audit_failed_login(key_id="fk_1", user="alice", address="1.2.3.4", reason="wrong secret", now=60.5)
    store.audit_failed_login(
        key_id="x\n" * 100, user="", address="1.2.3.4", reason="unknown key id", now=60.6
    )
    rows = [(e.user, e.action, e.target, e.detail, e.count) for e in reversed(store.audit_log())]
    assert rows == [
        ("alice", "login-failed", "fk_1", "from 1.2.3.4: wrong secret", 50),
        ("alice", "login-failed", "fk_1", "from 5.6.7.8: wrong secret", 1),
        ("alice", "login-failed", "fk_1", "from 1.2.3.4: wrong secret", 1),  # the next window
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


def test_a_key_whose_caller_left_a_hash_loses_its_standing_until_a_login_is_waited_for() -> None:
    throttle = LoginThrottle()
    assert throttle.in_good_standing("fk_1")
    throttle.on_abandoned("fk_1")
    assert not throttle.in_good_standing("fk_1")
    assert throttle.admit("fk_1", "192.0.2.1", now=0.0) == 0.0  # not locked out: only behind the others
    assert throttle.in_good_standing("fk_2") and not throttle.in_good_standing(None)
    throttle.on_success("fk_1")
    assert throttle.in_good_standing("fk_1")
    for i in range(MAX_NAMES + 10):  # the record is bounded
        throttle.on_abandoned(f"fk_{i}")
    assert "abandoned=10000" in repr(throttle) and throttle.in_good_standing("fk_0")
