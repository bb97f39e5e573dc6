"""ZeroMQ socket set-up and transport tuning, shared by the adapter, the sources and the subscribers.

The line transport is picked by the endpoint URL: ``tcp://`` unicast fan-out
by default, ``epgm://``/``pgm://`` multicast where libzmq has OpenPGM
(docs/multicast.md). :func:`configure_socket` sets what a multicast socket
needs before its bind/connect; :func:`recv_frames` is the receive loop of the
hot path, :func:`readable` the cheap end of a drain, and :func:`make_drain` a
subscriber line's drain (in C where the extension is built). This package imports
``zmq`` and nothing of feedha's other packages: the wire contracts are in ``proto``.
"""

from __future__ import annotations

from feedha.transport.binding import bind_again
from feedha.transport.errors import TransportConfigError, TransportError
from feedha.transport.frames import (
    OTHER_TOPIC,
    WRONG_PARTS,
    Drain,
    Drained,
    drain_reference,
    make_drain,
    readable,
    recv_frames,
)
from feedha.transport.options import (
    DEFAULT_MULTICAST,
    LIBZMQ_DEFAULTS,
    MULTICAST_BUFFER_BYTES,
    MULTICAST_HOPS,
    MULTICAST_MAX_TPDU,
    MULTICAST_RATE_KBPS,
    MULTICAST_SCHEMES,
    RECOVERY_INTERVAL_MS,
    MulticastOptions,
    configure_socket,
    has_multicast,
    is_multicast,
    multicast_endpoint,
    receiving_endpoint,
)

__all__ = [
    "DEFAULT_MULTICAST",
    "LIBZMQ_DEFAULTS",
    "MULTICAST_BUFFER_BYTES",
    "MULTICAST_HOPS",
    "MULTICAST_MAX_TPDU",
    "MULTICAST_RATE_KBPS",
    "MULTICAST_SCHEMES",
    "RECOVERY_INTERVAL_MS",
    "MulticastOptions",
    "TransportConfigError",
    "TransportError",
    "bind_again",
    "configure_socket",
    "has_multicast",
    "is_multicast",
    "multicast_endpoint",
    "receiving_endpoint",
    "readable",
    "recv_frames",
    "drain_reference",
    "make_drain",
    "OTHER_TOPIC",
    "WRONG_PARTS",
    "Drain",
    "Drained",
]
