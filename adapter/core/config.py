"""What the adapter core needs to know: identity, numbering, timers and limits (no endpoints)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from feedha.adapter.core.delayed import DEFAULT_MARGIN_S
from feedha.adapter.core.gate import DEFAULT_SILENCE_S
from feedha.adapter.core.session import SessionSchedule
from feedha.adapter.core.sync_types import SyncConfig
from feedha.adapter.errors import ConfigError
from feedha.proto.wire import CONFLATED_STREAM, DEFAULT_MAX_PACKET_BYTES, HEADER_SIZE

LINE_HEARTBEAT_S: Final = 0.1
RING_SIZE: Final = 8192
CHECKPOINT_EVERY: Final = 50_000  # journal checkpoint after this many journaled messages ...
CHECKPOINT_INTERVAL_S: Final = 5.0  # ... or this long after the last one, whichever comes first
MAX_PAUSE_S: Final = 1.0  # the longest a throttle pauses source reading in one go
MAX_SOURCE_GAP: Final = 1_000_000  # missing source messages beyond which a gap is a suspect jump
JUMP_CONFIRM: Final = 3  # consecutive messages that confirm a jump (the jump included)
DEFAULT_CONFLATE_INTERVAL_S: Final = 1.0
MIN_CONFLATE_INTERVAL_S: Final = 0.01  # a shorter conflation interval is a tick-by-tick line
MAX_CONFLATE_INTERVAL_S: Final = 3600.0
MAX_DELAY_S: Final = 7 * 86_400.0  # a week: a longer delay is a configuration mistake


@dataclass(frozen=True, slots=True, kw_only=True)
class CoreConfig:
    """The adapter core's configuration (``AdapterConfig.core()`` builds it).

    Attributes:
        channel_number: the channel number in packet headers (u16).
        adapter: this adapter's number (u16, unique in the channel).
        source_stream_number: the source stream's number in block headers (u16).
        want_active: start as the active unless an active is heard during the start-up grace.
        term: the term to start from.
        sync: timers and limits of the sync rules.
        max_packet_bytes: packet budget, header included.
        line_heartbeat_s: idle time after which the line sends a heartbeat packet.
        health_penalty: handicap subtracted from the health score (drills, tests).
        journal: whether published messages are journaled (and checkpoints written).
        checkpoint_every: checkpoint after this many journaled messages ...
        checkpoint_interval_s: ... or this many seconds after the last one.
        max_source_gap: a source_seq more than this many messages past the last one is a
            *jump*: held until ``jump_confirm`` consecutive messages confirm it, quarantined
            if the stream goes on where it was (one bad number must not silence the channel).
        jump_confirm: how many consecutive messages confirm a jump.
        fault_injection: accept the drill commands that break things on purpose
            (``drop``, ``corrupt_state``, ``penalty``); off unless asked for.
        group_size: how many adapters the channel's group has (this one included; 0:
            unknown). An adapter whose numbering nobody has confirmed takes over only
            when it hears every member of the group, so it must know how many there are.
        silence_release_s: how long a backup's confirmed-but-waiting output waits for the
            active's next report before it goes out anyway (the active died or stalled).
        session_schedule: the daily end of the trading session (``None``: sessions end only
            when an operator ends them); only the active acts on it.
        delay_s: the delayed line's delay (None: no delayed line); needs ``journal``.
        purge_margin_s: a message stops being purgeable this long before the delayed line
            sends it (covers the other adapters' delayed lines, a few ms apart, and clocks).
        conflate_interval_s: the conflated line's interval (None: no conflated line; the
            adapter still acknowledges the group's conflation boundaries).
        table_budget: the bytes this adapter's conversion tables may count (its memory budget
            less the base, adapter.conversion.budget): the active names the group's in its
            reports, and a backup runs with the active's when it can hold it, else fails
            itself (0: nothing named, nothing adopted; tests).
    """

    channel_number: int
    adapter: int
    source_stream_number: int
    want_active: bool = False
    term: int = 0
    sync: SyncConfig = field(default_factory=SyncConfig)
    max_packet_bytes: int = DEFAULT_MAX_PACKET_BYTES
    line_heartbeat_s: float = LINE_HEARTBEAT_S
    health_penalty: float = 0.0
    journal: bool = False
    checkpoint_every: int = CHECKPOINT_EVERY
    checkpoint_interval_s: float = CHECKPOINT_INTERVAL_S
    max_source_gap: int = MAX_SOURCE_GAP
    jump_confirm: int = JUMP_CONFIRM
    fault_injection: bool = False
    group_size: int = 0
    silence_release_s: float = DEFAULT_SILENCE_S
    session_schedule: SessionSchedule | None = None
    delay_s: float | None = None
    purge_margin_s: float = DEFAULT_MARGIN_S
    conflate_interval_s: float | None = None
    table_budget: int = 0

    def __post_init__(self) -> None:
        for name in ("channel_number", "adapter", "source_stream_number"):
            value = getattr(self, name)
            if not 0 < value <= 0xFFFF:
                raise ConfigError(f"{name} must be in 1..65535, got {value!r}")
        if not 0 <= self.term <= 0xFFFFFFFF:
            raise ConfigError(f"term must be in 0..4294967295, got {self.term}")
        if self.table_budget < 0:
            raise ConfigError(f"table_budget must be >= 0, got {self.table_budget}")
        if self.max_packet_bytes < HEADER_SIZE + 64:
            raise ConfigError(f"max_packet_bytes must be >= {HEADER_SIZE + 64}, got {self.max_packet_bytes}")
        if not self.line_heartbeat_s > 0:
            raise ConfigError(f"line_heartbeat_s must be > 0, got {self.line_heartbeat_s}")
        if self.checkpoint_every < 1:
            raise ConfigError(f"checkpoint_every must be >= 1, got {self.checkpoint_every}")
        if not self.checkpoint_interval_s > 0:
            raise ConfigError(f"checkpoint_interval_s must be > 0, got {self.checkpoint_interval_s}")
        if self.max_source_gap < 1:
            raise ConfigError(f"max_source_gap must be >= 1, got {self.max_source_gap}")
        if not 1 <= self.jump_confirm <= 64:
            raise ConfigError(f"jump_confirm must be in 1..64, got {self.jump_confirm}")
        if not 0 <= self.group_size <= 0xFFFF:
            raise ConfigError(f"group_size must be in 0..65535, got {self.group_size}")
        if not self.silence_release_s > 0:
            raise ConfigError(f"silence_release_s must be > 0, got {self.silence_release_s}")
        self._check_conflation()
        if self.delay_s is not None:
            if not self.journal:
                raise ConfigError("a delayed line is served from the journal: delay_s needs journal")
            if not 0 <= self.purge_margin_s < self.delay_s <= MAX_DELAY_S:
                raise ConfigError(
                    f"need 0 <= purge_margin_s < delay_s <= {MAX_DELAY_S:g}, got "
                    f"{self.purge_margin_s} and {self.delay_s}"
                )

    def _check_conflation(self) -> None:
        interval = self.conflate_interval_s
        if interval is None:
            return
        if not MIN_CONFLATE_INTERVAL_S <= interval <= MAX_CONFLATE_INTERVAL_S:
            raise ConfigError(
                f"conflate_interval_s must be in {MIN_CONFLATE_INTERVAL_S:g}..{MAX_CONFLATE_INTERVAL_S:g} "
                f"seconds, got {interval!r}"
            )
        if self.source_stream_number == CONFLATED_STREAM:
            raise ConfigError(
                f"source_stream_number {CONFLATED_STREAM} is the conflated line's reserved stream: "
                "pick another for a channel with a conflated line"
            )
