"""The source path of the adapter core: frames in, numbered and packed messages out.

Theory of operation
-------------------
:class:`Pipeline` converts a source frame a *run* at a time through the
conversion engine (:mod:`adapter.conversion.engine`): every ordinary message
before the next watched position (:meth:`Pipeline.stop_position`) is parsed,
applied, numbered, encoded into the line's packet and journaled in one engine
call. The one message a run stops at takes the careful path
(:meth:`Pipeline._careful`), which

* counts and skips what cannot be converted or does not fit a block -- the
  same way on every adapter of the group, so numbering stays identical (a
  skipped message gets no ``msg_seq``) -- and never changes the state for it;
* drops duplicates and reports source gaps to the sync rules;
* adopts a pending snapshot exactly at its position;
* numbers the message, honouring a pending report of the active (rule 2),
  and reports the arrival check to the sync rules.

What a backup numbers waits in the :class:`~adapter.core.gate.OutputGate`
(packets and journal records alike) until the active's reports confirm its
numbering; the active's goes straight out.

Session boundaries (:mod:`adapter.core.session`): while the group agrees on
one, a *fence* stops conversion after a source position; the first message
past it and the rest of its frame wait (``deferred``) and the runner reads no
more source. Once the boundary is committed (:meth:`Pipeline.commit`) the
pipeline rolls right after the fence -- the state's daily fields start
again, the end-of-session block takes the next msg_seq -- and converts what
waited.

What the sync rules decide (whether this adapter publishes, its term) comes
from the core through the :class:`SyncPort` it passes in, and the events the
pipeline raises go back through it at once: an arrival check can make a
backup start publishing at the very next message. Pure: the time comes in
with each call.
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Final, Protocol

from feedha.adapter.conversion.codec import encode_session_boundary
from feedha.adapter.conversion.engine import ConversionEngine, Stop
from feedha.adapter.conversion.messages import SourceMessage
from feedha.adapter.conversion.parser import peek_source_seq
from feedha.adapter.core import syncbus
from feedha.adapter.core.actions import Action, Publish, Quarantine
from feedha.adapter.core.config import RING_SIZE
from feedha.adapter.core.gaps import Gap
from feedha.adapter.core.gate import OutputGate
from feedha.adapter.core.journaling import JournalPlan
from feedha.adapter.core.output import UNBOUNDED_ROOM, LineOutput
from feedha.adapter.core.ring import SourceRing
from feedha.adapter.core.sequencer import Sequencer, SourceVerdict
from feedha.adapter.core.session import RECORD_SESSION_BOUNDARY, Boundary
from feedha.adapter.core.sync_types import ArrivalChecked, SnapshotAdopted, SyncEvent
from feedha.adapter.errors import ConversionError
from feedha.proto import fix, wire

logger = logging.getLogger(__name__)

__all__ = ["Pipeline", "PipelineCounters", "SyncPort"]

UNBOUNDED_COUNT: Final = 1 << 30
HOLD: Final = -1  # _careful: the message waits (the group is asked about a gap before it)
QUARANTINE_DATA_BYTES: Final = 4096  # what is kept of one quarantined message or stretch


@dataclass(frozen=True, slots=True)
class _Packet:
    """A sealed packet on its way out, and the last msg_seq it carries."""

    data: bytes
    last_msg_seq: int
    count: int


@dataclass(frozen=True, slots=True)
class _Records:
    """Messages to journal once they are published (the journal holds what the line carried)."""

    first_msg_seq: int
    time_ns: int
    source_seqs: Sequence[int]
    payloads: Sequence[bytes]
    flags: int = 0
    session: int = 0  # the session a boundary record begins


class SyncPort(Protocol):
    """What the pipeline needs of the sync rules (the core provides it)."""

    @property
    def is_publishing(self) -> bool: ...
    @property
    def is_backup(self) -> bool: ...
    @property
    def term(self) -> int: ...
    def apply(self, event: SyncEvent) -> None: ...
    def on_gap(self, gap: Gap, *, jump: bool) -> bool: ...
    def session_rolled(self, boundary: Boundary, msg_seq: int) -> None: ...
    def session_adopted(self, snapshot: syncbus.Snapshot) -> None: ...


@dataclass(slots=True)
class PipelineCounters:
    """What the source path has counted since start."""

    published: int = 0  # messages that went out on the line (past the gate, not dropped on purpose)
    numbered: int = 0  # messages that got a msg_seq, published or not
    malformed_frames: int = 0
    malformed_messages: int = 0
    conversion_errors: int = 0
    internal_errors: int = 0
    duplicates: int = 0
    source_gaps: int = 0
    source_resets: int = 0
    snapshots_adopted: int = 0
    quarantined: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["quarantined"] = dict(self.quarantined)
        return values

    @property
    def errors(self) -> int:
        """Everything the source sent that could not be used, and every fault handling it."""
        return self.malformed_frames + self.malformed_messages + self.conversion_errors + self.internal_errors


class Pipeline:
    """Source frames -> numbered messages on the line and in the journal.

    Args:
        engine: the conversion engine (it owns the conversion state).
        output: the line's packets.
        journal: what to journal (``None``: no journal).
        source_stream: the source stream number written in every block.
        sync: the sync rules' side.
        max_source_gap: missing messages beyond which a gap is a suspect jump.
        jump_confirm: consecutive messages (the jump included) that confirm a jump.
    """

    def __init__(
        self,
        engine: ConversionEngine,
        output: LineOutput,
        journal: JournalPlan | None,
        *,
        source_stream: int,
        sync: SyncPort,
        max_source_gap: int,
        jump_confirm: int,
    ) -> None:
        self.engine = engine
        self.state = engine.state
        self.sequencer = Sequencer()
        self.output = output
        self.journal = journal
        self.counters = PipelineCounters()
        self.gate: OutputGate[_Packet | _Records] = OutputGate()
        self.published_msg_seq = 0  # the last msg_seq this adapter's line carried (or its journal holds)
        self.pending_snapshot: syncbus.Snapshot | None = None
        self.fence: int | None = None  # convert nothing past this source position (a boundary is agreed)
        self.deferred = b""  # the first message past the fence (or a gap) and the rest of its frame
        self.holding_gap: Gap | None = None  # the active asks its backups about this gap first
        self.pending_roll: Boundary | None = None  # committed: roll on reaching the fence
        self.suspect_after: int | None = None  # a backup's state is suspect after this source position
        self._source_stream = source_stream
        self._sync = sync
        self._run = engine.run_function()
        self._ring = SourceRing(RING_SIZE)
        self._max_gap = max_source_gap
        self._jump_confirm = jump_confirm
        self._held: list[tuple[SourceMessage, bytes]] = []  # a suspect jump, until confirmed
        self._reported: set[str] = set()  # quarantine reasons already logged
        self._packet_upto = 0  # the last source_seq in the packet being filled
        self._packet_last = 0  # its last msg_seq
        self._out: list[Action] = []
        self._now = 0.0
        self._wall_ns = 0

    def __repr__(self) -> str:
        return f"<Pipeline [{self.sequencer!r}, {self.output!r}, engine={type(self.engine).__name__}]>"

    def on_frame(self, frame: bytes, *, now: float, wall_ns: int, out: list[Action]) -> int:
        """Convert one source frame; actions go to ``out``. Returns how many messages got a msg_seq."""
        self._now, self._wall_ns, self._out = now, wall_ns, out
        try:
            converted = self._convert(frame)
        except Exception as exc:  # a bug must cost one frame, never the process
            self.counters.internal_errors += 1
            logger.exception("internal error converting a source frame of %d bytes", len(frame))
            self.quarantine("internal_error", None, repr(exc), frame)
            return 0
        if converted:
            self._ring.add(frame, converted)
        return converted

    def quarantine(self, reason: str, source_seq: int | None, detail: str, data: bytes) -> None:
        """Count, log (once per reason) and keep a skipped source message."""
        quarantined = self.counters.quarantined
        quarantined[reason] = quarantined.get(reason, 0) + 1
        if reason not in self._reported:
            self._reported.add(reason)
            logger.warning(
                "quarantined (%s) at source_seq %s: %s (logged once per kind)", reason, source_seq, detail
            )
        self._out.append(Quarantine(reason, source_seq, detail, data[:QUARANTINE_DATA_BYTES], len(data)))

    def seal(self, *, now: float, wall_ns: int, out: list[Action]) -> None:
        """Close the packet being filled, if any, and send it (or hold it at the gate)."""
        count = self.output.pending
        packet = self.output.seal(term=self._sync.term, now=now, send_time_ns=wall_ns)
        if packet is not None:
            self._out = out
            item = _Packet(packet, self._packet_last, count)
            self._admit(item, self._packet_upto, len(packet))

    def _admit(self, item: _Packet | _Records, upto: int, size: int) -> None:
        # A backup whose state is suspect (it missed source messages) keeps nothing for
        # the gate: a later report could match a state the missed messages no longer
        # show (a quote overwritten, a session's daily fields started again) and so
        # confirm output that carried the wrong state. What it numbers meanwhile the
        # other lines carry; it publishes again from a snapshot that covers the gap.
        if self.suspect_after is not None:
            self.gate.counters.discarded += 1
            return
        self.gate.admit(item, upto, size, self._emit)

    def distrust(self, after: int) -> None:
        """A backup missed source messages after source position ``after``: its state is suspect.

        What it numbered up to ``after`` may still be confirmed (no packet spans a gap);
        what followed is dropped, and nothing more is kept until a snapshot covers the gap.
        """
        self.output.discard()
        self.gate.discard_after(after)
        if self.suspect_after is None or after < self.suspect_after:
            self.suspect_after = after

    def _trust_from(self, at: int) -> None:
        # A snapshot of the state at ``at`` covers a gap at or before it.
        if self.suspect_after is not None and at >= self.suspect_after:
            self.suspect_after = None

    def confirm(self, upto: int, *, out: list[Action]) -> None:
        """The active confirmed our numbering up to source position ``upto``: release what waits."""
        self._out = out
        self.gate.confirm(upto, self._emit)

    def release(self, *, out: list[Action], provisional: bool) -> None:
        """Send everything the gate holds (promoted; or the active is silent: ``provisional``)."""
        self._out = out
        self.gate.release_all(self._emit, provisional=provisional)

    def open_gate(self, *, out: list[Action]) -> None:
        """This adapter is the active now: nothing waits any more (and its state is the channel's)."""
        self._out = out
        self.suspect_after = None
        self.gate.open(self._emit)

    def unpublish(self) -> None:
        """Drop the packet being filled and what the gate holds (numbered wrong, or not publishing)."""
        self.output.discard()
        self.gate.discard()

    def may_heartbeat(self) -> bool:
        """Whether an idle-line heartbeat may announce our next msg_seq (it is the active's too)."""
        gate = self.gate
        return gate.passes or (not gate.held and self.sequencer.last_recorded_source_seq <= gate.confirmed)

    def _emit(self, item: _Packet | _Records) -> None:
        if type(item) is _Packet:
            self._out.append(Publish(item.data))
            self.published_msg_seq = item.last_msg_seq
            self.counters.published += item.count
            return
        assert isinstance(item, _Records) and self.journal is not None
        records = self.journal.records(
            item.first_msg_seq,
            item.time_ns,
            item.source_seqs,
            item.payloads,
            item.flags,
            session=item.session,
        )
        if records is not None:
            self._out.append(records)

    def stop_position(self) -> int:
        """The lowest source position the sync rules watch (0: none); runs stop before it.

        A pending report of the active (rule 2 renumbers there, and the digest
        is checked) and a pending snapshot (adopted exactly there) need the
        careful path; everything else may go through the engine's runs.
        """
        if self._held:  # every next message must be looked at: does it confirm the jump?
            return self.sequencer.last_source_seq + 1
        watched = self.sequencer.first_pending()
        pending = self.pending_snapshot
        if pending is not None:
            watched = pending.source_seq if not watched else min(watched, pending.source_seq)
        if self.fence is not None:
            watched = self.fence + 1 if not watched else min(watched, self.fence + 1)
        return watched

    # ---- runs ---------------------------------------------------------------------------

    def _convert(self, frame: bytes) -> int:
        run, sequencer, output, sync, counters = (
            self._run,
            self.sequencer,
            self.output,
            self._sync,
            self.counters,
        )
        journaling = self.journal is not None
        pos = converted = 0
        while pos < len(frame):
            publishing = sync.is_publishing
            room, max_count = output.room() if publishing else (UNBOUNDED_ROOM, UNBOUNDED_COUNT)
            last = sequencer.last_source_seq
            # Encoded whether or not this adapter publishes (publish=True): a message
            # too big to publish must be skipped by every adapter of the group alike.
            pos, count, stop, blocks, first_seq, digests, payloads = run(
                frame,
                pos,
                last + 1 if last else 0,
                self.stop_position(),
                room,
                max_count,
                self._wall_ns,
                self._source_stream,
                True,
                publishing and journaling,
            )
            if count:
                converted += count
                counters.numbered += count
                first_msg_seq = sequencer.next_msg_seq
                sequencer.record_run(first_seq, first_msg_seq, digests)
                if publishing:
                    output.add_blocks(first_msg_seq, count, blocks)
                    self._packet_upto, self._packet_last = first_seq + count - 1, first_msg_seq + count - 1
                    if payloads is not None:
                        self._journal(
                            first_msg_seq, array("q", range(first_seq, first_seq + count)), payloads
                        )
            if stop == Stop.SLOW:
                if self.fence is not None and self._past_fence(frame, pos):
                    if self.pending_roll is None:
                        self.deferred = frame[pos:]  # waits until the boundary is settled
                        break
                    self._roll()  # committed: the message past the fence is the new session's
                    continue
                start = pos
                body, pos = fix.next_message(frame, pos)
                if body is None:
                    self._malformed(frame[start:pos])
                    continue
                done = self._careful(body)
                if done == HOLD:
                    self.deferred = frame[start:]  # converted again once the group answered
                    break
                converted += done
            elif stop != Stop.END:
                self.seal(now=self._now, wall_ns=self._wall_ns, out=self._out)  # the packet is full
        return converted

    # ---- session boundaries ------------------------------------------------------------------

    @property
    def is_checking_jump(self) -> bool:
        """Whether a suspect source_seq jump is held until confirmed (no boundary is proposed then)."""
        return bool(self._held)

    def at_fence(self) -> bool:
        """Whether everything up to the fence is converted (the next message waits, or none came)."""
        return (
            self.fence is not None
            and self.holding_gap is None
            and (bool(self.deferred) or self.sequencer.last_source_seq >= self.fence)
        )

    def release_gap(self, *, now: float, wall_ns: int, out: list[Action]) -> None:
        """The group answered about the gap we hold at: convert what waited."""
        if self.holding_gap is not None:
            self.holding_gap = None
            self._refeed(now=now, wall_ns=wall_ns, out=out)

    def hold_at(self, after: int, *, now: float, wall_ns: int, out: list[Action]) -> None:
        """Convert nothing past source position ``after`` until :meth:`commit` or :meth:`unfence`.

        A fence moved further on lets what waited go on up to it.
        """
        if self.pending_roll is not None:
            return
        raised = self.fence is not None and after > self.fence
        self.fence = after
        if raised:
            self._refeed(now=now, wall_ns=wall_ns, out=out)

    def commit(self, boundary: Boundary, *, now: float, wall_ns: int, out: list[Action]) -> bool:
        """Roll into ``boundary.started`` right after its fence: now if there, else on reaching it.

        Returns:
            Whether it rolled now.
        """
        self.fence, self.pending_roll = boundary.after_source_seq, boundary
        if not self.at_fence():
            return False
        self._now, self._wall_ns, self._out = now, wall_ns, out
        self._roll()
        self._refeed(now=now, wall_ns=wall_ns, out=out)
        return True

    def unfence(self, *, now: float, wall_ns: int, out: list[Action]) -> None:
        """The boundary was withdrawn (or will not be carried out here): convert what waited."""
        if self.pending_roll is None and self.fence is not None:
            self.fence = None
            self._refeed(now=now, wall_ns=wall_ns, out=out)

    def abandon(self, *, now: float, wall_ns: int, out: list[Action]) -> None:
        """Forget a boundary this adapter can no longer carry out where the group did."""
        self.pending_roll = self.fence = None
        self._refeed(now=now, wall_ns=wall_ns, out=out)

    def _refeed(self, *, now: float, wall_ns: int, out: list[Action]) -> None:
        # What waited at the fence goes through the pipeline again (and waits again at a new fence).
        data, self.deferred = self.deferred, b""
        if data:
            self.on_frame(data, now=now, wall_ns=wall_ns, out=out)

    def _past_fence(self, frame: bytes, pos: int) -> bool:
        body, _end = fix.next_message(frame, pos)
        if body is None:
            return False  # malformed bytes: skipped the same way on every adapter, boundary or not
        try:
            return peek_source_seq(body) > (self.fence or 0)
        except ConversionError:
            return False

    def _roll(self) -> None:
        # The boundary: what was numbered before goes out first, then the state rolls and the
        # end-of-session block takes the next msg_seq, on the line and in the journal alike.
        boundary = self.pending_roll
        assert boundary is not None
        self.pending_roll = self.fence = None
        self.seal(now=self._now, wall_ns=self._wall_ns, out=self._out)
        self.state.roll(boundary.started)
        sequencer = self.sequencer
        msg_seq = sequencer.next_msg_seq
        sequencer.next_msg_seq = msg_seq + 1
        if self._sync.is_publishing:
            payload = encode_session_boundary(
                ended=boundary.ended,
                started=boundary.started,
                boundary_time_ns=boundary.time_ns,
                reason=int(boundary.reason),
                publish_time_ns=self._wall_ns,
            )
            stream, after = self._source_stream, boundary.after_source_seq
            packet = self.output.end_of_session(
                msg_seq,
                stream,
                after,
                payload,
                term=self._sync.term,
                now=self._now,
                send_time_ns=self._wall_ns,
            )
            self._admit(_Packet(packet, msg_seq, 0), after, len(packet))
            if self.journal is not None:
                records = _Records(
                    msg_seq, self._wall_ns, (after,), (payload,), RECORD_SESSION_BOUNDARY, boundary.started
                )
                self._admit(records, after, len(payload))
        self._sync.session_rolled(boundary, msg_seq)

    # ---- one message at a time ------------------------------------------------------------

    def _careful(self, body: bytes) -> int:
        """Take one message through the careful path; 1 if it got a msg_seq."""
        try:
            msg = self.engine.parse(body)
        except ConversionError as exc:
            return self._not_an_update(body, exc)
        sequencer = self.sequencer
        verdict = sequencer.check_source(msg.source_seq, max_gap=self._max_gap)
        if self._held:
            if msg.source_seq == self._held[-1][0].source_seq + 1:
                self._held.append((msg, body))
                return self._believe_jump() if len(self._held) >= self._jump_confirm else 0
            self._refuse_jump(msg.source_seq)
            verdict = sequencer.check_source(msg.source_seq, max_gap=self._max_gap)
        if verdict is SourceVerdict.DUPLICATE:
            self.counters.duplicates += 1
            return 0
        if verdict is SourceVerdict.JUMP:
            self._held.append((msg, body))
            return self._believe_jump() if self._jump_confirm <= 1 else 0
        if verdict is SourceVerdict.GAP:
            # No packet spans a gap: what came before it can be confirmed (or dropped) apart
            # from what follows, and the group may be asked about it with nothing half-sent.
            self.seal(now=self._now, wall_ns=self._wall_ns, out=self._out)
            gap = Gap(sequencer.next_source_seq, msg.source_seq - 1)
            if self._sync.on_gap(gap, jump=False):
                self.holding_gap = gap
                return HOLD
            self.counters.source_gaps += 1
        return self._accept(msg, body)

    def _malformed(self, stretch: bytes) -> None:
        # Bytes that are no FIX message. If the header still names the next source position,
        # every adapter takes that position as used (quarantined alike: no gap for anyone);
        # a well-formed copy of it that comes next is still taken.
        self.counters.malformed_messages += 1
        seq = fix.find_seq_num(stretch)
        held = self._held
        if seq is not None and held and seq != held[-1][0].source_seq + 1:
            self._refuse_jump(seq)
        last = self.sequencer.last_source_seq
        if seq is not None and last and seq == last + 1 and not self._held:
            self.sequencer.skip_source(seq, tentative=True)
        detail = f"{len(stretch)} bytes that are no FIX message"
        self.quarantine("malformed_fix", seq, detail, stretch)

    def _accept(self, msg: SourceMessage, body: bytes) -> int:
        pending = self.pending_snapshot
        adopt = pending if pending is not None and pending.source_seq == msg.source_seq else None
        # A snapshot taken right at a session boundary holds the next session's state:
        # this message is the last of the session before, so it is adopted after it.
        later = adopt if adopt is not None and _begins_at(adopt, msg.source_seq, self.state.session) else None
        if later is not None:
            adopt = None
        try:
            values = self.state.preview(msg)
            if adopt is not None:
                values = adopt.symbols.get(msg.symbol, values)
            payload = self.engine.encode(msg, values, self._wall_ns)
            if len(payload) > wire.MAX_PAYLOAD:
                raise ConversionError(
                    "oversize", f"payload of {len(payload)} bytes exceeds {wire.MAX_PAYLOAD}"
                )
        except ConversionError as exc:
            self._unconvertible(body, exc, source_seq=msg.source_seq, accounted=True)
            return 0
        if adopt is not None:
            self.pending_snapshot = None
            self.unpublish()  # what waits carries the state the snapshot replaces
            self._adopt(adopt)
        else:
            self.state.set_symbol(msg.symbol, values)
        self._number(msg, payload)
        if later is not None:
            self.pending_snapshot = None
            self.unpublish()
            self._adopt(later)
        return 1

    def _adopt(self, snapshot: syncbus.Snapshot) -> None:
        self._trust_from(snapshot.source_seq)
        self.state.restore(snapshot.symbols, session=snapshot.session or None)
        self.counters.snapshots_adopted += 1
        self._sync.session_adopted(snapshot)
        self._sync.apply(SnapshotAdopted(snapshot.source_seq))

    def _believe_jump(self) -> int:
        # Enough consecutive messages continue the jump: the source really moved on.
        # Every adapter holds the same messages and believes the jump at the same one: the
        # source moved on for everybody, so it is a common gap (no question to the group).
        held, self._held = self._held, []
        first = held[0][0].source_seq
        self.seal(now=self._now, wall_ns=self._wall_ns, out=self._out)
        self._sync.on_gap(Gap(self.sequencer.next_source_seq, first - 1), jump=True)
        self.counters.source_gaps += 1
        self.sequencer.skip_source(first - 1)
        return sum(self._accept(msg, body) for msg, body in held)

    def _refuse_jump(self, next_seq: int | None) -> None:
        # The stream went on where it was: the jump was one bad number, not a new position.
        # A held message stood in place of the next one when the stream resumes right after
        # the positions the held messages would have taken: every adapter counts them used.
        held, self._held = self._held, []
        last = self.sequencer.last_source_seq
        for msg, body in held:
            self.counters.conversion_errors += 1
            past = msg.source_seq - last - 1
            detail = f"source_seq {msg.source_seq} is {past} past {last} (max gap {self._max_gap})"
            self.quarantine("source_seq_jump", msg.source_seq, detail, body)
        if next_seq is not None and last < next_seq - 1 <= last + len(held):
            self.sequencer.skip_source(next_seq - 1)

    def _not_an_update(self, body: bytes, exc: ConversionError) -> int:
        try:
            reset = fix.decode_sequence_reset(body)
        except fix.FixError as bad:
            self._unconvertible(body, ConversionError("bad_sequence_reset", str(bad)))
            return 0
        if reset is None:
            self._unconvertible(body, exc)
            return 0
        source_seq, new_seq = reset
        verdict = self.sequencer.check_source(source_seq, max_gap=self._max_gap)
        if verdict is SourceVerdict.DUPLICATE:
            self.counters.duplicates += 1
        elif verdict is SourceVerdict.JUMP or new_seq <= source_seq:
            last = self.sequencer.last_source_seq
            why = f"SequenceReset 34={source_seq} 36={new_seq} after source_seq {last}"
            self._unconvertible(body, ConversionError("bad_sequence_reset", why), source_seq=source_seq)
        else:
            # The explicit way a source moves its numbering: every adapter moves alike.
            self._refuse_jump(source_seq)
            self.counters.source_resets += 1
            self.sequencer.skip_source(new_seq - 1)
        return 0

    def _number(self, msg: SourceMessage, payload: bytes) -> None:
        sequencer, gate = self.sequencer, self.gate
        expected = sequencer.next_msg_seq
        msg_seq = sequencer.assign(msg.source_seq)
        check = sequencer.record(msg.source_seq, msg_seq, self.state.digest)
        self.counters.numbered += 1
        publishing = self._sync.is_publishing
        if msg_seq != expected and publishing and not gate.is_open:
            # Rule 2 moved our counter: what we numbered since the last confirmation was
            # numbered wrong. It waited at the gate, so it is dropped unseen.
            self.unpublish()
        if publishing:
            if not self.output.fits(len(payload)):
                self.seal(now=self._now, wall_ns=self._wall_ns, out=self._out)
            self.output.add(msg_seq, self._source_stream, msg.source_seq, payload)
            self._packet_upto, self._packet_last = msg.source_seq, msg_seq
            if self.journal is not None:
                self._journal(msg_seq, (msg.source_seq,), (payload,))
        if check is not None and self._sync.is_backup:
            if check.digest_matches:
                gate.confirm(msg.source_seq, self._emit)
            else:
                self.unpublish()  # this message carries the wrong state too
            self._sync.apply(ArrivalChecked(check.renumbered, check.digest_matches))

    def _unconvertible(
        self, body: bytes, exc: ConversionError, *, source_seq: int | None = None, accounted: bool = False
    ) -> None:
        # Every adapter skips the same bytes the same way, so numbering stays aligned: a
        # quarantined message with a readable source_seq uses up its position like any.
        self.counters.conversion_errors += 1
        if source_seq is None:
            try:
                source_seq = peek_source_seq(body)
            except ConversionError:
                pass  # not even sequenced: nothing to account for
        self.quarantine(exc.reason, source_seq, str(exc), body)
        if source_seq is None:
            return
        if accounted:  # the careful path took this position already (the next, or past a gap)
            self.sequencer.skip_source(source_seq)
            return
        held = self._held
        if held and source_seq != held[-1][0].source_seq + 1:
            self._refuse_jump(source_seq)
        if self.sequencer.check_source(source_seq) is SourceVerdict.NEXT:
            self.sequencer.skip_source(source_seq)

    def _journal(self, first_msg_seq: int, source_seqs: Sequence[int], payloads: Sequence[bytes]) -> None:
        # Journaled once published: through the gate, with the packets.
        size = sum(len(p) for p in payloads) if not self.gate.is_open else 0
        records = _Records(first_msg_seq, self._wall_ns, source_seqs, payloads)
        self._admit(records, source_seqs[-1], size)

    # ---- snapshots and fault injection ------------------------------------------------------

    def on_snapshot(self, msg: syncbus.Snapshot) -> bool:
        """Adopt the active's snapshot (now, or when the source reaches it); True once adopted."""
        at, last = msg.source_seq, self.sequencer.last_source_seq
        if last < at:
            self.pending_snapshot = msg  # adopted when we reach ``at`` (see _careful)
            return False
        recorded = self.sequencer.is_recorded
        replay = self._ring.messages(self.engine.parse, after=at, upto=last, wanted=recorded)
        if replay and replay[0].source_seq != at + 1 and last > at:
            logger.info("snapshot at %d is older than our replay ring; waiting for a newer one", at)
            return False
        self.unpublish()  # what waits carries the state the snapshot replaces
        self._trust_from(at)
        self.state.restore(msg.symbols, session=msg.session or None)
        self._sync.session_adopted(msg)
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

    def corrupt(self, delta: int) -> None:
        """Fault injection: add ``delta`` to every symbol's volume (the sync rules must repair it)."""
        for symbol, values in self.state.snapshot().items():
            values.volume += delta
            self.state.set_symbol(symbol, values)
        self.sequencer.restate_digests({self.sequencer.last_recorded_source_seq: self.state.digest})


def _begins_at(snapshot: syncbus.Snapshot, source_seq: int, session: int) -> bool:
    """Whether ``snapshot`` is a session's state right at its boundary after ``source_seq``."""
    return (
        snapshot.session != session
        and snapshot.session_boundary_msg_seq != 0
        and snapshot.session_after_source_seq == source_seq
    )
