"""Packet keys for multicast lines: one ring per channel, rotated when a holder loses its entitlement.

Theory of operation
-------------------
CURVE protects a tcp line connection by connection; a multicast line has no
connections, so its adapters *seal* every packet (AES-256-GCM, see
``proto/seal.py``) with a per-channel key that the admin server hands to the
channel's adapters and, with the routes, to every subscriber entitled to the
channel in real time. The server does not track who received which key; it
remembers, per channel, the subscriptions that were entitled while the
current keys were handed out (the *holders*). At every reconciliation
(:meth:`SealRings.update`, from the hub, at each change and every half
second) a holder that is no longer entitled -- cancelled, revoked by policy,
its token expired -- means the keys it has must stop working:

1. a new key is made and *announced*: it goes out with the routes of the
   subscribers still entitled (so they can open packets sealed with it
   before any arrive);
2. ``switch_s`` later the adapters are told to seal with it; from then on the
   revoked subscriber reads nothing new. Subscribers keep the last few keys,
   so packets in flight across the switch still open.

A further revocation while a key is announced does not touch the announced
key nor its switch time: the newly revoked subscriber may hold that key
too, so the ring remembers to rotate *once more* at the switch (``again``):
the switch happens on time, and a fresh key is announced at once to those
still entitled, to be used ``switch_s`` later. So a revocation is carried
out within ``2 x switch_s`` of the pass that sees it, plus how late the
passes come (the hub runs one at every switch time, :meth:`SealRings.due_in`),
however often entitlement changes. (Until 2026-11-29 a revocation replaced the
announced key and pushed ``switch_at`` back: a loop of Subscribe/Cancel
faster than ``switch_s`` -- or a busy channel's ordinary churn -- kept the
keys from ever switching, and a revoked subscriber read on for good.)

Key ids start at a random number per channel and count up, so a restarted
server does not reuse an id with a different key. Pure: explicit times,
injected key maker.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Final

from feedha.proto.seal import SealKey

__all__ = ["REVOKED_WITHIN_S", "SWITCH_S", "ChannelSeal", "SealRings", "is_multicast"]

SWITCH_S: Final = 0.5  # subscribers have a new key this long before the adapters seal with it
REVOKED_WITHIN_S: Final = 2.0  # the bound docs/security.md promises: 2 x SWITCH_S, the passes' delays, slack
_MULTICAST: Final = ("epgm://", "pgm://", "norm://")  # as transport.MULTICAST_SCHEMES (no zmq here)


def is_multicast(endpoint: str) -> bool:
    """Whether a line endpoint is a multicast one (which CURVE cannot protect: its packets are sealed)."""
    return endpoint.startswith(_MULTICAST)


@dataclass(slots=True)
class ChannelSeal:
    """One channel's keys: the one the adapters seal with, and the one announced to replace it."""

    current: SealKey
    holders: frozenset[str]
    announced: SealKey | None = None
    switch_at: float = 0.0
    rotations: int = 0
    again: bool = False  # a holder was revoked while ``announced`` was out: rotate once more at the switch

    def keys(self) -> tuple[SealKey, ...]:
        """What an entitled subscriber is given, newest last."""
        return (self.current,) if self.announced is None else (self.current, self.announced)


def _random_key(key_id: int) -> SealKey:
    return SealKey(key_id, secrets.token_bytes(32))


@dataclass(slots=True)
class SealRings:
    """The seal keys of every sealed channel.

    Args:
        switch_s: how long a new key is announced before the adapters use it.
        new_key: makes a key for an id (tests inject a deterministic one).
    """

    switch_s: float = SWITCH_S
    new_key: Callable[[int], SealKey] = _random_key
    rings: dict[str, ChannelSeal] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"<SealRings [channels={sorted(self.rings)}]>"

    def keys_for(self, channel: str) -> tuple[SealKey, ...]:
        """The keys an entitled subscriber of ``channel`` gets (empty: the channel is not sealed)."""
        ring = self.rings.get(channel)
        return () if ring is None else ring.keys()

    def current(self, channel: str) -> SealKey | None:
        """The key the channel's adapters must seal with now (None: not sealed)."""
        ring = self.rings.get(channel)
        return None if ring is None else ring.current

    def due_in(self, *, now: float) -> float | None:
        """Seconds until the next switch is due (``None``: no key is announced), for the pass timer."""
        due = [ring.switch_at for ring in self.rings.values() if ring.announced is not None]
        return None if not due else max(0.0, min(due) - now)

    def update(
        self, sealed: Collection[str], entitled: Mapping[str, Collection[str]], *, now: float
    ) -> set[str]:
        """Bring the rings up to date; returns the channels whose subscribers' keys changed.

        Args:
            sealed: the channels that have a multicast line.
            entitled: channel -> the subscription ids entitled to it in real time now.
            now: wall-clock seconds.
        """
        changed: set[str] = set()
        for channel in list(self.rings):
            if channel not in sealed:
                del self.rings[channel]
        for channel in sealed:
            holders = frozenset(entitled.get(channel, ()))
            ring = self.rings.get(channel)
            if ring is None:
                self.rings[channel] = ChannelSeal(self.new_key(secrets.randbelow(2**31)), holders)
                changed.add(channel)
                continue
            if ring.holders - holders:
                ring.holders = holders
                if ring.announced is None:
                    self._announce(ring, now)
                    changed.add(channel)
                else:
                    ring.again = True  # the switch stays when it was: never pushed back
            else:
                ring.holders |= holders
            if ring.announced is not None and now >= ring.switch_at:
                ring.current, ring.announced = ring.announced, None
                if ring.again:
                    ring.again = False
                    self._announce(ring, now)
                changed.add(channel)
        return changed

    def _announce(self, ring: ChannelSeal, now: float) -> None:
        newest = ring.announced or ring.current
        ring.announced = self.new_key((newest.key_id + 1) % 2**32)
        ring.switch_at = now + self.switch_s
        ring.rotations += 1
