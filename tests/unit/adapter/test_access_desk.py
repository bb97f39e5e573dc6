"""The core's timing of access changes: replacement windows, expiry checks, rebinds at most every 2 s."""

from __future__ import annotations

from feedha.adapter.core import actions as act
from feedha.adapter.core.access_desk import (
    EXPIRY_CHECK_S,
    REBIND_INTERVAL_S,
    REPLACE_WINDOW_S,
    AccessChange,
    AccessDesk,
    SealChange,
)
from feedha.proto.seal import SealKey

GRANT = (("k" * 40, 10**18, False),)


def _types(actions: list[act.Action]) -> list[type]:
    return [type(a) for a in actions if not isinstance(a, act.ExpireAccess)]


def test_changes_become_actions_for_the_shell() -> None:
    desk = AccessDesk()
    key = SealKey(key_id=1, key=bytes(32))
    assert desk.on_change(SealChange(key), now=0.0) == [act.UseSealKey(key)]
    (change,) = desk.on_change(AccessChange(GRANT, revoke=True, replace=False), now=0.0)
    assert change == act.ChangeAccess(GRANT, revoke=True, replace=False)


def test_a_replacement_ends_once_no_part_came_for_the_window() -> None:
    desk = AccessDesk()
    desk.on_change(AccessChange(GRANT, revoke=False, replace=True), now=1.0)
    desk.on_change(AccessChange(GRANT, revoke=False, replace=True), now=1.5)  # a second part
    assert _types(desk.on_tick(now=1.0 + REPLACE_WINDOW_S, wall_ns=0)) == []  # 0.5 s after the last
    assert desk.next_deadline() <= 1.5 + REPLACE_WINDOW_S
    assert _types(desk.on_tick(now=1.5 + REPLACE_WINDOW_S, wall_ns=0)) == [act.EndAccessReplace]
    assert _types(desk.on_tick(now=9.0, wall_ns=0)) == []  # once


def test_expired_grants_are_looked_for_every_quarter_second() -> None:
    desk = AccessDesk()
    checks = [
        a
        for t in range(100)
        for a in desk.on_tick(now=t * 0.01, wall_ns=t)
        if isinstance(a, act.ExpireAccess)
    ]
    assert len(checks) == round(1.0 / EXPIRY_CHECK_S)
    assert checks[0] == act.ExpireAccess(0)


def test_one_socket_is_rebound_at_most_once_per_interval_however_many_revocations() -> None:
    desk = AccessDesk()
    rebinds: list[tuple[float, str]] = []
    for step in range(1000):  # a revocation every 10 ms for 10 s
        now = step * 0.01
        desk.on_rebind_wanted(frozenset({"delayed"}), now=now)
        rebinds += [(now, a.where) for a in desk.on_tick(now=now, wall_ns=0) if isinstance(a, act.Rebind)]
    times = [t for t, _where in rebinds]
    assert rebinds[0] == (0.0, "delayed")  # the first at once
    assert all(b - a >= REBIND_INTERVAL_S - 1e-9 for a, b in zip(times, times[1:], strict=False))
    assert len(rebinds) == 5


def test_rebinds_of_different_sockets_do_not_wait_for_each_other() -> None:
    desk = AccessDesk()
    desk.on_rebind_wanted(frozenset({"delayed"}), now=0.0)
    assert [a for a in desk.on_tick(now=0.0, wall_ns=0) if isinstance(a, act.Rebind)] == [
        act.Rebind("delayed")
    ]
    desk.on_rebind_wanted(frozenset({"line", "delayed"}), now=0.1)
    due = [a for a in desk.on_tick(now=0.1, wall_ns=0) if isinstance(a, act.Rebind)]
    assert due == [act.Rebind("line")]
    rebinds_at = [
        (round(t * 0.01, 2), a.where)
        for t in range(11, 400)
        for a in desk.on_tick(now=t * 0.01, wall_ns=0)
        if isinstance(a, act.Rebind)
    ]
    assert rebinds_at == [(REBIND_INTERVAL_S, "delayed")]  # two seconds after its last rebind
