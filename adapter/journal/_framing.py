"""Which implementation frames and checks journal records: the C extension, or the Python reference.

``adapter.journal._native`` (C, built by setup.py) frames and checksums a
whole batch of records per call; ``adapter.journal._reference`` does the same
in Python, byte for byte, several times slower. Import the functions from
here. ``IS_NATIVE`` says which one is in use; the tests assert it is the C
one in a built checkout.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

try:
    from feedha.adapter.journal._native import (
        CONTROL_FLAGS,
        HARDWARE_CRC,
        crc32c,
        decode_records,
        frame_into,
        frame_one_into,
        frame_records,
        frame_tuples_into,
        write_out,
    )

    IS_NATIVE = True
except ImportError as exc:  # pragma: no cover - exercised only without a build
    logger.warning(
        "feedha.adapter.journal._native is not built (%s); journal framing falls back to pure Python "
        "(several times slower): install feedha where a C compiler and the Python headers are",
        exc,
    )
    from feedha.adapter.journal._reference import (
        CONTROL_FLAGS,
        HARDWARE_CRC,
        crc32c,
        decode_records,
        frame_into,
        frame_one_into,
        frame_records,
        frame_tuples_into,
        write_out,
    )

    IS_NATIVE = False

__all__ = [
    "CONTROL_FLAGS",
    "HARDWARE_CRC",
    "IS_NATIVE",
    "crc32c",
    "decode_records",
    "frame_into",
    "frame_one_into",
    "frame_records",
    "frame_tuples_into",
    "write_out",
]
