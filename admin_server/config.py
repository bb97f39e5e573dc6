"""The admin server's configuration: one frozen dataclass, built once by ``server.py``.

The file (``deploy/admin-server.yaml``) declares where to listen, the
database, the signing key file, the policy file, TLS files and the feeds with their channels; a
channel covers the symbols whose first letter lies in its ``letters`` range.
The file's keys are the options of ``feedha admin-server`` (``feedha.settings``
reads them; ``FEEDHA_*`` variables override the file and flags override both),
plus three sections that are not options, ``feeds``, ``secret_hashing`` and
``limits`` (:data:`SECTIONS`; the quotas, :mod:`admin_server.limits`). Relative
paths in the file are relative to the file's directory.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import argon2

from feedha.admin_server import keyfile, tokens
from feedha.admin_server.errors import ConfigError
from feedha.admin_server.limits import Limits, parse_limits
from feedha.proto.model import MARKET_MODEL, MODELS

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 50051
DEFAULT_TOKEN_TTL_S: Final = 3600.0
DEFAULT_POLICY_POLL_S: Final = 0.25  # a stat() four times a second; a policy revocation must bite within 2 s
DEFAULT_MESSAGE_MODEL: Final = MARKET_MODEL.name


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelConfig:
    """One channel of a feed and the symbol range it carries.

    Attributes:
        feed: the feed name, e.g. ``EQUITIES``.
        name: the channel name, e.g. ``EQ-A-M``.
        number: the channel number on the wire.
        source_stream: the source stream feeding it, e.g. ``A-M``.
        first_letter: first symbol initial covered (inclusive).
        last_letter: last symbol initial covered (inclusive).
        message_model: the protobuf message name subscribers decode.
    """

    feed: str
    name: str
    number: int
    source_stream: str
    first_letter: str
    last_letter: str
    message_model: str = DEFAULT_MESSAGE_MODEL

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigError("channel name must not be empty")
        if not 0 <= self.number <= 0xFFFF:
            raise ConfigError(f"channel {self.name}: number must fit 16 bits, got {self.number}")
        for letter in (self.first_letter, self.last_letter):
            if len(letter) != 1 or not letter.isalnum():
                raise ConfigError(f"channel {self.name}: letters must be single characters, got {letter!r}")
        if self.message_model not in MODELS:
            raise ConfigError(
                f"channel {self.name}: unknown message_model {self.message_model!r}; known: {sorted(MODELS)}"
            )
        if self.first_letter > self.last_letter:
            raise ConfigError(
                f"channel {self.name}: empty letter range {self.first_letter}-{self.last_letter}"
            )

    def covers(self, symbol: str) -> bool:
        """Whether the channel carries ``symbol`` (by its first character, case-insensitive)."""
        return bool(symbol) and self.first_letter <= symbol[0].upper() <= self.last_letter


@dataclass(frozen=True, slots=True, kw_only=True)
class SecretHashing:
    """The argon2id cost of hashing API-key secrets (``add-user``, ``rotate-key``, unknown-key logins).

    A stored hash carries its own cost, so changing this affects new and
    rotated keys; existing keys keep verifying. Keep the default in
    production; a cheap setting (``time_cost=1, memory_kib=8, parallelism=1``)
    makes logins take well under a millisecond, for tests.

    Attributes:
        time_cost: argon2 iterations.
        memory_kib: argon2 memory in KiB.
        parallelism: argon2 lanes.
    """

    time_cost: int = tokens.HASH_TIME_COST
    memory_kib: int = tokens.HASH_MEMORY_KIB
    parallelism: int = tokens.HASH_PARALLELISM

    def __post_init__(self) -> None:
        try:
            self.hasher()
        except ValueError as exc:
            raise ConfigError(f"secret_hashing: {exc}") from exc

    def hasher(self) -> argon2.PasswordHasher:
        """The argon2 hasher with this cost."""
        return tokens.make_hasher(
            time_cost=self.time_cost, memory_kib=self.memory_kib, parallelism=self.parallelism
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """Everything the admin server needs to start.

    Attributes:
        host: bind address.
        port: bind port (0: any free port, printed at start-up).
        database: the SQLite file.
        policy: the authorization policy file.
        channels: the feeds' channels.
        token_ttl_s: bearer token lifetime.
        policy_poll_s: how often the policy file's mtime is checked.
        tls_cert: PEM server certificate (TLS when set together with ``tls_key``).
        tls_key: PEM server private key.
        tls_client_ca: PEM CA bundle; when set, clients must present a certificate (mTLS).
        insecure: allow plaintext, or ``adapter_auth`` off, on a non-loopback address.
        adapter_auth: adapters must log in (role ``adapter`` or ``admin``) to register (off
            only on loopback, or with ``insecure``).
        secret_hashing: the argon2id cost of new secret hashes.
        signing_key_file: the token signing key file, mode 0600 (default: the
            database path plus ``.signing-key``; created when missing).
        metrics_address: ``(host, port)`` of the HTTP listener: ``/metrics``, ``/healthz``,
            ``/readyz`` and the status page (None: not served; HTTPS when TLS is configured).
        health_address: ``(host, port)`` of a listener of ``/healthz`` and ``/readyz`` alone
            (plain HTTP: probes carry no secret), so that probes never wait behind scrapes, the
            status page or idle connections there (None: not served).
        limits: the quotas that keep one user, or a flood of strangers, from hurting the others.
    """

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    database: Path = Path("admin.sqlite")
    policy: Path = Path("policy.yaml")
    channels: tuple[ChannelConfig, ...] = ()
    token_ttl_s: float = DEFAULT_TOKEN_TTL_S
    policy_poll_s: float = DEFAULT_POLICY_POLL_S
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    insecure: bool = False
    adapter_auth: bool = True
    secret_hashing: SecretHashing = SecretHashing()
    signing_key_file: Path | None = None
    metrics_address: tuple[str, int] | None = None
    health_address: tuple[str, int] | None = None
    limits: Limits = Limits()

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port must be 0..65535, got {self.port}")
        if self.token_ttl_s <= 0:
            raise ConfigError(f"token_ttl_s must be positive, got {self.token_ttl_s}")
        if self.policy_poll_s <= 0:
            raise ConfigError(f"policy_poll_s must be positive, got {self.policy_poll_s}")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ConfigError("tls_cert and tls_key must be given together")
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise ConfigError("tls_client_ca (mutual TLS) needs tls_cert and tls_key")
        if not self.has_tls and not self.insecure and not is_loopback(self.host):
            raise ConfigError(
                f"refusing plaintext gRPC on non-loopback address {self.host!r}: "
                "configure tls_cert/tls_key, or pass --insecure"
            )
        if not self.adapter_auth and not self.insecure and not is_loopback(self.host):
            # Anyone who reaches the port could then register an adapter with a multicast line
            # and be sent the channel's packet key (and announce lines to every subscriber).
            raise ConfigError(
                f"refusing adapter_auth: false on non-loopback address {self.host!r}: anyone who "
                "reaches it could register an adapter; set adapter_auth: true (--adapter-auth), "
                "or pass --insecure"
            )
        if self.metrics_address is not None:
            host, port = self.metrics_address
            if not 0 <= port <= 65535:
                raise ConfigError(f"metrics port must be 0..65535, got {port}")
            if not self.has_tls and not self.insecure and not is_loopback(host):
                raise ConfigError(
                    f"refusing a plaintext status page on non-loopback address {host!r}: "
                    "configure tls_cert/tls_key (it is then HTTPS), or pass --insecure"
                )
        if self.health_address is not None and not 0 <= self.health_address[1] <= 65535:
            raise ConfigError(f"health port must be 0..65535, got {self.health_address[1]}")
        names = [c.name for c in self.channels]
        if len(set(names)) != len(names):
            raise ConfigError(f"duplicate channel names in {names}")

    @property
    def has_tls(self) -> bool:
        """Whether TLS is configured."""
        return self.tls_cert is not None

    @property
    def signing_key_path(self) -> Path | None:
        """The signing key file (``None`` for an in-memory database without one: a key in memory)."""
        if self.signing_key_file is not None:
            return self.signing_key_file
        if str(self.database) == ":memory:":
            return None
        return keyfile.default_signing_key_path(self.database)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address or ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _parse_channels(raw: Any) -> tuple[ChannelConfig, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError("feeds must be a list")
    channels: list[ChannelConfig] = []
    for feed in raw:
        if not isinstance(feed, dict) or "name" not in feed:
            raise ConfigError(f"each feed needs a name: {feed!r}")
        model = str(feed.get("message_model", DEFAULT_MESSAGE_MODEL))
        for channel in feed.get("channels") or []:
            try:
                first, _dash, last = str(channel["letters"]).partition("-")
                channels.append(
                    ChannelConfig(
                        feed=str(feed["name"]),
                        name=str(channel["name"]),
                        number=int(channel["number"]),
                        source_stream=str(channel.get("source_stream", channel["letters"])),
                        first_letter=first.strip().upper(),
                        last_letter=(last or first).strip().upper(),
                        message_model=str(channel.get("message_model", model)),
                    )
                )
            except (KeyError, TypeError, ValueError) as exc:
                if isinstance(exc, ConfigError):
                    raise
                raise ConfigError(f"bad channel {channel!r} in feed {feed['name']}: {exc}") from exc
    return tuple(channels)


def _parse_hashing(raw: Any) -> SecretHashing:
    if not isinstance(raw, dict):
        raise ConfigError(f"secret_hashing must be a mapping, got {raw!r}")
    unknown = sorted(set(raw) - {"time_cost", "memory_kib", "parallelism"})
    if unknown:
        raise ConfigError(f"secret_hashing: unknown keys {unknown}")
    try:
        return SecretHashing(**{key: int(value) for key, value in raw.items()})
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"secret_hashing: {exc}") from exc


# The config file's keys that are not command-line options (feedha.settings reads the rest).
SECTIONS: Final = frozenset({"feeds", "secret_hashing", "limits"})
# Older names of the file's keys, still read: `listen: HOST:PORT` is `host` and `port`.
_RENAMED: Final = {"token_ttl_s": "token_ttl", "policy_poll_s": "policy_poll"}


def rename_keys(raw: dict[str, Any]) -> dict[str, Any]:
    """The config file's mapping with older key names turned into the options' names.

    ``listen: HOST:PORT`` becomes ``host`` and ``port``; ``token_ttl_s`` and
    ``policy_poll_s`` become ``token_ttl`` and ``policy_poll``.

    Raises:
        ConfigError: ``listen`` is not ``HOST:PORT``.
    """
    out = {_RENAMED.get(key, key): value for key, value in raw.items() if key != "listen"}
    if "listen" in raw:
        host, colon, port = str(raw["listen"]).rpartition(":")
        if not colon or not port.isdigit():
            raise ConfigError(f"listen must be HOST:PORT, got {raw['listen']!r}")
        out.setdefault("host", host or DEFAULT_HOST)
        out.setdefault("port", int(port))
    return out


def sections_to_kwargs(sections: Mapping[str, Any]) -> dict[str, Any]:
    """:class:`ServerConfig` keyword arguments from the file's sections (``feeds``, ``secret_hashing``).

    Raises:
        ConfigError: an invalid section.
    """
    kwargs: dict[str, Any] = {"channels": _parse_channels(sections.get("feeds"))}
    if "secret_hashing" in sections:
        kwargs["secret_hashing"] = _parse_hashing(sections["secret_hashing"])
    if "limits" in sections:
        kwargs["limits"] = parse_limits(sections["limits"])
    return kwargs
