"""Types of the C extension ``adapter.journal._native`` (``_native.c``).

Its functions take and return what their Python reference's do
(``_reference.py``: the same names, signatures, bytes and errors, which the
tests check), so the stub takes their types from there.
"""

from typing import Final

from feedha.adapter.journal._reference import Appender as Appender
from feedha.adapter.journal._reference import crc32c as crc32c
from feedha.adapter.journal._reference import crc32c_software as crc32c_software
from feedha.adapter.journal._reference import decode_records as decode_records
from feedha.adapter.journal._reference import frame_into as frame_into
from feedha.adapter.journal._reference import frame_one_into as frame_one_into
from feedha.adapter.journal._reference import frame_records as frame_records
from feedha.adapter.journal._reference import frame_tuples_into as frame_tuples_into
from feedha.adapter.journal._reference import write_out as write_out

HARDWARE_CRC: Final[bool]
APPEND_API: Final[object]  # a capsule: the Appender's C entry (_append_api.h)
# The constants shared with Python (_native_constants.h, scripts/gen_constants.py).
RECORD_HEADER_SIZE: Final[int]
MAX_PAYLOAD_BYTES: Final[int]
CONTROL_FLAGS: Final[int]
STATUS_END: Final[int]
STATUS_INCOMPLETE: Final[int]
STATUS_BAD_LENGTH: Final[int]
STATUS_BAD_CRC: Final[int]
STATUS_BAD_SEQ: Final[int]
RECORD_FIELDS: Final[int]
