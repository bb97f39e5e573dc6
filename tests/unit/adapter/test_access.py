"""The adapter's access table: grants, expiry, revocation and which sockets must be bound afresh."""

from __future__ import annotations

from feedha.adapter.access import DELAYED, LINE, MAX_KEYS, REPLAY, AccessTable

A, B, C = "a" * 40, "b" * 40, "c" * 40


def test_a_granted_key_is_admitted_until_it_expires() -> None:
    table = AccessTable()
    assert not table.admits(LINE, A, now_ns=1)
    table.grant(A, 100)
    assert table.admits(LINE, A, now_ns=99) and not table.admits(LINE, A, now_ns=100)
    assert table.refused == 2 and len(table) == 1


def test_revoking_a_key_that_connected_rebinds_only_where_it_connected() -> None:
    table = AccessTable()
    table.grant(A, 100)
    table.grant(B, 100)
    assert table.admits(LINE, A, now_ns=1)
    assert table.admits(REPLAY, B, now_ns=1)
    assert table.revoke([A]) == {LINE}
    assert table.revoke([C]) == set()  # never granted, never connected
    table.rebound(LINE)
    assert table.revoke([A]) == set()  # rebound since: nobody holds it
    assert not table.admits(LINE, A, now_ns=2)


def test_expiry_and_replacement_revoke_like_a_revoke() -> None:
    table = AccessTable()
    table.grant(A, 10)
    table.grant(B, 1000)
    table.admits(LINE, A, now_ns=5)
    table.admits(LINE, B, now_ns=5)
    assert table.expire(now_ns=10) == {LINE}
    assert table.replace([(C, 1000)]) == {LINE}  # B lost access, and B was connected
    assert table.admits(LINE, C, now_ns=20) and not table.admits(LINE, B, now_ns=20)
    assert "keys=1" in repr(table)


def test_permanent_keys_need_no_grant_and_the_table_is_bounded() -> None:
    table = AccessTable(permanent=[A])
    assert table.admits(LINE, A, now_ns=10**18)
    for i in range(MAX_KEYS + 10):
        table.grant(f"{i:040d}", 10)
    assert len(table) == MAX_KEYS


def test_the_version_grows_whenever_a_key_loses_access_and_allows_counts_nothing() -> None:
    table = AccessTable()
    start = table.version
    table.grant(A, 100)
    assert table.version == start  # more access: nobody to check
    table.grant(A, 100, True)  # delayed only from now on
    assert table.version == start + 1
    table.grant(A, 50, True)  # a shorter grant
    assert table.version == start + 2
    assert table.allows(DELAYED, A, now_ns=10) and not table.allows(LINE, A, now_ns=10)
    assert table.refused == 0  # allows() is a check: nothing counted
    table.revoke([A])
    assert table.version == start + 3 and not table.allows(DELAYED, A, now_ns=10)
    table.revoke([A])  # not granted any more: nothing lost
    assert table.version == start + 3


def test_a_published_view_answers_as_the_table_did_and_never_changes() -> None:
    table = AccessTable(permanent=[C])
    table.grant(A, 100, True, False, "alice")
    table.grant(B, 100)
    view = table.view()
    for key in (A, B, C, "d" * 40):
        for where in (LINE, DELAYED, REPLAY):
            assert view.allows(where, key, 50) == table.allows(where, key, 50), (where, key)
        assert view.is_delayed_only(key) == table.is_delayed_only(key)
        assert view.owner_of(key) == table.owner_of(key)
    table.revoke([A, B])
    assert view.allows(DELAYED, A, 50) and view.allows(LINE, B, 50) and len(view) == 2
    assert view.version < table.view().version


def test_a_conflated_only_key_reaches_the_conflated_line_and_nothing_else() -> None:
    from feedha.adapter.access import CONFLATED, SNAPSHOT

    table = AccessTable()
    table.grant(A, 100, False, True)
    assert table.admits(CONFLATED, A, now_ns=1)
    for where in (LINE, DELAYED, REPLAY, SNAPSHOT):
        assert not table.admits(where, A, now_ns=1), where
    assert table.is_delayed_only(A)  # a replay service would answer it delayed ranges at most
    table.grant(B, 100, True, True)  # delayed and conflated routes: both lines, never real time
    assert table.admits(CONFLATED, B, now_ns=1) and table.admits(DELAYED, B, now_ns=1)
    assert not table.admits(LINE, B, now_ns=1)
    table.grant(C, 100)  # a real-time key may read the conflated line too
    assert table.admits(CONFLATED, C, now_ns=1) and table.admits(LINE, C, now_ns=1)
    table.grant(C, 100, True)  # ... until it turns delayed-only: cut off from both
    assert not table.admits(CONFLATED, C, now_ns=1)


def test_a_key_turned_conflated_only_rebinds_where_it_may_no_longer_be() -> None:
    from feedha.adapter.access import CONFLATED

    table = AccessTable()
    table.grant(A, 100)
    for where in (LINE, CONFLATED, DELAYED):
        assert table.admits(where, A, now_ns=1)
    version = table.version
    assert table.grant(A, 100, False, True) == {LINE, DELAYED}
    assert table.version > version
    assert table.grant(A, 100, False, True) == {LINE, DELAYED} and table.version == version + 1
