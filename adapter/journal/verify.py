"""Full verification of a journal (``feedha journal verify``): every record, index and checkpoint."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from feedha.adapter.journal.checkpoint import Checkpoint, CheckpointStore
from feedha.adapter.journal.errors import CorruptRecordError
from feedha.adapter.journal.format import SEGMENT_HEADER_SIZE, DecodeStatus, decode_record
from feedha.adapter.journal.segment import (
    SegmentInfo,
    list_segments,
    load_index,
    read_segment_header_seq,
    scan_segment,
)


@dataclass(slots=True, kw_only=True)
class VerifyReport:
    """What verification found.

    Attributes:
        segments: segment files checked.
        records: whole valid message records.
        purges: whole valid purge records (control records, not messages).
        bytes: total segment bytes.
        first_seq: msg_seq of the first record (``None``: empty).
        last_seq: msg_seq of the last valid record (``None``: empty).
        errors: corruption found (a non-empty list means the journal is damaged).
        warnings: problems that heal themselves (a missing or stale index side file).
        checkpoints: one line per checkpoint slot.
    """

    segments: int = 0
    records: int = 0
    purges: int = 0
    bytes: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    checkpoints: list[str] = field(default_factory=list)

    @property
    def is_ok(self) -> bool:
        """True when no corruption was found."""
        return not self.errors


def _check_index(info: SegmentInfo, report: VerifyReport) -> None:
    index = load_index(info)
    if index is None:
        report.warnings.append(f"{info.name}: index side file missing or invalid (rebuilt on the next open)")
        return
    with open(info.path, "rb") as file:
        for seq, offset in index.entries():
            try:
                found = decode_record(os.pread(file.fileno(), 1 << 20, offset))
            except CorruptRecordError:
                found = None
            if found is None or found[0].msg_seq != seq:
                report.warnings.append(
                    f"{info.name}: index entry ({seq}, {offset}) does not point at msg_seq {seq}"
                )
                return


def _check_segment(info: SegmentInfo, prev_seq: int, report: VerifyReport) -> int:
    try:
        header_seq = read_segment_header_seq(info.path)
    except CorruptRecordError as exc:
        report.errors.append(f"{info.name}: bad segment header ({exc.reason})")
        return prev_seq
    if header_seq != info.first_seq:
        report.errors.append(
            f"{info.name}: header names first msg_seq {header_seq}, file name {info.first_seq}"
        )
    if info.first_seq <= prev_seq:
        report.errors.append(f"{info.name}: starts at msg_seq {info.first_seq}, not after {prev_seq}")
    result = scan_segment(
        info.path,
        start=SEGMENT_HEADER_SIZE,
        prev_seq=max(prev_seq, info.first_seq - 1),
        index_interval_bytes=1 << 62,
    )
    report.records += result.records
    report.purges += result.controls
    if result.records:
        report.first_seq = info.first_seq if report.first_seq is None else report.first_seq
        report.last_seq = result.last_seq
    if result.status is not DecodeStatus.END:
        cut = info.size - result.good_end
        report.errors.append(
            f"{info.name}: {result.status.value} record at offset {result.good_end} "
            f"({cut} bytes after the last whole record)"
        )
    _check_index(info, report)
    return max(prev_seq, result.last_seq)


def _check_checkpoints(directory: Path, segments: list[SegmentInfo], report: VerifyReport) -> None:
    sizes = {info.name: info.size for info in segments}
    for path, item in CheckpointStore(directory).load_all():
        if item is None:
            report.checkpoints.append(f"{path.name}: absent")
        elif isinstance(item, CorruptRecordError):
            report.checkpoints.append(f"{path.name}: INVALID ({item.reason})")
            report.errors.append(f"{path.name}: invalid checkpoint ({item.reason})")
        else:
            report.checkpoints.append(f"{path.name}: {_describe(item)}")
            if item.segment is not None and item.segment in sizes and sizes[item.segment] < item.offset:
                report.errors.append(f"{path.name}: position {item.offset} is past the end of {item.segment}")


def _describe(checkpoint: Checkpoint) -> str:
    return (
        f"generation {checkpoint.generation}, msg_seq {checkpoint.msg_seq}, "
        f"position {checkpoint.segment}@{checkpoint.offset}, state {len(checkpoint.state)} bytes"
    )


def verify_journal(directory: str | os.PathLike[str]) -> VerifyReport:
    """Check every segment header, record, index side file and checkpoint, changing nothing.

    Args:
        directory: the journal directory.

    Returns:
        The report; ``errors`` lists any corruption.
    """
    root = Path(directory)
    report = VerifyReport()
    segments = list_segments(root)
    prev_seq = -1
    for info in segments:
        report.segments += 1
        report.bytes += info.size
        prev_seq = _check_segment(info, prev_seq, report)
    _check_checkpoints(root, segments, report)
    return report
