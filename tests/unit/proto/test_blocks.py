"""proto.blocks: the one reader of the two block shapes (docs/wire-format.md)."""

from __future__ import annotations

from feedha.proto import market_pb2
from feedha.proto.blocks import block_symbols, block_wanted, is_several, names_wanted, symbol_states


def _one() -> market_pb2.MarketUpdate:
    update = market_pb2.MarketUpdate(symbol="AAA")
    update.state.bid = 1.5
    return update


def _several() -> market_pb2.MarketUpdate:
    update = market_pb2.MarketUpdate()
    for name, bid in (("ESZ6", 1.0), ("NQZ6", 2.0)):
        each = update.symbols.add(symbol=name)
        each.state.bid = bid
    return update


def test_a_block_of_one_symbol_names_it_with_its_state() -> None:
    update = market_pb2.MarketUpdate.FromString(_one().SerializeToString())
    assert not is_several(update)
    assert list(block_symbols(update)) == ["AAA"]
    assert [(name, state.bid) for name, state in symbol_states(update)] == [("AAA", 1.5)]


def test_a_block_of_several_symbols_names_each_in_its_order() -> None:
    update = market_pb2.MarketUpdate.FromString(_several().SerializeToString())
    assert is_several(update)
    assert list(block_symbols(update)) == ["ESZ6", "NQZ6"]
    assert [(name, state.bid) for name, state in symbol_states(update)] == [("ESZ6", 1.0), ("NQZ6", 2.0)]


def test_one_wanted_symbol_of_several_is_enough() -> None:
    assert block_wanted(_several(), {"NQZ6"}.__contains__)
    assert not block_wanted(_several(), {"AAA"}.__contains__)
    assert block_wanted(_one(), {"AAA"}.__contains__)
    assert names_wanted("", ["ESZ6", "NQZ6"], {"ESZ6"}.__contains__)
    assert not names_wanted("AAA", ["ESZ6"], {"ESZ6"}.__contains__)  # a symbol names the block alone
