"""What goes into the adapter's journal and when a checkpoint is due.

Pure bookkeeping: the runner's journal writer carries out the
:class:`~adapter.core.actions.JournalRecords` and
:class:`~adapter.core.actions.WriteCheckpoint` actions this plans.

* The journal keeps one record per ``msg_seq``, the first one written: when
  rule 2 renumbers an adapter backwards, the numbers it publishes again are
  not journaled again (they are counted as ``journal_skipped``).
* A checkpoint is the conversion state *at* the last journaled message, so it
  is taken only when nothing was converted after that message (and no session
  began that the journal has not recorded yet), once ``checkpoint_every``
  messages or ``checkpoint_interval_s`` seconds have passed since the last one,
  and never sooner than :data:`CHECKPOINT_COST_FACTOR` times what the last one
  cost the loop (:meth:`JournalPlan.note_cost`): folding a large order table
  took 1.0-1.6 s of a loaded 2-core machine, so every 5 s it took a quarter of
  every adapter's time, and the group fell behind its source.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

from feedha.adapter.conversion.state import EncodedSymbols, SymbolValues
from feedha.adapter.core.actions import JournalRecords, WriteCheckpoint
from feedha.adapter.core.purge import PurgeEntry
from feedha.adapter.core.recovery import encode_checkpoint_state
from feedha.adapter.core.session import FIRST_SESSION, RECORD_SESSION_BOUNDARY, Session

__all__ = ["CHECKPOINT_COST_FACTOR", "JournalPlan"]

CHECKPOINT_COST_FACTOR: Final = 10.0  # a checkpoint takes at most a tenth of the loop's time


class JournalPlan:
    """The journal's side of one adapter core.

    Args:
        source_stream: the source stream number of every record.
        checkpoint_every: checkpoint after this many journaled messages ...
        checkpoint_interval_s: ... or this long after the last checkpoint.
        now: the clock at start-up.
    """

    __slots__ = (
        "_source_stream",
        "session",
        "_every",
        "_interval_s",
        "last_msg_seq",
        "last_source_seq",
        "_since_checkpoint",
        "_checkpoint_at",
        "_cost_s",
        "journaled",
        "skipped",
        "checkpoints",
    )

    def __init__(
        self, *, source_stream: int, checkpoint_every: int, checkpoint_interval_s: float, now: float
    ) -> None:
        self._source_stream = source_stream
        self._every = checkpoint_every
        self._interval_s = checkpoint_interval_s
        self.last_msg_seq = 0  # the newest msg_seq in the journal
        self.last_source_seq = 0  # its source_seq
        self.session = 1  # the session the last record belongs to (a boundary record begins one)
        self._since_checkpoint = 0
        self._checkpoint_at = now
        self._cost_s = 0.0  # what the last checkpoint cost the loop (the shell measures it)
        self.journaled = self.skipped = self.checkpoints = 0

    def __repr__(self) -> str:
        return (
            f"<JournalPlan [last_msg_seq={self.last_msg_seq}, since_checkpoint={self._since_checkpoint}, "
            f"skipped={self.skipped}]>"
        )

    def resume(self, *, last_msg_seq: int, last_source_seq: int, session: int = 1) -> None:
        """Continue after what recovery found in the journal."""
        self.last_msg_seq = last_msg_seq
        self.last_source_seq = last_source_seq
        self.session = session

    def records(
        self,
        first_msg_seq: int,
        time_ns: int,
        source_seqs: Sequence[int],
        payloads: Sequence[bytes],
        flags: int = 0,
        *,
        session: int = 0,
    ) -> JournalRecords | None:
        """The records to journal for published messages ``first_msg_seq``, ... (``None``: all known).

        ``session`` is the session a session-boundary record (``flags``) begins.
        """
        count = len(payloads)
        skip = self.take(first_msg_seq, count, source_seqs[-1])
        if skip == count:
            return None
        if skip:
            first_msg_seq += skip
            source_seqs, payloads = source_seqs[skip:], payloads[skip:]
        if flags & RECORD_SESSION_BOUNDARY:
            self.session = session
        return JournalRecords(first_msg_seq, time_ns, self._source_stream, source_seqs, payloads, flags)

    def take(self, first_msg_seq: int, count: int, last_source_seq: int) -> int:
        """Book published messages ``first_msg_seq`` .. ``+ count - 1`` as journaled; how many were already.

        The journal plan's bookkeeping without a :class:`JournalRecords`: :meth:`records` uses
        it; the source pump does the same in C for each packet it journals, and books the sums
        (:meth:`took`).
        """
        skip = min(max(self.last_msg_seq - first_msg_seq + 1, 0), count)
        self.skipped += skip
        if skip == count:
            return skip
        fresh = count - skip
        self.last_msg_seq = first_msg_seq + count - 1
        self.last_source_seq = last_source_seq
        self.journaled += fresh
        self._since_checkpoint += fresh
        return skip

    def took(self, journaled: int, skipped: int, last_msg_seq: int, last_source_seq: int) -> None:
        """Book what the source pump journaled in one run: :meth:`take` for each of its packets, summed.

        ``journaled`` records went to the writer (the last ``last_msg_seq``, from ``last_source_seq``;
        a refused write included, as :meth:`take` books before the write), ``skipped`` were held already.
        """
        self.skipped += skipped
        if journaled:
            self.last_msg_seq, self.last_source_seq = last_msg_seq, last_source_seq
            self.journaled += journaled
            self._since_checkpoint += journaled

    def is_checkpoint_due(self, now: float) -> bool:
        """Whether a checkpoint is due at ``now`` (enough messages, or time, since the last one)."""
        pending, since = self._since_checkpoint, now - self._checkpoint_at
        if not pending or since < CHECKPOINT_COST_FACTOR * self._cost_s:
            return False
        return pending >= self._every or since >= self._interval_s

    def note_cost(self, seconds: float) -> None:
        """The last checkpoint cost the loop ``seconds`` (folding the state, writing it)."""
        self._cost_s = max(0.0, seconds)

    def checkpoint(
        self,
        *,
        now: float,
        last_source_seq: int,
        symbols: Callable[[], Mapping[str, SymbolValues] | EncodedSymbols],
        session: Session = FIRST_SESSION,
        purges: Callable[[], Iterable[PurgeEntry]] = tuple,
    ) -> WriteCheckpoint | None:
        """A checkpoint when one is due and the state is exactly the journal's; else ``None``."""
        if (
            not self.is_checkpoint_due(now)
            or self.last_source_seq != last_source_seq
            or self.session != session.id
        ):
            return None
        blob = encode_checkpoint_state(
            symbols(),
            source_stream=self._source_stream,
            source_seq=self.last_source_seq,
            next_msg_seq=self.last_msg_seq + 1,
            session=session,
            purges=purges(),
        )
        self._since_checkpoint = 0
        self._checkpoint_at = now
        self.checkpoints += 1
        return WriteCheckpoint(self.last_msg_seq, blob)
