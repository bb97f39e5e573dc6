"""The synthetic market in numpy: closed-form numbering, prices, and whole micro-batches (no Spark)."""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np
import pytest

from feedha.proto import fix
from feedha.spark_feed import model
from feedha.spark_feed.market import Market, mix64
from feedha.spark_feed.sink import Encoded
from feedha.spark_feed.synthetic import SyntheticBatches

BASE_NS = 1_767_225_600_000_000_000
INTERVAL_NS = 500_000_000


def _schedule(symbols: int = 60, seed: int = 3, streams: str = "A-M,N-Z") -> model.Schedule:
    specs = model.parse_streams(streams)
    return model.build_schedule(model.make_symbols(symbols, seed, specs), specs, seed)


@pytest.mark.parametrize("streams", ["A-M,N-Z", "A-C,D-M,N-Z", "ALL=A-Z"])
def test_vectorized_numbering_is_schedule_locate(streams: str) -> None:
    schedule = _schedule(streams=streams)
    market = Market(schedule, seed=3)
    values = np.concatenate([np.arange(schedule.cycle * 3 + 11), np.array([10**12, 10**12 + 1, 7 * 10**14])])
    ticks = market.ticks(values)
    for index, value in enumerate(values.tolist()):
        stream, seq, symbol = schedule.locate(value)
        assert (ticks.stream[index], ticks.seq[index], ticks.symbol[index]) == (stream, seq, symbol)
    with pytest.raises(ValueError, match=">= 0"):
        market.ticks(np.array([-1]))


def test_ticks_of_a_symbol_count_up_gap_free() -> None:
    schedule = _schedule()
    ticks = Market(schedule, seed=3).ticks(np.arange(schedule.cycle * 4))
    for symbol in range(len(schedule.symbols)):
        own = ticks.tick[ticks.symbol == symbol]
        assert own.tolist() == list(range(len(own)))


def test_prices_are_seeded_integer_and_sane() -> None:
    schedule = _schedule(symbols=200)
    market = Market(schedule, seed=3)
    ticks = market.ticks(np.arange(50_000))
    quotes = market.quotes(ticks, np.full(len(ticks), BASE_NS))
    again = Market(schedule, seed=3).quotes(ticks, np.full(len(ticks), BASE_NS))
    other = Market(schedule, seed=4).quotes(ticks, np.full(len(ticks), BASE_NS))
    for name in ("price", "size", "ask", "is_trade"):
        assert np.array_equal(getattr(quotes, name), getattr(again, name))
    assert not np.array_equal(quotes.price, other.price)
    quote = ~quotes.is_trade
    assert bool(np.all(quotes.price[quote] < quotes.ask[quote])) and int(quotes.price.min()) > 0
    assert 0.25 < float(quotes.is_trade.mean()) < 0.35
    assert set(np.unique(quotes.size[quote] % 100).tolist()) == {0}
    # The walk moves: a busy symbol's mid price is not constant over its ticks.
    busy = int(np.bincount(ticks.symbol).argmax())
    assert (
        len(np.unique(market.mid_cents(ticks.symbol[ticks.symbol == busy], ticks.tick[ticks.symbol == busy])))
        > 50
    )


def test_mix64_is_splitmix64() -> None:
    # SplitMix64's finalizer of 0x9E3779B97F4A7C15 (the first output of SplitMix64 seeded with 0).
    assert int(mix64(np.array([0x9E3779B97F4A7C15], dtype=np.uint64))[0]) == 0xE220A8397B1DCDAF


def _published(chunks: list[Encoded]) -> dict[int, list[tuple[int, bytes]]]:
    out: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    for chunk in chunks:
        raw = chunk.data.tobytes()
        for index in range(len(chunk)):
            message = raw[int(chunk.offsets[index]) : int(chunk.offsets[index + 1])]
            out[int(chunk.streams[index])].append((int(chunk.seqs[index]), message))
    return out


def test_batches_are_gap_free_replayable_and_chunk_independent() -> None:
    schedule = _schedule(symbols=80)
    rows = 1_000
    batches = SyntheticBatches(schedule, seed=3, sender="FEED", rows_per_batch=rows, interval_ns=INTERVAL_NS,
                               chunk_rows=97)  # fmt: skip
    whole = SyntheticBatches(schedule, seed=3, sender="FEED", rows_per_batch=rows, interval_ns=INTERVAL_NS)
    last: dict[int, int] = defaultdict(int)
    symbols = set(schedule.symbols)
    for batch_id in (0, 1, 2, 2, 3):  # batch 2 is replayed (same rows, same base)
        values = np.arange(batch_id * rows, (batch_id + 1) * rows, dtype=np.int64)
        base = BASE_NS + batch_id * INTERVAL_NS
        chunks = list(batches.chunks(values, base_ns=base))
        assert len(chunks) == -(-rows // 97)
        published = _published(chunks)
        assert published == _published(list(whole.chunks(values, base_ns=base)))
        replayed = batch_id == 2 and last[1] >= min(seq for seq, _m in published[1])
        for stream, messages in published.items():
            seqs = [seq for seq, _m in messages]
            if not replayed:
                assert seqs == list(range(last[stream] + 1, last[stream] + 1 + len(seqs)))
                last[stream] = seqs[-1]
            for seq, message in messages:
                bodies, malformed = fix.split_messages(message)
                assert malformed == 0 and len(bodies) == 1
                fields = dict(fix.parse_fields(bodies[0]))
                assert int(fields[fix.TAG_SEQ]) == seq
                symbol = fields[fix.TAG_SYMBOL].decode()
                assert symbol in symbols and model.stream_for(symbol, schedule_streams()).number == stream  # type: ignore[union-attr]
                stamp = fix.parse_timestamp(fields[fix.TAG_EVENT_TIME])
                assert base <= stamp < base + INTERVAL_NS
    assert sum(last.values()) == 4 * rows
    assert "rows_per_batch=1000" in repr(batches)


def schedule_streams() -> tuple[model.StreamSpec, ...]:
    return model.parse_streams("A-M,N-Z")


def test_batch_rows_spread_over_the_interval_and_bad_sizes_refused() -> None:
    batches = SyntheticBatches(_schedule(), seed=3, sender="FEED", rows_per_batch=4, interval_ns=100)
    assert batches.event_times(np.arange(8, 12), 1000).tolist() == [1000, 1025, 1050, 1075]
    with pytest.raises(ValueError, match="must be >= 1"):
        SyntheticBatches(_schedule(), seed=3, sender="FEED", rows_per_batch=0, interval_ns=100)
    assert list(batches.chunks(np.zeros(0, dtype=np.int64), base_ns=0)) == []


def test_a_random_split_into_batches_numbers_the_same() -> None:
    schedule = _schedule()
    market = Market(schedule, seed=3)
    total = schedule.cycle * 3 + 5
    cuts = sorted(random.Random(5).sample(range(1, total), 20))
    pieces = [market.ticks(np.arange(a, b)) for a, b in zip([0, *cuts], [*cuts, total], strict=True)]
    whole = market.ticks(np.arange(total))
    assert np.array_equal(np.concatenate([p.seq for p in pieces]), whole.seq)


def _messages_of(chunks: object) -> list[bytes]:
    out = []
    for chunk in chunks:  # type: ignore[attr-defined]
        raw = chunk.data.tobytes()
        out += [
            raw[a:b] for a, b in zip(chunk.offsets[:-1].tolist(), chunk.offsets[1:].tolist(), strict=True)
        ]
    return out


def test_encoding_ahead_publishes_the_delivered_rows_hit_or_miss() -> None:
    from feedha.spark_feed.ahead import Ahead

    rows = 5_000
    schedule = _schedule()
    batches = SyntheticBatches(schedule, seed=3, sender="FEED", rows_per_batch=rows, interval_ns=INTERVAL_NS,
                               chunk_rows=700)  # fmt: skip
    ahead = Ahead(batches, rows, budget_bytes=200_000)  # ~1,200 messages: part of the batch only
    try:
        expected = ahead.expected(3)
        assert expected[0] == 15_000 and len(expected) == rows
        values, chunks = ahead.chunks(3, BASE_NS, lambda: expected.copy())
        assert _messages_of(chunks) == _messages_of(batches.chunks(expected, base_ns=BASE_NS))
        # Spark delivered other rows than expected: they, not the expected ones, are published.
        other = np.arange(40_000, 40_000 + 1_234)
        values, chunks = ahead.chunks(3, BASE_NS, lambda: other)
        assert values is other
        assert _messages_of(chunks) == _messages_of(batches.chunks(other, base_ns=BASE_NS))
        assert ahead.counts() == {"hits": 1, "misses": 1} and "hits=1" in repr(ahead)
        with pytest.raises(RuntimeError, match="job failed"):  # a failed collect publishes nothing
            ahead.chunks(4, BASE_NS, _failing)
    finally:
        ahead.close()


def _failing() -> np.ndarray:
    raise RuntimeError("job failed")
