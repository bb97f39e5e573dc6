"""Type stubs for the C extension client_lib/_blocks.c (the client's live block walk)."""

from typing import Final

from feedha.client._live_blocks import LiveBlocks, Stamp

# The constants shared with Python (_blocks_constants.h, scripts/gen_constants.py).
HEADER_SIZE: Final[int]
BLOCK_OVERHEAD: Final[int]
TOMBSTONE_STREAM: Final[int]

def read_live_blocks(
    packet: bytes, next_seq: int, first: int, count: int, below: int, stamp: Stamp, /
) -> LiveBlocks | None: ...
def read_int64_field(packet: bytes, start: int, end: int, field: int, /) -> int | None: ...
