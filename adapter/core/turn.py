"""What passes between the adapter core and its source path: the turn, the standing, the interrupts.

The :class:`~adapter.core.pipeline.Pipeline` converts inside a generator (a
:data:`Conversion`) that *yields* an :data:`Interrupt` where it needs the sync
rules' word in the middle of a frame, and the core's
:class:`~adapter.core.driver.Driver` answers each with a :class:`Reply`. Every
input's clocks and the actions it produced travel as one :class:`Turn`.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import NamedTuple, TypeAlias

from feedha.adapter.core import syncbus
from feedha.adapter.core.actions import Action
from feedha.adapter.core.gaps import Gap
from feedha.adapter.core.sequencer import ArrivalCheck
from feedha.adapter.core.session import Boundary

__all__ = [
    "Adopted",
    "Arrived",
    "Conversion",
    "GapFound",
    "Interrupt",
    "Reply",
    "Rolled",
    "Standing",
    "Turn",
]


class Standing(NamedTuple):
    """What the sync rules say of this adapter, as far as the source path needs it."""

    publishing: bool  # it fills its line (through the gate)
    backup: bool  # its numbering waits for the active's confirmation
    term: int


@dataclass(frozen=True, slots=True)
class Reply:
    """The core's answer to an interrupt: its standing now, and for a gap whether to hold there."""

    standing: Standing
    hold: bool = False


@dataclass(slots=True)
class Turn:
    """One input's clocks, and the actions it produced (the core's list, in order)."""

    now: float
    wall_ns: int
    out: list[Action] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class GapFound:
    """Source messages ``gap`` are missing (``jump``: a believed jump, everybody's). Hold here?"""

    gap: Gap
    jump: bool


@dataclass(frozen=True, slots=True)
class Arrived:
    """A position the active had reported was reached (``at``): the sync rules' check of it."""

    at: int
    check: ArrivalCheck


@dataclass(frozen=True, slots=True)
class Adopted:
    """A snapshot of the active's state was adopted exactly at its position."""

    snapshot: syncbus.Snapshot


@dataclass(frozen=True, slots=True)
class Rolled:
    """The session rolled into ``boundary.started``; its end-of-session block is ``msg_seq``."""

    boundary: Boundary
    msg_seq: int


Interrupt: TypeAlias = GapFound | Arrived | Adopted | Rolled
Conversion: TypeAlias = Generator[Interrupt, Reply, int]
