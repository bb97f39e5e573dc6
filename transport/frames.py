"""Receiving ZeroMQ messages on the hot path, shared by the adapter and the subscriber."""

from __future__ import annotations

import zmq


def recv_frames(socket: zmq.Socket[bytes]) -> list[bytes]:
    """Receive one whole message without blocking (raises ``zmq.Again`` if none).

    Strategy: ``recv_multipart`` asks ``getsockopt(RCVMORE)`` after every
    frame, a slow call in pyzmq (~1.3 us here); a ``Frame`` carries the same
    flag as an attribute, and ``.bytes`` is the copy ``recv`` would make.
    Measured 3-4 us instead of 5-9 us per 2-frame message.
    """
    frame = socket.recv(zmq.NOBLOCK, copy=False)
    frames = [frame.bytes]
    while frame.more:
        frame = socket.recv(zmq.NOBLOCK, copy=False)
        frames.append(frame.bytes)
    return frames
