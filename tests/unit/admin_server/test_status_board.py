"""The status page's pure core: snapshots, line rates, failover history; and the one-time login links."""

from __future__ import annotations

import json

import pytest

from feedha.admin_server.records import AuditEntry
from feedha.admin_server.registry import Registry
from feedha.admin_server.status_board import MAX_FAILOVERS, StatusBoard
from feedha.admin_server.status_page import new_login_link
from feedha.admin_server.store import Store
from feedha.proto.registry import AdapterRegistration, AdapterRole, AdapterStatus, SyncStatus


def _registry() -> Registry:
    registry = Registry()
    for n, role in ((1, AdapterRole.ACTIVE), (2, AdapterRole.BACKUP)):
        registration = AdapterRegistration(
            feed="EQUITIES",
            channel_name="EQ-A-M",
            channel_number=1,
            adapter_id=f"EQ-A-M.{n}",
            line_endpoint=f"tcp://127.0.0.1:600{n}",
            role=role,
            term=1,
        )
        registry.on_register(registration, now=0.0)
    return registry


def _report(registry: Registry, adapter: int, role: AdapterRole, term: int, seq: int, now: float) -> None:
    status = AdapterStatus(
        role=role, term=term, next_msg_seq=seq, sync_status=SyncStatus.IN_SYNC, health_score=90.0, lag=3
    )
    registry.on_status(f"EQ-A-M.{adapter}", status, now=now)


def _snapshot(board: StatusBoard, registry: Registry, now: float, **kwargs):
    defaults = {"subscribers": {"EQ-A-M": 2}, "audit": [], "channel_numbers": {"EQ-A-M": 1, "EQ-N-Z": 2}}
    return board.snapshot(registry.records(), now=now, **{**defaults, **kwargs})


def test_snapshot_shows_channels_roles_rates_and_is_json():
    registry, board = _registry(), StatusBoard()
    _report(registry, 1, AdapterRole.ACTIVE, 1, 100, now=1.0)
    _report(registry, 2, AdapterRole.BACKUP, 1, 100, now=1.0)
    _snapshot(board, registry, 1.0)
    _report(registry, 1, AdapterRole.ACTIVE, 1, 600, now=2.0)  # 500 msg/s
    _report(registry, 2, AdapterRole.BACKUP, 1, 350, now=1.5)
    audit = [AuditEntry(at=1.5, user="ops", action="failover", target="EQ-A-M.2", detail="x", count=1)]
    snap = _snapshot(board, registry, 2.0, audit=audit)
    json.dumps(snap)  # what the browser gets
    channel, empty = snap["channels"]
    assert empty == {
        "name": "EQ-N-Z",
        "number": 2,
        "active": "",
        "term": 0,
        "subscribers": 0,
        "adapters": [],
        "rate": 0.0,
    }
    assert channel["active"] == "EQ-A-M.1" and channel["subscribers"] == 2 and channel["rate"] == 500.0
    roles = {a["id"]: (a["role"], a["rate"], a["lag"]) for a in channel["adapters"]}
    assert roles == {"EQ-A-M.1": ("active", 500.0, 3), "EQ-A-M.2": ("backup", 500.0, 3)}
    assert snap["audit"][0]["action"] == "failover"
    # No new report: the rate stands; a down adapter shows as down with no rate.
    registry.on_disconnect("EQ-A-M.2", now=2.5)
    channel = _snapshot(board, registry, 3.0)["channels"][0]
    assert [(a["role"], a["rate"], a["up"]) for a in channel["adapters"]] == [
        ("active", 500.0, True),
        ("down", 0.0, False),
    ]


def test_a_promotion_is_recorded_once_newest_first_and_bounded():
    registry, board = _registry(), StatusBoard()
    _report(registry, 1, AdapterRole.ACTIVE, 1, 10, now=1.0)
    assert _snapshot(board, registry, 1.0)["failovers"] == []
    _report(registry, 1, AdapterRole.BACKUP, 2, 11, now=2.0)  # demoted: for a moment no active
    assert _snapshot(board, registry, 2.0)["failovers"] == []
    _report(registry, 2, AdapterRole.ACTIVE, 2, 11, now=2.1)
    first = _snapshot(board, registry, 2.1)["failovers"]
    assert first == [{"at": 2.1, "channel": "EQ-A-M", "from": "EQ-A-M.1", "to": "EQ-A-M.2", "term": 2}]
    assert _snapshot(board, registry, 2.2)["failovers"] == first  # recorded once
    for term in range(3, 3 + MAX_FAILOVERS + 5):
        adapter = 1 if term % 2 else 2
        _report(registry, 3 - adapter, AdapterRole.BACKUP, term, 11, now=term)
        _report(registry, adapter, AdapterRole.ACTIVE, term, 11, now=term)
        _snapshot(board, registry, float(term))
    history = _snapshot(board, registry, 100.0)["failovers"]
    assert len(history) == MAX_FAILOVERS and history[0]["term"] == 2 + MAX_FAILOVERS + 5
    assert repr(board) == f"<StatusBoard [adapters=2, failovers={MAX_FAILOVERS}]>"


def test_login_links_are_one_time_and_expire():
    store = Store(":memory:")
    token = new_login_link(store, "ops", ttl_s=60, now=100.0)
    rows = store._db.execute("SELECT token_hash FROM login_links").fetchall()
    assert len(rows) == 1 and token not in rows[0][0]  # only its hash is stored
    from feedha.admin_server.status_page import _digest

    assert store.take_login_link(_digest(token), now=110.0) == "ops"
    assert store.take_login_link(_digest(token), now=110.0) is None  # used
    late = new_login_link(store, "ops", ttl_s=60, now=200.0)
    assert store.take_login_link(_digest(late), now=261.0) is None  # expired
    assert store.take_login_link(_digest("guess"), now=200.0) is None
    with pytest.raises(ValueError, match="ttl_s"):
        new_login_link(store, "ops", ttl_s=0, now=1.0)
    audit = [e.action for e in store.audit_log()]
    assert audit.count("login-link") == 2


def test_outstanding_login_links_are_bounded():
    store = Store(":memory:")
    for i in range(150):
        new_login_link(store, "ops", ttl_s=600, now=float(i))
    assert store._db.execute("SELECT COUNT(*) FROM login_links").fetchone()[0] == 100
