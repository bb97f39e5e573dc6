"""A retransmission hook for :class:`~client_lib.Subscriber`: fill gaps from the lines' replay services.

Theory of operation
-------------------
Every adapter of a channel journals its line and may run a replay service
(protocol in docs/journal.md and :mod:`proto.replay`). When the arbiter
emits ``RetransmissionNeeded(channel, first, last)``, the subscriber calls
this hook, which asks the channel's replay services in turn, starting with
the one that answered last:

* each service is asked for what is still missing, page by page (a reply is
  bounded; ``through`` says how far it reached, so the next request starts
  after it);
* a service that times out, answers garbage or an error is left for the
  next one (its socket is closed, so a late reply can never be mistaken for
  a later one); one that lacks part of the range (``UNAVAILABLE``, or holes
  inside a reply) leaves that part to the next one;
* a service that answers ``BUSY`` (this client is over its budget there:
  4 MiB a second, so a hole of tens of thousands of messages takes several
  pages) is left for the next one too, and once every service still asked was
  busy, asked again :data:`BUSY_RETRY_S` later, round after round, while the
  call's budget lasts (a hole the lines dropped for a lagging client is
  filled whole, not one page of it);
* the packets collected go back to the subscriber, which feeds them to the
  arbiter; what no journal had stays a hole and is reported ``GapLost``
  when the loss timeout passes.

The hook blocks the subscriber's loop for at most ``timeout`` per request
and ``budget`` per call. It is not thread-safe (one per subscriber).
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import zmq

from feedha.client.errors import ConfigError

if TYPE_CHECKING:
    from feedha.client.images import ChannelImage
from feedha.client.events import RetransmissionNeeded
from feedha.proto.replay import (
    KIND_DELAYED_RANGE,
    KIND_RANGE,
    ReplayProtocolError,
    ReplayRequest,
    ReplayStatus,
    ReplyStatus,
    decode_status,
    encode_request,
)
from feedha.proto.wire import WireError, decode_header

logger = logging.getLogger(__name__)

TIMEOUT_S: Final = 0.5
BUDGET_S: Final = 2.0
MAX_REQUESTS: Final = 256
BUSY_RETRY_S: Final = 0.02  # every service still asked said BUSY: ask again this much later
REPLY_QUEUE_MESSAGES: Final = 64  # replies are read one request at a time: a few queued is plenty
MAX_REPLY_BYTES: Final = 64 * 1024 * 1024  # a reply is up to ~1 MiB of packets; far more is hostile

Ranges = list[tuple[int, int]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayClientStats:
    """What the hook has done so far.

    Attributes:
        calls: retransmission events handled.
        requests: requests sent.
        packets: packets returned to the subscriber.
        messages: messages in them.
        timeouts: requests that got no reply in time.
        failures: replies that were errors or garbage.
        unavailable: replies saying the journal lacks the range.
        failovers: times a later service was asked for what an earlier one did not give.
        unfilled: messages no service could provide.
        busy: replies saying this client was over the service's budget (asked again later).
    """

    calls: int
    requests: int
    packets: int
    messages: int
    timeouts: int
    failures: int
    unavailable: int
    failovers: int
    unfilled: int
    busy: int = 0


def subtract(ranges: Ranges, first: int, last: int) -> Ranges:
    """Remove ``first..last`` from sorted, disjoint, inclusive ``ranges``."""
    out: Ranges = []
    for a, b in ranges:
        if last < a or first > b:
            out.append((a, b))
            continue
        if a < first:
            out.append((a, first - 1))
        if last < b:
            out.append((last + 1, b))
    return out


class ReplayClient:
    """Retransmission hook: asks each channel's replay services for missing messages.

    Example::

        replay = ReplayClient({1: ["tcp://10.0.0.1:5701", "tcp://10.0.0.2:5701"]})
        with Subscriber(channels, on_retransmission_needed=replay) as sub: ...

    Args:
        endpoints: per channel number, the replay endpoints of its lines.
        timeout: seconds to wait for one reply before trying the next service.
        budget: most seconds one call may spend in all.
        max_requests: most requests one call may send.
        context: a ZeroMQ context; by default the process-wide instance.
        server_keys: per endpoint, the Z85 CURVE key of a replay service that needs CURVE.
        curve_keypair: this client's Z85 CURVE ``(public, secret)`` keys, for those services.

    Raises:
        ConfigError: no endpoints, a bad endpoint, or a bad setting.
    """

    def __init__(
        self,
        endpoints: Mapping[int, Sequence[str]],
        *,
        timeout: float = TIMEOUT_S,
        budget: float = BUDGET_S,
        max_requests: int = MAX_REQUESTS,
        context: zmq.Context[Any] | None = None,
        server_keys: Mapping[str, str] | None = None,
        curve_keypair: tuple[str, str] | None = None,
    ) -> None:
        if not endpoints:
            raise ConfigError("endpoints", endpoints, "name at least one channel's replay services")
        for channel, services in endpoints.items():
            if not services:
                raise ConfigError("endpoints", channel, "channel has no replay endpoint")
            for endpoint in services:
                if not isinstance(endpoint, str) or "://" not in endpoint:
                    raise ConfigError("endpoints", endpoint, "expected transport://address")
        if not timeout > 0:
            raise ConfigError("timeout", timeout, "must be > 0")
        if not budget >= timeout:
            raise ConfigError("budget", budget, "must be >= timeout")
        if max_requests < 1:
            raise ConfigError("max_requests", max_requests, "must be >= 1")
        self._endpoints = {channel: tuple(services) for channel, services in endpoints.items()}
        self._timeout_ms = max(1, round(timeout * 1000))
        self._budget = budget
        self._max_requests = max_requests
        self._context = context or zmq.Context.instance()
        self._sockets: dict[str, zmq.Socket[bytes]] = {}
        self._preferred: dict[int, int] = {}
        self._ids = itertools.count(1)
        self._counts = dict.fromkeys(ReplayClientStats.__dataclass_fields__, 0)
        self._closed = False
        self._server_keys = dict(server_keys or {})
        self._curve = curve_keypair
        if any(self._server_keys.values()) and curve_keypair is None:
            raise ConfigError(
                "curve_keypair", None, "replay services with CURVE keys need the client's key pair"
            )

    def add(
        self, channel: int, endpoints: Sequence[str], server_keys: Mapping[str, str] | None = None
    ) -> None:
        """Also ask these replay services of ``channel`` (routes grew); known ones are kept."""
        known = self._endpoints.get(channel, ())
        self._endpoints[channel] = known + tuple(e for e in endpoints if e not in known)
        self._server_keys.update(server_keys or {})

    def __repr__(self) -> str:
        c = self._counts
        return (
            f"<ReplayClient [channels={sorted(self._endpoints)}, requests={c['requests']}, "
            f"messages={c['messages']}, failovers={c['failovers']}, unfilled={c['unfilled']}]>"
        )

    def __enter__(self) -> ReplayClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def stats(self) -> ReplayClientStats:
        """A snapshot of the counters."""
        return ReplayClientStats(**self._counts)

    def image(self, channel: int, *, budget: float | None = None) -> ChannelImage | None:
        """The channel's image from one of its replay services (``feedha.client.images.fetch_image``).

        Returns:
            Every symbol's state at one msg_seq, or ``None`` when no service had one.
        """
        from feedha.client.images import fetch_image

        return fetch_image(self, channel, budget=self._budget if budget is None else budget)

    def __call__(self, event: RetransmissionNeeded) -> list[bytes]:
        """Fetch ``event.first_seq..event.last_seq`` of ``event.channel``.

        Returns:
            Retransmission packets, possibly covering only part of the range
            (the rest was in no journal that answered).
        """
        return self.fetch(event.channel, event.first_seq, event.last_seq, delayed=event.delayed)

    def fetch(self, channel: int, first_seq: int, last_seq: int, *, delayed: bool = False) -> list[bytes]:
        """Fetch messages ``first_seq..last_seq`` of ``channel`` from its replay services.

        Args:
            channel: the channel number.
            first_seq: the first msg_seq wanted.
            last_seq: the last msg_seq wanted (inclusive).
            delayed: of the channel's delayed stream (a delayed range: only what is past its delay).

        Returns:
            Retransmission packets in the order received (see :meth:`__call__`).
        """
        self._counts["calls"] += 1
        services = self._endpoints.get(channel)
        if services is None or self._closed:
            self._counts["unfilled"] += last_seq - first_seq + 1
            return []
        job = _Fetch([(first_seq, last_seq)], time.monotonic() + self._budget, self._max_requests)
        self._rounds(channel, services, job, delayed)
        unfilled = sum(last - first + 1 for first, last in job.missing)
        self._counts["unfilled"] += unfilled
        if unfilled:
            logger.warning(
                "channel %d: %d of msg_seq %d..%d in no replay service",
                channel,
                unfilled,
                first_seq,
                last_seq,
            )
        return job.packets

    def _rounds(self, channel: int, services: tuple[str, ...], job: _Fetch, delayed: bool) -> None:
        """Ask the services in turn (the last to answer first); again while one was only busy."""
        start = self._preferred.get(channel, 0)
        failed: set[int] = set()
        asked = 0
        while job.missing and not job.exhausted():
            busy = False
            for turn in range(len(services)):
                index = (start + turn) % len(services)
                if not job.missing or job.exhausted():
                    break
                if index in failed:
                    continue
                if asked:
                    self._counts["failovers"] += 1
                asked += 1
                outcome = self._from_service(services[index], channel, job, delayed)
                if outcome is _Outcome.FAILED:
                    failed.add(index)
                busy = busy or outcome is _Outcome.BUSY
                if outcome is _Outcome.ANSWERED and not job.missing:
                    self._preferred[channel] = index
            if not busy:
                return
            job.pause(BUSY_RETRY_S)

    def _from_service(self, endpoint: str, channel: int, job: _Fetch, delayed: bool) -> _Outcome:
        """Ask one service for everything still missing, page by page."""
        for first, last in list(job.missing):
            low = first
            while low <= last:
                if job.exhausted():
                    return _Outcome.ANSWERED
                job.requests += 1
                reply = self._ask(endpoint, channel, low, last, deadline=job.deadline, delayed=delayed)
                if reply is None:
                    return _Outcome.FAILED
                if isinstance(reply, _Outcome):
                    return reply  # BUSY
                through, got = reply
                job.take(got)
                if through < low:
                    break  # nothing of low.. here: leave it to the next service
                low = through + 1
        return _Outcome.ANSWERED

    def services(self, channel: int) -> tuple[str, ...]:
        """The replay endpoints known for ``channel`` (the one that answered last first)."""
        services = self._endpoints.get(channel, ())
        start = self._preferred.get(channel, 0) % max(1, len(services))
        return services[start:] + services[:start]

    def request(
        self, endpoint: str, request: ReplayRequest, *, deadline: float
    ) -> tuple[ReplyStatus, list[bytes]] | None:
        """Send one request to one service and wait for its reply (the request id is filled in).

        Returns:
            The reply's status and the frames after it; ``None`` when the service timed
            out or failed (its socket is closed, so a late reply is never taken for another).
        """
        request_id = next(self._ids) & 0xFFFFFFFF
        socket = self._socket(endpoint)
        self._counts["requests"] += 1
        # One deadline for the whole exchange: replies to other requests, or
        # junk, arriving now and then must not keep the wait going.
        until = min(deadline, time.monotonic() + self._timeout_ms / 1000)
        body = encode_request(dataclasses.replace(request, request_id=request_id))
        try:
            socket.send_multipart([b"", body])
            while True:
                left_ms = max(0, round((until - time.monotonic()) * 1000))
                if not left_ms or not socket.poll(left_ms):
                    self._counts["timeouts"] += 1
                    logger.info("replay service %s: no reply in %d ms", endpoint, self._timeout_ms)
                    self._drop(endpoint)
                    return None
                frames = socket.recv_multipart()
                if len(frames) >= 2 and frames[0] == b"":
                    status = decode_status(frames[1])
                    if status.request_id == request_id:
                        return status, frames[2:]
        except (ReplayProtocolError, zmq.ZMQError) as exc:
            self._counts["failures"] += 1
            logger.info("replay service %s failed: %s", endpoint, exc)
            self._drop(endpoint)
            return None

    def _ask(
        self, endpoint: str, channel: int, first: int, last: int, *, deadline: float, delayed: bool
    ) -> tuple[int, _Got] | _Outcome | None:
        """One request; ``None`` when the service failed (timeout, garbage, error), ``BUSY``."""
        kind = KIND_DELAYED_RANGE if delayed else KIND_RANGE
        reply = self.request(endpoint, ReplayRequest(channel, 0, first, last, kind), deadline=deadline)
        if reply is None:
            return None
        status, packets = reply
        if status.status is ReplayStatus.UNAVAILABLE:
            self._counts["unavailable"] += 1
            return first - 1, _Got()
        if status.status is ReplayStatus.BUSY:
            self._counts["busy"] += 1
            return _Outcome.BUSY
        if status.status is not ReplayStatus.OK:
            self._counts["failures"] += 1
            logger.info("replay service %s: %s %s", endpoint, status.status.name, status.message)
            return None
        got = _Got()
        for packet in packets:
            try:
                header = decode_header(packet)
            except WireError as exc:
                self._counts["failures"] += 1
                logger.info("replay service %s sent a bad packet: %s", endpoint, exc)
                continue
            wrong = header.channel != channel or header.is_delayed != delayed
            if wrong or not header.is_retransmission or not header.count:
                self._counts["failures"] += 1
                continue
            got.add(packet, header.first_seq, header.next_seq - 1)
            self._counts["packets"] += 1
            self._counts["messages"] += header.count
        return status.through, got

    def _socket(self, endpoint: str) -> zmq.Socket[bytes]:
        socket = self._sockets.get(endpoint)
        if socket is None:
            socket = self._context.socket(zmq.DEALER)
            socket.linger = 0
            server_key = self._server_keys.get(endpoint, "")
            if server_key and self._curve is not None:
                socket.curve_serverkey = server_key.encode()
                socket.curve_publickey, socket.curve_secretkey = (k.encode() for k in self._curve)
            socket.rcvhwm = REPLY_QUEUE_MESSAGES
            socket.setsockopt(zmq.MAXMSGSIZE, MAX_REPLY_BYTES)  # a larger reply drops the connection
            socket.connect(endpoint)
            self._sockets[endpoint] = socket
        return socket

    def _drop(self, endpoint: str) -> None:
        socket = self._sockets.pop(endpoint, None)
        if socket is not None:
            socket.close(linger=0)

    def close(self) -> None:
        """Close the sockets (idempotent); later calls return nothing."""
        self._closed = True
        for endpoint in list(self._sockets):
            self._drop(endpoint)


class _Outcome(enum.Enum):
    """How one service's turn ended."""

    ANSWERED = "answered"  # it gave what it has (maybe nothing of some ranges)
    BUSY = "busy"  # over this client's budget there: ask again later
    FAILED = "failed"  # timed out, garbage or an error: not asked again in this call


class _Got:
    """Packets of one reply and the msg_seq ranges they cover."""

    __slots__ = ("packets", "ranges")

    def __init__(self) -> None:
        self.packets: list[bytes] = []
        self.ranges: Ranges = []

    def add(self, packet: bytes, first: int, last: int) -> None:
        self.packets.append(packet)
        self.ranges.append((first, last))


class _Fetch:
    """One call's progress: what is still missing, what was collected, what is left to spend."""

    __slots__ = ("missing", "packets", "deadline", "max_requests", "requests")

    def __init__(self, missing: Ranges, deadline: float, max_requests: int) -> None:
        self.missing = missing
        self.packets: list[bytes] = []
        self.deadline = deadline
        self.max_requests = max_requests
        self.requests = 0

    def exhausted(self) -> bool:
        return self.requests >= self.max_requests or time.monotonic() >= self.deadline

    def pause(self, seconds: float) -> None:
        time.sleep(max(0.0, min(seconds, self.deadline - time.monotonic())))

    def take(self, got: _Got) -> None:
        for first, last in got.ranges:
            self.missing = subtract(self.missing, first, last)
        self.packets.extend(got.packets)
