"""What the source sent that gets no msg_seq: quarantined, skipped, a suspect jump held and refused.

:class:`Rejects` is the source path's book of refusals. Every adapter of a
group skips the same bytes the same way, so numbering stays aligned: a
quarantined or skipped message with a readable ``source_seq`` uses up its
position like any (:class:`~adapter.core.accounting.SourceLedger` books it),
and nothing it carried changes the conversion state. It owns the messages of
a suspect ``source_seq`` jump, held until enough consecutive ones confirm it
(the pipeline believes it) or the stream goes on where it was (refused here),
and the quarantine reasons already logged. The
:class:`~adapter.core.pipeline.Pipeline` decides what goes where; this only
books it.
"""

from __future__ import annotations

import logging
from typing import Final

from feedha.adapter.conversion.engine import ConversionEngine
from feedha.adapter.conversion.messages import SourceMessage
from feedha.adapter.core.accounting import PipelineCounters, SourceLedger, count_kind
from feedha.adapter.core.actions import Quarantine
from feedha.adapter.core.sequencer import Sequencer, SourceVerdict
from feedha.adapter.core.turn import Turn
from feedha.adapter.errors import ConversionError

logger = logging.getLogger(__name__)

__all__ = ["QUARANTINE_DATA_BYTES", "Rejects"]

QUARANTINE_DATA_BYTES: Final = 4096  # what is kept of one quarantined message or stretch


class Rejects:
    """Quarantined and skipped source messages, and a suspect jump's held messages.

    Args:
        engine: the conversion engine (it reads sequence numbers and types out of raw messages).
        sequencer: the numbering (positions used up).
        ledger: where every source position went.
        counters: the source path's counters.
        max_gap: missing messages beyond which a gap is a suspect jump.
    """

    def __init__(
        self,
        engine: ConversionEngine,
        sequencer: Sequencer,
        ledger: SourceLedger,
        counters: PipelineCounters,
        *,
        max_gap: int,
    ) -> None:
        self.engine, self.sequencer, self.ledger, self.counters = engine, sequencer, ledger, counters
        self._max_gap = max_gap
        self._held: list[tuple[SourceMessage, bytes]] = []  # a suspect jump, until confirmed
        self._reported: set[str] = set()  # quarantine reasons already logged

    @property
    def holding(self) -> bool:
        """Whether a suspect jump's messages are held (every next message must be looked at)."""
        return bool(self._held)

    def continues(self, source_seq: int) -> bool:
        """Whether ``source_seq`` comes right after the held messages (it continues the jump)."""
        return bool(self._held) and source_seq == self._held[-1][0].source_seq + 1

    def hold(self, msg: SourceMessage, body: bytes) -> int:
        """Hold one more message of a suspect jump; returns how many are held."""
        self._held.append((msg, body))
        return len(self._held)

    def take_held(self) -> list[tuple[SourceMessage, bytes]]:
        """The held messages, no longer held: the jump is believed."""
        held, self._held = self._held, []
        return held

    def quarantine(self, reason: str, source_seq: int | None, detail: str, data: bytes, turn: Turn) -> None:
        """Count, log (once per reason) and keep a skipped source message."""
        quarantined = self.counters.quarantined
        quarantined[reason] = quarantined.get(reason, 0) + 1
        if reason not in self._reported:
            self._reported.add(reason)
            logger.warning(
                "quarantined (%s) at source_seq %s: %s (logged once per kind)", reason, source_seq, detail
            )
        turn.out.append(Quarantine(reason, source_seq, detail, data[:QUARANTINE_DATA_BYTES], len(data)))

    def refuse_jump(self, next_seq: int | None, turn: Turn) -> None:
        # The stream went on where it was: the jump was one bad number, not a new position.
        # A held message stood in place of the next one when the stream resumes right after
        # the positions the held messages would have taken: every adapter counts them used.
        held = self.take_held()
        last = self.sequencer.last_source_seq
        for msg, body in held:
            self.counters.conversion_errors += 1
            past = msg.source_seq - last - 1
            detail = f"source_seq {msg.source_seq} is {past} past {last} (max gap {self._max_gap})"
            self.quarantine("source_seq_jump", msg.source_seq, detail, body, turn)
        placed = 0
        if next_seq is not None and last < next_seq - 1 <= last + len(held):
            placed = next_seq - 1 - last
            self.sequencer.skip_source(next_seq - 1)
        for _ in range(placed):
            self.ledger.took("quarantined")
        self.ledger.placed_nowhere(len(held) - placed)

    def refuse_unless_continued(self, source_seq: int, turn: Turn) -> None:
        held = self._held
        if held and source_seq != held[-1][0].source_seq + 1:
            self.refuse_jump(source_seq, turn)

    def malformed(self, stretch: bytes, turn: Turn) -> None:
        # Bytes that are no FIX message. If the header still names the next source position,
        # every adapter takes that position as used (quarantined alike: no gap for anyone);
        # a well-formed copy of it that comes next is still taken.
        self.counters.malformed_messages += 1
        seq = self.engine.find_seq(stretch)
        if seq is not None:
            self.refuse_unless_continued(seq, turn)
        last = self.sequencer.last_source_seq
        if seq is not None and last and seq == last + 1 and not self._held:
            self.sequencer.skip_source(seq, tentative=True)
            self.ledger.took("quarantined", tentative=True)
        else:
            self.ledger.placed_nowhere()
        self.quarantine("malformed_fix", seq, f"{len(stretch)} bytes that are no FIX message", stretch, turn)

    def book_reset(self, body: bytes, source_seq: int, new_seq: int) -> None:
        # The reset is a message of its own (skipped: not market data) at source_seq; what the
        # stream skipped before it is a gap; the positions it numbers past were never sent.
        ledger, last = self.ledger, self.sequencer.last_source_seq
        if not self.sequencer.first_source_seq:
            self.sequencer.first_source_seq = source_seq  # the stream begins with the reset
        if last and source_seq > last + 1:
            self.counters.source_gaps += 1
            ledger.gap(last + 1, source_seq - 1)
        self.counters.skipped += 1
        count_kind(self.counters.skipped_types, self.engine.message_type(body))
        ledger.took("skipped", retaking=source_seq == last)
        ledger.gap(source_seq + 1, new_seq - 1, "reset")

    def skipped(self, body: bytes, turn: Turn) -> None:
        # Not market data (a heartbeat, a logon ...): counted, not quarantined; like a
        # quarantined message it uses up its position, so it is no loss and no gap.
        self.counters.skipped += 1
        count_kind(self.counters.skipped_types, self.engine.message_type(body))
        try:
            source_seq = self.engine.peek_seq(body)
        except ConversionError:
            self.ledger.placed_nowhere()
            return
        self.refuse_unless_continued(source_seq, turn)
        self._take(source_seq, "skipped")

    def unconvertible(
        self,
        body: bytes,
        exc: ConversionError,
        turn: Turn,
        *,
        source_seq: int | None = None,
        accounted: bool = False,
    ) -> None:
        # Every adapter skips the same bytes the same way, so numbering stays aligned: a
        # quarantined message with a readable source_seq uses up its position like any.
        self.counters.conversion_errors += 1
        if source_seq is None:
            try:
                source_seq = self.engine.peek_seq(body)
            except ConversionError:
                pass  # not even sequenced: nothing to account for
        self.quarantine(exc.reason, source_seq, str(exc), body, turn)
        if source_seq is None:
            self.ledger.placed_nowhere()
            return
        if accounted:  # the careful path took this position already (the next, or past a gap)
            self.ledger.took("quarantined", retaking=source_seq == self.sequencer.last_source_seq)
            self.sequencer.skip_source(source_seq)
            return
        self.refuse_unless_continued(source_seq, turn)
        self._take(source_seq, "quarantined")

    def _take(self, source_seq: int, kind: str) -> None:
        # A message that gets no msg_seq uses up its position when it is the next one (a good
        # copy may take the position a garbled message took); otherwise it takes none.
        sequencer = self.sequencer
        if sequencer.check_source(source_seq) is not SourceVerdict.NEXT:
            self.ledger.placed_nowhere()
            return
        self.ledger.took(kind, retaking=source_seq == sequencer.last_source_seq)
        sequencer.skip_source(source_seq)
