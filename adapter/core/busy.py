"""Busy turns on purpose (the ``busy`` fault injection): where in a turn the loop is kept busy.

Theory of operation
-------------------
A long turn is not a stop. A process stopped by SIGSTOP does nothing at all; a
process whose loop spends seconds in one turn -- a conversion run over input
that is expensive to convert, a checkpoint folding a large state, an order
table growing -- has decided part of the turn and not carried it out yet, and
around it the rest of the process goes on: the sync bus keeps queueing what
the group says, the line's and the bus's sockets keep sending what was handed
to them, and the threads that do not need the interpreter meanwhile (or get it,
when the loop's work lets it go) keep running -- the keepalive that repeats the
active's report through a checkpoint, the replay service, the journal's
flusher.

:class:`BusyDesk` holds an armed ``busy`` command and says, when the core asks
at one of three places of a turn, where the :class:`~adapter.core.actions.BurnCpu`
action goes among the turn's actions; the runner carries it out in order, so
what comes before it happens before the busy stretch and what comes after, after:

* ``convert``: a turn that numbered source messages, before anything of it goes
  out (the sequencer and the state have moved; no packet, journal record or sync
  message of the turn has left);
* ``report``: a turn that numbered source messages, after its packets and journal
  records went out (the packet being filled is sealed first) and before its
  sync-bus messages and the rest of the turn -- the active's report of what it
  published comes after the busy stretch;
* ``tick``: a timer turn, before its actions, under the active's keepalive as a
  checkpoint's fold is (:meth:`AdapterCore.keepalive_report`).

While a ``convert`` or ``report`` busy is armed the source pump does not run:
its conversion turns are in C and send their packets themselves, so the busy
stretch goes where the Python path's turn puts it. Pure: the desk only places
an action; the time is the runner's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from feedha.adapter.core.actions import (
    Action,
    BurnCpu,
    JournalRecords,
    Publish,
    PublishConflated,
    PublishDelayed,
)

__all__ = ["BusyDesk", "BusyPlan"]

_OUTPUT: Final = (Publish, JournalRecords, PublishDelayed, PublishConflated)


@dataclass(frozen=True, slots=True)
class BusyPlan:
    """An armed ``busy``: ``turns`` more turns of kind ``where`` busy ``seconds`` each."""

    where: str
    seconds: float
    turns: int
    hold_gil: bool


class BusyDesk:
    """The armed ``busy`` fault of one adapter, if any, and how many busy turns it made."""

    __slots__ = ("plan", "done")

    def __init__(self) -> None:
        self.plan: BusyPlan | None = None
        self.done = 0  # busy turns made since start

    def __repr__(self) -> str:
        return f"<BusyDesk [plan={self.plan}, done={self.done}]>"

    def arm(self, *, where: str, ms: int, turns: int, hold_gil: bool) -> dict[str, Any]:
        """Arm it (replacing what was armed); returns the control reply's fields."""
        self.plan = BusyPlan(where, ms / 1000.0, turns, hold_gil)
        return {"where": where, "ms": ms, "turns": turns, "gil": hold_gil}

    def wants(self, where: str) -> bool:
        """Whether the next turn of kind ``where`` is to be busy."""
        plan = self.plan
        return plan is not None and plan.where == where

    @property
    def blocks_pump(self) -> bool:
        """Whether conversion turns must go through the Python path (a conversion busy is armed)."""
        plan = self.plan
        return plan is not None and plan.where != "tick"

    def place(self, actions: Sequence[Action]) -> list[Action]:
        """The turn's ``actions`` with the busy stretch placed among them; one armed turn used.

        Raises:
            ValueError: nothing is armed.
        """
        plan = self.plan
        if plan is None:
            raise ValueError("no busy turn is armed")
        self.plan = (
            None if plan.turns <= 1 else BusyPlan(plan.where, plan.seconds, plan.turns - 1, plan.hold_gil)
        )
        self.done += 1
        out = list(actions)
        at = 0
        if plan.where == "report":
            at = max((i + 1 for i, action in enumerate(out) if isinstance(action, _OUTPUT)), default=0)
        out.insert(at, BurnCpu(plan.seconds, plan.hold_gil))
        return out

    def status(self) -> dict[str, Any]:
        """What is armed and what was done, for the adapter's status."""
        plan = self.plan
        armed = None
        if plan is not None:
            armed = {"where": plan.where, "ms": round(plan.seconds * 1000), "turns": plan.turns}
        return {"busy_armed": armed, "busy_turns": self.done}
