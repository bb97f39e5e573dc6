"""fix44 in the whole group (simulated clock): books across a kill, snapshot adoption and images.

The source speaks fix44 (multi-symbol incremental refreshes, full refreshes,
written with simplefix); every adapter keeps order books as conversion state.
"""

from __future__ import annotations

from typing import Any

import pytest

from feedha.adapter.conversion.codec import from_proto
from feedha.adapter.core.commands import CorruptState
from feedha.adapter.core.sync_types import Role
from feedha.adapter.snapshot import ImageBuilder
from feedha.client import ImageAssembler
from feedha.proto import market_pb2
from tests.fix44_capture import Reference

from .group_harness import CoreGroup, Fix44Source


def _books(state: Any) -> dict[str, Any]:
    return {
        symbol: (v.book.bids, v.book.asks, v.book.volume, v.book.last)
        for symbol, v in state.snapshot().items()
    }


@pytest.mark.slow  # tests/integration/test_drill_book.py kills an active in the default suite
def test_books_survive_killing_the_active_and_match_a_reference() -> None:
    group = CoreGroup(3, rate=1500, fix44=True)
    group.run_until(lambda: group.in_sync(2) and group.in_sync(3), within=3)
    group.run(0.5)
    group.kill(1)
    group.run_until(lambda: len(group.actives()) == 1 and group.actives()[0] != 1, within=5)
    group.run(0.5)
    group.run(0.5, source=False)
    assert (group.lost, group.duplicates, group.out_of_order) == (0, 0, 0)
    assert group.client.stats().conflicts == 0
    assert group.delivered_source_seqs() == group.source.expected()
    survivors = [group.members[n].core.state for n in (2, 3)]
    assert survivors[0].digest == survivors[1].digest
    source = group.source
    assert isinstance(source, Fix44Source)
    reference = Reference()
    reference.feed(b"".join(source.sent))
    shown = {s: {"bids": [[p, z] for p, z, _o in b.bids[:10]], "asks": [[p, z] for p, z, _o in b.asks[:10]]}
             for s, v in survivors[0].snapshot().items() for b in [v.book] if b is not None}  # fmt: skip
    assert shown == reference.shown() and len(shown) > 10


def test_a_backup_adopts_a_snapshot_with_books_mid_stream() -> None:
    group = CoreGroup(2, rate=1500, fix44=True)
    group.run_until(lambda: group.in_sync(2) and group.members[2].status["symbols"] >= 10, within=3)
    adopted = group.members[2].status["snapshots_adopted"]
    assert group.command(2, CorruptState(7))["ok"]
    group.run_until(lambda: group.members[2].status["snapshots_adopted"] > adopted, within=3)
    group.run(0.3)
    active, backup = group.members[1].core.state, group.members[2].core.state
    assert group.in_sync(2) and group.members[2].core.sync.role is Role.BACKUP
    assert backup.digest == active.digest and _books(backup) == _books(active)
    assert any(bids for bids, _asks, _v, _l in _books(backup).values())


def test_a_late_joiner_gets_the_books_in_its_image() -> None:
    group = CoreGroup(1, rate=1500, fix44=True)
    group.run(1.0)
    member = group.members[1]
    builder = ImageBuilder(member.journal, lambda: None, channel=1, adapter=1, book_depth=3)
    image = builder.newest(now=0.0)
    assert image is not None
    assembler = ImageAssembler(1)
    got = None
    for part in image.parts:
        got = assembler.add(part)
    assert got is not None
    state = member.core.state
    assert got.msg_seq == member.status["next_msg_seq"] - 1
    images = {symbol: from_proto(value) for symbol, value in got.symbols.items()}
    shown = state.snapshot()
    for values in shown.values():  # an image shows the best book_depth levels a side, as a block
        assert values.book is not None
        values.book.bids, values.book.asks = values.book.bids[:3], values.book.asks[:3]
    assert images == shown and any(len(v.book.bids) == 3 for v in images.values() if v.book is not None)
    assert all(value.book.depth == 3 for value in got.symbols.values())
    assert all(
        isinstance(value, market_pb2.SymbolState) and value.HasField("book") for value in got.symbols.values()
    )
