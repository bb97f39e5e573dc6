"""The source's side of the adapter core: its frames, and when it is read.

:class:`SourceSide` converts what the source sends (through the pipeline,
driven by the :class:`~adapter.core.driver.Driver`) and owns when the source
is read: the pause after a throttled batch (rule 3's: a backup ahead of its
active pauses after every k messages; or the operator's rate cap) and when a
backup whose output waits at its gate reads the source next
(:meth:`SourceSide.on_drained`).
"""

from __future__ import annotations

from typing import Final

from feedha.adapter.core.actions import Action, ReadSync
from feedha.adapter.core.config import MAX_PAUSE_S
from feedha.adapter.core.driver import Driver
from feedha.adapter.core.parts import CoreParts
from feedha.adapter.core.sync_types import Role
from feedha.adapter.core.turn import Turn

__all__ = ["BACKUP_READ_INTERVAL_S", "SourceSide"]

# A backup whose output waits at its gate reads the source at most this often (see on_drained).
BACKUP_READ_INTERVAL_S: Final = 0.001


class SourceSide:
    """The source's frames, and the source's pauses: throttles and batched reads.

    Args:
        parts: the core's parts.
        driver: the sync rules' state and the carrying out of the parts' answers.
    """

    def __init__(self, parts: CoreParts, driver: Driver) -> None:
        self._parts, self._driver = parts, driver
        self._gate = parts.emitter.gate  # asked on every turn of the loop (batches)
        self._paused_until = 0.0
        self._next_read = 0.0  # a backup whose output waits reads the source again from then
        self._rate_limit = 0.0  # operator throttle, messages/s (0: none)

    def on_frame(
        self, parts: list[bytes], turn: Turn, frame: bytes | None, start: int, converted: int
    ) -> list[Action]:
        """One ZeroMQ message from the source, in ``turn`` (:meth:`AdapterCore.on_source
        <adapter.core.machine.AdapterCore.on_source>`)."""
        driver, pipeline = self._driver, self._parts.pipeline
        counters = pipeline.counters
        if len(parts) != 2:
            counters.malformed_frames += 1
            detail, data = f"a message of {len(parts)} parts", b"".join(parts)
            pipeline.rejects.quarantine("malformed_frame", None, detail, data, turn)
            pipeline.ledger.placed_nowhere()
            return turn.out
        faults = counters.internal_errors
        if frame is None:
            frame = self._parts.engine.source_frame(parts[1])  # itch50: MoldUDP64 -> records
        conversion = pipeline.convert(frame, driver.standing(), turn, start=start, before=converted)
        converted = driver.drive(conversion, turn)  # what got a msg_seq here
        if pipeline.waiting.pending_roll is not None and pipeline.at_fence():
            driver.drive(pipeline.commit(pipeline.waiting.pending_roll, driver.standing(), turn), turn)
        gaps = self._parts.gaps
        if gaps.backup.owed:  # answers owed (an attribute: this runs on every source frame)
            driver.carry(gaps.answers(driver.gap_view()), turn)
        if converted and self.is_throttled():
            self._throttle(converted, now=turn.now)
        if counters.internal_errors > faults:
            driver.fault("converting a source frame", turn)
        if converted and driver.sync.role is Role.BACKUP:
            turn.out.append(ReadSync())  # heartbeats that came meanwhile count before the timers
        if self._parts.conflated.enabled:
            self._parts.conflated.observe(turn.out)
        if converted and self._parts.busy.blocks_pump:
            return self._busy_conversion(turn)
        return turn.out

    def _busy_conversion(self, turn: Turn) -> list[Action]:
        # An armed busy turn (fault injection) in this conversion turn: after numbering, before
        # or (``report``) after what it publishes (sealed now), before its sync-bus messages.
        busy = self._parts.busy
        if busy.wants("report"):
            turn.out += self._parts.pipeline.seal(self._driver.sync.term, turn)
        return busy.place(turn.out)

    def on_drained(self, turn: Turn) -> list[Action]:
        """The runner read every source frame that was waiting: what is ready goes out now.

        The packet being filled is sealed at once, before any timer of the turn (the tick
        would seal it too, after the timers): a message waits for nothing once nothing more
        is there to read. A packet fills across frames only while frames keep coming (a burst).

        A backup whose output waits at its gate (for the active's report, every
        heartbeat interval) reads the source again only :data:`BACKUP_READ_INTERVAL_S`
        later, and then everything queued meanwhile: its line runs a report behind the
        active's anyway, so waking for every frame would buy no subscriber anything and
        cost a core's share per backup at low rates. Once its output goes straight out
        (promoted, or released while the active is silent) it reads every frame as it
        comes again (:meth:`batches` is asked each time). The source pump keeps the same
        pace inside one call (:meth:`batch`), until the report comes.
        """
        if self.batches():
            self._next_read = turn.now + BACKUP_READ_INTERVAL_S
        turn.out += self._parts.pipeline.seal(self._driver.sync.term, turn)
        if self._parts.conflated.enabled:
            self._parts.conflated.observe(turn.out)
        return turn.out

    def limit(self, rate: float) -> None:
        """The operator's rate cap, in messages per second (0: none)."""
        self._rate_limit = rate

    def is_throttled(self) -> bool:
        """Whether the source is read at a reduced rate (rule 3's throttle, or an operator's)."""
        return self._driver.sync.throttled or bool(self._rate_limit)

    def _throttle(self, converted: int, *, now: float) -> None:
        # Rule 3 (a backup ahead pauses after every k messages) and the operator's rate cap.
        pause = 0.0
        if self._driver.sync.throttled:
            config = self._parts.config.sync
            pause = converted * config.throttle_pause_s / config.throttle_every
        if self._rate_limit:
            pause = max(pause, converted / self._rate_limit)
        if pause:
            self._paused_until = now + min(pause, MAX_PAUSE_S)

    def batches(self) -> bool:
        """Whether the source is read in batches: a backup whose new output would wait at the gate
        (nobody sees it before the active's report)."""
        return self._driver.sync.role is Role.BACKUP and not self._gate.passes

    def batch(self) -> float:
        """How long the source is left alone after each drain, in seconds (0.0: every frame is read
        as it comes)."""
        return BACKUP_READ_INTERVAL_S if self.batches() else 0.0

    def reads(self, now: float) -> bool:
        """Whether source frames should be read now (not while deciding, paused, at a fence, or
        while a backup whose output waits gathers frames)."""
        if self._driver.sync.deciding or now < self._paused_until or self._parts.pipeline.waiting.deferred:
            return False
        return now >= self._next_read or not self.batches()

    def deadline(self, now: float, deadline: float) -> float:
        """``deadline``, or earlier when a pause ends or the next batch is due first."""
        if not self._driver.sync.deciding and now < self._paused_until:
            deadline = min(deadline, self._paused_until)
        if now < self._next_read and self.batches():
            deadline = min(deadline, self._next_read)  # the source is read again then
        return deadline
