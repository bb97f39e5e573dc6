"""What one packet must not decide alone: the term a channel follows, a far jump of the sequence.

Theory of operation
-------------------
A subscriber arbitrates every line of a channel. Two things a packet can say
would move the whole channel: a higher *term* (which fences every line of a
lower one: their packets are dropped as stale) and a ``msg_seq`` far beyond
anything seen (which opens a gap that is later declared lost and skipped).
A damaged, forged or zombie packet must not do either.

**Terms** (:class:`TermVotes`). The admin server's routes carry each line's
term: the term they confirm is followed from the start (``confirm``), and a
route update with a higher one is believed at once. Besides that, every line
*votes* the term of its latest live packet, and the channel follows the
highest term that a majority of its live lines vote for at least (the lines
that sent anything within :data:`LIVE_S`; a line never heard counts, voting
nothing, for the first :data:`LIVE_S` after the first vote). An adapter's line follows its group's term,
which a backup takes only from the sync bus, authenticated by the group's
key: a majority of lines at a term is the group having agreed on it. So a
genuine promotion is believed within a packet or two of the new active and a
backup, and a failover that left one line of two is believed too (the dead
active's line is silent, not live); a term only some lines claim -- a forger
publishing on a line, a zombie -- is not believed, and its blocks are taken
like any line's (a claim fences nobody).

A line whose term goes *down* carries two senders, one of them forging: it
is *distrusted* for :data:`DISTRUST_S`, voting the lowest term it showed in
that time (its genuine adapter's). A term the lines elected is held while
more than half of the votes reach it: of the live lines and of the silent
ones that voted at least it (a backer that died keeps backing it; a line that
goes on with a lower term takes its vote back). Otherwise it falls to what
more than half of them reach, never below the routes' term. A tie falls: of
two lines, one at a higher term and one at the routes' term, the higher one
is a zombie's old term or a forger's on a dead adapter's line, and only the
routes can tell which (a lone survivor's term is followed while the other
line is silent, and from the routes' update on). Each packet is counted
before it is judged, so a genuine packet that takes a forged term's
majority away is taken, not dropped. A forger holding the channel's packet
key can send on every line at once and win a vote for a moment, but each
line's genuine packets then contradict it: the term falls back at the first
of them to take the majority away (the packets a line still forged on sent
meanwhile carry what the others carry), and the lines it forged on are
distrusted, so a forger that keeps sending cannot win again. Only the routes
can confirm a term that no majority of lines shows.

A packet below the term followed is *stale* (dropped) when its line has shown
that term already (a lower one after it is a second sender), or once
:data:`GRACE_S` passed since the term rose: a route update can come before
the packets the adapters sent at the old term, just before the promotion, are
read from the lines' queues, and those are genuine. A zombie that never shows
the new term is fenced after the grace. The first term followed fences at once.

**Far jumps** (:class:`Claims`). A ``msg_seq`` more than :data:`MAX_JUMP` past
the known high-water mark is believed when a second line claims a position
near it, or the same line repeats it (as far or farther) in ``confirm``
packets with no ordinary packet from another line in between. An ordinary
packet from another line withdraws the claims of every other line: a
contradicted claim backs nothing. A genuine gap is confirmed by the packets
after it; until then the far packet is dropped and counted.

Pure: no sockets, no clock (the time is passed in).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = ["CONFIRM", "DISTRUST_S", "GRACE_S", "LIVE_S", "MAX_JUMP", "Claims", "TermVotes"]

CONFIRM: Final = 3  # packets from one line that confirm its far jump
MAX_JUMP: Final = 1_000_000  # msg_seqs past the known high-water mark that need confirming
# A line heard within this long votes: lines send a heartbeat every 0.1 s, and an active that
# died is replaced no sooner than its backups' 0.4 s heartbeat timeout, by then silent this long.
LIVE_S: Final = 0.3
DISTRUST_S: Final = 10.0  # a line whose term went down votes its lowest term this long
# After the term followed rose, a line that has not shown it yet is fenced below it only this
# long after: what it sent before the promotion may still be queued behind the route update.
GRACE_S: Final = 1.0


class TermVotes:
    """The term each line of one channel votes for, and the term the channel follows.

    Args:
        lines: the channel's lines joined so far (0..lines-1); others count once they vote.
        live_s: a line heard within this long votes (:data:`LIVE_S`).
        distrust_s: how long a line whose term went down votes its lowest (:data:`DISTRUST_S`).
    """

    __slots__ = ("_known", "_votes", "_distrust", "_started", "_live_s", "_distrust_s", "confirmed")

    def __init__(self, *, lines: int, live_s: float = LIVE_S, distrust_s: float = DISTRUST_S) -> None:
        self._known: set[int] = set(range(lines))
        self._votes: dict[int, int] = {}  # line -> the term of its latest live packet
        self._distrust: dict[int, tuple[float, int]] = {}  # line -> (until, its lowest term since)
        self._started: float | None = None  # the first vote: lines never heard count from then
        self._live_s, self._distrust_s = live_s, distrust_s
        self.confirmed: int | None = None  # the routes' term: followed whatever the lines vote

    def __repr__(self) -> str:
        distrusted = sorted(self._distrust)
        return f"<TermVotes [confirmed={self.confirmed}, votes={self._votes}, distrusted={distrusted}]>"

    @property
    def distrusted(self) -> int:
        """Lines whose term went down, distrusted now or until recently."""
        return len(self._distrust)

    def confirm(self, term: int) -> None:
        """The admin server's routes carry ``term``: followed from now on (the highest confirmed)."""
        if self.confirmed is None or term > self.confirmed:
            self.confirmed = term

    def shown(self, line: int, *, now: float) -> int:
        """The term ``line`` votes for at ``now`` (-1: none yet)."""
        return self._vote(line, now)

    def vote(self, line: int, term: int, *, now: float) -> None:
        """A live packet (not a retransmission) of ``term`` from ``line`` at ``now``."""
        if self._started is None:
            self._started = now
        self._known.add(line)
        previous = self._votes.get(line)
        if previous is not None and term < previous:  # two senders on one line: one forges
            until, lowest = self._distrust.get(line, (now, term))
            self._distrust[line] = (now + self._distrust_s, min(lowest, term) if until > now else term)
        self._votes[line] = term

    def elect(self, *, following: int | None, heard: Mapping[int, float | None], now: float) -> int | None:
        """The term to follow at ``now``, from ``following`` (``None``: none yet and no evidence).

        More than half of the live lines raise it; more than half of the live lines and
        of the silent ones that back it keep it, else it falls to what more than half show.

        Args:
            following: the term followed now.
            heard: when each line last sent anything (``None``: never).
            now: the time.
        """
        live, silent = self._ballots(heard, now)
        floor = -1 if self.confirmed is None else self.confirmed
        raised = _reached(live, len(live) // 2)
        if following is None or raised > following:
            best = max(raised, floor)
            return None if best < 0 else best
        voters = live + [vote for vote in silent if vote >= following]
        kept = _reached(voters, len(voters) // 2)
        return max(following if kept < 0 else min(kept, following), floor)

    def _ballots(self, heard: Mapping[int, float | None], now: float) -> tuple[list[int], list[int]]:
        # Each known line's vote (-1: none yet), split into the live lines' and the silent ones'.
        live: list[int] = []
        silent: list[int] = []
        for line in self._known:
            last = heard.get(line)
            last = self._started if last is None else last
            vote = self._vote(line, now)
            if last is not None and now - last <= self._live_s:
                live.append(vote)
            elif vote >= 0:
                silent.append(vote)
        return live, silent

    def _vote(self, line: int, now: float) -> int:
        vote = self._votes.get(line, -1)
        distrust = self._distrust.get(line)
        if distrust is None:
            return vote
        until, lowest = distrust
        if now >= until:
            del self._distrust[line]
            return vote
        return min(vote, lowest)


def _reached(votes: list[int], others: int) -> int:
    """The highest term that ``others`` votes besides one reach (more than half: ``len // 2``);
    -1 without votes."""
    if not votes:
        return -1
    return sorted(votes, reverse=True)[others]


class Claims:
    """The pending far-jump claims of each line, for one channel.

    Args:
        confirm: how many packets from one line confirm its claim.
    """

    __slots__ = ("_confirm", "_jumps", "pending")

    def __init__(self, *, confirm: int = CONFIRM) -> None:
        if confirm < 1:
            raise ValueError(f"confirm must be >= 1, got {confirm}")
        self._confirm = confirm
        self._jumps: dict[int, tuple[int, int]] = {}  # line -> (claimed position, packets claiming it)
        self.pending = False  # any claim open (a cheap test for the arbiter's fast path)

    def __repr__(self) -> str:
        return f"<Claims [jumps={self._jumps}]>"

    def jump(self, line: int, position: int, *, high: int) -> bool:
        """A packet reaching ``position``, more than :data:`MAX_JUMP` past ``high``: believe it now?"""
        previous = self._jumps.get(line)
        repeats = previous[1] + 1 if previous is not None and position >= previous[0] else 1
        self._jumps[line] = (position, repeats)
        backing = any(
            other != line and claimed > high + MAX_JUMP and abs(claimed - position) <= MAX_JUMP
            for other, (claimed, _n) in self._jumps.items()
        )
        believed = backing or repeats >= self._confirm
        if believed:
            self._jumps.clear()
        self.pending = bool(self._jumps)
        return believed

    def contradict(self, line: int) -> None:
        """``line`` sent an ordinary packet: every other line's claim is withdrawn (it backs nothing)."""
        for other in [other for other in self._jumps if other != line]:
            del self._jumps[other]
        self.pending = bool(self._jumps)
