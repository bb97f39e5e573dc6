"""What the adapter core asks its shell to do: the actions its input handlers return.

The core (:class:`adapter.core.machine.AdapterCore`) decides; the runner carries
these out in order, after the handler returned (CONTRIBUTING.md, "Decide first,
then act"). Plain frozen dataclasses: no behaviour.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from feedha.adapter.access import AccessView
from feedha.adapter.core.seal_view import SealView
from feedha.adapter.core.syncbus import SyncMessage

__all__ = [
    "Action",
    "BurnCpu",
    "CommandDone",
    "PublishAccess",
    "Rebind",
    "PublishSeal",
    "ReadSync",
    "SampleMachine",
    "ReplyAdmin",
    "ReplyControl",
    "JournalControl",
    "JournalRecords",
    "Publish",
    "PublishConflated",
    "PublishDelayed",
    "Quarantine",
    "RecordTerm",
    "SendSync",
    "Status",
    "WriteCheckpoint",
]


@dataclass(frozen=True, slots=True)
class Publish:
    """Send one packet on the line (``[channel topic, packet]``)."""

    packet: bytes


@dataclass(frozen=True, slots=True)
class PublishDelayed:
    """Send one packet on the delayed line (``[channel topic, packet]``)."""

    packet: bytes


@dataclass(frozen=True, slots=True)
class PublishConflated:
    """Send one packet on the conflated line (``[channel topic, packet]``)."""

    packet: bytes


@dataclass(frozen=True, slots=True)
class JournalControl:
    """Append a control record (a purge) to the journal: not a message, it takes no msg_seq."""

    flags: int
    time_ns: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class CommandDone:
    """The reply to a command that answered later (a purge, once the backups hold it).

    Internal to the core: it reaches the shell as :class:`ReplyControl` or :class:`ReplyAdmin`,
    whichever the command came from.
    """

    command_id: str
    reply: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ReplyControl:
    """Answer the control socket's request (now, or once a deferred command is done)."""

    reply: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ReplyAdmin:
    """Report a command's outcome to the admin server (a purge: at once, or once it is done)."""

    command_id: str
    reply: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ReadSync:
    """Read what waits on the sync bus now, before the next timers (it may have come meanwhile)."""


@dataclass(frozen=True, slots=True)
class SampleMachine:
    """Measure CPU (and memory, with ``memory``) now and hand them back (``on_machine_sample``);
    refresh the metrics."""

    memory: bool = True  # the machine's available memory too (it moves slowly: asked less often)


@dataclass(frozen=True, slots=True)
class JournalRecords:
    """Append published messages ``first_msg_seq``, ``first_msg_seq + 1``, ... to the journal.

    Attributes:
        first_msg_seq: msg_seq of the first record.
        time_ns: their publish time, ns since the Unix epoch.
        source_stream: the source stream number of every record.
        source_seqs: each record's source_seq (a list, a ``range`` or an ``array('q')``).
        payloads: each record's encoded ``MarketUpdate``.
        flags: record flags of every record (``RECORD_SESSION_BOUNDARY`` for an end-of-session block).
    """

    first_msg_seq: int
    time_ns: int
    source_stream: int
    source_seqs: Sequence[int]
    payloads: Sequence[bytes]
    flags: int = 0


@dataclass(frozen=True, slots=True)
class WriteCheckpoint:
    """Write a journal checkpoint: the conversion state right after journaled ``msg_seq``."""

    msg_seq: int
    state: bytes


@dataclass(frozen=True, slots=True)
class RecordTerm:
    """Keep ``term``, the highest term this adapter has known, where a restart finds it."""

    term: int


@dataclass(frozen=True, slots=True)
class SendSync:
    """Publish one message on the sync bus."""

    message: SyncMessage


@dataclass(frozen=True, slots=True)
class Status:
    """A status event for whoever watches the adapter (role changes, recovery, ...)."""

    event: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Quarantine:
    """Keep a source message the adapter skipped, for an operator to look at.

    Attributes:
        reason: why it was skipped (a ``ConversionError`` reason, ``source_seq_jump``, ...).
        source_seq: its source_seq, when it had a readable one.
        detail: what exactly was wrong.
        data: the message's bytes as received (the FIX body, or the stretch that was not
            one), cut to the first few KiB.
        size: the length of the whole message.
    """

    reason: str
    source_seq: int | None
    detail: str
    data: bytes
    size: int


# (Z85 key, expires_at_ns, delayed_only[, conflated_only[, owner]]): adapter.access.Grant
GrantTuple = tuple[str, int, bool] | tuple[str, int, bool, bool] | tuple[str, int, bool, bool, str]


@dataclass(frozen=True, slots=True)
class PublishAccess:
    """The access table changed: hand ``view`` to the threads that read it (ZAP, peer books, replays)."""

    view: AccessView


@dataclass(frozen=True, slots=True)
class Rebind:
    """Bind the socket that serves ``where`` afresh: every peer reconnects and is checked again."""

    where: str


@dataclass(frozen=True, slots=True)
class BurnCpu:
    """Fault injection (``busy``): keep the loop busy ``seconds`` of CPU here, between the actions
    before and after this one (``hold_gil``: holding the interpreter, as a long C call does)."""

    seconds: float
    hold_gil: bool = True


@dataclass(frozen=True, slots=True)
class PublishSeal:
    """How the lines seal their packets changed (a key came): hand ``view`` to the line sockets."""

    view: SealView


Action: TypeAlias = (
    Publish
    | JournalRecords
    | WriteCheckpoint
    | RecordTerm
    | SendSync
    | Status
    | Quarantine
    | PublishDelayed
    | PublishConflated
    | JournalControl
    | CommandDone
    | ReplyControl
    | ReplyAdmin
    | ReadSync
    | SampleMachine
    | PublishAccess
    | Rebind
    | PublishSeal
    | BurnCpu
)
