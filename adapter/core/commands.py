"""Operator commands to one adapter, and their JSON form on the local control socket.

Commands reach an adapter from the admin server (``feedctl``) or from the
control socket (drills, tests); both become the typed commands below, which
:meth:`adapter.core.machine.AdapterCore.on_command` carries out. A request that
is not a valid command raises :class:`ControlError` naming the field, and the
runner answers ``{"ok": false, "error": ...}``; it never reaches the core.

Control request: one JSON object, ``{"cmd": NAME, ...fields}``:

========== ========================================= =============================
cmd         fields                                    does
========== ========================================= =============================
status      --                                        reply with role, position, counters
promote     ``reason`` (str, optional), ``force``     become active (in sync only, unless ``force``:
            (bool, optional)                          the operator vouches for its numbering), term + 1
demote      ``reason``                                step down to backup (active only)
fail        ``reason``                                go off line (rule 5 by hand)
throttle    ``rate`` (msg/s; 0 lifts it)              cap the source reading rate
drop        ``every`` (>=1), ``count`` (>=0)          fault injection: skip sending packets
penalty     ``value`` (0..100)                        handicap on the health score
corrupt_state ``delta`` (int, optional)               fault injection: skew every volume
busy        ``ms`` (1..60000), ``turns`` (1..1000,    fault injection: the next turns of ``where``
            default 1), ``where`` (``convert``,       keep the loop busy ``ms`` of CPU each
            ``report`` or ``tick``; default           (``adapter.core.busy``), holding the GIL
            ``convert``), ``gil`` (bool, default      unless ``gil`` is false
            true)
session_end ``reason`` (str, optional)                end the trading session now (active only;
                                                      the group agrees on the boundary)
purge       ``first`` (msg_seq >= 1), ``last``        purge messages pending on the delayed line
            (optional, >= first) or ``all_pending``   (the active only; replies once the backups
            (true), ``reason`` (str, required),       hold the purge, or after a second)
            ``issued_by`` (str, optional)
========== ========================================= =============================
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from feedha.adapter.core.sync_types import CommandKind
from feedha.adapter.errors import AdapterError

__all__ = [
    "MAX_REQUEST_BYTES",
    "Command",
    "Busy",
    "ControlError",
    "CorruptState",
    "DropPackets",
    "EndSession",
    "Penalty",
    "Purge",
    "RoleCommand",
    "ShowStatus",
    "Throttle",
    "decode_request",
    "encode_reply",
]

MAX_REQUEST_BYTES: Final = 4096
MIN_THROTTLE_RATE: Final = 1.0  # msg/s: below this a throttle would pause the adapter for ever
MAX_THROTTLE_RATE: Final = 1e9
MAX_REASON_CHARS: Final = 200
MAX_DROP_COUNT: Final = 1_000_000
MAX_CORRUPT_DELTA: Final = 1 << 40
MAX_MSG_SEQ: Final = (1 << 63) - 1
MAX_COMMAND_ID_CHARS: Final = 64
MAX_BUSY_MS: Final = 60_000
MAX_BUSY_TURNS: Final = 1000
BUSY_PLACES: Final = ("convert", "report", "tick")


class ControlError(AdapterError, ValueError):
    """A control request that is not a valid command; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class ShowStatus:
    """Reply with the adapter's status."""


@dataclass(frozen=True, slots=True)
class RoleCommand:
    """Promote, demote or fail the adapter (the sync rules decide whether it may)."""

    kind: CommandKind
    reason: str = "operator"
    force: bool = False  # promote although its numbering is not confirmed (the operator decides)


@dataclass(frozen=True, slots=True)
class Throttle:
    """Cap the source reading rate at ``rate`` messages/s (0: no cap)."""

    rate: float


@dataclass(frozen=True, slots=True)
class DropPackets:
    """Fault injection: journal but do not send every ``every``-th packet, ``count`` times."""

    every: int
    count: int


@dataclass(frozen=True, slots=True)
class Penalty:
    """Subtract ``value`` from the health score (drills, tests)."""

    value: float


@dataclass(frozen=True, slots=True)
class CorruptState:
    """Fault injection: add ``delta`` to every symbol's volume (the sync rules must repair it)."""

    delta: int = 1000


@dataclass(frozen=True, slots=True)
class Busy:
    """Fault injection: the next ``turns`` turns of the kind ``where`` keep the loop busy ``ms`` each.

    ``where`` is where in the turn the loop is busy (:mod:`adapter.core.busy`): ``convert``
    after numbering what the turn converts and before any of it goes out, ``report`` after its
    packets went out and before its sync-bus messages, ``tick`` in a timer turn under the
    active's keepalive (as a checkpoint's fold). ``gil``: the loop holds the interpreter
    meanwhile, as a long C call does (the journal's flusher and the replay service wait).
    """

    ms: int
    turns: int = 1
    where: str = "convert"
    gil: bool = True


@dataclass(frozen=True, slots=True)
class EndSession:
    """End the trading session now (the active proposes the boundary; the group agrees on it)."""

    reason: str = "operator"


@dataclass(frozen=True, slots=True, kw_only=True)
class Purge:
    """Purge messages still pending on the delayed line (the active decides; see ``adapter.core.purging``).

    Attributes:
        first: the first msg_seq (0 with ``all_pending``).
        last: the last msg_seq, inclusive (0 with ``all_pending``).
        all_pending: purge everything journaled that the delayed line has not reached (the
            seed's cancel-all); ``first`` and ``last`` are then decided by the active.
        reason: why (kept with the purge, shown in tombstones and ``feedha journal dump``).
        issued_by: the operator.
        command_id: names the reply when it comes later (the backups' acknowledgements).
    """

    first: int = 0
    last: int = 0
    all_pending: bool = False
    reason: str
    issued_by: str = ""
    command_id: str = ""

    def __post_init__(self) -> None:
        if not self.reason or len(self.reason) > MAX_REASON_CHARS:
            raise ControlError(f"a purge needs a reason of 1..{MAX_REASON_CHARS} characters")
        if len(self.issued_by) > MAX_REASON_CHARS or len(self.command_id) > MAX_COMMAND_ID_CHARS:
            raise ControlError("issued_by or command_id too long")
        if self.all_pending:
            if self.first or self.last:
                raise ControlError("a purge of all pending messages takes no first or last msg_seq")
        elif not 1 <= self.first <= self.last <= MAX_MSG_SEQ:
            raise ControlError(
                f"a purge needs 1 <= first <= last <= {MAX_MSG_SEQ}, got {self.first}..{self.last} "
                "(msg_seq 0 is never a message)"
            )


Command: TypeAlias = (
    ShowStatus | RoleCommand | Throttle | DropPackets | Penalty | CorruptState | Busy | EndSession | Purge
)


def _reason(request: Mapping[str, Any]) -> str:
    reason = request.get("reason", "operator")
    if not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS:
        raise ControlError(f"reason must be a string of at most {MAX_REASON_CHARS} characters")
    return reason or "operator"


def _number(
    request: Mapping[str, Any], name: str, low: float, high: float, default: float | None = None
) -> float:
    value = request.get(name, default)
    if value is None:
        raise ControlError(f"{request.get('cmd')!r} needs the field {name!r}")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ControlError(f"{name} must be a finite number, got {value!r}")
    if not low <= value <= high:
        raise ControlError(f"{name} must be in {low:g}..{high:g}, got {value!r}")
    return float(value)


def _integer(request: Mapping[str, Any], name: str, low: int, high: int, default: int) -> int:
    value = request.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ControlError(f"{name} must be an integer in {low}..{high}, got {value!r}")
    return value


def _flag(request: Mapping[str, Any], name: str, *, default: bool = False) -> bool:
    value = request.get(name, default)
    if not isinstance(value, bool):
        raise ControlError(f"{name} must be true or false, got {value!r}")
    return value


def _throttle(request: Mapping[str, Any]) -> Command:
    rate = _number(request, "rate", 0.0, MAX_THROTTLE_RATE)
    if 0 < rate < MIN_THROTTLE_RATE:
        raise ControlError(f"rate must be 0 (no cap) or at least {MIN_THROTTLE_RATE:g} msg/s, got {rate!r}")
    return Throttle(rate)


def _busy(request: Mapping[str, Any]) -> Command:
    if "ms" not in request:
        raise ControlError("'busy' needs the field 'ms'")
    where = request.get("where", "convert")
    if where not in BUSY_PLACES:
        raise ControlError(f"where must be one of {', '.join(BUSY_PLACES)}, got {where!r}")
    return Busy(
        _integer(request, "ms", 1, MAX_BUSY_MS, 0),
        _integer(request, "turns", 1, MAX_BUSY_TURNS, 1),
        where,
        _flag(request, "gil", default=True),
    )


def _purge(request: Mapping[str, Any]) -> Command:
    all_pending = _flag(request, "all_pending")
    first = _integer(request, "first", 0, MAX_MSG_SEQ, 0)
    last = _integer(request, "last", 0, MAX_MSG_SEQ, first)
    reason, by = request.get("reason", ""), request.get("issued_by", "")
    if not isinstance(reason, str) or not isinstance(by, str):
        raise ControlError("reason and issued_by must be strings")
    return Purge(first=first, last=last, all_pending=all_pending, reason=reason, issued_by=by)


_DECODERS: Final[Mapping[str, Callable[[Mapping[str, Any]], Command]]] = {
    "status": lambda r: ShowStatus(),
    "promote": lambda r: RoleCommand(CommandKind.PROMOTE, _reason(r), _flag(r, "force")),
    "demote": lambda r: RoleCommand(CommandKind.DEMOTE, _reason(r)),
    "fail": lambda r: RoleCommand(CommandKind.FAIL, _reason(r)),
    "throttle": _throttle,
    "drop": lambda r: DropPackets(
        _integer(r, "every", 1, MAX_DROP_COUNT, 1), _integer(r, "count", 0, MAX_DROP_COUNT, 1)
    ),
    "penalty": lambda r: Penalty(_number(r, "value", 0.0, 100.0)),
    "corrupt_state": lambda r: CorruptState(
        _integer(r, "delta", -MAX_CORRUPT_DELTA, MAX_CORRUPT_DELTA, 1000)
    ),
    "busy": _busy,
    "session_end": lambda r: EndSession(_reason(r)),
    "purge": _purge,
}


def decode_request(data: bytes) -> Command:
    """Parse one control request.

    Raises:
        ControlError: too long, not a JSON object, an unknown ``cmd``, or a missing or bad field.
    """
    if len(data) > MAX_REQUEST_BYTES:
        raise ControlError(f"request of {len(data)} bytes exceeds {MAX_REQUEST_BYTES}")
    try:
        request = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ControlError(f"not JSON: {exc}") from None
    if not isinstance(request, dict):
        raise ControlError(f"a request is a JSON object, got {type(request).__name__}")
    cmd = request.get("cmd")
    decoder = _DECODERS.get(cmd) if isinstance(cmd, str) else None
    if decoder is None:
        raise ControlError(f"unknown command {cmd!r}; known: {', '.join(sorted(_DECODERS))}")
    return decoder(request)


def encode_reply(reply: Mapping[str, Any]) -> bytes:
    """A reply as the control socket sends it (JSON)."""
    return json.dumps(reply).encode()
