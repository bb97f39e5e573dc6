"""Playing a captured feed back as a source stream (``feedha source --file F``).

:class:`CapturePlayback` is a :class:`~plain_source.source.PlainSource` (the
same XPUB socket, CURVE and subscriber wait) whose send loop sends a
capture's messages on the first stream -- read and cut into frames by its
format's :class:`~adapter.formats.capture_face.CaptureFace` (FIX: the messages due
back to back in one frame; itch50: MoldUDP64 packets) -- paced at ``--rate``, at
``--speed`` times the messages' own pace, or as fast as possible; ``--burst
RATE:SECONDS`` plays the first seconds at another rate (``feedha drill
overload``). Behind its schedule (its subscribers hold it back) it sends what
is due as fast as they take it; with ``--progress`` it prints where it stands
twice a second: ``{"event": "progress", "t": ..., "due": ..., "out": ...}``
(messages due by the schedule, messages sent).
"""

from __future__ import annotations

import bisect
import json
import logging
import threading
import time
from typing import Final

from feedha.adapter.formats.capture_face import Capture, CaptureFace
from feedha.plain_source.capture import due_offsets
from feedha.plain_source.config import MAX_BATCH, SourceConfig
from feedha.plain_source.source import PlainSource
from feedha.plain_source.summary import SourceSummary

logger = logging.getLogger(__name__)

__all__ = ["CapturePlayback"]

_SLEEP_SLICE_S: Final = 0.05
PROGRESS_EVERY_S: Final = 0.5


class CapturePlayback(PlainSource):
    """Sends one capture on the first stream.

    Args:
        config: the source's configuration (``streams[0]`` is the stream played on; its
            ``count`` bounds how many messages are sent).
        capture: the capture (its format's :attr:`~adapter.formats.capture_face.CaptureFace.read`).
        face: the capture's format's captures (how its messages are framed and numbered).
        rate: a fixed rate (messages/s), or ``None``.
        speed: pace by the messages' times at this speed, or ``None`` (neither: as fast as possible).
        burst: ``(rate, seconds)`` played first, before ``rate`` (:func:`~plain_source.capture.due_offsets`).
        progress: print a progress line twice a second.
    """

    def __init__(
        self,
        config: SourceConfig,
        capture: Capture,
        face: CaptureFace,
        *,
        rate: float | None,
        speed: float | None,
        burst: tuple[float, float] | None = None,
        progress: bool = False,
    ) -> None:
        super().__init__(config)
        self.capture = capture
        self.face = face
        self._offsets = due_offsets(
            capture.messages, rate=rate, speed=speed, burst=burst, time_of=face.time_of
        )
        self._progress = progress

    @classmethod
    def from_file(
        cls,
        config: SourceConfig,
        path: str,
        face: CaptureFace,
        *,
        rate: float | None,
        speed: float | None,
        burst: tuple[float, float] | None = None,
        progress: bool = False,
    ) -> CapturePlayback:
        """Read the capture of ``face``'s format at ``path`` (raises ``OSError``, ``ValueError``)."""
        with open(path, "rb") as file:
            data = file.read()
        return cls(config, face.read(data), face, rate=rate, speed=speed, burst=burst, progress=progress)

    def _send_loop(self, stop: threading.Event, summary: SourceSummary) -> None:
        messages, offsets = self.capture.messages, self._offsets
        limit = len(messages) if self.config.count is None else min(self.config.count, len(messages))
        batch = self.config.batch or MAX_BATCH
        start = time.monotonic()
        seconds = self.config.seconds
        sent = 0
        next_progress = 0.0 if self._progress else float("inf")
        while sent < limit and not stop.is_set():
            late = time.monotonic() - start
            if seconds is not None and late >= seconds:
                break
            if late >= next_progress:
                next_progress = late + PROGRESS_EVERY_S
                _progress(late, min(limit, bisect.bisect_right(offsets, late)), sent)
            due = sent
            while due < limit and due - sent < batch and offsets[due] <= late:
                due += 1
            if due == sent:
                time.sleep(min(offsets[sent] - late, _SLEEP_SLICE_S))
                continue
            if not all(self._send(0, frame) for frame in self.face.frames(messages, sent, due)):
                break  # stopped while a subscriber held a send back (what went out is not counted)
            self._sent[0] += due - sent
            seq = self.face.seq_of(messages, due - 1)
            if seq is not None:
                summary.last_seq[0] = seq
            sent = due
        if self._progress:
            _progress(time.monotonic() - start, sent, sent)
        for frame in self.face.end(len(messages)):
            self._send(0, frame)
        self._drain_subscriptions(0)


def _progress(late: float, due: int, out: int) -> None:
    # One JSON line on stdout (the drills read it); the summary comes at the end, on the main thread.
    print(json.dumps({"event": "progress", "t": round(late, 3), "due": due, "out": out}), flush=True)
