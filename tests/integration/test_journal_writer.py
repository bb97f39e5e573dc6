"""The journal writer, readers, recovery and retention on real files."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedha.adapter.journal import (
    CorruptRecordError,
    FsyncPolicy,
    JournalClosedError,
    JournalConfig,
    JournalReader,
    JournalWriter,
    Record,
    SequenceError,
    recover,
)
from feedha.adapter.journal.format import NS_PER_DAY, RECORD_HEADER_SIZE, SEGMENT_HEADER_SIZE
from feedha.adapter.journal.segment import list_segments, load_index

T0 = 1_700_000_000_000_000_000  # 2023-11-14T22:13:20Z
SMALL = JournalConfig(segment_bytes=8192, buffer_bytes=4096, index_interval_bytes=512, fsync=FsyncPolicy.NONE)


def payload(seq: int) -> bytes:
    return seq.to_bytes(8, "little") * (seq % 13 + 1)


def record(seq: int) -> Record:
    return Record(seq, T0 + seq, seq % 3, seq * 10, payload(seq))


def write(directory: Path, seqs: range | list[int], config: JournalConfig = SMALL) -> JournalWriter:
    writer = JournalWriter(directory, config)
    for seq in seqs:
        writer.append(*record(seq))
    writer.close()
    return writer


def test_append_read_roll_and_index(tmp_path: Path) -> None:
    write(tmp_path, range(1, 2001))
    segments = list_segments(tmp_path)
    assert len(segments) > 5
    assert all(info.size <= SMALL.segment_bytes for info in segments)
    assert [info.name for info in segments] == sorted(info.name for info in segments)
    for info in segments:
        index = load_index(info)
        assert index is not None and len(index.seqs) >= info.size // 2000
    reader = JournalReader(tmp_path)
    assert list(reader.read()) == [record(s) for s in range(1, 2001)]
    assert reader.read_range(777, 781) == [record(s) for s in range(777, 782)]
    assert [r.msg_seq for r in reader.read(1999)] == [1999, 2000]
    assert reader.read_range(2001, 3000) == []


def test_gaps_allowed_backwards_rejected(tmp_path: Path) -> None:
    writer = JournalWriter(tmp_path, SMALL)
    writer.append(*record(100))
    writer.append(*record(105))
    with pytest.raises(SequenceError) as info:
        writer.append(*record(105))
    assert (info.value.last, info.value.got) == (105, 105)
    with pytest.raises(SequenceError):
        writer.append(*record(3))
    with pytest.raises(ValueError, match="out of range"):
        writer.append(106, T0, 70_000, 1, b"")
    writer.append(*record(107))
    writer.close()
    assert "closed" in repr(writer)
    with pytest.raises(JournalClosedError):
        writer.append(*record(200))
    reader = JournalReader(tmp_path)
    assert [r.msg_seq for r in reader.read()] == [100, 105, 107]
    assert [r.msg_seq for r in reader.read_range(101, 106)] == [105]


def test_rolls_at_utc_midnight(tmp_path: Path) -> None:
    midnight = (T0 // NS_PER_DAY + 1) * NS_PER_DAY
    writer = JournalWriter(tmp_path, SMALL)
    writer.append(1, midnight - 1, 0, 1, b"a")
    writer.append(2, midnight, 0, 2, b"b")
    writer.append(3, midnight - 5, 0, 3, b"c")  # a clock step back stays in the new day
    writer.close()
    assert [info.name for info in list_segments(tmp_path)] == [
        "20231114-00000000000000000001.fhj",
        "20231115-00000000000000000002.fhj",
    ]


def test_large_record_gets_its_own_buffer(tmp_path: Path) -> None:
    big = os.urandom(SMALL.segment_bytes * 2)
    writer = JournalWriter(tmp_path, SMALL)
    writer.append(1, T0, 0, 1, b"x")
    writer.append(2, T0, 0, 2, big)
    writer.append(3, T0, 0, 3, b"y")
    writer.close()
    assert [r.payload for r in JournalReader(tmp_path, chunk_bytes=4096).read()] == [b"x", big, b"y"]


def test_timeout_flush_without_flush_call(tmp_path: Path) -> None:
    writer = JournalWriter(tmp_path, JournalConfig(flush_interval_s=0.002))
    try:
        writer.append(*record(1))
        deadline = time.monotonic() + 10
        found: list[Record] = []
        while not found and time.monotonic() < deadline:
            found = JournalReader(tmp_path).read_range(1, 1)
        assert found == [record(1)]
    finally:
        writer.close()


def test_an_idle_flusher_sleeps_and_every_append_after_it_is_still_written_without_a_flush(
    tmp_path: Path,
) -> None:
    # The flusher raises `idle` and sleeps with nothing to write; the owner wakes it after
    # publishing. A lost wake-up would leave a record unwritten until the next append, so each
    # round appends exactly one record to a sleeping flusher, by each of the append paths.
    writer = JournalWriter(tmp_path, JournalConfig(flush_interval_s=0.002, buffer_bytes=4096))
    flusher = writer._flusher  # noqa: SLF001 (the mechanism under test)
    paths = (
        lambda seq: writer.append(*record(seq)),
        lambda seq: writer.append_batch(seq, T0 + seq, seq % 3, [seq * 10], [payload(seq)]),
        lambda seq: writer.append_many([record(seq)]),
    )
    try:
        for seq in range(1, 301):
            deadline = time.monotonic() + 10
            while not flusher.idle:
                assert time.monotonic() < deadline, f"the flusher never slept before record {seq}"
                time.sleep(0.0005)  # a poll with a deadline: nothing to wait on but the flag
            paths[seq % 3](seq)
            found: list[Record] = []
            while not found:
                assert time.monotonic() < deadline, f"record {seq} not written without a flush"
                found = JournalReader(tmp_path).read_range(seq, seq)
            assert found == [record(seq)]
    finally:
        writer.close()
    assert [r.msg_seq for r in JournalReader(tmp_path).read()] == list(range(1, 301))


@pytest.mark.parametrize("policy", list(FsyncPolicy))
def test_policies_and_explicit_flush(tmp_path: Path, policy: FsyncPolicy) -> None:
    writer = JournalWriter(tmp_path, JournalConfig(fsync=policy, flush_interval_s=10))
    for seq in range(1, 51):
        writer.append(*record(seq))
    writer.flush()
    assert [r.msg_seq for r in JournalReader(tmp_path).read()] == list(range(1, 51))
    writer.close()


def test_another_thread_has_the_buffer_written_and_the_owner_never_waits_for_it(tmp_path: Path) -> None:
    # The replay service's way to what the writer buffers (adapter.persistence): the flusher
    # writes it; the owner's thread (here the test's) goes on appending and never flushes.
    writer = JournalWriter(tmp_path, JournalConfig(fsync=FsyncPolicy.NONE, flush_interval_s=10))
    try:
        for seq in range(1, 101):
            writer.append(seq, T0 + seq, 0, seq, payload(seq))
        assert len(list(JournalReader(tmp_path).read())) < 100  # buffered: a reader does not see it yet
        done: list[bool] = []
        reader = threading.Thread(target=lambda: done.append(writer.write_soon(timeout=5.0)))
        reader.start()
        reader.join(timeout=10)
        assert done == [True]
        assert [r.msg_seq for r in JournalReader(tmp_path).read()] == list(range(1, 101))
        writer.append(101, T0 + 101, 0, 101, payload(101))  # the owner carries on as before
    finally:
        writer.close()
    assert not writer.write_soon(timeout=1.0)  # closed: nothing to ask, no wait
    assert JournalReader(tmp_path).read().__next__().msg_seq == 1


def test_reopen_continues_the_last_segment(tmp_path: Path) -> None:
    write(tmp_path, range(1, 11))
    writer = JournalWriter(tmp_path, SMALL)
    assert writer.last_msg_seq == 10 and writer.recovery_report.is_clean
    with pytest.raises(SequenceError):
        writer.append(*record(10))
    for seq in range(11, 21):
        writer.append(*record(seq))
    writer.close()
    assert len(list_segments(tmp_path)) == 1
    assert list(JournalReader(tmp_path).read()) == [record(s) for s in range(1, 21)]


def test_checkpoint_roll_forward_and_fallback(tmp_path: Path) -> None:
    writer = JournalWriter(tmp_path, SMALL)
    assert writer.latest_checkpoint() is None
    for seq in range(1, 501):
        writer.append(*record(seq))
    first = writer.write_checkpoint(450, b"state-450")
    for seq in range(501, 601):
        writer.append(*record(seq))
    second = writer.write_checkpoint(600, b"state-600")
    for seq in range(601, 651):
        writer.append(*record(seq))
    writer.close()
    assert second.generation == first.generation + 1
    reopened = JournalWriter(tmp_path, SMALL)
    report = reopened.recovery_report
    reopened.close()
    assert report.checkpoint_generation == second.generation
    assert report.records_kept == 50 and report.last_msg_seq == 650 and report.is_clean
    latest = reopened.latest_checkpoint()
    assert latest is not None and latest.state == b"state-600" and latest.msg_seq == 600
    # Damage the newest checkpoint: the older one is used and more is scanned.
    slot = tmp_path / ("checkpoint-a.fhc" if second.generation % 2 == 0 else "checkpoint-b.fhc")
    slot.write_bytes(slot.read_bytes()[:-1])
    again = recover(tmp_path, index_interval_bytes=512)
    assert again.report.checkpoint_generation == first.generation
    assert again.report.records_kept == 150 and again.last_seq == 650


def test_missing_or_corrupt_index_is_rebuilt(tmp_path: Path) -> None:
    write(tmp_path, range(1, 1001))
    first, second = list_segments(tmp_path)[:2]
    first.index_path.unlink()
    second.index_path.write_bytes(b"garbage")
    reader = JournalReader(tmp_path)
    assert reader.read_range(5, 6) == [record(5), record(6)]  # no index: scans
    JournalWriter(tmp_path, SMALL).close()
    assert load_index(first) is not None and load_index(second) is not None


def test_retention_deletes_old_segments_never_the_active(tmp_path: Path) -> None:
    config = JournalConfig(
        segment_bytes=8192, buffer_bytes=4096, fsync=FsyncPolicy.NONE, retention_max_bytes=20_000
    )
    writer = JournalWriter(tmp_path, config)
    for seq in range(1, 2001):
        writer.append(*record(seq))
    writer.flush()
    before = list_segments(tmp_path)
    deleted = writer.apply_retention(now_ns=time.time_ns())
    after = list_segments(tmp_path)
    assert deleted == [info.path for info in before[: len(deleted)]] and deleted
    assert sum(info.size for info in after) <= 20_000 + 8192
    assert after[-1].name == before[-1].name
    writer.append(*record(2001))
    writer.close()
    records = list(JournalReader(tmp_path).read())
    assert records[-1] == record(2001) and records[0].msg_seq == after[0].first_seq
    assert reopened_cleanly(tmp_path, config)


# -- torn and corrupt tails ----------------------------------------------------------------------

BASE_COUNT = 60


@pytest.fixture(scope="module")
def base_journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("base")
    write(directory, range(1, BASE_COUNT + 1), JournalConfig(fsync=FsyncPolicy.NONE))
    (segment,) = list_segments(directory)
    return segment.path


def record_ends() -> list[int]:
    ends, offset = [], SEGMENT_HEADER_SIZE
    for seq in range(1, BASE_COUNT + 1):
        offset += RECORD_HEADER_SIZE + len(payload(seq))
        ends.append(offset)
    return ends


def reopened_cleanly(directory: Path, config: JournalConfig) -> bool:
    """Whether a writer opened on ``directory`` found nothing to repair (it is closed again)."""
    with JournalWriter(directory, config) as writer:
        return writer.recovery_report.is_clean


def check_recovered(directory: Path, kept: int) -> None:
    writer = JournalWriter(directory, SMALL)
    assert writer.last_msg_seq == (kept if kept else -1)
    report = writer.recovery_report
    writer.append(*record(BASE_COUNT + 1))  # the writer continues after the cut
    writer.close()
    assert report.last_msg_seq == (kept if kept else -1)
    expected = [record(s) for s in range(1, kept + 1)] + [record(BASE_COUNT + 1)]
    assert list(JournalReader(directory).read()) == expected
    assert reopened_cleanly(directory, SMALL)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_truncated_tail_recovers_to_last_whole_record(base_journal: Path, data: st.DataObject) -> None:
    size = base_journal.stat().st_size
    cut = data.draw(st.integers(min_value=0, max_value=size), label="cut")
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        target = directory / base_journal.name
        shutil.copyfile(base_journal, target)
        os.truncate(target, cut)
        kept = sum(1 for end in record_ends() if end <= cut)
        check_recovered(directory, kept)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_bit_flip_recovers_to_record_before_it(base_journal: Path, data: st.DataObject) -> None:
    size = base_journal.stat().st_size
    position = data.draw(st.integers(min_value=0, max_value=size - 1), label="position")
    bit = data.draw(st.integers(min_value=0, max_value=7), label="bit")
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        target = directory / base_journal.name
        damaged = bytearray(base_journal.read_bytes())
        damaged[position] ^= 1 << bit
        target.write_bytes(bytes(damaged))
        kept = sum(1 for end in record_ends() if end <= position) if position >= SEGMENT_HEADER_SIZE else 0
        check_recovered(directory, kept)


def test_corrupt_middle_segment_drops_later_segments(tmp_path: Path) -> None:
    write(tmp_path, range(1, 1001))
    segments = list_segments(tmp_path)
    victim = segments[2]
    data = bytearray(victim.path.read_bytes())
    data[victim.size // 2] ^= 0xFF
    victim.path.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError):
        list(JournalReader(tmp_path).read())
    writer = JournalWriter(tmp_path, SMALL)
    writer.close()
    report = writer.recovery_report
    assert report.truncated_segment == victim.name and report.reason == "bad_crc"
    assert report.segments_removed == tuple(info.name for info in segments[3:])
    assert victim.first_seq <= report.last_msg_seq < segments[3].first_seq - 1
    remaining = list(JournalReader(tmp_path).read())
    assert [r.msg_seq for r in remaining] == list(range(1, report.last_msg_seq + 1))
    assert [info.name for info in list_segments(tmp_path)] == [info.name for info in segments[:3]]


def test_append_many_matches_append_across_rolls(tmp_path: Path) -> None:
    one, many = tmp_path / "one", tmp_path / "many"
    write(one, range(1, 1501))
    writer = JournalWriter(many, SMALL)
    items = [tuple(record(seq)) for seq in range(1, 1501)]
    for start in range(0, 1500, 64):
        writer.append_many(items[start : start + 64])  # type: ignore[arg-type]
    writer.close()
    assert [info.name for info in list_segments(one)] == [info.name for info in list_segments(many)]
    for a, b in zip(list_segments(one), list_segments(many), strict=True):
        assert a.path.read_bytes() == b.path.read_bytes()


def test_append_many_stops_at_a_bad_record(tmp_path: Path) -> None:
    writer = JournalWriter(tmp_path, SMALL)
    with pytest.raises(SequenceError):
        writer.append_many([record(1), record(2), record(2), record(3)])
    assert writer.last_msg_seq == 2
    with pytest.raises(ValueError, match="out of range"):
        writer.append_many([record(3), Record(4, T0, 70_000, 1, b"")])
    writer.append_many([record(4), record(5)])
    writer.close()
    assert list(JournalReader(tmp_path).read()) == [record(s) for s in (1, 2, 3, 4, 5)]
