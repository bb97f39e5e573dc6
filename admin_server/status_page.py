"""The operators' live status page, served by the admin server's HTTP listener.

Theory of operation
-------------------
Login: ``feedha admin-server login-link USER`` stores the SHA-256 of a
random one-time token (:func:`new_login_link`; default lifetime
:data:`LINK_TTL_S`) and prints ``/login?token=...``, as Jupyter prints its
URL. ``GET /login`` takes the link from the database (gone once taken, used
or not yet expired), checks that the user holds the admin role, and answers
with a redirect to ``/`` that sets an HttpOnly, SameSite=Strict session
cookie (``Secure`` over HTTPS): the token leaves the address bar at once and
is never logged. Sessions live in memory (at most :data:`MAX_SESSIONS`,
each for :data:`SESSION_TTL_S`); every request checks the admin role again,
so a policy change that takes it away ends the session.

Feed: one task listens to the hub's events (the registry's watch mechanism:
registrations, role and sync changes, commands, policy reloads) and, on each
event and every :data:`REFRESH_S`, builds a snapshot with the
:class:`~feedha.admin_server.status_board.StatusBoard`. Each browser holds
one server-sent-events stream (``/events``, at most :data:`MAX_STREAMS`);
a stream sends only the newest snapshot whenever it changed, so a slow
browser skips versions instead of queueing them, and one that stops reading
is dropped by the HTTP server's stream limit.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Final

from feedha.admin_server.hub import Hub
from feedha.admin_server.status_board import StatusBoard
from feedha.admin_server.store import Store
from feedha.transport.http import Handler, Request, Response, Stream, StreamSink
from feedha.transport.tasks import wait_at_most

logger = logging.getLogger(__name__)

SESSION_COOKIE: Final = "feedha_session"
LINK_TTL_S: Final = 600.0
MAX_LINK_TTL_S: Final = 86_400.0
SESSION_TTL_S: Final = 8 * 3600.0
MAX_SESSIONS: Final = 100
MAX_STREAMS: Final = 16
REFRESH_S: Final = 1.0
MIN_INTERVAL_S: Final = 0.2  # bursts of events make one snapshot
PING_S: Final = 15.0
SUBSCRIBERS_EVERY_S: Final = 2.0
AUDIT_ROWS: Final = 20
_CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_HTML_HEADERS: Final = (("Content-Security-Policy", _CSP), ("X-Frame-Options", "DENY"))


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


def new_login_link(store: Store, user: str, *, ttl_s: float = LINK_TTL_S, now: float) -> str:
    """Make a one-time login token for ``user`` (only its hash is stored); returns the token.

    Raises:
        ValueError: ``ttl_s`` is not in (0, :data:`MAX_LINK_TTL_S`].
    """
    if not 0 < ttl_s <= MAX_LINK_TTL_S:
        raise ValueError(f"ttl_s must be in (0, {MAX_LINK_TTL_S:g}], got {ttl_s!r}")
    token = secrets.token_urlsafe(32)
    store.add_login_link(token_hash=_digest(token), user=user, expires_at=now + ttl_s, now=now)
    store.audit(user="cli", action="login-link", target=user, detail=f"status page, {ttl_s:g} s", now=now)
    return token


@dataclass(slots=True)
class _Session:
    user: str
    expires_at: float


class StatusPage:
    """The status page's routes, sessions and feed over one hub.

    Args:
        hub: the server's hub.
        secure: served over HTTPS (the cookie gets ``Secure``).
        clock: wall-clock seconds.
    """

    def __init__(self, hub: Hub, *, secure: bool, clock: Callable[[], float] = time.time) -> None:
        self._hub = hub
        self._secure = secure
        self._clock = clock
        self._sessions: dict[str, _Session] = {}  # sha256(cookie value) -> session
        self._board = StatusBoard()
        self._snapshot = b""
        self._version = 0
        self._changed = asyncio.Event()  # set and replaced at every new snapshot
        self._streams = 0
        self._subscribers: dict[str, int] = {}
        self._subscribers_at = float("-inf")
        self.failed_logins = 0

    def __repr__(self) -> str:
        return (
            f"<StatusPage [sessions={len(self._sessions)}, streams={self._streams}, version={self._version}]>"
        )

    @property
    def sessions(self) -> int:
        """Sessions logged in now."""
        return len(self._sessions)

    def routes(self) -> dict[str, Handler]:
        """``{path: handler}`` for the HTTP server."""
        return {
            "/": self._page,
            "/login": self._login,
            "/logout": self._logout,
            "/events": self._events,
            "/status.js": _asset("status.js", "text/javascript; charset=utf-8"),
            "/status.css": _asset("status.css", "text/css; charset=utf-8"),
        }

    # -- the feed ------------------------------------------------------------------------

    async def run(self) -> None:
        """Rebuild the snapshot on every hub event and every :data:`REFRESH_S` (runs as a task)."""
        async with self._hub.events.listen() as events:
            while True:
                self._rebuild()
                await wait_at_most(events.get(), REFRESH_S)
                await asyncio.sleep(MIN_INTERVAL_S)
                while not events.empty():
                    events.get_nowait()

    def _rebuild(self) -> None:
        hub, now = self._hub, self._clock()
        if self._streams and now - self._subscribers_at >= SUBSCRIBERS_EVERY_S:
            self._subscribers, self._subscribers_at = hub.subscribers_by_channel(), now
        snapshot = self._board.snapshot(
            hub.adapters.registry.records(),
            subscribers=self._subscribers,
            audit=hub.store.audit_log(limit=AUDIT_ROWS),
            channel_numbers={c.name: c.number for c in hub.config.channels},
            now=now,
        )
        self._snapshot = json.dumps(snapshot, separators=(",", ":")).encode()
        self._version += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    # -- sessions ------------------------------------------------------------------------

    def _session(self, request: Request) -> _Session | None:
        value = request.cookie(SESSION_COOKIE)
        if not value or len(value) > 100:
            return None
        key = _digest(value)
        session = self._sessions.get(key)
        if session is None:
            return None
        if session.expires_at <= self._clock() or not self._is_operator(session.user):
            del self._sessions[key]
            return None
        return session

    def _is_operator(self, user: str) -> bool:
        return self._hub.identity.has_role(self._hub.identity.principal(user), "admin")

    def _open_session(self, user: str) -> str:
        now = self._clock()
        for key in [k for k, s in self._sessions.items() if s.expires_at <= now]:
            del self._sessions[key]
        while len(self._sessions) >= MAX_SESSIONS:  # the oldest goes
            del self._sessions[next(iter(self._sessions))]
        value = secrets.token_urlsafe(32)
        self._sessions[_digest(value)] = _Session(user, now + SESSION_TTL_S)
        return value

    # -- routes --------------------------------------------------------------------------

    async def _login(self, request: Request) -> Response | Stream:
        token, now = request.query.get("token", ""), self._clock()
        user = self._hub.store.take_login_link(_digest(token), now=now) if 0 < len(token) <= 100 else None
        if user is None or not self._is_operator(user):
            self.failed_logins += 1
            reason = "bad status-page link" if user is None else "status page: not an operator"
            self._hub.store.audit_failed_login(
                key_id="status-page", user=user or "", address=request.peer, reason=reason, now=now
            )
            return _page_response(403, _message_page("This login link is not valid", _BAD_LINK))
        self._hub.store.audit(
            user=user, action="status-login", target="status page", detail=f"from {request.peer}", now=now
        )
        logger.info("status page: %s logged in from %s", user, request.peer)
        cookie = f"{SESSION_COOKIE}={self._open_session(user)}; HttpOnly; SameSite=Strict; Path=/"
        cookie += f"; Max-Age={int(SESSION_TTL_S)}" + ("; Secure" if self._secure else "")
        return Response(303, b"", headers=(("Location", "/"), ("Set-Cookie", cookie)))

    async def _logout(self, request: Request) -> Response | Stream:
        value = request.cookie(SESSION_COOKIE)
        if value:
            self._sessions.pop(_digest(value), None)
        cookie = f"{SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"
        return Response(303, b"", headers=(("Location", "/"), ("Set-Cookie", cookie)))

    async def _page(self, request: Request) -> Response | Stream:
        if self._session(request) is None:
            return _page_response(401, _message_page("Log in to see the cluster", _LOG_IN))
        body = resources.files("feedha.admin_server").joinpath("static/status.html").read_bytes()
        return _page_response(200, body)

    async def _events(self, request: Request) -> Response | Stream:
        if self._session(request) is None:
            return Response(401, b"log in first\n")
        if self._streams >= MAX_STREAMS:
            return Response(503, b"too many status streams\n", headers=(("Retry-After", "5"),))
        self._streams += 1
        self._subscribers_at = float("-inf")  # a new viewer sees fresh subscriber counts

        async def produce(sink: StreamSink) -> None:
            try:
                await self._stream(request, sink)
            finally:
                self._streams -= 1

        return Stream(produce, headers=(("X-Accel-Buffering", "no"),))

    async def _stream(self, request: Request, sink: StreamSink) -> None:
        sent = -1
        await sink.send(b"retry: 2000\n\n")
        while self._session(request) is not None:  # logging out, or losing the role, ends the stream
            changed = self._changed
            if self._version != sent and self._snapshot:
                sent = self._version
                await sink.send(b"event: status\ndata: " + self._snapshot + b"\n\n")
                continue
            if not await wait_at_most(changed.wait(), PING_S):
                await sink.send(b": ping\n\n")  # finds browsers that went away


def _asset(name: str, content_type: str) -> Handler:
    async def route(_request: Request) -> Response | Stream:
        body = resources.files("feedha.admin_server").joinpath(f"static/{name}").read_bytes()
        return Response(200, body, content_type=content_type)

    return route


def _page_response(status: int, body: bytes) -> Response:
    return Response(status, body, content_type="text/html; charset=utf-8", headers=_HTML_HEADERS)


_BAD_LINK: Final = (
    "It was used already, it expired, it belongs to a user without the admin role, or it never existed. "
    "Ask for a new one: <code>feedha admin-server login-link USER --config FILE</code>."
)
_LOG_IN: Final = (
    "Open a login link made by <code>feedha admin-server login-link USER --config FILE</code> "
    "(<code>feedha up</code> prints one as <code>status_page</code>)."
)


def _message_page(title: str, text: str) -> bytes:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>feedha</title>'
        '<link rel="stylesheet" href="/status.css"></head>'
        f'<body><main class="message"><h1>{title}</h1><p>{text}</p></main></body></html>'
    ).encode()
