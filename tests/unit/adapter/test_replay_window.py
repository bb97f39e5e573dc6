"""The replay service's time ranges (kind 4): exact windows, paged by after_seq, entitlements, purges."""

from __future__ import annotations

from pathlib import Path

import pytest

from feedha.adapter.journal import JournalConfig, JournalReader, JournalWriter
from feedha.adapter.journal.format import RECORD_SESSION_BOUNDARY
from feedha.adapter.replay import ReplayService
from feedha.proto import wire
from feedha.proto.replay import ReplayStatus, ReplyStatus, decode_status, encode_request, time_request

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
S = 1_000 * MS
COUNT = 3000  # record n published at T0 + n ms; record 1500 ends a session


def _journal(path: Path) -> JournalWriter:
    writer = JournalWriter(path, JournalConfig(segment_bytes=128 * 1024, index_interval_bytes=2048))
    for seq in range(1, COUNT + 1):
        flags = RECORD_SESSION_BOUNDARY if seq == 1500 else 0
        writer.append(seq, T0 + seq * MS, 1, seq, seq.to_bytes(4, "big") * 25, flags)
    writer.flush()
    return writer


@pytest.fixture
def writer(tmp_path: Path):  # type: ignore[no-untyped-def]
    with _journal(tmp_path) as journal:
        yield journal


def _service(
    writer: JournalWriter, *, max_bytes: int = 1 << 20, delay_ns: int | None = None
) -> ReplayService:
    return ReplayService(
        JournalReader(writer.directory),
        channel=3,
        adapter=2,
        max_packet_bytes=1400,
        max_bytes=max_bytes,
        bounds=lambda: (1, writer.last_msg_seq),
        delay_ns=delay_ns,
        time_index=writer.time_index.start_for,
    )


def _ask(service: ReplayService, start: int, end: int, after: int = 0, *, now: int, **kw: bool):  # type: ignore[no-untyped-def]
    body = encode_request(time_request(3, 9, start, end, after_seq=after))
    reply = service.answer([b"peer", b"", body], term=4, send_time_ns=now, **kw)
    assert reply[:2] == [b"peer", b""]
    return decode_status(reply[2]), reply[3:]


def _page_through(service: ReplayService, start: int, end: int, *, now: int) -> tuple[list[wire.Block], int]:
    blocks: list[wire.Block] = []
    after, pages = 0, 0
    while pages < 1000:  # bounded: a window is a few pages
        pages += 1
        status, packets = _ask(service, start, end, after, now=now)
        assert status.status in (ReplayStatus.OK, ReplayStatus.END), status
        assert status.first_seq == after + 1 and status.packet_count == len(packets)
        for packet in packets:
            header, got = wire.decode_packet(packet)
            assert header.is_retransmission and header.channel == 3 and header.term == 4
            assert header.is_end_of_session == (got[0].msg_seq == 1500)
            assert header.send_time_ns == T0 + got[0].msg_seq * MS and len(got) == 1  # its publish time
            blocks += got
        after = status.through
        if status.status is ReplayStatus.END:
            break
    return blocks, pages


def test_a_window_is_exactly_the_messages_published_in_it_in_order_over_several_pages(
    writer: JournalWriter,
) -> None:
    service = _service(writer, max_bytes=8 * 1024)
    blocks, pages = _page_through(service, T0 + 1000 * MS, T0 + 2500 * MS, now=T0 + 10 * S)
    assert [b.msg_seq for b in blocks] == list(range(1000, 2500))
    assert all(b.payload == b.msg_seq.to_bytes(4, "big") * 25 and b.source_seq == b.msg_seq for b in blocks)
    assert pages > 10  # paged by the byte budget, each page picked up after the last
    assert service.counters.windows == pages


def test_a_window_still_being_written_is_not_complete_until_its_end_has_passed(
    writer: JournalWriter,
) -> None:
    service = _service(writer)
    end = T0 + 4000 * MS  # past the newest record (3000)
    status, packets = _ask(service, T0 + 2990 * MS, end, now=T0 + 3001 * MS)
    assert status.status is ReplayStatus.OK and status.through == COUNT and len(packets) == 11
    status, packets = _ask(service, T0 + 2990 * MS, end, COUNT, now=T0 + 3001 * MS)
    assert (status.status, status.through, packets) == (ReplayStatus.OK, COUNT, [])
    status, packets = _ask(service, T0 + 2990 * MS, end, COUNT, now=end)
    assert (status.status, packets) == (ReplayStatus.END, [])


def test_an_empty_window_or_one_before_the_journal_ends_at_once(writer: JournalWriter) -> None:
    service = _service(writer)
    status, packets = _ask(service, T0 - 10 * S, T0, now=T0 + 10 * S)
    assert (status.status, packets) == (ReplayStatus.END, [])
    status, packets = _ask(service, T0 + 10 * MS + 1, T0 + 11 * MS, now=T0 + 10 * S)
    assert (status.status, packets) == (ReplayStatus.END, [])


def test_a_delayed_only_key_may_replay_only_windows_that_ended_a_delay_ago(writer: JournalWriter) -> None:
    now = T0 + 3 * S
    service = _service(writer, delay_ns=2 * S)
    status, packets = _ask(service, T0, T0 + 1500 * MS, now=now, delayed_only=True)
    assert isinstance(status, ReplyStatus) and status.status is ReplayStatus.NOT_ENTITLED and not packets
    assert "must end by now - delay (2 s)" in status.message
    status, packets = _ask(service, T0, T0 + 1 * S, now=now, delayed_only=True)
    assert status.status is ReplayStatus.END and packets
    no_delay = _service(writer)
    status, _ = _ask(no_delay, T0, T0 + 1 * S, now=now, delayed_only=True)
    assert status.status is ReplayStatus.NOT_ENTITLED and "serves no delayed stream" in status.message
    assert no_delay.counters.not_entitled == 1


def test_messages_published_together_share_a_packet_stamped_with_their_publish_time(tmp_path: Path) -> None:
    with JournalWriter(tmp_path) as journal:
        for batch in range(10):  # 10 packets of 5 messages, as the line carried them
            journal.append_batch(1 + 5 * batch, T0 + batch * MS, 1, list(range(5)), [b"x" * 20] * 5)
        journal.flush()
        service = _service(journal)
        status, packets = _ask(service, T0 + 2 * MS, T0 + 7 * MS, now=T0 + S)
    headers = [wire.decode_header(p) for p in packets]
    assert status.status is ReplayStatus.END and status.through == 35
    assert [(h.first_seq, h.count, h.send_time_ns) for h in headers] == [
        (11 + 5 * i, 5, T0 + (2 + i) * MS) for i in range(5)
    ]
