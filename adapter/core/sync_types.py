"""The types of the sync rules: configuration, state, events and actions.

Plain frozen dataclasses and enums, no behaviour beyond a few derived
properties; :mod:`adapter.core.sync` holds the rules that turn a state and an event
into a new state and actions.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final, TypeAlias

from feedha.adapter.core.sequencer import ReportVerdict
from feedha.adapter.errors import ConfigError

HEARTBEAT_INTERVAL_S: Final = 0.01
HEARTBEAT_TIMEOUT_S: Final = 0.4
HEALTH_INTERVAL_S: Final = 0.1
PEER_TIMEOUT_S: Final = 1.0
PROMOTION_STAGGER_S: Final = 0.06
STARTUP_GRACE_S: Final = 0.5
AHEAD_TOLERANCE: Final = 64
THROTTLE_PAUSE_S: Final = 0.0005
THROTTLE_EVERY: Final = 1
DESYNC_LIMIT: Final = 3
DESYNC_WINDOW_S: Final = 10.0
SNAPSHOT_RETRY_S: Final = 0.5


class Role(enum.Enum):
    ACTIVE = "active"
    BACKUP = "backup"
    FAILED = "failed"


class SyncStatus(enum.Enum):
    SYNCING = "syncing"  # numbering or state not verified (yet, or no longer): may not take over
    IN_SYNC = "in_sync"  # the active confirmed our numbering and state
    AHEAD = "ahead"  # numbered a reported message differently and is past it: throttled
    FAILED = "failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncConfig:
    """Timers and limits of the sync rules (defaults are the ``*_S`` constants)."""

    heartbeat_interval_s: float = HEARTBEAT_INTERVAL_S
    heartbeat_timeout_s: float = HEARTBEAT_TIMEOUT_S
    health_interval_s: float = HEALTH_INTERVAL_S
    peer_timeout_s: float = PEER_TIMEOUT_S
    promotion_stagger_s: float = PROMOTION_STAGGER_S
    startup_grace_s: float = STARTUP_GRACE_S
    ahead_tolerance: int = AHEAD_TOLERANCE
    throttle_pause_s: float = THROTTLE_PAUSE_S
    throttle_every: int = THROTTLE_EVERY
    desync_limit: int = DESYNC_LIMIT
    desync_window_s: float = DESYNC_WINDOW_S
    snapshot_retry_s: float = SNAPSHOT_RETRY_S

    def __post_init__(self) -> None:
        for name in ("heartbeat_interval_s", "heartbeat_timeout_s", "health_interval_s", "desync_window_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if self.heartbeat_timeout_s <= 2 * self.heartbeat_interval_s:
            raise ConfigError(
                f"heartbeat_timeout_s ({self.heartbeat_timeout_s}) must exceed two heartbeat intervals "
                f"({self.heartbeat_interval_s})"
            )
        if self.desync_limit < 1 or self.throttle_every < 1 or self.ahead_tolerance < 0:
            raise ConfigError("desync_limit and throttle_every must be >= 1, ahead_tolerance >= 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class Peer:
    """What this adapter last heard from another adapter of the channel."""

    adapter: int
    role: Role
    term: int
    last_seen: float
    score: float | None = None
    in_sync: bool = False
    published: int = 0  # the last msg_seq its line carried
    stepped_down_at: float | None = None  # when we heard it go from active to backup


@dataclass(frozen=True, kw_only=True)
class SyncState:
    """One adapter's view of its group. Build the first one with :func:`initial_state`.

    The sync rules never change a state; each event makes a new one with :meth:`evolve`.
    """

    adapter: int
    role: Role
    status: SyncStatus
    term: int
    active: int | None
    active_heard_at: float | None
    started_at: float
    deciding: bool
    want_active: bool
    peers: Mapping[int, Peer] = field(default_factory=dict)
    health_score: float = 100.0
    desyncs: tuple[float, ...] = ()
    ever_in_sync: bool = False
    throttled: bool = False
    reported_at: float | None = None
    mismatch_since: float | None = None
    snapshot_requested_at: float | None = None
    demoted_at: float | None = None
    next_heartbeat_at: float = 0.0
    next_health_at: float = 0.0
    group_size: int = 0  # adapters in the group, this one included (0: unknown)
    published: int = 0  # the last msg_seq our line carried (or our journal holds)
    gap_pending: bool = False  # we missed source messages; not yet known whether the active has them
    handover_to: int | None = None  # the active handed the role to this adapter; waiting for its word

    @property
    def is_publishing(self) -> bool:
        """Whether this adapter fills its line: the active's output goes straight out, a
        backup's waits at its output gate until the active confirms the numbering."""
        return not self.deciding and self.role is not Role.FAILED

    @property
    def is_in_sync(self) -> bool:
        """Active, or a backup whose numbering the active confirmed and that missed nothing since."""
        return self.role is Role.ACTIVE or (self.status is SyncStatus.IN_SYNC and not self.gap_pending)

    def evolve(self, **changes: Any) -> SyncState:
        """A copy of this state with ``changes``: what :func:`dataclasses.replace` makes.

        Strategy: a backup's rules make four to five states a report from the active (the
        peer heard, the report, its check, the tick). ``replace`` builds each through
        ``__init__``, reading the 24 fields one by one: ~10 µs a state, a quarter to a
        third of the report's handling. A state has no ``__post_init__`` and no field computed
        at construction, so copying the instance dictionary and setting the changed names is
        the same state, in ~2.5 µs. A name that is not a field raises ``TypeError``, as
        ``replace`` does.
        """
        unknown = changes.keys() - _STATE_FIELDS
        if unknown:
            raise TypeError(f"SyncState has no field {', '.join(sorted(unknown))}")
        new = object.__new__(type(self))
        values = new.__dict__
        values.update(self.__dict__)
        values.update(changes)
        return new

    def __repr__(self) -> str:
        return (
            f"<SyncState [adapter={self.adapter}, role={self.role.value}, status={self.status.value}, "
            f"term={self.term}, active={self.active}, throttled={self.throttled}, peers={len(self.peers)}]>"
        )


_STATE_FIELDS: Final = frozenset(f.name for f in fields(SyncState))


# ---- events -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PeerHeard:
    """Any sync-bus message from a peer (with health fields when it was a Health)."""

    adapter: int
    role: Role
    term: int
    score: float | None = None
    in_sync: bool | None = None
    published: int | None = None


@dataclass(frozen=True, slots=True)
class ActiveReported:
    """The active's stream state was compared with ours (see Sequencer.compare)."""

    adapter: int
    term: int
    verdict: ReportVerdict
    ahead_by: int


@dataclass(frozen=True, slots=True)
class ArrivalChecked:
    """We reached a position the active had reported (see Sequencer.record)."""

    renumbered: bool
    digest_matches: bool


@dataclass(frozen=True, slots=True)
class SnapshotAdopted:
    source_seq: int


@dataclass(frozen=True, slots=True)
class SnapshotRequested:
    requester: int
    target: int


@dataclass(frozen=True, slots=True)
class SourceGapSeen:
    """A backup missed ``missing`` source messages that the active has (a local gap)."""

    missing: int


@dataclass(frozen=True, slots=True)
class GapPending:
    """A backup missed source messages; whether the active has them is not known yet."""


@dataclass(frozen=True, slots=True)
class GapSettled:
    """The active's word on our pending gap: it missed them too (``common``) or it has them."""

    common: bool
    missing: int = 0


@dataclass(frozen=True, slots=True)
class HandOver:
    """The active hands its role to ``target``, which has source messages the active missed."""

    target: int
    reason: str


@dataclass(frozen=True, slots=True)
class HandoverHeard:
    """Adapter ``adapter`` (term ``term``) handed the role to ``target``."""

    adapter: int
    term: int
    target: int
    reason: str


@dataclass(frozen=True, slots=True)
class SessionMissed:
    """The active is in a session we did not roll into where it did: our output is not the channel's."""

    session: int


@dataclass(frozen=True, slots=True)
class HealthMeasured:
    score: float
    published: int = 0  # the last msg_seq our line carried, reported with the health


@dataclass(frozen=True, slots=True)
class Tick:
    """A timer fired (heartbeats, health, elections).

    ``behind_report``: this adapter has not reached a position its active reported yet, so
    nothing checked what it numbered up to there (it stands in no election meanwhile).
    """

    behind_report: bool = False


@dataclass(frozen=True, slots=True)
class HeartbeatSent:
    """The active's heartbeat report went out without a :class:`Tick` (the source pump sent it) at ``at``."""

    at: float


class CommandKind(enum.Enum):
    PROMOTE = "promote"
    DEMOTE = "demote"
    FAIL = "fail"


@dataclass(frozen=True, slots=True)
class OperatorCommand:
    kind: CommandKind
    reason: str = "operator"
    force: bool = False  # promote even an adapter whose numbering nobody confirmed


SyncEvent: TypeAlias = (
    PeerHeard
    | ActiveReported
    | ArrivalChecked
    | SnapshotAdopted
    | SnapshotRequested
    | SourceGapSeen
    | HealthMeasured
    | Tick
    | HeartbeatSent
    | OperatorCommand
    | SessionMissed
    | GapPending
    | GapSettled
    | HandOver
    | HandoverHeard
)

# ---- actions ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SendStreamState:
    """Publish our stream state (the active's heartbeat)."""


@dataclass(frozen=True, slots=True)
class SendHealth:
    """Publish our health."""


@dataclass(frozen=True, slots=True)
class RequestSnapshot:
    target: int


@dataclass(frozen=True, slots=True)
class SendSnapshot:
    """Publish our whole conversion state (we are the active and were asked)."""


@dataclass(frozen=True, slots=True)
class RoleChanged:
    old: Role
    new: Role
    term: int
    reason: str


@dataclass(frozen=True, slots=True)
class SendFailed:
    reason: str


@dataclass(frozen=True, slots=True)
class CommandRejected:
    kind: CommandKind
    reason: str


@dataclass(frozen=True, slots=True)
class SendHandover:
    """Tell the group that ``target`` takes the role (it promotes itself on hearing it)."""

    target: int
    reason: str


Action: TypeAlias = (
    SendStreamState
    | SendHealth
    | RequestSnapshot
    | SendSnapshot
    | RoleChanged
    | SendFailed
    | CommandRejected
    | SendHandover
)
Result: TypeAlias = tuple[SyncState, list[Action]]
