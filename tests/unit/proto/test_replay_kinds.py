"""The replay protocol's request kinds: range (1), delayed range (2), snapshot (3), time range (4)."""

from __future__ import annotations

import pytest

from feedha.proto.replay import (
    KIND_DELAYED_RANGE,
    KIND_RANGE,
    KIND_TIME_RANGE,
    REQUEST,
    REQUEST_TIME_SIZE,
    ReplayProtocolError,
    ReplayRequest,
    ReplayStatus,
    ReplyStatus,
    decode_request,
    decode_status,
    encode_request,
    encode_status,
    time_request,
)


def test_both_kinds_round_trip_and_the_kind_is_byte_3() -> None:
    for kind in (KIND_RANGE, KIND_DELAYED_RANGE):
        request = ReplayRequest(7, 9, 100, 200, kind)
        body = encode_request(request)
        assert body[3] == kind and decode_request(body) == request
    assert ReplayRequest(7, 9, 1, 2).kind == KIND_RANGE and not ReplayRequest(7, 9, 1, 2).is_delayed
    assert ReplayRequest(7, 9, 1, 2, KIND_DELAYED_RANGE).is_delayed


@pytest.mark.parametrize("kind", [0, 5, 255])
def test_an_unknown_kind_is_a_bad_request_that_names_the_ones_served(kind: int) -> None:
    body = REQUEST.pack(b"FR", 1, kind, 7, 0, 9, 1, 2)
    with pytest.raises(
        ReplayProtocolError,
        match=r"kind .*1 \(range\), 2 \(delayed range\), 3 \(snapshot\), 4 \(time range\)",
    ):
        decode_request(body)
    with pytest.raises(ValueError, match="unknown request kind"):
        encode_request(ReplayRequest(7, 9, 1, 2, kind))


def test_not_entitled_is_status_6() -> None:
    status = ReplyStatus(ReplayStatus.NOT_ENTITLED, 7, 0, 9, 1, 0, 1, 10, "delayed only")
    frame = encode_status(status)
    assert frame[3] == 6 and decode_status(frame) == status


def test_a_time_range_is_36_bytes_with_the_window_where_the_msg_seqs_go_and_after_seq_last() -> None:
    request = time_request(7, 9, 1_000, 2_000, after_seq=55)
    body = encode_request(request)
    assert len(body) == REQUEST_TIME_SIZE == 36 and body[3] == KIND_TIME_RANGE == 4
    assert body[12:20] == (1_000).to_bytes(8, "big") and body[28:36] == (55).to_bytes(8, "big")
    assert decode_request(body) == request and request.is_time_range
    with pytest.raises(ReplayProtocolError, match="end 1000 is not after its start 1000"):
        decode_request(body[:20] + body[12:20] + body[28:])  # end == start
    with pytest.raises(ReplayProtocolError, match="time range request is 36 bytes"):
        decode_request(REQUEST.pack(b"FR", 1, KIND_TIME_RANGE, 7, 0, 9, 1, 2))
    with pytest.raises(ReplayProtocolError, match=r"expected 28 \(36 for a time range"):
        decode_request(body + b"x")
    with pytest.raises(ValueError, match="not after its start"):
        encode_request(time_request(7, 9, 5, 5))


def test_end_is_status_7() -> None:
    status = ReplyStatus(ReplayStatus.END, 7, 2, 9, 11, 40, 1, 100)
    frame = encode_status(status)
    assert frame[3] == 7 and decode_status(frame) == status


def test_the_time_range_example_of_docs_wire_format_is_what_the_codec_writes() -> None:
    request = time_request(7, 9, 1_700_000_000 * 10**9, 1_700_000_010 * 10**9)
    documented = "4652 01 04 0007 0000 00000009 17979cfe362a0000 17979d008a35e400 0000000000000000"
    assert encode_request(request) == bytes.fromhex(documented.replace(" ", ""))
    status = ReplyStatus(ReplayStatus.OK, 7, 18, 9, 1, 6699, 1, 16384)
    documented = (
        "4652 01 00 0007 0012 00000009 0000000000000001 0000000000001a2b 0000000000000001 0000000000004000"
    )
    assert encode_status(status) == bytes.fromhex(documented.replace(" ", ""))
