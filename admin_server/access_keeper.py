"""Data-plane access kept in line with the subscriptions: incremental, coalesced, off the event loop.

Theory of operation
-------------------
:mod:`admin_server.access` decides which keys each channel's adapters must
accept; this is the shell that runs it. The work that grows with the number
of subscriptions -- planning each one's routes under the policy -- must not
run on the event loop for every Subscribe, Cancel and timer tick (3,000
subscriptions once took 0.63 s a pass there, and every caller waited). So:

* **Incremental.** A subscription's reach (the channels it may read, and
  whether only delayed) depends on its owner's groups and roles, its
  symbols and the policy; a :class:`ReachCache` keeps it for that key, so a
  pass plans only what changed (a new subscription, a new policy).
* **Off the loop.** A pass takes a snapshot (the subscriptions, their
  owners, their keys' rotation times: plain values) and computes the grants
  on a worker thread (:func:`plan`) -- the snapshot with a read-only database
  connection of its own (on the loop for an in-memory database) -- and
  applies the result on the loop (queueing GRANT/REVOKE commands, rotating
  packet keys).
* **Coalesced.** Changes ask for a pass (:meth:`AccessKeeper.request`); one
  task runs passes one at a time, at most every :data:`MIN_GAP_S`, and at
  least every :data:`~admin_server.hub.ACCESS_INTERVAL_S` (expiries), and
  when a packet key's switch is due (``due_in``), so a loop of
  Subscribe/Cancel costs a pass per gap, not a pass per call.
* **Grants first.** A new subscription's key must be on its adapters before
  the subscriber dials (libzmq never retries a refused CURVE handshake), so
  Subscribe and Modify also grant the new key at once
  (:meth:`AccessKeeper.grant_now`): a few commands, computed from that one
  subscription. Taking access away always waits for a pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from feedha.admin_server import access, broker
from feedha.admin_server.config import ChannelConfig
from feedha.admin_server.errors import AdminError
from feedha.admin_server.policy import Policy, Principal
from feedha.admin_server.records import SubscriptionRecord
from feedha.transport.tasks import wait_at_most

logger = logging.getLogger(__name__)

__all__ = ["AccessKeeper", "AccessPlan", "ReachCache", "Snapshot", "plan"]

MIN_GAP_S: Final = 0.05  # passes are at least this far apart (a flood of changes coalesces)
MAX_CACHED: Final = 50_000  # reaches kept; past this the cache starts again
Reach = dict[str, int]  # channel -> the limit of the routes that reach it (access.merge_limit)


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """What one pass decides from: plain values taken on the loop.

    Attributes:
        subscriptions: every stored subscription.
        principals: their owners, by user name.
        rotated: each API key behind them: when it was last rotated (``None``: removed).
        policy: the policy in force.
        channels: the configured channels.
        now: wall-clock seconds.
        generation: how many immediate grants had been made when it was taken.
    """

    subscriptions: Sequence[SubscriptionRecord]
    principals: Mapping[str, Principal]
    rotated: Mapping[str, float | None]
    policy: Policy
    channels: tuple[ChannelConfig, ...]
    now: float
    generation: int = 0  # the grants made at once (grant_now) up to here are in the subscriptions


@dataclass(frozen=True, slots=True)
class AccessPlan:
    """A pass's result: grants per channel, and the subscriptions entitled to each in real time."""

    wanted: dict[str, access.Grants]
    entitled: dict[str, set[str]]
    planned: int = 0  # subscriptions whose reach was computed (not found in the cache)


@dataclass(slots=True)
class ReachCache:
    """Reaches by (owner, symbols) under one policy object (a new policy empties it)."""

    policy: Policy | None = None
    reaches: dict[tuple[Principal, tuple[str, ...]], Reach | None] = field(default_factory=dict)

    def get(
        self, principal: Principal, symbols: tuple[str, ...], snapshot: Snapshot
    ) -> tuple[Reach | None, bool]:
        """The reach (``None``: not entitled any more) and whether it had to be computed."""
        if self.policy is not snapshot.policy or len(self.reaches) > MAX_CACHED:
            self.policy, self.reaches = snapshot.policy, {}
        key = (principal, symbols)
        if key in self.reaches:
            return self.reaches[key], False
        try:
            routes = broker.plan_routes(
                principal, symbols, policy=snapshot.policy, channels=snapshot.channels, lines={}
            )
        except (AdminError, ValueError):
            reach: Reach | None = None
        else:
            reach = {}
            for route in routes:
                name = route.channel.name
                reach[name] = access.merge_limit(reach.get(name), route.limit)
        self.reaches[key] = reach
        return reach, True


def lease_holds(sub: SubscriptionRecord, *, now: float, rotated: Mapping[str, float | None]) -> bool:
    """Whether the token behind a subscription still stands: not expired, its API key unchanged."""
    if sub.valid_until <= now:
        return False
    if sub.key_id:
        rotated_at = rotated.get(sub.key_id)
        return rotated_at is not None and rotated_at <= sub.granted_at + 1e-3
    return True


def plan(snapshot: Snapshot, cache: ReachCache) -> AccessPlan:
    """The grants the snapshot calls for (pure but for the cache; runs on a worker thread)."""
    planned = 0

    def reach_of(sub: SubscriptionRecord) -> Reach:
        nonlocal planned
        if not lease_holds(sub, now=snapshot.now, rotated=snapshot.rotated):
            raise AdminError("lease ended")
        principal = snapshot.principals.get(sub.user, Principal(user=sub.user))
        reach, computed = cache.get(principal, sub.symbols, snapshot)
        planned += computed
        if reach is None:
            raise AdminError("not entitled")
        return reach

    subs = snapshot.subscriptions
    wanted = access.desired_grants(subs, now=snapshot.now, channels_for=reach_of)
    entitled = access.entitled_subscriptions(subs, now=snapshot.now, channels_for=reach_of)
    return AccessPlan(wanted, entitled, planned)


class AccessKeeper:
    """Runs the passes for the hub (see the module notes).

    Args:
        take_snapshot: makes a pass's snapshot.
        apply: carries a pass's plan out (on the loop).
        snapshot_off_loop: the snapshot may be taken on the worker thread (it reads a database
            connection of its own).
        due_in: seconds until a pass is due for its own sake (a packet key's switch), or ``None``.
    """

    def __init__(
        self,
        take_snapshot: Callable[[], Snapshot],
        apply: Callable[[AccessPlan, Snapshot], None],
        *,
        snapshot_off_loop: bool = False,
        due_in: Callable[[], float | None] = lambda: None,
    ) -> None:
        self._take_snapshot, self._apply = take_snapshot, apply
        self._snapshot_off_loop = snapshot_off_loop
        self._due_in = due_in
        self._inflight: asyncio.Future[tuple[Snapshot, AccessPlan]] | None = None
        self._wanted = asyncio.Event()
        self._cache = ReachCache()
        self.passes = 0
        self.last: AccessPlan | None = None
        self.last_pass_s = 0.0

    def __repr__(self) -> str:
        return f"<AccessKeeper [passes={self.passes}, last={self.last_pass_s * 1000:.1f} ms]>"

    def request(self) -> None:
        """Ask for a pass soon (coalesced with other requests)."""
        self._wanted.set()

    async def run_pass(self) -> AccessPlan:
        """One pass now: snapshot on the loop, plan on a thread, apply on the loop."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        if self._snapshot_off_loop:  # a database connection of its own: read on the thread too
            work = asyncio.ensure_future(asyncio.to_thread(self._snapshot_and_plan))
        else:
            taken = self._take_snapshot()
            work = asyncio.ensure_future(asyncio.to_thread(lambda: (taken, plan(taken, self._cache))))
        self._inflight = work
        # Shielded: a cancelled pass still lets its thread finish before anything it reads is closed.
        snapshot, result = await asyncio.shield(work)
        self._apply(result, snapshot)
        self.passes += 1
        self.last, self.last_pass_s = result, loop.time() - started
        return result

    async def wait_idle(self) -> None:
        """Wait until no pass's thread runs (before closing what it reads)."""
        if self._inflight is not None and not self._inflight.done():
            with contextlib.suppress(Exception):
                await self._inflight

    def _snapshot_and_plan(self) -> tuple[Snapshot, AccessPlan]:
        snapshot = self._take_snapshot()
        return snapshot, plan(snapshot, self._cache)

    async def run(self, interval_s: float) -> None:
        """Passes forever: when asked or due (at most every :data:`MIN_GAP_S`), else every ``interval_s``."""
        while True:
            due = self._due_in()
            await wait_at_most(self._wanted.wait(), interval_s if due is None else min(interval_s, due))
            self._wanted.clear()
            try:
                await self.run_pass()
            except Exception:  # a bug costs one pass, never the server's access control
                logger.exception("access reconciliation failed")
            await asyncio.sleep(MIN_GAP_S)

    def status(self) -> dict[str, Any]:
        return {"passes": self.passes, "last_pass_ms": round(self.last_pass_s * 1000, 2)}
