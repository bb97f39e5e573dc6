"""Every source position an adapter passes is booked once: numbered, quarantined, skipped or in a gap.

The ledger (adapter/core/accounting.py) on its own, then real adapter cores of one group on the
simulated clock (group_harness.py) fed poison of every kind, garbage and garbled copies, a gap
every adapter saw, one only a backup saw, a believed jump, a SequenceReset, and the types fix44
and itch50 skip: each core's ledger explains every position it passed, and its categories are
the ones the source made.
"""

from __future__ import annotations

from typing import Any

from feedha.adapter.core.accounting import GAPS_KEPT, KINDS_KEPT, SourceLedger, count_kind
from feedha.plain_source.frames import POISON_KINDS, corrupt, poison_message
from feedha.proto import fix
from tests import fix44_capture

from .group_harness import CoreGroup


def _accounting(group: CoreGroup, number: int) -> dict[str, Any]:
    status = group.members[number].status
    accounting: dict[str, Any] = status["accounting"]
    assert accounting["unexplained"] == 0, (number, accounting)
    assert accounting["numbered"] == status["numbered"]
    return accounting


def test_the_ledger_books_each_kind_and_a_good_copy_takes_back_a_garbled_message_s_place() -> None:
    ledger = SourceLedger()
    assert ledger.unexplained(first_source_seq=0, last_source_seq=0, numbered=0) == 0
    ledger.took("quarantined", tentative=True)  # position 1: a garbled message, a good copy may follow
    ledger.retook()  # it did (numbered: the pipeline counts it)
    ledger.took("skipped")  # 2
    ledger.gap(3, 5)  # nothing came for 3..5
    ledger.took("quarantined")  # 6
    ledger.gap(7, 1006, "jump")  # the source moved on
    ledger.gap(9, 8)  # an empty range books nothing
    ledger.placed_nowhere(2)
    assert (ledger.quarantined, ledger.skipped, ledger.in_gaps, ledger.declared_absent) == (1, 1, 3, 1000)
    assert ledger.unplaced == 3 and ledger.gap_ranges == 2
    assert ledger.unexplained(first_source_seq=1, last_source_seq=1006, numbered=1) == 0
    assert ledger.unexplained(first_source_seq=1, last_source_seq=1007, numbered=1) == 1  # one unbooked
    shown = ledger.as_dict(first_source_seq=1, last_source_seq=1006, numbered=1)
    assert shown["gaps"] == [
        {"first": 3, "last": 5, "kind": "gap"},
        {"first": 7, "last": 1006, "kind": "jump"},
    ]
    assert shown["base"] == 0 and shown["unexplained"] == 0
    ledger.retook()  # nothing tentative any more: a second retake moves nothing
    assert ledger.quarantined == 1
    assert repr(ledger).startswith("<SourceLedger [base=None, quarantined=1")


def test_the_ledger_begins_where_recovery_or_the_first_message_left_it() -> None:
    joined = SourceLedger()  # joined a stream at position 501
    assert joined.unexplained(first_source_seq=501, last_source_seq=510, numbered=10) == 0
    recovered = SourceLedger()
    recovered.base = 700  # the journal ended there
    assert recovered.unexplained(first_source_seq=1, last_source_seq=710, numbered=10) == 0


def test_gap_names_and_kinds_are_bounded_against_a_hostile_source() -> None:
    ledger, kinds = SourceLedger(), {}
    for seq in range(0, 4 * GAPS_KEPT, 2):
        ledger.gap(seq + 1, seq + 1)
    for index in range(3 * KINDS_KEPT):
        count_kind(kinds, f"T{index}")
    assert len(ledger.gaps) == GAPS_KEPT and ledger.gap_ranges == 2 * GAPS_KEPT
    assert ledger.gaps[-1] == (4 * GAPS_KEPT - 1, 4 * GAPS_KEPT - 1, "gap")
    assert len(kinds) == KINDS_KEPT + 1 and kinds["other"] == 2 * KINDS_KEPT
    assert sum(kinds.values()) == 3 * KINDS_KEPT


def test_poison_garbage_gaps_a_jump_and_a_reset_are_each_booked_once_on_every_adapter() -> None:
    group = CoreGroup(3, rate=2000)
    group.run_until(lambda: group.in_sync(2) and group.in_sync(3), within=3)
    source = group.source
    for kind in POISON_KINDS:  # in place of a message: quarantined, its position used up
        source.poison_message(lambda seq, kind=kind: poison_message(kind, source.message(seq), seq))
        group.run(0.05)
    for _ in range(5):  # a garbled copy, then the good one: the good one takes the position
        seq = source.next_seq
        source.poison.append(b"garbage\x01")  # no position at all
        source.poison.append(corrupt(source.message(seq)))
        group.run(0.05)
    source.skipped.update(range(source.next_seq, source.next_seq + 40))
    common = (source.next_seq, source.next_seq + 39)
    source.next_seq += 40  # a gap every adapter sees
    group.run(0.3)
    group.members[3].lose_frames = 3  # a gap of backup 3's own
    group.run(0.5)
    source.skipped.update(range(source.next_seq, source.next_seq + 2_000_000))
    source.next_seq += 2_000_000  # the source moves on for good: a believed jump
    group.run(0.3)
    reset_at = source.next_seq
    source.poison.append(fix.encode_sequence_reset(source_seq=reset_at, new_seq=reset_at + 1000))
    source.skipped.update(range(reset_at, reset_at + 1000))
    source.next_seq = reset_at + 1000
    group.run(0.5)
    group.run(0.5, source=False)
    assert group.delivered_source_seqs() == source.expected() and group.lost == 0
    active = _accounting(group, 1)
    assert active["quarantined"] == len(POISON_KINDS)  # each poison used up its own position
    assert active["in_gaps"] == 40
    assert active["declared_absent"] == 2_000_000 + 999  # the jump, and what the reset numbered past
    assert active["skipped"] == 1  # the SequenceReset itself
    assert active["unplaced"] >= 5 + 5  # the garbled copies and the garbage
    gaps = [(gap["first"], gap["last"], gap["kind"]) for gap in active["gaps"]]
    assert (*common, "gap") in gaps and any(kind == "jump" for _f, _l, kind in gaps)
    assert (reset_at + 1, reset_at + 999, "reset") in gaps
    backup = _accounting(group, 2)
    assert {key: backup[key] for key in ("quarantined", "in_gaps", "declared_absent", "skipped")} == {
        key: active[key] for key in ("quarantined", "in_gaps", "declared_absent", "skipped")
    }
    own = _accounting(group, 3)  # its own gap is booked too; the group's numbering carried it
    assert own["in_gaps"] > 40 and own["gap_ranges"] > active["gap_ranges"]
    assert group.members[1].status["skipped_types"] == {"4": 1}


def test_itch50_types_that_give_no_block_are_skipped_by_type_and_booked() -> None:
    group = CoreGroup(2, rate=4000, itch50=True)
    group.run(3.0)
    group.run(0.5, source=False)
    for number in (1, 2):
        accounting = _accounting(group, number)
        status = group.members[number].status
        assert accounting["skipped"] == status["skipped"] == sum(status["skipped_types"].values()) > 0
        assert set(status["skipped_types"]) <= set("SHBINL") and "S" in status["skipped_types"]
        assert accounting["numbered"] + accounting["skipped"] == status["last_source_seq"]
        assert accounting["in_gaps"] == accounting["quarantined"] == 0


def test_fix44_session_messages_are_skipped_by_their_msg_type() -> None:
    group = CoreGroup(2, rate=3000, fix44=True)
    group.run_until(lambda: group.in_sync(2), within=3)
    for _ in range(7):  # heartbeats and a logon in the stream: not market data
        group.source.poison_message(lambda seq: fix44_capture._message("0", seq, []))
        group.run(0.05)
    group.source.poison_message(lambda seq: fix44_capture._message("A", seq, [(98, 0), (108, 30)]))
    group.run(0.5)
    group.run(0.5, source=False)
    assert group.delivered_source_seqs() == group.source.expected()
    for number in (1, 2):
        accounting = _accounting(group, number)
        status = group.members[number].status
        assert status["skipped_types"] == {"0": 7, "A": 1}
        assert accounting["skipped"] == status["skipped"] == 8 and accounting["in_gaps"] == 0
