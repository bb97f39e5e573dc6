"""Status events for applications, with real processes: FeedClient and AsyncFeedClient on ``feedha up``.

One module-scoped ``feedha up --channels 1`` (admin server, plain source,
three journaling adapters, CURVE on every line). The clients run in this
process. Each test makes something happen to the cluster -- an operator
failover, the adapters frozen (SIGSTOP) for a moment, a client that stops
reading long enough for its socket queues to overflow, a policy that takes
an entitlement away and gives it back -- and checks the events the
application gets, through the iterator and through the callbacks. The
same cluster serves a client in another process that has none of feedha's
code (``foreign_client.py``): it decodes the line with the descriptor set
its route came with.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from google.protobuf import json_format
from prometheus_client import CollectorRegistry, generate_latest

from feedha.client import (
    AsyncFeedClient,
    AuthenticationFailed,
    ClosedError,
    Delivery,
    EntitlementChanged,
    FeedClient,
    GapLost,
    Recovered,
    Resumed,
    RetransmissionNeeded,
    Stale,
    StatusEvent,
    SubscriberConfig,
    TermChanged,
)
from feedha.client.metrics import FeedClientCollector
from feedha.proto import market_pb2
from feedha.proto.model import MARKET_MODEL
from tests.integration.up import failover, feedha_up, user_key

pytestmark = pytest.mark.timeout(300)
WAIT = 60.0


@pytest.fixture(scope="module")
def up(tmp_path_factory) -> Iterator[dict[str, Any]]:
    with feedha_up(tmp_path_factory.mktemp("up"), rate=1000) as described:
        yield described


def _adapters(up: dict[str, Any]) -> list[psutil.Process]:
    # The adapters are our own grandchildren (feedha up started them): found by the parent's pid.
    children = psutil.Process(up["pid"]).children(recursive=True)
    return [p for p in children if "--adapter" in p.cmdline() and "--line" in p.cmdline()]


def _collect(
    client: FeedClient, into: list[Any], until: Callable[[], bool], what: str, timeout: float = WAIT
) -> None:
    deadline = time.monotonic() + timeout
    while not until():
        assert time.monotonic() < deadline, f"timed out waiting for {what}; got {_kinds(into)}"
        into.extend(client.poll_events(0.2))


def _kinds(events: list[Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for event in events:
        counts[type(event).__name__] = counts.get(type(event).__name__, 0) + 1
    return counts


def _has(events: list[Any], kind: type) -> bool:
    return any(isinstance(e, kind) for e in events)


def _assert_in_order(deliveries: list[Delivery]) -> None:
    seqs = [d.msg_seq for d in deliveries]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "repeated or reordered msg_seq"


@pytest.mark.slow  # 10 s: in CI's slow stage; the default keeps the async client's failover
def test_failover_stale_and_resumed_reach_the_iterator_and_the_callbacks(up):
    config = SubscriberConfig(stale_after=0.4, fill_timeout=0.3, loss_timeout=10.0)
    with FeedClient(up["admin"], *user_key(up, "subscriber"), config=config, retry_deadline_s=20) as client:
        called: list[StatusEvent] = []
        terms: list[StatusEvent] = []
        client.on_status(called.append)
        remove = client.on_status(terms.append, TermChanged)
        client.subscribe(["*"])
        events: list[Any] = []
        _collect(client, events, lambda: sum(isinstance(e, Delivery) for e in events) >= 200, "deliveries")

        failover(up, up["channels"][0]["name"])
        _collect(client, events, lambda: _has(events, TermChanged), "TermChanged after the failover")
        change = next(e for e in events if isinstance(e, TermChanged))
        assert change.new_term > change.old_term and change.channel_name == up["channels"][0]["name"]
        assert terms == [change]

        frozen = _adapters(up)
        assert len(frozen) == 3
        for process in frozen:
            process.send_signal(signal.SIGSTOP)
        before = len(events)  # the handover may have been Stale for a moment too: the freeze's own
        try:
            _collect(
                client,
                events,
                lambda: _has(events[before:], Stale),
                "Stale while every adapter is frozen",
                10,
            )
        finally:
            for process in frozen:
                process.send_signal(signal.SIGCONT)
        _collect(client, events, lambda: _has(events[before:], Resumed), "Resumed once they run again")
        stale = next(e for e in events[before:] if isinstance(e, Stale))
        resumed = next(e for e in events[before:] if isinstance(e, Resumed))
        assert stale.silent_s >= 0.4 and resumed.silent_s >= stale.silent_s
        remove()
        # Callbacks saw every status event the iterator returned, in the same order.
        assert [e for e in events if isinstance(e, StatusEvent)] == called
        assert terms[0] == change and all(isinstance(e, TermChanged) for e in terms)
        seen = len(terms)
        failover(up, up["channels"][0]["name"])
        _collect(
            client,
            events,
            lambda: sum(isinstance(e, TermChanged) for e in events) > seen,
            "a second failover",
        )
        assert len(terms) == seen  # removed: no more calls
        _assert_in_order([e for e in events if isinstance(e, Delivery)])
        stats = client.stats()
        assert stats.status_events["TermChanged"] >= 1 and stats.status_events["Stale"] >= 1


def test_a_gap_is_reported_and_recovered_from_the_journals(up):
    # A tiny socket queue and a client that stops reading: every line drops packets past
    # its high-water mark, so the client sees holes on all lines and fills them by retransmission.
    config = SubscriberConfig(rcvhwm=2, fill_timeout=0.1, loss_timeout=20.0, stale_after=30.0)
    with FeedClient(up["admin"], *user_key(up, "subscriber"), config=config, retry_deadline_s=20) as client:
        recovered: list[StatusEvent] = []
        client.on_status(recovered.append, Recovered)
        registry = CollectorRegistry()
        FeedClientCollector(client, registry=registry)
        client.subscribe(["*"])
        events: list[Any] = []
        _collect(client, events, lambda: sum(isinstance(e, Delivery) for e in events) >= 100, "deliveries")
        time.sleep(1.5)  # the application stalls on purpose: the sockets overflow meanwhile
        _collect(client, events, lambda: _has(events, Recovered), "Recovered after the stall")
        gap = next(e for e in events if isinstance(e, RetransmissionNeeded))
        done = next(e for e in events if isinstance(e, Recovered))
        assert done.recovered > 0 and gap.first_seq <= done.first_seq
        assert recovered and recovered[0] == done
        assert not _has(events, GapLost), "a journal had every message: nothing may be lost"
        deliveries = [e for e in events if isinstance(e, Delivery)]
        _assert_in_order(deliveries)
        assert deliveries[-1].msg_seq - deliveries[0].msg_seq + 1 == len(deliveries), "a hole was skipped"
        assert client.stats().replay_requests >= 1
        scraped = generate_latest(registry).decode()
        assert 'feedha_client_status_events_total{kind="Recovered"}' in scraped
        assert 'feedha_client_lost_total{channel="EQ-A-Z"} 0.0' in scraped
        count = next(
            line
            for line in scraped.splitlines()
            if line.startswith("feedha_client_delivery_latency_seconds_count")
        )
        assert float(count.split()[1]) == len(deliveries)


def test_entitlement_narrowed_then_widened(up):
    policy = Path(up["dir"]) / "policy.yaml"
    original = policy.read_text()
    config = SubscriberConfig(stale_after=30.0)
    with FeedClient(up["admin"], *user_key(up, "subscriber"), config=config, retry_deadline_s=20) as client:
        client.subscribe(["A*", "B*"])
        events: list[Any] = []
        _collect(client, events, lambda: any(isinstance(e, Delivery) for e in events), "deliveries")
        try:
            policy.write_text(
                original.replace('symbols: ["*"]\n    mode: realtime', 'symbols: ["A*"]\n    mode: realtime')
            )
            _collect(client, events, lambda: _has(events, EntitlementChanged), "the narrowing")
        finally:
            policy.write_text(original)
        narrowed = next(e for e in events if isinstance(e, EntitlementChanged))
        assert set(narrowed.removed) == {"A*", "B*"} and narrowed.symbols == ()
        _collect(
            client,
            events,
            lambda: sum(isinstance(e, EntitlementChanged) for e in events) >= 2,
            "the widening after the policy came back",
        )
        widened = [e for e in events if isinstance(e, EntitlementChanged)][1]
        assert set(widened.added) == {"A*", "B*"} and set(widened.symbols) == {"A*", "B*"}
        count = len(events)
        _collect(client, events, lambda: any(isinstance(e, Delivery) for e in events[count:]), "data again")
        symbols = {e.update.symbol[0] for e in events if isinstance(e, Delivery)}
        assert symbols <= {"A", "B"}


async def test_async_feed_client_refuses_a_bad_secret_and_needs_opening(up):
    key_id, _secret = user_key(up, "subscriber")
    client = AsyncFeedClient(up["admin"], key_id, "not-the-secret", retry_deadline_s=5)
    with pytest.raises(ClosedError, match="not open"):
        await client.subscribe(["*"])
    with pytest.raises(AuthenticationFailed):
        await client.open()
    assert "closed" in repr(client)
    with pytest.raises(ClosedError):
        await client.poll(0.1)


async def test_async_feed_client_delivers_and_reports_a_failover(up):
    config = SubscriberConfig(fill_timeout=0.3, loss_timeout=10.0)
    async with AsyncFeedClient(
        up["admin"], *user_key(up, "subscriber"), config=config, retry_deadline_s=20
    ) as client:
        terms: list[StatusEvent] = []
        client.on_status(terms.append, TermChanged)
        subscription = await client.subscribe(["*"])
        assert subscription.routes
        deliveries: list[Delivery] = []
        async with asyncio.timeout(WAIT):
            async for delivery in client:
                deliveries.append(delivery)
                if len(deliveries) >= 200:
                    break
        loop = asyncio.get_running_loop()
        done = loop.run_in_executor(None, failover, up, up["channels"][0]["name"])
        seen: list[Any] = []
        async with asyncio.timeout(WAIT):
            async for event in client.events():
                seen.append(event)
                if isinstance(event, TermChanged):
                    break
        await done
        assert terms and terms[0] == seen[-1]
        _assert_in_order(deliveries + [e for e in seen if isinstance(e, Delivery)])
        stats = client.stats()
        assert stats.delivered >= 200 and stats.lines == 3
        assert "AsyncFeedClient [subscribed" in repr(client)
    assert "closed" in repr(client)


def test_a_client_with_none_of_our_code_decodes_a_line_from_the_routes_descriptor_set(up):
    key_id, secret = user_key(up, "subscriber")
    env = {**os.environ, "FEEDHA_KEY_ID": key_id, "FEEDHA_SECRET": secret}
    program = Path(__file__).with_name("foreign_client.py")
    ran = subprocess.run(
        [sys.executable, "-I", str(program), up["admin"], "*", "200"],
        env=env, capture_output=True, text=True, timeout=120, cwd="/",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    seen = json.loads(ran.stdout)
    assert seen["feedha_imported"] == []
    assert (seen["model"], seen["version"]) == (MARKET_MODEL.name, MARKET_MODEL.version)
    blocks = seen["blocks"]
    assert len(blocks) >= 200
    for block in blocks:  # decoded as our own generated code decodes the same bytes
        ours = market_pb2.MarketUpdate.FromString(bytes.fromhex(block["payload"]))
        assert block["decoded"] == json_format.MessageToDict(ours), block["msg_seq"]
        assert block["decoded"]["symbol"]
    seqs = [block["msg_seq"] for block in blocks]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
