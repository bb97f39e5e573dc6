"""The formats' captures, one line each: what ``feedha source --file`` plays and the drills write.

A light twin of :mod:`adapter.formats.registry`: each line is a format folder's
``capture.py`` (:class:`~adapter.formats.capture_face.CaptureFace`), which imports
no engine, so the plain source asks here without loading an adapter's
conversion code (tests/unit/plain_source/test_light_imports.py). Adding a
format is one line here and one in the registry; a test holds both to the same
names. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from feedha.adapter.formats.capture_face import CaptureFace
from feedha.adapter.formats.feedha_fix.capture import CAPTURE as FEEDHA_FIX
from feedha.adapter.formats.fix44.capture import CAPTURE as FIX44
from feedha.adapter.formats.itch50.capture import CAPTURE as ITCH50

__all__ = ["CAPTURES", "capture_named", "chaos_formats", "default_capture"]

CAPTURES: Final[Mapping[str, CaptureFace]] = MappingProxyType(
    {
        FEEDHA_FIX.name: FEEDHA_FIX,
        FIX44.name: FIX44,
        ITCH50.name: ITCH50,
    }
)


def capture_named(name: str) -> CaptureFace:
    """The captures of the format called ``name``.

    Raises:
        ValueError: no format is called that (the message lists those there are).
    """
    found = CAPTURES.get(name)
    if found is None:
        raise ValueError(f"unknown input format {name!r}; one of {sorted(CAPTURES)}")
    return found


def default_capture(command: str) -> str:
    """The format ``command`` (``source``, ``book``, ``overload``) plays when no ``--format`` is given.

    Raises:
        LookupError: not exactly one format is that command's default.
    """
    found = [face.name for face in CAPTURES.values() if command in face.default_for]
    if len(found) != 1:
        raise LookupError(f"{command}: {len(found)} formats are its default capture, not one: {found}")
    return found[0]


def chaos_formats() -> tuple[str, ...]:
    """The formats whose captures the chaos drill writes (each with its poison and floods), sorted."""
    return tuple(sorted(name for name, face in CAPTURES.items() if face.chaos is not None))
