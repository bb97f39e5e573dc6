"""Receiving ZeroMQ messages on the hot path, shared by the adapter and the subscriber."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final

import zmq

from feedha.transport.native import bound_to_pyzmq

_EVENTS: Final = int(zmq.EVENTS)
_POLLIN: Final = int(zmq.POLLIN)


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


def readable(socket: zmq.Socket[Any]) -> bool:
    """Whether a message is waiting on ``socket`` (``ZMQ_EVENTS``), without receiving it.

    Strategy: a drain loop that stops at ``zmq.Again`` pays for an exception
    (~3.6 us here: pyzmq builds a ``ZMQError`` with its message) on every
    turn; asking the socket costs ~1.5 us. At one message a turn, the
    common case below saturation, the check is the cheaper end of a drain.
    """
    return bool(int(socket.getsockopt(_EVENTS)) & _POLLIN)


WRONG_PARTS: Final = 0  # a drained item: a message not of two parts
OTHER_TOPIC: Final = 1  # a drained item: a two-part message of another topic

Drained = list[bytes | int]  # a packet, WRONG_PARTS or OTHER_TOPIC a message, in order
Drain = Callable[[int], Drained]  # drain(limit): up to limit queued messages, without waiting


def drain_reference(socket: zmq.Socket[Any], topic: bytes, limit: int) -> Drained:
    """Up to ``limit`` queued messages of ``socket``, without waiting (the specification).

    Each message becomes one item: the packet of a ``[topic, packet]`` (the
    topic equal, not a prefix: SUB filters by prefix, ``EQ1`` also matches
    ``EQ10``), :data:`OTHER_TOPIC` for a two-part message of another topic,
    :data:`WRONG_PARTS` for one of one part or more than two. It stops when
    nothing more is queued; a ZeroMQ error other than that raises.
    """
    out: Drained = []
    for count in range(limit):
        # The first is there when the caller's poll said so; below saturation there is
        # one, and asking for a second is cheaper than a receive that fails (readable).
        if count == 1 and not readable(socket):
            break
        try:
            frames = recv_frames(socket)
        except zmq.Again:
            break
        if len(frames) != 2:
            out.append(WRONG_PARTS)
        else:
            out.append(frames[1] if frames[0] == topic else OTHER_TOPIC)
    return out


def make_drain(socket: zmq.Socket[Any], topic: bytes) -> Drain:
    """``drain(limit)`` for ``socket``'s ``topic``: :func:`drain_reference`'s items, in C where it runs.

    The extension (``transport/_drain.c``) receives with libzmq's own calls:
    no ``Frame`` a part, no exception at the end of a drain. It works on the
    socket's libzmq handle, so the socket must stay open as long as the drain
    is used. Where the extension is not built, or is bound to another libzmq
    than pyzmq's, the Python reference does the same.
    """
    if _NATIVE is None:
        return functools.partial(drain_reference, socket, topic)
    return functools.partial(_NATIVE.drain, socket.underlying, topic)


_NATIVE, WHY_NOT_NATIVE_DRAIN = bound_to_pyzmq("feedha.transport._drain")
