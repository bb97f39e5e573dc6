"""spark_feed.transforms on static DataFrames (one shared local[1] SparkSession)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from feedha.proto import fix
from feedha.spark_feed import model, transforms
from feedha.spark_feed.schema import REPLAY_SCHEMA
from feedha.spark_feed.sink import finish_messages

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
]

SAMPLE = Path(transforms.__file__).parent / "sample"
STREAMS = model.parse_streams("A-M,N-Z")


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[1]")
        .appName("spark-feed-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def schedule() -> model.Schedule:
    return model.build_schedule(model.make_symbols(40, 9, STREAMS), STREAMS, 9)


def _messages(table: pa.Table) -> list[bytes]:
    column = table["message"].combine_chunks().cast(pa.large_binary())
    _v, offsets, data = column.buffers()
    off = np.frombuffer(offsets, dtype=np.int64)[column.offset : column.offset + len(column) + 1]
    out_offsets, out = finish_messages(off, np.frombuffer(data, dtype=np.uint8))
    return [out[a:b].tobytes() for a, b in zip(out_offsets[:-1], out_offsets[1:], strict=True)]


@pytest.mark.slow  # Spark plans every batch: ~40-80 s on 2 cores (make test-slow, CI)
def test_locate_rows_numbering_is_gap_free_across_any_batches(spark, schedule) -> None:
    # Micro-batches are contiguous offset ranges; a crash replays one whole.
    cuts = [0, 1, 7, 150, 151, 400, schedule.cycle * 2 + 3, schedule.cycle * 3]
    frames = [
        spark.range(a, b, 1, 2).withColumnRenamed("id", "value") for a, b in zip(cuts, cuts[1:], strict=False)
    ]
    sdf = transforms.schedule_frame(spark, schedule)
    last: dict[int, int] = defaultdict(int)
    for frame in [*frames[:3], frames[2], *frames[3:]]:  # batch 2 replayed
        rows = (
            transforms.locate_rows(frame, sdf, schedule.cycle)
            .select("value", "stream", "source_seq")
            .collect()
        )
        rows.sort(key=lambda r: r.value)
        for row in rows:
            assert (row.stream, row.source_seq) == schedule.locate(row.value)[:2]
        replayed = rows and rows[0].source_seq <= last[rows[0].stream]
        for row in rows:
            if replayed:
                assert row.source_seq <= last[row.stream]
            else:
                assert row.source_seq == last[row.stream] + 1
                last[row.stream] = row.source_seq
    assert sum(last.values()) == cuts[-1]


@pytest.mark.slow  # Spark plans every batch: ~40-80 s on 2 cores (make test-slow, CI)
def test_synthetic_messages_are_exact_fix_and_deterministic(spark, schedule) -> None:
    sdf = transforms.schedule_frame(spark, schedule)
    encoder = transforms.SyntheticEncoder(sdf, cycle=schedule.cycle, seed=9, sender="FEED",
                                          interval_ns=500_000_000, rows_per_batch=200)  # fmt: skip
    rates = spark.range(200, 400, 1, 2).withColumnRenamed("id", "value")
    base = 1_767_225_600_000_000_000
    table = (
        encoder.encode(rates, base_ns=base)
        .toArrow()
        .sort_by([("stream", "ascending"), ("source_seq", "ascending")])
    )
    again = (
        encoder.encode(rates, base_ns=base)
        .toArrow()
        .sort_by([("stream", "ascending"), ("source_seq", "ascending")])
    )
    assert table.equals(again)
    assert "SyntheticEncoder" in repr(encoder)
    for message, stream, seq, event_ns in zip(_messages(table), table["stream"].to_pylist(),
                                              table["source_seq"].to_pylist(), table["event_ns"].to_pylist(),
                                              strict=True):  # fmt: skip
        bodies, malformed = fix.split_messages(message)
        assert malformed == 0 and len(bodies) == 1
        fields = fix.parse_fields(bodies[0])
        values = dict(fields)
        symbol = values[fix.TAG_SYMBOL].decode()
        assert model.stream_for(symbol, STREAMS).number == stream  # type: ignore[union-attr]
        assert int(values[fix.TAG_SEQ]) == seq
        assert base <= event_ns < base + 500_000_000
        prices = [v for t, v in fields if t == fix.TAG_PRICE]
        types = [v for t, v in fields if t == fix.TAG_ENTRY_TYPE]
        entries = [fix.SourceEntry(t.decode(), p.decode(), int(s)) for t, p, s in
                   zip(types, prices, [v for t, v in fields if t == fix.TAG_SIZE], strict=True)]  # fmt: skip
        if types == [b"0", b"1"]:
            assert float(prices[0]) < float(prices[1])
        else:
            assert types == [b"2"]
        rebuilt = fix.encode_market_data(
            source_seq=seq, symbol=symbol, event_time_ns=event_ns, entries=entries
        )
        assert rebuilt == message


def test_stream_number_splits_by_initial(spark) -> None:
    frame = spark.createDataFrame([("AAPL",), ("mmm",), ("NVDA",), ("ZZ",), ("1X",)], "symbol string")
    got = frame.select(transforms.stream_number(frame["symbol"], STREAMS).alias("n")).collect()
    assert [r.n for r in got] == [1, 1, 2, 2, 0]


def test_replay_numbers_in_file_order_after_bases(spark) -> None:
    from pyspark.sql import functions as F

    ticks = spark.read.schema(REPLAY_SCHEMA).option("header", "true").csv(str(SAMPLE))
    ticks = transforms.with_row_order(ticks.select("*", F.col("_metadata.file_path").alias("file")))
    bad = spark.createDataFrame([(1, "9BAD", "1.00", 1, None, None, None, None, "zzz", 0)],
                                ticks.schema)  # fmt: skip
    table = transforms.replay_messages(
        ticks.unionByName(bad), STREAMS, {1: 10, 2: 0}, sender="FEED"
    ).toArrow()
    streams = table["stream"].to_pylist()
    assert streams.count(0) == 1
    expected = []
    for path in sorted(SAMPLE.glob("*.csv")):
        for line in path.read_text().splitlines()[1:]:
            expected.append(line.split(",")[1])
    by_stream: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for message, stream, seq in zip(_messages(table), streams, table["source_seq"].to_pylist(), strict=True):
        if stream:
            symbol = dict(fix.parse_fields(fix.split_messages(message)[0][0]))[fix.TAG_SYMBOL].decode()
            by_stream[stream].append((seq, symbol))
    for number, base in ((1, 10), (2, 0)):
        rows = sorted(by_stream[number])
        assert [seq for seq, _ in rows] == list(range(base + 1, base + 1 + len(rows)))
        in_files = [s for s in expected if model.stream_for(s, STREAMS).number == number]  # type: ignore[union-attr]
        assert [symbol for _, symbol in rows] == in_files
