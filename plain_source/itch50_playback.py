"""Playing an ITCH 5.0 capture as MoldUDP64 packets (``feedha source --file F --format itch50``).

The capture is in the BinaryFILE layout (a u16 big-endian length before every
message, as NASDAQ's sample files are); message ``i`` (from 0) is sequence
number ``i + 1``. Each frame sent is one MoldUDP64 downstream packet of the
messages due (at most ``--batch``, and never more bytes than a datagram
holds), paced at ``--rate`` or as fast as possible: never by the capture's
own timestamps (a day from 03:00 to 20:05). After the last message an end of
session packet (count ``0xFFFF``) follows.
"""

from __future__ import annotations

from typing import Final

from feedha.plain_source.capture import MAX_CAPTURE_BYTES, Capture
from feedha.plain_source.config import SourceConfig
from feedha.plain_source.playback import CapturePlayback
from feedha.proto import moldudp64

__all__ = ["ItchPlayback", "read_itch_capture"]

SESSION: Final = "FEEDHA"


def read_itch_capture(data: bytes) -> Capture:
    """The messages of a BinaryFILE capture (a message cut short at the end is kept, as it was).

    Raises:
        ValueError: more than :data:`~plain_source.capture.MAX_CAPTURE_BYTES`, or no message at all.
    """
    if len(data) > MAX_CAPTURE_BYTES:
        raise ValueError(f"capture of {len(data)} bytes exceeds {MAX_CAPTURE_BYTES}")
    messages = tuple(moldudp64.read_binary_file(data))
    if not messages:
        raise ValueError("no ITCH message in the capture (BinaryFILE: u16 length, then the message)")
    return Capture(messages, 0)


class ItchPlayback(CapturePlayback):
    """Sends an ITCH capture as MoldUDP64 packets on the first stream.

    Args:
        config: the source's configuration.
        capture: the capture (:func:`read_itch_capture`).
        rate: messages/s, or ``None`` for as fast as possible.
        burst: ``(rate, seconds)`` played first, before ``rate``.
        progress: print a progress line twice a second.
    """

    def __init__(
        self,
        config: SourceConfig,
        capture: Capture,
        *,
        rate: float | None,
        burst: tuple[float, float] | None = None,
        progress: bool = False,
    ) -> None:
        super().__init__(config, capture, rate=rate, speed=None, burst=burst, progress=progress)

    @classmethod
    def from_itch_file(
        cls,
        config: SourceConfig,
        path: str,
        *,
        rate: float | None,
        burst: tuple[float, float] | None = None,
        progress: bool = False,
    ) -> ItchPlayback:
        """Read the capture at ``path`` (raises ``OSError``, ``ValueError``)."""
        with open(path, "rb") as file:
            data = file.read()
        return cls(config, read_itch_capture(data), rate=rate, burst=burst, progress=progress)

    def _frames(self, first: int, end: int) -> list[bytes]:
        # One packet per frame, each within what a datagram holds (a huge message goes alone).
        frames: list[bytes] = []
        start, size = first, moldudp64.HEADER.size
        for index in range(first, end):
            grown = size + 2 + len(self.capture.messages[index])
            if grown > moldudp64.MAX_PACKET_BYTES and index > start:
                frames.append(self._packet(start, index))
                start, grown = index, moldudp64.HEADER.size + 2 + len(self.capture.messages[index])
            size = grown
        frames.append(self._packet(start, end))
        return frames

    def _packet(self, first: int, end: int) -> bytes:
        return moldudp64.encode_packet(SESSION, first + 1, self.capture.messages[first:end])

    def _seq_of(self, index: int) -> int | None:
        return index + 1

    def _finish(self) -> None:
        end = moldudp64.encode_packet(
            SESSION, len(self.capture.messages) + 1, [], count=moldudp64.END_OF_SESSION
        )
        self._send(0, end)
