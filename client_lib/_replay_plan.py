"""A feed client's replay by time: which services it asks, which symbols it keeps.

:func:`plan` finds, in the subscription's routes, the channel's replay services
(and their CURVE keys) and the route's symbols; :func:`is_wanted` keeps what the
live stream would hand the subscriber. The replay itself is
:mod:`feedha.client._time_replay`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from feedha.admin_client import Route
from feedha.client._feed_core import _SymbolFilter
from feedha.client._time_replay import PAGE_TIMEOUT_S, TimeReplay
from feedha.client.errors import ConfigError, ProtocolError
from feedha.client.events import Delivery, Purged, StatusEvent
from feedha.client.replay_client import ReplayClient
from feedha.proto.blocks import block_wanted, names_wanted

__all__ = ["is_wanted", "plan"]

logger = logging.getLogger(__name__)


def plan(
    routes: Sequence[Route], channel: int | str, replay: TimeReplay, curve: tuple[str, str]
) -> tuple[ReplayClient, TimeReplay, Callable[[str], bool]]:
    """A replay client of the channel's replay services, the replay, and the route's symbol filter.

    Raises:
        ConfigError: no route of the subscription carries ``channel``, or it names no replay service.
    """
    found = [r for r in routes if channel in (r.channel_number, r.channel_name)]
    if not found:
        known = ", ".join(sorted({f"{r.channel_name} ({r.channel_number})" for r in routes})) or "none"
        raise ConfigError("channel", channel, f"no route of the subscription carries it (routes: {known})")
    route = found[0]
    services = tuple(
        dict.fromkeys(line.replay_endpoint for r in found for line in r.lines if line.replay_endpoint)
    )
    if not services:
        raise ConfigError(
            "channel", channel, "its lines name no replay service (the adapters keep no journal)"
        )
    keys = {line.replay_endpoint: line.curve_server_key for r in found for line in r.lines}
    client = ReplayClient(
        {route.channel_number: services},
        timeout=PAGE_TIMEOUT_S,
        budget=PAGE_TIMEOUT_S,
        server_keys=keys,
        curve_keypair=curve if any(keys.values()) else None,
    )
    named = TimeReplay(
        route.channel_number,
        replay.start_ns,
        replay.end_ns,
        replay.speed,
        channel_name=route.channel_name,
        stall_s=replay.stall_s,
    )
    return client, named, _SymbolFilter(route.symbols).is_wanted


def is_wanted(event: Delivery | StatusEvent, wanted: Callable[[str], bool]) -> bool:
    """Whether the live stream would hand ``event`` to a subscriber of the symbols ``wanted``.

    A delivery or a purge of none of them is not (a book format's message may name several
    symbols: one is enough); a delivery that does not decode is skipped (logged); any
    other status event is.
    """
    if isinstance(event, Delivery):
        try:
            update = event.update
        except ProtocolError:
            logger.info("replay: msg_seq %d does not decode: skipped", event.msg_seq)
            return False
        return block_wanted(update, wanted)
    if isinstance(event, Purged):
        return names_wanted(event.symbol, event.symbols, wanted)
    return True
