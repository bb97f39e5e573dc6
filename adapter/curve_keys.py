"""CURVE key pairs in files: read, write, and lists of public keys.

A key pair is a ZeroMQ certificate file (``zmq.auth``'s format): the secret
file holds both keys, ``FILE.pub`` the public one. Secret files are written
0600 and refused when group or others can read them (see :func:`load_keys`).
:class:`AllowedKeys` is the ZAP handler of a socket that admits a fixed list
of keys (a feed source, which admits its adapters).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

from feedha.adapter.errors import ConfigError

__all__ = ["AllowedKeys", "CurveKeys", "load_keys", "read_key_list", "read_public_keys", "write_keys"]


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
    # A new file with the mode set from its first byte, moved into place: whatever stood at
    # ``path`` (an old key with a loose mode, a symlink, a dangling one) is replaced, never
    # written through.
    lines = ["#   feedha CURVE key (ZeroMQ certificate format)", "metadata", "curve"]
    lines.append(f'    public-key = "{public.decode()}"')
    if secret is not None:
        lines.append(f'    secret-key = "{secret.decode()}"')
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        os.fchmod(fd, mode)  # whatever the umask
        with open(fd, "w", encoding="ascii") as out:
            out.write("\n".join(lines) + "\n")
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


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


class AllowedKeys:
    """ZAP on a thread of its own that admits a fixed set of client keys (a feed source's adapters).

    Args:
        context: the ZeroMQ context of the sockets it guards.
        keys: the Z85 public keys admitted.
        domain: the ZAP domain of those sockets.
    """

    def __init__(self, context: zmq.Context[Any], keys: Iterable[str], *, domain: str) -> None:
        self._keys = frozenset(key.encode("ascii") for key in keys)
        self.domain = domain
        self.refused = 0
        self._auth = ThreadAuthenticator(context, log=logging.getLogger("feedha.curve.auth"))

    def __repr__(self) -> str:
        return f"<AllowedKeys [{self.domain}, keys={len(self._keys)}, refused={self.refused}]>"

    def start(self) -> None:
        self._auth.start()
        self._auth.configure_curve_callback(self.domain, credentials_provider=self)

    def stop(self) -> None:
        self._auth.stop()

    def callback(self, domain: str, key: bytes) -> bool:
        """pyzmq's credentials-provider hook (on the ZAP thread)."""
        allowed = domain == self.domain and key in self._keys
        if not allowed:
            self.refused += 1
        return allowed

    def secure(self, sock: zmq.Socket[Any], keys: CurveKeys) -> None:
        """Make ``sock`` a CURVE server with ``keys`` that admits only the allowed keys (before bind)."""
        sock.curve_server = True
        sock.curve_secretkey = keys.secret
        sock.curve_publickey = keys.public
        sock.zap_domain = self.domain.encode()


def read_key_list(paths: Iterable[Path]) -> tuple[str, ...]:
    """The public keys of several files (see :func:`read_public_keys`), in order, without repeats.

    Raises:
        ConfigError: a file cannot be read or holds something that is not a key.
    """
    keys: dict[str, None] = {}
    for path in paths:
        keys.update(dict.fromkeys(read_public_keys(path)))
    return tuple(keys)
