"""Subscribers: join every line of each channel, arbitrate, deliver in order; blocking and asyncio.

Theory of operation
-------------------
All decisions happen in one :class:`~feedha.client.arbiter.ChannelArbiter` per
channel; the sockets, the timers and the poll loop are
:class:`feedha.client._lines.Lines`, written once. The two classes here are
thin facades over it that differ only in how they wait for the sockets:
:class:`Subscriber` blocks in ``zmq.Poller.poll`` in the caller's thread,
:class:`AsyncSubscriber` awaits ``zmq.asyncio.Poller.poll`` on the caller's
loop (:mod:`feedha.client._drive`). Both hand the events back in the order the
arbiters decided them; a state update is never split by a wait, so
cancelling an asyncio poll loses no event.

Why not one asyncio implementation with a blocking facade that runs it on a
private event loop in a thread: measured with ``bench/micro_client.py``
(``python -m feedha.bench.micro_client --cases paced,paced_async,paced_thread_facade``:
CPU of every Python thread per delivered message, two lines offered 150k msg/s
in bursts every 1 ms, on a 2-core machine shared with other work, six runs),
the blocking ``zmq.Poller`` loop cost 1.2-1.9 µs per message, the same loop on
``zmq.asyncio`` 1.5-2.4 µs, and a blocking ``poll()`` that runs
``AsyncSubscriber.poll`` on a loop thread 2.0-3.5 µs (a thread hop per poll,
the poller's futures, the GIL passed back and forth); in every run in that
order, and the facade once fell behind the offered rate. With a queued backlog
(``subscriber``, ``async_subscriber``: big batches per poll) the two loops cost
about the same, 0.9-1.1 µs. The loop is the client's hot path, so the blocking
loop stays, and it is the one both APIs drive.

A ``on_retransmission_needed`` hook, if given, is called (synchronously, on
the thread or task that polls) with each ``RetransmissionNeeded``; packets it
returns are fed to the channel's arbiter on a dedicated line (index = number
of lines of the channel).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from types import TracebackType

import zmq
import zmq.asyncio

from feedha.client._channels import REDIAL_S
from feedha.client._drive import drive, drive_async
from feedha.client._lines import MAX_PACKET_FRAME_BYTES, Lines, redial
from feedha.client._subscriber_config import (
    BATCH,
    RCVHWM,
    Channels,
    ChannelSpec,
    LineSpec,
    RetransmissionHook,
    SubscriberConfig,
    channel_specs_from_routes,
    normalize_channels,
)
from feedha.client.arbiter_stats import ArbiterStats
from feedha.client.events import Delivery, Event

__all__ = [
    "BATCH",
    "MAX_PACKET_FRAME_BYTES",
    "RCVHWM",
    "REDIAL_S",
    "AsyncSubscriber",
    "ChannelSpec",
    "Channels",
    "LineSpec",
    "RetransmissionHook",
    "Subscriber",
    "SubscriberConfig",
    "channel_specs_from_routes",
    "normalize_channels",
    "redial",
]


class Subscriber:
    """Blocking subscriber: joins every line of each channel and arbitrates.

    Args:
        channels: ``{name: [endpoint, ...]}`` (channel numbers adopted from the
            packets), or a sequence of :class:`ChannelSpec` / :class:`LineSpec`.
        config: socket and arbitration settings.
        on_retransmission_needed: optional gap-recovery hook; returns packets
            (e.g. from an adapter's replay service) or ``None``.
        context: a ZeroMQ context to use; by default one is created and owned.

    Raises:
        ConfigError: bad channels, endpoints or settings.
        TransportError: ZeroMQ refused to create a socket.
    """

    def __init__(
        self,
        channels: Channels,
        config: SubscriberConfig | None = None,
        *,
        on_retransmission_needed: RetransmissionHook | None = None,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
    ) -> None:
        self._lines = Lines(
            channels, config, on_retransmission_needed, kind="Subscriber", context=context, on_asyncio=False
        )

    def __repr__(self) -> str:
        return repr(self._lines)

    def __enter__(self) -> Subscriber:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        pending = self._lines.pending
        while not pending:
            if self._lines.closed:
                raise StopIteration
            pending.extend(self.poll())
        return pending.popleft()

    def deliveries(self) -> Iterator[Delivery]:
        """Iterate over deliveries only (gap and term events are still counted in ``stats``)."""
        for event in self:
            if isinstance(event, Delivery):
                yield event

    def poll(self, timeout: float | None = None) -> list[Event]:
        """Wait up to ``timeout`` seconds (``None``: forever) for events.

        Returns:
            The events decided so far, as soon as there is at least one;
            an empty list if the timeout passed first.

        Raises:
            ClosedError: the subscriber is closed.
            TransportError: ZeroMQ failed while receiving.
        """
        return drive(self._lines.poll_steps(timeout), self._lines.wait)

    def join(self, channel: ChannelSpec) -> int:
        """Join a channel, or more lines of a joined channel, while running.

        A channel already joined keeps its arbiter, so delivery goes on from
        its ``msg_seq`` position without loss or repetition: the new lines
        are just more copies to arbitrate. Endpoints already joined are
        skipped. Call it from the thread that polls.

        Args:
            channel: the channel and its lines (all of them or only new ones).

        Returns:
            How many lines (sockets) were added.

        Raises:
            ClosedError: the subscriber is closed.
            ConfigError: the channel number disagrees, or a bad endpoint.
            TransportError: ZeroMQ refused to create a socket.
        """
        return self._lines.join(channel)

    def stats(self) -> dict[str, ArbiterStats]:
        """Per-channel arbitration counters, keyed by channel name (``NAME/delayed``: its delayed stream)."""
        return self._lines.channels.stats()

    def close(self) -> None:
        """Close every socket (and the context if owned). Idempotent."""
        self._lines.close()


class AsyncSubscriber:
    """The asyncio subscriber (``zmq.asyncio``); same arguments as :class:`Subscriber`.

    Use as ``async with AsyncSubscriber(...) as sub: async for event in sub: ...``.
    Closing is synchronous, so it completes even when the task is cancelled.
    """

    def __init__(
        self,
        channels: Channels,
        config: SubscriberConfig | None = None,
        *,
        on_retransmission_needed: RetransmissionHook | None = None,
        context: zmq.asyncio.Context | None = None,
    ) -> None:
        self._lines = Lines(
            channels,
            config,
            on_retransmission_needed,
            kind="AsyncSubscriber",
            context=context,
            on_asyncio=True,
        )

    def __repr__(self) -> str:
        return repr(self._lines)

    async def __aenter__(self) -> AsyncSubscriber:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __aiter__(self) -> AsyncSubscriber:
        return self

    async def __anext__(self) -> Event:
        pending = self._lines.pending
        while not pending:
            if self._lines.closed:
                raise StopAsyncIteration
            pending.extend(await self.poll())
        return pending.popleft()

    async def deliveries(self) -> AsyncIterator[Delivery]:
        """Iterate over deliveries only."""
        async for event in self:
            if isinstance(event, Delivery):
                yield event

    async def poll(self, timeout: float | None = None) -> list[Event]:
        """Wait up to ``timeout`` seconds (``None``: forever) for events; see :meth:`Subscriber.poll`.

        Raises:
            ClosedError: the subscriber is closed.
            TransportError: ZeroMQ failed while receiving.
        """
        return await drive_async(self._lines.poll_steps(timeout), self._lines.wait_async)

    def join(self, channel: ChannelSpec) -> int:
        """Join a channel, or more lines of a joined channel, while running (see :meth:`Subscriber.join`).

        Returns:
            How many lines (sockets) were added.

        Raises:
            ClosedError: the subscriber is closed.
            ConfigError: the channel number disagrees, or a bad endpoint.
            TransportError: ZeroMQ refused to create a socket.
        """
        return self._lines.join(channel)

    def stats(self) -> dict[str, ArbiterStats]:
        """Per-channel arbitration counters, keyed by channel name (``NAME/delayed``: its delayed stream)."""
        return self._lines.channels.stats()

    def close(self) -> None:
        """Close every socket (and the context if owned). Idempotent and synchronous."""
        self._lines.close()

    async def aclose(self) -> None:
        """Async alias of :meth:`close`."""
        self.close()
