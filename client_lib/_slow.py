"""``FeedClient(on_slow="conflate")``: when to leave real time for the conflated lines, and when to come back.

Theory of operation
-------------------
A subscriber that falls behind (a slow consumer, or one that stopped reading)
has its lines' packets queued in its sockets, up to their high-water mark,
and what overflowed them is filled from a journal: what it reads next is
old. :class:`SlowWatch` looks at what each poll hands the application. In
real time, a delivery published more than ``bound_s`` ago (the message's own
``publish_time_ns``, which a retransmitted copy keeps; the filter decoded it
already) means the client is that far behind: it *conflates* -- the session closes its
line sockets (their queues go with them: memory stays bounded) and joins the
channels' conflated lines, which bring every changed symbol's current state
at the end of each interval. Once every channel has delivered the end of an
interval published within half the bound (hysteresis: a client that is only just
keeping up does not flip back and forth), it rejoins real time at the
msg_seq after that interval's boundary (``ChannelSpec.start_seq``: the
journal fills the seam, as for a resume). Each switch is said with a status
event per channel (:class:`~feedha.client.events.Conflated`,
:class:`~feedha.client.events.RealTime`).

Pure: the wall clock comes in as an argument; the session does the switching.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from feedha.client.errors import ConfigError, ProtocolError
from feedha.client.events import Conflated, ConflatedDelivery, Delivery, RealTime, StatusEvent

__all__ = ["ON_SLOW", "SLOW_AFTER_S", "SlowWatch", "Switch", "slow_watch"]

ON_SLOW: Final = ("conflate",)  # FeedClient(on_slow=...) besides None
SLOW_AFTER_S: Final = 5.0  # how far behind (seconds since a packet was sent) counts as slow


@dataclass(frozen=True, slots=True)
class Switch:
    """What the session must do: join the conflated lines (``conflate``) or real time again."""

    conflate: bool
    events: tuple[StatusEvent, ...]
    resume_at: dict[int, int] = field(default_factory=dict)  # channel -> first msg_seq in real time


@dataclass(slots=True)
class SlowWatch:
    """The on-slow decisions of one feed client (see the module docstring).

    Args:
        bound_s: how far behind a delivery may be before the client conflates.
    """

    bound_s: float = SLOW_AFTER_S
    conflated: bool = False
    switches: int = 0
    _fresh: dict[int, int] = field(default_factory=dict)  # channel -> boundary msg_seq of a fresh interval

    def __post_init__(self) -> None:
        if not 0 < self.bound_s <= 3600:
            raise ConfigError("slow_after_s", self.bound_s, "must be in (0, 3600] seconds")

    def observe(self, out: Sequence[Any], *, now_ns: int, channels: Mapping[int, str]) -> Switch | None:
        """What one poll handed the application; ``channels``: the real-time channels joined, by name."""
        if self.conflated:
            return self._current_again(out, now_ns=now_ns, channels=channels)
        bound_ns = self.bound_s * 1e9
        behind: dict[int, float] = {}
        for event in out:
            if type(event) is Delivery and now_ns - (at := _published_ns(event)) > bound_ns:
                behind[event.channel] = max((now_ns - at) / 1e9, behind.get(event.channel, 0.0))
        if not behind:
            return None
        self.conflated, self._fresh = True, {}
        self.switches += 1
        events = tuple(
            Conflated(channel, round(lag, 3), channel_name=channels.get(channel, ""))
            for channel, lag in sorted(behind.items())
        )
        return Switch(True, events)

    def _current_again(
        self, out: Sequence[Any], *, now_ns: int, channels: Mapping[int, str]
    ) -> Switch | None:
        fresh_ns = self.bound_s * 1e9 / 2
        for event in out:
            if isinstance(event, ConflatedDelivery) and event.ends_interval:
                if now_ns - _published_ns(event) <= fresh_ns:
                    self._fresh[event.channel] = event.boundary_msg_seq
        if not channels or not set(channels) <= set(self._fresh):
            return None
        resume = {channel: self._fresh[channel] + 1 for channel in sorted(channels)}
        self.conflated, self._fresh = False, {}
        self.switches += 1
        events = tuple(RealTime(ch, seq, channel_name=channels[ch]) for ch, seq in resume.items())
        return Switch(False, events, resume)


def _published_ns(delivery: Delivery) -> int:
    # The message's publish time (kept by retransmitted copies); the packet's send time if it has none.
    try:
        return delivery.update.publish_time_ns or delivery.send_time_ns
    except ProtocolError:
        return delivery.send_time_ns


def slow_watch(on_slow: str | None, bound_s: float, *, mode: str) -> SlowWatch | None:
    """A feed client's on-slow watch (``None``: it never switches).

    Raises:
        ConfigError: an unknown ``on_slow``, or one asked of a client already conflated.
    """
    if on_slow is None:
        return None
    if on_slow not in ON_SLOW:
        raise ConfigError("on_slow", on_slow, f"must be None or one of {', '.join(map(repr, ON_SLOW))}")
    if mode != "realtime":
        raise ConfigError("on_slow", on_slow, f"applies to mode 'realtime' only, not {mode!r}")
    return SlowWatch(bound_s)
