"""Adapter cores of one channel in one process, on a simulated clock, with no sockets.

A pair harness (CONTRIBUTING.md, "Tests") for the whole adapter: :class:`CoreGroup`
runs two or three real :class:`~adapter.core.AdapterCore` objects (real
engines, real sync rules, the sync bus encoded and decoded as bytes) against
a deterministic source, and one real :class:`~client_lib.ChannelArbiter`
joined to every line, which fills holes from the adapters' journals through
the real :class:`~adapter.replay.ReplayService`. With ``delay_s`` every
adapter also serves its delayed line (its journal tailed as the runner does)
and a second arbiter follows the delayed lines, filling holes with delayed
ranges. Where the runner would run the source pump (an active whose core's plan
allows it) the harness runs its Python twin (:func:`~adapter.core.pump_reference.pump_frames`)
and books it through ``on_pumped`` as the runner does; ``pump=False`` takes every
frame through ``on_source``. Time advances in steps of ``STEP_S``; faults are
explicit: :meth:`CoreGroup.kill` (SIGKILL: state, unsent input and the journal's
records not written yet are gone), :meth:`CoreGroup.stall` (SIGSTOP/SIGCONT: input
queues up meanwhile), :meth:`CoreGroup.restart` (a new core recovered from the dead
one's journal), operator commands and poison frames. A core's
:class:`~adapter.core.actions.BurnCpu` (the ``busy`` fault injection) is a long turn:
the actions after it are carried out ``seconds`` later, the adapter takes no turn
meanwhile while its input queues up, its keepalive (a timer turn's) repeats the
active's report unless the turn holds the interpreter, and while it holds the
interpreter its journal's flusher writes nothing and its replay service answers
nobody. A journal writes what was appended at the end of each step (its
flusher's interval is about a step).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from feedha.adapter.core import (
    AdapterCore,
    BurnCpu,
    CoreConfig,
    JournalControl,
    JournalRecords,
    Publish,
    PublishConflated,
    PublishDelayed,
    RecordTerm,
    ReplyAdmin,
    ReplyControl,
    SendSync,
    Status,
    WriteCheckpoint,
)
from feedha.adapter.core.commands import Command
from feedha.adapter.core.health import MachineSample
from feedha.adapter.core.pump_reference import LineIdentity, pump_frames
from feedha.adapter.core.pumping import PumpMode
from feedha.adapter.core.session import SessionSchedule
from feedha.adapter.core.sync_types import HEARTBEAT_INTERVAL_S
from feedha.adapter.core.syncbus import StreamState, SyncDecodeError, decode_sync, encode_sync
from feedha.adapter.formats.feedha_fix.choice import make_engine
from feedha.adapter.formats.feedha_fix.table import ConverterTable
from feedha.adapter.formats.fix44.engine import Fix44Engine
from feedha.adapter.formats.itch50.day import make_itch_capture
from feedha.adapter.formats.itch50.engine import Itch50Engine
from feedha.adapter.journal.format import ControlRecord, Record
from feedha.adapter.replay import ReplayService
from feedha.client.arbiter import ChannelArbiter
from feedha.client.events import ArbiterConfig, Delivery, GapLost, Purged, RetransmissionNeeded
from feedha.proto import fix, moldudp64, wire
from feedha.proto.replay import KIND_DELAYED_RANGE, KIND_RANGE, ReplayRequest, encode_request
from tests import fix44_capture
from tests.fix44_capture import Capture

STEP_S: Final = 0.001
EPOCH_NS: Final = 1_790_000_000_000_000_000
CHANNEL: Final = 1
STREAM: Final = 1
SYMBOLS: Final = ("AAPL", "IBM", "MSFT", "NVDA", "ORCL", "SAP", "TSLA", "VOD")
SOURCE_TOPIC: Final = b"A-Z"
SOURCE_BUDGET: Final = 64  # frames an adapter takes per step (the runner's SOURCE_BATCH_FRAMES)


class Source:
    """A seeded market: ``rate`` messages/s in frames of one step's worth, numbered gap-free."""

    def __init__(self, *, rate: float, seed: int = 7) -> None:
        self.rate = rate
        self._rng = random.Random(seed)
        self._due = 0.0
        self.next_seq = 1
        self.poison: deque[bytes] = deque()  # bytes to slip into the next frame (no source_seq used)
        self.skipped: set[int] = set()  # source_seqs taken by poison messages: never delivered

    def poison_message(self, make: Callable[[int], bytes]) -> int:
        """Slip ``make(seq)`` into the next frame in place of message ``seq``; returns seq."""
        seq = self.next_seq
        self.next_seq += 1
        self.skipped.add(seq)
        self.poison.append(make(seq))
        return seq

    def expected(self) -> list[int]:
        """The source_seqs a client must get: every normal message sent."""
        return [seq for seq in range(1, self.next_seq) if seq not in self.skipped]

    def frame(self) -> bytes | None:
        """The frame of one step, or ``None`` when nothing is due."""
        self._due += self.rate * STEP_S
        parts = list(self.poison)
        self.poison.clear()
        while self._due >= 1:
            self._due -= 1
            parts.append(self.message(self.next_seq))
            self.next_seq += 1
        return b"".join(parts) or None

    def message(self, seq: int, *, symbol: str | None = None, size: int | None = None) -> bytes:
        """The market-data message numbered ``seq`` (random unless symbol or size are given)."""
        rng = self._rng
        kind = rng.choice((fix.ENTRY_TRADE, fix.ENTRY_TRADE, fix.ENTRY_BID, fix.ENTRY_OFFER))
        entry = fix.SourceEntry(kind, f"{rng.randint(9000, 11000) / 100:.2f}", size or rng.randint(1, 500))
        symbol = symbol or rng.choice(SYMBOLS)
        return fix.encode_market_data(
            source_seq=seq, symbol=symbol, event_time_ns=EPOCH_NS + seq, entries=[entry]
        )


class Fix44Source(Source):
    """A seeded fix44 market: multi-symbol incremental refreshes and full refreshes (simplefix-written)."""

    def __init__(self, *, rate: float, seed: int = 7) -> None:
        super().__init__(rate=rate, seed=seed)
        self.capture = Capture(level_symbols=set(FIX44_SYMBOLS[::2]))
        self._levels: dict[tuple[str, str], int] = {}
        self._prices: dict[tuple[str, str], list[str]] = {}
        self.sent: list[bytes] = []  # every message, in order (the reference rebuilds from them)

    def message(self, seq: int, *, symbol: str | None = None, size: int | None = None) -> bytes:
        rng, capture = self._rng, self.capture
        if rng.random() < 0.05:
            message = fix44_capture._full_refresh(
                rng, seq, rng.choice(FIX44_SYMBOLS), capture, self._levels, self._prices, 10
            )
        else:
            message = fix44_capture._incremental(
                rng, seq, list(FIX44_SYMBOLS), capture, self._levels, self._prices, 10
            )
        self.sent.append(message)
        return message


FIX44_SYMBOLS: Final = tuple(f"S{i:04d}" for i in range(24))


class ItchSource(Source):
    """A seeded ITCH 5.0 day played as MoldUDP64 packets (one a step; the messages numbered from 1)."""

    def __init__(self, *, rate: float, seed: int = 7) -> None:
        super().__init__(rate=rate, seed=seed)
        self.capture = make_itch_capture(symbols=60, orders=6000, seed=seed)
        self.messages = list(moldudp64.read_binary_file(self.capture.data))
        self.sent: list[bytes] = []  # every message, in order (the reference rebuilds from them)

    def frame(self) -> bytes | None:
        self._due += self.rate * STEP_S
        first = self.next_seq
        batch: list[bytes] = []
        while self._due >= 1 and self.next_seq <= len(self.messages):
            self._due -= 1
            message = self.messages[self.next_seq - 1]
            if message[:1] not in b"RAFECXDUPQ":  # counted and skipped: no block
                self.skipped.add(self.next_seq)
            batch.append(message)
            self.next_seq += 1
        self.sent += batch
        return moldudp64.encode_packet("HARNESS", first, batch) if batch else None


class _BusyTurn(Exception):
    """A BurnCpu was carried out: the rest of the adapter's turn comes after the long one."""


class JournalRefused(OSError):
    """A journal write that failed (:attr:`MemoryJournal.refuse_from`): the runner books it as a fault."""


class MemoryJournal:
    """An adapter's journal in memory: what its JournalRecords, control records and checkpoints wrote.

    With ``refuse_from`` set, the first write that reaches that msg_seq or beyond fails
    (:class:`JournalRefused`, nothing of it written) and ``refused`` says what it held;
    the writes after it succeed (a failure that does not stick).
    """

    def __init__(self) -> None:
        self.records: dict[int, Record] = {}
        self.controls: list[ControlRecord] = []  # in the order written
        self.checkpoint: Any = None
        self.term = 0
        self.last = 0
        self.refuse_from: int | None = None
        self.refused: range | None = None
        self.written = (0, 0)  # (last msg_seq, controls) the flusher wrote: what survives a SIGKILL

    def flush(self) -> None:
        """The flusher wrote everything appended so far."""
        self.written = (self.last, len(self.controls))

    def lose_unwritten(self) -> None:
        """A SIGKILL: what was appended but not written yet is gone."""
        last, controls = self.written
        for msg_seq in [s for s in self.records if s > last]:
            del self.records[msg_seq]
        del self.controls[controls:]
        self.last = last

    def tail(self, from_seq: int) -> list[Record]:
        """The records from ``from_seq`` on (a tailer's read; the journal only grows at its end)."""
        return [self.records[s] for s in range(max(from_seq, 1), self.last + 1) if s in self.records]

    def seek_time(self, time_ns: int) -> int:
        """The first msg_seq written at or after ``time_ns`` (after the last: last + 1)."""
        return next((s for s in sorted(self.records) if self.records[s].time_ns >= time_ns), self.last + 1)

    def append_control(self, action: JournalControl) -> None:
        self.controls.append(ControlRecord(action.flags, self.last, action.time_ns, action.payload))

    def append_batch(
        self,
        first_msg_seq: int,
        time_ns: int,
        source_stream: int,
        source_seqs: Sequence[int],
        payloads: Sequence[bytes],
    ) -> None:
        """The writer's ``append_batch`` (the source pump's path)."""
        self.append(JournalRecords(first_msg_seq, time_ns, source_stream, source_seqs, payloads))

    def append(self, action: JournalRecords) -> None:
        last = action.first_msg_seq + len(action.payloads) - 1
        if self.refuse_from is not None and last >= self.refuse_from:
            self.refuse_from, self.refused = None, range(action.first_msg_seq, last + 1)
            raise JournalRefused("disk full")
        for i, (seq, payload) in enumerate(zip(action.source_seqs, action.payloads, strict=True)):
            msg_seq = action.first_msg_seq + i
            assert msg_seq > self.last, f"journal msg_seq {msg_seq} after {self.last}: it must increase"
            self.records[msg_seq] = Record(
                msg_seq, action.time_ns, action.source_stream, seq, payload, action.flags
            )
            self.last = msg_seq

    def read(
        self, from_seq: int = 0, to_seq: int | None = None, *, controls: list[ControlRecord] | None = None
    ) -> Iterator[Record]:
        last = max(self.records, default=0) if to_seq is None else to_seq
        if controls is not None:
            controls.extend(c for c in self.controls if from_seq - 1 <= c.after_seq <= last)
        return (self.records[s] for s in sorted(self.records) if from_seq <= s <= last)

    def bounds(self) -> tuple[int, int]:
        return (min(self.records), max(self.records)) if self.records else (0, 0)


@dataclass
class Member:
    """One adapter of the group and what surrounds it: inboxes, line, journal, events."""

    number: int
    core: AdapterCore
    journal: MemoryJournal
    source_inbox: deque[bytes] = field(default_factory=deque)
    sync_inbox: deque[bytes] = field(default_factory=deque)
    packets: list[bytes] = field(default_factory=list)
    delayed_packets: list[bytes] = field(default_factory=list)
    conflated_packets: list[bytes] = field(default_factory=list)
    events: list[Status] = field(default_factory=list)
    alive: bool = True
    stalled_until: float = 0.0
    lose_frames: int = 0  # source frames its connection drops (a local source gap)
    busy_until: float | None = None  # in a long turn (BurnCpu) until then
    busy_gil: bool = False  # ... holding the interpreter: the flusher and the replay service wait
    deferred: list[Any] = field(default_factory=list)  # the long turn's actions after BurnCpu
    keepalive: StreamState | None = None  # the report its keepalive repeats meanwhile
    next_keepalive: float = 0.0

    @property
    def status(self) -> dict[str, Any]:
        return self.core.status()

    def roles(self) -> list[str]:
        return [e.fields["new"] for e in self.events if e.event == "role"]


class CoreGroup:
    """An adapter group, a source and an arbitrating client on one simulated clock.

    Args:
        size: adapters; number 1 is configured active.
        rate: source messages per second.
        penalties: health penalty per adapter number.
        journal: whether the adapters journal (and serve replays from it).
        schedule: the adapters' daily session end (the simulated wall clock is ``EPOCH_NS + now``).
        delay_s: every adapter serves a delayed line with this delay (None: none).
        margin_s: the purge margin of the delayed lines.
        fix44: the source speaks fix44 and the adapters convert it into books.
        itch50: the source speaks ITCH 5.0 over MoldUDP64; the adapters keep market-by-order books.
        conflate_s: every adapter serves a conflated line with this interval (None: none).
        pump: the source pump runs where the runner would run it (its Python twin).
        budgets: adapter number -> the bytes its conversion tables may count (as
            ``--memory-budget`` less the base sets it; absent: the state's default, not announced).
    """

    def __init__(
        self,
        size: int,
        *,
        rate: float = 2000,
        penalties: dict[int, float] | None = None,
        journal: bool = True,
        schedule: SessionSchedule | None = None,
        delay_s: float | None = None,
        margin_s: float = 0.2,
        fix44: bool = False,
        itch50: bool = False,
        conflate_s: float | None = None,
        pump: bool = True,
        budgets: dict[int, int] | None = None,
    ) -> None:
        self.budgets = budgets or {}
        self.conflate_s = conflate_s
        self.pump = pump
        self.pumped: dict[PumpMode, int] = {}  # source messages the pump twin took, by mode
        self.faults: list[tuple[int, str]] = []  # (adapter, where): the runner's loop caught an error
        self.schedule = schedule
        self.now = 0.0
        self.delay_s, self.margin_s = delay_s, margin_s
        self.delayed_client = ChannelArbiter(
            ArbiterConfig(channel=CHANNEL, fill_timeout=0.05, loss_timeout=2.0, delayed=True)
        )
        self.delayed_delivered: dict[int, tuple[int, int]] = {}  # msg_seq -> (source_stream, source_seq)
        self.purged: dict[int, int] = {}  # msg_seq -> purge_id, as the delayed client reported them
        self.delayed_lost = self.delayed_duplicates = 0
        self.delayed_lost_at: dict[int, float] = {}  # msg_seq -> when the delayed client gave it up
        self.delayed_carried_at: dict[int, float] = {}  # msg_seq -> when a delayed line first carried it
        self.replies: list[dict[str, Any]] = []  # purge replies, at once or later (ReplyAdmin)
        self.fix44 = fix44
        self.itch50 = itch50
        self.source = (
            Fix44Source(rate=rate) if fix44 else ItchSource(rate=rate) if itch50 else Source(rate=rate)
        )
        self.table = ConverterTable.load()
        self.penalties = penalties or {}
        self.journaling = journal
        self.size = size
        self.members: dict[int, Member] = {}
        self.client = ChannelArbiter(ArbiterConfig(channel=CHANNEL, fill_timeout=0.05, loss_timeout=2.0))
        self.delivered: dict[int, int] = {}  # msg_seq -> source_seq, as the client delivered them
        self.session_ends: dict[int, int] = {}  # msg_seq -> source_seq of the end-of-session blocks
        self._last_delivered = 0
        self.lost = self.duplicates = self.out_of_order = 0
        self.leaderless_s = 0.0  # the longest stretch with no working active (simulated seconds)
        self._leaderless_since: float | None = None
        self._had_leader = False
        for number in range(1, size + 1):
            self.start(number)

    def __repr__(self) -> str:
        roles = {n: m.core.sync.role.value for n, m in self.members.items() if m.alive}
        return f"<CoreGroup [now={self.now:.3f}, roles={roles}, delivered={len(self.delivered)}]>"

    # ---- faults and commands ---------------------------------------------------------------

    def start(self, number: int, *, term: int = 0, journal: MemoryJournal | None = None) -> Member:
        config = CoreConfig(
            channel_number=CHANNEL,
            adapter=number,
            source_stream_number=STREAM,
            want_active=number == 1,
            term=term,
            health_penalty=self.penalties.get(number, 0.0),
            journal=self.journaling,
            fault_injection=True,
            group_size=self.size,
            session_schedule=self.schedule,
            delay_s=self.delay_s,
            purge_margin_s=self.margin_s,
            conflate_interval_s=self.conflate_s,
            table_budget=self.budgets.get(number, 0),
        )
        engine = Fix44Engine() if self.fix44 else Itch50Engine() if self.itch50 else make_engine(self.table)
        if number in self.budgets:
            engine.state.table_budget = self.budgets[number]
        core = AdapterCore(config, engine, now=self.now)
        journal = journal or MemoryJournal()
        if self.journaling and (journal.records or journal.controls):
            core.recover(
                journal.checkpoint, journal, journal_last_msg_seq=journal.bounds()[1], term=journal.term
            )
        if self.delay_s is not None:  # as the runner does after a restart: skip what was due while down
            core.delayed.start_at(journal.seek_time(self._wall_ns() - round(self.delay_s * 1e9)))
        core.on_machine_sample(MachineSample(available_memory_mb=4096.0, cpu_percent=10.0))
        member = self.members[number] = Member(number, core, journal)
        return member

    def kill(self, number: int) -> None:
        """SIGKILL: the adapter stops; what it held and had not sent is gone (journal records too)."""
        member = self.members[number]
        member.alive = False
        member.busy_until, member.deferred, member.keepalive = None, [], None
        member.journal.lose_unwritten()

    def stall(self, number: int, seconds: float) -> None:
        """SIGSTOP for ``seconds``, then SIGCONT: input queues up meanwhile."""
        self.members[number].stalled_until = self.now + seconds

    def restart(self, number: int, *, term: int = 0) -> Member:
        """Start the adapter again on its journal (a restarted process)."""
        old = self.members[number]
        assert not old.alive, "kill it first"
        return self.start(number, term=term, journal=old.journal)

    def command(self, number: int, command: Command) -> dict[str, Any]:
        member = self.members[number]
        reply, actions = member.core.on_command(command, now=self.now, wall_ns=self._wall_ns())
        try:
            self._carry_out(member, actions)
        except _BusyTurn:
            pass
        if "purge_id" in reply and not reply.get("deferred"):
            self.replies.append(reply)
        return reply

    # ---- running -------------------------------------------------------------------------

    def run(self, seconds: float, *, source: bool = True) -> None:
        end = self.now + seconds
        while self.now < end - STEP_S / 2:
            self.step(source=source)

    def run_until(self, condition: Callable[[], bool], *, within: float) -> float:
        """Step until ``condition()`` holds; returns the simulated time it took (fails after ``within``)."""
        start = self.now
        while not condition():
            assert self.now - start < within, f"not within {within}s: {self!r}"
            self.step()
        return self.now - start

    def step(self, *, source: bool = True) -> None:
        self.now += STEP_S
        frame = self.source.frame() if source else None
        for member in self.members.values():
            if member.alive and frame is not None:
                if member.lose_frames:
                    member.lose_frames -= 1
                else:
                    member.source_inbox.append(frame)
        for member in self.members.values():
            if member.alive and member.busy_until is not None:
                self._busy(member)
            if member.alive and self.now >= member.stalled_until:
                self._turn(member)
        for member in self.members.values():
            if member.alive and not (member.busy_until is not None and member.busy_gil):
                member.journal.flush()  # the flusher's interval: about a step
        self._client_timers()
        self._watch_leader()

    def _busy(self, member: Member) -> None:
        # A long turn: its keepalive repeats the active's report (a thread: not while the turn
        # holds the interpreter); once over, the rest of its actions go out (and the adapter
        # takes its next turn).
        if self.now < (member.busy_until or 0.0):
            if member.keepalive is not None and not member.busy_gil and self.now >= member.next_keepalive:
                member.next_keepalive = self.now + HEARTBEAT_INTERVAL_S
                self._carry_out(member, [SendSync(member.keepalive)])
            return
        deferred = member.deferred
        member.busy_until, member.deferred, member.keepalive = None, [], None
        try:
            self._carry_out(member, deferred)
        except _BusyTurn:
            pass

    def _watch_leader(self) -> None:
        # A stalled active is no leader: its line carries nothing meanwhile.
        working = [m for m in self.members.values() if m.alive and self.now >= m.stalled_until]
        if any(m.core.sync.role.value == "active" for m in working):
            self._leaderless_since = None
            self._had_leader = True
        elif not self._had_leader:
            return  # the group's start: nobody was active yet
        elif self._leaderless_since is None:
            self._leaderless_since = self.now
        else:
            self.leaderless_s = max(self.leaderless_s, self.now - self._leaderless_since)

    def _turn(self, member: Member) -> None:
        try:
            self._turn_parts(member)
        except _BusyTurn:
            pass  # the rest of the turn comes after the long one (the next turn)

    def _turn_parts(self, member: Member) -> None:
        # One turn of the runner's loop: sync bus, source (bounded, while allowed), tick.
        core, wall_ns = member.core, self._wall_ns()
        while member.sync_inbox:
            try:
                message = decode_sync(member.sync_inbox.popleft(), channel=CHANNEL)
            except SyncDecodeError:
                core.on_sync_garbage()
                continue
            self._carry_out(member, core.on_sync(message, now=self.now, wall_ns=wall_ns))
        if self.pump:
            self._pump(member, wall_ns)
        read = 0
        for read in range(1, SOURCE_BUDGET + 1):
            if not member.source_inbox or not core.reads_source(self.now):
                read -= 1
                break
            frame = member.source_inbox.popleft()
            self._carry_out(member, core.on_source([SOURCE_TOPIC, frame], now=self.now, wall_ns=wall_ns))
        if read and not member.source_inbox:  # the runner: every frame there was is read
            self._carry_out(member, core.on_source_drained(now=self.now, wall_ns=wall_ns))
        start = core.delayed_wants(wall_ns=wall_ns)
        if start is not None:  # the runner's journal tailer (DelayedLineSocket.feed)
            core.on_delayed_records(member.journal.tail(start), caught_up=True)
        keepalive = core.keepalive_report(self.now)  # the runner's keepalive of a long timer turn
        try:
            self._carry_out(member, core.on_tick(now=self.now, wall_ns=wall_ns))
        except _BusyTurn:
            member.keepalive, member.next_keepalive = keepalive, self.now + HEARTBEAT_INTERVAL_S
            raise

    def _pump(self, member: Member, wall_ns: int) -> None:
        # The runner's source pump (its Python twin), where the core's plan allows it: the
        # active's packets go out, a backup's come back for its gate (on_pumped admits them).
        core = member.core
        plan = core.pump_plan(self.now)
        if plan is None or not member.source_inbox:
            return

        def waiting() -> Iterator[list[bytes]]:
            while member.source_inbox:  # taken one by one: what the pump stops before stays queued
                yield [SOURCE_TOPIC, member.source_inbox.popleft()]

        engine, config = core.engine, core.config
        identity = LineIdentity(config.channel_number, config.adapter, config.source_stream_number,
                                config.max_packet_bytes)  # fmt: skip
        frame_of = engine.source_frame if self.itch50 else None
        pumped, packets = pump_frames(
            plan, waiting(), run=engine.run_function(), frame_of=frame_of,
            journal=member.journal.append_batch if plan.journal else None,
            line=identity, wall_ns=wall_ns,
            now_ns=round(self.now * 1e9),
        )  # fmt: skip
        self.pumped[plan.mode] = self.pumped.get(plan.mode, 0) + pumped.messages
        if plan.mode is PumpMode.SEND:
            self._carry_out(member, [Publish(packet) for packet in packets])
        try:  # the runner's pump turn: what the core booked is carried out, then the error raised
            self._carry_out_all(member, core.on_pumped(pumped, plan.mode, now=self.now, wall_ns=wall_ns))
            if pumped.error is not None:
                raise pumped.error
        except JournalRefused:
            self._fault(member, "the source pump")

    def _carry_out(self, member: Member, actions: Sequence[Any]) -> None:
        try:
            self._carry_out_all(member, actions)
        except JournalRefused:  # as the runner's loop: the turn's other actions are lost
            self._fault(member, "the adapter loop")

    def _fault(self, member: Member, where: str) -> None:
        self.faults.append((member.number, where))
        self._carry_out(member, member.core.on_fault(where, now=self.now, wall_ns=self._wall_ns()))

    def _carry_out_all(self, member: Member, actions: Sequence[Any]) -> None:
        for index, action in enumerate(actions):
            if isinstance(action, BurnCpu):  # a long turn: the rest goes out when it is over
                member.busy_until = member.stalled_until = self.now + action.seconds
                member.busy_gil, member.deferred = action.hold_gil, list(actions[index + 1 :])
                raise _BusyTurn
            if isinstance(action, Publish):
                member.packets.append(action.packet)
                self._client_packet(member.number, action.packet)
            elif isinstance(action, SendSync):
                data = encode_sync(action.message, channel=CHANNEL)
                for other in self.members.values():
                    if other is not member and other.alive:
                        other.sync_inbox.append(data)
            elif isinstance(action, JournalRecords):
                try:
                    member.journal.append(action)
                except JournalRefused:  # the runner's journal handler
                    last = action.first_msg_seq + len(action.payloads) - 1
                    member.core.on_journal_refused(action.first_msg_seq, last)
                    raise
            elif isinstance(action, JournalControl):
                member.journal.append_control(action)
            elif isinstance(action, WriteCheckpoint):
                member.journal.checkpoint = action
            elif isinstance(action, RecordTerm):
                member.journal.term = action.term
            elif isinstance(action, Status):
                member.events.append(action)
            elif isinstance(action, PublishDelayed):
                member.delayed_packets.append(action.packet)
                header = wire.decode_header(action.packet)
                for seq in range(header.first_seq, header.first_seq + header.count):
                    self.delayed_carried_at.setdefault(seq, self.now)
                self._delayed_events(
                    self.delayed_client.on_packet(member.number, action.packet, now=self.now)
                )
            elif isinstance(action, PublishConflated):
                member.conflated_packets.append(action.packet)
            elif isinstance(action, ReplyAdmin | ReplyControl):
                self.replies.append(action.reply)

    def _wall_ns(self) -> int:
        return EPOCH_NS + round(self.now * 1e9)

    # ---- the client ----------------------------------------------------------------------

    def _client_packet(self, line: int, packet: bytes) -> None:
        self._client_events(self.client.on_packet(line, packet, now=self.now))

    def _client_timers(self) -> None:
        self._client_events(self.client.on_timer(now=self.now))
        if self.delay_s is not None:
            self._delayed_events(self.delayed_client.on_timer(now=self.now))

    def _delayed_events(self, events: Sequence[Any]) -> None:
        for event in events:
            if isinstance(event, Delivery | Purged) and (
                event.msg_seq in self.delayed_delivered or event.msg_seq in self.purged
            ):
                self.delayed_duplicates += 1
            elif isinstance(event, Delivery):
                self.delayed_delivered[event.msg_seq] = (event.source_stream, event.source_seq)
            elif isinstance(event, Purged):
                self.purged[event.msg_seq] = event.purge_id
            elif isinstance(event, GapLost):
                self.delayed_lost += event.last_seq - event.first_seq + 1
                for seq in range(event.first_seq, min(event.last_seq, event.first_seq + 100_000) + 1):
                    self.delayed_lost_at[seq] = self.now
            elif isinstance(event, RetransmissionNeeded):
                self._retransmit(event.first_seq, event.last_seq, delayed=True)

    def _client_events(self, events: Sequence[Any]) -> None:
        for event in events:
            if isinstance(event, Delivery):
                if event.payload[:1] != b"\x0a" and event.update.HasField("session_boundary"):
                    self.session_ends[event.msg_seq] = event.source_seq
                if event.msg_seq in self.delivered:
                    self.duplicates += 1
                elif self.delivered and event.msg_seq != self._last_delivered + 1:
                    self.out_of_order += 1
                self.delivered[event.msg_seq] = event.source_seq
                self._last_delivered = max(self._last_delivered, event.msg_seq)
            elif isinstance(event, GapLost):
                self.lost += event.last_seq - event.first_seq + 1
            elif isinstance(event, RetransmissionNeeded):
                self._retransmit(event.first_seq, event.last_seq)

    def _retransmit(self, first: int, last: int, *, delayed: bool = False) -> None:
        # Ask the live adapters' replay services in turn, as the client library does, until
        # the hole is filled (a restarted adapter's journal may be the only one that has it).
        arbiter = self.delayed_client if delayed else self.client
        for member in self.members.values():
            if not member.alive or (member.busy_until is not None and member.busy_gil):
                continue  # a replay service waits for the interpreter a long turn holds
            line = member.core.delayed.line
            service = ReplayService(
                member.journal,
                channel=CHANNEL,
                adapter=member.number,
                max_packet_bytes=8192,
                max_bytes=1 << 20,
                bounds=member.journal.bounds,
                purges=(lambda core=member.core: core.view().purges) if delayed else None,
                delay_ns=None if line is None else line.delay_ns,
            )
            kind = KIND_DELAYED_RANGE if delayed else KIND_RANGE
            request = encode_request(
                ReplayRequest(channel=CHANNEL, request_id=1, first_seq=first, last_seq=last, kind=kind)
            )
            reply = service.answer(
                [b"client", request], term=member.core.sync.term, send_time_ns=self._wall_ns()
            )
            for packet in reply[2:]:
                events = arbiter.on_packet(member.number, packet, now=self.now)
                if delayed:
                    self._delayed_events(events)
                else:
                    self._client_events(events)
            if not arbiter.missing(first, last):
                return

    # ---- what the tests look at ----------------------------------------------------------------

    def actives(self) -> list[int]:
        return [n for n, m in self.members.items() if m.alive and m.core.sync.role.value == "active"]

    def in_sync(self, number: int) -> bool:
        """Whether adapter ``number`` reports itself in sync with the group."""
        return bool(self.members[number].status["status"] == "in_sync")

    def boundaries(self, number: int) -> dict[int, tuple[int, int, int]]:
        """msg_seq -> (source_seq, ended, started) of every end-of-session block one line carried."""
        from feedha.proto import market_pb2, wire

        found: dict[int, tuple[int, int, int]] = {}
        for packet in self.members[number].packets:
            header, blocks = wire.decode_packet(packet)
            if header.is_end_of_session:
                for block in blocks:
                    boundary = market_pb2.MarketUpdate.FromString(block.payload).session_boundary
                    found[block.msg_seq] = (block.source_seq, boundary.ended, boundary.started)
        return found

    def journal_boundaries(self, number: int) -> dict[int, int]:
        """msg_seq -> source_seq of every session-boundary record in one adapter's journal."""
        return {s: r.source_seq for s, r in self.members[number].journal.records.items() if r.flags & 2}

    def quarantined(self, number: int) -> dict[str, int]:
        return dict(self.members[number].status["quarantined"])

    def delivered_source_seqs(self) -> list[int]:
        """The source_seq of every market-data message delivered, in msg_seq order."""
        return [self.delivered[s] for s in sorted(self.delivered) if s not in self.session_ends]

    def line(self, number: int, *, delayed: bool = False) -> dict[int, tuple[int, bytes]]:
        """msg_seq -> (source_seq, payload) of everything one adapter's line (or delayed line) carried."""
        seen: dict[int, tuple[int, bytes]] = {}
        member = self.members[number]
        for packet in member.delayed_packets if delayed else member.packets:
            for block in wire.decode_packet(packet)[1]:
                seen[block.msg_seq] = (block.source_seq, block.payload)
        return seen

    def delayed_blocks(self) -> dict[int, set[tuple[int, int]]]:
        """msg_seq -> every (source_stream, source_seq) any delayed line carried for it."""
        seen: dict[int, set[tuple[int, int]]] = {}
        for member in self.members.values():
            for packet in member.delayed_packets:
                for block in wire.decode_packet(packet)[1]:
                    seen.setdefault(block.msg_seq, set()).add((block.source_stream, block.source_seq))
        return seen
