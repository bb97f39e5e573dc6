"""The stream administration server: login, authorization policy, adapter registry, brokering, feedctl.

Public names for adapters and embedders; see docs/admin-server.md.
"""

from __future__ import annotations

from admin_server.agent import CommandHandler, RegistryAgent, StatusSource
from admin_server.registry import (
    AdapterRegistration,
    AdapterRole,
    AdapterStatus,
    Command,
    CommandKind,
    SyncStatus,
)

__all__ = [
    "AdapterRegistration",
    "AdapterRole",
    "AdapterStatus",
    "Command",
    "CommandHandler",
    "CommandKind",
    "RegistryAgent",
    "StatusSource",
    "SyncStatus",
]
