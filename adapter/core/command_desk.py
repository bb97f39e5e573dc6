"""Operator and admin-server commands to the adapter core, and where their replies go.

:class:`CommandDesk` carries out a command (a role change, a throttle, a
purge, fault injection ...) through the parts that own what it changes, and
owns the one thing commands share: which reply is still owed, and to whom
(a purge's reply waits for the group's acks; a control request's reply then
goes back to the control socket, which is not read meanwhile).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from feedha.adapter.core.access_desk import AccessChange, SealChange
from feedha.adapter.core.actions import Action, CommandDone, ReplyAdmin, ReplyControl
from feedha.adapter.core.commands import (
    Busy,
    Command,
    ControlError,
    CorruptState,
    DropPackets,
    EndSession,
    Penalty,
    Purge,
    RoleCommand,
    ShowStatus,
    Throttle,
    decode_request,
)
from feedha.adapter.core.driver import Driver
from feedha.adapter.core.parts import CoreParts
from feedha.adapter.core.source_side import SourceSide
from feedha.adapter.core.sync import OperatorCommand
from feedha.adapter.core.turn import Turn

__all__ = ["CommandDesk"]

_FAULT_INJECTION = (DropPackets, CorruptState, Penalty, Busy)


class CommandDesk:
    """Commands from the control socket and the admin server, and their owed replies.

    Args:
        parts: the core's parts.
        driver: the sync rules' state and the carrying out of the parts' answers.
        source: the source's side (the operator's throttle).
        status: the core's status (the reply to ``status`` and role commands).
    """

    def __init__(
        self, parts: CoreParts, driver: Driver, source: SourceSide, status: Callable[[], dict[str, Any]]
    ) -> None:
        self._parts, self._driver, self._source, self._status = parts, driver, source, status
        self._waiting = ""  # the command id of the control request whose reply is deferred
        self._controls = 0  # control requests numbered so far (their command ids)
        self._deferred = 0  # commands whose reply comes later (a purge waiting for acks)

    def reads_control(self) -> bool:
        """Whether the control socket is read now (not while its last request's reply is deferred)."""
        return not self._waiting

    def on_control(self, request: bytes, *, now: float, wall_ns: int) -> list[Action]:
        """A request on the local control socket (JSON); its reply comes as :class:`ReplyControl`."""
        try:
            command: Command = decode_request(request)
        except ControlError as exc:
            return [ReplyControl({"ok": False, "error": f"bad request: {exc}"})]
        if isinstance(command, Purge):
            self._controls += 1
            command = replace(command, command_id=f"control-{self._controls}")
        reply, actions = self.on_command(command, now=now, wall_ns=wall_ns)
        if reply.get("deferred") and isinstance(command, Purge):
            self._waiting = command.command_id  # answered by its CommandDone
            return actions
        return [*actions, ReplyControl(reply)]

    def on_admin(
        self, command: Command | AccessChange | SealChange, *, now: float, wall_ns: int
    ) -> list[Action]:
        """A command from the admin server; a purge's reply goes back as :class:`ReplyAdmin`.

        Access and seal changes become the shell's actions, timed by the access desk.
        """
        if isinstance(command, AccessChange | SealChange):
            return self._parts.access.on_change(command, now=now)
        reply, actions = self.on_command(command, now=now, wall_ns=wall_ns)
        if isinstance(command, Purge) and not reply.get("deferred"):
            actions.append(ReplyAdmin(command.command_id, reply))
        return actions

    def on_command(
        self, command: Command, *, now: float, wall_ns: int
    ) -> tuple[dict[str, Any], list[Action]]:
        """Carry out an operator command; returns the reply and the actions."""
        driver, parts = self._driver, self._parts
        turn = driver.turn(now, wall_ns)
        driver.rejection = None
        if isinstance(command, _FAULT_INJECTION) and not parts.config.fault_injection:
            return {
                "ok": False,
                "error": "fault injection is off (start the adapter with --allow-fault-injection)",
            }, []
        if isinstance(command, EndSession):
            reply, steps = parts.sessions.request_end(driver.session_view(), command.reason)
            driver.carry(steps, turn)
            return reply, turn.out
        if isinstance(command, Purge):
            reply = parts.delayed.on_command(command, driver.purge_context(), turn.out)
            self._deferred += bool(reply.get("deferred"))
            return reply, self.replies(turn)
        reply = self._tune(command, turn)
        driver.carry(parts.gaps.decide(driver.gap_view()), turn)
        if driver.rejection is not None:
            reply = {"ok": False, "error": driver.rejection}
        elif isinstance(command, ShowStatus | RoleCommand):
            reply.update(self._status())
        parts.conflated.observe(turn.out)
        return reply, turn.out

    def _tune(self, command: Command, turn: Turn) -> dict[str, Any]:
        # The commands that change how this adapter runs (role, throttle, fault injection).
        parts = self._parts
        reply: dict[str, Any] = {"ok": True}
        if isinstance(command, RoleCommand):
            self._driver.apply(OperatorCommand(command.kind, command.reason, command.force), turn)
        elif isinstance(command, Throttle):
            self._source.limit(command.rate)
            reply["rate"] = command.rate
        elif isinstance(command, DropPackets):
            parts.emitter.output.inject_drops(every=command.every, count=command.count)
            reply.update(every=command.every, count=command.count)
        elif isinstance(command, Penalty):
            parts.health.penalty = command.value
        elif isinstance(command, CorruptState):
            parts.pipeline.corrupt(command.delta)
            reply["digest"] = parts.state.digest
        elif isinstance(command, Busy):
            reply.update(parts.busy.arm(where=command.where, ms=command.ms, turns=command.turns,
                                        hold_gil=command.gil))  # fmt: skip
        return reply

    def replies(self, turn: Turn) -> list[Action]:
        """The turn's actions, a deferred command's reply (``CommandDone``) sent where the command came from.

        The control socket's waiting request, or the admin server.
        """
        if not self._deferred:
            return turn.out
        out: list[Action] = []
        for action in turn.out:
            if type(action) is not CommandDone:
                out.append(action)
                continue
            self._deferred = max(0, self._deferred - 1)
            if action.command_id == self._waiting:
                self._waiting = ""
                out.append(ReplyControl(action.reply))
            else:
                out.append(ReplyAdmin(action.command_id, action.reply))
        return out
