"""Data-plane access: which subscriber keys each channel's adapters must accept, and what to tell them.

Theory of operation
-------------------
A subscriber that wants the lines of its channels sends its CURVE public key
with its subscription. The admin server does not track grants one by one;
it *reconciles*: from the stored subscriptions, the current policy and the
time, :func:`desired_grants` computes for every channel the set of keys that
may connect and until when (the owner's token expiry, extended at each
login). For each connected adapter, :func:`plan_commands` compares that with
what the adapter was last told and returns the GRANT/REVOKE commands that
close the difference; the first commands after an adapter (re)connects
replace its whole table. So every way of losing access -- a cancelled
subscription, a policy change, a token that expired without a new login -- is
the same thing: the key drops out of the desired set, and the next
reconciliation (at every change, and every second) revokes it. A key whose
subscription reaches a channel by delayed routes only is granted *delayed
only*: the channel's adapters then admit it to their delayed lines and
delayed replays, never to their real-time lines; one that reaches it by
conflated routes only is granted *conflated only* (the conflated lines), and
by both kinds, both. A grant's *limit* says so: 0 (none: everything),
:data:`DELAYED_ONLY`, :data:`CONFLATED_ONLY`, or both bits. A grant also names
the key's *owners*, the users whose subscriptions carry it: the adapters'
replay services budget per owner (:func:`owner_tag`), so a user's many keys
share one budget. Pure.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Final, NamedTuple, TypeAlias

from feedha.admin_server.errors import AdminError
from feedha.admin_server.records import SubscriptionRecord
from feedha.proto.registry import MAX_OWNER_CHARS, AccessGrant, Command, CommandKind

__all__ = [
    "CONFLATED_ONLY",
    "DELAYED_ONLY",
    "GRANTS_PER_COMMAND",
    "Grant",
    "Grants",
    "desired_grants",
    "entitled_subscriptions",
    "merge_grant",
    "merge_limit",
    "owner_tag",
    "plan_commands",
]


class Grant(NamedTuple):
    """What one key is granted on one channel."""

    expires_ns: int
    limit: int
    owners: frozenset[str] = frozenset()  # the users whose subscriptions carry the key


Grants: TypeAlias = dict[str, Grant]  # curve public key -> its grant
GRANTS_PER_COMMAND: Final = 10_000  # ~550 kB a command, well under gRPC's 4 MiB message limit
Reach: TypeAlias = Mapping[str, int]  # channel name -> the limit of the routes that reach it
DELAYED_ONLY: Final = 1  # a limit bit: the delayed line and delayed replays
CONFLATED_ONLY: Final = 2  # a limit bit: the conflated line


def desired_grants(
    subscriptions: Iterable[SubscriptionRecord],
    *,
    now: float,
    channels_for: Callable[[SubscriptionRecord], Reach],
) -> dict[str, Grants]:
    """Channel name -> the keys that may connect to its lines and replay services now.

    Args:
        subscriptions: every stored subscription.
        now: wall-clock seconds.
        channels_for: the channels a subscription's routes reach under the current
            policy, each with the limit of the routes that reach it (raises an
            ``AdminError`` when its owner is no longer entitled).
    """
    grants: dict[str, Grants] = {}
    keyed = (sub for sub in subscriptions if sub.curve_key)
    for sub, channels in _reach(keyed, now=now, channels_for=channels_for):
        expires_ns = int(sub.valid_until * 1e9)
        for channel, limit in channels.items():
            keys = grants.setdefault(channel, {})
            grant = Grant(expires_ns, limit, frozenset((sub.user,)))
            keys[sub.curve_key] = merge_grant(keys.get(sub.curve_key), grant)
    return grants


def plan_commands(told: Grants | None, wanted: Grants, *, reason: str) -> list[Command]:
    """The commands that bring an adapter from what it was ``told`` (``None``: nothing yet) to ``wanted``.

    A command carries at most :data:`GRANTS_PER_COMMAND` grants (a gRPC message is
    4 MiB at most: ~75,000 grants). A replacement of the whole table goes in as many
    parts as it takes, each marked ``replace_grants``: the adapter drops the keys
    none of the parts named once they stop coming (``adapter.core.access_desk.REPLACE_WINDOW_S``).
    """
    if told is None:
        grants = [_grant(key, grant) for key, grant in sorted(wanted.items())]
        return [
            Command(kind=CommandKind.GRANT, grants=part, replace_grants=True, reason=reason)
            for part in _parts(grants) or [()]
        ]
    changed = [_grant(key, grant) for key, grant in sorted(wanted.items()) if told.get(key) != grant]
    gone = [AccessGrant(key) for key in sorted(told) if key not in wanted]
    return [Command(kind=CommandKind.GRANT, grants=part, reason=reason) for part in _parts(changed)] + [
        Command(kind=CommandKind.REVOKE, grants=part, reason=reason) for part in _parts(gone)
    ]


def _parts(grants: list[AccessGrant]) -> list[tuple[AccessGrant, ...]]:
    return [tuple(grants[i : i + GRANTS_PER_COMMAND]) for i in range(0, len(grants), GRANTS_PER_COMMAND)]


def _grant(key: str, grant: Grant) -> AccessGrant:
    expires_ns, limit, owners = grant
    delayed, conflated = bool(limit & DELAYED_ONLY), bool(limit & CONFLATED_ONLY)
    return AccessGrant(key, expires_ns, delayed, conflated, owner_tag(owners))


def owner_tag(owners: frozenset[str]) -> str:
    """The ``AccessGrant.owner`` of a key these users' subscriptions carry.

    The names sorted and joined by newlines; a digest of them when that is longer than
    the field's limit. Adapters only compare tags: a key two users carry gets a budget
    apart from each one's other keys (a user cannot pull another's key into its own).
    """
    tag = "\n".join(sorted(owners))
    if len(tag) <= MAX_OWNER_CHARS:
        return tag
    return "sha256:" + hashlib.sha256(tag.encode()).hexdigest()


def merge_limit(old: int | None, new: int) -> int:
    """Two limits of one key as one: none if either has none, else both kinds of line."""
    if old is None:
        return new
    return old | new if old and new else 0


def merge_grant(old: Grant | None, new: Grant) -> Grant:
    """Two grants of one key as one: the later expiry, the merged limit (:func:`merge_limit`), both owners."""
    if old is None:
        return new
    return Grant(
        max(old.expires_ns, new.expires_ns), merge_limit(old.limit, new.limit), old.owners | new.owners
    )


def entitled_subscriptions(
    subscriptions: Iterable[SubscriptionRecord],
    *,
    now: float,
    channels_for: Callable[[SubscriptionRecord], Reach],
) -> dict[str, set[str]]:
    """Channel name -> the subscriptions entitled to it in real time now (whatever their keys).

    The holders of a multicast channel's packet keys (see :mod:`sealing`); the
    arguments are those of :func:`desired_grants`.
    """
    entitled: dict[str, set[str]] = {}
    for sub, channels in _reach(subscriptions, now=now, channels_for=channels_for):
        for channel, limit in channels.items():
            if not limit:
                entitled.setdefault(channel, set()).add(sub.subscription_id)
    return entitled


def _reach(
    subscriptions: Iterable[SubscriptionRecord],
    *,
    now: float,
    channels_for: Callable[[SubscriptionRecord], Reach],
) -> Iterator[tuple[SubscriptionRecord, Reach]]:
    """Each subscription whose token still stands, with the channels its routes reach."""
    for sub in subscriptions:
        if sub.valid_until <= now:
            continue
        try:
            channels = channels_for(sub)
        except AdminError:
            continue  # no longer entitled: no access
        yield sub, channels
