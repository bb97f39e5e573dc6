"""The FIX-style source format the feed source publishes and adapters read.

Theory of operation
-------------------
A source stream is a ZeroMQ PUB socket; every ZeroMQ message on it has two
frames, ``[source_stream_name, payload]``. A payload holds one or more FIX
messages back to back (the Spark job packs hundreds per frame, the test source
a few). Each message is classic tag=value with SOH (0x01) separators::

    8=FIX.4.4|9=<body length>|35=X|49=<sender>|34=<source_seq>|52=<sending time>|
    55=<symbol>|60=<event time>|268=<n>|{279=0|269=<type>|270=<price>|271=<size>|}*n
    10=<checksum>|

``9=`` counts the bytes from after its own SOH up to and including the SOH
before ``10=``; ``10=`` is the byte sum of everything before it, mod 256, in
three digits. ``269`` is ``0`` bid, ``1`` offer, ``2`` trade. Times are UTC
``YYYYMMDD-HH:MM:SS.nnnnnnnnn``. This is the ``35=X`` (incremental refresh)
subset with one symbol per message, so one source message maps to one
application message.

The layout is written down once, as :class:`Template` values (:data:`HEAD`,
:data:`MARKET_DATA`, :data:`ENTRY_GROUP`, :data:`ENTRY`, :data:`TRAILER`):
:func:`encode_market_data` fills them, and the fast encoders elsewhere (the
plain source's %-templates, the Spark job's SQL ``concat``, the numpy
encoder's column layout) are built from them, each tested byte for byte
against :func:`encode_market_data`.

:func:`split_messages` walks a payload by the length fields like a FIX engine
does and resynchronizes on the next ``8=FIX`` after anything malformed, so a
corrupt message costs only itself. This module is pure: no sockets, no clock.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final
from zlib import adler32 as _adler32

from feedha.proto.errors import ProtoError
from feedha.proto.template import Template
from feedha.proto.wire import MAX_SOURCE_SEQ

_ADLER_CHUNK: Final = 256  # 256 * 255 + 1 < 65521: the adler32 sum cannot wrap

SOH: Final = b"\x01"
BEGIN_STRING: Final = b"FIX.4.4"
_BEGIN: Final = b"8=FIX"

TAG_MSG_TYPE: Final = 35
TAG_SENDER: Final = 49
TAG_SEQ: Final = 34
TAG_SENDING_TIME: Final = 52
TAG_SYMBOL: Final = 55
TAG_EVENT_TIME: Final = 60
TAG_NO_ENTRIES: Final = 268
TAG_UPDATE_ACTION: Final = 279
TAG_ENTRY_TYPE: Final = 269
TAG_PRICE: Final = 270
TAG_SIZE: Final = 271

ENTRY_BID: Final = "0"
ENTRY_OFFER: Final = "1"
ENTRY_TRADE: Final = "2"


# The 35=X message, whole: HEAD + body + TRAILER. The body is MARKET_DATA with its
# group an ENTRY_GROUP (NoMDEntries and the entries), each entry an ENTRY.
HEAD: Final = Template.parse(f"8={BEGIN_STRING.decode()}|9={{body_length}}|")
MARKET_DATA: Final = Template.parse(
    "35=X|49={sender}|34={seq}|52={sending_time}|55={symbol}|60={event_time}|{group}"
)
ENTRY_GROUP: Final = Template.parse("268={entry_count}|{entries}")
ENTRY: Final = Template.parse("279=0|269={entry_type}|270={price}|271={size}|")
TRAILER: Final = Template.parse("10={checksum}|")
CHECKSUM_DIGITS: Final = 3  # 10= is always three digits, zero-padded
TRAILER_SIZE: Final = len(TRAILER.fill(checksum=b"0" * CHECKSUM_DIGITS))
_HEAD_FORMAT: Final = HEAD.printf(body_length=b"%d")
_TRAILER_TAG: Final = TRAILER.literals[0]  # b"10="
_TRAILER_FORMAT: Final = TRAILER.printf(checksum=b"%0" + str(CHECKSUM_DIGITS).encode() + b"d")


class FixError(ProtoError):
    """A source message that does not follow the format.

    Attributes:
        reason: short cause (``"begin"``, ``"length"``, ``"checksum"``, ``"field"``).
    """

    subject = "bad FIX message"


@dataclass(frozen=True, slots=True)
class SourceEntry:
    """One market-data entry of a source message."""

    entry_type: str  # ENTRY_BID, ENTRY_OFFER or ENTRY_TRADE
    price: str  # decimal text, as the source sends it
    size: int


def checksum(data: bytes) -> int:
    """FIX checksum: the byte sum mod 256."""
    # Strategy: zlib.adler32 keeps the byte sum + 1 mod 65521 in its low 16
    # bits; for 256 bytes or fewer the sum (at most 65,280) never wraps, so one
    # C call gives the exact sum ~5x faster than sum() over the bytes. Longer
    # data is summed in such chunks.
    if len(data) <= _ADLER_CHUNK:
        return ((_adler32(data) & 0xFFFF) - 1) & 0xFF
    total = 0
    for start in range(0, len(data), _ADLER_CHUNK):
        total += (_adler32(data[start : start + _ADLER_CHUNK]) & 0xFFFF) - 1
    return total & 0xFF


def frame(body: bytes) -> bytes:
    """The whole message around a body: :data:`HEAD` (8=, 9=) before it, :data:`TRAILER` (10=) after.

    Args:
        body: the fields from 35= on, each ending in SOH.

    Returns:
        The message bytes, ending in SOH.
    """
    message = _HEAD_FORMAT % len(body) + body
    return message + _TRAILER_FORMAT % checksum(message)


def encode_message(body_fields: Iterable[tuple[int, str | int | bytes]]) -> bytes:
    """Encode one FIX message, adding the 8=, 9= and 10= fields.

    Args:
        body_fields: ``(tag, value)`` pairs in order, starting with 35=.

    Returns:
        The message bytes, ending in SOH.
    """
    return frame(
        b"".join(
            b"%d=%s\x01" % (tag, value if isinstance(value, bytes) else str(value).encode())
            for tag, value in body_fields
        )
    )


def format_timestamp(ns: int) -> str:
    """Format ns since the epoch as a FIX UTC timestamp with nanoseconds."""
    seconds, frac = divmod(ns, 1_000_000_000)
    return time.strftime("%Y%m%d-%H:%M:%S", time.gmtime(seconds)) + f".{frac:09d}"


_SECOND_CACHE: dict[bytes, int] = {}
_SECOND_CACHE_SIZE: Final = 64


def parse_timestamp(text: bytes) -> int:
    """Parse a FIX UTC timestamp (any fraction length up to ns) into ns since the epoch.

    Raises:
        FixError: not a timestamp, or one past what ns since the epoch hold in an int64
            (years before 1678 or after 2262: a block's times are int64).
    """
    # Strategy: a feed stamps thousands of messages within the same second, so
    # the ns value of the "YYYYMMDD-HH:MM:SS" prefix is cached (by its exact
    # bytes, so a cached prefix is one that already parsed); only the fraction
    # is converted per call.
    try:
        base = _SECOND_CACHE.get(text[:17])
        if base is None:
            base = _parse_second(text)
            if len(_SECOND_CACHE) >= _SECOND_CACHE_SIZE:
                _SECOND_CACHE.clear()
            _SECOND_CACHE[text[:17]] = base
        frac = text[18:]
        ns = base + (int(frac.ljust(9, b"0")[:9]) if frac else 0)
    except (ValueError, IndexError) as exc:
        raise FixError("field", f"bad timestamp {bytes(text)!r}") from exc
    if not _MIN_NS <= ns <= _MAX_NS:
        raise FixError("field", f"timestamp {bytes(text[:32])!r} is past what an int64 of ns holds")
    return ns


_MIN_NS: Final = -(1 << 63)
_MAX_NS: Final = (1 << 63) - 1


def _parse_second(text: bytes) -> int:
    # ns since the epoch of the whole second; ValueError/IndexError when malformed.
    if text[8:9] != b"-" or text[11:12] != b":" or text[14:15] != b":":
        raise ValueError("separators")
    day = calendar.timegm((int(text[:4]), int(text[4:6]), int(text[6:8]), 0, 0, 0))
    seconds = int(text[9:11]) * 3600 + int(text[12:14]) * 60 + int(text[15:17])
    return (day + seconds) * 1_000_000_000


def encode_market_data(
    *,
    source_seq: int,
    symbol: str,
    event_time_ns: int,
    entries: Sequence[SourceEntry],
    sender: str = "FEED",
    sending_time_ns: int | None = None,
) -> bytes:
    """Encode one 35=X incremental refresh for one symbol.

    Args:
        source_seq: the message's gap-free number on its source stream (tag 34).
        symbol: instrument (tag 55).
        event_time_ns: event time (tag 60).
        entries: the trade/bid/offer entries.
        sender: SenderCompID (tag 49).
        sending_time_ns: tag 52; defaults to the event time.

    Returns:
        The message bytes.
    """
    stamp = format_timestamp(event_time_ns).encode()
    entry_list = b"".join(
        ENTRY.fill(entry_type=entry.entry_type.encode(), price=entry.price.encode(), size=b"%d" % entry.size)
        for entry in entries
    )
    body = MARKET_DATA.fill(
        sender=sender.encode(),
        seq=b"%d" % source_seq,
        sending_time=stamp if sending_time_ns is None else format_timestamp(sending_time_ns).encode(),
        symbol=symbol.encode(),
        event_time=stamp,
        group=ENTRY_GROUP.fill(entry_count=b"%d" % len(entries), entries=entry_list),
    )
    return frame(body)


def split_messages(payload: bytes) -> tuple[list[bytes], int]:
    """Cut a source frame into message bodies, skipping what is malformed.

    Args:
        payload: one or more FIX messages back to back.

    Returns:
        ``(bodies, malformed)``: the body of every whole, checksum-valid
        message (from 35= up to and including the SOH before 10=), and how
        many malformed stretches were skipped.
    """
    bodies: list[bytes] = []
    malformed = 0
    pos = 0
    end = len(payload)
    while pos < end:
        body, pos = next_message(payload, pos)
        if body is None:
            malformed += 1
        else:
            bodies.append(body)
    return bodies, malformed


def next_message(payload: bytes, pos: int) -> tuple[bytes | None, int]:
    """Cut the one message that starts at ``pos`` (:func:`split_messages` is a loop of these).

    Returns:
        ``(body, next position)``, or ``(None, where to resynchronize)`` when
        the stretch at ``pos`` is malformed (:func:`split_messages` counts it).
    """
    try:
        return _next_message(payload, pos, len(payload))
    except FixError:
        nxt = payload.find(_BEGIN, pos + 1)
        return None, len(payload) if nxt < 0 else nxt


def _next_message(payload: bytes, pos: int, end: int) -> tuple[bytes, int]:
    # Strategy: trust nothing but the length and checksum fields, as a FIX
    # engine does; any inconsistency raises and the caller resynchronizes.
    if not payload.startswith(_BEGIN, pos):
        raise FixError("begin", f"no 8=FIX at offset {pos}")
    soh = payload.find(SOH, pos)
    if soh < 0 or not payload.startswith(b"9=", soh + 1):
        raise FixError("length", "missing 9=")
    len_end = payload.find(SOH, soh + 3)
    if len_end < 0 or len_end - soh > 8:
        raise FixError("length", "unterminated 9=")
    try:
        body_len = int(payload[soh + 3 : len_end])
    except ValueError as exc:
        raise FixError("length", "non-numeric 9=") from exc
    body_start = len_end + 1
    body_end = body_start + body_len
    trailer_end = body_end + TRAILER_SIZE
    if body_len <= 0 or trailer_end > end:
        raise FixError("length", f"body of {body_len} bytes runs past the frame")
    if not payload.startswith(_TRAILER_TAG, body_end) or payload[trailer_end - 1] != 1:
        raise FixError("length", "10= not where 9= says")
    try:
        declared = int(payload[body_end + len(_TRAILER_TAG) : trailer_end - 1])
    except ValueError as exc:
        raise FixError("checksum", "non-numeric 10=") from exc
    if checksum(payload[pos:body_end]) != declared:
        raise FixError("checksum", f"declared {declared}")
    return payload[body_start:body_end], trailer_end


SEQ_SEARCH_BYTES: Final = 512  # how far into a malformed stretch its 34= is looked for
_SEQ_TAG: Final = b"\x0134="
_MAX_SEQ_DIGITS: Final = 20


def find_seq_num(stretch: bytes) -> int | None:
    """The MsgSeqNum (34=) of a malformed message, if its header still shows one.

    A message may be unreadable as a whole (a body past the length field's six
    digits, a wrong checksum) while its header is intact. Only the first
    :data:`SEQ_SEARCH_BYTES` bytes are looked at, and only a stretch that
    begins like a message (``8=FIX``).

    Returns:
        The positive number (at most :data:`~proto.wire.MAX_SOURCE_SEQ`), or ``None`` when there
        is no usable 34= up front.
    """
    if not stretch.startswith(_BEGIN):
        return None
    head = stretch[:SEQ_SEARCH_BYTES]
    at = head.find(_SEQ_TAG)
    if at < 0:
        return None
    start = at + len(_SEQ_TAG)
    end = head.find(SOH, start)
    digits = head[start:end] if end > start else b""
    if not digits.isdigit() or len(digits) > _MAX_SEQ_DIGITS:
        return None
    number = int(digits)
    return number if 0 < number <= MAX_SOURCE_SEQ else None


def replace_field(message: bytes, tag: int, value: bytes) -> bytes:
    """A copy of a whole message with every ``tag`` field set to ``value`` (length and checksum redone).

    Raises:
        FixError: ``message`` is not one well-formed message.
    """
    body, _end = next_message(message, 0)
    if body is None:
        raise FixError("begin", "not a well-formed FIX message")
    return encode_message([(t, value if t == tag else v) for t, v in parse_fields(body)])


def parse_fields(body: bytes) -> list[tuple[int, bytes]]:
    """Split a message body into ``(tag, value)`` pairs, in order.

    Raises:
        FixError: a field without ``=`` or with a non-numeric tag.
    """
    fields: list[tuple[int, bytes]] = []
    for part in body.split(SOH):
        if not part:
            continue
        tag, sep, value = part.partition(b"=")
        if not sep or not tag.isdigit():
            raise FixError("field", f"bad field {part[:20]!r}")
        fields.append((int(tag), value))
    return fields


# --- SequenceReset (35=4): the explicit way a source moves its numbering ----------------------------

MSG_TYPE_SEQUENCE_RESET: Final = b"4"
TAG_NEW_SEQ_NO: Final = 36
TAG_GAP_FILL_FLAG: Final = 123


def encode_sequence_reset(*, source_seq: int, new_seq: int, gap_fill: bool = False) -> bytes:
    """A SequenceReset: the message after this one carries ``new_seq`` (FIX 35=4, 36=NewSeqNo).

    Args:
        source_seq: this message's own sequence number (tag 34).
        new_seq: the sequence number of the next message.
        gap_fill: GapFillFlag (123=Y): the numbers in between were never sent; else a reset.
    """
    fields: list[tuple[int, str | int | bytes]] = [(35, "4"), (34, source_seq), (TAG_NEW_SEQ_NO, new_seq)]
    if gap_fill:
        fields.append((TAG_GAP_FILL_FLAG, "Y"))
    return encode_message(fields)


def decode_sequence_reset(body: bytes) -> tuple[int, int] | None:
    """``(source_seq, new_seq)`` of a SequenceReset body, ``None`` for any other message.

    Raises:
        FixError: a SequenceReset without a valid 34= or 36=.
    """
    if not body.startswith(b"35=4\x01"):
        return None
    values = dict(parse_fields(body))
    source_seq, new_seq = _position(values.get(34), 34), _position(values.get(TAG_NEW_SEQ_NO), TAG_NEW_SEQ_NO)
    return source_seq, new_seq


def _position(raw: bytes | None, tag: int) -> int:
    # A source position as 34= carries it: plain digits, no sign and no leading zero, at most
    # MAX_SOURCE_SEQ (a reset to 10**30 once moved the numbering past what a run can take).
    if raw is None or not raw.isdigit() or raw[:1] == b"0" or len(raw) > _MAX_SEQ_DIGITS:
        raise FixError(
            "field", f"SequenceReset needs {tag}= as a positive integer, got {(raw or b'')[:24]!r}"
        )
    number = int(raw)
    if number > MAX_SOURCE_SEQ:
        raise FixError("field", f"SequenceReset {tag}={number} is past the highest position {MAX_SOURCE_SEQ}")
    return number
