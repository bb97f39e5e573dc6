"""Types of the C extension ``adapter.journal._native`` (``_native.c``; reference: ``_reference.py``)."""

from collections.abc import Sequence
from typing import Final, TypeVar

_Buffer = bytes | bytearray | memoryview
_R = TypeVar("_R", bound=tuple[int, int, int, int, bytes, int])
_Tuple = tuple[int, int, int, int, bytes] | tuple[int, int, int, int, bytes, int]

HARDWARE_CRC: Final[bool]
# The constants shared with Python (_native_constants.h, scripts/gen_constants.py).
RECORD_HEADER_SIZE: Final[int]
MAX_PAYLOAD_BYTES: Final[int]
CONTROL_FLAGS: Final[int]
STATUS_END: Final[int]
STATUS_INCOMPLETE: Final[int]
STATUS_BAD_LENGTH: Final[int]
STATUS_BAD_CRC: Final[int]
STATUS_BAD_SEQ: Final[int]

def crc32c(data: _Buffer, value: int = 0) -> int: ...
def crc32c_software(data: _Buffer, value: int = 0) -> int: ...
def frame_records(
    first_msg_seq: int,
    time_ns: int,
    source_stream: int,
    source_seqs: Sequence[int],
    payloads: Sequence[_Buffer],
    flags: int = 0,
) -> bytes: ...
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
) -> tuple[int, int]: ...
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
) -> int: ...
def frame_tuples_into(
    buf: bytearray | memoryview,
    offset: int,
    limit: int,
    records: Sequence[_Tuple],
    last_seq: int,
    day_end_ns: int,
    start: int = 0,
    stop: int = -1,
) -> tuple[int, int, int]: ...
def decode_records(
    data: _Buffer,
    pos: int,
    prev_seq: int,
    max_records: int,
    record_type: type[_R],
    controls: list[tuple[int, int, _R]] | None = None,
) -> tuple[list[_R], int, int]: ...
def write_out(
    fd: int, chunks: Sequence[_Buffer], sync: bool, index_fd: int = -1, index_data: _Buffer = b""
) -> None: ...
