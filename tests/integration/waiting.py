"""Deadline-bounded polling for the integration tests, where no event reaches the test; and what a
thread is doing now (asleep in poll()), for a test to act at the moment it waits."""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


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


# The poll() system calls, by machine: what a thread asleep in a poll() shows in
# /proc/self/task/TID/syscall (x86_64: poll, ppoll; aarch64 has only ppoll).
POLL_CALLS: dict[str, set[str]] = {"x86_64": {"7", "271"}, "aarch64": {"73"}}


def asleep_in_poll(thread_id: int) -> bool:
    """Whether the thread ``thread_id`` of this process sleeps in a poll() system call now."""
    fields = Path(f"/proc/self/task/{thread_id}/syscall").read_text().split()
    return bool(fields) and fields[0] in POLL_CALLS[platform.machine()]


# A test that acts at the moment a thread sleeps in poll() runs where the call's number is known.
knows_poll_calls = pytest.mark.skipif(
    platform.machine() not in POLL_CALLS, reason="the poll() system call's number is unknown here"
)
