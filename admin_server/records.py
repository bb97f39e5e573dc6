"""What the admin server's store keeps, as plain frozen data.

Users, API keys, subscriptions and their leases, audit rows, and an adapter
record's JSON form: :class:`~feedha.admin_server.store.Store` reads and writes
them in SQLite; the services hand them around.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple

from feedha.admin_server.registry import AdapterRecord
from feedha.proto.registry import (
    AdapterRegistration,
    AdapterRole,
    AdapterStatus,
    SyncStatus,
    registration_values,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class UserRecord:
    """A user of the key store."""

    name: str
    groups: frozenset[str]
    roles: frozenset[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiKey:
    """A stored API key (the secret only as its hash)."""

    key_id: str
    user: str
    secret_hash: str
    rotated_at: float


class Lease(NamedTuple):
    """The token behind a subscription's data-plane access: until when, and which key issued it when.

    Rotating or removing that key ends the access (the admin server checks at
    every reconciliation), as it ends the token.
    """

    valid_until: float = 0.0
    key_id: str = ""
    granted_at: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionRecord:
    """A stored subscription."""

    subscription_id: str
    user: str
    symbols: tuple[str, ...]
    created_at: float
    updated_at: float
    curve_key: str = ""  # the subscriber's Z85 CURVE public key ("": none)
    valid_until: float = 0.0  # its data-plane access lasts until then (its owner's token expiry)
    key_id: str = ""  # the API key of the token that granted that access ("": not recorded)
    granted_at: float = 0.0  # when that token was issued (a later rotation of the key ends the access)


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    """One operator action, or repeated failed logins (``count`` of them from ``at`` on)."""

    at: float
    user: str
    action: str
    target: str
    detail: str
    count: int = 1


def encode_record(record: AdapterRecord) -> str:
    """An adapter record as JSON text."""
    reg, status = record.registration, record.status
    return json.dumps(
        {
            "registration": registration_values(reg),
            "status": {
                "role": status.role.value,
                "term": status.term,
                "next_msg_seq": status.next_msg_seq,
                "sync_status": status.sync_status.value,
                "health_score": status.health_score,
                "lag": status.lag,
            },
            "is_up": record.is_up,
            "updated_at": record.updated_at,
        },
        sort_keys=True,
    )


def decode_record(text: str) -> AdapterRecord:
    """An adapter record from :func:`encode_record` JSON text."""
    raw: dict[str, Any] = json.loads(text)
    reg, status = dict(raw["registration"]), dict(raw["status"])
    reg["role"] = AdapterRole(reg["role"])
    status["role"] = AdapterRole(status["role"])
    status["sync_status"] = SyncStatus(status["sync_status"])
    return AdapterRecord(
        registration=AdapterRegistration(**reg),
        status=AdapterStatus(**status),
        is_up=bool(raw["is_up"]),
        updated_at=float(raw["updated_at"]),
    )
