"""The ``itch50`` conversion state: market-by-order books (docs/converters.md, "itch50").

Theory of operation
-------------------
The live orders (an order table: the C extension ``_orders`` where it is
built, else :class:`~adapter.conversion.order_table.OrderTable`, chosen by
:func:`~adapter.conversion.choice.make_order_store`) add up per symbol to
price levels (:class:`~adapter.conversion.order_table.SideLevels` or its C twin);
each symbol's :class:`~adapter.conversion.state.SymbolValues` carries the
best ``depth`` levels a side and the session values in a
:class:`~adapter.conversion.book.BookValues`, as ``fix44`` does, so the
client, the digest of values, blocks and images see one book model. Where
the C run is built those values and their hashes live in C records
(``MboRun.symbol_map``: ``_values`` is a mapping of str to SymbolValues
built from the records, ``_hashes`` the records' hashes), which the run
converts on in place.

The rules: an add (``A``/``F``) puts an order on its stock's side at its
price; ``E`` and ``C`` take the executed shares off the order and ``X`` the
cancelled ones (an order at 0 shares is removed); ``D`` removes it; ``U``
removes the original and adds the new reference on the same stock and side.
``P`` and ``Q`` never touch books. Volume counts the shares of ``E``, of a
printable ``C``, of ``P`` and of ``Q``; last is the price of the latest of
those (``E``: the resting order's price; ``C``: its execution price); high,
low and VWAP are over the same executions.

A message is staged first (:meth:`MboState.stage`: checked, and the values
after it computed without changing anything) and committed only when the
adapter keeps it, so a message that cannot be applied changes nothing.

The digest is the base digest (every symbol's values, the session) plus the
order table's digest, so two adapters agree only when their live orders do.
:meth:`MboState.snapshot` carries each symbol's live orders packed in its
book (``orders``), and :meth:`MboState.restore` rebuilds the table from
them: a backup that adopts a snapshot and a late joiner's image hold the
same orders. A journal checkpoint takes :meth:`MboState.checkpoint_symbols`:
where ``_orders`` is built, the C run's writer puts the snapshot straight into
the checkpoint's bytes (the same bytes, without a Python object per order).

Hostile input cannot grow the state without bound: past ``max_orders``
live orders an add is refused (``order_limit``; deletes, executions and
replaces make room again), and past ``max_symbols`` a message naming a new
symbol is refused (``symbol_limit``: a stock locate is 16 bits, but a
directory message may rename one again and again). Both count against the
adapter's memory budget too (:mod:`adapter.conversion.budget`: an order at
:data:`~adapter.conversion.budget.ORDER_BYTES`, a stock at
:data:`~adapter.conversion.budget.ITCH50_SYMBOL_BYTES`): an add or a new stock
that would pass :attr:`MboState.table_budget` is refused (``memory_limit``).
Every refusal is a ConversionError, so the message is quarantined alike in
every adapter of the group. ``order_cap`` is where the C run stops adding
(the lower of the two bounds); the Python path names which one it was. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from hashlib import blake2b
from typing import Final

from feedha.adapter.conversion.book import ASK, BID, BookValues, MboBookValues
from feedha.adapter.conversion.budget import DEFAULT_TABLE_BYTES, ITCH50_SYMBOL_BYTES, ORDER_BYTES
from feedha.adapter.conversion.choice import make_order_store
from feedha.adapter.conversion.messages import SourceMessage
from feedha.adapter.conversion.order_table import MASK, ORDER_RECORD, PriceLevels
from feedha.adapter.conversion.state import INT64_MAX, ConversionState, EncodedSymbols, SymbolValues
from feedha.adapter.errors import ConversionError
from feedha.adapter.formats.interface import MAX_ORDERS
from feedha.adapter.formats.itch50._native_values import native_symbols
from feedha.adapter.formats.itch50.parser import ItchMessage
from feedha.proto.model import SESSION_VALUES

__all__ = ["MAX_ORDERS", "MAX_SYMBOLS", "MboState", "Staged"]

PRICE_SCALE: Final = 10_000.0
MAX_SYMBOLS: Final = 200_000  # symbols held (a real day names about 12,000)
Op = tuple[int, ...]  # (ADD, ref, symbol, side, price, shares) | (REMOVE, ref) | (SHARES, ref, shares)
ADD, REMOVE, SHARES = 0, 1, 2


class Staged(dict[str, SymbolValues]):
    """What :meth:`MboState.stage` returns: the values after a message and the order changes."""

    __slots__ = ("ops",)

    def __init__(self, values: Mapping[str, SymbolValues], ops: list[Op]) -> None:
        super().__init__(values)
        self.ops = ops


class MboState(ConversionState):
    """Market-by-order books of every symbol (see the module docstring).

    Args:
        depth: the levels a side shown (and carried in each symbol's values).
        max_orders: the most live orders held; an add past it is refused (``order_limit``).
        max_symbols: the most symbols held; a message naming one more is refused (``symbol_limit``).
        table_budget: the bytes its orders and stocks may count (``memory_limit`` past it).
        prefer_native: keep the orders in the C extension where it is built (``False``: the
            Python reference, for comparisons).
    """

    __slots__ = (
        "depth",
        "_max_orders",
        "order_cap",
        "orders",
        "store",
        "_names",
        "_index",
        "_sides",
        "_name_hashes",
        "_orders_digest",
    )

    def __init__(
        self,
        depth: int = 10,
        *,
        max_orders: int = MAX_ORDERS,
        max_symbols: int = MAX_SYMBOLS,
        table_budget: int = DEFAULT_TABLE_BYTES,
        prefer_native: bool = True,
    ) -> None:
        super().__init__()
        self.depth = depth
        self.max_symbols = max_symbols
        self.store = make_order_store(prefer_native=prefer_native)
        self.orders = self.store.table()
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        self._sides: list[tuple[PriceLevels, PriceLevels]] = []  # (bids, asks)
        self._name_hashes: list[int] = []
        self._orders_digest = 0
        self._max_orders = max_orders
        self._table_budget = table_budget
        self.order_cap = 0
        self._budget_changed()
        self._native_values()

    def _native_values(self) -> None:
        # With the C run, the symbols' values live in C records (MboRun.symbol_map: a mapping
        # of str to SymbolValues, as the dicts were); the run converts on them in place.
        make = self.store.symbol_map
        if make is None:
            return
        self._values, self._hashes = native_symbols(
            make(SymbolValues, BookValues), self._values, self._hashes
        )

    symbol_bytes = ITCH50_SYMBOL_BYTES

    @property
    def max_orders(self) -> int:
        """The most live orders held; an add past it is refused (``order_limit``)."""
        return self._max_orders

    @max_orders.setter
    def max_orders(self, value: int) -> None:
        self._max_orders = value
        self._budget_changed()

    def charged(self) -> int:
        """The bytes the tables count: live orders and stocks (adapter.conversion.budget)."""
        return len(self.orders) * ORDER_BYTES + len(self._names) * ITCH50_SYMBOL_BYTES

    def _budget_changed(self) -> None:
        # order_cap: the live orders the C run adds up to (it reads it as the state's limit).
        room = (self._table_budget - len(self._names) * ITCH50_SYMBOL_BYTES) // ORDER_BYTES
        self.order_cap = max(0, min(self._max_orders, room))

    # ---- staging and committing one message ------------------------------------------------

    def stage(self, msg: SourceMessage) -> Staged:
        """The values of the symbol ``msg`` touches after it, and its order changes (nothing changes).

        Raises:
            ConversionError: ``unknown_order``, ``duplicate_order``, ``bad_shares``, ``overflow``.
        """
        assert isinstance(msg, ItchMessage)
        kind = msg.kind
        if kind in ("A", "F"):
            return self._stage_add(msg)
        if kind in ("P", "Q", "R"):
            self._check_room(msg.symbol)
            values = self._values_of(msg.symbol)
            if kind != "R":
                _execute(values, msg.symbol, msg.price, msg.shares)
            return Staged({msg.symbol: values}, [])
        return self._stage_order(msg)

    def _stage_add(self, msg: ItchMessage) -> Staged:
        if msg.ref in self.orders:
            raise ConversionError("duplicate_order", f"order {msg.ref} is live already")
        if msg.shares <= 0:
            raise ConversionError("bad_shares", f"order {msg.ref} added with 0 shares")
        if len(self.orders) >= self.max_orders:
            raise ConversionError(
                "order_limit", f"order {msg.ref} refused: {self.max_orders} orders are live already"
            )
        self._check_room(msg.symbol)
        stock = 0 if msg.symbol in self._index else ITCH50_SYMBOL_BYTES
        self._check_memory(f"order {msg.ref}", ORDER_BYTES + stock)
        symbol = self._intern(msg.symbol)
        op = (ADD, msg.ref, symbol, msg.side, msg.price, msg.shares)
        return self._staged(symbol, msg.side, {msg.price: (msg.shares, 1)}, [op], None)

    def _stage_order(self, msg: ItchMessage) -> Staged:
        order = self.orders.get(msg.ref)
        if order is None:
            raise ConversionError("unknown_order", f"{msg.kind} of order {msg.ref}, which is not live")
        symbol, side, price, shares = order
        kind, ref = msg.kind, msg.ref
        if kind == "D" or kind == "U":
            moves = {price: (-shares, -1)}
            ops: list[Op] = [(REMOVE, ref)]
            if kind == "U":
                if msg.new_ref in self.orders and msg.new_ref != ref:
                    raise ConversionError("duplicate_order", f"U to order {msg.new_ref}, which is live")
                if msg.shares <= 0:
                    raise ConversionError("bad_shares", f"order {msg.new_ref} replaced with 0 shares")
                d_shares, d_orders = moves.get(msg.price, (0, 0))
                moves[msg.price] = (d_shares + msg.shares, d_orders + 1)
                ops.append((ADD, msg.new_ref, symbol, side, msg.price, msg.shares))
            return self._staged(symbol, side, moves, ops, None)
        if msg.shares > shares:
            raise ConversionError("bad_shares", f"{kind} of {msg.shares} shares, order {ref} has {shares}")
        left = shares - msg.shares
        one: Op = (REMOVE, ref) if left == 0 else (SHARES, ref, left)
        moves = {price: (-msg.shares, -1 if left == 0 else 0)}
        trade = None
        if kind == "E":
            trade = (price, msg.shares)
        elif kind == "C" and msg.printable:
            trade = (msg.price, msg.shares)
        return self._staged(symbol, side, moves, [one], trade)

    def _staged(
        self,
        symbol: int,
        side: int,
        moves: dict[int, tuple[int, int]],
        ops: list[Op],
        trade: tuple[int, int] | None,
    ) -> Staged:
        name = self._names[symbol]
        values = self._values_of(name)
        book = values.book
        assert book is not None
        levels = self._sides[symbol][0 if side == BID else 1].best(self.depth, moves)
        shown = [(price / PRICE_SCALE, float(size), orders) for price, size, orders in levels]
        if side == BID:
            book.bids = shown
        else:
            book.asks = shown
        if trade is not None:
            _execute(values, name, *trade)
        values.bid, values.ask = book.best(BID), book.best(ASK)
        return Staged({name: values}, ops)

    def commit(self, staged: Mapping[str, SymbolValues]) -> None:
        """Adopt what :meth:`stage` returned: the order changes, then the values."""
        for op in getattr(staged, "ops", ()):
            self._apply(op)
        for symbol, values in staged.items():
            self._intern(symbol)
            old_hash = self._hashes.get(symbol, 0)
            new_hash = self.store.symbol_digest(symbol, values)
            self._values[symbol] = values
            self._hashes[symbol] = new_hash
            self._digest = (self._digest - old_hash + new_hash) & MASK

    def apply(self, msg: SourceMessage) -> SymbolValues:
        """Apply one message; the values of the symbol it touched."""
        staged = self.stage(msg)
        self.commit(staged)
        return next(iter(staged.values()))

    def preview(self, msg: SourceMessage) -> SymbolValues:
        """The values of the symbol ``msg`` touches after it (nothing changes)."""
        return next(iter(self.stage(msg).values()))

    def touched(self, staged: Mapping[str, SymbolValues]) -> bytes:
        """The orders a staged message touches, after it, packed as a block carries them.

        Called before :meth:`commit`: a record per change, :data:`ORDER_RECORD` with the
        order's remaining shares after the message (0: removed).
        """
        pack, out = ORDER_RECORD.pack, []
        for op in getattr(staged, "ops", ()):
            if op[0] == ADD:
                _, ref, _symbol, side, price, shares = op
                out.append(pack(ref, side, price, shares))
                continue
            found = self.orders.get(op[1])
            if found is not None:
                _symbol, side, price, _shares = found
                out.append(pack(op[1], side, price, 0 if op[0] == REMOVE else op[2]))
        return b"".join(out)

    def roll_orders(self, name: str, packed: bytes) -> None:
        """Apply the order changes of a published block (journal recovery), as :meth:`touched` packed them.

        A change that does not fit the table (an unknown order removed, a bad side) is
        left out: the records are this adapter's own, so none is expected.
        """
        symbol = self._intern(name)
        for ref, side, price, shares in ORDER_RECORD.iter_unpack(packed[: len(packed) // 17 * 17]):
            live = ref in self.orders
            if shares == 0:
                if live:
                    self._apply((REMOVE, ref))
            elif live:
                self._apply((SHARES, ref, shares))
            elif side in (BID, ASK) and len(self.orders) < self.order_cap:
                self._apply((ADD, ref, symbol, side, price, shares))

    def _apply(self, op: Op) -> None:
        orders, kind, ref = self.orders, op[0], op[1]
        if kind == ADD:
            _, _, symbol, side, price, shares = op
            orders.add(ref, symbol, side, price, shares)
            self._sides[symbol][0 if side == BID else 1].move(price, shares, 1)
            self._order_digest(+1, ref, symbol, side, price, shares)
            return
        found = orders.get(ref)
        assert found is not None
        symbol, side, price, shares = found
        levels = self._sides[symbol][0 if side == BID else 1]
        self._order_digest(-1, ref, symbol, side, price, shares)
        if kind == REMOVE:
            orders.remove(ref)
            levels.move(price, -shares, -1)
        else:
            orders.set_shares(ref, op[2])
            levels.move(price, op[2] - shares, 0)
            self._order_digest(+1, ref, symbol, side, price, op[2])

    def _order_digest(self, sign: int, ref: int, symbol: int, side: int, price: int, shares: int) -> None:
        mixed = self.store.order_hash(ref, self._name_hashes[symbol], side, price, shares)
        self._orders_digest = (self._orders_digest + sign * mixed) & MASK
        self._digest = (self._digest + sign * mixed) & MASK

    # ---- symbols -----------------------------------------------------------------------

    def _check_room(self, name: str, new: int = 1) -> None:
        # Symbols are counted as interned (a staged add interns its symbol before the commit).
        if name in self._index:
            return
        if len(self._names) + new > self.max_symbols:
            raise ConversionError(
                "symbol_limit", f"symbol {name!r} refused: {self.max_symbols} symbols are held already"
            )
        self._check_memory(f"symbol {name!r}", new * ITCH50_SYMBOL_BYTES)

    def _intern(self, name: str) -> int:
        index = self._index.get(name)
        if index is None:
            index = self._index[name] = len(self._names)
            self._names.append(name)
            levels = self.store.levels
            self._sides.append((levels(is_bid=True), levels(is_bid=False)))
            digest = blake2b(name.encode(), digest_size=8).digest()
            self._name_hashes.append(int.from_bytes(digest, "big"))
            self._budget_changed()
        return index

    def _values_of(self, name: str) -> SymbolValues:
        # A copy the caller owns: the shown levels are small tuples, the orders are not in it.
        current = self._values.get(name)
        if current is None:
            return SymbolValues(book=BookValues())
        values = current.copy()
        if values.book is None:
            values.book = BookValues()
        return values

    # ---- the whole state: snapshots, restore, digest -------------------------------------------

    def snapshot(self) -> dict[str, SymbolValues]:
        """Every symbol's values, each book with its live orders packed (``MboBookValues``)."""
        packed: dict[int, list[bytes]] = {}
        pack = ORDER_RECORD.pack
        for ref, symbol, side, price, shares in self.orders.items():
            packed.setdefault(symbol, []).append(pack(ref, side, price, shares))
        out: dict[str, SymbolValues] = {}
        for name, values in self._values.items():
            copied = values.copy()
            book = copied.book if copied.book is not None else BookValues()
            mbo = MboBookValues(book.level_indexed, book.bids, book.asks)
            _copy_session(book, mbo)
            mbo.orders = b"".join(sorted(packed.get(self._index.get(name, -1), ())))
            copied.book = mbo
            out[name] = copied
        return out

    def checkpoint_symbols(self) -> Mapping[str, SymbolValues] | EncodedSymbols:
        """:meth:`snapshot` for a checkpoint, written in C where built (``MboRun.checkpoint_symbols``).

        The same bytes ``recovery.encode_checkpoint_state`` writes for :meth:`snapshot`, without a
        Python object per live order or symbol.
        """
        if self.store.run is None:
            return self.snapshot()
        return EncodedSymbols(self.store.run(self, SymbolValues, BookValues).checkpoint_symbols())

    def restore(self, snapshot: Mapping[str, SymbolValues], *, session: int | None = None) -> None:
        """Replace the whole state (values and live orders) by ``snapshot``."""
        plain: dict[str, SymbolValues] = {}
        self.orders.clear()
        self._names, self._index, self._sides, self._name_hashes = [], {}, [], []
        self._orders_digest = 0
        for name, values in snapshot.items():
            if len(self._names) >= self.max_symbols and name not in self._index:
                continue  # a snapshot is the active's own (same limits); this keeps a bad one bounded
            copied = values.copy()
            book = copied.book
            if isinstance(book, MboBookValues):
                self._load_orders(self._intern(name), book.orders)
                copied.book = BookValues(book.level_indexed, book.bids, book.asks)
                _copy_session(book, copied.book)
            plain[name] = copied
        orders_digest = self._orders_digest
        super().restore(plain, session=session)
        self._native_values()
        self._digest = (self._digest + orders_digest) & MASK
        self._orders_digest = orders_digest

    def _load_orders(self, symbol: int, packed: bytes) -> None:
        for ref, side, price, shares in ORDER_RECORD.iter_unpack(packed[: len(packed) // 17 * 17]):
            full = len(self.orders) >= self.order_cap
            if full or ref in self.orders or side not in (BID, ASK) or shares <= 0:
                continue  # a snapshot is the active's own; this only keeps a bad one from hurting
            self._apply((ADD, ref, symbol, side, price, shares))

    def recompute_digest(self) -> int:
        """The digest from scratch (values, session and every live order)."""
        total = super().recompute_digest()
        for ref, symbol, side, price, shares in self.orders.items():
            total += self.store.order_hash(ref, self._name_hashes[symbol], side, price, shares)
        return total & MASK

    def levels(self, name: str, side: int, depth: int) -> list[tuple[int, int, int]]:
        """The best ``depth`` levels of a symbol's side from the orders (prices in 1/10,000)."""
        index = self._index.get(name)
        if index is None:
            return []
        return self._sides[index][0 if side == BID else 1].best(depth)


def _copy_session(source: BookValues, target: BookValues) -> None:
    for name in SESSION_VALUES:
        setattr(target, name, getattr(source, name))
    target.notional, target.traded, target.trades = source.notional, source.traded, source.trades


def _execute(values: SymbolValues, symbol: str, price_units: int, shares: int) -> None:
    """An execution at ``price_units`` (1/10,000) of ``shares``: volume, last, high, low, VWAP.

    ``book.notional`` is kept in price units (1/10,000), an integer held exactly by the
    double up to 2**53, so VWAP is the correctly rounded quotient of two exact integers.
    """
    book = values.book
    assert book is not None
    price = price_units / PRICE_SCALE
    book.last = price
    book.volume = (book.volume or 0.0) + shares
    book.high = price if book.high is None or price > book.high else book.high
    book.low = price if book.low is None or price < book.low else book.low
    book.notional += price_units * shares
    book.traded += shares
    book.trades += 1
    if book.traded:
        book.vwap = int(book.notional) / (int(book.traded) * 10_000)
    if not book.volume <= INT64_MAX:
        raise ConversionError("overflow", f"volume of {symbol!r} leaves int64")
    values.volume = int(book.volume)
    values.high, values.low, values.last = book.high, book.low, book.last
    values.vwap, values.trade_count = book.vwap or 0.0, book.trades
    values.notional = book.notional / PRICE_SCALE
