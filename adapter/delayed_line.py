"""The delayed line's shell: its socket (an XPUB) and the journal tailer that feeds the core's delayed line.

The decisions -- what is due, tombstones for purges, heartbeats, whether this
backup may send yet -- are :mod:`adapter.core.delayed`'s, inside the core. Each
turn of the runner's loop :meth:`DelayedLineSocket.feed` reads journal records
while the core asks for them (a bounded batch per read, a few reads per turn,
so a tailer catching up never starves the line or the sync bus), and the core's
``PublishDelayed`` actions come back to :meth:`DelayedLineSocket.send`.
The socket is an ``XPUB`` served like the line (:meth:`~adapter.zap.DataPlaneGuard.serve`):
a key that loses access is cut off alone, nobody else reconnects.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final

from feedha.adapter.access import DELAYED
from feedha.adapter.config import AdapterConfig
from feedha.adapter.core.records import RecordLike
from feedha.adapter.line import ServedSocket
from feedha.adapter.persistence import JournalKeeper
from feedha.adapter.zap import DataPlaneGuard

logger = logging.getLogger(__name__)

__all__ = ["DelayedLineSocket"]

READS_PER_TURN: Final = 4  # journal reads (each up to 8,192 records) per turn of the loop


class DelayedLineSocket(ServedSocket):
    """The delayed line of one adapter: bound, fed from the journal, rebound after a revocation.

    Args:
        config: the adapter's configuration (``delayed_line_endpoint`` set).
        guard: CURVE for the socket (delayed-only keys are admitted here).
        journal: the adapter's journal (the tailer reads it).
    """

    def __init__(self, config: AdapterConfig, guard: DataPlaneGuard, journal: JournalKeeper) -> None:
        if config.delayed_line_endpoint is None:
            raise ValueError("DelayedLineSocket needs config.delayed_line_endpoint")
        super().__init__(config.delayed_line_endpoint, DELAYED, config, guard)
        self._journal = journal

    def feed(
        self,
        wants: Callable[..., int | None],
        take: Callable[..., None],
        *,
        wall_ns: int,
    ) -> None:
        """Read journal records while the core's delayed line wants them.

        Args:
            wants: ``wants(wall_ns=...)``: the msg_seq to read from now, or ``None``.
            take: ``take(records, caught_up=...)``: hands what was read to the core.
            wall_ns: the wall clock.
        """
        self.serve(time.monotonic())
        for _ in range(READS_PER_TURN):
            start = wants(wall_ns=wall_ns)
            if start is None:
                return
            records: list[RecordLike]
            records, caught_up = self._journal.read_delayed(start)  # type: ignore[assignment]
            take(records, caught_up=caught_up)
            if caught_up:
                return

    def send(self, packet: bytes) -> None:
        """Publish one delayed packet (nowhere while the socket waits to be bound again)."""
        self._send(packet)
