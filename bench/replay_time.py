"""Replay-by-time benchmark: a window paged from a journal through the replay service, beside raw ZeroMQ.

A journal of ``MESSAGES`` real ``MarketUpdate`` payloads (64 a publish time,
one publish time a millisecond, like the packets of a busy line) is served by
the adapter's replay service on its own thread and ROUTER socket over TCP
loopback (:class:`~adapter.replay_server.ReplayServer`, with the rate limits
raised: this measures the service, not the per-key budget), and the client
replays the middle half of it by time at full speed
(:func:`~feedha.client._time_replay.replay_window`: one page a request, each
message handed out as a ``Delivery``). Figure ``replay_time``, msg/s.

Ceiling, same run: the same pages (the packets the service sent) served by a
bare pyzmq ROUTER thread from memory, one page per request of a bare DEALER
that only counts the messages in each packet header: the transport's request
-reply cost for the same bytes and round trips, with no journal read, packing
or client-side delivery. ``service_msg_per_s`` (a param) is the service alone:
``ReplayService.answer`` called in-process for every page, no sockets.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from array import array
from pathlib import Path
from typing import Any, Final

import zmq

from feedha.adapter.journal import JournalReader, JournalWriter
from feedha.adapter.replay import ReplayService
from feedha.adapter.replay_limits import ReplayLimits
from feedha.adapter.replay_server import ReplayServer
from feedha.bench.common import Figure, figure, sample_payloads
from feedha.client import Delivery, ReplayClient
from feedha.client._time_replay import TimeReplay, replay_window
from feedha.ports import free_ports
from feedha.proto import wire
from feedha.proto.replay import ReplayStatus, decode_status, encode_request, time_request

MESSAGES: Final = 400_000
QUICK_MESSAGES: Final = 40_000
BATCH: Final = 64  # messages a publish time
REPLY_BYTES: Final = 1024 * 1024  # the adapter's default --replay-max-bytes
PACKET_BYTES: Final = 8192
_T0: Final = 1_700_000_000_000_000_000
_MS: Final = 1_000_000
_UNLIMITED: Final = 1e12
_CHANNEL: Final = 1


def _write(directory: Path, count: int) -> JournalWriter:
    payloads = sample_payloads(count)
    writer = JournalWriter(directory)
    for i in range(0, count, BATCH):
        chunk = payloads[i : i + BATCH]
        writer.append_batch(
            i + 1, _T0 + (i // BATCH) * _MS, 1, array("q", range(i + 1, i + 1 + len(chunk))), chunk
        )
    writer.flush()
    return writer


def _service(writer: JournalWriter) -> ReplayService:
    return ReplayService(
        JournalReader(writer.directory),
        channel=_CHANNEL,
        adapter=1,
        max_packet_bytes=PACKET_BYTES,
        max_bytes=REPLY_BYTES,
        bounds=lambda: (1, writer.last_msg_seq),
        time_index=writer.time_index.start_for,
    )


def _pages(service: ReplayService, start: int, end: int) -> tuple[list[list[bytes]], int, float]:
    # Every page of the window, answered in-process: (pages' packets, messages, seconds).
    pages: list[list[bytes]] = []
    after, messages = 0, 0
    began = time.perf_counter()
    while True:
        body = encode_request(time_request(_CHANNEL, 1, start, end, after_seq=after))
        reply = service.answer([b"", body], term=1, send_time_ns=time.time_ns())
        status = decode_status(reply[1])
        pages.append(reply[2:])
        messages += sum(wire.decode_header(p).count for p in reply[2:])
        after = status.through
        if status.status is ReplayStatus.END:
            return pages, messages, time.perf_counter() - began


def _through_service(service: ReplayService, start: int, end: int) -> tuple[int, float]:
    endpoint = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    limits = ReplayLimits(
        peer_requests_per_s=_UNLIMITED,
        peer_bytes_per_s=_UNLIMITED,
        total_requests_per_s=_UNLIMITED,
        total_bytes_per_s=_UNLIMITED,
    )
    server = ReplayServer(endpoint, service, lambda: 1, limits)
    server.start()
    client = ReplayClient({_CHANNEL: [endpoint]}, timeout=5.0, budget=5.0)
    try:
        began = time.perf_counter()
        count = sum(isinstance(e, Delivery) for e in replay_window(client, TimeReplay(_CHANNEL, start, end)))
        return count, time.perf_counter() - began
    finally:
        client.close()
        server.stop()


def _ceiling(pages: list[list[bytes]]) -> tuple[int, float]:
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    endpoint = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    router = context.socket(zmq.ROUTER)
    router.linger = 0
    router.bind(endpoint)
    status = b"\x00" * 44  # a stand-in status frame: the ceiling does not decode it

    def serve() -> None:
        for page in pages:
            if not router.poll(10_000):
                return
            identity, empty, _body = router.recv_multipart()
            router.send_multipart([identity, empty, status, *page])

    thread = threading.Thread(target=serve, name="bench-ceiling-router", daemon=True)
    thread.start()
    dealer = context.socket(zmq.DEALER)
    dealer.linger = 0
    dealer.connect(endpoint)
    count = 0
    try:
        began = time.perf_counter()
        for _ in pages:
            dealer.send_multipart([b"", b"r" * 36])
            frames = dealer.recv_multipart()
            count += sum(wire.decode_header(p).count for p in frames[2:])
        return count, time.perf_counter() - began
    finally:
        thread.join(timeout=10)
        dealer.close(linger=0)
        router.close(linger=0)


def run(*, quick: bool = False) -> list[Figure]:
    """Replay the middle half of a journal by time at full speed: the service, then bare ZeroMQ."""
    count = QUICK_MESSAGES if quick else MESSAGES
    root = Path(tempfile.mkdtemp(prefix="feedha-bench-replay-time-"))
    try:
        writer = _write(root / "journal", count)
        span = (count // BATCH) * _MS
        start, end = _T0 + span // 4, _T0 + 3 * span // 4
        service = _service(writer)
        pages, window, service_s = _pages(service, start, end)
        replayed, replay_s = _through_service(service, start, end)
        raw, raw_s = _ceiling(pages)
        writer.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    params: dict[str, Any] = {
        "messages": count,
        "window_messages": window,
        "replayed": replayed,
        "lost": window - replayed,
        "pages": len(pages),
        "reply_bytes": REPLY_BYTES,
        "packet_bytes": PACKET_BYTES,
        "messages_per_publish_time": BATCH,
        "service_msg_per_s": round(window / service_s),
        "ceiling_messages": raw,
    }
    return [
        figure(
            name="replay_time", value=replayed / replay_s, unit="msg/s", ceiling=raw / raw_s, params=params
        )
    ]
