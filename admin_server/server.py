"""``feedha admin-server``: run the stream administration server, or manage API keys.

Usage::

    feedha admin-server [--config FILE] [--host H] [--port P] [--database F] [--policy F]
                        [--tls-cert F --tls-key F [--tls-client-ca F]] [--insecure]
                        [--metrics HOST:PORT]
    feedha admin-server add-user NAME [--group G ...] [--admin] [--adapter] [--database F | --config FILE]
    feedha admin-server rotate-key KEY_ID [--database F | --config FILE]
    feedha admin-server login-link USER [--ttl SECONDS] [--url BASE] [--database F | --config FILE]

Every option is also a key of the config file (``port: 50051``; the sample is
deploy/admin-server.yaml, which also holds the ``feeds`` and ``secret_hashing``
sections) and a ``FEEDHA_<OPTION>`` variable (``FEEDHA_PORT=50051``); variables
override the file and options override both. With ``--port 0`` the server
binds any free port; it always prints ``listening on HOST:PORT`` (flushed)
once it serves. With ``--metrics`` it also serves HTTP there (HTTPS when TLS
is configured): ``/metrics`` (Prometheus), ``/healthz``, ``/readyz`` and the
operators' status page at ``/``, and prints ``http listening on HOST:PORT``.
With ``--health`` it serves ``/healthz`` and ``/readyz`` alone on a listener of
their own and prints ``health listening on HOST:PORT``.
``login-link`` prints a one-time link that logs a browser in to the status
page as USER (who needs the admin role); the link works once, for ``--ttl``
seconds (default 600).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import ssl
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import argon2
import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from feedha import logs, settings
from feedha.admin_server import tokens
from feedha.admin_server.auth import AuthInterceptor
from feedha.admin_server.config import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    SECTIONS,
    SecretHashing,
    ServerConfig,
    rename_keys,
    sections_to_kwargs,
)
from feedha.admin_server.control import AdapterRegistryServicer, AdminControlServicer
from feedha.admin_server.errors import AdminError, ConfigError
from feedha.admin_server.hub import Hub
from feedha.admin_server.metrics import AdminMetrics
from feedha.admin_server.policy import PolicyFile
from feedha.admin_server.service import AdminAuthServicer, StreamBrokerServicer
from feedha.admin_server.status_page import LINK_TTL_S, StatusPage, new_login_link
from feedha.admin_server.store import Store
from feedha.proto import admin_pb2, admin_pb2_grpc
from feedha.transport.health import PROBE_LIMITS, health_routes, probe_routes
from feedha.transport.http import HttpServer, parse_address
from feedha.transport.tasks import cancel_and_wait

logger = logging.getLogger(__name__)

SERVICE_NAMES = tuple(
    admin_pb2.DESCRIPTOR.services_by_name[name].full_name for name in admin_pb2.DESCRIPTOR.services_by_name
)


class AdminServer:
    """The admin server: gRPC (auth, broker, registry, control, health, reflection) over the hub.

    Use as ``async with AdminServer(config) as server:``; ``server.port`` is the bound port.

    Args:
        config: the server configuration.
        clock: wall-clock seconds (tests inject one to expire tokens).
    """

    def __init__(self, config: ServerConfig, *, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self._clock = clock
        self.port = 0
        self.hub: Hub | None = None
        self._server: grpc.aio.Server | None = None
        self._store: Store | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.http: HttpServer | None = None
        self.health: HttpServer | None = None  # the probes' own listener
        self.status_page: StatusPage | None = None
        self._serving = False

    def __repr__(self) -> str:
        state = "serving" if self._server is not None else "stopped"
        return f"<AdminServer [{state}, {self.config.host}:{self.port}]>"

    async def start(self) -> int:
        """Open the database, load the policy, bind and start serving.

        Returns:
            The bound port.

        Raises:
            PolicyError: the policy file is missing or invalid.
            ConfigError: the address cannot be bound or TLS files are unreadable.
        """
        policy_file = PolicyFile(self.config.policy)
        policy_file.load()
        self._store = Store(self.config.database)
        self.hub = hub = Hub(self.config, self._store, policy_file, clock=self._clock)
        server = grpc.aio.server(interceptors=[AuthInterceptor(hub)])
        admin_pb2_grpc.add_AdminAuthServicer_to_server(AdminAuthServicer(hub), server)  # type: ignore[no-untyped-call]
        admin_pb2_grpc.add_StreamBrokerServicer_to_server(StreamBrokerServicer(hub), server)  # type: ignore[no-untyped-call]
        admin_pb2_grpc.add_AdapterRegistryServicer_to_server(AdapterRegistryServicer(hub), server)  # type: ignore[no-untyped-call]
        admin_pb2_grpc.add_AdminControlServicer_to_server(AdminControlServicer(hub), server)  # type: ignore[no-untyped-call]
        health_servicer = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        reflection.enable_server_reflection(
            (*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server
        )
        address = f"{self.config.host}:{self.config.port}"
        try:
            if self.config.has_tls:
                self.port = server.add_secure_port(address, _server_credentials(self.config))
            else:
                self.port = server.add_insecure_port(address)
        except RuntimeError as exc:
            raise ConfigError(f"cannot bind {address}: {exc}") from exc
        await self._start_http(hub)
        await server.start()
        self._server = server
        for name in ("", *SERVICE_NAMES):
            await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
        self._tasks.append(asyncio.create_task(hub.watch_policy(), name="policy-watch"))
        self._tasks.append(asyncio.create_task(hub.watch_access(), name="access-watch"))
        self._tasks.append(asyncio.create_task(hub.housekeeping(), name="housekeeping"))
        self._serving = True
        logger.info(
            "admin server listening on %s:%d (tls=%s)", self.config.host, self.port, self.config.has_tls
        )
        return self.port

    async def _start_http(self, hub: Hub) -> None:
        if self.config.health_address is not None:
            host, port = self.config.health_address
            self.health = HttpServer(
                probe_routes(alive=self._alive, ready=self._ready), host=host, port=port, limits=PROBE_LIMITS
            )
            try:
                await self.health.start()
            except OSError as exc:
                raise ConfigError(f"cannot bind the health listener {host}:{port}: {exc}") from exc
        if self.config.metrics_address is None:
            return
        host, port = self.config.metrics_address
        context = None
        if self.config.has_tls:
            assert self.config.tls_cert is not None and self.config.tls_key is not None
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(self.config.tls_cert, self.config.tls_key)
        self.status_page = page = StatusPage(hub, secure=context is not None, clock=self._clock)
        self.http = HttpServer({}, host=host, port=port, ssl_context=context)
        metrics = AdminMetrics(hub, http=self.http.counters, status_sessions=lambda: page.sessions)
        self.http.routes.update(page.routes())
        self.http.routes.update(
            health_routes(registry=metrics.registry, alive=self._alive, ready=self._ready)
        )
        try:
            await self.http.start()
        except OSError as exc:
            raise ConfigError(f"cannot bind the HTTP listener {host}:{port}: {exc}") from exc
        self._tasks.append(asyncio.create_task(page.run(), name="status-page"))

    def _alive(self) -> tuple[bool, str]:
        return (True, "serving") if self._serving else (False, "stopping")

    def _ready(self) -> tuple[bool, str]:
        if not self._serving or self.hub is None:
            return False, "not serving"
        return True, f"serving gRPC on port {self.port}, {len(self.hub.adapters)} adapter stream(s)"

    async def stop(self, grace: float | None = 1.0) -> None:
        """Stop serving and close the database."""
        self._serving = False
        for http in (self.http, self.health):
            if http is not None:
                await http.stop()
        self.http = self.health = None
        for task in self._tasks:
            await cancel_and_wait(task)
        self._tasks.clear()
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None
        if self.hub is not None:
            await self.hub.access.wait_idle()  # an access pass's thread may still read the database
            await self.hub.identity.logins.wait_idle()  # a started hash records its outcome in the database
            self.hub.close()
        if self._store is not None:
            self._store.close()
            self._store = None

    async def wait(self) -> None:
        """Wait until the server stops."""
        if self._server is not None:
            await self._server.wait_for_termination()

    async def __aenter__(self) -> AdminServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await asyncio.shield(self.stop())


def _server_credentials(config: ServerConfig) -> grpc.ServerCredentials:
    assert config.tls_cert is not None and config.tls_key is not None
    try:
        cert, key = config.tls_cert.read_bytes(), config.tls_key.read_bytes()
        client_ca = config.tls_client_ca.read_bytes() if config.tls_client_ca is not None else None
    except OSError as exc:
        raise ConfigError(f"cannot read TLS file: {exc}") from exc
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )


# ServerConfig fields set by the option of the same name (None: ServerConfig's default).
_OPTIONS: Final = (
    "host",
    "port",
    "database",
    "policy",
    "tls_cert",
    "tls_key",
    "tls_client_ca",
    "signing_key_file",
    "insecure",
    "adapter_auth",
)


def _build_config(args: argparse.Namespace, sections: Mapping[str, Any]) -> ServerConfig:
    kwargs: dict[str, Any] = sections_to_kwargs(sections)
    kwargs.update({name: getattr(args, name) for name in _OPTIONS if getattr(args, name) is not None})
    if args.token_ttl is not None:
        kwargs["token_ttl_s"] = args.token_ttl
    if args.policy_poll is not None:
        kwargs["policy_poll_s"] = args.policy_poll
    if args.metrics is not None:
        kwargs["metrics_address"] = parse_address(args.metrics)
    if args.health is not None:
        kwargs["health_address"] = parse_address(args.health, option="--health")
    return ServerConfig(**kwargs)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="feedha admin-server", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database", type=Path, help="SQLite database file (default: admin.sqlite)")
    parser.add_argument("--host", help=f"bind address (default: {DEFAULT_HOST})")
    parser.add_argument("--port", type=int, help=f"bind port, 0: any free port (default: {DEFAULT_PORT})")
    parser.add_argument("--policy", type=Path, help="authorization policy file, YAML (default: policy.yaml)")
    parser.add_argument("--tls-cert", type=Path, help="PEM server certificate")
    parser.add_argument("--tls-key", type=Path, help="PEM server private key")
    parser.add_argument(
        "--tls-client-ca", type=Path, help="PEM CA bundle: require client certificates (mutual TLS)"
    )
    parser.add_argument("--token-ttl", type=float, help="token lifetime in seconds (default: 3600)")
    parser.add_argument(
        "--policy-poll", type=float, help="seconds between checks of the policy file (default: 0.25)"
    )
    parser.add_argument(
        "--signing-key-file",
        type=Path,
        help="token signing key file, mode 0600 (default: DATABASE.signing-key)",
    )
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="allow plaintext, or --no-adapter-auth, on a non-loopback address",
    )
    parser.add_argument(
        "--adapter-auth",
        action=argparse.BooleanOptionalAction,
        help="adapters must log in with a key of role adapter to register (default: yes; "
        "--no-adapter-auth is refused off loopback without --insecure)",
    )
    parser.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve HTTP there: /metrics, /healthz, /readyz and the status page (HTTPS with TLS; "
        "port 0 picks one; default: not served)",
    )
    parser.add_argument(
        "--health",
        metavar="HOST:PORT",
        help="serve /healthz and /readyz alone there (plain HTTP), so that probes never wait behind "
        "scrapes, the status page or idle connections (port 0 picks one; default: not served)",
    )
    settings.add_common_arguments(parser, log_level="INFO")
    _add_key_commands(parser.add_subparsers(dest="command"))
    settings.share_options(parser, ("config", "database", "log_level", "log_format"))
    return parser


def _add_key_commands(sub: Any) -> None:
    # add-user, rotate-key, login-link: the commands that print a credential and exit
    add = sub.add_parser("add-user", help="create a user and print a new API key")
    add.add_argument("name")
    add.add_argument("--group", action="append", default=[], help="add the user to a group (repeatable)")
    add.add_argument("--admin", action="store_true", help="give the admin role (feedctl)")
    add.add_argument("--adapter", action="store_true", help="give the adapter role (registry)")
    rotate = sub.add_parser("rotate-key", help="replace an API key's secret")
    rotate.add_argument("key_id")
    link = sub.add_parser(
        "login-link", help="print a one-time link that logs a browser in to the status page"
    )
    link.add_argument("user", help="the operator (a user with the admin role)")
    link.add_argument(
        "--ttl", type=float, default=LINK_TTL_S, help="seconds the link works (default: %(default)s)"
    )
    link.add_argument(
        "--url",
        help="the status page's base URL, e.g. http://127.0.0.1:9200 (default: from --metrics)",
    )


def _open_store(args: argparse.Namespace, sections: Mapping[str, Any]) -> tuple[Store, argon2.PasswordHasher]:
    database: Path = args.database or Path("admin.sqlite")
    hashing: SecretHashing = sections_to_kwargs(sections).get("secret_hashing", SecretHashing())
    return Store(database), hashing.hasher()


def issue_key(
    store: Store,
    hasher: argon2.PasswordHasher,
    name: str,
    *,
    groups: frozenset[str],
    roles: frozenset[str],
    by: str,
    now: float,
) -> tuple[str, str]:
    """Create (or extend) a user and give it a new API key, audited as ``by``'s ``add-user``.

    What ``add-user`` does, for a caller that holds the store itself (``feedha up``).

    Returns:
        The new key id and its secret (only its hash is stored).
    """
    store.upsert_user(name, groups=groups, roles=roles, now=now)
    key_id, secret = tokens.new_key_id(), tokens.new_secret()
    store.add_key(key_id=key_id, user=name, secret_hash=tokens.hash_secret(secret, hasher=hasher), now=now)
    store.audit(user=by, action="add-user", target=name, detail=f"key {key_id}", now=now)
    return key_id, secret


def add_user(args: argparse.Namespace, sections: Mapping[str, Any]) -> int:
    """``add-user``: create (or extend) a user and print a new key id and secret."""
    store, hasher = _open_store(args, sections)
    try:
        roles = frozenset(role for role, on in (("admin", args.admin), ("adapter", args.adapter)) if on)
        key_id, secret = issue_key(
            store, hasher, args.name, groups=frozenset(args.group), roles=roles, by="cli", now=time.time()
        )
    finally:
        store.close()
    print(f"user: {args.name}\nkey_id: {key_id}\nsecret: {secret}", flush=True)
    return 0


def rotate_key(args: argparse.Namespace, sections: Mapping[str, Any]) -> int:
    """``rotate-key``: replace a key's secret and print the new one."""
    store, hasher = _open_store(args, sections)
    try:
        secret, now = tokens.new_secret(), time.time()
        key = store.replace_secret(
            args.key_id, secret_hash=tokens.hash_secret(secret, hasher=hasher), now=now
        )
        store.audit(user="cli", action="rotate-key", target=args.key_id, detail="", now=now)
    finally:
        store.close()
    print(f"user: {key.user}\nkey_id: {key.key_id}\nsecret: {secret}", flush=True)
    return 0


def login_link(args: argparse.Namespace, sections: Mapping[str, Any]) -> int:
    """``login-link``: store a one-time status-page token for an operator and print the link."""
    store, _hasher = _open_store(args, sections)
    try:
        if store.find_user(args.user) is None:
            print(f"feedha admin-server: unknown user {args.user!r}", file=sys.stderr)
            return 2
        try:
            token = new_login_link(store, args.user, ttl_s=args.ttl, now=time.time())
        except ValueError as exc:
            print(f"feedha admin-server: --ttl: {exc}", file=sys.stderr)
            return 2
    finally:
        store.close()
    base = args.url
    if base is None and args.metrics:
        host, port = parse_address(args.metrics)
        scheme = "https" if args.tls_cert else "http"
        host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        base = f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"
    # The token goes to the terminal (stdout) only, never to a log.
    print(f"{(base or '').rstrip('/')}/login?token={token}", flush=True)
    return 0


async def _serve(config: ServerConfig) -> None:
    server = AdminServer(config)
    await server.start()
    print(f"listening on {config.host}:{server.port}", flush=True)
    if server.http is not None:
        print(f"http listening on {server.http.host}:{server.http.port} ({server.http.scheme})", flush=True)
    if server.health is not None:
        print(f"health listening on {server.health.host}:{server.health.port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.stop()


def main(argv: list[str]) -> int:
    """Entry point of ``feedha admin-server``.

    Args:
        argv: arguments after ``admin-server``.

    Returns:
        The exit code (2 for configuration errors).
    """
    found = settings.parse(_parser(), argv, sections=SECTIONS, rewrite=rename_keys)
    args = found.args
    logs.configure_from(args)
    try:
        if args.command == "add-user":
            return add_user(args, found.sections)
        if args.command == "rotate-key":
            return rotate_key(args, found.sections)
        if args.command == "login-link":
            return login_link(args, found.sections)
        asyncio.run(_serve(_build_config(args, found.sections)))
    except (AdminError, ValueError) as exc:  # ValueError: a malformed --metrics address
        print(f"feedha admin-server: {exc}", file=sys.stderr)
        return 2
    return 0


__all__ = ["AdminServer", "issue_key", "main"]
