"""What the adapter numbered, on its way out: packets on the line and records in the journal, behind the gate.

Theory of operation
-------------------
:class:`LineEmitter` is the last stage of the source path. Numbered messages
go into the packet being filled (:class:`~adapter.core.output.LineOutput`);
a sealed packet, and the journal records of the same messages, pass the
:class:`~adapter.core.gate.OutputGate` -- at once for the active, once the
active's reports confirm them for a backup -- and come out as
:class:`~adapter.core.actions.Publish` and
:class:`~adapter.core.actions.JournalRecords` actions, returned to the caller.
The journal holds exactly what the line carried.

A journal write can fail after the messages were numbered (the runner carries
the records out; the disk is full). Those numbers then stay off this line
(:meth:`LineEmitter.refuse`): the packet being filled is dropped if it carries
one, and a packet at the gate that carries one is dropped as it comes out. The
other adapters' lines carry them.

A backup whose state is suspect (it missed source messages the active has)
keeps nothing for the gate: a later report could match a state the missed
messages no longer show (a quote overwritten, a session's daily fields started
again) and so confirm output that carried the wrong state. What it numbers
meanwhile the other lines carry; it publishes again from a snapshot that
covers the gap. Pure: times come in as arguments.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from feedha.adapter.core.actions import Action, Publish
from feedha.adapter.core.gate import OutputGate
from feedha.adapter.core.journaling import JournalPlan
from feedha.adapter.core.output import LineOutput

__all__ = ["LineEmitter"]


@dataclass(frozen=True, slots=True)
class _Records:
    """Messages to journal once they are published (the journal holds what the line carried)."""

    first_msg_seq: int
    time_ns: int
    source_seqs: Sequence[int]
    payloads: Sequence[bytes]
    flags: int = 0
    session: int = 0  # the session a boundary record begins


@dataclass(frozen=True, slots=True)
class _Packet:
    """A sealed packet on its way out, the last msg_seq it carries, and (the source pump's)
    the journal records of its messages, journaled as it goes out."""

    data: bytes
    last_msg_seq: int
    count: int
    records: _Records | None = None


_Item = _Packet | _Records

REFUSALS_KEPT: Final = 16  # refused ranges remembered (an adapter fails itself after a few faults)


class LineEmitter:
    """The packet being filled, the gate, and the journal plan of one adapter.

    Args:
        output: the line's packets.
        journal: what to journal (``None``: no journal).
        source_stream: the source stream number written in every block.
    """

    def __init__(self, output: LineOutput, journal: JournalPlan | None, *, source_stream: int) -> None:
        self.output = output
        self.journal = journal
        self.gate: OutputGate[_Item] = OutputGate()
        self.published_msg_seq = 0  # the last msg_seq this adapter's line carried (or its journal holds)
        self.published = 0  # messages that went out on the line (past the gate, not dropped on purpose)
        self.suspect_after: int | None = None  # a backup's state is suspect after this source position
        self._source_stream = source_stream
        self._packet_upto = 0  # the last source_seq in the packet being filled
        self._packet_last = 0  # its last msg_seq
        self._refused: deque[tuple[int, int]] = deque(maxlen=REFUSALS_KEPT)  # (first, last) msg_seq
        self.refused_packets = 0  # packets kept off the line: they carried a message the journal refused

    def __repr__(self) -> str:
        return f"<LineEmitter [{self.output!r}, {self.gate!r}, published={self.published_msg_seq}]>"

    # ---- filling ----------------------------------------------------------------------

    def add(
        self, msg_seq: int, source_seq: int, payload: bytes, *, term: int, now: float, time_ns: int
    ) -> list[Action]:
        """One numbered message; returns what goes out (the packet before it, if it was full)."""
        out = [] if self.output.fits(len(payload)) else self.seal(term=term, now=now, time_ns=time_ns)
        self.output.add(msg_seq, self._source_stream, source_seq, payload)
        self._packet_upto, self._packet_last = source_seq, msg_seq
        if self.journal is not None:
            out += self._journal(msg_seq, time_ns, (source_seq,), (payload,))
        return out

    def add_run(
        self,
        first_msg_seq: int,
        first_source_seq: int,
        count: int,
        blocks: bytes,
        payloads: list[bytes] | None,
        *,
        time_ns: int,
    ) -> list[Action]:
        """A run the engine converted: ``count`` blocks back to back (and their payloads, to journal)."""
        self.output.add_blocks(first_msg_seq, count, blocks)
        last_source = first_source_seq + count - 1
        self._packet_upto, self._packet_last = last_source, first_msg_seq + count - 1
        if payloads is None:
            return []
        return self._journal(first_msg_seq, time_ns, range(first_source_seq, last_source + 1), payloads)

    def admit_records(
        self, first_msg_seq: int, time_ns: int, first_source_seq: int, payloads: list[bytes]
    ) -> list[Action]:
        """Journal records of a run the source pump numbered (``HOLD``): they pass the gate as
        :meth:`add_run`'s do."""
        last_source = first_source_seq + len(payloads) - 1
        return self._journal(first_msg_seq, time_ns, range(first_source_seq, last_source + 1), payloads)

    def admit_packet(
        self,
        packet: bytes,
        last_msg_seq: int,
        count: int,
        upto: int,
        records: tuple[int, int, int, list[bytes]] | None = None,
    ) -> list[Action]:
        """A packet the source pump sealed (``HOLD``), covering source positions up to ``upto``:
        it passes the gate as :meth:`seal`'s do.

        ``records`` -- ``(first_msg_seq, time_ns, first_source_seq, payloads)`` -- are the
        journal records of the messages it carries, ending at ``last_msg_seq`` (only the pump's
        caller knows they do): they wait at the gate in one item with the packet, and go out
        with it, journaled first, as the two items :meth:`admit_records` and this would make
        without them (the same position, one after the other), for half the calls on a
        publishing backup's busiest path.
        """
        if records is None:
            return self._admit(_Packet(packet, last_msg_seq, count), upto, len(packet))
        if self.journal is None:
            raise ValueError("records given for a packet but the adapter journals nothing")
        first_msg_seq, time_ns, first_source_seq, payloads = records
        if first_msg_seq + len(payloads) - 1 != last_msg_seq:
            raise ValueError(
                f"records {first_msg_seq}+{len(payloads)} do not end at the packet's {last_msg_seq}"
            )
        source_seqs = range(first_source_seq, first_source_seq + len(payloads))
        journaled = _Records(first_msg_seq, time_ns, source_seqs, payloads)
        size = len(packet) + (sum(map(len, payloads)) if not self.gate.is_open else 0)
        return self._admit(_Packet(packet, last_msg_seq, count, journaled), upto, size)

    def end_of_session(
        self, msg_seq: int, after: int, payload: bytes, *, session: int, flags: int, term: int, now: float,
        time_ns: int,
    ) -> list[Action]:  # fmt: skip
        """The end-of-session block: a packet of its own, and a boundary record."""
        packet = self.output.end_of_session(
            msg_seq, self._source_stream, after, payload, term=term, now=now, send_time_ns=time_ns
        )
        out = self._admit(_Packet(packet, msg_seq, 0), after, len(packet))
        if self.journal is not None:
            records = _Records(msg_seq, time_ns, (after,), (payload,), flags, session)
            out += self._admit(records, after, len(payload))
        return out

    def seal(self, *, term: int, now: float, time_ns: int) -> list[Action]:
        """Close the packet being filled, if any: it goes out, or waits at the gate."""
        count = self.output.pending
        packet = self.output.seal(term=term, now=now, send_time_ns=time_ns)
        if packet is None:
            return []
        return self._admit(_Packet(packet, self._packet_last, count), self._packet_upto, len(packet))

    # ---- the gate ---------------------------------------------------------------------

    def confirm(self, upto: int) -> list[Action]:
        """The active confirmed our numbering up to source position ``upto``: what waited goes out."""
        return self._actions(self.gate.confirm(upto))

    def release(self, *, provisional: bool) -> list[Action]:
        """Everything the gate holds goes out (promoted; or the active is silent: ``provisional``)."""
        return self._actions(self.gate.release_all(provisional=provisional))

    def open(self) -> list[Action]:
        """This adapter is the active now: nothing waits any more (and its state is the channel's)."""
        self.suspect_after = None
        return self._actions(self.gate.open())

    def close(self, *, confirmed: int, trusted: bool) -> None:
        """This adapter is a backup now: what follows ``confirmed`` waits for the active's word."""
        self.gate.close(confirmed=confirmed, trusted=trusted)

    def unpublish(self) -> None:
        """Drop the packet being filled and what the gate holds (numbered wrong, or not publishing)."""
        self.output.discard()
        self.gate.discard()

    def distrust(self, after: int) -> None:
        """We missed source messages after ``after``: what we numbered since is dropped, nothing more kept.

        What was numbered up to ``after`` may still be confirmed (no packet spans a gap).
        """
        self.output.discard()
        self.gate.discard_after(after)
        if self.suspect_after is None or after < self.suspect_after:
            self.suspect_after = after

    def trust_from(self, at: int) -> None:
        """A snapshot of the active's state at ``at`` covers a gap at or before it."""
        if self.suspect_after is not None and at >= self.suspect_after:
            self.suspect_after = None

    def refuse(self, first_msg_seq: int, last_msg_seq: int) -> None:
        """The journal failed to write these messages: no packet that carries one goes out.

        The journal is written before the line (a packet's records go out before it, or with
        it), so a packet that carries them is the one being filled or one still at the gate.
        """
        self._refused.append((first_msg_seq, last_msg_seq))
        pending = self.output.pending
        if pending and self._packet_last - pending + 1 <= last_msg_seq and first_msg_seq <= self._packet_last:
            self.output.discard()
            self.refused_packets += 1

    def may_heartbeat(self, last_recorded: int) -> bool:
        """Whether an idle-line heartbeat may announce our next msg_seq (it is the active's too)."""
        gate = self.gate
        return gate.passes or (not gate.held and last_recorded <= gate.confirmed)

    # ---- plumbing ---------------------------------------------------------------------

    def _journal(
        self, first_msg_seq: int, time_ns: int, source_seqs: Sequence[int], payloads: Sequence[bytes]
    ) -> list[Action]:
        # Journaled once published: through the gate, with the packets.
        size = sum(map(len, payloads)) if not self.gate.is_open else 0
        return self._admit(_Records(first_msg_seq, time_ns, source_seqs, payloads), source_seqs[-1], size)

    def _admit(self, item: _Item, upto: int, size: int) -> list[Action]:
        if self.suspect_after is not None:
            self.gate.counters.discarded += 1
            return []
        return self._actions(self.gate.admit(item, upto, size))

    def _actions(self, items: list[_Item]) -> list[Action]:
        out: list[Action] = []
        for item in items:
            if type(item) is _Packet:
                if self._refused and self._carries_refused(item):
                    self.refused_packets += 1
                    continue
                if item.records is not None:
                    self._journaled(item.records, out)
                out.append(Publish(item.data))
                self.published_msg_seq = item.last_msg_seq
                self.published += item.count
                continue
            assert isinstance(item, _Records)
            self._journaled(item, out)
        return out

    def _carries_refused(self, item: _Packet) -> bool:
        # Ranges the packets have gone past are forgotten: packets go out in msg_seq order.
        refused, last = self._refused, item.last_msg_seq
        first = last - max(item.count, 1) + 1  # an end-of-session packet carries one block, counted 0
        while refused and refused[0][1] < first:
            refused.popleft()
        return any(low <= last and first <= high for low, high in refused)

    def _journaled(self, item: _Records, out: list[Action]) -> None:
        assert self.journal is not None
        records = self.journal.records(
            item.first_msg_seq,
            item.time_ns,
            item.source_seqs,
            item.payloads,
            item.flags,
            session=item.session,
        )
        if records is not None:
            out.append(records)
