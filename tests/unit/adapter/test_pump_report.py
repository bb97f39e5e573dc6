"""The heartbeat report the source pump builds (adapter/_pump.c ``encode_report``) against protobuf's own.

The pump writes the active's ``StreamState`` report itself from the fixed parts the
core hands it (:func:`~adapter.core.syncbus.report_parts`) and the positions it reached.
Its bytes are held against protobuf's serializer (``encode_sync``: the upb library,
an independent implementation of the format) over generated messages, and against a
report written out by hand from the protobuf encoding rules.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.adapter.core import syncbus
from feedha.adapter.core.conflation import Boundary
from feedha.adapter.core.sync_types import Role

_pump = pytest.importorskip("feedha.adapter._pump", reason="the source pump's extension is not built")

U64 = st.one_of(
    st.sampled_from([0, 1, 127, 128, 16_383, 16_384, 2**63 - 1, 2**64 - 1]), st.integers(0, 2**64 - 1)
)
I64 = st.integers(0, 2**63 - 1)  # the times: ns since the epoch


def _positions(msg: syncbus.StreamState) -> tuple[int, ...]:
    return (msg.next_msg_seq, msg.next_source_seq, msg.last_source_seq, msg.last_msg_seq, msg.digest)


@st.composite
def stream_states(draw: st.DrawFn) -> syncbus.StreamState:
    sender = syncbus.Sender(
        draw(st.integers(0, 2**32 - 1)), draw(st.integers(0, 2**32 - 1)), draw(st.sampled_from(list(Role))),
        draw(I64),
    )  # fmt: skip
    positive = st.integers(1, 2**63 - 1)  # a boundary has no field at zero (decode_sync refuses one)
    boundaries = st.builds(Boundary, k=positive, msg_seq=positive, time_ns=positive, first_conf_seq=positive)
    return syncbus.StreamState(
        sender, draw(st.integers(0, 2**32 - 1)), draw(U64), draw(U64), draw(U64), draw(U64), draw(U64),
        session=draw(U64), session_after_source_seq=draw(U64), session_boundary_msg_seq=draw(U64),
        session_start_ns=draw(I64), proposed_session=draw(U64), proposed_after_source_seq=draw(U64),
        proposed_time_ns=draw(I64), proposed_reason=draw(st.integers(0, 3)),
        session_reason=draw(st.integers(0, 3)),
        purge_seq=draw(U64), conflate_proposed=tuple(draw(st.lists(boundaries, max_size=3))),
        conflate_committed_k=draw(U64),
    )  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(msg=stream_states(), channel=st.integers(0, 2**32 - 1))
def test_the_pump_s_report_is_what_protobuf_serializes(msg: syncbus.StreamState, channel: int) -> None:
    parts = syncbus.report_parts(msg, channel=channel)
    report = _pump.encode_report(*parts, msg.sender.send_time_ns, *_positions(msg))
    assert report == syncbus.encode_sync(msg, channel=channel)
    assert syncbus.decode_sync(report, channel=channel) == msg


def test_a_report_written_out_by_hand_from_the_encoding_rules() -> None:
    # SyncMessage{channel=1, adapter=2, term=3, role=ROLE_ACTIVE, send_time_ns=5,
    #   stream_state{source_stream=1, next_msg_seq=300, last_source_seq=299, digest=2**64-1, purge_seq=7}}
    # Each field is its key (field number << 3 | wire type) then its value: varints low 7 bits
    # first, the top bit set on all but the last byte; the body is its length, then its fields.
    body = bytes(
        [0x08, 0x01]  # 1 source_stream = 1
        + [0x10, 0xAC, 0x02]  # 2 next_msg_seq = 300
        + [0x20, 0xAB, 0x02]  # 4 last_source_seq = 299
        + [0x30] + [0xFF] * 9 + [0x01]  # 6 digest = 2**64 - 1 (ten bytes)
        + [0xA0, 0x01, 0x07]  # 20 purge_seq = 7 (a two-byte key)
    )  # fmt: skip
    by_hand = bytes([0x08, 0x01, 0x10, 0x02, 0x18, 0x03, 0x20, 0x01, 0x28, 0x05, 0x52, len(body)]) + body
    msg = syncbus.StreamState(syncbus.Sender(2, 3, Role.ACTIVE, 5), 1, 300, 0, 299, 0, 2**64 - 1, purge_seq=7)
    parts = syncbus.report_parts(msg, channel=1)
    assert _pump.encode_report(*parts, 5, *_positions(msg)) == by_hand


def test_encode_report_refuses_what_is_not_a_report() -> None:
    with pytest.raises(TypeError):
        _pump.encode_report("head", b"", b"", 1, 1, 1, 1, 1, 1)
    with pytest.raises(TypeError):
        _pump.encode_report(b"", b"", b"", 1, 1, 1, 1, 1)
