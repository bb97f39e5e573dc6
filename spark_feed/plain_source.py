"""The plain-Python test source: deterministic FIX-style source streams on ZeroMQ XPUB sockets.

Theory of operation
-------------------
A stand-in for the Spark feed source (no pyspark import) for tests, drills and
demos. Symbols (deterministic names) are split among *source streams* by first
letter (``A-M``, ``N-Z`` by default); streams are numbered 1..n in the order
given. A seeded model walks prices and emits quotes, trades and bursts; each
stream numbers its messages with a gap-free ``source_seq``. The same seed and
event-time base (``--epoch-ns``) give byte-identical streams.

The pure part -- :class:`SymbolModel` (messages), :class:`PacingSchedule`
(how many are due at a given time, with bounded catch-up) and
:func:`plan_frames` (messages -> frames, malformed injection) -- reads no clock
and touches no socket. :class:`PlainSource` is the shell: one bound XPUB socket
per stream, each ZeroMQ message ``[stream_name, payload]``, payload one or
more FIX messages back to back. Garbage frames and corrupted copies never
consume a ``source_seq``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import signal
import sys
import threading
import time
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, compress, repeat
from operator import and_
from types import FrameType
from typing import Final
from zlib import adler32 as _adler32

import zmq

import transport
from proto.fix import checksum

logger = logging.getLogger(__name__)

DEFAULT_STREAMS: Final = ("A-M", "N-Z")
DEFAULT_SYMBOLS: Final = 100
DEFAULT_RATE: Final = 1000.0
MAX_BATCH: Final = 64
PREGENERATE_MAX: Final = 3_000_000  # messages (~190 bytes each): bounded memory for --pregenerate
MAX_CATCHUP_S: Final = 0.05  # never send more than this much backlog at once
DEFAULT_LINGER_MS: Final = 2000
DEFAULT_WAIT_TIMEOUT_S: Final = 10.0
_SLEEP_SLICE_S: Final = 0.05  # longest sleep between checks of the stop event
_DRAIN_INTERVAL_S: Final = 0.1  # how often the send loop reads subscription messages
SENDER: Final = "FEEDHA"
_LETTERS: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


# --- pure part ---------------------------------------------------------------------


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
                self._stamp_prefix = time.strftime("%Y%m%d-%H:%M:%S", time.gmtime(seconds)).encode()
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


# The wire layout of proto.fix.encode_market_data, as templates (the same bytes).
_HEAD: Final = b"8=FIX.4.4\x019=%d\x01"
# Sending and event time (52=, 60=) are the second's text and the nanoseconds;
# the last %s is 268= and the entries.
_BODY: Final = b"35=X\x0149=" + SENDER.encode() + b"\x0134=%d\x0152=%s.%09d\x0155=%s\x0160=%s.%09d\x01%s"
_TRAILER: Final = b"10=%03d\x01"
_ENTRY_COUNTS: Final = (b"268=1\x01", b"268=2\x01", b"268=3\x01")
_TRADE_ENTRY: Final = b"279=0\x01269=2\x01270=%s\x01271=%s\x01"
_QUOTE_ENTRIES: Final = (
    b"268=2\x01279=0\x01269=0\x01270=%s\x01271=%s\x01279=0\x01269=1\x01270=%s\x01271=%s\x01"
)
_STEPS: Final = (-2, -1, 0, 0, 1, 2)
_TRADE_SIZE_TEXTS: Final = (b"100", b"500", b"1000", b"5000")
_QUOTE_SIZE_TEXTS: Final = tuple(b"%d" % ((1 + draw) * 100) for draw in range(20))
_PRICE_CACHE: Final = 100_000  # price texts kept before the cache starts over
_HEADS: Final = tuple(_HEAD % length for length in range(4096))  # bodies are ~150-250 bytes
_TRAILERS: Final = tuple(_TRAILER % value for value in range(256))
_ADLER_EXACT: Final = 256  # up to here adler32's low 16 bits are the byte sum + 1 (see proto.fix.checksum)
_TRAILER_BY_ADLER: Final = tuple(_TRAILERS[(low - 1) & 0xFF] for low in range(0x10000))


def corrupt(message: bytes) -> bytes:
    """Return a copy of a FIX message whose checksum is wrong (so readers count it malformed)."""
    head, trailer = message[:-7], message[-7:]  # trailer is b"10=NNN\x01"
    wrong = (int(trailer[3:6]) + 1) % 256
    return head + b"10=%03d\x01" % wrong


def garbage(rng: random.Random) -> bytes:
    """Bytes that can never contain ``8=FIX`` (lowercase letters and SOH)."""
    return bytes(rng.choice(b"abcdefghij\x01") for _ in range(rng.randint(8, 40)))


def plan_frames(
    messages: Sequence[GeneratedMessage],
    *,
    stream_count: int,
    batch: int,
    malformed_every: int,
    generated_before: int,
    rng: random.Random,
) -> tuple[list[tuple[int, bytes]], int]:
    """Group due messages into frames per stream, injecting malformed content.

    Every ``malformed_every``-th message overall (counting from ``generated_before``)
    brings one malformed item: alternately a garbage frame of its own, or a
    corrupted copy of the message placed just before it in its frame.

    Args:
        messages: in global order.
        stream_count: number of streams.
        batch: maximum FIX messages (valid ones) per frame.
        malformed_every: 0 for none.
        generated_before: messages generated before these (for the injection cadence).
        rng: the source of garbage bytes.

    Returns:
        ``(frames, malformed)``: ``(stream_index, payload)`` in send order and how many malformed items.
    """
    pending: list[list[bytes]] = [[] for _ in range(stream_count)]
    counts = [0] * stream_count
    frames: list[tuple[int, bytes]] = []
    malformed = 0
    for offset, msg in enumerate(messages):
        number = generated_before + offset + 1
        if malformed_every and number % malformed_every == 0:
            malformed += 1
            if (number // malformed_every) % 2:
                # Flush first, so each stream's byte sequence does not depend on frame boundaries.
                if pending[msg.stream]:
                    frames.append((msg.stream, b"".join(pending[msg.stream])))
                    pending[msg.stream], counts[msg.stream] = [], 0
                frames.append((msg.stream, garbage(rng)))
            else:
                pending[msg.stream].append(corrupt(msg.data))
        pending[msg.stream].append(msg.data)
        counts[msg.stream] += 1
        if counts[msg.stream] >= batch:
            frames.append((msg.stream, b"".join(pending[msg.stream])))
            pending[msg.stream], counts[msg.stream] = [], 0
    frames += [(stream, b"".join(parts)) for stream, parts in enumerate(pending) if parts]
    return frames, malformed


@dataclass(slots=True)
class PacingSchedule:
    """A deadline schedule: message *k* is due at ``start + k / rate``.

    When the sender falls more than ``max_burst`` messages behind, the excess is
    forgiven (counted in ``forgiven``) rather than sent in one burst.

    Attributes:
        rate: messages per second; 0 or less means unpaced (always ``max_burst`` due).
        max_burst: the most messages :meth:`due` ever returns.
        start: the schedule's time origin (the caller's clock).
    """

    rate: float
    max_burst: int
    start: float
    credited: int = 0
    forgiven: int = 0

    def due(self, now: float) -> int:
        """How many messages are due at ``now`` (call :meth:`take` with what was sent)."""
        if self.rate <= 0:
            return self.max_burst
        owed = int((now - self.start) * self.rate) - self.credited
        if owed > self.max_burst:
            self.forgiven += owed - self.max_burst
            self.credited += owed - self.max_burst
            owed = self.max_burst
        return max(owed, 0)

    def take(self, count: int) -> None:
        """Record that ``count`` messages were sent."""
        self.credited += count

    def next_deadline(self) -> float:
        """When the next message is due (``start`` if unpaced)."""
        return self.start if self.rate <= 0 else self.start + (self.credited + 1) / self.rate


# --- configuration ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceConfig:
    """Settings of one plain source.

    Attributes:
        streams: stream names (letter ranges), numbered 1..n in this order.
        endpoints: ``(stream, endpoint)`` to bind; streams without one bind a random port on ``bind_host``.
        bind_host: host for random ports.
        symbols: how many symbols.
        seed: random seed; with ``epoch_ns`` it fixes the byte stream.
        epoch_ns: event time of the first message; ``None`` means now.
        rate: messages per second over all streams; 0 means as fast as possible.
        seconds: stop after this long (``None``: no limit).
        count: stop after this many valid messages (``None``: no limit).
        batch: FIX messages per frame at most; ``None`` means as many as are due, capped at MAX_BATCH.
        malformed_every: inject one malformed item every this many messages (0: never).
        wait_subscribers: before sending, wait for this many subscriptions on every stream.
        wait_timeout_s: how long to wait for them.
        sndhwm: ZMQ_SNDHWM (0 = unbounded: a PUB drops silently at its high-water mark).
        linger_ms: ZMQ_LINGER: how long close() may spend flushing.
        start_seq: first source_seq of every stream.
        tick_s: batch sends: wait until ``rate * tick_s`` messages are due
            (or the oldest has waited this long), so each frame carries about
            that many (as the Spark source batches); 0 sends every message as
            soon as it is due (the lowest latency).
        pregenerate: generate every message of the run before the clock starts
            and only pace the sends (needs ``count``, or ``rate`` and ``seconds``;
            at most PREGENERATE_MAX messages). For capacity benchmarks on small
            machines, where a live generator (~5 µs of Python per message)
            would take the CPU of the system under test. Event times then
            follow the schedule from when generation began, not the sends.
    """

    streams: tuple[str, ...] = DEFAULT_STREAMS
    endpoints: tuple[tuple[str, str], ...] = ()
    bind_host: str = "127.0.0.1"
    symbols: int = DEFAULT_SYMBOLS
    seed: int = 1
    epoch_ns: int | None = None
    rate: float = DEFAULT_RATE
    seconds: float | None = None
    count: int | None = None
    batch: int | None = None
    malformed_every: int = 0
    wait_subscribers: int = 0
    wait_timeout_s: float = DEFAULT_WAIT_TIMEOUT_S
    sndhwm: int = 0
    linger_ms: int = DEFAULT_LINGER_MS
    start_seq: int = 1
    tick_s: float = 0.0
    pregenerate: bool = False

    @property
    def planned_count(self) -> int | None:
        """How many messages the run sends at most, if it is bounded."""
        by_time = None if self.seconds is None or self.rate <= 0 else math.ceil(self.rate * self.seconds)
        if self.count is None:
            return by_time
        return self.count if by_time is None else min(self.count, by_time)

    def __post_init__(self) -> None:
        if not self.streams or len(set(self.streams)) != len(self.streams):
            raise ValueError(f"streams must be distinct and non-empty: {self.streams!r}")
        split_symbols([], self.streams)  # checks names and overlaps
        unknown = {name for name, _e in self.endpoints} - set(self.streams)
        if unknown:
            raise ValueError(
                f"endpoint for unknown stream(s) {sorted(unknown)}; streams are {list(self.streams)}"
            )
        checks = {
            "symbols": self.symbols >= 1,
            "rate": self.rate >= 0,
            "seconds": self.seconds is None or self.seconds >= 0,
            "count": self.count is None or self.count >= 0,
            "batch": self.batch is None or self.batch >= 1,
            "malformed_every": self.malformed_every >= 0,
            "wait_subscribers": self.wait_subscribers >= 0,
            "sndhwm": self.sndhwm >= 0,
            "linger_ms": self.linger_ms >= -1,
            "start_seq": self.start_seq >= 1,
            "tick_s": 0 <= self.tick_s <= 1,
        }
        for name, ok in checks.items():
            if not ok:
                raise ValueError(f"bad {name}: {getattr(self, name)!r}")
        if self.pregenerate:
            planned = self.planned_count
            if planned is None:
                raise ValueError(
                    "pregenerate needs --count, or --rate and --seconds, to know how much to generate"
                )
            if planned > PREGENERATE_MAX:
                raise ValueError(f"pregenerate: {planned} messages exceed the limit of {PREGENERATE_MAX}")
            if self.malformed_every:
                raise ValueError("pregenerate does not inject malformed messages (drop --malformed-every)")


@dataclass(slots=True)
class SourceSummary:
    """What a run sent; :meth:`to_json` is the line ``feedha source`` prints at exit."""

    streams: tuple[str, ...]
    endpoints: dict[str, str]
    sent_per_stream: list[int]
    last_seq: list[int]
    malformed: int = 0
    forgiven: int = 0
    elapsed_s: float = 0.0  # from start to the end of sending, generation ahead of time excluded
    pregenerate_s: float = 0.0  # generating the run ahead of the clock (--pregenerate)
    error: str | None = None

    @property
    def sent(self) -> int:
        """Valid messages sent over all streams."""
        return sum(self.sent_per_stream)

    def to_json(self) -> str:
        """One JSON line."""
        body: dict[str, object] = {
            "sent": self.sent,
            "streams": {
                name: {"number": i + 1, "last_seq": self.last_seq[i], "sent": self.sent_per_stream[i]}
                for i, name in enumerate(self.streams)
            },
            "endpoints": self.endpoints,
            "malformed": self.malformed,
            "forgiven": self.forgiven,
            "elapsed_s": round(self.elapsed_s, 3),
        }
        if self.pregenerate_s:
            body["pregenerate_s"] = round(self.pregenerate_s, 3)
        if self.error:
            body["error"] = self.error
        return json.dumps(body)


# --- the socket shell -------------------------------------------------------------------


class PlainSource:
    """Binds one XPUB socket per stream and sends the model's messages, paced.

    Use from Python (in-process or in a subprocess)::

        source = PlainSource(SourceConfig(count=1000))
        endpoints = source.bind()          # {"A-M": "tcp://127.0.0.1:PORT", ...}
        summary = source.run(stop_event)   # blocks; closes the sockets

    Args:
        config: the settings.
    """

    def __init__(self, config: SourceConfig) -> None:
        self.config = config
        self._context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        self._sockets: list[zmq.Socket[bytes]] = []
        self.endpoints: dict[str, str] = {}
        self._topics = [name.encode() for name in config.streams]
        self._subscribers = [0] * len(config.streams)
        self._sent = [0] * len(config.streams)

    def __repr__(self) -> str:
        return f"<PlainSource [streams={list(self.config.streams)}, sent={sum(self._sent)}]>"

    def bind(self) -> dict[str, str]:
        """Bind the XPUB sockets (idempotent).

        Returns:
            stream name -> bound endpoint.
        """
        if self._sockets:
            return self.endpoints
        wanted = dict(self.config.endpoints)
        for name in self.config.streams:
            sock = self._context.socket(zmq.XPUB)
            sock.setsockopt(zmq.LINGER, self.config.linger_ms)
            sock.setsockopt(zmq.SNDHWM, self.config.sndhwm)
            sock.setsockopt(zmq.XPUB_VERBOSE, 1)  # see every subscription, to count subscribers
            self._sockets.append(sock)
            if name in wanted:
                transport.configure_socket(sock, wanted[name])  # epgm://: buffers, ZMQ_RATE
                sock.bind(wanted[name])
                self.endpoints[name] = sock.getsockopt_string(zmq.LAST_ENDPOINT)
            else:
                port = sock.bind_to_random_port(f"tcp://{self.config.bind_host}")
                self.endpoints[name] = f"tcp://{self.config.bind_host}:{port}"
        return self.endpoints

    def close(self) -> None:
        """Close the sockets (flushing for up to ``linger_ms``)."""
        for sock in self._sockets:
            sock.close()
        self._sockets = []

    def _drain_subscriptions(self, timeout_ms: int) -> None:
        poller = zmq.Poller()
        for sock in self._sockets:
            poller.register(sock, zmq.POLLIN)
        for sock, _event in poller.poll(timeout_ms):
            index = self._sockets.index(sock)
            while True:
                try:
                    event = sock.recv(zmq.NOBLOCK)
                except zmq.Again:
                    break
                if event[:1] == b"\x01":
                    self._subscribers[index] += 1
                elif event[:1] == b"\x00":
                    self._subscribers[index] -= 1

    def _wait_for_subscribers(self, stop: threading.Event) -> None:
        wanted = self.config.wait_subscribers
        deadline = time.monotonic() + self.config.wait_timeout_s
        while min(self._subscribers) < wanted and not stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"waited {self.config.wait_timeout_s}s for {wanted} subscriber(s) per stream; "
                    f"have {dict(zip(self.config.streams, self._subscribers, strict=True))}"
                )
            self._drain_subscriptions(int(min(left, 0.1) * 1000) + 1)

    def run(self, stop: threading.Event | None = None) -> SourceSummary:
        """Send until ``count``/``seconds`` is reached or ``stop`` is set, then close.

        Args:
            stop: set it (from another thread or a signal handler) to stop cleanly.

        Returns:
            The summary (its ``error`` is set if waiting for subscribers timed out).
        """
        stop = stop or threading.Event()
        cfg = self.config
        self.bind()
        summary = SourceSummary(
            cfg.streams, dict(self.endpoints), self._sent, [cfg.start_seq - 1] * len(cfg.streams)
        )
        started = time.monotonic()
        try:
            self._wait_for_subscribers(stop)
            self._send_loop(stop, summary)
        except TimeoutError as exc:
            summary.error = str(exc)
        finally:
            summary.elapsed_s = time.monotonic() - started - summary.pregenerate_s
            self.close()
        return summary

    def _send_loop(self, stop: threading.Event, summary: SourceSummary) -> None:
        cfg = self.config
        step_ns = int(1e9 / cfg.rate) if cfg.rate > 0 else 1_000
        model = SymbolModel(
            streams=cfg.streams,
            symbol_count=cfg.symbols,
            seed=cfg.seed,
            epoch_ns=time.time_ns() + step_ns if cfg.epoch_ns is None else cfg.epoch_ns,
            step_ns=step_ns,
            start_seq=cfg.start_seq,
        )
        pregenerated = None
        if cfg.pregenerate:
            began = time.monotonic()
            pregenerated = self._pregenerate(model)
            summary.pregenerate_s = time.monotonic() - began
        garbage_rng = random.Random(cfg.seed ^ 0x5EED)
        batch = cfg.batch or MAX_BATCH
        max_burst = max(batch, int(cfg.rate * MAX_CATCHUP_S))
        start = time.monotonic()
        if cfg.epoch_ns is None and pregenerated is None:
            # Message k is due at start + (k + 1) / rate (PacingSchedule.due), so
            # by default it is stamped with that time: its event time is when it
            # is sent. Read next to `start`, after the model's set-up (~0.5 ms,
            # which used to make every stamp that much early).
            model.epoch_ns = time.time_ns() + step_ns
        schedule = PacingSchedule(rate=cfg.rate, max_burst=max_burst, start=start)
        end = None if cfg.seconds is None else start + cfg.seconds
        generated = 0
        progress = _Progress(start) if sys.stderr.isatty() else None
        next_drain = start
        # Messages per send the tick aims at (1 without a tick, or unpaced).
        batch_target = max(1, int(cfg.rate * cfg.tick_s)) if cfg.rate > 0 else 1
        while not stop.is_set():
            now = time.monotonic()
            if end is not None and now >= end:
                break
            if cfg.count is not None and generated >= cfg.count:
                break
            due = schedule.due(now)
            if cfg.count is not None:
                due = min(due, cfg.count - generated)
            if due < batch_target:
                # Batching: send once `batch_target` (rate x tick) messages are
                # due, or the oldest due one has waited a tick. A sender quicker
                # than its rate (pregenerated messages) would otherwise find a
                # message or two due after every send: a frame per message.
                all_due = schedule.start + (schedule.credited + batch_target) / cfg.rate
                wait = min(all_due, schedule.next_deadline() + cfg.tick_s) - now
                if end is not None:
                    wait = min(wait, end - now)
            else:
                wait = 0.0
            if wait > 0:
                # A plain sleep costs half the CPU of Event.wait (~16 vs ~29 us
                # here, once per tick); slices keep a stop prompt.
                time.sleep(min(wait, _SLEEP_SLICE_S))
                continue
            if pregenerated is not None:
                due = min(due, len(pregenerated.data) - generated)
                if due == 0:
                    break
                self._send_pregenerated(pregenerated, generated, due, batch, summary)
            elif cfg.malformed_every:
                summary.malformed += self._send_planned(model, due, generated, batch, garbage_rng, summary)
            else:
                self._send_generated(model, due, batch, summary)
            generated += due
            schedule.take(due)
            summary.forgiven = schedule.forgiven
            if now >= next_drain:  # subscriptions only matter for the counts: 10 times a second
                next_drain = now + _DRAIN_INTERVAL_S
                self._drain_subscriptions(0)
            if progress is not None:
                progress.show(now, generated)

    def _pregenerate(self, model: SymbolModel) -> _Pregenerated:
        planned = self.config.planned_count
        assert planned is not None  # SourceConfig checked it
        if len(self.config.streams) == 1:
            data = model.generate(planned)[0]
            streams = None
        else:
            messages = model.generate_messages(planned)
            data = [m.data for m in messages]
            streams = [m.stream for m in messages]
        return _Pregenerated(data, streams)

    def _send_pregenerated(
        self, pre: _Pregenerated, first: int, count: int, batch: int, summary: SourceSummary
    ) -> None:
        data = pre.data[first : first + count]
        if pre.streams is None:
            per_stream = [data]
        else:
            streams = pre.streams[first : first + count]
            per_stream = [list(compress(data, map(s.__eq__, streams))) for s in range(len(self._sockets))]
        self._send_streams(per_stream, batch, summary)

    def _send_generated(self, model: SymbolModel, due: int, batch: int, summary: SourceSummary) -> None:
        # The fast path (nothing malformed to inject): the model's bytes per stream.
        self._send_streams(model.generate(due), batch, summary)

    def _send_streams(self, per_stream: list[list[bytes]], batch: int, summary: SourceSummary) -> None:
        # Each stream's next messages (in source_seq order), cut into frames
        # of `batch` messages exactly as plan_frames cuts them, without a
        # GeneratedMessage per message.
        start_seq = self.config.start_seq
        for stream, messages in enumerate(per_stream):
            if not messages:
                continue
            send, topic = self._sockets[stream].send_multipart, self._topics[stream]
            for first in range(0, len(messages), batch):
                send((topic, b"".join(messages[first : first + batch])))
            self._sent[stream] += len(messages)
            summary.last_seq[stream] = start_seq + self._sent[stream] - 1

    def _send_planned(
        self,
        model: SymbolModel,
        due: int,
        generated: int,
        batch: int,
        garbage_rng: random.Random,
        summary: SourceSummary,
    ) -> int:
        # With malformed injection: message by message through plan_frames.
        messages = model.generate_messages(due)
        frames, malformed = plan_frames(
            messages,
            stream_count=len(self.config.streams),
            batch=batch,
            malformed_every=self.config.malformed_every,
            generated_before=generated,
            rng=garbage_rng,
        )
        for stream, payload in frames:
            self._sockets[stream].send_multipart((self._topics[stream], payload))
        for msg in messages:
            self._sent[msg.stream] += 1
            summary.last_seq[msg.stream] = msg.source_seq
        return malformed


@dataclass(slots=True)
class _Pregenerated:
    """A run's messages in global order (``streams``: each one's stream; ``None`` for one stream)."""

    data: list[bytes]
    streams: list[int] | None


class _Progress:
    # Progress on stderr only when it is a terminal, at most once a second.
    def __init__(self, start: float) -> None:
        self.start = start
        self.last = start

    def show(self, now: float, sent: int) -> None:
        if now - self.last >= 1.0:
            self.last = now
            rate = sent / max(now - self.start, 1e-9)
            print(f"\rsent {sent:,}  {rate:,.0f} msg/s ", end="", file=sys.stderr, flush=True)


# --- command line -------------------------------------------------------------------------


def _endpoint(text: str) -> tuple[str, str]:
    name, sep, endpoint = text.partition("=")
    if not sep or not name or not endpoint:
        raise argparse.ArgumentTypeError(f"expected NAME=ENDPOINT, got {text!r}")
    return name, endpoint


def build_parser() -> argparse.ArgumentParser:
    """The ``feedha source`` argument parser."""
    parser = argparse.ArgumentParser(prog="feedha source", description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--endpoint", type=_endpoint, action="append", default=[], metavar="NAME=tcp://HOST:PORT")
    add("--bind-host", default="127.0.0.1", help="host for random ports (streams without --endpoint)")
    add("--streams", help="comma-separated letter ranges (default A-M,N-Z, or the --endpoint names)")
    add("--symbols", type=int, default=DEFAULT_SYMBOLS)
    add("--seed", type=int, default=1)
    add("--epoch-ns", type=int, default=None, help="event time of the first message (default: now)")
    add("--rate", type=float, default=DEFAULT_RATE, help="messages/s over all streams; 0 = unpaced")
    add("--seconds", type=float, default=None)
    add("--count", type=int, default=None)
    add("--batch", type=int, default=None, help=f"FIX messages per frame (default: as due, <= {MAX_BATCH})")
    add("--malformed-every", type=int, default=0, metavar="K")
    add("--wait-subscribers", type=int, default=0, metavar="N")
    add("--wait-timeout", type=float, default=DEFAULT_WAIT_TIMEOUT_S)
    add("--sndhwm", type=int, default=0)
    add("--linger-ms", type=int, default=DEFAULT_LINGER_MS)
    add("--start-seq", type=int, default=1)
    add("--tick", type=float, default=0.0, help="least sleep between sends, s (batches ~rate*tick per frame)")
    add(
        "--pregenerate",
        action="store_true",
        help="generate the whole run before the clock starts, then only pace the sends "
        "(capacity benchmarks; needs --count or --rate and --seconds)",
    )
    return parser


def config_from_args(argv: Sequence[str]) -> SourceConfig:
    """Build a :class:`SourceConfig` from command-line arguments.

    Raises:
        SystemExit: bad arguments (argparse's usual exit code 2).
    """
    parser = build_parser()
    args = parser.parse_args(list(argv))
    if args.streams:
        streams = tuple(s.strip() for s in args.streams.split(",") if s.strip())
    elif args.endpoint:
        streams = tuple(name for name, _e in args.endpoint)
    else:
        streams = DEFAULT_STREAMS
    try:
        return SourceConfig(
            streams=streams,
            endpoints=tuple(args.endpoint),
            bind_host=args.bind_host,
            symbols=args.symbols,
            seed=args.seed,
            epoch_ns=args.epoch_ns,
            rate=args.rate,
            seconds=args.seconds,
            count=args.count,
            batch=args.batch,
            malformed_every=args.malformed_every,
            wait_subscribers=args.wait_subscribers,
            wait_timeout_s=args.wait_timeout,
            sndhwm=args.sndhwm,
            linger_ms=args.linger_ms,
            start_seq=args.start_seq,
            tick_s=args.tick,
            pregenerate=args.pregenerate,
        )
    except ValueError as exc:
        parser.error(str(exc))


def main(argv: list[str]) -> int:
    """Run ``feedha source``: print the endpoints as a JSON line, send, then print the summary line.

    Returns:
        0, or 1 if waiting for subscribers timed out.
    """
    config = config_from_args(argv)
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    source = PlainSource(config)
    print(json.dumps({"endpoints": source.bind()}), flush=True)
    summary = source.run(stop)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    if summary.error:
        print(f"feedha source: {summary.error}", file=sys.stderr)
    print(summary.to_json(), flush=True)
    return 1 if summary.error else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
