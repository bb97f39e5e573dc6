"""Rule 6 of the sync rules: who takes over when the active goes silent (the election).

Pure functions of a :class:`~adapter.core.sync_types.SyncState` and ``now``,
called by the state machine of :mod:`adapter.core.sync` (its ``Tick``, its
handover and its operator's ``promote``).

Who may take over when nobody is in sync
----------------------------------------
An adapter is *in sync* once the active's reports confirmed its numbering.
One that is not -- just restarted on its journal, or it missed source
messages -- cannot know what numbers the channel gave meanwhile: an adapter
that is merely stopped (SIGSTOP, a long pause) may have published far past
it. Promoting it would reuse ``msg_seq``s that subscribers already hold for
other messages. So when no in-sync backup is left:

* only when *every* member of the group is heard (``group_size``) may anyone
  stand, since a silent member may hold newer numbering;
* then only the member furthest along the channel's numbering (the highest
  ``msg_seq`` its line carried, from its health reports; after a restart,
  its journal's last) stands, best health first among equals. If that
  member cannot (it failed itself), nobody promotes by itself: an operator
  decides (``promote`` with ``force``);
* a configured active takes the role at start-up without an election only
  when the whole group is new (nothing was ever published).

The channel may stay without an active while a member is silent; it never
gets two numberings.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from feedha.adapter.core.sync_types import (
    Result,
    Role,
    RoleChanged,
    SendStreamState,
    SyncConfig,
    SyncState,
    SyncStatus,
)

__all__ = ["UNSYNCED_TIMEOUT_FACTOR", "candidates", "decide", "election_base", "maybe_promote", "promote"]

UNSYNCED_TIMEOUT_FACTOR: Final = 3  # silence, in heartbeat timeouts, before an unsynced backup stands
_STEPPED_DOWN_SCORE: Final = -1.0  # below any health score: who just stepped down ranks last


def decide(state: SyncState, now: float) -> Result:
    """The start-up grace is over and nobody active was heard: a configured active may take the role."""
    # Nobody active was heard during the grace period. A configured active takes
    # the role only in a group that never published anything (a cold start):
    # otherwise a restarted active would renumber what a stalled peer published.
    fresh = state.published == 0 and all(p.published == 0 for p in state.peers.values())
    if state.want_active and fresh:
        term = max([state.term, *(p.term for p in state.peers.values())]) + 1
        new = state.evolve(
            deciding=False,
            role=Role.ACTIVE,
            status=SyncStatus.IN_SYNC,
            term=term,
            active=state.adapter,
        )
        return new, [
            RoleChanged(Role.BACKUP, Role.ACTIVE, term, "configured active, no active heard"),
            SendStreamState(),
        ]
    return state.evolve(deciding=False), []


def election_base(state: SyncState, config: SyncConfig) -> float:
    """When the active was last heard (or the grace ended): the silence an election counts from."""
    if state.active is not None and state.active_heard_at is not None:
        return state.active_heard_at
    base = state.started_at + config.startup_grace_s
    return max(base, state.active_heard_at or base)


class _Candidate(NamedTuple):
    score: float
    adapter: int
    in_sync: bool
    published: int


def candidates(state: SyncState, now: float, config: SyncConfig) -> tuple[list[int], bool]:
    """The adapters that may promote themselves, best first, and whether they are in sync.

    In-sync backups stand first, by health. If none is in sync, see the module
    docstring: only the member furthest along the channel's numbering stands,
    and only while every member of the group is heard.
    """
    heard = [p for p in state.peers.values() if now - p.last_seen <= config.peer_timeout_s]
    # An adapter that just stepped down stands last, in its own eyes and everyone's (its
    # successor should have spoken by now): the channel is never left without an active
    # for longer than one election, and the old active takes the role back only if
    # nobody else can.
    recent = 2 * config.heartbeat_timeout_s
    live = [
        _Candidate(
            _STEPPED_DOWN_SCORE
            if p.stepped_down_at is not None and now - p.stepped_down_at < recent
            else (p.score if p.score is not None else 0.0),
            p.adapter,
            p.in_sync,
            p.published,
        )
        for p in heard
        if p.role is Role.BACKUP
    ]
    demoted = state.demoted_at
    score = _STEPPED_DOWN_SCORE if demoted is not None and now - demoted < recent else state.health_score
    live.append(_Candidate(score, state.adapter, state.is_in_sync, state.published))
    standing = [c for c in live if c.in_sync]
    if not standing:
        if not state.group_size or len(heard) < state.group_size - 1:
            return [], False  # a silent member may have published past everyone heard
        furthest = max([state.published, *(p.published for p in heard)])
        standing = [c for c in live if c.published == furthest]
    standing.sort(key=lambda c: (-c.score, c.adapter))
    return [c.adapter for c in standing], any(c.in_sync for c in standing)


def maybe_promote(state: SyncState, now: float, config: SyncConfig, *, behind_report: bool) -> Result:
    """A backup's tick: promote itself when the active stayed silent long enough for its rank."""
    silent_since = election_base(state, config)
    if state.active is not None and now - silent_since <= config.heartbeat_timeout_s:
        return state, []
    if behind_report:
        # What we hold covers positions the silent active's line carried, and its report there
        # is not checked yet: promoted now, we would publish our numbering of them unchecked
        # (and, if the active numbered past messages it missed, under msg_seqs it gave others).
        # We stand once we reached it; a backup ranked after us stands after its stagger.
        return state, []
    ranked, in_sync = candidates(state, now, config)
    if state.adapter not in ranked:
        return state, []
    # Without an in-sync candidate the silence must last longer: an adapter
    # that has not synchronized yet may simply not have heard the active
    # (it just started, or its machine stalled), and promoting it would only
    # make the live active step down.
    timeout = config.heartbeat_timeout_s * (1 if in_sync else UNSYNCED_TIMEOUT_FACTOR)
    rank = ranked.index(state.adapter)
    if now < silent_since + timeout + rank * config.promotion_stagger_s:
        return state, []
    return promote(state, now, "active silent" if state.active is not None else "no active")


def promote(state: SyncState, now: float, reason: str) -> Result:
    """Take the active role with a term above every one heard."""
    term = max([state.term, *(p.term for p in state.peers.values())]) + 1
    new = state.evolve(
        role=Role.ACTIVE,
        status=SyncStatus.IN_SYNC,
        term=term,
        active=state.adapter,
        active_heard_at=now,
        throttled=False,
        next_heartbeat_at=now,
        gap_pending=False,
        handover_to=None,
    )
    return new, [RoleChanged(Role.BACKUP, Role.ACTIVE, term, reason), SendStreamState()]
