"""Socket options per endpoint scheme: what a line needs on ``epgm://`` multicast.

Theory of operation
-------------------
A line's transport is picked by its endpoint URL (docs/wire-format.md,
Lines): ``tcp://`` unicast fan-out by default, ``epgm://``/``pgm://``
multicast (OpenPGM) where libzmq was built with it. On ``tcp://`` the defaults
are right and nothing is set here. A PGM socket left at its defaults loses
data: libzmq's ``ZMQ_RATE`` is 100 kbit/s and the kernel's socket buffers are
a few hundred KiB, so a sender at market-data rates overruns both and a
receiver is reset after an unrecoverable loss. Measured on the development
machine (docs/multicast.md): 69 of 100,000 paced messages arrived with the
defaults; 200,000 of 200,000 with 16 MiB buffers and 1,000,000 kbit/s.

The receive window of a PGM receiver is sized from the same ``ZMQ_RATE`` and
``ZMQ_RECOVERY_IVL`` (libzmq ``pgm_socket.cpp``: window = rate x interval), so
senders *and* receivers get :func:`configure_socket`. The kernel caps
``SO_SNDBUF``/``SO_RCVBUF`` at ``net.core.wmem_max``/``rmem_max``: raise those
to :data:`MULTICAST_BUFFER_BYTES` on the hosts (``deploy/netns/segment`` and
the drills do; docs/multicast.md shows the sysctl).

Call :func:`configure_socket` after creating a socket and before its
``bind``/``connect``: libzmq reads these options when the PGM socket opens.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Final

import zmq

from feedha.transport.errors import TransportConfigError

MULTICAST_SCHEMES: Final = ("epgm://", "pgm://", "norm://")
MULTICAST_BUFFER_BYTES: Final = 16 * 1024 * 1024  # SO_SNDBUF / SO_RCVBUF
MULTICAST_RATE_KBPS: Final = 1_000_000  # ZMQ_RATE; libzmq's default is 100
RECOVERY_INTERVAL_MS: Final = 10_000  # ZMQ_RECOVERY_IVL: how long a NAK can still be repaired
MULTICAST_HOPS: Final = 1  # ZMQ_MULTICAST_HOPS (TTL): stay on the segment
MULTICAST_MAX_TPDU: Final = 1500  # ZMQ_MULTICAST_MAXTPDU: one Ethernet frame


@dataclass(frozen=True, slots=True, kw_only=True)
class MulticastOptions:
    """Socket options for a multicast (PGM) endpoint.

    Attributes:
        buffer_bytes: ``SO_SNDBUF`` and ``SO_RCVBUF`` (capped by the kernel's ``*mem_max``).
        rate_kbps: ``ZMQ_RATE``, the sender's rate limit, which also sizes the
            receiver's window.
        recovery_interval_ms: ``ZMQ_RECOVERY_IVL``, how long lost data stays repairable.
        hops: ``ZMQ_MULTICAST_HOPS`` (IP TTL).
        max_tpdu: ``ZMQ_MULTICAST_MAXTPDU``, the largest PGM datagram.
    """

    buffer_bytes: int = MULTICAST_BUFFER_BYTES
    rate_kbps: int = MULTICAST_RATE_KBPS
    recovery_interval_ms: int = RECOVERY_INTERVAL_MS
    hops: int = MULTICAST_HOPS
    max_tpdu: int = MULTICAST_MAX_TPDU

    def __post_init__(self) -> None:
        for name in ("buffer_bytes", "rate_kbps", "recovery_interval_ms", "hops", "max_tpdu"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise TransportConfigError(f"{name} must be a positive integer, got {value!r}")


DEFAULT_MULTICAST: Final = MulticastOptions()
# libzmq's own defaults, for measurements that show what they cost.
LIBZMQ_DEFAULTS: Final = MulticastOptions(
    buffer_bytes=212_992, rate_kbps=100, recovery_interval_ms=10_000, hops=1, max_tpdu=1500
)


def is_multicast(endpoint: str) -> bool:
    """True when ``endpoint`` names a multicast transport (``epgm://``, ``pgm://``, ``norm://``)."""
    return endpoint.startswith(MULTICAST_SCHEMES)


def has_multicast() -> bool:
    """True when this pyzmq's libzmq was built with OpenPGM (``epgm://`` works).

    PyPI's pyzmq wheels bundle a libzmq without it; ``scripts/setup`` builds
    pyzmq against Debian's libzmq, which has it.
    """
    return bool(zmq.has("pgm"))


def multicast_endpoint(interface: str, group: str, port: int, *, scheme: str = "epgm") -> str:
    """Build ``epgm://INTERFACE;GROUP:PORT``.

    The interface is named by its IPv4 address: libzmq refused an interface
    name on this machine's network namespaces (docs/multicast.md).

    Raises:
        ValueError: ``interface`` is not an IPv4 address, ``group`` is not an
            IPv4 multicast address, ``port`` is out of range, or an unknown scheme.
    """
    if scheme not in ("epgm", "pgm"):
        raise ValueError(f"scheme must be 'epgm' or 'pgm', got {scheme!r}")
    try:
        ipaddress.IPv4Address(interface)
    except ValueError:
        raise ValueError(f"interface must be an IPv4 address, got {interface!r}") from None
    if not ipaddress.IPv4Address(group).is_multicast:
        raise ValueError(f"group must be an IPv4 multicast address (224.0.0.0/4), got {group!r}")
    if not 0 < port < 65536:
        raise ValueError(f"port must be in 1..65535, got {port!r}")
    return f"{scheme}://{interface};{group}:{port}"


def receiving_endpoint(endpoint: str, interface: str) -> str:
    """The endpoint a receiver connects to for a line: a multicast line's on its own ``interface``.

    An ``epgm://``/``pgm://`` endpoint names the interface of the host that
    uses it, so a multicast line registered by an adapter names the adapter's
    interface; a subscriber joins the same group and port on its own.
    Other endpoints are returned unchanged.

    Raises:
        ValueError: ``interface`` is not an IPv4 address, or a malformed multicast endpoint.
    """
    if not endpoint.startswith(("epgm://", "pgm://")):
        return endpoint
    scheme, _, rest = endpoint.partition("://")
    _interface, semicolon, group_port = rest.partition(";")
    group, colon, port = group_port.rpartition(":")
    if not semicolon or not colon or not port.isdigit():
        raise ValueError(f"expected {scheme}://INTERFACE;GROUP:PORT, got {endpoint!r}")
    return multicast_endpoint(interface, group, int(port), scheme=scheme)


def configure_socket(
    socket: zmq.Socket[Any], endpoint: str, options: MulticastOptions = DEFAULT_MULTICAST
) -> None:
    """Set the options ``endpoint``'s transport needs on ``socket`` (before bind/connect).

    On ``tcp://``, ``ipc://`` and ``inproc://`` this does nothing. On a
    multicast endpoint it sets the buffers, rate, recovery interval, hops and
    TPDU of ``options``.

    Args:
        socket: a new PUB, XPUB or SUB socket.
        endpoint: the endpoint it will bind or connect.
        options: the multicast settings (default: :data:`DEFAULT_MULTICAST`).

    Raises:
        TransportConfigError: a multicast endpoint but this libzmq has no OpenPGM
            (the message names the ``tcp://`` fallback), or libzmq refused an option.
    """
    if not is_multicast(endpoint):
        return
    if endpoint.startswith(("epgm://", "pgm://")) and not has_multicast():
        raise TransportConfigError(
            f"{endpoint!r} needs a libzmq with OpenPGM, and this pyzmq's has none: "
            "run scripts/setup (it builds pyzmq against Debian's libzmq) or use a tcp:// line"
        )
    try:
        socket.setsockopt(zmq.SNDBUF, options.buffer_bytes)
        socket.setsockopt(zmq.RCVBUF, options.buffer_bytes)
        socket.setsockopt(zmq.RATE, options.rate_kbps)
        socket.setsockopt(zmq.RECOVERY_IVL, options.recovery_interval_ms)
        socket.setsockopt(zmq.MULTICAST_HOPS, options.hops)
        socket.setsockopt(zmq.MULTICAST_MAXTPDU, options.max_tpdu)
    except zmq.ZMQError as exc:
        raise TransportConfigError(f"{endpoint!r}: libzmq refused a multicast option: {exc}") from exc
