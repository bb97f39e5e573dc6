"""A restarted adapter's parts, rebuilt from its journal before any other input.

:func:`restore_parts` hands the journal's records to each part that owns what
they rebuild: the numbering and the conversion state
(:func:`~adapter.core.recovery.recover_state`), the ledger's base, the
session, the purges and the delayed line's start, the line's published
position and the journal plan's. The sync rules' state (the term) is the
driver's, set by the core.
"""

from __future__ import annotations

from typing import Any

from feedha.adapter.core import recovery
from feedha.adapter.core.parts import CoreParts

__all__ = ["restore_parts"]


def restore_parts(
    parts: CoreParts,
    checkpoint: recovery.CheckpointLike | None,
    journal: recovery.JournalSource,
    *,
    journal_last_msg_seq: int,
    delayed_from: int | None,
) -> recovery.RecoverySummary:
    """Rebuild the parts' numbering, conversion state, session and purges from the journal.

    Args:
        parts: the core's parts, as built (nothing happened to them yet).
        checkpoint: the newest valid checkpoint, if any.
        journal: reads the journal's records.
        journal_last_msg_seq: the last msg_seq in the journal (0: empty).
        delayed_from: the first journaled msg_seq not yet due on the delayed line; ``None``:
            from the start.
    """
    controls: list[Any] = []
    summary = recovery.recover_state(journal, checkpoint, parts.state, parts.sequencer, controls=controls)
    parts.pipeline.ledger.base = summary.last_source_seq  # the ledger books from here on
    parts.sessions.recovered(summary.session)
    purges = recovery.checkpoint_purges(checkpoint.state) if checkpoint is not None else []
    parts.delayed.restore(purges + recovery.journal_purges(controls))
    if delayed_from is not None:
        parts.delayed.start_at(delayed_from)
    parts.emitter.published_msg_seq = journal_last_msg_seq
    if parts.emitter.journal is not None:
        parts.emitter.journal.resume(
            last_msg_seq=journal_last_msg_seq,
            last_source_seq=summary.last_source_seq,
            session=summary.session.id,
        )
    return summary
