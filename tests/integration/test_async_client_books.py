"""AsyncFeedClient's books and replay by time, with real processes: an admin server and fix44 adapters.

One module-scoped cluster (tests/integration/book_cluster.py): ``feedha
admin-server`` on port 0, two journaling ``--format fix44`` adapters
registered with it, and a capture written by simplefix played through them.
The books an ``AsyncFeedClient`` keeps (``book_updates``, ``book_updates_of``,
``book``) must equal the ones an independent implementation rebuilds from
the capture (tests/fix44_capture.py), live and from an image, and equal the
blocking ``FeedClient``'s; ``replay`` must give back exactly the messages
published in its window, for the subscribed symbols only. The first test
plays the capture, so it runs first.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from feedha.client import (
    AsyncFeedClient,
    ConfigError,
    Delivery,
    FeedClient,
    ImageDelivery,
    SubscriberConfig,
)
from feedha.client.books import Book, BookUpdate
from feedha.transport.tasks import cancel_and_wait
from tests.fix44_capture import Reference, make_capture
from tests.integration.book_cluster import CHANNEL, WAIT, BookCluster, book_cluster, shown

pytestmark = pytest.mark.timeout(240)
CONFIG = SubscriberConfig(fill_timeout=0.5, loss_timeout=5.0)  # generous on a loaded 2-core machine
LIVE = ("S000*", "S001*")  # S0000..S0019 of the capture's S0000..S0119


@pytest.fixture(scope="module")
def books(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BookCluster]:
    capture = make_capture(symbols=120, messages=1500, seed=7)
    with book_cluster(tmp_path_factory.mktemp("books"), capture, rate=500) as cluster:
        yield cluster


def _wanted(patterns: tuple[str, ...]) -> Callable[[str], bool]:
    return lambda symbol: any(symbol.startswith(p.rstrip("*")) for p in patterns)


def _expected(reference: Reference, wanted: Callable[[str], bool]) -> dict[str, Any]:
    return {symbol: book for symbol, book in reference.shown().items() if wanted(symbol)}


def _books(book: Callable[[str], Book | None], symbols: list[str]) -> dict[str, Any]:
    return {symbol: shown(found) for symbol in symbols if (found := book(symbol)) is not None}


def _assert_stats(
    book: Callable[[str], Book | None], reference: Reference, wanted: Callable[[str], bool]
) -> None:
    for symbol, stats in reference.shown_stats().items():
        if not wanted(symbol):
            continue
        found = book(symbol)
        assert found is not None, symbol
        for name, value in stats.items():
            got = found.stats[name]
            assert (got is None) == (value is None), (symbol, name, got, value)
            assert value is None or math.isclose(got or 0.0, value, rel_tol=1e-9), (symbol, name, got, value)


async def _read_until(
    items: AsyncIterator[Any],
    done: Callable[[], bool],
    what: str,
    each: Callable[[Any], object] = lambda item: None,
) -> list[Any]:
    """Iterate ``items`` in a task, calling ``each`` on every one, until ``done()`` holds; what came.

    ``done`` is checked while the task waits on the lines, so every item a poll gave is in.
    """
    got: list[Any] = []

    async def read() -> None:
        async for item in items:
            got.append(item)
            each(item)

    task = asyncio.create_task(read())
    try:
        deadline = time.monotonic() + WAIT
        while not done():
            assert not task.done(), f"the iterator ended early: {task}"
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.05)  # poll interval of a deadline-bounded wait
    finally:
        await cancel_and_wait(task)
    return got


async def test_book_updates_follow_the_capture_live_and_end_on_the_reference_books(
    books: BookCluster,
) -> None:
    assert books.source is None, "this test plays the capture: it must run first"
    wanted = _wanted(LIVE)
    async with AsyncFeedClient(*books.trader, config=CONFIG, retry_deadline_s=20) as client:
        await client.subscribe(list(LIVE))
        joined = await _read_until(client.events(), lambda: client.stats().lines == 2, "both lines")
        assert not [e for e in joined if isinstance(e, Delivery)]  # nothing published yet
        books.play()
        expected = _expected(books.reference(), wanted)
        assert len(expected) >= 15
        updates: list[BookUpdate] = await _read_until(
            client.book_updates(),
            lambda: _books(client.book, list(expected)) == expected,
            "the reference books",
        )
        stats = client.stats()
        _assert_stats(client.book, books.reference(), wanted)
    assert updates and {u.symbol for u in updates} == set(expected)  # the others were on the line too
    assert not [u for u in updates if u.is_image]
    assert [u.msg_seq for u in updates] == sorted(u.msg_seq for u in updates)
    assert any(u.changes for u in updates) and any(u.trades for u in updates)
    for symbol in expected:  # each symbol's last update carries the book the client keeps
        assert shown(next(u.book for u in reversed(updates) if u.symbol == symbol)) == expected[symbol]
    assert stats.filtered > 0 and stats.channels[CHANNEL].lost == 0


async def test_an_image_through_events_and_book_updates_of_matches_the_blocking_client(
    books: BookCluster,
) -> None:
    books.played()
    patterns = ("S002*",)
    wanted = _wanted(patterns)
    expected = _expected(books.reference(), wanted)
    async with AsyncFeedClient(*books.trader, config=CONFIG, retry_deadline_s=20) as client:
        await client.subscribe(list(patterns), initial_image=True)
        updates: list[BookUpdate] = []

        def keep(event: Any) -> None:
            if isinstance(event, Delivery):
                updates.extend(client.book_updates_of(event))

        def complete() -> bool:
            return _books(client.book, list(expected)) == expected

        events = await _read_until(client.events(), complete, "the image's books", keep)
        assert client.book("S0030") is None and client.book("S0100") is None  # on the channel, not subscribed
        _assert_stats(client.book, books.reference(), wanted)
        async_books = _books(client.book, list(expected))
    images = [e for e in events if isinstance(e, ImageDelivery)]
    assert images and all(isinstance(e, ImageDelivery) for e in events if isinstance(e, Delivery))
    assert updates and all(u.is_image and wanted(u.symbol) for u in updates)

    def blocking() -> dict[str, Any]:
        with FeedClient(*books.trader, config=CONFIG, retry_deadline_s=20) as sync_client:
            sync_client.subscribe(list(patterns), initial_image=True)
            deadline = time.monotonic() + WAIT
            while _books(sync_client.book, list(expected)) != expected:
                assert time.monotonic() < deadline, "the blocking client never got the image's books"
                for delivery in sync_client.poll(0.2):
                    sync_client.book_updates_of(delivery)
            return _books(sync_client.book, list(expected))

    assert await asyncio.to_thread(blocking) == async_books == expected


async def _replayed(client: AsyncFeedClient, window: tuple[float, float], **kwargs: Any) -> list[Delivery]:
    return [e async for e in client.replay(CHANNEL, *window, **kwargs) if isinstance(e, Delivery)]


async def test_replay_by_time_gives_the_window_exactly_and_only_the_subscribed_symbols(
    books: BookCluster,
) -> None:
    began = time.time()
    last = books.played()
    window = (books.played_at - 1.0, time.time())  # every message was published after play()
    async with AsyncFeedClient(*books.trader, config=CONFIG, retry_deadline_s=20) as client:
        await client.subscribe(["*"])
        with pytest.raises(ConfigError, match="no route of the subscription carries it"):
            client.replay("NOPE", *window)  # refused by the call, before any iteration
        with pytest.raises(ValueError, match="must be after its start"):
            client.replay(CHANNEL, window[1], window[0])
        everything = await _replayed(client, window)
        assert [d.msg_seq for d in everything] == list(range(1, last + 1))
        assert all(window[0] * 1e9 <= d.send_time_ns < window[1] * 1e9 for d in everything)
        latest: dict[str, Book] = {}
        for delivery in everything:  # the replayed messages rebuild every book
            latest.update((u.symbol, u.book) for u in client.book_updates_of(delivery))
        reference = books.reference()
        assert {s: shown(b) for s, b in latest.items() if s in reference.books} == reference.shown()
        assert all(not b.bids and not b.asks for s, b in latest.items() if s not in reference.books)
        paced = await _replayed(client, window, speed=max(1.0, 4 * (window[1] - window[0])))  # ~0.25 s
        assert [d.msg_seq for d in paced] == [d.msg_seq for d in everything]

        await client.modify(["S000*"])
        few = await _replayed(client, window)
    wanted = _wanted(("S000*",))
    touching = [d.msg_seq for d in everything if any(wanted(s.symbol) for s in d.update.symbols)]
    assert len(touching) > 20 and [d.msg_seq for d in few] == touching  # fix44 blocks name several
    assert time.time() - began < WAIT
