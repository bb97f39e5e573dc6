"""The journal's configuration: one frozen dataclass, defaults as named constants."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Final

from feedha.adapter.errors import ConfigError


class FsyncPolicy(Enum):
    """When the writer asks the OS to put written bytes on stable storage.

    ``NONE`` leaves it to the OS (a process crash loses nothing already
    written, a machine crash may lose the last seconds); ``BATCH`` syncs once
    per group commit; ``ALWAYS`` writes and syncs every append before
    ``append`` returns (slow: one disk round trip per message).
    """

    NONE = "none"
    BATCH = "batch"
    ALWAYS = "always"


SEGMENT_BYTES: Final = 64 * 1024 * 1024
BUFFER_BYTES: Final = 1024 * 1024
BUFFER_COUNT: Final = 4
FLUSH_INTERVAL_S: Final = 0.002
INDEX_INTERVAL_BYTES: Final = 64 * 1024
FSYNC: Final = FsyncPolicy.BATCH
MIN_SEGMENT_BYTES: Final = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalConfig:
    """Settings of a journal writer (readers need none).

    Attributes:
        segment_bytes: roll to a new segment before one would exceed this size
            (a single larger record gets a segment of its own). Segments also
            roll when a record's UTC day differs from the segment's.
        buffer_bytes: group-commit buffer size; a full buffer is handed to the
            flusher at once.
        buffers: how many buffers may be in flight; when all are, ``append``
            waits for the disk (back-pressure).
        flush_interval_s: the longest a record stays in the buffer before the
            flusher writes it.
        fsync: the :class:`FsyncPolicy`.
        index_interval_bytes: one sparse index entry at least every this many bytes.
        retention_max_age_s: retention deletes segments last written longer ago
            than this (``None``: no age limit).
        retention_max_bytes: retention deletes the oldest segments while the
            journal is larger than this (``None``: no size limit).
    """

    segment_bytes: int = SEGMENT_BYTES
    buffer_bytes: int = BUFFER_BYTES
    buffers: int = BUFFER_COUNT
    flush_interval_s: float = FLUSH_INTERVAL_S
    fsync: FsyncPolicy = FSYNC
    index_interval_bytes: int = INDEX_INTERVAL_BYTES
    retention_max_age_s: float | None = None
    retention_max_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.segment_bytes < MIN_SEGMENT_BYTES:
            raise ConfigError(f"segment_bytes must be at least {MIN_SEGMENT_BYTES}: {self.segment_bytes!r}")
        if self.buffer_bytes < 4096:
            raise ConfigError(f"buffer_bytes must be at least 4096: {self.buffer_bytes!r}")
        if self.buffers < 2:
            raise ConfigError(f"buffers must be at least 2: {self.buffers!r}")
        if not (math.isfinite(self.flush_interval_s) and 0 < self.flush_interval_s <= 10):
            raise ConfigError(f"flush_interval_s must be in (0, 10]: {self.flush_interval_s!r}")
        if not isinstance(self.fsync, FsyncPolicy):
            raise ConfigError(f"fsync must be a FsyncPolicy: {self.fsync!r}")
        if self.index_interval_bytes < 1:
            raise ConfigError(f"index_interval_bytes must be positive: {self.index_interval_bytes!r}")
        if self.retention_max_age_s is not None and not self.retention_max_age_s > 0:
            raise ConfigError(f"retention_max_age_s must be positive: {self.retention_max_age_s!r}")
        if self.retention_max_bytes is not None and self.retention_max_bytes < 0:
            raise ConfigError(f"retention_max_bytes must be >= 0: {self.retention_max_bytes!r}")
