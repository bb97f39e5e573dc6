"""What the admin server has done since start: one table per kind of outcome, read by the metrics.

Each table is counted by the one owner of what it counts (docs/architecture.md,
"State and its owners"); :class:`~admin_server.metrics.AdminMetrics` reads them
at scrape time, on the same event loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["HubCounters"]


@dataclass(slots=True)
class HubCounters:
    """What the server has done since start (read by the metrics collector)."""

    logins: dict[str, int] = field(default_factory=dict)  # by result: ok, failed, throttled, busy
    refused: dict[str, int] = field(default_factory=dict)  # requests over a quota, by reason
    expired_subscriptions: int = 0
    audit_pruned: int = 0
    routes_granted: int = 0
    policy_reloads: dict[str, int] = field(default_factory=dict)  # by result: ok, rejected
    registry_changes: dict[str, int] = field(default_factory=dict)  # by kind: registered, changed, down
    commands: dict[str, int] = field(default_factory=dict)  # by action: failover, fail, throttle, purge
    purges: dict[str, int] = field(default_factory=dict)  # by result: accepted, or the refusal's reason
    denied: dict[str, int] = field(default_factory=dict)  # operator calls refused for the role, by method

    def count(self, table: dict[str, int], key: str, by: int = 1) -> None:
        table[key] = table.get(key, 0) + by
