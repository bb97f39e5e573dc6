"""The hub's fan-out: listeners get every event; a route watch is marked only by what concerns it, once."""

from __future__ import annotations

import asyncio

import pytest

from feedha.admin_server.errors import ResourceExhaustedError
from feedha.admin_server.fanout import Fanout, HubEvent, SharedPlans


def _event(kind: str = "changed", **fields: object) -> HubEvent:
    return HubEvent(at=0.0, kind=kind, routes_changed=True, **fields)  # type: ignore[arg-type]


async def test_an_event_marks_only_the_watches_it_concerns_and_listeners_get_every_event() -> None:
    refused: list[str] = []
    fanout = Fanout(watches_per_user=10, watches_per_subscription=4, refused=refused.append)
    async with (
        fanout.listen() as queue,
        fanout.watch_routes("alice", "s1") as eq,
        fanout.watch_routes("alice", "s2") as fx,
        fanout.watch_routes("bob", "s3") as both,
    ):
        fanout.follow(eq, ["EQ"])
        fanout.follow(fx, ["FX"])
        fanout.follow(both, ["EQ", "FX"])
        fanout.publish(_event(channel_name="EQ", adapter_id="EQ.1"))
        assert (eq.marks, fx.marks, both.marks) == (1, 0, 1) and eq.cause == ("changed", "EQ.1")
        fanout.publish(_event("modify", subscription_id="s2", detail="s2"))  # Modify: its own watches
        assert (eq.marks, fx.marks, both.marks) == (1, 1, 1)
        fanout.publish(_event("policy"))  # neither channel nor subscription: everyone
        assert (eq.marks, fx.marks, both.marks) == (2, 2, 2)
        fanout.publish(HubEvent(at=0.0, kind="subscribe", channel_name="EQ"))  # routes unchanged
        assert (eq.marks, fx.marks, both.marks) == (2, 2, 2)
        assert [queue.get_nowait().kind for _ in range(queue.qsize())] == [
            "changed",
            "modify",
            "policy",
            "subscribe",
        ]
        fanout.follow(both, ["FX"])  # its routes moved: EQ's changes no longer concern it
        fanout.publish(_event(channel_name="EQ"))
        assert (eq.marks, both.marks) == (3, 2) and fanout.listeners == 4
    assert fanout.listeners == 0 and fanout.watches_of("s1") == [] and refused == []
    assert fanout._by_channel == {} and fanout._by_subscription == {}  # nothing left behind


async def test_a_watch_behind_takes_many_marks_as_one_wake_with_the_latest_cause() -> None:
    fanout = Fanout(watches_per_user=10, watches_per_subscription=4, refused=lambda _reason: None)
    async with fanout.watch_routes("alice", "s1") as watch:
        fanout.follow(watch, ["EQ"])
        for i in range(1000):  # a storm while its stream was busy sending
            fanout.publish(_event(channel_name="EQ", adapter_id=f"EQ.{i}"))
        assert await watch.changed() == ("changed", "EQ.999")
        assert (watch.marks, watch.wakes) == (1000, 1)
        waiting = asyncio.ensure_future(watch.changed())
        await asyncio.sleep(0)
        assert not waiting.done()  # nothing new: it waits
        fanout.publish(_event("cancel", subscription_id="s1"))
        assert await waiting == ("cancel", "")
    assert fanout.tally == {"marks": 1001, "wakes": 2}
    assert "marks=1001, wakes=2" in repr(fanout)


async def test_route_and_event_watches_share_the_users_quota() -> None:
    refused: list[str] = []
    fanout = Fanout(watches_per_user=2, watches_per_subscription=4, refused=refused.append)
    async with fanout.listen("alice"), fanout.watch_routes("alice", "s1"):
        with pytest.raises(ResourceExhaustedError) as info:
            async with fanout.watch_routes("alice", "s1"):
                pass
        assert info.value.reason == "TOO_MANY_WATCHES" and info.value.metadata["limit"] == "2"
        async with fanout.watch_routes("bob", "s9"):  # another user: a quota of its own
            pass
    async with fanout.watch_routes("alice", "s1"), fanout.watch_routes("alice", "s1"):
        assert fanout.listeners == 2  # room again once closed
    assert refused == ["TOO_MANY_WATCHES"]


async def test_a_newer_watch_of_a_subscription_past_its_cap_takes_the_oldests_place() -> None:
    refused: list[str] = []
    fanout = Fanout(watches_per_user=100, watches_per_subscription=2, refused=refused.append)
    async with fanout.watch_routes("mallory", "s1") as oldest, fanout.watch_routes("mallory", "s1") as second:
        async with fanout.watch_routes("mallory", "s1") as newest:
            assert fanout.watches_of("s1") == [second, newest]
            with pytest.raises(ResourceExhaustedError) as replaced:
                await oldest.changed()
            assert replaced.value.reason == "TOO_MANY_WATCHES"
            assert replaced.value.metadata == {"limit": "2", "subscription": "s1"}
            fanout.publish(_event("modify", subscription_id="s1"))  # one Modify wakes the cap, no more
            assert (oldest.marks, second.marks, newest.marks) == (0, 1, 1)
            assert fanout.listeners == 3  # the replaced one counts until its stream has ended
    assert refused == ["TOO_MANY_WATCHES"] and fanout.listeners == 0 and fanout._by_subscription == {}


def test_plans_are_shared_until_the_next_change_that_concerns_routes_and_errors_are_not_kept() -> None:
    fanout = Fanout(watches_per_user=10, watches_per_subscription=4, refused=lambda _reason: None)
    plans: SharedPlans[str] = SharedPlans(fanout, limit=2)
    made: list[str] = []

    def make(text: str) -> str:
        made.append(text)
        return text

    assert [plans.get("k", lambda: make("one")) for _ in range(3)] == ["one"] * 3 and made == ["one"]
    fanout.publish(HubEvent(at=0.0, kind="subscribe"))  # routes unchanged: still shared
    assert plans.get("k", lambda: make("two")) == "one"
    fanout.publish(_event(channel_name="EQ"))  # a change: planned again
    assert plans.get("k", lambda: make("three")) == "three"

    def fail() -> str:
        raise ValueError("not entitled")

    for _ in range(2):
        with pytest.raises(ValueError):
            plans.get("bad", fail)  # tried again by the next watch, never kept
    plans.get("x", lambda: make("x"))
    plans.get("y", lambda: make("y"))  # past the limit: started again
    assert plans.get("k", lambda: make("four")) == "four"
    assert repr(plans) == "<SharedPlans [kept=2, made=5, shared=3]>" and made[-1] == "four"
