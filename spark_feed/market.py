"""The synthetic market in numpy: row numbers -> numbered, priced ticks, a whole chunk at a time.

Theory of operation
-------------------
:meth:`Market.ticks` is the vectorized twin of :meth:`spark_feed.model.Schedule.locate`
(the closed form and its proof are in :mod:`spark_feed.model`): from the rate
source's row numbers ``v`` it takes ``p = v mod L`` and ``r = v div L`` and looks
``p`` up in the schedule's rank tables (numpy gathers instead of the broadcast
join with a schedule table the Spark SQL version needed)::

    source_seq = r * stream_count[s] + stream_rank[p] + 1
    tick       = r * symbol_count[i] + symbol_rank[p]

Prices are a pure function of ``(symbol, tick)`` in integer arithmetic only
(no floating point, so every machine and numpy build computes the same
bytes): a random walk made of hash noise held constant over blocks of
``2**j`` ticks for :data:`OCTAVES` octaves, weighted by ``2**(j/2)``, scaled by
the symbol's volatility around its base price; one more hash of the tick
picks quote or trade, the spread, the sizes and the side a trade hits. The
hash is SplitMix64's finalizer on ``uint64`` (wrapping multiplication).
Identical ``(source_stream, source_seq)`` therefore means identical
``(symbol, tick)`` and identical prices: a replayed batch is byte-identical.

This module is pure: numpy only, no Spark, no sockets, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from feedha.spark_feed.encoder import Quotes
from feedha.spark_feed.model import Schedule

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]

# Bumped whenever the bytes a (stream, source_seq) gets change (the checkpoint stores it).
PRICE_MODEL_VERSION: Final = 2
OCTAVES: Final = 10
TRADE_PERCENT: Final = 30
MIN_PRICE_CENTS: Final = 100
# 1000 * 2**(j/2), rounded: the weight of octave j (in thousandths).
_WEIGHTS: Final = tuple(round(1000 * 2 ** (octave / 2)) for octave in range(OCTAVES))
_GOLDEN: Final = np.uint64(0x9E3779B97F4A7C15)
_MIX1: Final = np.uint64(0xBF58476D1CE4E5B9)
_MIX2: Final = np.uint64(0x94D049BB133111EB)
_SYMBOL_KEY: Final = np.uint64(0xD6E8FEB86659FD93)
_NOISE_SALT: Final = 100


def mix64(values: U64) -> U64:
    """SplitMix64's finalizer, element-wise (wrapping ``uint64`` arithmetic)."""
    z = values ^ (values >> np.uint64(30))
    z *= _MIX1
    z ^= z >> np.uint64(27)
    z *= _MIX2
    z ^= z >> np.uint64(31)
    return z


def _salt(seed: int, salt: int) -> np.uint64:
    # A per-(seed, salt) constant, itself mixed so nearby seeds share nothing.
    value = np.array([(seed * 1_000_003 + salt) & 0xFFFF_FFFF_FFFF_FFFF], dtype=np.uint64)
    return np.uint64(mix64(value * _GOLDEN)[0])


@dataclass(frozen=True, slots=True)
class Ticks:
    """Numbered ticks of one chunk of row numbers (in the order of the row numbers)."""

    stream: I64  # 1-based source-stream number
    seq: I64  # source_seq, gap-free per stream
    symbol: I64  # symbol number (index into Schedule.symbols)
    tick: I64  # the symbol's own tick index

    def __len__(self) -> int:
        return len(self.seq)


class Market:
    """A :class:`~spark_feed.model.Schedule` as numpy tables, and the seeded price model.

    Args:
        schedule: the seeded cycle and its rank tables.
        seed: the model seed (prices, sizes, quote or trade).
    """

    def __init__(self, schedule: Schedule, *, seed: int) -> None:
        self.schedule = schedule
        self._cycle = schedule.cycle
        self._positions = np.asarray(schedule.positions, dtype=np.int64)
        self._symbol_stream = np.asarray(schedule.symbol_stream, dtype=np.int64)
        self._stream_rank = np.asarray(schedule.stream_rank, dtype=np.int64)
        self._symbol_rank = np.asarray(schedule.symbol_rank, dtype=np.int64)
        self._stream_count = np.asarray(schedule.stream_count, dtype=np.int64)
        self._symbol_count = np.asarray(schedule.symbol_count, dtype=np.int64)
        self._base = np.asarray(schedule.base_cents, dtype=np.int64)
        self._volatility = np.asarray(schedule.volatility_bp, dtype=np.int64)
        self._octave_salts = [_salt(seed, octave) for octave in range(OCTAVES)]
        self._noise_salt = _salt(seed, _NOISE_SALT)
        self.seed = seed

    def ticks(self, values: I64) -> Ticks:
        """Locate rate-source row numbers (the closed form of :meth:`Schedule.locate`, vectorized).

        Args:
            values: row numbers v >= 0, any order.

        Returns:
            Stream, ``source_seq``, symbol and per-symbol tick of each row, in the same order.

        Raises:
            ValueError: a negative row number.
        """
        values = np.asarray(values, dtype=np.int64)
        if len(values) and int(values.min()) < 0:
            raise ValueError(f"row numbers must be >= 0: {int(values.min())}")
        rounds, position = np.divmod(values, self._cycle)
        symbol = self._positions[position]
        stream = self._symbol_stream[symbol]
        seq = rounds * self._stream_count[stream - 1] + self._stream_rank[position] + 1
        tick = rounds * self._symbol_count[symbol] + self._symbol_rank[position]
        return Ticks(stream=stream, seq=seq, symbol=symbol, tick=tick)

    def _hash(self, salt: np.uint64, symbol: I64, block: I64) -> U64:
        key = block.astype(np.uint64) * _GOLDEN + symbol.astype(np.uint64) * _SYMBOL_KEY + salt
        return mix64(key)

    def mid_cents(self, symbol: I64, tick: I64) -> I64:
        """The mid price of each (symbol, tick), in cents (the random walk; see module doc)."""
        walk = np.zeros(len(symbol), dtype=np.int64)
        for octave, (salt, weight) in enumerate(zip(self._octave_salts, _WEIGHTS, strict=True)):
            noise = self._hash(salt, symbol, tick >> octave) % np.uint64(2001)
            walk += (noise.astype(np.int64) - 1000) * weight
        base = self._base[symbol]
        # walk is in millionths of a step; a step moves the price by volatility_bp basis points.
        move = base * walk * self._volatility[symbol] // 10_000_000_000
        return np.maximum(MIN_PRICE_CENTS, base + move)

    def quotes(self, ticks: Ticks, event_ns: I64) -> Quotes:
        """Price the ticks: quote (bid and offer) or trade, sizes, all from seeded hashes.

        Args:
            ticks: from :meth:`ticks`.
            event_ns: each tick's event time.

        Returns:
            The columns :class:`~spark_feed.encoder.FixEncoder` encodes.
        """
        symbol, tick = ticks.symbol, ticks.tick
        mid = self.mid_cents(symbol, tick)
        noise = self._hash(self._noise_salt, symbol, tick)

        def draw(shift: int, modulus: int) -> I64:
            return ((noise >> np.uint64(shift)) % np.uint64(modulus)).astype(np.int64)

        half = np.maximum(1, mid * (1 + draw(0, 3)) // 5000)
        bid = np.maximum(1, mid - half)
        ask = np.maximum(mid + half, bid + 1)
        is_trade = draw(8, 100) < TRADE_PERCENT
        trade_price = np.where(draw(16, 2) == 0, bid, ask)
        trade_size = 100 * (1 + draw(24, 10)) * np.where(draw(32, 64) == 0, 25, 1)
        quote_size = 100 * (1 + draw(40, 20))
        return Quotes(
            seq=ticks.seq,
            symbol=symbol,
            event_ns=event_ns,
            is_trade=is_trade,
            price=np.where(is_trade, trade_price, bid),
            size=np.where(is_trade, trade_size, quote_size),
            ask=ask,
        )

    def __repr__(self) -> str:
        return f"<Market [symbols={len(self._base)}, cycle={self._cycle}, seed={self.seed}]>"
