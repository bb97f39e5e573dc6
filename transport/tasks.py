"""Ending an asyncio task from another without losing a cancellation meant for the one that waits."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["cancel_and_wait"]


async def cancel_and_wait(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` and wait until it has ended.

    The usual ``task.cancel(); with suppress(CancelledError): await task`` also swallows
    a ``CancelledError`` meant for the task that waits: cancelled at that very await (a
    window a loaded machine widens), it goes on as if nothing happened. A loop doing so
    never ends, and whoever stops it waits forever. Here the ended task's own
    cancellation is absorbed and the waiting task's is raised (``Task.cancelling``).

    Raises:
        asyncio.CancelledError: the task that waits was cancelled meanwhile.
        Exception: what ``task`` raised other than its cancellation.
    """
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
