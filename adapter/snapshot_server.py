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
line's CURVE keys where the line has them. It is an ``XPUB``, served like the
line (:meth:`~adapter.zap.DataPlaneGuard.serve`): a key that loses access to
the line is cut off from the snapshot line too, within :data:`SERVE_S`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Final

import zmq

from feedha.adapter.snapshot import ImageBuilder
from feedha.adapter.socket_thread import SocketThread

logger = logging.getLogger(__name__)

__all__ = ["SnapshotLoop"]

SNDHWM: Final = 256  # parts queued per subscriber (~15 MiB at most): a slow one loses the rest of a round
SERVE_S: Final = 0.1  # how often the peers are looked at between rounds


class SnapshotLoop(SocketThread):
    """Publishes the newest image every ``interval_s`` on its own thread.

    Args:
        endpoint: where the PUB socket binds.
        builder: builds the images from the journal (owned by this thread from :meth:`start` on).
        topic: the channel name, UTF-8 (the first frame of every message).
        interval_s: seconds between two rounds.
        secure: makes the socket a CURVE server before it binds (``None``: an open socket).
        serve: the socket's turn between rounds: read what peers sent, cut off who must go
            (``None``: what they send is dropped).
    """

    def __init__(
        self,
        endpoint: str,
        builder: ImageBuilder,
        *,
        topic: bytes,
        interval_s: float,
        secure: Callable[[zmq.Socket[bytes]], None] | None = None,
        serve: Callable[[zmq.Socket[bytes], float], None] | None = None,
    ) -> None:
        super().__init__(endpoint, name="snapshot-loop")
        self._serve = serve
        self._next_round = 0.0
        self._builder = builder
        self._topic = topic
        self._interval_s = interval_s
        self._secure = secure
        self.rounds = self.parts_sent = self.parts_dropped = 0
        self.last_msg_seq = 0

    def __repr__(self) -> str:
        return (
            f"<SnapshotLoop [{self._endpoint}, every {self._interval_s:g}s, rounds={self.rounds}, "
            f"msg_seq={self.last_msg_seq}]>"
        )

    def status(self) -> dict[str, Any]:
        return {
            "snapshot_rounds": self.rounds,
            "snapshot_parts_sent": self.parts_sent,
            "snapshot_parts_dropped": self.parts_dropped,
            "snapshot_msg_seq": self.last_msg_seq,
        }

    def _make(self) -> zmq.Socket[bytes]:
        sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.XPUB)
        sock.linger = 0
        sock.sndhwm = SNDHWM
        if self._secure is not None:
            self._secure(sock)
        return sock

    def _turn(self, sock: zmq.Socket[bytes]) -> None:
        now = time.monotonic()
        if self._next_round == 0.0:
            self._next_round = now + self._interval_s
        if self._stop.wait(max(0.0, min(SERVE_S, self._next_round - now))):
            return
        now = time.monotonic()
        if self._serve is not None:
            self._serve(sock, now)
        else:
            _discard(sock)
        if now < self._next_round:
            return
        self._next_round = now + self._interval_s
        try:
            self._round(sock)
        except Exception:  # a bug or a damaged journal costs one round, never the adapter
            logger.exception("snapshot loop: round failed")

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


def _discard(sock: zmq.Socket[bytes]) -> None:
    # An XPUB keeps its subscribers' subscriptions until they are read.
    for _ in range(1000):
        try:
            sock.recv(zmq.NOBLOCK, copy=False)
        except zmq.Again:
            return
