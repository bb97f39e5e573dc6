"""The lines' timers, read off the sync state: a silent active's release, heartbeats, conflation;
and the journal's checkpoints.

Functions of the parts (:class:`~adapter.core.parts.CoreParts`) and the sync
rules' state (:class:`~adapter.core.sync_types.SyncState`) that the core runs
on its turns; they own nothing (the emitter owns the line and its gate, the
conflated side its intervals).
"""

from __future__ import annotations

from feedha.adapter.core import syncbus
from feedha.adapter.core.actions import Publish, PublishConflated
from feedha.adapter.core.parts import CoreParts
from feedha.adapter.core.sync_types import Role, SyncState
from feedha.adapter.core.turn import Turn

__all__ = [
    "conflate_sync",
    "conflate_tick",
    "line_heartbeat",
    "release_if_active_silent",
    "silent_release_at",
]


def release_if_active_silent(parts: CoreParts, sync: SyncState, turn: Turn) -> None:
    """The active stopped reporting (dead or stalled): keep the stream flowing on our line while
    the group elects, as an in-sync backup always did."""
    at = silent_release_at(parts, sync)
    if at is not None and turn.now >= at:
        turn.out += parts.emitter.release(provisional=True)


def silent_release_at(parts: CoreParts, sync: SyncState) -> float | None:
    """When what our gate holds goes out if the active stays silent until then (``None``: it never does now).

    A deadline of the core's: a backup's source pump holds its batches until the next report or
    deadline, and the release must not wait for a tick. A provisional release makes the gate
    pass, so this deadline passes with it.
    """
    gate = parts.emitter.gate
    if sync.role is not Role.BACKUP or not sync.is_in_sync:
        return None  # not confirmed, or a gap of ours is not settled: nothing goes out unasked
    if gate.passes or not gate.is_trusted:
        return None
    if parts.sequencer.has_pending:
        # Behind a report of the active: what we hold covers positions its line carried
        # already, and only that report can say whether we numbered them as it did (it may
        # have numbered past source messages it missed while we were silent). It is checked
        # when we reach it: a match confirms, a mismatch discards.
        return None
    heard = max(sync.reported_at or 0.0, sync.active_heard_at or 0.0, sync.demoted_at or 0.0)
    return heard + parts.config.silence_release_s


def line_heartbeat(parts: CoreParts, sync: SyncState, turn: Turn) -> None:
    """The line's heartbeat, when one is due and may go out (not past what the gate holds)."""
    output = parts.emitter.output
    if not sync.is_publishing or turn.now < output.heartbeat_due():
        return
    if parts.emitter.may_heartbeat(parts.sequencer.last_recorded_source_seq):
        next_msg_seq = parts.sequencer.next_msg_seq
        packet = output.heartbeat(
            term=sync.term, next_msg_seq=next_msg_seq, now=turn.now, send_time_ns=turn.wall_ns
        )
        turn.out.append(Publish(packet))


def conflate_tick(parts: CoreParts, sync: SyncState, turn: Turn) -> bool:
    """The conflation intervals' timers; whether the active proposed a boundary (to report now)."""
    side = parts.conflated
    if not side.enabled:
        return False
    side.observe(turn.out)
    if not sync.is_publishing:
        return False  # what became due goes out once this adapter publishes again
    actions, proposed = side.on_tick(
        role=sync.role,
        peers=sync.peers,
        published_seq=parts.emitter.published_msg_seq,
        now=turn.now,
        wall_ns=turn.wall_ns,
        term=sync.term,
        peer_timeout_s=parts.config.sync.peer_timeout_s,
    )
    turn.out += actions
    return bool(proposed)


def conflate_sync(
    parts: CoreParts, sync: SyncState, msg: syncbus.SyncMessage, sender: syncbus.Sender, turn: Turn
) -> None:
    """The conflation protocol's part of a sync message, after what it released on the line."""
    side = parts.conflated
    side.observe(turn.out)
    if isinstance(msg, syncbus.ConflateAck) and sync.role is Role.ACTIVE:
        side.on_ack(msg, now=turn.now)
    elif (
        isinstance(msg, syncbus.StreamState)
        and msg.sender.role is Role.ACTIVE
        and msg.sender.term >= sync.term
        and sync.role is not Role.ACTIVE
    ):
        published = parts.emitter.published_msg_seq
        actions = side.on_report(msg, sender, published_seq=published, now=turn.now)
        publishing = sync.is_publishing
        turn.out += [a for a in actions if publishing or type(a) is not PublishConflated]


def checkpoint(parts: CoreParts, turn: Turn) -> None:
    """The journal's checkpoint, when one is due (the journal plan says when)."""
    journal = parts.emitter.journal
    if journal is None:
        return
    written = journal.checkpoint(
        now=turn.now,
        last_source_seq=parts.sequencer.last_source_seq,
        symbols=parts.state.checkpoint_symbols,
        session=parts.sessions.keeper.session,
        purges=parts.delayed.desk.book.entries,
    )
    if written is not None:
        turn.out.append(written)
