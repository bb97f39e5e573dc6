"""A peer book learns only connections its own socket accepted: :class:`Listening` on real sockets."""

from __future__ import annotations

import ipaddress
import os
import socket
import tempfile
from pathlib import Path

import pytest

from feedha.adapter.peers import Listening


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ("tcp://127.0.0.1:5556", Listening(port=5556, host=ipaddress.ip_address("127.0.0.1"))),
        ("tcp://0.0.0.0:5556", Listening(port=5556)),
        ("tcp://[::]:5556", Listening(port=5556)),
        ("tcp://[::1]:5556", Listening(port=5556, host=ipaddress.ip_address("::1"))),
        ("tcp://[fe80::1%eth0]:5556", Listening(port=5556, host=ipaddress.ip_address("fe80::1"))),
        ("ipc:///tmp/feedha/line", Listening(path="/tmp/feedha/line")),
        ("ipc://@feedha-line", Listening(path="\0feedha-line")),
    ],
)
def test_where_a_bound_socket_listens_is_read_from_its_last_endpoint(
    endpoint: str, expected: Listening
) -> None:
    assert Listening.parse(endpoint) == expected


@pytest.mark.parametrize(
    "endpoint",
    ["", "tcp://127.0.0.1:0", "tcp://eth0:5556", "tcp://127.0.0.1:x", "epgm://eth0;239.1.1.1:5", "ipc://"],
)
def test_an_endpoint_whose_connections_cannot_be_told_by_address_gives_none(endpoint: str) -> None:
    assert Listening.parse(endpoint) is None


def test_only_connections_accepted_on_the_address_are_its_own() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    other = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _peer = listener.accept()
    stranger = socket.create_connection(other.getsockname())
    stranger_accepted, _ = other.accept()
    try:
        exact, anywhere = Listening.parse(f"tcp://127.0.0.1:{port}"), Listening.parse(f"tcp://0.0.0.0:{port}")
        elsewhere = Listening.parse(f"tcp://127.0.0.2:{port}")
        assert exact is not None and anywhere is not None and elsewhere is not None
        assert exact.accepted(accepted.fileno()) and anywhere.accepted(accepted.fileno())
        assert not elsewhere.accepted(accepted.fileno())  # the port, but not the address
        assert not exact.accepted(listener.fileno())  # the listener has the address, but is no peer
        # The client's end, another listener's connection, and that listener itself are strangers.
        for fd in (client.fileno(), stranger.fileno(), stranger_accepted.fileno(), other.fileno()):
            assert not exact.accepted(fd)
        with tempfile.TemporaryFile() as file:
            assert not exact.accepted(file.fileno())  # not a socket
        closed = os.dup(accepted.fileno())
        os.close(closed)
        assert not exact.accepted(closed)
        assert exact.accepted(accepted.fileno())  # checking never closes or changes the socket
        accepted.sendall(b"x")
        assert client.recv(1) == b"x"
    finally:
        for sock in (listener, other, client, accepted, stranger, stranger_accepted):
            sock.close()


def test_a_unix_socket_s_connections_are_told_by_path(tmp_path: Path) -> None:
    path = str(tmp_path / "line")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen()
    client = socket.socket(socket.AF_UNIX)
    client.connect(path)
    accepted, _peer = listener.accept()
    try:
        here, there = Listening.parse(f"ipc://{path}"), Listening.parse(f"ipc://{path}-other")
        assert here is not None and there is not None
        assert here.accepted(accepted.fileno()) and not there.accepted(accepted.fileno())
        assert not here.accepted(client.fileno())  # the connecting end has no path
        assert not Listening(port=5556).accepted(accepted.fileno())  # a TCP listener's, it is not
    finally:
        for sock in (listener, client, accepted):
            sock.close()
