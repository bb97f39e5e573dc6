"""Deadline-bounded polling for the integration tests, where no event reaches the test."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(check: Callable[[], Any], timeout: float, what: str, *, interval: float = 0.1) -> Any:
    """Poll ``check`` every ``interval`` seconds until it returns something truthy; return that.

    Raises:
        AssertionError: ``timeout`` seconds passed first (the message names ``what``).
    """
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)  # poll interval of a deadline-bounded wait
