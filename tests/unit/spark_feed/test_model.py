"""Pure tests of the synthetic market model and its closed-form numbering."""

from __future__ import annotations

import random
from collections import defaultdict

import pytest

from feedha.spark_feed import model


def _schedule(symbols: int = 60, seed: int = 3, streams: str = "A-M,N-Z") -> model.Schedule:
    specs = model.parse_streams(streams)
    return model.build_schedule(model.make_symbols(symbols, seed, specs), specs, seed)


def test_parse_streams_default_and_named() -> None:
    default = model.parse_streams("A-M,N-Z")
    assert [(s.name, s.number, s.first, s.last) for s in default] == [
        ("A-M", 1, "A", "M"),
        ("N-Z", 2, "N", "Z"),
    ]
    named = model.parse_streams("EQ1=A-F, EQ2=G-Z")
    assert [(s.name, s.number) for s in named] == [("EQ1", 1), ("EQ2", 2)]


@pytest.mark.parametrize("text", ["", "A-M,A-C", "X=A-M,X=N-Z", "M-A", "A-1"])
def test_parse_streams_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        model.parse_streams(text)


def test_symbol_to_stream_split() -> None:
    streams = model.parse_streams("A-M,N-Z")
    assert model.stream_for("AAPL", streams) is streams[0]
    assert model.stream_for("msft", streams) is streams[0]
    assert model.stream_for("NVDA", streams) is streams[1]
    assert model.stream_for("ZZ", streams) is streams[1]
    assert model.stream_for("1ABC", streams) is None


def test_symbols_are_seeded_distinct_and_cover_every_stream() -> None:
    streams = model.parse_streams("A-C,D-M,N-Z")
    first = model.make_symbols(300, 11, streams)
    assert first == model.make_symbols(300, 11, streams)
    assert len(set(first)) == 300
    assert {model.stream_for(s, streams).number for s in first} == {1, 2, 3}  # type: ignore[union-attr]


def test_schedule_has_bursts_and_skew() -> None:
    schedule = _schedule(symbols=200)
    runs = sum(1 for a, b in zip(schedule.positions, schedule.positions[1:], strict=False) if a == b)
    assert runs > schedule.cycle // 10  # consecutive ticks of one symbol
    assert max(schedule.symbol_count) > 10 * min(schedule.symbol_count)
    assert "cycle=" in repr(schedule)


@pytest.mark.parametrize("streams", ["A-M,N-Z", "A-C,D-M,N-Z", "ALL=A-Z"])
def test_closed_form_numbering_is_a_bijection_onto_1_to_n(streams: str) -> None:
    schedule = _schedule(streams=streams)
    seen: dict[int, list[int]] = defaultdict(list)
    for value in range(schedule.cycle * 5 + 17):
        stream, seq, _symbol = schedule.locate(value)
        seen[stream].append(seq)
    for seqs in seen.values():
        assert seqs == list(range(1, len(seqs) + 1))


def test_closed_form_numbering_any_batch_split() -> None:
    # Micro-batches are contiguous ranges of v; numbering is per v, so any
    # split (and any replayed batch) gives the same numbers.
    schedule = _schedule()
    rng = random.Random(5)
    total = schedule.cycle * 3 + 5
    cuts = sorted(rng.sample(range(1, total), 20))
    last: dict[int, int] = {}
    for start, end in zip([0, *cuts], [*cuts, total], strict=True):
        for value in range(start, end):
            stream, seq, _ = schedule.locate(value)
            assert seq == last.get(stream, 0) + 1
            last[stream] = seq
        replay = [schedule.locate(v) for v in range(start, end)]
        assert replay == [schedule.locate(v) for v in range(start, end)]
