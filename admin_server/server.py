"""``feedha admin-server``: run the stream administration server, or manage API keys.

Usage::

    feedha admin-server [--config FILE] [--host H] [--port P] [--database F] [--policy F]
                        [--tls-cert F --tls-key F [--tls-client-ca F]] [--insecure]
    feedha admin-server add-user NAME [--group G ...] [--admin] [--adapter] [--database F | --config FILE]
    feedha admin-server rotate-key KEY_ID [--database F | --config FILE]

Every option is also a key of the config file (``port: 50051``; the sample is
deploy/admin-server.yaml, which also holds the ``feeds`` and ``secret_hashing``
sections) and a ``FEEDHA_<OPTION>`` variable (``FEEDHA_PORT=50051``); variables
override the file and options override both. With ``--port 0`` the server
binds any free port; it always prints ``listening on HOST:PORT`` (flushed)
once it serves.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
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
from feedha.admin_server.policy import PolicyFile
from feedha.admin_server.service import AdminAuthServicer, StreamBrokerServicer
from feedha.admin_server.store import Store
from feedha.proto import admin_pb2, admin_pb2_grpc

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
        await server.start()
        self._server = server
        for name in ("", *SERVICE_NAMES):
            await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
        self._tasks.append(asyncio.create_task(hub.watch_policy(), name="policy-watch"))
        self._tasks.append(asyncio.create_task(hub.watch_access(), name="access-watch"))
        logger.info(
            "admin server listening on %s:%d (tls=%s)", self.config.host, self.port, self.config.has_tls
        )
        return self.port

    async def stop(self, grace: float | None = 1.0) -> None:
        """Stop serving and close the database."""
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None
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
    parser.add_argument("--insecure", action="store_true", help="allow plaintext on a non-loopback address")
    parser.add_argument(
        "--adapter-auth",
        action=argparse.BooleanOptionalAction,
        help="adapters must log in with a key of role adapter to register (default: yes)",
    )
    settings.add_common_arguments(parser, log_level="INFO")
    sub = parser.add_subparsers(dest="command")
    add = sub.add_parser("add-user", help="create a user and print a new API key")
    add.add_argument("name")
    add.add_argument("--group", action="append", default=[], help="add the user to a group (repeatable)")
    add.add_argument("--admin", action="store_true", help="give the admin role (feedctl)")
    add.add_argument("--adapter", action="store_true", help="give the adapter role (registry)")
    rotate = sub.add_parser("rotate-key", help="replace an API key's secret")
    rotate.add_argument("key_id")
    settings.share_options(parser, ("config", "database", "log_level", "log_format"))
    return parser


def _open_store(args: argparse.Namespace, sections: Mapping[str, Any]) -> tuple[Store, argon2.PasswordHasher]:
    database: Path = args.database or Path("admin.sqlite")
    hashing: SecretHashing = sections_to_kwargs(sections).get("secret_hashing", SecretHashing())
    return Store(database), hashing.hasher()


def add_user(args: argparse.Namespace, sections: Mapping[str, Any]) -> int:
    """``add-user``: create (or extend) a user and print a new key id and secret."""
    store, hasher = _open_store(args, sections)
    try:
        roles = frozenset(role for role, on in (("admin", args.admin), ("adapter", args.adapter)) if on)
        now = time.time()
        store.upsert_user(args.name, groups=frozenset(args.group), roles=roles, now=now)
        key_id, secret = tokens.new_key_id(), tokens.new_secret()
        store.add_key(
            key_id=key_id, user=args.name, secret_hash=tokens.hash_secret(secret, hasher=hasher), now=now
        )
        store.audit(user="cli", action="add-user", target=args.name, detail=f"key {key_id}", now=now)
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


async def _serve(config: ServerConfig) -> None:
    server = AdminServer(config)
    await server.start()
    print(f"listening on {config.host}:{server.port}", flush=True)
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
        asyncio.run(_serve(_build_config(args, found.sections)))
    except AdminError as exc:
        print(f"feedha admin-server: {exc}", file=sys.stderr)
        return 2
    return 0


__all__ = ["AdminServer", "main"]
