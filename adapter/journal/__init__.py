"""The adapter's journal: append-only segments of framed records, checkpoints, recovery, readers.

See docs/journal.md. Public API::

    writer = JournalWriter(directory, JournalConfig(fsync=FsyncPolicy.BATCH))
    writer.append(msg_seq, time_ns, source_stream, source_seq, payload)
    writer.append_batch(first_msg_seq, time_ns, source_stream, source_seqs, payloads)
    writer.write_checkpoint(msg_seq, state)
    writer.close()

    reader = JournalReader(directory)
    for record in reader.read(from_seq): ...
    reader.read_range(first, last)
"""

from __future__ import annotations

from feedha.adapter.journal.checkpoint import Checkpoint, CheckpointStore
from feedha.adapter.journal.config import FsyncPolicy, JournalConfig
from feedha.adapter.journal.errors import (
    CorruptRecordError,
    JournalClosedError,
    JournalError,
    JournalIOError,
    SequenceError,
)
from feedha.adapter.journal.format import Record
from feedha.adapter.journal.reader import JournalReader
from feedha.adapter.journal.recovery import RecoveryReport, recover
from feedha.adapter.journal.retention import apply_retention
from feedha.adapter.journal.writer import JournalWriter

__all__ = [
    "Checkpoint",
    "CheckpointStore",
    "CorruptRecordError",
    "FsyncPolicy",
    "JournalClosedError",
    "JournalConfig",
    "JournalError",
    "JournalIOError",
    "JournalReader",
    "JournalWriter",
    "Record",
    "RecoveryReport",
    "SequenceError",
    "apply_retention",
    "recover",
]
