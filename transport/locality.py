"""Whether an address stays on this host: the test behind "secure unless told otherwise".

A component without keys (an adapter, a feed source) or a gRPC client without
TLS runs only where nothing leaves the host: loopback addresses (127.0.0.0/8,
``::1``, ``localhost``), ``ipc://`` and ``inproc://``. Anything else --
another address, ``*``, a host name, multicast -- needs keys (or TLS), or an
explicit ``--insecure``. Pure.
"""

from __future__ import annotations

import ipaddress
from typing import Final

__all__ = ["is_local_endpoint", "is_loopback_host", "is_loopback_target"]

_LOCAL_SCHEMES: Final = ("ipc://", "inproc://")


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (an address, ``[v6]``, or ``localhost``) is this host's loopback."""
    host = host.strip().strip("[]").partition("%")[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_local_endpoint(endpoint: str) -> bool:
    """Whether a ZeroMQ endpoint stays on this host (``ipc://``, ``inproc://``, ``tcp://`` on loopback).

    ``tcp://SOURCE;HOST:PORT`` (a connect from a chosen source address) is judged by HOST.
    """
    if endpoint.startswith(_LOCAL_SCHEMES):
        return True
    if not endpoint.startswith("tcp://"):
        return False  # multicast, or a transport not known here: it leaves the host
    host = endpoint.removeprefix("tcp://").rpartition(":")[0].rpartition(";")[2]
    return is_loopback_host(host)


def is_loopback_target(target: str) -> bool:
    """Whether a gRPC target (``host:port``, ``[v6]:port``, ``unix:PATH``) stays on this host."""
    text = target.removeprefix("dns:///").removeprefix("ipv4:").removeprefix("ipv6:")
    if text.startswith(("unix:", "unix-abstract:")):
        return True
    if text.startswith("["):
        return is_loopback_host(text.partition("]")[0] + "]")
    host = text.rpartition(":")[0] if text.count(":") == 1 else text
    return is_loopback_host(host)
