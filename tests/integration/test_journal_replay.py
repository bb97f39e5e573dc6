"""Journal, replay service, resume and restart recovery with real processes on loopback.

Each test starts the plain test source and an adapter group whose adapters
journal their lines (``--journal``) and serve replay requests (``--replay``),
then reads the lines through the client library with a
:class:`client_lib.ReplayClient` as the retransmission hook. Loss is injected
with the adapters' ``drop`` control command (packets journaled, never sent).
Waits are polls with deadlines, never sleeps.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import zmq

from feedha.adapter.core.health_side import FAULT_LIMIT
from feedha.adapter.journal import JournalReader
from feedha.adapter.journal.segment import list_segments
from feedha.client import ChannelSpec, Delivery, GapLost, ReplayClient, Subscriber, SubscriberConfig
from feedha.cluster import control
from feedha.ports import free_ports
from feedha.proto import market_pb2, wire
from feedha.proto.replay import ReplayRequest, ReplayStatus, decode_status, encode_request
from tests.integration.groups import Group, running_group

CHANNEL = "EQ-J"


def group(root: Path, size: int, *, rate: float = 2000, seconds: float = 6) -> AbstractContextManager[Group]:
    return running_group(
        channel=CHANNEL,
        channel_number=7,
        size=size,
        rate=rate,
        seconds=seconds,
        symbols=40,
        journal_root=root,
    )


class Reader:
    """A Subscriber with a ReplayClient hook, collecting deliveries and lost gaps."""

    def __init__(self, spec: ChannelSpec, replays: list[str]) -> None:
        self.replay = ReplayClient({7: replays}, timeout=1.0, budget=5.0)
        self.sub = Subscriber(
            [spec], SubscriberConfig(loss_timeout=3.0), on_retransmission_needed=self.replay
        )
        self.deliveries: list[Delivery] = []
        self.lost: list[GapLost] = []

    def pump(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            for event in self.sub.poll(min(left, 0.05)):
                if isinstance(event, Delivery):
                    self.deliveries.append(event)
                elif isinstance(event, GapLost):
                    self.lost.append(event)

    @property
    def last_seq(self) -> int:
        return self.deliveries[-1].msg_seq if self.deliveries else 0

    def describe(self) -> str:
        """Where the reader stands, for a failure message."""
        return f"last {self.last_seq}, lost {len(self.lost)}, {self.sub.stats()}, {self.replay.stats()}"

    def close(self) -> None:
        self.sub.close()
        self.replay.close()


def _is(g: Group, number: int, predicate: Callable[[dict[str, Any]], bool]) -> bool:
    return predicate(g.status(number))


def _has_dropped(g: Group, number: int, packets: int) -> bool:
    return int(g.status(number)["dropped_packets"]) >= packets


def pump_until(readers: list[Reader], done: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"not done in {timeout}s: {[r.describe() for r in readers]}")
        for reader in readers:
            reader.pump(0.05)


def read_to_the_end(g: Group, readers: list[Reader]) -> int:
    """Pump the readers until the source has sent all and each has it, then a little more
    (anything after the end would be a duplicate); returns what the source sent."""
    pump_until(readers, lambda: g.source is not None and not g.source.alive, 30)
    sent = g.sent()
    pump_until(readers, lambda: all(r.last_seq >= sent for r in readers), 30)
    for reader in readers:
        reader.pump(0.3)
    return sent


def assert_exactly_once_in_order(reader: Reader, first: int, last: int) -> None:
    seqs = [d.msg_seq for d in reader.deliveries]
    assert seqs == list(range(first, last + 1)), f"first gaps/duplicates near {_first_break(seqs, first)}"
    sources = [d.source_seq for d in reader.deliveries]
    assert all(b == a + 1 for a, b in zip(sources, sources[1:], strict=False)), "source_seq not contiguous"
    assert not reader.lost


def _first_break(seqs: list[int], first: int) -> int | None:
    for expected, seq in enumerate(seqs, start=first):
        if seq != expected:
            return expected
    return None


def test_replay_fills_drops_on_one_line_then_on_both_lines(tmp_path: Path) -> None:
    with group(tmp_path, 2, rate=2000, seconds=6) as g:
        g.start_adapter(1, active=True)
        g.start_adapter(2)
        plan = g.plan
        dead = f"tcp://127.0.0.1:{free_ports(1)[0]}"  # nothing listens: the client must fail over
        # One reader hears only line 1, so every packet line 1 drops must come from a journal;
        # the other hears both lines, so only what both lines drop must.
        single = Reader(ChannelSpec(CHANNEL, 7, (plan.adapter(1).line,), start_seq=1), [dead, *plan.replays])
        both = Reader(ChannelSpec(CHANNEL, 7, plan.lines, start_seq=1), [dead, *plan.replays])
        readers = [single, both]
        try:
            g.start_source()
            # The readers are pumped all along, so holes are found and filled while traffic runs.
            pump_until(
                readers, lambda: _is(g, 2, lambda s: s["status"] == "in_sync" and s["published"] > 200), 20
            )
            control(plan.adapter(1).control, "drop", every=3, count=40)
            pump_until(readers, lambda: _is(g, 1, lambda s: s["dropped_packets"] >= 40), 20)
            s1 = g.status(1)
            # Consecutive packets on both lines, sent back to back: the two windows overlap (a
            # backup's line lags the active's by milliseconds), so some messages reach neither
            # line. Strided drops need not: packet boundaries differ between the lines.
            for n in (1, 2):
                control(plan.adapter(n).control, "drop", every=1, count=60)
            for n, dropped in ((1, 100), (2, 60)):
                pump_until(readers, partial(_has_dropped, g, n, dropped), 20)
            sent = read_to_the_end(g, readers)
        finally:
            for reader in readers:
                reader.close()
        assert s1["journaled"] >= s1["published"] > 0
        for reader in readers:
            assert_exactly_once_in_order(reader, 1, sent)
            stats = reader.sub.stats()[CHANNEL]
            replay = reader.replay.stats()
            assert stats.retransmission_requests > 0 and stats.lost == 0 and stats.conflicts == 0
            assert replay.messages > 0 and replay.unfilled == 0
            assert replay.timeouts >= 1 and replay.failovers >= 1, replay  # the dead service was tried first
    # What no line carried: all line 1 dropped for one reader, only what both dropped for the other.
    # (The replay clients' message counts need not order so: a reader hearing both lines may ask for a
    # hole in line 1 before the lagging line 2 fills it.)
    assert single.sub.stats()[CHANNEL].line_holes > both.sub.stats()[CHANNEL].line_holes > 0


@pytest.mark.slow  # 9 s: in CI's slow stage; the default keeps the replay of drops on both lines
def test_resume_from_the_middle_of_the_journal_joins_live_with_no_gap_or_duplicate(tmp_path: Path) -> None:
    with group(tmp_path, 2, rate=2000, seconds=7) as g:
        g.start_adapter(1, active=True, extra=("--replay-max-bytes", "16384"))
        g.start_adapter(2, extra=("--replay-max-bytes", "16384"))
        g.start_source()
        now = g.wait_status(1, lambda s: s["next_msg_seq"] > 4000, 20)["next_msg_seq"]
        start = now // 2
        reader = Reader(ChannelSpec(CHANNEL, 7, g.plan.lines, start_seq=start), list(g.plan.replays))
        try:
            sent = read_to_the_end(g, [reader])
        finally:
            reader.close()
        assert_exactly_once_in_order(reader, start, sent)
        stats = reader.sub.stats()[CHANNEL]
        replay = reader.replay.stats()
        assert stats.retransmission_requests >= 1 and stats.lost == 0 and stats.conflicts == 0
        # The replayed part is what the lines no longer carried when the reader joined (a backup's
        # line runs a report interval behind the active's, so it may carry a little from before
        # `now`), fetched in bounded pages.
        replayed = {d.msg_seq for d in reader.deliveries if d.line == len(g.plan.lines)}
        live = {d.msg_seq for d in reader.deliveries if d.line < len(g.plan.lines)}
        assert min(replayed) == start and replayed and live and max(replayed) < max(live)
        assert replay.messages >= len(replayed) > (now - start) * 0.9 and replay.requests >= 2


def test_replay_service_answers_a_clear_error_for_ranges_it_does_not_have(tmp_path: Path) -> None:
    with group(tmp_path, 1, rate=2000, seconds=1) as g:
        g.start_adapter(1, active=True)
        g.start_source()
        sent = g.sent()
        g.wait_status(1, lambda s: s["journal_last_msg_seq"] == sent, 10)
        sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        sock.linger = 0
        try:
            sock.connect(g.plan.adapter(1).replay)

            def ask(channel: int, first: int, last: int) -> list[bytes]:
                sock.send_multipart([b"", encode_request(ReplayRequest(channel, 9, first, last))])
                assert sock.poll(5000), "no reply"
                frames = sock.recv_multipart()
                assert frames[0] == b""
                return frames[1:]

            frames = ask(7, sent + 10, sent + 20)
            status = decode_status(frames[0])
            assert status.status is ReplayStatus.UNAVAILABLE and len(frames) == 1
            assert (status.oldest_seq, status.newest_seq, status.request_id) == (1, sent, 9)
            assert f"holds 1..{sent}" in status.message
            assert decode_status(ask(8, 1, 2)[0]).status is ReplayStatus.WRONG_CHANNEL
            sock.send_multipart([b"", b"FR\x01"])
            assert sock.poll(5000)
            bad = decode_status(sock.recv_multipart()[1])
            assert bad.status is ReplayStatus.BAD_REQUEST and "28" in bad.message
            frames = ask(7, sent - 5, sent + 5)  # the part it has
            status = decode_status(frames[0])
            assert status.status is ReplayStatus.OK and status.packet_count == len(frames) - 1
            header, blocks = wire.decode_packet(frames[1])
            assert header.is_retransmission and header.channel == 7
            assert [b.msg_seq for b in blocks] == list(range(sent - 5, sent + 1))
        finally:
            sock.close(linger=0)


def test_adapter_killed_and_restarted_recovers_numbering_and_state_from_its_journal(tmp_path: Path) -> None:
    with group(tmp_path, 2, rate=2000, seconds=14) as g:
        ckpt = ("--checkpoint-every", "500")
        g.start_adapter(1, active=True, extra=ckpt)
        g.start_adapter(2, extra=ckpt)
        g.start_source()
        before = g.wait_status(2, lambda s: s["status"] == "in_sync" and s["checkpoints"] >= 2, 20)
        mark = g.status(1)["next_msg_seq"]
        g.wait_status(1, lambda s: s["next_msg_seq"] > mark + 400, 10)  # the backup journaled past `before`
        g.adapters[2].kill()
        # A torn tail, as a crash in the middle of a write leaves it.
        newest = list_segments(g.journal(2))[-1].path
        with newest.open("ab") as segment:
            segment.write(b"\x13torn record\x00\x00\x00")
        mark = g.status(1)["next_msg_seq"]
        g.wait_status(1, lambda s: s["next_msg_seq"] > mark + 1000, 10)  # the channel moves on meanwhile
        restarted = g.start_adapter(2, extra=ckpt)
        recovered = restarted.wait_event("recovered", 5)
        assert recovered["journal_cut_bytes"] > 0 and recovered["journal_cut_reason"]
        assert recovered["checkpoint_msg_seq"] is not None and recovered["records_rolled"] >= 0
        assert recovered["next_msg_seq"] > before["next_msg_seq"] > 1
        assert recovered["symbols"] == before["symbols"]
        after = g.wait_status(2, lambda s: s["status"] == "in_sync" and s["journaled"] > 500, 20)
        assert after["role"] == "backup" and after["next_msg_seq"] > recovered["next_msg_seq"]
        assert g.source is not None and g.source.stop() == 0  # enough seen: no need to play the rest
        g.wait_status(2, lambda s: s["next_msg_seq"] == g.status(1)["next_msg_seq"], 10)
        for proc in g.adapters.values():
            proc.stop()  # SIGTERM: the writers flush their group-commit buffers before exiting
    active = {r.msg_seq: (r.source_seq, r.payload) for r in JournalReader(g.journal(1)).read()}
    backup = {r.msg_seq: (r.source_seq, r.payload) for r in JournalReader(g.journal(2)).read()}
    after_restart = [seq for seq in backup if seq >= recovered["next_msg_seq"]]
    before_crash = [seq for seq in backup if seq < recovered["next_msg_seq"]]
    assert len(after_restart) > 500 and len(before_crash) > 500
    # Before the crash and after the restart, the backup's line carried the active's
    # msg_seq for every source message, with the same conversion state on it.
    mismatched = [seq for seq in backup if active.get(seq, (None,))[0] != backup[seq][0]]
    assert not mismatched, mismatched[:10]
    for seq in after_restart:
        mine, theirs = (market_pb2.MarketUpdate.FromString(j[seq][1]) for j in (backup, active))
        assert (mine.symbol, mine.state) == (theirs.symbol, theirs.state), seq


@contextmanager
def _small_disk(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` for the test (needs root), unmounted after."""
    path.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "feedha-test", str(path)],
                             capture_output=True, check=False)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs: needs root")
def test_an_active_whose_disk_fills_fails_itself_and_the_backup_takes_over_losing_nothing(
    tmp_path: Path,
) -> None:
    # The active's journal is on a disk that fills a second or two in: what it cannot journal
    # it must not send, the faults that follow fail it, and its backup takes over; a
    # subscriber on both lines gets every message once, in order.
    with group(tmp_path, 2, rate=2000, seconds=5) as g, _small_disk(tmp_path / f"{CHANNEL}-1", "512k"):
        g.start_adapter(1, active=True)
        g.start_adapter(2)
        reader = Reader(ChannelSpec(CHANNEL, 7, g.plan.lines, start_seq=1), list(g.plan.replays))
        try:
            g.start_source()
            pump_until([reader], lambda: _is(g, 2, lambda s: s["role"] == "active"), 30)
            failed = g.status(1)
            sent = read_to_the_end(g, [reader])
        finally:
            reader.close()
    # Failed by its faults (the journal's write error, again and again), with nothing on its
    # line that its journal writer did not take first.
    assert failed["role"] == "failed" and failed["internal_errors"] == FAULT_LIMIT, failed
    assert 0 < failed["published_msg_seq"] <= failed["journal_last_msg_seq"] < failed["next_msg_seq"] - 1
    assert 0 < failed["published_msg_seq"] < sent // 2  # it failed early: the backup carried the rest
    assert_exactly_once_in_order(reader, 1, sent)
    assert reader.sub.stats()[CHANNEL].lost == 0
