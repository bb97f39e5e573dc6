"""Binding an endpoint again right after the socket that held it was closed."""

from __future__ import annotations

import time
from typing import Any, Final

import zmq

REBIND_WAIT_S: Final = 0.2


def bind_again(sock: zmq.Socket[Any], endpoint: str, *, wait_s: float = REBIND_WAIT_S) -> bool:
    """Bind ``sock`` to ``endpoint``, waiting out a listener that is still being closed.

    libzmq closes a socket's listener on its I/O thread after ``close()``
    returns, so binding the same address at once can fail with ``EADDRINUSE``
    for a moment. This retries until ``wait_s`` has passed (polling: the I/O
    thread gives no event to wait on).

    Returns:
        True once bound; False if the address was still in use after ``wait_s``.

    Raises:
        zmq.ZMQError: any other error.
    """
    deadline = time.monotonic() + wait_s
    delay = 0.001
    while True:
        try:
            sock.bind(endpoint)
            return True
        except zmq.ZMQError as exc:
            if exc.errno != zmq.EADDRINUSE:
                raise
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)  # poll interval of a deadline-bounded wait
        delay = min(delay * 2, 0.02)
