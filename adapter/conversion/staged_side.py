"""A book side as one message changes it, over levels it must not change: a list, its changes kept.

Theory of operation
-------------------
The Python path stages a message on copies of the books it touches
(:meth:`~adapter.formats.fix44.book_state.BookState.stage`): the state stays as it was until
the message commits whole. A side held as a list is copied for that
(:meth:`~adapter.conversion.book.BookValues.writable`: a copy of references, at C
speed). A side the native state keeps in C is read through an ``_orders.SideView`` (an item
in O(log n), never the whole side), and copying it would cost the whole book a message:
:class:`StagedSide` stands in for the copy instead.

To the book rules it is a list -- ``len``, items, slices, iteration, ``==``, ``insert``,
``del`` and item assignment -- that keeps its levels as *pieces*: runs of its base's levels
(a ``range`` of their positions) and lists of its own. A change splits at most one piece; a
read walks the pieces, then reads the base at one position. So a change or a read costs
O(pieces + log n) over a C side, not O(n). Each change is also kept, in order, in
:attr:`StagedSide.ops` -- ``(SET, i, level)``, ``(INSERT, i, level)``, ``(DELETE, i,
stop)`` -- which the native state plays on its record when the message commits
(``BookTable.patch``, O(log n) each). Past :data:`MAX_PIECES` pieces (a message of many
changes on one side) the side reads its base whole into one list, once, and goes on as a
list; its ops are kept all the same. Pure.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from operator import index as as_index
from typing import Any, Final, SupportsIndex

__all__ = ["DELETE", "INSERT", "MAX_PIECES", "SET", "StagedSide"]

SET, INSERT, DELETE = 0, 1, 2  # what a change in StagedSide.ops is (BookTable.patch reads them)
MAX_PIECES: Final = 32  # past this many pieces a side reads its base whole, once

Level = tuple[float, float, int]
Piece = range | list[Level]


class StagedSide:
    """A list of levels over a base it never changes (see the module docstring).

    Args:
        base: the side as it was (any sequence of levels: an ``_orders.SideView``, a list).
    """

    __slots__ = ("base", "ops", "_pieces", "_len")

    def __init__(self, base: Sequence[Level]) -> None:
        self.base = base
        self.ops: list[tuple[int, int, Any]] = []
        self._len = len(base)
        self._pieces: list[Piece] = [range(self._len)] if self._len else []

    def __len__(self) -> int:
        return self._len

    def __repr__(self) -> str:
        return f"StagedSide({self._span(0, self._len)!r}, ops={len(self.ops)})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str | bytes) or not hasattr(other, "__len__") or not hasattr(other, "__iter__"):
            return NotImplemented
        return self._span(0, self._len) == list(other)  # a list, a tuple, a SideView, a StagedSide

    __hash__ = None  # type: ignore[assignment]  # a list: unhashable

    def __iter__(self) -> Iterator[Level]:
        return iter(self._span(0, self._len))

    def __getitem__(self, key: SupportsIndex | slice) -> Any:
        if isinstance(key, slice):
            start, stop, step = key.indices(self._len)
            return self._span(start, stop) if step == 1 else self._span(0, self._len)[key]
        number, offset = self._locate(self._position(key))
        piece = self._pieces[number]
        return self.base[piece[offset]] if isinstance(piece, range) else piece[offset]

    def __setitem__(self, key: SupportsIndex, level: Level) -> None:
        at = self._position(key)
        self.ops.append((SET, at, level))
        number, offset = self._locate(at)
        piece = self._pieces[number]
        if isinstance(piece, list):
            piece[offset] = level
            return
        self._pieces[number : number + 1] = [
            part for part in (piece[:offset], [level], piece[offset + 1 :]) if len(part)
        ]
        self._compact()

    def insert(self, key: SupportsIndex, level: Level) -> None:
        """``list.insert``: before position ``key`` (a negative one counts from the end; clamped)."""
        at = as_index(key)
        at = min(max(at + self._len, 0) if at < 0 else at, self._len)
        self.ops.append((INSERT, at, level))
        self._len += 1
        if at == self._len - 1:  # at the end
            last = self._pieces[-1] if self._pieces else None
            if isinstance(last, list):
                last.append(level)
            else:
                self._pieces.append([level])
            self._compact()
            return
        number, offset = self._locate(at)
        piece = self._pieces[number]
        if isinstance(piece, list):
            piece.insert(offset, level)
            return
        self._pieces[number : number + 1] = [
            part for part in (piece[:offset], [level], piece[offset:]) if len(part)
        ]
        self._compact()

    def __delitem__(self, key: SupportsIndex | slice) -> None:
        if not isinstance(key, slice):
            at = self._position(key)
            start, stop = at, at + 1
        else:
            start, stop, step = key.indices(self._len)
            if step != 1:  # one level at a time, the last first (never used by the book rules)
                for at in sorted(range(start, stop, step), reverse=True):
                    del self[at]
                return
            if start >= stop:
                return
        self.ops.append((DELETE, start, stop))
        self._cut(start, stop)

    def _position(self, key: SupportsIndex) -> int:
        at = as_index(key)
        if at < 0:
            at += self._len
        if not 0 <= at < self._len:
            raise IndexError("book side index out of range")
        return at

    def _locate(self, at: int) -> tuple[int, int]:
        # The piece that holds position ``at`` (0 <= at < len) and where in it.
        for number, piece in enumerate(self._pieces):
            size = len(piece)
            if at < size:
                return number, at
            at -= size
        raise IndexError("book side index out of range")

    def _span(self, start: int, stop: int) -> list[Level]:
        # Levels [start, stop) as a list: a slice of the base for each run of it.
        out: list[Level] = []
        at = 0
        for piece in self._pieces:
            if at >= stop:
                break
            size = len(piece)
            low, high = max(start - at, 0), min(stop - at, size)
            if low < high:
                if isinstance(piece, range):
                    run = piece[low:high]
                    out += self.base[run.start : run.stop]
                else:
                    out += piece[low:high]
            at += size
        return out

    def _cut(self, start: int, stop: int) -> None:
        # Levels [start, stop) taken out (start < stop <= len).
        pieces: list[Piece] = []
        at = 0
        for piece in self._pieces:
            size = len(piece)
            low, high = max(start - at, 0), min(stop - at, size)
            at += size
            if low >= high:
                pieces.append(piece)
            elif isinstance(piece, list):
                del piece[low:high]
                if piece:
                    pieces.append(piece)
            else:
                pieces += [part for part in (piece[:low], piece[high:]) if len(part)]
        self._pieces = pieces
        self._len -= stop - start
        self._compact()

    def _compact(self) -> None:
        if len(self._pieces) > MAX_PIECES:  # many changes: the side as one list, read once
            self._pieces = [self._span(0, self._len)]
