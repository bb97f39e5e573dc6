"""The signing key file (private, atomic, migrated out of the database) and 0600 database files."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from feedha.admin_server import keyfile, tokens
from feedha.admin_server.config import ServerConfig
from feedha.admin_server.errors import ConfigError
from feedha.admin_server.store import Store


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "admin.sqlite")


def test_a_missing_key_file_is_created_private_and_then_reused(tmp_path: Path, store: Store) -> None:
    path = keyfile.default_signing_key_path(tmp_path / "admin.sqlite")
    assert path == tmp_path / "admin.sqlite.signing-key"
    key = keyfile.load_signing_key(path, store=store)
    assert len(key) == tokens.SIGNING_KEY_BYTES
    assert mode(path) == 0o600
    assert path.read_text() == key.hex() + "\n"
    assert keyfile.load_signing_key(path, store=store) == key
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_key_in_the_database_moves_to_the_file_and_old_tokens_keep_verifying(
    tmp_path: Path, store: Store
) -> None:
    old_key = store.set_meta_if_absent(keyfile.LEGACY_SIGNING_KEY_META, tokens.new_signing_key())
    token, _claims = tokens.TokenSigner(old_key).issue(user="alice", key_id="fk_1", now=1000.0)
    path = tmp_path / "keys" / "signing.key"
    path.parent.mkdir()
    key = keyfile.load_signing_key(path, store=store)
    assert key == old_key
    assert store.get_meta(keyfile.LEGACY_SIGNING_KEY_META) is None
    assert tokens.TokenSigner(key).verify(token, now=1001.0).user == "alice"
    on_disk = b"".join(p.read_bytes() for p in tmp_path.glob("admin.sqlite*"))  # while it runs
    assert old_key not in on_disk  # overwritten, not just unlinked from the b-tree


def test_the_file_wins_over_a_different_key_left_in_the_database(tmp_path: Path, store: Store) -> None:
    path = tmp_path / "k"
    keyfile.write_key_file(path, b"f" * 32)
    store.set_meta_if_absent(keyfile.LEGACY_SIGNING_KEY_META, b"d" * 32)
    assert keyfile.load_signing_key(path, store=store) == b"f" * 32
    assert store.get_meta(keyfile.LEGACY_SIGNING_KEY_META) is None


@pytest.mark.parametrize("loose", [0o640, 0o604, 0o644, 0o660])
def test_a_key_file_others_may_read_is_refused(tmp_path: Path, store: Store, loose: int) -> None:
    path = tmp_path / "k"
    keyfile.write_key_file(path, b"k" * 32)
    path.chmod(loose)
    with pytest.raises(ConfigError, match=rf"accessible by group or others \(mode {loose:04o}\).*chmod 600"):
        keyfile.load_signing_key(path, store=store)


@pytest.mark.parametrize(
    ("content", "reason"),
    [("not hex\n", "hex text"), ("abcd\n", "at least 16"), ("", "at least 16")],
)
def test_a_bad_key_file_is_refused(tmp_path: Path, store: Store, content: str, reason: str) -> None:
    path = tmp_path / "k"
    path.write_text(content)
    path.chmod(0o400)
    with pytest.raises(ConfigError, match=reason):
        keyfile.load_signing_key(path, store=store)


def test_a_mounted_secret_in_hex_is_read(tmp_path: Path, store: Store) -> None:
    target = tmp_path / "..data-k"
    target.write_text("  " + "ab" * 32 + "\n")
    target.chmod(0o400)
    (tmp_path / "k").symlink_to(target)
    assert keyfile.load_signing_key(tmp_path / "k", store=store) == bytes.fromhex("ab" * 32)


def test_creation_is_exclusive(tmp_path: Path) -> None:
    path = tmp_path / "k"
    keyfile.write_key_file(path, b"1" * 32)
    with pytest.raises(FileExistsError):
        keyfile.write_key_file(path, b"2" * 32)
    assert path.read_text() == (b"1" * 32).hex() + "\n"


def test_database_files_are_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        db = tmp_path / "admin.sqlite"
        store = Store(db)
        store.audit(user="u", action="a", target="t", detail="d", now=1.0)
        created = sorted(p.name for p in tmp_path.iterdir())
        assert created == ["admin.sqlite", "admin.sqlite-shm", "admin.sqlite-wal"]
        assert {name: mode(tmp_path / name) for name in created} == dict.fromkeys(created, 0o600)
        store.close()
        db.chmod(0o644)  # a database made by an older server
        Store(db).close()
        assert mode(db) == 0o600
    finally:
        os.umask(old)


def test_the_config_default_is_next_to_the_database(tmp_path: Path) -> None:
    assert ServerConfig(database=tmp_path / "a.db").signing_key_path == tmp_path / "a.db.signing-key"
    assert ServerConfig(database=tmp_path / "a.db", signing_key_file=tmp_path / "s").signing_key_path == (
        tmp_path / "s"
    )
    assert ServerConfig(database=Path(":memory:")).signing_key_path is None
