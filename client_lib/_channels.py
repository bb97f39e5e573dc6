"""The channels one subscriber joined: frames and the time in, events out; no socket.

Theory of operation
-------------------
:class:`ChannelSet` keeps, per joined stream (a channel's real-time stream,
or its delayed one), a :class:`~feedha.client.arbiter.ChannelArbiter`, its
liveness (:class:`~feedha.client.status.ChannelLiveness`) and the keys that
open its sealed packets; and, per line socket, a *route*: which arbiter, which
line number of it, the topic and the endpoint. The line loop
(:mod:`feedha.client._lines`) hands it each received message with the socket's
route index and the time, and its timers when they are due; it returns the
events in the order the arbiters decided them. It also decides when a silent
CURVE line must be dialled again, and calls the application's recovery hook
for each :class:`RetransmissionNeeded` (the packets it returns are fed to the
channel's arbiter on a line of their own, index = the channel's line count).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Final, NamedTuple

from feedha.client._sessions import with_session_events
from feedha.client._subscriber_config import ChannelSpec, RetransmissionHook, SubscriberConfig
from feedha.client.arbiter import ChannelArbiter
from feedha.client.arbiter_stats import ArbiterStats
from feedha.client.errors import ConfigError
from feedha.client.events import Event, Recovered, RetransmissionNeeded
from feedha.client.status import ChannelLiveness
from feedha.proto.seal import Opener, SealError
from feedha.transport import WRONG_PARTS

logger = logging.getLogger(__name__)

REDIAL_S: Final = 1.0  # a CURVE line silent this long is dialled again (libzmq gives up after a refusal)


class LineRoute(NamedTuple):
    """Where the messages of one line socket go."""

    arbiter: ChannelArbiter
    line: int  # the line's number in its arbiter
    topic: bytes  # the channel name: SUB filters by prefix, so it is checked again
    endpoint: str
    liveness: ChannelLiveness
    key: str  # the stream's key (ChannelSpec.key)


class ChannelSet:
    """The joined streams and the route of every line socket (see the module docstring).

    Args:
        specs: the streams to join (checked by ``normalize_channels``).
        config: the subscriber's settings.
        hook: the recovery hook, or ``None``.
        now: the monotonic time (liveness starts counting from it).
    """

    def __init__(
        self,
        specs: list[ChannelSpec],
        config: SubscriberConfig,
        hook: RetransmissionHook | None,
        *,
        now: float,
    ) -> None:
        self.specs: list[ChannelSpec] = []
        self.hook = hook
        self.arbiters: dict[str, ChannelArbiter] = {}
        self.liveness: dict[str, ChannelLiveness] = {}
        self.server_keys: dict[str, str] = {}  # endpoint -> its CURVE key ("": a plain line)
        self.openers: dict[str, Opener] = {}  # sealed streams (multicast lines): key -> what opens them
        self.routes: list[LineRoute] = []  # by socket index
        self._config = config
        self._heard: list[float] = []  # when each route last brought anything
        self._next_redial = 0.0
        self._boundaries: dict[ChannelArbiter, int] = {}  # end-of-session blocks handed on, per arbiter
        for spec in specs:
            self.join(spec, now=now)

    def join(self, spec: ChannelSpec, *, now: float) -> list[int]:
        """Add a stream, or the new lines of a joined one; returns the new route indices.

        A joined stream keeps its arbiter (and so its ``msg_seq`` position);
        its new lines take the next line numbers.

        Raises:
            ConfigError: the channel number disagrees with the joined channel's.
        """
        current = next((s for s in self.specs if s.key == spec.key), None)
        if current is None:
            self.specs.append(spec)
            self.arbiters[spec.key] = _arbiter(spec, self._config)
            self.liveness[spec.key] = ChannelLiveness(
                spec.number or 0, spec.name, stale_after=self._config.stale_after, now=now
            )
            new, first_line = list(spec.endpoints), 0
        else:
            new, first_line = self._widen(current, spec)
        self.server_keys.update((e, spec.server_key(e)) for e in new)
        if spec.seal_keys:
            opener = self.openers.setdefault(spec.key, Opener())
            for key in spec.seal_keys:
                opener.add(key)
        arbiter, topic, start = self.arbiters[spec.key], spec.name.encode(), len(self.routes)
        arbiter.confirm_term(spec.term, now=now)  # the routes' term: followed from now on
        live = self.liveness[spec.key]
        self.routes.extend(
            LineRoute(arbiter, first_line + i, topic, endpoint, live, spec.key)
            for i, endpoint in enumerate(new)
        )
        self._heard.extend([0.0] * len(new))
        return list(range(start, len(self.routes)))

    def _widen(self, current: ChannelSpec, spec: ChannelSpec) -> tuple[list[str], int]:
        # The endpoints of `spec` not yet joined, and the line number of the first of them.
        if spec.number is not None and current.number not in (None, spec.number):
            raise ConfigError("number", spec.number, f"channel {spec.name} is number {current.number}")
        new = [e for e in spec.endpoints if e not in current.endpoints]
        keys = tuple(current.server_key(e) for e in current.endpoints) + tuple(
            spec.server_key(e) for e in new
        )
        self.specs[self.specs.index(current)] = ChannelSpec(
            current.name,
            current.number,
            current.endpoints + tuple(new),
            current.start_seq,
            server_keys=keys if any(keys) else (),
            delayed=current.delayed,
            conflated=current.conflated,
        )
        return new, len(current.endpoints)

    def on_message(self, index: int, message: bytes | int, now: float, out: list[Event]) -> None:
        """One ZeroMQ message from the socket of route ``index``, as a drain gives it
        (:func:`feedha.transport.drain_reference`): its events go to ``out``."""
        self._heard[index] = now
        arbiter, line, _topic, _endpoint, live, key = self.routes[index]
        if type(message) is bytes:  # a packet of this route's topic
            if live.stale:
                out.extend(live.on_packet(now=now))
            else:
                live.heard_at = now
            packet = message
            opener = self.openers.get(key) if self.openers else None
            if opener is not None:
                try:
                    packet = opener.open(packet)
                except SealError as exc:  # forged, tampered, plain, or sealed with a key we lack
                    arbiter.on_garbage(line, reason=f"seal-{exc.reason}")
                    return
            self._emit(arbiter, arbiter.on_packet(line, packet, now=now), now, out)
        elif message == WRONG_PARTS:
            arbiter.on_garbage(line, reason="frames")
        # else OTHER_TOPIC: SUB filters by prefix, so "EQ1" also hears "EQ10"; ignored

    def on_timers(self, now: float) -> list[Event]:
        """Fire the arbiters' and the liveness timers due at ``now``."""
        out: list[Event] = []
        for name, arbiter in self.arbiters.items():
            deadline = arbiter.next_deadline()
            if deadline is not None and deadline <= now:
                self._emit(arbiter, arbiter.on_timer(now=now), now, out)
            live = self.liveness[name]
            if not live.stale and now - live.heard_at >= live.stale_after:
                live.channel = arbiter.channel or live.channel
                out.extend(live.on_timer(now=now))
        return out

    def due_redials(self, now: float) -> list[int]:
        """CURVE routes silent for :data:`REDIAL_S` that must be dialled again.

        libzmq does not reconnect after its peer refused the CURVE key (the
        grant may arrive a moment after the subscription, or come back after a
        revocation): a CURVE line that has brought nothing, not even a
        heartbeat, for a while is dialled afresh.
        """
        if now < self._next_redial:
            return []
        self._next_redial = now + REDIAL_S
        due = []
        for index, route in enumerate(self.routes):
            if self.server_keys.get(route.endpoint) and now - self._heard[index] >= REDIAL_S:
                self._heard[index] = now  # the next redial, if still silent, one interval later
                due.append(index)
        return due

    def wait_ms(self, now: float, until: float | None) -> int | None:
        """Milliseconds to wait: to ``until`` or the earliest arbiter, liveness or redial deadline."""
        deadlines = [d for d in (a.next_deadline() for a in self.arbiters.values()) if d is not None]
        deadlines += [d for d in (live.next_deadline() for live in self.liveness.values()) if d is not None]
        if until is not None:
            deadlines.append(until)
        if any(self.server_keys.values()):
            deadlines.append(self._next_redial)
        if not deadlines:
            return None
        return max(0, math.ceil((min(deadlines) - now) * 1000))

    def _emit(self, arbiter: ChannelArbiter, events: list[Event], now: float, out: list[Event]) -> None:
        if self.hook is not None and not arbiter.conflated:  # no journal keeps a conflated stream
            index = 0
            while index < len(events):  # bounded: each hole is asked for once
                event = events[index]
                index += 1
                if isinstance(event, RetransmissionNeeded):
                    events.extend(self._recover(arbiter, event, now))
        if arbiter.boundaries != self._boundaries.get(arbiter, 0):  # rare: look only then
            self._boundaries[arbiter] = arbiter.boundaries
            events = with_session_events(events, arbiter.name)
        out.extend(events)

    def _recover(self, arbiter: ChannelArbiter, event: RetransmissionNeeded, now: float) -> list[Event]:
        assert self.hook is not None
        try:
            packets = self.hook(event)
        except Exception:
            # A failing recovery hook must not stop the feed: the gap times out.
            logger.exception("on_retransmission_needed failed for %s", event)
            return []
        spec = next(s for s in self.specs if self.arbiters[s.key] is arbiter)
        out: list[Event] = []
        taken = 0
        for packet in packets or ():
            out.extend(arbiter.on_packet(line=len(spec.endpoints), packet=packet, now=now))
            taken += 1
        missing = arbiter.missing(event.first_seq, event.last_seq)
        if taken and missing < event.count:
            recovered = Recovered(
                event.channel,
                event.first_seq,
                event.last_seq,
                recovered=event.count - missing,
                missing=missing,
                channel_name=spec.name,
            )
            out.append(recovered)
        return out

    def stats(self) -> dict[str, ArbiterStats]:
        """Per-stream arbitration counters, keyed by ``ChannelSpec.key``."""
        return {name: arbiter.stats() for name, arbiter in self.arbiters.items()}

    def describe(self, kind: str, closed: bool) -> str:
        """The subscriber's ``repr``."""
        delivered = sum(a.stats().delivered for a in self.arbiters.values())
        names = ",".join(self.arbiters)
        return (
            f"<{kind} [channels={names}, lines={len(self.routes)}, delivered={delivered}, closed={closed}]>"
        )


def _arbiter(spec: ChannelSpec, config: SubscriberConfig) -> ChannelArbiter:
    arbiter_config = config.arbiter_config(channel=spec.number, start_seq=spec.start_seq, name=spec.name)
    if spec.delayed or spec.conflated:
        arbiter_config = dataclasses.replace(arbiter_config, delayed=spec.delayed, conflated=spec.conflated)
    return ChannelArbiter(arbiter_config, lines=len(spec.endpoints))
