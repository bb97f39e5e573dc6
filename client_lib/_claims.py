"""Claims one packet must not be believed on alone: a higher term, a far jump of the sequence.

Theory of operation
-------------------
A subscriber arbitrates every line of a channel. Two things a single packet
can say would move the whole channel: a higher *term* (which fences every
line of a lower one) and a ``msg_seq`` far beyond anything seen (which opens
a gap that is later declared lost and skipped). A damaged, forged or zombie
packet must not do either by itself. So such a claim is believed only when

* a second line claims at least as much (two adapters agree), or
* the same line repeats it (as much or more) in ``confirm`` packets with no
  ordinary packet from another line in between (a line that goes on as
  before contradicts it).

The first term a subscriber hears is a claim too (above no term at all), so a
forged packet read first fences nobody; any other line's term backs it, at the
lesser of the two, and the claims of later terms stay open once it is believed.

A genuine failover confirms within a packet or two of the new active (and the
backups, which follow its term at once); a genuine gap is confirmed by the
packets after it. Until then the packet's blocks are still taken as copies
(a higher term is not yet a fence; a far jump is dropped and counted).
Pure: no sockets, no clock.
"""

from __future__ import annotations

from typing import Final

__all__ = ["CONFIRM", "MAX_JUMP", "Claims"]

CONFIRM: Final = 3  # packets from one line that confirm its claim
MAX_JUMP: Final = 1_000_000  # msg_seqs past the known high-water mark that need confirming


class Claims:
    """The pending claims of each line, for one channel.

    Args:
        confirm: how many packets from one line confirm its claim.
    """

    __slots__ = ("_confirm", "_terms", "_jumps", "pending")

    def __init__(self, *, confirm: int = CONFIRM) -> None:
        if confirm < 1:
            raise ValueError(f"confirm must be >= 1, got {confirm}")
        self._confirm = confirm
        self._terms: dict[int, tuple[int, int]] = {}  # line -> (claimed term, packets claiming it)
        self._jumps: dict[int, tuple[int, int]] = {}  # line -> (claimed position, packets claiming it)
        self.pending = False  # any claim open (a cheap test for the arbiter's fast path)

    def __repr__(self) -> str:
        return f"<Claims [terms={self._terms}, jumps={self._jumps}]>"

    def term(self, line: int, term: int, *, highest: int | None) -> int | None:
        """A packet of ``term`` above ``highest`` from ``line``: the term now believed, or ``None``.

        ``highest`` is ``None`` while no term is believed: then any term is a claim, and
        the claims above the first term believed stay open (they claim a later term).
        """
        believed = self._weigh(self._terms, line, term, above=-1 if highest is None else highest)
        if believed is not None:
            later: dict[int, tuple[int, int]] = {}
            if highest is None:  # the first term believed: the claims of later terms stay open
                later = {other: claim for other, claim in self._terms.items() if claim[0] > believed}
            self._terms.clear()
            self._terms.update(later)
        self.pending = bool(self._terms or self._jumps)
        return believed

    def jump(self, line: int, position: int, *, high: int) -> bool:
        """A packet reaching ``position``, more than :data:`MAX_JUMP` past ``high``: believe it now?"""
        believed = self._weigh(self._jumps, line, position, above=high + MAX_JUMP, near=MAX_JUMP) is not None
        if believed:
            self._jumps.clear()
        self.pending = bool(self._terms or self._jumps)
        return believed

    def contradict(self, line: int) -> None:
        """``line`` sent an ordinary packet: every other line's claim starts its count again."""
        for claims in (self._terms, self._jumps):
            for other, (claimed, _repeats) in list(claims.items()):
                if other != line:
                    claims[other] = (claimed, 0)

    def _weigh(
        self,
        claims: dict[int, tuple[int, int]],
        line: int,
        value: int,
        *,
        above: int,
        near: int | None = None,
    ) -> int | None:
        # The claim is believed when another line's claim above ``above`` backs
        # it (as much as both say; for positions only one ``near`` it: two
        # lines carry the same stream), or this line has repeated it enough.
        previous = claims.get(line)
        repeats = previous[1] + 1 if previous is not None and value >= previous[0] else 1
        claims[line] = (value, repeats)
        backing = [
            claimed
            for other, (claimed, _n) in claims.items()
            if other != line and claimed > above and (near is None or abs(claimed - value) <= near)
        ]
        if backing:
            return min(value, max(backing))
        return value if repeats >= self._confirm else None
