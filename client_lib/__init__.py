"""feedha client library: join every line of a channel, arbitrate, deliver in order.

Quick start::

    from feedha.client import ChannelSpec, Subscriber

    with Subscriber([ChannelSpec("EQ1", 1, ("tcp://10.0.0.1:5601", "tcp://10.0.0.2:5601"))]) as sub:
        for delivery in sub.deliveries():
            print(delivery.msg_seq, delivery.update.symbol)

``ChannelArbiter`` is the pure core (feed it packets and the time); the
subscribers are its ZeroMQ shells, blocking and asyncio.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from feedha.client.arbiter import ChannelArbiter
from feedha.client.arbiter_stats import ArbiterStats, LineStats
from feedha.client.errors import (
    ClientError,
    ClosedError,
    ConfigError,
    ModelVersionError,
    ProtocolError,
    ReplayFailed,
    TransportError,
)
from feedha.client.events import (
    ArbiterConfig,
    Conflated,
    ConflatedDelivery,
    Conflict,
    DelayedDelivery,
    Delivery,
    EndOfSession,
    EntitlementChanged,
    Event,
    GapLost,
    ImageUnavailable,
    ModelRefused,
    Purged,
    RealTime,
    Recovered,
    Resumed,
    RetransmissionNeeded,
    SessionEnded,
    SessionStarted,
    Stale,
    StatusEvent,
    TermChanged,
)
from feedha.client.images import ChannelImage, ImageAssembler, ImageDelivery
from feedha.client.replay_client import ReplayClient, ReplayClientStats
from feedha.client.subscriber import (
    AsyncSubscriber,
    ChannelSpec,
    LineSpec,
    RetransmissionHook,
    Subscriber,
    SubscriberConfig,
    channel_specs_from_routes,
)

if TYPE_CHECKING:
    from feedha.admin_client import (
        AdminClient,
        AdminClientError,
        AdminUnavailable,
        AuthenticationFailed,
        Line,
        PermissionDenied,
        Route,
        RouteUpdate,
        Subscription,
        TlsConfig,
    )
    from feedha.client.async_feed_client import AsyncFeedClient
    from feedha.client.feed_client import FeedClient, FeedClientStats

# The admin client (package admin_client, shared with the adapters and feedctl)
# needs grpc; load it only when one of its names is used, so a data-plane-only
# subscriber does not pay for the import.
_ADMIN_NAMES: Final = frozenset(
    {
        "AdminClient",
        "AdminClientError",
        "AdminUnavailable",
        "AuthenticationFailed",
        "Line",
        "PermissionDenied",
        "Route",
        "RouteUpdate",
        "SessionEnded",
        "SessionStarted",
        "Subscription",
        "TlsConfig",
    }
)


_FEED_CLIENT_NAMES: Final = frozenset({"FeedClient", "FeedClientStats"})


def __getattr__(name: str) -> Any:
    if name == "AsyncFeedClient":
        from feedha.client import async_feed_client

        return async_feed_client.AsyncFeedClient
    if name in _FEED_CLIENT_NAMES:
        from feedha.client import feed_client

        return getattr(feed_client, name)
    if name in _ADMIN_NAMES:
        from feedha import admin_client

        return getattr(admin_client, name)
    raise AttributeError(f"module 'feedha.client' has no attribute {name!r}")


__all__ = [
    "AdminClient",
    "AdminClientError",
    "AdminUnavailable",
    "ArbiterConfig",
    "ArbiterStats",
    "AsyncFeedClient",
    "AsyncSubscriber",
    "AuthenticationFailed",
    "ChannelArbiter",
    "ChannelImage",
    "ChannelSpec",
    "ClientError",
    "ClosedError",
    "ConfigError",
    "Conflated",
    "ConflatedDelivery",
    "Conflict",
    "DelayedDelivery",
    "Delivery",
    "EndOfSession",
    "EntitlementChanged",
    "Event",
    "FeedClient",
    "FeedClientStats",
    "GapLost",
    "ImageAssembler",
    "ImageDelivery",
    "ImageUnavailable",
    "Line",
    "LineSpec",
    "LineStats",
    "ModelRefused",
    "ModelVersionError",
    "PermissionDenied",
    "ProtocolError",
    "Purged",
    "Recovered",
    "ReplayClient",
    "ReplayClientStats",
    "ReplayFailed",
    "RealTime",
    "Resumed",
    "RetransmissionHook",
    "RetransmissionNeeded",
    "Route",
    "RouteUpdate",
    "SessionEnded",
    "SessionStarted",
    "Stale",
    "StatusEvent",
    "Subscriber",
    "SubscriberConfig",
    "Subscription",
    "TermChanged",
    "TlsConfig",
    "TransportError",
    "channel_specs_from_routes",
]
