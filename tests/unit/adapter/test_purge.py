"""Purges, the pure parts: the book, the records' codec and the group's protocol (the desk)."""

from __future__ import annotations

import pytest

from feedha.adapter.core.actions import CommandDone, JournalControl, SendSync, Status
from feedha.adapter.core.commands import ControlError, Purge, decode_request
from feedha.adapter.core.purge import (
    PURGE_RECORD_FLAGS,
    PurgeBook,
    PurgeEntry,
    decode_purge,
    encode_purge,
    tombstone_block,
)
from feedha.adapter.core.purging import (
    ACK_TIMEOUT_S,
    PURGE_BURST,
    PurgeContext,
    PurgeDesk,
)
from feedha.adapter.core.sync_types import Role
from feedha.adapter.core.syncbus import (
    Health,
    PurgeAck,
    Purges,
    Sender,
    StreamState,
    decode_sync,
    encode_sync,
)
from feedha.proto import market_pb2, wire


def entry(purge_id: int, first: int, last: int, reason: str = "bad print") -> PurgeEntry:
    return PurgeEntry(purge_id=purge_id, first_msg_seq=first, last_msg_seq=last, time_ns=5, reason=reason)


# ---- the book ---------------------------------------------------------------------------------


def test_the_book_keeps_ranges_disjoint_and_names_the_first_purge_of_each_msg_seq() -> None:
    book = PurgeBook()
    assert book.add(entry(1, 10, 20)) and book.add(entry(2, 15, 30)) and book.add(entry(4, 5, 5))
    assert not book.add(entry(2, 100, 200))  # by id: idempotent
    assert [(lo, hi, e.purge_id) for lo, hi, e in book.overlapping(0, 100)] == [
        (5, 5, 4),
        (10, 20, 1),
        (21, 30, 2),
    ]
    assert book.covering(20).purge_id == 1 and book.covering(21).purge_id == 2  # type: ignore[union-attr]
    assert book.covering(9) is None and book.covering(31) is None
    assert book.is_all_purged(10, 30) and not book.is_all_purged(9, 30)
    assert (book.known_through, book.highest_id, len(book)) == (2, 4, 3)  # id 3 is missing
    book.add(entry(3, 40, 40))
    assert book.known_through == 4
    assert [e.purge_id for e in book.after(1, limit=2)] == [2, 3]
    assert "known_through=4" in repr(book)


def test_a_full_book_takes_nothing_more() -> None:
    book = PurgeBook(limit=2)
    assert book.add(entry(1, 1, 1)) and book.add(entry(2, 2, 2))
    assert book.is_full and not book.add(entry(3, 3, 3)) and len(book) == 2


def test_purge_records_and_tombstones_round_trip() -> None:
    original = PurgeEntry(
        purge_id=7, first_msg_seq=3, last_msg_seq=9, time_ns=11, reason="fat finger", issued_by="ops", term=2
    )
    assert decode_purge(encode_purge(original)) == original
    with pytest.raises(ValueError, match="not a PurgeEntry"):
        decode_purge(b"\xff\xff\xff")
    with pytest.raises(ValueError):
        decode_purge(encode_purge(original)[:0])  # all defaults: purge_id 0 is impossible
    stream, source_seq, payload = tombstone_block("AAPL", 42, original)
    assert stream == wire.TOMBSTONE_STREAM and source_seq == 42
    tombstone = market_pb2.Tombstone.FromString(payload)
    assert (tombstone.symbol, tombstone.purge_id, tombstone.reason) == ("AAPL", 7, "fat finger")


def test_purge_commands_are_checked_before_they_reach_the_core() -> None:
    assert decode_request(b'{"cmd": "purge", "first": 5, "reason": "x"}') == Purge(
        first=5, last=5, reason="x"
    )
    assert decode_request(b'{"cmd": "purge", "all_pending": true, "reason": "x"}') == Purge(
        all_pending=True, reason="x"
    )
    for bad in (
        b'{"cmd": "purge", "first": 0, "reason": "x"}',  # msg_seq 0 is never a message
        b'{"cmd": "purge", "first": 5, "last": 4, "reason": "x"}',
        b'{"cmd": "purge", "first": 5}',  # no reason
        b'{"cmd": "purge", "first": 5, "reason": "x", "all_pending": true}',
        b'{"cmd": "purge", "first": 99999999999999999999, "reason": "x"}',
        b'{"cmd": "purge", "first": 5, "reason": "' + b"r" * 300 + b'"}',
    ):
        with pytest.raises(ControlError):
            decode_request(bad)


# ---- the desk ---------------------------------------------------------------------------------


def ctx(
    *,
    now: float = 10.0,
    role: Role = Role.ACTIVE,
    adapter: int = 1,
    journal_last: int | None = 1000,
    frontier: int | None = 100,
    published: int = 90,
    peers: frozenset[int] = frozenset({2, 3}),
    active: int | None = 1,
) -> PurgeContext:
    return PurgeContext(
        now=now,
        wall_ns=int(now * 1e9),
        sender=Sender(adapter, 4, role, int(now * 1e9)),
        role=role,
        deciding=False,
        active=active,
        journal_last=journal_last,
        frontier=frontier,
        delayed_published=published,
        has_delayed=True,
        live_peers=peers,
    )


def purge(first: int = 0, last: int = 0, **fields: object) -> Purge:
    fields.setdefault("reason", "bad print")
    return Purge(first=first, last=last or first, command_id="c1", **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("command", "context", "reason"),
    [
        (purge(500), ctx(role=Role.BACKUP, active=2), "NOT_ACTIVE"),
        (purge(500), ctx(journal_last=None), "NO_DELAYED_LINE"),
        (purge(500), ctx(frontier=None), "CATCHING_UP"),
        (purge(1001, 1002), ctx(), "BEYOND_END"),
        (purge(1, 10**9), ctx(), "BEYOND_END"),  # a range of a billion: past the end
        (purge(100), ctx(), "ALREADY_DELIVERED"),  # the frontier itself
        (purge(50, 500), ctx(), "ALREADY_DELIVERED"),
        (Purge(all_pending=True, reason="x"), ctx(frontier=1000), "NOTHING_PENDING"),
    ],
)
def test_the_active_refuses_what_it_cannot_honour_and_says_why(
    command: Purge, context: PurgeContext, reason: str
) -> None:
    desk, out = PurgeDesk(now=0.0), []
    reply = desk.on_command(command, context, out)
    assert reply["ok"] is False and reply["reason"] == reason and reply["error"]
    assert out == [] and desk.counters.refused == {reason: 1} and len(desk.book) == 0


def test_a_backup_s_delayed_line_counts_toward_the_frontier() -> None:
    desk, out = PurgeDesk(now=0.0), []
    sender = Sender(2, 4, Role.BACKUP, 0)
    desk.on_health(
        Health(sender, 90.0, 1.0, 1.0, 0, 1.0, 0, True, 0, purge_seq=0, delayed_msg_seq=150), 10.0, out
    )
    reply = desk.on_command(purge(120), ctx(), out)
    assert reply["reason"] == "ALREADY_DELIVERED" and reply["frontier"] == 150


def test_an_accepted_purge_is_journaled_sent_and_answered_once_the_backups_hold_it() -> None:
    desk, out = PurgeDesk(now=0.0), []
    reply = desk.on_command(purge(200, 210), ctx(), out)
    assert reply["ok"] and reply["deferred"] and reply["purge_id"] == 1 and reply["count"] == 11
    journal, sent, status = out
    assert isinstance(journal, JournalControl) and journal.flags == PURGE_RECORD_FLAGS
    assert decode_purge(journal.payload).first_msg_seq == 200
    assert isinstance(sent, SendSync) and isinstance(sent.message, Purges)
    assert isinstance(status, Status) and status.event == "purge"
    out.clear()
    desk.on_ack(PurgeAck(Sender(2, 4, Role.BACKUP, 0), 1), ctx(), out)
    assert out == []  # adapter 3 has not acknowledged yet
    desk.on_ack(PurgeAck(Sender(3, 4, Role.BACKUP, 0), 1), ctx(), out)
    (done,) = out
    assert isinstance(done, CommandDone) and done.command_id == "c1"
    assert done.reply["confirmed"] == [2, 3] and done.reply["unconfirmed"] == []
    again = desk.on_command(purge(200, 210), ctx(now=11.0), [])
    assert again["reason"] == "ALREADY_PURGED"


def test_a_reply_that_waits_too_long_names_the_backups_that_did_not_answer() -> None:
    desk, out = PurgeDesk(now=0.0), []
    desk.on_command(purge(300), ctx(), out)
    out.clear()
    desk.on_tick(ctx(now=10.0 + ACK_TIMEOUT_S / 2), out)
    assert out == []
    desk.on_tick(ctx(now=10.0 + ACK_TIMEOUT_S), out)
    (done,) = out
    assert isinstance(done, CommandDone) and done.reply["ok"] and done.reply["unconfirmed"] == [2, 3]


def test_without_live_backups_the_reply_comes_at_once() -> None:
    reply = PurgeDesk(now=0.0).on_command(purge(300), ctx(peers=frozenset()), [])
    assert reply["ok"] and "deferred" not in reply and reply["unconfirmed"] == []


def test_all_pending_purges_from_the_frontier_to_the_journal_s_end() -> None:
    reply = PurgeDesk(now=0.0).on_command(Purge(all_pending=True, reason="cancel all"), ctx(), [])
    assert (reply["first_msg_seq"], reply["last_msg_seq"]) == (101, 1000)


def test_a_flood_of_purges_is_refused_past_the_bucket() -> None:
    desk = PurgeDesk(now=0.0)
    replies = [desk.on_command(purge(200 + i), ctx(now=10.0, peers=frozenset()), []) for i in range(50)]
    accepted = [r for r in replies if r["ok"]]
    assert len(accepted) == int(PURGE_BURST)
    assert desk.counters.refused == {"TOO_MANY": 50 - int(PURGE_BURST)}
    later = desk.on_command(purge(400), ctx(now=11.0, peers=frozenset()), [])
    assert later["ok"]  # the bucket refills


def test_a_backup_learns_purges_asks_for_missing_ones_and_holds_its_delayed_line_meanwhile() -> None:
    backup, out = PurgeDesk(now=0.0), []
    view = ctx(role=Role.BACKUP, adapter=2, active=1)
    assert not backup.may_publish_delayed(view)  # the active's purges are not known yet
    active_sender = Sender(1, 4, Role.ACTIVE, 0)
    report = StreamState(active_sender, 1, 0, 0, 0, 0, 0, purge_seq=2)
    backup.on_stream_state(report, view, out)
    (ask,) = out
    assert isinstance(ask, SendSync) and ask.message == PurgeAck(view.sender, 0)
    assert not backup.may_publish_delayed(view)
    out.clear()
    backup.on_purges(Purges(active_sender, (entry(1, 200, 200), entry(2, 80, 85))), view, out)
    journaled = [a for a in out if isinstance(a, JournalControl)]
    assert len(journaled) == 2 and backup.may_publish_delayed(view)
    assert backup.counters.late == 1  # 80..85 had gone out on this delayed line (published 90)
    assert out[-1] == SendSync(PurgeAck(view.sender, 2))
    stranger = Sender(3, 4, Role.BACKUP, 0)
    backup.on_purges(Purges(stranger, (entry(3, 500, 500),)), view, [])
    assert 3 not in backup.book  # only the active it follows decides


def test_the_active_sends_a_lagging_backup_what_it_lacks() -> None:
    desk, out = PurgeDesk(now=0.0), []
    for i in range(3):
        desk.on_command(purge(200 + i), ctx(peers=frozenset()), [])
    desk.on_ack(PurgeAck(Sender(2, 4, Role.BACKUP, 0), 1), ctx(), out)
    (send,) = out
    assert isinstance(send, SendSync) and [e.purge_id for e in send.message.entries] == [2, 3]  # type: ignore[union-attr]
    desk.on_ack(PurgeAck(Sender(2, 4, Role.BACKUP, 0), 1), ctx(), out)
    assert len(out) == 1  # not again within RESEND_S


def test_purge_messages_cross_the_sync_bus() -> None:
    sender = Sender(1, 4, Role.ACTIVE, 9)
    for message in (
        Purges(sender, (entry(1, 5, 6), entry(2, 8, 8))),
        PurgeAck(sender, 12),
        StreamState(sender, 1, 2, 3, 4, 5, 6, purge_seq=7),
        Health(sender, 1.0, 2.0, 3.0, 4, 5.0, 6, True, 7, 8, purge_seq=9, delayed_msg_seq=10),
    ):
        assert decode_sync(encode_sync(message, channel=3), channel=3) == message


def test_a_backup_drops_what_a_deposed_active_accepted_and_takes_the_active_s_version() -> None:
    backup, out = PurgeDesk(now=0.0), []
    view = ctx(role=Role.BACKUP, adapter=2, active=1)
    new_active = Sender(1, 5, Role.ACTIVE, 0)
    backup.restore([entry(1, 10, 10), entry(2, 20, 20), entry(3, 30, 30)])  # 3: a deposed active's
    backup.on_stream_state(StreamState(new_active, 1, 0, 0, 0, 0, 0, purge_seq=2), view, out)
    (withdrawal,) = out
    assert isinstance(withdrawal, JournalControl) and decode_purge(withdrawal.payload).withdrawn
    assert 3 not in backup.book and backup.book.covering(30) is None and backup.counters.withdrawn == 1
    out.clear()
    backup.on_purges(Purges(new_active, (entry(2, 25, 26, reason="the active's"),)), view, out)
    assert backup.book.covering(20) is None and backup.book.covering(25).reason == "the active's"  # type: ignore[union-attr]
    assert any(isinstance(a, JournalControl) for a in out)
    # recovery replays the records in order: the same book again
    again = PurgeDesk(now=0.0)
    records = [entry(1, 10, 10), entry(2, 20, 20), entry(3, 30, 30)]
    records += [decode_purge(withdrawal.payload), entry(2, 25, 26, reason="the active's")]
    again.restore(records)
    assert again.book.entries() == backup.book.entries()
