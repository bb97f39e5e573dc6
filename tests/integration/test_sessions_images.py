"""Images and session boundaries with real processes on loopback.

An adapter group journals its lines and serves replay; a subscriber in this
process that was there from the first message is the reference. The tests
ask a replay service for the channel's image (an image larger than one reply,
paged), collect it from the snapshot loop's line, end the session on the
active's control socket with a backup down or restarted across the boundary,
and attack the snapshot service (a flood of requests, bad parts) and the
schedule (a time zone that does not exist). Waits are polls with deadlines.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import zmq

from feedha.adapter.journal import JournalReader
from feedha.adapter.replay_limits import BURST_S, PEER_REQUESTS_PER_S
from feedha.client import (
    ChannelSpec,
    Delivery,
    ImageAssembler,
    ReplayClient,
    SessionEnded,
    SessionStarted,
    Subscriber,
    SubscriberConfig,
)
from feedha.cluster import control
from feedha.ports import free_ports
from feedha.proto import market_pb2
from feedha.proto.replay import ReplayStatus, decode_status, encode_request, snapshot_request
from tests.integration.groups import Group, running_group
from tests.integration.waiting import wait_until

CHANNEL = "EQ-S"
NUMBER = 9
WAIT = 60.0


def _wait(check: Callable[[], Any], timeout: float, what: str) -> Any:
    return wait_until(check, timeout, what, interval=0.05)


class Reference:
    """A subscriber on every line from the first message: each symbol's newest state, and the sessions."""

    def __init__(self, group: Group) -> None:
        spec = ChannelSpec(CHANNEL, NUMBER, group.plan.lines)
        self.replay = ReplayClient({NUMBER: group.plan.replays})
        self.sub = Subscriber(
            [spec], SubscriberConfig(loss_timeout=5.0), on_retransmission_needed=self.replay
        )
        self.states: dict[str, bytes] = {}
        self.last = 0
        self.events: list[Any] = []

    def pump(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for event in self.sub.poll(0.05):
                self.events.append(event)
                if isinstance(event, Delivery):
                    self.states[event.update.symbol] = event.update.state.SerializeToString(
                        deterministic=True
                    )
                    self.last = event.msg_seq
                elif isinstance(event, SessionStarted):
                    self.last = event.first_msg_seq - 1
                    for symbol, data in self.states.items():
                        old = market_pb2.SymbolState.FromString(data)
                        rolled = market_pb2.SymbolState(last=old.last, bid=old.bid, ask=old.ask)
                        self.states[symbol] = rolled.SerializeToString(deterministic=True)

    def close(self) -> None:
        self.sub.close()
        self.replay.close()


def _states(image_symbols: dict[str, market_pb2.SymbolState]) -> dict[str, bytes]:
    return {s: state.SerializeToString(deterministic=True) for s, state in image_symbols.items()}


def _settle(group: Group, reference: Reference) -> int:
    """Pump until the source ended and the reference has everything the active numbered."""
    sent = group.sent(timeout=60)
    assert sent > 0
    newest = _wait(
        lambda: (
            reference.pump(0.3),
            n := int(group.status(1)["next_msg_seq"]) - 1,
            n if reference.last >= n else 0,
        )[2],
        WAIT,
        "the reference to catch up",
    )
    return int(newest)


@pytest.mark.slow  # over 10 s: with the drills, so the default suite stays under 10 minutes
def test_an_image_larger_than_one_reply_and_the_snapshot_loop_equal_the_reference(tmp_path: Path) -> None:
    snapshot_line = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    with running_group(
        channel=CHANNEL,
        channel_number=NUMBER,
        size=2,
        rate=3000,
        seconds=4,
        symbols=3000,
        journal_root=tmp_path,
    ) as group:
        extra = ["--replay-max-bytes", "65536", "--checkpoint-interval", "1"]
        group.start_adapter(
            1, active=True, extra=[*extra, "--snapshot-line", snapshot_line, "--snapshot-interval", "0.3"]
        )
        group.start_adapter(2, extra=extra)
        reference = Reference(group)
        try:
            group.start_source()
            newest = _settle(group, reference)
            replay = ReplayClient({NUMBER: group.plan.replays})
            image = _wait(
                lambda: (i := replay.image(NUMBER)) is not None and i.msg_seq == newest and i, WAIT, "image"
            )
            requests = replay.stats().requests
            replay.close()
        finally:
            reference.close()
        # Nearly 3,000 symbols traded: ~220 KiB in parts of at most 64 KiB, one part a reply
        # (how many symbols traded depends on the rate the source reached on this machine).
        size = sum(len(state.SerializeToString()) + len(symbol) for symbol, state in image.symbols.items())
        assert len(image.symbols) > 2500 and size > 2 * 65536 and requests >= size // 65536
        assert _states(image.symbols) == reference.states
        assert image.session == 1
        # The snapshot loop publishes the same image on its own line, again and again.
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        sock = ctx.socket(zmq.SUB)
        sock.linger = 0
        sock.subscribe(CHANNEL.encode())
        sock.connect(snapshot_line)
        try:
            assembler = ImageAssembler(NUMBER)

            def collected() -> Any:
                while sock.poll(100):
                    _topic, part = sock.recv_multipart()
                    image = assembler.add(part)
                    if image is not None:
                        return image
                return None

            looped = _wait(collected, WAIT, "an image on the snapshot line")
        finally:
            sock.close(linger=0)
        assert looped.msg_seq == newest and _states(looped.symbols) == reference.states
        assert group.status(1)["snapshot_rounds"] > 0


def _session_of(group: Group, number: int) -> int:
    return int(group.status(number)["session"])


def _boundaries(path: Path) -> list[int]:
    return [r.msg_seq for r in JournalReader(path).read() if r.is_session_boundary]


@pytest.mark.slow  # over 10 s: with the drills, so the default suite stays under 10 minutes
def test_a_session_end_with_a_backup_down_and_one_restarted_after_it(tmp_path: Path) -> None:
    with running_group(
        channel=CHANNEL,
        channel_number=NUMBER,
        size=3,
        rate=1000,
        seconds=14,
        symbols=50,
        journal_root=tmp_path,
    ) as group:
        for number in (1, 2, 3):
            group.start_adapter(number, active=number == 1)
        reference = Reference(group)
        try:
            group.start_source()
            _wait(lambda: (reference.pump(0.2), reference.last > 2000)[1], WAIT, "traffic")
            group.adapters[3].kill()  # down across the boundary
            reply = control(group.plan.adapter(1).control, "session_end", reason="test")
            assert reply["ok"] and reply["proposed_session"] == 2
            _wait(lambda: _session_of(group, 1) == _session_of(group, 2) == 2, WAIT, "the boundary")
            reference.pump(1.0)
            group.start_adapter(3)  # restarted on its journal, which ends before the boundary
            recovered = group.adapters[3].wait_event("recovered", 10)
            assert recovered["session"] == 1
            _wait(
                lambda: (s := group.status(3))["status"] == "in_sync" and s["session"] == 2,
                WAIT,
                "adapter 3 to repair into session 2",
            )
            group.adapters[2].kill()  # and one restarted after the boundary: its journal has it
            group.start_adapter(2)
            assert group.adapters[2].wait_event("recovered", 10)["session"] == 2
            _wait(lambda: group.status(2)["status"] == "in_sync", WAIT, "adapter 2 back in sync")
            newest = _settle(group, reference)
        finally:
            reference.close()
        digests = {group.status(n)["digest"] for n in (1, 2, 3)}
        assert len(digests) == 1, f"the adapters disagree: {[group.status(n) for n in (1, 2, 3)]}"
        ended = [e for e in reference.events if isinstance(e, SessionEnded)]
        started = [e for e in reference.events if isinstance(e, SessionStarted)]
        assert [(e.session, e.reason) for e in ended] == [(1, "operator")] and started[0].session == 2
        (at,) = {e.msg_seq for e in ended}
        assert _boundaries(group.journal(1)) == _boundaries(group.journal(2)) == [at]
        assert _boundaries(group.journal(3)) == []  # down then; a hole there, nothing else
        assert newest > at
        # After the boundary every symbol's daily fields counted from zero again.
        first_after: dict[str, market_pb2.MarketUpdate] = {}
        for event in reference.events:
            if isinstance(event, Delivery) and event.msg_seq > at:
                first_after.setdefault(event.update.symbol, event.update)
        assert first_after
        for update in first_after.values():  # its own trades and nothing from the session before
            trades = [e for e in update.entries if e.type == market_pb2.ENTRY_TYPE_TRADE]
            assert update.state.trade_count == len(trades)
            assert update.state.volume == sum(e.size for e in trades)


def test_snapshot_requests_a_flood_and_bad_parts_are_bounded_off_the_adapters_loop(tmp_path: Path) -> None:
    with running_group(
        channel=CHANNEL,
        channel_number=NUMBER,
        size=2,
        rate=1000,
        seconds=10,
        symbols=50,
        journal_root=tmp_path,
    ) as group:
        for number in (1, 2):
            group.start_adapter(number, active=number == 1, extra=["--checkpoint-interval", "1"])
        group.start_source()
        _wait(lambda: group.status(1)["next_msg_seq"] > 1000, WAIT, "traffic")
        endpoint = group.plan.replays[0]
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        sock = ctx.socket(zmq.DEALER)
        sock.linger = 0
        sock.rcvhwm = 0
        sock.connect(endpoint)
        try:
            flood = 3000
            started = time.monotonic()
            for i in range(flood):
                sock.send_multipart([b"", encode_request(snapshot_request(NUMBER, i + 1))])
            statuses: dict[ReplayStatus, int] = {}
            last_reply = started
            while sum(statuses.values()) < flood and sock.poll(3000):  # until the replies stop coming
                frames = sock.recv_multipart()
                last_reply = time.monotonic()
                status = decode_status(frames[1]).status
                statuses[status] = statuses.get(status, 0) + 1
            # A part past the end, an image no longer held, a channel not served.
            for request in (
                snapshot_request(NUMBER, 1, part=999),
                snapshot_request(NUMBER, 2, msg_seq=3),
                snapshot_request(NUMBER + 1, 3),
            ):
                sock.send_multipart([b"", encode_request(request)])
                assert sock.poll(5000)
                reply = decode_status(sock.recv_multipart()[1])
                assert reply.status in (ReplayStatus.UNAVAILABLE, ReplayStatus.WRONG_CHANNEL), reply
                assert reply.message
        finally:
            sock.close(linger=0)
        # Over the budget: refused at once (BUSY); past the socket's queue: dropped, never answered.
        # One peer gets its burst and its rate over the time the flood took, however fast the
        # machine refuses the rest (a slow machine answers fewer BUSY a second, never more OK).
        ok, busy = statuses.get(ReplayStatus.OK, 0), statuses.get(ReplayStatus.BUSY, 0)
        allowed = PEER_REQUESTS_PER_S * (BURST_S + (last_reply - started)) + 1
        assert 0 < ok <= allowed < busy, (ok, busy, allowed)
        assert ok + busy <= flood and set(statuses) == {ReplayStatus.OK, ReplayStatus.BUSY}
        assert group.status(1)["replay_refused"] >= busy
        # The flood was served off the loop: no election, the backup still in sync.
        assert group.status(1)["role"] == "active" and group.status(2)["status"] == "in_sync"
        assert group.status(1)["term"] == group.status(2)["term"] == 1


def test_a_session_time_in_a_zone_that_does_not_exist_is_refused_by_name() -> None:
    base = [
        sys.executable,
        "-m",
        "feedha.adapter",
        "--channel",
        "X",
        "--channel-number",
        "1",
        "--adapter",
        "1",
    ]
    base += ["--source", "tcp://127.0.0.1:1", "--source-stream", "A", "--source-stream-number", "1"]
    base += ["--line", "tcp://127.0.0.1:2", "--sync", "tcp://127.0.0.1:3"]
    for extra, says in (
        (
            ["--session-end", "17:00", "--session-timezone", "Mars/Olympus_Mons"],
            "unknown time zone 'Mars/Olympus_Mons'",
        ),
        (["--session-end", "25:61"], "HH:MM[:SS]"),
        (["--snapshot-line", "tcp://127.0.0.1:4"], "needs a journal_dir"),
    ):
        done = subprocess.run([*base, *extra], capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 2 and says in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


@pytest.mark.slow  # over 10 s: with the drills, so the default suite stays under 10 minutes
def test_the_late_join_drill_short_run() -> None:
    """A short run of ``feedha drill late-join`` (the full one is a slow test)."""
    done = subprocess.run(
        [sys.executable, "-m", "feedha", "drill", "late-join", "--seconds", "6", "--json"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    result = __import__("json").loads(done.stdout)
    assert result["joiners"] >= 2 and result["state_mismatches"] == 0 and result["lost"] == 0
    assert result["conflicts"] == 0 and result["rollover_msg_seqs"] == 1
    assert all(j["compared"] > 0 for j in result["joiner_details"])


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_late_join_drill() -> None:
    """The issue's run: ``feedha drill late-join --seconds 20 --kill active --session-end-at 0.7 --json``."""
    argv = ["drill", "late-join", "--seconds", "20", "--kill", "active", "--session-end-at", "0.7", "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "feedha", *argv], capture_output=True, text=True, timeout=500, check=False
    )
    assert done.returncode == 0, done.stderr + done.stdout
    result = __import__("json").loads(done.stdout)
    assert result["joiners"] >= 2
    assert (result["state_mismatches"], result["lost"], result["conflicts"], result["rollover_msg_seqs"]) == (
        0,
        0,
        0,
        1,
    )
    kill = next(step for step in result["steps"] if step["step"] == "kill")
    joins = [step for step in result["steps"] if step["step"].startswith("join-")]
    assert any(step["at"] > kill["at"] for step in joins)  # one joined after the failover
