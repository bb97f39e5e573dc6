"""Data-plane access reconciliation: desired grants from subscriptions, and the commands that reach them."""

from __future__ import annotations

from feedha.admin_server.access import desired_grants, plan_commands
from feedha.admin_server.errors import PermissionDeniedError
from feedha.admin_server.store import SubscriptionRecord
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


def _channels(sub: SubscriptionRecord) -> list[str]:
    if sub.user == "mallory":
        raise PermissionDeniedError("no longer entitled")
    return ["EQ1", "EQ2"] if sub.user == "alice" else ["EQ1"]


def test_grants_follow_subscriptions_entitlements_and_expiry() -> None:
    subs = [
        _sub("1", "alice", A, 100.0),
        _sub("2", "bob", B, 50.0),
        _sub("3", "carol", "", 100.0),  # no key: plain lines only
        _sub("4", "mallory", "c" * 40, 100.0),  # the policy took it away
    ]
    grants = desired_grants(subs, now=10.0, channels_for=_channels)
    assert grants == {"EQ1": {A: 100 * 10**9, B: 50 * 10**9}, "EQ2": {A: 100 * 10**9}}
    later = desired_grants(subs, now=60.0, channels_for=_channels)
    assert later == {"EQ1": {A: 100 * 10**9}, "EQ2": {A: 100 * 10**9}}


def test_commands_bring_an_adapter_from_what_it_was_told_to_what_is_wanted() -> None:
    first = plan_commands(None, {A: 5}, reason="r")
    assert len(first) == 1 and first[0].kind is CommandKind.GRANT and first[0].replace_grants
    assert first[0].grants == (AccessGrant(A, 5),)
    assert plan_commands({A: 5}, {A: 5}, reason="r") == []
    extended, gone = plan_commands({A: 5, B: 5}, {A: 9}, reason="r")
    assert extended.kind is CommandKind.GRANT and extended.grants == (AccessGrant(A, 9),)
    assert gone.kind is CommandKind.REVOKE and gone.grants == (AccessGrant(B, 0),)
