"""CURVE keys and the ZAP handler of an adapter's tcp sockets (the shell around :mod:`adapter.access`).

An adapter with ``--curve-key`` serves its line and replay service as a CURVE
server with its own long-term key pair (its public key is registered with
the admin server, which hands it to subscribers with the routes), and its
sync bus with the group's key pair (``--sync-key``: every adapter of the
channel has it; nothing else may speak on the bus). pyzmq's ZAP
authenticator runs on its own thread and asks :class:`Gatekeeper` about
each new connection.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

from feedha.adapter.access import DELAYED, LINE, REPLAY, SYNC, AccessTable, Grant
from feedha.adapter.config import AdapterConfig
from feedha.adapter.errors import ConfigError

logger = logging.getLogger(__name__)

__all__ = ["CurveKeys", "DataPlaneGuard", "Gatekeeper", "load_keys", "secure_server", "write_keys"]


class CurveKeys:
    """A CURVE key pair (Z85 bytes); ``repr`` never shows the secret."""

    __slots__ = ("public", "secret")

    def __init__(self, public: bytes, secret: bytes) -> None:
        self.public, self.secret = public, secret

    def __repr__(self) -> str:
        return f"<CurveKeys [public={self.public.decode()}]>"


def load_keys(path: Path) -> CurveKeys:
    """Read a key pair written by :func:`write_keys` (ZeroMQ's certificate format).

    A secret key file must be the owner's alone (0600 or 0400), with one
    exception, PostgreSQL's for its key files: a file owned by root may also be
    readable by its group (0640, 0440). That is how Kubernetes mounts a Secret
    for a pod with an ``fsGroup`` (root:fsGroup, 0440), and how configuration
    management hands a root-owned key to a service's group.

    Raises:
        ConfigError: the file is missing, unreadable, too open, or holds no secret key.
    """
    try:
        info = path.stat()
        loose = info.st_mode & (0o037 if info.st_uid == 0 else 0o077)
        if loose:
            raise ConfigError(
                f"{path}: a secret key file must not be accessible by group or others (mode "
                f"{info.st_mode & 0o777:04o}; chmod 600, or 640 for a file owned by root)"
            )
        public, secret = zmq.auth.load_certificate(str(path))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read a CURVE key pair: {exc}") from exc
    if secret is None:
        raise ConfigError(f"{path}: holds a public key only; the adapter needs its secret key")
    return CurveKeys(public, secret)


def write_keys(path: Path) -> CurveKeys:
    """Make a new key pair; write the secret file (0600) at ``path`` and the public one at ``path.pub``."""
    public, secret = zmq.curve_keypair()
    _write(path, public, secret, 0o600)
    _write(path.with_suffix(path.suffix + ".pub"), public, None, 0o644)
    return CurveKeys(public, secret)


def _write(path: Path, public: bytes, secret: bytes | None, mode: int) -> None:
    lines = ["#   feedha CURVE key (ZeroMQ certificate format)", "metadata", "curve"]
    lines.append(f'    public-key = "{public.decode()}"')
    if secret is not None:
        lines.append(f'    secret-key = "{secret.decode()}"')
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with open(fd, "w", encoding="ascii") as out:
        out.write("\n".join(lines) + "\n")


def read_public_keys(path: Path) -> tuple[str, ...]:
    """Z85 public keys, one per line (``#`` comments and blank lines ignored; a ``.pub`` file works too).

    Raises:
        ConfigError: unreadable, or a line that is not a key.
    """
    try:
        lines = path.read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read public keys: {exc}") from exc
    keys = []
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if text.startswith("public-key"):
            text = text.partition("=")[2].strip().strip('"')
        if not text or text.startswith("#") or text in ("metadata", "curve"):
            continue
        if len(text) != 40:
            raise ConfigError(f"{path}:{number}: not a Z85 CURVE public key")
        keys.append(text)
    return tuple(keys)


def secure_server(sock: zmq.Socket[Any], keys: CurveKeys, domain: str) -> None:
    """Make ``sock`` a CURVE server with ``keys``, checked by ZAP in ``domain`` (before bind)."""
    sock.curve_server = True
    sock.curve_secretkey = keys.secret
    sock.curve_publickey = keys.public
    sock.zap_domain = domain.encode()


class Gatekeeper:
    """The ZAP answers: subscribers by the access table, the sync bus by the group key.

    Args:
        context: the ZeroMQ context whose sockets it guards.
        table: the granted subscriber keys.
        sync_public: the group's public key (only it may connect to the sync bus), or ``None``.
    """

    def __init__(self, context: zmq.Context[Any], table: AccessTable, sync_public: bytes | None) -> None:
        self.table = table
        self._sync_public = sync_public
        self.refused: dict[str, int] = {LINE: 0, DELAYED: 0, REPLAY: 0, SYNC: 0}
        self._auth = ThreadAuthenticator(context, log=logging.getLogger("feedha.adapter.zap.auth"))

    def __repr__(self) -> str:
        return f"<Gatekeeper [{self.table!r}, refused={self.refused}]>"

    def start(self) -> None:
        self._auth.start()
        for domain in (LINE, DELAYED, REPLAY, SYNC):
            self._auth.configure_curve_callback(domain, credentials_provider=self)

    def stop(self) -> None:
        self._auth.stop()

    def callback(self, domain: str, key: bytes) -> bool:
        """pyzmq's credentials-provider hook: may ``key`` (Z85) connect to ``domain``? (on the ZAP thread)."""
        if domain == SYNC:
            allowed = self._sync_public is not None and key == self._sync_public
        else:
            allowed = self.table.admits(domain, key.decode("ascii", "replace"), time.time_ns())
        if not allowed:
            self.refused[domain] = self.refused.get(domain, 0) + 1
            logger.debug("refused a CURVE connection to %s", domain)
        return allowed


# Adapter N binds afresh (N - 1) x this after a revocation: never every line of a channel at once.
REBIND_STAGGER_S: Final = 0.3
EXPIRY_CHECK_S: Final = 0.25


class DataPlaneGuard:
    """All of CURVE for one adapter: its keys, the access table, the ZAP thread, rebinds after revocations.

    Args:
        adapter: this adapter's number (it staggers its rebinds by it).
        keys: its own key pair for line and replay (``None``: they are open).
        sync_keys: the group's key pair for the sync bus (``None``: it is open).
        static_grants: subscriber keys admitted as long as the adapter runs (``--grant-keys``).
    """

    def __init__(
        self,
        *,
        adapter: int,
        keys: CurveKeys | None,
        sync_keys: CurveKeys | None,
        static_grants: tuple[str, ...] = (),
    ) -> None:
        self.keys, self.sync_keys = keys, sync_keys
        self.table = AccessTable(permanent=static_grants)
        self._stagger = (adapter - 1) * REBIND_STAGGER_S
        self._rebind_at: dict[str, float] = {}
        self._next_expiry_check = 0.0
        self._gate: Gatekeeper | None = None

    @classmethod
    def from_config(cls, config: AdapterConfig) -> DataPlaneGuard:
        """The guard of the key files an adapter was started with.

        Raises:
            ConfigError: a key file that cannot be read or is readable by others.
        """
        return cls(
            adapter=config.adapter,
            keys=None if config.curve_key is None else load_keys(config.curve_key),
            sync_keys=None if config.sync_key is None else load_keys(config.sync_key),
            static_grants=() if config.grant_keys is None else read_public_keys(config.grant_keys),
        )

    def __repr__(self) -> str:
        curve, sync = self.keys is not None, self.sync_keys is not None
        return f"<DataPlaneGuard [curve={curve}, sync={sync}, {self.table!r}]>"

    @property
    def enabled(self) -> bool:
        return self.keys is not None or self.sync_keys is not None

    def start(self, context: zmq.Context[Any]) -> None:
        """Start the ZAP handler (before any socket binds)."""
        if not self.enabled:
            logger.warning("no --curve-key/--sync-key: line, replay service and sync bus are open to anyone")
            return
        self._gate = Gatekeeper(
            context, self.table, None if self.sync_keys is None else self.sync_keys.public
        )
        self._gate.start()

    def stop(self) -> None:
        if self._gate is not None:
            self._gate.stop()

    def secure(self, sock: zmq.Socket[Any], where: str) -> None:
        """Make a line or replay socket a CURVE server (nothing without a key)."""
        if self.keys is not None:
            secure_server(sock, self.keys, where)

    def secure_sync(self, pub: zmq.Socket[Any], sub: zmq.Socket[Any]) -> None:
        """The sync bus: a CURVE server to the peers, a CURVE client of theirs, both with the group key."""
        if self.sync_keys is None:
            return
        secure_server(pub, self.sync_keys, SYNC)
        sub.curve_secretkey = self.sync_keys.secret
        sub.curve_publickey = self.sync_keys.public
        sub.curve_serverkey = self.sync_keys.public

    def on_access(self, grants: Sequence[Grant], *, revoke: bool, replace: bool, now: float) -> None:
        """The admin server granted or revoked subscriber keys (``replace``: these are all)."""
        if revoke:
            self._schedule(self.table.revoke(grant[0] for grant in grants), now)
        elif replace:
            self._schedule(self.table.replace(grants), now)
        else:
            for grant in grants:
                self._schedule(self.table.grant(*grant), now)

    def due_rebinds(self, *, now: float, now_ns: int) -> set[str]:
        """The sockets to bind afresh now (revoked or expired keys were connected to them)."""
        if self.keys is not None and now >= self._next_expiry_check:
            self._next_expiry_check = now + EXPIRY_CHECK_S
            self._schedule(self.table.expire(now_ns), now)
        due = {where for where, at in self._rebind_at.items() if at <= now}
        for where in due:
            del self._rebind_at[where]
            self.table.rebound(where)
        return due

    def _schedule(self, where: set[str], now: float) -> None:
        for socket_name in where:
            self._rebind_at.setdefault(socket_name, now + self._stagger)

    def status(self) -> dict[str, Any]:
        refused = {} if self._gate is None else dict(self._gate.refused)
        return {"curve": self.keys is not None, "granted_keys": len(self.table), "refused": refused}
