"""Route planning: delayed-only items never carry real-time lines; patterns are checked by containment;
a route is given only where the caller is entitled to every symbol its channel carries."""

from __future__ import annotations

from dataclasses import replace

import pytest

from feedha.admin_server.broker import MAX_PATTERNS, LineView, plan_routes, validate_items
from feedha.admin_server.config import ChannelConfig
from feedha.admin_server.errors import InvalidArgumentError, PermissionDeniedError
from feedha.admin_server.policy import Principal, parse_policy
from feedha.proto.registry import AdapterRole

POLICY = parse_policy(
    """\
groups:
  traders: {}
  narrow: {}
  delayed: {}
rules:
  - groups: [traders]
    symbols: ["[A-M]*"]
    mode: realtime
  - groups: [narrow]
    symbols: ["A?"]
    mode: realtime
  - groups: [traders, narrow, delayed]
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
NARROW = Principal(user="nora", groups=frozenset({"narrow"}))
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
    # Only the real-time route names the lines.
    assert _plan(TRADER, ["AB", "AAPL", "N*"]) == [
        ("EQ-A-M", False, ("AB", "AAPL"), 1),
        ("EQ-N-Z", True, ("N*",), 0),
    ]


def test_a_question_mark_grant_admits_a_star_request_only_through_the_delayed_grant() -> None:
    assert _plan(NARROW, ["A*"]) == [("EQ-A-M", True, ("A*",), 0)]
    with pytest.raises(PermissionDeniedError, match="A"):
        _plan(Principal(user="eve"), ["A?"])


def test_a_real_time_route_needs_the_whole_channel_and_the_refusal_names_what_it_would_expose() -> None:
    # Entitled to A? in real time, the whole channel delayed: the delayed route, said so.
    assert _plan(NARROW, ["A?"]) == [("EQ-A-M", True, ("A?",), 0)]
    bare = parse_policy("groups: {n: {}}\nrules:\n  - {groups: [n], symbols: ['A?'], mode: realtime}\n")
    with pytest.raises(PermissionDeniedError) as refused:  # and nothing delayed: the line carries all of A-M
        plan_routes(
            Principal(user="n", groups=frozenset({"n"})), ["A?"], policy=bare, channels=CHANNELS, lines=LINES
        )
    error = refused.value
    assert error.reason == "CHANNEL_NOT_ENTITLED"
    assert error.metadata["channel"] == "EQ-A-M" and error.metadata["exposes"] == "[A-M]*"
    assert (
        error.metadata["mode"] == "real-time" and error.metadata["example"] == "A"
    )  # A alone: A? wants two letters
    assert "carries [A-M]*" in str(error) and "A?" in str(error)
    # A pattern that starts with a wildcard reaches every channel: each must be covered.
    wide = Principal(user="w", groups=frozenset({"traders"}))
    with pytest.raises(PermissionDeniedError, match="EQ-A-M carries.*EQ-N-Z carries"):
        plan_routes(
            wide,
            ["*X"],
            policy=parse_policy(
                "groups: {traders: {}}\nrules:\n  - {groups: [traders], symbols: ['*X'], mode: realtime}\n"
            ),
            channels=CHANNELS,
            lines=LINES,
        )
    # Delayed routes are held to the same rule, with real-time and delayed grants together.
    only = parse_policy("groups: {d: {}}\nrules:\n  - {groups: [d], symbols: [AAPL], mode: delayed}\n")
    with pytest.raises(PermissionDeniedError, match="delayed"):
        plan_routes(
            Principal(user="d", groups=frozenset({"d"})),
            ["AAPL"],
            policy=only,
            channels=CHANNELS,
            lines=LINES,
        )


def test_delayed_routes_carry_the_delayed_lines_and_never_a_real_time_one() -> None:
    delayed_lines = {
        name: tuple(replace(view, line_endpoint=view.line_endpoint + "/delayed") for view in views)
        for name, views in LINES.items()
    }
    routes = plan_routes(
        TRADER, ["AB", "NVDA"], policy=POLICY, channels=CHANNELS, lines=LINES, delayed_lines=delayed_lines
    )
    by_mode = {route.delayed: route for route in routes}
    assert [line.line_endpoint for line in by_mode[False].lines] == [v.line_endpoint for v in LINES["EQ-A-M"]]
    assert [line.line_endpoint for line in by_mode[True].lines] == [
        v.line_endpoint for v in delayed_lines["EQ-N-Z"]
    ]
    assert all(line.line_endpoint.endswith("/delayed") for line in by_mode[True].lines)


def test_a_request_holds_at_most_max_patterns_and_the_refusal_names_the_limit() -> None:
    symbols = [f"S{i:03d}" for i in range(900)]  # symbols cost no glob walk: many are fine
    patterns = [f"{chr(0x41 + i)}*" for i in range(MAX_PATTERNS)]
    assert len(validate_items(symbols + patterns + patterns)) == 900 + MAX_PATTERNS  # duplicates count once
    one_more = [*patterns, "Z?"]
    with pytest.raises(InvalidArgumentError) as refused:
        validate_items(symbols + one_more)
    error = refused.value
    assert error.reason == "TOO_MANY_PATTERNS" and error.metadata == {"limit": str(MAX_PATTERNS)}
    assert [(v.field, v.reason) for v in error.violations] == [("symbols", "TOO_MANY_PATTERNS")]
    assert f"{MAX_PATTERNS + 1} > {MAX_PATTERNS}" in str(error)
    assert len(validate_items(["[AB", *patterns])) == MAX_PATTERNS + 1  # an unclosed class is a literal
