"""``fix44`` captures: FIX messages (:mod:`adapter.formats.fix_captures`), and the chaos drill's poison.

``feedha source --file`` and ``feedha drill book`` play this format when no ``--format`` is given.
"""

from __future__ import annotations

from typing import Final

from feedha.adapter.formats.capture_face import CaptureFace, Chaos
from feedha.adapter.formats.fix_captures import (
    fix_frames,
    fix_seq_of,
    message_time_ns,
    read_capture,
    write_capture,
)

__all__ = ["CAPTURE"]


def _chaos() -> Chaos:
    from feedha.adapter.formats.fix44.poison import CHAOS  # the drills' only: loaded when asked

    return CHAOS


CAPTURE: Final = CaptureFace(
    name="fix44",
    read=read_capture,
    write=write_capture,
    frames=fix_frames,
    seq_of=fix_seq_of,
    time_of=message_time_ns,
    chaos=_chaos,
    default_for=frozenset({"source", "book"}),
)
