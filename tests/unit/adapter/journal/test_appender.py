"""The journal writer's live tail (``Appender``): what the source pump appends through, C and reference."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from feedha.adapter.journal import (
    FsyncPolicy,
    JournalConfig,
    JournalReader,
    JournalWriter,
    _native,
    _reference,
)
from feedha.adapter.journal.format import MAX_PAYLOAD_BYTES, RECORD_HEADER_SIZE, Record, encode_record
from feedha.adapter.journal.layout import RECORD_HEADER

IMPLEMENTATIONS = [pytest.param(_native, id="native"), pytest.param(_reference, id="reference")]
T0 = 1_700_000_000_000_000_000
SMALL = JournalConfig(segment_bytes=4096, buffer_bytes=4096, index_interval_bytes=512, fsync=FsyncPolicy.NONE)


def _record(msg_seq: int, source_seq: int, payload: bytes, *, stream: int = 7, time_ns: int = T0) -> bytes:
    # The record's layout written out by hand (docs/journal.md): the CRC from the reference.
    body = RECORD_HEADER.pack(0, len(payload), msg_seq, time_ns, source_seq, stream, 0)[4:] + payload
    return _reference.crc32c(body).to_bytes(4, "little") + body


class Slow:
    """A writer's append_batch: records what reaches it; refuses when told."""

    def __init__(self, refuse: BaseException | None = None) -> None:
        self.calls: list[tuple[int, int, int, list[int], list[bytes]]] = []
        self.refuse = refuse

    def __call__(self, first: int, time_ns: int, stream: int, seqs: Any, payloads: Any) -> None:
        self.calls.append((first, time_ns, stream, list(seqs), list(payloads)))
        if self.refuse is not None:
            raise self.refuse


def _tail(
    impl: ModuleType,
    slow: Slow,
    *,
    size: int = 1024,
    limit: int | None = None,
    woken: list[int] | None = None,
) -> Any:
    tail = impl.Appender(slow, None if woken is None else lambda: woken.append(1))
    tail.buf, tail.pos, tail.limit, tail.day_end_ns = (
        bytearray(size),
        0,
        size if limit is None else limit,
        T0 + 1,
    )
    return tail


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_what_fits_is_framed_in_place_and_the_rest_goes_to_the_writer(impl: ModuleType) -> None:
    slow = Slow()
    payloads = [b"a" * 10, b"b" * 20, b"c" * 30, b"d" * 5]
    fits = 2 * RECORD_HEADER_SIZE + 30  # the first two records
    tail = _tail(impl, slow, limit=fits + RECORD_HEADER_SIZE + 29)
    tail.append_run(5, T0, 7, 100, list(payloads))
    assert bytes(tail.buf[: tail.pos]) == _record(5, 100, payloads[0]) + _record(6, 101, payloads[1])
    assert tail.pos == fits and tail.last_seq == 6
    assert slow.calls == [(7, T0, 7, [102, 103], payloads[2:])]  # the writer rolls, indexes, raises
    assert _record(5, 100, payloads[0]) == encode_record(Record(5, T0, 7, 100, payloads[0]))


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_nothing_is_framed_where_the_writer_must_decide(impl: ModuleType) -> None:
    cases: dict[str, dict[str, Any]] = {
        "no limit (first record, fsync=always, closed)": {"limit": -1},
        "a new UTC day": {"day_end_ns": T0},
        "a msg_seq that does not increase": {"last_seq": 5},
        "no buffer": {"buf": None},
        "a buffer that is not a bytearray": {"buf": memoryview(bytearray(1024))},
        "a published end past the limit": {"pos": 600, "limit": 500},
        "a negative published end": {"pos": -1},
    }
    for why, fields in cases.items():
        slow = Slow()
        tail = _tail(impl, slow)
        for name, value in fields.items():
            setattr(tail, name, value)
        before = (tail.pos, tail.last_seq)
        tail.append_run(5, T0, 7, 100, [b"x", b"y"])
        assert (tail.pos, tail.last_seq) == before, why
        assert slow.calls == [(5, T0, 7, [100, 101], [b"x", b"y"])], why


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_a_hostile_record_or_tail_never_writes_past_the_buffer(impl: ModuleType) -> None:
    slow = Slow()
    tail = _tail(impl, slow, size=100, limit=10**9)  # a limit past the buffer: the buffer's size rules
    tail.append_run(1, T0, 7, 1, [b"z" * 60, b"q" * 60])
    assert tail.pos == RECORD_HEADER_SIZE + 60 and len(tail.buf) == 100
    assert [call[0] for call in slow.calls] == [2]
    slow.calls.clear()
    # A payload that is not bytes, one too large, a stream or msg_seq out of range: the writer says why.
    tail.append_run(3, T0, 7, 3, [bytearray(b"x"), b"y"])
    tail.append_run(5, T0, 7, 5, [b"\0" * (MAX_PAYLOAD_BYTES + 1)])
    tail.append_run(6, T0, 1 << 16, 6, [b"y"])
    tail.append_run(2**64 - 1, T0, 7, 7, [b"y", b"z"])
    assert [call[0] for call in slow.calls] == [3, 5, 6, 2**64 - 1]
    assert tail.pos == RECORD_HEADER_SIZE + 60
    with pytest.raises(TypeError):
        tail.append_run(9, T0, 7, 9, (b"a",))  # a list, nothing else


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_an_idle_flusher_is_woken_once_the_records_are_published(impl: ModuleType) -> None:
    woken: list[int] = []
    tail = _tail(impl, Slow(), woken=woken)
    tail.append_run(1, T0, 7, 1, [b"a"])
    assert woken == []
    tail.idle = True
    tail.append_run(2, T0, 7, 2, [b"b"])
    assert woken == [1]
    tail.limit = -1  # nothing framed here: the writer's path publishes (and wakes) itself
    tail.append_run(3, T0, 7, 3, [b"c"])
    assert woken == [1]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_a_writer_that_refuses_keeps_what_was_framed_and_raises(impl: ModuleType) -> None:
    slow = Slow(OSError("disk full"))
    tail = _tail(impl, slow, limit=RECORD_HEADER_SIZE + 1)
    with pytest.raises(OSError, match="disk full"):
        tail.append_run(1, T0, 7, 1, [b"a", b"b"])
    assert (tail.pos, tail.last_seq) == (RECORD_HEADER_SIZE + 1, 1)


def test_the_c_entry_is_a_capsule_and_survives_a_tail_taken_apart() -> None:
    assert type(_native.APPEND_API).__name__ == "PyCapsule"
    assert "feedha.adapter.journal._native.APPEND_API" in repr(_native.APPEND_API)
    slow = Slow()
    tail = _tail(_native, slow)
    tail.last_seq = 2**64 - 1  # any msg_seq: records must exceed it
    tail.append_run(3, T0, 7, 3, [b"a"])
    tail.last_seq, tail.pos = -1, "0"  # a slot that is not an int frames nothing here
    tail.append_run(4, T0, 7, 4, [b"b"])
    del tail.pos
    tail.append_run(5, T0, 7, 5, [b"c"])
    assert [call[0] for call in slow.calls] == [3, 4, 5]
    del tail.slow
    with pytest.raises(AttributeError, match="no slow path"):
        tail.append_run(6, T0, 7, 6, [b"d"])


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_a_writer_s_appender_writes_the_bytes_append_batch_writes(
    impl: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from feedha.adapter.journal import writer as writer_module

    monkeypatch.setattr(writer_module, "FRAMING", impl)
    runs = [
        (first, [bytes([first % 251]) * (first * 37 % 200) for _ in range(7)]) for first in range(1, 1400, 7)
    ]
    with (
        JournalWriter(tmp_path / "batch", SMALL) as by_batch,
        JournalWriter(tmp_path / "tail", SMALL) as by_tail,
    ):
        for first, payloads in runs:
            by_batch.append_batch(first, T0 + first, 3, range(100 + first, 107 + first), payloads)
            by_tail.appender.append_run(first, T0 + first, 3, 100 + first, payloads)
        assert by_tail.last_msg_seq == by_batch.last_msg_seq == 1400
    names = sorted(p.name for p in (tmp_path / "batch").iterdir())
    assert len([n for n in names if n.endswith(".fhj")]) > 3  # segments rolled, through the writer's path
    assert names == sorted(p.name for p in (tmp_path / "tail").iterdir())
    for name in names:
        if name.endswith((".fhj", ".fhi")):
            assert (tmp_path / "tail" / name).read_bytes() == (tmp_path / "batch" / name).read_bytes(), name
    read = list(JournalReader(tmp_path / "tail").read())
    assert [(r.msg_seq, r.source_seq) for r in read] == [(s, s + 100) for s in range(1, 1401)]
