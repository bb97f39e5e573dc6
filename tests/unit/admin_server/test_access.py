"""Data-plane access reconciliation: desired grants from subscriptions, and the commands that reach them."""

from __future__ import annotations

from feedha.admin_server.access import Grant, desired_grants, owner_tag, plan_commands
from feedha.admin_server.errors import PermissionDeniedError
from feedha.admin_server.records import SubscriptionRecord
from feedha.proto.registry import AccessGrant, CommandKind

A, B = "a" * 40, "b" * 40


def _sub(sid: str, user: str, key: str, valid_until: float) -> SubscriptionRecord:
    return SubscriptionRecord(
        subscription_id=sid,
        user=user,
        symbols=("*",),
        created_at=0,
        updated_at=0,
        curve_key=key,
        valid_until=valid_until,
    )


def _channels(sub: SubscriptionRecord) -> dict[str, bool]:
    if sub.user == "mallory":
        raise PermissionDeniedError("no longer entitled")
    if sub.user == "dave":  # delayed data only, on EQ2
        return {"EQ2": True}
    return {"EQ1": False, "EQ2": False} if sub.user == "alice" else {"EQ1": False}


def test_grants_follow_subscriptions_entitlements_and_expiry() -> None:
    subs = [
        _sub("1", "alice", A, 100.0),
        _sub("2", "bob", B, 50.0),
        _sub("3", "carol", "", 100.0),  # no key: plain lines only
        _sub("4", "mallory", "c" * 40, 100.0),  # the policy took it away
    ]
    grants = desired_grants(subs, now=10.0, channels_for=_channels)
    s100, s50 = 100 * 10**9, 50 * 10**9
    alice, bob = frozenset({"alice"}), frozenset({"bob"})
    assert grants == {
        "EQ1": {A: Grant(s100, False, alice), B: Grant(s50, False, bob)},
        "EQ2": {A: Grant(s100, False, alice)},
    }
    later = desired_grants(subs, now=60.0, channels_for=_channels)
    assert later == {"EQ1": {A: Grant(s100, False, alice)}, "EQ2": {A: Grant(s100, False, alice)}}


def test_a_key_reaching_a_channel_by_delayed_routes_only_is_granted_delayed_only() -> None:
    D = "d" * 40
    subs = [_sub("1", "alice", A, 100.0), _sub("5", "dave", D, 100.0), _sub("6", "dave", A, 100.0)]
    grants = desired_grants(subs, now=10.0, channels_for=_channels)
    # dave's own key: delayed only; a key that also reaches EQ2 in real time keeps real time
    both, dave = frozenset({"alice", "dave"}), frozenset({"dave"})
    assert grants["EQ2"] == {A: Grant(100 * 10**9, False, both), D: Grant(100 * 10**9, True, dave)}
    (command,) = plan_commands(None, grants["EQ2"], reason="r")
    assert AccessGrant(D, 100 * 10**9, delayed_only=True, owner="dave") in command.grants
    assert AccessGrant(A, 100 * 10**9, owner="alice\ndave") in command.grants  # a key two users carry
    # a key turning delayed-only is a change the adapter must hear of
    (changed,) = plan_commands({D: Grant(100 * 10**9, False)}, {D: Grant(100 * 10**9, True)}, reason="r")
    assert changed.kind is CommandKind.GRANT and changed.grants[0].delayed_only


def test_commands_bring_an_adapter_from_what_it_was_told_to_what_is_wanted() -> None:
    first = plan_commands(None, {A: Grant(5, False)}, reason="r")
    assert len(first) == 1 and first[0].kind is CommandKind.GRANT and first[0].replace_grants
    assert first[0].grants == (AccessGrant(A, 5),)
    assert plan_commands({A: Grant(5, False)}, {A: Grant(5, False)}, reason="r") == []
    extended, gone = plan_commands({A: Grant(5, False), B: Grant(5, False)}, {A: Grant(9, False)}, reason="r")
    assert extended.kind is CommandKind.GRANT and extended.grants == (AccessGrant(A, 9),)
    assert gone.kind is CommandKind.REVOKE and gone.grants == (AccessGrant(B, 0),)


def test_a_key_s_owner_is_told_to_the_adapters_and_a_change_of_owners_is_a_change() -> None:
    alice = frozenset({"alice"})
    (command,) = plan_commands(None, {A: Grant(5, 0, alice)}, reason="r")
    assert command.grants == (AccessGrant(A, 5, owner="alice"),)
    (changed,) = plan_commands({A: Grant(5, 0, alice)}, {A: Grant(5, 0, alice | {"bob"})}, reason="r")
    assert changed.grants == (AccessGrant(A, 5, owner="alice\nbob"),)
    # Names that would not fit the field go as a digest: still one tag per set of owners.
    crowd = frozenset(f"user-{i:04d}" for i in range(200))
    tag = owner_tag(crowd)
    assert tag.startswith("sha256:") and len(tag) == 7 + 64 and tag == owner_tag(frozenset(crowd))
    assert owner_tag(crowd - {"user-0000"}) != tag
