"""adapter.journal._native (C) against adapter.journal._reference (Python), byte for byte."""

from __future__ import annotations

import importlib
import logging
import os
import platform
import sys
from array import array
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import crc32c as crc32c_package
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.adapter.journal import _native, _reference, choice, layout
from feedha.adapter.journal.format import MAX_PAYLOAD_BYTES, RECORD_HEADER_SIZE, Record, encode_record

IMPLEMENTATIONS = [pytest.param(_native, id="native"), pytest.param(_reference, id="reference")]
MAX_U64 = 2**64 - 1
T0 = 1_700_000_000_000_000_000

u64 = st.integers(0, MAX_U64)
u16 = st.integers(0, 2**16 - 1)
payloads_strategy = st.lists(st.binary(max_size=300), max_size=20)


def crc32c_bitwise(data: bytes, value: int = 0) -> int:
    # The definition, one bit at a time: independent of both implementations.
    crc = value ^ 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


# -- the build ----------------------------------------------------------------------------------


def test_the_extension_is_built_and_in_use() -> None:
    # A checkout without `python setup.py build_ext --inplace` fails here, not just runs slower.
    assert choice.IS_NATIVE_BUILT
    assert choice.FRAMING is _native
    assert choice.make_framing(prefer_native=False) is _reference


def test_hardware_crc_is_used_where_the_cpu_has_it() -> None:
    if platform.machine() != "x86_64" or not Path("/proc/cpuinfo").exists():
        pytest.skip("x86_64 Linux only")
    has_sse42 = " sse4_2" in Path("/proc/cpuinfo").read_text()
    assert _native.HARDWARE_CRC is has_sse42


def test_the_extension_was_built_from_the_layout() -> None:
    # The header is generated from layout.py; a build from an older header differs here.
    assert _native.RECORD_HEADER_SIZE == layout.RECORD_HEADER_SIZE == RECORD_HEADER_SIZE
    assert _native.MAX_PAYLOAD_BYTES == layout.MAX_PAYLOAD_BYTES == MAX_PAYLOAD_BYTES
    assert _native.CONTROL_FLAGS == layout.CONTROL_FLAGS
    assert [_native.STATUS_END, _native.STATUS_BAD_SEQ] == [0, len(layout.STATUSES) - 1]


def test_fallback_without_the_extension_logs_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "feedha.adapter.journal._native", None)  # makes the import fail
    try:
        with caplog.at_level(logging.WARNING, logger="feedha.adapter.journal.choice"):
            fallback = importlib.reload(choice)
        assert not fallback.IS_NATIVE_BUILT
        assert fallback.FRAMING is _reference
        assert "journal framing runs on the Python reference" in caplog.text
        assert "feedha.adapter.journal._native is not built" in caplog.text
    finally:
        monkeypatch.undo()
        importlib.reload(choice)
    assert choice.IS_NATIVE_BUILT and choice.FRAMING is _native


# -- CRC32C -------------------------------------------------------------------------------------


@pytest.mark.parametrize("crc", [_native.crc32c, _native.crc32c_software, _reference.crc32c, crc32c_bitwise])
def test_crc_vectors(crc: Callable[..., int]) -> None:
    assert crc(b"123456789") == 0xE3069283
    assert crc(b"") == 0
    assert crc(b"", 0xDEADBEEF) == 0xDEADBEEF
    assert crc(b"6789", crc(b"12345")) == 0xE3069283
    assert crc(bytes(32)) == 0x8A9136AA
    assert crc(b"\xff" * 32) == 0x62A8AB43


@settings(max_examples=300)
@given(data=st.binary(max_size=200), value=st.integers(0, 2**32 - 1), split=st.integers(0, 200))
def test_crc_matches_the_crc32c_package(data: bytes, value: int, split: int) -> None:
    expected = crc32c_package.crc32c(data, value)
    assert _native.crc32c(data, value) == expected
    assert _native.crc32c_software(data, value) == expected
    assert crc32c_bitwise(data, value) == expected
    head, tail = data[:split], data[split:]
    assert _native.crc32c(tail, _native.crc32c(head, value)) == expected
    assert _native.crc32c_software(tail, _native.crc32c_software(head, value)) == expected


def test_crc_of_large_and_unaligned_buffers() -> None:
    data = os.urandom(300_000)
    for start in range(9):
        view = memoryview(data)[start:]
        expected = crc32c_package.crc32c(view)
        assert _native.crc32c(view) == expected
        assert _native.crc32c_software(view) == expected
    assert _native.crc32c(bytearray(data)) == crc32c_package.crc32c(data)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_crc_rejects_bad_arguments(impl: ModuleType) -> None:
    with pytest.raises(ValueError, match="value"):
        impl.crc32c(b"x", -1)
    with pytest.raises(ValueError, match="value"):
        impl.crc32c(b"x", 2**32)
    with pytest.raises(TypeError):
        impl.crc32c("text")


# -- framing: byte equality ---------------------------------------------------------------------


def reference_bytes(first: int, time_ns: int, stream: int, seqs: list[int], payloads: list[bytes]) -> bytes:
    return b"".join(
        encode_record(Record(first + i, time_ns, stream, seq, payload))
        for i, (seq, payload) in enumerate(zip(seqs, payloads, strict=True))
    )


@settings(max_examples=200)
@given(
    first=st.integers(0, 2**63),
    time_ns=u64,
    stream=u16,
    flags=u16,
    payloads=payloads_strategy,
    data=st.data(),
)
def test_frame_records_is_the_reference(
    first: int, time_ns: int, stream: int, flags: int, payloads: list[bytes], data: st.DataObject
) -> None:
    seqs = data.draw(st.lists(u64, min_size=len(payloads), max_size=len(payloads)))
    native = _native.frame_records(first, time_ns, stream, seqs, payloads, flags)
    assert native == _reference.frame_records(first, time_ns, stream, seqs, payloads, flags)
    if flags == 0:
        assert native == reference_bytes(first, time_ns, stream, seqs, payloads)
    # The same bytes whatever form source_seqs and payloads take.
    assert _native.frame_records(first, time_ns, stream, array("Q", seqs), tuple(payloads), flags) == native
    if all(seq < 2**63 for seq in seqs):
        assert _native.frame_records(first, time_ns, stream, array("q", seqs), payloads, flags) == native
    as_bytearrays = [bytearray(p) for p in payloads]
    assert _native.frame_records(first, time_ns, stream, seqs, as_bytearrays, flags) == native


@settings(max_examples=200)
@given(
    payloads=payloads_strategy,
    offset=st.integers(0, 50),
    room=st.integers(0, 3000),
    start=st.integers(0, 20),
    stop=st.integers(-1, 20),
)
def test_frame_into_is_the_reference(
    payloads: list[bytes], offset: int, room: int, start: int, stop: int
) -> None:
    seqs = [1000 + i for i in range(len(payloads))]
    start = min(start, len(payloads) if stop < 0 else min(stop, len(payloads)))
    results = []
    for impl in (_native, _reference):
        buf = bytearray(b"\xee" * 4000)
        end, done = impl.frame_into(buf, offset, offset + room, 5, T0, 3, seqs, payloads, start, stop)
        results.append((bytes(buf), end, done))
    assert results[0] == results[1]
    framed, end, done = results[0]
    assert framed[offset:end] == reference_bytes(5 + start, T0, 3, seqs[start:done], payloads[start:done])
    assert end <= offset + room
    if done < (len(payloads) if stop < 0 else min(stop, len(payloads))):
        assert (
            end + RECORD_HEADER_SIZE + len(payloads[done]) > offset + room
        )  # stopped: the next one did not fit


def test_frame_into_a_memoryview_and_a_limit_past_the_end() -> None:
    buf = bytearray(100)
    end, done = _native.frame_into(memoryview(buf), 10, 10**9, 1, T0, 1, [7, 8], [b"a" * 10, b"b" * 10])
    assert (end, done) == (10 + 46, 1)  # the second record would pass len(buf)
    assert bytes(buf[10:end]) == reference_bytes(1, T0, 1, [7], [b"a" * 10])
    assert _native.frame_into(buf, 10, 0, 1, T0, 1, [7], [b""]) == (10, 0)  # limit before offset: nothing


@settings(max_examples=100)
@given(
    msg_seq=u64, time_ns=u64, stream=u16, seq=u64, payload=st.binary(max_size=300), offset=st.integers(0, 20)
)
def test_frame_one_into_is_the_reference(
    msg_seq: int, time_ns: int, stream: int, seq: int, payload: bytes, offset: int
) -> None:
    bufs = [bytearray(400), bytearray(400)]
    ends = [
        impl.frame_one_into(buf, offset, msg_seq, time_ns, stream, seq, payload)
        for impl, buf in zip((_native, _reference), bufs, strict=True)
    ]
    assert ends[0] == ends[1] == offset + RECORD_HEADER_SIZE + len(payload)
    assert bufs[0] == bufs[1]
    assert bufs[0][offset : ends[0]] == encode_record(Record(msg_seq, time_ns, stream, seq, payload))


@settings(max_examples=200)
@given(
    items=st.lists(
        st.tuples(st.integers(0, 40), st.integers(0, 5), u16, u64, st.binary(max_size=100)), max_size=15
    ),
    last_seq=st.integers(-1, 10),
    day_end=st.integers(0, 6),
    room=st.integers(0, 1500),
)
def test_frame_tuples_into_is_the_reference(
    items: list[tuple[int, int, int, int, bytes]], last_seq: int, day_end: int, room: int
) -> None:
    results = []
    for impl in (_native, _reference):
        buf = bytearray(1600)
        end, done, last = impl.frame_tuples_into(buf, 0, room, items, last_seq, day_end)
        results.append((bytes(buf), end, done, last))
    assert results[0] == results[1]
    framed, end, done, last = results[0]
    assert framed[:end] == b"".join(encode_record(Record(*item)) for item in items[:done])
    assert last == (items[done - 1][0] if done else last_seq)
    if done < len(items):
        seq, time_ns, _, _, payload = items[done]
        assert seq <= last or time_ns >= day_end or end + RECORD_HEADER_SIZE + len(payload) > room


def test_frame_tuples_into_takes_records_and_stops_on_the_range() -> None:
    records = [Record(i, T0, 1, i, b"x" * i) for i in range(1, 6)]
    buf = bytearray(1000)
    end, done, last = _native.frame_tuples_into(buf, 0, 1000, records, 0, MAX_U64, 1, 3)
    assert (done, last) == (3, 3)
    assert bytes(buf[:end]) == encode_record(records[1]) + encode_record(records[2])
    assert _native.frame_tuples_into(buf, 0, 1000, [], -1, MAX_U64) == (0, 0, -1)


# -- framing: errors ----------------------------------------------------------------------------


def frame(impl: ModuleType, **changes: Any) -> object:
    args: dict[str, Any] = {
        "first_msg_seq": 1,
        "time_ns": T0,
        "source_stream": 1,
        "source_seqs": [1, 2],
        "payloads": [b"a", b"b"],
    }
    args.update(changes)
    return impl.frame_records(**args)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"first_msg_seq": -1}, ValueError, "first_msg_seq out of range"),
        ({"first_msg_seq": MAX_U64}, ValueError, "msg_seq out of range"),
        ({"time_ns": -5}, ValueError, "time_ns out of range"),
        ({"time_ns": 2**64}, ValueError, "time_ns out of range"),
        ({"source_stream": 65536}, ValueError, "source_stream out of range"),
        ({"flags": -1}, ValueError, "flags out of range"),
        ({"source_seqs": [1, -2]}, ValueError, r"source_seqs\[1\] out of range"),
        ({"source_seqs": [1, 2**64]}, ValueError, r"source_seqs\[1\] out of range"),
        ({"source_seqs": [1]}, ValueError, "differ in length"),
        ({"payloads": [b"a", "b"]}, TypeError, r"payloads\[1\] must be bytes"),
        ({"payloads": [b"a", None]}, TypeError, r"payloads\[1\] must be bytes"),
        ({"payloads": [b"a", bytes(MAX_PAYLOAD_BYTES + 1)]}, ValueError, r"payloads\[1\] too large"),
        ({"source_seqs": [1, "2"]}, TypeError, "must be an int"),
        ({"time_ns": 1.5}, TypeError, "time_ns must be an int"),
    ],
)
def test_frame_records_rejects_bad_input(
    impl: ModuleType, changes: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        frame(impl, **changes)


def test_native_checks_int64_buffers() -> None:
    with pytest.raises(ValueError, match=r"source_seqs\[1\] out of range"):
        frame(_native, source_seqs=array("q", [1, -2]))
    with pytest.raises(TypeError, match="64-bit ints"):
        frame(_native, source_seqs=array("i", [1, 2]))
    with pytest.raises(TypeError, match="64-bit ints"):
        frame(_native, source_seqs=b"\x01" * 16)
    with pytest.raises(TypeError, match="sequence"):
        frame(_native, source_seqs=5)


def test_a_payload_may_be_the_largest_allowed() -> None:
    payload = bytes(MAX_PAYLOAD_BYTES)
    framed = _native.frame_records(1, T0, 1, [1], [payload])
    assert len(framed) == RECORD_HEADER_SIZE + MAX_PAYLOAD_BYTES
    assert framed == _reference.frame_records(1, T0, 1, [1], [payload])


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_frame_into_rejects_bad_windows_and_buffers(impl: ModuleType) -> None:
    with pytest.raises(ValueError, match="offset"):
        impl.frame_into(bytearray(10), 11, 10, 1, T0, 1, [1], [b""])
    with pytest.raises(ValueError, match="start"):
        impl.frame_into(bytearray(100), 0, 100, 1, T0, 1, [1], [b""], 2)
    with pytest.raises(ValueError, match="does not fit"):
        impl.frame_one_into(bytearray(40), 5, 1, T0, 1, 1, b"")
    with pytest.raises(TypeError, match="payloads"):
        impl.frame_one_into(bytearray(40), 0, 1, T0, 1, 1, "text")
    with pytest.raises(TypeError, match="tuple"):
        impl.frame_tuples_into(bytearray(100), 0, 100, [(1, 2, 3)], -1, MAX_U64)
    with pytest.raises(ValueError, match="source_stream"):
        impl.frame_tuples_into(bytearray(100), 0, 100, [(1, T0, 70_000, 1, b"")], -1, MAX_U64)


def test_native_rejects_read_only_buffers() -> None:
    with pytest.raises(TypeError):
        _native.frame_into(bytes(100), 0, 100, 1, T0, 1, [1], [b""])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _native.frame_one_into(bytes(100), 0, 1, T0, 1, 1, b"")  # type: ignore[arg-type]


# -- decoding -----------------------------------------------------------------------------------


def stream_of(count: int) -> tuple[list[Record], bytes]:
    records = [Record(10 + i, T0 + i, i % 3, 1000 + i, bytes([i % 256]) * (i * 7 % 90)) for i in range(count)]
    return records, b"".join(encode_record(record) for record in records)


@settings(max_examples=200, deadline=None)  # C against Python: the time per case says nothing
@given(
    count=st.integers(0, 12),
    cut=st.integers(0, 2000),
    flip=st.integers(-1, 2000),
    prev_seq=st.integers(-1, 15),
    max_records=st.integers(-1, 12),
)
def test_decode_records_is_the_reference(
    count: int, cut: int, flip: int, prev_seq: int, max_records: int
) -> None:
    records, data = stream_of(count)
    damaged = bytearray(data[: min(cut, len(data))])
    if 0 <= flip < len(damaged):
        damaged[flip] ^= 0x40
    native = _native.decode_records(bytes(damaged), 0, prev_seq, max_records, Record)
    assert native == _reference.decode_records(bytes(damaged), 0, prev_seq, max_records, Record)
    assert all(type(record) is Record for record in native[0])
    if flip < 0 and cut >= len(data) and prev_seq < 10 and max_records < 0:
        assert native == (records, len(data), 0)


def test_decode_records_statuses_and_inputs() -> None:
    records, data = stream_of(3)
    assert _native.decode_records(data, 0, -1, -1, Record) == (records, len(data), 0)
    assert _native.decode_records(bytearray(data), 0, -1, 2, Record) == (records[:2], 2 * 36 + 7, 0)
    assert _native.decode_records(memoryview(data)[:-1], 0, -1, -1, Record)[2] == 1  # incomplete
    assert _native.decode_records(data, 0, 10, -1, Record) == ([], 0, 4)  # msg_seq must increase
    bad_length = bytearray(data)
    bad_length[4:8] = (MAX_PAYLOAD_BYTES + 1).to_bytes(4, "little")
    assert _native.decode_records(bytes(bad_length), 0, -1, -1, Record) == ([], 0, 2)
    bad_crc = bytearray(data)
    bad_crc[-1] ^= 1
    assert _native.decode_records(bytes(bad_crc), 0, -1, -1, Record) == (records[:2], 2 * 36 + 7, 3)
    plain = _native.decode_records(data, 0, -1, -1, tuple)
    assert plain[0] == [tuple(record) for record in records]
    with pytest.raises(ValueError, match="pos"):
        _native.decode_records(data, len(data) + 1, -1, -1, Record)
    with pytest.raises(TypeError, match="record_type"):
        _native.decode_records(data, 0, -1, -1, list)  # type: ignore[type-var]


# -- group commit I/O ---------------------------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_write_out_writes_syncs_and_appends_the_index(impl: ModuleType, tmp_path: Path) -> None:
    data_fd = os.open(tmp_path / "data", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    index_fd = os.open(tmp_path / "index", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        buffer = bytearray(b"0123456789")
        impl.write_out(data_fd, [memoryview(buffer)[2:5], b"abc", bytearray(b"")], True, index_fd, b"IDX")
        impl.write_out(data_fd, [], True)
        impl.write_out(data_fd, [b"!"], False, -1, b"ignored")
    finally:
        os.close(data_fd)
        os.close(index_fd)
    assert (tmp_path / "data").read_bytes() == b"234abc!"
    assert (tmp_path / "index").read_bytes() == b"IDX"


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_write_out_raises_oserror(impl: ModuleType, tmp_path: Path) -> None:
    read_only = os.open(tmp_path / "file", os.O_RDONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError):
            impl.write_out(read_only, [b"x"], False)
    finally:
        os.close(read_only)
