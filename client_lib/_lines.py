"""The line sockets of one subscriber and its poll loop, written once for the blocking and asyncio APIs.

Theory of operation
-------------------
Each line of each joined channel gets its own SUB socket, subscribed to the
channel name (frames are ``[topic, packet]``), with ``RCVHWM`` set on purpose
(default :data:`~feedha.client.subscriber.RCVHWM` packets: past it ZeroMQ drops
silently, and a drop is a gap the arbiter repairs from a replay service; an
application that stops reading never grows this process without bound), a cap
on the size of a frame (``MAXMSGSIZE``: a larger one drops that connection)
and ``linger`` 0.

:meth:`Lines.poll_steps` is the poll loop, as a generator: it dials silent
CURVE lines again, fires the timers that are due, then *yields* how long to
wait for the sockets and is sent back the sockets that are ready; it drains
each without blocking (up to ``batch`` messages, so one busy line cannot
starve the others), hands the messages to the
:class:`~feedha.client._channels.ChannelSet` and returns the events once it
has some (or the timeout passed). Only the wait differs between the two APIs:
:class:`~feedha.client.Subscriber` answers it with ``zmq.Poller.poll`` and
:class:`~feedha.client.AsyncSubscriber` with ``await zmq.asyncio.Poller.poll``
(:mod:`feedha.client._drive`). The loop yields only between decisions, so an
asyncio poll that is cancelled while it waits loses no event.

For asyncio the sockets are ``zmq.asyncio`` sockets (the poller needs them),
read through plain shadows of the same sockets: a Future per message would
cost more than the arbitration itself.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Generator, Iterable
from typing import Any, Final, cast

import zmq
import zmq.asyncio

from feedha.client._channels import ChannelSet
from feedha.client._subscriber_config import (
    Channels,
    ChannelSpec,
    RetransmissionHook,
    SubscriberConfig,
    normalize_channels,
)
from feedha.client.errors import ClosedError, ConfigError, TransportError
from feedha.client.events import Event
from feedha.transport import Drain, make_drain

MAX_PACKET_FRAME_BYTES: Final = 1024 * 1024  # a packet is at most 64 KiB; far more is hostile

Ready = list[tuple[Any, int]]  # what a poller returns: (socket, event mask)
PollSteps = Generator[int | None, Ready, list[Event]]  # yields ms to wait (None: no limit)


class Lines:
    """The sockets, the poller and the poll loop of one subscriber (see the module docstring).

    Args:
        channels: what to join (any form ``normalize_channels`` takes).
        config: socket and arbitration settings (``None``: the defaults).
        hook: the recovery hook, or ``None``.
        kind: the API's class name, for ``repr`` and errors.
        context: a ZeroMQ context to use (``zmq.asyncio.Context`` with ``on_asyncio``);
            by default one is created and owned.
        on_asyncio: make ``zmq.asyncio`` sockets and poller.

    Raises:
        ConfigError: bad channels, endpoints or settings.
        TransportError: ZeroMQ refused to create a socket.
    """

    def __init__(
        self,
        channels: Channels,
        config: SubscriberConfig | None,
        hook: RetransmissionHook | None,
        *,
        kind: str,
        context: zmq.Context[Any] | None,
        on_asyncio: bool,
    ) -> None:
        self.config = config or SubscriberConfig()
        self.channels = ChannelSet(normalize_channels(channels), self.config, hook, now=time.monotonic())
        self.kind = kind
        self.pending: deque[Event] = deque()  # decided, not yet handed out (iteration)
        self.closed = False
        self._on_asyncio = on_asyncio
        self._owns_context = context is None
        self._context: zmq.Context[Any] = context or (zmq.asyncio.Context() if on_asyncio else zmq.Context())
        self.poller: zmq.Poller = zmq.asyncio.Poller() if on_asyncio else zmq.Poller()
        self._sockets: list[zmq.Socket[Any]] = []  # by route index; each owns its ZeroMQ socket
        self._readers: dict[zmq.Socket[Any], tuple[int, Drain]] = {}  # polled -> (route, its drain)
        try:
            self._add_lines(range(len(self.channels.routes)))
        except zmq.ZMQError as exc:
            self.close()
            raise TransportError(str(exc)) from exc
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return self.channels.describe(self.kind, self.closed)

    def check_open(self, method: str) -> None:
        """Raise :class:`ClosedError` naming ``method`` if closed."""
        if self.closed:
            raise ClosedError(f"{method}() on a closed {self.kind}")

    def poll_steps(self, timeout: float | None) -> PollSteps:
        """The poll loop (see the module docstring); returns the events decided.

        Raises:
            ClosedError: closed.
            TransportError: ZeroMQ failed while receiving.
        """
        self.check_open("poll")
        if self.pending:
            events = list(self.pending)
            self.pending.clear()
            return events
        try:
            return (yield from self._turns(None if timeout is None else time.monotonic() + max(timeout, 0.0)))
        except zmq.ZMQError as exc:
            raise TransportError(str(exc)) from exc

    def _turns(self, until: float | None) -> PollSteps:
        channels = self.channels
        while True:
            now = time.monotonic()
            for index in channels.due_redials(now):
                redial(self._sockets[index], channels.routes[index].endpoint)
            events = channels.on_timers(now)
            if events:
                return events
            ready = yield channels.wait_ms(now, until)
            # From here to the next yield nothing waits: decisions are never split.
            now = time.monotonic()
            for polled, _mask in ready:
                self._drain(polled, now, events)
            if events or (until is not None and now >= until):
                return events

    def wait(self, ms: int | None) -> Ready:
        """The blocking wait of :meth:`poll_steps` (``zmq.Poller``)."""
        try:
            return self.poller.poll(ms)
        except zmq.ZMQError as exc:
            raise TransportError(str(exc)) from exc

    async def wait_async(self, ms: int | None) -> Ready:
        """The asyncio wait of :meth:`poll_steps` (``zmq.asyncio.Poller``)."""
        poller = cast(zmq.asyncio.Poller, self.poller)
        try:
            return await poller.poll(-1 if ms is None else ms)
        except zmq.ZMQError as exc:
            raise TransportError(str(exc)) from exc

    def join(self, channel: ChannelSpec) -> int:
        """Join a channel, or more lines of a joined one; returns how many sockets were added.

        Raises:
            ClosedError: closed.
            ConfigError: the channel number disagrees, or a bad endpoint.
            TransportError: ZeroMQ refused to create a socket.
        """
        self.check_open("join")
        indices = self.channels.join(channel, now=time.monotonic())
        try:
            self._add_lines(indices)
        except zmq.ZMQError as exc:
            raise TransportError(str(exc)) from exc
        return len(indices)

    def _add_lines(self, indices: Iterable[int]) -> None:
        for index in indices:
            socket = self._context.socket(zmq.SUB)
            self._sockets.append(socket)  # first: close() reaches it whatever fails next
            reader = zmq.Socket.shadow(socket.underlying) if self._on_asyncio else socket
            self._connect(reader, index)
            self._readers[socket] = (index, make_drain(reader, self.channels.routes[index].topic))
            self.poller.register(socket, zmq.POLLIN)

    def _connect(self, socket: zmq.Socket[Any], index: int) -> None:
        # Configure and connect `socket` as the line of route `index`.
        config, route = self.config, self.channels.routes[index]
        endpoint = route.endpoint
        server_key = self.channels.server_keys.get(endpoint, "")
        socket.setsockopt(zmq.LINGER, 0)
        if server_key:
            if not config.curve_public:
                raise ConfigError(
                    "curve_public", "", f"the line {endpoint} needs CURVE: give the subscriber a key pair"
                )
            socket.curve_serverkey = server_key.encode()
            socket.curve_publickey = config.curve_public.encode()
            socket.curve_secretkey = config.curve_secret.encode()
        socket.setsockopt(zmq.RCVHWM, config.rcvhwm)
        socket.setsockopt(zmq.MAXMSGSIZE, MAX_PACKET_FRAME_BYTES)
        if endpoint.startswith(("epgm://", "pgm://")):
            # PGM sizes its receive window from ZMQ_RATE x ZMQ_RECOVERY_IVL: same options as the sender.
            from feedha.transport import configure_socket

            try:
                configure_socket(socket, endpoint)
            except ValueError as exc:
                raise ConfigError("endpoint", endpoint, str(exc)) from exc
        if config.rcvbuf:
            socket.setsockopt(zmq.RCVBUF, config.rcvbuf)
        socket.setsockopt(zmq.SUBSCRIBE, route.topic)
        try:
            socket.connect(endpoint)
        except zmq.ZMQError as exc:
            raise ConfigError("endpoint", endpoint, str(exc)) from exc

    def _drain(self, polled: zmq.Socket[Any], now: float, out: list[Event]) -> None:
        entry = self._readers.get(polled)
        if entry is None:  # closed while the poll was pending
            return
        index, drain = entry
        on_message = self.channels.on_message
        for message in drain(self.config.batch):
            on_message(index, message, now, out)

    def close(self) -> None:
        """Close every socket (and the context if owned). Idempotent and synchronous."""
        self.closed = True
        self._readers.clear()
        for socket in self._sockets:
            socket.close(linger=0)
        self._sockets.clear()
        if self._owns_context and not self._context.closed:
            self._context.term()


def redial(socket: zmq.Socket[Any], endpoint: str) -> None:
    """Disconnect and connect again (a fresh CURVE handshake)."""
    with contextlib.suppress(zmq.ZMQError):  # not connected any more: connect again anyway
        socket.disconnect(endpoint)
    socket.connect(endpoint)
