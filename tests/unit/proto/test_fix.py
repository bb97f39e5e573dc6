"""The FIX-style source format: encode, split (whole, byte-cut, with garbage), parse."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from feedha.proto import fix

NS = 1_700_000_000_123_456_789


def message(seq: int) -> bytes:
    return fix.encode_market_data(
        source_seq=seq,
        symbol="IBM",
        event_time_ns=NS,
        entries=[fix.SourceEntry(fix.ENTRY_TRADE, "101.25", 300)],
    )


def test_encoded_message_has_length_and_checksum() -> None:
    m = message(7)
    assert m.startswith(b"8=FIX.4.4\x019=") and m.endswith(b"\x01")
    body_end = m.rindex(b"10=")
    assert int(m[body_end + 3 : body_end + 6]) == sum(m[:body_end]) % 256


def test_split_and_parse_round_trip() -> None:
    bodies, malformed = fix.split_messages(message(1) + message(2))
    assert malformed == 0 and len(bodies) == 2
    fields = dict(fix.parse_fields(bodies[1]))
    assert fields[fix.TAG_SEQ] == b"2" and fields[fix.TAG_SYMBOL] == b"IBM"
    assert fix.parse_timestamp(fields[fix.TAG_EVENT_TIME]) == NS


def test_malformed_stretches_cost_only_themselves() -> None:
    good = [message(i) for i in range(1, 4)]
    corrupt = bytearray(message(99))
    corrupt[-3] ^= 0x01  # wrong checksum digit
    payload = b"junk" + good[0] + bytes(corrupt) + good[1] + good[2][:-5] + b"8=FIXoops" + good[2]
    bodies, malformed = fix.split_messages(payload)
    seqs = [dict(fix.parse_fields(b))[fix.TAG_SEQ] for b in bodies]
    assert seqs == [b"1", b"2", b"3"]
    assert malformed == 4


@given(st.integers(0, 400))
def test_any_cut_yields_only_whole_messages(cut: int) -> None:
    payload = message(1) + message(2) + message(3)
    bodies, _malformed = fix.split_messages(payload[:cut])
    whole = [b for b in fix.split_messages(payload)[0]]
    assert bodies == whole[: len(bodies)]


def test_timestamp_round_trip() -> None:
    assert fix.parse_timestamp(fix.format_timestamp(NS).encode()) == NS
    assert fix.parse_timestamp(b"20231114-22:13:20.5") == 1_700_000_000_500_000_000


def test_market_data_is_the_tag_value_message_fix_describes() -> None:
    # The templates against the format written field by field, as the module docstring shows it.
    entries = [fix.SourceEntry(fix.ENTRY_BID, "99.5", 100), fix.SourceEntry(fix.ENTRY_OFFER, "100", 7)]
    got = fix.encode_market_data(
        source_seq=42, symbol="MSFT", event_time_ns=NS, entries=entries, sender="S", sending_time_ns=NS + 1
    )
    stamp = fix.format_timestamp(NS)
    fields: list[tuple[int, str | int | bytes]] = [
        (fix.TAG_MSG_TYPE, "X"),
        (fix.TAG_SENDER, "S"),
        (fix.TAG_SEQ, 42),
        (fix.TAG_SENDING_TIME, fix.format_timestamp(NS + 1)),
        (fix.TAG_SYMBOL, "MSFT"),
        (fix.TAG_EVENT_TIME, stamp),
        (fix.TAG_NO_ENTRIES, 2),
    ]
    for entry in entries:
        fields += [
            (fix.TAG_UPDATE_ACTION, "0"),
            (fix.TAG_ENTRY_TYPE, entry.entry_type),
            (fix.TAG_PRICE, entry.price),
            (fix.TAG_SIZE, entry.size),
        ]
    assert got == fix.encode_message(fields)
    assert fix.frame(b"35=0\x01") == b"8=FIX.4.4\x019=5\x0135=0\x0110=%03d\x01" % fix.checksum(
        b"8=FIX.4.4\x019=5\x0135=0\x01"
    )
    assert len(got) - got.rindex(b"10=") == fix.TRAILER_SIZE == 7
