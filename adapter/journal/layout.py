"""The numbers of a journal record that the C framing and Python share, defined once.

:mod:`adapter.journal.format` describes the record (docs/journal.md has the
picture); this leaf module holds what the C extension (``_native.c``), its
Python reference (``_reference.py``) and ``format.py`` all need: the header's
size, the largest payload, the control flags and the numbering of
``decode_records``'s statuses. ``scripts/gen_constants.py`` writes them into
``adapter/journal/_native_constants.h`` for the C code; ``--check`` (run by
``scripts/check``) fails when that header is stale, and a test compares the
values the built extension exports with these. Pure: imports nothing of feedha.
"""

from __future__ import annotations

import struct
from enum import Enum
from typing import Final

RECORD_HEADER: Final = struct.Struct("<IIQQQHH")
RECORD_HEADER_SIZE: Final = RECORD_HEADER.size  # 36
# A length above this is treated as corruption, not as a record to wait for.
MAX_PAYLOAD_BYTES: Final = 16 * 1024 * 1024
# Record flags (offset 34). A session-boundary record is the end-of-session block the
# line carried: its own msg_seq, the source_seq of the session's last source message,
# and a MarketUpdate whose session_boundary names the sessions (docs/journal.md).
RECORD_SESSION_BOUNDARY: Final = 0x02
FLAG_PURGE: Final = 0x0001  # record flag bit 0: a purge record (its payload a feedha.v1.PurgeEntry)
CONTROL_FLAGS: Final = FLAG_PURGE  # flag bits of records that are not messages


class DecodeStatus(Enum):
    """Why a decoder stopped; ``decode_records`` returns the member's position in this order."""

    END = "end"  # every byte was consumed
    INCOMPLETE = "incomplete"  # a record needs more bytes than are present
    BAD_LENGTH = "bad_length"
    BAD_CRC = "bad_crc"
    BAD_SEQ = "bad_seq"


# decode_records's status numbers, in order: STATUSES[number] is the member.
STATUSES: Final = tuple(DecodeStatus)
