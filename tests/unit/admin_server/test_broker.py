"""Route planning: delayed-only items never carry real-time lines; patterns are checked by containment."""

from __future__ import annotations

from dataclasses import replace

import pytest

from feedha.admin_server.broker import LineView, plan_routes
from feedha.admin_server.config import ChannelConfig
from feedha.admin_server.errors import PermissionDeniedError
from feedha.admin_server.policy import Principal, parse_policy
from feedha.proto.registry import AdapterRole

POLICY = parse_policy(
    """\
groups:
  traders: {}
  delayed: {}
rules:
  - groups: [traders]
    symbols: ["A?", "N*"]
    mode: realtime
  - groups: [traders, delayed]
    symbols: ["*"]
    mode: delayed
"""
)
CHANNELS = (
    ChannelConfig(feed="EQ", name="EQ-A-M", number=1, source_stream="A-M", first_letter="A", last_letter="M"),
    ChannelConfig(feed="EQ", name="EQ-N-Z", number=2, source_stream="N-Z", first_letter="N", last_letter="Z"),
)
LINES: dict[str, tuple[LineView, ...]] = {
    name: (
        LineView(
            adapter_id=f"{name}-a",
            line_endpoint=f"tcp://127.0.0.1:{7000 + i}",
            replay_endpoint=f"tcp://127.0.0.1:{8000 + i}",
            role=AdapterRole.ACTIVE,
            term=1,
            is_up=True,
        ),
    )
    for i, name in enumerate(("EQ-A-M", "EQ-N-Z"))
}
TRADER = Principal(user="alice", groups=frozenset({"traders"}))
DELAYED = Principal(user="dora", groups=frozenset({"delayed"}))


def _plan(principal: Principal, items: list[str]) -> list[tuple[str, bool, tuple[str, ...], int]]:
    routes = plan_routes(principal, items, policy=POLICY, channels=CHANNELS, lines=LINES)
    return [(r.channel.name, r.delayed, r.symbols, len(r.lines)) for r in routes]


def test_delayed_routes_carry_no_lines_and_no_replay_endpoints() -> None:
    assert _plan(DELAYED, ["AAPL", "NVDA"]) == [
        ("EQ-A-M", True, ("AAPL",), 0),
        ("EQ-N-Z", True, ("NVDA",), 0),
    ]
    assert _plan(DELAYED, ["*"]) == [("EQ-A-M", True, ("*",), 0), ("EQ-N-Z", True, ("*",), 0)]
    # One channel, both modes: only the real-time route names the lines.
    assert _plan(TRADER, ["AB", "AAPL", "N*"]) == [
        ("EQ-A-M", False, ("AB",), 1),
        ("EQ-A-M", True, ("AAPL",), 0),
        ("EQ-N-Z", False, ("N*",), 1),
    ]


def test_a_question_mark_grant_admits_a_star_request_only_through_the_delayed_grant() -> None:
    assert _plan(TRADER, ["A*"]) == [("EQ-A-M", True, ("A*",), 0)]
    assert _plan(TRADER, ["A?"]) == [("EQ-A-M", False, ("A?",), 1)]
    with pytest.raises(PermissionDeniedError, match="A"):
        _plan(Principal(user="eve"), ["A?"])


def test_delayed_routes_carry_the_delayed_lines_and_never_a_real_time_one() -> None:
    delayed_lines = {
        name: tuple(replace(view, line_endpoint=view.line_endpoint + "/delayed") for view in views)
        for name, views in LINES.items()
    }
    routes = plan_routes(
        TRADER, ["AB", "AAPL"], policy=POLICY, channels=CHANNELS, lines=LINES, delayed_lines=delayed_lines
    )
    by_mode = {route.delayed: route for route in routes}
    assert [line.line_endpoint for line in by_mode[False].lines] == [v.line_endpoint for v in LINES["EQ-A-M"]]
    assert [line.line_endpoint for line in by_mode[True].lines] == [
        v.line_endpoint for v in delayed_lines["EQ-A-M"]
    ]
    assert all(line.line_endpoint.endswith("/delayed") for line in by_mode[True].lines)
