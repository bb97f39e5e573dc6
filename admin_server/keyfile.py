"""Private files: the token signing key file, and the 0600 rule for everything the server creates.

Theory of operation
-------------------
Whoever holds the signing key can mint a token for any user, so the key does
not live in the database (whose readers would then be every identity): it
lives in its own file, ``signing_key_file`` (default: the database path plus
``.signing-key``), which may also be a mounted secret. The file holds the key
as hex text (``openssl rand -hex 32`` makes one); it must be private -- a key
file that group or others may access is refused at start, as ssh refuses a
private key with loose permissions.

:func:`load_signing_key` runs once at start:

- the file exists: use it (and drop any key the database still holds);
- else the database holds a key (a server from before this file existed):
  write that key to the file, then delete it from the database, so tokens
  issued before keep verifying; a crash in between leaves both, and the next
  start finishes the move;
- else: a fresh random key.

A new file is written atomically: a temporary file created with
``O_CREAT | O_EXCL`` and mode 0600 is filled and synced, then hard-linked to
the final name, which fails if that name exists -- so a concurrent start uses
the key the other one wrote, and nobody ever reads a half-written key.

Everything else the server creates (the database, its ``-wal``, ``-shm`` and
``-journal`` files, which hold the audit log too) is made under
:func:`private_umask` and tightened to 0600 by :func:`make_private`; SQLite
gives its side files the database file's mode.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Final, Protocol

from feedha.admin_server import tokens
from feedha.admin_server.errors import ConfigError

logger = logging.getLogger(__name__)

SIGNING_KEY_SUFFIX: Final = ".signing-key"
LEGACY_SIGNING_KEY_META: Final = "token_signing_key"  # where servers before the key file kept it
PRIVATE_MODE: Final = 0o600
PRIVATE_UMASK: Final = 0o077
MIN_KEY_BYTES: Final = 16
MAX_KEY_FILE_BYTES: Final = 4096


class MetaStore(Protocol):
    """Where servers before the key file kept the key: the store's metadata (its type, without its import)."""

    def get_meta(self, key: str) -> bytes | None: ...

    def delete_meta(self, key: str, *, secure: bool = False) -> None: ...


@contextlib.contextmanager
def private_umask() -> Iterator[None]:
    """Create files readable by their owner only while the context is open (process-wide umask)."""
    old = os.umask(PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(old)


def make_private(path: Path) -> bool:
    """Give an existing file mode 0600 if group or others may access it.

    Args:
        path: the file (missing: nothing to do).

    Returns:
        True when the mode was changed.
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return False
    if stat.S_IMODE(mode) & PRIVATE_UMASK == 0:
        return False
    path.chmod(PRIVATE_MODE)
    logger.info("%s was accessible by group or others (mode %04o): now 0600", path, stat.S_IMODE(mode))
    return True


def default_signing_key_path(database: Path) -> Path:
    """Where the signing key lives when the config does not say: next to the database."""
    return database.with_name(database.name + SIGNING_KEY_SUFFIX)


def read_key_file(path: Path) -> bytes:
    """Read a signing key file after checking that it is private.

    Args:
        path: the key file (a symlink, e.g. a mounted secret, is followed).

    Returns:
        The key bytes.

    Raises:
        ConfigError: unreadable, accessible by group or others, not a regular
            file, or not hex text of at least 16 bytes.
    """
    try:
        info = path.stat()
    except OSError as exc:
        raise ConfigError(f"cannot read signing key file {path}: {exc.strerror}") from exc
    mode = stat.S_IMODE(info.st_mode)
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"signing key file {path} is not a regular file")
    if mode & PRIVATE_UMASK:
        raise ConfigError(
            f"signing key file {path} is accessible by group or others (mode {mode:04o}); "
            f"whoever reads it can forge any token: run `chmod 600 {path}` (for a mounted secret, "
            "defaultMode: 0400)"
        )
    if info.st_size > MAX_KEY_FILE_BYTES:
        raise ConfigError(f"signing key file {path} is too large ({info.st_size} bytes) to be a key")
    try:
        text = path.read_text(encoding="ascii").strip()
        key = bytes.fromhex(text)
    except OSError as exc:
        raise ConfigError(f"cannot read signing key file {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise ConfigError(
            f"signing key file {path} must hold the key as hex text (e.g. `openssl rand -hex 32`)"
        ) from exc
    if len(key) < MIN_KEY_BYTES:
        raise ConfigError(f"signing key in {path} is {len(key)} bytes; at least {MIN_KEY_BYTES} are needed")
    return key


def write_key_file(path: Path, key: bytes) -> None:
    """Write a new key file atomically with mode 0600.

    Raises:
        FileExistsError: the file exists (it is left alone).
        ConfigError: the directory is not writable.
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_MODE)
        try:
            os.write(fd, (key.hex() + "\n").encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.link(temporary, path)  # atomic, and refuses to replace an existing key
    except FileExistsError:
        raise
    except OSError as exc:
        raise ConfigError(f"cannot create signing key file {path}: {exc.strerror}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
    with contextlib.suppress(OSError):  # make the new name durable (best effort: not every fs can)
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def load_signing_key(path: Path | None, *, store: MetaStore) -> bytes:
    """The token signing key: from its file, moved there from the database, or new.

    Args:
        path: the key file; ``None`` keeps a fresh key in memory only (an in-memory
            database, for tests: every token dies with the process).
        store: the open database (a key it still holds is moved to the file).

    Returns:
        The key.

    Raises:
        ConfigError: the file is not private, unreadable or invalid, or cannot be created.
    """
    legacy = store.get_meta(LEGACY_SIGNING_KEY_META)
    if path is None:
        return legacy if legacy is not None else tokens.new_signing_key()
    if not os.path.lexists(path):
        key = legacy if legacy is not None else tokens.new_signing_key()
        try:
            write_key_file(path, key)
        except FileExistsError:
            pass  # another start won the race: use its key
        else:
            if legacy is None:
                logger.info("created a new token signing key in %s", path)
            else:
                logger.info("moved the token signing key from the database to %s", path)
    key = read_key_file(path)
    if legacy is not None:
        if legacy != key:
            logger.warning(
                "the database held a signing key other than %s's; the file wins "
                "(tokens signed with the old key need a new login)",
                path,
            )
        store.delete_meta(LEGACY_SIGNING_KEY_META, secure=True)
    return key
