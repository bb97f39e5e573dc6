"""The adapter core's delayed side: its delayed line and its share of the group's purges, in one place.

:class:`AdapterCore` holds one :class:`DelayedSide` and calls it from its input
handlers (sync-bus messages, commands, ticks, recovery); the delayed line
(:mod:`adapter.core.delayed`) and the purge desk (:mod:`adapter.core.purging`)
do the deciding. Kept apart from the core's module so the core's own code only
routes. Pure: the time and the core's view come in with each call.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from feedha.adapter.core import syncbus
from feedha.adapter.core.actions import Action, PublishDelayed
from feedha.adapter.core.commands import Purge
from feedha.adapter.core.config import CoreConfig
from feedha.adapter.core.delayed import DelayedLine
from feedha.adapter.core.purge import PurgeEntry
from feedha.adapter.core.purging import PurgeContext, PurgeDesk
from feedha.adapter.core.records import RecordLike
from feedha.adapter.core.sync_types import Role, SyncState

__all__ = ["DelayedSide"]


class DelayedSide:
    """The delayed line (when configured) and the purge desk of one adapter core.

    Args:
        config: the core's configuration (``delay_s`` None: no delayed line, purges still replicate).
        now: the monotonic clock at start-up.
    """

    def __init__(self, config: CoreConfig, *, now: float) -> None:
        self._config = config
        self.desk = PurgeDesk(now=now, margin_s=config.purge_margin_s)
        self.line: DelayedLine | None = None
        if config.delay_s is not None:
            self.line = DelayedLine(
                channel=config.channel_number,
                adapter=config.adapter,
                delay_ns=round(config.delay_s * 1e9),
                margin_ns=round(config.purge_margin_s * 1e9),
                max_packet_bytes=config.max_packet_bytes,
                heartbeat_s=config.line_heartbeat_s,
            )

    def __repr__(self) -> str:
        return f"<DelayedSide [{self.line!r}, {self.desk!r}]>"

    def context(
        self, sync: SyncState, sender: syncbus.Sender, *, now: float, wall_ns: int, journal_last: int | None
    ) -> PurgeContext:
        """The desk's view of the core now."""
        timeout = self._config.sync.peer_timeout_s
        live = frozenset(
            number
            for number, peer in sync.peers.items()
            if now - peer.last_seen <= timeout and peer.role is not Role.FAILED
        )
        line = self.line
        return PurgeContext(
            now=now,
            wall_ns=wall_ns,
            sender=sender,
            role=sync.role,
            deciding=sync.deciding,
            active=sync.active,
            journal_last=journal_last,
            frontier=None if line is None else line.frontier(wall_ns=wall_ns),
            delayed_published=0 if line is None else line.published_seq,
            has_delayed=line is not None,
            live_peers=live,
        )

    # ---- inputs ------------------------------------------------------------------------

    def on_sync(
        self, msg: syncbus.SyncMessage, ctx: PurgeContext, out: list[Action], *, from_active: bool
    ) -> None:
        """The purge parts of a sync-bus message."""
        desk = self.desk
        if isinstance(msg, syncbus.StreamState) and from_active:
            desk.on_stream_state(msg, ctx, out)
        elif isinstance(msg, syncbus.Purges):
            desk.on_purges(msg, ctx, out)
        elif isinstance(msg, syncbus.PurgeAck):
            desk.on_ack(msg, ctx, out)
        elif isinstance(msg, syncbus.Health):
            desk.on_health(msg, ctx.now, out)

    def on_command(self, command: Purge, ctx: PurgeContext, out: list[Action]) -> dict[str, Any]:
        """A purge from an operator (see :meth:`PurgeDesk.on_command`)."""
        return self.desk.on_command(command, ctx, out)

    def has_work(self, role: Role) -> bool:
        """Whether :meth:`on_tick` would do anything: a delayed line, or the purge desk's business."""
        return self.line is not None or self.desk.has_work(role)

    def on_tick(self, ctx: PurgeContext, out: list[Action]) -> None:
        """Settle late replies; send what the delayed line owes now."""
        self.desk.on_tick(ctx, out)
        if self.line is None:
            return
        packets = self.line.publish(
            now=ctx.now,
            wall_ns=ctx.wall_ns,
            term=ctx.sender.term,
            book=self.desk.book,
            may_publish=self.desk.may_publish_delayed(ctx),
        )
        out.extend(PublishDelayed(packet) for packet in packets)

    def feed(self, records: Iterable[RecordLike], *, caught_up: bool) -> None:
        """Records the shell read from the journal for the delayed line."""
        if self.line is not None:
            self.line.feed(records, caught_up=caught_up)

    def start_at(self, msg_seq: int) -> None:
        """Start the delayed line at ``msg_seq`` (a restart: what was due before now is not sent again)."""
        if self.line is not None:
            self.line.start_at(msg_seq)

    def restore(self, purges: Iterable[PurgeEntry]) -> int:
        """The purges recovery found (checkpoint and journal)."""
        return self.desk.restore(purges)

    # ---- what the core asks ---------------------------------------------------------------

    def deadline(self, *, now: float, wall_ns: int) -> float | None:
        """When the delayed line next has something to send (monotonic clock), or ``None``."""
        line = self.line
        if line is None:
            return None
        due = line.next_due_ns()
        at = line.heartbeat_due()
        if due is not None:
            at = min(at, now + max(0.0, (due - wall_ns) / 1e9))
        return at

    def status(self) -> dict[str, Any]:
        """The delayed line's and the desk's counters."""
        line = self.line
        delayed: dict[str, Any] = {"enabled": line is not None}
        if line is not None:
            delayed.update(
                delay_s=line.delay_ns / 1e9,
                published_msg_seq=line.published_seq,
                read_msg_seq=line.read_seq,
                **line.counters.as_dict(),
            )
        return {"delayed": delayed, "purges": self.desk.status()}
