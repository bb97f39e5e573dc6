"""The synthetic market: symbols, source streams and the closed-form tick schedule.

Theory of operation
-------------------
The rate source hands the job a gap-free, strictly increasing row number
``value`` (v = 0, 1, 2, ...), and it re-delivers exactly the same range for a
micro-batch that is replayed from the checkpoint. Everything the job publishes
is a pure function of v, so a replayed batch carries identical messages.

A seeded *schedule* of length ``L`` lists which symbol ticks at each position
``p = v mod L`` of a cycle. Busy symbols appear more often (Zipf weights) and
appear in *runs* (bursts of consecutive ticks of one symbol); the runs are
shuffled with the seed. From the schedule we precompute, per position:

* ``stream_rank[p]``: how many earlier positions of the cycle belong to the same
  source stream;
* ``symbol_rank[p]``: how many earlier positions of the cycle are the same symbol;

and per stream ``stream_count[s]`` (positions of stream s in one cycle). Then,
with ``r = v div L``::

    source_seq(v) = r * stream_count[s] + stream_rank[p] + 1
    tick_index(v) = r * symbol_count[i] + symbol_rank[p]

Why the numbering is gap-free and strictly increasing per stream: the rows of
stream s are ``{r*L + p : stream(p) = s}``. Listing them in increasing v walks
the cycles in order and, inside a cycle, the positions of s in order; the k-th
of them (0-based) is at cycle ``r = k div stream_count[s]`` and is the
``(k mod stream_count[s])``-th position of s in that cycle, whose
``stream_rank`` is exactly ``k mod stream_count[s]``. So ``source_seq = k + 1``:
a bijection from the stream's rows, in v order, onto 1, 2, 3, ... Because v
itself is gap-free across micro-batches and restarts (the rate source's offsets
live in the checkpoint), so is every stream's ``source_seq``.

This module is pure: no Spark, no sockets, no clock.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass
from typing import Final

DEFAULT_STREAMS: Final = "A-M,N-Z"
DEFAULT_SYMBOLS: Final = 500
DEFAULT_SEED: Final = 7
# Average number of schedule slots per symbol in one cycle.
CYCLE_SLOTS_PER_SYMBOL: Final = 8
# Longest burst: consecutive ticks of one symbol in the schedule.
MAX_BURST: Final = 8
ZIPF_EXPONENT: Final = 0.9


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamSpec:
    """One named source stream: the symbols whose first letter is in ``first..last``.

    Attributes:
        name: the stream name, the ZeroMQ topic (e.g. ``"A-M"``).
        number: 1-based number, in the order the streams were given.
        first: first initial letter (inclusive).
        last: last initial letter (inclusive).
    """

    name: str
    number: int
    first: str
    last: str

    def __post_init__(self) -> None:
        if not self.name or any(c.isspace() for c in self.name):
            raise ValueError(f"stream name must be non-empty without whitespace: {self.name!r}")
        for letter in (self.first, self.last):
            if len(letter) != 1 or letter not in string.ascii_uppercase:
                raise ValueError(f"stream range letter must be A-Z: {letter!r} in {self.name!r}")
        if self.first > self.last:
            raise ValueError(f"stream range is empty: {self.first}-{self.last}")

    def has_symbol(self, symbol: str) -> bool:
        """Whether ``symbol`` belongs to this stream (by its first letter, upper-cased)."""
        initial = symbol[:1].upper()
        return self.first <= initial <= self.last


def parse_streams(text: str) -> tuple[StreamSpec, ...]:
    """Parse a source-stream list such as ``"A-M,N-Z"`` or ``"EQ1=A-F,EQ2=G-Z"``.

    Args:
        text: comma-separated items, each ``X-Y`` (named ``X-Y``) or ``NAME=X-Y``.

    Returns:
        The streams, numbered 1..n in the order given.

    Raises:
        ValueError: a malformed item, a duplicate name or overlapping ranges.
    """
    streams: list[StreamSpec] = []
    for number, item in enumerate((part.strip() for part in text.split(",") if part.strip()), start=1):
        name, sep, letters = item.partition("=")
        if not sep:
            name, letters = item, item
        first, dash, last = letters.strip().upper().partition("-")
        if not dash:
            first = last = letters.strip().upper()
        streams.append(StreamSpec(name=name.strip(), number=number, first=first.strip(), last=last.strip()))
    if not streams:
        raise ValueError(f"no source streams in {text!r}")
    names = [s.name for s in streams]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate source stream names in {text!r}")
    for letter in string.ascii_uppercase:
        owners = [s.name for s in streams if s.first <= letter <= s.last]
        if len(owners) > 1:
            raise ValueError(f"letter {letter} is in more than one source stream: {owners}")
    return tuple(streams)


def stream_for(symbol: str, streams: tuple[StreamSpec, ...]) -> StreamSpec | None:
    """The stream a symbol belongs to, or ``None`` if no range covers its initial."""
    for stream in streams:
        if stream.has_symbol(symbol):
            return stream
    return None


def make_symbols(count: int, seed: int, streams: tuple[StreamSpec, ...]) -> list[str]:
    """Make ``count`` distinct, seeded ticker-like symbols that the streams cover.

    Args:
        count: how many symbols (>= number of streams, so each stream has one).
        seed: random seed.
        streams: the source streams; every symbol's initial is in one of them.

    Returns:
        Sorted symbols of 2-4 upper-case letters.

    Raises:
        ValueError: ``count`` too small or too large.
    """
    if not len(streams) <= count <= 200_000:
        raise ValueError(f"symbols must be between {len(streams)} and 200000: {count}")
    rng = random.Random(f"symbols/{seed}")
    initials = [c for c in string.ascii_uppercase if stream_for(c, streams) is not None]
    chosen: set[str] = set()
    # One symbol per stream first, so no stream is empty.
    for stream in streams:
        chosen.add(stream.first + "".join(rng.choices(string.ascii_uppercase, k=3)))
    while len(chosen) < count:
        length = rng.choice((2, 3, 3, 4, 4, 4))
        chosen.add(rng.choice(initials) + "".join(rng.choices(string.ascii_uppercase, k=length - 1)))
    return sorted(chosen)


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """The seeded tick schedule of one cycle and its rank tables (see module doc).

    Attributes:
        symbols: symbol names, indexed by symbol number.
        symbol_stream: the stream number of each symbol.
        base_cents: each symbol's starting mid price in cents.
        volatility_bp: each symbol's per-tick volatility in basis points.
        positions: symbol number at each cycle position (length L).
        stream_rank: per position, earlier positions of the same stream in the cycle.
        symbol_rank: per position, earlier positions of the same symbol in the cycle.
        stream_count: per stream number (index number - 1), positions in one cycle.
        symbol_count: per symbol, positions in one cycle.
    """

    symbols: tuple[str, ...]
    symbol_stream: tuple[int, ...]
    base_cents: tuple[int, ...]
    volatility_bp: tuple[int, ...]
    positions: tuple[int, ...]
    stream_rank: tuple[int, ...]
    symbol_rank: tuple[int, ...]
    stream_count: tuple[int, ...]
    symbol_count: tuple[int, ...]

    @property
    def cycle(self) -> int:
        """The cycle length L."""
        return len(self.positions)

    def locate(self, value: int) -> tuple[int, int, int]:
        """Map a rate-source row number to ``(stream_number, source_seq, symbol_number)``.

        This is the reference the Spark transform is tested against.

        Args:
            value: the row number v (>= 0).

        Returns:
            The stream number (1-based), the row's ``source_seq`` and its symbol number.
        """
        rounds, position = divmod(value, self.cycle)
        symbol = self.positions[position]
        stream = self.symbol_stream[symbol]
        seq = rounds * self.stream_count[stream - 1] + self.stream_rank[position] + 1
        return stream, seq, symbol

    def __repr__(self) -> str:
        return f"<Schedule [symbols={len(self.symbols)}, cycle={self.cycle}, streams={self.stream_count}]>"


def build_schedule(symbols: list[str], streams: tuple[StreamSpec, ...], seed: int) -> Schedule:
    """Build the seeded cycle: Zipf-weighted symbol activity, in shuffled bursts.

    Args:
        symbols: the symbols (each covered by a stream).
        streams: the source streams.
        seed: random seed.

    Returns:
        The schedule with its rank tables.

    Raises:
        ValueError: a symbol no stream covers.
    """
    rng = random.Random(f"schedule/{seed}")
    symbol_stream = []
    for symbol in symbols:
        stream = stream_for(symbol, streams)
        if stream is None:
            raise ValueError(f"no source stream covers symbol {symbol!r}")
        symbol_stream.append(stream.number)
    activity = list(range(len(symbols)))
    rng.shuffle(activity)  # activity[i] = popularity rank of symbol i
    weights = [1.0 / (rank + 1) ** ZIPF_EXPONENT for rank in activity]
    slots = CYCLE_SLOTS_PER_SYMBOL * len(symbols)
    scale = slots / sum(weights)
    runs: list[list[int]] = []
    for index, weight in enumerate(weights):
        remaining = max(1, round(weight * scale))
        while remaining:
            burst = min(remaining, rng.randint(1, MAX_BURST))
            runs.append([index] * burst)
            remaining -= burst
    rng.shuffle(runs)
    positions = [index for run in runs for index in run]
    stream_seen = [0] * len(streams)
    symbol_seen = [0] * len(symbols)
    stream_rank, symbol_rank = [], []
    for index in positions:
        number = symbol_stream[index]
        stream_rank.append(stream_seen[number - 1])
        stream_seen[number - 1] += 1
        symbol_rank.append(symbol_seen[index])
        symbol_seen[index] += 1
    if 0 in stream_seen:
        empty = [s.name for s in streams if stream_seen[s.number - 1] == 0]
        raise ValueError(f"source streams without symbols: {empty}")
    return Schedule(
        symbols=tuple(symbols),
        symbol_stream=tuple(symbol_stream),
        base_cents=tuple(rng.randint(500, 50_000) for _ in symbols),
        volatility_bp=tuple(rng.randint(1, 8) for _ in symbols),
        positions=tuple(positions),
        stream_rank=tuple(stream_rank),
        symbol_rank=tuple(symbol_rank),
        stream_count=tuple(stream_seen),
        symbol_count=tuple(symbol_seen),
    )
