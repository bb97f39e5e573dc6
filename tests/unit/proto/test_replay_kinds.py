"""The replay protocol's request kinds: range (1), delayed range (2), snapshot (3); others are refused."""

from __future__ import annotations

import pytest

from feedha.proto.replay import (
    KIND_DELAYED_RANGE,
    KIND_RANGE,
    REQUEST,
    ReplayProtocolError,
    ReplayRequest,
    ReplayStatus,
    ReplyStatus,
    decode_request,
    decode_status,
    encode_request,
    encode_status,
)


def test_both_kinds_round_trip_and_the_kind_is_byte_3() -> None:
    for kind in (KIND_RANGE, KIND_DELAYED_RANGE):
        request = ReplayRequest(7, 9, 100, 200, kind)
        body = encode_request(request)
        assert body[3] == kind and decode_request(body) == request
    assert ReplayRequest(7, 9, 1, 2).kind == KIND_RANGE and not ReplayRequest(7, 9, 1, 2).is_delayed
    assert ReplayRequest(7, 9, 1, 2, KIND_DELAYED_RANGE).is_delayed


@pytest.mark.parametrize("kind", [0, 4, 255])
def test_an_unknown_kind_is_a_bad_request_that_names_the_ones_served(kind: int) -> None:
    body = REQUEST.pack(b"FR", 1, kind, 7, 0, 9, 1, 2)
    with pytest.raises(ReplayProtocolError, match=r"kind .*1 \(range\), 2 \(delayed range\), 3 \(snapshot\)"):
        decode_request(body)
    with pytest.raises(ValueError, match="unknown request kind"):
        encode_request(ReplayRequest(7, 9, 1, 2, kind))


def test_not_entitled_is_status_6() -> None:
    status = ReplyStatus(ReplayStatus.NOT_ENTITLED, 7, 0, 9, 1, 0, 1, 10, "delayed only")
    frame = encode_status(status)
    assert frame[3] == 6 and decode_status(frame) == status
