"""The adapters' registry streams: who is connected, their registry records, and the commands sent them.

Theory of operation: :class:`AdapterStreams` owns the open stream of each
adapter (:class:`AdapterSession`, its command queue) and the
:class:`~admin_server.registry.Registry` those streams feed. A stream
registers (:meth:`AdapterStreams.attach`, after the policy binds the adapter
to the caller), reports, and ends; each change is decided by the registry
(pure), persisted in the store, counted, and published to the listeners.
Operator commands the registry planned are put on the target streams'
queues by :meth:`AdapterStreams.send`, audited and published.

Others read the registry's frozen :class:`~admin_server.registry.AdapterRecord`
values and the list of sessions; the data plane writes what it told each
session (``told``, ``sealing_with``: its own fields, see
:mod:`admin_server.dataplane`). Nothing here imports grpc.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from feedha.admin_server import access
from feedha.admin_server.config import ServerConfig
from feedha.admin_server.counters import HubCounters
from feedha.admin_server.errors import NotFoundError, PermissionDeniedError, PreconditionError
from feedha.admin_server.fanout import HubEvent
from feedha.admin_server.policy import PolicyFile, Principal
from feedha.admin_server.registry import Directive, Registry, RegistryEvent
from feedha.admin_server.store import Store
from feedha.proto.registry import AdapterRegistration, AdapterStatus

logger = logging.getLogger(__name__)

__all__ = ["COMMAND_QUEUE_SIZE", "AdapterSession", "AdapterStreams"]

COMMAND_QUEUE_SIZE: Final = 100


@dataclass(slots=True, eq=False)
class AdapterSession:
    """One connected adapter stream: its id and the queue of commands for it."""

    adapter_id: str
    user: str = ""  # who registered it: only that user may take the id over while it is live
    commands: asyncio.Queue[Directive] = field(default_factory=lambda: asyncio.Queue(COMMAND_QUEUE_SIZE))
    told: access.Grants | None = None  # the data-plane grants this adapter was last told (None: none yet)
    sealing_with: int | None = None  # the seal key id this adapter was last told to use


class AdapterStreams:
    """The connected adapters and their registry (see the module notes).

    Args:
        config: the server configuration (``adapter_auth``).
        store: the database (adapter records and the audit).
        policy_file: the policy (which user may register which adapter).
        counters: the server's counters (``registry_changes``, ``commands``).
        publish: gives an event to the listeners.
        on_change: called when an adapter registered (its data-plane access is due).
        clock: wall-clock seconds.
    """

    def __init__(
        self,
        config: ServerConfig,
        store: Store,
        policy_file: PolicyFile,
        *,
        counters: HubCounters,
        publish: Callable[[HubEvent], None],
        on_change: Callable[[], None],
        clock: Callable[[], float],
    ) -> None:
        self._config = config
        self._store = store
        self._policy_file = policy_file
        self._counters = counters
        self._publish = publish
        self._on_change = on_change
        self._clock = clock
        self.registry = Registry(store.load_adapters())
        self._sessions: dict[str, AdapterSession] = {}

    def __repr__(self) -> str:
        return f"<AdapterStreams [{self.registry!r}, sessions={len(self._sessions)}]>"

    def __len__(self) -> int:
        """Adapter streams connected now."""
        return len(self._sessions)

    def sessions(self) -> list[AdapterSession]:
        """The adapter streams connected now."""
        return list(self._sessions.values())

    def session(self, adapter_id: str) -> AdapterSession | None:
        """The live registry stream of an adapter, if it has one."""
        return self._sessions.get(adapter_id)

    def attach(self, registration: AdapterRegistration, principal: Principal) -> AdapterSession:
        """An adapter stream registered; a newer stream of the same user replaces the older one.

        Raises:
            PermissionDeniedError: the policy does not bind the adapter to the caller (audited).
            PreconditionError: another user's stream holds the adapter id (audited).
        """
        self._authorize_registration(registration, principal)
        session = AdapterSession(adapter_id=registration.adapter_id, user=principal.user)
        self._sessions[registration.adapter_id] = session
        self._apply(self.registry.on_register(registration, now=self._clock()), registration.adapter_id)
        logger.info("adapter %s registered on %s", registration.adapter_id, registration.channel_name)
        self._on_change()
        return session

    def _authorize_registration(self, registration: AdapterRegistration, principal: Principal) -> None:
        # Without adapter_auth every stream is the anonymous "adapter": nothing to bind.
        adapter_id, channel = registration.adapter_id, registration.channel_name
        error: PermissionDeniedError | PreconditionError | None = None
        if self._config.adapter_auth and not self._policy_file.policy.may_register(
            principal, channel_name=channel, adapter_id=adapter_id
        ):
            error = PermissionDeniedError(
                f"user {principal.user!r} is not bound to adapter {adapter_id!r} on channel {channel!r}",
                reason="ADAPTER_NOT_BOUND",
                metadata={"adapterId": adapter_id, "channel": channel},
            )
        held = self._sessions.get(adapter_id)
        if error is None and held is not None and held.user != principal.user:
            error = PreconditionError(
                f"adapter {adapter_id!r} is registered by a live session of another user",
                reason="ADAPTER_ID_IN_USE",
                metadata={"adapterId": adapter_id},
            )
        if error is None:
            return
        logger.warning("registration refused: %s", error)
        detail = f"channel={channel} line={registration.line_endpoint}: {error}"
        self._store.audit(
            user=principal.user,
            action="register-refused",
            target=adapter_id,
            detail=detail,
            now=self._clock(),
        )
        raise error

    def report(self, session: AdapterSession, status: AdapterStatus) -> None:
        """An adapter reported its status."""
        if self._sessions.get(session.adapter_id) is not session:
            return  # superseded by a newer stream for the same adapter
        self._apply(
            self.registry.on_status(session.adapter_id, status, now=self._clock()), session.adapter_id
        )

    def detach(self, session: AdapterSession) -> None:
        """An adapter stream ended: mark the adapter down unless a newer stream took over."""
        if self._sessions.get(session.adapter_id) is not session:
            return
        del self._sessions[session.adapter_id]
        self._apply(self.registry.on_disconnect(session.adapter_id, now=self._clock()), session.adapter_id)
        logger.info("adapter %s down", session.adapter_id)

    def _apply(self, events: list[RegistryEvent], adapter_id: str) -> None:
        with contextlib.suppress(NotFoundError):
            self._store.save_adapter(self.registry.get(adapter_id))
        for ev in events:
            self._counters.count(self._counters.registry_changes, ev.kind.value)
            self._publish(
                HubEvent(
                    at=self._clock(),
                    kind=ev.kind.value,
                    channel_name=ev.channel_name,
                    adapter_id=ev.adapter_id,
                    detail=ev.detail,
                    routes_changed=ev.routes_changed,
                )
            )

    def send(
        self, principal: Principal, action: str, target: str, directives: list[Directive]
    ) -> list[Directive]:
        """Deliver planned operator commands to the adapters' streams and audit them.

        Raises:
            PreconditionError: a target adapter has no open stream, or is not reading its commands.
        """
        missing = [d.adapter_id for d in directives if d.adapter_id not in self._sessions]
        if missing:
            raise PreconditionError(
                f"adapter(s) not connected: {', '.join(missing)}",
                reason="ADAPTER_NOT_CONNECTED",
                metadata={"adapterIds": " ".join(missing)},
            )
        for directive in directives:
            self._deliver(principal, action, directive)
        logger.info("operator %s: %s %s -> %d command(s)", principal.user, action, target, len(directives))
        return directives

    def _deliver(self, principal: Principal, action: str, directive: Directive) -> None:
        command = directive.command
        detail = f"{command.kind.value} term={command.term} rate={command.rate} {command.reason}".strip()
        try:
            self._sessions[directive.adapter_id].commands.put_nowait(directive)
        except asyncio.QueueFull:
            raise PreconditionError(
                f"adapter {directive.adapter_id!r} is not reading its commands",
                reason="ADAPTER_NOT_READING",
                metadata={"adapterId": directive.adapter_id},
            ) from None
        self._counters.count(self._counters.commands, action)
        self._store.audit(
            user=principal.user, action=action, target=directive.adapter_id, detail=detail, now=self._clock()
        )
        channel = self.registry.get(directive.adapter_id).channel_name
        self._publish(
            HubEvent(
                at=self._clock(),
                kind="command",
                channel_name=channel,
                adapter_id=directive.adapter_id,
                detail=f"{detail} by {principal.user}",
            )
        )
