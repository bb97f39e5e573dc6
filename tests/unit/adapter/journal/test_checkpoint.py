from __future__ import annotations

from pathlib import Path

import pytest

from feedha.adapter.journal.checkpoint import (
    Checkpoint,
    CheckpointStore,
    decode_checkpoint,
    encode_checkpoint,
)
from feedha.adapter.journal.errors import CorruptRecordError


def make(generation: int, state: bytes = b"state") -> Checkpoint:
    return Checkpoint(
        generation=generation,
        msg_seq=100 + generation,
        state=state,
        segment="x.fhj",
        offset=64,
        position_seq=110,
    )


def test_roundtrip_including_empty_journal_position() -> None:
    checkpoint = make(3, b"\x00" * 1000)
    assert decode_checkpoint(encode_checkpoint(checkpoint)) == checkpoint
    empty = Checkpoint(generation=1, msg_seq=0, state=b"", segment=None, offset=0, position_seq=-1)
    assert decode_checkpoint(encode_checkpoint(empty)) == empty


@pytest.mark.parametrize("position", [0, 9, 20, 60, -5, -1])
def test_damage_is_detected(position: int) -> None:
    data = bytearray(encode_checkpoint(make(1)))
    data[position] ^= 0x04
    with pytest.raises(CorruptRecordError):
        decode_checkpoint(bytes(data))
    with pytest.raises(CorruptRecordError):
        decode_checkpoint(bytes(data[:-1]))


def test_slots_alternate_and_latest_wins(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    assert store.latest() is None
    written = [store.write(make(g)) for g in (1, 2, 3)]
    assert written[0] == written[2] != written[1]
    assert store.latest() == make(3)
    assert [c.generation for c in store.valid()] == [3, 2]


def test_corrupt_newest_falls_back_to_the_other(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    store.write(make(1))
    newest = store.write(make(2, b"newer"))
    data = bytearray(newest.read_bytes())
    data[-10] ^= 0xFF
    newest.write_bytes(bytes(data))
    assert store.latest() == make(1)
    newest.write_bytes(b"")  # torn to nothing
    assert store.latest() == make(1)
    statuses = [type(item).__name__ for _path, item in store.load_all()]
    assert sorted(statuses) == ["Checkpoint", "CorruptRecordError"]
