"""The embedded SQLite database: users and API keys, registry, subscriptions, audit log.

Everything the server must not lose across a restart lives here. Calls are
short, synchronous transactions on one connection (WAL mode): at the rates an
admin server sees (logins, subscriptions, a status report per adapter per
second) they take microseconds, so the asyncio shell calls them inline
rather than paying a thread hop; only argon2 hashing runs off the loop.
"""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from pathlib import Path
from typing import Any, Final

from feedha.admin_server import keyfile
from feedha.admin_server.errors import NotFoundError
from feedha.admin_server.records import (
    ApiKey,
    AuditEntry,
    Lease,
    SubscriptionRecord,
    UserRecord,
    decode_record,
    encode_record,
)
from feedha.admin_server.registry import AdapterRecord

SCHEMA_VERSION: Final = 1
LOGIN_AUDIT_WINDOW_S: Final = 60.0
MAX_LOGIN_AUDIT_ROWS: Final = 100  # failed-login rows per window (~144,000 a day at most); the rest in one
MAX_AUDIT_TARGET: Final = 128  # characters of an audit row's target ...
MAX_AUDIT_DETAIL: Final = 512  # ... and of its detail (a caller's endpoint, a reason: cut, one line)
MAX_LOGIN_LINKS: Final = 100  # unused status-page login links kept; older ones are dropped

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS users (
    name TEXT PRIMARY KEY, groups TEXT NOT NULL, roles TEXT NOT NULL, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS api_keys (
    key_id TEXT PRIMARY KEY, user TEXT NOT NULL REFERENCES users(name), secret_hash TEXT NOT NULL,
    created_at REAL NOT NULL, rotated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS adapters (adapter_id TEXT PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS subscriptions (
    subscription_id TEXT PRIMARY KEY, user TEXT NOT NULL, symbols TEXT NOT NULL,
    created_at REAL NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, user TEXT NOT NULL, action TEXT NOT NULL,
    target TEXT NOT NULL, detail TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS login_links (
    token_hash TEXT PRIMARY KEY, user TEXT NOT NULL, expires_at REAL NOT NULL, created_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS subscriptions_by_user ON subscriptions(user);
CREATE INDEX IF NOT EXISTS audit_by_time ON audit(at);
"""


class Store:
    """The SQLite database.

    Args:
        path: the database file (created with its schema if missing);
            ``":memory:"`` for tests.
        readonly: open a connection that only reads an existing file (for another thread).
    """

    def __init__(self, path: Path | str, *, readonly: bool = False) -> None:
        self.path = path
        self._login_window_at = 0.0
        self._login_rows: dict[tuple[str, str, str, str], int] = {}  # this window's failed-login rows
        if readonly:  # a second connection that only reads (WAL: it never waits for the writer)
            uri = f"file:{Path(path).resolve()}?mode=ro"
            self._db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            return
        self._db = _connect(path)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(_SCHEMA)
        self._migrate()
        self._db.execute(
            "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
        )

    def __repr__(self) -> str:
        return f"<Store {str(self.path)!r}>"

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    # -- meta

    def get_meta(self, key: str) -> bytes | None:
        """A metadata value, or ``None``."""
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else bytes(row[0]) if isinstance(row[0], bytes) else str(row[0]).encode()

    def delete_meta(self, key: str, *, secure: bool = False) -> None:
        """Delete a metadata value.

        Args:
            key: the name.
            secure: overwrite the freed bytes and empty the write-ahead log too
                (for secrets: a plain delete leaves them in free pages).
        """
        if secure:
            self._db.execute("PRAGMA secure_delete=ON")
        try:
            self._db.execute("DELETE FROM meta WHERE key = ?", (key,))
        finally:
            if secure:
                self._db.execute("PRAGMA secure_delete=OFF")
        if secure:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def set_meta_if_absent(self, key: str, value: bytes) -> bytes:
        """Store a metadata value unless one exists; return the stored one."""
        self._db.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", (key, value))
        stored = self.get_meta(key)
        assert stored is not None
        return stored

    # -- users and keys

    def upsert_user(self, name: str, *, groups: frozenset[str], roles: frozenset[str], now: float) -> None:
        """Create a user or add groups and roles to an existing one."""
        old = self.find_user(name)
        if old is not None:
            groups, roles = groups | old.groups, roles | old.roles
        self._db.execute(
            "INSERT INTO users(name, groups, roles, created_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(name) DO UPDATE SET groups = excluded.groups, roles = excluded.roles",
            (name, json.dumps(sorted(groups)), json.dumps(sorted(roles)), now),
        )

    def find_user(self, name: str) -> UserRecord | None:
        """A user, or ``None``."""
        row = self._db.execute("SELECT name, groups, roles FROM users WHERE name = ?", (name,)).fetchone()
        if row is None:
            return None
        return UserRecord(
            name=row[0], groups=frozenset(json.loads(row[1])), roles=frozenset(json.loads(row[2]))
        )

    def add_key(self, *, key_id: str, user: str, secret_hash: str, now: float) -> None:
        """Store a new API key for an existing user."""
        self._db.execute(
            "INSERT INTO api_keys(key_id, user, secret_hash, created_at, rotated_at) VALUES (?, ?, ?, ?, ?)",
            (key_id, user, secret_hash, now, now),
        )

    def find_key(self, key_id: str) -> ApiKey | None:
        """An API key, or ``None``."""
        row = self._db.execute(
            "SELECT key_id, user, secret_hash, rotated_at FROM api_keys WHERE key_id = ?", (key_id,)
        ).fetchone()
        if row is None:
            return None
        return ApiKey(key_id=row[0], user=row[1], secret_hash=row[2], rotated_at=float(row[3]))

    def replace_secret(self, key_id: str, *, secret_hash: str, now: float) -> ApiKey:
        """Replace a key's secret (tokens issued before ``now`` stop working).

        Raises:
            NotFoundError: unknown key id.
        """
        cursor = self._db.execute(
            "UPDATE api_keys SET secret_hash = ?, rotated_at = ? WHERE key_id = ?", (secret_hash, now, key_id)
        )
        if cursor.rowcount == 0:
            raise NotFoundError(f"unknown key id {key_id!r}", reason="KEY_NOT_FOUND")
        key = self.find_key(key_id)
        assert key is not None
        return key

    # -- registry

    def save_adapter(self, record: AdapterRecord) -> None:
        """Insert or update an adapter record."""
        self._db.execute(
            "INSERT INTO adapters(adapter_id, record) VALUES (?, ?) "
            "ON CONFLICT(adapter_id) DO UPDATE SET record = excluded.record",
            (record.adapter_id, encode_record(record)),
        )

    def load_adapters(self) -> list[AdapterRecord]:
        """Every stored adapter record."""
        return [decode_record(row[0]) for row in self._db.execute("SELECT record FROM adapters")]

    def _migrate(self) -> None:
        # Columns added after the first release: a database made before them gets them, empty.
        have = {row[1] for row in self._db.execute("PRAGMA table_info(subscriptions)")}
        if "curve_key" not in have:
            self._db.execute("ALTER TABLE subscriptions ADD COLUMN curve_key TEXT NOT NULL DEFAULT ''")
        if "valid_until" not in have:
            self._db.execute("ALTER TABLE subscriptions ADD COLUMN valid_until REAL NOT NULL DEFAULT 0")
        if "key_id" not in have:
            self._db.execute("ALTER TABLE subscriptions ADD COLUMN key_id TEXT NOT NULL DEFAULT ''")
            self._db.execute("ALTER TABLE subscriptions ADD COLUMN granted_at REAL NOT NULL DEFAULT 0")
        if "count" not in {row[1] for row in self._db.execute("PRAGMA table_info(audit)")}:
            self._db.execute("ALTER TABLE audit ADD COLUMN count INTEGER NOT NULL DEFAULT 1")

    # -- subscriptions

    def add_subscription(
        self,
        *,
        user: str,
        symbols: tuple[str, ...],
        now: float,
        curve_key: str = "",
        lease: Lease | None = None,
    ) -> SubscriptionRecord:
        """Store a new subscription with a fresh id (and its data-plane access under ``lease``)."""
        lease = lease or Lease()
        record = SubscriptionRecord(
            subscription_id=uuid.uuid4().hex,
            user=user,
            symbols=symbols,
            created_at=now,
            updated_at=now,
            curve_key=curve_key,
            valid_until=lease.valid_until,
            key_id=lease.key_id,
            granted_at=lease.granted_at,
        )
        self._db.execute(
            "INSERT INTO subscriptions(subscription_id, user, symbols, created_at, updated_at, curve_key, "
            "valid_until, key_id, granted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (record.subscription_id, user, json.dumps(list(symbols)), now, now, curve_key, *lease),
        )
        return record

    def subscription_counts(self, user: str, curve_key: str = "") -> tuple[int, int]:
        """``(subscriptions of user, distinct CURVE keys among them other than curve_key)``."""
        row = self._db.execute(
            "SELECT COUNT(*), COUNT(DISTINCT CASE WHEN curve_key NOT IN ('', ?) THEN curve_key END) "
            "FROM subscriptions WHERE user = ?",
            (curve_key, user),
        ).fetchone()
        return int(row[0]), int(row[1])

    def delete_expired_subscriptions(self, *, before: float) -> list[str]:
        """Delete the subscriptions whose data-plane lease ended before ``before``; their ids.

        A subscription stored without a lease (``valid_until`` 0) is kept.
        """
        rows = self._db.execute(
            "DELETE FROM subscriptions WHERE valid_until > 0 AND valid_until < ? RETURNING subscription_id",
            (before,),
        ).fetchall()
        return [str(row[0]) for row in rows]

    def extend_subscriptions(self, user: str, lease: Lease) -> int:
        """Renew the data-plane access of every subscription of ``user`` under a new token's ``lease``."""
        cursor = self._db.execute(
            "UPDATE subscriptions SET valid_until = MAX(valid_until, ?), key_id = ?, granted_at = ? "
            "WHERE user = ?",
            (*lease, user),
        )
        return cursor.rowcount

    def update_subscription(
        self, subscription_id: str, *, symbols: tuple[str, ...], now: float, lease: Lease | None = None
    ) -> None:
        """Replace a subscription's symbols (and renew its access under ``lease``).

        Raises:
            NotFoundError: unknown subscription.
        """
        lease = lease or Lease()
        cursor = self._db.execute(
            "UPDATE subscriptions SET symbols = ?, updated_at = ?, valid_until = MAX(valid_until, ?), "
            "key_id = CASE WHEN ? = '' THEN key_id ELSE ? END, granted_at = MAX(granted_at, ?) "
            "WHERE subscription_id = ?",
            (
                json.dumps(list(symbols)),
                now,
                lease.valid_until,
                lease.key_id,
                lease.key_id,
                lease.granted_at,
                subscription_id,
            ),
        )
        if cursor.rowcount == 0:
            raise NotFoundError(f"unknown subscription {subscription_id!r}", reason="SUBSCRIPTION_NOT_FOUND")

    def delete_subscription(self, subscription_id: str) -> None:
        """Delete a subscription.

        Raises:
            NotFoundError: unknown subscription.
        """
        cursor = self._db.execute("DELETE FROM subscriptions WHERE subscription_id = ?", (subscription_id,))
        if cursor.rowcount == 0:
            raise NotFoundError(f"unknown subscription {subscription_id!r}", reason="SUBSCRIPTION_NOT_FOUND")

    def find_subscription(self, subscription_id: str) -> SubscriptionRecord:
        """One subscription.

        Raises:
            NotFoundError: unknown subscription.
        """
        row = self._db.execute(
            f"SELECT {_SUBSCRIPTION_COLUMNS} FROM subscriptions WHERE subscription_id = ?",
            (subscription_id,),
        ).fetchone()
        if row is None:
            raise NotFoundError(f"unknown subscription {subscription_id!r}", reason="SUBSCRIPTION_NOT_FOUND")
        return _subscription(row)

    def subscriptions(self) -> list[SubscriptionRecord]:
        """Every subscription, oldest first."""
        rows = self._db.execute(f"SELECT {_SUBSCRIPTION_COLUMNS} FROM subscriptions ORDER BY created_at")
        return [_subscription(row) for row in rows]

    # -- status-page login links (one-time: taken once, then gone)

    def add_login_link(self, *, token_hash: str, user: str, expires_at: float, now: float) -> None:
        """Store a login link's token hash; expired links go, and at most :data:`MAX_LOGIN_LINKS` stay."""
        self._db.execute("DELETE FROM login_links WHERE expires_at <= ?", (now,))
        self._db.execute(
            "INSERT INTO login_links(token_hash, user, expires_at, created_at) VALUES (?, ?, ?, ?)",
            (token_hash, user, expires_at, now),
        )
        self._db.execute(
            "DELETE FROM login_links WHERE token_hash NOT IN "
            "(SELECT token_hash FROM login_links ORDER BY created_at DESC LIMIT ?)",
            (MAX_LOGIN_LINKS,),
        )

    def take_login_link(self, token_hash: str, *, now: float) -> str | None:
        """Remove a login link and return its user, or ``None`` (unknown, used or expired)."""
        row = self._db.execute(
            "DELETE FROM login_links WHERE token_hash = ? RETURNING user, expires_at", (token_hash,)
        ).fetchone()
        if row is None or float(row[1]) <= now:
            return None
        return str(row[0])

    # -- audit

    def audit(self, *, user: str, action: str, target: str, detail: str, now: float) -> None:
        """Append an operator action to the audit log (target and detail cut to a bounded line)."""
        self._db.execute(
            "INSERT INTO audit(at, user, action, target, detail) VALUES (?, ?, ?, ?, ?)",
            (
                now,
                _printable(user, 64),
                action,
                _printable(target, MAX_AUDIT_TARGET),
                _printable(detail, MAX_AUDIT_DETAIL),
            ),
        )

    def prune_audit(self, *, before: float, keep: int) -> int:
        """Delete audit rows older than ``before`` and all but the newest ``keep``; how many went."""
        gone = self._db.execute("DELETE FROM audit WHERE at < ?", (before,)).rowcount
        gone += self._db.execute(
            "DELETE FROM audit WHERE id <= (SELECT MAX(id) FROM audit) - ?", (keep,)
        ).rowcount
        return max(0, gone)

    def audit_failed_login(self, *, key_id: str, user: str, address: str, reason: str, now: float) -> None:
        """Audit a failed login, collapsing repeats (action ``login-failed``, target the key id).

        Within one :data:`LOGIN_AUDIT_WINDOW_S` window, failures with the same key
        id, address and reason share one row whose ``count`` grows; past
        :data:`MAX_LOGIN_AUDIT_ROWS` rows in a window, the rest share a single
        ``*`` row. So a flood costs at most that many rows per window (and
        retention, :meth:`prune_audit`, bounds the table).

        Args:
            key_id: the key id presented (cut to 64 printable characters).
            user: the key's user, or "" when no such key exists.
            address: the client address without port.
            reason: why it failed, e.g. ``wrong secret``.
            now: Unix seconds.
        """
        if now - self._login_window_at >= LOGIN_AUDIT_WINDOW_S or now < self._login_window_at:
            self._login_window_at, self._login_rows = now, {}
        slot = (_printable(key_id), user, _printable(address), reason)
        if slot not in self._login_rows and len(self._login_rows) >= MAX_LOGIN_AUDIT_ROWS:
            slot = ("*", "*", "*", "more failed logins")
        row = self._login_rows.get(slot)
        if row is not None:
            self._db.execute("UPDATE audit SET count = count + 1 WHERE id = ?", (row,))
            return
        key, user, address, reason = slot
        cursor = self._db.execute(
            "INSERT INTO audit(at, user, action, target, detail) VALUES (?, ?, 'login-failed', ?, ?)",
            (now, user, key, f"from {address}: {reason}"),
        )
        assert cursor.lastrowid is not None
        self._login_rows[slot] = cursor.lastrowid

    def audit_log(self, *, limit: int = 100) -> list[AuditEntry]:
        """The newest audit entries, newest first."""
        rows = self._db.execute(
            "SELECT at, user, action, target, detail, count FROM audit ORDER BY id DESC LIMIT ?", (limit,)
        )
        return [
            AuditEntry(at=r[0], user=r[1], action=r[2], target=r[3], detail=r[4], count=r[5]) for r in rows
        ]


def _printable(text: str, limit: int = 64) -> str:
    # Key ids, endpoints, reasons come from strangers: keep the audit log short, one line per row.
    return "".join(c if c.isprintable() else "?" for c in text[:limit])


def _connect(path: Path | str) -> sqlite3.Connection:
    # The database and the files SQLite makes beside it (which take the
    # database file's mode) are private: users' key hashes and the audit log.
    if str(path) == ":memory:":
        return sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    with keyfile.private_umask():
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, keyfile.PRIVATE_MODE))
        for suffix in ("", *_SIDE_FILES):
            keyfile.make_private(Path(f"{path}{suffix}"))
        return sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)


_SIDE_FILES: Final = ("-wal", "-shm", "-journal")
_SUBSCRIPTION_COLUMNS: Final = (
    "subscription_id, user, symbols, created_at, updated_at, curve_key, valid_until, key_id, granted_at"
)


def _subscription(row: tuple[Any, ...]) -> SubscriptionRecord:
    return SubscriptionRecord(
        subscription_id=row[0],
        user=row[1],
        symbols=tuple(json.loads(row[2])),
        created_at=float(row[3]),
        updated_at=float(row[4]),
        curve_key=str(row[5]),
        valid_until=float(row[6]),
        key_id=str(row[7]),
        granted_at=float(row[8]),
    )
