"""The replay protocol: requests and replies for retransmission from a journal.

Theory of operation
-------------------
Every adapter that journals its line can serve retransmission and resume
requests from that journal over a ZeroMQ ROUTER socket. The protocol is a
public contract (docs/journal.md, "Replay protocol"), all integers
big-endian like the line's wire format:

* A request is one ZeroMQ message whose *last* frame is the 28-byte request
  body (:data:`REQUEST`); every frame before it is the envelope (the ROUTER
  identity, and the empty delimiter a REQ or well-behaved DEALER sends) and is
  returned unchanged in front of the reply.
* A reply is the envelope, one status frame (:data:`STATUS` plus an optional
  UTF-8 message), then ``packet count`` frames, each a line packet in the
  DESIGN wire format with ``FLAG_RETRANSMISSION`` set, several blocks per
  packet.

Request kinds: :data:`KIND_RANGE` (1) asks for the real-time stream's
messages; :data:`KIND_DELAYED_RANGE` (2) asks for the *delayed* stream's: only
messages whose delay has passed are served (the reply's ``through`` stops
before the first that is not yet due), their packets carry ``FLAG_DELAYED``
too, and this is all a delayed-only subscriber may ask (``NOT_ENTITLED``
otherwise). Both kinds send a tombstone block in place of a purged message.
:data:`KIND_SNAPSHOT` (3) asks for the channel's image. :data:`KIND_TIME_RANGE`
(4) asks for the messages published in a time window ``[start, end)``: its
body is 36 bytes (:data:`REQUEST_TIME`: the 28 bytes of the others, with the
window's start and end in ns since the Unix epoch where the msg_seqs go, then
``after_seq``, the last msg_seq the client already has of the window, 0 at
first); the client pages through the window one reply at a time, and the
reply that holds its last message (or tells that nothing more is in it) has
status :attr:`ReplayStatus.END` instead of ``OK``.

One reply carries at most ``max_bytes`` of packets. ``through`` in the status
says how far the reply reaches: every msg_seq in ``first..through`` that the
journal holds is in the packets (any other one in that span is not in this
journal); a reply with ``through < last`` was cut at the bound and the client
asks again from ``through + 1``.

Pure: encoding and decoding only. The serving side is :mod:`adapter.replay`,
the asking side :mod:`client_lib.replay_client`.
"""

from __future__ import annotations

import enum
import logging
import struct
from dataclasses import dataclass
from typing import Final

from feedha.proto.errors import ProtoError

logger = logging.getLogger(__name__)

MAGIC: Final = b"FR"
VERSION: Final = 1
KIND_RANGE: Final = 1
KIND_DELAYED_RANGE: Final = 2  # the delayed stream: only messages past their delay
KIND_SNAPSHOT: Final = 3  # the channel's image (docs/wire-format.md, "Images")
KIND_TIME_RANGE: Final = 4  # the messages published in [start, end), paged (docs/wire-format.md)
_KINDS: Final = {
    KIND_RANGE: "range",
    KIND_DELAYED_RANGE: "delayed range",
    KIND_SNAPSHOT: "snapshot",
    KIND_TIME_RANGE: "time range",
}
# magic, version, kind, channel, reserved, request id, first msg_seq, last msg_seq
REQUEST: Final = struct.Struct(">2sBBHHIQQ")
REQUEST_SIZE: Final = REQUEST.size  # 28
# A time range: magic, version, kind, channel, reserved, request id, start ns, end ns, after msg_seq
REQUEST_TIME: Final = struct.Struct(">2sBBHHIQQQ")
REQUEST_TIME_SIZE: Final = REQUEST_TIME.size  # 36
# magic, version, status, channel, packet count, request id, first, through, oldest, newest
STATUS: Final = struct.Struct(">2sBBHHIQQQQ")
STATUS_SIZE: Final = STATUS.size  # 44
MAX_MESSAGE_BYTES: Final = 1024
MAX_PACKETS: Final = 0xFFFF

assert REQUEST_SIZE == 28 and REQUEST_TIME_SIZE == 36 and STATUS_SIZE == 44


class ReplayStatus(enum.IntEnum):
    """The status byte of a reply."""

    OK = 0  # packets follow; see ``through``
    UNAVAILABLE = 1  # this journal holds nothing of first..last (too old, not yet written, or a hole)
    BAD_REQUEST = 2  # not a request this server understands (see the message)
    WRONG_CHANNEL = 3  # the service serves another channel
    ERROR = 4  # the journal could not be read (see the message); try another line
    BUSY = 5  # over this client's or the service's budget: ask again later, or another line
    NOT_ENTITLED = 6  # this key may not have what it asked (a delayed-only key asked for real time)
    END = 7  # a time range's last reply: its packets (if any) end the window; ask no more


class ReplayProtocolError(ProtoError):
    """Bytes that do not follow the replay protocol.

    Attributes:
        reason: a short machine-readable cause (``"size"``, ``"magic"``, ``"version"``, ``"kind"``, ...).
    """

    subject = "bad replay frame"


@dataclass(frozen=True, slots=True)
class ReplayRequest:
    """Messages ``first_seq..last_seq`` (inclusive) of ``channel``; ``kind`` says of which stream.

    A snapshot request (``kind`` :data:`KIND_SNAPSHOT`) asks for the channel's
    image instead: ``first_seq`` is the msg_seq of the image wanted (0: the
    newest) and ``last_seq`` the first part wanted (0-based); see
    :func:`snapshot_request`.
    """

    channel: int
    request_id: int
    first_seq: int
    last_seq: int
    kind: int = KIND_RANGE
    after_seq: int = 0  # a time range only: the last msg_seq of the window the client already has

    @property
    def is_snapshot(self) -> bool:
        """A request for the channel's image (``first_seq``: its msg_seq, ``last_seq``: the first part)."""
        return self.kind == KIND_SNAPSHOT

    @property
    def is_delayed(self) -> bool:
        """A request for the delayed stream (only messages past their delay)."""
        return self.kind == KIND_DELAYED_RANGE

    @property
    def is_time_range(self) -> bool:
        """A request for the messages published in ``[first_seq, last_seq)`` (ns), after ``after_seq``."""
        return self.kind == KIND_TIME_RANGE


def snapshot_request(channel: int, request_id: int, *, msg_seq: int = 0, part: int = 0) -> ReplayRequest:
    """A request for the image at ``msg_seq`` (0: the newest), from part ``part`` on."""
    return ReplayRequest(channel, request_id, msg_seq, part, KIND_SNAPSHOT)


def time_request(
    channel: int, request_id: int, start_ns: int, end_ns: int, *, after_seq: int = 0
) -> ReplayRequest:
    """A request for the messages published in ``[start_ns, end_ns)`` after msg_seq ``after_seq``."""
    return ReplayRequest(channel, request_id, start_ns, end_ns, KIND_TIME_RANGE, after_seq)


@dataclass(frozen=True, slots=True)
class ReplyStatus:
    """The decoded status frame of a reply.

    Attributes:
        status: the outcome.
        channel: the channel the service serves.
        packet_count: how many packet frames follow.
        request_id: the request's id, echoed.
        first_seq: the request's first msg_seq, echoed.
        through: the last msg_seq this reply accounts for (``first_seq - 1``: none).
        oldest_seq: the oldest msg_seq the journal holds (0: empty journal).
        newest_seq: the newest msg_seq the journal holds (0: empty journal).
        message: a human-readable explanation (empty for a plain OK).
    """

    status: ReplayStatus
    channel: int
    packet_count: int
    request_id: int
    first_seq: int
    through: int
    oldest_seq: int
    newest_seq: int
    message: str = ""


def encode_request(request: ReplayRequest) -> bytes:
    """Encode a request body (28 bytes).

    Raises:
        ValueError: a field is out of range, or ``last_seq < first_seq``.
    """
    if request.kind not in _KINDS:
        raise ValueError(f"unknown request kind {request.kind}")
    if request.kind == KIND_RANGE and request.last_seq < request.first_seq:
        raise ValueError(f"last_seq {request.last_seq} is before first_seq {request.first_seq}")
    if request.is_time_range and request.last_seq <= request.first_seq:
        raise ValueError(f"the window's end {request.last_seq} is not after its start {request.first_seq}")
    try:
        if request.is_time_range:
            return REQUEST_TIME.pack(
                MAGIC,
                VERSION,
                request.kind,
                request.channel,
                0,
                request.request_id,
                request.first_seq,
                request.last_seq,
                request.after_seq,
            )
        return REQUEST.pack(
            MAGIC,
            VERSION,
            request.kind,
            request.channel,
            0,
            request.request_id,
            request.first_seq,
            request.last_seq,
        )
    except struct.error as exc:
        raise ValueError(f"replay request field out of range: {request!r}: {exc}") from exc


def decode_request(body: bytes) -> ReplayRequest:
    """Decode and check a request body (28 bytes; a time range's 36).

    Raises:
        ReplayProtocolError: wrong size, magic, version or kind, ``last < first``,
            or a time window whose end is not after its start.
    """
    after = 0
    if len(body) == REQUEST_TIME_SIZE and body[3:4] == bytes((KIND_TIME_RANGE,)):
        magic, version, kind, channel, _reserved, request_id, first, last, after = REQUEST_TIME.unpack(body)
    elif len(body) != REQUEST_SIZE:
        expected = f"{REQUEST_SIZE} ({REQUEST_TIME_SIZE} for a time range, kind {KIND_TIME_RANGE})"
        raise ReplayProtocolError("size", f"request of {len(body)} bytes, expected {expected}")
    else:
        magic, version, kind, channel, _reserved, request_id, first, last = REQUEST.unpack(body)
    if magic != MAGIC:
        raise ReplayProtocolError("magic", f"magic {magic!r}, expected {MAGIC!r}")
    if version != VERSION:
        raise ReplayProtocolError("version", f"version {version}, this server speaks {VERSION}")
    if kind not in _KINDS:
        known = ", ".join(f"{number} ({name})" for number, name in _KINDS.items())
        raise ReplayProtocolError("kind", f"request kind {kind}, this server serves {known}")
    if kind == KIND_TIME_RANGE and len(body) != REQUEST_TIME_SIZE:
        raise ReplayProtocolError(
            "size", f"a time range request is {REQUEST_TIME_SIZE} bytes, not {len(body)}"
        )
    if kind == KIND_TIME_RANGE and last <= first:
        raise ReplayProtocolError("range", f"the window's end {last} is not after its start {first}")
    if kind not in (KIND_SNAPSHOT, KIND_TIME_RANGE) and last < first:
        raise ReplayProtocolError("range", f"last msg_seq {last} is before first {first}")
    return ReplayRequest(channel, request_id, first, last, kind, after)


def encode_status(status: ReplyStatus) -> bytes:
    """Encode a status frame (44 bytes plus the UTF-8 message)."""
    message = status.message.encode()[:MAX_MESSAGE_BYTES]
    return (
        STATUS.pack(
            MAGIC,
            VERSION,
            status.status,
            status.channel,
            status.packet_count,
            status.request_id,
            status.first_seq,
            max(status.through, 0),
            status.oldest_seq,
            status.newest_seq,
        )
        + message
    )


def decode_status(frame: bytes) -> ReplyStatus:
    """Decode a status frame.

    Raises:
        ReplayProtocolError: too short, wrong magic or version, unknown status.
    """
    if len(frame) < STATUS_SIZE:
        raise ReplayProtocolError("size", f"status frame of {len(frame)} bytes, expected >= {STATUS_SIZE}")
    magic, version, code, channel, count, request_id, first, through, oldest, newest = STATUS.unpack_from(
        frame, 0
    )
    if magic != MAGIC:
        raise ReplayProtocolError("magic", f"magic {magic!r}, expected {MAGIC!r}")
    if version != VERSION:
        raise ReplayProtocolError("version", f"version {version}, this client speaks {VERSION}")
    try:
        status = ReplayStatus(code)
    except ValueError as exc:
        raise ReplayProtocolError("status", f"unknown status {code}") from exc
    message = bytes(frame[STATUS_SIZE:]).decode(errors="replace")
    return ReplyStatus(status, channel, count, request_id, first, through, oldest, newest, message)


# ---- the service ----------------------------------------------------------------
