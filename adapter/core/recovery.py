"""Restart recovery: rebuild msg_seq numbering and conversion state from the adapter's journal.

Theory of operation
-------------------
The journal holds every message the adapter published, each carrying the
per-symbol conversion state right after it (``MarketUpdate.state``), and the
checkpoints hold the whole conversion state as a serialized
``sync_pb2.ConversionSnapshot`` at a journaled msg_seq. So recovery is:

1. open the journal writer first: its own recovery cuts a torn tail, so what
   is read next is exactly what survived;
2. load the newest valid checkpoint (the journal keeps two) and restore its
   symbols (none: start empty and roll the whole journal);
3. roll forward every record after the checkpoint's msg_seq: roll its block
   into the conversion state as the state keeps it
   (:func:`~adapter.conversion.codec.roll_block`: each symbol's state, whole
   books rolled in place, the live orders a block touched) and record
   ``(source_seq, msg_seq, digest)`` in the :class:`~adapter.core.sequencer.Sequencer`,
   which leaves ``next_msg_seq`` after the last record, ``last_source_seq``
   at its source message and the recent history the sync rules compare with.
   A session-boundary record rolls the state into the session it begins
   (every symbol's daily fields start again) and takes its msg_seq, as the
   boundary did when it was published; the checkpoint says which session its
   state belongs to.

The adapter then starts as usual: it listens for the active, joins as a
backup and lets the sync rules check the recovered position. When the state
matches the active's at the same source position it is in sync with no
snapshot; when the journal tail was torn or the source moved on while the
adapter was down, the rules renumber it (rule 2) and adopt the active's
state (rule 4) as they would for any backup.

Caveat: messages the adapter converted while it did not publish (a backup
resynchronizing) are not journaled, so a symbol touched only by them is
restored as of its last journaled message; the sync rules repair that too.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from google.protobuf.message import DecodeError

from feedha.adapter.conversion.codec import from_proto, roll_block, to_proto
from feedha.adapter.conversion.state import ConversionState, EncodedSymbols, SymbolValues
from feedha.adapter.core.purge import (
    PURGE_RECORD_FLAGS,
    PurgeEntry,
    decode_purge,
    purge_from_proto,
    purge_to_proto,
)
from feedha.adapter.core.records import RecordLike
from feedha.adapter.core.sequencer import Sequencer
from feedha.adapter.core.session import FIRST_SESSION, RECORD_SESSION_BOUNDARY, Session
from feedha.proto import market_pb2, sync_pb2

logger = logging.getLogger(__name__)


class ControlLike(Protocol):
    """A journal control record (``adapter.journal.format.ControlRecord`` fits)."""

    @property
    def flags(self) -> int: ...
    @property
    def payload(self) -> bytes: ...


class JournalSource(Protocol):
    """Reads a journal from a msg_seq on (``adapter.journal.JournalReader`` fits).

    ``controls``, when given, receives the control records (purges) passed on the way.
    """

    def read(self, from_seq: int = 0, *, controls: list[Any] | None = None) -> Iterable[RecordLike]: ...


class CheckpointLike(Protocol):
    """A journal checkpoint (``adapter.journal.Checkpoint`` fits)."""

    @property
    def msg_seq(self) -> int: ...
    @property
    def state(self) -> bytes: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoverySummary:
    """What restart recovery rebuilt.

    Attributes:
        checkpoint_msg_seq: msg_seq of the checkpoint started from (``None``: no checkpoint).
        records_rolled: journal records rolled forward after it.
        undecodable: records whose payload was not a MarketUpdate (skipped).
        last_msg_seq: msg_seq of the last journaled message (0: empty journal).
        last_source_seq: its source_seq (0: none).
        next_msg_seq: the msg_seq the adapter's next message gets.
        symbols: symbols in the rebuilt conversion state.
        digest: the rebuilt conversion state's digest.
        session: the session the rebuilt state belongs to.
        boundaries: session-boundary records rolled forward.
    """

    checkpoint_msg_seq: int | None
    records_rolled: int
    undecodable: int
    last_msg_seq: int
    last_source_seq: int
    next_msg_seq: int
    symbols: int
    digest: int
    session: Session = FIRST_SESSION
    boundaries: int = 0

    def as_dict(self) -> dict[str, int | None]:
        """The summary as a JSON-able dict (for status events)."""
        out = {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "session"}
        out["session"] = self.session.id
        out["session_start_ns"] = self.session.start_ns
        return out


@dataclass(frozen=True, slots=True)
class CheckpointState:
    """A decoded checkpoint blob: the state right after ``source_seq``, in ``session``."""

    source_seq: int
    next_msg_seq: int
    symbols: dict[str, SymbolValues]
    session: Session


# ConversionSnapshot's fields before its symbols (4), and after them (purges are added apart).
_HEAD_FIELDS: Final = ("source_stream", "source_seq", "next_msg_seq")
_REST_FIELDS: Final = (
    "session",
    "session_after_source_seq",
    "session_boundary_msg_seq",
    "session_start_ns",
    "session_reason",
)


def encode_checkpoint_state(
    symbols: Mapping[str, SymbolValues] | EncodedSymbols,
    *,
    source_stream: int,
    source_seq: int,
    next_msg_seq: int,
    session: Session = FIRST_SESSION,
    purges: Iterable[PurgeEntry] = (),
) -> bytes:
    """The checkpoint blob: the whole conversion state right after ``source_seq``.

    Args:
        symbols: every symbol's values (``ConversionState.snapshot()``), or a C state's
            encoding of them (``ConversionState.checkpoint_symbols()``: the same bytes).
        source_stream: the source stream number.
        source_seq: the last source message the state includes.
        next_msg_seq: the msg_seq the next message gets.
        session: the session the state belongs to.
        purges: every purge the adapter holds (recovery needs no older record then).

    Returns:
        A serialized ``feedha.v1.ConversionSnapshot``.
    """
    snapshot = sync_pb2.ConversionSnapshot(
        source_stream=source_stream,
        source_seq=source_seq,
        next_msg_seq=next_msg_seq,
        session=session.id,
        session_after_source_seq=session.after_source_seq,
        session_boundary_msg_seq=session.boundary_msg_seq,
        session_start_ns=session.start_ns,
        session_reason=session.reason,  # type: ignore[arg-type]  # an int of the enum
    )
    if isinstance(symbols, EncodedSymbols):
        # Fields are written in number order: 1-3, the symbols (4), then 5 on.
        rest = sync_pb2.ConversionSnapshot()
        rest.CopyFrom(snapshot)
        for name in _HEAD_FIELDS:
            rest.ClearField(name)
        for name in _REST_FIELDS:
            snapshot.ClearField(name)
        for purge in purges:
            purge_to_proto(purge, rest.purges.add())
        return snapshot.SerializeToString() + symbols.data + rest.SerializeToString()
    for symbol, values in symbols.items():
        entry = snapshot.symbols.add()
        entry.symbol = symbol
        entry.state.CopyFrom(to_proto(values))
    for purge in purges:
        purge_to_proto(purge, snapshot.purges.add())
    return snapshot.SerializeToString()


def checkpoint_purges(blob: bytes) -> list[PurgeEntry]:
    """The purges a checkpoint blob holds (none when it is not a ConversionSnapshot or names a bad one)."""
    try:
        snapshot = sync_pb2.ConversionSnapshot.FromString(blob)
        return [purge_from_proto(entry) for entry in snapshot.purges]
    except (DecodeError, ValueError) as exc:
        logger.warning("checkpoint purges unreadable (%s); the journal's purge records still count", exc)
        return []


def journal_purges(controls: Iterable[ControlLike]) -> list[PurgeEntry]:
    """The purges among a journal's control records (an unreadable one is logged and skipped)."""
    found = []
    for control in controls:
        if control.flags & PURGE_RECORD_FLAGS:
            try:
                found.append(decode_purge(control.payload))
            except ValueError as exc:
                logger.warning("skipping an unreadable purge record: %s", exc)
    return found


def decode_checkpoint_state(blob: bytes) -> CheckpointState:
    """Read a checkpoint blob (one written before sessions existed is in session 1).

    Raises:
        ValueError: the blob is not a ConversionSnapshot.
    """
    try:
        snapshot = sync_pb2.ConversionSnapshot.FromString(blob)
    except DecodeError as exc:
        raise ValueError(f"checkpoint state of {len(blob)} bytes is not a ConversionSnapshot") from exc
    symbols = {entry.symbol: from_proto(entry.state) for entry in snapshot.symbols}
    session = Session(
        max(1, snapshot.session),
        snapshot.session_after_source_seq,
        snapshot.session_boundary_msg_seq,
        snapshot.session_start_ns,
        snapshot.session_reason,
    )
    return CheckpointState(snapshot.source_seq, snapshot.next_msg_seq, symbols, session)


def boundary_of(payload: bytes) -> market_pb2.SessionBoundary | None:
    """The session boundary an end-of-session record's payload names (``None``: not one)."""
    try:
        update = market_pb2.MarketUpdate.FromString(payload)
    except DecodeError:
        return None
    return update.session_boundary if update.HasField("session_boundary") else None


def recover_state(
    reader: JournalSource,
    checkpoint: CheckpointLike | None,
    conversion: ConversionState,
    sequencer: Sequencer,
    *,
    controls: list[Any] | None = None,
) -> RecoverySummary:
    """Restore ``conversion`` and ``sequencer`` from a checkpoint plus the journal after it.

    Args:
        reader: a reader of the (already recovered) journal directory.
        checkpoint: the newest valid checkpoint, or ``None``.
        conversion: the adapter's (empty) conversion state; restored in place.
        sequencer: the adapter's (fresh) sequencer; moved to after the last record.
        controls: receives the journal's control records after the checkpoint (purges).

    Returns:
        What was rebuilt.
    """
    session, start, checkpoint_msg_seq = _from_checkpoint(checkpoint, conversion, sequencer)
    rolled = undecodable = boundaries = 0
    update = market_pb2.MarketUpdate()
    records = reader.read(start) if controls is None else reader.read(start, controls=controls)
    for record in records:
        if record.flags & RECORD_SESSION_BOUNDARY:
            rolled_into = _roll_boundary(record, session, conversion, sequencer)
            if rolled_into is None:
                undecodable += 1
            else:
                session, boundaries = rolled_into, boundaries + 1
            continue
        try:
            update.ParseFromString(record.payload)
        except DecodeError:
            undecodable += 1
            continue
        roll_block(conversion, update)
        sequencer.record(record.source_seq, record.msg_seq, conversion.digest)
        rolled += 1
    summary = RecoverySummary(
        checkpoint_msg_seq=checkpoint_msg_seq,
        records_rolled=rolled,
        undecodable=undecodable,
        last_msg_seq=sequencer.next_msg_seq - 1,  # a boundary record is a msg_seq the history skips
        last_source_seq=sequencer.last_source_seq,
        next_msg_seq=sequencer.next_msg_seq,
        symbols=len(conversion),
        digest=conversion.digest,
        session=session,
        boundaries=boundaries,
    )
    logger.info("recovered from the journal: %r", summary)
    return summary


def _from_checkpoint(
    checkpoint: CheckpointLike | None, conversion: ConversionState, sequencer: Sequencer
) -> tuple[Session, int, int | None]:
    """Restore what a checkpoint holds; returns the session, the first msg_seq to roll, the checkpoint's."""
    conversion.session = FIRST_SESSION.id
    if checkpoint is None:
        return FIRST_SESSION, 0, None
    try:
        state = decode_checkpoint_state(checkpoint.state)
    except ValueError as exc:
        logger.warning("ignoring checkpoint %r: %s; rolling the whole journal", checkpoint, exc)
        return FIRST_SESSION, 0, None
    session = state.session
    conversion.restore(state.symbols, session=session.id)
    if checkpoint.msg_seq == session.boundary_msg_seq:
        # A checkpoint right after a boundary: its position is the last message of the
        # session before, whose state is not this one (see Session and the sequencer).
        sequencer.reset_to(last_source_seq=state.source_seq, next_msg_seq=checkpoint.msg_seq + 1)
    elif state.source_seq:
        sequencer.record(state.source_seq, checkpoint.msg_seq, conversion.digest)
    return session, checkpoint.msg_seq + 1, checkpoint.msg_seq


def _roll_boundary(
    record: RecordLike, session: Session, conversion: ConversionState, sequencer: Sequencer
) -> Session | None:
    """Roll into the session a boundary record begins; ``None`` for one that cannot be (undecodable, old)."""
    boundary = boundary_of(record.payload)
    if boundary is None or boundary.started <= session.id:
        return None
    conversion.roll(boundary.started)
    sequencer.reset_to(last_source_seq=record.source_seq, next_msg_seq=record.msg_seq + 1)
    return Session(
        boundary.started, record.source_seq, record.msg_seq, boundary.boundary_time_ns, boundary.reason
    )
