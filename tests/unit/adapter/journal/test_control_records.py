"""Control records (purges): written beside the messages, skipped by readers of messages, kept by recovery."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.adapter.core.purge import PURGE_RECORD_FLAGS
from feedha.adapter.journal import JournalConfig, JournalReader, JournalWriter, _native, _reference
from feedha.adapter.journal.format import (
    CONTROL_FLAGS,
    FLAG_PURGE,
    RECORD_HEADER_SIZE,
    Record,
    decode_record,
    decode_records,
)
from feedha.adapter.journal.segment import list_segments, load_index, scan_segment
from feedha.adapter.journal.verify import verify_journal

T0 = 1_790_000_000_000_000_000


def _frame(msg_seq: int, payload: bytes, flags: int = 0, *, time_ns: int = T0, source_seq: int = 7) -> bytes:
    stream = 0 if flags else 1
    return _native.frame_records(msg_seq, time_ns, stream, (0 if flags else source_seq,), (payload,), flags)


def test_the_core_and_the_journal_agree_on_the_purge_flag() -> None:
    assert FLAG_PURGE == PURGE_RECORD_FLAGS == CONTROL_FLAGS & FLAG_PURGE == _native.CONTROL_FLAGS


# A journal as a list of items: ("m", payload) a message (next msg_seq), ("c", payload) a control record.
items_strategy = st.lists(st.tuples(st.sampled_from("mc"), st.binary(max_size=40)), max_size=30)


@settings(max_examples=200, deadline=None)
@given(items=items_strategy, cut=st.integers(0, 2000))
def test_native_and_reference_decode_controls_alike(items: list[tuple[str, bytes]], cut: int) -> None:
    data, seq = b"", 10
    for kind, payload in items:
        if kind == "m":
            seq += 1
            data += _frame(seq, payload)
        else:
            data += _frame(seq, payload, FLAG_PURGE)  # names the last message before it
    data = data[: min(cut, len(data))] if cut < len(data) else data
    results = []
    for module in (_native, _reference):
        controls: list[tuple[int, int, Record]] = []
        records, end, status = module.decode_records(data, 0, 10, -1, Record, controls)
        skipped = module.decode_records(data, 0, 10, -1, Record)
        assert skipped == (records, end, status)  # without a list, controls are skipped, nothing else differs
        results.append((records, end, status, controls))
    assert results[0] == results[1]
    records, _end, _status, controls = results[0]
    assert [r.msg_seq for r in records] == list(range(11, 11 + len(records)))
    for before, flags, control in controls:
        assert flags == FLAG_PURGE and control.source_stream == 0
        assert control.msg_seq == (records[before - 1].msg_seq if before else 10)


def test_a_control_record_may_not_go_back_and_a_message_may_not_repeat() -> None:
    data = _frame(5, b"a") + _frame(4, b"p", FLAG_PURGE)
    assert decode_records(data).status.value == "bad_seq"
    repeat = _frame(5, b"a") + _frame(5, b"p", FLAG_PURGE) + _frame(5, b"b")
    result = decode_records(repeat, with_controls=True)
    assert result.status.value == "bad_seq" and len(result.records) == 1 and len(result.controls) == 1


def test_decode_record_and_max_records_count_messages_only() -> None:
    data = _frame(0, b"p0", FLAG_PURGE) + _frame(1, b"m1") + _frame(1, b"p1", FLAG_PURGE) + _frame(2, b"m2")
    record, end = decode_record(data) or (None, 0)
    assert record is not None and record.msg_seq == 1 and end == 2 * RECORD_HEADER_SIZE + 4
    result = decode_records(data, max_records=1, with_controls=True)
    assert [r.msg_seq for r in result.records] == [1] and len(result.controls) == 1


def _journal(path: Path, **config: int) -> JournalWriter:
    return JournalWriter(path, JournalConfig(**config))  # type: ignore[arg-type]


def test_writer_reader_recovery_and_verify_with_purge_records(tmp_path: Path) -> None:
    with _journal(tmp_path, index_interval_bytes=256) as writer:
        writer.append_control(FLAG_PURGE, T0, b"before any message")  # an empty journal: starts a segment
        for seq in range(1, 201):
            writer.append(seq, T0 + seq, 1, 1000 + seq, b"x" * 50)
            if seq % 40 == 0:
                writer.append_control(FLAG_PURGE, T0 + seq, b"purge after %d" % seq)
    reader = JournalReader(tmp_path)
    assert [r.msg_seq for r in reader.read()] == list(range(1, 201))  # messages only
    controls: list = []
    assert [r.msg_seq for r in reader.read(121, 161, controls=controls)] == list(range(121, 162))
    assert [(c.after_seq, c.payload) for c in controls] == [(160, b"purge after 160")]
    everything: list = []
    list(reader.read(controls=everything))
    assert [c.after_seq for c in everything] == [0, 40, 80, 120, 160, 200]
    (segment,) = list_segments(tmp_path)
    assert segment.first_seq == 1
    index = load_index(segment)
    assert index is not None and len(index.seqs) > 5
    for seq, offset in index.entries():  # every entry points at the message it names
        with open(segment.path, "rb") as file:
            found = decode_record(os.pread(file.fileno(), 4096, offset))
        assert found is not None and found[0].msg_seq == seq
    scan = scan_segment(segment.path, start=32, prev_seq=0, index_interval_bytes=256)
    assert (scan.records, scan.controls, scan.status.value) == (200, 6, "end")
    report = verify_journal(tmp_path)
    assert report.is_ok and report.records == 200 and report.purges == 6
    with _journal(tmp_path) as writer:  # recovery keeps everything
        assert writer.last_msg_seq == 200 and writer.recovery_report.is_clean
        writer.append(201, T0 + 201, 1, 1201, b"y")
    assert [r.msg_seq for r in JournalReader(tmp_path).read(200)] == [200, 201]


def test_a_torn_purge_record_is_cut_like_a_torn_message(tmp_path: Path) -> None:
    with _journal(tmp_path) as writer:
        for seq in range(1, 11):
            writer.append(seq, T0, 1, seq, b"m")
        writer.append_control(FLAG_PURGE, T0, b"a purge record cut short by a crash")
    (segment,) = list_segments(tmp_path)
    with open(segment.path, "r+b") as file:
        file.truncate(segment.size - 5)
    with _journal(tmp_path) as writer:
        assert writer.last_msg_seq == 10 and writer.recovery_report.reason == "incomplete"
    controls: list = []
    assert len(list(JournalReader(tmp_path).read(controls=controls))) == 10 and controls == []


def test_append_control_refuses_a_message_s_flags(tmp_path: Path) -> None:
    with _journal(tmp_path) as writer, pytest.raises(ValueError, match="not a control record"):
        writer.append_control(0x0002, T0, b"")


def test_seek_time_finds_the_first_message_at_or_after_a_time(tmp_path: Path) -> None:
    with _journal(tmp_path, segment_bytes=4096) as writer:
        for seq in range(1, 301):
            writer.append(seq, T0 + seq * 1000, 1, seq, b"z" * 40)
    assert len(list_segments(tmp_path)) > 3
    reader = JournalReader(tmp_path)
    assert reader.seek_time(0) == 1
    assert reader.seek_time(T0 + 150 * 1000) == 150
    assert reader.seek_time(T0 + 150 * 1000 + 1) == 151
    assert reader.seek_time(T0 + 10**12) == 301  # after the last: last + 1
    empty = tmp_path / "empty"
    empty.mkdir()
    assert JournalReader(empty).seek_time(T0) == 0  # nothing written: start at the beginning


def test_a_tail_polls_what_was_written_since(tmp_path: Path) -> None:
    with _journal(tmp_path) as writer:
        tail = JournalReader(tmp_path).tail(5)
        assert tail.poll() == ([], True)
        for seq in range(1, 11):
            writer.append(seq, T0, 1, seq, b"t")
        writer.flush()
        records, at_end = tail.poll()
        assert [r.msg_seq for r in records] == list(range(5, 11)) and at_end and tail.next_seq == 11
        writer.append_control(FLAG_PURGE, T0, b"p")
        writer.append(11, T0, 1, 11, b"t")
        writer.flush()
        assert [r.msg_seq for r in tail.poll()[0]] == [11]
        tail.close()
