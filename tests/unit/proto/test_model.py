"""The message model a route names: its version and a descriptor set that decodes blocks without our code."""

from __future__ import annotations

import pytest
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor_pb2 import FileDescriptorSet

from feedha.admin_server.config import ChannelConfig
from feedha.admin_server.errors import ConfigError
from feedha.proto import market_pb2
from feedha.proto.errors import ProtoError
from feedha.proto.model import MARKET_MODEL, SESSION_VALUES, major_of, model_named


def _update() -> market_pb2.MarketUpdate:
    update = market_pb2.MarketUpdate(symbol="", event_time_ns=5, publish_time_ns=7)
    symbol = update.symbols.add(symbol="ESZ6")
    symbol.book_changes.add(action=market_pb2.BOOK_ACTION_INSERTED, side=market_pb2.SIDE_BID, level=1,
                            price=101.5, size=3, orders=2)  # fmt: skip
    symbol.state.book.bids.add(price=101.5, size=3, orders=2)
    symbol.state.session.last = 101.25
    update.extra["open_interest"] = 12.0
    return update


def test_the_descriptor_set_alone_decodes_a_block_as_the_generated_code_does() -> None:
    files = FileDescriptorSet.FromString(MARKET_MODEL.descriptor_set())
    assert [f.name for f in files.file] == ["feedha/proto/market.proto"]  # it imports nothing
    pool = descriptor_pool.DescriptorPool()  # a fresh pool: nothing of feedha's is in it
    for file in files.file:
        pool.Add(file)
    decoded_class = message_factory.GetMessageClass(pool.FindMessageTypeByName(MARKET_MODEL.name))
    payload = _update().SerializeToString(deterministic=True)
    decoded = decoded_class.FromString(payload)
    assert decoded.symbols[0].book_changes[0].price == 101.5
    session = decoded.symbols[0].state.session
    assert session.HasField("last") and not session.HasField("vwap")
    assert decoded.SerializeToString(deterministic=True) == payload


def test_the_set_is_the_same_bytes_every_time() -> None:
    assert MARKET_MODEL.descriptor_set() == MARKET_MODEL.descriptor_set()


@pytest.mark.parametrize(("version", "major"), [("1.0", 1), ("1.1", 1), ("2.0", 2), ("10.3", 10)])
def test_major_of_reads_major_dot_minor(version: str, major: int) -> None:
    assert major_of(version) == major


@pytest.mark.parametrize("version", ["", "1", "1.", ".1", "v1.0", "1.0.0", "1.x", "1" * 40 + ".0"])
def test_major_of_refuses_anything_else(version: str) -> None:
    with pytest.raises(ProtoError, match="MAJOR.MINOR"):
        major_of(version)


def test_an_unknown_model_is_named_with_the_known_ones() -> None:
    with pytest.raises(ProtoError, match=r"unknown message model 'x.Y'.*feedha.v1.MarketUpdate"):
        model_named("x.Y")


def test_the_admin_config_refuses_a_channel_of_an_unknown_model() -> None:
    with pytest.raises(ConfigError, match="EQ-A-M: unknown message_model 'acme.Quote'"):
        ChannelConfig(feed="EQ", name="EQ-A-M", number=1, source_stream="A-M", first_letter="A",
                      last_letter="M", message_model="acme.Quote")  # fmt: skip


def test_the_session_values_are_market_protos_optional_fields_in_number_order() -> None:
    fields = market_pb2.SessionValues.DESCRIPTOR.fields
    optional = [f for f in fields if f.has_presence]  # proto3 ``optional``: may be unset
    assert tuple(f.name for f in optional) == SESSION_VALUES
    assert [f.number for f in optional] == list(range(1, len(SESSION_VALUES) + 1))  # fix44_wire's tags
