"""What a format's captures are: how a file is read, played and written, and its chaos poison.

A :class:`CaptureFace` is a value, written once in a format's folder
(``adapter/formats/<name>/capture.py``) and listed on one line of
:mod:`adapter.formats.capture_registry`. The plain source (``feedha source --file F
--format F``) and the drills ask that registry for a format's face; they never
branch on a format's name. A face and everything it names import only the
standard library, :mod:`feedha.proto` and its format's light modules: the plain
source reads it without loading an adapter's engines. Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

__all__ = ["MAX_CAPTURE_BYTES", "Capture", "CaptureFace", "Chaos", "ChaosStream", "check_size"]

MAX_CAPTURE_BYTES: Final = 1 << 30  # a capture is read whole: a bound on what one may hold
# A chaos stream: the messages in order, the poison by kind, each flood's first and last source_seq.
ChaosStream: TypeAlias = tuple[list[bytes], Counter[str], dict[str, tuple[int, int]]]


@dataclass(frozen=True, slots=True)
class Capture:
    """The messages of a capture, in order (malformed stretches included, as they were)."""

    messages: tuple[bytes, ...]
    malformed: int  # stretches that are no message of the format


def check_size(data: bytes) -> None:
    """Refuse a capture of more than :data:`MAX_CAPTURE_BYTES` (``ValueError``)."""
    if len(data) > MAX_CAPTURE_BYTES:
        raise ValueError(f"capture of {len(data)} bytes exceeds {MAX_CAPTURE_BYTES}")


@dataclass(frozen=True, kw_only=True, slots=True)
class Chaos:
    """A format's poison and floods for the chaos drill (``adapter/formats/<name>/poison.py``).

    Attributes:
        kinds: the poison kinds, in the order the stream takes them.
        floods: the floods' names, in the order they come.
        stream: ``stream(total, seed=, poison_every=)``: about ``total`` messages, as the
            :data:`ChaosStream` the drill plays.
    """

    kinds: tuple[str, ...]
    floods: tuple[str, ...]
    stream: Callable[..., ChaosStream]


def _nothing(_count: int) -> list[bytes]:
    return []


@dataclass(frozen=True, kw_only=True, slots=True)
class CaptureFace:
    """One format's captures.

    Attributes:
        name: the format's name (its :class:`~adapter.formats.interface.Format`'s).
        read: a capture file's bytes -> its messages (``ValueError``: too large, or none).
        write: messages -> a capture file's bytes that :attr:`read` gives back.
        frames: ``frames(messages, first, end)``: the frames the source sends for messages
            ``first`` to ``end - 1`` (due together, at most a batch).
        seq_of: ``seq_of(messages, index)``: message ``index``'s ``source_seq``, when it shows one.
        end: ``end(count)``: the frames sent after the last of ``count`` messages.
        time_of: a message's own time (ns) for ``--speed``; ``None``: the format is played at a
            rate only.
        chaos: gives its poison and floods for ``feedha drill chaos --format`` (``None``: the
            drill does not write its captures); a function, so that the poison's module is
            loaded only when a drill asks (the plain source never does).
        default_for: the commands that play this format when no ``--format`` is given
            (``source``: ``feedha source --file``; ``book``, ``overload``: those drills); each
            command is one format's.
    """

    name: str
    read: Callable[[bytes], Capture]
    write: Callable[[Sequence[bytes]], bytes]
    frames: Callable[[Sequence[bytes], int, int], list[bytes]]
    seq_of: Callable[[Sequence[bytes], int], int | None]
    end: Callable[[int], list[bytes]] = _nothing
    time_of: Callable[[bytes], int | None] | None = None
    chaos: Callable[[], Chaos] | None = None
    default_for: frozenset[str] = frozenset()
