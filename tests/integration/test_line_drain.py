"""A subscriber line's drain: the C extension against its Python reference, on real sockets.

Messages are sent here with pyzmq's own ``send_multipart`` (not by the code
under test), over loopback TCP: well formed ``[topic, packet]`` ones, and ones
of one part, of many parts, of another topic that the SUB prefix filter lets
through, and an empty or large packet. Both drains must give the same items,
stop at their limit and at an empty queue, and raise ZeroMQ's error alike.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator

import pytest
import zmq

from feedha.transport import (
    OTHER_TOPIC,
    WRONG_PARTS,
    _drain,  # not skipped when missing: a checkout that did not build it fails
    drain_reference,
    frames,
    make_drain,
)

TOPIC = b"EQ1"
DEADLINE_MS = 5000


@pytest.fixture
def pair() -> Iterator[tuple[zmq.Socket[bytes], zmq.Socket[bytes]]]:
    """A PUB and a SUB of TOPIC joined over loopback TCP (a probe went through)."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    pub, sub = ctx.socket(zmq.PUB), ctx.socket(zmq.SUB)
    pub.linger = sub.linger = 0
    sub.setsockopt(zmq.SUBSCRIBE, TOPIC)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    sub.connect(f"tcp://127.0.0.1:{port}")
    for _ in range(DEADLINE_MS // 10):  # the slow joiner: probe until one arrives
        pub.send_multipart([TOPIC, b"probe"])
        if sub.poll(10):
            break
    else:
        pytest.fail("the SUB never joined")
    while sub.poll(50):
        sub.recv_multipart()
    try:
        yield pub, sub
    finally:
        pub.close()
        sub.close()
        ctx.term()


def _send_and_wait(pub: zmq.Socket[bytes], sub: zmq.Socket[bytes], messages: list[list[bytes]]) -> None:
    """Send ``messages`` then a marker, and wait until the first is queued."""
    for parts in messages:
        pub.send_multipart(parts)
    pub.send_multipart([TOPIC, b"marker"])
    assert sub.poll(DEADLINE_MS)


def _drain_all(sub: zmq.Socket[bytes], drain: frames.Drain, limit: int) -> list[bytes | int]:
    """Drain until the marker came (waiting when a drain finds the queue empty), then once more."""
    out: list[bytes | int] = []
    while b"marker" not in out:
        got = drain(limit)
        assert len(got) <= limit
        if not got:
            assert sub.poll(DEADLINE_MS), out
        out += got
    assert drain(limit) == []  # nothing after the marker: an empty queue ends a drain quietly
    return out


MIXED = [
    [TOPIC, b"\x00packet one"],
    [TOPIC],  # one part
    [TOPIC, b"a", b"b"],  # three parts
    [TOPIC + b"0", b"another channel"],  # "EQ10" passes the "EQ1" prefix filter
    [TOPIC, b""],  # an empty packet is still a packet: the arbiter judges it
    [TOPIC, bytes(range(256)) * 256],  # 64 KiB
    [TOPIC, *[b"x"] * 1000],  # many parts: read and dropped
    [TOPIC, b"after the many"],
]
EXPECTED = [
    b"\x00packet one",
    WRONG_PARTS,
    WRONG_PARTS,
    OTHER_TOPIC,
    b"",
    bytes(range(256)) * 256,
    WRONG_PARTS,
    b"after the many",
    b"marker",
]


def test_the_extension_is_chosen_and_shares_the_item_codes() -> None:
    assert frames.WHY_NOT_NATIVE_DRAIN == "", frames.WHY_NOT_NATIVE_DRAIN
    assert (_drain.WRONG_PARTS, _drain.OTHER_TOPIC) == (WRONG_PARTS, OTHER_TOPIC)
    assert _drain.zmq_version_info() == zmq.zmq_version_info()


@pytest.mark.parametrize("native", [True, False], ids=["native", "reference"])
@pytest.mark.parametrize("limit", [1, 3, 64])
def test_each_message_becomes_one_item_in_order(
    pair: tuple[zmq.Socket[bytes], zmq.Socket[bytes]], native: bool, limit: int
) -> None:
    pub, sub = pair
    _send_and_wait(pub, sub, MIXED)
    drain = make_drain(sub, TOPIC) if native else (lambda n: drain_reference(sub, TOPIC, n))
    assert _drain_all(sub, drain, limit) == EXPECTED
    assert not sub.poll(0)  # nothing left behind, not even a stray part


def test_the_native_drain_is_the_one_a_line_gets(pair: tuple[zmq.Socket[bytes], zmq.Socket[bytes]]) -> None:
    _pub, sub = pair
    drain = make_drain(sub, TOPIC)
    assert drain.func is _drain.drain  # type: ignore[attr-defined]
    assert drain(8) == []  # an empty queue ends a drain without an error


def test_limit_zero_receives_nothing(pair: tuple[zmq.Socket[bytes], zmq.Socket[bytes]]) -> None:
    pub, sub = pair
    _send_and_wait(pub, sub, [[TOPIC, b"kept"]])
    assert _drain.drain(sub.underlying, TOPIC, 0) == []
    assert _drain_all(sub, make_drain(sub, TOPIC), 5) == [b"kept", b"marker"]


def test_a_socket_that_cannot_receive_raises_zmq_s_error_in_both() -> None:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    try:
        with pytest.raises(zmq.ZMQError) as native:
            _drain.drain(pub.underlying, TOPIC, 4)
        with pytest.raises(zmq.ZMQError) as reference:
            drain_reference(pub, TOPIC, 4)
        assert native.value.errno == reference.value.errno == errno.ENOTSUP
    finally:
        pub.close(linger=0)
        ctx.term()


@pytest.mark.parametrize(
    "args", [(), (0, TOPIC, 1), (1, "EQ1", 1), (1, TOPIC, -1), (1, TOPIC, "1")], ids=repr
)
def test_bad_arguments_are_refused_before_any_receive(args: tuple[object, ...]) -> None:
    with pytest.raises((TypeError, ValueError)):
        _drain.drain(*args)
