"""The plain source's pure part: symbol split, message model, framing with malformed injection, pacing."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from adapter.conversion import Converter, ConverterTable
from proto.fix import split_messages
from spark_feed.plain_source import (
    PacingSchedule,
    SourceConfig,
    SourceSummary,
    SymbolModel,
    config_from_args,
    corrupt,
    parse_stream_range,
    plan_frames,
    split_symbols,
    symbol_names,
)

EPOCH = 1_700_000_000_000_000_000


def model(seed: int = 3, streams: tuple[str, ...] = ("A-M", "N-Z"), symbols: int = 60) -> SymbolModel:
    return SymbolModel(streams=streams, symbol_count=symbols, seed=seed, epoch_ns=EPOCH)


def test_stream_ranges_and_split() -> None:
    assert parse_stream_range("A-M") == ("A", "M")
    assert parse_stream_range("Q") == ("Q", "Q")
    for bad in ("a-m", "M-A", "AB-C", "", "A-", "1-9"):
        with pytest.raises(ValueError, match="letter range"):
            parse_stream_range(bad)
    names = symbol_names(60)
    assert len(set(names)) == 60 and names[:3] == ["AAA", "BAA", "CAA"]
    assert symbol_names(60) == names  # deterministic
    first, second = split_symbols(names, ["A-M", "N-Z"])
    assert sorted(first + second) == sorted(names)
    assert all(s[0] <= "M" for s in first) and all(s[0] >= "N" for s in second)
    assert split_symbols(names, ["B-C"]) == [[s for s in names if s[0] in "BC"]]
    with pytest.raises(ValueError, match="overlap"):
        split_symbols(names, ["A-M", "M-Z"])


def test_model_numbers_each_stream_gap_free_and_converts() -> None:
    converter = Converter(ConverterTable.load())
    messages = list(itertools.islice(model(), 500))
    for stream in (0, 1):
        seqs = [m.source_seq for m in messages if m.stream == stream]
        assert seqs == list(range(1, len(seqs) + 1)) and seqs
    kinds: set[int] = set()
    for i, message in enumerate(messages):
        bodies, malformed = split_messages(message.data)
        assert malformed == 0 and len(bodies) == 1
        converted = converter.parse(bodies[0])
        assert converted.source_seq == message.source_seq
        assert converted.event_time_ns == EPOCH + i * 1_000_000
        assert ("A" <= converted.symbol[0] <= "M") == (message.stream == 0)
        kinds.update(entry.entry_type for entry in converted.entries)
        for entry in converted.entries:
            assert entry.price > 0 and entry.size > 0
    assert kinds == {1, 2, 3}  # bids, asks and trades all occur


def test_model_is_deterministic_by_seed() -> None:
    first = [m.data for m in itertools.islice(model(seed=9), 300)]
    assert first == [m.data for m in itertools.islice(model(seed=9), 300)]
    assert first != [m.data for m in itertools.islice(model(seed=10), 300)]


def test_model_has_bursts() -> None:
    converter = Converter(ConverterTable.load())
    symbols = [converter.parse(split_messages(m.data)[0][0]).symbol for m in itertools.islice(model(), 3000)]
    longest = max(len(list(group)) for _s, group in itertools.groupby(symbols))
    assert longest >= 5


def test_model_start_seq_and_empty_streams() -> None:
    m = SymbolModel(streams=("A-M", "N-Z"), symbol_count=30, seed=1, epoch_ns=0, start_seq=1000)
    assert min(msg.source_seq for msg in itertools.islice(m, 50)) == 1000
    with pytest.raises(ValueError, match="no symbol"):
        SymbolModel(streams=("Z",), symbol_count=3, seed=1, epoch_ns=0)


def test_corrupt_breaks_only_the_checksum() -> None:
    data = next(model()).data
    bodies, malformed = split_messages(corrupt(data) + data)
    assert (len(bodies), malformed) == (1, 1)
    assert len(corrupt(data)) == len(data)


@pytest.mark.parametrize("batch", [1, 3, 64])
def test_plan_frames_batches_per_stream_and_injects_malformed(batch: int) -> None:
    messages = list(itertools.islice(model(), 100))
    frames, malformed = plan_frames(
        messages, stream_count=2, batch=batch, malformed_every=7, generated_before=0, rng=random.Random(1)
    )
    assert malformed == 100 // 7
    counted = 0
    received: dict[int, list[bytes]] = {0: [], 1: []}
    for stream, payload in frames:
        bodies, bad = split_messages(payload)
        counted += bad
        assert len(bodies) <= batch
        received[stream] += bodies
    assert counted == malformed
    for stream in (0, 1):
        expected = [split_messages(m.data)[0][0] for m in messages if m.stream == stream]
        assert received[stream] == expected  # every valid message, once, in order


def test_plan_frames_cadence_continues_across_calls() -> None:
    messages = list(itertools.islice(model(), 20))
    rng = random.Random(1)
    _frames, first = plan_frames(
        messages[:5], stream_count=2, batch=64, malformed_every=4, generated_before=0, rng=rng
    )
    _frames, second = plan_frames(
        messages[5:], stream_count=2, batch=64, malformed_every=4, generated_before=5, rng=rng
    )
    assert (first, second) == (1, 4)


def test_pacing_schedule_deadlines_and_bounded_catchup() -> None:
    schedule = PacingSchedule(rate=1000.0, max_burst=10, start=100.0)
    assert schedule.due(100.0) == 0
    assert schedule.next_deadline() == pytest.approx(100.001)
    assert schedule.due(100.0055) == 5
    schedule.take(5)
    assert schedule.due(100.0055) == 0
    assert schedule.next_deadline() == pytest.approx(100.006)
    # A 1 s stall: 995 owed, only max_burst sent at once, the rest forgiven.
    assert schedule.due(101.0055) == 10
    assert schedule.forgiven == 990
    schedule.take(10)
    assert schedule.due(101.0055) == 0
    assert schedule.due(101.0075) == 2  # back on the normal cadence
    unpaced = PacingSchedule(rate=0, max_burst=64, start=0.0)
    assert unpaced.due(0.0) == 64 and unpaced.next_deadline() == 0.0


def test_config_checks_and_command_line() -> None:
    with pytest.raises(ValueError, match="rate"):
        SourceConfig(rate=-1)
    with pytest.raises(ValueError, match="overlap"):
        SourceConfig(streams=("A-M", "K-Z"))
    with pytest.raises(ValueError, match="unknown stream"):
        SourceConfig(endpoints=(("X-Y", "tcp://127.0.0.1:1"),))
    config = config_from_args(
        ["--endpoint", "A-F=tcp://127.0.0.1:5000", "--endpoint", "G-Z=tcp://127.0.0.1:5001"]
    )
    assert config.streams == ("A-F", "G-Z") and config.endpoints[1] == ("G-Z", "tcp://127.0.0.1:5001")
    config = config_from_args(
        ["--streams", "A-C,D-Z", "--count", "5", "--batch", "2", "--malformed-every", "3"]
    )
    assert (config.streams, config.count, config.batch, config.malformed_every) == (("A-C", "D-Z"), 5, 2, 3)
    with pytest.raises(SystemExit):
        config_from_args(["--streams", "A-M,B-C"])


def test_summary_json() -> None:
    summary = SourceSummary(
        ("A-M", "N-Z"), {"A-M": "tcp://x:1"}, [3, 4], [3, 4], malformed=2, elapsed_s=1.23456
    )
    data = json.loads(summary.to_json())
    assert data["sent"] == 7 and data["malformed"] == 2 and data["elapsed_s"] == 1.235
    assert data["streams"]["N-Z"] == {"number": 2, "last_seq": 4, "sent": 4}
    assert "error" not in data
