"""Free loopback ports for drills and tests that must know endpoints up front."""

from __future__ import annotations

import socket


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """Return ``count`` distinct TCP ports that were free on ``host`` a moment ago.

    The sockets are held open until all ports are chosen so the same port is
    never returned twice; a port can still be taken by someone else before
    the caller binds it, which on a test machine's loopback is rare.
    """
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()
