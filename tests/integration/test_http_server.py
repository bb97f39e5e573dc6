"""The daemons' small HTTP server on a real loopback socket, attacked as an outsider would."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import CollectorRegistry, Counter

from feedha.transport.health import health_routes
from feedha.transport.http import (
    HttpLimits,
    HttpServer,
    Request,
    Response,
    Stream,
    StreamSink,
    parse_address,
    text,
)
from feedha.transport.http_thread import HttpThread

pytestmark = pytest.mark.timeout(60)


async def _hello(request: Request) -> Response | Stream:
    return text(200, f"hello {request.query.get('name', '?')} {request.cookie('sid')}\n")


async def _request(port: int, raw: bytes, *, read: bool = True) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 10) if read else b""
    finally:
        writer.close()
        await writer.wait_closed()


@pytest.fixture
async def server():
    srv = HttpServer(
        {"/hello": _hello},
        limits=HttpLimits(max_connections=4, header_bytes=2048, header_timeout_s=0.5, write_timeout_s=1.0),
    )
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


async def test_get_with_query_and_cookie(server):
    reply = await _request(server.port, b"GET /hello?name=ann HTTP/1.1\r\nHost: x\r\nCookie: sid=abc\r\n\r\n")
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK")
    assert b"Connection: close" in head and b"Cache-Control: no-store" in head
    assert body == b"hello ann abc\n"
    assert server.counters.requests == 1


async def test_head_has_no_body(server):
    reply = await _request(server.port, b"HEAD /hello HTTP/1.1\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"\r\n\r\n")


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"POST /hello HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", b"405"),
        (b"GET /hello HTTP/2.0\r\n\r\n", b"505"),
        (b"GET hello HTTP/1.1\r\n\r\n", b"400"),
        (b"GARBAGE\r\n\r\n", b"400"),
        (b"\xff\xfe\x00 / HTTP/1.1\r\n\r\n", b"400"),
        (b"GET /hello HTTP/1.1\r\nno colon here\r\n\r\n", b"400"),
        (b"GET /hello HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", b"413"),
        (b"GET /nothing HTTP/1.1\r\n\r\n", b"404"),
        (b"GET /hello HTTP/1.1\r\nX: " + b"a" * 4000 + b"\r\n\r\n", b"431"),
        (b"GET /hello HTTP/1.1\r\n" + b"X: y\r\n" * 100 + b"\r\n", b"431"),
    ],
)
async def test_hostile_requests_get_a_clear_status(server, raw, status):
    reply = await _request(server.port, raw)
    assert reply.split(b" ")[1] == status, reply[:80]
    # ... and the server still serves.
    assert (await _request(server.port, b"GET /hello HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 200")


async def test_slow_headers_time_out(server):
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /hello HTTP/1.1\r\nX-Slow: ")
    reply = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    await writer.wait_closed()
    assert reply.startswith(b"HTTP/1.1 408")
    assert server.counters.timeouts == 1


async def test_connections_over_the_cap_are_refused_and_cost_nothing(server):
    # Four silent connections hold every slot; the fifth is told 503 at once.
    held = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(4)]
    await asyncio.sleep(0.05)  # let the server accept them (no event to wait on from outside)
    reply = await _request(server.port, b"GET /hello HTTP/1.1\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 503")
    assert server.counters.refused >= 1
    for _reader, writer in held:
        writer.close()
        await writer.wait_closed()
    # The held ones time out; the slots come back.
    deadline = asyncio.get_running_loop().time() + 5
    while True:
        reply = await _request(server.port, b"GET /hello HTTP/1.1\r\n\r\n")
        if reply.startswith(b"HTTP/1.1 200") or asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.1)
    assert reply.startswith(b"HTTP/1.1 200")


async def test_the_query_string_never_reaches_the_log(server, caplog):
    caplog.set_level(logging.DEBUG, logger="feedha.transport.http")
    await _request(server.port, b"GET /hello?token=SECRET-TOKEN HTTP/1.1\r\n\r\n")
    assert "/hello" in caplog.text
    assert "SECRET-TOKEN" not in caplog.text


async def test_a_stream_whose_reader_stops_is_dropped():
    sent = []
    ended = asyncio.Event()

    async def produce(sink: StreamSink) -> None:
        try:
            while True:
                await sink.send(b"data: " + b"x" * 8000 + b"\n\n")
                sent.append(1)
        finally:
            ended.set()

    async def events(_request: Request) -> Response | Stream:
        return Stream(produce)

    limits = HttpLimits(stream_buffer_bytes=64 * 1024, write_timeout_s=0.5)
    srv = HttpServer({"/events": events}, limits=limits)
    await srv.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port, limit=1024)
        writer.transport.pause_reading()  # a browser that stops reading
        writer.write(b"GET /events HTTP/1.1\r\n\r\n")
        await asyncio.wait_for(ended.wait(), 10)
        # It was cut off after the kernel buffers and the stream limit filled, not grown for ever.
        assert len(sent) * 8000 < 16 * 1024 * 1024
        assert srv.counters.streams == 0
        writer.close()
        await writer.wait_closed()
    finally:
        await srv.stop()


def test_health_routes_on_a_thread():
    import urllib.error
    import urllib.request

    registry = CollectorRegistry()
    Counter("feedha_test_things", "things", registry=registry).inc(3)
    state = {"ready": False}
    routes = health_routes(
        registry=registry, alive=lambda: (True, "fine"), ready=lambda: (state["ready"], "warming up")
    )
    http = HttpThread(routes, host="127.0.0.1", port=0)
    port = http.start()
    try:
        base = f"http://127.0.0.1:{port}"
        metrics = urllib.request.urlopen(base + "/metrics", timeout=5).read().decode()
        assert "feedha_test_things_total 3.0" in metrics
        assert urllib.request.urlopen(base + "/healthz", timeout=5).read() == b"ok: fine\n"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(base + "/readyz", timeout=5)
        assert refused.value.code == 503 and refused.value.read() == b"not ok: warming up\n"
        state["ready"] = True
        assert urllib.request.urlopen(base + "/readyz", timeout=5).status == 200
    finally:
        http.stop()


@pytest.mark.parametrize(
    ("text_", "expected"),
    [("127.0.0.1:9100", ("127.0.0.1", 9100)), ("[::1]:0", ("::1", 0)), ("0.0.0.0:80", ("0.0.0.0", 80))],
)
def test_parse_address(text_, expected):
    assert parse_address(text_) == expected


@pytest.mark.parametrize("bad", ["9100", ":9100", "host:", "host:99999", "host:x"])
def test_parse_address_refuses(bad):
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_address(bad)
