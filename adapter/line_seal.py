"""Sealing a line's packets as the core says (the runner's part of it).

Whether a line's packets go out plain, sealed or not at all (a secured
multicast line before its first key) is the core's decision
(:class:`~adapter.core.seal_view.SealView`, owned by the core's access desk).
:class:`LineSeal` holds the view the core last published for one line and does
what it says: it seals with the view's key (``proto.seal``), and counts the
packets it held back.
"""

from __future__ import annotations

import logging
from typing import Any

from feedha.adapter.core.seal_view import SealMode, SealView
from feedha.proto.seal import Sealer

logger = logging.getLogger(__name__)


class LineSeal:
    """One line's packets, sealed as the core's :class:`SealView` says.

    Args:
        where: the line's name (``line``, ``conflated``).
    """

    __slots__ = ("_where", "active", "mode", "sealer", "unsent")

    def __init__(self, where: str) -> None:
        self._where = where
        self.mode = SealMode.PLAIN
        self.active = False  # not plain: the runner asks this once per packet
        self.sealer: Sealer | None = None
        self.unsent = 0

    def __repr__(self) -> str:
        key = None if self.sealer is None else self.sealer.key_id
        return f"<LineSeal [{self._where}, mode={self.mode.value}, key={key}, unsent={self.unsent}]>"

    def use(self, view: SealView) -> None:
        """Follow ``view`` from now on (the core published it)."""
        self.mode = view.mode(self._where)
        self.active = self.mode is not SealMode.PLAIN
        key = view.key
        self.sealer = None if key is None else Sealer(key)
        if key is not None:
            logger.info("sealing the %s's packets with key %d", self._where, key.key_id)

    def seal(self, packet: bytes) -> bytes | None:
        """The packet to send (sealed), or None while it must be held back (counted)."""
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
