"""Waiting in asyncio without losing a cancellation meant for the task that waits.

Python 3.11's ``asyncio.wait_for`` returns the result when a cancellation comes as its
awaitable finishes (the race gh-86296 describes; 3.12 rewrote it), and ``task.cancel(); with
suppress(CancelledError): await task`` swallows a cancellation that lands at that await. A
long-running loop that loses its cancellation either way never ends, and whoever stops it
waits forever. :func:`wait_at_most` and :func:`cancel_and_wait` are the two waits without
that hole.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

__all__ = ["cancel_and_wait", "wait_at_most"]


async def cancel_and_wait(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` and wait until it has ended.

    The usual ``task.cancel(); with suppress(CancelledError): await task`` also swallows
    a ``CancelledError`` meant for the task that waits: cancelled at that very await (a
    window a loaded machine widens), it goes on as if nothing happened. A loop doing so
    never ends, and whoever stops it waits forever. Here the ended task's own
    cancellation is absorbed and one of the waiting task that came during the wait is
    raised (``Task.cancelling`` grew). One that came before (this is its cleanup, in a
    ``finally``) is left to the code already handling it, so the cleanup goes on.

    Raises:
        asyncio.CancelledError: the task that waits was cancelled meanwhile.
        Exception: what ``task`` raised other than its cancellation.
    """
    current = asyncio.current_task()
    before = 0 if current is None else current.cancelling()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        if current is not None and current.cancelling() > before:
            raise


async def wait_at_most(awaitable: Awaitable[Any], seconds: float) -> bool:
    """Await ``awaitable`` for at most ``seconds``; whether it finished in time (its result is dropped).

    ``asyncio.timeout`` tells its own expiry from a cancellation of the waiting task
    (``Task.uncancel``), so the latter is always raised.
    """
    try:
        async with asyncio.timeout(seconds):
            await awaitable
    except TimeoutError:
        return False
    return True
