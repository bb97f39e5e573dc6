from __future__ import annotations

import pytest

from feedha.adapter.journal.errors import CorruptRecordError
from feedha.adapter.journal.format import (
    RECORD_HEADER_SIZE,
    SEGMENT_HEADER_SIZE,
    DecodeStatus,
    Record,
    RecordDecoder,
    SegmentHeader,
    decode_index,
    decode_record,
    decode_records,
    decode_segment_header,
    encode_index_entries,
    encode_index_header,
    encode_record,
    encode_segment_header,
    index_name,
    parse_segment_name,
    segment_name,
    utc_day,
)

T0 = 1_700_000_000_123_456_789


def make(seq: int, size: int = 10) -> Record:
    return Record(seq, T0 + seq, 7, 1000 + seq, bytes((seq + i) % 256 for i in range(size)))


RECORDS = [make(1, 0), make(2, 1), make(5, 300), make(6, 17)]
STREAM = b"".join(encode_record(r) for r in RECORDS)


def test_encode_decode_roundtrip() -> None:
    data = encode_record(RECORDS[2])
    assert len(data) == RECORD_HEADER_SIZE + 300
    assert decode_record(data) == (RECORDS[2], len(data))


def test_decode_records_whole_stream() -> None:
    result = decode_records(STREAM)
    assert result.records == RECORDS
    assert result.end == len(STREAM)
    assert result.status is DecodeStatus.END


def test_incremental_byte_by_byte() -> None:
    decoder = RecordDecoder()
    out = []
    for i in range(len(STREAM)):
        decoder.feed(STREAM[i : i + 1])
        out.extend(decoder)
    assert out == RECORDS
    assert decoder.buffered == 0


def test_trailing_partial_record_is_incomplete_not_corrupt() -> None:
    tail = encode_record(make(9, 50))
    for cut in (1, RECORD_HEADER_SIZE - 1, RECORD_HEADER_SIZE, len(tail) - 1):
        result = decode_records(STREAM + tail[:cut])
        assert result.records == RECORDS
        assert result.end == len(STREAM)
        assert result.status is DecodeStatus.INCOMPLETE
        decoder = RecordDecoder()
        decoder.feed(STREAM + tail[:cut])
        assert list(decoder) == RECORDS
        assert decoder.buffered == cut
        assert "buffered=" in repr(decoder)


@pytest.mark.parametrize("position", [0, 3, 4, 8, 20, 35, 36, 40])
def test_any_flipped_bit_is_detected(position: int) -> None:
    data = bytearray(encode_record(make(3, 20)))
    data[position] ^= 0x10
    result = decode_records(bytes(data))
    assert result.records == []
    assert result.is_corrupt or result.status is DecodeStatus.INCOMPLETE
    if position not in range(4, 8):  # a flipped length may just look incomplete
        with pytest.raises(CorruptRecordError):
            decode_record(bytes(data))


def test_sequence_must_increase() -> None:
    data = encode_record(make(5)) + encode_record(make(5))
    result = decode_records(data)
    assert [r.msg_seq for r in result.records] == [5]
    assert result.status is DecodeStatus.BAD_SEQ
    assert decode_records(encode_record(make(5)), prev_seq=5).status is DecodeStatus.BAD_SEQ
    decoder = RecordDecoder(prev_seq=9)
    decoder.feed(encode_record(make(5)))
    with pytest.raises(CorruptRecordError, match="bad_seq"):
        decoder.next_record()


def test_impossible_length_is_corrupt() -> None:
    data = bytearray(encode_record(make(1)))
    data[4:8] = (2**31).to_bytes(4, "little")
    assert decode_records(bytes(data)).status is DecodeStatus.BAD_LENGTH


def test_out_of_range_fields_raise_value_error() -> None:
    with pytest.raises(ValueError, match="out of range"):
        encode_record(Record(1, T0, 70000, 1, b""))


def test_segment_names_sort_and_parse() -> None:
    day = utc_day(T0)
    name = segment_name(day=day, first_seq=42)
    assert name == "20231114-00000000000000000042.fhj"
    assert parse_segment_name(name) == (day, 42)
    assert index_name(name) == "20231114-00000000000000000042.fhi"
    assert (
        segment_name(day=day, first_seq=9)
        < segment_name(day=day, first_seq=10)
        < segment_name(day=day + 1, first_seq=1)
    )
    for bad in ("x.fhj", "20231314-00000000000000000001.fhj", "20231114-1.fhj", name + ".tmp"):
        assert parse_segment_name(bad) is None


def test_segment_header_roundtrip_and_damage() -> None:
    header = SegmentHeader(first_seq=42, first_time_ns=T0)
    data = encode_segment_header(header)
    assert len(data) == SEGMENT_HEADER_SIZE
    assert decode_segment_header(data) == header
    for position in (0, 10, 12, 28):
        damaged = bytearray(data)
        damaged[position] ^= 1
        with pytest.raises(CorruptRecordError):
            decode_segment_header(bytes(damaged))
    with pytest.raises(CorruptRecordError, match="short"):
        decode_segment_header(data[:-1])


def test_index_file_roundtrip_torn_entry_and_checks() -> None:
    entries = [(10, 32), (50, 4000), (90, 9000)]
    data = encode_index_header(10) + encode_index_entries(entries)
    assert decode_index(data, first_seq=10, segment_size=10_000) == entries
    assert decode_index(data + b"\x01\x02", first_seq=10, segment_size=10_000) == entries  # torn append
    with pytest.raises(CorruptRecordError):
        decode_index(data, first_seq=11, segment_size=10_000)
    with pytest.raises(CorruptRecordError):
        decode_index(data, first_seq=10, segment_size=9000)  # offset past the segment end
    unordered = encode_index_header(10) + encode_index_entries([(50, 4000), (40, 5000)])
    with pytest.raises(CorruptRecordError):
        decode_index(unordered, first_seq=10, segment_size=10_000)
