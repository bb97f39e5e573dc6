"""Conversion state: the per-symbol values conversion keeps, with an O(1) digest.

Theory of operation
-------------------
For each symbol the adapter keeps :class:`SymbolValues` (daily volume, high,
low, last, VWAP, trade count, last bid/ask, notional, and a book where the
format keeps one). How a message moves them is each format's rule, its state's
``preview``/``stage`` (``feedha-fix``'s: :mod:`adapter.formats.feedha_fix.state`).

Backups compare their conversion state with the active's by a 64-bit digest
(DESIGN "synchronization rules", rule 1) and transfer values only on a
mismatch, so the digest must be

* deterministic across processes: each symbol hashes ``blake2b(digest_size=8)``
  over its UTF-8 name and a ``struct`` packing of its values, never Python's
  randomized ``hash()``;
* independent of the order symbols were first seen: the whole-state digest is
  the *sum* mod 2**64 of the per-symbol hashes;
* incremental: :meth:`ConversionState.apply` subtracts the symbol's old hash
  and adds its new one, O(1) per message whatever the number of symbols.

Floats are hashed bit for bit, so two states agree only when every value is
identical, which holds for adapters that applied the same messages in the
same order (or adopted the same values).

The trading day: the state belongs to a *session* (an id, 1, 2, ... that grows
at every session boundary). The digest covers it -- :func:`session_digest` of
the id is added to the sum -- so two adapters agree only when they are in the
same session too. At a boundary every symbol's daily fields start again
(:func:`next_session`) and the session id moves on (:meth:`ConversionState.roll`).
This module is pure.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, fields
from hashlib import blake2b
from typing import ClassVar, Final

from feedha.adapter.conversion.book import BookValues
from feedha.adapter.conversion.budget import DEFAULT_TABLE_BYTES
from feedha.adapter.conversion.messages import SourceMessage
from feedha.adapter.errors import ConversionError

DIGEST_MASK: Final = (1 << 64) - 1
INT64_MAX: Final = (1 << 63) - 1
# volume, high, low, last, vwap, trade_count, bid, ask, notional -- big-endian, fixed size.
_PACK_VALUES: Final = struct.Struct(">qddddqddd").pack
# What a session id is hashed with: no symbol hash input is this short (a symbol's is
# the name, a zero byte and 72 bytes of values), so the two cannot be confused.
_SESSION_KEY: Final = b"\x00session\x00"
MAX_SESSION_ID: Final = (1 << 63) - 1
MAX_SYMBOLS: Final = 1_000_000  # symbols a state holds; a message naming one more is quarantined


@dataclass(slots=True)
class SymbolValues:
    """The values conversion keeps for one symbol over the trading day.

    ``high``/``low`` are 0 before the first trade; ``vwap`` is ``notional / volume``.
    ``book`` is the ``fix44`` order book and session values (``None`` for ``feedha-fix``).
    """

    volume: int = 0
    high: float = 0.0
    low: float = 0.0
    last: float = 0.0
    vwap: float = 0.0
    trade_count: int = 0
    bid: float = 0.0
    ask: float = 0.0
    notional: float = 0.0
    book: BookValues | None = None

    def copy(self) -> SymbolValues:
        """Return an independent copy."""
        if self.book is None:
            return SymbolValues(*self.astuple())
        return SymbolValues(*self.astuple(), book=self.book.copy())

    def astuple(self) -> tuple[int, float, float, float, float, int, float, float, float]:
        """The values in field order (what the digest packs and the C state stores)."""
        return (
            self.volume,
            self.high,
            self.low,
            self.last,
            self.vwap,
            self.trade_count,
            self.bid,
            self.ask,
            self.notional,
        )


FIELD_NAMES: Final = tuple(f.name for f in fields(SymbolValues) if f.name != "book")
DAILY_FIELDS: Final = ("volume", "high", "low", "vwap", "trade_count", "notional")


def next_session(values: SymbolValues) -> SymbolValues:
    """A symbol's values at the start of the next session: the daily fields start again.

    Volume, high, low, VWAP, trade count and notional go back to zero (``high``
    and ``low`` are set again by the next trade); ``last``, ``bid`` and ``ask``
    carry over, as an exchange carries the previous close and the standing quotes.
    """
    book = values.book
    if book is not None:  # the book stands; the day's figures start again, last and close carry over
        book = BookValues(
            book.level_indexed, list(book.bids), list(book.asks), last=book.last, close=book.close
        )
    return SymbolValues(last=values.last, bid=values.bid, ask=values.ask, book=book)


def session_digest(session_id: int) -> int:
    """A session id's share of the digest (0 for session 0, which no adapter is in)."""
    if not 0 <= session_id <= MAX_SESSION_ID:
        raise ValueError(f"session_id must be in 0..{MAX_SESSION_ID}, got {session_id}")
    if not session_id:
        return 0
    data = _SESSION_KEY + session_id.to_bytes(8, "big")
    return int.from_bytes(blake2b(data, digest_size=8).digest(), "big")


def symbol_digest(symbol: str, values: SymbolValues) -> int:
    """Hash one symbol and its values to a u64, the same in every process.

    Args:
        symbol: the symbol name.
        values: its values.

    Returns:
        ``blake2b(digest_size=8)`` over the symbol and packed values, as an int.
    """
    data = symbol.encode() + b"\x00" + _PACK_VALUES(*values.astuple())
    if values.book is not None:
        data += values.book.digest_bytes()
    return int.from_bytes(blake2b(data, digest_size=8).digest(), "big")


@dataclass(frozen=True, slots=True)
class EncodedSymbols:
    """Every symbol of a state written as ``sync.proto`` ``ConversionSnapshot.symbols`` fields.

    What a state whose symbols live in C gives for a checkpoint
    (:meth:`ConversionState.checkpoint_symbols`): the bytes
    ``recovery.encode_checkpoint_state`` would write for its :meth:`~ConversionState.snapshot`.
    """

    data: bytes


class ConversionState:
    """Per-symbol :class:`SymbolValues` with an incrementally maintained digest.

    Example:
        >>> state = ConversionState()
        >>> len(state), state.digest
        (0, 0)
    """

    __slots__ = ("_values", "_hashes", "_digest", "_session", "max_symbols", "_table_budget")
    # Whether a symbol's book keeps more than a block shows (fix44's price-keyed books): then a
    # journal's recovery rolls each block's SymbolUpdate.levels into it (codec.roll_symbol).
    whole_books = False
    symbol_bytes: ClassVar[int]  # what a symbol counts against the tables' budget: each format's state says

    def __init__(self) -> None:
        self._values: dict[str, SymbolValues] = {}
        self._hashes: dict[str, int] = {}
        self._digest = 0
        self._session = 0
        self.max_symbols = MAX_SYMBOLS  # a source naming symbol after symbol must not grow us forever
        self._table_budget = DEFAULT_TABLE_BYTES

    @property
    def table_budget(self) -> int:
        """The bytes the tables may count (adapter.conversion.budget); past it: ``memory_limit``."""
        return self._table_budget

    @table_budget.setter
    def table_budget(self, value: int) -> None:
        if value < 0:
            raise ValueError(f"table_budget must be >= 0, got {value}")
        self._table_budget = value
        self._budget_changed()

    def _budget_changed(self) -> None:
        """Called when the budget (or a limit) changes: a native state passes it to its C table."""

    def charged(self) -> int:
        """The bytes the tables count now (their entries at the budget's fixed costs)."""
        return len(self) * self.symbol_bytes

    def _check_memory(self, what: str, more: int) -> None:
        # Raises memory_limit when ``more`` counted bytes would pass the tables' budget.
        charged = self.charged()
        if more > 0 and charged + more > self._table_budget:
            raise ConversionError(
                "memory_limit",
                f"{what} refused: the tables count {charged:,} bytes of the {self._table_budget:,} "
                "their budget allows (--memory-budget)",
            )

    def preview(self, msg: SourceMessage) -> SymbolValues:
        """The values ``msg`` would give its symbol, without changing the state.

        Each format's state says how a message moves them (``feedha-fix``'s:
        :class:`~adapter.formats.feedha_fix.state.FeedhaFixState`).

        Raises:
            ConversionError: the message cannot be applied (``overflow``, ``symbol_limit`` ...).
        """
        raise NotImplementedError

    def _check_room(self, symbol: str, new: int = 1) -> None:
        # Raises symbol_limit when ``new`` more symbols (``symbol`` the first) would pass the
        # limit, memory_limit when they would pass the budget.
        if len(self) + new > self.max_symbols:
            raise ConversionError(
                "symbol_limit", f"symbol {symbol!r} refused: {self.max_symbols} symbols are held already"
            )
        self._check_memory(f"symbol {symbol!r}", new * self.symbol_bytes)

    def apply(self, msg: SourceMessage) -> SymbolValues:
        """Apply one converted source message to its symbol's values.

        Args:
            msg: the message, as a format's parser returns it.

        Returns:
            A copy of the symbol's values after the message.

        Raises:
            ConversionError: ``overflow``; the state is left as it was.
        """
        values = self.preview(msg)
        self.set_symbol(msg.symbol, values)
        return values

    def stage(self, msg: SourceMessage) -> dict[str, SymbolValues]:
        """The values of every symbol ``msg`` touches after it, without changing the state.

        Raises:
            ConversionError: the message cannot be applied (the state is left as it was).
        """
        return {msg.symbol: self.preview(msg)}

    def commit(self, staged: Mapping[str, SymbolValues]) -> None:
        """Adopt what :meth:`stage` returned (every symbol of one message at once)."""
        for symbol, values in staged.items():
            self.set_symbol(symbol, values)

    @property
    def digest(self) -> int:
        """A u64 digest of the whole state: order-independent and deterministic across processes."""
        return self._digest

    @property
    def session(self) -> int:
        """The session the state belongs to (0: none yet); the digest covers it."""
        return self._session

    @session.setter
    def session(self, session_id: int) -> None:
        old = session_digest(self._session)
        self._digest = (self._digest - old + session_digest(session_id)) & DIGEST_MASK
        self._session = session_id

    def roll(self, session_id: int) -> None:
        """Start session ``session_id``: every symbol's daily fields start again (O(symbols)).

        Raises:
            ValueError: ``session_id`` is out of range.
        """
        session_digest(session_id)  # checks the range before anything changes
        for symbol, values in self.snapshot().items():
            self.set_symbol(symbol, next_session(values))
        self.session = session_id

    def recompute_digest(self) -> int:
        """Recompute the digest from scratch (a check of the incremental one; O(symbols))."""
        total = session_digest(self._session)
        for symbol, values in self._values.items():
            total += symbol_digest(symbol, values)
        return total & DIGEST_MASK

    def get(self, symbol: str) -> SymbolValues | None:
        """Return a copy of one symbol's values, or ``None`` if it was never seen."""
        values = self._values.get(symbol)
        return None if values is None else values.copy()

    def peek(self, symbol: str) -> SymbolValues | None:
        """One symbol's values themselves, not a copy (``None``: never seen); never change them."""
        return self._values.get(symbol)

    def view(self, symbol: str) -> SymbolValues | None:
        """One symbol's values to read now, before the state next changes (``None``: never seen).

        Here :meth:`peek`; a native state gives its record's book sides as views of the
        record (read in place, not copied), good until the state next changes.
        """
        return self.peek(symbol)

    def symbol_digest(self, symbol: str) -> int | None:
        """Return one symbol's u64 hash (its share of :attr:`digest`), or ``None`` if unknown."""
        return self._hashes.get(symbol)

    def set_symbol(self, symbol: str, values: SymbolValues) -> None:
        """Adopt one symbol's values (e.g. the active's), keeping the digest right.

        Args:
            symbol: the symbol.
            values: its new values; copied, so the caller keeps ownership.
        """
        old_hash = self._hashes.get(symbol, 0)
        adopted = values.copy()
        new_hash = symbol_digest(symbol, adopted)
        self._values[symbol] = adopted
        self._hashes[symbol] = new_hash
        self._digest = (self._digest - old_hash + new_hash) & DIGEST_MASK

    def roll_orders(self, symbol: str, packed: bytes) -> None:
        """Apply a block's order changes (``SymbolUpdate.orders``); only a state of live orders has any."""

    def snapshot(self) -> dict[str, SymbolValues]:
        """Return a deep copy of every symbol's values."""
        return {symbol: values.copy() for symbol, values in self._values.items()}

    def checkpoint_symbols(self) -> Mapping[str, SymbolValues] | EncodedSymbols:
        """Every symbol for a journal checkpoint: :meth:`snapshot`, or a C state's own encoding of it."""
        return self.snapshot()

    def restore(self, snapshot: Mapping[str, SymbolValues], *, session: int | None = None) -> None:
        """Replace the whole state by ``snapshot`` (copied) and recompute the digest.

        Args:
            snapshot: every symbol's values.
            session: the session the values belong to (``None``: keep the current one).
        """
        session_id = self._session if session is None else session
        salt = session_digest(session_id)
        self._values = {symbol: values.copy() for symbol, values in snapshot.items()}
        self._hashes = {symbol: symbol_digest(symbol, values) for symbol, values in self._values.items()}
        self._digest = (sum(self._hashes.values()) + salt) & DIGEST_MASK
        self._session = session_id

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, symbol: object) -> bool:
        return symbol in self._values

    def __repr__(self) -> str:
        return (
            f"<ConversionState [symbols={len(self._values)}, session={self._session}, "
            f"digest={self._digest:016x}]>"
        )
