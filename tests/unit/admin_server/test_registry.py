from __future__ import annotations

from pathlib import Path

import pytest

from feedha.admin_server.broker import line_views, plan_routes
from feedha.admin_server.config import ChannelConfig, ServerConfig
from feedha.admin_server.errors import ConfigError, NotFoundError, PermissionDeniedError, PreconditionError
from feedha.admin_server.policy import Principal, parse_policy
from feedha.admin_server.registry import HANDOVER_WINDOW_S, EventKind, Registry
from feedha.proto.registry import (
    AdapterRegistration,
    AdapterRole,
    AdapterStatus,
    CommandKind,
    SyncStatus,
)


def reg(adapter_id: str, role: AdapterRole = AdapterRole.BACKUP, term: int = 1, channel: str = "EQ-A-M"):
    return AdapterRegistration(
        feed="EQUITIES",
        channel_name=channel,
        channel_number=1,
        adapter_id=adapter_id,
        line_endpoint=f"tcp://127.0.0.1:{6000 + len(adapter_id)}/{adapter_id}",
        role=role,
        term=term,
    )


def status(role: AdapterRole, term: int = 1, sync: SyncStatus = SyncStatus.IN_SYNC, health: float = 90.0):
    return AdapterStatus(role=role, term=term, next_msg_seq=10, sync_status=sync, health_score=health, lag=0)


@pytest.fixture
def registry() -> Registry:
    registry = Registry()
    registry.on_register(reg("a", AdapterRole.ACTIVE), now=1.0)
    registry.on_register(reg("b"), now=1.0)
    registry.on_register(reg("c"), now=1.0)
    return registry


def test_register_status_down_transitions(registry: Registry) -> None:
    assert [r.adapter_id for r in registry.lines("EQ-A-M")] == ["a", "b", "c"]
    assert registry.active("EQ-A-M").adapter_id == "a"  # type: ignore[union-attr]
    # health-only change: no event
    registry.on_status("b", status(AdapterRole.BACKUP, sync=SyncStatus.UNSPECIFIED, health=50), now=2.0)
    assert (
        registry.on_status("b", status(AdapterRole.BACKUP, sync=SyncStatus.UNSPECIFIED, health=40), now=2.0)
        == []
    )
    # sync change: event, routes unchanged
    (event,) = registry.on_status("b", status(AdapterRole.BACKUP, sync=SyncStatus.BEHIND), now=3.0)
    assert event.kind is EventKind.CHANGED and not event.routes_changed
    # role/term change: routes changed
    (event,) = registry.on_status("b", status(AdapterRole.ACTIVE, term=2), now=4.0)
    assert event.routes_changed
    assert registry.active("EQ-A-M").adapter_id == "b"  # type: ignore[union-attr]
    (event,) = registry.on_disconnect("a", now=5.0)
    assert event.kind is EventKind.DOWN and event.routes_changed
    assert registry.get("a").is_up is False  # kept, not deleted
    assert registry.on_disconnect("a", now=6.0) == []
    assert repr(registry) == "<Registry [adapters=3, up=2, channels=1]>"
    with pytest.raises(NotFoundError):
        registry.on_status("zzz", status(AdapterRole.BACKUP), now=1.0)


def test_restored_records_are_down(registry: Registry) -> None:
    restored = Registry(registry.records())
    assert all(not r.is_up for r in restored.records())
    assert restored.active("EQ-A-M") is None


def test_failover_picks_healthiest_in_sync_backup(registry: Registry) -> None:
    registry.on_status("a", status(AdapterRole.ACTIVE, term=3), now=2.0)
    registry.on_status("b", status(AdapterRole.BACKUP, term=3, sync=SyncStatus.BEHIND, health=99), now=2.0)
    registry.on_status("c", status(AdapterRole.BACKUP, term=3, health=70), now=2.0)
    demote, promote = registry.plan_failover("EQ-A-M", now=2.0, issued_by="ops")
    assert (demote.adapter_id, demote.command.kind, demote.command.term) == ("a", CommandKind.DEMOTE, 4)
    assert (promote.adapter_id, promote.command.kind, promote.command.term) == ("c", CommandKind.PROMOTE, 4)
    assert promote.command.issued_by == "ops"
    registry.cancel_failover("EQ-A-M")
    (_demote, promote) = registry.plan_failover("EQ-A-M", now=2.0, to="b", force=True)
    assert promote.adapter_id == "b" and promote.command.force


def test_a_failover_to_a_backup_not_in_sync_is_refused_before_the_active_is_demoted(
    registry: Registry,
) -> None:
    # The adapter would refuse the plain PROMOTE; the active, demoted first, would
    # leave the channel without an active until an election brought it back.
    registry.on_status("a", status(AdapterRole.ACTIVE, term=3), now=2.0)
    registry.on_status("b", status(AdapterRole.BACKUP, term=3, sync=SyncStatus.BEHIND, health=99), now=2.0)
    registry.on_status("c", status(AdapterRole.BACKUP, term=3, sync=SyncStatus.SYNCING), now=2.0)
    with pytest.raises(PreconditionError, match=r"'c' \(the best backup\) is not in sync \(syncing\)") as no:
        registry.plan_failover("EQ-A-M", now=2.0)
    assert no.value.reason == "NOT_IN_SYNC"
    with pytest.raises(PreconditionError, match=r"'b' is not in sync \(behind\)"):
        registry.plan_failover("EQ-A-M", now=2.0, to="b")
    # Nothing was planned: no handover window holds off the next attempt.
    registry.on_status("c", status(AdapterRole.BACKUP, term=3), now=2.5)
    demote, promote = registry.plan_failover("EQ-A-M", now=2.5)
    assert (demote.adapter_id, promote.adapter_id, promote.command.term) == ("a", "c", 4)
    assert not promote.command.force


def test_a_failover_not_reported_done_holds_off_the_next(registry: Registry) -> None:
    # Planned from the reports, a second failover before any report of the first
    # would repeat it (same target, same term): nothing would happen.
    registry.on_status("a", status(AdapterRole.ACTIVE, term=3), now=1.0)
    for backup in ("b", "c"):
        registry.on_status(backup, status(AdapterRole.BACKUP, term=3), now=1.0)
    registry.plan_failover("EQ-A-M", now=2.0)
    with pytest.raises(PreconditionError, match="to term 4 is not reported done") as refused:
        registry.plan_failover("EQ-A-M", now=2.5)
    assert refused.value.reason == "FAILOVER_IN_PROGRESS"
    registry.on_status("c", status(AdapterRole.ACTIVE, term=4), now=2.6)
    registry.on_status("a", status(AdapterRole.BACKUP, term=4), now=2.6)
    demote, promote = registry.plan_failover("EQ-A-M", now=2.7)
    assert (demote.adapter_id, promote.command.term) == ("c", 5)
    # A promote the target refused never reports its term: the hold ends with the window.
    with pytest.raises(PreconditionError, match="in a moment"):
        registry.plan_failover("EQ-A-M", now=2.7 + HANDOVER_WINDOW_S - 0.1)
    (_demote, promote) = registry.plan_failover("EQ-A-M", now=2.7 + HANDOVER_WINDOW_S)
    assert promote.command.term == 5


def test_failover_preconditions(registry: Registry) -> None:
    with pytest.raises(NotFoundError):
        registry.plan_failover("NOPE", now=2.0)
    with pytest.raises(PreconditionError, match="already the active"):
        registry.plan_failover("EQ-A-M", now=2.0, to="a")
    registry.on_disconnect("b", now=2.0)
    with pytest.raises(PreconditionError, match="is down"):
        registry.plan_failover("EQ-A-M", now=2.0, to="b")
    registry.on_disconnect("c", now=2.0)
    with pytest.raises(PreconditionError, match="no up backup"):
        registry.plan_failover("EQ-A-M", now=2.0)
    # no active at all: only a PROMOTE
    registry.on_register(reg("c"), now=3.0)
    registry.on_disconnect("a", now=3.0)
    registry.on_status("c", status(AdapterRole.BACKUP), now=3.0)
    (promote,) = registry.plan_failover("EQ-A-M", now=3.0)
    assert promote.adapter_id == "c" and promote.command.kind is CommandKind.PROMOTE


def test_fail_and_throttle(registry: Registry) -> None:
    (fail,) = registry.plan_fail("b", issued_by="ops")
    assert fail.command.kind is CommandKind.FAIL
    (throttle,) = registry.plan_throttle("b", 500.0)
    assert throttle.command.rate == 500.0
    with pytest.raises(ValueError, match="rate"):
        registry.plan_throttle("b", -1)
    registry.on_disconnect("b", now=2.0)
    with pytest.raises(PreconditionError):
        registry.plan_fail("b")


CHANNELS = (
    ChannelConfig(
        feed="EQUITIES", name="EQ-A-M", number=1, source_stream="A-M", first_letter="A", last_letter="M"
    ),
    ChannelConfig(
        feed="EQUITIES", name="EQ-N-Z", number=2, source_stream="N-Z", first_letter="N", last_letter="Z"
    ),
)
POLICY = parse_policy(
    """
groups: {traders: {}, public: {}}
rules:
  - {groups: [traders], symbols: ["[A-M]*", "N*"], mode: realtime}
  - {groups: [public], symbols: ["*"], mode: delayed}
"""
)


def test_brokering(registry: Registry) -> None:
    trader = Principal(user="t", groups=frozenset({"traders"}))
    lines = {"EQ-A-M": line_views(registry.lines("EQ-A-M"))}
    routes = plan_routes(trader, ["AAPL", "MSFT", "AAPL"], policy=POLICY, channels=CHANNELS, lines=lines)
    assert [(r.channel.name, r.symbols, r.delayed) for r in routes] == [("EQ-A-M", ("AAPL", "MSFT"), False)]
    assert [line.adapter_id for line in routes[0].lines] == ["a", "b", "c"]
    assert routes[0].lines[0].role is AdapterRole.ACTIVE
    with pytest.raises(PermissionDeniedError, match="channel EQ-N-Z carries"):  # N* is not all of N-Z
        plan_routes(trader, ["NVDA"], policy=POLICY, channels=CHANNELS, lines=lines)
    with pytest.raises(PermissionDeniedError) as info:
        plan_routes(trader, ["AAPL", "ZZZ", "*"], policy=POLICY, channels=CHANNELS, lines=lines)
    assert info.value.symbols == ("ZZZ", "*")
    assert "ZZZ" in str(info.value)
    public = Principal(user="p", groups=frozenset({"public"}))
    routes = plan_routes(public, ["*"], policy=POLICY, channels=CHANNELS, lines=lines)
    assert [(r.channel.name, r.delayed) for r in routes] == [("EQ-A-M", True), ("EQ-N-Z", True)]
    with pytest.raises(ValueError, match="invalid symbol"):
        plan_routes(trader, ["A APL"], policy=POLICY, channels=CHANNELS, lines=lines)
    with pytest.raises(NotFoundError, match="no channel carries"):
        plan_routes(public, ["9XYZ"], policy=POLICY, channels=CHANNELS, lines=lines)


def test_config_refuses_plaintext_off_loopback() -> None:
    with pytest.raises(ConfigError, match="refusing plaintext"):
        ServerConfig(host="0.0.0.0")
    assert ServerConfig(host="0.0.0.0", insecure=True).insecure
    assert ServerConfig(host="::1").host == "::1"


def test_config_refuses_adapters_without_login_off_loopback(tmp_path: Path) -> None:
    cert, key = tmp_path / "admin.crt", tmp_path / "admin.key"  # TLS on: only adapter_auth is at fault
    with pytest.raises(
        ConfigError, match="refusing adapter_auth: false on non-loopback address '10.1.2.3'"
    ) as info:
        ServerConfig(host="10.1.2.3", tls_cert=cert, tls_key=key, adapter_auth=False)
    assert "--insecure" in str(info.value) and "adapter_auth: true" in str(info.value)
    assert not ServerConfig(
        host="10.1.2.3", tls_cert=cert, tls_key=key, adapter_auth=False, insecure=True
    ).adapter_auth
    assert not ServerConfig(host="127.0.0.1", adapter_auth=False).adapter_auth  # the loopback demo
    assert not ServerConfig(host="localhost", adapter_auth=False).adapter_auth
