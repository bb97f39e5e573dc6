"""Price levels in O(log n): a run of new best (or worst) prices never shifts a whole side.

The C sides (``_orders.SideLevels`` for itch50, ``BookTable``'s for fix44) are balanced trees
(``adapter/conversion/_level_tree.h``) that count the nodes every operation visits (``steps``,
``level_steps``); the tests assert on those counts and on the tree's height, never on time,
and compare what the sides show with the Python reference's. Where the sides were sorted
arrays, a run of n new best prices moved n^2 / 2 levels.
"""

from __future__ import annotations

import math
import random

import pytest

from feedha.adapter.conversion import choice
from feedha.adapter.formats.fix44.engine import Fix44Engine
from tests.unit.adapter.test_fix44_run import Played, _x, convert

NATIVE = choice.make_order_store()
REFERENCE = choice.make_order_store(prefer_native=False)
needs_native = pytest.mark.skipif(not NATIVE.is_native, reason="adapter.conversion._orders is not built")


def _most_steps(count: int) -> float:
    # A search and a link (or an unlink), each at most one path of an AVL tree: 1.44 log2(n + 2).
    return 2 * 1.45 * math.log2(count + 2) + 4


@needs_native
@pytest.mark.parametrize("is_bid", [True, False])
@pytest.mark.parametrize("order", ["best", "worst", "outward", "shuffled"])
def test_a_run_of_new_prices_costs_a_path_of_the_tree_each(is_bid: bool, order: str) -> None:
    count = 60_000
    levels = NATIVE.levels(is_bid=is_bid)
    improving = range(1, count + 1) if is_bid else range(count, 0, -1)  # each price the new best
    prices = {
        "best": list(improving),
        "worst": list(reversed(improving)),
        "outward": [count // 2 + ((k + 1) // 2 if k % 2 else -(k // 2)) for k in range(count)],
        "shuffled": random.Random(3).sample(range(1, count + 1), count),
    }[order]
    for price in prices:
        levels.move(price, 100, 1)
    assert len(levels) == count
    assert levels.height <= 1.4405 * math.log2(count + 2)
    assert levels.steps <= count * _most_steps(count), levels.steps / count  # a sorted array: 1.8e9 moves
    best = sorted(prices, reverse=is_bid)[:5]
    assert levels.best(5) == [(price, 100, 1) for price in best]
    before = levels.steps
    for price in sorted(prices, reverse=is_bid):  # and taken off from the best: the same
        levels.move(price, -100, -1)
    assert len(levels) == 0 and levels.best(5) == [] and levels.height == 0
    assert levels.steps - before <= count * _most_steps(count)


@needs_native
def test_many_prices_come_and_go_as_the_reference_shows_them() -> None:
    rng = random.Random(5)
    native, reference = NATIVE.levels(is_bid=True), REFERENCE.levels(is_bid=True)
    for step in range(30_000):
        price = rng.randrange(1, 5_000)
        orders = rng.choice((1, 1, 1, -1, -1, -2, 0))
        shares = rng.randrange(-200, 300)
        native.move(price, shares, orders)
        reference.move(price, shares, orders)
        if step % 997 == 0:
            moves = {
                rng.randrange(1, 5_000): (rng.randrange(-50, 50), rng.choice((-1, 0, 1))) for _ in range(2)
            }
            assert native.best(12) == reference.best(12)
            assert native.best(12, moves) == reference.best(12, moves)
    assert len(native) == len(reference.keys) and native.best(10**6) == reference.best(10**6)
    assert native.height <= 1.4405 * math.log2(len(native) + 2)


def _new_best_bids(count: int, *, start_seq: int = 1) -> bytes:
    return b"".join(
        _x(start_seq + k, ("0", "0", "AAA", f"{100 + k / 100:.2f}", str(1 + k % 7))) for k in range(count)
    )


@needs_native
def test_a_fix44_run_of_new_best_prices_costs_a_path_each_and_stays_in_c() -> None:
    count = 4_000  # book.MAX_PRICES is 5,000 a side
    engine = Fix44Engine(depth=10)
    played = Played()
    assert convert(engine, _new_best_bids(count), played) == {}
    assert played.from_runs == count  # every one in the C run
    table = engine.state.native  # type: ignore[attr-defined]
    # Each message: find the price (a path) and link it (a path), then the shown best ten.
    assert table.level_steps <= count * (_most_steps(count) + 30), table.level_steps / count
    book = engine.state.get("AAA").book  # type: ignore[union-attr]
    assert book is not None and len(book.bids) == count
    assert [level[0] for level in book.bids[:3]] == [139.99, 139.98, 139.97]
    assert engine.state.digest == engine.state.recompute_digest()


@needs_native
def test_a_run_of_new_best_and_deleted_prices_publishes_what_the_python_loop_publishes() -> None:
    adds = _new_best_bids(300)
    deletes = b"".join(  # the best first, then every other one from the worst
        _x(301 + k, ("2", "0", "AAA", f"{100 + price / 100:.2f}", ""))
        for k, price in enumerate([299, 298, *range(0, 296, 2)])
    )
    plays = []
    for native in (True, False):
        engine = Fix44Engine(depth=5, prefer_native=native)
        played = Played()
        assert convert(engine, adds + deletes, played) == {}
        plays.append((engine, played))
    (native_engine, native_played), (reference_engine, reference_played) = plays
    assert native_played.from_runs == 300 + 150 and reference_played.from_runs == 450
    assert native_played == reference_played
    assert native_engine.state.snapshot() == reference_engine.state.snapshot()


@needs_native
def test_a_side_gives_its_memory_back_as_it_shrinks() -> None:
    native, reference = NATIVE.levels(is_bid=False), REFERENCE.levels(is_bid=False)
    empty = native.__sizeof__()
    for price in range(1, 10_001):
        native.move(price, 10, 1)
        reference.move(price, 10, 1)
    grown = native.__sizeof__()
    assert grown > 10_000 * 40 and native.height > 0  # a tree
    sizes = {}
    for price in range(1, 10_001):  # from the best: what is left is shown right all along
        native.move(price, -10, -1)
        reference.move(price, -10, -1)
        left = 10_000 - price
        if left in (5_000, 100, 20, 0):
            assert native.best(5) == reference.best(5)
            sizes[left] = native.__sizeof__()
    assert sizes[100] < 100 * 48 * 4 + empty  # rebuilt at twice what it holds
    assert sizes[20] <= 64 * 24 + empty and native.height == 0  # flat again
    assert sizes[0] == empty


def _opening(count: int) -> bytes:
    return b"".join(_x(1 + k, ("0", "0", "AAA", str(100 + k), "1")) for k in range(count))


@needs_native
@pytest.mark.parametrize("count", [63, 64, 65, 200])
def test_a_message_stopped_after_it_changed_a_side_of_either_shape_leaves_it_as_it_was(count: int) -> None:
    # Deletes and inserts across the flat / tree boundary (64 levels), then the packet's room stops it.
    message = _x(
        count + 1,
        ("2", "0", "AAA", "100", ""),
        ("0", "0", "AAA", "99.5", "2"),
        ("0", "0", "AAA", "1000.5", "3"),
        ("2", "0", "AAA", str(100 + count // 2), ""),
        ("0", "0", "AAA", "150.25", "4"),
        ("1", "0", "AAA", "101", "9"),
    )
    engine = Fix44Engine(depth=5)
    assert convert(engine, _opening(count), Played()) == {}
    before, digest = engine.state.snapshot(), engine.state.digest
    assert engine.run_function()(message, 0, 0, 0, 1, 1 << 20, 1, 1, True, False)[:3] == (0, 0, 2)
    assert engine.state.snapshot() == before and engine.state.digest == digest
    reference = Fix44Engine(depth=5, prefer_native=False)
    assert convert(reference, _opening(count), Played()) == {}
    plays = [Played(), Played()]
    assert convert(engine, message, plays[0]) == convert(reference, message, plays[1]) == {}
    assert plays[0] == plays[1] and plays[0].from_runs == 1
    assert engine.state.snapshot() == reference.state.snapshot()
    assert engine.state.digest == reference.state.digest == engine.state.recompute_digest()
