"""The adapter's decisions, with no socket and no clock: the core, the sync rules, their codecs.

:class:`AdapterCore` (``core``) takes every input with the time and returns
:mod:`~adapter.core.actions`; ``sync``/``sync_types`` are the seed patent's
rules as a pure state machine; ``sequencer`` numbers messages and compares
positions; ``syncbus`` and ``commands`` turn bytes into typed messages and
back; ``gate``, ``output``, ``journaling``, ``ring``, ``health`` and ``recovery`` are
the core's parts; ``delayed``, ``purge`` and ``purging`` are the delayed line and
the purges of what it has not sent yet. Nothing here imports zmq, grpc, asyncio or time.
"""

from __future__ import annotations

from feedha.adapter.core.actions import (
    Action,
    CommandDone,
    JournalControl,
    JournalRecords,
    Publish,
    PublishDelayed,
    Quarantine,
    RecordTerm,
    SendSync,
    Status,
    WriteCheckpoint,
)
from feedha.adapter.core.config import CoreConfig
from feedha.adapter.core.machine import AdapterCore, SyncView

__all__ = [
    "Action",
    "AdapterCore",
    "CommandDone",
    "CoreConfig",
    "JournalControl",
    "JournalRecords",
    "Publish",
    "PublishDelayed",
    "Quarantine",
    "RecordTerm",
    "SendSync",
    "Status",
    "SyncView",
    "WriteCheckpoint",
]
