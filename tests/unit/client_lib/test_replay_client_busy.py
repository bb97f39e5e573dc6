"""A gap fill that meets BUSY asks again: a hole of many pages is filled whole, within the call's budget.

The replay services answer a real journal (adapter/replay.py's ReplayService, a few messages a
page); the test stands in for the sockets (ReplayClient.request) and makes them BUSY the way a
payer over its byte budget is: after each page for a while. Measured before the fix: the
overload drill's client filled one page (~6,250 ITCH messages) of each 20,000-50,000-message
hole the lines dropped for it, and lost the rest.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from feedha.adapter.journal import JournalReader, JournalWriter
from feedha.adapter.replay import ReplayService
from feedha.client import ReplayClient
from feedha.proto import market_pb2, wire
from feedha.proto.replay import ReplayRequest, ReplyStatus, decode_status, encode_request

CHANNEL = 5


class BusyServices(ReplayClient):
    """A ReplayClient whose services answer from one journal, BUSY ``busy_after_page`` times a page."""

    def __init__(self, service: ReplayService, *, busy_after_page: dict[str, int], budget: float) -> None:
        super().__init__({CHANNEL: list(busy_after_page)}, budget=budget, timeout=budget)
        self.service, self.busy_after_page = service, busy_after_page
        self.owed = dict.fromkeys(busy_after_page, 0)
        self.asked: list[tuple[str, str]] = []

    def request(self, endpoint: str, request: ReplayRequest, *, deadline: float) -> Any:
        frames = [b"", encode_request(request)]
        if self.owed[endpoint] != 0:
            self.owed[endpoint] -= 1  # -1 (forever) stays below 0
            reply = self.service.busy(frames)
        else:
            self.owed[endpoint] = self.busy_after_page[endpoint]
            reply = self.service.answer(frames, term=1, send_time_ns=0)
        status: ReplyStatus = decode_status(reply[1])
        self.asked.append((endpoint, status.status.name))
        return status, reply[2:]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[ReplayService]:
    with JournalWriter(tmp_path) as writer:
        for i in range(300):
            payload = market_pb2.MarketUpdate(symbol=f"S{i % 4}").SerializeToString()
            writer.append(i + 1, i, 1, i + 1, payload)
        writer.flush()
        yield ReplayService(
            JournalReader(writer.directory),
            channel=CHANNEL,
            adapter=1,
            max_packet_bytes=200,
            max_bytes=400,  # a few messages a page: dozens of pages
            bounds=lambda: (1, writer.last_msg_seq),
        )


def _covered(packets: list[bytes]) -> set[int]:
    seqs: set[int] = set()
    for packet in packets:
        header = wire.decode_header(packet)
        seqs.update(range(header.first_seq, header.next_seq))
    return seqs


def test_a_hole_of_many_pages_is_filled_whole_when_the_services_are_busy_between_pages(
    service: ReplayService,
) -> None:
    client = BusyServices(service, busy_after_page={"tcp://a": 1, "tcp://b": 2}, budget=5.0)
    packets = client.fetch(CHANNEL, 1, 300)
    assert _covered(packets) == set(range(1, 301))
    stats = client.stats()
    assert stats.unfilled == 0 and stats.busy > 0 and stats.failures == 0
    answered = {endpoint for endpoint, status in client.asked if status == "OK"}
    assert answered == {"tcp://a", "tcp://b"}  # a busy service's turn goes to the other


def test_services_busy_for_good_cost_the_call_its_budget_and_no_more(service: ReplayService) -> None:
    client = BusyServices(service, busy_after_page={"tcp://a": -1, "tcp://b": -1}, budget=0.3)
    packets = client.fetch(CHANNEL, 1, 300)  # returns: the budget ends the rounds
    # Each gave its one page before turning busy; then the call asked again, round after round.
    assert len(_covered(packets)) < 300 and client.stats().unfilled == 300 - len(_covered(packets))
    assert [status for _, status in client.asked][:4] == ["OK", "BUSY", "OK", "BUSY"]  # a, a, b, b
    assert sum(status == "BUSY" for _, status in client.asked) >= 4
