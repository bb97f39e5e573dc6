"""What the adapters are told about the data plane: subscriber keys (GRANT/REVOKE) and packet keys (SEAL).

The server's side of :mod:`admin_server.access_keeper`: :meth:`DataPlane.snapshot`
takes a pass's inputs on the loop, :meth:`DataPlane.apply` turns its plan into
commands on each connected adapter's queue, and :meth:`DataPlane.grant_now`
grants a new subscription's key before the subscriber dials. It owns what each
adapter stream was told (its session's ``told`` and ``sealing_with``, written
here only) and the grants made at once; it reads the registry's records, the
stored subscriptions, the policy and the seal rings, whose keys it rotates
through :meth:`SealRings.update <admin_server.sealing.SealRings.update>`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from feedha.admin_server import access, broker, sealing
from feedha.admin_server.access_keeper import AccessPlan, Snapshot, lease_holds
from feedha.admin_server.adapters import AdapterSession, AdapterStreams
from feedha.admin_server.config import ChannelConfig
from feedha.admin_server.errors import NotFoundError
from feedha.admin_server.policy import PolicyFile, Principal
from feedha.admin_server.records import SubscriptionRecord
from feedha.admin_server.registry import Directive
from feedha.admin_server.store import Store
from feedha.proto.registry import Command, CommandKind

logger = logging.getLogger(__name__)

__all__ = ["DataPlane"]


class DataPlane:
    """Tells the connected adapters whom to admit and how to seal.

    Args:
        store: the database (subscriptions, keys, users), read on the loop.
        policy_file: the policy (entitlements).
        channels: the configured channels.
        adapters: the adapter streams and their registry.
        seals: the seal rings (packet keys of multicast channels).
        on_seal: called with a channel and the time when its packet key changed.
        clock: wall-clock seconds.
    """

    def __init__(
        self,
        store: Store,
        policy_file: PolicyFile,
        channels: tuple[ChannelConfig, ...],
        *,
        adapters: AdapterStreams,
        seals: sealing.SealRings,
        on_seal: Callable[[str, float], None],
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self._policy_file = policy_file
        self._channels = channels
        self._adapters = adapters
        self._seals = seals
        self._on_seal = on_seal
        self._clock = clock
        # Grants made at once since some pass's snapshot: (generation, channel, key, grant). A pass
        # planned from an older snapshot must not take them away again (it did not see them).
        self._granted_now: list[tuple[int, str, str, access.Grant]] = []
        self._generation = 0

    def snapshot(self, store: Store | None = None) -> Snapshot:
        """A pass's inputs, as plain values, read from ``store`` (default: the server's, on the loop).

        With a read-only connection of its own it runs on the pass's worker thread.
        """
        store = store or self._store
        generation = self._generation  # first: every grant made at once up to here is stored already
        subscriptions = store.subscriptions()
        rotated: dict[str, float | None] = {}
        for key_id in {sub.key_id for sub in subscriptions if sub.key_id}:
            key = store.find_key(key_id)
            rotated[key_id] = None if key is None else key.rotated_at
        principals: dict[str, Principal] = {}
        for user in {sub.user for sub in subscriptions}:
            record = store.find_user(user)
            principals[user] = (
                Principal(user=user)
                if record is None
                else Principal(user=user, groups=record.groups, roles=record.roles)
            )
        return Snapshot(
            subscriptions=subscriptions,
            principals=principals,
            rotated=rotated,
            policy=self._policy_file.policy,
            channels=self._channels,
            now=self._clock(),
            generation=generation,
        )

    def apply(self, plan: AccessPlan, snapshot: Snapshot) -> None:
        """Carry a pass's plan out: packet keys, then each CURVE adapter's grants."""
        self._reconcile_seals(plan.entitled, now=snapshot.now)
        # The subscriptions granted at once after the snapshot keep their grants until a pass sees them.
        self._granted_now = [entry for entry in self._granted_now if entry[0] > snapshot.generation]
        registry = self._adapters.registry
        for session in self._adapters.sessions():
            with contextlib.suppress(NotFoundError):
                record = registry.get(session.adapter_id)
                if not record.registration.curve_public_key:
                    continue  # a plain adapter: nothing to enforce
                target = dict(plan.wanted.get(record.channel_name, {}))
                for _generation, channel, key, grant in self._granted_now:
                    if channel == record.channel_name:
                        target[key] = access.merge_grant(target.get(key), grant)
                self.tell(session, target)

    def tell(self, session: AdapterSession, target: access.Grants) -> None:
        """Queue the commands that bring ``session``'s adapter to ``target``."""
        for command in access.plan_commands(session.told, target, reason="data-plane access"):
            try:
                session.commands.put_nowait(Directive(adapter_id=session.adapter_id, command=command))
            except asyncio.QueueFull:
                session.told = None  # not reading: tell it everything again next time
                return
        if session.told != target:
            revoked = len(set(session.told or ()) - set(target))
            logger.info("adapter %s: %d key(s) granted, %d revoked", session.adapter_id, len(target), revoked)
        session.told = dict(target)

    def grant_now(self, record: SubscriptionRecord, routes: list[broker.Route]) -> None:
        """Grant a new subscription's key to its channels' adapters at once (before the subscriber dials).

        Only ever adds access (merged with what each adapter was told); the next
        pass settles the rest, and takes access away where it must.
        """
        if not record.curve_key or not lease_holds(record, now=self._clock(), rotated={record.key_id: 0.0}):
            return
        reach: dict[str, int] = {}
        for route in routes:
            reach[route.channel.name] = access.merge_limit(reach.get(route.channel.name), route.limit)
        expires_ns, owners = int(record.valid_until * 1e9), frozenset((record.user,))
        self._generation += 1
        for channel, limit in reach.items():
            grant = access.Grant(expires_ns, limit, owners)
            self._granted_now.append((self._generation, channel, record.curve_key, grant))
        for session in self._adapters.sessions():
            with contextlib.suppress(NotFoundError):
                adapter = self._adapters.registry.get(session.adapter_id)
                channel = adapter.channel_name
                if channel not in reach or not adapter.registration.curve_public_key or session.told is None:
                    continue  # not its channel, a plain adapter, or one that gets a full table next pass
                wanted = dict(session.told)
                wanted[record.curve_key] = access.merge_grant(
                    wanted.get(record.curve_key), access.Grant(expires_ns, reach[channel], owners)
                )
                if wanted != session.told:
                    self.tell(session, wanted)

    def _reconcile_seals(self, entitled: dict[str, set[str]], *, now: float) -> None:
        registry = self._adapters.registry
        sealed = {
            record.channel_name
            for record in registry.records()
            if sealing.is_multicast(record.registration.line_endpoint)
        }
        for channel in sorted(self._seals.update(sealed, entitled, now=now)):
            self._on_seal(channel, now)
        for session in self._adapters.sessions():
            with contextlib.suppress(NotFoundError):
                record = registry.get(session.adapter_id)
                key = self._seals.current(record.channel_name)
                if key is None or not sealing.is_multicast(record.registration.line_endpoint):
                    continue
                if session.sealing_with != key.key_id:
                    command = Command(kind=CommandKind.SEAL, seal_key=key, reason="packet key")
                    with contextlib.suppress(asyncio.QueueFull):  # not reading: told again next time
                        session.commands.put_nowait(Directive(adapter_id=session.adapter_id, command=command))
                        session.sealing_with = key.key_id
                        logger.info("adapter %s: seal with key %d", session.adapter_id, key.key_id)
