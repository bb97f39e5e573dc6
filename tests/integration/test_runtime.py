"""feedha.runtime in real processes: a settled heap."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from feedha.cluster import plan_group, start_adapter
from feedha.ports import free_ports

pytestmark = pytest.mark.timeout(60)


def _python(code: str) -> str:
    # A process of its own: gc.freeze changes the process it runs in.
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_settle_heap_freezes_what_is_alive_and_later_garbage_is_still_collected() -> None:
    out = _python(
        """
        import gc, weakref
        from feedha.runtime import settle_heap
        import feedha.adapter.runner  # a daemon's imports: tens of thousands of objects
        frozen = settle_heap()
        assert frozen == gc.get_freeze_count()
        class Node:
            pass
        alive = weakref.WeakSet()
        for _ in range(1000):  # cycles made after settling: still garbage to the collector
            a, b = Node(), Node()
            a.other, b.other = b, a
            alive.update((a, b))
        del a, b
        gc.collect()
        print(frozen, len(alive))
        """
    )
    frozen, alive = map(int, out.split())
    assert frozen > 10_000
    assert alive == 0


def test_an_adapter_process_settles_its_heap_once_started() -> None:
    source = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    plan = plan_group(
        channel="RT",
        channel_number=1,
        source_endpoint=source,
        source_stream="A-Z",
        source_stream_number=1,
        size=1,
    )
    proc = start_adapter(plan, 1, active=True)
    try:
        ready = proc.wait_event("ready", 30)
        assert ready["frozen_objects"] > 10_000, ready  # modules, tables, the core: out of later collections
    finally:
        proc.kill()
