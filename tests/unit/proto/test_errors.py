"""proto's decoders share one error base and keep their messages and attributes."""

from __future__ import annotations

import pytest

from feedha.proto import fix, replay, wire
from feedha.proto.errors import ProtoError


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (wire.WireError, "bad packet (magic): x"),
        (replay.ReplayProtocolError, "bad replay frame (magic): x"),
        (fix.FixError, "bad FIX message (magic): x"),
    ],
)
def test_decoder_errors_derive_from_proto_error(cls: type[ProtoError], message: str) -> None:
    exc = cls("magic", "x")
    assert isinstance(exc, ProtoError) and isinstance(exc, ValueError)
    assert str(exc) == message
    assert exc.reason == "magic"


def test_decoders_raise_them() -> None:
    with pytest.raises(ProtoError) as info:
        wire.decode_header(b"short")
    assert info.value.reason == "truncated"
    with pytest.raises(ProtoError):
        replay.decode_request(b"short")
    with pytest.raises(ProtoError):
        fix.parse_timestamp(b"not a time")
