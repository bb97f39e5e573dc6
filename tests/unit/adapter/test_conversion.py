"""Converter table loading, converter functions, Converter.parse and its error reasons, protobuf encoding."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from feedha.adapter.conversion import (
    SourceMessage,
    SourceUpdateEntry,
    SymbolValues,
    encode_update,
    from_proto,
    peek_source_seq,
    to_proto,
)
from feedha.adapter.errors import ConfigError, ConversionError
from feedha.adapter.formats.feedha_fix.parser import REASONS, Converter
from feedha.adapter.formats.feedha_fix.table import ConverterTable, to_double, to_int, to_str, to_timestamp_ns
from feedha.proto import market_pb2
from feedha.proto.fix import SourceEntry, encode_market_data, encode_message, split_messages

T0 = 1_700_000_000_123_456_789
BID, ASK, TRADE = market_pb2.ENTRY_TYPE_BID, market_pb2.ENTRY_TYPE_ASK, market_pb2.ENTRY_TYPE_TRADE


def body_of(message: bytes) -> bytes:
    bodies, malformed = split_messages(message)
    assert malformed == 0 and len(bodies) == 1
    return bodies[0]


def make_body(seq: int = 7, symbol: str = "IBM", entries: list[SourceEntry] | None = None) -> bytes:
    if entries is None:
        entries = [
            SourceEntry("0", "100.25", 300),
            SourceEntry("1", "100.75", 200),
            SourceEntry("2", "100.5", 10),
        ]
    return body_of(encode_market_data(source_seq=seq, symbol=symbol, event_time_ns=T0, entries=entries))


def raw_body(fields: list[tuple[int, str]]) -> bytes:
    return body_of(encode_message(fields))


def default_data() -> dict[str, Any]:
    text = (Path(__file__).parents[3] / "adapter" / "formats" / "feedha_fix" / "converters.yaml").read_text()
    data: dict[str, Any] = yaml.safe_load(text)
    return data


@pytest.fixture(scope="module")
def converter() -> Converter:
    return Converter(ConverterTable.load())


# --- table -------------------------------------------------------------------


def test_packaged_table_loads_with_expected_mapping() -> None:
    table = ConverterTable.load()
    assert table.message_type == "X"
    assert table.entry_types == {b"0": BID, b"1": ASK, b"2": TRADE}
    assert table.header["source_seq"].tag == 34
    assert table.entry_fields["price"].convert == "to_double"
    assert table.notional is not None and table.notional.types == frozenset({TRADE})
    assert [rule.target for rule in table.extra] == ["mid", "spread"]


def test_load_from_path_equals_packaged(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(default_data()))
    assert ConverterTable.load(path) == ConverterTable.load()


def _mutate(path: str, value: object) -> dict[str, Any]:
    data = copy.deepcopy(default_data())
    node = data
    keys = path.split(".")
    for key in keys[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return data


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        ("version", 2, "version"),
        ("message_type", "", "message_type"),
        ("header.symbol", _DELETE, "header.symbol"),
        ("header.bogus", {"tag": 1, "convert": "to_int"}, "header.bogus"),
        ("header.source_seq.convert", "to_double", "header.source_seq.convert"),
        ("entries.fields.price.convert", "to_float", "entries.fields.price.convert"),
        ("entries.fields.price.scale", -1, "entries.fields.price.scale"),
        ("entries.fields.price.scale", "x", "entries.fields.price.scale"),
        ("entries.fields.size.scale", 0.5, "entries.fields.size.scale"),
        ("header.symbol.scale", 10, "header.symbol.scale"),
        ("entries.fields.price.tag", "270", "entries.fields.price.tag"),
        ("entries.fields.size.tag", 270, "entries.fields.size.tag"),
        ("entries.types", {"0": "ENTRY_TYPE_BOGUS"}, "entries.types.0"),
        ("entries.types", {0: "ENTRY_TYPE_BID"}, "entries.types.0"),
        ("entries.types", {}, "entries.types"),
        ("entries.derived.notional", {"op": "pow", "args": ["price", "size"]}, "entries.derived.notional.op"),
        (
            "entries.derived.notional",
            {"op": "mul", "args": ["price", "qty"]},
            "entries.derived.notional.args",
        ),
        ("entries.derived.notional", {"op": "sub", "args": ["price"]}, "entries.derived.notional.args"),
        ("extra.mid", {"op": "mean", "args": ["bid", "__import__"]}, "extra.mid.args"),
        ("extra.bid", {"op": "mean", "args": ["bid"]}, "extra.bid"),
    ],
)
def test_bad_tables_are_rejected_naming_key_and_value(path: str, value: object, named: str) -> None:
    with pytest.raises(ConfigError) as info:
        ConverterTable.from_mapping(_mutate(path, value), source="t.yaml")
    assert f"{named}:" in str(info.value)
    assert "t.yaml" in str(info.value)


def test_bad_yaml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: [1\n")
    with pytest.raises(ConfigError, match="bad YAML"):
        ConverterTable.load(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        ConverterTable.load(tmp_path / "missing.yaml")


# --- converter functions ----------------------------------------------------------


def test_converter_functions() -> None:
    assert to_int(b"42") == 42 and to_int(b"-3") == -3
    assert to_int(b"9223372036854775807") == 2**63 - 1
    for bad in (b"", b"4.2", b"+4", b" 4", b"1_0", b"9223372036854775808", b"-"):
        with pytest.raises(ValueError):
            to_int(bad)
    assert to_double(b"101.25") == 101.25 and to_double(b"7") == 7.0
    for bad in (b"abc", b"nan", b"inf", b"", b"1e999"):
        with pytest.raises(ValueError):
            to_double(bad)
    assert to_str(b"IBM") == "IBM"
    with pytest.raises(ValueError):
        to_str(b"")
    with pytest.raises(ValueError):
        to_str(b"\xff")
    assert to_timestamp_ns(b"20231114-22:13:20.123456789") == 1_700_000_000_123_456_789
    with pytest.raises(ValueError):
        to_timestamp_ns(b"2023-11-14")


# --- parse ------------------------------------------------------------------------


def test_parse_default_table(converter: Converter) -> None:
    msg = converter.parse(make_body())
    assert msg == SourceMessage(
        7,
        "IBM",
        T0,
        (
            SourceUpdateEntry(BID, 100.25, 300, 0.0),
            SourceUpdateEntry(ASK, 100.75, 200, 0.0),
            SourceUpdateEntry(TRADE, 100.5, 10, 1005.0),
        ),
        (("mid", 100.5), ("spread", 0.5)),
    )
    assert converter.parse(make_body()) == msg  # deterministic, no hidden state


def test_extras_are_omitted_when_inputs_absent(converter: Converter) -> None:
    msg = converter.parse(make_body(entries=[SourceEntry("2", "10", 5)]))
    assert msg.extra == ()
    assert msg.entries == (SourceUpdateEntry(TRADE, 10.0, 5, 50.0),)


def test_scaling_renaming_and_custom_derived_values() -> None:
    data = default_data()
    data["entries"]["fields"]["price"] = {"tag": 270, "convert": "to_int", "scale": 0.0001}
    data["entries"]["derived"]["notional"] = {"op": "mul", "args": ["price", "size", 100]}
    data["extra"] = {
        "trade_value": {"op": "mul", "args": ["trade_price", "trade_size"]},
        "half": {"op": "div", "args": ["trade_value", 2]},
        "ratio": {"op": "div", "args": ["bid", "ask"]},
    }
    converter = Converter(ConverterTable.from_mapping(data))
    msg = converter.parse(make_body(entries=[SourceEntry("2", "1002500", 3), SourceEntry("1", "0", 1)]))
    (trade, ask) = msg.entries
    assert trade.price == pytest.approx(100.25) and trade.size == 3
    assert trade.notional == pytest.approx(100.25 * 3 * 100)
    assert ask.notional == 0.0  # notional only for trades
    assert dict(msg.extra) == pytest.approx({"trade_value": 300.75, "half": 150.375})  # no bid: no ratio


def test_division_by_zero_drops_the_extra() -> None:
    data = default_data()
    data["extra"] = {"ratio": {"op": "div", "args": ["bid", "ask"]}}
    converter = Converter(ConverterTable.from_mapping(data))
    msg = converter.parse(make_body(entries=[SourceEntry("0", "1", 1), SourceEntry("1", "0", 1)]))
    assert msg.extra == ()


@pytest.mark.parametrize("op", ["mean", "sub", "mul", "div"])
def test_an_extra_past_the_doubles_range_quarantines_its_message(op: str) -> None:
    # mean's fsum raised OverflowError out of the converter, and the adapter quarantined the
    # whole frame as internal_error; sub, mul and div gave inf, which the C fast path refuses.
    data = default_data()
    data["extra"] = {"x": {"op": op, "args": ["bid", "ask"]}}
    converter = Converter(ConverterTable.from_mapping(data))
    ask = "-1e308" if op == "sub" else "1e-308" if op == "div" else "1e308"
    header = [(35, "X"), (34, "1"), (55, "A"), (60, "20231114-22:13:20"), (268, "2")]
    bid = [(279, "0"), (269, "0"), (270, "1e308"), (271, "1")]
    body = raw_body([*header, *bid, (279, "0"), (269, "1"), (270, ask), (271, "1")])
    with pytest.raises(ConversionError) as info:
        converter.parse(body)
    assert info.value.reason == "overflow"


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ([(35, "X"), (34, "1"), (55, "A"), (60, "20231114-22:13:20"), (268, "0"), (999, "")], None),
        ([(35, "W"), (34, "1"), (55, "A"), (60, "20231114-22:13:20"), (268, "0")], "wrong_msg_type"),
        ([(34, "1"), (55, "A"), (60, "20231114-22:13:20"), (268, "0")], "wrong_msg_type"),
        ([(35, "X"), (55, "A"), (60, "20231114-22:13:20"), (268, "0")], "missing_seq"),
        ([(35, "X"), (34, "x1"), (55, "A"), (60, "20231114-22:13:20"), (268, "0")], "bad_seq"),
        ([(35, "X"), (34, "0"), (55, "A"), (60, "20231114-22:13:20"), (268, "0")], "bad_seq"),
        ([(35, "X"), (34, "-4"), (55, "A"), (60, "20231114-22:13:20"), (268, "0")], "bad_seq"),
        ([(35, "X"), (34, "1"), (60, "20231114-22:13:20"), (268, "0")], "missing_symbol"),
        ([(35, "X"), (34, "1"), (55, ""), (60, "20231114-22:13:20"), (268, "0")], "bad_symbol"),
        ([(35, "X"), (34, "1"), (55, "A"), (268, "0")], "missing_event_time"),
        ([(35, "X"), (34, "1"), (55, "A"), (60, "yesterday"), (268, "0")], "bad_event_time"),
        ([(35, "X"), (34, "1"), (55, "A"), (60, "20231114-22:13:20")], "missing_entry_count"),
        ([(35, "X"), (34, "1"), (55, "A"), (60, "20231114-22:13:20"), (268, "two")], "bad_entry_count"),
        ([(35, "X"), (34, "1"), (55, "A"), (60, "20231114-22:13:20"), (268, "2"), (279, "0"), (269, "2"),
          (270, "1"), (271, "1")], "entry_count_mismatch"),
        ([(35, "X"), (34, "1"), (55, "A"), (60, "20231114-22:13:20"), (268, "1"), (279, "0"),
          (270, "1"), (271, "1")], "missing_entry_type"),
        ([(35, "X"), (34, "1"), (55, "A"), (60, "20231114-22:13:20"), (268, "1"), (279, "0"), (269, "9"),
          (270, "1"), (271, "1")], "unknown_entry_type"),
        ([(35, "X"), (34, "1"), (55, "A"), (60, "20231114-22:13:20"), (268, "1"), (279, "0"), (269, "2"),
          (271, "1")], "missing_field"),
        ([(35, "X"), (34, "1"), (55, "A"), (60, "20231114-22:13:20"), (268, "1"), (279, "0"), (269, "2"),
          (270, "1,5"), (271, "1")], "bad_number"),
        ([(35, "X"), (34, "1"), (55, "A"), (60, "20231114-22:13:20"), (268, "1"), (279, "0"), (269, "2"),
          (270, "nan"), (271, "1")], "bad_number"),
        ([(35, "X"), (34, "1"), (55, "A"), (60, "20231114-22:13:20"), (268, "1"), (279, "0"), (269, "2"),
          (270, "1"), (271, "-1")], "bad_number"),
        ([(35, "X"), (34, "1"), (55, "A"), (60, "20231114-22:13:20"), (268, "1"), (279, "0"), (269, "2"),
          (270, "1"), (271, "1.5")], "bad_number"),
    ],
)  # fmt: skip
def test_every_conversion_error_reason(
    converter: Converter, fields: list[tuple[int, str]], reason: str | None
) -> None:
    body = raw_body(fields)
    if reason is None:  # the control case: unknown tags are ignored, zero entries are fine
        assert converter.parse(body).entries == ()
        return
    with pytest.raises(ConversionError) as info:
        converter.parse(body)
    assert info.value.reason == reason
    assert reason in REASONS


def test_field_without_equals_is_bad_field(converter: Converter) -> None:
    with pytest.raises(ConversionError) as info:
        converter.parse(make_body().replace(b"55=IBM", b"55IBM"))
    assert info.value.reason == "bad_field"


def test_every_reason_is_reachable() -> None:
    # The parametrized cases above plus bad_field cover REASONS exactly.
    covered = {
        "wrong_msg_type", "missing_seq", "bad_seq", "missing_symbol", "bad_symbol", "missing_event_time",
        "bad_event_time", "missing_entry_count", "bad_entry_count", "entry_count_mismatch",
        "missing_entry_type", "unknown_entry_type", "missing_field", "bad_number", "bad_field",
        "overflow",  # test_an_extra_past_the_doubles_range_quarantines_its_message
    }  # fmt: skip
    assert covered == REASONS


def test_fast_and_checked_paths_agree(converter: Converter) -> None:
    for seq in range(1, 40):
        entries = [SourceEntry(str(seq % 3), f"{seq * 1.25:.4f}", seq * 7) for _ in range(seq % 4)]
        body = make_body(seq=seq, symbol=f"S{seq}", entries=entries)
        fields = body.split(b"\x01")
        header: dict[bytes, bytes] = {}
        groups: list[dict[bytes, bytes]] = []
        current = header
        for part in fields:
            if part:
                tag, _sep, value = part.partition(b"=")
                if tag == b"279":
                    current = {}
                    groups.append(current)
                current[tag] = value
        assert converter._parse_fast(header, groups) == converter._parse_checked(header, groups)


def test_peek_source_seq() -> None:
    assert peek_source_seq(make_body(seq=123456)) == 123456
    assert peek_source_seq(b"34=9\x0135=X\x01") == 9
    assert peek_source_seq(b"35=X\x0134=77") == 77
    assert peek_source_seq(b"35=X\x01134=5\x0134=8\x01") == 8  # 134= is not 34=
    for body, reason in [
        (b"35=X\x0155=A\x01", "missing_seq"),
        (b"35=X\x0134=\x01", "bad_seq"),
        (b"35=X\x0134=0\x01", "bad_seq"),
        (b"35=X\x0134=012\x01", "bad_seq"),
        (b"35=X\x0134=-1\x01", "bad_seq"),
        (b"35=X\x0134=1a\x01", "bad_seq"),
    ]:
        with pytest.raises(ConversionError) as info:
            peek_source_seq(body)
        assert info.value.reason == reason, body


# --- protobuf --------------------------------------------------------------------


def test_to_proto_from_proto_round_trip() -> None:
    values = SymbolValues(1_000, 101.5, 99.25, 100.0, 100.125, 12, 99.9, 100.1, 100_125.0)
    state = to_proto(values)
    assert isinstance(state, market_pb2.SymbolState)
    assert state.vwap == 100.125 and state.volume == 1_000
    decoded = market_pb2.SymbolState.FromString(state.SerializeToString())
    assert from_proto(decoded) == values


def test_encode_update_decodes_back(converter: Converter) -> None:
    msg = converter.parse(make_body())
    values = SymbolValues(10, 100.5, 100.5, 100.5, 100.5, 1, 100.25, 100.75, 1005.0)
    update = market_pb2.MarketUpdate.FromString(encode_update(msg, values, publish_time_ns=T0 + 5))
    assert update.symbol == "IBM"
    assert update.event_time_ns == T0 and update.publish_time_ns == T0 + 5
    assert [(e.type, e.price, e.size, e.notional) for e in update.entries] == [tuple(e) for e in msg.entries]
    assert from_proto(update.state) == values
    assert dict(update.extra) == {"mid": 100.5, "spread": 0.5}
    assert not math.isnan(update.state.high)
