"""The active's snapshot, adopted by a backup: at once from its ring, or when the source reaches it.

A backup whose conversion state differs from the active's (rule 4) adopts the
active's snapshot, taken at a source position. :class:`Adoption` owns the
snapshot waiting for the source to reach that position, and restores the
conversion state from it: now, replaying what the ring holds past the
position (:meth:`Adoption.on_snapshot`), or exactly there when the source path
gets to it (:meth:`Adoption.due`, :meth:`Adoption.adopt`). A snapshot taken
right at a session boundary holds the next session's state: it is adopted
after the boundary's last message. Pure.
"""

from __future__ import annotations

import logging

from feedha.adapter.conversion.engine import ConversionEngine
from feedha.adapter.core import syncbus
from feedha.adapter.core.accounting import PipelineCounters
from feedha.adapter.core.emitter import LineEmitter
from feedha.adapter.core.ring import SourceRing
from feedha.adapter.core.sequencer import Sequencer
from feedha.adapter.errors import ConversionError

logger = logging.getLogger(__name__)

__all__ = ["Adoption"]


class Adoption:
    """The active's snapshot, pending or adopted now.

    Args:
        engine: the conversion engine (its state is restored; it parses what the ring replays).
        sequencer: the numbering (its digests are restated).
        emitter: the line (what waits at its gate carries the state the snapshot replaces).
        ring: the recent source frames.
        counters: the source path's counters.
    """

    def __init__(
        self,
        engine: ConversionEngine,
        sequencer: Sequencer,
        emitter: LineEmitter,
        ring: SourceRing,
        counters: PipelineCounters,
    ) -> None:
        self.engine, self.state, self.sequencer, self.emitter = engine, engine.state, sequencer, emitter
        self._ring, self.counters = ring, counters
        self.pending: syncbus.Snapshot | None = None  # adopted when the source reaches its position

    def due(self, source_seq: int) -> tuple[syncbus.Snapshot | None, syncbus.Snapshot | None]:
        """The snapshot to adopt at the message ``source_seq``: in its place, or right after it."""
        pending = self.pending
        adopt = pending if pending is not None and pending.source_seq == source_seq else None
        # A snapshot taken right at a session boundary holds the next session's state:
        # this message is the last of the session before, so it is adopted after it.
        if adopt is not None and _begins_at(adopt, source_seq, self.state.session):
            return None, adopt
        return adopt, None

    def adopt(self, snapshot: syncbus.Snapshot) -> None:
        """Take ``snapshot``'s state exactly at its position (the source path is there)."""
        self.pending = None
        self.emitter.unpublish()  # what waits carries the state the snapshot replaces
        self.emitter.trust_from(snapshot.source_seq)
        self.state.restore(snapshot.symbols, session=snapshot.session or None)
        self.counters.snapshots_adopted += 1

    def on_snapshot(self, msg: syncbus.Snapshot) -> bool:
        """Adopt the active's snapshot (now, or when the source reaches it); True once adopted now."""
        at, last = msg.source_seq, self.sequencer.last_source_seq
        if last < at:
            self.pending = msg  # adopted when we reach ``at`` (see due)
            return False
        recorded = self.sequencer.is_recorded
        replay = self._ring.messages(
            self.engine.parse, self.engine.split_messages, after=at, upto=last, wanted=recorded
        )
        if replay and replay[0].source_seq != at + 1 and last > at:
            logger.info("snapshot at %d is older than our replay ring; waiting for a newer one", at)
            return False
        self.emitter.unpublish()  # what waits carries the state the snapshot replaces
        self.emitter.trust_from(at)
        self.state.restore(msg.symbols, session=msg.session or None)
        # At a session boundary the snapshot's state is the next session's; the position
        # itself keeps the digest of the message there (the last of the session before).
        digests = {} if _begins_at(msg, at, 0) else {at: self.state.digest}
        for replayed in replay:
            try:
                self.state.apply(replayed)
            except ConversionError:
                continue
            digests[replayed.source_seq] = self.state.digest
        self.sequencer.restate_digests(digests)
        self.counters.snapshots_adopted += 1
        return True


def _begins_at(snapshot: syncbus.Snapshot, source_seq: int, session: int) -> bool:
    """Whether ``snapshot`` is a session's state right at its boundary after ``source_seq``."""
    return (
        snapshot.session != session
        and snapshot.session_boundary_msg_seq != 0
        and snapshot.session_after_source_seq == source_seq
    )
