"""The chaos drill's captures for ``--format fix44|itch50``: written, and what they must deliver.

The drill plays a capture file through ``feedha source --file F --format F`` at the drill's
rate. :func:`write_capture` writes one of about ``rate x seconds`` messages (the format's
:attr:`~feedha.adapter.formats.capture_face.CaptureFace.chaos`, in
``adapter/formats/<name>/poison.py``: its poison every ``poison_every`` messages and its
floods) and counts what the group must deliver by
converting it once here, through an adapter core of the same format alone (active, no
journal): its ``numbered`` count is the number of blocks, so poison the group quarantines,
heartbeats and other skipped messages, and book_full past a side's 5,000 prices are all
accounted for by the same code the adapters run. A quarantine decision depends only on the
input bytes, so every adapter of the group must number exactly as many.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from feedha.adapter.core import AdapterCore, CoreConfig
from feedha.adapter.core.sync_types import Role
from feedha.adapter.formats.capture_registry import capture_named, chaos_formats
from feedha.adapter.formats.registry import engine_for_format

__all__ = ["CAPTURE_FORMATS", "ChaosCapture", "Flood", "write_capture"]

CAPTURE_FORMATS: Final = chaos_formats()
BOOK_DEPTH: Final = 10
_FRAME_MESSAGES: Final = 50  # how many messages the offline count converts a frame


@dataclass(frozen=True, slots=True)
class Flood:
    """One flood of the capture: the ``source_seq`` range from its first message to its last."""

    name: str
    first_seq: int
    last_seq: int


@dataclass(frozen=True)
class ChaosCapture:
    """A capture the chaos drill plays (see the module docstring).

    Attributes:
        path: the file (the caller removes it).
        input_format: one of :data:`CAPTURE_FORMATS`.
        messages: how many messages it holds (what the source sends).
        expected: how many blocks the group must deliver for them.
        poison: how many poison of each kind it holds.
        floods: its floods, in order.
        baseline: the stretch of honest traffic before the first flood (its ``source_seq``
            range, from a quarter of the way to the flood: the day has started).
        seconds: how long writing and counting it took.
    """

    path: Path
    input_format: str
    messages: int
    expected: int
    poison: Counter[str] = field(default_factory=Counter)
    floods: tuple[Flood, ...] = ()
    baseline: tuple[int, int] = (0, 0)
    seconds: float = 0.0


def write_capture(input_format: str, *, messages: int, seed: int, poison_every: int) -> ChaosCapture:
    """Write a capture of ``input_format`` of about ``messages`` messages and count its blocks.

    Raises:
        ValueError: a format without a chaos capture (``feedha-fix`` plays the plain source).
    """
    started = time.monotonic()
    face = capture_named(input_format)
    if face.chaos is None:
        raise ValueError(f"no chaos capture for format {input_format!r}; one of {CAPTURE_FORMATS}")
    stream, poison, floods = face.chaos().stream(messages, seed=seed, poison_every=poison_every)
    data = face.write(stream)
    frames = (
        frame
        for at in range(0, len(stream), _FRAME_MESSAGES)
        for frame in face.frames(stream, at, min(len(stream), at + _FRAME_MESSAGES))
    )
    expected = count_blocks(input_format, frames)
    with tempfile.NamedTemporaryFile("wb", prefix=f"feedha-chaos-{input_format}-", delete=False) as file:
        file.write(data)
    ordered = sorted(
        (Flood(name, first, last) for name, (first, last) in floods.items()), key=lambda f: f.first_seq
    )
    first = ordered[0].first_seq if ordered else len(stream)
    return ChaosCapture(
        Path(file.name),
        input_format,
        len(stream),
        expected,
        poison,
        tuple(ordered),
        (first // 4, first - 1),
        time.monotonic() - started,
    )


def count_blocks(input_format: str, frames: Iterable[bytes]) -> int:
    """How many blocks an adapter of ``input_format`` numbers for ``frames`` (see the module docstring)."""
    config = CoreConfig(channel_number=1, adapter=1, source_stream_number=1)
    core = AdapterCore(config, engine_for_format(input_format, book_depth=BOOK_DEPTH), now=0.0)
    core.force_role(Role.ACTIVE, now=0.0)
    quiet = logging.getLogger("feedha.adapter")  # its quarantine warnings are the adapters' to log
    level, quiet.level = quiet.level, logging.ERROR
    try:
        for frame in frames:
            core.on_source([b"CHAOS", frame], now=1.0, wall_ns=1)  # the actions are not carried out
    finally:
        quiet.setLevel(level)
    counters = core.pipeline.counters
    if counters.internal_errors:
        raise AssertionError(f"counting the capture's blocks met {counters.internal_errors} internal errors")
    return counters.numbered
