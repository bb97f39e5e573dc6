"""The source path of the adapter core: frames in, numbered messages out, as one coroutine per frame.

Theory of operation
-------------------
:meth:`Pipeline.convert` converts a source frame a *run* at a time through
the conversion engine (:mod:`adapter.conversion.engine`): every ordinary
message before the next watched position (:meth:`Pipeline.stop_position`) is
parsed, applied, numbered, encoded and framed in one engine call. A
position the active reported that a run would give the active's msg_seq (the
usual case) is not watched before but right after: the run converts it, and
its check (rule 2's digest comparison) is made before the next message is
converted (:meth:`Sequencer.pending_stop`). The one message a run stops at
takes the careful path (:meth:`Pipeline._careful`), which

* counts and skips what cannot be converted or does not fit a block -- the
  same way on every adapter of the group, so numbering stays identical (a
  skipped message gets no ``msg_seq`` but uses up its position) -- and never
  changes the state for it;
* drops duplicates, holds a suspect ``source_seq`` jump until it is
  confirmed or refused, and reports source gaps;
* adopts a pending snapshot exactly at its position;
* numbers the message, honouring a pending report of the active (rule 2).

Numbered messages go to the :class:`~adapter.core.emitter.LineEmitter`
(packets and journal records, behind the output gate).

The sync rules are the core's, not the pipeline's. Where the pipeline needs
them in the middle of a frame it *yields* an :data:`Interrupt` -- a gap was
found (hold there?), a position the active reported was reached, a snapshot
was adopted, the session rolled -- and the core answers with a :class:`Reply`
(the adapter's :class:`Standing` now, and for a gap whether to hold) before the
conversion goes on: a backup may start or stop publishing at the very next
message. So :meth:`convert` and everything that converts again what waited
(:meth:`release_gap`, :meth:`hold_at`, :meth:`commit`, :meth:`unfence`,
:meth:`abandon`) return a :data:`Conversion` generator the core drives; the
pipeline holds no pointer to the core. The time and the action list come in
with each call as a :class:`Turn`.

Session boundaries and gaps the group is asked about make input wait
(:mod:`adapter.core.waiting`); what cannot be converted is booked by
:mod:`adapter.core.rejects`. Pure: no clock, no socket.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from typing import Final

from feedha.adapter.conversion.codec import encode_session_boundary
from feedha.adapter.conversion.engine import SKIPPED, ConversionEngine, Stop
from feedha.adapter.conversion.messages import SourceMessage
from feedha.adapter.core import syncbus
from feedha.adapter.core.accounting import PipelineCounters, SourceLedger
from feedha.adapter.core.actions import Action
from feedha.adapter.core.adoption import Adoption
from feedha.adapter.core.config import RING_SIZE
from feedha.adapter.core.emitter import LineEmitter
from feedha.adapter.core.gaps import Gap
from feedha.adapter.core.output import UNBOUNDED_ROOM
from feedha.adapter.core.rejects import Rejects
from feedha.adapter.core.ring import SourceRing
from feedha.adapter.core.sequencer import ArrivalCheck, Sequencer, SourceVerdict
from feedha.adapter.core.session import RECORD_SESSION_BOUNDARY, Boundary
from feedha.adapter.core.turn import (
    Adopted,
    Arrived,
    Conversion,
    GapFound,
    Interrupt,
    Reply,
    Rolled,
    Standing,
    Turn,
)
from feedha.adapter.core.waiting import Waiting
from feedha.adapter.errors import ConversionError
from feedha.proto import fix, wire

logger = logging.getLogger(__name__)

__all__ = ["UNBOUNDED_COUNT", "Pipeline"]

UNBOUNDED_COUNT: Final = 1 << 30
_HOLD: Final = -1  # _careful: the message waits (the group is asked about a gap before it)


class Pipeline:
    """Source frames -> numbered messages on the line and in the journal.

    Args:
        engine: the conversion engine (it owns the conversion state).
        emitter: packets and journal records behind the gate.
        source_stream: the source stream number written in every block.
        max_source_gap: missing messages beyond which a gap is a suspect jump.
        jump_confirm: consecutive messages (the jump included) that confirm a jump.
    """

    def __init__(
        self,
        engine: ConversionEngine,
        emitter: LineEmitter,
        *,
        source_stream: int,
        max_source_gap: int,
        jump_confirm: int,
    ) -> None:
        self.engine = engine
        self.state = engine.state
        self.sequencer = Sequencer()
        self.emitter = emitter
        self.counters = PipelineCounters()
        self.ledger = SourceLedger()  # where every source position went (adapter.core.accounting)
        self.waiting = Waiting()  # the session fence, a committed roll, a gap held, and what waits
        self._source_stream = source_stream
        self._run = engine.run_function()
        self._ring = SourceRing(RING_SIZE)
        # the active's snapshot: adopted now, or pending until the source reaches its position
        self.adoption = Adoption(engine, self.sequencer, emitter, self._ring, self.counters)
        self._max_gap = max_source_gap
        self._jump_confirm = jump_confirm
        # what gets no msg_seq, and a suspect jump's messages until it is believed or refused
        self.rejects = Rejects(engine, self.sequencer, self.ledger, self.counters, max_gap=max_source_gap)

    def __repr__(self) -> str:
        return f"<Pipeline [{self.sequencer!r}, {self.emitter!r}, engine={type(self.engine).__name__}]>"

    # ---- converting --------------------------------------------------------------------

    @property
    def ring(self) -> SourceRing:
        """The recent source frames (replayed after a snapshot)."""
        return self._ring

    def pump_stop(self) -> int | None:
        """Where the source pump's runs must stop (:meth:`stop_position`), or ``None`` if it may not run.

        Not while every next message must be looked at (a held jump), nor while input waits
        (a deferred frame, a gap the group is asked about, a session roll to carry out): the
        Python path is in the middle of something. A watched position (a pending report or
        snapshot, a fence) is only where the runs stop, as the Python path's runs do.
        """
        if self.rejects.holding or self.waiting.busy:
            return None
        return self.stop_position()

    def convert(
        self, frame: bytes, standing: Standing, turn: Turn, *, start: int = 0, before: int = 0
    ) -> Conversion:
        """Convert one source frame (a coroutine the core drives). Returns how many got a msg_seq here.

        ``start``: where in the frame to begin, ``before`` of its messages having been
        converted and booked already (by the source pump, which stopped there); the frame
        goes into the ring with them counted.
        """
        here = 0
        try:
            here = yield from self._convert(frame, standing, turn, start)
        except Exception as exc:  # a bug must cost one frame, never the process
            self.counters.internal_errors += 1
            logger.exception("internal error converting a source frame of %d bytes", len(frame))
            self.rejects.quarantine("internal_error", None, repr(exc), frame, turn)
            self.ledger.placed_nowhere()  # what it held past here shows as a gap at the next frame
            here = 0
        if before + here:
            self._ring.add(frame, before + here)
        return here

    def _convert(self, frame: bytes, standing: Standing, turn: Turn, start: int = 0) -> Conversion:
        run, sequencer, emitter, counters = self._run, self.sequencer, self.emitter, self.counters
        output, journaling = emitter.output, emitter.journal is not None
        pos, converted = start, 0
        while pos < len(frame):
            publishing = standing.publishing
            room, max_count = output.room() if publishing else (UNBOUNDED_ROOM, UNBOUNDED_COUNT)
            last = sequencer.last_source_seq
            # Encoded whether or not this adapter publishes (publish=True): a message
            # too big to publish must be skipped by every adapter of the group alike.
            pos, count, stop, blocks, first_seq, digests, payloads = run(
                frame, pos, last + 1 if last else 0, self.stop_position(), room, max_count,
                turn.wall_ns, self._source_stream, True, publishing and journaling,
            )  # fmt: skip
            if count:
                converted += count
                counters.numbered += count
                first_msg_seq = sequencer.next_msg_seq
                reached = sequencer.record_run(first_seq, first_msg_seq, digests)
                if publishing:
                    turn.out += emitter.add_run(
                        first_msg_seq, first_seq, count, blocks, payloads, time_ns=turn.wall_ns
                    )
                if reached:
                    standing = yield from self._reached(reached, standing, turn)
                    if stop == Stop.SLOW:
                        continue  # it stopped right after the reported position: the next run goes on
            if stop == Stop.SLOW:
                if self.waiting.fence is not None and self._past_fence(frame, pos):
                    if self.waiting.pending_roll is None:
                        self.waiting.deferred = frame[pos:]  # waits until the boundary is settled
                        break
                    standing = yield from self._roll(
                        standing, turn
                    )  # the message past it is the next session's
                    continue
                start = pos
                body, pos = self.engine.next_message(frame, pos)
                if body is None:
                    self.rejects.malformed(frame[start:pos], turn)
                    continue
                done, standing = yield from self._careful(body, standing, turn)
                if done == _HOLD:
                    self.waiting.deferred = frame[start:]  # converted again once the group answered
                    break
                converted += done
            elif stop != Stop.END:
                turn.out += self.seal(standing.term, turn)  # the packet is full
        return converted

    def seal(self, term: int, turn: Turn) -> list[Action]:
        """Close the packet being filled, if any: it goes out, or waits at the gate."""
        return self.emitter.seal(term=term, now=turn.now, time_ns=turn.wall_ns)

    def stop_position(self) -> int:
        """The lowest source position the sync rules watch (0: none); runs stop before it.

        A pending report of the active that rule 2 renumbers at and a pending
        snapshot (adopted exactly there) need the careful path; a pending report
        the run numbers as the active did is converted by the run, which stops
        right after it for its check; everything else may go through the
        engine's runs.
        """
        if self.rejects.holding:  # every next message must be looked at: does it confirm the jump?
            return self.sequencer.last_source_seq + 1
        watched = self.sequencer.pending_stop()
        pending = self.adoption.pending
        if pending is not None:
            watched = pending.source_seq if not watched else min(watched, pending.source_seq)
        fence = self.waiting.fence
        if fence is not None:
            watched = fence + 1 if not watched else min(watched, fence + 1)
        return watched

    # ---- one message at a time ------------------------------------------------------------

    def _careful(
        self, body: bytes, standing: Standing, turn: Turn
    ) -> Generator[Interrupt, Reply, tuple[int, Standing]]:
        """Take one message through the careful path; (1 if it got a msg_seq, or _HOLD; the standing)."""
        try:
            msg = self.engine.parse(body)
        except ConversionError as exc:
            self._not_an_update(body, exc, turn)
            return 0, standing
        sequencer = self.sequencer
        verdict = sequencer.check_source(msg.source_seq, max_gap=self._max_gap)
        rejects = self.rejects
        if rejects.holding:
            if rejects.continues(msg.source_seq):
                if rejects.hold(msg, body) < self._jump_confirm:
                    return 0, standing
                return (yield from self._believe_jump(standing, turn))
            rejects.refuse_jump(msg.source_seq, turn)
            verdict = sequencer.check_source(msg.source_seq, max_gap=self._max_gap)
        if verdict is SourceVerdict.DUPLICATE:
            self.counters.duplicates += 1
            self.ledger.placed_nowhere()
            return 0, standing
        if verdict is SourceVerdict.JUMP:
            rejects.hold(msg, body)
            if self._jump_confirm > 1:
                return 0, standing
            return (yield from self._believe_jump(standing, turn))
        if verdict is SourceVerdict.GAP:
            # No packet spans a gap: what came before it can be confirmed (or dropped) apart
            # from what follows, and the group may be asked about it with nothing half-sent.
            turn.out += self.seal(standing.term, turn)
            gap = Gap(sequencer.next_source_seq, msg.source_seq - 1)
            reply = yield GapFound(gap, jump=False)
            standing = reply.standing
            if reply.hold:
                self.waiting.holding_gap = gap
                return _HOLD, standing
            self.counters.source_gaps += 1
            self.ledger.gap(gap.first, gap.last)
        return (yield from self._accept(msg, body, standing, turn))

    def _accept(
        self, msg: SourceMessage, body: bytes, standing: Standing, turn: Turn
    ) -> Generator[Interrupt, Reply, tuple[int, Standing]]:
        adopt, later = self.adoption.due(msg.source_seq)
        try:
            staged = self.state.stage(msg)  # every symbol the message touches (fix44: several)
            if adopt is not None:
                staged = {symbol: adopt.symbols.get(symbol, values) for symbol, values in staged.items()}
            payload = self.engine.encode_staged(msg, staged, turn.wall_ns)
            if len(payload) > wire.MAX_PAYLOAD:
                raise ConversionError(
                    "oversize", f"payload of {len(payload)} bytes exceeds {wire.MAX_PAYLOAD}"
                )
        except ConversionError as exc:
            self.rejects.unconvertible(body, exc, turn, source_seq=msg.source_seq, accounted=True)
            return 0, standing
        if adopt is not None:
            standing = yield from self._adopt(adopt)
        else:
            self.state.commit(staged)
        standing = yield from self._number(msg, payload, standing, turn)
        if later is not None:
            standing = yield from self._adopt(later)
        return 1, standing

    def _adopt(self, snapshot: syncbus.Snapshot) -> Generator[Interrupt, Reply, Standing]:
        self.adoption.adopt(snapshot)
        reply = yield Adopted(snapshot)
        return reply.standing

    def _number(
        self, msg: SourceMessage, payload: bytes, standing: Standing, turn: Turn
    ) -> Generator[Interrupt, Reply, Standing]:
        sequencer, emitter = self.sequencer, self.emitter
        if msg.source_seq == sequencer.last_source_seq:
            self.ledger.retook()  # a good copy of a garbled message that had taken this position
        self.ledger.passed()
        expected = sequencer.next_msg_seq
        msg_seq = sequencer.assign(msg.source_seq)
        check = sequencer.record(msg.source_seq, msg_seq, self.state.digest)
        self.counters.numbered += 1
        if msg_seq != expected and standing.publishing and not emitter.gate.is_open:
            # Rule 2 moved our counter: what we numbered since the last confirmation was
            # numbered wrong. It waited at the gate, so it is dropped unseen.
            emitter.unpublish()
        if standing.publishing:
            turn.out += emitter.add(
                msg_seq, msg.source_seq, payload, term=standing.term, now=turn.now, time_ns=turn.wall_ns
            )
        if check is None:
            return standing
        return (yield from self._reached([(msg.source_seq, check)], standing, turn))

    def reached(self, reached: list[tuple[int, ArrivalCheck]], standing: Standing, turn: Turn) -> Conversion:
        """Positions the active had reported, which a run of the source pump reached: their checks."""
        yield from self._reached(reached, standing, turn)
        return 0

    def _reached(
        self, reached: list[tuple[int, ArrivalCheck]], standing: Standing, turn: Turn
    ) -> Generator[Interrupt, Reply, Standing]:
        # The sync rules' check of a reported position, right after the message there got its
        # msg_seq and before the next one is converted: a backup may start or stop publishing
        # at the very next message.
        for at, check in reached:
            if not standing.backup:
                break
            if check.digest_matches:
                turn.out += self.emitter.confirm(at)
            else:
                self.emitter.unpublish()  # this message carries the wrong state too
            reply = yield Arrived(at, check)
            standing = reply.standing
        return standing

    # ---- positions: jumps, resets, what cannot be converted ---------------------------------

    def _believe_jump(
        self, standing: Standing, turn: Turn
    ) -> Generator[Interrupt, Reply, tuple[int, Standing]]:
        # Enough consecutive messages continue the jump: the source really moved on, for
        # everybody (every adapter holds the same messages and believes at the same one).
        held = self.rejects.take_held()
        first = held[0][0].source_seq
        turn.out += self.seal(standing.term, turn)
        reply = yield GapFound(Gap(self.sequencer.next_source_seq, first - 1), jump=True)
        standing = reply.standing
        self.counters.source_gaps += 1
        self.ledger.gap(self.sequencer.next_source_seq, first - 1, "jump")
        self.sequencer.skip_source(first - 1)
        converted = 0
        for msg, body in held:
            done, standing = yield from self._accept(msg, body, standing, turn)
            converted += done
        return converted, standing

    def _not_an_update(self, body: bytes, exc: ConversionError, turn: Turn) -> None:
        try:
            reset = self.engine.decode_reset(body)
        except fix.FixError as bad:
            self.rejects.unconvertible(body, ConversionError("bad_sequence_reset", str(bad)), turn)
            return
        if reset is None and exc.reason == SKIPPED:
            self.rejects.skipped(body, turn)
            return
        if reset is None:
            self.rejects.unconvertible(body, exc, turn)
            return
        source_seq, new_seq = reset
        verdict = self.sequencer.check_source(source_seq, max_gap=self._max_gap)
        if verdict is SourceVerdict.DUPLICATE:
            self.counters.duplicates += 1
            self.ledger.placed_nowhere()
        elif verdict is SourceVerdict.JUMP or new_seq <= source_seq:
            last = self.sequencer.last_source_seq
            why = f"SequenceReset 34={source_seq} 36={new_seq} after source_seq {last}"
            self.rejects.unconvertible(
                body, ConversionError("bad_sequence_reset", why), turn, source_seq=source_seq
            )
        else:
            # The explicit way a source moves its numbering: every adapter moves alike.
            self.rejects.refuse_jump(source_seq, turn)
            self.counters.source_resets += 1
            self.rejects.book_reset(body, source_seq, new_seq)
            self.sequencer.skip_source(new_seq - 1)

    # ---- waiting: session fences and gaps ----------------------------------------------------

    @property
    def is_checking_jump(self) -> bool:
        """Whether a suspect source_seq jump is held until confirmed (no boundary is proposed then)."""
        return self.rejects.holding

    def at_fence(self) -> bool:
        """Whether everything up to the fence is converted (the next message waits, or none came)."""
        return self.waiting.at_fence(self.sequencer.last_source_seq)

    def release_gap(self, standing: Standing, turn: Turn) -> Conversion:
        """The group answered about the gap we hold at: convert what waited."""
        return (yield from self._refeed(self.waiting.release_gap(), standing, turn))

    def hold_at(self, after: int, standing: Standing, turn: Turn) -> Conversion:
        """Convert nothing past source position ``after`` until :meth:`commit` or :meth:`unfence`."""
        return (yield from self._refeed(self.waiting.hold_at(after), standing, turn))

    def commit(self, boundary: Boundary, standing: Standing, turn: Turn) -> Conversion:
        """Roll into ``boundary.started`` right after its fence: now if there, else on reaching it."""
        if not self.waiting.commit(boundary, self.sequencer.last_source_seq):
            return 0
        standing = yield from self._roll(standing, turn)
        return (yield from self._refeed(self.waiting.take(), standing, turn))

    def unfence(self, standing: Standing, turn: Turn) -> Conversion:
        """The boundary was withdrawn (or will not be carried out here): convert what waited."""
        return (yield from self._refeed(self.waiting.unfence(), standing, turn))

    def abandon(self, standing: Standing, turn: Turn) -> Conversion:
        """Forget a boundary this adapter can no longer carry out where the group did."""
        return (yield from self._refeed(self.waiting.abandon(), standing, turn))

    def _refeed(self, data: bytes, standing: Standing, turn: Turn) -> Conversion:
        # What waited goes through the pipeline again (and waits again at a new fence).
        if not data:
            return 0
        return (yield from self.convert(data, standing, turn))

    def _past_fence(self, frame: bytes, pos: int) -> bool:
        body, _end = self.engine.next_message(frame, pos)
        if body is None:
            return False  # malformed bytes: skipped the same way on every adapter, boundary or not
        try:
            return self.engine.peek_seq(body) > (self.waiting.fence or 0)
        except ConversionError:
            return False

    def _roll(self, standing: Standing, turn: Turn) -> Generator[Interrupt, Reply, Standing]:
        # The boundary: what was numbered before goes out first, then the state rolls and the
        # end-of-session block takes the next msg_seq, on the line and in the journal alike.
        boundary = self.waiting.take_roll()
        turn.out += self.seal(standing.term, turn)
        self.state.roll(boundary.started)
        sequencer = self.sequencer
        msg_seq = sequencer.next_msg_seq
        sequencer.next_msg_seq = msg_seq + 1
        if standing.publishing:
            payload = encode_session_boundary(
                ended=boundary.ended,
                started=boundary.started,
                boundary_time_ns=boundary.time_ns,
                reason=int(boundary.reason),
                publish_time_ns=turn.wall_ns,
            )
            turn.out += self.emitter.end_of_session(
                msg_seq, boundary.after_source_seq, payload, session=boundary.started,
                flags=RECORD_SESSION_BOUNDARY, term=standing.term, now=turn.now, time_ns=turn.wall_ns,
            )  # fmt: skip
        reply = yield Rolled(boundary, msg_seq)
        return reply.standing

    # ---- fault injection ------------------------------------------------------------------

    def corrupt(self, delta: int) -> None:
        """Fault injection: add ``delta`` to every symbol's volume (the sync rules must repair it)."""
        for symbol, values in self.state.snapshot().items():
            values.volume += delta
            self.state.set_symbol(symbol, values)
        self.sequencer.restate_digests({self.sequencer.last_recorded_source_seq: self.state.digest})
