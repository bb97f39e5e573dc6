"""What waits in the source path, and why: a session fence, a committed roll, a gap the group is asked about.

Session boundaries (:mod:`adapter.core.session`): while the group agrees on
one, a *fence* stops conversion after a source position; the first message
past it and the rest of its frame wait (``deferred``) and the runner reads no
more source. Once committed the pipeline rolls right after the fence -- the
state's daily fields start again, the end-of-session block takes the next
msg_seq -- and converts what waited. A gap the active asks the group about
waits the same way (``holding_gap``).

:class:`Waiting` owns that state and decides what is let go when; the
:class:`~adapter.core.pipeline.Pipeline` converts what it hands back. Pure.
"""

from __future__ import annotations

from feedha.adapter.core.gaps import Gap
from feedha.adapter.core.session import Boundary

__all__ = ["Waiting"]


class Waiting:
    """The source path's waits: the fence, the committed roll, the gap held, and what waits behind them."""

    def __init__(self) -> None:
        self.fence: int | None = None  # convert nothing past this source position (a boundary is agreed)
        self.deferred = b""  # the first message past the fence (or a gap) and the rest of its frame
        self.holding_gap: Gap | None = None  # the active asks its backups about this gap first
        self.pending_roll: Boundary | None = None  # committed: roll on reaching the fence

    def __repr__(self) -> str:
        return f"<Waiting [fence={self.fence}, deferred={len(self.deferred)}, gap={self.holding_gap}]>"

    @property
    def busy(self) -> bool:
        """Whether input waits (a deferred frame, a gap held, a roll to carry out)."""
        return bool(self.deferred) or self.holding_gap is not None or self.pending_roll is not None

    def at_fence(self, last_source_seq: int) -> bool:
        """Whether everything up to the fence is converted (the next message waits, or none came)."""
        return (
            self.fence is not None
            and self.holding_gap is None
            and (bool(self.deferred) or last_source_seq >= self.fence)
        )

    def take(self) -> bytes:
        """What waited, to convert again now (it waits again at a new fence)."""
        data, self.deferred = self.deferred, b""
        return data

    def release_gap(self) -> bytes:
        """The group answered about the gap held at: what waited (``b""``: no gap was held)."""
        if self.holding_gap is None:
            return b""
        self.holding_gap = None
        return self.take()

    def hold_at(self, after: int) -> bytes:
        """Convert nothing past ``after`` from now on; a fence moved further on lets what waited go."""
        if self.pending_roll is not None:
            return b""
        raised = self.fence is not None and after > self.fence
        self.fence = after
        return self.take() if raised else b""

    def commit(self, boundary: Boundary, last_source_seq: int) -> bool:
        """Roll into ``boundary.started`` right after its fence; whether that is now (it is reached)."""
        self.fence, self.pending_roll = boundary.after_source_seq, boundary
        return self.at_fence(last_source_seq)

    def take_roll(self) -> Boundary:
        """The committed boundary, to roll into now (the fence goes with it)."""
        boundary = self.pending_roll
        assert boundary is not None
        self.pending_roll = self.fence = None
        return boundary

    def unfence(self) -> bytes:
        """The boundary was withdrawn (or will not be carried out here): what waited."""
        if self.pending_roll is not None or self.fence is None:
            return b""
        self.fence = None
        return self.take()

    def abandon(self) -> bytes:
        """Forget a boundary this adapter can no longer carry out where the group did: what waited."""
        self.pending_roll = self.fence = None
        return self.take()
