"""What the status page shows, as plain data: a pure function of the registry, subscriptions and time.

Theory of operation
-------------------
The page's shell (:mod:`~feedha.admin_server.status_page`) hands a
:class:`StatusBoard` the registry's records, the subscriber counts, the
recent audit entries and the time whenever something changed (and once a
second, so rates and ages move); :meth:`StatusBoard.snapshot` returns one
JSON-ready mapping, the whole picture, which the browsers receive as a
server-sent event. Between snapshots the board remembers only what the
picture needs from the past, each bounded:

- per adapter, the last ``(time, next_msg_seq)`` it reported, to turn two
  reports into a line rate in messages per second;
- per channel, the active it last saw and its term: when either changes the
  board records a *failover* (from, to, term, when), newest first, at most
  :data:`MAX_FAILOVERS`.

Nothing here reads a clock or touches a socket.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from feedha.admin_server.records import AuditEntry
from feedha.admin_server.registry import AdapterRecord
from feedha.proto.registry import AdapterRole

MAX_FAILOVERS: Final = 50
MAX_ADAPTERS: Final = 10_000  # rate memory: adapters beyond it get no rate


@dataclass(frozen=True, slots=True)
class Failover:
    """A channel's active changed."""

    at: float
    channel: str
    old: str  # the previous active's id ("" when there was none)
    new: str
    term: int


class StatusBoard:
    """Builds the status page's snapshots (see the module docstring)."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[float, int, float]] = {}  # adapter id -> (updated_at, next_msg_seq, rate)
        self._actives: dict[str, tuple[str, int]] = {}  # channel -> (active id, term)
        self.failovers: deque[Failover] = deque(maxlen=MAX_FAILOVERS)

    def __repr__(self) -> str:
        return f"<StatusBoard [adapters={len(self._seen)}, failovers={len(self.failovers)}]>"

    def snapshot(
        self,
        records: Sequence[AdapterRecord],
        *,
        subscribers: Mapping[str, int],
        audit: Iterable[AuditEntry],
        channel_numbers: Mapping[str, int],
        now: float,
    ) -> dict[str, Any]:
        """The whole picture now.

        Args:
            records: every adapter record (up or down).
            subscribers: live subscriptions per channel name.
            audit: the newest audit entries, newest first.
            channel_numbers: configured channels and their numbers (shown even with no adapter).
            now: wall-clock seconds.

        Returns:
            ``{"at", "channels": [...], "failovers": [...], "audit": [...]}``, JSON-ready.
        """
        by_channel: dict[str, list[AdapterRecord]] = {name: [] for name in channel_numbers}
        for record in records:
            by_channel.setdefault(record.channel_name, []).append(record)
        channels = [
            self._channel(name, members, channel_numbers.get(name), subscribers.get(name, 0), now)
            for name, members in sorted(by_channel.items())
        ]
        return {
            "at": now,
            "channels": channels,
            "failovers": [
                {"at": f.at, "channel": f.channel, "from": f.old, "to": f.new, "term": f.term}
                for f in self.failovers
            ],
            "audit": [
                {
                    "at": entry.at,
                    "user": entry.user,
                    "action": entry.action,
                    "target": entry.target,
                    "detail": entry.detail,
                    "count": entry.count,
                }
                for entry in audit
            ],
        }

    def _channel(
        self, name: str, members: list[AdapterRecord], number: int | None, subscribers: int, now: float
    ) -> dict[str, Any]:
        actives = [r for r in members if r.is_up and r.status.role is AdapterRole.ACTIVE]
        active = max(actives, key=lambda r: r.status.term, default=None)
        self._note_active(name, active, now)
        adapters = [self._adapter(record, now) for record in sorted(members, key=lambda r: r.adapter_id)]
        return {
            "name": name,
            "number": number,
            "active": "" if active is None else active.adapter_id,
            "term": max((r.status.term for r in members), default=0),
            "subscribers": subscribers,
            "adapters": adapters,
            "rate": round(max((a["rate"] for a in adapters if a["role"] == "active"), default=0.0), 1),
        }

    def _note_active(self, channel: str, active: AdapterRecord | None, now: float) -> None:
        if active is None:
            return  # no active right now: the failover is recorded when the next one appears
        current = (active.adapter_id, active.status.term)
        before = self._actives.get(channel)
        if before is not None and before != current:
            self.failovers.appendleft(Failover(now, channel, before[0], current[0], current[1]))
        self._actives[channel] = current

    def _adapter(self, record: AdapterRecord, now: float) -> dict[str, Any]:
        status = record.status
        return {
            "id": record.adapter_id,
            "role": status.role.value if record.is_up else "down",
            "term": status.term,
            "sync": status.sync_status.value,
            "health": round(status.health_score, 1),
            "lag": status.lag,
            "next_msg_seq": status.next_msg_seq,
            "rate": round(self._rate(record), 1),
            "up": record.is_up,
            "line": record.registration.line_endpoint,
            "age": round(max(0.0, now - record.updated_at), 1),
        }

    def _rate(self, record: AdapterRecord) -> float:
        # Messages per second between the two latest reports this board saw.
        seen = self._seen.get(record.adapter_id)
        at, seq = record.updated_at, record.status.next_msg_seq
        if seen is not None and at <= seen[0]:
            return seen[2]  # no report since the last snapshot: the rate stands
        rate = 0.0 if seen is None or not record.is_up else max(0.0, (seq - seen[1]) / (at - seen[0]))
        if seen is not None or len(self._seen) < MAX_ADAPTERS:
            self._seen[record.adapter_id] = (at, seq, rate)
        return rate
