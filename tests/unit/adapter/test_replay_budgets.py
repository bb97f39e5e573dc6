"""The replay service's budgets per user: one user's keys share one, another user's gap is answered.

Pure cores with an explicit clock: the buckets (:mod:`adapter.replay_limits`),
who pays (:meth:`AccessTable.owner_of`), what a time window's page charges for
the records it skipped, and how often the replay thread has the journal written.
"""

from __future__ import annotations

from pathlib import Path

import zmq

from feedha.adapter.access import AccessTable
from feedha.adapter.journal import JournalConfig, JournalReader, JournalWriter
from feedha.adapter.replay import ReplayService
from feedha.adapter.replay_limits import BURST_S, ReplayLimits
from feedha.adapter.replay_server import FlushGate
from feedha.proto.replay import ReplayStatus, decode_status, encode_request, time_request

FAR = 2**62
MIB = 1 << 20


def _keys(count: int) -> list[str]:
    return [zmq.curve_keypair()[0].decode() for _ in range(count)]


def test_every_key_of_a_user_pays_from_one_budget_and_a_key_without_an_owner_from_its_own() -> None:
    table = AccessTable(permanent=["p" * 40])
    abuser = _keys(32)
    for key in abuser:
        table.grant(key, FAR, owner="abuser")
    (honest,) = _keys(1)
    table.grant(honest, FAR, False, False, "honest")
    (plain,) = _keys(1)
    table.grant(plain, FAR)
    assert {table.owner_of(key) for key in abuser} == {"user:abuser"}
    assert table.owner_of(honest) == "user:honest"
    assert table.owner_of(plain) == f"key:{plain}" and table.owner_of("p" * 40) == f"key:{'p' * 40}"
    # A user named like a key's tag cannot pay with that key's budget, nor the other way round.
    table.grant(abuser[0], FAR, owner=f"key:{plain}")
    assert table.owner_of(abuser[0]) != table.owner_of(plain)
    table.revoke([honest])
    assert table.owner_of(honest) == f"key:{honest}"  # forgotten with its grant
    table.grant(abuser[1], FAR)  # granted again without an owner: its own again
    assert table.owner_of(abuser[1]) == f"key:{abuser[1]}"


def test_thirty_two_keys_of_one_user_get_one_user_s_requests_and_another_user_is_answered() -> None:
    table = AccessTable()
    abuser = _keys(32)
    for key in abuser:
        table.grant(key, FAR, owner="abuser")
    (honest,) = _keys(1)
    table.grant(honest, FAR, owner="honest")
    limits = ReplayLimits(peer_requests_per_s=100, total_requests_per_s=400)
    admitted = 0
    for round_ in range(10):  # every key asks ten times at one instant
        for key in abuser:
            admitted += limits.admit(table.owner_of(key).encode(), now=1.0 + round_ * 1e-6)
    assert admitted == int(100 * BURST_S)  # one user's burst, however many keys (per key: 32 x 25)
    assert limits.admit(table.owner_of(honest).encode(), now=1.0)


def test_heavy_users_emptying_the_service_are_refused_while_a_light_user_is_answered() -> None:
    limits = ReplayLimits(peer_bytes_per_s=4 * MIB, total_bytes_per_s=8 * MIB)
    now, refused, answered = 1.0, 0, 0
    for step in range(400):  # two heavy users for 2 s, each asking for a 1 MiB reply at every chance
        now = 1.0 + step * 0.005
        for user in (b"user:a", b"user:b", b"user:c"):
            if limits.admit(user, now=now):
                limits.charge(user, MIB, now=now)
                answered += 1
            else:
                refused += 1
        if step % 20 == 0:  # the honest user: a small gap every 0.1 s
            assert limits.admit(b"user:honest", now=now), f"the honest user was refused at {now:.3f}"
            limits.charge(b"user:honest", 10_000, now=now)
    # Three heavy users get the service's 8 MiB/s between them (over 2 s: ~16 MiB + the bursts).
    assert 14 <= answered <= 24 and refused > 1000
    assert limits.light_admitted >= 1  # the honest user passed a service in debt
    # A light user that asks for a lot turns heavy with that one reply.
    assert limits.admit(b"user:greedy", now=now)
    limits.charge(b"user:greedy", 2 * MIB, now=now)
    assert not limits.admit(b"user:greedy", now=now + 0.1)
    assert "payers=5" in repr(limits)


def test_a_payer_in_byte_debt_waits_even_when_the_service_has_room() -> None:
    limits = ReplayLimits(peer_bytes_per_s=1 * MIB, total_bytes_per_s=100 * MIB)
    assert limits.admit(b"user:x", now=0.0)
    limits.charge(b"user:x", 3 * MIB, now=0.0)  # a debt of ~2.75 MiB at 1 MiB/s
    assert not limits.admit(b"user:x", now=2.0)
    assert limits.admit(b"user:x", now=3.0)


T0 = 1_700_000_000_000_000_000
MS = 1_000_000


def test_a_window_page_charges_the_records_it_skipped_before_the_start(tmp_path: Path) -> None:
    with JournalWriter(tmp_path, JournalConfig(index_interval_bytes=1 << 30)) as writer:  # one index entry
        for seq in range(1, 1001):
            writer.append(seq, T0 + seq * MS, 1, seq, b"x" * 100)
        writer.flush()
        service = ReplayService(
            JournalReader(writer.directory),
            channel=3,
            adapter=2,
            max_packet_bytes=1400,
            max_bytes=1 << 20,
            bounds=lambda: (1, writer.last_msg_seq),
            time_index=writer.time_index.start_for,
        )
        body = encode_request(time_request(3, 9, T0 + 901 * MS, T0 + 905 * MS))
        reply = service.answer([b"peer", b"", body], term=4, send_time_ns=T0 + 2000 * MS)
    status = decode_status(reply[2])
    assert status.status is ReplayStatus.END and status.packet_count == 4
    # 900 records of 100 bytes read and not sent, each as a block would have cost.
    assert service.counters.skipped_bytes == 900 * (100 + 12)
    assert sum(map(len, reply)) < service.counters.skipped_bytes / 10


def test_the_flush_gate_asks_at_most_once_per_interval_and_says_what_came_of_it() -> None:
    asked: list[float] = []

    def write(wait_s: float) -> bool:
        asked.append(wait_s)
        return len(asked) != 2  # the second write times out

    gate = FlushGate(write, every_s=0.01, wait_s=0.02)
    assert gate.ask(now=5.0)
    assert not gate.ask(now=5.005)  # coalesced: the flusher writes within its own interval anyway
    assert not gate.ask(now=5.0101)  # asked, timed out
    assert gate.ask(now=5.03)
    assert asked == [0.02, 0.02, 0.02] and gate.coalesced == 1
    assert repr(gate) == "<FlushGate [asked=3, coalesced=1]>"


def test_a_payer_is_light_while_it_keeps_within_its_allowance() -> None:
    limits = ReplayLimits()
    assert limits.is_light(b"user:gaps", now=0.0)
    for step in range(50):  # a gap of 10 kB every 0.1 s: 100 kB/s, 10 requests/s at most
        now = step * 0.1
        assert limits.is_light(b"user:gaps", now=now) and limits.admit(b"user:gaps", now=now)
        limits.charge(b"user:gaps", 10_000, now=now)
    assert limits.admit(b"user:pages", now=5.0)
    limits.charge(b"user:pages", MIB, now=5.0)  # one page: heavy until the allowance paid it off
    assert not limits.is_light(b"user:pages", now=6.0)
    assert limits.is_light(b"user:pages", now=9.0)
