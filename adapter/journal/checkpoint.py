"""Two alternating checkpoints: the adapter's state blob plus the journal position it matches.

Theory of operation
-------------------
Checkpoint *n* goes to slot ``n % 2`` (``checkpoint-a.fhc`` or
``checkpoint-b.fhc``), so the previous checkpoint is never touched while the
new one is written. Each file is written to a temporary name, synced,
renamed over the slot and the directory synced; the rename makes the
replacement atomic and the CRC catches a file damaged later. The newest
checkpoint is the valid one with the highest generation; if it is damaged
the other slot still holds the one before it.

File layout (little-endian)::

    header  CHECKPOINT_HEADER: magic, version, segment-name length, generation,
            msg_seq, position_seq, offset, state length, reserved
    bytes   the segment name (UTF-8), then the state blob
    u32     CRC32C of everything before it
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from feedha.adapter.journal.choice import FRAMING
from feedha.adapter.journal.durable import replace_durably
from feedha.adapter.journal.errors import CorruptRecordError

logger = logging.getLogger(__name__)

CHECKPOINT_MAGIC: Final = b"FHJCKPT\x01"
CHECKPOINT_HEADER: Final = struct.Struct("<8sHHQQqQII")
SLOT_NAMES: Final = ("checkpoint-a.fhc", "checkpoint-b.fhc")


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    """A checkpoint.

    Attributes:
        generation: increases by one per checkpoint written.
        msg_seq: the msg_seq the state blob reflects (everything up to and including it).
        state: the adapter's opaque state (its conversion-state snapshot).
        segment: the journal segment file name holding the position (``None``: empty journal).
        offset: byte offset in ``segment`` up to which the journal was written and synced.
        position_seq: msg_seq of the last record before ``offset`` (-1: none).
    """

    generation: int
    msg_seq: int
    state: bytes
    segment: str | None
    offset: int
    position_seq: int

    def __repr__(self) -> str:
        return (
            f"<Checkpoint [generation={self.generation}, msg_seq={self.msg_seq}, "
            f"position={self.segment}@{self.offset}, state={len(self.state)}B]>"
        )


def encode_checkpoint(checkpoint: Checkpoint) -> bytes:
    """Encode a checkpoint file.

    Args:
        checkpoint: the checkpoint.

    Returns:
        The file's bytes.
    """
    name = (checkpoint.segment or "").encode()
    header = CHECKPOINT_HEADER.pack(
        CHECKPOINT_MAGIC,
        1,
        len(name),
        checkpoint.generation,
        checkpoint.msg_seq,
        checkpoint.position_seq,
        checkpoint.offset,
        len(checkpoint.state),
        0,
    )
    body = header + name + bytes(checkpoint.state)
    return body + FRAMING.crc32c(body).to_bytes(4, "little")


def decode_checkpoint(data: bytes) -> Checkpoint:
    """Decode and check a checkpoint file.

    Args:
        data: the file's bytes.

    Returns:
        The checkpoint.

    Raises:
        CorruptRecordError: short, wrong magic or version, bad lengths or CRC.
    """
    size = CHECKPOINT_HEADER.size
    if len(data) < size + 4:
        raise CorruptRecordError("short_checkpoint")
    magic, version, name_len, generation, msg_seq, position_seq, offset, state_len, _ = (
        CHECKPOINT_HEADER.unpack_from(data, 0)
    )
    if magic != CHECKPOINT_MAGIC or version != 1:
        raise CorruptRecordError("bad_checkpoint_magic")
    if len(data) != size + name_len + state_len + 4:
        raise CorruptRecordError("bad_checkpoint_length")
    if FRAMING.crc32c(data[:-4]) != int.from_bytes(data[-4:], "little"):
        raise CorruptRecordError("bad_checkpoint_crc")
    name = data[size : size + name_len].decode()
    return Checkpoint(
        generation=generation,
        msg_seq=msg_seq,
        state=data[size + name_len : -4],
        segment=name or None,
        offset=offset,
        position_seq=position_seq,
    )


class CheckpointStore:
    """The two checkpoint slots of a journal directory."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        """Use the slots in ``directory``.

        Args:
            directory: the journal directory.
        """
        self._directory = Path(directory)

    def __repr__(self) -> str:
        return f"<CheckpointStore [{self._directory}]>"

    @property
    def paths(self) -> tuple[Path, Path]:
        """The two slot files."""
        return self._directory / SLOT_NAMES[0], self._directory / SLOT_NAMES[1]

    def load_all(self) -> list[tuple[Path, Checkpoint | CorruptRecordError | None]]:
        """Read both slots.

        Returns:
            Per slot, the checkpoint, the error that made it invalid, or
            ``None`` when the slot file does not exist.
        """
        found: list[tuple[Path, Checkpoint | CorruptRecordError | None]] = []
        for path in self.paths:
            try:
                found.append((path, decode_checkpoint(path.read_bytes())))
            except FileNotFoundError:
                found.append((path, None))
            except CorruptRecordError as exc:
                logger.warning("ignoring invalid checkpoint %s: %s", path, exc)
                found.append((path, exc))
        return found

    def valid(self) -> list[Checkpoint]:
        """The valid checkpoints, newest first."""
        checkpoints = [item for _path, item in self.load_all() if isinstance(item, Checkpoint)]
        return sorted(checkpoints, key=lambda checkpoint: checkpoint.generation, reverse=True)

    def latest(self) -> Checkpoint | None:
        """The newest valid checkpoint.

        Returns:
            It, or ``None`` when neither slot holds a valid one.
        """
        valid = self.valid()
        return valid[0] if valid else None

    def write(self, checkpoint: Checkpoint) -> Path:
        """Write a checkpoint to slot ``generation % 2``, atomically and durably.

        Args:
            checkpoint: the checkpoint.

        Returns:
            The slot file written.
        """
        path = self.paths[checkpoint.generation % 2]
        replace_durably(path, encode_checkpoint(checkpoint))
        return path
