"""What this adapter says on the sync bus about itself: its stream state, its snapshot, its health.

:class:`Reporter` builds the messages from the parts (:class:`~adapter.core.parts.CoreParts`)
and the sender the sync rules' state makes; it owns one thing, the stream
state's serialized parts for the source pump's heartbeats
(:meth:`Reporter.pump_report`), built again only when a field in them moved.
"""

from __future__ import annotations

from feedha.adapter.core import pumping, syncbus
from feedha.adapter.core.health import HealthSample
from feedha.adapter.core.parts import CoreParts
from feedha.adapter.core.sync_types import Role, SyncState

__all__ = ["Reporter"]


class Reporter:
    """This adapter's sync-bus messages about itself, built from its parts.

    Args:
        parts: the core's parts.
    """

    def __init__(self, parts: CoreParts) -> None:
        self._parts = parts
        # pump_report's parts, with the fields they were serialized from
        self._report_parts: tuple[tuple[int, ...], syncbus.ReportParts] | None = None

    def stream_state(self, sender: syncbus.Sender) -> syncbus.StreamState:
        """This adapter's stream state as it reports it (the active's heartbeat)."""
        parts = self._parts
        seq, active = parts.sequencer, sender.role is Role.ACTIVE
        proposed, committed_k = parts.conflated.report_fields() if active else ((), 0)
        return syncbus.StreamState(
            sender,
            parts.config.source_stream_number,
            seq.next_msg_seq,
            seq.next_source_seq,
            seq.last_recorded_source_seq,
            seq.last_msg_seq,
            seq.last_digest,
            **parts.sessions.report_fields(),
            purge_seq=parts.delayed.desk.book.highest_id,
            conflate_proposed=proposed,
            conflate_committed_k=committed_k,
            table_budget=parts.state.table_budget if parts.config.table_budget else 0,
        )

    def pump_report(self, sync: SyncState, sender: syncbus.Sender) -> pumping.PumpReport | None:
        """The active's heartbeat reports for the source pump (``None``: a conflation boundary is proposed).

        The caller asks only as an active past its decision (``sender`` is its own).
        """
        parts = self._parts
        proposed, committed_k = parts.conflated.report_fields()
        if proposed:
            return None
        # The parts are serialized again only when a field in them moved (a term, a session, a purge).
        fixed = (
            sync.term,
            *parts.sessions.report_fields().values(),
            parts.delayed.desk.book.highest_id,
            committed_k,
        )
        if self._report_parts is None or self._report_parts[0] != fixed:
            serialized = syncbus.report_parts(self.stream_state(sender), channel=parts.config.channel_number)
            self._report_parts = (fixed, serialized)
        seq = parts.sequencer
        return pumping.PumpReport(
            due=sync.next_heartbeat_at,
            every=parts.config.sync.heartbeat_interval_s,
            parts=self._report_parts[1],
            next_source_seq=seq.next_source_seq,
            last_source_seq=seq.last_recorded_source_seq,
            last_msg_seq=seq.last_msg_seq,
            digest=seq.last_digest,
        )

    def snapshot(self, sender: syncbus.Sender) -> syncbus.Snapshot:
        """The active's snapshot of its conversion state and session, at its last recorded position."""
        parts = self._parts
        seq = parts.sequencer
        at, stream = seq.last_recorded_source_seq, parts.config.source_stream_number
        symbols, session = parts.state.snapshot(), parts.sessions.snapshot_fields()
        return syncbus.Snapshot(sender, stream, at, seq.next_msg_seq, symbols, **session)

    def health(self, sender: syncbus.Sender, sync: SyncState, sample: HealthSample) -> syncbus.Health:
        """This adapter's health report, from the sample its score was measured from."""
        parts = self._parts
        line, published = parts.delayed.line, parts.emitter.published_msg_seq
        return syncbus.Health(
            sender,
            sync.health_score,
            sample.available_memory_mb,
            sample.cpu_percent,
            sample.error_count,
            sample.message_rate,
            sample.lag,
            sync.is_in_sync,
            len(sync.desyncs),
            published,
            parts.delayed.desk.book.known_through,
            0 if line is None else line.published_seq,
        )
