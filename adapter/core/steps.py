"""What a part of the adapter core asks the core to do: steps, carried out in order by the core alone.

The core's parts -- the session driver (:mod:`adapter.core.session_driver`),
the gap desk (:mod:`adapter.core.gaps`) -- hold no pointer to the core or to
each other. They decide from a view of the core passed in and return a list
of steps; :class:`~adapter.core.machine.AdapterCore` carries them out one
after the other (a step that converts what waited may raise interrupts of
its own, which the core handles before the next step). Plain frozen
dataclasses: no behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from feedha.adapter.core.actions import Action
from feedha.adapter.core.session import Boundary
from feedha.adapter.core.sync_types import SyncEvent

__all__ = [
    "Abandon",
    "Apply",
    "Commit",
    "Distrust",
    "Emit",
    "HoldAt",
    "ReleaseGap",
    "ReportNow",
    "Step",
    "Unfence",
    "Unpublish",
]


@dataclass(frozen=True, slots=True)
class Emit:
    """Hand ``action`` to the shell."""

    action: Action


@dataclass(frozen=True, slots=True)
class Apply:
    """Feed ``event`` to the sync rules."""

    event: SyncEvent


@dataclass(frozen=True, slots=True)
class ReportNow:
    """The active sends its stream state now, not at the next heartbeat."""


@dataclass(frozen=True, slots=True)
class HoldAt:
    """Convert nothing past source position ``after`` (a session fence; a raised one converts what waited)."""

    after: int


@dataclass(frozen=True, slots=True)
class Commit:
    """Roll into ``boundary.started`` right after its fence (now, or on reaching it)."""

    boundary: Boundary


@dataclass(frozen=True, slots=True)
class Unfence:
    """The boundary was withdrawn: convert what waited at the fence."""


@dataclass(frozen=True, slots=True)
class Abandon:
    """Forget a boundary this adapter can no longer carry out where the group did."""


@dataclass(frozen=True, slots=True)
class ReleaseGap:
    """The group answered about the gap the active holds at: convert what waited."""


@dataclass(frozen=True, slots=True)
class Unpublish:
    """Drop what waits at the gate and the packet being filled (not the channel's)."""


@dataclass(frozen=True, slots=True)
class Distrust:
    """We missed source messages the active has after ``after``: drop what followed, repair by snapshot."""

    after: int


Step: TypeAlias = (
    Emit | Apply | ReportNow | HoldAt | Commit | Unfence | Abandon | ReleaseGap | Unpublish | Distrust
)
