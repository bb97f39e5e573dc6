"""Sealing a multicast line's packets with the admin server's channel key (the runner's part of it).

CURVE cannot cover a multicast line, so a secured adapter seals every packet
it sends there (``proto.seal``, wire version 2) with the key the admin server
hands it (a ``SEAL`` command; a new one after each rotation). Until the first
key arrives a secured adapter sends nothing on the line: the packets are
journaled, and subscribers recover them from a replay service. An adapter
without ``--curve-key`` sends plain packets until it is given a key.
"""

from __future__ import annotations

import logging
from typing import Any

from feedha.proto.seal import Sealer, SealKey

logger = logging.getLogger(__name__)


class LineSeal:
    """Whether and how this adapter's line packets are sealed.

    Args:
        required: the line must carry sealed packets only (a secured adapter's multicast line).
    """

    __slots__ = ("active", "sealer", "unsent")

    def __init__(self, *, required: bool) -> None:
        self.active = required  # the runner asks this once per packet
        self.sealer: Sealer | None = None
        self.unsent = 0

    def __repr__(self) -> str:
        key = None if self.sealer is None else self.sealer.key_id
        return f"<LineSeal [active={self.active}, key={key}, unsent={self.unsent}]>"

    def use(self, key: SealKey) -> None:
        """Seal with ``key`` from now on."""
        self.active, self.sealer = True, Sealer(key)
        logger.info("sealing the line's packets with key %d", key.key_id)

    def seal(self, packet: bytes) -> bytes | None:
        """The packet to send (sealed), or None while a required key has not arrived (counted)."""
        if self.sealer is None:
            self.unsent += 1
            return None
        return self.sealer.seal(packet)

    def status(self) -> dict[str, Any]:
        """The status fields (none unless the line is sealed)."""
        if not self.active:
            return {}
        key = None if self.sealer is None else self.sealer.key_id
        return {"sealing": {"key_id": key, "unsent": self.unsent}}
