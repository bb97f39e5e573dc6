"""Recovery on open, and the full verification behind ``feedha journal verify``.

Theory of operation
-------------------
Everything before the newest valid checkpoint's position was written and
synced before that checkpoint was, so recovery trusts it and validates only
what follows: every record's length, CRC and msg_seq order, segment by
segment. At the first bad or incomplete record it truncates that segment to
the last whole record and deletes every later segment (their records would
follow a hole). A checkpoint whose position no longer exists (its segment is
shorter than the position, or missing while later ones exist) is skipped for
the other one; with none valid, recovery scans the whole journal.
Index side files of the scanned segments are rewritten; older ones are
rebuilt only when missing or invalid.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from feedha.adapter.journal.checkpoint import Checkpoint, CheckpointStore
from feedha.adapter.journal.errors import CorruptRecordError
from feedha.adapter.journal.format import SEGMENT_HEADER_SIZE, DecodeStatus
from feedha.adapter.journal.segment import (
    ScanResult,
    SegmentInfo,
    SparseIndex,
    list_segments,
    load_index,
    read_segment_header_seq,
    scan_segment,
    write_index,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryReport:
    """What recovery found and cut.

    Attributes:
        checkpoint_generation: the checkpoint recovery started from (``None``: full scan).
        records_kept: records validated after the starting position and kept.
        bytes_cut: bytes removed (truncated tail plus deleted segments).
        truncated_segment: the segment cut short, if any.
        segments_removed: segments deleted because they followed a bad record.
        reason: why the tail was cut (e.g. ``"incomplete"``, ``"bad_crc"``), or ``None``.
        last_msg_seq: msg_seq of the last record kept (-1: empty journal).
        indexes_rebuilt: segments whose index side file was rewritten.
    """

    checkpoint_generation: int | None
    records_kept: int
    bytes_cut: int
    truncated_segment: str | None
    segments_removed: tuple[str, ...]
    reason: str | None
    last_msg_seq: int
    indexes_rebuilt: tuple[str, ...] = ()

    @property
    def is_clean(self) -> bool:
        """True when nothing was cut."""
        return self.bytes_cut == 0 and not self.segments_removed


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovery:
    """Recovery's result: the report plus what a writer needs to continue.

    Attributes:
        report: the report.
        tail: the last segment after recovery (``None``: no segment).
        tail_index: its sparse index.
        last_seq: msg_seq of the last record (-1: none).
        last_generation: the newest checkpoint generation on disk (0: none).
    """

    report: RecoveryReport
    tail: SegmentInfo | None
    tail_index: SparseIndex | None
    last_seq: int
    last_generation: int


@dataclass(slots=True)
class _Start:
    position: int  # index into the segment list
    offset: int | None  # None: from the segment header
    prev_seq: int
    checkpoint: Checkpoint | None


def _choose_start(segments: list[SegmentInfo], checkpoints: list[Checkpoint]) -> _Start:
    by_name = {info.name: i for i, info in enumerate(segments)}
    for checkpoint in checkpoints:
        if checkpoint.segment is None:
            return _Start(position=0, offset=None, prev_seq=-1, checkpoint=checkpoint)
        i = by_name.get(checkpoint.segment)
        if i is not None and segments[i].size >= checkpoint.offset >= SEGMENT_HEADER_SIZE:
            return _Start(
                position=i, offset=checkpoint.offset, prev_seq=checkpoint.position_seq, checkpoint=checkpoint
            )
        if i is None and all(info.first_seq > checkpoint.position_seq for info in segments):
            # Retention deleted the checkpoint's segment; everything left comes after it.
            return _Start(position=0, offset=None, prev_seq=checkpoint.position_seq, checkpoint=checkpoint)
        logger.warning("checkpoint %r does not match the journal; trying an older one", checkpoint)
    return _Start(position=0, offset=None, prev_seq=-1, checkpoint=None)


def _scan(
    info: SegmentInfo, start: _Start, is_first: bool, prev_seq: int, interval: int
) -> tuple[ScanResult, str]:
    """Scan one segment from the checkpoint offset (first segment) or its header.

    Returns the scan and the reason it stopped (``"end"`` when the segment is whole).
    """
    if is_first and start.offset is not None:
        index = load_index(info)
        if index is not None:
            kept = SparseIndex()
            for seq, offset in index.entries():
                if offset < start.offset:
                    kept.add(seq, offset)
            result = scan_segment(
                info.path, start=start.offset, prev_seq=prev_seq, index_interval_bytes=interval, index=kept
            )
            return result, result.status.value
        prev_seq = -1  # no usable index: validate the whole segment, the trusted part too
    bad = ScanResult(
        records=0, good_end=0, last_seq=prev_seq, status=DecodeStatus.BAD_SEQ, index=SparseIndex()
    )
    try:
        header_seq = read_segment_header_seq(info.path)
    except CorruptRecordError as exc:
        return bad, exc.reason
    if header_seq != info.first_seq or info.first_seq <= prev_seq:
        return bad, "segment_out_of_order"
    result = scan_segment(
        info.path, start=SEGMENT_HEADER_SIZE, prev_seq=info.first_seq - 1, index_interval_bytes=interval
    )
    return result, result.status.value


def _remove_segment(info: SegmentInfo) -> None:
    for path in (info.path, info.index_path):
        try:
            path.unlink()
        except FileNotFoundError:
            pass


def _truncate(info: SegmentInfo, size: int) -> None:
    with open(info.path, "r+b") as file:
        file.truncate(size)
        os.fsync(file.fileno())


def _remove_temporaries(directory: Path) -> None:
    for path in directory.glob("*.tmp"):
        path.unlink(missing_ok=True)


def _rebuild_missing_index(info: SegmentInfo, index_interval_bytes: int) -> bool:
    # A segment before the recovery start is trusted (a checkpoint covers it);
    # only its sparse index, when lost, is rebuilt from a scan.
    if load_index(info) is not None:
        return False
    result = scan_segment(
        info.path, start=SEGMENT_HEADER_SIZE, prev_seq=-1, index_interval_bytes=index_interval_bytes
    )
    write_index(info, result.index)
    return True


@dataclass(slots=True)
class _Walk:
    """What the walk over the segments after the recovery start has found so far."""

    prev_seq: int
    kept: int = 0
    cut: int = 0
    reason: str | None = None
    truncated: str | None = None
    removed: list[str] = field(default_factory=list)
    rebuilt: list[str] = field(default_factory=list)
    tail: SegmentInfo | None = None
    tail_index: SparseIndex | None = None

    def drop(self, info: SegmentInfo, *, apply: bool) -> None:
        self.removed.append(info.name)
        if apply:
            _remove_segment(info)

    def check(self, info: SegmentInfo, start: _Start, first: bool, interval: int, *, apply: bool) -> None:
        """Scan one segment: keep it, cut its bad tail, or remove it (everything after a cut goes)."""
        if self.reason is not None:
            self.cut += info.size
            self.drop(info, apply=apply)
            return
        result, why = _scan(info, start, first, self.prev_seq, interval)
        self.kept += result.records
        if result.records:
            self.prev_seq = max(self.prev_seq, result.last_seq)
        if why != DecodeStatus.END.value:
            self.reason = why
            self.cut += info.size - result.good_end
            if result.good_end < SEGMENT_HEADER_SIZE:
                self.drop(info, apply=apply)
                return
            self.truncated = info.name
            if apply:
                _truncate(info, result.good_end)
        self.tail = SegmentInfo(
            path=info.path,
            day=info.day,
            first_seq=info.first_seq,
            size=result.good_end,
            mtime_ns=info.mtime_ns,
        )
        self.tail_index = result.index
        if apply:
            write_index(self.tail, result.index)
            self.rebuilt.append(info.name)


def recover(directory: str | os.PathLike[str], *, index_interval_bytes: int, apply: bool = True) -> Recovery:
    """Validate the journal after the newest valid checkpoint and cut a bad tail.

    Args:
        directory: the journal directory (must exist).
        index_interval_bytes: sparse index spacing for rebuilt indexes.
        apply: when False, only report what would be cut (nothing is modified).

    Returns:
        The report and the state a writer continues from.
    """
    root = Path(directory)
    if apply:
        _remove_temporaries(root)
    segments = list_segments(root)
    checkpoints = CheckpointStore(root).valid()
    start = _choose_start(segments, checkpoints)
    walk = _Walk(prev_seq=start.prev_seq)
    for i, info in enumerate(segments):
        if i >= start.position:
            walk.check(info, start, i == start.position, index_interval_bytes, apply=apply)
        elif apply and _rebuild_missing_index(info, index_interval_bytes):
            walk.rebuilt.append(info.name)
    if walk.tail is None and segments and start.position > 0:
        last = segments[start.position - 1]
        walk.tail, walk.tail_index = last, load_index(last)
    report = RecoveryReport(
        checkpoint_generation=None if start.checkpoint is None else start.checkpoint.generation,
        records_kept=walk.kept,
        bytes_cut=walk.cut,
        truncated_segment=walk.truncated,
        segments_removed=tuple(walk.removed),
        reason=walk.reason,
        last_msg_seq=walk.prev_seq,
        indexes_rebuilt=tuple(walk.rebuilt),
    )
    if not report.is_clean:
        logger.warning("journal recovery cut %d bytes (%s): %r", walk.cut, walk.reason, report)
    generation = max((checkpoint.generation for checkpoint in checkpoints), default=0)
    return Recovery(
        report=report,
        tail=walk.tail,
        tail_index=walk.tail_index,
        last_seq=walk.prev_seq,
        last_generation=generation,
    )
