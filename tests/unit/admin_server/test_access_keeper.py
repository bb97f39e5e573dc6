"""The access passes' timer: a pass when asked, every interval, and when a packet key's switch is due."""

from __future__ import annotations

import asyncio

from feedha.admin_server.access_keeper import AccessKeeper, AccessPlan, Snapshot
from feedha.admin_server.policy import parse_policy
from feedha.transport.tasks import cancel_and_wait

POLICY = parse_policy(
    "groups:\n  traders: {}\nrules:\n  - {groups: [traders], symbols: ['*'], mode: realtime}\n"
)


async def test_a_pass_runs_when_a_switch_is_due_though_nobody_asked_and_the_interval_is_long() -> None:
    applied: list[float] = []
    due: list[float | None] = [0.01]  # a switch due in 10 ms, then none

    def snapshot() -> Snapshot:
        return Snapshot(subscriptions=(), principals={}, rotated={}, policy=POLICY, channels=(), now=0.0)

    def apply(plan: AccessPlan, taken: Snapshot) -> None:
        applied.append(taken.now)
        due[0] = None

    keeper = AccessKeeper(snapshot, apply, due_in=lambda: due[0])
    runner = asyncio.create_task(keeper.run(interval_s=3600.0))
    try:
        async with asyncio.timeout(10):
            while not applied:
                await asyncio.sleep(0.01)  # poll interval of a deadline-bounded wait
    finally:
        await cancel_and_wait(runner)
    assert applied == [0.0] and keeper.passes == 1
