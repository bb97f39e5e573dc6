"""The quotas' configuration, the hashing gate's order and bounds, and per-key login locks."""

from __future__ import annotations

import asyncio

import pytest

from feedha.admin_server.access import GRANTS_PER_COMMAND, Grant, merge_grant, plan_commands
from feedha.admin_server.errors import ConfigError, ResourceExhaustedError
from feedha.admin_server.limits import HashGate, KeyLocks, Limits, Tarpit, parse_limits
from feedha.admin_server.records import Lease
from feedha.admin_server.store import Store
from feedha.proto.registry import CommandKind


def test_limits_come_from_the_config_file_and_bad_values_are_named() -> None:
    limits = parse_limits({"subscriptions_per_user": "10", "subscription_grace_s": 5})
    assert limits.subscriptions_per_user == 10 and limits.subscription_grace_s == 5.0
    assert limits.login_hashes == Limits().login_hashes
    with pytest.raises(ConfigError, match="unknown keys \\['nope'\\]"):
        parse_limits({"nope": 1})
    with pytest.raises(ConfigError, match="limits.login_hashes must be a number >= 1"):
        parse_limits({"login_hashes": 0})
    with pytest.raises(ConfigError, match="must be a mapping"):
        parse_limits([1])


async def test_the_hashing_gate_runs_a_few_queues_a_few_in_priority_order_and_refuses_the_rest() -> None:
    gate = HashGate(slots=1, queue=3)
    order: list[str] = []
    release = asyncio.Event()

    async def login(name: str, priority: int) -> None:
        async with gate.slot(priority=priority):
            order.append(name)
            if name == "first":
                await release.wait()

    first = asyncio.create_task(login("first", 1))
    await asyncio.sleep(0)
    waiting = [asyncio.create_task(login(n, p)) for n, p in (("stranger", 1), ("other", 1), ("honest", 0))]
    await asyncio.sleep(0)
    assert gate.waiting == 3 and "running=1/1" in repr(gate)
    with pytest.raises(ResourceExhaustedError) as refused:
        async with gate.slot(priority=0):
            pass
    assert refused.value.reason == "LOGINS_BUSY" and refused.value.metadata["limit"] == "4"
    release.set()
    await asyncio.gather(first, *waiting)
    assert order == ["first", "honest", "stranger", "other"]  # a key in good standing goes first
    assert gate.waiting == 0 and gate.refused == 1
    async with gate.slot(priority=1):  # every slot came back
        pass


async def test_a_slot_is_kept_for_keys_in_good_standing() -> None:
    gate = HashGate(slots=2, queue=1, reserved=1)
    release = asyncio.Event()
    ran: list[str] = []

    async def login(name: str, priority: int) -> None:
        async with gate.slot(priority=priority):
            ran.append(name)
            await release.wait()

    wrong = [asyncio.create_task(login(f"wrong{i}", 1)) for i in range(2)]
    await asyncio.sleep(0)
    assert ran == ["wrong0"] and gate.waiting == 1  # the strangers get one slot, and the queue
    with pytest.raises(ResourceExhaustedError):
        async with gate.slot(priority=1):
            pass
    honest = asyncio.create_task(login("honest", 0))  # the queue is full, but its slot is free
    await asyncio.sleep(0)
    assert ran == ["wrong0", "honest"]
    release.set()
    await asyncio.gather(*wrong, honest)
    assert ran[-1] == "wrong1" and "running=0/2" in repr(gate)
    with pytest.raises(ValueError, match="reserved"):
        HashGate(slots=1, queue=1, reserved=1)


async def test_a_waiter_cancelled_with_its_slot_in_hand_passes_it_on() -> None:
    gate = HashGate(slots=1, queue=2)
    hold = asyncio.Event()

    async def holder() -> None:
        async with gate.slot(priority=0):
            await hold.wait()

    task = asyncio.create_task(holder())
    await asyncio.sleep(0)
    cancelled = asyncio.create_task(gate.slot(priority=0).__aenter__())
    after = asyncio.create_task(holder())
    await asyncio.sleep(0)
    cancelled.cancel()
    hold.set()
    await asyncio.gather(task, after, return_exceptions=True)
    assert gate.waiting == 0 and "running=0/1" in repr(gate)


async def test_a_waiter_dropped_by_a_release_before_its_cancellation_runs_leaves_cleanly() -> None:
    gate = HashGate(slots=1, queue=2)
    mine = gate.slot(priority=0)
    await mine.__aenter__()
    waiter = asyncio.create_task(gate.slot(priority=0).__aenter__())
    await asyncio.sleep(0)
    assert gate.waiting == 1
    waiter.cancel()  # its wake-up future is cancelled now; its except clause runs on a later step
    await mine.__aexit__(None, None, None)  # no await before the release: it drops that wake-up first
    with pytest.raises(asyncio.CancelledError):
        await waiter  # and the waiter's own clean-up must not fail on the entry already gone
    assert gate.waiting == 0 and gate.running == 0


async def test_key_locks_serialize_one_key_and_are_dropped_when_unused() -> None:
    locks = KeyLocks()
    inside: list[str] = []

    async def use(name: str) -> None:
        async with locks.hold("k"):
            inside.append(name)
            assert inside.count("in") <= 1
            inside.append("in")
            await asyncio.sleep(0.01)
            inside.remove("in")

    await asyncio.gather(*(use(str(i)) for i in range(5)))
    assert len(locks) == 0


async def test_the_tarpit_holds_each_refusal_within_its_bounds_and_deadline_and_no_more_than_its_slots() -> (
    None
):
    loop = asyncio.get_running_loop()
    pit = Tarpit(slots=2, least_s=0.2, most_s=0.4)

    async def held_for(wait_s: float, time_left_s: float | None = None) -> float:
        began = loop.time()
        await pit.hold(wait_s, time_left_s=time_left_s)
        return loop.time() - began

    assert await held_for(0.0) >= 0.2  # a refusal that announces no wait is held the least
    assert 0.4 <= await held_for(30.0) < 5  # ... and one that announces 30 s the most
    assert await held_for(30.0, time_left_s=0.05) < 0.2  # never into the call's deadline
    # Two held: a third goes out at once and is counted; a slot once free is taken again.
    first = [asyncio.ensure_future(pit.hold(30.0)) for _ in range(2)]
    await asyncio.sleep(0)
    assert pit.held == 2
    assert await held_for(30.0) < 0.2 and pit.overflow == 1
    await asyncio.gather(*first)
    assert pit.held == 0 and await held_for(0.0) >= 0.2 and pit.overflow == 1


async def test_a_held_refusal_whose_caller_leaves_frees_its_slot() -> None:
    pit = Tarpit(slots=1, least_s=10.0, most_s=10.0)
    waiting = asyncio.ensure_future(pit.hold(10.0))
    await asyncio.sleep(0)
    assert pit.held == 1
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert pit.held == 0


def test_a_full_table_goes_in_parts_each_under_grpcs_message_limit() -> None:
    owners = frozenset({"a-user-name-of-some-length"})
    wanted = {f"{i + 1:040d}": Grant(10**18, 0, owners) for i in range(GRANTS_PER_COMMAND * 2 + 5)}
    commands = plan_commands(None, wanted, reason="r")
    assert [len(c.grants) for c in commands] == [GRANTS_PER_COMMAND, GRANTS_PER_COMMAND, 5]
    assert all(c.replace_grants and c.kind is CommandKind.GRANT for c in commands)
    assert plan_commands(None, {}, reason="r")[0].grants == ()  # nothing granted: an empty replacement
    from feedha.proto import registry

    encoded = registry.command_to_proto(commands[0]).SerializeToString()
    assert len(encoded) < 4 * 1024 * 1024 // 4
    changes = plan_commands(wanted, {}, reason="r")
    assert [c.kind for c in changes] == [CommandKind.REVOKE] * 3
    assert merge_grant(Grant(5, 1, frozenset("a")), Grant(3, 0, frozenset("b"))) == (5, 0, frozenset("ab"))
    assert merge_grant(None, Grant(1, 1)) == Grant(1, 1)


def test_the_store_counts_a_users_subscriptions_and_keys_and_forgets_lapsed_ones() -> None:
    store = Store(":memory:")
    for i, key in enumerate(("k1", "k1", "k2", "")):
        store.add_subscription(user="u", symbols=("A",), now=0.0, curve_key=key, lease=Lease(100.0 + i))
    store.add_subscription(user="v", symbols=("A",), now=0.0, curve_key="k9")
    assert store.subscription_counts("u") == (4, 2)
    assert store.subscription_counts("u", "k1") == (4, 1)  # a key it already uses is not a new one
    assert store.subscription_counts("nobody") == (0, 0)
    assert len(store.delete_expired_subscriptions(before=102.0)) == 2  # leases ending at 100 and 101
    assert [s.user for s in store.subscriptions()] == ["u", "u", "v"]  # v's has no lease: kept
    store.audit(user="x" * 500, action="a", target="t\n" * 500, detail="d" * 10**6, now=1.0)
    (entry,) = store.audit_log()
    assert len(entry.user) == 64 and len(entry.target) == 128 and len(entry.detail) == 512
    assert "\n" not in entry.target
