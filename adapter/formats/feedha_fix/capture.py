"""``feedha-fix`` captures: FIX messages (:mod:`adapter.formats.fix_captures`), paced by their own times.

The plain source generates this format itself (``feedha source`` without ``--file``;
its poison is ``--poison-every``'s), so it writes no chaos capture.
"""

from __future__ import annotations

from typing import Final

from feedha.adapter.formats.capture_face import CaptureFace
from feedha.adapter.formats.fix_captures import (
    fix_frames,
    fix_seq_of,
    message_time_ns,
    read_capture,
    write_capture,
)

__all__ = ["CAPTURE"]

CAPTURE: Final = CaptureFace(
    name="feedha-fix",
    read=read_capture,
    write=write_capture,
    frames=fix_frames,
    seq_of=fix_seq_of,
    time_of=message_time_ns,
)
