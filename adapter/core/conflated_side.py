"""The adapter core's conflated line: the group's interval boundaries, the book, and the line's packets.

:class:`AdapterCore` holds one :class:`ConflatedSide` and calls it from its
handlers; the protocol is :class:`~adapter.core.conflation.IntervalKeeper`'s,
the book :class:`~adapter.core.conflation.ConflationBook`'s, the bytes
:class:`~adapter.core.conflated_output.ConflatedOutput`'s
(docs/architecture.md, "Conflated lines"):

* every adapter feeds the book from the packets its real-time line carried
  (:meth:`ConflatedSide.observe`), so a backup's conflated line runs through
  the same output gate as its line;
* the active proposes a boundary every interval (:meth:`ConflatedSide.on_tick`),
  closes the interval at once, names its proposals in its reports
  (:meth:`ConflatedSide.report_fields`) and publishes an interval once every
  backup heard lately acknowledged it;
* a backup acknowledges what the active's report names
  (:meth:`ConflatedSide.on_report`) and publishes a committed interval once
  its line has carried the boundary's msg_seq;
* a promoted backup publishes every boundary it holds, then proposes.

An adapter without a conflated line still acknowledges (it holds nothing), so
the active never waits for it. Pure: the time and the core's figures come in.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Final

from google.protobuf.message import DecodeError

from feedha.adapter.core import syncbus
from feedha.adapter.core.actions import Action, Publish, PublishConflated, SendSync
from feedha.adapter.core.conflated_output import ConflatedOutput, Ref, note_packet
from feedha.adapter.core.conflation import Boundary, ConflationBook, Interval, IntervalKeeper
from feedha.adapter.core.sync_types import Peer, Role
from feedha.proto.wire import WireError

__all__ = ["ConflatedCounters", "ConflatedSide"]

logger = logging.getLogger(__name__)

MAX_OUTSTANDING: Final = 200  # proposals not yet committed before the active stops proposing


@dataclass(slots=True)
class ConflatedCounters:
    """What the conflated side has done since start (status and metrics)."""

    proposed: int = 0
    committed: int = 0
    intervals: int = 0  # intervals published
    skipped: int = 0  # intervals passed that this adapter's book could not cover
    partial: int = 0  # intervals the active published without covering them whole
    count_mismatches: int = 0  # a proposal's first conf_seq differed from this adapter's count
    undecodable: int = 0  # real-time packets that did not decode (never for our own)

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class ConflatedSide:
    """One adapter's part in the conflation protocol, and its conflated line when it has one.

    Args:
        interval_s: ``--conflate-interval`` (``None``: no conflated line; acknowledgements only).
        channel, adapter, max_packet_bytes, heartbeat_s: the line's packets (see :class:`ConflatedOutput`).
    """

    def __init__(
        self,
        interval_s: float | None,
        *,
        channel: int,
        adapter: int,
        max_packet_bytes: int,
        heartbeat_s: float,
    ) -> None:
        self.enabled = interval_s is not None
        self.keeper = IntervalKeeper(interval_s or 1.0)
        self.book: ConflationBook[Ref] = ConflationBook()
        self.output = ConflatedOutput(
            channel=channel, adapter=adapter, max_packet_bytes=max_packet_bytes, heartbeat_s=heartbeat_s
        )
        self.counters = ConflatedCounters()
        self.committed_k = 0  # the active: the last interval it committed
        self._held: dict[int, Interval[Ref]] = {}  # the active: closed, waiting for the acks
        self._last_seen = 0  # the last msg_seq the book was fed
        self._covered_after: int | None = None  # the book holds every change after this msg_seq
        self._closed_seq = 0  # the msg_seq of the last boundary this side closed or passed

    def __repr__(self) -> str:
        return (
            f"<ConflatedSide [enabled={self.enabled}, published_k={self.keeper.published_k}, "
            f"held={len(self._held)}, {self.output!r}]>"
        )

    # ---- the real-time line ------------------------------------------------------------

    def observe(self, actions: list[Action], start: int = 0) -> None:
        """Feed the book from the real-time packets among ``actions[start:]``."""
        if not self.enabled:
            return
        note = self.book.note
        for index in range(start, len(actions)):
            action = actions[index]
            if type(action) is not Publish:
                continue
            packet = action.packet
            first = int.from_bytes(packet[12:20], "big")  # the header's first msg_seq (proto.wire)
            if first > self._last_seen + 1 or self._covered_after is None:
                self._covered_after = first - 1  # a hole (or the start): covered from here
            try:
                last = note_packet(packet, note)
            except (WireError, DecodeError, IndexError):
                self.counters.undecodable += 1
                continue
            self._last_seen = max(self._last_seen, last)

    # ---- the active ----------------------------------------------------------------------

    def on_tick(
        self,
        *,
        role: Role,
        peers: Mapping[int, Peer],
        published_seq: int,
        now: float,
        wall_ns: int,
        term: int,
        peer_timeout_s: float,
    ) -> tuple[list[Action], bool]:
        """Publish what is due; the active proposes and commits. Returns the actions, whether it proposed."""
        out = self._due(published_seq, term=term, now=now)
        proposed = False
        if role is Role.ACTIVE and self.enabled and not self.keeper.committed:
            if len(self.keeper.proposed) < MAX_OUTSTANDING:
                boundary = self.keeper.tick(now=now, wall_ns=wall_ns, published_seq=published_seq)
                if boundary is not None:
                    self._propose(boundary)
                    proposed = True
            heard: dict[Hashable, float] = {
                number: peer.last_seen
                for number, peer in peers.items()
                if peer.role is Role.BACKUP and now - peer.last_seen <= peer_timeout_s
            }
            for done in self.keeper.commit(heard, now=now):
                self.counters.committed += 1
                self.committed_k = done.k
                out += self._publish(self._held.pop(done.k, None), term=term, now=now)
        if self.enabled and (packet := self.output.heartbeat(term=term, now=now, wall_ns=wall_ns)):
            out.append(PublishConflated(packet))
        return out, proposed

    def _propose(self, boundary: Boundary) -> None:
        self.counters.proposed += 1
        interval = self._close(boundary, active=True)
        if interval is None:
            interval = Interval(boundary, ())
        self.keeper.closed(interval)
        self._held[boundary.k] = interval

    def report_fields(self) -> tuple[tuple[Boundary, ...], int]:
        """The fields of the active's report: its open proposals and its last committed interval."""
        return tuple(self.keeper.proposed[: syncbus.MAX_CONFLATE_PROPOSED]), self.committed_k

    def on_ack(self, msg: syncbus.ConflateAck, *, now: float) -> None:
        """A backup's acknowledgement."""
        self.keeper.on_ack(msg.sender.adapter, msg.k, now=now)

    # ---- a backup -----------------------------------------------------------------------

    def on_report(
        self, msg: syncbus.StreamState, sender: syncbus.Sender, *, published_seq: int, now: float
    ) -> list[Action]:
        """The active's report: hold its proposals, acknowledge, publish what became due."""
        if not msg.conflate_proposed and not msg.conflate_committed_k:
            return []
        newest = self.keeper.on_report(msg.conflate_proposed, msg.conflate_committed_k)
        while len(self.keeper.committed) > MAX_OUTSTANDING:  # a backup whose line does not move
            boundary = self.keeper.committed.pop(0)
            self._close(boundary, active=False)
            self.keeper.skipped(boundary)
            self.counters.skipped += 1
        out: list[Action] = []
        if msg.conflate_proposed:
            ack = max(newest, max(b.k for b in msg.conflate_proposed))
            out.append(SendSync(syncbus.ConflateAck(sender, ack)))
        if not self.enabled:
            self.keeper.committed.clear()  # nothing to publish: hold nothing
            self.keeper.published_k = max(self.keeper.published_k, msg.conflate_committed_k)
            return out
        return out + self._due(published_seq, term=sender.term, now=now)

    def _due(self, published_seq: int, *, term: int, now: float) -> list[Action]:
        out: list[Action] = []
        for boundary in self.keeper.due(numbered_seq=published_seq):
            interval = self._close(boundary, active=False)
            if interval is None:
                self.keeper.skipped(boundary)
                self.counters.skipped += 1
                continue
            self.keeper.closed(interval)
            out += self._publish(interval, term=term, now=now)
        return out

    # ---- roles ---------------------------------------------------------------------------

    def on_role_changed(self, old: Role, new: Role) -> None:
        """Promoted: every boundary held becomes due. Demoted: the uncommitted proposals are forgotten."""
        if new is Role.ACTIVE:
            self.keeper.committed = self.keeper.promote()  # published as the numbering reaches them
            self.committed_k = max([self.committed_k, *(b.k for b in self.keeper.committed)])
        elif old is Role.ACTIVE:
            self._demoted()

    def _demoted(self) -> None:
        # What we proposed and nobody committed is proposed again by the next active, with the
        # numbers after the last committed interval: start from there, covering nothing before now.
        last = self.committed_k
        keeper = IntervalKeeper(self.keeper.interval_s)
        keeper.published_k = last
        self.keeper, self._held = keeper, {}
        self._covered_after = None

    # ---- plumbing -----------------------------------------------------------------------

    def _close(self, boundary: Boundary, *, active: bool) -> Interval[Ref] | None:
        expected = self.output.next_conf_seq
        if self.keeper.published_k and expected and boundary.first_conf_seq != expected:
            self.counters.count_mismatches += 1
            logger.warning(
                "conflation interval %d starts at conf_seq %d, this adapter counted %d",
                *(boundary.k, boundary.first_conf_seq, expected),
            )
        previous, self._closed_seq = self._closed_seq, boundary.msg_seq
        covered = self._covered_after
        interval = self.book.close(boundary)
        if self.book.overflowed:
            self.book.reset(boundary.msg_seq)
            self._covered_after = None
        whole = covered is not None and covered <= previous and interval is not None
        if whole or not self.enabled:
            return interval
        if active and interval is not None:
            self.counters.partial += 1
            return interval
        return None

    def _publish(self, interval: Interval[Ref] | None, *, term: int, now: float) -> list[Action]:
        if interval is None or not self.enabled:
            return []
        self.counters.intervals += 1
        return [PublishConflated(p) for p in self.output.interval(interval, term=term, now=now)]

    def deadline(self, *, active: bool) -> float | None:
        """When the side next has something to do (the active's next proposal, a heartbeat), or ``None``."""
        if not self.enabled:
            return None
        at = self.output.heartbeat_due()
        proposal = self.keeper.next_proposal() if active else None
        return at if proposal is None else min(at, proposal)

    def status(self) -> dict[str, Any]:
        """The conflated line's counters."""
        out: dict[str, Any] = {"enabled": self.enabled}
        if self.enabled:
            out.update(
                interval_s=self.keeper.interval_s,
                published_k=self.keeper.published_k,
                next_conf_seq=self.output.next_conf_seq,
                **self.counters.as_dict(),
            )
        return out
