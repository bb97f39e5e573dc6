"""feedha client library: join every line of a channel, arbitrate, deliver in order.

Quick start::

    from client_lib import ChannelSpec, Subscriber

    with Subscriber([ChannelSpec("EQ1", 1, ("tcp://10.0.0.1:5601", "tcp://10.0.0.2:5601"))]) as sub:
        for delivery in sub.deliveries():
            print(delivery.msg_seq, delivery.update.symbol)

``ChannelArbiter`` is the pure core (feed it packets and the time); the
subscribers are its ZeroMQ shells, blocking and asyncio.
"""

from __future__ import annotations

from client_lib.arbiter import (
    ArbiterConfig,
    ArbiterStats,
    ChannelArbiter,
    Conflict,
    Delivery,
    EndOfSession,
    Event,
    GapLost,
    LineStats,
    RetransmissionNeeded,
    TermChanged,
)
from client_lib.errors import (
    AuthenticationError,
    ClientError,
    ClosedError,
    ConfigError,
    PermissionDeniedError,
    ProtocolError,
    TransportError,
)
from client_lib.subscriber import (
    AsyncSubscriber,
    ChannelSpec,
    LineSpec,
    RetransmissionHook,
    Subscriber,
    SubscriberConfig,
)

__all__ = [
    "ArbiterConfig",
    "ArbiterStats",
    "AsyncSubscriber",
    "AuthenticationError",
    "ChannelArbiter",
    "ChannelSpec",
    "ClientError",
    "ClosedError",
    "ConfigError",
    "Conflict",
    "Delivery",
    "EndOfSession",
    "Event",
    "GapLost",
    "LineSpec",
    "LineStats",
    "PermissionDeniedError",
    "ProtocolError",
    "RetransmissionHook",
    "RetransmissionNeeded",
    "Subscriber",
    "SubscriberConfig",
    "TermChanged",
    "TransportError",
]
