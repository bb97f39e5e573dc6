"""Per-channel liveness: is anything arriving on any line? A pure state machine (the time is passed in).

Theory of operation: every packet of a channel (data or heartbeat, from any
line) is a sign of life, :meth:`ChannelLiveness.on_packet`. Adapters send a
heartbeat on an idle line every 0.1 s, so a channel silent on every line for
``stale_after`` seconds has lost its adapters or its network: the timer
(:meth:`ChannelLiveness.on_timer`) reports :class:`Stale` once, and the next
packet reports :class:`Resumed` with how long the silence lasted. The clock
starts when the channel is joined, so a channel that never delivers anything
goes stale too.
"""

from __future__ import annotations

from typing import Final

from feedha.client.events import Resumed, Stale, StatusEvent

STALE_AFTER_S: Final = 2.0


class ChannelLiveness:
    """One channel's silence detector.

    Args:
        channel: the channel number put on the events (0 until known).
        name: the channel name put on the events.
        stale_after: seconds of silence on every line that make the channel stale.
        now: when the channel was joined.
    """

    __slots__ = ("channel", "name", "stale_after", "heard_at", "stale")

    def __init__(self, channel: int, name: str, *, stale_after: float, now: float) -> None:
        self.channel = channel
        self.name = name
        self.stale_after = stale_after
        self.heard_at = now
        self.stale = False

    def __repr__(self) -> str:
        return f"<ChannelLiveness [{self.name}, stale={self.stale}, heard_at={self.heard_at:.3f}]>"

    def on_packet(self, *, now: float) -> list[StatusEvent]:
        """A packet arrived: :class:`Resumed` if the channel was stale."""
        silent, self.heard_at = now - self.heard_at, now
        if not self.stale:
            return []
        self.stale = False
        return [Resumed(self.channel, silent, channel_name=self.name)]

    def on_timer(self, *, now: float) -> list[StatusEvent]:
        """:class:`Stale` once the silence reached ``stale_after``."""
        if self.stale or now - self.heard_at < self.stale_after:
            return []
        self.stale = True
        return [Stale(self.channel, now - self.heard_at, channel_name=self.name)]

    def next_deadline(self) -> float | None:
        """When :meth:`on_timer` may have something to say (``None`` while stale: only a packet ends it)."""
        return None if self.stale else self.heard_at + self.stale_after
