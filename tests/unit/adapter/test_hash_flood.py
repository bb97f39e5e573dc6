"""The C tables keyed by input hash with SipHash-1-3 under a per-process key: no flood, no trace in output.

A flood set is built against the hash each table used before (an order reference's home
was splitmix64's finalizer, invertible; a feedha-fix symbol's slot was its FNV-1a): every
key of the set lands in one slot of the old table at every size, so n adds cost n^2/2
probes there. The tables now count the slots they look at (``probes``); the tests assert
on those counts, never on time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from feedha.adapter.conversion import choice
from feedha.bench.micro_itch50 import old_hash_flood

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(
    not choice.IS_NATIVE_ORDERS_BUILT, reason="adapter.conversion._orders is not built"
)

MASK = (1 << 64) - 1
_K2, _K3 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def _old_home(ref: int) -> int:
    # The order table's hash before SipHash (splitmix64's finalizer, unkeyed).
    x = ref
    x = ((x ^ (x >> 30)) * _K2) & MASK
    x = ((x ^ (x >> 27)) * _K3) & MASK
    return x ^ (x >> 31)


def _old_table_probes(refs: list[int]) -> int:
    # The old table, literally: linear probing from the old home, 3/4 full at most (as _orders.c was).
    cap, slots, probes = 64, [None] * 64, 0
    for ref in refs:
        if (sum(slot is not None for slot in slots) + 1) * 4 > cap * 3:
            old = [r for r in slots if r is not None]
            cap, slots = cap * 2, [None] * (cap * 2)
            for r in old:
                i = _old_home(r) & (cap - 1)
                while slots[i] is not None:
                    i, probes = (i + 1) & (cap - 1), probes + 1
                slots[i] = r
        i = _old_home(ref) & (cap - 1)
        probes += 1
        while slots[i] is not None:
            i, probes = (i + 1) & (cap - 1), probes + 1
        slots[i] = ref
    return probes


def test_the_flood_set_is_a_flood_for_the_old_hash() -> None:
    refs = old_hash_flood(400)
    assert len(set(refs)) == 400
    assert {_old_home(ref) & 0xFFFFFFFF for ref in refs} == {0}  # one home at every size up to 2**32
    assert _old_table_probes(refs) > 400 * 399 // 2  # quadratic: every add walks the whole run


def test_order_references_chosen_against_the_old_hash_cost_a_flat_number_of_probes() -> None:
    from feedha.adapter.conversion import _orders

    count = 40_000
    refs = old_hash_flood(count)
    table = _orders.OrderTable()
    first_half = 0
    for index, ref in enumerate(refs):
        table.add(ref, 0, 1, 100, 1)
        if index == count // 2 - 1:
            first_half = table.probes
    adds = table.probes
    # The old table would look at count**2 / 2 = 800,000,000 slots; this one a few per add,
    # growth included, and the second half of the adds no more than the first (the table
    # doubles once more in it).
    assert adds < 8 * count, adds
    assert adds - first_half < 3 * first_half, (first_half, adds)
    assert all(ref in table for ref in refs)
    for ref in refs[::2]:
        table.remove(ref)
    assert table.probes - adds < 12 * count  # lookups and removals (their shifts) stay flat too
    assert len(table) == count // 2


def _fnv1a(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & MASK
    return h


def fnv_flood(count: int, bits: int) -> list[str]:
    """Printable symbols whose FNV-1a (feedha-fix's old symbol hash) agree on their low ``bits`` bits."""
    low = (1 << bits) - 1
    # The last byte b: h = (h_prev ^ b) * P, so h's low bits are 0 when (h_prev ^ b) is 0 there.
    names, index = [], 0
    while len(names) < count:
        prefix = f"F{index:07d}".encode()
        index += 1
        h = _fnv1a(prefix)
        last = h & 0xFF
        if h & low & ~0xFF == 0 and 0x21 <= last <= 0x7E:
            names.append((prefix + bytes([last])).decode())
    assert {_fnv1a(name.encode()) & low for name in names} == {0}
    return names


def test_symbols_chosen_against_the_old_hash_cost_a_flat_number_of_probes() -> None:
    from feedha.adapter.conversion import _orders
    from feedha.adapter.formats.feedha_fix import _fastpath

    names = fnv_flood(2_000, 12)  # one slot of the feedha-fix index at every size it takes (4,096)
    state = _fastpath.State()
    for name in names:
        state.set(name, (1, 1.0, 1.0, 1.0, 1.0, 1, 1.0, 1.0, 1.0))
    assert len(state.items()) == len(names)
    assert state.probes < 4 * len(names), state.probes  # the old index: 2 million
    table = _orders.BookTable()
    for name in names:
        table.set(name, (0, 0.0, 0.0, 0.0, 0.0, 0, 0.0, 0.0, 0.0), None)
    assert len(table) == len(names) and table.probes < 4 * len(names), table.probes


def test_the_tables_hash_is_siphash_1_3_as_cpython_computes_it() -> None:
    # CPython hashes bytes with SipHash-1-3 too; PYTHONHASHSEED=0 runs it under the zero key.
    from feedha.adapter.conversion import _orders

    samples = [bytes(range(n)) for n in (1, 7, 8, 9, 15, 16, 17, 31, 64, 100)]
    script = f"import sys; print([hash(b) & {MASK} for b in {samples!r}])"
    out = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(out.stdout) == [_orders.siphash13(bytes(16), sample) for sample in samples]
    with pytest.raises(ValueError, match="16 bytes"):
        _orders.siphash13(bytes(8), b"x")


_PLAY = """
import hashlib, json, sys
sys.path.insert(0, {repo!r})
from feedha.adapter.formats.itch50.engine import Itch50Engine
from feedha.adapter.formats.itch50.day import make_itch_capture
from tests.itch50_feed import Played, convert, packets
engine = Itch50Engine(depth=5)
played = Played()
for packet in packets(make_itch_capture(symbols=20, orders=600, seed=5).data):
    convert(engine, packet, played)
mbo = engine.mbo
print(json.dumps({{
    "digest": mbo.digest,
    "blocks": hashlib.sha256(played.blocks).hexdigest(),
    "snapshot": repr(sorted(mbo.snapshot().items())),
    "slot_order": [ref for ref, *_ in mbo.orders.items()],
}}))
"""


def test_the_key_differs_per_process_and_nothing_output_depends_on_it() -> None:
    runs = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", _PLAY.format(repo=str(REPO))],
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
                timeout=120,
            ).stdout
        )
        for _ in range(2)
    ]
    first, second = runs
    assert len(first["slot_order"]) > 100
    assert first["slot_order"] != second["slot_order"]  # each process its own key: its own layout
    assert sorted(first["slot_order"]) == sorted(second["slot_order"])
    for name in ("digest", "blocks", "snapshot"):  # and not a byte of output follows the layout
        assert first[name] == second[name], name
