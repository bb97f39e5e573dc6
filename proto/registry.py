"""The adapter registry's contract: what an adapter declares, reports and is told, and its wire form.

An adapter registers with the admin server (:class:`AdapterRegistration`),
reports its :class:`AdapterStatus` every interval, and receives operator
:class:`Command` values, over ``feedha.v1.AdapterRegistry.Connect``. Both
sides of that stream use these types: the adapter's ``RegistryAgent``
(``admin_client``) and the server's registry (``admin_server``). The
``*_to_proto``/``*_from_proto`` functions convert them to and from the
generated ``admin_pb2`` messages; enums travel by name (``ADAPTER_ROLE_ACTIVE``
<-> :attr:`AdapterRole.ACTIVE`), and values this side does not know read as
``UNSPECIFIED``, except command kinds, which are refused.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields
from typing import Any, Final

from feedha.proto import admin_pb2
from feedha.proto.errors import ProtoError
from feedha.proto.seal import SealKey

# The input format of an adapter that registered none (one from before formats): the adapter's
# default (adapter/formats/registry.py's DEFAULT_FORMAT; tests/unit/adapter/test_format_registry.py).
DEFAULT_INPUT_FORMAT: Final = "feedha-fix"
MAX_OWNER_CHARS: Final = 1024  # AccessGrant.owner: longer is refused (the server sends a digest instead)


class AdapterRole(enum.Enum):
    """An adapter's role in its channel's group."""

    UNSPECIFIED = "unspecified"
    ACTIVE = "active"
    BACKUP = "backup"
    FAILED = "failed"


class SyncStatus(enum.Enum):
    """A backup's synchronization verdict (the active reports IN_SYNC)."""

    UNSPECIFIED = "unspecified"
    IN_SYNC = "in_sync"
    SYNCING = "syncing"
    BEHIND = "behind"
    AHEAD = "ahead"
    FAILED = "failed"


class CommandKind(enum.Enum):
    """Operator commands an adapter receives."""

    PROMOTE = "promote"
    DEMOTE = "demote"
    FAIL = "fail"
    THROTTLE = "throttle"
    GRANT = "grant"  # data-plane access for subscriber keys (until their expiry)
    REVOKE = "revoke"  # data-plane access withdrawn: cut these keys off
    SEAL = "seal"  # multicast lines: seal packets with this key from now on
    SESSION_END = "session_end"  # the channel's active ends the trading session now
    PURGE = "purge"  # purge messages pending on the delayed line (answered with a CommandResult)


@dataclass(frozen=True, slots=True, kw_only=True)
class AdapterRegistration:
    """What an adapter declares when it connects.

    Attributes:
        feed: feed name.
        channel_name: e.g. ``EQ-A-M``.
        channel_number: the channel number on the wire.
        adapter_id: unique adapter id, e.g. ``eq1-a``.
        line_endpoint: where its line publishes (ZeroMQ URL).
        replay_endpoint: its replay (retransmission) service.
        sync_endpoint: its sync-bus PUB socket.
        role: role at registration.
        term: term at registration.
        curve_public_key: the Z85 CURVE public key of its line and replay service ("": none).
        delayed_line_endpoint: its delayed line ("": it serves none).
        input_format: its source stream's input format (``feedha-fix``, ``fix44``; docs/converters.md).
        conflated_line_endpoint: its conflated line ("": it serves none).
    """

    feed: str
    channel_name: str
    channel_number: int
    adapter_id: str
    line_endpoint: str
    replay_endpoint: str = ""
    sync_endpoint: str = ""
    role: AdapterRole = AdapterRole.BACKUP
    term: int = 0
    curve_public_key: str = ""
    delayed_line_endpoint: str = ""
    input_format: str = DEFAULT_INPUT_FORMAT
    conflated_line_endpoint: str = ""

    def __post_init__(self) -> None:
        if self.curve_public_key and not is_curve_key(self.curve_public_key):
            raise ValueError(f"adapter {self.adapter_id}: curve_public_key is not a Z85 CURVE key")
        if not self.adapter_id:
            raise ValueError("adapter_id must not be empty")
        if not self.channel_name:
            raise ValueError(f"adapter {self.adapter_id}: channel_name must not be empty")
        if self.term < 0:
            raise ValueError(f"adapter {self.adapter_id}: term must be >= 0, got {self.term}")


# Every field of AdapterRegistration: the same name in admin.proto's AdapterRegistration.
_REGISTRATION_FIELDS: Final = tuple(item.name for item in fields(AdapterRegistration))


@dataclass(frozen=True, slots=True, kw_only=True)
class AdapterStatus:
    """State and health an adapter reports every interval.

    Attributes:
        role: current role.
        term: current term.
        next_msg_seq: msg_seq of the next message it will publish.
        sync_status: synchronization verdict.
        health_score: 0..100, higher is healthier.
        lag: source messages behind the active (negative: ahead).
    """

    role: AdapterRole
    term: int
    next_msg_seq: int = 0
    sync_status: SyncStatus = SyncStatus.UNSPECIFIED
    health_score: float = 0.0
    lag: int = 0


@dataclass(frozen=True, slots=True)
class AccessGrant:
    """A subscriber's CURVE public key (Z85) and until when it may connect (ns since the epoch; 0: unset).

    On the wire the expiry is a ``google.protobuf.Timestamp`` (``expire_time``).
    ``delayed_only``: the key may connect to the delayed line and ask for delayed
    ranges, never to the real-time line. ``conflated_only``: the key may connect to the
    conflated line (and, with ``delayed_only`` too, to the delayed line), never to the
    real-time line, its replays or its images. ``owner``: who holds the key (the user,
    or the users sorted and joined by newlines; "": unknown): the replay service's
    budgets are per owner, so one user's many keys share one.
    """

    curve_public_key: str
    expires_at_ns: int = 0
    delayed_only: bool = False
    conflated_only: bool = False
    owner: str = ""

    def __post_init__(self) -> None:
        if not is_curve_key(self.curve_public_key):
            raise ValueError(f"not a Z85 CURVE public key: {self.curve_public_key[:48]!r}")
        if len(self.owner) > MAX_OWNER_CHARS:
            raise ValueError(f"owner of {len(self.owner)} characters (at most {MAX_OWNER_CHARS})")


@dataclass(frozen=True, slots=True)
class PurgeRange:
    """What a PURGE names: msg_seq ``first..last``, or everything pending (``all_pending``)."""

    first_msg_seq: int = 0
    last_msg_seq: int = 0
    all_pending: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """An operator command for one adapter (GRANT/REVOKE: data-plane access for subscriber keys).

    ``command_id`` non-empty: the adapter answers with a :class:`CommandResult` of that id.
    """

    kind: CommandKind
    term: int = 0
    rate: float = 0.0
    reason: str = ""
    issued_by: str = ""
    grants: tuple[AccessGrant, ...] = ()
    replace_grants: bool = False
    seal_key: SealKey | None = None
    force: bool = False  # PROMOTE: even an adapter whose numbering is not confirmed
    command_id: str = ""
    purge: PurgeRange | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandResult:
    """An adapter's answer to a command that asked for one (a purge).

    Attributes:
        command_id: the command's id.
        ok: whether it was carried out.
        error_reason: a refusal's machine-readable cause (``ALREADY_DELIVERED``, ``NOT_ACTIVE`` ...).
        message: for people.
        purge_id: the purge's id (accepted).
        first_msg_seq: the first purged msg_seq (accepted).
        last_msg_seq: the last purged msg_seq (accepted).
        confirmed: the backups that hold the purge.
        unconfirmed: the live backups that had not acknowledged it in time.
        frontier_msg_seq: refused as already delivered: a purge must start after this.
        last_msg_seq_journaled: refused as beyond the end: the last message published.
    """

    command_id: str
    ok: bool
    error_reason: str = ""
    message: str = ""
    purge_id: int = 0
    first_msg_seq: int = 0
    last_msg_seq: int = 0
    confirmed: tuple[int, ...] = ()
    unconfirmed: tuple[int, ...] = ()
    frontier_msg_seq: int = 0
    last_msg_seq_journaled: int = 0


_Z85: frozenset[str] = frozenset(
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
)


_Z85_VALUE: dict[str, int] = {
    ch: i
    for i, ch in enumerate(
        "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
    )
}


def is_curve_key(text: str) -> bool:
    """Whether ``text`` is a Z85-encoded 32-byte CURVE public key.

    40 characters of the Z85 alphabet whose every group of five decodes to 32
    bits (a group past 2**32 - 1 decodes to nothing), and not all zero bytes
    (Curve25519's point at zero: no key pair has it).
    """
    if len(text) != 40 or not all(ch in _Z85 for ch in text):
        return False
    groups = []
    for start in range(0, 40, 5):
        value = 0
        for ch in text[start : start + 5]:
            value = value * 85 + _Z85_VALUE[ch]
        groups.append(value)
    return all(value < 2**32 for value in groups) and any(groups)


def role_to_proto(role: AdapterRole) -> str:
    """Registry role -> proto enum value name (message constructors take names)."""
    return f"ADAPTER_ROLE_{role.name}"


def role_from_proto(value: int) -> AdapterRole:
    """Proto enum -> registry role (unknown values read as UNSPECIFIED)."""
    try:
        return AdapterRole[admin_pb2.AdapterRole.Name(value).removeprefix("ADAPTER_ROLE_")]
    except (ValueError, KeyError):  # a number the schema lacks, or a name this enum lacks
        return AdapterRole.UNSPECIFIED


def sync_to_proto(status: SyncStatus) -> str:
    """Registry sync status -> proto enum value name."""
    return f"SYNC_STATUS_{status.name}"


def sync_from_proto(value: int) -> SyncStatus:
    """Proto enum -> registry sync status."""
    try:
        return SyncStatus[admin_pb2.SyncStatus.Name(value).removeprefix("SYNC_STATUS_")]
    except (ValueError, KeyError):
        return SyncStatus.UNSPECIFIED


def registration_values(reg: AdapterRegistration) -> dict[str, Any]:
    """A registration's fields by name, its role by its value (``"backup"``): plain values.

    The one field mapping of :class:`AdapterRegistration`: the wire conversions below
    and the admin server's store (JSON) are made from it, so a field added to the
    dataclass travels everywhere.
    """
    values = {name: getattr(reg, name) for name in _REGISTRATION_FIELDS}
    values["role"] = reg.role.value
    return values


def registration_to_proto(reg: AdapterRegistration) -> admin_pb2.AdapterRegistration:
    """Registration dataclass -> message."""
    values = registration_values(reg)
    values["role"] = role_to_proto(reg.role)
    return admin_pb2.AdapterRegistration(**values)


def registration_from_proto(msg: admin_pb2.AdapterRegistration) -> AdapterRegistration:
    """Message -> registration dataclass.

    Raises:
        ValueError: missing adapter id or channel name.
    """
    values = {name: getattr(msg, name) for name in _REGISTRATION_FIELDS}
    values["role"] = role_from_proto(msg.role)
    values["input_format"] = msg.input_format or DEFAULT_INPUT_FORMAT  # an adapter from before formats
    return AdapterRegistration(**values)


def status_to_proto(status: AdapterStatus) -> admin_pb2.AdapterStatus:
    """Status dataclass -> message."""
    return admin_pb2.AdapterStatus(
        role=role_to_proto(status.role),
        term=status.term,
        next_msg_seq=status.next_msg_seq,
        sync_status=sync_to_proto(status.sync_status),
        health_score=status.health_score,
        lag=status.lag,
    )


def status_from_proto(msg: admin_pb2.AdapterStatus) -> AdapterStatus:
    """Message -> status dataclass."""
    return AdapterStatus(
        role=role_from_proto(msg.role),
        term=msg.term,
        next_msg_seq=msg.next_msg_seq,
        sync_status=sync_from_proto(msg.sync_status),
        health_score=msg.health_score,
        lag=msg.lag,
    )


def command_to_proto(command: Command) -> admin_pb2.OperatorCommand:
    """Command dataclass -> message."""
    return admin_pb2.OperatorCommand(
        kind=f"COMMAND_KIND_{command.kind.name}",
        term=command.term,
        rate=command.rate,
        reason=command.reason,
        issued_by=command.issued_by,
        grants=[_grant_to_proto(g) for g in command.grants],
        replace_grants=command.replace_grants,
        seal_key=None if command.seal_key is None else seal_key_to_proto(command.seal_key),
        force=command.force,
        command_id=command.command_id,
        purge=None if command.purge is None else _purge_range_to_proto(command.purge),
    )


def _purge_range_to_proto(purge: PurgeRange) -> admin_pb2.PurgeRange:
    return admin_pb2.PurgeRange(
        first_msg_seq=purge.first_msg_seq, last_msg_seq=purge.last_msg_seq, all_pending=purge.all_pending
    )


def _grant_to_proto(grant: AccessGrant) -> admin_pb2.AccessGrant:
    message = admin_pb2.AccessGrant(
        curve_public_key=grant.curve_public_key,
        delayed_only=grant.delayed_only,
        conflated_only=grant.conflated_only,
        owner=grant.owner,
    )
    if grant.expires_at_ns:
        message.expire_time.FromNanoseconds(grant.expires_at_ns)
    return message


def _grant_from_proto(message: admin_pb2.AccessGrant) -> AccessGrant:
    expires = message.expire_time.ToNanoseconds() if message.HasField("expire_time") else 0
    return AccessGrant(
        message.curve_public_key, expires, message.delayed_only, message.conflated_only, message.owner
    )


def result_to_proto(result: CommandResult) -> admin_pb2.CommandResult:
    """Command result dataclass -> message."""
    purge = admin_pb2.PurgeResult(
        purge_id=result.purge_id,
        first_msg_seq=result.first_msg_seq,
        last_msg_seq=result.last_msg_seq,
        confirmed_adapters=result.confirmed,
        unconfirmed_adapters=result.unconfirmed,
        frontier_msg_seq=result.frontier_msg_seq,
        last_msg_seq_journaled=result.last_msg_seq_journaled,
    )
    return admin_pb2.CommandResult(
        command_id=result.command_id,
        ok=result.ok,
        error_reason=result.error_reason,
        message=result.message,
        purge=purge,
    )


def result_from_proto(msg: admin_pb2.CommandResult) -> CommandResult:
    """Message -> command result dataclass (text fields cut to 1 KiB: an adapter's word, not a novel)."""
    purge = msg.purge
    return CommandResult(
        command_id=msg.command_id[:64],
        ok=msg.ok,
        error_reason=msg.error_reason[:64],
        message=msg.message[:1024],
        purge_id=purge.purge_id,
        first_msg_seq=purge.first_msg_seq,
        last_msg_seq=purge.last_msg_seq,
        confirmed=tuple(purge.confirmed_adapters[:256]),
        unconfirmed=tuple(purge.unconfirmed_adapters[:256]),
        frontier_msg_seq=purge.frontier_msg_seq,
        last_msg_seq_journaled=purge.last_msg_seq_journaled,
    )


def seal_key_to_proto(key: SealKey) -> admin_pb2.SealKey:
    """Seal key -> message."""
    return admin_pb2.SealKey(key_id=key.key_id, key=key.key)


def seal_key_from_proto(msg: admin_pb2.SealKey) -> SealKey:
    """Message -> seal key.

    Raises:
        ProtoError: not a 32-byte key (a ``ValueError``).
    """
    try:
        return SealKey(msg.key_id, msg.key)
    except ValueError as exc:
        raise ProtoError("seal_key", str(exc)) from exc


def command_from_proto(msg: admin_pb2.OperatorCommand) -> Command:
    """Message -> command dataclass.

    Raises:
        ProtoError: unknown command kind (a ``ValueError``).
    """
    try:
        name = admin_pb2.CommandKind.Name(msg.kind).removeprefix("COMMAND_KIND_")
    except ValueError:  # a number this schema lacks (a newer server)
        name = ""
    if name not in CommandKind.__members__:
        raise ProtoError("kind", f"unknown command kind {msg.kind}")
    try:
        grants = tuple(_grant_from_proto(g) for g in msg.grants)
    except ValueError as exc:
        raise ProtoError("grant", str(exc)) from exc
    seal_key = seal_key_from_proto(msg.seal_key) if msg.HasField("seal_key") else None
    if name == "SEAL" and seal_key is None:
        raise ProtoError("seal_key", "a SEAL command without a key")
    purge = None
    if msg.HasField("purge"):
        purge = PurgeRange(msg.purge.first_msg_seq, msg.purge.last_msg_seq, msg.purge.all_pending)
    if name == "PURGE" and (purge is None or not msg.command_id):
        raise ProtoError("purge", "a PURGE command without a range or a command id")
    return Command(
        kind=CommandKind[name],
        term=msg.term,
        rate=msg.rate,
        reason=msg.reason,
        issued_by=msg.issued_by,
        grants=grants,
        replace_grants=msg.replace_grants,
        force=msg.force and name == "PROMOTE",
        seal_key=seal_key,
        command_id=msg.command_id[:64],
        purge=purge,
    )
