"""The stream administration server: login, authorization policy, adapter registry, brokering, feedctl.

See docs/admin-server.md. The adapter side of the registry moved out of this
package: :class:`~admin_client.RegistryAgent` is in ``admin_client`` and the
registry's contract types are in ``proto.registry``. They are re-exported here
for code written against the old names; new code imports them from there.
"""

from __future__ import annotations

from feedha.admin_client.agent import CommandHandler, RegistryAgent, StatusSource
from feedha.proto.registry import (
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
