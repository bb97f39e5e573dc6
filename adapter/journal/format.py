"""Pure byte formats of the journal: records, segment headers, segment names, index side files.

Theory of operation
-------------------
A journal is a directory of append-only *segment* files named
``YYYYMMDD-<first msg_seq, 20 digits>.fhj`` so that a plain sort orders
them by time and sequence. Each segment starts with a 32-byte header
(``SEGMENT_HEADER``, little-endian)::

    offset size field
         0    8 magic b"FHJSEG\\x00\\x01"
         8    2 version (1)
        10    2 header size (32)
        12    8 first msg_seq of the segment
        20    8 time_ns of the first record
        28    4 CRC32C of bytes 0..27

followed by records, each a 36-byte header and the payload::

    offset size field
         0    4 CRC32C of bytes 4 .. 36+length (header fields and payload)
         4    4 length of the payload
         8    8 msg_seq
        16    8 time_ns (publish time, ns since the Unix epoch, UTC)
        24    8 source_seq
        32    2 source_stream
        34    2 flags: bit 0 a purge record (FLAG_PURGE), bit 1 a session boundary
                (RECORD_SESSION_BOUNDARY); other bits 0
        36    n payload (the protobuf-encoded application message)

The CRC comes first so that one CRC call covers one contiguous slice. A
record is *incomplete* when fewer bytes than it needs are present (a torn or
still-being-written tail) and *corrupt* when its length is impossible, its
CRC does not match, or its msg_seq does not increase.

A record with a flag of :data:`CONTROL_FLAGS` set is a *control record*
(a purge, :data:`FLAG_PURGE`), not a message: it takes no msg_seq of its
own. Its msg_seq field names the last message record before it (0 when
none), so it may equal the previous record's; it never moves the order the
next message record is checked against, and it never gets an index entry.
Decoders hand control records over apart (``controls``) or skip them, so
every reader of messages sees exactly the messages.

Each segment may have an index side file ``<same stem>.fhi``: a 24-byte
header (magic, version, entry size, first msg_seq, CRC32C of the header) and
16-byte entries ``(msg_seq, offset)`` appended as the writer goes. Entries
are hints: a reader checks the record it seeks to and falls back to a scan.

Nothing here does I/O.
"""

from __future__ import annotations

import datetime as _dt
import functools
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from feedha.adapter.journal.choice import FRAMING
from feedha.adapter.journal.errors import CorruptRecordError

# The layout's numbers are part of the format: re-exported (``as``) for the format's readers.
from feedha.adapter.journal.layout import CONTROL_FLAGS as CONTROL_FLAGS
from feedha.adapter.journal.layout import FLAG_PURGE as FLAG_PURGE
from feedha.adapter.journal.layout import MAX_PAYLOAD_BYTES as MAX_PAYLOAD_BYTES
from feedha.adapter.journal.layout import RECORD_HEADER as RECORD_HEADER
from feedha.adapter.journal.layout import RECORD_HEADER_SIZE as RECORD_HEADER_SIZE
from feedha.adapter.journal.layout import RECORD_SESSION_BOUNDARY as RECORD_SESSION_BOUNDARY
from feedha.adapter.journal.layout import STATUSES
from feedha.adapter.journal.layout import DecodeStatus as DecodeStatus

CRC_FIELD: Final = struct.Struct("<I")

SEGMENT_MAGIC: Final = b"FHJSEG\x00\x01"
SEGMENT_VERSION: Final = 1
SEGMENT_HEADER: Final = struct.Struct("<8sHHQQI")
SEGMENT_HEADER_SIZE: Final = SEGMENT_HEADER.size  # 32
SEGMENT_SUFFIX: Final = ".fhj"
INDEX_SUFFIX: Final = ".fhi"

INDEX_MAGIC: Final = b"FHJIDX\x00\x01"
INDEX_HEADER: Final = struct.Struct("<8sHHQI")
INDEX_HEADER_SIZE: Final = INDEX_HEADER.size  # 24
INDEX_ENTRY: Final = struct.Struct("<QQ")
INDEX_ENTRY_SIZE: Final = INDEX_ENTRY.size  # 16

NS_PER_DAY: Final = 86_400 * 1_000_000_000
MAX_U64: Final = 2**64 - 1
_EPOCH_ORDINAL: Final = _dt.date(1970, 1, 1).toordinal()
_SEGMENT_NAME: Final = re.compile(r"^(\d{8})-(\d{20})\.fhj$")


class Record(NamedTuple):
    """One journaled message.

    A NamedTuple rather than a dataclass: readers build hundreds of thousands
    of these per second and tuple construction is several times cheaper.

    Attributes:
        msg_seq: the line's message sequence number (strictly increasing).
        time_ns: publish time, ns since the Unix epoch (UTC).
        source_stream: the source stream the message came from.
        source_seq: the message's sequence number on that source stream.
        payload: the protobuf-encoded application message.
        flags: the record flags (``RECORD_SESSION_BOUNDARY``; 0 for a market-data message).
    """

    msg_seq: int
    time_ns: int
    source_stream: int
    source_seq: int
    payload: bytes
    flags: int = 0

    @property
    def is_session_boundary(self) -> bool:
        """Whether this is an end-of-session record (flag bit 1)."""
        return bool(self.flags & RECORD_SESSION_BOUNDARY)


class ControlRecord(NamedTuple):
    """A control record (not a message): a purge.

    Attributes:
        flags: its flag bits (:data:`FLAG_PURGE`).
        after_seq: the msg_seq of the last message record before it (0: none).
        time_ns: when it was written, ns since the Unix epoch (UTC).
        payload: what it says (a purge record: a serialized ``feedha.v1.PurgeEntry``).
    """

    flags: int
    after_seq: int
    time_ns: int
    payload: bytes


def as_control(flags: int, record: Record) -> ControlRecord:
    """A control record as decoded (a :class:`Record` and its flags) in its own type."""
    return ControlRecord(flags, record.msg_seq, record.time_ns, record.payload)


_BAD_LENGTH: Final = STATUSES.index(DecodeStatus.BAD_LENGTH)
_BAD_CRC: Final = STATUSES.index(DecodeStatus.BAD_CRC)


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodeResult:
    """What :func:`decode_records` found.

    Attributes:
        records: the whole, valid message records, in order.
        end: offset just past the last valid record.
        status: why decoding stopped at ``end``.
        controls: the control records among them when asked for: ``(index in records of the
            message record that follows it, flags, record)``.
    """

    records: list[Record]
    end: int
    status: DecodeStatus
    controls: list[tuple[int, int, Record]] = field(default_factory=list)

    @property
    def is_corrupt(self) -> bool:
        """True when decoding stopped on a bad record rather than on the end of the data."""
        return self.status not in (DecodeStatus.END, DecodeStatus.INCOMPLETE)


def encode_record(record: Record) -> bytes:
    """Frame one record.

    Args:
        record: the record to frame.

    Returns:
        The header and payload, ready to append to a segment.

    Raises:
        ValueError: a field is out of range or the payload is too large.
    """
    # One C call (adapter.journal._native); the same bytes as _reference.frame_records.
    return FRAMING.frame_records(
        record.msg_seq,
        record.time_ns,
        record.source_stream,
        (record.source_seq,),
        (record.payload,),
        record.flags,
    )


def decode_record(data: bytes | bytearray | memoryview, pos: int = 0) -> tuple[Record, int] | None:
    """Decode the record starting at ``pos``.

    Args:
        data: bytes holding zero or more records.
        pos: offset of the record.

    Returns:
        ``(record, end)`` with ``end`` the offset just past it, or ``None``
        when ``data`` does not yet hold the whole record.

    Raises:
        CorruptRecordError: impossible length or CRC mismatch.
    """
    if len(data) - pos < RECORD_HEADER_SIZE:
        return None
    records, end, status = FRAMING.decode_records(data, pos, -1, 1, Record)
    if records:
        return records[0], end
    if status in (_BAD_LENGTH, _BAD_CRC):
        raise CorruptRecordError(STATUSES[status].value, offset=pos)
    return None


def decode_records(
    data: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    prev_seq: int = -1,
    max_records: int | None = None,
    with_controls: bool = False,
) -> DecodeResult:
    """Decode consecutive records from ``pos`` until the data ends or a record is bad.

    Args:
        data: bytes holding records.
        pos: offset of the first record.
        prev_seq: msg_seq of the record before ``pos`` (-1 for none); every
            message record's msg_seq must be greater than the one before it.
        max_records: stop after this many message records (``None``: no limit).
        with_controls: also return the control records (else they are checked and skipped).

    Returns:
        The valid records, the offset after them and why decoding stopped.
    """
    # Strategy: the whole loop (length, CRC and order checks, Record objects)
    # runs in C, one call per chunk: readers and recovery run it over every
    # byte of the journal.
    controls: list[tuple[int, int, Record]] | None = [] if with_controls else None
    records, end, status = FRAMING.decode_records(
        data, pos, prev_seq, -1 if max_records is None else max_records, Record, controls
    )
    return DecodeResult(records=records, end=end, status=STATUSES[status], controls=controls or [])


class RecordDecoder:
    """Incremental decoder: feed bytes in any pieces, take whole records out.

    Example::

        decoder = RecordDecoder()
        decoder.feed(chunk)
        for record in decoder:
            ...
    """

    def __init__(self, *, prev_seq: int = -1) -> None:
        """Create an empty decoder.

        Args:
            prev_seq: msg_seq before the first record to come (-1 for none).
        """
        self._buffer = bytearray()
        self._prev_seq = prev_seq

    def __repr__(self) -> str:
        return f"<RecordDecoder [buffered={len(self._buffer)}, prev_seq={self._prev_seq}]>"

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a whole record."""
        return len(self._buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Add bytes.

        Args:
            data: the next bytes of the stream.
        """
        self._buffer += data

    def next_record(self) -> Record | None:
        """Take the next whole record.

        Returns:
            The record, or ``None`` until more bytes are fed.

        Raises:
            CorruptRecordError: bad length, CRC or msg_seq order.
        """
        decoded = decode_record(self._buffer)
        if decoded is None:
            return None
        record, end = decoded
        if record.msg_seq <= self._prev_seq:
            raise CorruptRecordError("bad_seq", offset=0)
        del self._buffer[:end]
        self._prev_seq = record.msg_seq
        return record

    def __iter__(self) -> Iterator[Record]:
        while (record := self.next_record()) is not None:
            yield record


# -- segment header and names -------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentHeader:
    """The fixed header at the start of every segment.

    Attributes:
        first_seq: msg_seq of the segment's first record.
        first_time_ns: time_ns of that record.
    """

    first_seq: int
    first_time_ns: int


def encode_segment_header(header: SegmentHeader) -> bytes:
    """Encode a segment header.

    Args:
        header: the values to encode.

    Returns:
        ``SEGMENT_HEADER_SIZE`` bytes.
    """
    body = SEGMENT_HEADER.pack(
        SEGMENT_MAGIC, SEGMENT_VERSION, SEGMENT_HEADER_SIZE, header.first_seq, header.first_time_ns, 0
    )[:-4]
    return body + CRC_FIELD.pack(FRAMING.crc32c(body))


def decode_segment_header(data: bytes | bytearray | memoryview) -> SegmentHeader:
    """Decode and check a segment header.

    Args:
        data: at least the first ``SEGMENT_HEADER_SIZE`` bytes of a segment.

    Returns:
        The header.

    Raises:
        CorruptRecordError: short, wrong magic or version, or bad CRC.
    """
    if len(data) < SEGMENT_HEADER_SIZE:
        raise CorruptRecordError("short_segment_header", offset=0)
    magic, version, size, first_seq, first_time_ns, crc = SEGMENT_HEADER.unpack_from(data, 0)
    if magic != SEGMENT_MAGIC:
        raise CorruptRecordError("bad_segment_magic", offset=0)
    if FRAMING.crc32c(bytes(data[: SEGMENT_HEADER_SIZE - 4])) != crc:
        raise CorruptRecordError("bad_segment_header_crc", offset=0)
    if version != SEGMENT_VERSION or size != SEGMENT_HEADER_SIZE:
        raise CorruptRecordError(f"unsupported_segment_version_{version}", offset=0)
    return SegmentHeader(first_seq=first_seq, first_time_ns=first_time_ns)


def utc_day(time_ns: int) -> int:
    """Days since the Unix epoch of a UTC timestamp.

    Args:
        time_ns: ns since the Unix epoch.

    Returns:
        The day number (day 0 is 1970-01-01).
    """
    return time_ns // NS_PER_DAY


def segment_name(*, day: int, first_seq: int) -> str:
    """The file name of a segment.

    Args:
        day: UTC day number (see :func:`utc_day`).
        first_seq: msg_seq of its first record.

    Returns:
        ``YYYYMMDD-<first_seq, 20 digits>.fhj``.
    """
    date = _dt.date(1970, 1, 1) + _dt.timedelta(days=day)
    return f"{date:%Y%m%d}-{first_seq:020d}{SEGMENT_SUFFIX}"


@functools.lru_cache(maxsize=4096)
def parse_segment_name(name: str) -> tuple[int, int] | None:
    """Parse a segment file name.

    Args:
        name: a file name (no directory).

    Returns:
        ``(day, first_seq)``, or ``None`` when ``name`` is not a segment name.
    """
    match = _SEGMENT_NAME.match(name)
    if match is None:
        return None
    digits = match.group(1)
    try:
        date = _dt.date(int(digits[:4]), int(digits[4:6]), int(digits[6:]))
    except ValueError:
        return None
    return date.toordinal() - _EPOCH_ORDINAL, int(match.group(2))


def index_name(segment: str) -> str:
    """The index side file name of a segment file name.

    Args:
        segment: the segment's file name.

    Returns:
        The same stem with the index suffix.
    """
    return segment[: -len(SEGMENT_SUFFIX)] + INDEX_SUFFIX


# -- index side file ----------------------------------------------------------------------------


def encode_index_header(first_seq: int) -> bytes:
    """Encode the header of an index side file.

    Args:
        first_seq: the segment's first msg_seq.

    Returns:
        ``INDEX_HEADER_SIZE`` bytes.
    """
    body = INDEX_HEADER.pack(INDEX_MAGIC, 1, INDEX_ENTRY_SIZE, first_seq, 0)[:-4]
    return body + CRC_FIELD.pack(FRAMING.crc32c(body))


def encode_index_entries(entries: list[tuple[int, int]]) -> bytes:
    """Encode ``(msg_seq, offset)`` index entries.

    Args:
        entries: the entries, in order.

    Returns:
        ``INDEX_ENTRY_SIZE`` bytes per entry.
    """
    return b"".join(INDEX_ENTRY.pack(seq, offset) for seq, offset in entries)


def decode_index(data: bytes, *, first_seq: int, segment_size: int) -> list[tuple[int, int]]:
    """Decode and sanity-check an index side file.

    A torn trailing entry (fewer than 16 bytes) is ignored: the writer appends
    entries as it goes and may have been stopped in the middle of one.

    Args:
        data: the whole side file.
        first_seq: the segment's first msg_seq, which the header must repeat.
        segment_size: the segment's size; every offset must lie inside it.

    Returns:
        The entries, in order.

    Raises:
        CorruptRecordError: bad header, or entries out of order or out of range.
    """
    if len(data) < INDEX_HEADER_SIZE:
        raise CorruptRecordError("short_index_header")
    magic, version, entry_size, header_seq, crc = INDEX_HEADER.unpack_from(data, 0)
    if magic != INDEX_MAGIC or FRAMING.crc32c(data[: INDEX_HEADER_SIZE - 4]) != crc:
        raise CorruptRecordError("bad_index_header")
    if version != 1 or entry_size != INDEX_ENTRY_SIZE or header_seq != first_seq:
        raise CorruptRecordError("index_mismatch")
    count = (len(data) - INDEX_HEADER_SIZE) // INDEX_ENTRY_SIZE
    entries = [INDEX_ENTRY.unpack_from(data, INDEX_HEADER_SIZE + i * INDEX_ENTRY_SIZE) for i in range(count)]
    prev_seq, prev_offset = first_seq - 1, SEGMENT_HEADER_SIZE - 1
    for seq, offset in entries:
        if seq <= prev_seq or offset <= prev_offset or offset >= segment_size:
            raise CorruptRecordError("bad_index_entry")
        prev_seq, prev_offset = seq, offset
    return [(seq, offset) for seq, offset in entries]
