"""The ``itch50`` conversion engine: TotalView-ITCH 5.0 over MoldUDP64 into market-by-order books.

A source frame is one MoldUDP64 downstream packet; :meth:`Itch50Engine.source_frame`
turns it into the record frame the adapter core cuts into messages
(:mod:`proto.moldudp64`, its reference; ``_orders.MboRun.records`` cuts it in C
where the extension is built), each record carrying its message's sequence number
(the ``source_seq``). A heartbeat (count 0) and the end of session (count
``0xFFFF``) carry no message: they are counted and give an empty frame. A
packet too short for its header is one malformed stretch, quarantined.

Each ITCH message that moves a book or session values is one block, as
``fix44``'s: a ``MarketUpdate`` with one ``SymbolUpdate`` (its executions as
trades, the shown book's changes, the symbol's state after it, and the live
orders it touched, so that an adapter rebuilds its order table from its
journal), written by the C extension ``_orders`` where it is built
(:func:`~adapter.conversion.codec.encode_book_block` is its reference).

Where the extension is built, runs are C too: ``_orders.MboRun`` converts every
message that gives a block -- those that move one live order (``A F E C X D U``),
trades and crosses (``P Q``) and directory messages (``R``) of a known symbol --
whole: decoded, checked, staged, encoded, hashed and committed to the same
state objects. It stops at anything else (the first message naming a new
symbol, a type that moves nothing, a cross past a u32 of shares, an error),
which the Python path takes (the reference engine's loop,
:meth:`LoopEngine.run`, is the reference for both). Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from feedha.adapter.conversion._reference import LoopEngine
from feedha.adapter.conversion.book import ASK, BID, BookValues, book_changes
from feedha.adapter.conversion.engine import RunFunction, RunTuple
from feedha.adapter.conversion.messages import SourceMessage
from feedha.adapter.conversion.state import SymbolValues
from feedha.adapter.errors import ConversionError
from feedha.adapter.formats.itch50.parser import ItchMessage, parse_itch
from feedha.adapter.formats.itch50.state import MAX_ORDERS, PRICE_SCALE, MboState
from feedha.proto import moldudp64
from feedha.proto.wire import MAX_SOURCE_SEQ

__all__ = ["Itch50Engine"]

_NOT_A_PACKET: Final = b"\xff\xff\xff\xff"  # a record length no record frame of a short packet can satisfy


class Itch50Engine(LoopEngine):
    """The ``itch50`` engine (Python).

    Args:
        depth: the book depth shown (levels a side in each symbol's state).
        max_orders: the most live orders held (an add past it is quarantined, ``order_limit``).
        prefer_native: the C order table, block encoder, symbol digest and runs where built
            (``False``: the Python references, for comparisons).
    """

    def __init__(self, *, depth: int = 10, max_orders: int = MAX_ORDERS, prefer_native: bool = True) -> None:
        self.mbo = MboState(depth, max_orders=max_orders, prefer_native=prefer_native)
        super().__init__(self.mbo)
        store = self.mbo.store
        self._encode_block = store.encode_block
        self._native_run: RunFunction | None = None
        self._records: Callable[[bytes], tuple[bytes, int, int] | None] | None = None
        if store.run is not None:
            native = store.run(self.mbo, SymbolValues, BookValues)
            self._native_run, self._records = native.run, native.records
        self.is_native = self._native_run is not None
        self.depth = depth
        self.heartbeats = 0
        self.ends_of_session = 0
        self.trailing_bytes = 0

    # ---- framing: MoldUDP64 packets -> record frames -------------------------------------------

    def source_frame(self, frame: bytes) -> bytes:
        """The record frame of one MoldUDP64 packet (see the module docstring); in C where built."""
        if self._records is not None:
            cut = self._records(frame)
            if cut is None:
                return _NOT_A_PACKET + frame
            records, count, trailing = cut
        else:
            try:
                packet = moldudp64.decode_packet(frame)
            except Exception:  # noqa: BLE001 - called before the pipeline's guard: bad bytes never stop it
                return _NOT_A_PACKET + frame
            records, count, trailing = moldudp64.records_of(packet), packet.message_count, packet.trailing
        if count == 0:
            self.heartbeats += 1
        elif count == moldudp64.END_OF_SESSION:
            self.ends_of_session += 1
        self.trailing_bytes += trailing
        return records

    next_message = staticmethod(moldudp64.next_record)
    split_messages = staticmethod(moldudp64.split_records)

    @staticmethod
    def message_type(body: bytes) -> str:
        """A record's ITCH message type (the byte after its sequence number; ``?``: none)."""
        kind = body[moldudp64.SEQ_BYTES : moldudp64.SEQ_BYTES + 1]
        return kind.decode("ascii", "replace") if kind else "?"

    @staticmethod
    def find_seq(stretch: bytes) -> int | None:
        """A malformed stretch of a record frame names no position."""
        return None

    @staticmethod
    def decode_reset(body: bytes) -> tuple[int, int] | None:
        """ITCH has no sequence reset message (MoldUDP64 numbers every message)."""
        return None

    @staticmethod
    def peek_seq(body: bytes, *, tag: int = 0) -> int:
        """A record's sequence number (raises ``ConversionError`` when it has none or is too high)."""
        seq = moldudp64.record_seq(body)
        if seq <= 0:
            raise ConversionError("missing_seq", "a record without a sequence number")
        if seq > MAX_SOURCE_SEQ:
            raise ConversionError("bad_seq", f"sequence number {seq} is past {MAX_SOURCE_SEQ}")
        return seq

    # ---- converting ---------------------------------------------------------------------------

    def run_function(self) -> RunFunction:
        """The C run (``MboRun.run``) where built, else the Python loop."""
        return self._native_run if self._native_run is not None else self.run

    def run(self, *args: Any) -> RunTuple:
        """:meth:`ConversionEngine.run`: the C run where built, else the Python loop."""
        if self._native_run is not None:
            return self._native_run(*args)
        return super().run(*args)

    def parse(self, body: bytes) -> SourceMessage:
        """Decode one record (raises ``ConversionError``)."""
        return parse_itch(body)

    def encode(self, msg: SourceMessage, values: SymbolValues, publish_time_ns: int) -> bytes:
        """The block of a message that touched one symbol."""
        return self.encode_staged(msg, {msg.symbol: values}, publish_time_ns)

    def encode_staged(
        self, msg: SourceMessage, staged: Mapping[str, SymbolValues], publish_time_ns: int
    ) -> bytes:
        """The block of one message (before its staged changes are committed), in C where built."""
        depth, orders = self.depth, self.mbo.touched(staged)
        trade = self._trade(msg)
        trades = [] if trade is None else [trade]
        symbols = []
        for symbol, values in staged.items():
            before = self.state.peek(symbol)
            old = before.book if before is not None and before.book is not None else BookValues()
            book = values.book or BookValues()
            changes = book_changes(old.bids[:depth], book.bids[:depth], BID)
            changes += book_changes(old.asks[:depth], book.asks[:depth], ASK)
            symbols.append((symbol, trades, changes, values, orders))
        return self._encode_block(msg.event_time_ns, publish_time_ns, depth, symbols)

    def _trade(self, msg: SourceMessage) -> tuple[float, int] | None:
        # An execution that counts: E (at the resting order's price), printable C, P, Q.
        if not isinstance(msg, ItchMessage):
            return None
        kind = msg.kind
        if kind in ("P", "Q") or (kind == "C" and msg.printable):
            return msg.price / PRICE_SCALE, msg.shares
        if kind == "E":
            order = self.mbo.orders.get(msg.ref)
            return None if order is None else (order[2] / PRICE_SCALE, msg.shares)
        return None
