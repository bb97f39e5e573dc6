"""JournalWriter.append_batch and append_many (C framing) against append; the journal plan and keeper."""

from __future__ import annotations

from array import array
from pathlib import Path

import pytest

from feedha.adapter.config import AdapterConfig
from feedha.adapter.core import AdapterCore
from feedha.adapter.core.journaling import JournalPlan
from feedha.adapter.formats.feedha_fix.choice import make_engine
from feedha.adapter.formats.feedha_fix.table import ConverterTable
from feedha.adapter.journal import (
    FsyncPolicy,
    JournalConfig,
    JournalReader,
    JournalWriter,
    Record,
    SequenceError,
)
from feedha.adapter.journal.format import NS_PER_DAY
from feedha.adapter.journal.segment import list_segments, load_index
from feedha.adapter.persistence import JournalKeeper

T0 = 1_700_000_000_000_000_000  # 2023-11-14T22:13:20Z
# Small segments, buffers and index spacing, so a batch crosses all of them.
SMALL = JournalConfig(segment_bytes=4096, buffer_bytes=4096, index_interval_bytes=512, fsync=FsyncPolicy.NONE)


def payload(seq: int) -> bytes:
    return bytes([seq % 251]) * (seq * 37 % 200)


def files(directory: Path) -> dict[str, bytes]:
    return {
        path.name: path.read_bytes()
        for path in sorted(directory.iterdir())
        if path.suffix in (".fhj", ".fhi")
    }


def packets(
    first: int, count: int, size: int, *, day_every: int = 0
) -> list[tuple[int, int, list[int], list[bytes]]]:
    out = []
    for start in range(first, first + count, size):
        seqs = list(range(start, min(start + size, first + count)))
        day = (start - first) // day_every if day_every else 0
        out.append(
            (start, T0 + day * NS_PER_DAY + start, [10 * seq for seq in seqs], [payload(s) for s in seqs])
        )
    return out


@pytest.mark.parametrize("size", [1, 7, 64, 500])
def test_append_batch_writes_the_bytes_append_writes(tmp_path: Path, size: int) -> None:
    batches = packets(1, 1500, size, day_every=500)
    with JournalWriter(tmp_path / "one", SMALL) as one:
        for first, time_ns, seqs, payloads in batches:
            for i, (seq, data) in enumerate(zip(seqs, payloads, strict=True)):
                one.append(first + i, time_ns, 4, seq, data)
    with JournalWriter(tmp_path / "batch", SMALL) as batch:
        for first, time_ns, seqs, payloads in batches:
            batch.append_batch(first, time_ns, 4, array("q", seqs), payloads)
        assert batch.last_msg_seq == 1500
    expected = files(tmp_path / "one")
    assert len([name for name in expected if name.endswith(".fhj")]) > 20  # rolled by size, mid-batch
    assert len({name[:8] for name in expected}) == 3  # and by UTC day
    assert files(tmp_path / "batch") == expected


def test_append_batch_index_and_recovery_read_back_every_record(tmp_path: Path) -> None:
    with JournalWriter(tmp_path, SMALL) as writer:
        for first, time_ns, seqs, payloads in packets(1, 2000, 50):
            writer.append_batch(first, time_ns, 2, seqs, payloads)
    segments = list_segments(tmp_path)
    for info in segments:
        index = load_index(info)
        assert index is not None and index.seqs[0] == info.first_seq
    records = list(JournalReader(tmp_path).read())
    assert [record.msg_seq for record in records] == list(range(1, 2001))
    assert all(record.source_seq == 10 * record.msg_seq for record in records)
    assert all(record.payload == payload(record.msg_seq) for record in records)
    assert JournalReader(tmp_path).read_range(1234, 1236) == records[1233:1236]
    reopened = JournalWriter(tmp_path, SMALL)  # runs recovery over every segment
    assert reopened.last_msg_seq == 2000
    assert reopened.recovery_report.bytes_cut == 0
    reopened.append_batch(2001, T0 + 5000, 2, [1], [b"after"])
    reopened.close()
    assert list(JournalReader(tmp_path).read(2000)) == [records[-1], Record(2001, T0 + 5000, 2, 1, b"after")]


def test_append_batch_with_fsync_always_and_batch(tmp_path: Path) -> None:
    for policy in (FsyncPolicy.ALWAYS, FsyncPolicy.BATCH):
        directory = tmp_path / policy.value
        with JournalWriter(directory, JournalConfig(fsync=policy)) as writer:
            writer.append_batch(1, T0, 1, [1, 2, 3], [b"a", b"b", b"c"])
            writer.append_batch(4, T0, 1, [4], [b"d"])
        assert [record.payload for record in JournalReader(directory).read()] == [b"a", b"b", b"c", b"d"]


def test_append_batch_errors(tmp_path: Path) -> None:
    writer = JournalWriter(tmp_path, SMALL)
    writer.append_batch(1, T0, 1, [1, 2], [b"a", b"b"])
    with pytest.raises(SequenceError) as info:
        writer.append_batch(2, T0, 1, [3], [b"c"])
    assert (info.value.last, info.value.got) == (2, 2)
    with pytest.raises(ValueError, match="differ in length"):
        writer.append_batch(3, T0, 1, [3, 4], [b"c"])
    writer.append_batch(3, T0, 1, [], [])  # nothing to do
    assert writer.last_msg_seq == 2
    # A bad record in the middle: like append() per record, the ones before it are appended.
    with pytest.raises(TypeError, match="must be bytes"):
        writer.append_batch(3, T0, 1, [3, 4, 5], [b"c", b"d", "e"])  # type: ignore[list-item]
    assert writer.last_msg_seq == 4
    with pytest.raises(ValueError, match="out of range"):
        writer.append_batch(5, T0, 1, array("q", [5, -6]), [b"e", b"f"])
    assert writer.last_msg_seq == 5
    with pytest.raises(ValueError, match="out of range"):
        writer.append_batch(6, T0, 70_000, [6], [b"f"])
    with pytest.raises(ValueError, match="too large"):
        writer.append_batch(6, T0, 1, [6, 7], [b"f", bytes(16 * 1024 * 1024 + 1)])
    assert writer.last_msg_seq == 6
    writer.append_batch(7, T0, 1, [7], [b"g"])
    writer.close()
    payloads = [record.payload for record in JournalReader(tmp_path).read()]
    assert payloads == [b"a", b"b", b"c", b"d", b"e", b"f", b"g"]
    with pytest.raises(Exception, match="closed"):
        writer.append_batch(8, T0, 1, [8], [b"h"])


def test_append_many_matches_append_and_stops_at_bad_records(tmp_path: Path) -> None:
    items = [
        Record(seq, T0 + seq * NS_PER_DAY // 700, seq % 3, seq * 10, payload(seq)) for seq in range(1, 1501)
    ]
    with JournalWriter(tmp_path / "one", SMALL) as one:
        for item in items:
            one.append(*item)
    with JournalWriter(tmp_path / "many", SMALL) as many:
        for start in range(0, len(items), 64):
            many.append_many(iter(items[start : start + 64]))  # any iterable
    assert files(tmp_path / "many") == files(tmp_path / "one")
    with JournalWriter(tmp_path / "bad", SMALL) as bad:
        with pytest.raises(TypeError, match="tuple"):
            bad.append_many([items[0], (2, T0, 1)])  # type: ignore[list-item]
        assert bad.last_msg_seq == 1
        with pytest.raises(SequenceError):
            bad.append_many([items[1], items[1]])
        assert bad.last_msg_seq == 2


# -- the adapter's journal plan and keeper --------------------------------------------------------


def test_the_plan_journals_each_msg_seq_once_and_the_keeper_writes_it(tmp_path: Path) -> None:
    plan = JournalPlan(source_stream=3, checkpoint_every=100, checkpoint_interval_s=5.0, now=0.0)
    planned = [
        plan.records(1, T0, array("q", [11, 12, 13]), [b"a", b"b", b"c"]),
        plan.records(4, T0, (14,), (b"d",)),
        # Renumbered backwards: numbers already journaled keep their first record.
        plan.records(3, T0, [23, 24, 25, 26], [b"x", b"y", b"e", b"f"]),
        plan.records(5, T0, [25], [b"z"]),
    ]
    assert planned[3] is None
    assert (plan.journaled, plan.skipped, plan.last_msg_seq, plan.last_source_seq) == (6, 3, 6, 26)
    assert "last_msg_seq=6, since_checkpoint=6, skipped=3" in repr(plan)
    config = AdapterConfig(
        feed="EQUITIES",
        channel="EQ1",
        channel_number=7,
        adapter=1,
        source_endpoint="tcp://127.0.0.1:1",
        source_stream="A-M",
        source_stream_number=3,
        line_endpoint="tcp://127.0.0.1:2",
        sync_endpoint="tcp://127.0.0.1:3",
        journal_dir=tmp_path,
        journal_fsync=FsyncPolicy.NONE,
    )
    core = AdapterCore(config.core(), make_engine(ConverterTable.load()), now=0.0)
    keeper = JournalKeeper(config)
    assert keeper.open(core)["records_rolled"] == 0
    for records in planned:
        if records is not None:
            keeper.append(records)
    keeper.close()
    records = list(JournalReader(tmp_path).read())
    assert [(r.msg_seq, r.source_stream, r.source_seq, r.payload) for r in records] == [
        (1, 3, 11, b"a"),
        (2, 3, 12, b"b"),
        (3, 3, 13, b"c"),
        (4, 3, 14, b"d"),
        (5, 3, 25, b"e"),
        (6, 3, 26, b"f"),
    ]


def test_a_checkpoint_is_due_by_count_or_time_and_only_at_the_journaled_position() -> None:
    plan = JournalPlan(source_stream=3, checkpoint_every=3, checkpoint_interval_s=5.0, now=0.0)
    assert plan.checkpoint(now=1.0, last_source_seq=0, symbols=dict) is None  # nothing journaled
    plan.records(1, T0, [11, 12], [b"a", b"b"])
    assert plan.checkpoint(now=1.0, last_source_seq=12, symbols=dict) is None  # 2 < 3, 1 s < 5 s
    assert plan.checkpoint(now=6.0, last_source_seq=13, symbols=dict) is None  # converted past the journal
    checkpoint = plan.checkpoint(now=6.0, last_source_seq=12, symbols=dict)
    assert checkpoint is not None and checkpoint.msg_seq == 2 and plan.checkpoints == 1
    plan.records(3, T0, [13, 14, 15], [b"c", b"d", b"e"])
    assert plan.checkpoint(now=6.1, last_source_seq=15, symbols=dict) is not None  # by count


def test_a_costly_checkpoint_spaces_the_next_ones_to_ten_times_its_cost() -> None:
    plan = JournalPlan(source_stream=3, checkpoint_every=3, checkpoint_interval_s=5.0, now=0.0)
    plan.records(1, T0, [11, 12, 13], [b"a", b"b", b"c"])
    assert plan.is_checkpoint_due(0.1) and plan.checkpoint(now=0.1, last_source_seq=13, symbols=dict)
    plan.note_cost(1.5)  # folding the state took 1.5 s of the loop
    plan.records(4, T0, [14, 15, 16, 17], [b"d", b"e", b"f", b"g"])  # due by count ...
    assert not plan.is_checkpoint_due(10.0)  # ... but not before 15 s after the last one
    assert plan.checkpoint(now=10.0, last_source_seq=17, symbols=dict) is None
    assert plan.is_checkpoint_due(15.2) and plan.checkpoint(now=15.2, last_source_seq=17, symbols=dict)
    plan.note_cost(0.01)  # cheap again: the configured pace comes back
    plan.records(8, T0, [18, 19, 20], [b"h", b"i", b"j"])
    assert plan.is_checkpoint_due(15.4)
