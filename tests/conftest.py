"""Settings and checks every test shares.

Hypothesis: no per-example deadline and no "too slow" health check. Both are
timing asserts, which the suite does not make (speed is the benchmarks'
business, bench/), and on a loaded two-core machine they fail property tests
whose property holds.

Every journal writer a test opens is closed by the test's end. A writer left
open keeps its flusher thread and its buffers for the rest of the process:
121 of them, left by two property tests when a flusher still woke every 2 ms,
starved the replay clients of a later test in the same process until it
timed out.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from feedha.adapter.journal._flusher import THREAD_NAME

settings.register_profile("feedha", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("feedha")


def _flushers() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name == THREAD_NAME}


@pytest.fixture(autouse=True)
def _no_journal_writer_left_open() -> Iterator[None]:
    before = _flushers()
    yield
    left = _flushers() - before
    assert not left, f"{len(left)} journal writer(s) left open: close each (`with JournalWriter(...)`)"
