"""The plain source's market model: symbols, streams and the seeded message generator.

Theory of operation
-------------------
Symbols (deterministic names) are split among *source streams* by first
letter (``A-M``, ``N-Z`` by default); streams are numbered 1..n in the order
given. :class:`SymbolModel` walks prices from a seed and emits quotes, trades
and bursts as FIX messages; each stream numbers its messages with a gap-free
``source_seq``. The same seed and event-time base (``epoch_ns``) give
byte-identical streams.

Pure: no clock, no socket. Event times come from ``epoch_ns`` and the message
index; the UTC text of a second is computed here (:func:`_utc_second_text`),
not with the ``time`` module.
"""

from __future__ import annotations

import math
import random
import sys
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, compress, repeat
from operator import and_
from typing import Final
from zlib import adler32 as _adler32

from feedha.proto import fix
from feedha.proto.fix import checksum

SENDER: Final = "FEEDHA"
_LETTERS: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def parse_stream_range(name: str) -> tuple[str, str]:
    """Return the first-letter range a stream covers: ``"A-M"`` -> ``("A", "M")``, ``"Q"`` -> ``("Q", "Q")``.

    Raises:
        ValueError: not ``X`` or ``X-Y`` with uppercase letters, X <= Y.
    """
    first, sep, last = name.partition("-")
    last = last if sep else first
    if len(first) != 1 or len(last) != 1 or first not in _LETTERS or last not in _LETTERS or first > last:
        raise ValueError(f"stream name must be a letter range like 'A-M': {name!r}")
    return first, last


def symbol_names(count: int) -> list[str]:
    """Deterministic symbol names whose first letters cycle through A..Z (``AAA``, ``BAA``, ...)."""
    names = []
    for i in range(count):
        rest, suffix = i // 26, ""
        for _ in range(2):
            rest, digit = divmod(rest, 26)
            suffix += _LETTERS[digit]
        names.append(_LETTERS[i % 26] + suffix + (str(rest) if rest else ""))
    return names


def split_symbols(symbols: Sequence[str], streams: Sequence[str]) -> list[list[str]]:
    """Assign symbols to streams by first letter.

    Returns:
        One list per stream (symbols no stream covers are left out).

    Raises:
        ValueError: a bad stream name, a duplicate, or two streams whose ranges overlap.
    """
    ranges = [parse_stream_range(name) for name in streams]
    for i, (first, last) in enumerate(ranges):
        for other_first, other_last in ranges[:i]:
            if first <= other_last and other_first <= last:
                raise ValueError(f"stream ranges overlap: {streams[i]!r}")
    return [[s for s in symbols if first <= s[0] <= last] for first, last in ranges]


@dataclass(frozen=True, slots=True)
class GeneratedMessage:
    """One source message: which stream (0-based index), its ``source_seq`` and its bytes."""

    stream: int
    source_seq: int
    data: bytes


class SymbolModel:
    """Seeded random-walk market: yields FIX messages in a deterministic global order.

    Iterate it for :class:`GeneratedMessage` objects, or call :meth:`generate`
    for the next messages' bytes grouped by stream (the send loop's fast
    path); both give the same messages in the same order.

    Args:
        streams: stream names, in stream-number order.
        symbol_count: how many symbols.
        seed: the random seed.
        epoch_ns: event time of message 0; message *k* is stamped ``epoch_ns + k * step_ns``.
        step_ns: event-time step between messages.
        start_seq: the first ``source_seq`` of every stream.
    """

    def __init__(
        self,
        *,
        streams: Sequence[str],
        symbol_count: int,
        seed: int,
        epoch_ns: int,
        step_ns: int = 1_000_000,
        start_seq: int = 1,
    ) -> None:
        self._rng = random.Random(seed)
        per_stream = split_symbols(symbol_names(symbol_count), streams)
        self._symbols = [(index, s) for index, names in enumerate(per_stream) for s in names]
        if not self._symbols:
            raise ValueError(f"no symbol falls in streams {list(streams)} (symbols={symbol_count})")
        # Per symbol (by index): price in 1/100 units, so the decimal text is exact, and spread.
        self._mid_ticks: list[int] = []
        self._spread_ticks: list[int] = []
        for _symbol in self._symbols:
            self._mid_ticks.append(self._rng.randint(1_000, 50_000))
            self._spread_ticks.append(self._rng.randint(1, 5))
        self._symbol_streams = [stream for stream, _s in self._symbols]
        self._symbol_bytes = [symbol.encode() for _stream, symbol in self._symbols]
        self.next_seq = [start_seq] * len(streams)
        self._epoch_ns = epoch_ns
        self._step_ns = step_ns
        self._index = 0
        self._burst_left = 0
        self._burst_symbol = 0  # index into _symbols
        self._next_word = _word_source(self._rng).__next__
        self._stamp_second = -1
        self._stamp_prefix = b""
        self._price_texts = _PriceTexts()

    def __repr__(self) -> str:
        return (
            f"<SymbolModel [symbols={len(self._symbols)}, generated={self._index}, next_seq={self.next_seq}]>"
        )

    @property
    def epoch_ns(self) -> int:
        """Event time of message 0."""
        return self._epoch_ns

    @epoch_ns.setter
    def epoch_ns(self, value: int) -> None:
        # Set before the first message: the send loop builds the model, then
        # reads the clock, so stamps line up with the pacing schedule.
        if self._index:
            raise ValueError("epoch_ns can only change before the first message is generated")
        self._epoch_ns = value

    def __iter__(self) -> Iterator[GeneratedMessage]:
        return self

    def __next__(self) -> GeneratedMessage:
        return self.generate_messages(1)[0]

    def generate_messages(self, count: int) -> list[GeneratedMessage]:
        """Generate the next ``count`` messages as :class:`GeneratedMessage`, in global order."""
        data, streams, seqs = self._assemble(*self._decide(count))
        return list(map(GeneratedMessage, repeat(0) if streams is None else streams, seqs, data))

    def generate_ordered(self, count: int) -> tuple[list[bytes], list[int] | None]:
        """The next ``count`` messages in global order, with each one's stream (``None``: one stream)."""
        data, streams, _seqs = self._assemble(*self._decide(count))
        return data, streams

    def generate(self, count: int) -> list[list[bytes]]:
        """Generate the next ``count`` messages.

        Args:
            count: how many messages (over all streams).

        Returns:
            One list per stream with its messages' bytes in ``source_seq``
            order; the last one's ``source_seq`` is ``next_seq[stream] - 1``.
        """
        data, streams, _seqs = self._assemble(*self._decide(count))
        if streams is None:
            return [data]
        return [list(compress(data, map(stream.__eq__, streams))) for stream in range(len(self.next_seq))]

    def _decide(self, count: int) -> tuple[list[int], list[bytes]]:
        # Strategy: the model's decisions, one message per turn with every
        # lookup hoisted; the formatting that does not depend on them is left
        # to _assemble, a handful of C-level passes over the whole batch.
        # The random draws are the same draws from the same Mersenne Twister
        # words in the same order as Random's own methods (so the bytes are
        # those of the model as it was, seed for seed): `_word_source` pulls
        # the 32-bit outputs in bulk, and each draw below does what
        # Random._randbelow (`getrandbits(k)` = word >> (32 - k), rejecting
        # r >= n) or Random.random (two words, a >> 5 and b >> 6, as a 53-bit
        # fraction, compared here as the integer against p * 2**53) does.
        word = self._next_word
        symbols: list[int] = []
        entries: list[bytes] = []
        add_symbol, add_entries = symbols.append, entries.append
        symbol_count = len(self._symbols)
        symbol_shift = 32 - symbol_count.bit_length()
        mids, spreads = self._mid_ticks, self._spread_ticks
        texts = self._price_texts
        if len(texts) > _PRICE_CACHE:  # prices wander: bound the memory
            texts.clear()
        burst_left, burst_symbol = self._burst_left, self._burst_symbol
        burst_below, burst_tie, burst_low = _BURST.high_below, _BURST.high_tie, _BURST.low_below
        trade_below, trade_tie, trade_low = _TRADE.high_below, _TRADE.high_tie, _TRADE.low_below
        for _ in range(count):
            if burst_left > 0:
                burst_left -= 1
                symbol = burst_symbol
            else:
                symbol = word() >> symbol_shift
                while symbol >= symbol_count:
                    symbol = word() >> symbol_shift
                high, low = word(), word()  # random() < 0.02, see _RandomBelow
                if high < burst_below or (high < burst_tie and low >> 6 < burst_low):
                    # A burst: the same symbol for the next 5..20 messages.
                    burst_left = word() >> 27
                    while burst_left >= 16:
                        burst_left = word() >> 27
                    burst_left += 5
                    burst_symbol = symbol
            step = word() >> 29
            while step >= 6:
                step = word() >> 29
            mid = mids[symbol] + _STEPS[step]
            if mid < 100:
                mid = 100
            mids[symbol] = mid
            high, low = word(), word()  # random() < 0.45
            if high < trade_below or (high < trade_tie and low >> 6 < trade_low) or burst_left:
                entry_count = word() >> 30
                while entry_count >= 3:
                    entry_count = word() >> 30
                parts = [_ENTRY_COUNTS[entry_count]]
                for _entry in range(entry_count + 1):
                    offset = word() >> 30
                    while offset >= 3:
                        offset = word() >> 30
                    size = word() >> 29
                    while size >= 4:
                        size = word() >> 29
                    parts.append(_TRADE_ENTRY % (texts[mid - 1 + offset], _TRADE_SIZE_TEXTS[size]))
                add_entries(b"".join(parts))
            else:
                offset = word() >> 30
                while offset >= 3:
                    offset = word() >> 30
                spread = spreads[symbol] + offset - 1
                spread = 1 if spread < 1 else 8 if spread > 8 else spread
                spreads[symbol] = spread
                bid = mid - spread // 2
                ask = bid + spread
                bid_size = word() >> 27
                while bid_size >= 20:
                    bid_size = word() >> 27
                ask_size = word() >> 27
                while ask_size >= 20:
                    ask_size = word() >> 27
                add_entries(
                    _QUOTE_ENTRIES
                    % (texts[bid], _QUOTE_SIZE_TEXTS[bid_size], texts[ask], _QUOTE_SIZE_TEXTS[ask_size])
                )
            add_symbol(symbol)
        self._burst_left, self._burst_symbol = burst_left, burst_symbol
        return symbols, entries

    def _assemble(
        self, symbols: list[int], entries: list[bytes]
    ) -> tuple[list[bytes], list[int] | None, Sequence[int]]:
        # Numbering, time stamps, body, 9= length, 10= checksum: map/zip
        # passes over the batch (no bytecode per message when one stream).
        count = len(symbols)
        next_seq = self.next_seq
        stream_of: list[int] | None = None
        seqs: Sequence[int]
        if len(next_seq) == 1:
            seqs = range(next_seq[0], next_seq[0] + count)
            next_seq[0] += count
        else:
            stream_of = list(map(self._symbol_streams.__getitem__, symbols))
            seqs = []
            add_seq = seqs.append
            for stream in stream_of:
                add_seq(next_seq[stream])
                next_seq[stream] += 1
        names = list(map(self._symbol_bytes.__getitem__, symbols))
        bodies: list[bytes] = []
        step_ns = self._step_ns
        done = 0
        while done < count:  # one run per second of event time (one run, nearly always)
            seconds, frac = divmod(self._epoch_ns + (self._index + done) * step_ns, 1_000_000_000)
            if seconds != self._stamp_second:
                self._stamp_second = seconds
                self._stamp_prefix = _utc_second_text(seconds)
            prefix = self._stamp_prefix
            size = count - done if not step_ns else min(count - done, -((frac - 1_000_000_000) // step_ns))
            fracs = range(frac, frac + size * step_ns, step_ns) if step_ns else [frac] * size
            run = slice(done, done + size)
            bodies += map(
                _BODY.__mod__,
                zip(seqs[run], repeat(prefix), fracs, names[run], repeat(prefix), fracs, entries[run]),
            )
            done += size
        self._index += count
        messages = list(map(bytes.__add__, map(_HEADS.__getitem__, map(len, bodies)), bodies))
        if max(map(len, messages), default=0) <= _ADLER_EXACT:
            # adler32's low 16 bits are the byte sum + 1 here (proto.fix.checksum).
            trailers = map(_TRAILER_BY_ADLER.__getitem__, map(and_, map(_adler32, messages), repeat(0xFFFF)))
        else:
            trailers = map(_TRAILERS.__getitem__, map(checksum, messages))
        # The messages in global order, their streams (None: all stream 0) and source_seqs.
        return list(map(bytes.__add__, messages, trailers)), stream_of, seqs


class _PriceTexts(dict[int, bytes]):
    """Price texts (``b"123.45"``) by ticks: a hit is a plain subscript, a miss formats it."""

    def __missing__(self, ticks: int) -> bytes:
        text = self[ticks] = b"%d.%02d" % (ticks // 100, ticks % 100)
        return text


@dataclass(frozen=True, slots=True)
class _RandomBelow:
    """``Random.random() < p`` decided on the two words random() reads.

    random() is ``((a >> 5) * 2**26 + (b >> 6)) / 2**53`` for its words a, b,
    so it is below p iff that 53-bit integer is below ``ceil(p * 2**53)`` = C
    (exact: scaling by a power of two is exact). Split C at bit 26: the first
    word alone decides unless ``a >> 5`` equals C's high part (1 in 2**27).
    """

    high_below: int  # a < this: below p, whatever b is
    high_tie: int  # high_below <= a < this: below p iff b >> 6 < low_below
    low_below: int

    @classmethod
    def of(cls, p: float) -> _RandomBelow:
        limit = math.ceil(p * 2**53)
        high = limit >> 26
        return cls(high << 5, (high + 1) << 5, limit & (2**26 - 1))


_BURST: Final = _RandomBelow.of(0.02)  # a burst starts
_TRADE: Final = _RandomBelow.of(0.45)  # a trade, not a quote


_WORDS_PER_DRAW: Final = 4096
assert array("I").itemsize == 4, "array('I') must hold 32-bit words"


def _draw_words(rng: random.Random) -> array[int]:
    # getrandbits(32 * n) is n Mersenne Twister outputs, the first in the
    # least significant 32 bits (CPython's _random fills words low to high).
    words = array("I", rng.getrandbits(32 * _WORDS_PER_DRAW).to_bytes(4 * _WORDS_PER_DRAW, "little"))
    if sys.byteorder == "big":
        words.byteswap()
    return words


def _word_source(rng: random.Random) -> Iterator[int]:
    """The generator's 32-bit outputs, one by one, drawn in bulk (C-level iteration)."""
    return chain.from_iterable(map(_draw_words, repeat(rng)))


# %-formats of proto.fix's layout (the bytes of encode_market_data, tested byte for byte).
_HEAD: Final = fix.HEAD.printf(body_length=b"%d")
# Sending and event time (52=, 60=) are the second's text and the nanoseconds;
# the group (268= and the entries) is the last %s.
_BODY: Final = fix.MARKET_DATA.substitute(sender=SENDER.encode()).printf(
    seq=b"%d", sending_time=b"%s.%09d", event_time=b"%s.%09d"
)
_TRAILER: Final = fix.TRAILER.printf(checksum=b"%03d")
_ENTRY_COUNTS: Final = tuple(fix.ENTRY_GROUP.fill(entry_count=b"%d" % n, entries=b"") for n in (1, 2, 3))


def _entry(entry_type: str) -> bytes:
    return fix.ENTRY.substitute(entry_type=entry_type.encode()).printf()  # price, size: %s


_TRADE_ENTRY: Final = _entry(fix.ENTRY_TRADE)
_QUOTE_ENTRIES: Final = fix.ENTRY_GROUP.printf(
    entry_count=b"2", entries=_entry(fix.ENTRY_BID) + _entry(fix.ENTRY_OFFER)
)
_STEPS: Final = (-2, -1, 0, 0, 1, 2)
_TRADE_SIZE_TEXTS: Final = (b"100", b"500", b"1000", b"5000")
_QUOTE_SIZE_TEXTS: Final = tuple(b"%d" % ((1 + draw) * 100) for draw in range(20))
_PRICE_CACHE: Final = 100_000  # price texts kept before the cache starts over
_HEADS: Final = tuple(_HEAD % length for length in range(4096))  # bodies are ~150-250 bytes
_TRAILERS: Final = tuple(_TRAILER % value for value in range(256))
_ADLER_EXACT: Final = 256  # up to here adler32's low 16 bits are the byte sum + 1 (see proto.fix.checksum)
_TRAILER_BY_ADLER: Final = tuple(_TRAILERS[(low - 1) & 0xFF] for low in range(0x10000))


def _utc_second_text(seconds: int) -> bytes:
    """``YYYYMMDD-HH:MM:SS`` (UTC) of a Unix second: what ``time.strftime`` gives with ``time.gmtime``.

    Strategy: days since 1970-01-01 to a proleptic Gregorian date by
    H. Hinnant's ``civil_from_days`` (eras of 400 years, March-based years),
    so the pure model needs no ``time`` module. The year is unpadded, as glibc
    prints ``%Y``; the text equals ``time.strftime``'s for every second
    ``time.gmtime`` accepts (years up to about 2**31; beyond, gmtime raises).
    """
    days, rest = divmod(seconds, 86_400)
    hour, rest = divmod(rest, 3_600)
    minute, second = divmod(rest, 60)
    era, day_of_era = divmod(days + 719_468, 146_097)  # day 0 = 0000-03-01
    year_of_era = (day_of_era - day_of_era // 1_460 + day_of_era // 36_524 - day_of_era // 146_096) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_index = (5 * day_of_year + 2) // 153  # 0 = March
    day = day_of_year - (153 * month_index + 2) // 5 + 1
    month = month_index + 3 if month_index < 10 else month_index - 9
    year = year_of_era + era * 400 + (month <= 2)
    return b"%d%02d%02d-%02d:%02d:%02d" % (year, month, day, hour, minute, second)
