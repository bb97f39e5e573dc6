"""The admin server's state, assembled: one owner per piece of state, and the tasks that keep it current.

Theory of operation: :class:`Hub` makes the owners and wires them together;
it holds no state of its own but the counters they share. Each piece of state
has one owner that changes it, and the others read frozen values or call the
owner's methods (docs/architecture.md, "State and its owners"):

- :class:`~admin_server.identity.Identity`: logins, the token signer, principals;
- :class:`~admin_server.subscriptions.SubscriptionDesk`: subscriptions and request rates;
- :class:`~admin_server.adapters.AdapterStreams`: adapter streams and the registry;
- :class:`~admin_server.dataplane.DataPlane` with the
  :class:`~admin_server.access_keeper.AccessKeeper`: what each adapter is told
  (grants, seal keys), from the :class:`~admin_server.sealing.SealRings`;
- :class:`~admin_server.purging.PurgeDesk`: purges waiting for their adapter;
- :class:`~admin_server.fanout.Fanout`: the listeners and route watches;
- the policy file (reloaded by :meth:`Hub.watch_policy`) and the store.

Services call the owners with plain values and get plain values or domain
errors back (the services map those to status codes). Nothing here imports grpc.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final

from feedha.admin_server import sealing
from feedha.admin_server.access_keeper import AccessKeeper
from feedha.admin_server.adapters import COMMAND_QUEUE_SIZE, AdapterSession, AdapterStreams
from feedha.admin_server.config import ServerConfig
from feedha.admin_server.counters import HubCounters
from feedha.admin_server.dataplane import DataPlane
from feedha.admin_server.fanout import Fanout, HubEvent
from feedha.admin_server.identity import Identity
from feedha.admin_server.policy import PolicyFile
from feedha.admin_server.purging import PurgeDesk
from feedha.admin_server.records import Lease
from feedha.admin_server.store import Store
from feedha.admin_server.subscriptions import HOUSEKEEPING_S, SubscriptionDesk

__all__ = [
    "ACCESS_INTERVAL_S",
    "COMMAND_QUEUE_SIZE",
    "HOUSEKEEPING_S",
    "AdapterSession",
    "Hub",
    "HubCounters",
]

ACCESS_INTERVAL_S: Final = 0.5  # expiries are enforced within this (and by the adapters themselves)


class Hub:
    """The admin server's state owners, wired (see the module notes).

    Args:
        config: the server configuration.
        store: the open database.
        policy_file: the loaded policy file.
        clock: wall-clock seconds (injected so tests can expire tokens).
    """

    def __init__(
        self,
        config: ServerConfig,
        store: Store,
        policy_file: PolicyFile,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config, self.store, self.policy_file, self.clock = config, store, policy_file, clock
        self.counters = counters = HubCounters()
        self.events = Fanout(
            watches_per_user=config.limits.watches_per_user,
            watches_per_subscription=config.limits.watches_per_subscription,
            refused=lambda reason: counters.count(counters.refused, reason),
        )
        publish = self.events.publish
        self.adapters = AdapterStreams(
            config,
            store,
            policy_file,
            counters=counters,
            publish=publish,
            on_change=self.reconcile_access,
            clock=clock,
        )
        self.identity = Identity(
            config, store, policy_file, counters=counters, on_token=self._on_token, clock=clock
        )
        self.seals = sealing.SealRings()
        self.purges = PurgeDesk(
            self.adapters, config.channels, store=store, counters=counters, publish=publish, clock=clock
        )
        self.dataplane = DataPlane(
            store,
            policy_file,
            config.channels,
            adapters=self.adapters,
            seals=self.seals,
            on_seal=self._sealed,
            clock=clock,
        )
        self.subscriptions = self._subscription_desk()
        # The access passes read the subscriptions with a connection of their own, on their thread.
        self._reader = None if str(config.database) == ":memory:" else Store(config.database, readonly=True)
        reader = self._reader
        self.access = AccessKeeper(
            self.dataplane.snapshot if reader is None else lambda: self.dataplane.snapshot(reader),
            self.dataplane.apply,
            snapshot_off_loop=reader is not None,
            due_in=lambda: self.seals.due_in(now=self.clock()),
        )

    def _subscription_desk(self) -> SubscriptionDesk:
        return SubscriptionDesk(
            self.config,
            self.store,
            self.policy_file,
            registry=self.adapters.registry,
            seals=self.seals,
            counters=self.counters,
            publish=self.events.publish,
            grant_now=self.dataplane.grant_now,
            reconcile=self.reconcile_access,
            clock=self.clock,
        )

    def __repr__(self) -> str:
        return f"<Hub [{self.adapters!r}, listeners={self.events.listeners}]>"

    def close(self) -> None:
        """Stop the logins' threads; close the access passes' database connection (not the store)."""
        self.identity.close()
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def _on_token(self, user: str, lease: Lease) -> None:
        self.subscriptions.extend(user, lease)  # made after the identity: looked up when a login comes

    # -- data-plane access

    def reconcile_access(self) -> None:
        """Ask for the data plane to be brought in line with the subscriptions, the policy and the clock.

        A pass runs soon, off the event loop (:mod:`admin_server.access_keeper`): every
        connected adapter learns which subscriber keys it must accept now (see
        :mod:`~admin_server.access`), and multicast channels' packet keys are rotated and
        handed out (see :mod:`~admin_server.sealing`).
        """
        self.access.request()

    def _sealed(self, channel: str, now: float) -> None:
        self.events.publish(
            HubEvent(at=now, kind="seal", channel_name=channel, detail="packet keys", routes_changed=True)
        )

    def subscribers_by_channel(self) -> dict[str, int]:
        """How many live subscriptions reach each channel in real time, as of the last access pass."""
        last = self.access.last
        return {} if last is None else {channel: len(subs) for channel, subs in last.entitled.items()}

    # -- the tasks

    async def watch_access(self, interval_s: float = ACCESS_INTERVAL_S) -> None:
        """Reconcile data-plane access when asked and every ``interval_s`` (expiries; runs as a task)."""
        await self.access.run(interval_s)

    async def housekeeping(self, interval_s: float = HOUSEKEEPING_S) -> None:
        """Forever: delete subscriptions whose login lapsed, prune the audit log (runs as a task)."""
        await self.subscriptions.housekeeping(interval_s)

    async def watch_policy(self) -> None:
        """Poll the policy file's mtime forever; reload on change (runs as a task)."""
        rejections = self.policy_file.rejections
        while True:
            await asyncio.sleep(self.config.policy_poll_s)
            if self.policy_file.poll():
                self.counters.count(self.counters.policy_reloads, "ok")
                self.events.publish(
                    HubEvent(at=self.clock(), kind="policy", detail="reloaded", routes_changed=True)
                )
                self.reconcile_access()
            elif self.policy_file.rejections != rejections:
                rejections = self.policy_file.rejections
                self.counters.count(self.counters.policy_reloads, "rejected")
                detail = f"rejected, keeping the last good policy: {self.policy_file.last_error}"
                self.events.publish(HubEvent(at=self.clock(), kind="policy", detail=detail))
