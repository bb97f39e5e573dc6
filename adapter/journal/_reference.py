"""Pure-Python reference of :mod:`adapter.journal._native`: same functions, same bytes, same errors.

It is the specification the C extension is tested against byte for byte,
and the fallback :mod:`adapter.journal.choice` gives when the extension was
not built. CRC32C comes from the ``crc32c`` package (itself compiled; the
tests also check both against a bit-by-bit CRC).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Sequence
from typing import Final, TypeAlias, TypeVar

from crc32c import crc32c as _crc32c

from feedha.adapter.journal.layout import (
    CONTROL_FLAGS,
    MAX_PAYLOAD_BYTES,
    RECORD_HEADER,
    RECORD_HEADER_SIZE,
    STATUSES,
    DecodeStatus,
)

HARDWARE_CRC: Final = False

_HEADER: Final = RECORD_HEADER
_CRC: Final = struct.Struct("<I")
_MAX_U64: Final = 2**64 - 1
_MAX_U32: Final = 2**32 - 1
_MAX_U16: Final = 2**16 - 1
# decode_records's status numbers (the order of layout.STATUSES).
_STATUS_END: Final = STATUSES.index(DecodeStatus.END)
_STATUS_INCOMPLETE: Final = STATUSES.index(DecodeStatus.INCOMPLETE)
_STATUS_BAD_LENGTH: Final = STATUSES.index(DecodeStatus.BAD_LENGTH)
_STATUS_BAD_CRC: Final = STATUSES.index(DecodeStatus.BAD_CRC)
_STATUS_BAD_SEQ: Final = STATUSES.index(DecodeStatus.BAD_SEQ)

_Buffer = bytes | bytearray | memoryview
_R = TypeVar("_R", bound=tuple[int, int, int, int, bytes, int])
AppendBatch: TypeAlias = Callable[[int, int, int, Sequence[int], Sequence[bytes]], None]
"""A journal writer's ``append_batch(first_msg_seq, time_ns, source_stream, source_seqs, payloads)``."""


def _uint(value: object, name: str, maximum: int) -> int:
    if not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not 0 <= value <= maximum:
        raise ValueError(f"{name} out of range 0..{maximum}: {value!r}")
    return value


def _payload(value: object, index: int) -> bytes:
    if isinstance(value, bytes):
        payload = value
    elif isinstance(value, bytearray | memoryview):
        payload = bytes(value)
    else:
        raise TypeError(f"payloads[{index}] must be bytes, not {type(value).__name__}")
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"payloads[{index}] too large: {len(payload)} bytes > {MAX_PAYLOAD_BYTES}")
    return payload


def crc32c(data: _Buffer, value: int = 0) -> int:
    """CRC32C of ``data`` continuing from ``value`` (a previous result)."""
    return _crc32c(data, _uint(value, "value", _MAX_U32))


crc32c_software = crc32c


def _record(
    msg_seq: int, time_ns: int, source_stream: int, source_seq: int, payload: bytes, flags: int
) -> bytes:
    body = _HEADER.pack(0, len(payload), msg_seq, time_ns, source_seq, source_stream, flags)[4:] + payload
    return _CRC.pack(_crc32c(body)) + body


def _batch_fields(
    first_msg_seq: int,
    time_ns: int,
    source_stream: int,
    source_seqs: Sequence[int],
    payloads: Sequence[object],
    flags: int,
) -> int:
    _uint(first_msg_seq, "first_msg_seq", _MAX_U64)
    _uint(time_ns, "time_ns", _MAX_U64)
    _uint(source_stream, "source_stream", _MAX_U16)
    _uint(flags, "flags", _MAX_U16)
    if len(source_seqs) != len(payloads):
        raise ValueError(f"source_seqs and payloads differ in length: {len(source_seqs)} != {len(payloads)}")
    count = len(payloads)
    if count and first_msg_seq + count - 1 > _MAX_U64:
        raise ValueError(
            f"msg_seq out of range: first_msg_seq {first_msg_seq} + {count} records passes 2**64-1"
        )
    return count


def frame_records(
    first_msg_seq: int,
    time_ns: int,
    source_stream: int,
    source_seqs: Sequence[int],
    payloads: Sequence[_Buffer],
    flags: int = 0,
) -> bytes:
    """Framed records ``first_msg_seq``, ``first_msg_seq + 1``, ... sharing one ``time_ns``."""
    count = _batch_fields(first_msg_seq, time_ns, source_stream, source_seqs, payloads, flags)
    parts = [_payload(payloads[i], i) for i in range(count)]
    return b"".join(
        _record(
            first_msg_seq + i,
            time_ns,
            source_stream,
            _uint(source_seqs[i], f"source_seqs[{i}]", _MAX_U64),
            payload,
            flags,
        )
        for i, payload in enumerate(parts)
    )


def _window(buf: bytearray | memoryview, offset: int, limit: int) -> int:
    if not 0 <= offset <= len(buf):
        raise ValueError(f"offset out of range 0..{len(buf)}: {offset}")
    return max(offset, min(limit, len(buf)))


def _span(count: int, start: int, stop: int) -> int:
    stop = count if stop < 0 or stop > count else stop
    if not 0 <= start <= stop:
        raise ValueError(f"start out of range 0..{stop}: {start}")
    return stop


def frame_into(
    buf: bytearray | memoryview,
    offset: int,
    limit: int,
    first_msg_seq: int,
    time_ns: int,
    source_stream: int,
    source_seqs: Sequence[int],
    payloads: Sequence[_Buffer],
    start: int = 0,
    stop: int = -1,
    flags: int = 0,
) -> tuple[int, int]:
    """Frame records ``start..stop-1`` into ``buf`` from ``offset`` while each ends at or before ``limit``.

    Returns:
        ``(new_offset, next)``: the offset after the last record framed and
        the index of the first record not framed.
    """
    limit = _window(buf, offset, limit)
    count = _batch_fields(first_msg_seq, time_ns, source_stream, source_seqs, payloads, flags)
    stop = _span(count, start, stop)
    i = start
    while i < stop:
        payload = _payload(payloads[i], i)
        if offset + RECORD_HEADER_SIZE + len(payload) > limit:
            break
        source_seq = _uint(source_seqs[i], f"source_seqs[{i}]", _MAX_U64)
        record = _record(first_msg_seq + i, time_ns, source_stream, source_seq, payload, flags)
        buf[offset : offset + len(record)] = record
        offset += len(record)
        i += 1
    return offset, i


def frame_one_into(
    buf: bytearray | memoryview,
    offset: int,
    msg_seq: int,
    time_ns: int,
    source_stream: int,
    source_seq: int,
    payload: bytes,
    flags: int = 0,
    /,
) -> int:
    """Frame one record into ``buf`` at ``offset``; returns the offset after it."""
    _uint(msg_seq, "msg_seq", _MAX_U64)
    _uint(time_ns, "time_ns", _MAX_U64)
    _uint(source_stream, "source_stream", _MAX_U16)
    _uint(source_seq, "source_seq", _MAX_U64)
    data = _payload(payload, 0)
    end = offset + RECORD_HEADER_SIZE + len(data)
    if not 0 <= offset <= len(buf) or end > len(buf):
        raise ValueError(
            f"record of {RECORD_HEADER_SIZE + len(data)} bytes does not fit in buf at offset {offset} "
            f"(size {len(buf)})"
        )
    buf[offset:end] = _record(
        msg_seq, time_ns, source_stream, source_seq, data, _uint(flags, "flags", _MAX_U16)
    )
    return end


def frame_tuples_into(
    buf: bytearray | memoryview,
    offset: int,
    limit: int,
    records: Sequence[tuple[int, int, int, int, bytes] | tuple[int, int, int, int, bytes, int]],
    last_seq: int,
    day_end_ns: int,
    start: int = 0,
    stop: int = -1,
) -> tuple[int, int, int]:
    """Frame ``(msg_seq, time_ns, source_stream, source_seq, payload[, flags])`` tuples into ``buf``.

    Stops without error at the first record whose msg_seq does not exceed the
    one before it (``last_seq`` first; negative: none), whose ``time_ns`` is
    at or past ``day_end_ns``, or that would end past ``limit``.

    Returns:
        ``(new_offset, next, last_seq)``.
    """
    have_last = last_seq >= 0 if isinstance(last_seq, int) else True
    if have_last:
        _uint(last_seq, "last_seq", _MAX_U64)
    _uint(day_end_ns, "day_end_ns", _MAX_U64)
    limit = _window(buf, offset, limit)
    stop = _span(len(records), start, stop)
    i = start
    while i < stop:
        item = records[i]
        if not isinstance(item, tuple) or len(item) not in (5, 6):
            raise TypeError(
                f"records[{i}] must be a (msg_seq, time_ns, source_stream, source_seq, payload[, flags]) "
                f"tuple, not {type(item).__name__}"
            )
        msg_seq = _uint(item[0], "msg_seq", _MAX_U64)
        time_ns = _uint(item[1], "time_ns", _MAX_U64)
        source_stream = _uint(item[2], "source_stream", _MAX_U16)
        source_seq = _uint(item[3], "source_seq", _MAX_U64)
        flags = _uint(item[5], "flags", _MAX_U16) if len(item) == 6 else 0
        if (have_last and msg_seq <= last_seq) or time_ns >= day_end_ns:
            break
        payload = _payload(item[4], i)
        if offset + RECORD_HEADER_SIZE + len(payload) > limit:
            break
        record = _record(msg_seq, time_ns, source_stream, source_seq, payload, flags)
        buf[offset : offset + len(record)] = record
        offset += len(record)
        last_seq, have_last = msg_seq, True
        i += 1
    return offset, i, last_seq


def decode_records(
    data: _Buffer,
    pos: int,
    prev_seq: int,
    max_records: int,
    record_type: type[_R],
    controls: list[tuple[int, int, _R]] | None = None,
) -> tuple[list[_R], int, int]:
    """Decode and check records from ``pos``.

    Control records (flag bit 0, :data:`CONTROL_FLAGS`) take no msg_seq of their
    own: their msg_seq may equal the previous message record's, they do not move
    it, and they are not in ``records``; each is appended to ``controls`` as
    ``(index of the next message record, flags, record)`` when it is a list, and
    skipped otherwise.

    Returns:
        ``(records, end, status)``; status 0 end, 1 incomplete, 2 bad length,
        3 bad CRC, 4 bad msg_seq. ``max_records < 0``: no limit.
    """
    if controls is not None and not isinstance(controls, list):
        raise TypeError("controls must be a list or None")
    view = data if isinstance(data, bytes) else bytes(data)
    size = len(view)
    if not 0 <= pos <= size:
        raise ValueError(f"pos out of range 0..{size}: {pos}")
    unpack = _HEADER.unpack_from
    records: list[_R] = []
    status = _STATUS_END
    while max_records < 0 or len(records) < max_records:
        if size - pos < RECORD_HEADER_SIZE:
            status = _STATUS_END if pos == size else _STATUS_INCOMPLETE
            break
        crc, length, msg_seq, time_ns, source_seq, source_stream, flags = unpack(view, pos)
        if length > MAX_PAYLOAD_BYTES:
            status = _STATUS_BAD_LENGTH
            break
        end = pos + RECORD_HEADER_SIZE + length
        if end > size:
            status = _STATUS_INCOMPLETE
            break
        if _crc32c(view[pos + 4 : end]) != crc:
            status = _STATUS_BAD_CRC
            break
        control = bool(flags & CONTROL_FLAGS)
        if msg_seq < prev_seq or (msg_seq == prev_seq and not control):
            status = _STATUS_BAD_SEQ
            break
        fields = (msg_seq, time_ns, source_stream, source_seq, view[pos + RECORD_HEADER_SIZE : end], flags)
        if control:
            if controls is not None:
                controls.append((len(records), flags, tuple.__new__(record_type, fields)))
        else:
            records.append(tuple.__new__(record_type, fields))
            prev_seq = msg_seq
        pos = end
    return records, pos, status


def write_out(
    fd: int, chunks: Sequence[_Buffer], sync: bool, index_fd: int = -1, index_data: _Buffer = b""
) -> None:
    """Write every chunk to ``fd``, fsync it if ``sync``, then write ``index_data`` to ``index_fd``."""
    for chunk in chunks:
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd, view) :]
    if sync:
        os.fsync(fd)
    if index_fd >= 0 and index_data:
        view = memoryview(index_data)
        while view:
            view = view[os.write(index_fd, view) :]


class Appender:
    """A journal writer's live tail (``_native.c``'s ``Appender``): what its fast path reads and moves.

    ``buf`` is the live buffer, ``pos`` its published end, ``limit`` where records framed here
    must end (-1: none is framed here), ``day_end_ns`` the time they must be stamped before,
    ``last_seq`` the last msg_seq (-1: none), ``idle`` the flusher's flag; ``slow`` is the
    writer's ``append_batch`` and ``wake`` wakes an idle flusher.
    """

    __slots__ = ("buf", "pos", "limit", "day_end_ns", "last_seq", "idle", "slow", "wake")

    def __init__(self, slow: AppendBatch, wake: Callable[[], object] | None = None) -> None:
        self.buf = bytearray()
        self.pos, self.limit, self.day_end_ns, self.last_seq, self.idle = 0, -1, 0, -1, False
        self.slow, self.wake = slow, wake

    def append_run(
        self,
        first_msg_seq: int,
        time_ns: int,
        source_stream: int,
        first_source_seq: int,
        payloads: list[bytes],
    ) -> None:
        """Append records ``first_msg_seq``, ...: framed here while each fits, the rest through ``slow``."""
        if not isinstance(payloads, list):
            raise TypeError(f"payloads must be a list, not {type(payloads).__name__}")
        count, done = len(payloads), 0
        buf = self.buf
        if (
            count
            and type(buf) is bytearray
            and time_ns < self.day_end_ns
            and first_msg_seq > self.last_seq
            and 0 <= self.pos <= min(self.limit, len(buf))
            and source_stream <= _MAX_U16
            and max(first_msg_seq, first_source_seq) + count - 1 <= _MAX_U64
        ):
            limit, offset = min(self.limit, len(buf)), self.pos
            while done < count:
                payload = payloads[done]
                if type(payload) is not bytes or len(payload) > MAX_PAYLOAD_BYTES:
                    break
                if offset + RECORD_HEADER_SIZE + len(payload) > limit:
                    break
                record = _record(
                    first_msg_seq + done, time_ns, source_stream, first_source_seq + done, payload, 0
                )
                buf[offset : offset + len(record)] = record
                offset += len(record)
                done += 1
            if done:
                self.pos, self.last_seq = offset, first_msg_seq + done - 1
                if self.idle and self.wake is not None:
                    self.wake()
        if done < count:
            source_seqs = range(first_source_seq + done, first_source_seq + count)
            self.slow(first_msg_seq + done, time_ns, source_stream, source_seqs, payloads[done:])
