"""The adapter's decisions, with no socket and no clock: the core, the sync rules, their codecs.

:class:`AdapterCore` (``machine``) takes every input with the time and returns
:mod:`~adapter.core.actions`, composed of ``parts`` it routes between: the
``driver`` (the sync rules' state, and where the parts' answers are carried
out), the ``source_side`` (the source's frames and pauses), the
``command_desk`` (commands and the replies owed), the ``health_side``
(peers' figures, machine samples, faults), ``reports`` (its sync-bus
messages about itself), ``line_timers`` and ``restart``; ``sync``/``sync_types`` are the seed patent's
rules as a pure state machine; ``pipeline`` converts and numbers the source
(``emitter``, ``gate``, ``output`` and ``journaling`` put what it numbered on
the line and in the journal); ``sequencer`` numbers messages and compares
positions; ``gaps`` tells a gap every replica saw from one adapter's own;
``session``/``session_driver`` keep the trading day; ``syncbus`` and
``commands`` turn bytes into typed messages and back; ``delayed``, ``purge``
and ``purging`` are the delayed line and the purges of what it has not sent
yet; ``conflation``, ``conflated_side`` and ``conflated_output`` are the
conflated line's interval protocol, its part in the core, and its packets;
``views`` is what the core shows other threads. Nothing here imports zmq,
grpc, asyncio or time.
"""

from __future__ import annotations

from feedha.adapter.core.actions import (
    Action,
    BurnCpu,
    CommandDone,
    JournalControl,
    JournalRecords,
    Publish,
    PublishConflated,
    PublishDelayed,
    Quarantine,
    ReadSync,
    RecordTerm,
    ReplyAdmin,
    ReplyControl,
    SampleMachine,
    SendSync,
    Status,
    WriteCheckpoint,
)
from feedha.adapter.core.config import CoreConfig
from feedha.adapter.core.machine import AdapterCore
from feedha.adapter.core.views import CoreView, SyncView

__all__ = [
    "Action",
    "AdapterCore",
    "BurnCpu",
    "CommandDone",
    "CoreConfig",
    "CoreView",
    "JournalControl",
    "JournalRecords",
    "Publish",
    "PublishConflated",
    "PublishDelayed",
    "Quarantine",
    "ReadSync",
    "RecordTerm",
    "ReplyAdmin",
    "ReplyControl",
    "SampleMachine",
    "SendSync",
    "Status",
    "SyncView",
    "WriteCheckpoint",
]
