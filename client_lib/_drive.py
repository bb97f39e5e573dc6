"""Run a loop written once as a generator, blocking or on asyncio.

A loop that must serve a blocking API and an asyncio API is written once as a
generator: it yields what it needs to wait for and is sent back the result of
the wait. :func:`drive` answers each wait with a blocking call,
:func:`drive_async` with an awaited one; everything else the loop decides is
the same code. A wait happens only where the loop yields, so a cancelled
asyncio wait leaves no decision half made (the generator is dropped at the
yield).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import TypeVar

_Wait = TypeVar("_Wait")
_Got = TypeVar("_Got")
_Result = TypeVar("_Result")


def drive(steps: Generator[_Wait, _Got, _Result], wait: Callable[[_Wait], _Got]) -> _Result:
    """Run ``steps`` to its end, answering each yielded request with ``wait(request)``."""
    try:
        request = next(steps)
        while True:
            request = steps.send(wait(request))
    except StopIteration as done:
        result: _Result = done.value
        return result
    finally:
        steps.close()  # a wait that raised leaves it suspended at its yield: end it now


async def drive_async(
    steps: Generator[_Wait, _Got, _Result], wait: Callable[[_Wait], Awaitable[_Got]]
) -> _Result:
    """Run ``steps`` to its end, answering each yielded request with ``await wait(request)``."""
    try:
        request = next(steps)
        while True:
            request = steps.send(await wait(request))
    except StopIteration as done:
        result: _Result = done.value
        return result
    finally:
        steps.close()  # a cancelled or failed wait leaves it suspended at its yield: end it now
