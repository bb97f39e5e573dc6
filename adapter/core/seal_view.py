"""How each line's packets go out with respect to sealing: the core's decision, frozen for the shell.

CURVE cannot cover a multicast line, so a secured adapter seals every packet it
sends there (``proto.seal``, wire version 2) with the key the admin server hands
it (a ``SEAL`` command; a new one after each rotation). Until the first key
arrives a secured adapter sends nothing on such a line: the packets are
journaled, and subscribers recover them from a replay service. Once a key came,
every line that can seal does. An adapter without CURVE sends plain packets
until it is given a key.

The core's :class:`~adapter.core.access_desk.AccessDesk` owns that state (which
lines must be sealed, the key) and publishes a :class:`SealView`; the line
sockets do what it says (:mod:`adapter.line_seal`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from feedha.proto.seal import SealKey

__all__ = ["SealMode", "SealView"]


class SealMode(enum.Enum):
    """What a line does with a packet."""

    PLAIN = "plain"  # sent as it is
    SEAL = "seal"  # sealed with the view's key
    HOLD = "hold"  # sent nowhere (counted): a sealed line whose first key has not come


@dataclass(frozen=True, slots=True)
class SealView:
    """The key and the lines that must carry sealed packets only, as the core last decided.

    Attributes:
        key: the admin server's packet key for the channel, ``None`` before the first one.
        required: the lines that must never carry a plain packet (a secured adapter's
            multicast lines).
    """

    key: SealKey | None = None
    required: frozenset[str] = frozenset()

    def mode(self, where: str) -> SealMode:
        """What the line ``where`` does with its packets."""
        if self.key is not None:
            return SealMode.SEAL
        return SealMode.HOLD if where in self.required else SealMode.PLAIN
