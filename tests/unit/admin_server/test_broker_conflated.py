"""Conflated entitlements: a conflated-only user gets conflated routes (conflated lines, no replay),
never a real-time or delayed line; its key is granted conflated-only on the data plane."""

from __future__ import annotations

from dataclasses import replace

import pytest

from feedha.admin_server import access
from feedha.admin_server.broker import LineView, line_views, plan_routes
from feedha.admin_server.errors import PermissionDeniedError, PolicyError
from feedha.admin_server.policy import Mode, Principal, parse_policy
from feedha.admin_server.registry import Registry
from feedha.proto.registry import AccessGrant, AdapterRegistration, AdapterRole
from tests.unit.admin_server.test_broker import CHANNELS, LINES

POLICY = parse_policy(
    """\
groups:
  screens: {}
  traders: {}
rules:
  - groups: [screens]
    symbols: ["*"]
    mode: conflated
  - groups: [traders]
    symbols: ["[A-M]*"]
    mode: realtime
  - groups: [traders]
    symbols: ["[N-Z]*"]
    mode: conflated
"""
)
SCREEN = Principal(user="sam", groups=frozenset({"screens"}))
TRADER = Principal(user="tess", groups=frozenset({"traders"}))
CONFLATED_LINES = {
    name: tuple(replace(v, line_endpoint=v.line_endpoint + "/conflated", replay_endpoint="") for v in views)
    for name, views in LINES.items()
}


def _routes(principal: Principal, items: list[str]):  # type: ignore[no-untyped-def]
    return plan_routes(
        principal, items, policy=POLICY, channels=CHANNELS, lines=LINES, conflated_lines=CONFLATED_LINES
    )


def test_the_policy_knows_the_conflated_mode() -> None:
    assert POLICY.entitlement(SCREEN, "AAPL") is Mode.CONFLATED
    assert POLICY.entitlement(TRADER, "AAPL") is Mode.REALTIME
    assert POLICY.entitlement(TRADER, "[A-Z]*") is Mode.CONFLATED  # real time and conflated together
    with pytest.raises(PolicyError, match="'realtime', 'delayed' or 'conflated'"):
        parse_policy("groups: {g: {}}\nrules:\n  - {groups: [g], symbols: ['*'], mode: sampled}\n")


def test_a_conflated_only_user_gets_conflated_lines_only() -> None:
    routes = _routes(SCREEN, ["AAPL", "N*"])
    assert [(r.channel.name, r.conflated, r.delayed, r.symbols) for r in routes] == [
        ("EQ-A-M", True, False, ("AAPL",)),
        ("EQ-N-Z", True, False, ("N*",)),
    ]
    for route in routes:
        assert all(
            line.line_endpoint.endswith("/conflated") and not line.replay_endpoint for line in route.lines
        )
        assert route.limit == access.CONFLATED_ONLY


def test_a_mixed_user_reads_real_time_where_entitled_and_conflated_elsewhere() -> None:
    routes = _routes(TRADER, ["AB", "NVDA"])
    assert [(r.channel.name, r.mode) for r in routes] == [
        ("EQ-A-M", Mode.REALTIME),
        ("EQ-N-Z", Mode.CONFLATED),
    ]
    # A pattern across both channels on the real-time channel's letters but reaching N-Z: conflated.
    only = parse_policy("groups: {g: {}}\nrules:\n  - {groups: [g], symbols: [AAPL], mode: conflated}\n")
    with pytest.raises(PermissionDeniedError, match="conflated"):  # the line carries all of A-M
        plan_routes(Principal(user="x", groups=frozenset({"g"})), ["AAPL"], policy=only, channels=CHANNELS,
                    lines=LINES, conflated_lines=CONFLATED_LINES)  # fmt: skip


def test_real_time_lines_name_their_conflated_line_and_conflated_views_skip_adapters_without_one() -> None:
    registry = Registry()
    for adapter_id, conflated in (("a", "tcp://127.0.0.1:9001"), ("b", "")):
        registration = AdapterRegistration(
            feed="EQ",
            channel_name="EQ-A-M",
            channel_number=1,
            adapter_id=adapter_id,
            line_endpoint=f"tcp://127.0.0.1:900{ord(adapter_id)}",
            replay_endpoint="tcp://127.0.0.1:9100",
            role=AdapterRole.BACKUP,
            conflated_line_endpoint=conflated,
        )
        registry.on_register(registration, now=1.0)
    real_time = line_views(registry.lines("EQ-A-M"))
    assert [v.conflated_line_endpoint for v in real_time] == ["tcp://127.0.0.1:9001", ""]
    (conflated,) = line_views(registry.lines("EQ-A-M"), conflated=True)
    assert (conflated.line_endpoint, conflated.replay_endpoint) == ("tcp://127.0.0.1:9001", "")


def test_grants_merge_limits_and_carry_them_to_the_adapters() -> None:
    key = "k" * 40
    assert access.merge_limit(None, access.CONFLATED_ONLY) == access.CONFLATED_ONLY
    assert access.merge_limit(access.DELAYED_ONLY, access.CONFLATED_ONLY) == 3  # both lines
    assert access.merge_limit(access.CONFLATED_ONLY, 0) == 0  # real time somewhere: everything
    conflated_only = access.Grant(10, access.CONFLATED_ONLY)
    (command,) = access.plan_commands(None, {key: conflated_only}, reason="t")
    assert command.grants == (AccessGrant(key, 10, delayed_only=False, conflated_only=True),)
    (changed,) = access.plan_commands({key: conflated_only}, {key: access.Grant(10, 3)}, reason="t")
    assert changed.grants == (AccessGrant(key, 10, delayed_only=True, conflated_only=True),)
    line = LineView(adapter_id="a", line_endpoint="x", replay_endpoint="", role=AdapterRole.ACTIVE, term=1,
                    is_up=True)  # fmt: skip
    assert line.conflated_line_endpoint == ""
