"""Retention: delete whole old segments by age or total size, never the active one."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from feedha.adapter.journal.config import JournalConfig
from feedha.adapter.journal.segment import SegmentInfo, list_segments

logger = logging.getLogger(__name__)


def select_expired(
    segments: list[SegmentInfo],
    *,
    now_ns: int,
    max_age_ns: int | None,
    max_bytes: int | None,
    keep: str | None = None,
) -> list[SegmentInfo]:
    """Choose the segments retention deletes (pure).

    A segment expires when it was last written more than ``max_age_ns``
    before ``now_ns``, or while the journal is larger than ``max_bytes``
    (oldest first). The newest segment and the one named ``keep`` (the
    writer's active segment) are never chosen, and nothing newer than a kept
    segment is deleted, so what remains is always contiguous.

    Args:
        segments: the journal's segments, oldest first.
        now_ns: the current time, ns since the Unix epoch.
        max_age_ns: age limit (``None``: none).
        max_bytes: total size limit (``None``: none).
        keep: a segment name never to delete.

    Returns:
        The segments to delete, oldest first.
    """
    total = sum(info.size for info in segments)
    chosen: list[SegmentInfo] = []
    for info in segments[:-1]:
        if info.name == keep:
            break
        too_old = max_age_ns is not None and now_ns - info.mtime_ns > max_age_ns
        too_big = max_bytes is not None and total > max_bytes
        if not (too_old or too_big):
            break
        chosen.append(info)
        total -= info.size
    return chosen


def apply_retention(
    directory: str | os.PathLike[str], config: JournalConfig, *, now_ns: int, keep: str | None = None
) -> list[Path]:
    """Delete the segments (and their index files) that :func:`select_expired` chooses.

    Args:
        directory: the journal directory.
        config: supplies ``retention_max_age_s`` and ``retention_max_bytes``.
        now_ns: the current time, ns since the Unix epoch.
        keep: a segment name never to delete (the writer's active segment).

    Returns:
        The segment files deleted.
    """
    max_age_ns = None if config.retention_max_age_s is None else int(config.retention_max_age_s * 1e9)
    expired = select_expired(
        list_segments(directory),
        now_ns=now_ns,
        max_age_ns=max_age_ns,
        max_bytes=config.retention_max_bytes,
        keep=keep,
    )
    for info in expired:
        info.path.unlink(missing_ok=True)
        info.index_path.unlink(missing_ok=True)
        logger.info("retention deleted journal segment %s (%d bytes)", info.name, info.size)
    return [info.path for info in expired]
