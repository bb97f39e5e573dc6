"""Sequencing: msg_seq assignment and the position comparisons of the sync rules.

Theory of operation
-------------------
Every adapter of a channel reads the same source stream, so the same source
message (``source_seq``) must get the same ``msg_seq`` on every line. The
numbering itself is local (``next_msg_seq`` grows by one per published
message); what keeps lines identical is comparing positions with the active:

* The active reports its last published position: ``source_seq`` S, the
  ``msg_seq`` M it gave S, and the conversion-state digest D right after S.
* A backup that has not reached S yet (*behind*) keeps the report pending;
  when it reaches S it gives S the active's M (rule 2: "set the counter so its
  message for that source_seq gets the active's msg_seq") and checks D.
* A backup that already passed S (*ahead*) looks S up in its own recent
  history and compares M and D right away.

The history of recent positions is kept as *runs*: consecutive source_seqs
numbered consecutively, each run a start position and an ``array`` of the
digests after each message. The C fast path (:mod:`adapter.formats.feedha_fix._native`) hands
over a whole run at once (:meth:`Sequencer.record_run`); runs that continue
each other merge, so a steady stream is one run and a lookup is an index.

The :class:`Sequencer` is mutable for speed (it runs once per message) but does
no I/O and reads no clock. The role logic that turns verdicts into actions
lives in :mod:`adapter.core.sync`.
"""

from __future__ import annotations

import enum
from array import array
from collections import deque
from dataclasses import dataclass
from typing import Final

HISTORY_SIZE: Final = 8192
PENDING_SIZE: Final = 1024


class SourceVerdict(enum.Enum):
    """What a source_seq means relative to what the adapter has seen."""

    NEXT = "next"  # exactly the next one (or the first ever)
    DUPLICATE = "duplicate"  # at or below the last seen: at-least-once delivery replayed it
    GAP = "gap"  # beyond the next one: source messages were missed
    JUMP = "jump"  # further beyond than any plausible loss: suspect until confirmed


class ReportVerdict(enum.Enum):
    """How the active's reported position compares with this adapter's stream."""

    MATCH = "match"  # same msg_seq and digest at that source position
    BEHIND = "behind"  # not reached yet: kept pending, checked on arrival
    NUMBERING_MISMATCH = "numbering_mismatch"  # already sent it under another msg_seq
    DIGEST_MISMATCH = "digest_mismatch"  # same msg_seq, different conversion state
    UNKNOWN = "unknown"  # too old for the history, or never seen by this adapter


@dataclass(frozen=True, slots=True)
class PositionReport:
    """A published position: source message S got msg_seq M; digest D after it."""

    source_seq: int
    msg_seq: int
    digest: int


@dataclass(frozen=True, slots=True)
class ArrivalCheck:
    """What happened when a message reached a pending report's position."""

    renumbered: bool  # the counter was moved to the active's msg_seq
    digest_matches: bool


class Sequencer:
    """Assigns msg_seq and answers the position questions of the sync rules.

    Args:
        next_msg_seq: the msg_seq the next published message gets.
        history_size: how many recent positions to remember for comparisons.
    """

    __slots__ = (
        "next_msg_seq",
        "first_source_seq",
        "last_source_seq",
        "last_recorded_source_seq",
        "last_msg_seq",
        "last_digest",
        "_runs",
        "_history_len",
        "_history_size",
        "_pending",
        "_first_pending",
        "_renumbered",
        "_tentative",
    )

    def __init__(self, *, next_msg_seq: int = 1, history_size: int = HISTORY_SIZE) -> None:
        if next_msg_seq < 1:
            raise ValueError(f"next_msg_seq must be >= 1, got {next_msg_seq}")
        self.next_msg_seq = next_msg_seq
        self.last_source_seq = 0  # 0: nothing seen yet
        self.first_source_seq = 0  # the first position taken (0: none yet); where the ledger begins
        self.last_recorded_source_seq = 0  # the last source message that got a msg_seq
        self.last_msg_seq = 0
        self.last_digest = 0
        # [first source_seq, its msg_seq, digests after each message]; newest last.
        self._runs: deque[tuple[int, int, array[int]]] = deque()
        self._history_len = 0
        self._history_size = history_size
        self._pending: dict[int, PositionReport] = {}
        self._first_pending = 0  # the lowest position in _pending (0: none): looked at every run
        self._renumbered = False
        self._tentative = 0  # a position taken only by an unreadable message: a good copy may still come

    def __repr__(self) -> str:
        return (
            f"<Sequencer [next_msg_seq={self.next_msg_seq}, last_source_seq={self.last_source_seq}, "
            f"pending={len(self._pending)}, history={self._history_len}]>"
        )

    @property
    def next_source_seq(self) -> int:
        return self.last_source_seq + 1

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    def pending_stop(self) -> int:
        """Where the next run must stop for the pending reports: a run's ``stop_seq`` (0: nowhere).

        A run numbers consecutively from :attr:`next_msg_seq` at :attr:`next_source_seq`,
        so it is known beforehand what it would give the first pending position. When
        that is the active's msg_seq, the run converts the position and stops right
        after it (:meth:`record_run` checks it); otherwise it stops before it, and the
        careful path renumbers there (rule 2, :meth:`assign`).
        """
        first = self._first_pending
        if not first:
            return 0
        last = self.last_source_seq
        if last and first > last and self._pending[first].msg_seq == self.next_msg_seq + (first - last - 1):
            return first + 1
        return first

    def check_source(self, source_seq: int, *, max_gap: int | None = None) -> SourceVerdict:
        """Classify an incoming source_seq (does not change state).

        Args:
            source_seq: the message's source_seq.
            max_gap: missing messages beyond which a gap is a JUMP (``None``: never).
        """
        last = self.last_source_seq
        if last == 0 or source_seq == last + 1 or (source_seq == last == self._tentative):
            return SourceVerdict.NEXT
        if source_seq <= last:
            return SourceVerdict.DUPLICATE
        if max_gap is not None and source_seq - last - 1 > max_gap:
            return SourceVerdict.JUMP
        return SourceVerdict.GAP

    def skip_source(self, source_seq: int, *, tentative: bool = False) -> None:
        """Note a sequenced source message that produced no output (conversion failed).

        Args:
            source_seq: its position.
            tentative: the position was read from a message too broken to trust (a bad
                checksum, say); a well-formed message at the same position that comes
                next is still taken (a source that resends a mangled message).
        """
        if not self.first_source_seq:
            self.first_source_seq = source_seq
        self.last_source_seq = source_seq
        self._tentative = source_seq if tentative else 0

    def assign(self, source_seq: int) -> int:
        """Give the message at ``source_seq`` its msg_seq, honouring a pending report.

        Returns:
            The msg_seq for this message; the caller must then call :meth:`record`.
        """
        if self._pending:
            report = self._pending.get(source_seq)
            if report is not None:
                self._renumbered = report.msg_seq != self.next_msg_seq
                self.next_msg_seq = report.msg_seq
        return self.next_msg_seq

    def record(self, source_seq: int, msg_seq: int, digest: int) -> ArrivalCheck | None:
        """Record that ``source_seq`` went out as ``msg_seq`` with ``digest`` after it.

        Returns:
            For a position the active reported earlier, whether the counter had
            to move and whether the digests agree; otherwise None.
        """
        if not self.first_source_seq:
            self.first_source_seq = source_seq
        self.last_source_seq = source_seq
        self.last_recorded_source_seq = source_seq
        self._tentative = 0
        self.last_msg_seq = msg_seq
        self.last_digest = digest
        self.next_msg_seq = msg_seq + 1
        self._remember(source_seq, msg_seq, array("Q", (digest,)))
        if not self._first_pending or self._first_pending > source_seq:
            return None  # no report at or before it: nothing to check or drop (as record_run)
        pending = self._pending
        report = pending.pop(source_seq, None)
        # Reports arrive in source order, so the oldest is first; reports for
        # positions this adapter skipped over (a source gap) can never match.
        while pending:
            oldest = next(iter(pending))
            if oldest >= source_seq:
                break
            del pending[oldest]
        self._first_pending = min(pending, default=0)
        if report is None:
            return None
        renumbered, self._renumbered = self._renumbered, False
        return ArrivalCheck(renumbered=renumbered, digest_matches=report.digest == digest)

    def record_run(
        self, first_source_seq: int, first_msg_seq: int, digests: bytes
    ) -> list[tuple[int, ArrivalCheck]] | None:
        """Record a run of consecutive source messages numbered consecutively.

        What :meth:`assign` + :meth:`record` would do for each message of a run
        the fast path converted. A run goes past a pending report only where it
        gives that position the active's msg_seq (:meth:`pending_stop`), so no
        counter moves; the position's check is returned.

        Args:
            first_source_seq: the run's first source_seq; the rest follow by one.
            first_msg_seq: the msg_seq of the first message; the rest follow by one.
            digests: the digest after each message, native uint64s (8 bytes each).

        Returns:
            ``None`` when no pending report is at or before the run's end; else each
            reported position the run reached, with its check (``renumbered`` is always
            false), in source order (reports before the run are dropped: it skipped them).
            A msg_seq that differs from the report's reads as a digest mismatch: what
            waits at the gate is dropped and the state asked for, the conservative answer
            (:meth:`pending_stop` keeps runs from getting there).
        """
        run = array("Q", digests)
        count = len(run)
        if not count:
            raise ValueError("a run needs at least one message")
        last = first_source_seq + count - 1
        if not self.first_source_seq:
            self.first_source_seq = first_source_seq
        self.last_source_seq = self.last_recorded_source_seq = last
        self._tentative = 0
        self.last_msg_seq = first_msg_seq + count - 1
        self.last_digest = run[-1]
        self.next_msg_seq = self.last_msg_seq + 1
        self._remember(first_source_seq, first_msg_seq, run)
        if not self._first_pending or self._first_pending > last:
            return None
        return self._reached(first_source_seq, first_msg_seq, run)

    def _reached(
        self, first_source_seq: int, first_msg_seq: int, run: array[int]
    ) -> list[tuple[int, ArrivalCheck]]:
        # The pending reports a run passed: checked where the run reached them, dropped
        # where it did not (positions before it that this adapter skipped can never match).
        pending, last = self._pending, self.last_source_seq
        checks = []
        for at in sorted(s for s in pending if s <= last):
            report = pending.pop(at)
            index = at - first_source_seq
            if index >= 0:
                same = report.msg_seq == first_msg_seq + index and report.digest == run[index]
                checks.append((at, ArrivalCheck(renumbered=False, digest_matches=same)))
        self._first_pending = min(pending, default=0)
        return checks

    def _remember(self, source_seq: int, msg_seq: int, digests: array[int]) -> None:
        runs = self._runs
        added = len(digests)
        if runs:
            first_source, first_msg, run = runs[-1]
            held = len(run)
            if first_source + held == source_seq and first_msg + held == msg_seq:
                run.extend(digests)
            else:
                runs.append((source_seq, msg_seq, digests))
        else:
            runs.append((source_seq, msg_seq, digests))
        total = self._history_len = self._history_len + added
        # Keep at least history_size positions; cut a run's prefix only once
        # it is twice that long, so trimming is amortized O(1) per message.
        size = self._history_size
        if total < 2 * size:
            return
        while len(runs) > 1 and total - len(runs[0][2]) >= size:
            total -= len(runs.popleft()[2])
        first_source, first_msg, run = runs[0]
        if len(runs) == 1 and len(run) >= 2 * size:
            cut = len(run) - size
            runs[0] = (first_source + cut, first_msg + cut, run[cut:])
            total -= cut
        self._history_len = total

    def _find(self, source_seq: int) -> tuple[tuple[int, int, array[int]], int] | None:
        for run in reversed(self._runs):  # newest first: a re-recorded position wins
            index = source_seq - run[0]
            if 0 <= index < len(run[2]):
                return run, index
        return None

    def is_recorded(self, source_seq: int) -> bool:
        """Whether ``source_seq`` got a msg_seq (as far as the recent history remembers)."""
        return self._find(source_seq) is not None

    def recorded_within(self, first: int, last: int) -> bool:
        """Whether any source position in ``first..last`` got a msg_seq (in the recent history)."""
        for run_first, _msg, digests in self._runs:
            if run_first <= last and first < run_first + len(digests):
                return True
        return False

    def msg_seq_at(self, source_seq: int) -> int | None:
        """The msg_seq this adapter gave ``source_seq`` (``None``: never, or forgotten)."""
        found = self._lookup(source_seq)
        return None if found is None else found[0]

    def _lookup(self, source_seq: int) -> tuple[int, int] | None:
        found = self._find(source_seq)
        if found is None:
            return None
        run, index = found
        return run[1] + index, run[2][index]

    def compare(self, report: PositionReport) -> tuple[ReportVerdict, int]:
        """Compare the active's published position with this adapter's stream.

        Returns:
            ``(verdict, ahead_by)``: ahead_by is how many source messages this
            adapter is past the report (negative when behind).
        """
        ahead_by = self.last_source_seq - report.source_seq
        if ahead_by < 0:
            pending, at, first = self._pending, report.source_seq, self._first_pending
            if len(pending) >= PENDING_SIZE:
                del pending[next(iter(pending))]
                first = min(pending, default=0)
            pending[at] = report
            self._first_pending = at if not first or at < first else first
            return ReportVerdict.BEHIND, ahead_by
        mine = self._lookup(report.source_seq)
        if mine is None:
            return ReportVerdict.UNKNOWN, ahead_by
        msg_seq, digest = mine
        if msg_seq != report.msg_seq:
            return ReportVerdict.NUMBERING_MISMATCH, ahead_by
        if digest != report.digest:
            return ReportVerdict.DIGEST_MISMATCH, ahead_by
        return ReportVerdict.MATCH, ahead_by

    def restate_digests(self, digests: dict[int, int]) -> None:
        """Overwrite recorded digests after conversion state was replaced and re-applied."""
        for source_seq, digest in digests.items():
            found = self._find(source_seq)
            if found is not None:
                run, index = found
                run[2][index] = digest
        if self.last_recorded_source_seq in digests:
            self.last_digest = digests[self.last_recorded_source_seq]

    def reset_to(self, *, last_source_seq: int, next_msg_seq: int) -> None:
        """Jump to a position (after recovery, or a source gap resolved by the active)."""
        self.last_source_seq = last_source_seq
        self.next_msg_seq = next_msg_seq
        self._pending = {s: r for s, r in self._pending.items() if s > last_source_seq}
        self._first_pending = min(self._pending, default=0)
