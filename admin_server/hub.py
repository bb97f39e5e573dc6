"""The server's shared state and the asyncio glue between the pure cores and the gRPC services.

Theory of operation: one :class:`Hub` owns the store, the registry, the
policy file, the token signer and the login backoff. Service methods call
it with plain values and get plain values or domain errors back (the
services map those to status codes). Each state change is decided first by
a pure core, then persisted, then published to the event listeners (route
watchers, ``feedctl watch``) and, for operator commands, put on the target
adapters' command queues. Nothing here imports grpc.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from feedha.admin_server import access, broker, globs, keyfile, sealing, tokens
from feedha.admin_server.access_keeper import AccessKeeper, lease_holds
from feedha.admin_server.config import ServerConfig
from feedha.admin_server.dataplane import DataPlane
from feedha.admin_server.errors import (
    AuthenticationError,
    FieldViolation,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionError,
    RateLimitedError,
)
from feedha.admin_server.fanout import Fanout, HubEvent, RouteWatch
from feedha.admin_server.limits import exhausted
from feedha.admin_server.logins import LoginDesk
from feedha.admin_server.policy import PolicyFile, Principal
from feedha.admin_server.purging import PurgeDesk
from feedha.admin_server.rates import RequestRates
from feedha.admin_server.registry import Directive, Registry, RegistryEvent
from feedha.admin_server.store import Lease, Store, SubscriptionRecord
from feedha.proto.registry import AdapterRegistration, AdapterStatus, is_curve_key

logger = logging.getLogger(__name__)

COMMAND_QUEUE_SIZE: Final = 100
ACCESS_INTERVAL_S: Final = 0.5  # expiries are enforced within this (and by the adapters themselves)
HOUSEKEEPING_S: Final = 30.0  # expired subscriptions and old audit rows go this often


@dataclass(slots=True)
class HubCounters:
    """What the hub has done since start (read by the metrics collector)."""

    logins: dict[str, int] = field(default_factory=dict)  # by result: ok, failed, throttled, busy
    refused: dict[str, int] = field(default_factory=dict)  # requests over a quota, by reason
    expired_subscriptions: int = 0
    audit_pruned: int = 0
    routes_granted: int = 0
    policy_reloads: dict[str, int] = field(default_factory=dict)  # by result: ok, rejected
    registry_changes: dict[str, int] = field(default_factory=dict)  # by kind: registered, changed, down
    commands: dict[str, int] = field(default_factory=dict)  # by action: failover, fail, throttle, purge
    purges: dict[str, int] = field(default_factory=dict)  # by result: accepted, or the refusal's reason
    denied: dict[str, int] = field(default_factory=dict)  # operator calls refused for the role, by method

    def count(self, table: dict[str, int], key: str, by: int = 1) -> None:
        table[key] = table.get(key, 0) + by


@dataclass(slots=True, eq=False)
class AdapterSession:
    """One connected adapter stream: its id and the queue of commands for it."""

    adapter_id: str
    user: str = ""  # who registered it: only that user may take the id over while it is live
    commands: asyncio.Queue[Directive] = field(default_factory=lambda: asyncio.Queue(COMMAND_QUEUE_SIZE))
    told: access.Grants | None = None  # the data-plane grants this adapter was last told (None: none yet)
    sealing_with: int | None = None  # the seal key id this adapter was last told to use


class Hub:
    """The admin server's state.

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
        self.config = config
        self.store = store
        self.policy_file = policy_file
        self.clock = clock
        self.registry = Registry(store.load_adapters())
        self.counters = HubCounters()
        self.logins = LoginDesk(
            store,
            config.secret_hashing.hasher(),
            config.limits,
            clock=clock,
            count=lambda result: self.counters.count(self.counters.logins, result),
        )
        key = keyfile.load_signing_key(config.signing_key_path, store=store)
        self.signer = tokens.TokenSigner(key, ttl_s=config.token_ttl_s)
        self.events = Fanout(
            watches_per_user=config.limits.watches_per_user,
            watches_per_subscription=config.limits.watches_per_subscription,
            refused=lambda reason: self.counters.count(self.counters.refused, reason),
        )
        self._sessions: dict[str, AdapterSession] = {}
        self.seals = sealing.SealRings()
        self.purges = PurgeDesk(self)
        self.rates = RequestRates(rate_per_s=config.limits.requests_per_s, burst=config.limits.request_burst)
        self.dataplane = DataPlane(self, on_seal=self._sealed)
        # The access passes read the subscriptions with a connection of their own, on their thread.
        self._reader = None if str(config.database) == ":memory:" else Store(config.database, readonly=True)
        reader = self._reader
        self.access = AccessKeeper(
            self.dataplane.snapshot if reader is None else lambda: self.dataplane.snapshot(reader),
            self.dataplane.apply,
            snapshot_off_loop=reader is not None,
            due_in=lambda: self.seals.due_in(now=self.clock()),
        )

    def __repr__(self) -> str:
        return f"<Hub [{self.registry!r}, listeners={self.events.listeners}, sessions={len(self._sessions)}]>"

    def close(self) -> None:
        """Close the access passes' database connection (the store is the server's to close)."""
        self.logins.close()
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    # -- authentication

    async def login(
        self, key_id: str, secret: str, *, peer: str
    ) -> tuple[str, tokens.TokenClaims, Principal]:
        """Check an API key and issue a token (see :mod:`admin_server.logins` for the limits).

        Args:
            key_id: the API key id.
            secret: its secret.
            peer: the client address without port (:func:`backoff.peer_address`).

        Raises:
            LoginThrottledError: the key failed too often recently, or the address is over its rate.
            ResourceExhaustedError: too many logins are being checked at once.
            AuthenticationError: unknown key or wrong secret.
        """
        key = await self.logins.check(key_id, secret, peer=peer)
        token, claims = self.signer.issue(user=key.user, key_id=key.key_id, now=self.clock())
        # A new token keeps the user's subscriptions on the data plane until it expires.
        if self.store.extend_subscriptions(key.user, Lease(claims.expires_at, key.key_id, claims.issued_at)):
            self.reconcile_access()
        return token, claims, self.principal(key.user)

    def authenticate(self, token: str) -> Principal:
        """Verify a bearer token and resolve its principal (see :meth:`authenticate_token`)."""
        return self.authenticate_token(token)[0]

    def authenticate_token(self, token: str) -> tuple[Principal, tokens.TokenClaims]:
        """Verify a bearer token; its principal and what it says.

        Raises:
            AuthenticationError: forged, malformed, expired, or its key was rotated or removed.
        """
        claims = self.signer.verify(token, now=self.clock())
        key = self.store.find_key(claims.key_id)
        if key is None or key.user != claims.user:
            raise AuthenticationError(
                "the token's API key no longer exists; log in again", reason="KEY_REVOKED"
            )
        if claims.issued_at < key.rotated_at - 1e-3:
            raise AuthenticationError("the token's API key was rotated; log in again", reason="KEY_ROTATED")
        return self.principal(claims.user), claims

    def principal(self, user: str) -> Principal:
        """The principal for a user name, with its key-store groups and roles."""
        record = self.store.find_user(user)
        if record is None:
            return Principal(user=user)
        return Principal(user=user, groups=record.groups, roles=record.roles)

    def has_role(self, principal: Principal, role: str) -> bool:
        """Whether the current policy gives the principal ``role``."""
        return self.policy_file.policy.has_role(principal, role)

    # -- brokering

    def routes(self, principal: Principal, symbols: Sequence[str]) -> list[broker.Route]:
        """Routes for symbols under the current policy and registry (see :func:`broker.plan_routes`).

        The pattern checks share one step budget (:func:`globs.step_budget`: the caller's, if open).
        """
        with globs.step_budget():
            return self._plan_routes(principal, symbols)

    def _plan_routes(self, principal: Principal, symbols: Sequence[str]) -> list[broker.Route]:
        names = self.registry.channel_names()
        lines = {name: broker.line_views(self.registry.lines(name)) for name in names}
        delayed = {name: broker.line_views(self.registry.lines(name), delayed=True) for name in names}
        conflated = {name: broker.line_views(self.registry.lines(name), conflated=True) for name in names}
        routes = broker.plan_routes(
            principal,
            symbols,
            policy=self.policy_file.policy,
            channels=self.config.channels,
            lines=lines,
            delayed_lines=delayed,
            conflated_lines=conflated,
        )
        return [
            route
            if route.delayed or route.conflated or not (keys := self.seals.keys_for(route.channel.name))
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
            ValueError: ``curve_key`` is not a Z85 CURVE key.
        """
        self._admit(principal.user)  # first: a refused request costs its token too
        if curve_key and not is_curve_key(curve_key):
            message = "curve_public_key must be a Z85-encoded CURVE public key (40 characters)"
            raise InvalidArgumentError(
                message, violations=[FieldViolation("curve_public_key", "CURVE_KEY_INVALID", message)]
            )
        self._check_quotas(principal.user, curve_key)
        with self.rates.planning(principal.user, now=self.clock()):
            routes = self.routes(principal, symbols)
        record = self.store.add_subscription(
            user=principal.user,
            symbols=tuple(broker.validate_items(symbols)),
            now=self.clock(),
            curve_key=curve_key,
            lease=lease,
        )
        self.counters.routes_granted += len(routes)
        self.publish(
            HubEvent(at=self.clock(), kind="subscribe", detail=f"{record.subscription_id} {principal.user}")
        )
        self.dataplane.grant_now(record, routes)
        self.reconcile_access()
        return record, routes

    def _admit(self, user: str) -> None:
        """Take the user's request token (:mod:`admin_server.rates`), or refuse the call."""
        try:
            self.rates.admit(user, now=self.clock())
        except RateLimitedError:
            self.counters.count(self.counters.refused, "TOO_MANY_REQUESTS")
            raise

    def _check_quotas(self, user: str, curve_key: str) -> None:
        """Refuse a subscription over the user's quotas (``RESOURCE_EXHAUSTED``, the limit named)."""
        limits = self.config.limits
        count, keys = self.store.subscription_counts(user, curve_key)
        if count >= limits.subscriptions_per_user:
            self.counters.count(self.counters.refused, "TOO_MANY_SUBSCRIPTIONS")
            raise exhausted(
                f"user {user!r} holds {count} subscriptions; cancel some first",
                limits.subscriptions_per_user,
                reason="TOO_MANY_SUBSCRIPTIONS",
            )
        if curve_key and keys >= limits.curve_keys_per_user:
            self.counters.count(self.counters.refused, "TOO_MANY_CURVE_KEYS")
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
        record = self.store.find_subscription(subscription_id)
        if record.user != principal.user and not self.has_role(principal, "admin"):
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
        with self.rates.planning(principal.user, now=self.clock()):
            routes = self.routes(principal, symbols)
        items = tuple(broker.validate_items(symbols))
        self.store.update_subscription(subscription_id, symbols=items, now=self.clock(), lease=lease)
        self.counters.routes_granted += len(routes)
        self.publish(
            HubEvent(
                at=self.clock(),
                kind="modify",
                detail=subscription_id,
                subscription_id=subscription_id,
                routes_changed=True,
            )
        )
        self.dataplane.grant_now(self.store.find_subscription(subscription_id), routes)
        self.reconcile_access()
        return routes

    def cancel(self, principal: Principal, subscription_id: str) -> None:
        """Delete a subscription (one of the user's requests)."""
        self._admit(principal.user)
        self.owned_subscription(principal, subscription_id)
        self.store.delete_subscription(subscription_id)
        self._cancelled(subscription_id, self.clock())
        self.reconcile_access()

    def _cancelled(self, subscription_id: str, now: float) -> None:
        # Its route watches wake, find it gone and end; nobody else's re-plan.
        self.publish(
            HubEvent(
                at=now,
                kind="cancel",
                detail=subscription_id,
                subscription_id=subscription_id,
                routes_changed=True,
            )
        )

    # -- data-plane access

    def reconcile_access(self) -> None:
        """Ask for the data plane to be brought in line with the subscriptions, the policy and the clock.

        A pass runs soon, off the event loop (:mod:`admin_server.access_keeper`): every
        connected adapter learns which subscriber keys it must accept now (see
        :mod:`access`), and multicast channels' packet keys are rotated and handed out
        (see :mod:`sealing`).
        """
        self.access.request()

    def _sealed(self, channel: str, now: float) -> None:
        self.publish(
            HubEvent(at=now, kind="seal", channel_name=channel, detail="packet keys", routes_changed=True)
        )

    def adapter_session_list(self) -> list[AdapterSession]:
        """The adapter streams connected now."""
        return list(self._sessions.values())

    def lease_holds(self, sub: SubscriptionRecord) -> bool:
        """Whether the token behind a subscription still stands: not expired, its API key unchanged."""
        rotated: dict[str, float | None] = {}
        if sub.key_id:
            key = self.store.find_key(sub.key_id)
            rotated[sub.key_id] = None if key is None else key.rotated_at
        return lease_holds(sub, now=self.clock(), rotated=rotated)

    async def watch_access(self, interval_s: float = ACCESS_INTERVAL_S) -> None:
        """Reconcile data-plane access when asked and every ``interval_s`` (expiries; runs as a task)."""
        await self.access.run(interval_s)

    async def housekeeping(self, interval_s: float = HOUSEKEEPING_S) -> None:
        """Forever: delete subscriptions whose login lapsed, prune the audit log (runs as a task)."""
        while True:
            self.tidy()
            await asyncio.sleep(interval_s)

    def tidy(self) -> None:
        """Delete subscriptions whose owner's token lapsed ``subscription_grace_s`` ago; prune the audit."""
        limits, now = self.config.limits, self.clock()
        gone = self.store.delete_expired_subscriptions(before=now - limits.subscription_grace_s)
        for subscription_id in gone:
            self._cancelled(subscription_id, now)
        if gone:
            self.counters.expired_subscriptions += len(gone)
            logger.info("deleted %d subscription(s) whose login lapsed", len(gone))
            self.reconcile_access()
        self.counters.audit_pruned += self.store.prune_audit(
            before=now - limits.audit_max_age_s, keep=limits.audit_max_rows
        )

    # -- adapters

    def attach(self, registration: AdapterRegistration, principal: Principal) -> AdapterSession:
        """An adapter stream registered; a newer stream of the same user replaces the older one.

        Raises:
            PermissionDeniedError: the policy does not bind the adapter to the caller (audited).
            PreconditionError: another user's stream holds the adapter id (audited).
        """
        self._authorize_registration(registration, principal)
        session = AdapterSession(adapter_id=registration.adapter_id, user=principal.user)
        self._sessions[registration.adapter_id] = session
        self._apply(self.registry.on_register(registration, now=self.clock()), registration.adapter_id)
        logger.info("adapter %s registered on %s", registration.adapter_id, registration.channel_name)
        self.reconcile_access()
        return session

    def _authorize_registration(self, registration: AdapterRegistration, principal: Principal) -> None:
        # Without adapter_auth every stream is the anonymous "adapter": nothing to bind.
        adapter_id, channel = registration.adapter_id, registration.channel_name
        error: PermissionDeniedError | PreconditionError | None = None
        if self.config.adapter_auth and not self.policy_file.policy.may_register(
            principal, channel_name=channel, adapter_id=adapter_id
        ):
            error = PermissionDeniedError(
                f"user {principal.user!r} is not bound to adapter {adapter_id!r} on channel {channel!r}",
                reason="ADAPTER_NOT_BOUND",
                metadata={"adapterId": adapter_id, "channel": channel},
            )
        held = self._sessions.get(adapter_id)
        if error is None and held is not None and held.user != principal.user:
            error = PreconditionError(
                f"adapter {adapter_id!r} is registered by a live session of another user",
                reason="ADAPTER_ID_IN_USE",
                metadata={"adapterId": adapter_id},
            )
        if error is None:
            return
        logger.warning("registration refused: %s", error)
        detail = f"channel={channel} line={registration.line_endpoint}: {error}"
        self.store.audit(
            user=principal.user, action="register-refused", target=adapter_id, detail=detail, now=self.clock()
        )
        raise error

    def report(self, session: AdapterSession, status: AdapterStatus) -> None:
        """An adapter reported its status."""
        if self._sessions.get(session.adapter_id) is not session:
            return  # superseded by a newer stream for the same adapter
        self._apply(self.registry.on_status(session.adapter_id, status, now=self.clock()), session.adapter_id)

    def session(self, adapter_id: str) -> AdapterSession | None:
        """The live registry stream of an adapter, if it has one."""
        return self._sessions.get(adapter_id)

    def detach(self, session: AdapterSession) -> None:
        """An adapter stream ended: mark the adapter down unless a newer stream took over."""
        if self._sessions.get(session.adapter_id) is not session:
            return
        del self._sessions[session.adapter_id]
        self._apply(self.registry.on_disconnect(session.adapter_id, now=self.clock()), session.adapter_id)
        logger.info("adapter %s down", session.adapter_id)

    def _apply(self, events: list[RegistryEvent], adapter_id: str) -> None:
        with contextlib.suppress(NotFoundError):
            self.store.save_adapter(self.registry.get(adapter_id))
        for ev in events:
            self.counters.count(self.counters.registry_changes, ev.kind.value)
            self.publish(
                HubEvent(
                    at=self.clock(),
                    kind=ev.kind.value,
                    channel_name=ev.channel_name,
                    adapter_id=ev.adapter_id,
                    detail=ev.detail,
                    routes_changed=ev.routes_changed,
                )
            )

    def send(
        self, principal: Principal, action: str, target: str, directives: list[Directive]
    ) -> list[Directive]:
        """Deliver planned operator commands to the adapters' streams and audit them.

        Raises:
            PreconditionError: a target adapter has no open stream.
        """
        missing = [d.adapter_id for d in directives if d.adapter_id not in self._sessions]
        if missing:
            raise PreconditionError(
                f"adapter(s) not connected: {', '.join(missing)}",
                reason="ADAPTER_NOT_CONNECTED",
                metadata={"adapterIds": " ".join(missing)},
            )
        for directive in directives:
            command = directive.command
            detail = f"{command.kind.value} term={command.term} rate={command.rate} {command.reason}".strip()
            try:
                self._sessions[directive.adapter_id].commands.put_nowait(directive)
            except asyncio.QueueFull:
                raise PreconditionError(
                    f"adapter {directive.adapter_id!r} is not reading its commands",
                    reason="ADAPTER_NOT_READING",
                    metadata={"adapterId": directive.adapter_id},
                ) from None
            self.counters.count(self.counters.commands, action)
            self.store.audit(
                user=principal.user,
                action=action,
                target=directive.adapter_id,
                detail=detail,
                now=self.clock(),
            )
            channel = self.registry.get(directive.adapter_id).channel_name
            self.publish(
                HubEvent(
                    at=self.clock(),
                    kind="command",
                    channel_name=channel,
                    adapter_id=directive.adapter_id,
                    detail=f"{detail} by {principal.user}",
                )
            )
        logger.info("operator %s: %s %s -> %d command(s)", principal.user, action, target, len(directives))
        return directives

    def publish_command(self, channel: str, detail: str, adapter_id: str = "") -> None:
        """Tell the listeners of an operator command (``feedctl watch``, the status page)."""
        self.publish(
            HubEvent(
                at=self.clock(), kind="command", channel_name=channel, adapter_id=adapter_id, detail=detail
            )
        )

    @property
    def adapter_sessions(self) -> int:
        """Adapter streams connected now."""
        return len(self._sessions)

    @property
    def listeners(self) -> int:
        """Open watches now: route watches, ``feedctl watch`` streams and the status page's feed."""
        return self.events.listeners

    def subscribers_by_channel(self) -> dict[str, int]:
        """How many live subscriptions reach each channel in real time, as of the last access pass."""
        last = self.access.last
        return {} if last is None else {channel: len(subs) for channel, subs in last.entitled.items()}

    # -- events

    def publish(self, event: HubEvent) -> None:
        """Give an event to every listener (see :mod:`admin_server.fanout`)."""
        self.events.publish(event)

    def watch_routes(
        self, user: str, subscription_id: str
    ) -> contextlib.AbstractAsyncContextManager[RouteWatch]:
        """A route watch of a subscription, one of the user's watches (:meth:`Fanout.watch_routes`)."""
        return self.events.watch_routes(user, subscription_id)

    def listen(
        self, user: str | None = None
    ) -> contextlib.AbstractAsyncContextManager[asyncio.Queue[HubEvent]]:
        """A queue of every event published while it is open (:meth:`Fanout.listen`)."""
        return self.events.listen(user)

    async def watch_policy(self) -> None:
        """Poll the policy file's mtime forever; reload on change (runs as a task)."""
        rejections = self.policy_file.rejections
        while True:
            await asyncio.sleep(self.config.policy_poll_s)
            if self.policy_file.poll():
                self.counters.count(self.counters.policy_reloads, "ok")
                self.publish(HubEvent(at=self.clock(), kind="policy", detail="reloaded", routes_changed=True))
                self.reconcile_access()
            elif self.policy_file.rejections != rejections:
                rejections = self.policy_file.rejections
                self.counters.count(self.counters.policy_reloads, "rejected")
                detail = f"rejected, keeping the last good policy: {self.policy_file.last_error}"
                self.publish(HubEvent(at=self.clock(), kind="policy", detail=detail))
