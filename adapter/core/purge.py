"""Purges: operators' removals of messages still pending on the delayed line, and the book that holds them.

Theory of operation
-------------------
A purge names a range of ``msg_seq`` (:class:`PurgeEntry`). The active gives
each purge it accepts the next ``purge_id`` (channel-wide, from 1, gap-free)
and tells the backups; every adapter keeps every purge in its journal (a
purge record, :func:`encode_purge` as the payload) and in its checkpoints, and
holds them in a :class:`PurgeBook`. Wherever a purged message would go out --
the delayed line, a retransmission of either stream -- a *tombstone* block
(:func:`tombstone_block`) goes in its place, so ``msg_seq`` stays gap-free.

The book keeps the ranges disjoint: a purge that overlaps earlier ones adds
only what they did not cover, so "which purge covers ``msg_seq``" is one
bisection. The active's word is final: a backup replaces a purge whose id it
holds with different content, and withdraws the ones the active does not hold
(accepted by an active the group did not follow, e.g. on the wrong side of a
partition); both are journaled, and recovery replays the records in order.

The book is read by the replay service's thread while the adapter's loop
adds to it, so the ranges live in a tuple that is replaced whole (an atomic
reference swap under the GIL), never changed in place.

Pure: no clock, no I/O (the protobuf codec of the entries is here because the
journal, the checkpoints and the sync bus all carry the same message).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from google.protobuf.message import DecodeError

from feedha.adapter.core.records import RecordLike
from feedha.adapter.core.session import RECORD_SESSION_BOUNDARY
from feedha.proto import market_pb2, sync_pb2, wire

__all__ = [
    "MAX_PURGES",
    "PURGE_RECORD_FLAGS",
    "MAX_REASON_CHARS",
    "PurgeBook",
    "PurgeEntry",
    "decode_purge",
    "encode_purge",
    "purge_from_proto",
    "purge_to_proto",
    "purged_block",
    "tombstone_block",
]

# The flags of a purge record in the journal: ``adapter.journal.format.FLAG_PURGE`` (the core
# imports no journal module; tests/unit/adapter/test_purge.py checks they agree).
PURGE_RECORD_FLAGS: Final = 0x0001
MAX_PURGES: Final = 10_000  # purges one book holds; the active refuses more (docs/robustness.md)
MAX_REASON_CHARS: Final = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class PurgeEntry:
    """One accepted purge: messages ``first_msg_seq..last_msg_seq`` are never delivered delayed.

    Attributes:
        purge_id: its number in the channel (from 1, gap-free), given by the active.
        first_msg_seq: the first purged msg_seq.
        last_msg_seq: the last purged msg_seq (inclusive).
        time_ns: when the active accepted it, ns since the epoch.
        reason: the operator's reason.
        issued_by: the operator (the admin server's user name; "" from the control socket).
        term: the term of the active that accepted it.
        withdrawn: a withdrawal record of that purge (the book drops it).
    """

    purge_id: int
    first_msg_seq: int
    last_msg_seq: int
    time_ns: int
    reason: str
    issued_by: str = ""
    term: int = 0
    withdrawn: bool = False

    def __post_init__(self) -> None:
        if self.purge_id < 1:
            raise ValueError(f"purge_id must be >= 1, got {self.purge_id}")
        if not 1 <= self.first_msg_seq <= self.last_msg_seq:
            raise ValueError(f"bad purge range {self.first_msg_seq}..{self.last_msg_seq}")

    @property
    def count(self) -> int:
        """How many msg_seq it names."""
        return self.last_msg_seq - self.first_msg_seq + 1

    def as_dict(self) -> dict[str, object]:
        """The entry as JSON-able fields (status replies, ``feedha journal dump --json``)."""
        return {
            "purge_id": self.purge_id,
            "first_msg_seq": self.first_msg_seq,
            "last_msg_seq": self.last_msg_seq,
            "time_ns": self.time_ns,
            "reason": self.reason,
            "issued_by": self.issued_by,
            "term": self.term,
        }


def purge_to_proto(entry: PurgeEntry, out: sync_pb2.PurgeEntry) -> None:
    """Fill a ``feedha.v1.PurgeEntry`` message from an entry."""
    out.purge_id = entry.purge_id
    out.first_msg_seq = entry.first_msg_seq
    out.last_msg_seq = entry.last_msg_seq
    out.time_ns = entry.time_ns
    out.reason = entry.reason
    out.issued_by = entry.issued_by
    out.term = entry.term
    out.withdrawn = entry.withdrawn


def purge_from_proto(message: sync_pb2.PurgeEntry) -> PurgeEntry:
    """An entry from its message.

    Raises:
        ValueError: an impossible entry (id 0, an empty or reversed range).
    """
    return PurgeEntry(
        purge_id=message.purge_id,
        first_msg_seq=message.first_msg_seq,
        last_msg_seq=message.last_msg_seq,
        time_ns=message.time_ns,
        reason=message.reason[:MAX_REASON_CHARS],
        issued_by=message.issued_by[:MAX_REASON_CHARS],
        term=message.term,
        withdrawn=message.withdrawn,
    )


def encode_purge(entry: PurgeEntry) -> bytes:
    """A purge record's payload: the serialized ``feedha.v1.PurgeEntry``."""
    message = sync_pb2.PurgeEntry()
    purge_to_proto(entry, message)
    return message.SerializeToString()


def decode_purge(payload: bytes) -> PurgeEntry:
    """Read a purge record's payload.

    Raises:
        ValueError: not a ``PurgeEntry``, or an impossible one.
    """
    try:
        message = sync_pb2.PurgeEntry.FromString(payload)
    except DecodeError as exc:
        raise ValueError(f"a purge record of {len(payload)} bytes is not a PurgeEntry") from exc
    return purge_from_proto(message)


def tombstone_block(
    symbol: str, source_seq: int, entry: PurgeEntry, symbols: Iterable[str] = ()
) -> tuple[int, int, bytes]:
    """The ``(source_stream, source_seq, payload)`` of the tombstone for one purged message.

    ``symbols``: every symbol of a block that carries several (:mod:`proto.blocks`; its
    ``symbol`` is empty), so that each of their subscribers learns of the purge.
    """
    payload = market_pb2.Tombstone(
        symbol=symbol, purge_id=entry.purge_id, reason=entry.reason, symbols=symbols
    )
    return wire.TOMBSTONE_STREAM, source_seq, payload.SerializeToString()


def purged_block(record: RecordLike, book: PurgeBook | PurgeTable | None) -> tuple[int, int, bytes] | None:
    """The tombstone to send in a journal record's place, or ``None`` when ``book`` holds no purge of it.

    A purge never takes a session's end: an end-of-session record is always sent as it is.
    """
    if book is None or not len(book) or record.flags & RECORD_SESSION_BOUNDARY:
        return None
    entry = book.covering(record.msg_seq)
    if entry is None:
        return None
    try:
        update = market_pb2.MarketUpdate.FromString(record.payload)
    except DecodeError:
        update = market_pb2.MarketUpdate()
    symbols = [each.symbol for each in update.symbols]  # a block of several: every symbol it carried
    return tombstone_block(update.symbol, record.source_seq, entry, symbols)


class PurgeTable:
    """The purges as disjoint msg_seq ranges, frozen (what another thread reads).

    Args:
        firsts: each range's first msg_seq, sorted.
        ranges: ``(first, last, entry)``, sorted by first.
    """

    __slots__ = ("_firsts", "_ranges")

    def __init__(
        self, firsts: tuple[int, ...] = (), ranges: tuple[tuple[int, int, PurgeEntry], ...] = ()
    ) -> None:
        self._firsts, self._ranges = firsts, ranges

    def __repr__(self) -> str:
        return f"<PurgeTable [ranges={len(self._ranges)}]>"

    def __len__(self) -> int:
        return len(self._ranges)

    def covering(self, msg_seq: int) -> PurgeEntry | None:
        """The purge that removed ``msg_seq`` (the first that named it), or ``None``."""
        i = bisect.bisect_right(self._firsts, msg_seq) - 1
        ranges = self._ranges
        if 0 <= i < len(ranges) and ranges[i][0] <= msg_seq <= ranges[i][1]:
            return ranges[i][2]
        return None


class PurgeBook:
    """Every purge one adapter holds: by id, and as disjoint msg_seq ranges.

    Args:
        limit: the most purges held (the active refuses more).
    """

    __slots__ = ("_entries", "_table", "known_through", "limit", "highest_id", "version")

    def __init__(self, *, limit: int = MAX_PURGES) -> None:
        self._entries: dict[int, PurgeEntry] = {}
        # (firsts, ranges): disjoint (first, last, entry) sorted by first, and their firsts for
        # bisection; replaced whole, in one assignment (see the module docstring).
        self._table: tuple[tuple[int, ...], tuple[tuple[int, int, PurgeEntry], ...]] = ((), ())
        self.known_through = 0  # every purge_id <= this is held
        self.highest_id = 0
        self.limit = limit
        self.version = 0  # changes with every change of the ranges

    def __repr__(self) -> str:
        return (
            f"<PurgeBook [purges={len(self._entries)}, known_through={self.known_through}, "
            f"highest_id={self.highest_id}, ranges={len(self._table[1])}]>"
        )

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, purge_id: object) -> bool:
        return purge_id in self._entries

    @property
    def is_full(self) -> bool:
        return len(self._entries) >= self.limit

    def entries(self) -> list[PurgeEntry]:
        """Every purge held, by id."""
        return [self._entries[key] for key in sorted(self._entries)]

    def after(self, purge_id: int, *, limit: int) -> list[PurgeEntry]:
        """Up to ``limit`` purges with an id above ``purge_id``, by id."""
        return [self._entries[key] for key in sorted(k for k in self._entries if k > purge_id)[:limit]]

    def add(self, entry: PurgeEntry) -> bool:
        """Hold ``entry`` (idempotent by id); returns whether it was new.

        A book that is full takes nothing more: the active never accepts a purge a
        full book would drop, so a backup's book fills no sooner than the active's.
        """
        if entry.purge_id in self._entries or self.is_full:
            return False
        self._entries[entry.purge_id] = entry
        self.highest_id = max(self.highest_id, entry.purge_id)
        while self.known_through + 1 in self._entries:
            self.known_through += 1
        ranges = list(self._table[1])
        for first, last in self._uncovered(entry.first_msg_seq, entry.last_msg_seq):
            bisect.insort(ranges, (first, last, entry), key=lambda item: item[0])
        self._table = (tuple(item[0] for item in ranges), tuple(ranges))
        self.version += 1
        return True

    def add_all(self, entries: Iterable[PurgeEntry]) -> list[PurgeEntry]:
        """Apply entries in order (a withdrawal drops its id, a changed one replaces it); the changed."""
        changed = []
        for entry in entries:
            if entry.withdrawn:
                done = self.withdraw(entry.purge_id) is not None
            elif entry.purge_id in self._entries:
                done = self.replace(entry)
            else:
                done = self.add(entry)
            if done:
                changed.append(entry)
        return changed

    def replace(self, entry: PurgeEntry) -> bool:
        """Hold ``entry`` in place of the purge of its id (the active's version); whether anything changed."""
        if self._entries.get(entry.purge_id) == entry:
            return False
        self._entries[entry.purge_id] = entry
        self._rebuild()
        return True

    def withdraw(self, purge_id: int) -> PurgeEntry | None:
        """Drop the purge ``purge_id`` (the active does not hold it); the dropped entry, if any."""
        dropped = self._entries.pop(purge_id, None)
        if dropped is not None:
            self._rebuild()
        return dropped

    def _rebuild(self) -> None:
        # Built aside, then swapped in: a reader never sees a half-built table.
        fresh = PurgeBook(limit=self.limit)
        for entry in self.entries():
            fresh.add(entry)
        self._table = fresh._table
        self.known_through, self.highest_id = fresh.known_through, fresh.highest_id
        self.version += 1

    def table(self) -> PurgeTable:
        """The ranges as they are now, frozen (for another thread)."""
        return PurgeTable(*self._table)

    def covering(self, msg_seq: int) -> PurgeEntry | None:
        """The purge that removed ``msg_seq`` (the first that named it), or ``None``."""
        firsts, ranges = self._table  # one read: the loop thread may swap it meanwhile
        i = bisect.bisect_right(firsts, msg_seq) - 1
        if 0 <= i < len(ranges) and ranges[i][0] <= msg_seq <= ranges[i][1]:
            return ranges[i][2]
        return None

    def overlapping(self, first: int, last: int) -> Iterator[tuple[int, int, PurgeEntry]]:
        """The purged stretches within ``first..last``, clipped to it, in order."""
        firsts, ranges = self._table
        i = max(0, bisect.bisect_right(firsts, first) - 1)
        for low, high, entry in ranges[i:]:
            if low > last:
                return
            if high >= first:
                yield max(low, first), min(high, last), entry

    def is_all_purged(self, first: int, last: int) -> bool:
        """Whether every msg_seq of ``first..last`` is purged already."""
        covered = sum(high - low + 1 for low, high, _entry in self.overlapping(first, last))
        return covered == last - first + 1

    def _uncovered(self, first: int, last: int) -> list[tuple[int, int]]:
        out, at = [], first
        for low, high, _entry in self.overlapping(first, last):
            if low > at:
                out.append((at, low - 1))
            at = high + 1
        if at <= last:
            out.append((at, last))
        return out
