"""Free loopback ports for drills and tests that must know endpoints up front.

A port the kernel hands out for ``bind(0)`` lies in the ephemeral range, the
same range every outgoing connection takes its local port from: a drill that
picked one and bound it a second later could find it taken by some
process's connection in between (a bench run once lost an adapter that way).
So ports are drawn at random from below the ephemeral range, where only an
explicit bind can take them, each checked free by binding it, and never
handed out twice by one process.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

#: the lowest port drawn from; below it sit the well-known and registered
#: services a machine is likely to run.
LOWEST = 10_000
_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_given: set[int] = set()
_draw = random.SystemRandom()


def _ephemeral_low() -> int:
    try:
        return int(_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default, and a safe bound elsewhere


def _bindable(sock: socket.socket, host: str, port: int) -> bool:
    try:
        sock.bind((host, port))
    except OSError:
        return False
    return True


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """Return ``count`` distinct TCP ports that were free on ``host`` a moment ago.

    The sockets are held open until all ports are chosen so the same port is
    never returned twice; the ports lie outside the ephemeral range, so only
    another explicit bind can take one before the caller binds it. Where that
    range leaves too little room below it, the kernel chooses instead.
    """
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    high = _ephemeral_low()
    sockets: list[socket.socket] = []
    try:
        while len(sockets) < count:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            for _ in range(64 if high - LOWEST > 1_000 else 0):
                port = _draw.randrange(LOWEST, high)
                if port not in _given and _bindable(sock, host, port):
                    break
            else:
                sock.bind((host, 0))
        ports = [s.getsockname()[1] for s in sockets]
        _given.update(ports)
        return ports
    finally:
        for sock in sockets:
            sock.close()
