"""The adapter's link to the stream administration server.

The admin server is a control plane: the adapter registers, reports its
role, term, position and health, and takes operator commands, but data
never waits for it. :class:`AdminLink` runs the admin client's
:class:`~admin_client.agent.RegistryAgent` on its own
thread and event loop. The runner hands it the core's latest
:class:`~adapter.core.SyncView` (a frozen value, so the agent's thread
reads it without a lock) and drains the commands it received, already
translated into the core's :mod:`~adapter.core.commands`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from typing import Any

from feedha.adapter.config import AdapterConfig
from feedha.adapter.core import SyncView
from feedha.adapter.core.access_desk import AccessChange, SealChange
from feedha.adapter.core.commands import Command, ControlError, EndSession, Purge, RoleCommand, Throttle
from feedha.adapter.core.sync_types import CommandKind, Role
from feedha.adapter.errors import ConfigError
from feedha.admin_client import AdminClientError, RegistryAgent, tls_from_files
from feedha.proto.registry import AdapterRegistration, AdapterRole, AdapterStatus, CommandResult, SyncStatus
from feedha.proto.registry import Command as RegistryCommand
from feedha.proto.registry import CommandKind as RegistryCommandKind

logger = logging.getLogger(__name__)

# Commands about the data plane's keys: frequent and not an operator's doing (not logged one by one).
_DATA_PLANE = frozenset({RegistryCommandKind.GRANT, RegistryCommandKind.REVOKE, RegistryCommandKind.SEAL})

STATUS_INTERVAL_S = 0.5


def registry_status(view: SyncView) -> AdapterStatus:
    """The registry's view of an adapter (roles and statuses share their names)."""
    return AdapterStatus(
        role=AdapterRole(view.role.value),
        term=view.term,
        next_msg_seq=view.next_msg_seq,
        sync_status=SyncStatus.BEHIND if view.behind else SyncStatus(view.status.value),
        health_score=view.health_score,
        lag=view.lag,
    )


def core_command(command: RegistryCommand) -> Command | AccessChange | SealChange:
    """A command from the admin server as the core takes it: an operator command, an access or seal change."""
    if command.kind is RegistryCommandKind.SEAL:
        assert command.seal_key is not None  # command_from_proto refuses a SEAL without one
        return SealChange(command.seal_key)
    if command.kind in (RegistryCommandKind.GRANT, RegistryCommandKind.REVOKE):
        grants = tuple(
            (g.curve_public_key, g.expires_at_ns, g.delayed_only, g.conflated_only, g.owner)
            for g in command.grants
        )
        return AccessChange(grants, command.kind is RegistryCommandKind.REVOKE, command.replace_grants)
    if command.kind is RegistryCommandKind.THROTTLE:
        return Throttle(max(0.0, command.rate))
    if command.kind is RegistryCommandKind.SESSION_END:
        return EndSession((command.reason or f"operator {command.issued_by}".strip())[:200])
    if command.kind is RegistryCommandKind.PURGE:
        assert command.purge is not None  # command_from_proto refuses a PURGE without one
        purge = command.purge
        return Purge(
            first=purge.first_msg_seq,
            last=purge.last_msg_seq,
            all_pending=purge.all_pending,
            reason=command.reason,
            issued_by=command.issued_by,
            command_id=command.command_id,
        )
    reason = command.reason or f"operator {command.issued_by}".strip()
    return RoleCommand(CommandKind(command.kind.value), reason, command.force)


def command_result(command_id: str, reply: dict[str, Any]) -> CommandResult:
    """The core's reply to a command (a purge) as the registry's :class:`CommandResult`."""

    def number(name: str) -> int:
        value = reply.get(name, 0)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

    def adapters(name: str) -> tuple[int, ...]:
        return tuple(n for n in reply.get(name, ()) if isinstance(n, int))

    return CommandResult(
        command_id=command_id,
        ok=bool(reply.get("ok")),
        error_reason=str(reply.get("reason", "")),
        message=str(reply.get("error", "")),
        purge_id=number("purge_id"),
        first_msg_seq=number("first_msg_seq"),
        last_msg_seq=number("last_msg_seq"),
        confirmed=adapters("confirmed"),
        unconfirmed=adapters("unconfirmed"),
        frontier_msg_seq=number("frontier"),
        last_msg_seq_journaled=number("journal_last"),
    )


class AdminLink:
    """Keeps one adapter registered with the admin server, on a background thread.

    Args:
        config: the adapter's configuration (``admin`` must be set).
        view: the core's standing at start.
    """

    def __init__(self, config: AdapterConfig, view: SyncView, *, curve_public_key: str = "") -> None:
        if config.admin is None:
            raise ValueError("AdminLink needs config.admin")
        self.view = view  # replaced whole by the runner; read by the agent's thread
        self._commands: queue.SimpleQueue[RegistryCommand] = queue.SimpleQueue()
        self._target = config.admin
        self._registration = AdapterRegistration(
            feed=config.feed,
            channel_name=config.channel,
            channel_number=config.channel_number,
            adapter_id=config.adapter_id,
            line_endpoint=config.line_endpoint,
            replay_endpoint=config.replay_endpoint or "",
            sync_endpoint=config.sync_endpoint,
            role=AdapterRole(Role.BACKUP.value),
            term=config.term,
            curve_public_key=curve_public_key,
            delayed_line_endpoint=config.delayed_line_endpoint or "",
            conflated_line_endpoint=config.conflate_line_endpoint or "",
            input_format=config.input_format,
        )
        self._credentials = config.admin_credentials
        try:  # read at start: a missing file is a configuration error, not a link that never comes up
            tls = tls_from_files(config.admin_tls_ca, config.admin_tls_cert, config.admin_tls_key)
            self._tls = tls or (False if config.insecure else None)  # False: plaintext on purpose
        except (AdminClientError, ValueError) as exc:
            raise ConfigError(str(exc)) from exc
        self._loop: asyncio.AbstractEventLoop | None = None
        self._agent: RegistryAgent | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="admin-link", daemon=True)
        self._started = threading.Event()

    def __repr__(self) -> str:
        return f"<AdminLink [target={self._target}, alive={self._thread.is_alive()}]>"

    def start(self) -> None:
        """Start the link's thread; returns once its event loop runs."""
        self._thread.start()
        self._started.wait(5)

    def stop(self) -> None:
        """Ask the link to unregister and stop; waits briefly for the thread."""
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=5)

    def commands(self) -> list[Command | AccessChange | SealChange]:
        """The commands received since the last call, typed for the core."""
        received: list[Command | AccessChange | SealChange] = []
        while not self._commands.empty():
            command = self._commands.get_nowait()
            if command.kind not in _DATA_PLANE:
                by, why = command.issued_by, command.reason
                logger.info("operator command %s from %s: %s", command.kind.value, by, why)
            try:
                received.append(core_command(command))
            except ControlError as exc:  # a malformed purge: refused here, the core never sees it
                self.report(command.command_id, {"ok": False, "reason": "BAD_REQUEST", "error": str(exc)})
        return received

    def report(self, command_id: str, reply: dict[str, Any]) -> None:
        """Send a command's reply to the admin server (from the runner's thread; dropped without an id)."""
        loop, agent = self._loop, self._agent
        if not command_id or loop is None or agent is None:
            return
        loop.call_soon_threadsafe(agent.report_result, command_result(command_id, reply))

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._started.set()

        async def on_command(command: RegistryCommand) -> None:
            self._commands.put(command)

        agent = RegistryAgent(
            self._target,
            self._registration,
            lambda: registry_status(self.view),
            on_command,
            credentials=self._credentials,
            tls=self._tls,
            interval_s=STATUS_INTERVAL_S,
        )
        self._agent = agent
        with contextlib.suppress(asyncio.CancelledError):
            async with agent:
                await self._stop.wait()
