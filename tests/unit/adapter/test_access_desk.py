"""The core's access table and its timing: frozen views, replacements, expiry, rebinds at most every 2 s."""

from __future__ import annotations

from feedha.adapter.access import AccessView
from feedha.adapter.core import actions as act
from feedha.adapter.core.access_desk import (
    EXPIRY_CHECK_S,
    REBIND_INTERVAL_S,
    REPLACE_WINDOW_S,
    AccessChange,
    AccessDesk,
    SealChange,
)
from feedha.adapter.core.seal_view import SealMode
from feedha.proto.seal import SealKey

A, B, C = "a" * 40, "b" * 40, "c" * 40
FAR = 10**18
GRANT = ((A, FAR, False),)


def _views(actions: list[act.Action]) -> list[AccessView]:
    return [a.view for a in actions if isinstance(a, act.PublishAccess)]


def _rebinds(actions: list[act.Action]) -> list[str]:
    return [a.where for a in actions if isinstance(a, act.Rebind)]


def _grant(desk: AccessDesk, *keys: str, now: float = 0.0, replace: bool = False) -> list[act.Action]:
    grants = tuple((key, FAR, False) for key in keys)
    return desk.on_change(AccessChange(grants, revoke=False, replace=replace), now=now) + desk.publish()


def _revoke(desk: AccessDesk, *keys: str, now: float = 0.0) -> list[act.Action]:
    grants = tuple((key, 0, False) for key in keys)
    return desk.on_change(AccessChange(grants, revoke=True, replace=False), now=now) + desk.publish()


def test_each_change_publishes_a_frozen_view_for_the_other_threads() -> None:
    desk = AccessDesk()
    first = desk.start(["p" * 40], secured=True)
    assert first.allows("line", "p" * 40, FAR) and not first.allows("line", A, 1)
    key = SealKey(key_id=1, key=bytes(32))
    assert desk.on_change(SealChange(key), now=0.0) == [act.PublishSeal(desk.seal)]
    (granted,) = _views(_grant(desk, A))
    assert granted.allows("line", A, 1) and granted is desk.view and len(granted) == 1
    (revoked,) = _views(_revoke(desk, A))
    assert not revoked.allows("line", A, 1) and revoked.version > granted.version
    assert granted.allows("line", A, 1)  # a published view never changes: readers hold it whole
    assert first.allows("line", "p" * 40, FAR) and len(first) == 0


def test_a_replacement_in_parts_keeps_every_key_named_in_any_part_once_no_part_came_for_the_window() -> None:
    desk = AccessDesk()
    desk.start((), secured=True)
    _grant(desk, A, B, C)
    _grant(desk, A, now=1.0, replace=True)  # part 1 of a replacement
    _grant(desk, B, now=1.5, replace=True)  # part 2
    assert sorted(desk.view.grants) == [A, B, C]  # nobody loses access while the parts come in
    assert _views(desk.on_tick(now=1.0 + REPLACE_WINDOW_S, wall_ns=0)) == []  # 0.5 s after the last
    assert desk.next_deadline() <= 1.5 + REPLACE_WINDOW_S
    (view,) = _views(desk.on_tick(now=1.5 + REPLACE_WINDOW_S, wall_ns=0))
    assert sorted(view.grants) == [A, B]  # C was in no part: gone
    assert _views(desk.on_tick(now=9.0, wall_ns=0)) == []  # once
    assert sorted(desk.view.grants) == [A, B]


def test_expired_grants_are_looked_for_every_quarter_second_and_only_when_grants_are_enforced() -> None:
    for secured in (True, False):
        desk = AccessDesk()
        desk.start((), secured=secured)
        desk.on_change(AccessChange(((A, 5, False),), revoke=False, replace=False), now=0.0)
        assert len(_views(desk.on_tick(now=0.0, wall_ns=0))) == 1  # the grant; nothing expired yet
        published = [
            (t, view)
            for t in range(1, 100)
            for view in _views(desk.on_tick(now=t * 0.01, wall_ns=10))  # expired all along
        ]
        if secured:
            assert [(round(t * 0.01, 2), len(view)) for t, view in published] == [(EXPIRY_CHECK_S, 0)]
        else:
            assert published == [] and len(desk.view) == 1  # an open adapter drops nothing


def _flapping(desk: AccessDesk, where: str, *, now: float) -> None:
    # A key let in at ``where`` and revoked at once.
    _grant(desk, A, now=now)
    desk.on_events([(where, A)], (), now=now, wall_ns=1)
    _revoke(desk, A, now=now)


def test_one_socket_is_rebound_at_most_once_per_interval_however_many_revocations() -> None:
    desk = AccessDesk()
    desk.start((), secured=True)
    desk.on_events((), {"delayed"}, now=0.0, wall_ns=0)  # its peers cannot be told apart
    rebinds: list[tuple[float, str]] = []
    for step in range(1000):  # a revocation every 10 ms for 10 s
        now = step * 0.01
        _flapping(desk, "delayed", now=now)
        rebinds += [(now, where) for where in _rebinds(desk.on_tick(now=now, wall_ns=0))]
    times = [t for t, _where in rebinds]
    assert rebinds[0] == (0.0, "delayed")  # the first at once
    assert all(b - a >= REBIND_INTERVAL_S - 1e-9 for a, b in zip(times, times[1:], strict=False))
    assert len(rebinds) == 5


def test_rebinds_of_different_sockets_do_not_wait_for_each_other() -> None:
    desk = AccessDesk()
    desk.start((), secured=True)
    desk.on_events((), {"line", "delayed"}, now=0.0, wall_ns=0)
    _flapping(desk, "delayed", now=0.0)
    assert _rebinds(desk.on_tick(now=0.0, wall_ns=0)) == ["delayed"]
    _grant(desk, A, now=0.1)
    desk.on_events([("line", A), ("delayed", A)], (), now=0.1, wall_ns=1)
    _revoke(desk, A, now=0.1)
    assert _rebinds(desk.on_tick(now=0.1, wall_ns=0)) == ["line"]
    rebinds_at = [
        (round(t * 0.01, 2), where)
        for t in range(11, 400)
        for where in _rebinds(desk.on_tick(now=t * 0.01, wall_ns=0))
    ]
    assert rebinds_at == [(REBIND_INTERVAL_S, "delayed")]  # two seconds after its last rebind


def test_only_a_socket_that_let_the_key_in_and_cannot_tell_peers_apart_is_rebound() -> None:
    desk = AccessDesk()
    desk.start((), secured=True)
    desk.on_events((), {"delayed"}, now=0.0, wall_ns=0)  # the line tells its peers apart
    _grant(desk, A, B)
    desk.on_events([("line", A), ("delayed", B)], (), now=0.0, wall_ns=1)
    _revoke(desk, A)
    assert desk.rebinds_wanted == frozenset()  # the line cuts A off alone
    _revoke(desk, C)  # never granted, never let in
    assert desk.rebinds_wanted == frozenset()
    _revoke(desk, B)
    assert desk.rebinds_wanted == {"delayed"}
    assert _rebinds(desk.on_tick(now=0.0, wall_ns=0)) == ["delayed"]
    _grant(desk, B)
    _revoke(desk, B)  # bound afresh since: nobody holds it there
    assert desk.rebinds_wanted == frozenset()


def test_a_key_let_in_after_its_revocation_was_decided_is_cut_off_by_a_rebind() -> None:
    # ZAP let the key in on its thread; the event reaches the core after the revocation.
    desk = AccessDesk()
    desk.start((), secured=True)
    desk.on_events((), {"line"}, now=0.0, wall_ns=0)
    _grant(desk, A)
    _revoke(desk, A)
    assert desk.rebinds_wanted == frozenset()
    desk.on_events([("line", A)], (), now=0.0, wall_ns=1)
    assert desk.rebinds_wanted == {"line"}


def test_lost_admissions_rebind_every_blind_socket() -> None:
    desk = AccessDesk()
    desk.start((), secured=True)
    desk.on_events((), {"line", "replay"}, lost=True, now=0.0, wall_ns=0)
    assert desk.rebinds_wanted == {"line", "replay"}


def test_the_desk_decides_which_lines_are_sealed_and_holds_a_secured_multicast_line_until_its_key() -> None:
    desk = AccessDesk()
    desk.start((), secured=True, guarded=True, multicast=["line"])
    before = desk.seal
    assert before.mode("line") is SealMode.HOLD  # secured multicast: nothing plain, ever
    assert before.mode("conflated") is SealMode.PLAIN  # a tcp:// line: CURVE covers it
    key = SealKey(key_id=7, key=bytes(32))
    (published,) = desk.on_change(SealChange(key), now=0.0)
    assert isinstance(published, act.PublishSeal) and published.view.key == key
    assert {published.view.mode(where) for where in ("line", "conflated")} == {SealMode.SEAL}
    assert before.mode("line") is SealMode.HOLD  # the old view is frozen
    open_desk = AccessDesk()
    open_desk.start((), secured=False, guarded=False, multicast=["line"])
    assert open_desk.seal.mode("line") is SealMode.PLAIN  # no CURVE: plain until a key comes


def test_a_flood_of_changes_in_one_turn_is_published_once() -> None:
    desk = AccessDesk()
    desk.start((), secured=True)
    for i in range(100):
        assert (
            desk.on_change(AccessChange(((f"{i:040d}", FAR, False),), revoke=False, replace=False), now=0.0)
            == []
        )
    assert desk.next_deadline() == 0.0  # a view to publish: the loop comes round at once
    (view,) = _views(desk.on_tick(now=0.0, wall_ns=0))
    assert len(view) == 100 and desk.publish() == [] and desk.next_deadline() > 0.0
