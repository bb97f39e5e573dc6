"""A small, bounded HTTP/1.1 server on asyncio: the daemons' /metrics, /healthz, /readyz and the status page.

Theory of operation
-------------------
Every daemon serves a handful of GET endpoints to monitoring systems and
browsers. Each connection carries one request (``Connection: close``), read
under limits an outsider cannot stretch: the request line and headers
together fit in :attr:`HttpLimits.header_bytes` and must arrive within
:attr:`HttpLimits.header_timeout_s`; at most :attr:`HttpLimits.max_connections`
are open at once; request bodies are refused. When the cap is reached, a new
connection takes the place of an idle one -- one that has not finished
sending its request after :data:`IDLE_MIN_S` (a real client sends it at once):
the oldest of the address that holds the most idle connections -- so idle
connections cannot hold every slot and starve a health probe; only when no
connection is idle is the new one answered ``503`` and closed (a flood costs
a counter, not memory). Only GET and HEAD
exist. A handler returns a :class:`Response`, or a :class:`Stream` for
server-sent events: its producer writes through a :class:`StreamSink`, which
drops the connection once the peer stops reading and more than
:attr:`HttpLimits.stream_buffer_bytes` wait to be sent.

The access log names the method, the path and the status, never the query
string (a login link carries a one-time token there).

This is hand-written rather than aiohttp: GET-only, one request per
connection and server-sent events are ~300 lines where every limit is ours
to set (aiohttp has no header timeout and no connection cap), and it adds no
dependency to the adapters.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import ssl
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from typing import Final

logger = logging.getLogger(__name__)

MAX_CONNECTIONS: Final = 64
HEADER_BYTES: Final = 16 * 1024
HEADER_TIMEOUT_S: Final = 5.0
WRITE_TIMEOUT_S: Final = 10.0
STREAM_BUFFER_BYTES: Final = 256 * 1024
MAX_HEADERS: Final = 64
REFUSE_LINGER_S: Final = 0.25
IDLE_MIN_S: Final = 0.1  # a connection without a whole request for this long may give its slot up


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpLimits:
    """What one server accepts.

    Args:
        max_connections: connections open at once; more get ``503`` and are closed.
        header_bytes: request line and headers together, at most.
        header_timeout_s: time to send the request line and headers.
        write_timeout_s: time a peer has to take a (non-stream) response.
        stream_buffer_bytes: bytes a stream may have waiting for a peer that does not read.
        max_headers: header lines, at most.
    """

    max_connections: int = MAX_CONNECTIONS
    header_bytes: int = HEADER_BYTES
    header_timeout_s: float = HEADER_TIMEOUT_S
    write_timeout_s: float = WRITE_TIMEOUT_S
    stream_buffer_bytes: int = STREAM_BUFFER_BYTES
    max_headers: int = MAX_HEADERS

    def __post_init__(self) -> None:
        for name in ("max_connections", "header_bytes", "stream_buffer_bytes", "max_headers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        for name in ("header_timeout_s", "write_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")


@dataclass(frozen=True, slots=True)
class Request:
    """One request, as read.

    Attributes:
        method: ``GET`` or ``HEAD``.
        path: the path, without the query string (percent-escapes kept).
        query: the query string's parameters (the first value of each).
        headers: header names lower-cased; a repeated header keeps its last value.
        peer: the client's address.
    """

    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    peer: str

    def cookie(self, name: str) -> str | None:
        """The value of cookie ``name``, or ``None`` (a malformed Cookie header has none)."""
        raw = self.headers.get("cookie")
        if not raw:
            return None
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(raw)
        except CookieError:
            return None
        morsel = jar.get(name)
        return None if morsel is None else morsel.value


@dataclass(frozen=True, slots=True)
class Response:
    """A whole response."""

    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()


def text(status: int, body: str, *headers: tuple[str, str]) -> Response:
    """A plain-text response."""
    return Response(status, body.encode(), headers=headers)


class StreamClosed(Exception):
    """The peer went away or stopped reading."""


class StreamSink:
    """Where a :class:`Stream`'s producer writes (server-sent events)."""

    def __init__(self, writer: asyncio.StreamWriter, limits: HttpLimits) -> None:
        self._writer = writer
        self._limits = limits

    async def send(self, data: bytes) -> None:
        """Write ``data`` and wait until it is handed to the kernel.

        Raises:
            StreamClosed: the peer closed, or left more than the buffer limit unread
                for longer than the write timeout.
        """
        if self._writer.is_closing():
            raise StreamClosed("closed")
        transport = self._writer.transport
        if transport.get_write_buffer_size() + len(data) > self._limits.stream_buffer_bytes:
            raise StreamClosed("the peer stopped reading")
        self._writer.write(data)
        try:
            async with asyncio.timeout(self._limits.write_timeout_s):  # not wait_for: see transport.tasks
                await self._writer.drain()
        except (TimeoutError, ConnectionError) as exc:
            raise StreamClosed(str(exc) or type(exc).__name__) from exc


@dataclass(frozen=True, slots=True)
class Stream:
    """A response whose body is produced while the connection lasts (``text/event-stream``)."""

    produce: Callable[[StreamSink], Awaitable[None]]
    content_type: str = "text/event-stream; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()


Handler = Callable[[Request], Awaitable[Response | Stream]]


@dataclass(slots=True)
class HttpCounters:
    """What a server has seen."""

    requests: int = 0
    refused: int = 0  # connections over the limit
    evicted: int = 0  # idle connections closed to make room for a new one
    bad_requests: int = 0
    timeouts: int = 0
    streams: int = 0  # streams open now
    by_status: dict[int, int] = field(default_factory=dict)


class _BadRequest(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


_SECURITY_HEADERS: Final = (
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
)


class HttpServer:
    """Serves ``routes`` (exact paths) until stopped.

    Args:
        routes: path -> handler; other paths get ``404``.
        host: address to bind.
        port: port to bind (0: any free one; see :attr:`port` after :meth:`start`).
        limits: what a request may cost.
        ssl_context: serve HTTPS with it.
    """

    def __init__(
        self,
        routes: Mapping[str, Handler],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        limits: HttpLimits | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.routes = dict(routes)
        self.host, self.port = host, port
        self.limits = limits or HttpLimits()
        self.counters = HttpCounters()
        self._ssl = ssl_context
        self._server: asyncio.Server | None = None
        self._open = 0
        self._refusing = 0
        self._tasks: set[asyncio.Task[None]] = set()
        # Connections still sending their request: when they opened, and from which address.
        self._idle: dict[asyncio.Task[None], tuple[float, str]] = {}
        self._evicted: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        state = "serving" if self._server is not None else "stopped"
        return (
            f"<HttpServer [{state}, {self.host}:{self.port}, open={self._open}, routes={len(self.routes)}]>"
        )

    @property
    def scheme(self) -> str:
        """``https`` or ``http``."""
        return "https" if self._ssl is not None else "http"

    async def start(self) -> int:
        """Bind and serve; returns the bound port.

        Raises:
            OSError: the address cannot be bound.
        """
        self._server = await asyncio.start_server(
            self._connection,
            self.host,
            self.port,
            limit=self.limits.header_bytes,
            ssl=self._ssl,
            ssl_handshake_timeout=self.limits.header_timeout_s if self._ssl is not None else None,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        logger.info("http: serving %s on %s:%d", ", ".join(sorted(self.routes)), self.host, self.port)
        return self.port

    async def stop(self) -> None:
        """Stop listening and end every open connection (streams included)."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if self._open >= self.limits.max_connections and not self._evict_idle():
            await self._refuse(reader, writer)
            return
        self._open += 1
        self._tasks.add(task)
        try:
            await self._serve_one(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        except asyncio.CancelledError:
            if task not in self._evicted:
                raise
        finally:
            self._open -= 1
            self._tasks.discard(task)
            self._idle.pop(task, None)
            self._evicted.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)

    def _evict_idle(self) -> bool:
        """Close the oldest connection still sending its request, to make room; whether there was one.

        Only connections idle for :data:`IDLE_MIN_S` are candidates: a real client sends its
        request within a millisecond, so one that is just finishing it is never cut short.
        """
        oldest = asyncio.get_running_loop().time() - IDLE_MIN_S
        waiting = [
            (opened, address, task)
            for task, (opened, address) in self._idle.items()
            if task not in self._evicted and opened <= oldest
        ]
        if not waiting:
            return False
        # From the address that holds the most idle connections (a flood's), its oldest one.
        per_address = collections.Counter(address for _opened, address, _task in waiting)
        busiest = max(per_address.values())
        _opened, _address, task = min(item for item in waiting if per_address[item[1]] == busiest)
        self._evicted.add(task)
        task.cancel()
        self.counters.evicted += 1
        return True

    async def _refuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Answer 503 and half-close; take what the peer already sent for a
        # moment, so closing does not reset the connection before it reads the
        # answer. Past a few times the cap of such moments, close at once.
        self.counters.refused += 1
        self._refusing += 1
        try:
            writer.write(_head(503, "text/plain", 12, (("Retry-After", "1"),)) + b"server busy\n")
            if self._refusing <= 4 * self.limits.max_connections and writer.can_write_eof():
                writer.write_eof()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(reader.read(self.limits.header_bytes), REFUSE_LINGER_S)
        except (ConnectionError, OSError):
            pass
        finally:
            self._refusing -= 1
            writer.close()

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        task = asyncio.current_task()
        assert task is not None
        self._idle[task] = (asyncio.get_running_loop().time(), address)
        try:
            async with asyncio.timeout(self.limits.header_timeout_s):  # not wait_for: see transport.tasks
                request = await self._read_request(reader, address)
        except TimeoutError:
            self.counters.timeouts += 1
            await self._send(writer, "-", "-", text(408, "request timeout\n"))
            return
        except _BadRequest as exc:
            self.counters.bad_requests += 1
            await self._send(writer, "-", "-", text(exc.status, f"{exc}\n"))
            return
        finally:
            self._idle.pop(task, None)
        self.counters.requests += 1
        handler = self.routes.get(request.path)
        if handler is None:
            result: Response | Stream = text(404, "not found\n")
        else:
            try:
                result = await handler(request)
            except Exception:  # a handler's bug costs one request, never the server
                logger.exception("http: handler for %s failed", request.path)
                result = text(500, "internal error\n")
        if isinstance(result, Stream):
            await self._stream(writer, request, result)
        else:
            await self._send(writer, request.method, request.path, result)

    async def _read_request(self, reader: asyncio.StreamReader, peer: str) -> Request:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            raise _BadRequest(431, "request header too large") from None
        except asyncio.IncompleteReadError:
            raise _BadRequest(400, "incomplete request") from None
        lines = head[:-4].split(b"\r\n")
        if len(lines) - 1 > self.limits.max_headers:
            raise _BadRequest(431, "too many header lines")
        try:
            method, target, version = lines[0].decode("ascii").split(" ")
        except (UnicodeDecodeError, ValueError):
            raise _BadRequest(400, "malformed request line") from None
        if version not in ("HTTP/1.0", "HTTP/1.1"):
            raise _BadRequest(505, "HTTP/1.0 and HTTP/1.1 only")
        if method not in ("GET", "HEAD"):
            raise _BadRequest(405, "GET and HEAD only")
        if not target.startswith("/") or not target.isprintable():
            raise _BadRequest(400, "malformed path")
        headers: dict[str, str] = {}
        for raw in lines[1:]:
            name, sep, value = raw.partition(b":")
            if not sep or not name or name != name.strip():
                raise _BadRequest(400, "malformed header")
            try:
                headers[name.decode("ascii").lower()] = value.strip().decode("latin-1")
            except UnicodeDecodeError:
                raise _BadRequest(400, "malformed header name") from None
        if headers.get("content-length", "0") != "0" or "transfer-encoding" in headers:
            raise _BadRequest(413, "request bodies are not accepted")
        path, _sep, query = target.partition("?")
        try:
            params = urllib.parse.parse_qs(query, max_num_fields=20, strict_parsing=False)
        except ValueError:
            raise _BadRequest(400, "too many query parameters") from None
        return Request(method, path, {k: v[0] for k, v in params.items()}, headers, peer)

    async def _send(self, writer: asyncio.StreamWriter, method: str, path: str, response: Response) -> None:
        counts = self.counters.by_status
        counts[response.status] = counts.get(response.status, 0) + 1
        logger.debug("http: %s %s -> %d", method, path, response.status)  # never the query string
        body = b"" if method == "HEAD" else response.body
        writer.write(_head(response.status, response.content_type, len(response.body), response.headers))
        writer.write(body)
        with contextlib.suppress(TimeoutError, ConnectionError):
            async with asyncio.timeout(self.limits.write_timeout_s):
                await writer.drain()

    async def _stream(self, writer: asyncio.StreamWriter, request: Request, stream: Stream) -> None:
        counts = self.counters.by_status
        counts[200] = counts.get(200, 0) + 1
        writer.write(_head(200, stream.content_type, None, stream.headers))
        if request.method == "HEAD":
            return
        self.counters.streams += 1
        try:
            await stream.produce(StreamSink(writer, self.limits))
        except StreamClosed as exc:
            logger.debug("http: stream %s ended: %s", request.path, exc)
        finally:
            self.counters.streams -= 1


def _head(status: int, content_type: str, length: int | None, extra: tuple[tuple[str, str], ...]) -> bytes:
    reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else ""
    lines = [f"HTTP/1.1 {status} {reason}", f"Content-Type: {content_type}", "Connection: close"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    lines += [f"{name}: {value}" for name, value in (*_SECURITY_HEADERS, *extra)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def parse_address(text: str, *, option: str = "--metrics") -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; port 0 picks one) -> ``(host, port)``.

    Raises:
        ValueError: not ``HOST:PORT`` with a port in 0..65535.
    """
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{option} must be HOST:PORT, got {text!r}")
    return host, int(port)
