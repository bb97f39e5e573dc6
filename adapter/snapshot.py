"""Images: every symbol's state at an exact msg_seq, built from the adapter's journal.

Theory of operation
-------------------
A late joiner needs the channel's whole conversion state -- every symbol's
values -- at one msg_seq N, then the stream from N + 1. The journal already
has what it takes: the newest checkpoint is the whole state right after its
msg_seq, and every record after it carries its symbol's state right after
itself (a session-boundary record starts every symbol's daily fields again).
So :class:`ImageBuilder` keeps, per symbol, the newest record's payload (not
decoded: the symbol is read from the first bytes of the deterministic
encoding) on top of the checkpoint, and folds new records in as the journal
grows. Folding stops at a hole (a msg_seq this journal lacks): the image
stays at the msg_seq before it until a newer checkpoint lets the builder
start over from there. Nothing is replayed from the start of the day, and
nothing runs on the adapter's loop: the replay service's thread and the
snapshot loop's thread each own a builder.

An :class:`Image` is cut into parts (``feedha.v1.ImagePart``, symbols in byte
order, each part at most :data:`PART_BYTES`) so that a large image pages
through replay replies like a large retransmission; the last few images are
kept, so a client paging one gets every part of the same image. Building
costs a decode per symbol; a new image is built at most every
:data:`REBUILD_S`, and requests in between get the newest one built.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final, Protocol

from google.protobuf.message import DecodeError

from feedha.adapter.conversion.codec import from_proto, to_proto
from feedha.adapter.conversion.state import SymbolValues, next_session
from feedha.adapter.core.records import RecordLike
from feedha.adapter.core.recovery import boundary_of, decode_checkpoint_state
from feedha.adapter.core.session import FIRST_SESSION, RECORD_SESSION_BOUNDARY, Session
from feedha.proto import market_pb2
from feedha.proto.blocks import is_several, symbol_states

logger = logging.getLogger(__name__)

__all__ = ["PART_BYTES", "Image", "ImageBuilder"]

PART_BYTES: Final = 60 * 1024  # one ImagePart, serialized, stays under this
REBUILD_S: Final = 0.2  # a newer image is built at most this often
IMAGES_KEPT: Final = 3  # images held for clients paging them
FOLD_MAX_RECORDS: Final = 1_000_000  # records folded per call (the rest at the next)
MAX_SYMBOLS: Final = 1_000_000  # symbols held; beyond, new symbols are not imaged (logged)


class JournalSource(Protocol):
    def read(self, from_seq: int = 0, to_seq: int | None = None) -> Iterable[RecordLike]: ...


class CheckpointLike(Protocol):
    @property
    def msg_seq(self) -> int: ...
    @property
    def state(self) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Image:
    """One image, ready to send.

    Attributes:
        msg_seq: every symbol's state right after this msg_seq.
        session: the session it is in.
        session_start_ns: when that session began (0: unknown).
        symbols: how many symbols.
        parts: the serialized ``ImagePart`` messages, in order.
    """

    msg_seq: int
    session: int
    session_start_ns: int
    symbols: int
    parts: tuple[bytes, ...]

    @property
    def size(self) -> int:
        return sum(len(part) for part in self.parts)


def symbol_of(payload: bytes) -> bytes | None:
    """The symbol of a ``MarketUpdate`` payload, read from its first bytes (``None``: decode it).

    Deterministic serialization writes field 1 (symbol) first: tag 0x0a, a
    one-byte length for names under 128 bytes, then the name.
    """
    if len(payload) >= 2 and payload[0] == 0x0A and payload[1] < 0x80 and len(payload) >= 2 + payload[1]:
        return payload[2 : 2 + payload[1]]
    return None


class ImageBuilder:
    """Folds one journal into images (not thread-safe: one owner thread).

    Args:
        journal: reads the journal's records by msg_seq.
        checkpoint: returns the newest valid checkpoint (``None``: none).
        channel: the channel number put on the parts.
        adapter: this adapter's number.
        part_bytes: the size bound of one part.
        max_symbols: the most symbols held.
        book_depth: an order book shows this many levels a side in an image, as in a block
            (a checkpoint holds every price of a price-keyed book); 0: as held.
    """

    def __init__(
        self,
        journal: JournalSource,
        checkpoint: Callable[[], CheckpointLike | None],
        *,
        channel: int,
        adapter: int,
        part_bytes: int = PART_BYTES,
        max_symbols: int = MAX_SYMBOLS,
        book_depth: int = 0,
    ) -> None:
        self._journal = journal
        self._book_depth = book_depth
        self._checkpoint = checkpoint
        self._channel = channel
        self._adapter = adapter
        self._part_bytes = part_bytes
        self._max_symbols = max_symbols
        # symbol -> (its newest payload or the checkpoint's values, the epoch it was set in)
        self._symbols: dict[bytes, tuple[bytes | SymbolValues, int]] = {}
        self._epoch = 0  # session boundaries folded since the base
        self._session: Session = FIRST_SESSION
        self._position = -1  # the last msg_seq folded (-1: nothing, not even a base)
        self._images: OrderedDict[int, Image] = OrderedDict()
        self._built_at = float("-inf")
        self.folded = self.rebased = self.undecodable = self.overflowed = 0

    def __repr__(self) -> str:
        return (
            f"<ImageBuilder [position={self._position}, symbols={len(self._symbols)}, "
            f"session={self._session.id}, images={list(self._images)}]>"
        )

    @property
    def position(self) -> int:
        """The msg_seq the state is at (-1: nothing folded)."""
        return self._position

    def newest(self, *, now: float) -> Image | None:
        """The newest image: folded up to the journal's end (or a hole), rebuilt at most every REBUILD_S."""
        newest = next(reversed(self._images.values()), None)
        if newest is not None and now - self._built_at < REBUILD_S:
            return newest
        self.advance()
        if self._position <= 0:
            return newest
        if newest is None or newest.msg_seq != self._position:
            newest = self._build()
            self._images[newest.msg_seq] = newest
            while len(self._images) > IMAGES_KEPT:
                self._images.popitem(last=False)
        self._built_at = now
        return newest

    def kept(self, msg_seq: int) -> Image | None:
        """The image at ``msg_seq`` if it is still held."""
        return self._images.get(msg_seq)

    def advance(self) -> None:
        """Fold what the journal holds past the current position (from a newer checkpoint if there is one)."""
        checkpoint = self._checkpoint()
        if checkpoint is not None and checkpoint.msg_seq > self._position:
            self._rebase(checkpoint)
        first = self._position + 1
        count = 0
        for record in self._journal.read(max(first, 0)):
            if self._position >= 0 and record.msg_seq != self._position + 1:
                break  # a hole: the image waits at the msg_seq before it
            if self._position < 0 and record.msg_seq != 1:
                break  # the journal does not start at the beginning: wait for a checkpoint
            self._fold(record)
            count += 1
            if count >= FOLD_MAX_RECORDS:
                break
        self.folded += count

    def _rebase(self, checkpoint: CheckpointLike) -> None:
        try:
            state = decode_checkpoint_state(checkpoint.state)
        except ValueError as exc:
            logger.warning("image: checkpoint at msg_seq %d unreadable (%s)", checkpoint.msg_seq, exc)
            return
        self._symbols = {symbol.encode(): (values, 0) for symbol, values in state.symbols.items()}
        self._epoch = 0
        self._session = state.session
        self._position = checkpoint.msg_seq
        self.rebased += 1

    def _fold(self, record: RecordLike) -> None:
        self._position = record.msg_seq
        payload = record.payload
        if record.flags & RECORD_SESSION_BOUNDARY:
            boundary = boundary_of(payload)
            if boundary is None:
                self.undecodable += 1
                return
            self._epoch += 1
            self._session = Session(
                boundary.started,
                record.source_seq,
                record.msg_seq,
                boundary.boundary_time_ns,
                boundary.reason,
            )
            return
        symbol = symbol_of(payload)
        if symbol is None:
            try:
                update = market_pb2.MarketUpdate.FromString(payload)
            except DecodeError:
                self.undecodable += 1
                return
            if is_several(update):  # one block, every symbol its source message touched
                for name, state in symbol_states(update):
                    self._hold(name.encode(), from_proto(state))
                return
            symbol = update.symbol.encode()
        self._hold(symbol, payload)

    def _hold(self, symbol: bytes, held: bytes | SymbolValues) -> None:
        symbols = self._symbols
        if symbol not in symbols and len(symbols) >= self._max_symbols:
            self.overflowed += 1
            return
        symbols[symbol] = (held, self._epoch)

    def _values(self, held: bytes | SymbolValues, epoch: int) -> SymbolValues | None:
        if isinstance(held, SymbolValues):
            values = held
        else:
            try:
                values = from_proto(market_pb2.MarketUpdate.FromString(held).state)
            except DecodeError:
                return None
        return next_session(values) if epoch < self._epoch else values

    def _build(self) -> Image:
        part_bytes = self._part_bytes
        chunks: list[list[market_pb2.SymbolImage]] = [[]]
        size = 0
        for name in sorted(self._symbols):
            held, epoch = self._symbols[name]
            values = self._values(held, epoch)
            if values is None:
                continue
            state = to_proto(values)
            if self._book_depth and values.book is not None:
                depth = state.book.depth = self._book_depth
                del state.book.bids[depth:], state.book.asks[depth:]
            entry = market_pb2.SymbolImage(symbol=name.decode(errors="replace"), state=state)
            entry_size = entry.ByteSize() + 4
            if chunks[-1] and size + entry_size > part_bytes:
                chunks.append([])
                size = 0
            chunks[-1].append(entry)
            size += entry_size
        count = sum(len(chunk) for chunk in chunks)
        session = self._session
        parts = tuple(
            market_pb2.ImagePart(
                channel=self._channel,
                adapter=self._adapter,
                msg_seq=self._position,
                session=session.id,
                session_start_ns=session.start_ns,
                part=index,
                parts=len(chunks),
                symbol_count=count,
                symbols=chunk,
            ).SerializeToString(deterministic=True)
            for index, chunk in enumerate(chunks)
        )
        return Image(self._position, session.id, session.start_ns, count, parts)
