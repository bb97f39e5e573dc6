"""cancel_and_wait: a task ends, and a cancellation meant for the one that waits is never lost."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from feedha.transport.tasks import cancel_and_wait, wait_at_most


async def _forever(started: asyncio.Event) -> None:
    started.set()
    await asyncio.Event().wait()


async def test_the_cancelled_task_ends_and_its_own_cancellation_is_absorbed() -> None:
    started = asyncio.Event()
    task = asyncio.create_task(_forever(started))
    await started.wait()
    await cancel_and_wait(task)  # no CancelledError here
    assert task.cancelled()


async def test_what_the_task_raised_instead_goes_up() -> None:
    async def fails_on_cancel() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise RuntimeError("cleanup failed") from None

    task = asyncio.create_task(fails_on_cancel())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="cleanup failed"):
        await cancel_and_wait(task)


async def test_a_loop_cancelled_while_it_waits_for_its_helper_stops() -> None:
    # The race behind a stop() that waited forever: the loop is cancelled at the very await
    # on the helper it cancelled. suppress(CancelledError) there swallowed the loop's own
    # cancellation and the loop went round again; cancel_and_wait raises it.
    rounds = 0

    async def stubborn_helper() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)  # takes a while to end: the loop's cancel lands meanwhile
            raise

    async def loop(swallow: bool, more: list[bool]) -> None:
        nonlocal rounds
        while more[0]:
            rounds += 1
            helper = asyncio.create_task(stubborn_helper())
            await asyncio.sleep(0)
            if swallow:
                helper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await helper
            else:
                await cancel_and_wait(helper)

    for swallow, ends in ((False, True), (True, False)):
        rounds, more = 0, [True]
        task = asyncio.create_task(loop(swallow, more))
        await asyncio.sleep(0.01)  # inside the first round's wait for its helper
        task.cancel()
        done, _pending = await asyncio.wait({task}, timeout=0.5)
        assert bool(done) is ends, (swallow, rounds)
        if done:
            assert task.cancelled() and rounds == 1
        else:  # the old pattern went round again; a flag ends it
            assert rounds > 1
            more[0] = False
            await asyncio.wait_for(asyncio.shield(task), 2.0)


async def test_the_cleanup_of_a_cancelled_task_goes_on_past_it() -> None:
    # A task cancelled earlier stops its helpers in a finally: the cancellation it is
    # already handling must not cut that cleanup short after the first helper.
    ended: list[str] = []

    async def owner() -> None:
        helpers = [asyncio.create_task(asyncio.Event().wait()) for _ in range(3)]
        try:
            await asyncio.Event().wait()
        finally:
            for helper in helpers:
                await cancel_and_wait(helper)
                ended.append("helper")
            ended.append("cleanup done")

    task = asyncio.create_task(owner())
    await asyncio.sleep(0.01)
    task.cancel()
    done, _pending = await asyncio.wait({task}, timeout=1.0)
    assert done and task.cancelled()
    assert ended == ["helper", "helper", "helper", "cleanup done"]


async def test_wait_at_most_says_whether_it_finished_in_time() -> None:
    ready = asyncio.Event()
    ready.set()
    assert await wait_at_most(ready.wait(), 1.0)
    assert not await wait_at_most(asyncio.Event().wait(), 0.01)


async def test_a_cancellation_that_comes_as_the_wait_finishes_is_raised() -> None:
    # asyncio.wait_for of Python 3.11 returns the result here and the loop goes on
    # (gh-86296); a stop() that cancels such a loop and waits for it waited forever.
    wanted, rounds = asyncio.Event(), 0

    async def loop() -> None:
        nonlocal rounds
        while True:
            rounds += 1
            await wait_at_most(wanted.wait(), 10.0)
            wanted.clear()

    task = asyncio.create_task(loop())
    await asyncio.sleep(0.01)
    wanted.set()  # the wait finishes ...
    task.cancel()  # ... and the loop is cancelled, in the same step
    done, _pending = await asyncio.wait({task}, timeout=1.0)
    assert done and task.cancelled() and rounds == 1
