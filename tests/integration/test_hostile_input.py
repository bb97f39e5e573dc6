"""No single input, peer or subscriber takes a channel down: real adapter processes against hostile input.

Poison source messages through three adapters, a subscriber that never
reads, a flood of replay requests, and bad control commands. Waits are polls
with deadlines; every load is bounded in count and time.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import zmq

from feedha.adapter.journal.quarantine import QUARANTINE_FILE, read_quarantine
from feedha.client import ChannelSpec, Subscriber
from feedha.client.events import Delivery
from feedha.cluster import control
from feedha.plain_source.frames import poison_kind_counts
from feedha.proto import wire
from feedha.proto.replay import ReplayRequest, decode_status, encode_request
from tests.integration.groups import LineTap, running_group

CHANNEL = "EQ-A-Z"


def test_poison_through_three_adapters_is_quarantined_alike_and_costs_nothing_else(tmp_path: Path) -> None:
    every = 40
    with running_group(
        channel=CHANNEL, channel_number=1, size=3, rate=2000, seconds=4, journal_root=tmp_path
    ) as group:
        group.start_adapter(1, active=True)
        group.start_adapter(2)
        group.start_adapter(3)
        tap = LineTap({n: group.plan.adapter(n).line for n in (1, 2, 3)})
        try:
            source = group.start_source("--poison-every", str(every), "--malformed-every", "97")
            while source.alive:
                tap.pump(0.5)
            sent = group.sent()
            tap.pump(1.0)
        finally:
            tap.close()
        statuses = [group.status(n) for n in (1, 2, 3)]
    delivered = {seq for line in tap.seen.values() for seq, _payload in line.values()}
    poisoned = set(range(every, sent + 1, every))
    assert delivered == set(range(1, sent + 1)) - poisoned
    assert sorted(s["role"] for s in statuses) == ["active", "backup", "backup"]
    assert all(s["status"] == "in_sync" for s in statuses)
    quarantined = [s["quarantined"] for s in statuses]
    assert quarantined[0] == quarantined[1] == quarantined[2]
    kinds = quarantined[0]
    assert {"oversize", "bad_symbol", "bad_number", "overflow", "source_seq_jump", "malformed_fix"} <= set(
        kinds
    )
    # Each poison is quarantined once, for its own reason (the jumps and malformed stretches
    # the source adds besides count under source_seq_jump and malformed_fix too).
    made = poison_kind_counts(len(poisoned))
    assert kinds["entry_count_mismatch"] == made["count_mismatch"]
    assert kinds["oversize"] == made["oversize_symbol"] and kinds["bad_symbol"] == made["bad_utf8"]
    assert kinds["overflow"] == made["overflow"]
    assert kinds["bad_number"] == made["nan_price"] + made["negative_size"] + made["bad_number"]
    assert kinds["malformed_fix"] >= made["huge_price"] and kinds["source_seq_jump"] >= made["seq_jump"]
    entries = list(read_quarantine(group.journal(1) / QUARANTINE_FILE))
    assert len(entries) == sum(kinds.values())
    assert {e["source_seq"] for e in entries if e["reason"] == "oversize"} <= poisoned
    assert max(e["size"] for e in entries) > 70_000 >= max(len(e["data"]) for e in entries) > 0


@pytest.mark.slow  # over 10 s: with the drills, so the default suite stays under 10 minutes
def test_a_subscriber_that_never_reads_does_not_grow_the_adapter() -> None:
    with running_group(
        channel=CHANNEL, channel_number=1, size=1, rate=50_000, seconds=14, subscribers=1
    ) as group:
        adapter = group.start_adapter(1, active=True)
        stalled = zmq.Context.instance().socket(zmq.SUB)
        stalled.linger = 0
        stalled.rcvhwm = 10
        stalled.setsockopt(zmq.RCVBUF, 4096)
        stalled.subscribe(b"")
        stalled.connect(group.plan.adapter(1).line)  # and never reads
        try:
            source = group.start_source("--pregenerate")
            process = psutil.Process(adapter.popen.pid)
            group.wait_status(1, lambda s: s["published"] > 100_000, 20)
            before = process.memory_info().rss
            source.popen.wait(timeout=40)  # it stops by itself after --seconds
            after = process.memory_info().rss
            status = group.status(1)
        finally:
            stalled.close(linger=0)
    assert status["published"] > 500_000
    growth_mib = (after - before) / 2**20
    print(
        json.dumps(
            {"rss_before_mib": before / 2**20, "rss_after_mib": after / 2**20, "growth_mib": growth_mib}
        )
    )
    assert growth_mib < 48


@pytest.mark.slow  # 7 s: in CI's slow stage; the default keeps test_peer_cutoff's replay cap
def test_a_replay_flood_causes_no_failover(tmp_path: Path) -> None:
    with running_group(
        channel=CHANNEL, channel_number=1, size=2, rate=3000, seconds=12, journal_root=tmp_path
    ) as group:
        group.start_adapter(1, active=True)
        group.start_adapter(2)
        group.start_source()
        group.wait_status(2, lambda s: s["status"] == "in_sync" and s["journaled"] > 5000, 20)
        ctx = zmq.Context.instance()
        flooders = [ctx.socket(zmq.DEALER) for _ in range(8)]
        replies = busy = 0
        try:
            for sock in flooders:
                sock.linger = 0
                sock.rcvhwm = 100
                sock.connect(group.plan.adapter(1).replay)
            deadline = time.monotonic() + 4
            request = encode_request(ReplayRequest(channel=1, request_id=1, first_seq=1, last_seq=5000))
            poller = zmq.Poller()
            for sock in flooders:
                poller.register(sock, zmq.POLLIN)
            while time.monotonic() < deadline:
                for sock in flooders:
                    try:
                        sock.send_multipart([b"", request], zmq.NOBLOCK)
                    except zmq.Again:
                        pass  # the service's queue for us is full: bounded, as it should be
                # Wait for replies (at most 1 ms) rather than spin: the flood is the
                # adapter's load, not this process's; a spinning test takes a core itself.
                for sock, _ in poller.poll(1):
                    while sock.poll(0):
                        frames = sock.recv_multipart()
                        replies += 1
                        busy += decode_status(frames[1]).status.name == "BUSY"
        finally:
            for sock in flooders:
                sock.close(linger=0)
        statuses = [group.status(n) for n in (1, 2)]
        roles = [e for n in (1, 2) for e in group.adapters[n].events if e.get("event") == "role"]
    assert replies > 100 and busy > 0
    assert statuses[0]["role"] == "active" and statuses[0]["term"] == 1
    assert statuses[1]["role"] == "backup" and statuses[1]["term"] == 1
    assert [e["new"] for e in roles] == ["active", "backup"]  # the start-up decisions only
    assert statuses[0]["replay_refused"] > 0


def test_bad_control_commands_get_clear_errors_and_the_adapter_lives() -> None:
    with running_group(channel=CHANNEL, channel_number=1, size=1, rate=1000, seconds=5) as group:
        group.start_adapter(1, active=True)
        group.wait_status(1, lambda s: s["role"] == "active", 10)
        endpoint = group.plan.adapter(1).control
        answers = {
            "missing rate": control(endpoint, "throttle"),
            "tiny rate": control(endpoint, "throttle", rate=1e-300),
            "string rate": control(endpoint, "throttle", rate="fast"),
            "unknown": control(endpoint, "reboot"),
            "bad drop": control(endpoint, "drop", every=0),
            "long reason": control(endpoint, "fail", reason="x" * 10_000),
        }
        for name, reply in answers.items():
            assert reply["ok"] is False and reply["error"], name
        assert "rate" in str(answers["missing rate"]["error"])
        ctx = zmq.Context.instance()
        raw = ctx.socket(zmq.REQ)
        raw.linger = 0
        try:
            raw.connect(endpoint)
            raw.send(b"\xff not json")
            assert raw.poll(5000)
            assert json.loads(raw.recv())["ok"] is False
        finally:
            raw.close(linger=0)
        status = group.status(1)
    assert status["role"] == "active" and status["ok"]


@contextlib.contextmanager
def _rogue_line() -> Iterator[tuple[zmq.Socket[bytes], str]]:
    """A line no adapter serves: the test's own PUB on loopback, and its endpoint."""
    rogue = zmq.Context.instance().socket(zmq.PUB)
    rogue.linger = 0
    try:
        yield rogue, f"tcp://127.0.0.1:{rogue.bind_to_random_port('tcp://127.0.0.1')}"
    finally:
        rogue.close(linger=0)


def _deliver(
    subscriber: Subscriber, source: Any, each_turn: Callable[[list[int]], None] = lambda _delivered: None
) -> list[int]:
    """The ``source_seq`` of every delivery until the source stopped and the lines drained (30 s at most).

    ``each_turn`` is called with what was delivered so far after every poll.
    """
    delivered: list[int] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        alive = source.alive  # read first: what it sent before stopping is queued by the next poll
        events = subscriber.poll(0.05 if alive else 0.5)
        delivered += [event.source_seq for event in events if isinstance(event, Delivery)]
        each_turn(delivered)
        if not alive and not events:  # stopped, and the lines stayed quiet for 0.5 s
            break
    return delivered


def test_forged_term_and_sequence_packets_derail_no_subscriber() -> None:
    forged = [
        wire.encode_packet(channel=1, adapter=9, term=2**32 - 1, first_seq=1, blocks=(), send_time_ns=0),
        wire.encode_packet(channel=1, adapter=9, term=1, first_seq=2**63, blocks=(), send_time_ns=0),
    ]
    with running_group(channel=CHANNEL, channel_number=1, size=2, rate=2000, seconds=4) as group:
        group.start_adapter(1, active=True)
        group.start_adapter(2)
        with _rogue_line() as (rogue, rogue_endpoint):
            lines = (group.plan.adapter(1).line, group.plan.adapter(2).line, rogue_endpoint)
            with Subscriber([ChannelSpec(CHANNEL, 1, lines)]) as subscriber:
                source = group.start_source()
                sent_forged = 0

                def forge(delivered: list[int]) -> None:
                    nonlocal sent_forged
                    if len(delivered) > 500 and sent_forged < 20:
                        rogue.send_multipart([CHANNEL.encode(), forged[sent_forged % 2]])
                        sent_forged += 1

                delivered = _deliver(subscriber, source, forge)
                sent = group.sent()
                stats = subscriber.stats()[CHANNEL]
    assert sent_forged == 20
    assert delivered == list(range(1, sent + 1))
    assert stats.highest_term == 1 and stats.stale == 0 and stats.lost == 0 and stats.suspect >= 1


@pytest.mark.slow  # 6 s: in CI's slow stage; the default keeps the forged term and sequence packets
def test_a_forged_term_read_first_fences_no_genuine_line() -> None:
    # The first packet this subscriber ever reads is a rogue's, with the highest term there is, on
    # the only line it knows of: that line is the channel's majority, and is followed. The genuine
    # lines join after it; their first packets take the term back (a packet of one of them may be
    # dropped as stale meanwhile: the other line carries it). Every message must still arrive.
    forged = wire.encode_packet(channel=1, adapter=9, term=2**32 - 1, first_seq=1, blocks=(), send_time_ns=0)
    with running_group(channel=CHANNEL, channel_number=1, size=2, rate=2000, seconds=3) as group:
        group.start_adapter(1, active=True)
        group.start_adapter(2)
        with _rogue_line() as (rogue, rogue_endpoint):
            with Subscriber([ChannelSpec(CHANNEL, 1, (rogue_endpoint,))]) as subscriber:
                deadline = time.monotonic() + 10
                while subscriber.stats()[CHANNEL].lines[0].packets == 0:  # until it read the forgery
                    assert time.monotonic() < deadline, "the forged packet never arrived"
                    rogue.send_multipart([CHANNEL.encode(), forged])
                    subscriber.poll(0.05)
                lines = (group.plan.adapter(1).line, group.plan.adapter(2).line)
                assert subscriber.join(ChannelSpec(CHANNEL, 1, lines)) == 2
                delivered = _deliver(subscriber, group.start_source())
                sent = group.sent()
                stats = subscriber.stats()[CHANNEL]
    assert sent > 0 and delivered == list(range(1, sent + 1))
    assert stats.highest_term == 1 and stats.lost == 0


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("journal", [True, False], ids=["journal", "no-journal"])
def test_the_two_minute_chaos_drill_loses_nothing(journal: bool) -> None:
    """The issue's acceptance commands (CI runs them with the slow drills)."""
    import subprocess
    import sys

    from feedha.plain_source.frames import POISON_KINDS

    argv = [sys.executable, "-m", "feedha", "drill", "chaos", "--minutes", "2", "--seed", "5", "--json"]
    out = subprocess.run(
        [*argv, *([] if journal else ["--no-journal"])], capture_output=True, text=True, timeout=560
    )
    result = json.loads(out.stdout)
    print(json.dumps(result))
    assert (result["lost"], result["duplicates"], result["conflicts"], result["line_holes"]) == (0, 0, 0, 0)
    faults = result["faults"]
    assert sum(n for kind, n in faults.items() if not kind.startswith("poison")) > 10
    assert all(faults.get(f"poison_{kind}", 0) > 0 for kind in POISON_KINDS)
    assert result["adapters_alive"] == 3 and out.returncode == 0
