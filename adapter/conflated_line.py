"""The conflated line's shell: its socket (an XPUB), sealed and guarded like the real-time line.

The intervals, their numbering and their bytes are the core's
(:mod:`adapter.core.conflated_side`); the runner hands each
``PublishConflated`` action's packet to :meth:`ConflatedLineSocket.send`.
The socket is served like the line (:class:`~adapter.line.ServedSocket`): CURVE
with ZAP under the ``conflated`` domain, a key that loses access cut off
alone, and a fresh bind after a revocation it cannot cut off. A multicast
conflated line with CURVE is sealed with the admin server's channel key, as
the real-time line is.
"""

from __future__ import annotations

import logging
from typing import Any

from feedha import transport
from feedha.adapter.access import CONFLATED
from feedha.adapter.config import AdapterConfig
from feedha.adapter.line import ServedSocket
from feedha.adapter.line_seal import LineSeal
from feedha.adapter.zap import DataPlaneGuard
from feedha.proto.seal import SealKey

logger = logging.getLogger(__name__)

__all__ = ["ConflatedLineSocket"]


class ConflatedLineSocket(ServedSocket):
    """The conflated line of one adapter.

    Args:
        config: the adapter's configuration (``conflate_line_endpoint`` set).
        guard: CURVE for the socket.
    """

    def __init__(self, config: AdapterConfig, guard: DataPlaneGuard) -> None:
        endpoint = config.conflate_line_endpoint
        if endpoint is None:
            raise ValueError("ConflatedLineSocket needs config.conflate_line_endpoint")
        super().__init__(endpoint, CONFLATED, config, guard)
        self.seal = LineSeal(required=transport.is_multicast(endpoint) and guard.enabled)

    def send(self, packet: bytes) -> None:
        """Publish one conflated packet (sealed on a secured multicast line; nowhere while not bound)."""
        if self.seal.active:
            sealed = self.seal.seal(packet)
            if sealed is None:  # a sealed line whose first key has not come yet
                return
            packet = sealed
        self._send(packet)

    def use_key(self, key: SealKey) -> None:
        """Seal with the admin server's ``key`` from now on."""
        self.seal.use(key)

    def status(self) -> dict[str, Any]:
        """The conflated line's bytes and sealing."""
        return {"bytes": self.bytes_sent, **self.seal.status()}
