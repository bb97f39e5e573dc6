"""What a drill's adapters booked of what its source sent: ``unaccounted``, and what the channel numbered.

Every adapter books each source position it passes (adapter/core/accounting.py; its status's
``accounting``). Once a drill's source has ended and its adapters have settled, the survivor that
booked the most speaks for the group (the lines are identical; a backup that had a gap of its
own books it as a gap, which the active's line carried):

* ``numbered``: the market-data ``msg_seq``\\ s the channel gave (a survivor's next ``msg_seq``
  less one, less one for each session boundary, which takes a ``msg_seq`` of its own); the
  client's ``lost`` is measured against it;
* ``unaccounted`` = ``sent`` - (the positions before that survivor's walk + numbered +
  quarantined + skipped + in source gaps): messages the source sent that no adapter booked
  at all -- dropped on the way in, or never read. A drill fails on it unless the run asked for
  loss. Where the source's own numbering skips positions (a capture with a hole, a
  SequenceReset), it is counted against the positions the source's sends span
  (``covered``: its last ``source_seq``), the skipped ones booked as gaps or declared absent.

:func:`account` is pure (statuses in, an :class:`GroupAccount` out); :func:`settle` polls the
survivors' control sockets until their positions stop moving.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from feedha.cluster import control

__all__ = ["GroupAccount", "account", "settle"]

SETTLE_MAX_S: Final = 180.0  # the longest a backlog may take to be read once the source has ended
SETTLE_STILL_S: Final = 3.0  # positions that did not move for this long have settled
POLL_S: Final = 0.3


@dataclass(frozen=True, slots=True)
class GroupAccount:
    """What the group booked of ``sent`` source messages (see the module docstring)."""

    sent: int
    adapter: int | None  # whose ledger speaks for the group (None: no survivor)
    numbered: int  # market-data msg_seqs the channel gave
    booked: int  # source positions that survivor booked (declared absent ones included)
    covered: int = -1  # the positions the source's sends span (-1: as many as it sent)
    quarantined: int = 0
    skipped: int = 0
    in_gaps: int = 0
    gap_ranges: int = 0
    unexplained: int = 0  # that survivor's own bookkeeping check (0)
    gaps: list[dict[str, Any]] = field(default_factory=list)

    @property
    def unaccounted(self) -> int:
        """Messages sent that no adapter booked (negative: booked more than the source covered)."""
        return (self.sent if self.covered < 0 else self.covered) - self.booked

    def summary(self) -> dict[str, Any]:
        """The drill's keys: ``unaccounted``, ``source_gaps`` and the ``accounting`` behind them."""
        return {
            "unaccounted": self.unaccounted,
            "source_gaps": self.in_gaps,
            "accounting": {
                "adapter": self.adapter,
                "sent": self.sent,
                "covered": self.sent if self.covered < 0 else self.covered,
                "booked": self.booked,
                "numbered": self.numbered,
                "quarantined": self.quarantined,
                "skipped": self.skipped,
                "in_gaps": self.in_gaps,
                "gap_ranges": self.gap_ranges,
                "unexplained": self.unexplained,
                "gaps": self.gaps,
            },
        }


def _booked(ledger: Mapping[str, Any]) -> int:
    # Every position passed: the ledger's categories (declared absent ones too), after its base.
    keys = ("base", "numbered", "quarantined", "skipped", "in_gaps", "declared_absent")
    return sum(int(ledger[key]) for key in keys)


def _numbered(status: Mapping[str, Any]) -> int:
    # msg_seqs given so far, less the session boundaries (each took one; sessions count from 1).
    return int(status.get("next_msg_seq", 1)) - 1 - max(0, int(status.get("session", 1)) - 1)


def account(statuses: Mapping[int, Mapping[str, Any]], sent: int, covered: int = -1) -> GroupAccount:
    """The group's account of ``sent`` source messages from its survivors' statuses (pure).

    Args:
        statuses: each live adapter's status (its control socket's ``status`` reply).
        sent: what the source says it sent (valid messages, poison in place of one included).
        covered: the positions its sends span (its last ``source_seq``); -1: ``sent``.
    """
    booked = {
        number: _booked(status["accounting"]) for number, status in statuses.items() if "accounting" in status
    }
    if not booked:
        return GroupAccount(sent=sent, adapter=None, numbered=0, booked=0, covered=covered)
    best = max(booked, key=lambda number: (booked[number], -number))
    ledger = statuses[best]["accounting"]
    return GroupAccount(
        sent=sent,
        adapter=best,
        numbered=max(_numbered(status) for status in statuses.values()),
        booked=booked[best],
        covered=covered,
        quarantined=int(ledger["quarantined"]),
        skipped=int(ledger["skipped"]),
        in_gaps=int(ledger["in_gaps"]),
        gap_ranges=int(ledger["gap_ranges"]),
        unexplained=int(ledger["unexplained"]),
        gaps=list(ledger.get("gaps", [])),
    )


def settle(
    controls: Callable[[], Mapping[int, str]],
    sent: int,
    covered: int = -1,
    *,
    max_s: float = SETTLE_MAX_S,
    still_s: float = SETTLE_STILL_S,
) -> GroupAccount:
    """Poll the live adapters until every sent message is booked or nothing moved for ``still_s``.

    Args:
        controls: the live adapters' control endpoints now, by number (asked again each poll:
            one may die meanwhile).
        sent: what the source sent.
        covered: the positions its sends span (:func:`account`).
    """
    deadline, moved_at = time.monotonic() + max_s, time.monotonic()
    last: tuple[int, ...] | None = None
    while True:
        statuses: dict[int, Mapping[str, Any]] = {}
        for number, endpoint in controls().items():
            try:
                statuses[number] = control(endpoint, "status", timeout=2.0)
            except TimeoutError:
                continue  # busy or gone: asked again next time
        result = account(statuses, sent, covered)
        positions = tuple(sorted(int(s.get("last_source_seq", 0)) for s in statuses.values()))
        now = time.monotonic()
        if positions != last:
            last, moved_at = positions, now
        if result.unaccounted <= 0 or now - moved_at >= still_s or now >= deadline:
            return result
        time.sleep(POLL_S)  # a poll with a deadline: the backlog is read meanwhile
