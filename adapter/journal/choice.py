"""Which implementation frames and checks journal records: the one place that chooses.

``_native`` (C, ``_native.c``) frames and checksums a whole batch of records
per call; ``_reference`` does the same in Python, byte for byte, several
times slower. The choice is made as every package of the adapter makes it
(:mod:`adapter._native_code`), once, at import: the journal's modules call
:data:`FRAMING`'s functions.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, Protocol, TypeVar

from feedha.adapter._native_code import warn_fallback, why_not_built

logger = logging.getLogger(__name__)

__all__ = ["FRAMING", "IS_NATIVE_BUILT", "Framing", "make_framing"]

_Buffer = bytes | bytearray | memoryview
_R = TypeVar("_R", bound=tuple[int, int, int, int, bytes, int])
_Tuple = tuple[int, int, int, int, bytes] | tuple[int, int, int, int, bytes, int]

if TYPE_CHECKING:
    from feedha.adapter.journal._reference import Appender

_NOT_BUILT: Final = why_not_built("feedha.adapter.journal._native")
IS_NATIVE_BUILT: Final = _NOT_BUILT is None


class Framing(Protocol):
    """What both implementations offer (``_native.pyi`` documents each function)."""

    @property
    def Appender(self) -> type[Appender]: ...  # noqa: N802 -- the class each module offers

    def crc32c(self, data: _Buffer, value: int = 0, /) -> int: ...
    def frame_records(
        self,
        first_msg_seq: int,
        time_ns: int,
        source_stream: int,
        source_seqs: Sequence[int],
        payloads: Sequence[_Buffer],
        flags: int = 0,
        /,
    ) -> bytes: ...
    def frame_into(
        self,
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
        /,
    ) -> tuple[int, int]: ...
    def frame_one_into(
        self,
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
        self,
        buf: bytearray | memoryview,
        offset: int,
        limit: int,
        records: Sequence[_Tuple],
        last_seq: int,
        day_end_ns: int,
        start: int = 0,
        stop: int = -1,
        /,
    ) -> tuple[int, int, int]: ...
    def decode_records(
        self,
        data: _Buffer,
        pos: int,
        prev_seq: int,
        max_records: int,
        record_type: type[_R],
        controls: list[tuple[int, int, _R]] | None = None,
        /,
    ) -> tuple[list[_R], int, int]: ...
    def write_out(
        self,
        fd: int,
        chunks: Sequence[_Buffer],
        sync: bool,
        index_fd: int = -1,
        index_data: _Buffer = b"",
        /,
    ) -> None: ...


def make_framing(*, prefer_native: bool = True) -> Framing:
    """The framing functions: the C extension's when it is built, else the Python reference's (logged).

    Args:
        prefer_native: ``False`` gives the reference (tests, comparisons).

    Returns:
        The ``adapter.journal._native`` module, or ``adapter.journal._reference``.
    """
    if prefer_native and _NOT_BUILT is None:
        from feedha.adapter.journal import _native

        return _native
    if prefer_native:
        warn_fallback(logger, "journal framing", "several times slower", _NOT_BUILT or "")
    from feedha.adapter.journal import _reference

    return _reference


FRAMING: Final = make_framing()
