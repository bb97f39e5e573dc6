"""What the source pump's planning reads of the adapter core, as a protocol.

:mod:`adapter.core.pumping` plans, journals and settles a pump run from the
core's parts and answers; it names the core by this protocol, so it imports
nothing of :mod:`adapter.core.machine` (which imports it): the imports stay a
tree, type-only ones included.
"""

from __future__ import annotations

from typing import Any, Protocol

from feedha.adapter.core.busy import BusyDesk
from feedha.adapter.core.config import CoreConfig
from feedha.adapter.core.conflated_side import ConflatedSide
from feedha.adapter.core.emitter import LineEmitter
from feedha.adapter.core.gaps import GapDesk
from feedha.adapter.core.pipeline import Pipeline
from feedha.adapter.core.sync_types import SyncState

__all__ = ["PumpingCore"]


class PumpingCore(Protocol):
    """The parts and answers of :class:`~adapter.core.machine.AdapterCore` a pump run needs."""

    config: CoreConfig
    pipeline: Pipeline
    emitter: LineEmitter
    busy: BusyDesk
    conflated: ConflatedSide
    gaps: GapDesk

    @property
    def sync(self) -> SyncState: ...

    def reads_source(self, now: float) -> bool: ...

    def is_throttled(self) -> bool: ...

    # A ``pumping.PumpReport`` or ``None``: named loosely, as naming it would make an import loop.
    def pump_report(self) -> Any: ...

    def next_deadline(self, now: float, *, heartbeat: bool = True) -> float: ...

    def source_batch(self) -> float: ...
