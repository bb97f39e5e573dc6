"""End-of-session blocks into status events: what subscribers hand on in the block's place.

Pure: a :class:`~feedha.client.events.SessionBoundaryDelivery` (the arbiter
delivers the end-of-session block, packet flag bit 2, in ``msg_seq`` order
like any message) becomes :class:`SessionEnded` then :class:`SessionStarted`,
in the same place of the stream.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

from feedha.client.errors import ProtocolError
from feedha.client.events import Event, SessionBoundaryDelivery, SessionEnded, SessionStarted, StatusEvent

logger = logging.getLogger(__name__)

_REASONS: Final = {1: "schedule", 2: "operator"}


def with_session_events(events: Sequence[Event], channel_name: str) -> list[Event]:
    """``events`` with every end-of-session block replaced by its two status events."""
    out: list[Event] = []
    for event in events:
        if type(event) is SessionBoundaryDelivery:
            out.extend(boundary_events(event, channel_name))
        else:
            out.append(event)
    return out


def boundary_events(block: SessionBoundaryDelivery, channel_name: str) -> list[StatusEvent]:
    """:class:`SessionEnded` and :class:`SessionStarted` of one end-of-session block (none if malformed)."""
    try:
        update = block.update
    except ProtocolError as exc:
        logger.warning(
            "channel %s: end-of-session block %d does not decode: %s", channel_name, block.msg_seq, exc
        )
        return []
    if not update.HasField("session_boundary"):
        logger.warning("channel %s: end-of-session block %d names no session", channel_name, block.msg_seq)
        return []
    boundary = update.session_boundary
    reason = _REASONS.get(boundary.reason, "unknown")
    time_ns = boundary.boundary_time_ns
    return [
        SessionEnded(
            block.channel, boundary.ended, block.msg_seq, time_ns, reason, channel_name=channel_name
        ),
        SessionStarted(
            block.channel, boundary.started, block.msg_seq + 1, time_ns, channel_name=channel_name
        ),
    ]
