"""What the adapter core shows the world: the registry's view, other threads' view, and its status.

Immutable values built on the loop thread from the core's parts. Other
threads -- the replay service, the admin link -- read only these, never a
core object: the loop hands a new value over in one assignment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from feedha.adapter.core.driver import Driver
from feedha.adapter.core.parts import CoreParts
from feedha.adapter.core.purge import PurgeTable
from feedha.adapter.core.sync_types import Role, SyncStatus

__all__ = ["CoreView", "SyncView", "core_status"]


@dataclass(frozen=True, slots=True)
class SyncView:
    """The adapter's standing for the admin server's registry."""

    role: Role
    status: SyncStatus
    behind: bool  # in sync by the rules, but further behind the active than the tolerance
    term: int
    next_msg_seq: int
    health_score: float
    lag: int


@dataclass(frozen=True, slots=True)
class CoreView:
    """What the replay service's thread needs of the core: the term and the purges, frozen.

    Attributes:
        term: the term stamped on replies.
        purges: every purge held, as msg_seq ranges (tombstones in replies).
        purges_version: changes whenever the purges do.
    """

    term: int
    purges: PurgeTable
    purges_version: int


def core_status(core: CoreParts, driver: Driver, *, sync_garbage: int) -> dict[str, Any]:
    """Role, term, position and counters, for status replies and the final report (on the loop thread).

    Args:
        core: the core's parts.
        driver: the sync rules' state.
        sync_garbage: sync-bus frames that did not decode.
    """
    sync, emitter = driver.sync, core.emitter
    output, journal = emitter.output, emitter.journal
    return {
        "adapter": core.config.adapter,
        "role": sync.role.value,
        "status": sync.status.value,
        "term": sync.term,
        "active": sync.active,
        "throttled": sync.throttled,
        "health": round(sync.health_score, 1),
        "next_msg_seq": core.sequencer.next_msg_seq,
        "last_source_seq": core.sequencer.last_source_seq,
        "digest": core.state.digest,
        "symbols": len(core.state),
        "fast_path": core.engine.is_native,
        "published": emitter.published,
        **core.pipeline.counters.as_dict(),
        "accounting": core.pipeline.ledger.as_dict(
            first_source_seq=core.sequencer.first_source_seq,
            last_source_seq=core.sequencer.last_source_seq,
            numbered=core.pipeline.counters.numbered,
        ),
        "sync_garbage": sync_garbage,
        "snapshots_sent": driver.snapshots_sent,
        "packets": output.packets,
        "heartbeats": output.heartbeats,
        "dropped_packets": output.dropped_packets,
        **core.busy.status(),
        "published_msg_seq": emitter.published_msg_seq,
        "gate": emitter.gate.counters.as_dict(),
        "journal_last_msg_seq": None if journal is None else journal.last_msg_seq,
        "journaled": 0 if journal is None else journal.journaled,
        "journal_skipped": 0 if journal is None else journal.skipped,
        "checkpoints": 0 if journal is None else journal.checkpoints,
        **core.gaps.status(),
        "unpublished_at_promotion": driver.unpublished_at_promotion,
        **core.sessions.status(core.pipeline.waiting.fence),
        **core.delayed.status(),
        "conflated": core.conflated.status(),
    }
