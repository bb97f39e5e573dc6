"""Where every source message went: numbered, quarantined, skipped, or inside a source gap.

Theory of operation
-------------------
An adapter's numbering walks its source stream's positions (``source_seq``,
MoldUDP64 sequence numbers for itch50) one at a time, and the pipeline
(:mod:`adapter.core.pipeline`) decides what becomes of each. The
:class:`SourceLedger` books every position the walk passes exactly once:

* ``numbered``: it got a ``msg_seq`` (the engine's runs, the careful path);
* ``quarantined``: a message that cannot be converted used it up (the reasons
  are the pipeline's ``quarantined`` counts);
* ``skipped``: a message that is not market data used it up (its types are
  the pipeline's ``skipped_types``);
* ``in_gaps``: no message arrived for it -- a source gap, common or this
  adapter's own -- named in :attr:`SourceLedger.gaps` (the newest
  :data:`GAPS_KEPT` ranges; ``gap_ranges`` counts them all);
* ``declared_absent``: a SequenceReset (``35=4``) moved the numbering past it,
  or a ``source_seq`` jump the stream went on from (kind ``jump`` among the
  gaps): the source says no message was ever there.

So ``base + numbered + quarantined + skipped + in_gaps + declared_absent`` is
the last position passed, where ``base`` is where this process took over
(what recovery read from the journal). :meth:`SourceLedger.unexplained` is the
difference, 0 unless the bookkeeping itself is wrong; tests hold every path to
it. What took no position is counted apart (``unplaced``): bytes with no
position at all, a garbled copy a good one replaced, a duplicate, a refused
jump that stood for nothing. A drill that knows how many messages its source
sent subtracts the booked ones: what is left was never seen by anyone
(``unaccounted``).

:class:`PipelineCounters` are the source path's other counts (numbered,
malformed, duplicates, gaps, quarantined by reason, skipped by type ...).

Pure: counters only.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, fields
from typing import Any, Final

__all__ = ["GAPS_KEPT", "KINDS_KEPT", "PipelineCounters", "SourceLedger", "count_kind"]

GAPS_KEPT: Final = 32  # the newest gap ranges named (all are counted)
KINDS_KEPT: Final = 64  # distinct skipped types named; a hostile source's others count as "other"
OTHER_KIND: Final = "other"


def count_kind(counts: dict[str, int], kind: str) -> None:
    """Count one of ``kind`` in ``counts``, naming at most :data:`KINDS_KEPT` kinds (the rest: other)."""
    if kind not in counts and len(counts) >= KINDS_KEPT:
        kind = OTHER_KIND
    counts[kind] = counts.get(kind, 0) + 1


class SourceLedger:
    """The bookkeeping of every source position one adapter passed (see the module docstring)."""

    __slots__ = (
        "base",
        "quarantined",
        "skipped",
        "in_gaps",
        "declared_absent",
        "unplaced",
        "gap_ranges",
        "gaps",
        "_tentative",
    )

    def __init__(self) -> None:
        self.base: int | None = None  # the last position recovery read from the journal (None: none)
        self.quarantined = 0  # positions used up by quarantined messages
        self.skipped = 0  # positions used up by messages that are not market data
        self.in_gaps = 0  # positions no message arrived for
        self.declared_absent = 0  # positions the source numbered past (a reset, a believed jump)
        self.unplaced = 0  # quarantined or skipped items that used up no position
        self.gap_ranges = 0  # gaps booked (all of them; ``gaps`` names the newest)
        self.gaps: deque[tuple[int, int, str]] = deque(maxlen=GAPS_KEPT)  # (first, last, kind)
        self._tentative = False  # the last position was taken by a garbled message only

    def __repr__(self) -> str:
        return (
            f"<SourceLedger [base={self.base}, quarantined={self.quarantined}, skipped={self.skipped}, "
            f"in_gaps={self.in_gaps}, absent={self.declared_absent}, unplaced={self.unplaced}]>"
        )

    # ---- booking -------------------------------------------------------------------------

    def took(self, kind: str, *, retaking: bool = False, tentative: bool = False) -> None:
        """A message used up its position: ``quarantined`` or ``skipped`` (numbered ones are counted
        by the pipeline's ``numbered``).

        ``retaking``: the position was the last one, taken by a garbled message only (a good copy
        came after it): that one took nothing after all. ``tentative``: this one is such a
        garbled message.
        """
        if retaking:
            self.retook()
        setattr(self, kind, getattr(self, kind) + 1)
        self._tentative = tentative

    def retook(self) -> None:
        """The last position, taken by a garbled message only, is taken again by a good copy."""
        if self._tentative:
            self._tentative = False
            self.quarantined -= 1
            self.unplaced += 1

    def passed(self) -> None:
        """A message used up its position (numbered): a garbled message before it no longer may."""
        self._tentative = False

    def gap(self, first: int, last: int, kind: str = "gap") -> None:
        """Positions ``first..last`` passed with no message (``kind``: ``gap``, or ``jump``/``reset``
        for positions the source declared absent)."""
        if last < first:
            return
        size = last - first + 1
        if kind == "gap":
            self.in_gaps += size
        else:
            self.declared_absent += size
        self.gap_ranges += 1
        self.gaps.append((first, last, kind))
        self._tentative = False

    def placed_nowhere(self, count: int = 1) -> None:
        """``count`` quarantined or skipped items used up no position."""
        self.unplaced += count

    # ---- reading -----------------------------------------------------------------------------

    def origin(self, first_source_seq: int) -> int:
        """The last position before this process's walk: what recovery read, else the position
        before the first it took (``first_source_seq``; an adapter may join a stream midway)."""
        if self.base is not None:
            return self.base
        return max(0, first_source_seq - 1)

    def booked(self, numbered: int) -> int:
        """Positions booked since the origin (``numbered``: the pipeline's count of numbered messages)."""
        return numbered + self.quarantined + self.skipped + self.in_gaps + self.declared_absent

    def unexplained(self, *, first_source_seq: int, last_source_seq: int, numbered: int) -> int:
        """Positions passed but not booked (0 unless the bookkeeping is wrong; negative: booked twice)."""
        if not last_source_seq:
            return -self.booked(numbered)
        return last_source_seq - self.origin(first_source_seq) - self.booked(numbered)

    def as_dict(self, *, first_source_seq: int, last_source_seq: int, numbered: int) -> dict[str, Any]:
        """The ledger for the adapter's status (``accounting``)."""
        unexplained = self.unexplained(
            first_source_seq=first_source_seq, last_source_seq=last_source_seq, numbered=numbered
        )
        return {
            "base": self.origin(first_source_seq),
            "numbered": numbered,
            "quarantined": self.quarantined,
            "skipped": self.skipped,
            "in_gaps": self.in_gaps,
            "declared_absent": self.declared_absent,
            "unplaced": self.unplaced,
            "unexplained": unexplained,
            "gap_ranges": self.gap_ranges,
            "gaps": [{"first": first, "last": last, "kind": kind} for first, last, kind in self.gaps],
        }


@dataclass(slots=True)
class PipelineCounters:
    """What the source path has counted since start."""

    numbered: int = 0  # messages that got a msg_seq, published or not
    malformed_frames: int = 0
    malformed_messages: int = 0
    conversion_errors: int = 0
    internal_errors: int = 0
    duplicates: int = 0
    source_gaps: int = 0
    source_resets: int = 0
    snapshots_adopted: int = 0
    skipped: int = 0  # messages that are not market data (fix44 heartbeats, logons ...): counted, skipped
    quarantined: dict[str, int] = field(default_factory=dict)
    skipped_types: dict[str, int] = field(default_factory=dict)  # skipped messages by type (35=, ITCH type)

    def as_dict(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["quarantined"] = dict(self.quarantined)
        values["skipped_types"] = dict(self.skipped_types)
        return values

    @property
    def errors(self) -> int:
        """Everything the source sent that could not be used, and every fault handling it."""
        return self.malformed_frames + self.malformed_messages + self.conversion_errors + self.internal_errors
