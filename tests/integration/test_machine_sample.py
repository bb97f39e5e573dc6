"""An adapter's health reports carry what it measured of its machine, on the real sync bus.

The runner measures its process's CPU from its own process time (as psutil's
``cpu_percent`` does, without reading ``/proc`` ten times a second on the loop's
thread) and the machine's available memory once a second; both travel in
every ``Health`` message to the group, which elects and fails by them.
"""

from __future__ import annotations

import os
import time

import psutil
import zmq

from feedha.adapter.core import syncbus
from tests.integration.groups import running_group
from tests.integration.probes import CHANNEL, Source


def test_a_converting_adapter_reports_its_cpu_share_and_the_machine_s_memory() -> None:
    rate, seconds = 5000.0, 2.0
    with running_group(channel=CHANNEL, channel_number=1, size=1, rate=rate, seconds=seconds) as group:
        tap: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.SUB)
        tap.linger = 0
        tap.subscribe(b"")
        tap.connect(group.plan.adapter(1).sync)
        source = Source(group.source_endpoint, rate=rate, seconds=seconds)
        reports: list[syncbus.Health] = []
        try:
            group.start_adapter(1, active=True)
            group.wait_status(1, lambda s: s["role"] == "active", 10)
            source.wait_subscribers(1, 20)
            deadline = time.monotonic() + seconds + 30
            while not source.done and time.monotonic() < deadline:
                source.send_due()
                wait_ms = 1  # until the next due send at the latest
                while tap.poll(wait_ms):
                    wait_ms = 0
                    message = syncbus.decode_sync(tap.recv(), channel=1)
                    if isinstance(message, syncbus.Health) and message.sender.adapter == 1:
                        reports.append(message)
        finally:
            tap.close(linger=0)
            source.close()
    assert source.done and len(reports) >= 5, len(reports)
    total_mb = psutil.virtual_memory().total / 2**20
    assert all(0 < r.available_memory_mb <= total_mb for r in reports), reports[-1]
    shares = [r.cpu_percent for r in reports]
    assert all(0.0 <= share <= 100.0 * (os.cpu_count() or 1) + 5.0 for share in shares), shares
    assert max(shares) > 1.0, shares  # converting thousands of messages a second costs some CPU
