"""The status page attacked as an outsider would: no link, a forged or reused one, a non-operator, floods.

An in-process admin server (real grpc.aio and HTTP listeners on 127.0.0.1)
with a policy file the tests rewrite; requests are raw HTTP over asyncio
sockets, so every header is the test's to choose.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from feedha.admin_server import tokens
from feedha.admin_server.config import ChannelConfig, ServerConfig
from feedha.admin_server.server import AdminServer
from feedha.admin_server.status_page import MAX_STREAMS, new_login_link

pytestmark = pytest.mark.timeout(120)

POLICY = """\
groups:
  operators: {roles: [admin]}
  traders: {}
rules:
  - groups: [traders]
    symbols: ["*"]
    mode: realtime
"""
CHANNEL = ChannelConfig(
    feed="EQUITIES", name="EQ-A-M", number=1, source_stream="A-M", first_letter="A", last_letter="M"
)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[AdminServer]:
    (tmp_path / "policy.yaml").write_text(POLICY)
    config = ServerConfig(
        port=0,
        database=tmp_path / "admin.sqlite",
        policy=tmp_path / "policy.yaml",
        channels=(CHANNEL,),
        policy_poll_s=0.05,
        metrics_address=("127.0.0.1", 0),
    )
    server = AdminServer(config)
    await server.start()
    hub = server.hub
    assert hub is not None
    hasher = tokens.make_hasher(time_cost=1, memory_kib=8, parallelism=1)
    hub.store.upsert_user("ops", groups=frozenset({"operators"}), roles=frozenset(), now=time.time())
    hub.store.upsert_user("trader", groups=frozenset({"traders"}), roles=frozenset(), now=time.time())
    hub.store.add_key(
        key_id="k", user="ops", secret_hash=tokens.hash_secret("s", hasher=hasher), now=time.time()
    )
    try:
        yield server
    finally:
        await server.stop()


async def _http(
    server: AdminServer, path: str, *, cookie: str = "", read_all: bool = True
) -> tuple[int, dict, bytes]:
    assert server.http is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", server.http.port)
    headers = f"Cookie: {cookie}\r\n" if cookie else ""
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode())
    await writer.drain()
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        body = await asyncio.wait_for(reader.read(), 10) if read_all else await reader.read(65536)
    finally:
        writer.close()
        await writer.wait_closed()
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    fields: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            fields.setdefault(name.strip().lower(), value.strip())
    return status, fields, body


async def _login(server: AdminServer, user: str = "ops") -> str:
    hub = server.hub
    assert hub is not None
    token = new_login_link(hub.store, user, now=time.time())
    status, headers, _body = await _http(server, f"/login?token={token}")
    assert status == 303 and headers["location"] == "/"
    cookie = headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    return cookie.split(";")[0]


async def test_nothing_without_a_session(server):
    assert (await _http(server, "/"))[0] == 401
    assert (await _http(server, "/events"))[0] == 401
    assert (await _http(server, "/events", cookie="feedha_session=forged"))[0] == 401
    assert (await _http(server, "/events", cookie="feedha_session=" + "x" * 5000))[0] == 401
    assert (await _http(server, "/events", cookie='feedha_session="; bad'))[0] == 401
    # Static assets and health are public; metrics too (no secrets in them).
    assert (await _http(server, "/status.js"))[0] == 200
    assert (await _http(server, "/healthz"))[0] == 200


async def test_a_link_works_once_only_for_an_operator_and_is_audited(server):
    hub = server.hub
    token = new_login_link(hub.store, "ops", now=time.time())
    cookie = await _login(server)
    status, headers, body = await _http(server, "/", cookie=cookie)
    assert status == 200 and b"/status.js" in body
    assert "script-src 'self'" in headers["content-security-policy"] and headers["x-frame-options"] == "DENY"
    # The same link twice: refused the second time; a made-up one too; a non-operator's too.
    assert (await _http(server, f"/login?token={token}"))[0] == 303
    assert (await _http(server, f"/login?token={token}"))[0] == 403
    assert (await _http(server, "/login?token=guessed"))[0] == 403
    assert (await _http(server, "/login"))[0] == 403
    trader = new_login_link(hub.store, "trader", now=time.time())
    assert (await _http(server, f"/login?token={trader}"))[0] == 403
    actions = [e.action for e in hub.store.audit_log()]
    assert actions.count("status-login") == 2 and actions.count("login-failed") >= 1
    status, _headers, body = await _http(server, "/metrics")
    assert status == 200 and b"feedha_admin_status_page_sessions 2.0" in body


async def test_the_stream_sends_snapshots_and_ends_when_the_role_goes(server, tmp_path):
    cookie = await _login(server)
    assert server.http is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", server.http.port)
    writer.write(f"GET /events HTTP/1.1\r\nCookie: {cookie}\r\n\r\n".encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert b"text/event-stream" in head
    event = await asyncio.wait_for(reader.readuntil(b"\n\n"), 10)
    while not event.startswith(b"event: status"):
        event = await asyncio.wait_for(reader.readuntil(b"\n\n"), 10)
    assert b'"name":"EQ-A-M"' in event and b'"audit"' in event
    # The policy takes the admin role away: the open stream ends, the session is gone.
    (tmp_path / "policy.yaml").write_text(POLICY.replace("operators: {roles: [admin]}", "operators: {}"))
    assert await asyncio.wait_for(_read_to_end(reader), 15) is not None
    writer.close()
    await writer.wait_closed()
    assert (await _http(server, "/", cookie=cookie))[0] == 401


async def _read_to_end(reader: asyncio.StreamReader) -> bytes:
    return await reader.read()


async def test_streams_are_bounded(server):
    cookie = await _login(server)
    assert server.http is not None
    held = []
    for _ in range(MAX_STREAMS):
        reader, writer = await asyncio.open_connection("127.0.0.1", server.http.port)
        writer.write(f"GET /events HTTP/1.1\r\nCookie: {cookie}\r\n\r\n".encode())
        await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        held.append(writer)
    status, headers, _body = await _http(server, "/events", cookie=cookie)
    assert status == 503 and headers["retry-after"] == "5"
    for writer in held:
        writer.close()
        await writer.wait_closed()
    # Closed streams give their places back.
    deadline = time.monotonic() + 30
    while (await _http(server, "/events", cookie=cookie, read_all=False))[0] != 200:
        assert time.monotonic() < deadline, "stream slots never came back"
        await asyncio.sleep(0.2)


async def test_with_tls_the_listener_is_https_and_the_cookie_secure(tmp_path: Path):
    import ssl

    from tests.integration.certs import Authority

    authority = Authority(tmp_path)
    pair = authority.issue("admin", "feedha-admin", server=True)
    (tmp_path / "policy.yaml").write_text(POLICY)
    config = ServerConfig(
        port=0,
        database=tmp_path / "admin.sqlite",
        policy=tmp_path / "policy.yaml",
        channels=(CHANNEL,),
        tls_cert=pair.cert,
        tls_key=pair.key,
        metrics_address=("127.0.0.1", 0),
    )
    server = AdminServer(config)
    await server.start()
    try:
        assert server.http is not None and server.http.scheme == "https"
        hub = server.hub
        assert hub is not None
        hub.store.upsert_user("ops", groups=frozenset({"operators"}), roles=frozenset(), now=time.time())
        token = new_login_link(hub.store, "ops", now=time.time())
        context = ssl.create_default_context(cafile=str(authority.ca))
        reader, writer = await asyncio.open_connection("127.0.0.1", server.http.port, ssl=context)
        writer.write(f"GET /login?token={token} HTTP/1.1\r\n\r\n".encode())
        reply = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        assert reply.startswith(b"HTTP/1.1 303") and b"; Secure" in reply
        # Plaintext to the HTTPS port gets no page (the TLS handshake fails; nothing is served).
        reader, writer = await asyncio.open_connection("127.0.0.1", server.http.port)
        writer.write(b"GET /healthz HTTP/1.1\r\n\r\n")
        plain = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        assert b"200 OK" not in plain
    finally:
        await server.stop()


def test_a_plaintext_status_page_off_loopback_is_refused(tmp_path: Path):
    from feedha.admin_server.errors import ConfigError

    with pytest.raises(ConfigError, match="plaintext status page"):
        ServerConfig(
            database=tmp_path / "a.sqlite", policy=tmp_path / "p.yaml", metrics_address=("0.0.0.0", 9200)
        )
    ServerConfig(
        database=tmp_path / "a.sqlite",
        policy=tmp_path / "p.yaml",
        metrics_address=("0.0.0.0", 9200),
        insecure=True,
    )
