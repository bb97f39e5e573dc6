"""Operating an adapter: the admin server link, the control socket and status reports.

A mixin of :class:`adapter.runner.AdapterRunner`: these methods run on the
runner's loop thread (except :meth:`OperationsMixin._admin_status`, which the
admin link calls on its own thread and which only reads) and turn operator
commands into events for the sync rules.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from adapter.admin_link import AdminLink
from adapter.config import AdapterConfig
from adapter.sequencer import Sequencer
from adapter.state import ConversionState
from adapter.sync import CommandKind, OperatorCommand, Role, SyncEvent, SyncState, SyncStatus
from proto.registry import AdapterRegistration, AdapterRole, AdapterStatus
from proto.registry import CommandKind as AdminCommandKind
from proto.registry import SyncStatus as AdminSyncStatus

if TYPE_CHECKING:
    import zmq

    from adapter.persistence import JournalKeeper

logger = logging.getLogger(__name__)

_ADMIN_ROLES: Final = {
    Role.ACTIVE: AdapterRole.ACTIVE,
    Role.BACKUP: AdapterRole.BACKUP,
    Role.FAILED: AdapterRole.FAILED,
}
_ADMIN_SYNC: Final = {
    SyncStatus.IN_SYNC: AdminSyncStatus.IN_SYNC,
    SyncStatus.SYNCING: AdminSyncStatus.SYNCING,
    SyncStatus.AHEAD: AdminSyncStatus.AHEAD,
    SyncStatus.FAILED: AdminSyncStatus.FAILED,
}
_OPERATOR_COMMANDS: Final = {
    AdminCommandKind.PROMOTE: CommandKind.PROMOTE,
    AdminCommandKind.DEMOTE: CommandKind.DEMOTE,
    AdminCommandKind.FAIL: CommandKind.FAIL,
}


class OperationsMixin:
    """Admin link, control socket and status of an adapter runner."""

    # Provided by AdapterRunner.
    config: AdapterConfig
    sync: SyncState
    sequencer: Sequencer
    conversion: ConversionState
    counters: dict[str, int]
    journal: JournalKeeper | None
    _admin: AdminLink | None
    _control: zmq.Socket[bytes] | None
    _on_status: Callable[[dict[str, Any]], None]
    _active_position: int
    _rate_limit: float
    _drop_every: int
    _drop_left: int
    _drop_tick: int

    def _apply(self, event: SyncEvent) -> None:
        raise NotImplementedError

    # ---- admin server ----------------------------------------------------------------

    def _start_admin_link(self, target: str) -> AdminLink:
        cfg = self.config
        registration = AdapterRegistration(
            feed=cfg.feed,
            channel_name=cfg.channel,
            channel_number=cfg.channel_number,
            adapter_id=cfg.adapter_id,
            line_endpoint=cfg.line_endpoint,
            replay_endpoint=cfg.replay_endpoint or "",
            sync_endpoint=cfg.sync_endpoint,
            role=_ADMIN_ROLES[self.sync.role],
            term=self.sync.term,
        )
        link = AdminLink(target, registration, self._admin_status, credentials=cfg.admin_credentials)
        link.start()
        return link

    def _admin_status(self) -> AdapterStatus:
        # Called on the admin link's thread: plain reads of fields the loop
        # replaces whole, so a report is at worst one step stale.
        sync = self.sync
        lag = max(0, self._active_position - self.sequencer.last_source_seq)
        status = _ADMIN_SYNC[sync.status]
        if (
            sync.role is Role.BACKUP
            and status is AdminSyncStatus.IN_SYNC
            and lag > self.config.sync.ahead_tolerance
        ):
            status = AdminSyncStatus.BEHIND
        return AdapterStatus(
            role=_ADMIN_ROLES[sync.role],
            term=sync.term,
            next_msg_seq=self.sequencer.next_msg_seq,
            sync_status=status,
            health_score=sync.health_score,
            lag=lag if sync.role is Role.BACKUP else 0,
        )

    def _drain_admin_commands(self) -> None:
        assert self._admin is not None
        while not self._admin.commands.empty():
            command = self._admin.commands.get_nowait()
            logger.info(
                "operator command %s from %s: %s", command.kind.value, command.issued_by, command.reason
            )
            if command.kind is AdminCommandKind.THROTTLE:
                self._rate_limit = max(0.0, command.rate)
            else:
                reason = command.reason or f"operator {command.issued_by}".strip()
                self._apply(OperatorCommand(_OPERATOR_COMMANDS[command.kind], reason))

    # ---- control socket -------------------------------------------------------------

    def _serve_control(self) -> None:
        assert self._control is not None
        try:
            request = json.loads(self._control.recv())
            reply = self.control(str(request.get("cmd", "")), request)
        except (ValueError, AttributeError, TypeError) as exc:
            reply = {"ok": False, "error": f"bad request: {exc}"}
        self._control.send(json.dumps(reply).encode())

    def control(self, cmd: str, request: dict[str, Any]) -> dict[str, Any]:
        """Handle one operator/drill command; returns the JSON-able reply."""
        kinds = {"promote": CommandKind.PROMOTE, "demote": CommandKind.DEMOTE, "fail": CommandKind.FAIL}
        if cmd == "status":
            return {"ok": True, **self.snapshot_status()}
        if cmd in kinds:
            self._apply(OperatorCommand(kinds[cmd], str(request.get("reason", "operator"))))
            return {"ok": True, **self.snapshot_status()}
        if cmd == "throttle":
            self._rate_limit = max(0.0, float(request["rate"]))
            return {"ok": True, "rate": self._rate_limit}
        if cmd == "drop":
            # Fault injection for tests: skip sending every k-th packet, n times (still journaled).
            self._drop_every = max(1, int(request.get("every", 1)))
            self._drop_left = max(0, int(request.get("count", 1)))
            self._drop_tick = 0
            return {"ok": True, "every": self._drop_every, "count": self._drop_left}
        if cmd == "penalty":
            self.config = replace(self.config, health_penalty=float(request["value"]))
            return {"ok": True}
        if cmd == "corrupt_state":
            # Fault injection for drills and tests: skew every symbol's volume.
            for symbol, values in self.conversion.snapshot().items():
                values.volume += int(request.get("delta", 1000))
                self.conversion.set_symbol(symbol, values)
            self.sequencer.restate_digests({self.sequencer.last_recorded_source_seq: self.conversion.digest})
            return {"ok": True, "digest": self.conversion.digest}
        return {"ok": False, "error": f"unknown command {cmd!r}"}

    def snapshot_status(self) -> dict[str, Any]:
        """Role, term, position and counters, for status replies and the registry."""
        sync = self.sync
        return {
            "adapter": self.config.adapter,
            "channel": self.config.channel,
            "role": sync.role.value,
            "status": sync.status.value,
            "term": sync.term,
            "active": sync.active,
            "throttled": sync.throttled,
            "health": round(sync.health_score, 1),
            "next_msg_seq": self.sequencer.next_msg_seq,
            "last_source_seq": self.sequencer.last_source_seq,
            "digest": self.conversion.digest,
            "symbols": len(self.conversion),
            "journal_last_msg_seq": None if self.journal is None else self.journal.last_msg_seq,
            **self.counters,
        }

    def _status(self, event: str, **fields: Any) -> None:
        self._on_status({"event": event, "adapter": self.config.adapter, "time_ns": time.time_ns(), **fields})
