"""Subscriptions: the routes a user is entitled to, and the subscriptions that hold them.

Theory of operation: :class:`SubscriptionDesk` owns the stored subscriptions
and each user's request rate (:mod:`admin_server.rates`). Subscribe, Modify
and Cancel take the user's token first (a refused call costs it too), check
the quotas (:mod:`admin_server.limits`), plan the routes from the current
policy, the registry's records (frozen values) and the seal rings' keys
(:func:`broker.plan_routes`, the pattern checks charged to the caller), then
store the change, publish it to the route watches and ask for the data
plane to follow (a new key is granted at once: :meth:`DataPlane.grant_now`).
A subscription lives as long as its owner's logins: a new token renews every
lease (:meth:`SubscriptionDesk.extend`), and :meth:`SubscriptionDesk.tidy`
deletes those whose lease lapsed a grace period ago. Nothing here imports grpc.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Final

from feedha.admin_server import broker, globs
from feedha.admin_server.access_keeper import lease_holds
from feedha.admin_server.config import ServerConfig
from feedha.admin_server.counters import HubCounters
from feedha.admin_server.errors import FieldViolation, InvalidArgumentError, NotFoundError, RateLimitedError
from feedha.admin_server.fanout import HubEvent
from feedha.admin_server.limits import exhausted
from feedha.admin_server.policy import PolicyFile, Principal
from feedha.admin_server.rates import RequestRates
from feedha.admin_server.records import Lease, SubscriptionRecord
from feedha.admin_server.registry import Registry
from feedha.admin_server.sealing import SealRings
from feedha.admin_server.store import Store
from feedha.proto.registry import is_curve_key

logger = logging.getLogger(__name__)

__all__ = ["HOUSEKEEPING_S", "SubscriptionDesk"]

HOUSEKEEPING_S: Final = 30.0  # expired subscriptions and old audit rows go this often


class SubscriptionDesk:
    """The users' subscriptions and request rates (see the module notes).

    Args:
        config: the server configuration (channels, limits).
        store: the database (subscriptions, keys, the audit).
        policy_file: the policy (entitlements, roles).
        registry: the adapters' registry (its records are read, never changed here).
        seals: the seal rings (the current keys of sealed channels are read).
        counters: the server's counters (``refused``, ``routes_granted``, ``expired_subscriptions``).
        publish: gives an event to the listeners.
        grant_now: grants a new subscription's key to its adapters at once.
        reconcile: asks for a data-plane access pass.
        clock: wall-clock seconds.
    """

    def __init__(
        self,
        config: ServerConfig,
        store: Store,
        policy_file: PolicyFile,
        *,
        registry: Registry,
        seals: SealRings,
        counters: HubCounters,
        publish: Callable[[HubEvent], None],
        grant_now: Callable[[SubscriptionRecord, list[broker.Route]], None],
        reconcile: Callable[[], None],
        clock: Callable[[], float],
    ) -> None:
        self._config = config
        self._store = store
        self._policy_file = policy_file
        self._registry = registry
        self._seals = seals
        self._counters = counters
        self._publish = publish
        self._grant_now = grant_now
        self._reconcile = reconcile
        self._clock = clock
        self.rates = RequestRates(rate_per_s=config.limits.requests_per_s, burst=config.limits.request_burst)

    def __repr__(self) -> str:
        return f"<SubscriptionDesk [{self.rates!r}]>"

    def routes(self, principal: Principal, symbols: Sequence[str]) -> list[broker.Route]:
        """Routes for symbols under the current policy and registry (see :func:`broker.plan_routes`).

        The pattern checks share one step budget (:func:`globs.step_budget`: the caller's, if open).
        """
        with globs.step_budget():
            return self._plan_routes(principal, symbols)

    def _plan_routes(self, principal: Principal, symbols: Sequence[str]) -> list[broker.Route]:
        registry, seals = self._registry, self._seals
        names = registry.channel_names()
        lines = {name: broker.line_views(registry.lines(name)) for name in names}
        delayed = {name: broker.line_views(registry.lines(name), delayed=True) for name in names}
        conflated = {name: broker.line_views(registry.lines(name), conflated=True) for name in names}
        routes = broker.plan_routes(
            principal,
            symbols,
            policy=self._policy_file.policy,
            channels=self._config.channels,
            lines=lines,
            delayed_lines=delayed,
            conflated_lines=conflated,
        )
        return [
            route
            if route.delayed or route.conflated or not (keys := seals.keys_for(route.channel.name))
            else dataclasses.replace(route, seal_keys=keys)
            for route in routes
        ]

    def subscribe(
        self,
        principal: Principal,
        symbols: Sequence[str],
        *,
        curve_key: str = "",
        lease: Lease | None = None,
    ) -> tuple[SubscriptionRecord, list[broker.Route]]:
        """Create a subscription after checking entitlements.

        Args:
            principal: the caller.
            symbols: symbols or patterns.
            curve_key: the subscriber's CURVE public key (its lines then accept it), or "".
            lease: until when that key may connect, and under which API key (the caller's token).

        Raises:
            InvalidArgumentError: ``curve_key`` is not a Z85 CURVE key.
        """
        self._admit(principal.user)  # first: a refused request costs its token too
        if curve_key and not is_curve_key(curve_key):
            message = "curve_public_key must be a Z85-encoded CURVE public key (40 characters)"
            raise InvalidArgumentError(
                message, violations=[FieldViolation("curve_public_key", "CURVE_KEY_INVALID", message)]
            )
        self._check_quotas(principal.user, curve_key)
        with self.rates.planning(principal.user, now=self._clock()):
            routes = self.routes(principal, symbols)
        record = self._store.add_subscription(
            user=principal.user,
            symbols=tuple(broker.validate_items(symbols)),
            now=self._clock(),
            curve_key=curve_key,
            lease=lease,
        )
        self._counters.routes_granted += len(routes)
        self._publish(
            HubEvent(at=self._clock(), kind="subscribe", detail=f"{record.subscription_id} {principal.user}")
        )
        self._grant_now(record, routes)
        self._reconcile()
        return record, routes

    def _admit(self, user: str) -> None:
        """Take the user's request token (:mod:`admin_server.rates`), or refuse the call."""
        try:
            self.rates.admit(user, now=self._clock())
        except RateLimitedError:
            self._counters.count(self._counters.refused, "TOO_MANY_REQUESTS")
            raise

    def _check_quotas(self, user: str, curve_key: str) -> None:
        """Refuse a subscription over the user's quotas (``RESOURCE_EXHAUSTED``, the limit named)."""
        limits = self._config.limits
        count, keys = self._store.subscription_counts(user, curve_key)
        if count >= limits.subscriptions_per_user:
            self._counters.count(self._counters.refused, "TOO_MANY_SUBSCRIPTIONS")
            raise exhausted(
                f"user {user!r} holds {count} subscriptions; cancel some first",
                limits.subscriptions_per_user,
                reason="TOO_MANY_SUBSCRIPTIONS",
            )
        if curve_key and keys >= limits.curve_keys_per_user:
            self._counters.count(self._counters.refused, "TOO_MANY_CURVE_KEYS")
            raise exhausted(
                f"user {user!r} has subscriptions with {keys} other CURVE keys; reuse one, or cancel "
                "the subscriptions of keys no longer used",
                limits.curve_keys_per_user,
                reason="TOO_MANY_CURVE_KEYS",
            )

    def owned_subscription(self, principal: Principal, subscription_id: str) -> SubscriptionRecord:
        """A subscription the principal may change (its own, or any for an admin).

        Raises:
            NotFoundError: unknown, or owned by someone else (not revealed).
        """
        record = self._store.find_subscription(subscription_id)
        if record.user != principal.user and not self._policy_file.policy.has_role(principal, "admin"):
            raise NotFoundError(f"unknown subscription {subscription_id!r}", reason="SUBSCRIPTION_NOT_FOUND")
        return record

    def modify(
        self,
        principal: Principal,
        subscription_id: str,
        symbols: Sequence[str],
        *,
        lease: Lease | None = None,
    ) -> list[broker.Route]:
        """Replace a subscription's symbols after checking entitlements (one of the user's requests)."""
        self._admit(principal.user)
        self.owned_subscription(principal, subscription_id)
        with self.rates.planning(principal.user, now=self._clock()):
            routes = self.routes(principal, symbols)
        items = tuple(broker.validate_items(symbols))
        self._store.update_subscription(subscription_id, symbols=items, now=self._clock(), lease=lease)
        self._counters.routes_granted += len(routes)
        self._publish(
            HubEvent(
                at=self._clock(),
                kind="modify",
                detail=subscription_id,
                subscription_id=subscription_id,
                routes_changed=True,
            )
        )
        self._grant_now(self._store.find_subscription(subscription_id), routes)
        self._reconcile()
        return routes

    def cancel(self, principal: Principal, subscription_id: str) -> None:
        """Delete a subscription (one of the user's requests)."""
        self._admit(principal.user)
        self.owned_subscription(principal, subscription_id)
        self._store.delete_subscription(subscription_id)
        self._cancelled(subscription_id, self._clock())
        self._reconcile()

    def _cancelled(self, subscription_id: str, now: float) -> None:
        # Its route watches wake, find it gone and end; nobody else's re-plan.
        self._publish(
            HubEvent(
                at=now,
                kind="cancel",
                detail=subscription_id,
                subscription_id=subscription_id,
                routes_changed=True,
            )
        )

    def extend(self, user: str, lease: Lease) -> None:
        """A new token of ``user``: its subscriptions stay on the data plane until it expires."""
        if self._store.extend_subscriptions(user, lease):
            self._reconcile()

    def lease_holds(self, sub: SubscriptionRecord) -> bool:
        """Whether the token behind a subscription still stands: not expired, its API key unchanged."""
        rotated: dict[str, float | None] = {}
        if sub.key_id:
            key = self._store.find_key(sub.key_id)
            rotated[sub.key_id] = None if key is None else key.rotated_at
        return lease_holds(sub, now=self._clock(), rotated=rotated)

    async def housekeeping(self, interval_s: float = HOUSEKEEPING_S) -> None:
        """Forever: delete subscriptions whose login lapsed, prune the audit log (runs as a task)."""
        while True:
            self.tidy()
            await asyncio.sleep(interval_s)

    def tidy(self) -> None:
        """Delete subscriptions whose owner's token lapsed ``subscription_grace_s`` ago; prune the audit."""
        limits, now = self._config.limits, self._clock()
        gone = self._store.delete_expired_subscriptions(before=now - limits.subscription_grace_s)
        for subscription_id in gone:
            self._cancelled(subscription_id, now)
        if gone:
            self._counters.expired_subscriptions += len(gone)
            logger.info("deleted %d subscription(s) whose login lapsed", len(gone))
            self._reconcile()
        self._counters.audit_pruned += self._store.prune_audit(
            before=now - limits.audit_max_age_s, keep=limits.audit_max_rows
        )
