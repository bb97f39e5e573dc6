"""The snapshot loop: the channel's image published again and again on a line of its own.

Theory of operation
-------------------
Exchange feeds give late joiners a snapshot channel beside the incremental
one (CME MDP3's market recovery feeds): the full image, repeated. This is
ours. A thread of its own (the adapter's loop never waits for it) owns an
:class:`~adapter.snapshot.ImageBuilder` over the journal and a PUB socket,
and every ``interval_s`` publishes the newest image as ``[topic, part]``
messages, the topic being the channel name as on the line and each part a
``feedha.v1.ImagePart`` (docs/wire-format.md, "Images"). A subscriber
collects the parts of one image (same ``msg_seq``, parts ``0..parts-1``),
then joins the lines from ``msg_seq + 1`` (the gap filled from a journal).

The socket is bounded (``SNDHWM`` parts per subscriber: one that does not
read loses parts, counted, and takes the next round), and served with the
line's CURVE keys where the line has them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Final

import zmq

from feedha import transport
from feedha.adapter.snapshot import ImageBuilder

logger = logging.getLogger(__name__)

__all__ = ["SnapshotLoop"]

SNDHWM: Final = 256  # parts queued per subscriber (~15 MiB at most): a slow one loses the rest of a round
BIND_WAIT_S: Final = 1.0


class SnapshotLoop:
    """Publishes the newest image every ``interval_s`` on its own thread.

    Args:
        endpoint: where the PUB socket binds.
        builder: builds the images from the journal (owned by this thread from :meth:`start` on).
        topic: the channel name, UTF-8 (the first frame of every message).
        interval_s: seconds between two rounds.
        secure: makes the socket a CURVE server before it binds (``None``: an open socket).
    """

    def __init__(
        self,
        endpoint: str,
        builder: ImageBuilder,
        *,
        topic: bytes,
        interval_s: float,
        secure: Callable[[zmq.Socket[bytes]], None] | None = None,
    ) -> None:
        self._endpoint = endpoint
        self._builder = builder
        self._topic = topic
        self._interval_s = interval_s
        self._secure = secure
        self._stop = threading.Event()
        self._rebind = threading.Event()
        self._bound = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="snapshot-loop", daemon=True)
        self.rounds = self.parts_sent = self.parts_dropped = 0
        self.last_msg_seq = 0

    def __repr__(self) -> str:
        return (
            f"<SnapshotLoop [{self._endpoint}, every {self._interval_s:g}s, rounds={self.rounds}, "
            f"msg_seq={self.last_msg_seq}]>"
        )

    def start(self) -> None:
        """Bind and start; returns once bound.

        Raises:
            zmq.ZMQError: the endpoint could not be bound.
        """
        self._thread.start()
        self._bound.wait(5)
        if self._error is not None:
            raise self._error

    def rebind(self) -> None:
        """Bind afresh (every subscriber reconnects and is checked again): after a revocation."""
        self._rebind.set()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def status(self) -> dict[str, Any]:
        return {
            "snapshot_rounds": self.rounds,
            "snapshot_parts_sent": self.parts_sent,
            "snapshot_parts_dropped": self.parts_dropped,
            "snapshot_msg_seq": self.last_msg_seq,
        }

    def _open(self) -> zmq.Socket[bytes]:
        sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.PUB)
        sock.linger = 0
        sock.sndhwm = SNDHWM
        if self._secure is not None:
            self._secure(sock)
        try:
            if not transport.bind_again(sock, self._endpoint, wait_s=BIND_WAIT_S):
                raise zmq.ZMQError(zmq.EADDRINUSE, f"{self._endpoint} still in use after {BIND_WAIT_S} s")
        except zmq.ZMQError:
            sock.close(linger=0)
            raise
        return sock

    def _run(self) -> None:
        try:
            sock = self._open()
        except zmq.ZMQError as exc:
            self._error = exc
            return
        finally:
            self._bound.set()
        try:
            while not self._stop.wait(self._interval_s):
                if self._rebind.is_set():
                    self._rebind.clear()
                    sock.close(linger=0)
                    sock = self._open()
                try:
                    self._round(sock)
                except Exception:  # a bug or a damaged journal costs one round, never the adapter
                    logger.exception("snapshot loop: round failed")
        finally:
            sock.close(linger=0)

    def _round(self, sock: zmq.Socket[bytes]) -> None:
        image = self._builder.newest(now=time.monotonic())
        if image is None:
            return
        self.rounds += 1
        self.last_msg_seq = image.msg_seq
        for part in image.parts:
            try:
                sock.send_multipart([self._topic, part], zmq.NOBLOCK)
                self.parts_sent += 1
            except zmq.Again:
                self.parts_dropped += 1
