"""The C order table's layout: 20-byte records, 1/2 to 3/4 full, grown in place, lookups that stop early.

``test_orders_native.py`` holds the table to its Python reference op for op;
these tests hold it to the figures its module docstring
(``adapter/formats/itch50/_order_table.c``) and ``adapter/conversion/budget.py``
state: bytes held per live order, probes per lookup, and the way out when a
record cannot be placed (``_rebuild``). ``__sizeof__`` and ``probes`` are
counted by the table itself; nothing here reads a clock.
"""

from __future__ import annotations

import random

import pytest

from feedha.adapter.conversion import choice

pytestmark = pytest.mark.skipif(
    not choice.IS_NATIVE_ORDERS_BUILT, reason="adapter.conversion._orders is not built"
)

RECORD = 20
TAIL = 127  # slots past the last home (ORDER_TAIL)


def _table() -> object:
    from feedha.adapter.conversion import _orders

    return _orders.OrderTable()


def _refs(count: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return list({rng.getrandbits(64): None for _ in range(count)})


def test_a_live_order_costs_20_bytes_at_half_to_three_quarters_full_at_every_count() -> None:
    table = _table()
    seen = set()
    for count, ref in enumerate(_refs(120_000, 1), start=1):
        table.add(ref, count % 3000, 1 + count % 2, 1_000_000 + count % 400, 100)
        held = table.__sizeof__() - object.__sizeof__(table)
        slots = held // RECORD  # (the object's own fields are under one record)
        if count >= 1_000:
            assert count / slots <= 0.75 and count / (slots - TAIL) >= 0.5, (count, slots)
        seen.add(slots)
    assert len(seen) > 15  # it grew by half many times, never doubling
    assert table.__sizeof__() / len(table) < 41


def test_every_order_stays_found_through_growth_removals_and_reuse() -> None:
    table, live = _table(), {}
    rng = random.Random(2)
    for step in range(60_000):
        ref = rng.randrange(2**64) if rng.random() < 0.5 else rng.randrange(20_000)
        if ref in live and step % 3:
            table.remove(ref)
            del live[ref]
        else:
            order = (rng.randrange(2**23), rng.choice((1, 2)), rng.randrange(2**32), rng.randrange(2**32))
            table.add(ref, *order)
            live[ref] = order
    assert len(table) == len(live)
    assert sorted(table.items()) == sorted((ref, *order) for ref, order in live.items())
    assert all(table.get(ref) == order for ref, order in live.items())


def test_an_absent_reference_is_known_absent_after_a_few_probes() -> None:
    # Records lie in their hashes' order: a lookup stops at the first record nearer its home.
    table = _table()
    refs = _refs(100_000, 3)
    for ref in refs:
        table.add(ref, 0, 1, 1, 1)
    before = table.probes
    held = set(refs)
    missing = [ref ^ 1 for ref in refs if ref ^ 1 not in held]
    assert not any(ref in table for ref in missing)
    assert (table.probes - before) / len(missing) < 4  # linear probing's miss at 3/4 full: 8.5


def test_a_rebuild_into_a_fresh_array_keeps_every_order_even_when_too_tight_to_place() -> None:
    # ot_grow's way out (never taken at 3/4 full): records placed one by one in a new array; one
    # just larger than the count is too tight (a run passes ORDER_MAX_DIST), so it doubles.
    table = _table()
    refs = _refs(50_000, 4)
    for index, ref in enumerate(refs):
        table.add(ref, index % 7, 1 + index % 2, index, index + 1)
    expected = sorted(table.items())
    for homes in (len(refs) + 1, 10 * len(refs), 200_000):
        table._rebuild(homes)
        held = table.__sizeof__() // RECORD - TAIL
        assert held >= (2 * homes if homes == len(refs) + 1 else homes), (homes, held)  # too tight: doubled
        assert sorted(table.items()) == expected
        assert all(ref in table for ref in refs[::97])
    for ref in refs[::2]:  # and it goes on as a table
        table.remove(ref)
    table.add(7, 1, 2, 3, 4)
    assert len(table) == len(refs) // 2 + 1 and table.get(7) == (1, 2, 3, 4)
    with pytest.raises(ValueError, match="more than the 25001 orders"):
        table._rebuild(len(table))


def test_a_symbol_or_side_past_the_records_fields_is_refused_by_name() -> None:
    table = _table()
    table.add(1, 2**23 - 1, 3, 2**32 - 1, 2**32 - 1)
    assert table.get(1) == (2**23 - 1, 3, 2**32 - 1, 2**32 - 1)
    with pytest.raises(OverflowError, match="symbol 8388608"):
        table.add(2, 2**23, 1, 1, 1)
    with pytest.raises(OverflowError, match="side 4"):
        table.add(2, 0, 4, 1, 1)
    assert len(table) == 1 and 2 not in table
