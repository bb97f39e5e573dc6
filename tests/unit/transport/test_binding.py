"""Binding an address again at once after closing the socket that held it (real sockets, loopback)."""

from __future__ import annotations

import pytest
import zmq

from feedha.transport import bind_again


def test_an_address_closed_a_moment_ago_is_bound_again() -> None:
    ctx = zmq.Context.instance()
    for _ in range(20):  # the race is short: try it several times
        first = ctx.socket(zmq.PUB)
        port = first.bind_to_random_port("tcp://127.0.0.1")
        first.close(linger=0)
        second = ctx.socket(zmq.PUB)
        try:
            assert bind_again(second, f"tcp://127.0.0.1:{port}")
        finally:
            second.close(linger=0)


def test_an_address_held_by_a_live_socket_is_given_up_after_the_wait() -> None:
    ctx = zmq.Context.instance()
    holder, other = ctx.socket(zmq.PUB), ctx.socket(zmq.PUB)
    try:
        port = holder.bind_to_random_port("tcp://127.0.0.1")
        assert not bind_again(other, f"tcp://127.0.0.1:{port}", wait_s=0.05)
        with pytest.raises(zmq.ZMQError):  # anything but "in use" is not waited out
            bind_again(other, "tcp://999.1.1.1:1", wait_s=0.05)
    finally:
        holder.close(linger=0)
        other.close(linger=0)
