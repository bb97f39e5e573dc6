"""Operators' purges (``feedctl purge``): checked here, decided by the channel's active adapter.

Theory of operation
-------------------
A purge names messages still pending on a channel's delayed line. The admin
server checks what it can alone -- the channel exists, the range holds no
``msg_seq`` 0 and is not reversed, a reason is given, not too many purges are
in flight -- then sends ``PURGE`` with a command id to the channel's active
adapter and waits for its :class:`~proto.registry.CommandResult` (the adapter
answers once its backups hold the purge, or after a second naming the ones
that did not). The adapter decides whether the messages are still pending;
its refusal comes back with a reason (``ALREADY_DELIVERED``, ``BEYOND_END``
...) that becomes the gRPC status here. Every purge, accepted or refused, is
audited with the operator's name and reason.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from feedha.admin_server.adapters import AdapterSession, AdapterStreams
from feedha.admin_server.config import ChannelConfig
from feedha.admin_server.counters import HubCounters
from feedha.admin_server.errors import (
    AdminError,
    FieldViolation,
    InvalidArgumentError,
    NotFoundError,
    PreconditionError,
    ResourceExhaustedError,
    UnavailableError,
)
from feedha.admin_server.fanout import HubEvent
from feedha.admin_server.policy import Principal
from feedha.admin_server.registry import Directive
from feedha.admin_server.store import Store
from feedha.proto.registry import Command, CommandKind, CommandResult, PurgeRange

logger = logging.getLogger(__name__)

__all__ = ["MAX_IN_FLIGHT", "PurgeDesk", "PurgeOutcome", "PurgeSpec"]

ANSWER_TIMEOUT_S: Final = 5.0  # the active answers within about a second (its backups' acknowledgements)
MAX_IN_FLIGHT: Final = 16  # purges waiting for an adapter's answer at once (a flood is refused)
MAX_REASON_CHARS: Final = 200
MAX_MSG_SEQ: Final = (1 << 63) - 1
# The adapter's refusal reasons, and what they are on the wire.
_UNAVAILABLE: Final = frozenset({"NOT_ACTIVE", "CATCHING_UP"})
_EXHAUSTED: Final = frozenset({"TOO_MANY", "BOOK_FULL"})
_INVALID: Final = frozenset({"BAD_REQUEST"})


@dataclass(frozen=True, slots=True, kw_only=True)
class PurgeSpec:
    """What an operator asked to purge (a ``PurgeRequest``)."""

    channel: str
    first_msg_seq: int = 0
    last_msg_seq: int = 0  # 0: first_msg_seq alone
    all_pending: bool = False
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class PurgeOutcome:
    """An accepted purge, as the active adapter reported it."""

    purge_id: int
    first_msg_seq: int
    last_msg_seq: int
    adapter_id: str
    confirmed: tuple[str, ...]
    unconfirmed: tuple[str, ...]

    @property
    def count(self) -> int:
        return self.last_msg_seq - self.first_msg_seq + 1


class PurgeDesk:
    """The admin server's side of purges: checks, the adapter's answer, the audit.

    It owns the purges waiting for their adapter's answer.

    Args:
        adapters: the adapter streams and their registry (the channel's active, its queue).
        channels: the configured channels.
        store: the database (the audit).
        counters: the server's counters (``purges``, ``commands``).
        publish: gives an event to the listeners.
        clock: wall-clock seconds.
    """

    def __init__(
        self,
        adapters: AdapterStreams,
        channels: Sequence[ChannelConfig],
        *,
        store: Store,
        counters: HubCounters,
        publish: Callable[[HubEvent], None],
        clock: Callable[[], float],
    ) -> None:
        self._adapters = adapters
        self._channels = channels
        self._store = store
        self._counters = counters
        self._publish = publish
        self._clock = clock
        self._waiting: dict[str, asyncio.Future[CommandResult]] = {}

    def __repr__(self) -> str:
        return f"<PurgeDesk [in_flight={len(self._waiting)}]>"

    def on_result(self, session: AdapterSession, result: CommandResult) -> None:
        """An adapter answered a command (results of unknown or expired ids are dropped)."""
        future = self._waiting.get(result.command_id)
        if future is None or future.done():
            logger.info(
                "adapter %s: result for unknown command %r dropped", session.adapter_id, result.command_id
            )
            return
        future.set_result(result)

    async def purge(self, principal: Principal, spec: PurgeSpec) -> PurgeOutcome:
        """Check ``spec``, have the channel's active decide, audit the outcome.

        Raises:
            InvalidArgumentError: a bad range or no reason (the field named).
            NotFoundError: no such channel.
            ResourceExhaustedError: too many purges in flight, or the adapter's limits.
            UnavailableError: no active adapter connected, or it did not answer in time.
            PreconditionError: the adapter refused (already delivered, beyond the end ...).
        """
        try:
            first, last = _check(spec, {c.name for c in self._channels})
            adapter_id, result = await self._ask(principal, spec, first, last)
        except AdminError as exc:
            self._account(principal, spec, f"refused ({exc.reason}): {exc}", exc.reason)
            raise
        if not result.ok:
            error = _refusal(result, adapter_id)
            self._account(principal, spec, f"refused by {adapter_id} ({error.reason}): {error}", error.reason)
            raise error
        outcome = PurgeOutcome(
            purge_id=result.purge_id,
            first_msg_seq=result.first_msg_seq,
            last_msg_seq=result.last_msg_seq,
            adapter_id=adapter_id,
            confirmed=tuple(f"{spec.channel}.{n}" for n in result.confirmed),
            unconfirmed=tuple(f"{spec.channel}.{n}" for n in result.unconfirmed),
        )
        detail = (
            f"purge {outcome.purge_id}: msg_seq {outcome.first_msg_seq}..{outcome.last_msg_seq} "
            f"({outcome.count}) by {adapter_id}; {spec.reason}"
        )
        self._account(principal, spec, detail, "accepted")
        return outcome

    async def _ask(
        self, principal: Principal, spec: PurgeSpec, first: int, last: int
    ) -> tuple[str, CommandResult]:
        if len(self._waiting) >= MAX_IN_FLIGHT:
            raise ResourceExhaustedError(
                f"{MAX_IN_FLIGHT} purges are already waiting for their adapters; try again",
                reason="TOO_MANY_PURGES",
            )
        active = self._adapters.registry.active(spec.channel)
        session = None if active is None else self._adapters.session(active.adapter_id)
        if active is None or session is None:
            raise UnavailableError(
                f"channel {spec.channel} has no active adapter connected", reason="NO_ACTIVE_ADAPTER"
            )
        command_id = secrets.token_hex(8)
        command = Command(
            kind=CommandKind.PURGE,
            reason=spec.reason,
            issued_by=principal.user,
            command_id=command_id,
            purge=PurgeRange(first, last, spec.all_pending),
        )
        future: asyncio.Future[CommandResult] = asyncio.get_running_loop().create_future()
        self._waiting[command_id] = future
        try:
            session.commands.put_nowait(Directive(adapter_id=active.adapter_id, command=command))
        except asyncio.QueueFull:
            del self._waiting[command_id]
            raise UnavailableError(
                f"adapter {active.adapter_id} is not reading its commands", reason="ADAPTER_NOT_READING"
            ) from None
        try:
            return active.adapter_id, await asyncio.wait_for(future, ANSWER_TIMEOUT_S)
        except TimeoutError:
            raise UnavailableError(
                f"adapter {active.adapter_id} did not answer within {ANSWER_TIMEOUT_S:g}s; the purge may or "
                "may not have been accepted: see `feedha journal dump` or try again",
                reason="ADAPTER_DID_NOT_ANSWER",
            ) from None
        finally:
            self._waiting.pop(command_id, None)

    def _account(self, principal: Principal, spec: PurgeSpec, detail: str, result: str) -> None:
        counters = self._counters
        counters.count(counters.purges, result)
        counters.count(counters.commands, "purge")
        what = (
            "all pending"
            if spec.all_pending
            else f"{spec.first_msg_seq}..{spec.last_msg_seq or spec.first_msg_seq}"
        )
        self._store.audit(
            user=principal.user,
            action="purge",
            target=f"{spec.channel[:64]}/{what}",
            detail=detail[:512],
            now=self._clock(),
        )
        self._publish(
            HubEvent(
                at=self._clock(),
                kind="command",
                channel_name=spec.channel,
                detail=f"{detail} by {principal.user}",
            )
        )
        logger.info("operator %s: purge %s of %s: %s", principal.user, what, spec.channel, detail)


def _check(spec: PurgeSpec, channels: set[str]) -> tuple[int, int]:
    """The range to send, or the reason the request is refused before any adapter is asked."""
    if spec.channel not in channels:
        raise NotFoundError(
            f"unknown channel {spec.channel[:64]!r}",
            reason="CHANNEL_NOT_FOUND",
            metadata={"channel": spec.channel[:64]},
        )
    if not spec.reason.strip() or len(spec.reason) > MAX_REASON_CHARS:
        raise _invalid(
            "reason", "REASON_REQUIRED", f"a purge needs a reason of 1..{MAX_REASON_CHARS} characters"
        )
    if spec.all_pending:
        if spec.first_msg_seq or spec.last_msg_seq:
            raise _invalid("all_pending", "RANGE_WITH_ALL_PENDING", "all_pending takes no msg_seq")
        return 0, 0
    first, last = spec.first_msg_seq, spec.last_msg_seq or spec.first_msg_seq
    if first < 1:
        raise _invalid("first_msg_seq", "MSG_SEQ_ZERO", "msg_seq starts at 1: msg_seq 0 is never a message")
    if last < first or last > MAX_MSG_SEQ:
        raise _invalid(
            "last_msg_seq", "RANGE_REVERSED", f"last_msg_seq {last} is before first_msg_seq {first}"
        )
    return first, last


def _invalid(field: str, reason: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(message, reason=reason, violations=[FieldViolation(field, reason, message)])


def _refusal(result: CommandResult, adapter_id: str) -> AdminError:
    reason = result.error_reason or "REFUSED"
    metadata = {"adapterId": adapter_id}
    if result.frontier_msg_seq:
        metadata["frontierMsgSeq"] = str(result.frontier_msg_seq)
    if result.last_msg_seq_journaled:
        metadata["lastMsgSeq"] = str(result.last_msg_seq_journaled)
    message = result.message or "refused"
    if reason in _UNAVAILABLE:
        return UnavailableError(message, reason=reason, metadata=metadata)
    if reason in _EXHAUSTED:
        return ResourceExhaustedError(message, reason=reason, metadata=metadata)
    if reason in _INVALID:
        return InvalidArgumentError(message, reason=reason, metadata=metadata)
    return PreconditionError(message, reason=reason, metadata=metadata)
